//! `proftrust analyze granularity FILE [--json] [--svg-dir DIR]`: running granularity,
//! sampling-interval distribution and second-event variance of real samples (seed 002
//! §5.1, Figs. 6-9), per module and per function.
//!
//! JSON contract: `file`, `format`, `module` and `function` (each a
//! `proftrust_sim::granularity::GranularityReport`: `intervals`, `interval_hist`, `runs`,
//! `run_hist`, `per_key` with `key`, `samples`, `runs`, `run_ns`, `r_mean`, and `second`
//! when a second event was recorded).

use crate::util;
use anyhow::{bail, Context};
use clap::{Args as ClapArgs, Subcommand};
use proftrust_binary::Symbolizer;
use proftrust_formats::Format;
use proftrust_model::SampleSet;
use proftrust_sim::granularity::{analyze, histogram_svg, render_text, GranularityOptions};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Arguments of `proftrust analyze`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, Subcommand)]
enum What {
    /// Running granularity per module and function from consecutive samples, the
    /// distribution of sampling intervals, and the per-module variance of a second event
    /// (seed 002 Figs. 6-9).
    Granularity(GranArgs),
}

#[derive(Debug, ClapArgs)]
struct GranArgs {
    /// perf.data or proftrust sample file.
    file: PathBuf,
    /// A binary of the profile for function names (matched by build-id, else file name);
    /// repeat for several.
    #[arg(long = "binary")]
    binaries: Vec<PathBuf>,
    /// Index of the base (sampling) event.
    #[arg(long, default_value_t = 0)]
    base_event: u16,
    /// Index of the second event (default: event 1 when the file has two or more events).
    #[arg(long)]
    second_event: Option<u16>,
    /// Rows per table.
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Write SVG histograms (intervals, run granularity, second-event proportions and
    /// variances) into this directory.
    #[arg(long)]
    svg_dir: Option<PathBuf>,
    /// Write the output to this file instead of stdout.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

#[derive(Serialize)]
struct Out<'a> {
    file: String,
    format: &'a str,
    module: proftrust_sim::granularity::GranularityReport,
    function: proftrust_sim::granularity::GranularityReport,
}

/// Runs `proftrust analyze`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.what {
        What::Granularity(a) => granularity(a),
    }
}

/// The samples of `path` and their format: perf.data or a proftrust sample file (the
/// formats with time stamps the analysis needs).
fn read_set(path: &Path) -> anyhow::Result<(SampleSet, Format)> {
    let format = match proftrust_pipeline::load::format_of(path)? {
        Some(f @ (Format::PerfData | Format::NativeSamples)) => f,
        Some(f) => bail!(
            "{} is a {} file; granularity analysis needs samples with time stamps \
             (hint: give a perf.data from `perf record` or a file from `proftrust record`)",
            path.display(),
            f.name()
        ),
        None => bail!(
            "{}: unknown file format (hint: give a perf.data or a proftrust sample file)",
            path.display()
        ),
    };
    let set = proftrust_pipeline::load::samples(path, &[], &crate::util::Ui)?;
    Ok((set, format))
}

fn granularity(a: GranArgs) -> anyhow::Result<()> {
    let (set, format) = read_set(&a.file)?;
    let second = match a.second_event {
        Some(e) => Some(e),
        None => (set.events.len() >= 2).then_some(if a.base_event == 0 { 1 } else { 0 }),
    };
    let opts = GranularityOptions {
        base_event: a.base_event,
        second_event: second,
        top: a.top,
        ..Default::default()
    };
    let sym = Symbolizer::new(&set.modules, &a.binaries);
    let module_of = |s: &proftrust_model::Sample| {
        s.ip.module
            .and_then(|m| set.modules.get(m))
            .map_or_else(|| "[unknown]".to_string(), |m| m.file_name().to_string())
    };
    let module = analyze(&set, "module", module_of, &opts)
        .with_context(|| format!("cannot analyse {}", a.file.display()))?;
    // Code without a function symbol (the kernel without kallsyms, stripped libraries) is one
    // key per module, `[module]`: per-address keys would cut its runs into one-sample pieces.
    let function_of = |s: &proftrust_model::Sample| match sym.function(s.ip) {
        Some(f) => f.name.clone(),
        None => format!("[{}]", module_of(s)),
    };
    let function = analyze(&set, "function", function_of, &opts)
        .with_context(|| format!("cannot analyse {}", a.file.display()))?;
    if let Some(dir) = &a.svg_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut plots = vec![(
            "intervals.svg".to_string(),
            histogram_svg(
                &format!("Sampling intervals of {} (Fig. 6)", module.base_event),
                "interval (ns)",
                &module.interval_hist,
            ),
        )];
        for r in [&module, &function] {
            plots.push((
                format!("granularity-{}.svg", r.level),
                histogram_svg(
                    &format!("Running granularity per {} run (Fig. 7)", r.level),
                    "run length (ns)",
                    &r.run_hist,
                ),
            ));
            if let Some(sec) = &r.second {
                plots.push((
                    format!("second-event-variance-{}.svg", r.level),
                    histogram_svg(
                        &format!("Variance of {} per {} (Fig. 9)", sec.event, r.level),
                        "variance of the proportion of the maximum rate",
                        &sec.variance_hist,
                    ),
                ));
            }
        }
        if let Some(sec) = &module.second {
            plots.push((
                "second-event-proportion.svg".to_string(),
                histogram_svg(
                    &format!("{} per interval (Fig. 8)", sec.event),
                    "proportion of the maximum rate",
                    &sec.share_hist,
                ),
            ));
        }
        for (name, svg) in plots {
            let p = dir.join(name);
            util::write_atomically(&p, |w| {
                w.write_all(svg.as_bytes())
                    .with_context(|| format!("cannot write {}", p.display()))
            })?;
        }
        util::note(format_args!("SVG plots written to {}", dir.display()));
    }
    let text = if a.json {
        let out = Out {
            file: a.file.display().to_string(),
            format: format.name(),
            module,
            function,
        };
        let mut s = serde_json::to_string_pretty(&out).context("cannot encode JSON")?;
        s.push('\n');
        s
    } else {
        let mut s = render_text(&module, a.top);
        s.push('\n');
        s.push_str(&render_text(&function, a.top));
        s
    };
    match &a.output {
        Some(p) => util::write_atomically(p, |w| {
            w.write_all(text.as_bytes())
                .with_context(|| format!("cannot write {}", p.display()))
        }),
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|_| out.flush())
                .context("cannot write to stdout")
        }
    }
}
