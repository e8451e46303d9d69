//! Path profiling and CCT building throughput over a QEMU block trace.
//!
//! `paths-throughput PROGRAM [ARGS...]` traces the program six times: with a visitor that
//! only counts blocks (the cost of the trace itself), with the path profiler, with the CCT
//! builder, and with both (flat timing: one cycle per instruction); then the bare trace with
//! data addresses, and paths + CCT timed by the virtual PMU's `InstrTimer` with the default
//! cache simulation (what `proftrust paths` does by default). Prints wall time, blocks/s and
//! instructions/s of each, and the time as a multiple of the bare trace. With `REPS=N` in
//! the environment each variant runs N times and the fastest run counts (the machine is
//! shared; the best run is the least disturbed). Used by scripts/bench-paths.sh.

use proftrust_binary::Binary;
use proftrust_exact::{trace_qemu, QemuOptions};
use proftrust_model::{BlockVisitor, Module, ModuleIdx, TraceBlock};
use proftrust_paths::{CostModel, InstrCost, Profiler, ProfilerOptions, ProgramCfgs};
use proftrust_vpmu::{CacheConfig, CycleModel, InstrTimer, InstrTiming};
use std::ffi::OsString;
use std::time::Instant;

struct Count(u64, u64);
impl BlockVisitor for Count {
    fn block(&mut self, b: &TraceBlock<'_>) {
        self.0 += 1;
        self.1 += b.instructions.len() as u64;
    }
}

/// The virtual PMU's timer as a path cost model (as the CLI does).
struct Timer(InstrTimer, Vec<InstrTiming>);
impl CostModel for Timer {
    fn module(&mut self, idx: ModuleIdx, m: &Module) {
        self.0.module(idx, m);
    }
    fn block_costs(&mut self, b: &TraceBlock<'_>, out: &mut Vec<InstrCost>) {
        self.0.time_block(b, &mut self.1);
        out.clear();
        out.extend(self.1.iter().map(|t| InstrCost {
            cycles: u64::from(t.cycles),
            l1_misses: u64::from(t.l1_misses),
            llc_misses: u64::from(t.llc_misses),
        }));
    }
}

struct Both<'a, 'b, C: CostModel>(&'a mut Count, &'a mut Profiler<'b, C>);
impl<C: CostModel> BlockVisitor for Both<'_, '_, C> {
    fn module(&mut self, i: proftrust_model::ModuleIdx, m: &Module) {
        self.1.module(i, m);
    }
    fn block(&mut self, b: &TraceBlock<'_>) {
        self.0.block(b);
        self.1.block(b);
    }
}

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.is_empty() {
        eprintln!("usage: paths-throughput PROGRAM [ARGS...]");
        std::process::exit(2);
    }
    let path = std::path::PathBuf::from(&args[0]);
    let bin = match Binary::open(&path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {}: {e}", path.display());
            std::process::exit(2);
        }
    };
    let cfgs: Vec<_> = bin
        .functions()
        .iter()
        .filter_map(|f| bin.cfg(f).ok())
        .collect();
    let module = Module {
        path: path.to_string_lossy().into_owned(),
        build_id: bin.build_id().cloned(),
        load_bias: 0,
    };
    let program = ProgramCfgs::new(module, cfgs);
    let opts = QemuOptions {
        show_output: false,
        ..Default::default()
    };
    let mem = QemuOptions {
        show_output: false,
        trace_memory: true,
        ..Default::default()
    };
    let reps: usize = std::env::var("REPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1);
    let mut base = 0.0;
    for (name, paths, cct, cache) in [
        ("trace only", false, false, false),
        ("paths", true, false, false),
        ("cct", false, true, false),
        ("paths+cct", true, true, false),
        ("trace+mem", false, false, true),
        ("cache-sim", true, true, true),
    ] {
        let mut best = f64::INFINITY;
        let mut count = Count(0, 0);
        for rep in 0..reps {
            count = Count(0, 0);
            let t = Instant::now();
            let o = if cache { &mem } else { &opts };
            let r = if !paths && !cct {
                trace_qemu(&args, o, &mut count)
            } else if cache {
                let timer = Timer(
                    InstrTimer::new(CycleModel::flat(1), Some(CacheConfig::default())),
                    Vec::new(),
                );
                let mut p =
                    Profiler::with_cost_model(&program, ProfilerOptions { paths, cct }, timer);
                let r = trace_qemu(&args, o, &mut Both(&mut count, &mut p));
                let (pp, c) = p.finish();
                if rep == 0 {
                    eprintln!(
                        "  {name}: {} executed paths, {} CCT records, {} L1D misses on paths",
                        pp.paths.len(),
                        c.nodes().len() - 1,
                        pp.paths.values().map(|m| m.l1_misses).sum::<u64>()
                    );
                }
                r
            } else {
                let mut p = Profiler::new(&program, ProfilerOptions { paths, cct });
                let r = trace_qemu(&args, o, &mut Both(&mut count, &mut p));
                let (pp, c) = p.finish();
                if rep == 0 {
                    eprintln!(
                        "  {name}: {} executed paths, {} CCT records",
                        pp.paths.len(),
                        c.nodes().len() - 1
                    );
                }
                r
            };
            if let Err(e) = r {
                eprintln!("error: {e}");
                std::process::exit(2);
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        if base == 0.0 {
            base = best;
        }
        println!(
            "{name:>10}: {best:8.3} s  {:>12.0} blocks/s  {:>12.0} instructions/s  x{:.2} of the bare trace",
            count.0 as f64 / best,
            count.1 as f64 / best,
            best / base
        );
    }
}
