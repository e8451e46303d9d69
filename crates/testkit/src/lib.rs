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
//! * [`gcc`] / [`compile_c`]: a C test program built with `gcc -O2 -g` and extra flags.
//! * [`perf_data`]: perf.data files (file or pipe mode) built byte by byte, for
//!   recordings this machine cannot make (hardware events, two PMUs, unnamed events).
//! * [`golden`]: golden files ([`assert_golden`]) re-blessed by `PROFTRUST_BLESS=1`, with
//!   [`Masks`] for what genuinely varies between machines (temporary paths, tool versions).
//!
//! ```
//! use proftrust_testkit::Masks;
//!
//! let m = Masks::new().add("/tmp/.tmpAbc123", "[DIR]");
//! assert_eq!(m.apply("wrote /tmp/.tmpAbc123/out"), "wrote [DIR]/out");
//! // assert_golden(Path::new("tests/golden/expected/x.txt"), &m.apply(&output));
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod golden;
pub mod perf_data;
pub use golden::{assert_golden, Masks};

use std::io::Write;
use std::path::{Path, PathBuf};
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

/// Compiles the C files `sources` with `gcc -O2 -g FLAGS` into `out` (later flags win, so
/// `-O0` in `flags` overrides `-O2`) and returns `out`. Panics with gcc's messages when it
/// fails; check [`have`]`("gcc")` (or [`need`]) first.
pub fn gcc(out: &Path, sources: &[&Path], flags: &[&str]) -> PathBuf {
    let o = Command::new("gcc")
        .args(["-O2", "-g"])
        .args(flags)
        .args(sources)
        .arg("-o")
        .arg(out)
        .output()
        .expect("run gcc");
    assert!(
        o.status.success(),
        "gcc {flags:?} {sources:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out.to_path_buf()
}

/// [`gcc`] of `src_dir/NAME.c` into `dir/NAME`: the usual test program.
pub fn compile_c(dir: &Path, src_dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    gcc(
        &dir.join(name),
        &[&src_dir.join(format!("{name}.c"))],
        flags,
    )
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
