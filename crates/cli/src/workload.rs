//! The bundled workloads (`workloads/*.c`, after the case studies of seed 000 §4), shared by
//! every subcommand that runs a program: `--workload NAME [--size N]` stands for
//! `-- target/workloads/NAME N`, built on first use.

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
}

impl Workload {
    pub fn name(self) -> &'static str {
        match self {
            Workload::Hmmer => "hmmer",
            Workload::Soplex => "soplex",
            Workload::Omnet => "omnet",
            Workload::Mcf => "mcf",
            Workload::Libsvm => "libsvm",
        }
    }

    fn source(self) -> &'static str {
        match self {
            Workload::Hmmer => include_str!("../../../workloads/hmmer.c"),
            Workload::Soplex => include_str!("../../../workloads/soplex.c"),
            Workload::Omnet => include_str!("../../../workloads/omnet.c"),
            Workload::Mcf => include_str!("../../../workloads/mcf.c"),
            Workload::Libsvm => include_str!("../../../workloads/libsvm.c"),
        }
    }
}

const HEADER: &str = include_str!("../../../workloads/common.h");

/// `--workload NAME [--size N]`, flattened into the subcommands that run a program.
#[derive(Debug, Clone, clap::Args)]
pub struct WorkloadArgs {
    /// Run a bundled workload instead of a program after `--` (built with gcc -O2 -g into
    /// target/workloads, or $PROFTRUST_WORKLOAD_DIR).
    #[arg(long, value_enum)]
    pub workload: Option<Workload>,
    /// Size scale of the bundled workload (100 = about 0.5 s natively).
    #[arg(long, default_value_t = 100, requires = "workload",
          value_parser = clap::value_parser!(u64).range(1..))]
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

/// Builds a bundled workload into `target/workloads` (or `$PROFTRUST_WORKLOAD_DIR`) with
/// `gcc -O2 -g -fno-omit-frame-pointer`, unless an up-to-date build is there. Every file is
/// written under a temporary name and renamed into place, so two proftrust processes
/// building at once never run (or compile) a half-written file.
fn build(w: Workload, versions: Option<&mut BTreeMap<String, String>>) -> Result<PathBuf> {
    let dir = std::env::var_os("PROFTRUST_WORKLOAD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target/workloads"));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
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
