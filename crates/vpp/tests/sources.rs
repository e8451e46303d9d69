//! The three sources on hand-built inputs with hand-derived answers.

use proftrust_model::{
    BlockVisitor, Branch, InstrCost, Location, Module, ModuleIdx, ModuleTable, RunOutcome, Sample,
    SampleSet, Svma, TraceEnd, TraceEvent,
};
#[path = "../../paths/tests/common/mod.rs"]
mod common;
use common::program;
use proftrust_probe::{BurstyOptions, ProbeFile, ProbeSample};
use proftrust_vpp::{
    analyze, lbr_timings, probe_timings, AnalysisOptions, PathSignature, TimeBase, TimeUnit,
    TracePathTimer, TraceSourceOptions,
};

fn sig(s: &str) -> PathSignature {
    s.parse().unwrap()
}

/// Three iterations of f's loop (each calling g), then the exit. The conditional branch
/// at 0x100c costs 3, 3, 50, 7 on its four visits, g's return 2, everything else 1.
///
/// Paths (signature: entry + one bit for b1's conditional branch; b0->b1 and the backedge
/// are unconditional): P1 = b0 b1 b2 -> back, "0x1000-0", 5 + 3 = 8 cycles (g excluded);
/// P2 = b1 b2 -> back, "0x1008-0", 3 + 3 = 6 and 3 + 50 = 53; P3 = b1 b3 ret, "0x1008-1",
/// 2 + 7 = 9; g "0x2000", 3 each (3 calls); main "0x3000" (3000, 3004), 2. The last block
/// (3000 again) opens a path that never ends. All cycles: 2 + 1 + 76 + 9 = 88.
fn run_trace(opts: TraceSourceOptions) -> proftrust_vpp::TraceTimings {
    use TraceEnd::{Call, Other, Return};
    let cfgs = program();
    let mut visits = 0;
    let costs = [3, 3, 50, 7];
    let timer = proftrust_paths::PerInstruction(move |_, a: Svma| InstrCost {
        cycles: match a.0 {
            0x100c => {
                visits += 1;
                costs[visits - 1]
            }
            0x2004 => 2,
            _ => 1,
        },
        ..InstrCost::default()
    });
    let mut v = TracePathTimer::new(&cfgs, timer, opts);
    let m = Module::new("/t/prog");
    v.visit(&TraceEvent::Module {
        idx: ModuleIdx(0),
        module: &m,
    });
    let trace: Vec<(&[u64], TraceEnd)> = vec![
        (&[0x3000], Call),
        (&[0x1000, 0x1004, 0x1008, 0x100c], Other),
        (&[0x1010], Call),
        (&[0x2000, 0x2004], Return),
        (&[0x1014], Other),
        (&[0x1008, 0x100c], Other),
        (&[0x1010], Call),
        (&[0x2000, 0x2004], Return),
        (&[0x1014], Other),
        (&[0x1008, 0x100c], Other),
        (&[0x1010], Call),
        (&[0x2000, 0x2004], Return),
        (&[0x1014], Other),
        (&[0x1008, 0x100c], Other),
        (&[0x1018], Return),
        (&[0x3004], Return),
        (&[0x3000], Other),
    ];
    for (ins, end) in trace {
        common::visit_block(&mut v, 1, 0, ins, end, &[]);
    }
    v.visit(&TraceEvent::End(&RunOutcome::Exited { code: 0 }));
    v.finish()
}

#[test]
fn trace_source_times_every_instance() {
    let r = run_trace(TraceSourceOptions::default());
    let t = &r.timings;
    assert_eq!((r.completed, r.timed, r.collisions), (8, 8, 0));
    assert_eq!(t.program_time, Some(88));
    let times = |s: &str| -> Vec<(u64, u64)> { t.get(&sig(s)).unwrap().iter().collect() };
    assert_eq!(times("0x1000-0"), vec![(8, 1)]);
    assert_eq!(times("0x1008-0"), vec![(6, 1), (53, 1)]);
    assert_eq!(times("0x1008-1"), vec![(9, 1)]);
    assert_eq!(times("0x2000"), vec![(3, 3)]);
    assert_eq!(times("0x3000"), vec![(2, 1)]);
    assert_eq!(t.len(), 5);
    assert_eq!(t.info[&sig("0x1008-0")].function, "f");
    assert_eq!(
        t.info[&sig("0x1008-0")].blocks,
        vec![Svma(0x1008), Svma(0x1010)]
    );
    // Exact totals per signature include every instance.
    assert_eq!(r.exact[&sig("0x1008-0")].count, 2);
    assert_eq!(r.exact[&sig("0x1008-0")].cycles, 59);
    // Analysis: only P2 (2 samples) has a measurable variation: 59 - 2 x 6 = 47 of 88.
    let a = analyze(t, &AnalysisOptions::default());
    assert_eq!(a.time_base_kind, TimeBase::Program);
    assert_eq!(a.paths[0].signature, sig("0x1008-0"));
    assert_eq!(a.paths[0].net_variation, 47);
    assert!((a.paths[0].share_of_time - 47.0 / 88.0).abs() < 1e-15);
    assert_eq!(a.paths[1].signature, sig("0x2000")); // g: 3 samples, NV 0
    assert_eq!(a.others.len(), 3);
}

/// Bursty sampling with nCheck = nInstr = 1 on the completions g, P1, g, P2, g, P2, P3,
/// main: the run's start begins a burst, so g, g, g and P3 are timed (every other one).
#[test]
fn trace_source_samples_with_bursty_counters() {
    let r = run_trace(TraceSourceOptions {
        bursty: BurstyOptions {
            n_check: 1,
            n_instr: 1,
            randomize: false,
            seed: 0,
        },
    });
    assert_eq!((r.completed, r.timed), (8, 4));
    let t = &r.timings;
    assert_eq!(t.executions_per_sample, 2.0);
    assert_eq!(t.get(&sig("0x2000")).unwrap().count(), 3);
    assert_eq!(t.get(&sig("0x1008-1")).unwrap().count(), 1);
    assert_eq!(t.len(), 2);
    // The exact totals still see every instance.
    assert_eq!(r.exact[&sig("0x1008-0")].count, 2);
}

/// One branch stack: main->f, f's first iteration (calling g), the backedge, the exit and
/// the return, with cycle counts 100, 7, 3, 2, 5, 1 (chronological). Hand-derived: P1
/// "0x1000-0" = 7 + 2 = 9, g = 3, P3 "0x1008-1" = 5 + 1 = 6.
#[test]
fn lbr_source_times_paths_from_cycle_counts() {
    let cfgs = program();
    let br = |from: u64, to: u64, cycles: u32| Branch {
        from: Location::new(ModuleIdx(0), from),
        to: Location::new(ModuleIdx(0), to),
        mispredicted: false,
        predicted_known: false,
        cycles,
    };
    let mut chrono = vec![
        br(0x3000, 0x1000, 100),
        br(0x1010, 0x2000, 7),
        br(0x2004, 0x1014, 3),
        br(0x1014, 0x1008, 2),
        br(0x100c, 0x1018, 5),
        br(0x1018, 0x3004, 1),
    ];
    chrono.reverse();
    let mut modules = ModuleTable::default();
    modules.intern(Module::new("/t/prog"));
    let s = Sample {
        event: 0,
        pid: 1,
        tid: 1,
        time: 0,
        cpu: 0,
        period: 1,
        ip: Location::new(ModuleIdx(0), 0x3008),
        callchain: vec![],
        branches: chrono,
    };
    let set = SampleSet {
        modules,
        samples: vec![s.clone(), s],
        ..Default::default()
    };
    let (t, st) = lbr_timings(&set, &cfgs);
    assert_eq!(t.unit, TimeUnit::Cycles);
    assert_eq!((st.stacks, st.timed, st.untimed, st.broken), (2, 6, 0, 0));
    let times = |s: &str| -> Vec<(u64, u64)> { t.get(&sig(s)).unwrap().iter().collect() };
    assert_eq!(times("0x1000-0"), vec![(9, 2)]);
    assert_eq!(times("0x2000"), vec![(3, 2)]);
    assert_eq!(times("0x1008-1"), vec![(6, 2)]);
    assert_eq!(t.len(), 3);
}

/// A probe file: three samples of one site with history "10" (bits 0b01), one of another
/// site without branches; 400 boundaries for 3 + 1 timed paths (+ 1 dropped) = 80
/// executions per sample; calibration median 30.
#[test]
fn probe_source_signatures_scale_and_bias() {
    let s = |entry, nbits, bits, ticks| ProbeSample {
        entry,
        nbits,
        bits,
        ticks,
    };
    let f = ProbeFile {
        boundaries: 400,
        program_ticks: 1_000_000,
        dropped: 1,
        sites: vec![(0x11d9, "vpp.c:88".into())],
        calibration: vec![(29, 10), (30, 80), (31, 10)],
        samples: vec![
            s(0x11d9, 2, 0b01, 130),
            s(0x11d9, 2, 0b01, 530),
            s(0x11d9, 2, 0b01, 130),
            s(0x1200, 0, 0, 70),
        ],
        ..ProbeFile::default()
    };
    let (t, bias) = probe_timings(&f);
    assert_eq!(t.unit, TimeUnit::TscTicks);
    assert_eq!(t.executions_per_sample, 80.0);
    assert_eq!(t.program_time, Some(1_000_000));
    // Times 29, 30, 31, 70, 130, 530 share no step: a fine timer.
    assert_eq!(proftrust_vpp::probe_resolution(&f), 1);
    assert_eq!(
        t.get(&sig("0x11d9-10")).unwrap().iter().collect::<Vec<_>>(),
        vec![(130, 2), (530, 1)]
    );
    assert_eq!(t.info[&sig("0x11d9-10")].function, "vpp.c:88");
    assert_eq!(t.info[&sig("0x1200")].function, "site 0x1200");
    let b = bias.unwrap();
    assert_eq!((b.median, b.samples, b.resolution), (30, 100, 1));
    assert!(b.consistent);
    // Band ±3 holds all: trimmed mean (290 + 2400 + 310) / 100 = 30.
    assert_eq!(b.subtracted, 30);
    // Bias subtracted: fastest group (readings < 130 + 2) = 130, 130: basetime 100, total
    // 790 - 3 x 30 = 700, NV 790 - 3 x 130 = 400 ticks; a share of the run's ticks (the
    // timed paths extrapolate to 740 x 80 = 59200 < 1e6): 400 x 80 / 1e6, and of the timed
    // time (700 + 40 = 740): 400 / 740.
    let a = analyze(
        &t,
        &AnalysisOptions {
            bias: b.subtracted,
            resolution: Some(1),
            ..AnalysisOptions::default()
        },
    );
    let p = &a.paths[0];
    assert_eq!((p.basetime, p.total_time, p.net_variation), (100, 700, 400));
    assert_eq!(p.resolved, Some(true));
    assert!((p.share_of_time - 400.0 * 80.0 / 1e6).abs() < 1e-12);
    assert!((p.share_of_timed - 400.0 / 740.0).abs() < 1e-12);
    // Extrapolated, the timed paths take 740 x 80 of the run's 1e6 ticks.
    let c = proftrust_vpp::timed_coverage(&f, a.timed_time, a.executions_per_sample).unwrap();
    assert!((c - 0.0592).abs() < 1e-12);
}

/// The virtual PMU's timer with a one-line L1D (64 B, 1 way) and a two-line LLC (128 B,
/// 2 ways): latencies L1 4, LLC 40, memory 200 on top of 1 cycle per instruction (no cost
/// table). The load at 0x1008 (b1) reads 0x10000, 0x10000, 0x20000, then 0x10000 on its
/// four visits: memory, L1 hit, memory (evicting 0x10000 from L1 only), LLC hit.
/// Hand-derived: P1 = 6 + 200, P2 = 4 + 4 and 4 + 200 (NV 196), P3 = 3 + 40; one LLC miss
/// per P1, one for the two P2s.
#[test]
fn vpmu_timer_adds_cache_latency_per_execution() {
    use proftrust_model::MemAccess;
    use proftrust_vpmu::{CacheConfig, CycleModel};
    use TraceEnd::{Call, Other, Return};
    let cfgs = program();
    let mut cache = CacheConfig::default();
    cache.line_size = 64;
    cache.l1_size = 64;
    cache.l1_ways = 1;
    cache.llc_size = 128;
    cache.llc_ways = 2;
    cache.check().unwrap();
    let timer = proftrust_vpmu::TraceCost::new(CycleModel::default(), Some(cache));
    let mut v = TracePathTimer::new(&cfgs, timer, TraceSourceOptions::default());
    let m = Module::new("/t/prog");
    v.visit(&TraceEvent::Module {
        idx: ModuleIdx(0),
        module: &m,
    });
    let ld = |insn: u16, addr: u64| {
        vec![MemAccess {
            insn,
            addr,
            size: 8,
            store: false,
            level: None,
        }]
    };
    let none = Vec::new;
    let trace: Vec<(&[u64], TraceEnd, Vec<MemAccess>)> = vec![
        (&[0x3000], Call, none()),
        (&[0x1000, 0x1004, 0x1008, 0x100c], Other, ld(2, 0x10000)),
        (&[0x1010], Call, none()),
        (&[0x2000, 0x2004], Return, none()),
        (&[0x1014], Other, none()),
        (&[0x1008, 0x100c], Other, ld(0, 0x10000)),
        (&[0x1010], Call, none()),
        (&[0x2000, 0x2004], Return, none()),
        (&[0x1014], Other, none()),
        (&[0x1008, 0x100c], Other, ld(0, 0x20000)),
        (&[0x1010], Call, none()),
        (&[0x2000, 0x2004], Return, none()),
        (&[0x1014], Other, none()),
        (&[0x1008, 0x100c], Other, ld(0, 0x10000)),
        (&[0x1018], Return, none()),
        (&[0x3004], Return, none()),
        (&[0x3000], Other, none()),
    ];
    for (ins, end, mem) in &trace {
        common::visit_block(&mut v, 1, 0, ins, *end, mem);
    }
    v.visit(&TraceEvent::End(&RunOutcome::Exited { code: 0 }));
    let st = v.timer().cache_stats().unwrap();
    assert_eq!((st.accesses, st.l1_misses, st.llc_misses), (4, 3, 2));
    let r = v.finish();
    let t = &r.timings;
    let times = |s: &str| -> Vec<(u64, u64)> { t.get(&sig(s)).unwrap().iter().collect() };
    assert_eq!(times("0x1000-0"), vec![(206, 1)]);
    assert_eq!(times("0x1008-0"), vec![(8, 1), (204, 1)]);
    assert_eq!(times("0x1008-1"), vec![(43, 1)]);
    assert_eq!(r.exact[&sig("0x1000-0")].llc_misses, 1);
    assert_eq!(r.exact[&sig("0x1008-0")].llc_misses, 1);
    assert_eq!(r.exact[&sig("0x1008-1")].llc_misses, 0);
    let a = analyze(t, &AnalysisOptions::default());
    assert_eq!(a.paths[0].signature, sig("0x1008-0"));
    assert_eq!(a.paths[0].net_variation, 196);
}
