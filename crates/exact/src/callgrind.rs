//! Running a program under valgrind's callgrind and importing its counts.

use crate::run::{self, StderrTail};
use crate::ExactError;
use proftrust_formats::callgrind::{self, ExactOptions};
use proftrust_model::{ExactProfile, RunOutcome};
use proftrust_supervise::StopSignal;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// How to run callgrind.
#[derive(Debug, Clone)]
pub struct CallgrindOptions {
    /// Stop the program after this long (SIGTERM to its process group, which lets callgrind
    /// write its file, then SIGKILL 2 s later). Default `None`: no limit.
    pub timeout: Option<Duration>,
    /// `--cache-sim=yes`: adds cache miss events (`I1mr`, `D1mr`, ...) as extra costs.
    /// Default `false`.
    pub cache_sim: bool,
    /// `--branch-sim=yes`: adds branch misprediction events (`Bc`, `Bcm`, ...). Default `false`.
    pub branch_sim: bool,
    /// The valgrind executable. Default `None`: `$PROFTRUST_VALGRIND`, else `valgrind` on `PATH`.
    pub valgrind: Option<PathBuf>,
    /// Default `true`: the program's stdout/stderr (and valgrind's) are inherited; `false`:
    /// discarded (the end of stderr is kept for an error message).
    pub show_output: bool,
    /// Raised to stop the program as at the timeout (callgrind writes its counts up to
    /// then; the outcome is [`proftrust_model::RunOutcome::Interrupted`]). Default `None`.
    pub stop: Option<StopSignal>,
}

impl Default for CallgrindOptions {
    fn default() -> Self {
        CallgrindOptions {
            timeout: None,
            cache_sim: false,
            branch_sim: false,
            valgrind: None,
            show_output: true,
            stop: None,
        }
    }
}

fn valgrind_version(v: &PathBuf) -> String {
    Command::new(v)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "valgrind (version unknown)".into())
}

struct TempDir(PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir() -> Result<TempDir, ExactError> {
    let base = std::env::temp_dir();
    for i in 0..1000u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let p = base.join(format!("proftrust-cg-{}-{nanos}-{i}", std::process::id()));
        match std::fs::create_dir(&p) {
            Ok(()) => return Ok(TempDir(p)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(ExactError::io(
                    format!("creating a directory in {}", base.display()),
                    e,
                ))
            }
        }
    }
    Err(ExactError::io(
        "creating a temporary directory",
        std::io::Error::other("no free name"),
    ))
}

/// The profile of a run interrupted before valgrind wrote any count: empty, marked by its
/// outcome.
fn empty_interrupted(cmd: &[OsString], outcome: RunOutcome, valgrind: &PathBuf) -> ExactProfile {
    ExactProfile {
        backend: "callgrind".into(),
        backend_detail: format!(
            "{}; {outcome} before valgrind counted anything",
            valgrind_version(valgrind)
        ),
        command: cmd
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect(),
        outcome: Some(outcome),
        ..ExactProfile::default()
    }
}

/// Runs `cmd` under `valgrind --tool=callgrind --dump-instr=yes --collect-jumps=yes` and
/// imports the per-instruction counts (and jumps, calls; cache/branch events as extra
/// costs when asked). Forked children are profiled by valgrind into their own files, which
/// are ignored: the profile covers the started process, like the QEMU backend. Exec is not
/// followed (`--trace-children=no`).
pub fn count_callgrind(cmd: &[OsString], o: &CallgrindOptions) -> Result<ExactProfile, ExactError> {
    let program = run::resolve_program(cmd)?;
    let valgrind = match &o.valgrind {
        Some(v) => v.clone(),
        None => run::find_tool("valgrind", "PROFTRUST_VALGRIND", "apt-get install valgrind")?,
    };
    let dir = temp_dir()?;
    let mut c = Command::new(&valgrind);
    c.arg("--tool=callgrind")
        .arg("--dump-instr=yes")
        .arg("--collect-jumps=yes")
        .arg(format!(
            "--callgrind-out-file={}/callgrind.out.%p",
            dir.0.display()
        ));
    if o.cache_sim {
        c.arg("--cache-sim=yes");
    }
    if o.branch_sim {
        c.arg("--branch-sim=yes");
    }
    c.arg("--").arg(&program).args(&cmd[1..]);
    if !o.show_output {
        c.stdout(Stdio::null()).stderr(Stdio::piped());
    }
    c.process_group(0);
    proftrust_supervise::die_with_parent(&mut c);
    let mut supervision = proftrust_supervise::Run::begin();
    let mut child = supervision
        .spawn(|| c.spawn(), |c| c.id() as i32)
        .map_err(|e| ExactError::io(format!("starting {}", valgrind.display()), e))?;
    let pid = child.id();
    let stderr = child.stderr.take().map(StderrTail::capture);
    let ended = run::supervise(child, o.timeout, None, o.stop.clone(), None)
        .join()
        .map_err(|_| {
            ExactError::io(
                "waiting for valgrind",
                std::io::Error::other("waiter panicked"),
            )
        })?
        .map_err(|e| ExactError::io("waiting for valgrind", e))?;
    drop(supervision);
    let outcome = run::outcome(&ended);
    let file = dir.0.join(format!("callgrind.out.{pid}"));
    let interrupted = matches!(outcome, RunOutcome::Interrupted { .. });
    let text = match std::fs::read_to_string(&file) {
        // Interrupted while valgrind was starting: it had nothing to dump yet.
        Ok(t) if interrupted && t.trim().is_empty() => {
            return Ok(empty_interrupted(cmd, outcome, &valgrind))
        }
        Err(e) if interrupted && e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(empty_interrupted(cmd, outcome, &valgrind))
        }
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ExactError::StartFailed {
                tool: "valgrind".into(),
                outcome: outcome.to_string(),
                why: format!(
                    "it wrote no {}: {}",
                    file.display(),
                    match stderr.as_ref().and_then(StderrTail::text) {
                        Some(t) => t,
                        None if o.show_output => "see valgrind's message above".into(),
                        None => "valgrind said nothing".into(),
                    }
                ),
            })
        }
        Err(e) => return Err(ExactError::io(format!("reading {}", file.display()), e)),
    };
    let parsed = callgrind::parse(&text).map_err(|e| ExactError::Callgrind {
        path: file.clone(),
        what: e.to_string(),
    })?;
    let mut p = parsed
        .to_exact(
            &ExactOptions::default(),
            &proftrust_binary::BinaryLocator::new(proftrust_binary::LocateOptions::default()),
        )
        .map_err(|e| ExactError::Callgrind {
            path: file.clone(),
            what: e.to_string(),
        })?;
    p.backend = "callgrind".into();
    let mut detail =
        format!(
        "{}; --dump-instr=yes --collect-jumps=yes{}{}; forked children ignored; exec not followed",
        valgrind_version(&valgrind),
        if o.cache_sim { " --cache-sim=yes" } else { "" },
        if o.branch_sim { " --branch-sim=yes" } else { "" },
    );
    if !p.backend_detail.is_empty() {
        detail.push_str("; ");
        detail.push_str(&p.backend_detail);
    }
    if outcome.is_cut_short() {
        detail.push_str(&format!("; {outcome}: counts up to then"));
    }
    p.backend_detail = detail;
    p.command = cmd
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    p.outcome = Some(outcome);
    Ok(p)
}
