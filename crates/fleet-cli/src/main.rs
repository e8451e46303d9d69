//! `proftrust-fleet`, run as `proftrust fleet`: many hosts' profiles in a Parquet store,
//! fleet statistics as query plans on Apache DataFusion (docs/fleet.md). Built on its own
//! (`cargo build --release -p proftrust-fleet-cli`) so that the `proftrust` binary and the
//! library crates do not pull the query engine; `proftrust fleet ARGS…` execs this binary.
//!
//! Contract (kept stable):
//!
//! * `proftrust fleet ingest --host NAME [--labels k=v,...] --out DIR PROFILE...`
//! * `proftrust fleet report DIR [--engine embedded|ballista://HOST:PORT] [--json]`
//!   (also `--html FILE`, `--level function|inline|line`, `--top N`, `--event NAME`); the
//!   JSON has `hosts`, `samples` and `functions` (each `name`, `samples`, `share`,
//!   `ci_low`, `ci_high`);
//! * `proftrust fleet diff DIR --a k=v --b k=v [--json]`.

mod jobs;

use clap::Parser;
use jobs::{DiffOptions, Engine, IngestOptions, Level, ReportOptions, Rows};
use proftrust_cli::{args, output, util};
use std::io::Write;
use std::path::PathBuf;

/// Many hosts' profiles in a Parquet store: fleet shares with intervals, host deviations,
/// label diffs (DataFusion embedded, or a Ballista cluster).
#[derive(Debug, Parser)]
#[command(
    name = "proftrust fleet",
    bin_name = "proftrust fleet",
    version,
    propagate_version = true
)]
struct Args {
    /// More detail on stderr (repeat for more).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// No progress bars or notes on stderr; errors are still printed.
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Sub,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Store profiles of one host (perf.data, perf script, proftrust samples) as Parquet
    /// files in DIR (appends; never rewrites what is there).
    #[command(
        after_help = "Example:\n  proftrust fleet ingest --host web-01 --labels build=A,dc=eu --out fleet/ perf.data"
    )]
    Ingest(IngestArgs),
    /// Fleet shares with cluster-robust 95% intervals, per-host deviations, samples needed.
    #[command(after_help = "Example:\n  proftrust fleet report fleet/ --top 20 --html fleet.html")]
    Report(ReportArgs),
    /// Compare two label selections (build A vs build B) function by function, with
    /// false-discovery-rate control.
    #[command(after_help = "Example:\n  proftrust fleet diff fleet/ --a build=A --b build=B")]
    Diff(DiffArgs),
    /// Run a Ballista scheduler (built with the `ballista` feature; docs/fleet.md).
    #[cfg(feature = "ballista")]
    Scheduler(SchedulerArgs),
    /// Run a Ballista executor registered with a scheduler (feature `ballista`).
    #[cfg(feature = "ballista")]
    Executor(ExecutorArgs),
    /// Internal: write a synthetic fleet of proftrust sample files (benchmark, tests).
    #[command(hide = true)]
    Synth(SynthArgs),
}

#[cfg(feature = "ballista")]
#[derive(Debug, clap::Args)]
struct SchedulerArgs {
    /// Address to listen on (gRPC).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:50050")]
    bind: std::net::SocketAddr,
}

#[cfg(feature = "ballista")]
#[derive(Debug, clap::Args)]
struct ExecutorArgs {
    /// The scheduler's address.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:50050")]
    scheduler: std::net::SocketAddr,
    /// Address of this executor's Arrow Flight service (shuffle data).
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:50051")]
    bind: std::net::SocketAddr,
    /// Port of this executor's gRPC service (tasks).
    #[arg(long, value_name = "PORT", default_value_t = 50052, value_parser = args::int::<u16>(1, 65535))]
    grpc_port: u16,
    /// Tasks run at once.
    #[arg(long, default_value_t = 1, value_parser = args::int::<usize>(1, 1024))]
    concurrency: usize,
}

#[derive(Debug, clap::Args)]
struct SynthArgs {
    /// Binary whose largest functions the samples fall in.
    #[arg(long, value_name = "PATH")]
    binary: PathBuf,
    /// Output directory (host-NNNN.ptsamp files).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Hosts.
    #[arg(long, default_value_t = 10, value_parser = args::int::<u64>(1, 1_000_000))]
    hosts: u64,
    /// Samples over all hosts.
    #[arg(long, default_value_t = 100_000, value_parser = args::int::<u64>(1, 10_000_000_000))]
    samples: u64,
    /// Functions sampled.
    #[arg(long, default_value_t = 40, value_parser = args::int::<usize>(1, 100_000))]
    functions: usize,
    #[command(flatten)]
    seed: args::Seed,
}

/// `--rows` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum RowsArg {
    /// One row per (recording, event, binary, address) with a count.
    Aggregated,
    /// One row per sample, with its time.
    Sample,
}

/// `--level` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LevelArg {
    /// Outermost function.
    Function,
    /// Innermost inline function.
    Inline,
    /// Source line (file:line).
    Line,
}

impl From<LevelArg> for Level {
    fn from(l: LevelArg) -> Level {
        match l {
            LevelArg::Function => Level::Function,
            LevelArg::Inline => Level::Inline,
            LevelArg::Line => Level::Line,
        }
    }
}

#[derive(Debug, clap::Args)]
struct IngestArgs {
    /// Host the profiles come from (A-Z a-z 0-9 . _ -).
    #[arg(long, value_name = "NAME")]
    host: String,
    /// Labels of these recordings, `k=v,...` (e.g. build=A,week=47); repeatable.
    #[arg(long, value_name = "K=V,...")]
    labels: Vec<String>,
    /// The store directory (created when missing).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Row granularity of the samples table.
    #[arg(long, value_enum, default_value = "aggregated")]
    rows: RowsArg,
    /// A binary of the profiles (matched by build-id, else file name); repeatable.
    #[arg(long = "binary", value_name = "PATH")]
    binaries: Vec<PathBuf>,
    /// Look for each module at DIR/RECORDED_PATH first (perf's --symfs).
    #[arg(long, value_name = "DIR")]
    symfs: Option<PathBuf>,
    /// Profile files.
    #[arg(required = true, value_name = "PROFILE")]
    profiles: Vec<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct Common {
    /// The store directory (written by `fleet ingest`).
    #[arg(value_name = "DIR")]
    store: PathBuf,
    /// Query engine: `embedded` (DataFusion in this process) or `ballista://HOST:PORT`.
    #[arg(long, default_value = "embedded", value_parser = parse_engine)]
    engine: Engine,
    /// Rows per function, inline function, or source line.
    #[arg(long, value_enum, default_value = "function")]
    level: LevelArg,
    /// Event to report (default: the one with most samples).
    #[arg(long, value_name = "NAME")]
    event: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

fn parse_engine(s: &str) -> Result<Engine, String> {
    Engine::parse(s).map_err(|e| e.to_string())
}

#[derive(Debug, clap::Args)]
struct ReportArgs {
    #[command(flatten)]
    common: Common,
    /// Rows of the text table, and functions tested per host and given precision rows.
    #[arg(long, default_value_t = 20, value_parser = args::int::<usize>(1, 1_000_000))]
    top: usize,
    /// Also write a self-contained HTML page (shares with intervals, per-host spread).
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
struct DiffArgs {
    #[command(flatten)]
    common: Common,
    /// Side A: recordings with this label (`k=v`).
    #[arg(long, value_name = "K=V")]
    a: String,
    /// Side B: recordings with this label (`k=v`).
    #[arg(long, value_name = "K=V")]
    b: String,
    /// Rows of the text table.
    #[arg(long, default_value_t = 20, value_parser = args::int::<usize>(1, 1_000_000))]
    top: usize,
    /// Test only rows whose share is at least this on a side (0..1; default 0.001): rows
    /// under it are shown but spend none of the false-discovery budget.
    #[arg(long, value_name = "SHARE", default_value_t = proftrust_fleet::report::DEFAULT_MIN_SHARE, value_parser = args::share)]
    min_share: f64,
}

fn main() {
    proftrust_cli::pipe::install();
    let a = Args::parse();
    util::set_verbosity(a.verbose, a.quiet);
    if let Err(e) = run(a) {
        util::print_error(&e);
        std::process::exit(2);
    }
}

fn run(a: Args) -> anyhow::Result<()> {
    match a.command {
        Sub::Ingest(a) => ingest(a),
        Sub::Report(a) => report(a),
        Sub::Diff(a) => diff(a),
        Sub::Synth(a) => synth(a),
        #[cfg(feature = "ballista")]
        Sub::Scheduler(a) => Ok(jobs::run_scheduler(a.bind)?),
        #[cfg(feature = "ballista")]
        Sub::Executor(a) => Ok(jobs::run_executor(
            a.scheduler,
            a.bind,
            a.grpc_port,
            a.concurrency,
        )?),
    }
}

fn synth(a: SynthArgs) -> anyhow::Result<()> {
    let o = jobs::SynthOptions {
        binary: a.binary,
        out: a.out,
        hosts: a.hosts,
        samples: a.samples,
        functions: a.functions,
        seed: a.seed.seed,
        ..Default::default()
    };
    util::note(format!("seed {}", o.seed));
    let s = jobs::synthesize(&o)?;
    println!(
        "wrote {} samples in {} files to {} (seed {})",
        s.samples,
        s.files.len(),
        o.out.display(),
        s.seed
    );
    Ok(())
}

fn ingest(a: IngestArgs) -> anyhow::Result<()> {
    let o = IngestOptions {
        host: a.host,
        labels: a.labels,
        out: a.out,
        profiles: a.profiles,
        rows: match a.rows {
            RowsArg::Aggregated => Rows::Aggregated,
            RowsArg::Sample => Rows::Sample,
        },
        binaries: a.binaries,
        symfs: a.symfs,
    };
    let summary = jobs::ingest(&o, &util::Ui)?;
    // What was stored is a note like any other: `-q` leaves it out (errors still show).
    if util::verbosity() > 0 {
        let mut out = std::io::stdout().lock();
        out.write_all(summary.render_text().as_bytes())?;
    }
    Ok(())
}

fn report(a: ReportArgs) -> anyhow::Result<()> {
    output::check_opt(a.html.as_ref()).map_err(|e| e.context("--html"))?;
    let o = ReportOptions {
        store: a.common.store,
        engine: a.common.engine,
        level: a.common.level.into(),
        event: a.common.event,
        top: a.top,
        ..ReportOptions::default()
    };
    let (report, host_shares) = jobs::report(&o, &util::Ui)?;
    if let Some(h) = &a.html {
        let html = report.render_html_with_hosts(a.top, &host_shares);
        output::write(h, |w| {
            w.write_all(html.as_bytes())?;
            Ok(())
        })?;
        util::note(format!("HTML report written to {}", h.display()));
    }
    let mut out = std::io::stdout().lock();
    if a.common.json {
        out.write_all(report.to_json()?.as_bytes())?;
    } else {
        out.write_all(report.render_text(a.top, color()).as_bytes())?;
    }
    Ok(())
}

fn color() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

fn diff(a: DiffArgs) -> anyhow::Result<()> {
    let o = DiffOptions {
        store: a.common.store,
        engine: a.common.engine,
        level: a.common.level.into(),
        event: a.common.event,
        a: a.a,
        b: a.b,
        min_share: a.min_share,
        ..DiffOptions::default()
    };
    let report = jobs::diff(&o, &util::Ui)?;
    let mut out = std::io::stdout().lock();
    if a.common.json {
        out.write_all(report.to_json()?.as_bytes())?;
    } else {
        out.write_all(report.render_text(a.top, color()).as_bytes())?;
    }
    Ok(())
}
