//! Groups of flags several commands share or that make one command's `Args` long, each a
//! clap `Args` struct flattened (`#[command(flatten)]`) into the command at the place its
//! flags appear in `--help`, with `apply` filling the pipeline's options.

use proftrust_metrics::TruthWeight;
use proftrust_pipeline::audit::AuditOptions;
use proftrust_pipeline::timemodel::TimeModelKind;
use proftrust_pipeline::vpp::VppOptions;
use proftrust_pipeline::Backend;
use proftrust_uarch::CoreKind;
use std::path::PathBuf;

/// How `audit` samples, spelled as perf spells it: `-e a,b` or `-e a -e b`, `-c PERIOD`,
/// `-F FREQ`, `--randomize`, and the seed.
#[derive(Debug, Clone, clap::Args)]
pub struct Sampling {
    /// Sampled event: cpu-clock, task-clock, cycles, instructions, rHEX, with :p modifiers;
    /// several as perf takes them, `-e a,b` or `-e a -e b`.
    #[arg(short = 'e', long, default_value = "cpu-clock")]
    pub event: Vec<String>,
    /// Sampling period (events, or ns for clock events); K/M/G suffixes = 2^10/2^20/2^30;
    /// 1 to 10^15. Default: 100003 ns for cpu-clock/task-clock (~10 kHz), the recorder's
    /// default otherwise.
    #[arg(short = 'c', long, conflicts_with = "freq", value_parser = crate::args::period)]
    pub period: Option<u64>,
    /// Sampling frequency in Hz instead of a period (the kernel adapts the period), 1 to
    /// 1000000.
    #[arg(short = 'F', long, conflicts_with = "sweep", value_parser = crate::args::int::<u64>(1, 1_000_000))]
    pub freq: Option<u64>,
    /// Randomise the period (paper 001 §4: add U(0, T/8) to each period).
    #[arg(long)]
    pub randomize: bool,
    #[command(flatten)]
    pub seed: crate::args::Seed,
}

impl Sampling {
    /// Sets the sampling options of `o`.
    pub fn apply(&self, o: &mut AuditOptions) {
        o.event = self.event.join(",");
        (o.period, o.frequency) = (self.period, self.freq);
        (o.randomize, o.seed) = (self.randomize, self.seed.seed);
    }
}

/// `vpp`'s cache model (source vpmu).
#[derive(Debug, Clone, clap::Args)]
pub struct VppCache {
    /// vpmu: no cache simulation (static class costs: every execution of a path then takes
    /// the same time and nothing varies; for comparison).
    #[arg(long)]
    pub no_cache: bool,
    /// vpmu: simulated L1D size in KiB (8-way, 64-byte lines; 1 to 1048576).
    #[arg(long, default_value_t = 32, value_parser = crate::args::int::<u32>(1, 1 << 20))]
    l1_kib: u32,
    /// vpmu: simulated last-level cache size in KiB (16-way; 1 to 4194304).
    #[arg(long, default_value_t = 8192, value_parser = crate::args::int::<u32>(1, 1 << 22))]
    pub llc_kib: u32,
    /// vpmu: cycles of a load that hits the LLC (1 to 100000).
    #[arg(long, default_value_t = 40, value_parser = crate::args::int::<u32>(1, 100_000))]
    pub llc_latency: u32,
    /// vpmu: cycles of a load that goes to memory (1 to 100000).
    #[arg(long, default_value_t = 200, value_parser = crate::args::int::<u32>(1, 100_000))]
    pub memory_latency: u32,
}

impl VppCache {
    /// Sets the cache options of `o`.
    pub fn apply(&self, o: &mut VppOptions) {
        (o.no_cache, o.l1_kib, o.llc_kib) = (self.no_cache, self.l1_kib, self.llc_kib);
        (o.llc_latency, o.memory_latency) = (self.llc_latency, self.memory_latency);
    }
}

/// `vpp`'s probe source: an existing probe file, the bias, background load.
#[derive(Debug, Clone, clap::Args)]
pub struct VppProbe {
    /// probe: read this probe file instead of running the program.
    #[arg(long, value_name = "FILE")]
    pub probe_file: Option<PathBuf>,
    /// probe: do not subtract the instrumentation bias (paper 004 §4.2).
    #[arg(long)]
    pub no_bias: bool,
    /// probe: run the program under N busy background threads (heavy system load).
    #[arg(long, value_name = "N", value_parser = crate::args::int::<usize>(0, proftrust_pipeline::vpp::MAX_LOAD_THREADS as u64))]
    pub load: Option<usize>,
    /// probe: run twice, without and with N busy background threads, and compare the top
    /// paths (paper 004 §5.3.1, Fig. 4).
    #[arg(long, value_name = "N", value_parser = crate::args::int::<usize>(1, proftrust_pipeline::vpp::MAX_LOAD_THREADS as u64))]
    pub compare_load: Option<usize>,
}

impl VppProbe {
    /// Sets the probe options of `o`.
    pub fn apply(&self, o: &mut VppOptions) {
        (o.probe_file, o.no_bias) = (self.probe_file.clone(), self.no_bias);
        (o.load, o.compare_load) = (self.load, self.compare_load);
    }
}

/// `audit`'s exact side: the backend when it runs the program, and what the truth counts.
#[derive(Debug, Clone, clap::Args)]
pub struct ExactSide {
    /// Ground-truth backend when recording.
    #[arg(long, value_parser = crate::args::named::<Backend>(), default_value_t = Backend::Auto)]
    pub backend: Backend,
    /// What the exact side counts.
    #[arg(long, value_parser = crate::args::named::<TruthWeight>(), default_value_t = TruthWeight::Instructions)]
    pub truth_weight: TruthWeight,
    /// Which time model --truth-weight time-model uses.
    #[arg(long, value_parser = crate::args::named::<TimeModelKind>(), default_value_t = TimeModelKind::Static)]
    pub time_model: TimeModelKind,
    /// The core the static time model models: sapphirerapids (Intel Golden Cove, LLVM's
    /// model of that name) or znver4 (AMD Zen 4).
    #[arg(long, value_parser = crate::args::named::<CoreKind>(), default_value_t = CoreKind::GoldenCove)]
    pub core: CoreKind,
    /// The static time model charges data-cache misses: the program is traced once more
    /// under QEMU, the plugin simulating L1D 48 KiB and L2 2 MiB, and each load's mean
    /// latency beyond an L1 hit goes through the scheduler (paid in full on a dependency
    /// chain, overlapped when independent). Slower: a traced run.
    #[arg(long)]
    pub time_caches: bool,
    /// The static time model takes branch mispredictions from a history-based predictor
    /// (TAGE, ITTAGE-like indirect, return stack) the QEMU plugin runs on the program's
    /// actual branch outcomes, instead of estimating them from outcome frequencies. Costs
    /// a plugin call per executed block in the count run.
    #[arg(long)]
    pub time_branches: bool,
}

impl ExactSide {
    /// Sets the exact-side options of `o`.
    pub fn apply(&self, o: &mut AuditOptions) {
        (o.backend, o.truth_weight) = (self.backend, self.truth_weight);
        (o.time_model, o.core) = (self.time_model, self.core);
        o.time_caches = self.time_caches;
        o.time_branches = self.time_branches;
    }
}
