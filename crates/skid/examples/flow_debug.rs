//! Diagnostics of the flow solver on one profile: `cargo run --release -p proftrust-skid
//! --example flow_debug -- SAMPLES EXACT BINARY SKID` (a `vpmu` sample file, its `--exact`
//! file, the program). Prints `phi` at the raw fit, at the exact counts, at the solution and
//! at a solve started from the exact counts; the totals; the block counts of each; `phi`
//! along the segment solution -> truth. Environment knobs (diagnostics only): `SITES=1`
//! (observed vs emulated per site at the truth), `ISITES=1` (per-instruction sites),
//! `SCAN=f,b1,b2,..` (`phi` while scaling those blocks of function `f`), `SPREAD`, `SMOOTH`,
//! `LM`, `ALT`, `GS`, `IPC` (the `FlowOptions` of the same names).

use proftrust_binary::Symbolizer;
use proftrust_model::Location;
use proftrust_skid::flow::{sites_at, solve_flow_from, FlowOptions, FlowStart};
use proftrust_skid::program::{program_graph, ProgramOptions, SampledProfile};
use std::collections::HashMap;
use std::path::PathBuf;

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 4 {
        eprintln!("usage: flow_debug SAMPLES EXACT BINARY SKID");
        std::process::exit(2);
    }
    let set = proftrust_formats::native::read_samples(&std::fs::read(&a[0]).unwrap()).unwrap();
    let exact = proftrust_formats::native::read_exact(&std::fs::read(&a[1]).unwrap()).unwrap();
    let bin = PathBuf::from(&a[2]);
    let skid: f64 = a[3].parse().unwrap();
    let p = SampledProfile::from_sample_set(&set).unwrap();
    let sym = Symbolizer::new(&p.modules, std::slice::from_ref(&bin));
    let modules: Vec<_> = p
        .modules
        .iter()
        .filter(|(i, _)| sym.binary(*i).is_some_and(|b| b.path() == bin.as_path()))
        .map(|(i, _)| i)
        .collect();
    let pg = program_graph(&p, &sym, &modules, &ProgramOptions::default()).unwrap();
    let mut truth: HashMap<Location, f64> = HashMap::new();
    for ic in &exact.instructions {
        let m = ic
            .loc
            .module
            .and_then(|m| exact.modules.get(m))
            .and_then(|m| p.modules.find_same_binary(m));
        *truth
            .entry(Location {
                module: m,
                svma: ic.loc.svma,
            })
            .or_default() += ic.count as f64;
    }
    let start = FlowStart {
        block_counts: pg
            .functions
            .iter()
            .map(|f| {
                f.blocks
                    .iter()
                    .map(|b| {
                        b.iter()
                            .map(|a| {
                                truth
                                    .get(&Location::new(f.module, a.0))
                                    .copied()
                                    .unwrap_or(0.0)
                            })
                            .fold(0.0, f64::max)
                    })
                    .collect()
            })
            .collect(),
        box_counts: pg
            .box_modules
            .iter()
            .map(|m| {
                truth
                    .iter()
                    .filter(|(l, _)| l.module == Some(*m))
                    .map(|(_, v)| v)
                    .sum()
            })
            .collect(),
    };
    let isites = std::env::var("ISITES").is_ok();
    let lm: usize = std::env::var("LM")
        .ok()
        .and_then(|x| x.parse().ok())
        .unwrap_or(30);
    let mut base = FlowOptions::default();
    base.instruction_sites = isites;
    base.lm_iterations = lm;
    if let Some(g) = std::env::var("GS").ok().and_then(|x| x.parse().ok()) {
        base.global_sweeps = g;
    }
    if let Some(g) = std::env::var("IPC").ok().and_then(|x| x.parse().ok()) {
        base.max_ipc = g;
    }
    base.max_iterations = std::env::var("ALT")
        .ok()
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    base.smoothing_start = std::env::var("SMOOTH")
        .ok()
        .and_then(|x| x.parse().ok())
        .unwrap_or(0.5);
    let mut o0 = base.clone();
    o0.max_iterations = 0;
    o0.lm_iterations = 0;
    let at_truth = solve_flow_from(&pg.graph, skid, &o0, Some(&start)).unwrap();
    let raw = solve_flow_from(&pg.graph, skid, &o0, None).unwrap();
    let t = std::time::Instant::now();
    let sol = solve_flow_from(&pg.graph, skid, &base, None).unwrap();
    let dt = t.elapsed().as_secs_f64();
    let from_truth = solve_flow_from(&pg.graph, skid, &base, Some(&start)).unwrap();
    println!(
        "phi: raw fit {:.4e}, at truth {:.4e}, solved {:.4e} ({} it, {:.2} s, conv {}), from truth {:.4e} ({} it)",
        raw.phi, at_truth.phi, sol.phi, sol.iterations, dt, sol.converged, from_truth.phi, from_truth.iterations
    );
    {
        let y: f64 = pg
            .graph
            .functions
            .iter()
            .flat_map(|f| f.blocks.iter().flat_map(|b| b.sampled_instructions.iter()))
            .sum::<f64>()
            + pg.graph
                .boxes
                .iter()
                .map(|b| b.sampled_instructions)
                .sum::<f64>();
        let c: f64 = sol
            .block_counts
            .iter()
            .enumerate()
            .map(|(k, bc)| {
                bc.iter()
                    .zip(&pg.functions[k].blocks)
                    .map(|(x, b)| x * b.len() as f64)
                    .sum::<f64>()
            })
            .sum::<f64>()
            + sol.box_counts.iter().sum::<f64>();
        println!("total observed {y:.0}, corrected {c:.0}");
    }
    println!(
        "{:<24} {:>6} {:>4} {:>12} {:>12} {:>12} {:>12} {:>12}",
        "function", "block", "n", "truth", "raw-fit", "solved", "from-truth", "sampledE"
    );
    for (k, f) in pg.functions.iter().enumerate() {
        for (b, ins) in f.blocks.iter().enumerate() {
            let e: f64 = pg.graph.functions[k].blocks[b]
                .sampled_instructions
                .iter()
                .sum();
            let tr = start.block_counts[k][b];
            if tr == 0.0 && e == 0.0 && sol.block_counts[k][b] < 1.0 {
                continue;
            }
            println!(
                "{:<24} {:>6} {:>4} {:>12.0} {:>12.0} {:>12.0} {:>12.0} {:>12.0}",
                f.name.chars().take(24).collect::<String>(),
                format!("{:x}", ins[0].0),
                ins.len(),
                tr,
                raw.block_counts[k][b],
                sol.block_counts[k][b],
                from_truth.block_counts[k][b],
                e / ins.len() as f64
            );
        }
    }
    if std::env::var("SITES").is_ok() {
        let (y, e) = sites_at(&pg.graph, skid, &o0, &start).unwrap();
        let mut k = 0;
        for f in &pg.functions {
            for b in &f.blocks {
                let items: Vec<Option<proftrust_model::Svma>> = if o0.instruction_sites {
                    b.iter().map(|a| Some(*a)).collect()
                } else {
                    vec![None]
                };
                for a in items {
                    if y[k] > 0.0 || e[k] > 0.0 {
                        println!(
                            "site {:<20} {:>8} observed {:>12.0} emulated {:>12.0}",
                            f.name.chars().take(20).collect::<String>(),
                            a.map_or(format!("{:x}", b[0].0), |a| format!("{:x}", a.0)),
                            y[k],
                            e[k]
                        );
                    }
                    k += 1;
                }
            }
        }
    }
    if let Some(sp) = std::env::var("SPREAD")
        .ok()
        .and_then(|x| x.parse::<f64>().ok())
    {
        o0.skid_spread = sp;
    }
    if let Ok(scan) = std::env::var("SCAN") {
        // SCAN=f,b1,b2,...: scale the true counts of those blocks of function f by a factor
        // and the remaining blocks of f to keep f's total; print phi per factor.
        let parts: Vec<usize> = scan.split(',').map(|x| x.parse().unwrap()).collect();
        let f = parts[0];
        let sel = &parts[1..];
        for k in 0..=40 {
            let fac = 0.1 + 0.05 * k as f64;
            let mut st = start.clone();
            let sizes: Vec<f64> = pg.functions[f]
                .blocks
                .iter()
                .map(|b| b.len() as f64)
                .collect();
            let tot: f64 = st.block_counts[f]
                .iter()
                .zip(&sizes)
                .map(|(x, n)| x * n)
                .sum();
            let selsum: f64 = sel.iter().map(|&b| st.block_counts[f][b] * sizes[b]).sum();
            let rest = tot - selsum;
            let new_sel = selsum * fac;
            let rest_fac = if rest > 0.0 {
                (tot - new_sel) / rest
            } else {
                1.0
            };
            for b in 0..sizes.len() {
                st.block_counts[f][b] *= if sel.contains(&b) { fac } else { rest_fac };
            }
            let r = solve_flow_from(&pg.graph, skid, &o0, Some(&st)).unwrap();
            println!("scan {fac:.2}: phi {:.4e}", r.phi);
        }
    }
    // phi along the segment solved -> truth.
    let spread: f64 = std::env::var("SPREAD")
        .ok()
        .and_then(|x| x.parse().ok())
        .unwrap_or(1.0);
    o0.skid_spread = spread;
    for t in [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0] {
        let st = FlowStart {
            block_counts: sol
                .block_counts
                .iter()
                .zip(&start.block_counts)
                .map(|(a, b)| {
                    a.iter()
                        .zip(b)
                        .map(|(x, y)| (1.0 - t) * x + t * y)
                        .collect()
                })
                .collect(),
            box_counts: sol
                .box_counts
                .iter()
                .zip(&start.box_counts)
                .map(|(x, y)| (1.0 - t) * x + t * y)
                .collect(),
        };
        let r = solve_flow_from(&pg.graph, skid, &o0, Some(&st)).unwrap();
        let mut o1 = base.clone();
        o1.skid_spread = spread;
        let r2 = solve_flow_from(&pg.graph, skid, &o1, Some(&st)).unwrap();
        println!(
            "t {t:.1}: phi {:.4e} -> solved {:.4e} ({} it)",
            r.phi, r2.phi, r2.iterations
        );
    }
    for (k, m) in pg.box_modules.iter().enumerate() {
        println!(
            "box {:?} {}: truth {:.0} raw {:.0} solved {:.0} from-truth {:.0}",
            m,
            pg.graph.boxes[k].name,
            start.box_counts[k],
            raw.box_counts[k],
            sol.box_counts[k],
            from_truth.box_counts[k]
        );
    }
}
