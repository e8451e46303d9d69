//! Shared CLI plumbing: verbosity, progress bars, error printing (output files: `output`).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU8, Ordering};

static VERBOSITY: AtomicU8 = AtomicU8::new(1);

/// Sets the global verbosity: 0 quiet, 1 normal, 2+ verbose.
pub fn set_verbosity(verbose: u8, quiet: bool) {
    let v = if quiet { 0 } else { 1 + verbose };
    VERBOSITY.store(v, Ordering::Relaxed);
}

/// Current verbosity (0 quiet, 1 normal, 2+ verbose).
#[allow(dead_code)]
pub fn verbosity() -> u8 {
    VERBOSITY.load(Ordering::Relaxed)
}

/// Prints a note on stderr unless `--quiet`.
#[allow(dead_code)]
pub fn note(msg: impl std::fmt::Display) {
    if verbosity() >= 1 {
        eprintln!("proftrust: {}", terminal_safe(&msg.to_string()));
    }
}

/// A progress bar on stderr when it is a terminal and not `--quiet`; hidden otherwise.
#[allow(dead_code)]
pub fn progress(len: Option<u64>, msg: &str) -> indicatif::ProgressBar {
    let show = verbosity() >= 1 && std::io::stderr().is_terminal();
    let pb = match (show, len) {
        (false, _) => return indicatif::ProgressBar::hidden(),
        (true, Some(n)) => indicatif::ProgressBar::new(n).with_style(
            indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} ({eta})")
                .expect("static template")
                .progress_chars("=> "),
        ),
        (true, None) => indicatif::ProgressBar::new_spinner().with_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                .expect("static template"),
        ),
    };
    pb.set_message(msg.to_string());
    pb.enable_steady_tick(std::time::Duration::from_millis(120));
    pb
}

/// The CLI's receiver of a pipeline's notes and progress: notes on stderr (unless
/// `--quiet`), progress bars on a terminal.
pub struct Ui;

impl proftrust_pipeline::Events for Ui {
    fn note(&self, msg: &str) {
        note(msg);
    }
    fn detail(&self, msg: &str) {
        if verbosity() >= 2 {
            eprintln!("proftrust: {}", terminal_safe(msg));
        }
    }
    fn task(&self, len: Option<u64>, what: &str) -> Box<dyn proftrust_pipeline::Task + '_> {
        Box::new(Bar(progress(len, what)))
    }
}

struct Bar(indicatif::ProgressBar);

impl proftrust_pipeline::Task for Bar {
    fn inc(&self, n: u64) {
        self.0.inc(n);
    }
    fn finish(&self) {
        self.0.finish_and_clear();
    }
}

/// Prints an error chain as `error: outer: inner` plus any `hint:` lines the chain carries.
/// A closed pipe (`| head`) is no error: it ends the process quietly (`pipe`).
pub fn print_error(e: &anyhow::Error) {
    crate::pipe::end_if_broken_pipe(e);
    eprintln!("error: {}", terminal_safe(&chain_text(e)));
}

/// `s` as one line of stderr ([`proftrust_model::quote_line`]): messages name files,
/// functions and events from binaries and profiles nobody checked, and must neither drive
/// the terminal nor start a line of their own. Every note and error is one line by
/// construction (a tool's own output is joined with ` | `), so a line break in one comes
/// from a name and is shown escaped (`\n`).
pub fn terminal_safe(s: &str) -> std::borrow::Cow<'_, str> {
    proftrust_model::quote_line(s)
}

/// An error chain as `outer: inner`, leaving out a cause whose text the message already
/// holds (an `io::Error` both formatted into its context and kept as the source would
/// otherwise read "Is a directory (os error 21): Is a directory (os error 21)").
pub fn chain_text(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if c.is_empty() || msg.contains(&c) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&c);
    }
    msg
}

/// While alive, file descriptor 1 points at stderr, so that the profiled program's output
/// does not mix with `--json` on stdout; the original stdout comes back on drop.
pub struct StdoutToStderr {
    saved: std::os::fd::OwnedFd,
}

impl StdoutToStderr {
    /// Points fd 1 at stderr until the returned guard is dropped.
    pub fn new() -> anyhow::Result<StdoutToStderr> {
        use anyhow::Context;
        use std::os::fd::AsFd;
        std::io::stdout().flush()?;
        let saved = std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .context("cannot duplicate stdout")?;
        crate::sys::dup2(2, 1).context("cannot redirect stdout")?;
        Ok(StdoutToStderr { saved })
    }
}

impl Drop for StdoutToStderr {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        let _ = std::io::stdout().flush();
        let _ = crate::sys::dup2(self.saved.as_raw_fd(), 1);
    }
}

/// Notes on stderr how the program ended, unless it exited with status 0: the sentence of
/// [`RunOutcome::warning`](proftrust_model::RunOutcome::warning) about `what` (what was
/// written, a plural: `the samples in t.ptsamp`), e.g. `the program was interrupted
/// (proftrust received SIGINT): the samples in t.ptsamp cover the run up to then`.
pub fn note_outcome(outcome: Option<&proftrust_model::RunOutcome>, what: &str) {
    if let Some(s) = outcome.and_then(|o| o.sentence("the program", what)) {
        note(s);
    }
}
