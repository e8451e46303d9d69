//! The flags `paths` and `cct` share (timing model, QEMU, the program), turned into
//! [`proftrust_pipeline::trace::TraceOptions`].

use anyhow::Result;
use proftrust_pipeline::trace::{Timing, TraceOptions};

/// The flags `paths` and `cct` share: the timing model, QEMU's, and the program.
#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    /// Timing model of the hardware metrics per path or context (paper 003 §3-4):
    /// `cache-sim` (default) traces data addresses and simulates an L1D and a last-level
    /// cache (the virtual PMU's `InstrTimer`; cycles by instruction class plus each access's
    /// latency), `class` gives cycles by instruction class without caches, `flat` one cycle
    /// per instruction (fastest; no misses).
    #[arg(long, value_parser = crate::args::named::<Timing>(), default_value_t = Timing::CacheSim)]
    cpi_model: Timing,
    /// Cache geometry and latencies under `--cpi-model cache-sim` (as `proftrust vpmu
    /// --cache-config`): `l1=SIZE:WAYS:LATENCY,llc=SIZE:WAYS:LATENCY,mem=CYCLES,line=BYTES,
    /// store=CYCLES`; unnamed keys keep their defaults (`l1=32K:8:4,llc=8M:16:40,mem=200,
    /// line=64,store=1`). Seed 003's 16 KiB direct-mapped cache: `l1=16K:1:4`.
    #[arg(long, value_name = "SPEC")]
    cache_config: Option<String>,
    /// QEMU CPU model (`qemu-x86_64 -cpu help`).
    #[arg(long)]
    cpu: Option<String>,
    /// Stop the program after this many seconds (at most 30 days; the trace up to then is
    /// kept).
    #[arg(long, value_name = "SECS", value_parser = crate::args::timeout)]
    timeout: Option<std::time::Duration>,
    #[command(flatten)]
    wl: crate::workload::WorkloadArgs,
    /// The program and its arguments.
    #[arg(
        last = true,
        required_unless_present = "workload",
        value_name = "PROGRAM ARGS"
    )]
    pub program: Vec<String>,
}

impl TraceArgs {
    /// Resolves `--workload` into the program and its arguments.
    pub fn command(&mut self) -> Result<Vec<String>> {
        self.program = self.wl.command(std::mem::take(&mut self.program), None)?;
        Ok(self.program.clone())
    }

    /// The pipeline's trace options.
    pub fn options(&self) -> TraceOptions {
        let mut o = TraceOptions::default();
        o.timing = self.cpi_model;
        o.cache_config = self.cache_config.clone();
        o.cpu = self.cpu.clone();
        o.timeout = self.timeout;
        o.stop = Some(crate::interrupt::install());
        o
    }
}
