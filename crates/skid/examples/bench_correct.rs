//! Timing of one loop correction with 16 simple loops (run by scripts/bench-skid.sh):
//! a loop of four if/else diamonds in a row (2^4 = 16 elementary cycles through the header),
//! 10 blocks of 3..8 instructions, one heavy load per diamond arm; the sampled profile is
//! produced by the model from known frequencies (seeded). Prints the time per solve for
//! each solver and emulation (median of 5 runs for lsq and flow, one run for Gibbs), and
//! the instruction-level error against the known counts. The flow solver gets the same
//! loop as a function (header, diamonds, latch that loops or returns).

use proftrust_skid::correct::{
    solve_gibbs, solve_lsq, Emulation, GibbsOptions, LoopProblem, LsqOptions, Prepared,
};
use proftrust_skid::flow::{
    solve_flow, FlowBlock, FlowFunction, FlowGraph, FlowOptions, Successor,
};
use rand::{Rng, SeedableRng};
use std::time::Instant;

fn main() {
    let seed = 1u64;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    // Blocks: 0 header, then for diamond d: arms 1+2d (then), 2+2d (else); 9 latch.
    let sizes: Vec<usize> = (0..10).map(|_| rng.gen_range(3..=8)).collect();
    let mut cpi_of_block: Vec<Vec<f64>> = sizes.iter().map(|&n| vec![1.0; n]).collect();
    for d in 0..4 {
        let heavy: f64 = rng.gen_range(100.0..300.0);
        cpi_of_block[1 + 2 * d][1] = heavy;
    }
    let mut loops = Vec::new();
    for mask in 0..16u32 {
        let mut v = vec![0];
        for d in 0..4 {
            v.push(if mask & (1 << d) != 0 {
                1 + 2 * d
            } else {
                2 + 2 * d
            });
        }
        v.push(9);
        loops.push(v);
    }
    let f_true: Vec<f64> = (0..16).map(|_| rng.gen_range(100.0..5000.0)).collect();
    let cpi: Vec<f64> = cpi_of_block.concat();
    let mut p = LoopProblem {
        block_sizes: sizes.clone(),
        simple_loops: loops,
        sampled_instructions: vec![0.0; cpi.len()],
        sampled_cycles: vec![0.0; cpi.len()],
        skid: 40.0,
    };
    let pr = Prepared::new(&p).expect("valid problem");
    let e_true = pr.executions(&f_true);
    p.sampled_cycles = e_true.iter().zip(&cpi).map(|(e, c)| e * c).collect();
    let mut pr = Prepared::new(&p).expect("valid problem");
    pr.emulation = Emulation::Mixed;
    p.sampled_instructions = pr.emulate(&f_true);
    let eps = |x: &[f64]| {
        let (a, b): (f64, f64) = (x.iter().sum(), e_true.iter().sum());
        0.5 * x
            .iter()
            .zip(&e_true)
            .map(|(u, v)| (u / a - v / b).abs())
            .sum::<f64>()
    };
    println!(
        "loop: 10 blocks, 16 simple loops, {} instructions, S = 40, seed {seed}",
        cpi.len()
    );
    println!("raw instruction eps {:.4}", eps(&p.sampled_instructions));
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for em in [Emulation::PerLoop, Emulation::Mixed] {
        let mut lo = LsqOptions::default();
        lo.emulation = em;
        let mut times = Vec::new();
        let mut s = None;
        for _ in 0..5 {
            let t = Instant::now();
            s = Some(solve_lsq(&p, &lo).expect("solves"));
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let s = s.expect("ran");
        let ms = median(times);
        println!(
            "lsq   {em:?}: {ms:8.1} ms, eps {:.4}, phi {:.3e}",
            eps(&s.instructions),
            s.phi
        );
        let mut go = GibbsOptions::default();
        go.emulation = em;
        go.seed = seed;
        let t = Instant::now();
        let s = solve_gibbs(&p, &go).expect("solves");
        let ms = t.elapsed().as_secs_f64() * 1e3;
        println!(
            "gibbs {em:?}: {ms:8.1} ms, eps {:.4}, phi {:.3e}, sweeps {}",
            eps(&s.instructions),
            s.phi,
            s.iterations
        );
    }
    // The same loop for the flow solver: header 0 -> diamond arms -> latch 9 -> header or
    // return; entered once from outside.
    let start = |b: usize| -> usize { sizes[..b].iter().sum() };
    let mut blocks = Vec::new();
    for (b, &size) in sizes.iter().enumerate() {
        let successors = match b {
            0 => vec![Successor::Block(1), Successor::Block(2)],
            9 => vec![Successor::Block(0), Successor::Return],
            _ => {
                let d = (b - 1) / 2;
                if d == 3 {
                    vec![Successor::Block(9)]
                } else {
                    vec![Successor::Block(3 + 2 * d), Successor::Block(4 + 2 * d)]
                }
            }
        };
        let r = start(b)..start(b) + size;
        blocks.push(FlowBlock {
            sampled_instructions: p.sampled_instructions[r.clone()].to_vec(),
            sampled_cycles: p.sampled_cycles[r].to_vec(),
            calls: vec![],
            successors,
        });
    }
    let g = FlowGraph {
        functions: vec![FlowFunction {
            name: "loop".into(),
            blocks,
            external_callers: true,
            loops: vec![(0..10).collect()],
        }],
        boxes: vec![],
        cycle_period: 0.0,
    };
    let variants: Vec<(&str, FlowOptions)> = if std::env::var_os("FLOW_VARIANTS").is_some() {
        let mut v = vec![("default", FlowOptions::default())];
        for r in [0, 2, 3] {
            let mut o = FlowOptions::default();
            o.jacobian_refresh = r;
            v.push((["broyden", "", "refresh 2", "refresh 3"][r], o));
        }
        v
    } else {
        vec![("default", FlowOptions::default())]
    };
    for (name, fo) in variants {
        let mut times = Vec::new();
        let mut sol = None;
        for _ in 0..5 {
            let t = Instant::now();
            sol = Some(solve_flow(&g, 40.0, &fo).expect("solves"));
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let sol = sol.expect("ran");
        let counts: Vec<f64> = (0..10)
            .flat_map(|b| std::iter::repeat_n(sol.block_counts[0][b], sizes[b]))
            .collect();
        println!(
            "flow  ({name}): {:8.1} ms, eps {:.4}, phi {:.3e}",
            median(times),
            eps(&counts),
            sol.phi
        );
    }
}
