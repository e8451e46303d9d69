//! Every `unsafe` block and raw syscall of this crate: the pipe to the plugin, clearing
//! close-on-exec in the child, process-group signals, the byte view of decoded words, the
//! trace ring (shared mapping, futex wake).

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// A pipe whose both ends are close-on-exec (so no other concurrently spawned process
/// inherits them).
pub fn pipe() -> std::io::Result<(File, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    let r = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    let (rd, wr) = unsafe { (File::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    Ok((rd, wr))
}

/// Asks the kernel for a pipe buffer of `bytes` (`F_SETPIPE_SZ`; capped by
/// `/proc/sys/fs/pipe-max-size`, 1 MiB by default, for unprivileged processes). Best effort:
/// a refusal leaves the default 64 KiB buffer. A trace pipe with room for several of the
/// plugin's 64 KiB chunks lets QEMU run on while the analysis digests the previous ones.
pub fn grow_pipe(f: &File, bytes: usize) {
    let want = bytes.min(i32::MAX as usize) as libc::c_int;
    // SAFETY: fcntl on an open descriptor we own; F_SETPIPE_SZ takes an int argument and
    // touches no memory of ours.
    let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETPIPE_SZ, want) };
    if r < 0 {
        // Not allowed that much: try the unprivileged maximum.
        // SAFETY: as above.
        unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
    }
}

/// An anonymous shared-memory file `name` (`memfd_create`, close-on-exec) of `len` bytes;
/// sparse, so only pages the plugin touches cost memory.
pub fn memfd(name: &std::ffi::CStr, len: u64) -> std::io::Result<File> {
    // SAFETY: the name is a valid NUL-terminated string.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: memfd_create succeeded; the descriptor is ours alone.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(len)?;
    Ok(f)
}

/// Makes the `fds` survive the `exec` of `cmd` (in the child only) and puts the child in its
/// own process group.
pub fn inherit_fds(cmd: &mut Command, fds: &[RawFd]) {
    let fds: Vec<RawFd> = fds.to_vec();
    cmd.process_group(0);
    // SAFETY: the closure runs in the forked child before exec and only calls fcntl, which is
    // async-signal-safe; it allocates nothing (the Vec was built before fork) and takes no
    // locks.
    unsafe {
        cmd.pre_exec(move || {
            for &raw in &fds {
                let flags = libc::fcntl(raw, libc::F_GETFD);
                if flags < 0 || libc::fcntl(raw, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// The raw descriptor of `fd`.
pub fn raw(fd: &impl AsRawFd) -> RawFd {
    fd.as_raw_fd()
}

/// Sends `sig` to every process of group `pgid`; a vanished group is not an error.
pub fn kill_group(pgid: u32, sig: libc::c_int) {
    // SAFETY: kill with a negative pid signals a process group; no memory is involved.
    unsafe {
        libc::kill(-(pgid as libc::pid_t), sig);
    }
}

/// The bytes of a `u32` slice, writable (to read little-endian words straight into it).
pub fn u32_bytes_mut(v: &mut [u32]) -> &mut [u8] {
    // SAFETY: the pointer and length cover exactly the slice's `4 * len` bytes, borrowed
    // mutably for the returned lifetime; `u8` has alignment 1 and every byte pattern is a
    // valid `u32`, so writes through the byte view cannot create an invalid value.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr() as *mut u8, 4 * v.len()) }
}

/// The analyzer's side of the trace ring (the plugin's `wire` module documents the layout:
/// a header page, then `cap` native-endian `u32` words): a `memfd` mapped shared here and
/// handed to the plugin as `ring=fd:N`. Chunks are read in place, in stream order, and
/// handed back by advancing the tail.
pub struct Ring {
    base: *mut u8,
    len: usize,
    cap: u32,
    file: File,
}

// SAFETY: the mapping belongs to the process, not to a thread; `&self` methods touch only
// the header's atomic words and slices that `release(&mut self)` ends.
unsafe impl Send for Ring {}

/// Trace ring header: capacity in words.
const RING_CAP: usize = 0;
/// Trace ring header: the plugin's published position.
const RING_HEAD: usize = 64;
/// Trace ring header: our position (the futex word the plugin sleeps on).
const RING_TAIL: usize = 128;
/// Trace ring header: 1 while the plugin sleeps on the tail.
const RING_WAITING: usize = 192;
/// Trace ring: the data area's offset (the header is one page).
pub const RING_DATA: usize = 4096;

impl Ring {
    /// A ring of `cap` words (at most 2^30; the plugin refuses fewer than two of its
    /// largest chunks).
    pub fn create(cap: u32) -> std::io::Result<Ring> {
        if cap > 1 << 30 {
            return Err(std::io::Error::other("ring capacity above 2^30 words"));
        }
        let len = RING_DATA + 4 * cap as usize;
        let file = memfd(c"proftrust-trace-ring", len as u64)?;
        // SAFETY: a shared mapping of the whole (just sized) file, checked for failure;
        // unmapped only in `drop`.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let r = Ring {
            base: p as *mut u8,
            len,
            cap,
            file,
        };
        r.word(RING_CAP)
            .store(cap, std::sync::atomic::Ordering::Release);
        Ok(r)
    }

    /// The descriptor to hand to the plugin.
    pub fn file(&self) -> &File {
        &self.file
    }

    fn word(&self, off: usize) -> &std::sync::atomic::AtomicU32 {
        // SAFETY: `off` is one of the header's 4-aligned offsets inside the mapping, and
        // both processes access the header words atomically only.
        unsafe { std::sync::atomic::AtomicU32::from_ptr(self.base.add(off) as *mut u32) }
    }

    /// The `n` words of the chunk at position `pos` (a RING record; positions count modulo
    /// `2 * cap`), `None` when the record does not name a chunk the plugin published after
    /// our tail.
    pub fn chunk(&self, pos: u32, n: u32) -> Option<&[u32]> {
        use std::sync::atomic::Ordering::{Acquire, Relaxed};
        let (cap, round) = (self.cap, 2 * self.cap);
        let tail = self.word(RING_TAIL).load(Relaxed);
        let head = self.word(RING_HEAD).load(Acquire);
        // Distance from `a` forward to `b`, modulo the round (all three below it).
        let ahead = |a: u32, b: u32| (b + round - a) % round;
        let off = pos % cap;
        let ok = pos < round
            && head < round
            && off.checked_add(n).is_some_and(|e| e <= cap)
            && ahead(tail, head) <= cap
            && ahead(tail, pos) < cap
            && ahead(pos, head) >= n
            && ahead(pos, head) <= ahead(tail, head);
        if !ok {
            return None;
        }
        // SAFETY: `off + n <= cap` words lie in the data area. The plugin wrote them
        // before publishing `head` (Release, loaded with Acquire above), and it writes only
        // free space, which these words stay until `release` (which takes `&mut self`, so
        // the slice is dropped by then) moves the tail past them.
        Some(unsafe {
            std::slice::from_raw_parts(
                (self.base.add(RING_DATA) as *const u32).add(off as usize),
                n as usize,
            )
        })
    }

    /// Hands the chunk at `pos` of `n` words (and the words skipped before it) back to the
    /// plugin, waking it if it sleeps for room.
    pub fn release(&mut self, pos: u32, n: u32) {
        use std::sync::atomic::Ordering::SeqCst;
        let end = (pos + n) % (2 * self.cap);
        // Store the tail before reading the flag; the plugin sets the flag before it reads
        // the tail: one of the two sees the other.
        self.word(RING_TAIL).store(end, SeqCst);
        if self.word(RING_WAITING).swap(0, SeqCst) != 0 {
            // SAFETY: FUTEX_WAKE (shared, not private) on the live tail word; the kernel
            // only reads its address.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.word(RING_TAIL).as_ptr(),
                    libc::FUTEX_WAKE,
                    1,
                );
            }
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `create`, unmapped once; no slice into it outlives
        // `&self`.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
    }
}

#[cfg(test)]
impl Ring {
    /// Whether the plugin sleeps for room.
    pub fn plugin_waits(&self) -> bool {
        self.word(RING_WAITING)
            .load(std::sync::atomic::Ordering::SeqCst)
            != 0
    }
}

/// Whether `f` has data to read (or its writer is gone) within `ms` milliseconds.
#[cfg(test)]
pub fn readable(f: &impl AsRawFd, ms: i32) -> bool {
    let mut p = libc::pollfd {
        fd: f.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll on one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) == 1 }
}

/// `flock(f, LOCK_EX | LOCK_NB)`: whether this process now holds the file's exclusive lock
/// (the kernel drops it when the last descriptor of the open file closes, also at SIGKILL).
pub fn try_lock(f: &File) -> bool {
    // SAFETY: flock on an open descriptor we own.
    unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}
