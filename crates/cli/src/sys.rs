//! The CLI's own `unsafe` calls: signal dispositions and the hard link that gives an
//! anonymous temporary file (`O_TMPFILE`) its name.

use std::os::fd::AsRawFd;
use std::path::Path;

/// `dup2(from, to)`: descriptor `to` becomes a copy of `from`. Used on 1 and 2 (and a saved
/// copy of 1), which this process owns for its whole life; no Rust object owns fd 1
/// exclusively (std's `Stdout` only writes to it).
pub fn dup2(from: i32, to: i32) -> std::io::Result<()> {
    // SAFETY: dup2 takes two integers and touches no memory of ours; an invalid descriptor
    // is an EBADF error.
    if unsafe { libc::dup2(from, to) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// `mkfifo(path, 0600)` (the output tests' FIFO).
#[cfg(test)]
pub fn mkfifo(path: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Installs `handler` for each of `signals` (`SA_RESTART`, empty mask).
pub fn set_handler(signals: &[i32], handler: extern "C" fn(libc::c_int)) {
    // SAFETY: the sigaction struct is zeroed and then filled; the handler is a plain
    // `extern "C"` function; the callers' handlers are async-signal-safe.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        for &sig in signals {
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
}

/// Ignores each of `signals`.
pub fn ignore(signals: &[i32]) {
    // SAFETY: setting dispositions to SIG_IGN with integer arguments.
    unsafe {
        for &sig in signals {
            libc::signal(sig, libc::SIG_IGN);
        }
    }
}

/// `kill(-pgid, SIGKILL)`. Async-signal-safe.
pub fn kill_group_now(pgid: i32) {
    // SAFETY: kill is async-signal-safe; integer arguments only.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// Ends the process by `sig` with its default action, so the parent sees the signal (exit
/// status 128 + `sig` for a shell). Async-signal-safe.
pub fn die_by(sig: i32) -> ! {
    // SAFETY: signal, sigemptyset, sigaddset, pthread_sigmask, raise and _exit are
    // async-signal-safe; the set is a zeroed local.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
        libc::_exit(128 + sig);
    }
}

/// Gives the anonymous file `f` (opened with `O_TMPFILE`) the name `to`:
/// `linkat(AT_FDCWD, "/proc/self/fd/N", AT_FDCWD, to, AT_SYMLINK_FOLLOW)`, which needs no
/// privilege (unlike `AT_EMPTY_PATH`).
pub fn link_anonymous(f: &std::fs::File, to: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let from = std::ffi::CString::new(format!("/proc/self/fd/{}", f.as_raw_fd()))
        .map_err(std::io::Error::other)?;
    let to = std::ffi::CString::new(to.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: both paths are valid NUL-terminated strings that outlive the call.
    let r = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
