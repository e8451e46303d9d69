//! # proftrust-testkit
//!
//! Test support for proftrust's integration tests (a dev-dependency only; nothing ships).
//!
//! * [`have`] / [`need`]: is an external tool (gcc, qemu-x86_64, perf, valgrind, ...) on
//!   `PATH`?
//! * [`skip!`]: a test that cannot run here says so **loudly**. `cargo test` hides the
//!   stderr of passing tests, so besides printing `SKIP: <test>: <reason>` the line is
//!   appended to the file named by `PROFTRUST_SKIP_LOG`; `scripts/test.sh` sets it and prints
//!   every skip at the end of the run.
//! * [`golden`]: golden files ([`assert_golden`]) re-blessed by `PROFTRUST_BLESS=1`, with
//!   [`Masks`] for what genuinely varies between machines (temporary paths, tool versions).
#![warn(missing_docs)]

pub mod golden;
pub use golden::{assert_golden, Masks};

use std::io::Write;
use std::process::Command;

/// Whether `tool` is found on `PATH` (by the shell's `command -v`, so tools whose
/// `--version` exits non-zero count too).
pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v '{tool}'"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// `true` when every tool in `tools` is present; otherwise skips `test` (see [`skip!`])
/// naming the first missing tool, and returns `false`.
pub fn need(test: &str, tools: &[&str]) -> bool {
    match missing(tools) {
        Some(t) => {
            skip_line(&format!(
                "{test}: {t} is not installed (bash scripts/test.sh installs it)"
            ));
            false
        }
        None => true,
    }
}

/// Skips `test` loudly with the reason `why` (`SKIP: <test>: <why>`, see [`skip!`]).
pub fn skip_test(test: &str, why: &str) {
    skip_line(&format!("{test}: {why}"));
}

/// The first tool of `tools` that is not on `PATH`.
pub fn missing<'a>(tools: &[&'a str]) -> Option<&'a str> {
    tools.iter().copied().find(|t| !have(t))
}

/// Prints `SKIP: <msg>` on stderr and appends it to `$PROFTRUST_SKIP_LOG` when set. Use
/// through [`skip!`].
pub fn skip_line(msg: &str) {
    let line = format!("SKIP: {msg}");
    eprintln!("{line}");
    if let Some(path) = std::env::var_os("PROFTRUST_SKIP_LOG") {
        // One short write per line with O_APPEND: lines of parallel tests do not interleave.
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = f.write_all(format!("{line}\n").as_bytes());
        }
    }
}

/// Skips a test loudly: `skip!("{test}: {why}")` prints `SKIP: ...` and records it for the
/// end-of-run summary of `scripts/test.sh` (format arguments as `format!`).
#[macro_export]
macro_rules! skip {
    ($($arg:tt)*) => {
        $crate::skip_line(&format!($($arg)*))
    };
}

/// Whether `perf report` 6.1 counts a sample that proftrust names `name` under `_init`
/// instead: the `.plt` header (`[plt]`) always, a PLT entry (`free@plt`) when perf did not
/// synthesise a symbol of that name (`perf_knows_name` false). perf extends the size-0
/// `_init` over what follows it; proftrust names the stubs like objdump. For oracles that
/// compare per-symbol counts with perf's.
pub fn perf_counts_under_init(name: &str, perf_knows_name: bool) -> bool {
    (name == "[plt]" || name.ends_with("@plt")) && !perf_knows_name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn have_finds_the_shell_and_not_a_made_up_tool() {
        assert!(have("sh"));
        assert!(!have("proftrust-no-such-tool-7f3a"));
        assert!(need("t", &["sh"]));
        assert_eq!(missing(&["sh"]), None);
        assert_eq!(
            missing(&["sh", "proftrust-no-such-tool-7f3a", "env"]),
            Some("proftrust-no-such-tool-7f3a")
        );
    }

    #[test]
    fn plt_names_perf_folds_into_init() {
        assert!(perf_counts_under_init("[plt]", false));
        assert!(perf_counts_under_init("free@plt", false));
        assert!(!perf_counts_under_init("free@plt", true));
        assert!(!perf_counts_under_init("main", false));
    }
}
