//! Shared CLI plumbing: verbosity, progress bars, error printing (output files: `output`).

use std::io::IsTerminal;
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
        eprintln!("proftrust: {msg}");
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

/// Prints an error chain as `error: outer: inner` plus any `hint:` lines the chain carries.
pub fn print_error(e: &anyhow::Error) {
    eprintln!("error: {}", chain_text(e));
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

/// First line of `tool ARGS`, or `unavailable`.
pub fn tool_version(tool: &str, args: &[&str]) -> String {
    std::process::Command::new(tool)
        .args(args)
        .output()
        .ok()
        .and_then(|o| {
            let s = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&s)
                .lines()
                .next()
                .map(|l| l.trim().to_string())
        })
        .unwrap_or_else(|| "unavailable".into())
}

/// Notes on stderr how the program ended, unless it exited with status 0: `the program
/// exited with status 3`, `... was killed by SIGSEGV`, `... was stopped at the 500 ms
/// timeout`, `... was interrupted (proftrust received SIGINT): FILE holds the run up to
/// then`. `what` names what was written (`the samples up to then were written to t.ptsamp`).
pub fn note_outcome(outcome: Option<&proftrust_model::RunOutcome>, what: &str) {
    use proftrust_model::RunOutcome;
    match outcome {
        None | Some(RunOutcome::Exited { code: 0 }) => {}
        Some(o @ RunOutcome::Interrupted { .. }) => {
            note(format_args!("the program was {o}: {what}"))
        }
        Some(o @ RunOutcome::Exited { .. }) => note(format_args!("the program {o}")),
        Some(o) => note(format_args!("the program was {o}")),
    }
}
