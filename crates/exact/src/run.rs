//! Running a child under supervision: timeout with SIGTERM then SIGKILL to the whole process
//! group, reaping, and turning the wait status into a [`RunOutcome`].

use crate::sys;
use crate::ExactError;
use proftrust_model::RunOutcome;
use proftrust_supervise::StopSignal;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, ExitStatus};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a stopped group gets between SIGTERM (which lets QEMU and valgrind write their
/// counts) and SIGKILL.
pub use proftrust_supervise::TERM_GRACE;

/// How often a supervisor looks at the stop signal while it waits for the child.
const POLL: Duration = Duration::from_millis(50);

/// Asks whether the supervised program may have started other processes: with `false`
/// while it runs ("may there be some now?"), with `true` once it has ended and been reaped
/// ("may it have left any?"). `true` when unsure. Without one, [`supervise`] assumes so.
pub type Descendants = Box<dyn Fn(bool) -> bool + Send>;

/// How a supervised child ended.
#[derive(Debug)]
pub struct Ended {
    /// Wait status of the child.
    pub status: ExitStatus,
    /// `Some(timeout)` when proftrust stopped it at the timeout.
    pub timed_out: Option<Duration>,
    /// `Some(signal)` when proftrust stopped it because its [`StopSignal`] was raised.
    pub interrupted: Option<i32>,
}

/// Resolves `cmd[0]` like a shell: a name with a `/` is a path, otherwise it is looked up
/// on `PATH`. Checks that the result is an executable regular file. Symbolic links are
/// kept (the process is named after the path `execve` is given: `sh`, not `dash`).
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
    Ok(path)
}

/// What `execve` of `cmd` runs (`cmd[0]` found as `resolve_program` finds it, `#!`
/// scripts resolved to their interpreter as the kernel does), or why the kernel would
/// refuse it: checked before any run, so a program no runner can start (an empty file, a
/// text file, a missing interpreter) is an error up front, the same for every backend.
pub fn plan(cmd: &[OsString]) -> Result<proftrust_supervise::exec::ExecPlan, ExactError> {
    let path = resolve_program(cmd)?;
    Ok(proftrust_supervise::exec::plan_exec(&path, cmd)?)
}

/// [`plan`] for a runner of x86-64 programs (`runner`, named in the error): the path
/// `cmd[0]` resolves to and what `execve` of it runs, or [`ExactError::WrongMachine`] when
/// that ELF is built for another machine.
pub(crate) fn plan_x86_64(
    cmd: &[OsString],
    runner: &'static str,
) -> Result<(PathBuf, proftrust_supervise::exec::ExecPlan), ExactError> {
    let path = resolve_program(cmd)?;
    let plan = proftrust_supervise::exec::plan_exec(&path, cmd)?;
    if !plan.ident.is_x86_64() {
        return Err(ExactError::WrongMachine {
            program: plan.elf,
            machine: plan.ident.machine_name(),
            runner,
        });
    }
    Ok((path, plan))
}

/// Finds a tool on `PATH`, or at the path in `env_override` when that is set (a path that
/// is not a file is then an error, not a fallback), else a [`ExactError::ToolMissing`].
pub fn find_tool(name: &str, env_override: &str, install: &str) -> Result<PathBuf, ExactError> {
    if let Some(p) = std::env::var_os(env_override) {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        return Err(ExactError::EnvPath {
            var: env_override.into(),
            path: p,
        });
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

/// Waits for `child` in a background thread. At the timeout, or when `interrupt` is raised,
/// `stop` (the QEMU plugin's control pipe) first gets `S` and [`TERM_GRACE`] to let the
/// plugin write its counts and end the process; then the child's process group gets
/// SIGTERM, then SIGKILL after [`TERM_GRACE`]. After the child ends, whatever is left of its
/// group (forked children) gets SIGKILL and the orphans it left outside its group are swept
/// ([`proftrust_supervise::sweep_orphans`]), so nothing keeps running (nor keeps the
/// plugin's pipe open). `descendants` (the QEMU plugin's word on forks and execs) spares
/// the looks into `/proc` for orphans, during the run and at its end, when the program
/// started no other process.
pub fn supervise(
    mut child: Child,
    timeout: Option<Duration>,
    stop: Option<std::fs::File>,
    interrupt: Option<StopSignal>,
    descendants: Option<Descendants>,
) -> JoinHandle<std::io::Result<Ended>> {
    let pgid = child.id();
    std::thread::spawn(move || {
        let (tx, rx) = mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let r = child.wait();
            let _ = tx.send(r);
        });
        let vanished = || Err(std::io::Error::other("waiter vanished"));
        let started = Instant::now();
        let mut timed_out = None;
        let mut interrupted = None;
        let mut polls = 0u32;
        let status = loop {
            polls += 1;
            if polls % 10 == 0 && descendants.as_ref().is_none_or(|d| d(false)) {
                proftrust_supervise::watch_orphans();
            }
            let left = timeout.map(|t| t.saturating_sub(started.elapsed()));
            match rx.recv_timeout(left.map_or(POLL, |l| l.min(POLL))) {
                Ok(r) => break r,
                Err(mpsc::RecvTimeoutError::Disconnected) => break vanished(),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            if let Some(sig) = interrupt.as_ref().and_then(StopSignal::signal) {
                interrupted = Some(sig);
            } else if let (Some(t), Some(l)) = (timeout, left) {
                if l.is_zero() {
                    timed_out = Some(t);
                }
            }
            if interrupted.is_some() || timed_out.is_some() {
                break stop_group(pgid, stop, &rx).unwrap_or_else(vanished);
            }
        };
        let _ = waiter.join();
        sys::kill_group(pgid, libc::SIGKILL);
        if descendants.as_ref().is_none_or(|d| d(true)) {
            proftrust_supervise::sweep_orphans();
        }
        status.map(|status| Ended {
            status,
            timed_out,
            interrupted,
        })
    })
}

/// The TERM-then-KILL escalation of [`supervise`]; `None` when the waiter vanished.
fn stop_group(
    pgid: u32,
    stop: Option<std::fs::File>,
    rx: &mpsc::Receiver<std::io::Result<ExitStatus>>,
) -> Option<std::io::Result<ExitStatus>> {
    if let Some(mut f) = stop {
        use std::io::Write;
        if f.write_all(b"S").is_ok() {
            if let Ok(r) = rx.recv_timeout(TERM_GRACE) {
                return Some(r);
            }
        }
    }
    sys::kill_group(pgid, libc::SIGTERM);
    if let Ok(r) = rx.recv_timeout(TERM_GRACE) {
        return Some(r);
    }
    sys::kill_group(pgid, libc::SIGKILL);
    rx.recv().ok()
}

/// Bytes of a child's stderr kept for an error message.
const TAIL: usize = 4096;

/// The last [`TAIL`] bytes a child wrote on its stderr, gathered by a thread (for runs whose
/// output is not shown: a failed start then still says why).
#[derive(Debug, Clone, Default)]
pub struct StderrTail(Arc<Mutex<Vec<u8>>>);

impl StderrTail {
    /// Starts gathering `from` in a thread that ends at end of file.
    pub fn capture(mut from: ChildStderr) -> StderrTail {
        let tail = StderrTail::default();
        let t = tail.clone();
        std::thread::spawn(move || {
            use std::io::Read;
            let mut buf = [0u8; 4096];
            loop {
                match from.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => {
                        let mut v = t.0.lock().unwrap_or_else(|p| p.into_inner());
                        v.extend_from_slice(&buf[..n]);
                        if v.len() > TAIL {
                            let cut = v.len() - TAIL;
                            v.drain(..cut);
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => return,
                }
            }
        });
        tail
    }

    /// What was gathered so far, as one line (lines joined with ` | `, control characters
    /// dropped), or `None` when nothing was written.
    pub fn text(&self) -> Option<String> {
        // Give the reader a moment to take what the child wrote just before it ended.
        std::thread::sleep(Duration::from_millis(20));
        let v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let s: Vec<String> = String::from_utf8_lossy(&v)
            .lines()
            .map(|l| l.chars().filter(|c| !c.is_control()).collect::<String>())
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect();
        (!s.is_empty()).then(|| s.join(" | "))
    }
}

/// The conventional name of signal `sig`.
pub fn signal_name(sig: i32) -> String {
    proftrust_supervise::signal_name(sig)
}

/// The [`RunOutcome`] of a supervised run.
pub fn outcome(e: &Ended) -> RunOutcome {
    if let Some(signal) = e.interrupted {
        return RunOutcome::Interrupted {
            signal,
            name: signal_name(signal),
        };
    }
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
}
