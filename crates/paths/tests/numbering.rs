//! Ball-Larus numbering on generated CFGs: every entry-to-exit path (enumerated by an
//! independent DFS over the original CFG) gets a distinct id in `[0, NumPaths)`, the count of
//! enumerated paths equals `NumPaths(ENTRY)`, and regeneration round-trips.

use proftrust_model::{BasicBlock, BlockId, Cfg, CfgEdge, EdgeKind, Loop, LoopId, Svma};
use proftrust_paths::{PathNumbering, RegeneratedPath, Step};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashSet;

fn bb(id: u32) -> BasicBlock {
    let start = 0x1000 + 0x10 * id as u64;
    BasicBlock {
        id: BlockId(id),
        start: Svma(start),
        end: Svma(start + 0x10),
        instructions: vec![Svma(start), Svma(start + 8)],
    }
}

/// A random CFG: forward edges i->j (j>i), "backedges" i->j (j<=i) declared as loops, some
/// returning blocks; the last block returns.
fn random_cfg(rng: &mut ChaCha8Rng, n: u32) -> (Cfg, HashSet<(u32, u32)>) {
    let mut edges = Vec::new();
    let mut back = HashSet::new();
    let mut loops = Vec::new();
    for i in 0..n {
        if i == n - 1 || (i > 0 && rng.gen_bool(0.15)) {
            edges.push(CfgEdge {
                from: BlockId(i),
                to: None,
                kind: EdgeKind::Return,
            });
            continue;
        }
        let k = rng.gen_range(1..=2);
        let mut targets = Vec::new();
        for _ in 0..k {
            let t = rng.gen_range(i + 1..n);
            if !targets.contains(&t) {
                targets.push(t);
            }
        }
        if rng.gen_bool(0.25) {
            let h = rng.gen_range(0..=i);
            targets.push(h);
            back.insert((i, h));
            loops.push(Loop {
                id: LoopId(loops.len() as u32),
                header: BlockId(h),
                blocks: (h..=i).map(BlockId).collect(),
                latches: vec![BlockId(i)],
                parent: None,
                depth: 1,
            });
        }
        for (j, t) in targets.into_iter().enumerate() {
            edges.push(CfgEdge {
                from: BlockId(i),
                to: Some(BlockId(t)),
                kind: if j == 0 {
                    EdgeKind::FallThrough
                } else {
                    EdgeKind::Taken
                },
            });
        }
    }
    let cfg = Cfg {
        function: format!("gen{n}"),
        entry: Svma(0x1000),
        blocks: (0..n).map(bb).collect(),
        edges,
        loops,
        has_unknown_indirect: false,
    };
    (cfg, back)
}

/// All Ball-Larus paths of the original CFG by DFS: start at block 0 or (after a backedge)
/// at a header; follow non-back edges; end by returning or by taking a backedge.
fn enumerate(cfg: &Cfg, back: &HashSet<(u32, u32)>) -> Vec<RegeneratedPath> {
    // Blocks reachable from block 0 over all edges (backedges included: a header reached
    // only through its backedge still starts paths after it).
    let mut reach = HashSet::from([0u32]);
    let mut work = vec![0u32];
    while let Some(v) = work.pop() {
        for e in cfg.successors(BlockId(v)) {
            if let Some(t) = e.to {
                if reach.insert(t.0) {
                    work.push(t.0);
                }
            }
        }
    }
    let mut starts = vec![(0u32, false)];
    let mut hs: Vec<u32> = back
        .iter()
        .filter(|(t, _)| reach.contains(t))
        .map(|&(_, h)| h)
        .collect();
    hs.sort_unstable();
    hs.dedup();
    starts.extend(hs.into_iter().map(|h| (h, true)));
    let mut out = Vec::new();
    fn go(
        cfg: &Cfg,
        back: &HashSet<(u32, u32)>,
        cur: &mut Vec<BlockId>,
        after: bool,
        out: &mut Vec<RegeneratedPath>,
    ) {
        let v = cur.last().unwrap().0;
        let mut seen = HashSet::new();
        for e in cfg.successors(BlockId(v)) {
            match e.to {
                None => out.push(RegeneratedPath {
                    blocks: cur.clone(),
                    starts_after_backedge: after,
                    ends_with_backedge_to: None,
                }),
                Some(t) if back.contains(&(v, t.0)) => {
                    if seen.insert(t.0) {
                        out.push(RegeneratedPath {
                            blocks: cur.clone(),
                            starts_after_backedge: after,
                            ends_with_backedge_to: Some(t),
                        })
                    }
                }
                Some(t) => {
                    if seen.insert(t.0) {
                        cur.push(t);
                        go(cfg, back, cur, after, out);
                        cur.pop();
                    }
                }
            }
        }
    }
    for (s, after) in starts {
        go(cfg, back, &mut vec![BlockId(s)], after, &mut out);
    }
    out
}

fn key(p: &RegeneratedPath) -> (Vec<BlockId>, bool, Option<BlockId>) {
    (
        p.blocks.clone(),
        p.starts_after_backedge,
        p.ends_with_backedge_to,
    )
}

#[test]
fn generated_cfgs_number_every_path_uniquely_and_regenerate() {
    let seed = 0x5eed_0003u64;
    eprintln!("seed {seed:#x}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for case in 0..300 {
        let n = rng.gen_range(1..=14);
        let (cfg, back) = random_cfg(&mut rng, n);
        let num = PathNumbering::new(&cfg).unwrap_or_else(|e| panic!("case {case}: {e}"));
        let paths = enumerate(&cfg, &back);
        assert_eq!(
            paths.len() as u128,
            num.num_paths(),
            "case {case} (n={n}): DFS path count vs NumPaths(ENTRY)"
        );
        let mut ids = HashSet::new();
        for p in &paths {
            let id = num
                .path_id(&p.blocks, p.starts_after_backedge, p.ends_with_backedge_to)
                .unwrap_or_else(|| panic!("case {case}: no id for {p:?}"));
            assert!(id < num.num_paths(), "case {case}: id {id} out of range");
            assert!(ids.insert(id), "case {case}: duplicate id {id}");
            let r = num.regenerate(id).unwrap();
            assert_eq!(key(&r), key(p), "case {case}: regeneration of id {id}");
        }
        assert!(num.regenerate(num.num_paths()).is_err());
    }
}

/// The profiler's transition table ([`PathNumbering::step`]) against the per-query methods
/// it replaces (`is_backedge`, then `loop_end_val`/`loop_start_val`, else `real_val`) and
/// against the generator's own edges: every declared backedge is a `Back`, every other CFG
/// edge a `Real`, every other pair of blocks (and blocks past the end) `None`.
#[test]
fn step_table_agrees_with_the_edge_queries() {
    let seed = 0x5eed_0021u64;
    eprintln!("seed {seed:#x}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut backs, mut reals) = (0, 0);
    for case in 0..300 {
        let n = rng.gen_range(1..=14);
        let (cfg, back) = random_cfg(&mut rng, n);
        let num = PathNumbering::new(&cfg).unwrap_or_else(|e| panic!("case {case}: {e}"));
        let edges: HashSet<(u32, u32)> = cfg
            .edges
            .iter()
            .filter_map(|e| Some((e.from.0, e.to?.0)))
            .collect();
        for a in 0..n + 2 {
            for b in 0..n + 2 {
                let (fa, tb) = (BlockId(a), BlockId(b));
                let old = if num.is_backedge(fa, tb) {
                    Step::Back {
                        end: num
                            .loop_end_val(fa, tb)
                            .expect("a backedge has Val(t->EXIT)"),
                        start: num.loop_start_val(tb),
                    }
                } else {
                    num.real_val(fa, tb).map_or(Step::None, Step::Real)
                };
                let got = num.step(fa, tb);
                assert_eq!(got, old, "case {case}: {a}->{b}");
                let reachable = num.is_reachable(fa);
                match got {
                    Step::Back { start, .. } => {
                        backs += 1;
                        assert!(back.contains(&(a, b)), "case {case}: {a}->{b} back");
                        assert!(start.is_some(), "case {case}: header {b} has ENTRY->h");
                    }
                    Step::Real(_) => {
                        reals += 1;
                        assert!(edges.contains(&(a, b)) && !back.contains(&(a, b)));
                    }
                    Step::None => assert!(!reachable || !edges.contains(&(a, b))),
                }
            }
        }
    }
    assert!(
        backs > 50 && reals > 500,
        "{backs} backedges, {reals} real edges"
    );
}

/// The paper's Figure 1 shape (hand-derived): A->B, A->C, B->C, B->D, C->D, D->E, D->F,
/// E->F, F returns. NumPaths: F=1, E=1, D=2, C=2, B=4, A=6.
#[test]
fn figure_one_hand_computed() {
    let e = |a: u32, b: u32| CfgEdge {
        from: BlockId(a),
        to: Some(BlockId(b)),
        kind: EdgeKind::FallThrough,
    };
    let cfg = Cfg {
        function: "fig1".into(),
        entry: Svma(0x1000),
        blocks: (0..6).map(bb).collect(),
        edges: vec![
            e(0, 1),
            e(0, 2),
            e(1, 2),
            e(1, 3),
            e(2, 3),
            e(3, 4),
            e(3, 5),
            e(4, 5),
            CfgEdge {
                from: BlockId(5),
                to: None,
                kind: EdgeKind::Return,
            },
        ],
        loops: vec![],
        has_unknown_indirect: false,
    };
    let n = PathNumbering::new(&cfg).unwrap();
    assert_eq!(n.num_paths(), 6);
    assert_eq!(n.num_paths_from(BlockId(1)), 4);
    assert_eq!(n.num_paths_from(BlockId(2)), 2);
    assert_eq!(n.num_paths_from(BlockId(3)), 2);
    // Val: A->B 0, A->C NumPaths(B)=4, B->C 0, B->D 2, D->E 0, D->F 1.
    assert_eq!(n.real_val(BlockId(0), BlockId(1)), Some(0));
    assert_eq!(n.real_val(BlockId(0), BlockId(2)), Some(4));
    assert_eq!(n.real_val(BlockId(1), BlockId(3)), Some(2));
    assert_eq!(n.real_val(BlockId(3), BlockId(5)), Some(1));
    // ACDF = 4 + 0 + 1 = 5.
    let p = n.regenerate(5).unwrap();
    assert_eq!(
        p.blocks,
        vec![BlockId(0), BlockId(2), BlockId(3), BlockId(5)]
    );
}

/// A chain of 130 diamonds has 2^130 paths: more than u128 holds.
#[test]
fn too_many_paths_is_an_error_not_a_wrap() {
    let mk = |k: u32| {
        let n = 3 * k + 1;
        let mut edges = Vec::new();
        for d in 0..k {
            let a = 3 * d;
            for (f, t) in [(a, a + 1), (a, a + 2), (a + 1, a + 3), (a + 2, a + 3)] {
                edges.push(CfgEdge {
                    from: BlockId(f),
                    to: Some(BlockId(t)),
                    kind: EdgeKind::FallThrough,
                });
            }
        }
        edges.push(CfgEdge {
            from: BlockId(n - 1),
            to: None,
            kind: EdgeKind::Return,
        });
        Cfg {
            function: format!("diamonds{k}"),
            entry: Svma(0x1000),
            blocks: (0..n).map(bb).collect(),
            edges,
            loops: vec![],
            has_unknown_indirect: false,
        }
    };
    let n = PathNumbering::new(&mk(127)).unwrap();
    assert_eq!(n.num_paths(), 1u128 << 127);
    let id = (1u128 << 127) - 1;
    assert_eq!(n.regenerate(id).unwrap().blocks.len(), 2 * 127 + 1);
    let err = PathNumbering::new(&mk(130)).unwrap_err();
    assert!(err.to_string().contains("too many paths"), "{err}");
}

/// An irreducible cycle (two entries into the cycle 1<->2) without a declared loop: the DFS
/// finds the retreating edge, and numbering still covers every path.
#[test]
fn irreducible_cycle_is_cut_by_dfs() {
    let e = |a: u32, b: u32| CfgEdge {
        from: BlockId(a),
        to: Some(BlockId(b)),
        kind: EdgeKind::Taken,
    };
    let cfg = Cfg {
        function: "irr".into(),
        entry: Svma(0x1000),
        blocks: (0..4).map(bb).collect(),
        edges: vec![
            e(0, 1),
            e(0, 2),
            e(1, 2),
            e(2, 1),
            e(2, 3),
            CfgEdge {
                from: BlockId(3),
                to: None,
                kind: EdgeKind::Return,
            },
        ],
        loops: vec![],
        has_unknown_indirect: true,
    };
    let n = PathNumbering::new(&cfg).unwrap();
    assert_eq!(n.irreducible_backedges(), 1);
    assert!(n.is_incomplete());
    // DFS from 0 visits 1 first, then 2; 2->1 is retreating.
    assert!(n.is_backedge(BlockId(2), BlockId(1)));
    let mut back = HashSet::new();
    back.insert((2, 1));
    let paths = enumerate(&cfg, &back);
    assert_eq!(paths.len() as u128, n.num_paths());
    let mut ids = HashSet::new();
    for p in &paths {
        let id = n
            .path_id(&p.blocks, p.starts_after_backedge, p.ends_with_backedge_to)
            .unwrap();
        assert!(ids.insert(id));
        assert_eq!(key(&n.regenerate(id).unwrap()), key(p));
    }
}
