//! Running a program natively (no QEMU, no valgrind) under the same supervision as the
//! other runners: its own process group, a timeout (SIGTERM then SIGKILL to the group),
//! reaping, and nothing of its group left running afterwards. Used by runs whose
//! measurements the program makes itself (the `proftrust-probe` path timers of `proftrust
//! vpp --source probe`).

use crate::run;
use crate::ExactError;
use proftrust_model::RunOutcome;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

/// How to run a program natively.
#[derive(Debug, Clone, Default)]
pub struct NativeOptions {
    /// Stop the program after this long (SIGTERM to its process group, SIGKILL 2 s later).
    /// Default `None`: no limit.
    pub timeout: Option<Duration>,
    /// Variables added to the program's environment. Default none.
    pub env: Vec<(OsString, OsString)>,
    /// `true`: the program's stdout is proftrust's; `false`: discarded. Its stderr is always
    /// proftrust's. Default `false`.
    pub show_output: bool,
    /// Raised to stop the program as at the timeout (the outcome is then
    /// [`RunOutcome::Interrupted`]). Default `None`.
    pub stop: Option<proftrust_supervise::StopSignal>,
}

/// Runs `cmd` natively and returns how it ended.
pub fn run_native(cmd: &[OsString], o: &NativeOptions) -> Result<RunOutcome, ExactError> {
    let program = run::resolve_program(cmd)?;
    let mut c = Command::new(&program);
    c.args(&cmd[1..])
        .envs(o.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null());
    if !o.show_output {
        c.stdout(Stdio::null());
    }
    c.process_group(0);
    proftrust_supervise::die_with_parent(&mut c);
    proftrust_supervise::default_signals(&mut c);
    let mut supervision = proftrust_supervise::Run::begin();
    let child = supervision
        .spawn(|| c.spawn(), |c| c.id() as i32)
        .map_err(|e| ExactError::io(format!("starting {}", program.display()), e))?;
    let ended = run::supervise(child, o.timeout, None, o.stop.clone(), None)
        .join()
        .map_err(|_| {
            ExactError::io(
                format!("waiting for {}", program.display()),
                std::io::Error::other("waiter panicked"),
            )
        })?
        .map_err(|e| ExactError::io(format!("waiting for {}", program.display()), e))?;
    Ok(run::outcome(&ended))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_signals_timeouts_and_env() {
        let sh = |script: &str| -> Vec<OsString> { vec!["sh".into(), "-c".into(), script.into()] };
        let o = NativeOptions::default();
        assert_eq!(
            run_native(&sh("exit 3"), &o).unwrap(),
            RunOutcome::Exited { code: 3 }
        );
        assert!(matches!(
            run_native(&sh("kill -SEGV $$"), &o).unwrap(),
            RunOutcome::Signaled { signal: 11, .. }
        ));
        let t = NativeOptions {
            timeout: Some(Duration::from_millis(200)),
            ..NativeOptions::default()
        };
        assert!(matches!(
            run_native(&sh("sleep 30"), &t).unwrap(),
            RunOutcome::TimedOut { .. }
        ));
        let e = NativeOptions {
            env: vec![("PROFTRUST_NATIVE_TEST".into(), "7".into())],
            ..NativeOptions::default()
        };
        assert_eq!(
            run_native(&sh("exit $PROFTRUST_NATIVE_TEST"), &e).unwrap(),
            RunOutcome::Exited { code: 7 }
        );
        assert!(matches!(
            run_native(&["no-such-program-proftrust".into()], &o),
            Err(ExactError::CommandNotFound { .. })
        ));
    }
}
