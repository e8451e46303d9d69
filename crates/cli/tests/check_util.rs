//! Helpers the `check` test modules share: running `proftrust` quietly and reading its JSON.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `proftrust` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_proftrust");

/// The golden fixtures (`tiny` and its profiles).
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/fixtures")
}

/// The C programs of the check tests (`tests/check/*.c`).
pub fn programs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/check")
}

/// `proftrust -q ARGS` in the C locale.
pub fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("-q")
        .args(args)
        .env("LC_ALL", "C")
        .output()
        .expect("run proftrust")
}

/// The JSON `proftrust -q ARGS` prints; panics with its stderr when it fails.
pub fn json(args: &[&str]) -> Value {
    let out = run(args);
    assert!(
        out.status.success(),
        "proftrust {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// The row named `name` of a table.
pub fn row<'a>(rows: &'a Value, name: &str) -> &'a Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no row {name} in {rows}"))
}

/// A JSON number.
pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

/// `perf record -q FLAGS -o DATA -- PROG ARG`; `Err` with perf's stderr when it fails (no
/// perf_event_open: `perf_event_paranoid`), for the caller to skip on.
pub fn perf_record(flags: &[&str], data: &Path, prog: &Path, arg: &str) -> Result<(), String> {
    record("perf", &["record", "-q"], flags, data, prog, arg)
}

/// `proftrust -q record FLAGS -o DATA -- PROG ARG`; `Err` with its stderr when it fails.
pub fn pt_record(flags: &[&str], data: &Path, prog: &Path, arg: &str) -> Result<(), String> {
    record(BIN, &["-q", "record"], flags, data, prog, arg)
}

fn record(
    tool: &str,
    command: &[&str],
    flags: &[&str],
    data: &Path,
    prog: &Path,
    arg: &str,
) -> Result<(), String> {
    let out = Command::new(tool)
        .args(command)
        .args(flags)
        .arg("-o")
        .arg(data)
        .arg("--")
        .arg(prog)
        .arg(arg)
        .output()
        .map_err(|e| format!("{tool} did not start: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{tool} record failed (perf_event_paranoid?): {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}
