//! Running a program under valgrind's callgrind and importing its counts.

use crate::run::{self, StderrTail};
use crate::{sys, tree, ExactError};
use proftrust_formats::callgrind::{self, ExactOptions};
use proftrust_model::{ExactProcess, ExactProfile, ImageStart, RunOutcome};
use proftrust_supervise::StopSignal;
use std::collections::HashMap;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
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
    /// Count the whole process tree (`--trace-children=yes`): forked children and the
    /// programs an `execve` starts, each process image in [`ExactProfile::processes`]. An
    /// image that a process left by `execve` is listed but not counted (callgrind writes a
    /// process's counts when it exits, and an `execve` discards what it had). Default
    /// `true`; `false` counts the started process alone, up to its first `execve`.
    pub follow: bool,
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
            follow: true,
        }
    }
}

fn valgrind_version(v: &Path) -> String {
    Command::new(v)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "valgrind (version unknown)".into())
}

/// Prefix of the directories valgrind writes its files into, in `$TMPDIR`.
const DIR_PREFIX: &str = "proftrust-cg-";
/// The lock file of such a directory: held (`flock`) by the run that made it for as long as
/// it lives, so a directory whose lock is free belongs to a run that died (SIGKILL) and is
/// removed by the next run.
const LOCK_FILE: &str = ".proftrust-lock";

/// A private directory for valgrind's files, removed when dropped; its lock is held while
/// it exists (see [`LOCK_FILE`]).
struct TempDir(PathBuf, #[allow(dead_code)] std::fs::File);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Removes the directories of earlier runs that died before removing theirs: ours (by the
/// prefix), with a lock file nobody holds. Returns how many were removed.
fn sweep_stale_dirs(base: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(base) else {
        return 0;
    };
    let mut removed = 0;
    for e in rd.flatten() {
        if !e.file_name().to_string_lossy().starts_with(DIR_PREFIX) {
            continue;
        }
        let dir = e.path();
        let Ok(lock) = std::fs::File::open(dir.join(LOCK_FILE)) else {
            continue;
        };
        if sys::try_lock(&lock) && std::fs::remove_dir_all(&dir).is_ok() {
            removed += 1;
        }
    }
    removed
}

fn temp_dir() -> Result<TempDir, ExactError> {
    let base = std::env::temp_dir();
    sweep_stale_dirs(&base);
    for i in 0..1000u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let p = base.join(format!("{DIR_PREFIX}{}-{nanos}-{i}", std::process::id()));
        match std::fs::create_dir(&p) {
            Ok(()) => {
                let lock = std::fs::File::create(p.join(LOCK_FILE))
                    .map_err(|e| ExactError::io(format!("creating {}", p.display()), e));
                let lock = match lock {
                    Ok(l) if sys::try_lock(&l) => l,
                    Ok(_) => {
                        let _ = std::fs::remove_dir_all(&p);
                        continue;
                    }
                    Err(e) => {
                        let _ = std::fs::remove_dir_all(&p);
                        return Err(e);
                    }
                };
                return Ok(TempDir(p, lock));
            }
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
fn empty_interrupted(cmd: &[OsString], outcome: RunOutcome, valgrind: &Path) -> ExactProfile {
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

/// One image of a process as valgrind's log (`-v -v`) tells it: the command it started
/// with (empty for a forked child's part before its `execve`, which has no `Command:`
/// line) and where each object was loaded.
#[derive(Debug, Default, Clone)]
struct LogImage {
    command: String,
    /// (object path, load bias = avma - svma of its text).
    biases: Vec<(String, u64)>,
}

/// What valgrind's log said, per process.
#[derive(Debug, Default)]
struct ValgrindLog {
    /// Processes in the order they first wrote.
    order: Vec<u32>,
    images: HashMap<u32, Vec<LogImage>>,
    /// The object whose `svma, avma` line comes next, per process.
    pending: HashMap<u32, String>,
    /// The last messages of the `==PID==` kind (valgrind's user-facing ones), for errors.
    tail: Vec<String>,
}

impl ValgrindLog {
    /// Takes one line of the log.
    fn line(&mut self, line: &str) {
        let Some((pid, kind, rest)) = split_log_line(line) else {
            return;
        };
        if !self.images.contains_key(&pid) {
            self.order.push(pid);
        }
        let imgs = self.images.entry(pid).or_default();
        if kind == '=' {
            if let Some(c) = rest.strip_prefix("Command: ") {
                imgs.push(LogImage {
                    command: c.to_string(),
                    biases: Vec::new(),
                });
                return;
            }
            if !rest.trim().is_empty() {
                self.tail.push(rest.trim().to_string());
                if self.tail.len() > 20 {
                    self.tail.remove(0);
                }
            }
            return;
        }
        if let Some(path) = rest.strip_prefix("Reading syms from ") {
            self.pending.insert(pid, path.trim().to_string());
        } else if let Some(bias) = svma_avma(rest) {
            if let Some(path) = self.pending.remove(&pid) {
                if imgs.is_empty() {
                    imgs.push(LogImage::default());
                }
                if let Some(im) = imgs.last_mut() {
                    if !im.biases.iter().any(|(p, _)| *p == path) {
                        im.biases.push((path, bias));
                    }
                }
            }
        }
    }
}

/// `==PID== text` or `--PID-- text` -> (pid, '=' or '-', text).
fn split_log_line(line: &str) -> Option<(u32, char, &str)> {
    let kind = line.chars().next()?;
    if kind != '=' && kind != '-' {
        return None;
    }
    let mark = if kind == '=' { "==" } else { "--" };
    let rest = line.strip_prefix(mark)?;
    let end = rest.find(mark)?;
    let pid = rest[..end].parse().ok()?;
    Some((
        pid,
        kind,
        rest[end + 2..]
            .strip_prefix(' ')
            .unwrap_or(&rest[end + 2..]),
    ))
}

/// The load bias from `   svma 0x0000026380, avma 0x000486c380` (valgrind `-v -v`, the
/// text mapping of the object just read): `avma - svma`.
fn svma_avma(text: &str) -> Option<u64> {
    let t = text.trim();
    let t = t.strip_prefix("svma ")?;
    let (svma, avma) = t.split_once(", avma ")?;
    let hex = |s: &str| u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok();
    hex(avma)?.checked_sub(hex(svma)?)
}

/// The first word of a `Command:` line (valgrind escapes blanks and shell characters with
/// a backslash).
fn command_program(command: &str) -> String {
    let mut out = String::new();
    let mut esc = false;
    for c in command.chars() {
        if esc {
            out.push(c);
            esc = false;
        } else if c == '\\' {
            esc = true;
        } else if c == ' ' {
            break;
        } else {
            out.push(c);
        }
    }
    out
}

/// Runs `cmd` under `valgrind --tool=callgrind --dump-instr=yes --collect-jumps=yes` and
/// imports the per-instruction counts (and jumps, calls; cache/branch events as extra
/// costs when asked). With [`CallgrindOptions::follow`] every process of the tree is
/// counted (`--trace-children=yes`, one file per process), each object mapped through the
/// load bias valgrind reports for it (`-v -v`: its text's `svma` and `avma`), so stripped
/// objects need no symbols; the image a process left by `execve` is listed, not counted.
pub fn count_callgrind(cmd: &[OsString], o: &CallgrindOptions) -> Result<ExactProfile, ExactError> {
    // Refused up front what the kernel would refuse (an empty file would otherwise be run
    // by valgrind with /bin/sh).
    let (program, plan) = run::plan_x86_64(cmd, "this valgrind")?;
    let valgrind = match &o.valgrind {
        Some(v) => v.clone(),
        None => run::find_tool("valgrind", "PROFTRUST_VALGRIND", "apt-get install valgrind")?,
    };
    let dir = temp_dir()?;
    let (log_rd, log_wr) = sys::pipe().map_err(|e| ExactError::io("creating a pipe", e))?;
    let mut c = valgrind_command(&valgrind, &program, cmd, o, &dir.0, &log_wr);
    let mut supervision = proftrust_supervise::Run::begin();
    let mut child = supervision
        .spawn(|| c.spawn(), |c| c.id() as i32)
        .map_err(|e| ExactError::io(format!("starting {}", valgrind.display()), e))?;
    drop(log_wr);
    let pid = child.id();
    let stderr = child.stderr.take().map(StderrTail::capture);
    let log_reader = std::thread::spawn(move || read_log(log_rd));
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
    let log = log_reader.join().unwrap_or_default();
    let outcome = run::outcome(&ended);
    let file = dir.0.join(format!("callgrind.out.{pid}"));
    let said = || {
        let tail = log.tail.last().cloned();
        tail.or_else(|| stderr.as_ref().and_then(StderrTail::text))
    };
    if !wrote_out_file(&file, &outcome, said, o.show_output)? {
        // Interrupted while valgrind was starting: it had nothing to dump yet.
        return Ok(empty_interrupted(cmd, outcome, &valgrind));
    }
    let mut images = images_of(&log, pid, &plan, &dir.0, o.follow);
    let profiles = count_images(&mut images, pid)?;
    let root_detail = profiles
        .iter()
        .flatten()
        .next()
        .map(|p| p.backend_detail.clone())
        .unwrap_or_default();
    let mut p = tree::assemble(
        images
            .into_iter()
            .map(|(p, _, _)| p)
            .zip(profiles)
            .collect(),
    );
    p.backend = "callgrind".into();
    p.backend_detail = backend_detail(&valgrind, o, &root_detail, &p, &outcome);
    p.command = cmd
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    p.outcome = Some(outcome.clone());
    if let Some(root) = p.processes.first_mut() {
        root.outcome = Some(outcome);
    }
    Ok(p)
}

/// `valgrind --tool=callgrind ... -- PROGRAM ARGS` writing its log to `log_wr` (`-v -v`:
/// the load biases) and one out file per process into `dir`.
fn valgrind_command(
    valgrind: &Path,
    program: &Path,
    cmd: &[OsString],
    o: &CallgrindOptions,
    dir: &Path,
    log_wr: &std::os::fd::OwnedFd,
) -> Command {
    let mut c = Command::new(valgrind);
    c.arg("--tool=callgrind")
        .arg("--dump-instr=yes")
        .arg("--collect-jumps=yes")
        .arg("--vgdb=no")
        .arg("-v")
        .arg("-v")
        .arg(format!("--log-fd={}", sys::raw(log_wr)))
        .arg(format!(
            "--trace-children={}",
            if o.follow { "yes" } else { "no" }
        ))
        .arg(format!(
            "--callgrind-out-file={}/callgrind.out.%p",
            dir.display()
        ));
    if o.cache_sim {
        c.arg("--cache-sim=yes");
    }
    if o.branch_sim {
        c.arg("--branch-sim=yes");
    }
    c.arg("--").arg(program).args(&cmd[1..]);
    if !o.show_output {
        c.stdout(Stdio::null()).stderr(Stdio::piped());
    }
    sys::inherit_fds(&mut c, &[sys::raw(log_wr)]);
    c.process_group(0);
    proftrust_supervise::die_with_parent(&mut c);
    proftrust_supervise::default_signals(&mut c);
    c
}

/// valgrind's log, read line by line from its pipe until every process closed it.
fn read_log(log_rd: std::fs::File) -> ValgrindLog {
    use std::io::BufRead;
    let mut log = ValgrindLog::default();
    for line in std::io::BufReader::new(log_rd)
        .split(b'\n')
        .map_while(Result::ok)
    {
        log.line(&String::from_utf8_lossy(&line));
    }
    log
}

/// Whether valgrind wrote the started process's out `file`: `Ok(false)` when the run was
/// interrupted before there was anything to dump (no file, or an empty one); an error with
/// what valgrind `said` (its log's last line, else its stderr) when it wrote none otherwise.
fn wrote_out_file(
    file: &Path,
    outcome: &RunOutcome,
    said: impl FnOnce() -> Option<String>,
    show_output: bool,
) -> Result<bool, ExactError> {
    let interrupted = matches!(outcome, RunOutcome::Interrupted { .. });
    match std::fs::metadata(file) {
        Ok(m) if interrupted && m.len() == 0 => Ok(false),
        Err(e) if interrupted && e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(ExactError::StartFailed {
            tool: "valgrind".into(),
            outcome: outcome.to_string(),
            why: format!(
                "it wrote no {}: {}",
                file.display(),
                match said() {
                    Some(t) => t,
                    None if show_output => "see valgrind's message above".into(),
                    None => "valgrind said nothing".into(),
                }
            ),
        }),
        Err(e) => Err(ExactError::io(format!("reading {}", file.display()), e)),
    }
}

/// Reads the out file of each image (`pid`: the started process), setting its
/// instruction total; an image without a file, or another process's file that does not
/// read (listed as not counted, with why), has no profile. The started program's file
/// must read.
fn count_images(images: &mut [CgImage], pid: u32) -> Result<Vec<Option<ExactProfile>>, ExactError> {
    let mut profiles = Vec::with_capacity(images.len());
    for (proc, file, biases) in images {
        let Some(file) = file.take() else {
            profiles.push(None);
            continue;
        };
        match read_counts(&file, biases) {
            Ok(p) => {
                proc.total_instructions = p.total_instructions;
                profiles.push(Some(p));
            }
            Err(e)
                if proc.pid == pid && proc.parent.is_none() && proc.start == ImageStart::Root =>
            {
                return Err(e)
            }
            Err(e) => {
                proc.not_counted = Some(e.to_string());
                profiles.push(None);
            }
        }
    }
    Ok(profiles)
}

/// The profile's backend detail: valgrind's version and options, whether the tree was
/// followed, the started image's file's own detail (`root_detail`), the images counted
/// and how the run ended when it was cut short.
fn backend_detail(
    valgrind: &Path,
    o: &CallgrindOptions,
    root_detail: &str,
    p: &ExactProfile,
    outcome: &RunOutcome,
) -> String {
    let mut detail = format!(
        "{}; --dump-instr=yes --collect-jumps=yes{}{}; {}",
        valgrind_version(valgrind),
        if o.cache_sim { " --cache-sim=yes" } else { "" },
        if o.branch_sim {
            " --branch-sim=yes"
        } else {
            ""
        },
        if o.follow {
            "process tree followed (--trace-children=yes; an image left by execve is not counted)"
        } else {
            "forked children ignored; exec not followed"
        },
    );
    if !root_detail.is_empty() {
        detail.push_str("; ");
        detail.push_str(root_detail);
    }
    detail.push_str(&tree::images_phrase(p));
    if outcome.is_cut_short() {
        detail.push_str(&format!("; {outcome}: counts up to then"));
    }
    detail
}

/// A callgrind file of one process read into counts: the objects the log names are
/// module-relative (see the body), the others' biases inferred from their symbols.
fn read_counts(file: &Path, biases: &[(String, u64)]) -> Result<ExactProfile, ExactError> {
    let err = |what: String| ExactError::Callgrind {
        path: file.to_path_buf(),
        what,
    };
    let text = std::fs::read_to_string(file)
        .map_err(|e| ExactError::io(format!("reading {}", file.display()), e))?;
    let parsed = callgrind::parse(&text).map_err(|e| err(e.to_string()))?;
    // Callgrind writes an object's addresses minus the text bias valgrind found for it
    // from its load segments (the log's `svma`/`avma`): every object the log names is
    // module-relative in the file already.
    let mut opts = ExactOptions::default();
    opts.biases = biases.iter().map(|(p, _)| (p.clone(), 0)).collect();
    let mut p = parsed
        .to_exact(
            &opts,
            &proftrust_binary::BinaryLocator::new(proftrust_binary::LocateOptions::default()),
        )
        .map_err(|e| err(e.to_string()))?;
    p.normalize();
    Ok(p)
}

/// One process image of a callgrind run: the image, its `callgrind.out.PID` file when it is
/// counted, and its objects' load biases from the log (path, avma - svma of its text).
type CgImage = (ExactProcess, Option<PathBuf>, Vec<(String, u64)>);

/// The process images of a run from valgrind's log and the files in `dir`: per process,
/// its images in order (a forked child's part before its first `execve`, then one per
/// `Command:` line); the last image of each process is counted from its file
/// `callgrind.out.PID`, the others are listed as not counted. The started process (`root`)
/// starts with `plan`'s name.
fn images_of(
    log: &ValgrindLog,
    root: u32,
    plan: &proftrust_supervise::exec::ExecPlan,
    dir: &Path,
    follow: bool,
) -> Vec<CgImage> {
    let mut pids: Vec<u32> = log.order.clone();
    if !pids.contains(&root) {
        pids.insert(0, root);
    }
    if follow {
        // Processes that wrote a file but nothing in the log (a forked child that did not
        // exec, with nothing new to load).
        let mut extra: Vec<u32> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_prefix("callgrind.out.")?
                    .parse()
                    .ok()
            })
            .filter(|p| !pids.contains(p))
            .collect();
        extra.sort_unstable();
        pids.extend(extra);
    } else {
        pids.retain(|&p| p == root);
    }
    let lost = "callgrind writes a process's counts when it exits, and its execve discarded what this image had: not counted";
    let mut out: Vec<CgImage> = Vec::new();
    for pid in pids {
        let file = dir.join(format!("callgrind.out.{pid}"));
        let has_file = file.is_file();
        let logged = log.images.get(&pid).cloned().unwrap_or_default();
        let mut imgs: Vec<(ImageStart, LogImage)> = Vec::new();
        for (k, li) in logged.into_iter().enumerate() {
            let start = match (pid == root, k, li.command.is_empty()) {
                (true, 0, _) => ImageStart::Root,
                (false, 0, true) => ImageStart::Fork,
                (false, 0, false) => {
                    // A child's first `Command:`: the exec after its fork.
                    imgs.push((ImageStart::Fork, LogImage::default()));
                    ImageStart::Exec
                }
                _ => ImageStart::Exec,
            };
            imgs.push((start, li));
        }
        if imgs.is_empty() {
            let start = if pid == root {
                ImageStart::Root
            } else {
                ImageStart::Fork
            };
            imgs.push((start, LogImage::default()));
        }
        let n = imgs.len();
        let first = out.len();
        for (k, (start, li)) in imgs.into_iter().enumerate() {
            let last = k + 1 == n;
            let program = command_program(&li.command);
            let comm = if pid == root && k == 0 {
                plan.comm.clone()
            } else if !program.is_empty() {
                proftrust_supervise::exec::comm_of(std::ffi::OsStr::new(&program))
            } else {
                String::new()
            };
            let mut proc = ExactProcess {
                pid,
                parent: (k > 0).then(|| first + k - 1),
                start,
                comm,
                path: program,
                argv: Vec::new(),
                total_instructions: 0,
                instructions: Vec::new(),
                not_counted: None,
                outcome: None,
                replaced: !last,
            };
            let counted = last && has_file;
            if !counted {
                proc.not_counted = Some(if last {
                    "killed before callgrind wrote its counts".into()
                } else {
                    lost.into()
                });
            }
            if last && proc.comm.is_empty() && has_file {
                // A forked child that did not exec: named as its file's command.
                proc.comm = file_command(&file)
                    .map(|c| {
                        proftrust_supervise::exec::comm_of(std::ffi::OsStr::new(
                            c.split_whitespace().next().unwrap_or(""),
                        ))
                    })
                    .unwrap_or_default();
            }
            out.push((proc, counted.then(|| file.clone()), li.biases));
        }
    }
    out
}

/// The `cmd:` line of a callgrind file (its head only is read).
fn file_command(file: &Path) -> Option<String> {
    use std::io::BufRead;
    let f = std::fs::File::open(file).ok()?;
    std::io::BufReader::new(f)
        .lines()
        .take(40)
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("cmd:").map(|c| c.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as valgrind 3.19 writes them with `-v -v` (from a run of `sh -c 'exec tr'`):
    /// the command of each image, each object's bias (avma - svma), a fork's images.
    #[test]
    fn log_lines_give_images_and_biases() {
        let mut log = ValgrindLog::default();
        for l in [
            "==785== Command: /bin/sh -c exec\\ tr\\ a\\ b",
            "--785-- Reading syms from /usr/bin/dash",
            "--785--    svma 0x0000004580, avma 0x000010c580",
            "--785-- Reading syms from /usr/lib/x86_64-linux-gnu/libc.so.6",
            "--785--    svma 0x0000026380, avma 0x000486c380",
            "==785== Command: /usr/bin/tr a b",
            "--785-- Reading syms from /usr/bin/tr",
            "--785--    svma 0x0000002380, avma 0x000010a380",
            "--809-- Reading syms from /usr/lib/x86_64-linux-gnu/libm.so.6",
            "--809--    svma 0x0000010230, avma 0x00049ef230",
            "==809== valgrind: something went wrong",
        ] {
            log.line(l);
        }
        assert_eq!(log.order, vec![785, 809]);
        let im = &log.images[&785];
        assert_eq!(im.len(), 2);
        assert_eq!(command_program(&im[0].command), "/bin/sh");
        assert_eq!(
            im[0].biases,
            vec![
                ("/usr/bin/dash".to_string(), 0x108000),
                ("/usr/lib/x86_64-linux-gnu/libc.so.6".to_string(), 0x4846000)
            ]
        );
        assert_eq!(im[1].biases, vec![("/usr/bin/tr".to_string(), 0x108000)]);
        // A child's objects before any Command line: its forked image.
        assert_eq!(log.images[&809][0].command, "");
        assert_eq!(log.images[&809][0].biases[0].1, 0x49df000);
        assert_eq!(log.tail, vec!["valgrind: something went wrong"]);
        assert_eq!(command_program("/a\\ b/c\\ d -x"), "/a b/c d");
    }
}
