//! The library on real programs (C sources in tests/c, compiled at test time with
//! gcc -O2 -g): numbering of every function of the binaries, and the exact CCT of
//! recursion.c from a QEMU block trace against the call counts derived by hand in its
//! comments.

use proftrust_binary::Binary;
use proftrust_exact::{trace_qemu, QemuOptions};
use proftrust_model::{BlockId, Module};
use proftrust_paths::{Cct, FunctionMap, PathNumbering, Profiler, ProfilerOptions, ProgramCfgs};
use proftrust_testkit::have;
use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

fn compile(dir: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    proftrust_testkit::compile_c(dir, &src, name, &[])
}

fn program(bin: &Path) -> (Binary, ProgramCfgs) {
    let b = Binary::open(bin).unwrap();
    let cfgs: Vec<_> = b.functions().iter().filter_map(|f| b.cfg(f).ok()).collect();
    let m = Module {
        path: bin.to_string_lossy().into_owned(),
        build_id: b.build_id().cloned(),
        load_bias: 0,
    };
    (b, ProgramCfgs::new(m, cfgs))
}

/// Every path of every function with at most 10^5 paths: enumerated by DFS over the
/// numbered graph's blocks (the oracle counts them and checks distinct in-range ids and
/// round trips).
#[test]
fn numbering_on_real_functions() {
    if !have("gcc") {
        proftrust_testkit::skip!("numbering_on_real_functions: gcc is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for name in ["branches", "recursion"] {
        let (_, p) = program(&compile(dir.path(), name));
        for (f, cfg) in p.iter() {
            let n = match p.numbering(f) {
                Ok(n) => n,
                Err(e) => panic!("{}: {e}", cfg.function),
            };
            if n.num_paths() > 100_000 {
                continue;
            }
            let mut ids = HashSet::new();
            let mut found = 0u128;
            // DFS over block sequences that path_id accepts: starts at block 0 or a loop
            // header, extends along non-back edges, ends by leaving or by a backedge.
            let mut starts = vec![(BlockId(0), false)];
            for b in &cfg.blocks {
                if n.loop_start_val(b.id).is_some() {
                    starts.push((b.id, true));
                }
            }
            for (s, after) in starts {
                let mut stack = vec![vec![s]];
                while let Some(seq) = stack.pop() {
                    let last = *seq.last().unwrap();
                    let mut ends: Vec<Option<BlockId>> = Vec::new();
                    if n.leave_val(last).is_some() {
                        ends.push(None);
                    }
                    let mut succ: Vec<BlockId> =
                        cfg.successors(last).filter_map(|e| e.to).collect();
                    succ.sort_unstable();
                    succ.dedup();
                    for t in succ {
                        if n.is_backedge(last, t) {
                            ends.push(Some(t));
                        } else if n.real_val(last, t).is_some() {
                            let mut s2 = seq.clone();
                            s2.push(t);
                            stack.push(s2);
                        }
                    }
                    for e in ends {
                        let id = n
                            .path_id(&seq, after, e)
                            .unwrap_or_else(|| panic!("{}: no id", cfg.function));
                        assert!(id < n.num_paths());
                        assert!(ids.insert(id), "{}: duplicate id {id}", cfg.function);
                        let r = n.regenerate(id).unwrap();
                        assert_eq!(r.blocks, seq, "{}: regenerate {id}", cfg.function);
                        found += 1;
                    }
                }
            }
            assert_eq!(found, n.num_paths(), "{}: DFS vs NumPaths", cfg.function);
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} functions checked");
    let _ = PathNumbering::new; // the type under test
}

/// Whether gcc, qemu-x86_64 and the QEMU plugin are there to trace a program; skips `test`
/// loudly, naming what is missing, when they are not.
fn can_trace(test: &str) -> bool {
    if !have("gcc") || !have("qemu-x86_64") {
        proftrust_testkit::skip!("{test}: gcc or qemu-x86_64 is not installed");
        return false;
    }
    if proftrust_exact::find_plugin().is_err() {
        proftrust_testkit::skip!("{test}: the QEMU plugin is not built (cargo build -p proftrust-qemu-plugin, or set PROFTRUST_QEMU_PLUGIN)");
        return false;
    }
    true
}

/// recursion.c under QEMU: records and backedges as derived in the source comments.
#[test]
fn exact_cct_of_recursion_c() {
    if !can_trace("exact_cct_of_recursion_c") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "recursion");
    let (_, p) = program(&bin);
    let mut prof = Profiler::new(&p, ProfilerOptions::default());
    let opts = QemuOptions {
        show_output: false,
        ..Default::default()
    };
    trace_qemu(&[OsString::from(&bin)], &opts, &mut prof).unwrap();
    let (pp, cct) = prof.finish();
    let names: FunctionMap = p.function_map().finish();
    let nodes_of = |name: &str| -> Vec<&proftrust_paths::CctNode> {
        cct.nodes()
            .iter()
            .filter(|n| n.id != Cct::ROOT && names.name(&cct.modules, n.procedure) == name)
            .collect()
    };
    let be = cct.backedges();
    let back = |from, to| -> u64 {
        be.iter()
            .filter(|b| b.0 == from && b.1 == to)
            .map(|b| b.2)
            .sum()
    };
    let main = nodes_of("main");
    assert_eq!(main.len(), 1);
    let fib = nodes_of("fib");
    assert_eq!(fib.len(), 1);
    assert_eq!(fib[0].parent, Some(main[0].id));
    assert_eq!(fib[0].calls, 1);
    assert_eq!(back(fib[0].id, fib[0].id), 176);
    let ev = nodes_of("is_even");
    assert_eq!(ev.len(), 2);
    let mut odd: Vec<(u64, u64)> = nodes_of("is_odd")
        .iter()
        .map(|o| (o.calls, back(o.id, o.parent.unwrap())))
        .collect();
    odd.sort_unstable();
    assert_eq!(odd, vec![(2, 2), (4, 3)]);
    let deep = nodes_of("deep");
    assert_eq!(deep.len(), 1);
    assert_eq!(back(deep[0].id, deep[0].id), 5);
    assert!(cct.unwound_frames >= 6, "unwound {}", cct.unwound_frames);
    // Paths: fib's activations all complete (177 = 1 + 176), deep's 6 are unwound.
    let fi = p.find("fib").unwrap();
    let fib_paths: u64 = pp
        .paths
        .iter()
        .filter(|(k, _)| k.func == fi)
        .map(|(_, m)| m.count)
        .sum();
    assert_eq!(fib_paths, 177);
    let di = p.find("deep").unwrap();
    assert_eq!(pp.functions[di.0 as usize].unwound, 6);
    // fib has one context holding all its (folded) recursion: gprof's estimate is exact
    // there. The two call sites of is_even are one procedure context.
    let g = proftrust_paths::gprof_comparison(&cct, &names).unwrap();
    let fib_ctx = g
        .contexts
        .iter()
        .find(|c| c.stack.last().map(String::as_str) == Some("fib"))
        .unwrap();
    assert!((fib_ctx.gprof - fib_ctx.exact as f64).abs() < 1e-6);
    let ev: Vec<_> = g
        .contexts
        .iter()
        .filter(|c| c.stack.last().map(String::as_str) == Some("is_even"))
        .collect();
    assert_eq!(ev.len(), 1);
}

/// Feeds every block to two profilers: `keyed` as the trace gives it, `plain` with its key
/// removed (the unkeyed path, which plans every block afresh), and checks the trace's key
/// promise: one key, one content.
struct Tee<'a, 'b> {
    keyed: &'b mut Profiler<'a, proftrust_vpmu::TraceCost>,
    plain: &'b mut Profiler<'a, proftrust_vpmu::TraceCost>,
    seen: Vec<
        Option<(
            Option<proftrust_model::ModuleIdx>,
            Vec<proftrust_model::Svma>,
        )>,
    >,
    keyed_blocks: u64,
}

impl proftrust_model::BlockVisitor for Tee<'_, '_> {
    fn module(&mut self, idx: proftrust_model::ModuleIdx, m: &Module) {
        self.keyed.module(idx, m);
        self.plain.module(idx, m);
    }
    fn block(&mut self, b: &proftrust_model::TraceBlock<'_>) {
        if let Some(k) = b.key {
            self.keyed_blocks += 1;
            let k = k as usize;
            if self.seen.len() <= k {
                self.seen.resize(k + 1, None);
            }
            let content = (b.module, b.instructions.to_vec());
            match &self.seen[k] {
                Some(c) => assert_eq!(c, &content, "key {k} named two contents"),
                None => self.seen[k] = Some(content),
            }
        }
        self.keyed.block(b);
        self.plain
            .block(&proftrust_model::TraceBlock { key: None, ..*b });
    }
    fn end(&mut self, o: &proftrust_model::RunOutcome) {
        self.keyed.end(o);
        self.plain.end(o);
    }
}

/// The per-key plans and cycle tables (issue 21) change nothing: paths, metrics (with the
/// cache simulation over the same traced accesses) and the CCT are identical to the
/// unkeyed computation, on real programs under QEMU.
#[test]
fn keyed_blocks_give_the_unkeyed_results() {
    if !can_trace("keyed_blocks_give_the_unkeyed_results") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for name in ["branches", "contexts", "recursion", "mempaths"] {
        let bin = compile(dir.path(), name);
        let (_, p) = program(&bin);
        let cost = || {
            proftrust_vpmu::TraceCost::new(
                proftrust_vpmu::CycleModel::flat(1),
                Some(proftrust_vpmu::CacheConfig::default()),
            )
        };
        let mut a = Profiler::with_cost_model(&p, ProfilerOptions::default(), cost());
        let mut b = Profiler::with_cost_model(&p, ProfilerOptions::default(), cost());
        let opts = QemuOptions {
            show_output: false,
            trace_memory: true,
            ..Default::default()
        };
        let mut tee = Tee {
            keyed: &mut a,
            plain: &mut b,
            seen: Vec::new(),
            keyed_blocks: 0,
        };
        trace_qemu(&[OsString::from(&bin)], &opts, &mut tee).unwrap();
        let keyed_blocks = tee.keyed_blocks;
        assert!(keyed_blocks > 1000, "{name}: {keyed_blocks} keyed blocks");
        let (pa, ca) = a.finish();
        let (pb, cb) = b.finish();
        assert!(!pa.paths.is_empty(), "{name}: no paths");
        assert!(pa.total_l1_misses > 0, "{name}: no cache misses simulated");
        assert_eq!(
            format!("{pa:?}"),
            format!("{pb:?}"),
            "{name}: path profiles"
        );
        assert_eq!(format!("{ca:?}"), format!("{cb:?}"), "{name}: CCTs");
    }
}

/// One recorded trace event, owned (so one QEMU run can be fed to several consumers).
enum Recorded {
    Module(proftrust_model::ModuleIdx, Module),
    Block {
        tid: u32,
        module: Option<proftrust_model::ModuleIdx>,
        instructions: Vec<proftrust_model::Svma>,
        end: proftrust_model::TraceEnd,
        mem: Vec<proftrust_model::MemAccess>,
        key: Option<u32>,
    },
    End(proftrust_model::RunOutcome),
}

/// Records the trace; every 7th block loses its key (the staged profiler ships those
/// blocks' contents with them instead of once per key).
#[derive(Default)]
struct Recorder(Vec<Recorded>);

impl proftrust_model::BlockVisitor for Recorder {
    fn module(&mut self, idx: proftrust_model::ModuleIdx, m: &Module) {
        self.0.push(Recorded::Module(idx, m.clone()));
    }
    fn block(&mut self, b: &proftrust_model::TraceBlock<'_>) {
        let key = if self.0.len() % 7 == 0 { None } else { b.key };
        self.0.push(Recorded::Block {
            tid: b.tid,
            module: b.module,
            instructions: b.instructions.to_vec(),
            end: b.end,
            mem: b.mem.to_vec(),
            key,
        });
    }
    fn end(&mut self, o: &proftrust_model::RunOutcome) {
        self.0.push(Recorded::End(o.clone()));
    }
}

fn replay(rec: &[Recorded], v: &mut dyn proftrust_model::BlockVisitor) -> usize {
    for r in rec {
        match r {
            Recorded::Module(i, m) => v.module(*i, m),
            Recorded::Block {
                tid,
                module,
                instructions,
                end,
                mem,
                key,
            } => v.block(&proftrust_model::TraceBlock {
                tid: *tid,
                module: *module,
                instructions,
                end: *end,
                mem,
                key: *key,
            }),
            Recorded::End(o) => v.end(o),
        }
    }
    rec.len()
}

/// The profiler on two threads (`profile_staged`: the cost model with the trace, the path
/// and CCT bookkeeping on another thread, blocks shipped in batches) gives the one-thread
/// profile, CCT and cache totals bit for bit, with the cache simulation and with the flat
/// model, with paths only and with both, over one recorded QEMU trace of real programs
/// (keyed and unkeyed blocks, several batches).
#[test]
fn staged_profiler_gives_the_one_thread_results() {
    if !can_trace("staged_profiler_gives_the_one_thread_results") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for name in ["contexts", "mempaths"] {
        let bin = compile(dir.path(), name);
        let (_, p) = program(&bin);
        let opts = QemuOptions {
            show_output: false,
            trace_memory: true,
            ..Default::default()
        };
        let mut rec = Recorder::default();
        trace_qemu(&[OsString::from(&bin)], &opts, &mut rec).unwrap();
        let blocks = rec
            .0
            .iter()
            .filter(|r| matches!(r, Recorded::Block { .. }))
            .count();
        // Many batches of the staged profiler (2048 blocks).
        assert!(blocks > 20_000, "{name}: {blocks} blocks");
        let cache = || {
            proftrust_vpmu::TraceCost::new(
                proftrust_vpmu::CycleModel::flat(1),
                Some(proftrust_vpmu::CacheConfig::default()),
            )
        };
        for build in [
            ProfilerOptions::default(),
            ProfilerOptions {
                paths: true,
                cct: false,
            },
        ] {
            let mut one = Profiler::with_cost_model(&p, build, cache());
            replay(&rec.0, &mut one);
            let one_cache = one.cost_model().cache_stats();
            let (p1, c1) = one.finish();
            let staged = proftrust_paths::profile_staged(&p, build, cache(), |v| replay(&rec.0, v));
            assert_eq!(staged.result, rec.0.len());
            assert!(p1.total_l1_misses > 0, "{name}: no cache misses simulated");
            assert!(!p1.paths.is_empty(), "{name}: no paths");
            assert_eq!(staged.cost.cache_stats(), one_cache, "{name}: cache totals");
            assert_eq!(
                format!("{:?}", staged.profile),
                format!("{p1:?}"),
                "{name}: path profiles"
            );
            assert_eq!(
                format!("{:?}", staged.cct),
                format!("{c1:?}"),
                "{name}: CCTs"
            );
        }
        let mut one = Profiler::new(&p, ProfilerOptions::default());
        replay(&rec.0, &mut one);
        let (p1, c1) = one.finish();
        let staged = proftrust_paths::profile_staged(
            &p,
            ProfilerOptions::default(),
            proftrust_paths::FlatCpi::default(),
            |v| replay(&rec.0, v),
        );
        assert_eq!(
            format!("{:?}", staged.profile),
            format!("{p1:?}"),
            "{name}: flat"
        );
        assert_eq!(
            format!("{:?}", staged.cct),
            format!("{c1:?}"),
            "{name}: flat CCT"
        );
    }
}
