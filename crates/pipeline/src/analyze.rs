//! `analyze granularity`: running granularity per module and function from consecutive
//! samples, the distribution of sampling intervals, and the variance of a second event
//! (seed 002 §5.1, Figs. 6-9), on a perf.data or proftrust sample file.

use crate::error::{bail, Context, Result};
use crate::Events;
use proftrust_binary::Symbolizer;
use proftrust_formats::Format;
use proftrust_model::{Sample, SampleSet};
pub use proftrust_report::analyze::GranularityAnalysis;
use proftrust_sim::granularity::{analyze, histogram_svg, GranularityOptions, GranularityReport};
use std::path::{Path, PathBuf};

/// Settings of [`granularity`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GranularityRunOptions {
    /// perf.data or proftrust sample file. Default empty (an error: give one).
    pub file: PathBuf,
    /// Binaries of the profile for function names. Default none.
    pub binaries: Vec<PathBuf>,
    /// Index of the base (sampling) event. Default 0.
    pub base_event: u16,
    /// Index of the second event. Default: the other of events 0 and 1 when the file has
    /// two or more events.
    pub second_event: Option<u16>,
    /// Rows per table. Default 20.
    pub top: usize,
    /// Draw the SVG histograms ([`GranularityAnalysis::plots`]). Default false.
    pub svg: bool,
}

impl Default for GranularityRunOptions {
    fn default() -> Self {
        GranularityRunOptions {
            file: PathBuf::new(),
            binaries: Vec::new(),
            base_event: 0,
            second_event: None,
            top: 20,
            svg: false,
        }
    }
}

/// Reads the samples and analyses their granularity per module and per function.
pub fn granularity(a: &GranularityRunOptions, events: &dyn Events) -> Result<GranularityAnalysis> {
    let (set, format) = read_set(&a.file, &a.binaries, events)?;
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
    let module_of = |s: &Sample| {
        s.ip.module
            .and_then(|m| set.modules.get(m))
            .map_or_else(|| "[unknown]".to_string(), |m| m.file_name().to_string())
    };
    let bracketed = |s: &Sample| {
        s.ip.module
            .and_then(|m| set.modules.get(m))
            .map_or_else(|| "[unknown]".to_string(), |m| m.bracketed_name())
    };
    let module = analyze(&set, "module", module_of, &opts)
        .with_context(|| format!("cannot analyse {}", a.file.display()))?;
    // Code without a function symbol (the kernel without kallsyms, stripped libraries) is one
    // key per module, `[module]`: per-address keys would cut its runs into one-sample pieces.
    let function_of = |s: &Sample| match sym.function(s.ip) {
        Some(f) => f.name.clone(),
        None => bracketed(s),
    };
    let function = analyze(&set, "function", function_of, &opts)
        .with_context(|| format!("cannot analyse {}", a.file.display()))?;
    let plots = if a.svg {
        plots(&module, &function)
    } else {
        Vec::new()
    };
    Ok(GranularityAnalysis {
        file: a.file.display().to_string(),
        format: format.name().to_string(),
        module,
        function,
        plots,
    })
}

/// The samples of `path` and their format: perf.data or a proftrust sample file (the
/// formats with time stamps the analysis needs).
fn read_set(path: &Path, binaries: &[PathBuf], events: &dyn Events) -> Result<(SampleSet, Format)> {
    let format = match crate::load::format_of(path)? {
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
    // The binaries matter to the reading too: a non-PIE executable's samples are mapped to
    // module-relative addresses through its segments.
    let set = crate::load::samples(path, binaries, events)?;
    Ok((set, format))
}

/// The histograms of seed 002 Figs. 6-9 as (file name, SVG document).
fn plots(module: &GranularityReport, function: &GranularityReport) -> Vec<(String, String)> {
    let mut plots = vec![(
        "intervals.svg".to_string(),
        histogram_svg(
            &format!("Sampling intervals of {} (Fig. 6)", module.base_event),
            "interval (ns)",
            &module.interval_hist,
        ),
    )];
    for r in [module, function] {
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
    plots
}
