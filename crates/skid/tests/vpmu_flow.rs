//! End to end, interprocedural: the virtual PMU (proftrust-vpmu, independent of the
//! correction) samples a synthetic program whose skid crosses calls — a loop that calls a
//! leaf function with a heavy load and a 50-instruction shared-library routine (a black
//! box, like libm's `exp` in libsvm), then runs an inner loop with a heavy load and a random
//! trip count — and the flow correction must recover the exact block counts the same replay
//! counted, where the raw profile is far off.
//!
//! (A library routine much shorter than the skid, followed by a heavy load, would not do:
//! all its samples and those of the loop after it land on that load, and its size trades
//! off against the loop's count with nothing in the profile to tell them apart.)

use proftrust_model::{
    BlockVisitor, Module, ModuleIdx, RunOutcome, Svma, TraceBlock, TraceEnd, TraceEvent,
};
use proftrust_skid::flow::{
    solve_flow, BlackBox, Callee, FlowBlock, FlowFunction, FlowGraph, FlowOptions, Successor,
};
use proftrust_vpmu::{CostTable, CycleModel, SkidDist, StaticCost, Vpmu, VpmuOptions};
use rand::{Rng, SeedableRng};
use std::collections::HashMap;

/// Addresses of `n` 4-byte instructions from `at`.
fn addrs(at: u64, n: u64) -> Vec<Svma> {
    (0..n).map(|k| Svma(at + 4 * k)).collect()
}

struct Program {
    main0: Vec<Svma>,
    inner: Vec<Svma>,
    tail: Vec<Svma>,
    f: Vec<Svma>,
    lib: Vec<Svma>,
}

fn program() -> Program {
    Program {
        main0: addrs(0x100, 8),
        inner: addrs(0x120, 5),
        tail: addrs(0x134, 6),
        f: addrs(0x200, 6),
        lib: addrs(0x1000, 50),
    }
}

/// Runs `rows` rows through the virtual PMU; returns per-address (module, svma) estimates of
/// instructions and cycles, exact counts, and the mean cycle period.
#[allow(clippy::type_complexity)]
fn run(
    skid: u64,
    heavy: u32,
    rows: u64,
    seed: u64,
) -> (
    HashMap<(u32, u64), f64>,
    HashMap<(u32, u64), f64>,
    HashMap<(u32, u64), f64>,
    f64,
) {
    let p = program();
    let mut t = CostTable::new("prog");
    for s in p.main0.iter().chain(&p.inner).chain(&p.tail).chain(&p.f) {
        t.costs.insert(s.0, StaticCost { cycles: 1, len: 4 });
    }
    t.set(p.main0[1].0, 4);
    t.set(p.inner[1].0, heavy);
    t.set(p.inner[2].0, 4);
    t.set(p.tail[3].0, 25);
    t.set(p.f[2].0, 150);
    let mut lib = CostTable::new("libx.so");
    for s in &p.lib {
        lib.costs.insert(s.0, StaticCost { cycles: 1, len: 4 });
    }
    let mut model = CycleModel::flat(1);
    model.tables.push(t);
    model.tables.push(lib);
    let mut o = VpmuOptions::default();
    o.instruction_period = 97;
    o.cycle_period = 101;
    o.skid = SkidDist::Constant(skid);
    o.seed = seed;
    let mut v = Vpmu::new(o, model).unwrap();
    let m0 = Module::new("/x/prog");
    let m1 = Module::new("/x/libx.so");
    v.visit(&TraceEvent::Module {
        idx: ModuleIdx(0),
        module: &m0,
    });
    v.visit(&TraceEvent::Module {
        idx: ModuleIdx(1),
        module: &m1,
    });
    fn blk(m: u32, ins: &[Svma], end: TraceEnd) -> TraceBlock<'_> {
        TraceBlock {
            tid: 1,
            module: Some(ModuleIdx(m)),
            instructions: ins,
            end,
            mem: &[],
            key: None,
        }
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    for _ in 0..rows {
        v.block(&blk(0, &p.main0[0..4], TraceEnd::Call));
        v.block(&blk(0, &p.f, TraceEnd::Return));
        v.block(&blk(0, &p.main0[4..7], TraceEnd::Call));
        v.block(&blk(1, &p.lib, TraceEnd::Return));
        v.block(&blk(0, &p.main0[7..], TraceEnd::Other));
        for _ in 0..rng.gen_range(4..=12) {
            v.block(&blk(0, &p.inner, TraceEnd::Other));
        }
        v.block(&blk(0, &p.tail, TraceEnd::Other));
    }
    v.end(&RunOutcome::Exited { code: 0 });
    let (set, exact) = v.finish();
    let exact = exact.unwrap();
    let key = |l: proftrust_model::Location| {
        let name = l
            .module
            .and_then(|m| set.modules.get(m))
            .map(|m| m.file_name().to_string())
            .unwrap_or_default();
        (if name == "libx.so" { 1 } else { 0 }, l.svma.0)
    };
    let (mut ei, mut ci) = (HashMap::new(), HashMap::new());
    let (mut nc, mut pc) = (0.0, 0.0);
    for s in &set.samples {
        let map = if s.event == 0 { &mut ei } else { &mut ci };
        *map.entry(key(s.ip)).or_insert(0.0) += s.period as f64;
        if s.event == 1 {
            nc += 1.0;
            pc += s.period as f64;
        }
    }
    let mut truth = HashMap::new();
    for ic in &exact.instructions {
        let name = ic
            .loc
            .module
            .and_then(|m| exact.modules.get(m))
            .map(|m| m.file_name().to_string())
            .unwrap_or_default();
        let k = (if name == "libx.so" { 1 } else { 0 }, ic.loc.svma.0);
        truth.insert(k, ic.count as f64);
    }
    (ei, ci, truth, pc / nc)
}

fn block(
    ins: &[Svma],
    ei: &HashMap<(u32, u64), f64>,
    ci: &HashMap<(u32, u64), f64>,
    calls: Vec<(usize, Callee)>,
    successors: Vec<Successor>,
) -> FlowBlock {
    FlowBlock {
        sampled_instructions: ins
            .iter()
            .map(|a| ei.get(&(0, a.0)).copied().unwrap_or(0.0))
            .collect(),
        sampled_cycles: ins
            .iter()
            .map(|a| ci.get(&(0, a.0)).copied().unwrap_or(0.0))
            .collect(),
        calls,
        successors,
    }
}

/// Seed 000's epsilon over named groups.
fn eps(a: &[f64], b: &[f64]) -> f64 {
    let (sa, sb): (f64, f64) = (a.iter().sum(), b.iter().sum());
    0.5 * a
        .iter()
        .zip(b)
        .map(|(x, y)| (x / sa - y / sb).abs())
        .sum::<f64>()
}

#[test]
fn flow_correction_recovers_exact_counts_across_calls() {
    let p = program();
    for (skid, heavy) in [(19u64, 300u32), (29, 200)] {
        let (ei, ci, truth, cycle_period) = run(skid, heavy, 20_000, 11);
        let g = FlowGraph {
            functions: vec![
                FlowFunction {
                    name: "main".into(),
                    blocks: vec![
                        block(
                            &p.main0,
                            &ei,
                            &ci,
                            vec![(3, Callee::Function(1)), (6, Callee::Box(0))],
                            vec![Successor::Block(1)],
                        ),
                        block(
                            &p.inner,
                            &ei,
                            &ci,
                            vec![],
                            vec![Successor::Block(1), Successor::Block(2)],
                        ),
                        block(
                            &p.tail,
                            &ei,
                            &ci,
                            vec![],
                            vec![Successor::Block(0), Successor::Return],
                        ),
                    ],
                    external_callers: true,
                    loops: vec![vec![0, 1, 2], vec![1]],
                },
                FlowFunction {
                    name: "f".into(),
                    blocks: vec![block(&p.f, &ei, &ci, vec![], vec![Successor::Return])],
                    external_callers: false,
                    loops: vec![],
                },
            ],
            boxes: vec![BlackBox {
                name: "libx.so".into(),
                sampled_instructions: p
                    .lib
                    .iter()
                    .map(|a| ei.get(&(1, a.0)).copied().unwrap_or(0.0))
                    .sum(),
                sampled_cycles: p
                    .lib
                    .iter()
                    .map(|a| ci.get(&(1, a.0)).copied().unwrap_or(0.0))
                    .sum(),
            }],
            cycle_period,
        };
        let sol = solve_flow(&g, skid as f64, &FlowOptions::default()).unwrap();
        // Exact counts per block (first instruction) and of the box (all instructions).
        let t = |a: Svma| truth.get(&(0, a.0)).copied().unwrap_or(0.0);
        let true_blocks = [t(p.main0[0]), t(p.inner[0]), t(p.tail[0]), t(p.f[0])];
        let true_box: f64 = p
            .lib
            .iter()
            .map(|a| truth.get(&(1, a.0)).copied().unwrap_or(0.0))
            .sum();
        let got = [
            sol.block_counts[0][0],
            sol.block_counts[0][1],
            sol.block_counts[0][2],
            sol.block_counts[1][0],
        ];
        let raw = |ins: &[Svma], m: u32| {
            ins.iter()
                .map(|a| ei.get(&(m, a.0)).copied().unwrap_or(0.0))
                .sum::<f64>()
        };
        let raw_blocks = [
            raw(&p.main0, 0) / 8.0,
            raw(&p.inner, 0) / 5.0,
            raw(&p.tail, 0) / 6.0,
            raw(&p.f, 0) / 6.0,
        ];
        // Function level: main (its three blocks), f, libx.
        let sizes = [8.0, 5.0, 6.0, 6.0];
        let per_fn = |c: &[f64; 4], bx: f64| {
            vec![
                c[0] * sizes[0] + c[1] * sizes[1] + c[2] * sizes[2],
                c[3] * sizes[3],
                bx,
            ]
        };
        let fn_true = per_fn(&true_blocks, true_box);
        let fn_raw = per_fn(&raw_blocks, raw(&p.lib, 1));
        let fn_cor = per_fn(&got, sol.box_counts[0]);
        let (er, ec) = (eps(&fn_raw, &fn_true), eps(&fn_cor, &fn_true));
        eprintln!(
            "S={skid} heavy={heavy}: blocks true {true_blocks:?} raw {raw_blocks:?} corrected \
             {got:?}; box true {true_box} raw {} corrected {}; function eps raw {er:.4} \
             corrected {ec:.4}",
            raw(&p.lib, 1),
            sol.box_counts[0]
        );
        assert!(er > 0.03, "the case must be skid-affected: raw eps {er}");
        assert!(ec < 0.016, "corrected function eps {ec} (raw {er})");
        for k in 0..4 {
            let rel = (got[k] - true_blocks[k]).abs() / true_blocks[k];
            assert!(rel < 0.03, "block {k}: {} vs {}", got[k], true_blocks[k]);
        }
        let rel = (sol.box_counts[0] - true_box).abs() / true_box;
        assert!(rel < 0.03, "box {} vs {true_box}", sol.box_counts[0]);
    }
}
