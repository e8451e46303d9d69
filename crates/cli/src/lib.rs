//! `proftrust`: can I trust this profile?
//!
//! The library behind the thin `proftrust` binary (`src/main.rs` calls [`main`]); the
//! separately built `proftrust-fleet` binary (`crates/fleet-cli`) shares its [`util`],
//! [`output`], [`args`] and [`pipe`] so both print notes, errors and files alike.
//! One thin binary over the library crates. Each subcommand lives in `cmd/<name>.rs` with its
//! own clap `Args` struct, which it turns into the plain options of
//! `proftrust_pipeline::<command>` (every command but `export`, which calls the pipeline's
//! export functions directly), calls `execute` and renders the report (`proftrust-report`); libraries never see clap, and no
//! subcommand imports another (shared flags: `trace_args.rs`, `workload.rs`, `parse.rs`). Errors are `anyhow` here only; [`main`] prints them with their hints and
//! exits with status 2.

pub mod args;
mod cmd;
mod flag_groups;
mod fleet;
mod interrupt;
pub mod output;
pub mod pipe;
mod sys;
mod trace_args;
pub mod util;
mod workload;

use clap::{Parser, Subcommand};

/// The papers the help and the reports cite as "paper 000".."paper 004" (a paper, not a
/// `--seed`, which seeds randomness); docs/references.md lists them.
const PAPERS: &str = "Papers cited as \"paper NNN\" (docs/references.md; --seed is something else: the random seed):
  paper 000  Can We Trust Profiling Results? Understanding and Fixing the Inaccuracy in Modern Profilers (skid)
  paper 001  Wu & Mencer, Evaluating Sampling Based Hotspot Detection (NRMSE_SR, SC, OD, period sweep)
  paper 002  Wen et al., Probability Analysis to Improve the Confidence in Profiling Accuracy (sampling theory)
  paper 003  Ammons, Ball & Larus, Exploiting Hardware Performance Counters with Flow and Context Sensitive Profiling (paths, CCT)
  paper 004  Perelman, Chilimbi & Calder, Variational Path Profiling (vpp)";

/// Tells whether a sampling profile can be trusted, and fixes it when it cannot.
#[derive(Debug, Parser)]
#[command(name = "proftrust", version, about, long_about = None, propagate_version = true,
          after_help = PAPERS)]
struct Cli {
    /// More detail on stderr (repeat for more).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// No progress bars or notes on stderr; errors are still printed.
    #[arg(short, long, global = true)]
    quiet: bool,
    /// Largest ratio of decompressed to compressed size of a gzip, zstd or xz profile
    /// (decompressions up to 64 MiB pass whatever the ratio): past it the file is refused as
    /// a likely decompression bomb. Real profiles compress 4x to about 260x.
    #[arg(long, global = true, value_name = "N", default_value_t = proftrust_formats::DEFAULT_MAX_RATIO,
          value_parser = crate::args::int::<u64>(1, 1 << 40))]
    max_decompression_ratio: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    // One variant per subcommand here and one arm in `run` below.
    /// Can I trust this profile? Samples against exact counts, with metrics and reports.
    Audit(cmd::audit::AuditArgs),
    /// Running granularity and sampling-interval analysis of real samples (paper 002 §5.1).
    Analyze(cmd::analyze::Args),
    /// Sampling-theory simulations (paper 002): paper tables, aliasing, Wilson coverage.
    Simulate(cmd::simulate::Args),
    /// Fit the skid S of a PMU from a kernel with a known instruction mix (paper 000).
    Calibrate(cmd::calibrate::Args),
    /// Undo counter skid in an instruction profile by simple-loop fitting (paper 000).
    Correct(cmd::correct::Args),
    /// Any profile into pprof, Firefox Profiler, speedscope, flame graphs, annotated
    /// source, LLVM sample profiles (PGO).
    Export(cmd::export::Args),
    /// Many hosts' profiles in a Parquet store: fleet shares with intervals, host
    /// deviations, label diffs (DataFusion embedded, or a Ballista cluster). Runs the
    /// `proftrust-fleet` binary, built on its own: cargo build --release -p proftrust-fleet-cli
    #[command(disable_help_flag = true)]
    Fleet(fleet::Args),
    /// What proftrust sees in a binary: functions, basic blocks, loops, CFG (--function), dot.
    Inspect(cmd::inspect::Args),
    /// Run a program under a virtual PMU with skid and write the samples it would take.
    Vpmu(cmd::vpmu::Args),
    /// Sample a program (or --pid) with perf_event_open into a native sample file.
    Record(cmd::record::Args),
    /// What a profile file holds: perf.data, perf script, callgrind, proftrust files.
    Read(cmd::read::Args),
    /// Exact Ball-Larus path profile of a program, with instructions per path (paper 003).
    Paths(cmd::paths::Args),
    /// Exact calling context tree of a program; gprof's error; sampled contexts vs exact.
    Cct(cmd::cct::Args),
    /// How far to trust one profile when the run cannot be repeated: intervals, aliasing,
    /// granularity, skid, recording health, a verdict per row.
    Check(cmd::check::Args),
    /// Exact per-instruction counts of a program (QEMU plugin or callgrind) into an exact file.
    Truth(cmd::truth::Args),
    /// Variational path profiling (paper 004): paths ranked by net variation in their timing.
    Vpp(cmd::vpp::Args),
    /// Internal: kills the process groups of proftrust's runs if proftrust dies.
    #[command(name = "__watchdog", hide = true)]
    Watchdog,
}

fn run(cli: Cli) -> anyhow::Result<()> {
    util::set_verbosity(cli.verbose, cli.quiet);
    proftrust_pipeline::load::set_max_decompression_ratio(cli.max_decompression_ratio);
    // Commands that run a program take over SIGINT/SIGTERM/SIGHUP before anything else, so
    // an early signal is not lost (docs/processes.md).
    if matches!(
        cli.command,
        Command::Audit(_)
            | Command::Vpmu(_)
            | Command::Record(_)
            | Command::Paths(_)
            | Command::Cct(_)
            | Command::Truth(_)
            | Command::Vpp(_)
    ) {
        interrupt::install();
    }
    match cli.command {
        Command::Audit(a) => cmd::audit::run(a),
        Command::Analyze(a) => cmd::analyze::run(a),
        Command::Simulate(a) => cmd::simulate::run(a),
        Command::Calibrate(a) => cmd::calibrate::run(a),
        Command::Correct(a) => cmd::correct::run(a),
        Command::Export(a) => cmd::export::run(a),
        Command::Fleet(a) => fleet::run(a, cli.verbose, cli.quiet),
        Command::Inspect(a) => cmd::inspect::run(a),
        Command::Vpmu(a) => cmd::vpmu::run(a),
        Command::Record(a) => cmd::record::run(a),
        Command::Read(a) => cmd::read::run(a),
        Command::Paths(a) => cmd::paths::run(a),
        Command::Cct(a) => cmd::cct::run(a),
        Command::Check(a) => cmd::check::run(a),
        Command::Truth(a) => cmd::truth::run(a),
        Command::Vpp(a) => cmd::vpp::run(a),
        Command::Watchdog => {
            interrupt::watchdog_main();
            Ok(())
        }
    }
}

/// The `proftrust` binary: parses the command line, runs the subcommand, prints an error
/// chain with its hints and exits with status 2 on failure.
pub fn main() {
    pipe::install();
    let cli = Cli::parse();
    let r = run(cli);
    if let Err(e) = &r {
        util::print_error(e);
    }
    // An interrupted command has written what it had, marked; it ends by the signal.
    interrupt::exit_if_interrupted();
    if r.is_err() {
        std::process::exit(2);
    }
}
