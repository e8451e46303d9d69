//! Every `unsafe` block and raw syscall of this crate: the pipe to the plugin, clearing
//! close-on-exec in the child, process-group signals, the byte view of decoded words.

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

/// An anonymous shared-memory file (`memfd_create`, close-on-exec) of `len` bytes; sparse,
/// so only pages the plugin touches cost memory.
pub fn memfd(len: u64) -> std::io::Result<File> {
    // SAFETY: the name is a valid NUL-terminated string.
    let fd = unsafe { libc::memfd_create(c"proftrust-counters".as_ptr(), libc::MFD_CLOEXEC) };
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
