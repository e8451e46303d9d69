//! Sampled CCT comparison, hot/dense/sparse classification and LBR path reconstruction on
//! hand-built inputs with hand-computed expectations.

use proftrust_model::{
    BlockId, Branch, Cfg, EdgeKind, Location, Loop, LoopId, Module, ModuleIdx, ModuleTable, Sample,
    SampleSet, Svma,
};
mod common;
use common::{block, edge};
use proftrust_paths::{
    classify_hot, compare_cct, hot_paths_covering, lbr_paths, lbr_timed_paths, sampled_cct,
    sampled_cct_with, CodeOracle, FuncIdx, FunctionMap, HotClass, HotMetric, HotOptions, PathKey,
    PathMetrics, PathProfile, ProgramCfgs,
};
use std::collections::BTreeMap;

fn names() -> FunctionMap {
    let mut m = FunctionMap::default();
    m.insert("prog", 0x1000, 0x1100, "main");
    m.insert("prog", 0x2000, 0x2100, "f");
    m.insert("prog", 0x3000, 0x3100, "g");
    m.insert("prog", 0x4000, 0x4100, "k");
    m.finish()
}

fn sample(ip: u64, chain: &[u64]) -> Sample {
    Sample {
        event: 0,
        pid: 1,
        tid: 1,
        time: 0,
        cpu: 0,
        period: 1,
        ip: Location::new(ModuleIdx(0), ip),
        callchain: chain
            .iter()
            .map(|&a| Location::new(ModuleIdx(0), a))
            .collect(),
        branches: vec![],
    }
}

fn k(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// 12 samples: 6 in main;f;g, 3 in main;f, 2 in f called recursively (folded to main;f),
/// 1 in main without a chain. Exact: main 5, main;f 40, main;f;g 50, main;k 5 (of 100).
/// epsilon = 1/2 (|1/12 - .05| + |5/12 - .4| + |.5 - .5| + |0 - .05|) = 0.05.
#[test]
fn sampled_contexts_against_exact() {
    let mut modules = ModuleTable::default();
    modules.intern(Module::new("/x/prog"));
    let mut samples = vec![];
    samples.extend((0..6).map(|_| sample(0x3004, &[0x2011, 0x1011])));
    samples.extend((0..3).map(|_| sample(0x2020, &[0x1011])));
    samples.extend((0..2).map(|_| sample(0x2020, &[0x2011, 0x2011, 0x1011])));
    samples.push(sample(0x1020, &[]));
    let set = SampleSet {
        modules,
        samples,
        ..Default::default()
    };
    let n = names();
    let sc = sampled_cct(&set, &n, None);
    assert_eq!(sc.total, 12);
    assert_eq!(sc.without_chain, 1);
    assert_eq!(sc.contexts.get(&k(&["main", "f"])), Some(&5));
    assert_eq!(sc.contexts.get(&k(&["main", "f", "g"])), Some(&6));
    let exact: BTreeMap<Vec<String>, u64> = [
        (k(&["main"]), 5),
        (k(&["main", "f"]), 40),
        (k(&["main", "f", "g"]), 50),
        (k(&["main", "k"]), 5),
    ]
    .into();
    let c = compare_cct(&sc, &exact, None).unwrap();
    assert!((c.epsilon - 0.05).abs() < 1e-12, "{}", c.epsilon);
    assert_eq!((c.exact_contexts, c.sampled_contexts), (4, 3));
    assert_eq!(c.missed, 1);
    assert!((c.missed_share - 0.05).abs() < 1e-12);
    assert_eq!(c.spurious, 0);
    // Wilson 95% intervals: 6/12 holds 0.5, 5/12 holds 0.4, 1/12 holds 0.05, 0/12 holds
    // 0.05 (upper bound 0.2425).
    assert_eq!(c.within_ci, 4);
    let mut folded = Vec::new();
    sc.write_folded(&mut folded).unwrap();
    assert_eq!(
        String::from_utf8(folded).unwrap(),
        "main 1\nmain;f 5\nmain;f;g 6\n"
    );
    // Anchored at f: main alone (1 sample; 5 + 5 instructions with main;k) falls outside and
    // is left out; within f: sampled f 5/11, f;g 6/11; exact f 40/90, f;g 50/90:
    // epsilon = 1/2 (|5/11 - 4/9| + |6/11 - 5/9|) = 1/99.
    let c = compare_cct(&sc, &exact, Some("f")).unwrap();
    assert_eq!((c.exact_contexts, c.sampled_contexts), (2, 2));
    assert!((c.epsilon - 1.0 / 99.0).abs() < 1e-12, "{}", c.epsilon);
    assert!((c.outside_anchor_sampled - 1.0 / 12.0).abs() < 1e-12);
    assert!((c.outside_anchor_exact - 0.1).abs() < 1e-12);
    assert_eq!(c.contexts[0].stack, k(&["f", "g"]));
    assert!((c.contexts[0].share - 6.0 / 11.0).abs() < 1e-12);
}

/// Code of the hand-built program: g (0x3000..) is a leaf without a frame; f has a frame
/// past 0x2004 (its prologue is 0x2000..0x2004) until its `ret` at 0x20f0; main calls f
/// directly at 0x100c (return address 0x1011) and through a pointer at 0x1040 (return
/// address 0x1042); f calls g directly at 0x200c (return 0x2011).
struct Code;

impl CodeOracle for Code {
    fn direct_call_target(&self, _: &ModuleTable, ret: Location) -> Option<Location> {
        match ret.svma.0 {
            0x1011 => Some(Location::new(ModuleIdx(0), 0x2000)),
            0x2011 => Some(Location::new(ModuleIdx(0), 0x3000)),
            _ => None,
        }
    }
    fn frame_established(&self, _: &ModuleTable, at: Location) -> Option<bool> {
        let a = at.svma.0;
        Some(match a {
            0x2000..0x2100 => a >= 0x2004 && a != 0x20f0,
            0x3000..0x3100 => false,
            _ => true,
        })
    }
}

/// A frame-pointer chain misses the caller of a frameless sample: g sampled with chain
/// [0x1011] (main's call to f; f's own call to g left no frame to read) is main;g without
/// repair and main;f;g with it. A sample with a full chain, or where the function's frame is
/// established, is left alone; a frameless sample whose first return address follows an
/// indirect or unknown call cannot be repaired and is counted.
#[test]
fn frameless_samples_get_their_caller_back() {
    let mut modules = ModuleTable::default();
    modules.intern(Module::new("/x/prog"));
    let samples = vec![
        sample(0x3004, &[0x1011]),
        sample(0x3008, &[0x1011]),
        sample(0x3008, &[0x2011, 0x1011]),
        sample(0x2002, &[0x9999]),
        sample(0x2050, &[0x1011]),
        sample(0x3004, &[0x1042]),
    ];
    let set = SampleSet {
        modules,
        samples,
        ..Default::default()
    };
    let n = names();
    let plain = sampled_cct(&set, &n, None);
    assert_eq!(plain.contexts.get(&k(&["main", "g"])), Some(&3));
    assert_eq!(plain.repaired, 0);
    let fixed = sampled_cct_with(&set, &n, None, &Code);
    // 0x3004/0x3008 with [0x1011]: the call at 0x1011 targets f, not g: main;f;g (2).
    // 0x3008 with [0x2011, 0x1011]: the call at 0x2011 targets g itself: main;f;g (1).
    // 0x2002 with [0x9999]: frameless, unknown call: unrepaired, context 0x9999's name;f.
    // 0x2050 with [0x1011]: f's frame is established: main;f.
    // 0x3004 with [0x1042]: frameless after an indirect call: unrepaired, main;g.
    assert_eq!(fixed.contexts.get(&k(&["main", "f", "g"])), Some(&3));
    assert_eq!(fixed.contexts.get(&k(&["main", "f"])), Some(&1));
    assert_eq!(fixed.contexts.get(&k(&["main", "g"])), Some(&1));
    assert_eq!(fixed.repaired, 2);
    assert_eq!(fixed.unrepaired, 2);
    assert_eq!(fixed.total, 6);
}

fn pm(instructions: u64, l1_misses: u64) -> PathMetrics {
    PathMetrics {
        count: 1,
        instructions,
        cycles: instructions,
        l1_misses,
        llc_misses: 0,
    }
}

/// Paths A{1000 instr, 50 misses} B{1000, 5} C{100, 20} D{20000, 40}: program ratio
/// 115/22100; hot by misses (the paper's reading, >= 10% of them): A, C, D; A (0.05) and C
/// (0.2) dense, D (0.002) sparse.
#[test]
fn hot_dense_sparse_hand_computed() {
    let key = |f, id| PathKey {
        func: FuncIdx(f),
        id,
    };
    let mut p = PathProfile::default();
    p.paths.insert(key(0, 0), pm(1000, 50));
    p.paths.insert(key(0, 1), pm(1000, 5));
    p.paths.insert(key(1, 0), pm(100, 20));
    p.paths.insert(key(1, 1), pm(20000, 40));
    let opts = HotOptions {
        hot_share: 0.1,
        hot_by: HotMetric::L1Misses,
        ..Default::default()
    };
    let r = classify_hot(&p, &opts).unwrap();
    assert!((r.program_ratio - 115.0 / 22100.0).abs() < 1e-15);
    let class: BTreeMap<PathKey, HotClass> = r.paths.iter().map(|x| (x.0, x.2)).collect();
    assert_eq!(class[&key(0, 0)], HotClass::Dense);
    assert_eq!(class[&key(0, 1)], HotClass::Cold);
    assert_eq!(class[&key(1, 0)], HotClass::Dense);
    assert_eq!(class[&key(1, 1)], HotClass::Sparse);
    let (n, ins, miss) = r.path_summary(HotClass::Dense, &opts);
    assert_eq!(n, 2);
    assert!((ins - 1100.0 / 22100.0).abs() < 1e-12);
    assert!((miss - 70.0 / 115.0).abs() < 1e-12);
    // Procedures: f0 {2000, 55} ratio .0275 dense; f1 {20100, 60} ratio .00299 sparse.
    assert_eq!(r.procedures[0].func, FuncIdx(1));
    assert_eq!(r.procedures[0].class, HotClass::Sparse);
    assert_eq!(r.procedures[1].class, HotClass::Dense);
    assert_eq!(r.procedures[1].paths_executed, 2);
    // Covering half the misses (57.5): A (50) then D (40).
    let c = hot_paths_covering(&p, HotMetric::L1Misses, 0.5);
    assert_eq!(
        c.iter().map(|x| x.0).collect::<Vec<_>>(),
        vec![key(0, 0), key(1, 1)]
    );
    // Flat model: no misses, a clear error.
    let mut flat = PathProfile::default();
    flat.paths.insert(key(0, 0), pm(10, 0));
    assert!(classify_hot(&flat, &HotOptions::default())
        .unwrap_err()
        .to_string()
        .contains("cache simulation"));
}

/// The loop function of the profiler tests; one branch stack holding main->f, f's first
/// iteration (calling g), the backedge, the exit branch and the return, with these cycle
/// counts per entry (chronological).
fn lbr_fixture(cycles: [u32; 6]) -> (ProgramCfgs, SampleSet) {
    let cfgs = common::program();
    let br = |from: u64, to: u64, cycles: u32| Branch {
        from: Location::new(ModuleIdx(0), from),
        to: Location::new(ModuleIdx(0), to),
        mispredicted: false,
        predicted_known: false,
        cycles,
    };
    let mut chrono = vec![
        br(0x3000, 0x1000, cycles[0]),
        br(0x1010, 0x2000, cycles[1]),
        br(0x2004, 0x1014, cycles[2]),
        br(0x1014, 0x1008, cycles[3]),
        br(0x100c, 0x1018, cycles[4]),
        br(0x1018, 0x3004, cycles[5]),
    ];
    chrono.reverse(); // most recent first
    let mut modules = ModuleTable::default();
    modules.intern(Module::new("/t/prog"));
    let mut s = sample(0x3008, &[]);
    s.branches = chrono;
    let set = SampleSet {
        modules,
        samples: vec![s],
        ..Default::default()
    };
    (cfgs, set)
}

/// Expected: f's paths "entry b0 b1 b2 ->backedge" and "b1 b3 return" once each, g's only
/// path once.
#[test]
fn lbr_stack_reconstructs_paths() {
    let (cfgs, set) = lbr_fixture([0; 6]);
    let l = lbr_paths(&set, &cfgs);
    let fi = cfgs.find("f").unwrap();
    let nf = cfgs.numbering(fi).unwrap();
    let b = |v: &[u32]| v.iter().map(|&x| BlockId(x)).collect::<Vec<_>>();
    let p1 = nf.path_id(&b(&[0, 1, 2]), false, Some(BlockId(1))).unwrap();
    let p3 = nf.path_id(&b(&[1, 3]), true, None).unwrap();
    let gi = cfgs.find("g").unwrap();
    let want: BTreeMap<PathKey, u64> = [
        (PathKey { func: fi, id: p1 }, 1),
        (PathKey { func: fi, id: p3 }, 1),
        (PathKey { func: gi, id: 0 }, 1),
    ]
    .into();
    assert_eq!(l.paths, want);
    assert_eq!(l.samples, 1);
    assert_eq!(l.broken, 0);
}

/// Times from the cycle counts (hand-derived): entry k's count is the range that ends with
/// its branch. f's first path spans the ranges ending at the call to g (7) and at the
/// backedge (2): 9, g's range (3) is g's own; the exit path spans the ranges ending at the
/// exit branch (5) and at the return (1): 6. The first entry's 100 cycles precede f.
/// Instances come in completion order: g, f's first path, f's exit path. With one count
/// missing, the paths through it are left out and counted.
#[test]
fn lbr_stack_times_paths() {
    let (cfgs, set) = lbr_fixture([100, 7, 3, 2, 5, 1]);
    let l = lbr_timed_paths(&set, &cfgs);
    let fi = cfgs.find("f").unwrap();
    let gi = cfgs.find("g").unwrap();
    let nf = cfgs.numbering(fi).unwrap();
    let b = |v: &[u32]| v.iter().map(|&x| BlockId(x)).collect::<Vec<_>>();
    let p1 = nf.path_id(&b(&[0, 1, 2]), false, Some(BlockId(1))).unwrap();
    let p3 = nf.path_id(&b(&[1, 3]), true, None).unwrap();
    assert_eq!(
        l.timed,
        vec![
            (PathKey { func: gi, id: 0 }, 3),
            (PathKey { func: fi, id: p1 }, 9),
            (PathKey { func: fi, id: p3 }, 6),
        ]
    );
    assert_eq!(l.untimed, 0);
    assert_eq!(l.paths.paths.len(), 3);
    // The count of the backedge entry missing: f's first path is untimed.
    let (cfgs, set) = lbr_fixture([100, 7, 3, 0, 5, 1]);
    let l = lbr_timed_paths(&set, &cfgs);
    assert_eq!(
        l.timed,
        vec![
            (PathKey { func: gi, id: 0 }, 3),
            (PathKey { func: fi, id: p3 }, 6),
        ]
    );
    assert_eq!(l.untimed, 1);
}

/// A loop whose backedge is a fall-through (the latch b1 lies just before the header b2, as
/// gcc lays out `while` loops): entry b0 jumps to the header b2, whose `jne` goes back to b1;
/// b1 either exits (`je` to b3) or falls through into b2. Branch stack: call, jmp b0->b2,
/// jne b2->b1, [b1 falls through to b2], jne b2->b1, je b1->b3, ret. Paths: entry b0 b2 b1
/// ->backedge, then b2 b1 b3 return; the range 0x5004..0x5010 crosses the backedge, so both
/// are counted and neither is timed.
#[test]
fn lbr_fall_through_backedge_cuts_paths() {
    let lk = Cfg {
        function: "lk".into(),
        entry: Svma(0x5000),
        blocks: vec![
            block(0, &[0x5000]),
            block(1, &[0x5004, 0x5008]),
            block(2, &[0x500c, 0x5010]),
            block(3, &[0x5014]),
        ],
        edges: vec![
            edge(0, Some(2), EdgeKind::Unconditional),
            edge(1, Some(3), EdgeKind::Taken),
            edge(1, Some(2), EdgeKind::FallThrough),
            edge(2, Some(1), EdgeKind::Taken),
            edge(2, Some(3), EdgeKind::FallThrough),
            edge(3, None, EdgeKind::Return),
        ],
        loops: vec![Loop {
            id: LoopId(0),
            header: BlockId(2),
            blocks: vec![BlockId(1), BlockId(2)],
            latches: vec![BlockId(1)],
            parent: None,
            depth: 1,
        }],
        has_unknown_indirect: false,
    };
    let cfgs = ProgramCfgs::new(Module::new("/t/prog"), vec![lk]);
    let br = |from: u64, to: u64| Branch {
        from: Location::new(ModuleIdx(0), from),
        to: Location::new(ModuleIdx(0), to),
        mispredicted: false,
        predicted_known: false,
        cycles: 5,
    };
    let mut chrono = vec![
        br(0x9000, 0x5000),
        br(0x5000, 0x500c),
        br(0x5010, 0x5004),
        br(0x5010, 0x5004),
        br(0x5008, 0x5014),
        br(0x5014, 0x9004),
    ];
    chrono.reverse();
    let mut modules = ModuleTable::default();
    modules.intern(Module::new("/t/prog"));
    let mut s = sample(0x9008, &[]);
    s.branches = chrono;
    let set = SampleSet {
        modules,
        samples: vec![s],
        ..Default::default()
    };
    let l = lbr_timed_paths(&set, &cfgs);
    let f = cfgs.find("lk").unwrap();
    let n = cfgs.numbering(f).unwrap();
    let b = |v: &[u32]| v.iter().map(|&x| BlockId(x)).collect::<Vec<_>>();
    let pa = n.path_id(&b(&[0, 2, 1]), false, Some(BlockId(2))).unwrap();
    let pb = n.path_id(&b(&[2, 1, 3]), true, None).unwrap();
    let want: BTreeMap<PathKey, u64> = [
        (PathKey { func: f, id: pa }, 1),
        (PathKey { func: f, id: pb }, 1),
    ]
    .into();
    assert_eq!(l.paths.paths, want);
    assert_eq!(l.paths.broken, 0);
    assert!(l.timed.is_empty());
    assert_eq!(l.untimed, 2);
}

/// The default classes go by cycles (here = instructions): of 22100 cycles, 10% is 2210, so
/// only D {20000 instr, 40 misses} is hot, and sparse (0.002 < 115/22100 = 0.0052): the path
/// with 90% of the time is never `cold` for having few misses. With hot share 1%: A (1000,
/// ratio 0.05) and B (1000, 0.005 < 0.0052) join, dense and sparse; C (100 < 221) stays cold.
#[test]
fn hot_by_cycles_by_default() {
    let key = |f, id| PathKey {
        func: FuncIdx(f),
        id,
    };
    let mut p = PathProfile::default();
    p.paths.insert(key(0, 0), pm(1000, 50));
    p.paths.insert(key(0, 1), pm(1000, 5));
    p.paths.insert(key(1, 0), pm(100, 20));
    p.paths.insert(key(1, 1), pm(20000, 40));
    let classes = |share: f64| -> BTreeMap<PathKey, HotClass> {
        let o = HotOptions {
            hot_share: share,
            ..Default::default()
        };
        assert_eq!(o.hot_by, HotMetric::Cycles);
        let r = classify_hot(&p, &o).unwrap();
        r.paths.iter().map(|x| (x.0, x.2)).collect()
    };
    let c = classes(0.1);
    assert_eq!(c[&key(1, 1)], HotClass::Sparse);
    assert_eq!(c[&key(0, 0)], HotClass::Cold);
    assert_eq!(c[&key(0, 1)], HotClass::Cold);
    assert_eq!(c[&key(1, 0)], HotClass::Cold);
    let c = classes(0.01);
    assert_eq!(c[&key(0, 0)], HotClass::Dense);
    assert_eq!(c[&key(0, 1)], HotClass::Sparse);
    assert_eq!(c[&key(1, 0)], HotClass::Cold);
    assert_eq!(c[&key(1, 1)], HotClass::Sparse);
}
