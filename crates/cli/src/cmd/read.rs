//! `proftrust read FILE [--binary PATH]... [--json] [--script]`: what a profile file holds.
//!
//! Reads perf.data, `perf script` text, callgrind out files and proftrust's own sample
//! (`PTSAMP01`) and exact (`PTEXACT1`) files; the format is sniffed from the first bytes
//! unless `--format` says.
//!
//! JSON contract (kept stable):
//!
//! * sample files (`format` = `perf.data`, `perf-script` or `samples`): `events` (each
//!   `name`, `samples`), `lost`, `samples` (all events), `symbols` (each `name`, `module`,
//!   `samples`, counted over all events, sorted by samples, largest first); with several
//!   events each event also has its own `symbols` table (the text output then prints one
//!   table per event, as `perf report` does); a file with branch stacks adds `branches`
//!   (each `from`, `to`, `count`, `mispredicted`: the aggregated table, most frequent
//!   first) and, with `--branch-stacks`, `branch_stacks` (each `sample`, `event`,
//!   `branches`: `from`, `to`, `mispredicted` true/false/null, `cycles`), every address
//!   `{module, address (SVMA), symbol}` (docs/file-formats.md); a proftrust sample file of
//!   a run that did not end normally adds `outcome` (`{"kind":"interrupted",...}`), and the
//!   text says `ENDED EARLY: ...`;
//! * callgrind (`format` = `callgrind`): `total_instructions` (the `Ir` total),
//!   `functions` (each `name`, `instructions` = self Ir, sorted), `events` (each `name`,
//!   `total`);
//! * exact files (`format` = `exact`): `total_instructions`, `functions` (each `name`,
//!   `module`, `instructions`, sorted by instructions).
//!
//! The pipeline (`proftrust_pipeline::read`) reads the file; the report and its rendering
//! are in `proftrust_report::read`.

use crate::util;
use proftrust_formats::Format;
use proftrust_pipeline::read::ReadOptions;
use std::path::PathBuf;

/// Arguments of `proftrust read`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Profile file: perf.data, perf script text, callgrind.out, or a proftrust sample or
    /// exact file. `-` or nothing reads standard input.
    file: Option<PathBuf>,
    /// A binary of the profile (matched to modules by build-id, else file name); repeat for
    /// several. Modules are otherwise looked up as perf does (see --symfs; `-v` shows each
    /// step).
    #[arg(long = "binary", value_name = "PATH")]
    binaries: Vec<PathBuf>,
    /// Look for each module at DIR/RECORDED_PATH first (perf's --symfs), then in perf's
    /// build-id cache, the debuginfod cache, /usr/lib/debug/.build-id, the recorded path.
    #[arg(long, value_name = "DIR")]
    symfs: Option<PathBuf>,
    /// Name kernel samples from this copy of /proc/kallsyms (taken on the recording machine,
    /// as root).
    #[arg(long, value_name = "FILE")]
    kallsyms: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long, conflicts_with = "script")]
    json: bool,
    /// Print the samples as perf-script-like text (module-relative addresses).
    #[arg(long)]
    script: bool,
    /// With --json, also each sample's branch stack (`branch_stacks`; the aggregated branch
    /// table `branches` is always there). Tens of megabytes for a few thousand samples.
    #[arg(long, requires = "json")]
    branch_stacks: bool,
    /// Read the file as this format instead of guessing.
    #[arg(long, value_parser = crate::args::named::<Format>())]
    format: Option<Format>,
    /// Rows of the text table (0 = all).
    #[arg(long, default_value_t = 30)]
    top: usize,
}

/// Runs `proftrust read`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let mut o = ReadOptions::default();
    if let Some(f) = &a.file {
        o.file = f.clone();
    }
    o.binaries = a.binaries.clone();
    o.symfs = a.symfs.clone();
    o.kallsyms = a.kallsyms.clone();
    o.format = a.format;
    o.branch_stacks = a.branch_stacks;
    if a.script {
        let stdout = std::io::stdout();
        let warnings = proftrust_pipeline::read::script(&o, &mut stdout.lock(), &util::Ui)?;
        for w in &warnings {
            util::note(format!("warning: {w}"));
        }
        return Ok(());
    }
    let report = proftrust_pipeline::read::execute(&o, &util::Ui)?;
    crate::output::write_report(&report, &crate::output::ReportTo::Stdout, a.json, a.top)
}
