//! Running a child under supervision: timeout with SIGTERM then SIGKILL to the whole process
//! group, reaping, and turning the wait status into a [`RunOutcome`].

use crate::sys;
use crate::ExactError;
use proftrust_model::RunOutcome;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a timed-out group gets between SIGTERM (which lets QEMU and valgrind write their
/// counts) and SIGKILL.
pub const TERM_GRACE: Duration = Duration::from_secs(2);

/// How a supervised child ended.
#[derive(Debug)]
pub struct Ended {
    /// Wait status of the child.
    pub status: ExitStatus,
    /// `Some(timeout)` when proftrust stopped it.
    pub timed_out: Option<Duration>,
}

/// Resolves `cmd[0]` like a shell: a name with a `/` is a path, otherwise it is looked up
/// on `PATH`. Checks that the result is an executable regular file.
pub fn resolve_program(cmd: &[OsString]) -> Result<PathBuf, ExactError> {
    let name = cmd.first().ok_or(ExactError::EmptyCommand)?;
    let p = Path::new(name);
    let found = if p.as_os_str().as_encoded_bytes().contains(&b'/') {
        p.exists().then(|| p.to_path_buf())
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(p))
                .find(|c| c.is_file())
        })
    };
    let path = found.ok_or_else(|| ExactError::CommandNotFound {
        name: name.to_string_lossy().into_owned(),
    })?;
    let meta =
        std::fs::metadata(&path).map_err(|e| ExactError::io(format!("{}", path.display()), e))?;
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return Err(ExactError::NotExecutable { path });
    }
    Ok(std::fs::canonicalize(&path).unwrap_or(path))
}

/// Finds a tool on `PATH` (or the path in `env_override`), else a [`ExactError::ToolMissing`].
pub fn find_tool(name: &str, env_override: &str, install: &str) -> Result<PathBuf, ExactError> {
    if let Some(p) = std::env::var_os(env_override) {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(name))
                .find(|c| c.is_file())
        })
        .ok_or_else(|| ExactError::ToolMissing {
            tool: name.to_string(),
            install: install.to_string(),
        })
}

/// Waits for `child` in a background thread. On `timeout`, `stop` (the QEMU plugin's control
/// pipe) first gets `S` and [`TERM_GRACE`] to let the plugin write its counts and end the
/// process; then the child's process group gets SIGTERM, then SIGKILL after [`TERM_GRACE`].
/// After the child ends, whatever is left of its group (forked children) gets SIGKILL so
/// nothing keeps running.
pub fn supervise(
    mut child: Child,
    timeout: Option<Duration>,
    stop: Option<std::fs::File>,
) -> JoinHandle<std::io::Result<Ended>> {
    let pgid = child.id();
    std::thread::spawn(move || {
        let (tx, rx) = mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let r = child.wait();
            let _ = tx.send(r);
        });
        let vanished = || Err(std::io::Error::other("waiter vanished"));
        let mut timed_out = None;
        let status = match timeout {
            None => rx.recv().unwrap_or_else(|_| vanished()),
            Some(t) => match rx.recv_timeout(t) {
                Ok(r) => r,
                Err(_) => {
                    timed_out = Some(t);
                    let mut first = None;
                    if let Some(mut f) = stop {
                        use std::io::Write;
                        if f.write_all(b"S").is_ok() {
                            first = rx.recv_timeout(TERM_GRACE).ok();
                        }
                    }
                    match first {
                        Some(r) => r,
                        None => {
                            sys::kill_group(pgid, libc::SIGTERM);
                            match rx.recv_timeout(TERM_GRACE) {
                                Ok(r) => r,
                                Err(_) => {
                                    sys::kill_group(pgid, libc::SIGKILL);
                                    rx.recv().unwrap_or_else(|_| vanished())
                                }
                            }
                        }
                    }
                }
            },
        };
        let _ = waiter.join();
        sys::kill_group(pgid, libc::SIGKILL);
        status.map(|status| Ended { status, timed_out })
    })
}

/// The conventional name of signal `sig`.
pub fn signal_name(sig: i32) -> String {
    let n = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => return format!("SIG{sig}"),
    };
    n.to_string()
}

/// The [`RunOutcome`] of a supervised run.
pub fn outcome(e: &Ended) -> RunOutcome {
    if let Some(t) = e.timed_out {
        return RunOutcome::TimedOut {
            millis: t.as_millis() as u64,
        };
    }
    match (e.status.code(), e.status.signal()) {
        (Some(code), _) => RunOutcome::Exited { code },
        (None, Some(signal)) => RunOutcome::Signaled {
            signal,
            name: signal_name(signal),
        },
        (None, None) => RunOutcome::Exited { code: -1 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_programs_like_a_shell() {
        assert!(resolve_program(&["sh".into()]).unwrap().is_absolute());
        assert!(matches!(
            resolve_program(&["no-such-program-proftrust".into()]),
            Err(ExactError::CommandNotFound { .. })
        ));
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("plain");
        std::fs::write(&f, "x").unwrap();
        assert!(matches!(
            resolve_program(&[f.into()]),
            Err(ExactError::NotExecutable { .. })
        ));
        assert!(matches!(
            resolve_program(&[]),
            Err(ExactError::EmptyCommand)
        ));
    }

    #[test]
    fn missing_tools_name_the_install_command() {
        let e = find_tool(
            "qemu-x86_64-proftrust-absent",
            "PROFTRUST_TEST_ABSENT",
            "apt-get install qemu-user",
        )
        .unwrap_err();
        assert!(matches!(e, ExactError::ToolMissing { .. }));
        assert!(e.to_string().contains("apt-get install qemu-user"), "{e}");
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(11), "SIGSEGV");
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(64), "SIG64");
    }
}
