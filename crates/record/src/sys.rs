//! Every system call and every `unsafe` block of the crate.
//!
//! * `perf_event_open(2)` and its ioctls, file descriptors as [`OwnedFd`];
//! * the mmap'ed ring buffer ([`RingBuffer`]): `data_head` read with acquire ordering, records
//!   copied out, then `data_tail` stored with release ordering (the protocol of
//!   `include/uapi/linux/perf_event.h`);
//! * starting the child blocked on a pipe ([`spawn_blocked`]), waiting, killing, `pidfd_open`;
//! * a `SIGINT`/`SIGTERM` flag for `--pid` recordings.

use perf_event_open_sys as pe;
use proftrust_supervise::StopSignal;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

pub(crate) use pe::bindings::perf_event_attr as Attr;

/// Opens one event. `pid`/`cpu` as in `perf_event_open(2)`; no group, `PERF_FLAG_FD_CLOEXEC`.
pub(crate) fn perf_event_open(attr: &Attr, pid: i32, cpu: i32) -> io::Result<OwnedFd> {
    let mut a = *attr;
    a.size = std::mem::size_of::<Attr>() as u32;
    // SAFETY: `a` is a fully initialised perf_event_attr (zeroed then filled) with its `size`
    // set; the kernel only reads it (and may write back `size` on E2BIG, into our copy).
    let fd = unsafe {
        pe::perf_event_open(
            &mut a,
            pid,
            cpu,
            -1,
            pe::bindings::PERF_FLAG_FD_CLOEXEC as _,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the syscall returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A zeroed attribute struct (all bits off, size filled in).
pub(crate) fn zeroed_attr() -> Attr {
    // SAFETY: perf_event_attr is a plain C struct of integers, unions of integers and
    // bitfields; all-zero is its documented "everything off" value.
    let mut a: Attr = unsafe { std::mem::zeroed() };
    a.size = std::mem::size_of::<Attr>() as u32;
    a
}

/// The bytes of `attr` as the kernel reads them, to parse it back
/// (`linux-perf-event-reader`'s `PerfEventAttr::parse`).
pub(crate) fn attr_bytes(attr: &Attr) -> &[u8] {
    // SAFETY: perf_event_attr is a `repr(C)` struct of integers, unions of integers and
    // bitfields laid out in whole naturally aligned words (the kernel ABI), so it has no
    // padding and every byte of a value built from `zeroed_attr` is initialised; the slice
    // borrows `attr` and is read only.
    unsafe {
        std::slice::from_raw_parts(
            (attr as *const Attr).cast::<u8>(),
            std::mem::size_of::<Attr>(),
        )
    }
}

fn check(r: i32) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `PERF_EVENT_IOC_ENABLE`.
pub(crate) fn enable(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: valid perf fd owned by the caller; the ioctl takes no pointer.
    check(unsafe { pe::ioctls::ENABLE(fd.as_raw_fd(), 0) })
}

/// `PERF_EVENT_IOC_DISABLE`.
pub(crate) fn disable(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: valid perf fd owned by the caller; the ioctl takes no pointer.
    check(unsafe { pe::ioctls::DISABLE(fd.as_raw_fd(), 0) })
}

/// `read(2)` of an event opened with `read_format = TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING`:
/// `(value, time_enabled, time_running)`, children's totals included for inherited events.
pub(crate) fn read_times(fd: &OwnedFd) -> io::Result<(u64, u64, u64)> {
    let mut v = [0u64; 3];
    // SAFETY: reads at most 24 bytes into a live array of three u64.
    let n = unsafe { libc::read(fd.as_raw_fd(), v.as_mut_ptr() as *mut libc::c_void, 24) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n != 24 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("read {n} of 24 bytes"),
        ));
    }
    Ok((v[0], v[1], v[2]))
}

/// `PERF_EVENT_IOC_PERIOD`: the kernel copies the new period from `&period`.
pub(crate) fn set_period(fd: &OwnedFd, period: u64) -> io::Result<()> {
    let mut p = period;
    // SAFETY: the ioctl reads one u64 through the pointer, which points at a live local.
    check(unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            pe::bindings::PERIOD as _,
            &mut p as *mut u64,
        )
    })
}

/// `PERF_EVENT_IOC_SET_OUTPUT`: `fd` writes its records into `target`'s ring buffer.
pub(crate) fn set_output(fd: &OwnedFd, target: &OwnedFd) -> io::Result<()> {
    // SAFETY: both descriptors are valid perf fds owned by the caller.
    check(unsafe { pe::ioctls::SET_OUTPUT(fd.as_raw_fd(), target.as_raw_fd()) })
}

/// `PERF_EVENT_IOC_ID`: the kernel's id of this event instance.
pub(crate) fn event_id(fd: &OwnedFd) -> io::Result<u64> {
    let mut id = 0u64;
    // SAFETY: the ioctl writes one u64 through the pointer, which points at a live local.
    check(unsafe { pe::ioctls::ID(fd.as_raw_fd(), &mut id) })?;
    Ok(id)
}

/// The mmap'ed ring buffer of one perf fd: one metadata page + `2^n` data pages.
pub(crate) struct RingBuffer {
    base: *mut u8,
    len: usize,
    data_offset: usize,
    data_size: usize,
}

impl RingBuffer {
    /// Maps `1 + data_pages` pages of `fd` read-write (so that we can move `data_tail`).
    pub(crate) fn map(fd: &OwnedFd, data_pages: usize) -> io::Result<RingBuffer> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let len = page * (1 + data_pages);
        // SAFETY: a fresh shared mapping of a perf fd; the kernel validates the length and
        // we check the result against MAP_FAILED before using it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = p as *mut u8;
        // SAFETY: the first page is the perf_event_mmap_page, which the mapping covers.
        let meta = unsafe { &*(base as *const pe::bindings::perf_event_mmap_page) };
        let (data_offset, data_size) = if meta.data_size != 0 {
            (meta.data_offset as usize, meta.data_size as usize)
        } else {
            (page, page * data_pages)
        };
        Ok(RingBuffer {
            base,
            len,
            data_offset,
            data_size,
        })
    }

    fn head_tail(&self) -> (&AtomicU64, &AtomicU64) {
        // SAFETY: data_head and data_tail are naturally aligned u64 fields of the metadata
        // page, which lives as long as `self`; the kernel writes data_head concurrently, so
        // they are only accessed atomically.
        unsafe {
            let meta = self.base as *mut pe::bindings::perf_event_mmap_page;
            (
                AtomicU64::from_ptr(std::ptr::addr_of_mut!((*meta).data_head)),
                AtomicU64::from_ptr(std::ptr::addr_of_mut!((*meta).data_tail)),
            )
        }
    }

    /// Appends every complete record now in the buffer to `out` (raw bytes, records back to
    /// back, wrap-around undone) and releases the space to the kernel.
    pub(crate) fn drain_into(&mut self, out: &mut Vec<u8>) {
        let (head_a, tail_a) = self.head_tail();
        let head = head_a.load(Ordering::Acquire);
        let tail = tail_a.load(Ordering::Relaxed);
        if head == tail {
            return;
        }
        let avail = (head - tail) as usize;
        let start = (tail as usize) % self.data_size;
        let first = avail.min(self.data_size - start);
        // SAFETY: [data_offset, data_offset + data_size) lies inside the mapping; `start +
        // first <= data_size` and `avail - first < data_size`; the kernel does not write the
        // region between tail and head until we advance data_tail below.
        unsafe {
            let data = self.base.add(self.data_offset);
            out.extend_from_slice(std::slice::from_raw_parts(data.add(start), first));
            if avail > first {
                out.extend_from_slice(std::slice::from_raw_parts(data, avail - first));
            }
        }
        tail_a.store(head, Ordering::Release);
    }
}

impl Drop for RingBuffer {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly what mmap returned; nothing borrows the mapping past
        // the owner's lifetime (no reference escapes `drain_into`).
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
    }
}

// SAFETY: the mapping is owned exclusively by the RingBuffer; the shared fields are accessed
// atomically.
unsafe impl Send for RingBuffer {}

/// `poll(2)` for readability on `fds`; returns how many are ready (0 on timeout or EINTR).
pub(crate) fn poll_readable(fds: &[RawFd], timeout_ms: i32) -> io::Result<usize> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `pfds` is a live, correctly sized array of pollfd.
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(r as usize)
}

/// `pidfd_open(2)`: a descriptor that polls readable once `pid` has exited.
pub(crate) fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A child process created by [`spawn_blocked`], waiting for [`BlockedChild::release`].
pub(crate) struct BlockedChild {
    /// Its pid (also its process-group id).
    pub(crate) pid: i32,
    go: Option<OwnedFd>,
    err: OwnedFd,
}

/// How [`spawn_blocked`]'s `execv` failed in the child.
pub(crate) enum ExecResult {
    /// The program is running.
    Running,
    /// `execv` failed with this errno; the child exits with 127 (ENOENT) or 126.
    Failed(i32),
}

fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a live array of two ints for the kernel to fill.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: two new descriptors nobody else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Forks a child that puts itself in its own process group, asks to be killed if we die,
/// and blocks reading a pipe until [`BlockedChild::release`]; then it `execv`s `path` with
/// `argv`. Everything the child needs is allocated before `fork`, so the child only makes
/// async-signal-safe calls. With `stdout`, the child's standard output is that descriptor
/// (`dup2` before the exec).
pub(crate) fn spawn_blocked(
    path: &CString,
    argv: &[CString],
    stdout: Option<libc::c_int>,
) -> io::Result<BlockedChild> {
    let (go_r, go_w) = pipe_cloexec()?;
    let (err_r, err_w) = pipe_cloexec()?;
    let mut ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: after fork the child only calls async-signal-safe functions (setpgid, prctl,
    // getppid, read, dup2, sigaction, sigprocmask, execv, write, _exit) on memory prepared
    // before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: child side, see above; never returns.
        unsafe {
            libc::setpgid(0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
            if libc::getppid() != parent {
                libc::_exit(127);
            }
            let mut b = 0u8;
            let n = libc::read(go_r.as_raw_fd(), &mut b as *mut u8 as *mut libc::c_void, 1);
            if n != 1 {
                libc::_exit(127);
            }
            if let Some(fd) = stdout {
                if libc::dup2(fd, 1) < 0 {
                    libc::_exit(127);
                }
            }
            // Default dispositions and no blocked signal, as under every other runner (the
            // Rust runtime ignores SIGPIPE, which an exec would keep).
            if proftrust_supervise::reset_signals().is_err() {
                libc::_exit(127);
            }
            libc::execv(path.as_ptr(), ptrs.as_ptr());
            let errno = *libc::__errno_location();
            let bytes = errno.to_ne_bytes();
            libc::write(err_w.as_raw_fd(), bytes.as_ptr() as *const libc::c_void, 4);
            libc::_exit(if errno == libc::ENOENT { 127 } else { 126 });
        }
    }
    // Parent: also set the group from this side (avoids the race with killpg).
    // SAFETY: plain syscall with integer arguments.
    unsafe {
        libc::setpgid(pid, pid);
    }
    drop(go_r);
    drop(err_w);
    Ok(BlockedChild {
        pid,
        go: Some(go_w),
        err: err_r,
    })
}

impl BlockedChild {
    /// Lets the child `execv` and reports whether the exec succeeded.
    pub(crate) fn release(&mut self) -> io::Result<ExecResult> {
        if let Some(go) = self.go.take() {
            let b = [1u8];
            // SAFETY: writes one byte from a live array to a pipe we own.
            let n = unsafe { libc::write(go.as_raw_fd(), b.as_ptr() as *const libc::c_void, 1) };
            if n != 1 {
                return Err(io::Error::last_os_error());
            }
        }
        let mut buf = [0u8; 4];
        // SAFETY: reads at most 4 bytes into a live array; EOF (0) means exec succeeded
        // (the CLOEXEC write end closed).
        let n = loop {
            let n = unsafe {
                libc::read(
                    self.err.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    4,
                )
            };
            if n < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            break n;
        };
        Ok(if n == 4 {
            ExecResult::Failed(i32::from_ne_bytes(buf))
        } else {
            ExecResult::Running
        })
    }
}

/// Raw wait status of a reaped child.
#[derive(Debug, Clone, Copy)]
pub(crate) enum WaitStatus {
    /// `exit(code)`.
    Exited(i32),
    /// Killed by this signal.
    Signaled(i32),
}

/// `waitpid(pid, WNOHANG)`: `Some` once the child has ended and is reaped.
pub(crate) fn try_wait(pid: i32) -> io::Result<Option<WaitStatus>> {
    let mut status = 0i32;
    // SAFETY: `status` is a live int for the kernel to fill.
    let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    if r == 0 {
        return Ok(None);
    }
    if libc::WIFEXITED(status) {
        Ok(Some(WaitStatus::Exited(libc::WEXITSTATUS(status))))
    } else if libc::WIFSIGNALED(status) {
        Ok(Some(WaitStatus::Signaled(libc::WTERMSIG(status))))
    } else {
        Ok(None)
    }
}

/// Whether child `pid` has ended, without reaping it (`waitid(P_PID, WEXITED | WNOHANG |
/// WNOWAIT)`): while it stays an unreaped zombie its pid and process group id cannot be
/// reused, so the group can still be signalled safely.
pub(crate) fn has_exited(pid: i32) -> io::Result<bool> {
    // SAFETY: `info` is a zeroed siginfo_t for the kernel to fill; with WNOHANG the kernel
    // leaves si_pid 0 when no child has changed state.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: si_pid is valid to read for SIGCHLD-style siginfo filled by waitid.
    Ok(unsafe { info.si_pid() } != 0)
}

/// Reaps `pid` if it is a child of ours that has ended: `Ok(true)` reaped, `Ok(false)` a
/// child still running, `Err` (`ECHILD`) not a child of ours.
pub(crate) fn reap_if_ended(pid: i32) -> io::Result<bool> {
    try_wait(pid).map(|w| w.is_some())
}

/// `kill(pid, SIGKILL)`; an error (already gone) is ignored.
pub(crate) fn kill_process(pid: i32) {
    // SAFETY: plain syscall with integer arguments.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

/// Blocking `waitpid(pid, 0)` (retried on EINTR).
pub(crate) fn wait_blocking(pid: i32) -> io::Result<WaitStatus> {
    loop {
        let mut status = 0i32;
        // SAFETY: `status` is a live int for the kernel to fill.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(e);
        }
        if libc::WIFEXITED(status) {
            return Ok(WaitStatus::Exited(libc::WEXITSTATUS(status)));
        }
        if libc::WIFSIGNALED(status) {
            return Ok(WaitStatus::Signaled(libc::WTERMSIG(status)));
        }
    }
}

/// `kill(-pgid, SIGKILL)` then `kill(pid, SIGKILL)`; errors (already gone) are ignored.
pub(crate) fn kill_group(pid: i32) {
    // SAFETY: plain syscalls with integer arguments.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
        libc::kill(pid, libc::SIGKILL);
    }
}

/// Whether process `pid` exists (`kill(pid, 0)`).
/// `kill(pid, 0)`: `Ok` when the process exists and this user may signal it, else the
/// errno (`ESRCH`: no such process; `EPERM`: it exists but belongs to another user).
pub(crate) fn process_signalable(pid: i32) -> Result<(), i32> {
    // SAFETY: signal 0 only checks for existence and permission.
    if unsafe { libc::kill(pid, 0) } == 0 {
        return Ok(());
    }
    Err(io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::ESRCH))
}

/// The stop flag of a `--pid` recording whose caller gave none.
static STOP: OnceLock<StopSignal> = OnceLock::new();

extern "C" fn on_stop_signal(sig: libc::c_int) {
    if let Some(s) = STOP.get() {
        s.raise(sig);
    }
}

/// Installs `SIGINT`/`SIGTERM` handlers that raise the returned flag (the same flag for
/// every call: a signal ends every `--pid` recording of the process).
pub(crate) fn install_stop_handler() -> StopSignal {
    let s = STOP.get_or_init(StopSignal::new).clone();
    // SAFETY: the handler only reads a OnceLock that is already set and does one atomic
    // compare-and-swap, both async-signal-safe.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_stop_signal as *const () as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGTERM,
            on_stop_signal as *const () as libc::sighandler_t,
        );
    }
    s
}

/// `kill(-pgid, sig)`: signals the whole process group of `pid`; errors are ignored.
pub(crate) fn signal_group(pid: i32, sig: libc::c_int) {
    // SAFETY: plain syscall with integer arguments.
    unsafe {
        libc::kill(-pid, sig);
    }
}

/// Signal name (`SIGSEGV`) for a number.
pub(crate) fn signal_name(sig: i32) -> String {
    proftrust_supervise::signal_name(sig)
}

/// `CLOCK_MONOTONIC` now, in ns (the clock the events stamp samples with, `use_clockid`).
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live timespec for the kernel to fill.
    unsafe {
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts);
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
