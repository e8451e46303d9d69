//! Every `unsafe` block of this crate: signals, the subreaper setting, reaping, and the
//! parent-death signal set in a forked child.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// `kill(pid, sig)`; errors (already gone) are ignored.
pub(crate) fn kill(pid: i32, sig: i32) {
    // SAFETY: plain syscall with integer arguments.
    unsafe {
        libc::kill(pid, sig);
    }
}

pub(crate) fn getpid() -> i32 {
    // SAFETY: no preconditions.
    unsafe { libc::getpid() }
}

pub(crate) fn getpgrp() -> i32 {
    // SAFETY: no preconditions.
    unsafe { libc::getpgrp() }
}

/// `waitpid(pid, WNOHANG)`, result ignored: reaps `pid` if it is an ended child of ours.
pub(crate) fn reap(pid: i32) {
    let mut status = 0;
    // SAFETY: `status` is a live int for the kernel to fill.
    unsafe {
        libc::waitpid(pid, &mut status, libc::WNOHANG);
    }
}

/// Sets or clears `PR_SET_CHILD_SUBREAPER`; returns the previous setting.
pub(crate) fn set_child_subreaper(on: bool) -> io::Result<bool> {
    let mut prev: libc::c_int = 0;
    // SAFETY: PR_GET_CHILD_SUBREAPER stores an int through the pointer, which is live.
    let r = unsafe {
        libc::prctl(
            libc::PR_GET_CHILD_SUBREAPER,
            &mut prev as *mut libc::c_int as libc::c_ulong,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: plain prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, libc::c_ulong::from(on)) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(prev != 0)
}

/// In the child of `cmd`, before exec: `PR_SET_PDEATHSIG(SIGKILL)`, and exit at once if the
/// parent died before the setting took effect.
pub(crate) fn die_with_parent(cmd: &mut Command) {
    let parent = getpid();
    // SAFETY: the closure runs in the forked child before exec; prctl, getppid and _exit are
    // async-signal-safe, and it allocates nothing and takes no locks.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) < 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                libc::_exit(127);
            }
            Ok(())
        });
    }
}

/// `access(path, X_OK)`: whether this process may execute `path` (root: any execute bit).
pub(crate) fn may_execute(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a live NUL-terminated string.
    unsafe { libc::access(c.as_ptr(), libc::X_OK) == 0 }
}

/// Every signal's disposition back to `SIG_DFL` and an empty signal mask, as a program
/// started from a login shell has them. Async-signal-safe (sigaction and sigprocmask only,
/// no allocation): for a forked child before `execve`, which keeps ignored signals and the
/// mask (handlers are reset by the exec itself).
pub(crate) fn default_signals() -> io::Result<()> {
    // SAFETY: `sa` and `set` are plain structs initialised by the calls; SIGKILL and SIGSTOP
    // cannot be changed (skipped); the signals the C library reserves (32, 33) are reset
    // by the system call itself ([`reserved_default`]).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut sa.sa_mask);
        for sig in 1..=libc::SIGRTMAX() {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            if (32..libc::SIGRTMIN()).contains(&sig) {
                reserved_default(sig);
                continue;
            }
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        if libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// `SIG_DFL` for a signal the C library reserves for itself (32, 33: thread cancellation
/// and set*id broadcast), which its `sigaction` refuses. A parent that ignored them leaves
/// them ignored across `execve` (seen under the Rust test harness: `SigIgn: 180000000`);
/// the raw system call resets them. Only for a child about to exec: the C library of this
/// process relies on its handlers.
unsafe fn reserved_default(sig: libc::c_int) {
    /// The kernel's `struct sigaction` (handler, flags, restorer, 64-bit mask).
    #[repr(C)]
    struct KernelSigaction {
        handler: usize,
        flags: libc::c_ulong,
        restorer: usize,
        mask: u64,
    }
    let sa = KernelSigaction {
        handler: libc::SIG_DFL,
        flags: 0,
        restorer: 0,
        mask: 0,
    };
    // SAFETY: `sa` is a live struct of the kernel's layout; the size is the mask's (8).
    unsafe {
        libc::syscall(
            libc::SYS_rt_sigaction,
            sig,
            &sa as *const KernelSigaction,
            std::ptr::null_mut::<KernelSigaction>(),
            std::mem::size_of::<u64>(),
        );
    }
}

/// [`default_signals`] in the child of `cmd`, before its exec.
pub(crate) fn default_signals_in(cmd: &mut Command) {
    // SAFETY: the closure runs in the forked child before exec and only calls the
    // async-signal-safe `default_signals`.
    unsafe {
        cmd.pre_exec(default_signals);
    }
}
