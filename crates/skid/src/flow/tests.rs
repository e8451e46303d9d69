//! Unit tests of the flow solver.

use super::*;

fn exact_opts() -> FlowOptions {
    FlowOptions {
        skid_spread: 0.0,
        ..FlowOptions::default()
    }
}

fn block(cycles: Vec<f64>, calls: Vec<(usize, Callee)>, successors: Vec<Successor>) -> FlowBlock {
    FlowBlock {
        sampled_instructions: vec![0.0; cycles.len()],
        sampled_cycles: cycles,
        calls,
        successors,
    }
}

/// The two-function program of the emulation tests: `main`, one block [x, call h, y]
/// with successors itself or return, called from outside; `h`: [p, q, ret]. Sampled
/// cycles are those of 100 executions at CPI 1, except q at CPI 10 (the flows are given
/// by each test).
fn call_program() -> FlowGraph {
    let n = 100.0;
    FlowGraph {
        functions: vec![
            FlowFunction {
                name: "main".into(),
                blocks: vec![block(
                    vec![n, n, n],
                    vec![(1, Callee::Function(1))],
                    vec![Successor::Block(0), Successor::Return],
                )],
                external_callers: true,
                loops: vec![],
            },
            FlowFunction {
                name: "h".into(),
                blocks: vec![block(vec![n, 10.0 * n, n], vec![], vec![Successor::Return])],
                external_callers: false,
                loops: vec![],
            },
        ],
        boxes: vec![],
        cycle_period: 0.0,
    }
}

/// `main`: one block [x, call h, y] that loops (N - 1 times) or returns; `h`: [p, q, ret]
/// with CPIs (1, 10, 1); main's CPIs are 1. N = 100, S = 2, no spread. By hand (per
/// overflow, block sites):
/// * main x: call (1) < 2, into h with 1 left: p (1) >= 1 -> h.
/// * main call: into h with 2: p (1), q (11) >= 2 -> h.
/// * main y: block ends with 2 left; loop (99/100): x (1), call (2) >= 2 -> main; return
///   (1/100): main's caller is outside the model -> lost.
/// * h p: q (10) >= 2 -> h. h q: ret (1) < 2, return with 1 left to after the call: y
///   (1) >= 1 -> main. h ret: return with 2: y (1) < 2, block end with 1: loop (99/100)
///   -> x (1) -> main; return -> lost.
///
/// E^(main) = 100 (0.99 + 1 + 0.99) = 298, E^(h) = 100 (1 + 1 + 1) = 300.
#[test]
fn emulation_across_a_call_by_hand() {
    let n = 100.0;
    let g = call_program();
    let e = emulate_flow(
        &g,
        2.0,
        &exact_opts(),
        &[vec![vec![n - 1.0, 1.0]], vec![vec![n]]],
        &[1.0, 0.0],
        &[],
    )
    .unwrap();
    assert!((e[0] - 298.0).abs() < 1e-9, "{e:?}");
    assert!((e[1] - 300.0).abs() < 1e-9, "{e:?}");
}

/// `main`: [x, call X, y] looping N - 1 times; black box X with 3 instructions and 5
/// cycles per call (Y = 3N, C_X = 5N, tau = 5); CPIs of main 1; S = 3; N = 160.
/// * main x: call (1) < 3, X with 2 left: tau 5 >= 2 -> X. main call: tau 5 >= 3 -> X.
///   main y: loop (159/160): x (1), call (2), X with 1 left -> X; return -> lost.
/// * inside X: stays with probability 1 - S/tau = 0.4; leaves with r uniform on (0, 3]
///   (density 1/5). After the call, y (1) takes r <= 1 (mass 1/5); r in (1, 2] lands on x,
///   r in (2, 3] on the call, after looping (159/160) (mass 2/5, quantised at 1/4 cycle:
///   r = 1 is the quantum [0.875, 1.125], half of it above 1 -> (1.125 of r <= 1) and
///   1.875 of r > 1, over 5).
///
/// E^(X) = N (1 + 1 + 159/160) + 3N 0.4 = 671; E^(main) = 3N (1.125/5 + 1.875/5 159/160)
/// = 286.875.
#[test]
fn emulation_with_a_black_box_by_hand() {
    let n = 160.0;
    let g = FlowGraph {
        functions: vec![FlowFunction {
            name: "main".into(),
            blocks: vec![block(
                vec![n, n, n],
                vec![(1, Callee::Box(0))],
                vec![Successor::Block(0), Successor::Return],
            )],
            external_callers: true,
            loops: vec![],
        }],
        boxes: vec![BlackBox {
            name: "libx".into(),
            sampled_instructions: 0.0,
            sampled_cycles: 5.0 * n,
        }],
        cycle_period: 0.0,
    };
    let e = emulate_flow(
        &g,
        3.0,
        &exact_opts(),
        &[vec![vec![n - 1.0, 1.0]]],
        &[1.0],
        &[3.0 * n],
    )
    .unwrap();
    assert!((e[0] - 286.875).abs() < 1e-9, "{e:?}");
    assert!((e[1] - 671.0).abs() < 1e-9, "{e:?}");
}

/// Instruction sites: the program of `emulation_across_a_call_by_hand`, per
/// instruction. From the landings worked out there: main x <- h.ret looping (99), main
/// call <- main.y looping (99), main y <- h.q (100); h p <- main.x (100), h q <-
/// main.call and h.p (200), h ret <- nothing.
#[test]
fn emulation_per_instruction_by_hand() {
    let n = 100.0;
    let g = call_program();
    let mut o = exact_opts();
    o.instruction_sites = true;
    let e = emulate_flow(
        &g,
        2.0,
        &o,
        &[vec![vec![n - 1.0, 1.0]], vec![vec![n]]],
        &[1.0, 0.0],
        &[],
    )
    .unwrap();
    let want = [99.0, 99.0, 100.0, 100.0, 200.0, 0.0];
    for (a, b) in e.iter().zip(want) {
        assert!((a - b).abs() < 1e-9, "{e:?}");
    }
}

/// A program shaped like soplex's `price_rows` at a long skid: an outer loop (light
/// code with a divide) around an inner loop whose heavy load soaks up the outer code's
/// samples. The "sampled" profile is the forward model at known flows (per instruction,
/// then summed per block by the solver); the solver must find the flows again from the
/// raw fit, which is far off.
#[test]
fn solver_recovers_nested_loop_counts() {
    let rows = 5000.0;
    let trips = 16.0;
    // Blocks: 0 entry (3), 1 row head (4), 2 inner (5, heavy 200 at 1), 3 row tail
    // (14, two divides of 25: 71 cycles, longer than the skid, else every sample lands
    // on the heavy load and the tail's count is not identifiable), 4 exit (2).
    let cpi: Vec<Vec<f64>> = vec![
        vec![1.0; 3],
        vec![1.0; 4],
        vec![1.0, 200.0, 4.0, 1.0, 1.0],
        vec![
            1.0, 1.0, 4.0, 1.0, 25.0, 1.0, 1.0, 1.0, 4.0, 4.0, 1.0, 1.0, 25.0, 1.0,
        ],
        vec![1.0; 2],
    ];
    let counts = [1.0, rows, rows * trips, rows, 1.0];
    let succ = vec![
        vec![Successor::Block(1)],
        vec![Successor::Block(2)],
        vec![Successor::Block(2), Successor::Block(3)],
        vec![Successor::Block(1), Successor::Block(4)],
        vec![Successor::Return],
    ];
    let flows = vec![
        vec![1.0],
        vec![rows],
        vec![rows * (trips - 1.0), rows],
        vec![rows - 1.0, 1.0],
        vec![1.0],
    ];
    let mut g = FlowGraph {
        functions: vec![FlowFunction {
            name: "price_rows".into(),
            blocks: cpi
                .iter()
                .zip(&counts)
                .zip(&succ)
                .map(|((c, x), s)| block(c.iter().map(|v| v * x).collect(), vec![], s.clone()))
                .collect(),
            external_callers: true,
            loops: vec![vec![1, 2, 3], vec![2]],
        }],
        boxes: vec![],
        cycle_period: 1.0,
    };
    let o = FlowOptions {
        instruction_sites: true,
        ..FlowOptions::default()
    };
    // (skid, compare per instruction). Per block, S = 45 has an alias here: every
    // sample of the head lands on the heavy load, and the tail half as often and twice
    // as slow explains the two non-zero block totals (inner, tail) exactly as well; so
    // only skids where the data pin the counts.
    for (skid, per_instruction) in [(30.0, false), (60.0, false)] {
        let e = emulate_flow(&g, skid, &o, std::slice::from_ref(&flows), &[1.0], &[]).unwrap();
        let mut k = 0;
        for b in &mut g.functions[0].blocks {
            for x in &mut b.sampled_instructions {
                *x = e[k];
                k += 1;
            }
        }
        let raw_count = |b: usize| {
            let bl = &g.functions[0].blocks[b];
            bl.sampled_instructions.iter().sum::<f64>() / bl.sampled_instructions.len() as f64
        };
        let raw_err = [1, 3]
            .map(|b| (raw_count(b) - counts[b]).abs() / counts[b])
            .into_iter()
            .fold(0.0, f64::max);
        let so = FlowOptions {
            instruction_sites: per_instruction,
            ..FlowOptions::default()
        };
        let sol = solve_flow(&g, skid, &so).unwrap();
        let got = &sol.block_counts[0];
        assert!(
            raw_err > 0.3,
            "S={skid}: the raw profile must be skid-affected ({raw_err})"
        );
        for b in 1..4 {
            let rel = (got[b] - counts[b]).abs() / counts[b];
            assert!(
                rel < 0.02,
                "S={skid} per instruction {per_instruction}: block {b}: {} vs {} ({got:?})",
                got[b],
                counts[b]
            );
        }
        assert!(sol.phi <= sol.phi_start);
    }
}

#[test]
fn rejects_bad_graphs() {
    let ok = || FlowGraph {
        functions: vec![FlowFunction {
            name: "f".into(),
            blocks: vec![block(vec![1.0], vec![], vec![Successor::Return])],
            external_callers: true,
            loops: vec![],
        }],
        boxes: vec![],
        cycle_period: 0.0,
    };
    assert!(solve_flow(&ok(), 10.0, &FlowOptions::default()).is_ok());
    let mut g = ok();
    g.functions[0].blocks[0].successors = vec![Successor::Block(3)];
    assert!(solve_flow(&g, 10.0, &FlowOptions::default()).is_err());
    let mut g = ok();
    g.functions[0].blocks[0].calls = vec![(0, Callee::Function(9))];
    assert!(solve_flow(&g, 10.0, &FlowOptions::default()).is_err());
    let mut g = ok();
    g.functions[0].blocks[0].sampled_cycles.push(1.0);
    assert!(solve_flow(&g, 10.0, &FlowOptions::default()).is_err());
    let mut g = ok();
    g.functions[0].blocks[0].sampled_instructions[0] = f64::NAN;
    assert!(solve_flow(&g, 10.0, &FlowOptions::default()).is_err());
    assert!(solve_flow(&ok(), -1.0, &FlowOptions::default()).is_err());
    g.functions[0].blocks.clear();
    assert!(solve_flow(&g, 10.0, &FlowOptions::default()).is_err());
}

// ---- The solvers on tiny graphs ----------------------------------------------------------

/// A diamond in a loop: block 0 [2 instructions, CPI 1] branches to block 1 [3, CPI 1] or
/// block 2 [1, CPI 8]; both go to block 3 [1, CPI 1], which loops back to block 0 or
/// returns. Called once, `n` iterations, taking block 1 `t` times. (In a loop, as real hot
/// code is: samples that skid past a function's return leave the model and are lost.)
/// Sampled values are set by each test.
fn diamond(n: f64, t: f64) -> (FlowGraph, Vec<f64>, Vec<Vec<Vec<f64>>>) {
    let counts = vec![n, t, n - t, n];
    let cpi = [vec![1.0; 2], vec![1.0; 3], vec![8.0], vec![1.0]];
    let succ = [
        vec![Successor::Block(1), Successor::Block(2)],
        vec![Successor::Block(3)],
        vec![Successor::Block(3)],
        vec![Successor::Block(0), Successor::Return],
    ];
    let g = FlowGraph {
        functions: vec![FlowFunction {
            name: "diamond".into(),
            blocks: (0..4)
                .map(|b| {
                    block(
                        cpi[b].iter().map(|c| c * counts[b]).collect(),
                        vec![],
                        succ[b].clone(),
                    )
                })
                .collect(),
            external_callers: true,
            loops: vec![vec![0, 1, 2, 3]],
        }],
        boxes: vec![],
        cycle_period: 1.0,
    };
    let flows = vec![vec![
        vec![t, n - t],
        vec![t],
        vec![n - t],
        vec![n - 1.0, 1.0],
    ]];
    (g, counts, flows)
}

/// A loop: block 0 [2] enters block 1 [4 instructions, CPI 1 except a load of CPI 20],
/// which repeats (`trips - 1` times per entry) or leaves to block 2 [1]. Entered `n` times.
fn simple_loop(n: f64, trips: f64) -> (FlowGraph, Vec<f64>, Vec<Vec<Vec<f64>>>) {
    let counts = vec![n, n * trips, n];
    let cpi = [vec![1.0; 2], vec![1.0, 20.0, 1.0, 1.0], vec![1.0]];
    let succ = [
        vec![Successor::Block(1)],
        vec![Successor::Block(1), Successor::Block(2)],
        vec![Successor::Return],
    ];
    let g = FlowGraph {
        functions: vec![FlowFunction {
            name: "loop".into(),
            blocks: (0..3)
                .map(|b| {
                    block(
                        cpi[b].iter().map(|c| c * counts[b]).collect(),
                        vec![],
                        succ[b].clone(),
                    )
                })
                .collect(),
            external_callers: true,
            loops: vec![vec![1]],
        }],
        boxes: vec![],
        cycle_period: 1.0,
    };
    let flows = vec![vec![vec![n], vec![n * (trips - 1.0), n], vec![n]]];
    (g, counts, flows)
}

/// Sets the sampled instructions of `g` to the forward model at `flows` (block sites: each
/// block's value on its first instruction; the solver sums per block).
fn observe(g: &mut FlowGraph, skid: f64, opts: &FlowOptions, flows: &[Vec<Vec<f64>>]) {
    let e = emulate_flow(g, skid, opts, flows, &[1.0], &[]).unwrap();
    for (b, bl) in g.functions[0].blocks.iter_mut().enumerate() {
        for (k, x) in bl.sampled_instructions.iter_mut().enumerate() {
            *x = if k == 0 { e[b] } else { 0.0 };
        }
    }
}

fn assert_counts(got: &[f64], want: &[f64], rel: f64, what: &str) {
    for (b, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= rel * w.max(1.0),
            "{what}: block {b}: {g} vs {w} (all: {got:?} vs {want:?})"
        );
    }
}

/// Counts that conserve flow come back unchanged from the start fit, with the branch's
/// edge flows split as the arms' counts say.
#[test]
fn start_fit_keeps_consistent_counts() {
    let (g, counts, _) = diamond(1000.0, 700.0);
    let opts = exact_opts();
    let mut l = Layout::new(&g, false, 0.0).unwrap();
    let cons = l.conservation_rows();
    let st = FlowStart {
        block_counts: vec![counts.clone()],
        box_counts: vec![],
    };
    let v = start_flows(&mut l, &g, &cons, &opts, &st);
    assert_counts(&l.counts(&v), &counts, 1e-6, "start fit");
}

/// Without skid every sample stays where it overflowed: the emulation is the identity and
/// the solver returns the exact counts.
#[test]
fn solver_without_skid_returns_the_counts() {
    let (mut g, counts, flows) = diamond(1000.0, 700.0);
    observe(&mut g, 0.0, &exact_opts(), &flows);
    let sol = solve_flow(&g, 0.0, &exact_opts()).unwrap();
    assert_counts(&sol.block_counts[0], &counts, 1e-3, "S = 0");
    assert!(sol.max_conservation_error < 1e-3, "{sol:?}");
}

/// Skid 3 moves samples out of block 2's slow instruction into block 3 and of block 0 into
/// the arms; the solver undoes it on the diamond.
#[test]
fn solver_recovers_a_branch_under_skid() {
    let (mut g, counts, flows) = diamond(1000.0, 700.0);
    let opts = exact_opts();
    observe(&mut g, 3.0, &opts, &flows);
    let raw: Vec<f64> = g.functions[0]
        .blocks
        .iter()
        .map(|b| b.sampled_instructions.iter().sum::<f64>() / b.sampled_instructions.len() as f64)
        .collect();
    assert!(
        (raw[2] - counts[2]).abs() > 0.2 * counts[2],
        "the raw profile must be skid-affected: {raw:?}"
    );
    let sol = solve_flow(&g, 3.0, &opts).unwrap();
    assert_counts(&sol.block_counts[0], &counts, 0.02, "diamond S = 3");
    assert!(sol.phi <= sol.phi_start);
}

/// Levenberg-Marquardt from a wrong start (the branch split 50/50 instead of 70/30) lowers
/// `phi` and moves the arms to their true counts. On a smooth `phi`: the emulation averages
/// over a skid spread of 2 cycles (with a sharp skid `phi` is flat around a wrong start, the
/// golf course of the module doc, which is why the solver smooths in stages).
#[test]
fn levenberg_marquardt_moves_a_wrong_start_to_the_truth() {
    let (mut g, counts, flows) = diamond(1000.0, 700.0);
    let opts = FlowOptions {
        skid_spread: 2.0,
        ..FlowOptions::default()
    };
    observe(&mut g, 3.0, &opts, &flows);
    let mut l = Layout::new(&g, false, 0.0).unwrap();
    let cons = l.conservation_rows();
    let st = FlowStart {
        block_counts: vec![vec![1000.0, 500.0, 500.0, 1000.0]],
        box_counts: vec![],
    };
    let y = l.y.clone();
    let v0 = start_flows(&mut l, &g, &cons, &opts, &st);
    l.y = y;
    let phi0 = phi_e(&l, &emulate_at(&l, &v0, 3.0, &opts));
    let (v, phi, _, _) = levenberg_marquardt(&l, &cons, 3.0, &opts, v0, 30);
    assert!(phi < 1e-3 * phi0, "phi {phi0} -> {phi}");
    assert_counts(&l.counts(&v), &counts, 0.02, "LM");
}

/// The global search scales a loop's trip count on a grid of factors: from a start with a
/// quarter of the true trips it finds a start near the truth, with a lower `phi`.
#[test]
fn global_search_scales_a_loop_toward_its_trip_count() {
    let (mut g, counts, flows) = simple_loop(100.0, 40.0);
    let opts = exact_opts();
    observe(&mut g, 5.0, &opts, &flows);
    let mut l = Layout::new(&g, false, 0.0).unwrap();
    let cons = l.conservation_rows();
    let st = FlowStart {
        block_counts: vec![vec![100.0, 1000.0, 100.0]],
        box_counts: vec![],
    };
    let (phi0, _) = phi_at_start(&mut l, &g, &cons, 5.0, &opts, &st, None);
    let factors: Vec<f64> = (-10..=10).map(|k| 4f64.powf(k as f64 / 10.0)).collect();
    let found = global_search(&mut l, &g, &cons, 5.0, &opts, st, &factors);
    let (phi1, _) = phi_at_start(&mut l, &g, &cons, 5.0, &opts, &found, None);
    assert!(phi1 < phi0, "phi {phi0} -> {phi1}");
    let trips = found.block_counts[0][1];
    assert!(
        (trips - counts[1]).abs() < 0.25 * counts[1],
        "loop count {trips} vs {} (start 1000)",
        counts[1]
    );
}
