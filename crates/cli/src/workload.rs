//! The bundled workloads, shared by every subcommand that runs a program: `--workload NAME
//! [--size N]` stands for `-- DIR/NAME N`, built on first use into a user cache directory
//! ([`workload_dir`]). Two kinds: small
//! C kernels (`workloads/*.c`, after the case studies of seed 000 §4, built with gcc), and
//! real third-party code (`workloads/thirdparty`: bzip2, zlib, Lua, SQLite from the C
//! sources vendored in crates.io's -sys crates, Rust's regex and std sorting; built with
//! cargo from crates.io sources).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;

use crate::util;

/// Bundled workloads (workloads/*.c), after the case studies of seed 000 §4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Viterbi-like loop with data-dependent branches.
    Hmmer,
    /// Sparse dot product inlined into a loop with heavy loads.
    Soplex,
    /// Pointer chase through a tiny inlined accessor.
    Omnet,
    /// Strided loop with an inlined predicate.
    Mcf,
    /// Kernel calling a dot product and exp().
    Libsvm,
    /// Third-party: libbzip2 1.0.8 (bzip2-sys) compressing and decompressing text.
    Bzip2,
    /// Third-party: zlib (libz-sys) deflating and inflating text at three levels.
    Zlib,
    /// Third-party: the Lua 5.4 interpreter (lua-src) running a small benchmark script.
    Lua,
    /// Third-party: SQLite (libsqlite3-sys bundled) inserts, an index, joins, aggregates.
    Sqlite,
    /// Third-party: Rust's regex crate, several patterns over text.
    Regex,
    /// Third-party: Rust std sorting (integers, strings, records) and a BTreeMap.
    Sort,
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Hmmer => "hmmer",
            Workload::Soplex => "soplex",
            Workload::Omnet => "omnet",
            Workload::Mcf => "mcf",
            Workload::Libsvm => "libsvm",
            Workload::Bzip2 => "bzip2",
            Workload::Zlib => "zlib",
            Workload::Lua => "lua",
            Workload::Sqlite => "sqlite",
            Workload::Regex => "regex",
            Workload::Sort => "sort",
        }
    }

    /// Whether it is third-party code built with cargo (else a C kernel built with gcc).
    fn third_party(self) -> bool {
        !matches!(
            self,
            Workload::Hmmer | Workload::Soplex | Workload::Omnet | Workload::Mcf | Workload::Libsvm
        )
    }

    fn source(self) -> &'static str {
        match self {
            Workload::Hmmer => include_str!("../../../workloads/hmmer.c"),
            Workload::Soplex => include_str!("../../../workloads/soplex.c"),
            Workload::Omnet => include_str!("../../../workloads/omnet.c"),
            Workload::Mcf => include_str!("../../../workloads/mcf.c"),
            Workload::Libsvm => include_str!("../../../workloads/libsvm.c"),
            // Built with cargo from workloads/thirdparty (THIRD_PARTY).
            _ => "",
        }
    }
}

const HEADER: &str = include_str!("../../../workloads/common.h");

/// The third-party workload project (`workloads/thirdparty`), file by file: written under
/// the workload directory and built there with cargo.
const THIRD_PARTY: &[(&str, &str)] = &[
    (
        "Cargo.toml",
        include_str!("../../../workloads/thirdparty/Cargo.toml"),
    ),
    (
        "Cargo.lock",
        include_str!("../../../workloads/thirdparty/Cargo.lock"),
    ),
    (
        "src/lib.rs",
        include_str!("../../../workloads/thirdparty/src/lib.rs"),
    ),
    (
        "src/bin/bzip2.rs",
        include_str!("../../../workloads/thirdparty/src/bin/bzip2.rs"),
    ),
    (
        "src/bin/zlib.rs",
        include_str!("../../../workloads/thirdparty/src/bin/zlib.rs"),
    ),
    (
        "src/bin/lua.rs",
        include_str!("../../../workloads/thirdparty/src/bin/lua.rs"),
    ),
    (
        "src/bin/sqlite.rs",
        include_str!("../../../workloads/thirdparty/src/bin/sqlite.rs"),
    ),
    (
        "src/bin/regex.rs",
        include_str!("../../../workloads/thirdparty/src/bin/regex.rs"),
    ),
    (
        "src/bin/sort.rs",
        include_str!("../../../workloads/thirdparty/src/bin/sort.rs"),
    ),
];

/// Builds the third-party workloads with cargo (crates.io sources, C code with `-O2 -g
/// -fno-omit-frame-pointer`, Rust with debug info and frame pointers) under
/// `dir/thirdparty`, unless the project there is unchanged and built; returns `w`'s
/// executable. cargo's own lock serialises concurrent builds.
fn build_third_party(dir: &std::path::Path, w: Workload) -> Result<PathBuf> {
    let proj = dir.join("thirdparty");
    let exe = proj.join("target/release").join(w.name());
    let fresh = THIRD_PARTY
        .iter()
        .all(|(f, text)| std::fs::read_to_string(proj.join(f)).ok().as_deref() == Some(*text))
        && exe.is_file();
    if fresh {
        return Ok(exe);
    }
    for (f, text) in THIRD_PARTY {
        let path = proj.join(f);
        if std::fs::read_to_string(&path).ok().as_deref() == Some(*text) {
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        let mut tmp = path.clone().into_os_string();
        tmp.push(format!(".tmp{}", std::process::id()));
        std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", path.display()))?;
        std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))?;
    }
    util::note(format!(
        "building the third-party workloads (bzip2, zlib, lua, sqlite, regex, sort) in {} with cargo: a few minutes the first time",
        proj.display()
    ));
    let out = std::process::Command::new(
        std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
    )
    .args([
        "build",
        "--release",
        "--locked",
        "--quiet",
        "--manifest-path",
    ])
    .arg(proj.join("Cargo.toml"))
    .arg("--target-dir")
    .arg(proj.join("target"))
    .env("CFLAGS", "-O2 -g -fno-omit-frame-pointer")
    .env("RUSTFLAGS", "-C force-frame-pointers=yes")
    .output()
    .context(
        "cannot run cargo to build the third-party workloads (install Rust: https://rustup.rs)",
    )?;
    if !out.status.success() {
        bail!(
            "cargo failed to build the third-party workloads in {}: {}",
            proj.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(exe)
}

/// Largest `--size`: 100 times the default, about 50 s natively (the work grows linearly).
pub const MAX_SIZE: u64 = 10_000;

/// `--workload NAME [--size N]`, flattened into the subcommands that run a program.
#[derive(Debug, Clone, clap::Args)]
pub struct WorkloadArgs {
    /// Run a bundled workload instead of a program after `--` (built on first use into
    /// $PROFTRUST_WORKLOAD_DIR, else $XDG_CACHE_HOME/proftrust/workloads, else
    /// ~/.cache/proftrust/workloads).
    #[arg(long, value_enum)]
    pub workload: Option<Workload>,
    /// Size scale of the bundled workload (100 = about 0.5 s natively), 1 to 10000 (the
    /// largest runs about 50 s natively and hours under QEMU's tracing).
    #[arg(long, default_value_t = 100, requires = "workload",
          value_parser = crate::args::int::<u64>(1, MAX_SIZE))]
    pub size: u64,
}

impl WorkloadArgs {
    /// The command to run: the built workload and its size, or `command` unchanged (gcc's
    /// version goes into `versions` when given). Both at
    /// once is an error; neither gives an empty command (the caller says what is missing).
    pub fn command<T: From<String>>(
        &self,
        command: Vec<T>,
        versions: Option<&mut BTreeMap<String, String>>,
    ) -> Result<Vec<T>> {
        match self.workload {
            None => Ok(command),
            Some(_) if !command.is_empty() => {
                bail!("give either --workload or a program after `--`, not both")
            }
            Some(w) => {
                let exe = build(w, versions)?;
                let exe = exe.into_os_string().into_string().map_err(|p| {
                    anyhow::anyhow!(
                        "the workload directory {} is not UTF-8; set PROFTRUST_WORKLOAD_DIR",
                        PathBuf::from(p).display()
                    )
                })?;
                Ok(vec![T::from(exe), T::from(self.size.to_string())])
            }
        }
    }
}

/// Where the bundled workloads are built, in this order: `$PROFTRUST_WORKLOAD_DIR`;
/// `$XDG_CACHE_HOME/proftrust/workloads` (an absolute `XDG_CACHE_HOME` only, as the XDG base
/// directory specification says); `$HOME/.cache/proftrust/workloads`. A user cache rather than
/// the current directory: the same build serves every directory proftrust runs in, and none
/// gets a `target/` it did not ask for. `env` reads the environment (a parameter for tests).
pub fn workload_dir(env: impl Fn(&str) -> Option<std::ffi::OsString>) -> Result<PathBuf> {
    let nonempty = |k: &str| env(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(d) = nonempty("PROFTRUST_WORKLOAD_DIR") {
        return Ok(d);
    }
    if let Some(x) = nonempty("XDG_CACHE_HOME").filter(|p| p.is_absolute()) {
        return Ok(x.join("proftrust/workloads"));
    }
    match nonempty("HOME") {
        Some(h) => Ok(h.join(".cache/proftrust/workloads")),
        None => bail!(
            "cannot tell where to build the workload: neither HOME nor XDG_CACHE_HOME is set; set PROFTRUST_WORKLOAD_DIR=DIR"
        ),
    }
}

/// Builds a bundled workload into [`workload_dir`] with
/// `gcc -O2 -g -fno-omit-frame-pointer`, unless an up-to-date build is there. Every file is
/// written under a temporary name and renamed into place, so two proftrust processes
/// building at once never run (or compile) a half-written file.
fn build(w: Workload, versions: Option<&mut BTreeMap<String, String>>) -> Result<PathBuf> {
    let dir = workload_dir(|k| std::env::var_os(k))?;
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    if w.third_party() {
        let exe = build_third_party(&dir, w)?;
        return std::fs::canonicalize(&exe)
            .with_context(|| format!("cannot find {}", exe.display()));
    }
    let src = dir.join(format!("{}.c", w.name()));
    let hdr = dir.join("common.h");
    let exe = dir.join(w.name());
    let fresh = std::fs::read_to_string(&src).ok().as_deref() == Some(w.source())
        && std::fs::read_to_string(&hdr).ok().as_deref() == Some(HEADER)
        && exe.is_file();
    if let Some(v) = versions {
        v.insert(
            "gcc".into(),
            proftrust_pipeline::program::tool_version("gcc", &["--version"]),
        );
    }
    if !fresh {
        let tmp = |p: &PathBuf| {
            let mut s = p.clone().into_os_string();
            s.push(format!(".tmp{}", std::process::id()));
            PathBuf::from(s)
        };
        let put = |path: &PathBuf, text: &str| -> Result<()> {
            let t = tmp(path);
            std::fs::write(&t, text).with_context(|| format!("cannot write {}", t.display()))?;
            std::fs::rename(&t, path).with_context(|| format!("cannot write {}", path.display()))
        };
        put(&hdr, HEADER)?;
        put(&src, w.source())?;
        util::note(format!(
            "building workload {} in {}",
            w.name(),
            dir.display()
        ));
        let exe_tmp = tmp(&exe);
        let out = std::process::Command::new("gcc")
            .args(["-O2", "-g", "-fno-omit-frame-pointer", "-o"])
            .arg(&exe_tmp)
            .arg(&src)
            .arg("-lm")
            .output()
            .context("cannot run gcc to build the workload (apt-get install gcc)")?;
        if !out.status.success() {
            let _ = std::fs::remove_file(&exe_tmp);
            bail!(
                "gcc failed to build {}: {}",
                src.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::fs::rename(&exe_tmp, &exe)
            .with_context(|| format!("cannot write {}", exe.display()))?;
    }
    std::fs::canonicalize(&exe).with_context(|| format!("cannot find {}", exe.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn dir(vars: &[(&str, &str)]) -> Result<PathBuf> {
        let vars: Vec<(String, OsString)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        workload_dir(|k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
    }

    #[test]
    fn workload_dir_follows_xdg() {
        let all = [
            ("PROFTRUST_WORKLOAD_DIR", "/w"),
            ("XDG_CACHE_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(dir(&all).unwrap(), PathBuf::from("/w"));
        assert_eq!(
            dir(&all[1..]).unwrap(),
            PathBuf::from("/x/proftrust/workloads")
        );
        assert_eq!(
            dir(&all[2..]).unwrap(),
            PathBuf::from("/h/.cache/proftrust/workloads")
        );
        // A relative XDG_CACHE_HOME is ignored (XDG base directory specification); empty
        // values count as unset.
        assert_eq!(
            dir(&[
                ("XDG_CACHE_HOME", "rel"),
                ("HOME", "/h"),
                ("PROFTRUST_WORKLOAD_DIR", "")
            ])
            .unwrap(),
            PathBuf::from("/h/.cache/proftrust/workloads")
        );
        assert!(dir(&[])
            .unwrap_err()
            .to_string()
            .contains("PROFTRUST_WORKLOAD_DIR"));
    }
}
