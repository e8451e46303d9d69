//! `proftrust audit`: can I trust this profile? The arguments become
//! [`proftrust_pipeline::audit::AuditOptions`]; the report is rendered by `proftrust-report`.

use crate::output::ReportTo;
use crate::util;
use crate::workload::WorkloadArgs;
use anyhow::{bail, Context, Result};
use clap::Args;
use proftrust_pipeline::audit::{AuditInput, AuditOptions};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

/// `proftrust vpmu`'s default skid as `--correct-skid` reads it without a value.
const DEFAULT_SKID_TEXT: &str = "30";
const _: () = assert!(proftrust_pipeline::vpmu::DEFAULT_SKID == 30);

/// Compare a sampling profile with the exact truth of the same run.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  proftrust audit --workload omnet\n  proftrust audit --html report.html -- ./prog arg\n  proftrust audit --samples perf.data -- ./prog arg\n  proftrust audit --samples perf.data --truth callgrind.out.123 --binary ./prog\n  proftrust audit --sweep 64K,256K,1M,4M --workload mcf\n\nWhere the report goes: when the audit runs the program to record it (`-- PROGRAM`,\n--workload), the program's own output stays on stdout and stderr and the report goes to\nstderr, as perf stat does, or to -o FILE (-o - puts it on stdout and moves the program's\nstdout to stderr); otherwise the report is printed on stdout."
)]
pub struct AuditArgs {
    /// Existing samples: perf.data, `perf script` text, or a proftrust sample file. With
    /// --truth FILE both sides are read; with the program after `--` instead, the audit
    /// counts that program exactly (the run perf recorded); with --truth-weight lbr-time
    /// alone, the samples' branch stacks are the truth.
    #[arg(long, value_name = "FILE", conflicts_with = "workload")]
    samples: Option<PathBuf>,
    /// Existing exact counts: a callgrind.out file (--dump-instr=yes) or a proftrust exact file.
    #[arg(long, value_name = "FILE", requires = "samples")]
    truth: Option<PathBuf>,
    /// Binary to audit (repeat for more). Default: the binary holding the most samples (the
    /// program, or the library where its time is, e.g. libbz2 for bzip2), stated in the
    /// report. With --samples, the files' modules are matched to these binaries by
    /// build-id, else file name.
    #[arg(long, value_name = "PATH")]
    binary: Vec<PathBuf>,
    /// With --samples/--truth: look for each module at DIR/RECORDED_PATH first (perf's
    /// --symfs), then in the build-id caches and at the recorded path.
    #[arg(long, value_name = "DIR", requires = "samples")]
    symfs: Option<PathBuf>,
    #[command(flatten)]
    wl: WorkloadArgs,
    #[command(flatten)]
    sampling: crate::flag_groups::Sampling,
    #[command(flatten)]
    exact_side: crate::flag_groups::ExactSide,
    /// Sweep of periods, e.g. 64K,128K,256K,1M,4M,16M: records once per period with and
    /// without randomisation and reports metrics against period.
    #[arg(long, value_delimiter = ',', value_parser = crate::args::period)]
    sweep: Vec<u64>,
    /// Print the JSON report instead of the table (where the report goes: see below).
    #[arg(long)]
    json: bool,
    /// Write the report (table, or JSON with --json) to FILE; `-` for stdout. Default:
    /// stdout, or stderr when the audit runs the program and shows its output (so the
    /// two never mix, as perf stat does).
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Write a self-contained HTML report (`-` for standard output).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Functions shown in the table.
    #[arg(long, default_value_t = 15, value_parser = crate::args::int::<usize>(1, 1_000_000))]
    top: usize,
    /// Exact share from which a function without samples enters Kendall tau-b and the top-k
    /// overlaps (sampled functions always do); 0 ranks every executed function.
    #[arg(long, value_name = "SHARE", default_value_t = 0.01, value_parser = crate::args::share)]
    rank_threshold: f64,
    /// Which event of the samples to compare, by name (`instructions:vpmu`, `cycles`). Default:
    /// the instructions event when there is one, else the first.
    #[arg(long, value_name = "NAME")]
    sample_event: Option<String>,
    /// Also undo a skid of this many cycles (paper 000, whole-program flow solver, as
    /// `proftrust correct`) and show the corrected profile beside the raw one; without a
    /// value, 30 cycles, `proftrust vpmu`'s default skid. Needs instruction and cycle samples
    /// of one run: a `proftrust vpmu` file, or perf.data from `perf record -e
    /// instructions,cycles`.
    #[arg(long, value_name = "CYCLES", value_parser = crate::args::skid, num_args = 0..=1,
          default_missing_value = DEFAULT_SKID_TEXT)]
    correct_skid: Option<f64>,
    /// Export the audited profile: FORMAT:FILE (repeat), FORMAT one of pprof, firefox,
    /// speedscope, folded, flamegraph, llvm-sample (the samples, or the corrected profile
    /// with --correct-skid), folded-diff, flamegraph-diff (samples -> exact), annotate,
    /// annotate-html (samples against exact, and corrected); FORMAT@SIDE:FILE picks the
    /// side (samples, exact, corrected). See docs/export.md.
    #[arg(long = "export", value_name = "FORMAT:FILE", value_parser = proftrust_pipeline::export::parse_export_spec)]
    export: Vec<proftrust_pipeline::export::ExportSpec>,
    /// Stop the program (each run) after this many seconds (at most 30 days).
    #[arg(long, value_name = "SECS", value_parser = crate::args::timeout)]
    timeout: Option<std::time::Duration>,
    /// Program and arguments to profile.
    #[arg(last = true, value_name = "PROGRAM")]
    command: Vec<OsString>,
}

impl AuditArgs {
    /// The pipeline's options (builds a bundled workload if one is named).
    fn options(&self) -> Result<AuditOptions> {
        let mut tool_versions = BTreeMap::new();
        let input = match (&self.samples, &self.truth) {
            (Some(samples), Some(truth)) => {
                if self.wl.workload.is_some() || !self.command.is_empty() {
                    bail!("--samples/--truth compare existing files; do not also give a program to run (or drop --truth to count the program exactly)");
                }
                AuditInput::Files {
                    samples: samples.clone(),
                    truth: truth.clone(),
                }
            }
            (Some(samples), None) => {
                // (--workload conflicts with --samples in clap.)
                let lbr = self.exact_side.truth_weight == proftrust_metrics::TruthWeight::LbrTime;
                match (self.command.is_empty(), lbr) {
                    (true, true) => AuditInput::Samples {
                        samples: samples.clone(),
                    },
                    (true, false) => bail!("--samples needs --truth FILE (the exact counts to compare with), the program that was recorded after `--` (proftrust audit --samples perf.data -- ./prog args), or --truth-weight lbr-time when the samples carry branch stacks with cycle counts"),
                    (false, _) => AuditInput::SamplesAndRun {
                        samples: samples.clone(),
                        command: self.command.clone(),
                    },
                }
            }
            _ => AuditInput::Run {
                command: self
                    .wl
                    .command(self.command.clone(), Some(&mut tool_versions))?,
            },
        };
        let mut o = AuditOptions::default();
        o.input = input;
        o.binaries = self.binary.clone();
        o.symfs = self.symfs.clone();
        self.sampling.apply(&mut o);
        self.exact_side.apply(&mut o);
        o.sweep = self.sweep.clone();
        o.rank_threshold = self.rank_threshold;
        o.sample_event = self.sample_event.clone();
        o.correct_skid = self.correct_skid;
        o.timeout = self.timeout;
        o.stop = Some(crate::interrupt::install());
        o.tool_versions = tool_versions;
        Ok(o)
    }
}

/// Runs `proftrust audit`.
pub fn run(args: AuditArgs) -> Result<()> {
    crate::output::check_opt(args.html.as_ref()).context("--html")?;
    let to_file = args.output.as_ref().filter(|p| p.as_os_str() != "-");
    crate::output::check_opt(to_file).context("-o")?;
    crate::output::check_exports(&args.export)?;
    let options = args.options()?;
    // Only a recording shows the program's output (the exact run's is not shown).
    let shows_output = matches!(options.input, AuditInput::Run { .. });
    let to = match (&args.output, shows_output) {
        (Some(p), _) if p.as_os_str() != "-" => ReportTo::File(p.clone()),
        (Some(_), _) | (None, false) => ReportTo::Stdout,
        (None, true) => ReportTo::Stderr,
    };
    // The report on stdout must not mix with the program's output: that goes to stderr.
    let guard = match (&to, shows_output) {
        (ReportTo::Stdout, true) => Some(util::StdoutToStderr::new()?),
        _ => None,
    };
    let (report, data) = proftrust_pipeline::audit::execute_with_data(&options, &util::Ui)?;
    drop(guard);
    if !args.export.is_empty() {
        let sides = proftrust_pipeline::export::audit_sides(&data);
        crate::output::write_exports(&args.export, &sides.sides())?;
    }
    if let Some(h) = &args.html {
        let extras = proftrust_pipeline::export::audit_html_extras(&data, &util::Ui);
        let html = proftrust_report::render_html_with(&report, &extras);
        crate::output::write_text(Some(h), &html)?;
        util::note(format!("HTML report written to {}", h.display()));
    }
    crate::output::write_report(&report, &to, args.json, args.top)
}
