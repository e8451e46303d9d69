//! The exact path profiler and CCT builder on hand-written traces whose expected paths,
//! counts, instructions and call records are derived by hand in the comments.

use proftrust_model::{
    BlockId, BlockVisitor, Module, ModuleIdx, RunOutcome, Svma, TraceEnd, TraceEvent,
};
mod common;
use common::program;
use proftrust_paths::{
    gprof_comparison, Cct, PathKey, PathMetrics, Profiler, ProfilerOptions, ProgramCfgs,
};

fn run(
    cfgs: &ProgramCfgs,
    trace: &[(u32, &[u64], TraceEnd)],
) -> (proftrust_paths::PathProfile, Cct) {
    let mut p = Profiler::new(cfgs, ProfilerOptions::default());
    let m = Module::new("/t/prog");
    p.visit(&TraceEvent::Module {
        idx: ModuleIdx(0),
        module: &m,
    });
    let mut libc = Module::new("/lib/libc.so.6");
    libc.load_bias = 1;
    p.visit(&TraceEvent::Module {
        idx: ModuleIdx(1),
        module: &libc,
    });
    for &(module, ins, end) in trace {
        common::visit_block(&mut p, 7, module, ins, end, &[]);
    }
    p.visit(&TraceEvent::End(&RunOutcome::Exited { code: 0 }));
    p.finish()
}

use TraceEnd::{Call, Other, Return};

#[test]
fn loop_paths_calls_and_contexts() {
    let cfgs = program();
    let trace: Vec<(u32, &[u64], TraceEnd)> = vec![
        (0, &[0x3000], Call),
        // QEMU block spanning b0, b1 and the call in b2.
        (0, &[0x1000, 0x1004, 0x1008, 0x100c, 0x1010], Call),
        (0, &[0x2000, 0x2004], Return),
        (0, &[0x1014], Other),
        (0, &[0x1008, 0x100c], Other),
        (0, &[0x1010], Call),
        (0, &[0x2000, 0x2004], Return),
        (0, &[0x1014], Other),
        (0, &[0x1008, 0x100c], Other),
        (0, &[0x1018], Return),
        (0, &[0x3004], Call),
        (0, &[0x1000, 0x1004, 0x1008], Other), // cut short mid-block
        (0, &[0x100c], Other),
        (0, &[0x1018], Return),
        (0, &[0x3008], Return), // main returns to code never called in the trace
        (1, &[0x100], Other),
    ];
    let (prof, cct) = run(&cfgs, &trace);
    let f = cfgs.find("f").unwrap();
    let nf = cfgs.numbering(f).unwrap();
    let b = |v: &[u32]| v.iter().map(|&x| BlockId(x)).collect::<Vec<_>>();
    // Hand-derived paths of f (instructions exclusive of g):
    // P1 = entry b0 b1 b2 -> backedge: 6 instructions; P2 = b1 b2 -> backedge: 4;
    // P3 = b1 b3 return (after backedge): 3; P4 = entry b0 b1 b3 return: 5.
    let p1 = nf.path_id(&b(&[0, 1, 2]), false, Some(BlockId(1))).unwrap();
    let p2 = nf.path_id(&b(&[1, 2]), true, Some(BlockId(1))).unwrap();
    let p3 = nf.path_id(&b(&[1, 3]), true, None).unwrap();
    let p4 = nf.path_id(&b(&[0, 1, 3]), false, None).unwrap();
    let get = |id| prof.paths.get(&PathKey { func: f, id }).copied();
    let pm = |count, instructions| PathMetrics {
        count,
        instructions,
        cycles: instructions,
        l1_misses: 0,
        llc_misses: 0,
    };
    assert_eq!(get(p1), Some(pm(1, 6)));
    assert_eq!(get(p2), Some(pm(1, 4)));
    assert_eq!(get(p3), Some(pm(1, 3)));
    assert_eq!(get(p4), Some(pm(1, 5)));
    assert_eq!(prof.paths.keys().filter(|k| k.func == f).count(), 4);
    let g = cfgs.find("g").unwrap();
    assert_eq!(prof.paths.get(&PathKey { func: g, id: 0 }), Some(&pm(2, 4)));
    let fs = &prof.functions[f.0 as usize];
    assert_eq!(
        (fs.activations, fs.lost_transfers, fs.lost_instructions),
        (2, 0, 0)
    );
    // main returns to code the trace never saw call it: its path completes, and the code
    // after it becomes a new outermost record.
    let main = cfgs.find("main").unwrap();
    let ms = &prof.functions[main.0 as usize];
    assert_eq!((ms.unfinished, ms.lost_instructions), (0, 0));
    assert_eq!(
        prof.paths.get(&PathKey { func: main, id: 0 }),
        Some(&pm(1, 3))
    );
    assert_eq!(prof.total_instructions, 26);

    // Per-edge oracle: path counts summed per CFG edge equal the edge counts of the trace
    // (b0->b1: 2, b1->b2: 2, b2->b1: 2, b1->b3: 2).
    let mut per_edge = std::collections::BTreeMap::new();
    for (k, m) in prof.paths.iter().filter(|(k, _)| k.func == f) {
        let r = nf.regenerate(k.id).unwrap();
        for w in r.blocks.windows(2) {
            *per_edge.entry((w[0].0, w[1].0)).or_insert(0) += m.count;
        }
        if let Some(h) = r.ends_with_backedge_to {
            *per_edge
                .entry((r.blocks.last().unwrap().0, h.0))
                .or_insert(0) += m.count;
        }
    }
    let want: std::collections::BTreeMap<(u32, u32), u64> =
        [((0, 1), 2), ((1, 2), 2), ((2, 1), 2), ((1, 3), 2)].into();
    assert_eq!(per_edge, want);

    // CCT: root -> main -> f@0x3000 -> g (2 calls, one site); main -> f@0x3004;
    // root -> libc+0x100.
    let s = cct.stats();
    assert_eq!(s.nodes, 5);
    assert_eq!(s.height, 3);
    assert_eq!(s.max_replication, 2);
    assert!((s.avg_degree - 5.0 / 3.0).abs() < 1e-12);
    assert_eq!(cct.unmatched_returns, 1);
    let names = cfgs.function_map().finish();
    let ctx = cct.context_instructions(&names, None);
    let k = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(ctx.get(&k(&["main"])), Some(&3));
    assert_eq!(ctx.get(&k(&["main", "f"])), Some(&18)); // 13 + 5, sites merged
    assert_eq!(ctx.get(&k(&["main", "f", "g"])), Some(&4));
    let g_node = cct
        .nodes()
        .iter()
        .find(|n| n.procedure.svma == Svma(0x2000))
        .unwrap();
    assert_eq!((g_node.calls, g_node.instructions), (2, 4));
    let mut folded = Vec::new();
    cct.write_folded(&names, &mut folded).unwrap();
    assert_eq!(
        String::from_utf8(folded).unwrap(),
        "libc.so.6+0x100 1\nmain 3\nmain;f 18\nmain;f;g 4\n"
    );
}

/// Direct recursion r->r->r and mutual recursion a->b->a->b fold into backedges.
#[test]
fn recursion_folds_into_ancestors() {
    let cfgs = program();
    // Code without CFGs (libc module 1) is fine for the CCT: procedures are entry addresses.
    let trace: Vec<(u32, &[u64], TraceEnd)> = vec![
        (0, &[0x3000], Call),
        (1, &[0x500, 0x504], Call), // r1 calls r
        (1, &[0x500, 0x504], Call), // r2 calls r
        (1, &[0x500], Other),       // r3
        (1, &[0x50c], Return),
        (1, &[0x508], Return), // in r2
        (1, &[0x508], Return), // in r1
        (0, &[0x3004], Call),
        (1, &[0x600, 0x604], Call), // a1 calls b
        (1, &[0x700, 0x704], Call), // b1 calls a
        (1, &[0x600, 0x604], Call), // a2 calls b
        (1, &[0x700], Other),       // b2
        (1, &[0x70c], Return),
        (1, &[0x608], Return), // in a2
        (1, &[0x708], Return), // in b1
        (1, &[0x608], Return), // in a1
        (0, &[0x3008], Other),
    ];
    let (_, cct) = run(&cfgs, &trace);
    let s = cct.stats();
    // main, r, a, b.
    assert_eq!(s.nodes, 4);
    assert_eq!(s.height, 3);
    let be = cct.backedges();
    // r -> r twice (r1 and r2 share the record r); b -> a once; a2 runs in record a, whose
    // slot for site 0x604 already holds b: a tree edge, b.calls = 2.
    let node_at = |a: u64| {
        cct.nodes()
            .iter()
            .find(|n| n.procedure.svma == Svma(a))
            .unwrap()
            .id
    };
    let (r, a, b) = (node_at(0x500), node_at(0x600), node_at(0x700));
    assert_eq!(be, vec![(r, r, 2), (b, a, 1)]);
    assert_eq!(cct.node(r).calls, 1);
    assert_eq!(cct.node(a).calls, 1);
    assert_eq!(cct.node(b).calls, 2);
    assert_eq!(cct.unmatched_returns, 0);
    assert_eq!(cct.unwound_frames, 0);
}

/// longjmp from b (called by a, called by main) back into main: the frames of a, b and
/// longjmp are unwound, the tree stays as built, main goes on.
#[test]
fn longjmp_unwinds_without_corrupting() {
    let cfgs = program();
    let trace: Vec<(u32, &[u64], TraceEnd)> = vec![
        (0, &[0x3000], Call),
        (0, &[0x1000, 0x1004, 0x1008, 0x100c, 0x1010], Call), // f calls g
        (0, &[0x2000], Call),                                 // g calls longjmp
        (1, &[0x900, 0x904], Other),                          // longjmp jumps into main
        (0, &[0x3004], Call),                                 // main calls f again
        (0, &[0x1000, 0x1004, 0x1008, 0x100c], Other),
        (0, &[0x1018], Return),
        (0, &[0x3008], Other),
    ];
    let (prof, cct) = run(&cfgs, &trace);
    assert_eq!(cct.unwound_frames, 3);
    assert_eq!(cct.unmatched_returns, 0);
    let f = cfgs.find("f").unwrap();
    let fs = &prof.functions[f.0 as usize];
    assert_eq!(fs.unwound, 1);
    assert_eq!(fs.lost_instructions, 5);
    // The second activation of f still records its path b0 b1 b3.
    let nf = cfgs.numbering(f).unwrap();
    let p4 = nf
        .path_id(&[BlockId(0), BlockId(1), BlockId(3)], false, None)
        .unwrap();
    assert_eq!(
        prof.paths.get(&PathKey { func: f, id: p4 }).unwrap().count,
        1
    );
    // main's instructions after the longjmp go to main's record.
    let names = cfgs.function_map().finish();
    let ctx = cct.context_instructions(&names, None);
    assert_eq!(ctx.get(&vec!["main".to_string()]), Some(&3));
}

/// gprof's assumption against the exact CCT, hand-computed: main calls a and b once each; a
/// calls c once (100 instructions), b calls c three times (30 instructions in all).
/// gprof: T(c) = 130 over 4 calls; context a->c gets 130/4 = 32.5, b->c gets 97.5.
/// The three calls from b come from three call sites (three records) but are one context.
/// epsilon = (|32.5-100| + |97.5-30|) / 2 / total, total = 139 instructions.
#[test]
fn gprof_problem_hand_computed() {
    let cfgs = program();
    let c_body: Vec<u64> = (0..100).map(|i| 0x800 + 4 * i).collect();
    let c_short: Vec<u64> = (0..10).map(|i| 0x800 + 4 * i).collect();
    let trace: Vec<(u32, &[u64], TraceEnd)> = vec![
        (0, &[0x3000], Call),
        (1, &[0x600], Call), // a calls c
        (1, &c_body[..], Return),
        (1, &[0x604], Return),
        (0, &[0x3004], Call),
        (1, &[0x700], Call), // b calls c (three times)
        (1, &c_short[..], Return),
        (1, &[0x704], Call),
        (1, &c_short[..], Return),
        (1, &[0x708], Call),
        (1, &c_short[..], Return),
        (1, &[0x70c], Return),
        (0, &[0x3008], Other),
    ];
    let (_, cct) = run(&cfgs, &trace);
    let names = cfgs.function_map().finish();
    let g = gprof_comparison(&cct, &names).unwrap();
    // Total instructions: main 3 + a 2 + b 4 + c 130 = 139.
    let total = 139.0;
    let want = ((100.0f64 - 32.5).abs() + (97.5f64 - 30.0).abs()) / 2.0 / total;
    assert!(
        (g.epsilon - want).abs() < 1e-12,
        "{} vs {}",
        g.epsilon,
        want
    );
    let ca = g
        .contexts
        .iter()
        .find(|c| c.exact == 100)
        .expect("a->c context");
    assert!((ca.gprof - 32.5).abs() < 1e-9);
    let cb = g.contexts.iter().find(|c| c.exact == 30).expect("b->c");
    assert!((cb.gprof - 97.5).abs() < 1e-9);
}

/// `on_path` sees every path instance as it completes, with that instance's own metrics,
/// in trace order (hand-derived from the trace of `loop_paths_calls_and_contexts`): g,
/// f's P1 (6 instructions), g, P2 (4), P3 (3), then the second activation's P4 (5), then
/// main (3) when it returns to code the trace never saw call it.
#[test]
fn on_path_reports_each_instance_in_order() {
    let cfgs = program();
    let f = cfgs.find("f").unwrap();
    let g = cfgs.find("g").unwrap();
    let main = cfgs.find("main").unwrap();
    let nf = cfgs.numbering(f).unwrap();
    let b = |v: &[u32]| v.iter().map(|&x| BlockId(x)).collect::<Vec<_>>();
    let p1 = nf.path_id(&b(&[0, 1, 2]), false, Some(BlockId(1))).unwrap();
    let p2 = nf.path_id(&b(&[1, 2]), true, Some(BlockId(1))).unwrap();
    let p3 = nf.path_id(&b(&[1, 3]), true, None).unwrap();
    let p4 = nf.path_id(&b(&[0, 1, 3]), false, None).unwrap();
    let seen = std::cell::RefCell::new(Vec::new());
    let mut p = Profiler::new(&cfgs, ProfilerOptions::default()).on_path(|tid, k, m| {
        assert_eq!(m.count, 1);
        seen.borrow_mut().push((tid, k, m.instructions));
    });
    let m = Module::new("/t/prog");
    p.visit(&TraceEvent::Module {
        idx: ModuleIdx(0),
        module: &m,
    });
    let trace: Vec<(&[u64], TraceEnd)> = vec![
        (&[0x3000], Call),
        (&[0x1000, 0x1004, 0x1008, 0x100c, 0x1010], Call),
        (&[0x2000, 0x2004], Return),
        (&[0x1014], Other),
        (&[0x1008, 0x100c], Other),
        (&[0x1010], Call),
        (&[0x2000, 0x2004], Return),
        (&[0x1014], Other),
        (&[0x1008, 0x100c], Other),
        (&[0x1018], Return),
        (&[0x3004], Call),
        (&[0x1000, 0x1004, 0x1008], Other),
        (&[0x100c], Other),
        (&[0x1018], Return),
        (&[0x3008], Return),
        (&[0x3000], Other),
    ];
    for (ins, end) in trace {
        common::visit_block(&mut p, 9, 0, ins, end, &[]);
    }
    let (prof, _) = p.finish();
    let k = |func, id| PathKey { func, id };
    assert_eq!(
        seen.into_inner(),
        vec![
            (9, k(g, 0), 2),
            (9, k(f, p1), 6),
            (9, k(g, 0), 2),
            (9, k(f, p2), 4),
            (9, k(f, p3), 3),
            (9, k(f, p4), 5),
            (9, k(main, 0), 3),
        ]
    );
    assert_eq!(prof.paths.values().map(|m| m.count).sum::<u64>(), 7);
}
