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
