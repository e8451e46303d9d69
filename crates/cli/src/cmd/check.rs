//! `proftrust check PROFILE...`: how far to trust a profile when the run cannot be repeated
//! (several recordings of the same program and input: checked together).
//! The arguments become [`proftrust_pipeline::check::CheckOptions`]; the report is
//! `proftrust_report::check::CheckReport` (docs/check.md).

use crate::util;
use proftrust_pipeline::check::{CheckOptions, IntervalChoice};

use std::path::PathBuf;

/// Arguments of `proftrust check`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  proftrust check perf.data --binary ./prog\n  proftrust check perf.data --target 1%\n  proftrust check a.data b.data c.data --binary ./prog   (three runs: intervals for the next run from their spread)\n  perf script > p.txt && proftrust check p.txt --json\n  proftrust record -o prog.ptsamp -- ./prog && proftrust check prog.ptsamp --html check.html"
)]
pub struct Args {
    /// The profile: perf.data, `perf script` text, a proftrust sample file (`record`'s
    /// output), any of them compressed. Several recordings of the same program and input are
    /// checked together: their samples merged, and the spread of the shares between them
    /// gives the interval for another run (run_low, run_high).
    #[arg(required = true, num_args = 1..)]
    profiles: Vec<PathBuf>,
    /// The program's binaries (repeat), matched to the profile's modules by build-id, else
    /// file name; perf's build-id cache, debug directories and the recorded paths are
    /// searched too.
    #[arg(long = "binary", value_name = "PATH")]
    binaries: Vec<PathBuf>,
    /// A directory holding the profile's modules at their recorded paths (perf's --symfs).
    #[arg(long)]
    symfs: Option<PathBuf>,
    /// The event to check, by name (default: the file's first event).
    #[arg(long)]
    event: Option<String>,
    /// Wanted precision of the top rows' shares, e.g. `1%` or `0.01`: how much longer to
    /// record for it.
    #[arg(long, value_parser = parse_share)]
    target: Option<f64>,
    /// Rows shown per table, and rows the advice and the verdict look at (1 to 1000000).
    #[arg(long, default_value_t = 10, value_parser = crate::args::int::<usize>(1, 1_000_000))]
    top: usize,
    /// Interval stated per row: `wilson` (this run's sampling error), or `auto` (batch
    /// means over time slices where a row's samples cluster in time).
    #[arg(long, default_value = "wilson", value_parser = interval_choice())]
    interval: IntervalChoice,
    /// Time slices of the batch-means intervals (2 to 100000).
    #[arg(long, default_value_t = 20, value_parser = crate::args::int::<usize>(2, 100_000))]
    slices: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Also write a self-contained HTML report.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
}

/// Value parser of `--interval`: the names [`IntervalChoice`] parses.
fn interval_choice() -> impl clap::builder::TypedValueParser<Value = IntervalChoice> {
    use clap::builder::{PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(IntervalChoice::NAMES).map(|s| {
        s.parse::<IntervalChoice>()
            .expect("one of the possible values")
    })
}

/// `1%`, `0.5%` or `0.01`.
fn parse_share(s: &str) -> Result<f64, String> {
    let (num, scale) = match s.strip_suffix('%') {
        Some(n) => (n, 0.01),
        None => (s, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a share (write 1% or 0.01)"))?;
    let v = v * scale;
    if v > 0.0 && v < 1.0 {
        Ok(v)
    } else {
        Err(format!("`{s}`: the precision must be between 0 and 100%"))
    }
}

/// Runs the subcommand.
pub fn run(a: Args) -> anyhow::Result<()> {
    crate::output::check_opt(a.html.as_ref()).map_err(|e| e.context("--html"))?;
    let mut o = CheckOptions::default();
    o.profiles = a.profiles;
    o.binaries = a.binaries;
    o.symfs = a.symfs;
    o.event = a.event;
    o.target = a.target;
    o.top = a.top.max(1);
    o.slices = a.slices;
    o.interval = a.interval;
    let report = proftrust_pipeline::check::execute(&o, &util::Ui)?;
    if let Some(h) = &a.html {
        crate::output::write_html(&report, h, o.top)?;
    }
    crate::output::write_report(&report, &crate::output::ReportTo::Stdout, a.json, o.top)
}

#[cfg(test)]
mod tests {
    use super::parse_share;

    #[test]
    fn shares_parse() {
        assert_eq!(parse_share("1%"), Ok(0.01));
        assert_eq!(parse_share("0.05"), Ok(0.05));
        assert!(parse_share("150%").is_err());
        assert!(parse_share("x").is_err());
    }
}
