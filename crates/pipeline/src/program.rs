//! Programs and tools on this machine: finding a program on `PATH`, a tool's version line.

use crate::error::{Context, Error, Result};
use std::ffi::OsStr;
use std::path::PathBuf;

/// The program file `prog` names: a path when it contains a `/` (it must be a file), else
/// the first file of that name in the directories of `PATH`.
pub fn find(prog: impl AsRef<OsStr>) -> Result<PathBuf> {
    let prog = prog.as_ref();
    let p = PathBuf::from(prog);
    if p.components().count() > 1 {
        if !p.is_file() {
            return Err(Error::program_not_run(
                Some(p.display().to_string()),
                format!(
                    "{}: no such file (give the program's path, or a name on PATH)",
                    p.display()
                ),
            ));
        }
        return Ok(p);
    }
    if let Some(path) = std::env::var_os("PATH") {
        for d in std::env::split_paths(&path) {
            let c = d.join(&p);
            if c.is_file() {
                return Ok(c);
            }
        }
    }
    Err(Error::program_not_run(
        Some(p.display().to_string()),
        format!(
            "{}: not found on PATH (give the program's path)",
            p.display()
        ),
    ))
}

/// [`find`], made absolute, so that every runner of a command (recorder, QEMU, callgrind)
/// runs the very same file. Symbolic links are kept: a process is named after the path
/// `execve` is given (`sh` for `/usr/bin/sh`, not `dash`), as perf records it, and both
/// sides of an audit name it so.
pub fn find_absolute(prog: impl AsRef<OsStr>) -> Result<PathBuf> {
    let found = find(prog)?;
    std::path::absolute(&found).with_context(|| format!("program {} not found", found.display()))
}

/// First line of `tool ARGS` (stdout, else stderr), or `unavailable`.
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
