//! Time from branch stacks in the commands: the code of a fall-through range from the
//! binaries (`check`'s hardware-time column), and the `lbr-time` truth of `audit`.

use proftrust_binary::Symbolizer;
use proftrust_model::{ExactProfile, InstrCount, Location, SampleSet};
use std::collections::HashMap;

/// A decoded function: (address, length) of each instruction.
type Decoded = Vec<(u64, u32)>;

/// Straight-line code from the binaries the symbolizer found: a range's instructions are
/// those of the function holding its start, from start to end, with no gap.
pub struct SymbolizedRanges<'a> {
    sym: &'a Symbolizer,
    /// Decoded functions: (module, function start) -> (address, length) of each instruction.
    cache: std::cell::RefCell<HashMap<(u32, u64), Option<Decoded>>>,
}

impl proftrust_metrics::RangeCode for SymbolizedRanges<'_> {
    fn range(
        &self,
        module: proftrust_model::ModuleIdx,
        start: proftrust_model::Svma,
        end: proftrust_model::Svma,
    ) -> Option<Vec<proftrust_model::Svma>> {
        let b = self.sym.binary(module)?;
        let f = b.function_at(start)?;
        let mut cache = self.cache.borrow_mut();
        let ins = cache
            .entry((module.0, f.start.0))
            .or_insert_with(|| {
                b.instructions(f)
                    .ok()
                    .map(|v| v.iter().map(|i| (i.addr.0, i.len)).collect())
            })
            .as_ref()?;
        let from = ins.binary_search_by_key(&start.0, |i| i.0).ok()?;
        let mut out = Vec::new();
        for (k, &(a, len)) in ins[from..].iter().enumerate() {
            if k > 0
                && out
                    .last()
                    .is_some_and(|&(p, l): &(u64, u32)| p + u64::from(l) != a)
            {
                return None;
            }
            out.push((a, len));
            if a == end.0 {
                return Some(
                    out.into_iter()
                        .map(|x| proftrust_model::Svma(x.0))
                        .collect(),
                );
            }
            if a > end.0 {
                return None;
            }
        }
        None
    }
}

impl<'a> SymbolizedRanges<'a> {
    /// Ranges from the binaries `sym` found.
    pub fn new(sym: &'a Symbolizer) -> Self {
        SymbolizedRanges {
            sym,
            cache: Default::default(),
        }
    }
}

/// Name of the exact profile's column holding each instruction's cycles as the branch
/// stacks measured them (`proftrust_metrics::LBR_TIME_COLUMN`).
pub use proftrust_metrics::LBR_TIME_COLUMN;

/// What [`lbr_truth`] found, for notes and warnings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LbrTruthSummary {
    /// Stacks, ranges measured, cycles.
    pub stacks: u64,
    /// Ranges measured.
    pub measured: u64,
    /// Cycles measured.
    pub cycles: u64,
    /// Ranges of unknown code.
    pub unresolved: u64,
    /// Measured ranges that are no straight-line path of the exact run (an instruction that
    /// never executed, or a fall-through the run never took), and their cycles.
    pub off_cfg: (u64, u64),
    /// Ranges checked against the exact run (0 without one).
    pub checked: u64,
}

/// The `lbr-time` truth: the exact profile (when there is one) or the instructions the
/// stacks covered (their coverage as the count), with the column [`LBR_TIME_COLUMN`]: each
/// instruction's share of the measured cycles (`proftrust_metrics::lbr_time`). With an exact
/// profile every measured range is checked against it: each instruction executed, and each
/// fall-through between two of its instructions taken (an edge of the run, where the run
/// recorded edges out of the first).
pub fn lbr_truth(
    samples: &SampleSet,
    exact: Option<ExactProfile>,
    sym: &Symbolizer,
) -> (ExactProfile, LbrTruthSummary) {
    let code = SymbolizedRanges::new(sym);
    let t = proftrust_metrics::lbr_time(samples, None, &code);
    let mut s = LbrTruthSummary {
        stacks: t.stacks,
        measured: t.measured,
        cycles: t.total_cycles(),
        unresolved: t.unresolved,
        ..LbrTruthSummary::default()
    };
    let per = t.per_instruction();
    match exact {
        Some(mut e) => {
            // Sample-set module -> exact module (same binary).
            let map: HashMap<proftrust_model::ModuleIdx, proftrust_model::ModuleIdx> = samples
                .modules
                .iter()
                .filter_map(|(i, m)| {
                    e.modules
                        .iter()
                        .find(|(_, x)| x.same_binary(m))
                        .map(|(j, _)| (i, j))
                })
                .collect();
            let to_exact = |l: Location| -> Option<Location> {
                Some(Location {
                    module: Some(*map.get(&l.module?)?),
                    svma: l.svma,
                })
            };
            e.normalize();
            let mut out_edges: HashMap<Location, Vec<Location>> = HashMap::new();
            for x in &e.edges {
                if x.count > 0 {
                    out_edges.entry(x.from).or_default().push(x.to);
                }
            }
            for r in &t.ranges {
                let locs: Vec<Option<Location>> = r
                    .instructions
                    .iter()
                    .map(|&a| {
                        to_exact(Location {
                            module: Some(r.module),
                            svma: a,
                        })
                    })
                    .collect();
                s.checked += 1;
                let ok = locs.iter().all(|l| l.is_some_and(|l| e.count_at(l) > 0))
                    && locs.windows(2).all(|w| match (w[0], w[1]) {
                        (Some(a), Some(b)) => out_edges.get(&a).is_none_or(|t| t.contains(&b)),
                        _ => false,
                    });
                if !ok {
                    s.off_cfg.0 += 1;
                    s.off_cfg.1 += r.cycles;
                }
            }
            let col = LBR_TIME_COLUMN.to_string();
            let k = match e.extra_cost_names.iter().position(|n| *n == col) {
                Some(k) => k,
                None => {
                    e.extra_cost_names.push(col);
                    e.extra_cost_names.len() - 1
                }
            };
            let width = e.extra_cost_names.len();
            let mut cyc: HashMap<Location, f64> = HashMap::new();
            for (l, c) in &per {
                if let Some(x) = to_exact(*l) {
                    *cyc.entry(x).or_default() += c;
                }
            }
            e.extra_costs.resize(e.instructions.len(), Vec::new());
            for (ic, row) in e.instructions.iter().zip(e.extra_costs.iter_mut()) {
                row.resize(width, 0);
                row[k] = cyc.get(&ic.loc).map_or(0, |c| c.round() as u64);
            }
            (e, s)
        }
        None => {
            let cover = t.coverage();
            let mut locs: Vec<Location> = per.keys().copied().collect();
            locs.sort();
            let mut e = ExactProfile {
                modules: samples.modules.clone(),
                instructions: locs
                    .iter()
                    .map(|l| InstrCount {
                        loc: *l,
                        count: cover.get(l).copied().unwrap_or(0),
                    })
                    .collect(),
                extra_costs: locs.iter().map(|l| vec![per[l].round() as u64]).collect(),
                extra_cost_names: vec![LBR_TIME_COLUMN.to_string()],
                backend: "lbr".into(),
                backend_detail: format!(
                    "time measured by the cycle counts of {} branch stacks ({} fall-through ranges)",
                    t.stacks, t.measured
                ),
                ..ExactProfile::default()
            };
            e.total_instructions = e.instructions.iter().map(|i| i.count).sum();
            (e, s)
        }
    }
}

#[cfg(test)]
mod tests {
    use proftrust_model::{
        BlockVisitor, Module, ModuleIdx, RunOutcome, Svma, TraceBlock, TraceEnd, TraceEvent,
    };
    use proftrust_vpmu::{CostTable, CycleModel, PmuMode, StaticCost, Vpmu, VpmuOptions};

    /// Straight-line 4-byte code inside either block of the test program.
    struct Blocks;
    impl proftrust_metrics::RangeCode for Blocks {
        fn range(&self, _: ModuleIdx, start: Svma, end: Svma) -> Option<Vec<Svma>> {
            (end.0 >= start.0 && end.0 - start.0 < 0x20 && (end.0 - start.0) % 4 == 0)
                .then(|| (start.0..=end.0).step_by(4).map(Svma).collect())
        }
    }

    /// LBR time from the virtual PMU's branch stacks equals its model's cycles per range,
    /// measurement by measurement: block A (0x100..0x10c, cycles 1+3+2+5 = 11) and block B
    /// (0x200..0x208, 7+1+4 = 12), every block end a taken branch, replayed in a fixed
    /// irregular order with cycle and instruction sampling, in the in-order mode and the
    /// out-of-order interrupt mode with skid (where a range's time is its commit-cycle span:
    /// checked against the stacks' own sum, not the static sum).
    #[test]
    fn vpmu_lbr_ranges_carry_the_models_cycles() {
        let cycles = [(0x100u64, 1u32), (0x104, 3), (0x108, 2), (0x10c, 5)]
            .into_iter()
            .chain([(0x200, 7), (0x204, 1), (0x208, 4)]);
        let mut table = CostTable::new("prog");
        for (a, c) in cycles {
            table.costs.insert(a, StaticCost { cycles: c, len: 4 });
        }
        let mut model = CycleModel::flat(1);
        model.tables.push(table);
        let a: Vec<Svma> = (0..4).map(|k| Svma(0x100 + 4 * k)).collect();
        let b: Vec<Svma> = (0..3).map(|k| Svma(0x200 + 4 * k)).collect();
        for mode in [PmuMode::InOrder, PmuMode::Interrupt] {
            let mut o = VpmuOptions::default();
            o.lbr = true;
            o.cycle_period = 37;
            o.instruction_period = 41;
            o.mode = mode;
            o.skid = proftrust_vpmu::SkidDist::Constant(9);
            let mut v = Vpmu::new(o, model.clone()).unwrap();
            let m = Module::new("/bin/prog");
            v.visit(&TraceEvent::Module {
                idx: ModuleIdx(0),
                module: &m,
            });
            for k in 0..3000u32 {
                let ins = if (k * 7 + k / 5) % 3 == 0 { &b } else { &a };
                v.visit(&TraceEvent::Block(TraceBlock {
                    tid: 1,
                    module: Some(ModuleIdx(0)),
                    instructions: ins,
                    end: TraceEnd::Other,
                    mem: &[],
                    key: None,
                }));
            }
            v.visit(&TraceEvent::End(&RunOutcome::Exited { code: 0 }));
            let (set, _) = v.finish();
            let t = proftrust_metrics::lbr_time(&set, None, &Blocks);
            assert!(t.measured > 1000, "{mode:?}: {}", t.measured);
            assert_eq!(t.unresolved, 0, "{mode:?}");
            if mode == PmuMode::InOrder {
                assert_eq!(t.without_cycles, 0);
            }
            // Out of order, a branch retiring in the cycle of the one before reads 0 cycles,
            // which the reader takes for "no count" (perf's 0 when the hardware gave none).
            for r in &t.ranges {
                let want = match r.start.0 {
                    0x100 => 11,
                    0x200 => 12,
                    other => panic!("unexpected range at {other:#x}"),
                };
                if mode == PmuMode::InOrder {
                    // Every measurement is the static sum of the range.
                    assert_eq!(r.cycles, r.count * want, "{:#x}", r.start.0);
                } else {
                    // Out of order, a range's span overlaps its neighbours': its mean time
                    // is at most its static sum (ROB 224, width 4).
                    assert!(r.cycles <= r.count * want, "{:#x}", r.start.0);
                }
            }
        }
    }
}
