//! `proftrust simulate`: sampling-theory simulations (seed 002).

use crate::util;
use anyhow::Context;
use clap::{Args as ClapArgs, Subcommand, ValueEnum};
use proftrust_sim::sampling::{render_text, run_preset, Preset, PresetOptions};
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `proftrust simulate`.
#[derive(Debug, ClapArgs)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Debug, Subcommand)]
enum What {
    /// Running-state simulation of sampling (seed 002): the paper's Tables 2-6, aliasing,
    /// self-time fragmentation and Wilson-interval coverage.
    Sampling(SamplingArgs),
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum PresetArg {
    /// Table 2: one task at 80% utilisation, granularity 30..280, T = 100.
    Table2,
    /// Table 3: 50% and 30% utilisation.
    Table3,
    /// Table 4: the mix of four tasks and idle time.
    Table4,
    /// Table 5: the mix with noise N(0, 0.5 | 1 | 2) on the unit of events.
    Table5,
    /// Table 6: the mix with n = 1000 and 500 samples.
    Table6,
    /// Periodic task commensurate with the interval: bias with a fixed start, removed by jitter.
    Aliasing,
    /// Self time fragmented by a loop's callees: spread above the binomial model.
    Fragmentation,
    /// Tables 2-6 in one run.
    All,
    /// Coverage of the 95% Wilson interval over every grid above.
    Coverage,
    /// The analytic model (eqs. 1-9) beside the simulation for any R (`--r`, `--util`).
    Sweep,
}

impl From<PresetArg> for Preset {
    fn from(p: PresetArg) -> Preset {
        match p {
            PresetArg::Table2 => Preset::Table2,
            PresetArg::Table3 => Preset::Table3,
            PresetArg::Table4 => Preset::Table4,
            PresetArg::Table5 => Preset::Table5,
            PresetArg::Table6 => Preset::Table6,
            PresetArg::Aliasing => Preset::Aliasing,
            PresetArg::Fragmentation => Preset::Fragmentation,
            PresetArg::All => Preset::All,
            PresetArg::Coverage => Preset::Coverage,
            PresetArg::Sweep => Preset::Sweep,
        }
    }
}

#[derive(Debug, ClapArgs)]
struct SamplingArgs {
    /// Which experiment.
    #[arg(long, value_enum)]
    preset: PresetArg,
    /// Repetitions of the profiling per cell (1 or more; a count whose shares would not fit
    /// in the available memory is refused with the estimate).
    #[arg(long, default_value_t = 1000, value_parser = crate::args::int::<u64>(1, u64::MAX))]
    reps: u64,
    /// Seed of every random choice (default: drawn from the clock and printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Worker threads (0 = all cores; at most 1024).
    #[arg(long, default_value_t = 0, value_parser = crate::args::int::<usize>(0, 1024))]
    threads: usize,
    /// `--preset sweep`: R = granularity / interval values, comma-separated (T = 100, so R
    /// has a resolution of 0.01). Default: 0.1,0.25,0.3,0.5,0.75,0.9,1,1.25,1.5,2,2.8,3.3,
    /// 4.5,5,7.7,10.
    #[arg(long = "r", value_delimiter = ',', value_name = "R,...", value_parser = crate::args::ratio)]
    r_values: Vec<f64>,
    /// `--preset sweep`: utilisation of the task (the rest is idle time), above 0 and
    /// below 1.
    #[arg(long, default_value_t = 0.5, value_parser = crate::args::utilisation)]
    util: f64,
    /// Tables 2-6 (`table2`..`table6`, `all`): noise on the sampling interval, each interval
    /// `T ± U{0..J}` with T = 100 (seed 002 §4: "we add random noise into the sampling
    /// interval"). 0 (default) = a fixed interval with a random start, the setting of eq. 2.
    #[arg(long, default_value_t = 0, value_name = "J", value_parser = crate::args::int::<u64>(0, 99))]
    interval_noise: u64,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Write the output to this file instead of stdout.
    #[arg(short, long)]
    output: Option<PathBuf>,
}

/// Runs `proftrust simulate`.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.what {
        What::Sampling(a) => sampling(a),
    }
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn sampling(a: SamplingArgs) -> anyhow::Result<()> {
    crate::output::check_opt(a.output.as_ref())?;
    let seed = a.seed.unwrap_or_else(clock_seed);
    util::note(format_args!("seed {seed}"));
    let preset: Preset = a.preset.into();
    if !matches!(a.preset, PresetArg::Sweep) && !a.r_values.is_empty() {
        anyhow::bail!("--r sets the R values of --preset sweep; the other presets have the paper's fixed grids");
    }
    let tables = matches!(
        a.preset,
        PresetArg::Table2
            | PresetArg::Table3
            | PresetArg::Table4
            | PresetArg::Table5
            | PresetArg::Table6
            | PresetArg::All
    );
    if a.interval_noise > 0 && !tables {
        anyhow::bail!("--interval-noise applies to the paper's Tables 2-6 (--preset table2..table6 or all); the other presets set their own intervals");
    }
    let mut opts = PresetOptions {
        reps: a.reps,
        seed,
        threads: a.threads,
        sweep_util: a.util,
        interval_noise: a.interval_noise,
        ..Default::default()
    };
    if !a.r_values.is_empty() {
        opts.r_values = a.r_values.clone();
    }
    let bytes = proftrust_sim::sampling::estimated_memory(preset, &opts);
    crate::args::check_memory("--reps", &a.reps.to_string(), bytes, 4 << 30, |have| {
        format!(
            "use --reps {} or less",
            ((have / bytes) * a.reps as f64).floor().max(1.0) as u64
        )
    })?;
    let pb = util::progress(None, &format!("simulating {}", preset.name()));
    let rep = run_preset(preset, &opts).context("simulation failed")?;
    pb.finish_and_clear();
    let text = if a.json {
        let mut s = serde_json::to_string_pretty(&rep).context("cannot encode JSON")?;
        s.push('\n');
        s
    } else {
        render_text(&rep)
    };
    match &a.output {
        Some(p) => crate::output::write(p, |w| {
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
