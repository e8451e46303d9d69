//! `proftrust fleet …`: runs the `proftrust-fleet` binary (git and cargo style).
//!
//! Fleet's query engine (Apache DataFusion, Arrow, Parquet; optionally Ballista) takes most of
//! an hour to compile on two cores, so it is its own binary (`crates/fleet-cli`), built by
//! `cargo build --release -p proftrust-fleet-cli`; the `proftrust` binary and the library
//! crates do not pull it. `proftrust fleet ARGS…` replaces this process with
//! `proftrust-fleet ARGS…`, looked for beside this executable first (where cargo puts both),
//! then on `PATH`; when it is in neither place the error names the command that builds it.
//! The contract of `fleet ingest`/`report`/`diff` is the fleet binary's (docs/fleet.md).

use anyhow::{bail, Context};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The fleet binary's file name.
pub const FLEET_BIN: &str = "proftrust-fleet";

/// What builds the fleet binary, as the error says it.
pub const BUILD_COMMAND: &str = "cargo build --release -p proftrust-fleet-cli";

/// Arguments of `proftrust fleet`: everything after `fleet`, handed to `proftrust-fleet`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Arguments of `proftrust-fleet` (`ingest`, `report`, `diff`; `--help` lists them).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "ARGS"
    )]
    args: Vec<OsString>,
}

/// `proftrust-fleet` beside `exe`, else the first on `path` (a `PATH` value).
pub fn find_fleet(exe: Option<&Path>, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    let beside = exe.and_then(Path::parent).map(|d| d.join(FLEET_BIN));
    let on_path = path
        .into_iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join(FLEET_BIN));
    beside.into_iter().chain(on_path).find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Replaces this process with `proftrust-fleet`, passing `-v`/`-q` given before `fleet`.
pub fn run(a: Args, verbose: u8, quiet: bool) -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().ok();
    let Some(bin) = find_fleet(exe.as_deref(), std::env::var_os("PATH").as_deref()) else {
        bail!(
            "`proftrust fleet` runs the separately built {FLEET_BIN} binary, which is neither \
             beside {} nor on PATH: build it with `{BUILD_COMMAND}` (Apache DataFusion: \
             ~25 minutes on 2 cores the first time; docs/fleet.md)",
            exe.as_deref()
                .and_then(Path::parent)
                .map_or_else(|| "proftrust".to_string(), |d| d.display().to_string())
        );
    };
    let mut cmd = std::process::Command::new(&bin);
    cmd.args(std::iter::repeat_n("-v", usize::from(verbose)));
    if quiet {
        cmd.arg("-q");
    }
    cmd.args(&a.args);
    let e = cmd.exec();
    Err(e).with_context(|| format!("cannot run {}", bin.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(dir: &Path, name: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    #[test]
    fn beside_the_executable_comes_before_path() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let beside = script(a.path(), FLEET_BIN);
        let on_path = script(b.path(), FLEET_BIN);
        let exe = a.path().join("proftrust");
        let path = std::env::join_paths([b.path()]).unwrap();
        assert_eq!(find_fleet(Some(&exe), Some(&path)), Some(beside.clone()));
        std::fs::remove_file(&beside).unwrap();
        assert_eq!(find_fleet(Some(&exe), Some(&path)), Some(on_path));
    }

    #[test]
    fn a_file_that_is_not_executable_is_not_taken() {
        let a = tempfile::tempdir().unwrap();
        std::fs::write(a.path().join(FLEET_BIN), "").unwrap();
        let exe = a.path().join("proftrust");
        assert_eq!(find_fleet(Some(&exe), None), None);
    }
}
