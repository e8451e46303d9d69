//! Joining a sampled profile with the exact truth of the same binary, and every metric.
//!
//! The join is on module-relative addresses ([`Svma`]) of the audited binaries (the
//! *scope*): a sample or an exact count belongs to scope module `j` when its module is the
//! same binary (equal build-ids, else equal file names; see [`Module::same_binary`]).
//! Everything outside the scope (libc, the kernel, other programs) is counted as "elsewhere"
//! and not compared.

use crate::cycles::{check_columns, cycles_estimate};
use crate::{
    epsilon, function_coverage, hotspot_metrics, kendall_tau_b, top_k_overlap, wilson_interval,
    Error, HotspotMetrics, SampledIp, Z_95,
};
use proftrust_model::{ExactProfile, Module, ModuleIdx, ModuleTable, SampleSet, Svma};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Where attribution comes from: the caller's symbolizer (ELF symbols, DWARF inline frames,
/// CFG). `m` is the index of the scope module (position in the `scope` slice given to
/// [`compare`]), `a` the module-relative address.
pub trait Attribution {
    /// Outermost function containing `a` (the symbol), `None` when no symbol covers it.
    fn function(&self, m: usize, a: Svma) -> Option<String>;
    /// Innermost inlined function at `a` (first frame of the inline chain); defaults to
    /// [`function`](Self::function).
    fn innermost(&self, m: usize, a: Svma) -> Option<String> {
        self.function(m, a)
    }
    /// Start of the static basic block containing `a`, when a CFG is available. `None` makes
    /// [`compare`] derive dynamic blocks from the exact profile (see [`compare`]).
    fn block(&self, _m: usize, _a: Svma) -> Option<Svma> {
        None
    }
}

/// What the exact side counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TruthWeight {
    /// Executed instructions.
    #[default]
    Instructions,
    /// The cycle estimate of [`cycles_estimate`] from callgrind's cache and branch simulation.
    CyclesEstimate,
    /// Each instruction's cycles in a timing model: the exact profile's
    /// [`TIME_MODEL_COLUMN`] extra cost (the virtual PMU's time-proportional attribution on
    /// its out-of-order model with simulated caches, `proftrust_vpmu::TIP_CYCLES`).
    TimeModel,
    /// Each instruction's cycles as the samples' branch stacks measured them (the exact
    /// profile's [`LBR_TIME_COLUMN`], `proftrust_pipeline::lbr`).
    LbrTime,
}

/// The extra cost a [`TruthWeight::LbrTime`] truth carries: cycles per instruction from the
/// branch stacks' cycle counts ([`crate::lbr_time()`]).
pub const LBR_TIME_COLUMN: &str = "lbr_cycles";

/// The extra cost a [`TruthWeight::TimeModel`] truth carries: cycles per instruction as the
/// virtual PMU's TIP attribution charges them (`proftrust_vpmu::TIP_CYCLES`).
pub const TIME_MODEL_COLUMN: &str = "tip_cycles";

impl proftrust_model::named::Named for TruthWeight {
    const ALL: &'static [(Self, &'static str, &'static str)] = &[
        (TruthWeight::Instructions, "instructions", "Executed instructions"),
        (
            TruthWeight::CyclesEstimate,
            "cycles-estimate",
            "Cycle estimate from callgrind's cache and branch simulation",
        ),
        (
            TruthWeight::TimeModel,
            "time-model",
            "Cycles per instruction from proftrust's timing model (a model, not a measurement; --time-model, --core). For cpu-clock and cycles profiles. With --samples/--truth, the truth file needs edges (`proftrust truth`), or comes from `vpmu --mode tip --cpi-model cache-sim --exact FILE` (the trace model)",
        ),
        (
            TruthWeight::LbrTime,
            "lbr-time",
            "Cycles per instruction as the samples' own branch stacks measured them (their cycle counts: perf -b / --call-graph lbr on Intel since Skylake, Arm BRBE, `vpmu --lbr`). No exact run needed (--samples alone); with --truth or a program to run, the exact counts check the ranges against the run",
        ),
    ];
}
proftrust_model::named_from_str!(TruthWeight);

/// Options of [`compare`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CompareOptions {
    /// Which event of the sample set to compare. Default is `0`, the first.
    pub event: u16,
    /// What the exact side counts. Default is [`TruthWeight::Instructions`].
    pub truth_weight: TruthWeight,
    /// Normal quantile of the share intervals. Default is [`Z_95`] (95%).
    pub z: f64,
    /// Exact share above which a function counts for [`Comparison::coverage`]. Default is
    /// `0.01` (1%, as issue 4 defines coverage).
    pub coverage_threshold: f64,
    /// Exact share from which a function without samples takes part in the rank metrics
    /// (Kendall tau-b, top-k overlap); functions with samples always do. Default is `0.01`
    /// (the coverage threshold). Without it, the dozens of start-up functions a program runs
    /// a few hundred instructions in (zero samples, tied) dominate tau-b and top-k, and a
    /// profile that ranks every function that matters correctly scores 0.5.
    pub rank_threshold: f64,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            event: 0,
            truth_weight: TruthWeight::Instructions,
            z: Z_95,
            coverage_threshold: 0.01,
            rank_threshold: 0.01,
        }
    }
}

/// One function of a [`Comparison`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionComparison {
    /// Outermost function name (`prog!sub_1234` for a function recovered from an FDE),
    /// the address `prog+0x1234` when no function covers it; functions of a second or later
    /// scope module carry ` [file name]`.
    pub name: String,
    /// Samples `s_f`.
    pub samples: u64,
    /// Exact executed instructions.
    pub exact_instructions: u64,
    /// Exact weight `e_f` (instructions, or the cycle estimate).
    pub exact_weight: u64,
    /// `s_f / N_S`.
    pub sampled_share: f64,
    /// Wilson interval of the sampled share.
    pub ci: (f64, f64),
    /// `e_f / W` (W the total weight).
    pub exact_share: f64,
    /// Whether `exact_share` lies outside `ci`.
    pub outside_ci: bool,
    /// Whether the difference is bias: `outside_ci` with enough samples to say so (observed
    /// or expected, [`crate::evidence::enough_for_bias`]); a function outside its interval on
    /// one or two samples is not called biased.
    #[serde(default)]
    pub bias: bool,
}

/// The hottest function instruction by instruction: its name and
/// `(address, samples, exact executions)` rows by address.
pub type HottestFunction = (String, Vec<(u64, u64, u64)>);

/// Everything [`compare`] finds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Functions, by exact weight (largest first), then samples, then name.
    pub functions: Vec<FunctionComparison>,
    /// NRMSE_SR, SC, OD (seed 001) at instruction level on execution counts.
    pub hotspot: HotspotMetrics,
    /// ε per outermost function.
    pub epsilon_function: f64,
    /// ε per innermost inlined function.
    pub epsilon_inline: f64,
    /// ε per basic block.
    pub epsilon_block: f64,
    /// ε per instruction address.
    pub epsilon_instruction: f64,
    /// Kendall tau-b of the function rankings (samples against exact weight).
    pub kendall_tau: Option<f64>,
    /// Top-5 overlap.
    pub top5_overlap: Option<f64>,
    /// Top-10 overlap.
    pub top10_overlap: Option<f64>,
    /// Function coverage.
    pub coverage: Option<f64>,
    /// Functions that took part in the rank metrics (sampled, or at least
    /// [`CompareOptions::rank_threshold`] of the exact weight).
    #[serde(default)]
    pub ranked_functions: usize,
    /// N_S.
    pub samples: u64,
    /// Samples of the event outside the scope.
    pub samples_elsewhere: u64,
    /// N_I.
    pub instructions: u64,
    /// Total exact weight W.
    pub exact_weight: u64,
    /// Whether blocks came from the caller's CFG (`true`) or were derived from the profile.
    pub static_blocks: bool,
    /// The hottest function (by exact weight) instruction by instruction:
    /// `(address, samples, exact executions)`, by address.
    pub hottest: Option<HottestFunction>,
}

/// Scope module index for each module of `table`, checking build-ids.
fn map_modules(
    table: &ModuleTable,
    scope: &[Module],
    side: &'static str,
) -> Result<HashMap<ModuleIdx, usize>, Error> {
    let mut map = HashMap::new();
    for (j, s) in scope.iter().enumerate() {
        let mut found = false;
        for (i, m) in table.iter() {
            let same_name = m.file_name() == s.file_name();
            match (&m.build_id, &s.build_id) {
                (Some(a), Some(b)) if a == b => {
                    map.insert(i, j);
                    found = true;
                }
                (Some(a), Some(b)) if same_name => {
                    return Err(Error::BuildIdMismatch {
                        side,
                        binary: s.file_name().to_string(),
                        found: a.to_hex(),
                        expected: b.to_hex(),
                    })
                }
                (Some(_), Some(_)) => {}
                _ if same_name => {
                    map.insert(i, j);
                    found = true;
                }
                _ => {}
            }
        }
        if !found {
            let present: Vec<&str> = table.iter().take(6).map(|(_, m)| m.file_name()).collect();
            return Err(Error::BinaryNotInProfile {
                side,
                binary: s.file_name().to_string(),
                present: if present.is_empty() {
                    "no module at all".into()
                } else {
                    present.join(", ")
                },
            });
        }
    }
    Ok(map)
}

/// The check `compare` makes before anything else, for callers that compare in their own
/// way (`proftrust correct --truth`): every binary of `scope` occurs in the exact profile
/// (same build-id, or same file name when a side has none; [`Error::BuildIdMismatch`],
/// [`Error::BinaryNotInProfile`]) and has executed instructions there
/// ([`Error::NoExecutionsInBinary`]).
pub fn check_same_program(exact: &ExactProfile, scope: &[Module]) -> Result<(), Error> {
    let map = map_modules(&exact.modules, scope, "truth")?;
    let executed = exact
        .instructions
        .iter()
        .any(|ic| ic.count > 0 && ic.loc.module.is_some_and(|m| map.contains_key(&m)));
    if !executed {
        return Err(Error::NoExecutionsInBinary {
            binary: scope
                .iter()
                .map(|m| m.file_name())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(())
}

/// The row of an address `a` of scope module `m` that no function covers: the address
/// itself, `prog+0x1234`, as `Symbolizer::function_name` names it.
fn unattributed(m: &Module, a: u64) -> String {
    format!("{}+{a:#x}", m.file_name())
}

/// Samples of event `event` per function of `scope`, named as [`compare`] names them
/// (outermost function, `[binary]` suffix for the second and later scope binaries), largest
/// first, and the samples outside the scope. For a report of samples alone, when there is
/// no truth to compare with (an audit interrupted before its exact count).
pub fn sampled_functions(
    samples: &SampleSet,
    scope: &[Module],
    attr: &dyn Attribution,
    event: u16,
) -> Result<(Vec<(String, u64)>, u64), Error> {
    let smap = map_modules(&samples.modules, scope, "samples")?;
    let mut per: BTreeMap<String, u64> = BTreeMap::new();
    let mut elsewhere = 0u64;
    for s in samples.samples.iter().filter(|s| s.event == event) {
        match s.ip.module.and_then(|m| smap.get(&m)) {
            Some(&j) => {
                let f = attr
                    .function(j, s.ip.svma)
                    .unwrap_or_else(|| unattributed(&scope[j], s.ip.svma.0));
                let name = if j == 0 {
                    f
                } else {
                    format!("{f} [{}]", scope[j].file_name())
                };
                *per.entry(name).or_default() += 1;
            }
            None => elsewhere += 1,
        }
    }
    let mut v: Vec<(String, u64)> = per.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    Ok((v, elsewhere))
}

/// Block key: (scope module, block start, executed).
type BlockKey = (usize, u64, bool);

/// Compares `samples` with `exact` over the binaries in `scope` and computes every metric.
///
/// * Function shares: `s_f / N_S` with a Wilson interval ([`wilson_interval`]) against
///   `e_f / W`, where `e_f` is the function's exact weight (instructions or cycle
///   estimate, [`CompareOptions::truth_weight`]).
/// * ε ([`epsilon`]) per outermost function, innermost inlined function, basic block and
///   instruction address, all on the chosen weight.
/// * NRMSE_SR, SC, OD ([`hotspot_metrics`]) on **execution counts** as seed 001 defines
///   them (`r_i` = executions of `IP_i`, `N_I` = all executed instructions in scope),
///   whatever the weight. `ROLevel` needs the block counts of all executed blocks; every
///   instruction of a block executes as often as the block (calls return), so the set of
///   distinct block counts equals the set of distinct instruction counts, and the
///   instruction counts are passed.
/// * Blocks for ε: the caller's CFG ([`Attribution::block`]) when it answers; otherwise
///   *dynamic blocks* derived from the exact profile: a new block starts at the first executed
///   instruction of a function, at an edge target, after an edge source, and where the count
///   changes. A sampled address that never executed is its own block.
/// * Kendall tau-b and top-5/10 overlap over the functions that have samples or at least
///   [`CompareOptions::rank_threshold`] of the exact weight; coverage over all functions;
///   samples against weight.
///
/// Errors: another build of a binary on either side ([`Error::BuildIdMismatch`]), a binary
/// absent from a side ([`Error::BinaryNotInProfile`]), no sample or no execution in scope,
/// and missing cache columns for [`TruthWeight::CyclesEstimate`].
pub fn compare(
    samples: &SampleSet,
    exact: &ExactProfile,
    scope: &[Module],
    attr: &dyn Attribution,
    opts: &CompareOptions,
) -> Result<Comparison, Error> {
    let scope_name = scope
        .iter()
        .map(|m| m.file_name())
        .collect::<Vec<_>>()
        .join(", ");
    let smap = map_modules(&samples.modules, scope, "samples")?;
    let emap = map_modules(&exact.modules, scope, "truth")?;
    let time_column = weight_column(exact, opts)?;
    let (hist, elsewhere) = sampled_ips(samples, &smap, opts.event);
    let n_s: u64 = hist.values().sum();
    if n_s == 0 {
        return Err(Error::NoSamplesInBinary {
            binary: scope_name,
            elsewhere,
        });
    }
    let counts = exact_counts(exact, &emap, opts.truth_weight, time_column);
    let n_i: u64 = counts.values().map(|v| v.0).sum();
    let total_w: u64 = counts.values().map(|v| v.1).sum();
    if n_i == 0 || total_w == 0 {
        return Err(Error::NoExecutionsInBinary { binary: scope_name });
    }
    let names = Names::of(&hist, &counts, scope, attr);
    let (block, static_blocks) = blocks(exact, &emap, &hist, &counts, &names.func, attr);

    // ε at four granularities.
    let eps = |key: &dyn Fn(&Addr) -> String| -> Result<f64, Error> {
        epsilon(
            hist.iter().map(|(k, &c)| (key(k), c)),
            counts.iter().map(|(k, &(_, w))| (key(k), w)),
        )
    };
    let epsilon_function = eps(&|k| names.func[k].clone())?;
    let epsilon_inline = eps(&|k| names.inner[k].clone())?;
    let epsilon_block = epsilon(
        hist.iter().map(|(k, &c)| (block[k], c)),
        counts.iter().map(|(k, &(_, w))| (block[k], w)),
    )?;
    let epsilon_instruction = epsilon(
        hist.iter().map(|(k, &c)| (*k, c)),
        counts.iter().map(|(k, &(_, w))| (*k, w)),
    )?;

    // Seed 001 metrics on execution counts.
    let ips: Vec<SampledIp> = hist
        .iter()
        .map(|(k, &c)| {
            let r = counts.get(k).map(|v| v.0).unwrap_or(0);
            SampledIp {
                samples: c,
                executions: r,
                block_executions: r,
            }
        })
        .collect();
    let all_counts: Vec<u64> = counts.values().map(|v| v.0).collect();
    let hotspot = hotspot_metrics(&ips, &all_counts, n_i)?;

    let f = function_rows(&hist, &counts, &names.func, opts, (n_s, total_w))?;
    let hottest = names.hottest(&f.functions, &hist, &counts);
    Ok(Comparison {
        functions: f.functions,
        hotspot,
        epsilon_function,
        epsilon_inline,
        epsilon_block,
        epsilon_instruction,
        kendall_tau: f.kendall_tau,
        top5_overlap: f.top5_overlap,
        top10_overlap: f.top10_overlap,
        coverage: f.coverage,
        ranked_functions: f.ranked,
        samples: n_s,
        samples_elsewhere: elsewhere,
        instructions: n_i,
        exact_weight: total_w,
        static_blocks,
        hottest,
    })
}

/// An address in scope: (index of the binary in the scope, SVMA).
type Addr = (usize, u64);

/// The extra cost column the truth weight reads (time model, LBR time), checked: an error
/// when the weight needs a column the exact profile lacks.
fn weight_column(exact: &ExactProfile, opts: &CompareOptions) -> Result<Option<usize>, Error> {
    if opts.truth_weight == TruthWeight::CyclesEstimate {
        check_columns(&exact.extra_cost_names)?;
    }
    let column_name = if opts.truth_weight == TruthWeight::LbrTime {
        LBR_TIME_COLUMN
    } else {
        TIME_MODEL_COLUMN
    };
    let time_column = exact.extra_cost_names.iter().position(|n| n == column_name);
    if matches!(
        opts.truth_weight,
        TruthWeight::TimeModel | TruthWeight::LbrTime
    ) && time_column.is_none()
    {
        return Err(Error::MissingTimeColumn {
            found: if exact.extra_cost_names.is_empty() {
                "instruction counts only".into()
            } else {
                exact.extra_cost_names.join(", ")
            },
        });
    }
    Ok(time_column)
}

/// The sampled IP histogram of `event` in scope (`smap`: module to scope index), and the
/// number of its samples elsewhere.
fn sampled_ips(
    samples: &SampleSet,
    smap: &HashMap<ModuleIdx, usize>,
    event: u16,
) -> (BTreeMap<Addr, u64>, u64) {
    let mut hist: BTreeMap<Addr, u64> = BTreeMap::new();
    let mut elsewhere = 0u64;
    for s in samples.samples.iter().filter(|s| s.event == event) {
        match s.ip.module.and_then(|m| smap.get(&m)) {
            Some(&j) => *hist.entry((j, s.ip.svma.0)).or_default() += 1,
            None => elsewhere += 1,
        }
    }
    (hist, elsewhere)
}

/// Exact (executions, weight) per address in scope (`emap`: module to scope index).
fn exact_counts(
    exact: &ExactProfile,
    emap: &HashMap<ModuleIdx, usize>,
    weight: TruthWeight,
    time_column: Option<usize>,
) -> BTreeMap<Addr, (u64, u64)> {
    let mut counts: BTreeMap<Addr, (u64, u64)> = BTreeMap::new();
    for (k, ic) in exact.instructions.iter().enumerate() {
        let Some(&j) = ic.loc.module.and_then(|m| emap.get(&m)) else {
            continue;
        };
        let w = match weight {
            TruthWeight::Instructions => ic.count,
            TruthWeight::CyclesEstimate => {
                let costs = exact.extra_costs.get(k).map(Vec::as_slice).unwrap_or(&[]);
                cycles_estimate(&exact.extra_cost_names, costs, ic.count)
            }
            TruthWeight::TimeModel | TruthWeight::LbrTime => time_column
                .and_then(|c| exact.extra_costs.get(k)?.get(c).copied())
                .unwrap_or(0),
        };
        let e = counts.entry((j, ic.loc.svma.0)).or_default();
        e.0 += ic.count;
        e.1 += w;
    }
    counts
}

/// The attribution of every address in either profile.
struct Names {
    addrs: BTreeSet<Addr>,
    /// Outermost function (with ` [binary]` past the first binary of the scope).
    func: HashMap<Addr, String>,
    /// Innermost inlined function, likewise.
    inner: HashMap<Addr, String>,
    /// Addresses in no function keep their address as their row (never one `[unknown]`
    /// row for all of them, issue 29); they are not the hottest function either.
    no_function: BTreeSet<String>,
}

impl Names {
    fn of(
        hist: &BTreeMap<Addr, u64>,
        counts: &BTreeMap<Addr, (u64, u64)>,
        scope: &[Module],
        attr: &dyn Attribution,
    ) -> Names {
        let addrs: BTreeSet<Addr> = hist.keys().chain(counts.keys()).copied().collect();
        let suffix = |j: usize| -> String {
            if j == 0 {
                String::new()
            } else {
                format!(" [{}]", scope[j].file_name())
            }
        };
        let mut func: HashMap<Addr, String> = HashMap::with_capacity(addrs.len());
        let mut inner: HashMap<Addr, String> = HashMap::with_capacity(addrs.len());
        let mut no_function: BTreeSet<String> = BTreeSet::new();
        for &(j, a) in &addrs {
            let f = attr.function(j, Svma(a)).unwrap_or_else(|| {
                let n = unattributed(&scope[j], a);
                no_function.insert(format!("{n}{}", suffix(j)));
                n
            });
            let i = attr.innermost(j, Svma(a)).unwrap_or_else(|| f.clone());
            func.insert((j, a), format!("{f}{}", suffix(j)));
            inner.insert((j, a), format!("{i}{}", suffix(j)));
        }
        Names {
            addrs,
            func,
            inner,
            no_function,
        }
    }

    /// The hottest function (by exact weight, in a function), instruction by instruction:
    /// (SVMA, samples, executions).
    fn hottest(
        &self,
        functions: &[FunctionComparison],
        hist: &BTreeMap<Addr, u64>,
        counts: &BTreeMap<Addr, (u64, u64)>,
    ) -> Option<HottestFunction> {
        let f = functions
            .iter()
            .find(|f| !self.no_function.contains(&f.name) && f.exact_weight > 0)?;
        let rows: Vec<(u64, u64, u64)> = self
            .addrs
            .iter()
            .filter(|k| self.func[k] == f.name)
            .map(|k| {
                (
                    k.1,
                    hist.get(k).copied().unwrap_or(0),
                    counts.get(k).map(|v| v.0).unwrap_or(0),
                )
            })
            .collect();
        Some((f.name.clone(), rows))
    }
}

/// The block of every address, and whether the caller's CFG gave any: its blocks where it
/// answers, else dynamic blocks from the exact profile (a new block at the first executed
/// instruction of a function, at an edge target, after an edge source and where the count
/// changes); a sampled address that never executed is its own block.
fn blocks(
    exact: &ExactProfile,
    emap: &HashMap<ModuleIdx, usize>,
    hist: &BTreeMap<Addr, u64>,
    counts: &BTreeMap<Addr, (u64, u64)>,
    func: &HashMap<Addr, String>,
    attr: &dyn Attribution,
) -> (HashMap<Addr, BlockKey>, bool) {
    let edge_targets: BTreeSet<Addr> = exact
        .edges
        .iter()
        .filter_map(|e| Some((*emap.get(&e.to.module?)?, e.to.svma.0)))
        .collect();
    let edge_sources: BTreeSet<Addr> = exact
        .edges
        .iter()
        .filter_map(|e| Some((*emap.get(&e.from.module?)?, e.from.svma.0)))
        .collect();
    let mut static_blocks = false;
    let mut block: HashMap<Addr, BlockKey> = HashMap::with_capacity(func.len());
    let mut prev: Option<(Addr, u64, BlockKey)> = None;
    for (&(j, a), &(c, _)) in counts {
        let key = if let Some(b) = attr.block(j, Svma(a)) {
            static_blocks = true;
            (j, b.0, true)
        } else {
            let leader = match &prev {
                None => true,
                Some(((pj, pa), pc, _)) => {
                    *pj != j
                        || *pc != c
                        || func.get(&(*pj, *pa)) != func.get(&(j, a))
                        || edge_targets.contains(&(j, a))
                        || edge_sources.contains(&(*pj, *pa))
                }
            };
            match (&prev, leader) {
                (Some((_, _, k)), false) => *k,
                _ => (j, a, true),
            }
        };
        block.insert((j, a), key);
        prev = Some(((j, a), c, key));
    }
    for &(j, a) in hist.keys() {
        block
            .entry((j, a))
            .or_insert_with(|| match attr.block(j, Svma(a)) {
                Some(b) => (j, b.0, true),
                None => (j, a, false),
            });
    }
    (block, static_blocks)
}

/// The per-function rows and the rank metrics over them.
struct FunctionRows {
    functions: Vec<FunctionComparison>,
    ranked: usize,
    kendall_tau: Option<f64>,
    top5_overlap: Option<f64>,
    top10_overlap: Option<f64>,
    coverage: Option<f64>,
}

/// Samples, executions and weight per function (`totals`: all samples, all weight):
/// Kendall tau-b and top-5/10 overlap over the functions that matter (sampled, or at least
/// `rank_threshold` of the exact weight), coverage over all, and the rows with their
/// Wilson intervals, by exact weight, then samples, then name.
fn function_rows(
    hist: &BTreeMap<Addr, u64>,
    counts: &BTreeMap<Addr, (u64, u64)>,
    func: &HashMap<Addr, String>,
    opts: &CompareOptions,
    (n_s, total_w): (u64, u64),
) -> Result<FunctionRows, Error> {
    let mut per_f: BTreeMap<&str, (u64, u64, u64)> = BTreeMap::new();
    for (k, &c) in hist {
        per_f.entry(func[k].as_str()).or_default().0 += c;
    }
    for (k, &(c, w)) in counts {
        let e = per_f.entry(func[k].as_str()).or_default();
        e.1 += c;
        e.2 += w;
    }
    let s_vec: Vec<u64> = per_f.values().map(|v| v.0).collect();
    let w_vec: Vec<u64> = per_f.values().map(|v| v.2).collect();
    let w_total: u64 = w_vec.iter().sum();
    let ranked: Vec<usize> = (0..s_vec.len())
        .filter(|&i| {
            s_vec[i] > 0 || (w_total > 0 && w_vec[i] as f64 / w_total as f64 >= opts.rank_threshold)
        })
        .collect();
    let rs: Vec<u64> = ranked.iter().map(|&i| s_vec[i]).collect();
    let rw: Vec<u64> = ranked.iter().map(|&i| w_vec[i]).collect();
    let kendall_tau = kendall_tau_b(
        &rs.iter().map(|&x| x as f64).collect::<Vec<_>>(),
        &rw.iter().map(|&x| x as f64).collect::<Vec<_>>(),
    )?;
    let top5_overlap = top_k_overlap(&rs, &rw, 5)?;
    let top10_overlap = top_k_overlap(&rs, &rw, 10)?;
    let coverage = function_coverage(&s_vec, &w_vec, opts.coverage_threshold)?;
    let mut functions: Vec<FunctionComparison> = per_f
        .iter()
        .map(|(name, &(s, c, w))| {
            let sampled_share = s as f64 / n_s as f64;
            let exact_share = w as f64 / total_w as f64;
            let ci = wilson_interval(s, n_s, opts.z);
            FunctionComparison {
                name: name.to_string(),
                samples: s,
                exact_instructions: c,
                exact_weight: w,
                sampled_share,
                ci,
                exact_share,
                outside_ci: exact_share < ci.0 || exact_share > ci.1,
                bias: (exact_share < ci.0 || exact_share > ci.1)
                    && crate::evidence::enough_for_bias(s, n_s, exact_share),
            }
        })
        .collect();
    functions.sort_by(|a, b| {
        b.exact_weight
            .cmp(&a.exact_weight)
            .then(b.samples.cmp(&a.samples))
            .then(a.name.cmp(&b.name))
    });
    Ok(FunctionRows {
        functions,
        ranked: ranked.len(),
        kendall_tau,
        top5_overlap,
        top10_overlap,
        coverage,
    })
}

#[cfg(test)]
impl Comparison {
    /// An all-zero comparison for tests of code that reads a few fields.
    pub(crate) fn empty_for_tests() -> Comparison {
        Comparison {
            functions: Vec::new(),
            hotspot: HotspotMetrics {
                nrmse_sr: 0.0,
                sc: 0.0,
                od: 0.0,
                od_prose: 0.0,
                m: 0,
                n_s: 0,
                n_i: 0,
            },
            epsilon_function: 0.0,
            epsilon_inline: 0.0,
            epsilon_block: 0.0,
            epsilon_instruction: 0.0,
            kendall_tau: None,
            top5_overlap: None,
            top10_overlap: None,
            coverage: None,
            ranked_functions: 0,
            samples: 0,
            samples_elsewhere: 0,
            instructions: 0,
            exact_weight: 0,
            static_blocks: false,
            hottest: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proftrust_model::{BuildId, EdgeCount, InstrCount, Location, Sample};

    /// Two functions: f = [0x100, 0x110), g = [0x200, 0x210); g's 0x208 is an inlined `h`.
    struct Fake;
    impl Attribution for Fake {
        fn function(&self, _m: usize, a: Svma) -> Option<String> {
            match a.0 {
                0x100..=0x10f => Some("f".into()),
                0x200..=0x20f => Some("g".into()),
                0x300..=0x30f => Some("start1".into()),
                0x310..=0x31f => Some("start2".into()),
                _ => None,
            }
        }
        fn innermost(&self, m: usize, a: Svma) -> Option<String> {
            if a.0 == 0x208 {
                Some("h".into())
            } else {
                self.function(m, a)
            }
        }
    }

    fn sample(m: ModuleIdx, a: u64) -> Sample {
        Sample {
            event: 0,
            pid: 1,
            tid: 1,
            time: 0,
            cpu: 0,
            period: 1,
            ip: Location::new(m, a),
            callchain: vec![],
            branches: vec![],
        }
    }

    fn fixture(sample_build: Option<BuildId>) -> (SampleSet, ExactProfile, Module) {
        let mut prog = Module::new("/bin/prog");
        prog.build_id = Some(BuildId(vec![1, 2, 3]));
        let mut s = SampleSet::default();
        let mut sm = Module::new("/somewhere/prog");
        sm.build_id = sample_build;
        let pi = s.modules.intern(sm);
        let li = s.modules.intern(Module::new("/lib/libc.so.6"));
        // samples: 0x100 x4, 0x104 x2, 0x208 x3, 0x20c x1, libc x5
        for (a, n) in [(0x100, 4), (0x104, 2), (0x208, 3), (0x20c, 1)] {
            for _ in 0..n {
                s.samples.push(sample(pi, a));
            }
        }
        for _ in 0..5 {
            s.samples.push(sample(li, 0x5000));
        }
        let mut e = ExactProfile::default();
        let ei = e.modules.intern(prog.clone());
        // exact: f: 0x100 30, 0x104 30, 0x108 10; g: 0x200 10, 0x204 10, 0x208 10
        for (a, c) in [
            (0x100, 30),
            (0x104, 30),
            (0x108, 10),
            (0x200, 10),
            (0x204, 10),
            (0x208, 10),
        ] {
            e.instructions.push(InstrCount {
                loc: Location::new(ei, a),
                count: c,
            });
        }
        // a branch from 0x204 to 0x208 splits g's equal-count run into two blocks
        e.edges.push(EdgeCount {
            from: Location::new(ei, 0x204),
            to: Location::new(ei, 0x208),
            count: 10,
        });
        e.normalize();
        (s, e, prog)
    }

    #[test]
    fn hand_computed_comparison() {
        let (s, e, prog) = fixture(Some(BuildId(vec![1, 2, 3])));
        let c = compare(&s, &e, &[prog], &Fake, &CompareOptions::default()).unwrap();
        // N_S = 10 (libc's 5 are elsewhere), N_I = 100.
        assert_eq!(
            (c.samples, c.samples_elsewhere, c.instructions),
            (10, 5, 100)
        );
        // functions: f s=6 e=70, g s=4 e=30 -> ε_f = 1/2(|.6-.7| + |.4-.3|) = .1
        assert!((c.epsilon_function - 0.1).abs() < 1e-12);
        // inline: f .6/.7, g .1/.2, h .3/.1 -> 1/2(.1+.1+.2) = .2
        assert!((c.epsilon_inline - 0.2).abs() < 1e-12);
        // dynamic blocks: f: {0x100,0x104} (30,30) | {0x108} (10); g: {0x200,0x204} | {0x208}
        // (edge target); 0x20c never executed -> own block.
        // Per block (sampled share / exact share):
        //   B1=f0x100: s 6, e 60 -> .6/.6; B2=f0x108: s 0, e 10 -> 0/.1;
        //   B3=g0x200: s 0, e 20 -> 0/.2; B4=g0x208: s 3, e 10 -> .3/.1; B5=0x20c: .1/0
        //   Σ|d| = 0 + .1 + .2 + .2 + .1 = .6 -> ε_block = .3
        assert!((c.epsilon_block - 0.3).abs() < 1e-12, "{}", c.epsilon_block);
        // instructions: 0x100 .4/.3, 0x104 .2/.3, 0x108 0/.1, 0x200 0/.1, 0x204 0/.1,
        //   0x208 .3/.1, 0x20c .1/0 -> Σ = .1+.1+.1+.1+.1+.2+.1 = .8 -> .4
        assert!((c.epsilon_instruction - 0.4).abs() < 1e-12);
        // seed 001 on IPs 0x100(4,30) 0x104(2,30) 0x208(3,10) 0x20c(1,0):
        //   SC = 70/100
        assert!((c.hotspot.sc - 0.7).abs() < 1e-12);
        //   NRMSE: s .4 .2 .3 .1; r .3 .3 .1 0; d .1 -.1 .2 .1;
        //   Σ w d² = .4*.01+.2*.01+.3*.04+.1*.01 = .004+.002+.012+.001 = .019
        //   F range = .4 - 0 = .4 -> sqrt(.019)/.4
        assert!((c.hotspot.nrmse_sr - 0.019f64.sqrt() / 0.4).abs() < 1e-12);
        //   SOLevel: c = [4,2,3,1] -> levels [1,3,2,4]
        //   ROLevel: distinct exact counts {30,10} -> [1,1,2,3 (unexecuted)]
        //   d = [0,2,0,1]; Σ w d² = .2*4 + .1*1 = .9; /4 = .225 -> OD = sqrt(.225)
        assert!((c.hotspot.od - 0.225f64.sqrt()).abs() < 1e-12);
        assert!((c.hotspot.od_prose - 0.9f64.sqrt()).abs() < 1e-12);
        // function rows: f first (exact 70)
        assert_eq!(c.functions[0].name, "f");
        assert_eq!(c.functions[0].samples, 6);
        assert_eq!(c.functions[0].exact_instructions, 70);
        assert!((c.functions[0].exact_share - 0.7).abs() < 1e-12);
        assert_eq!(c.functions[0].ci, wilson_interval(6, 10, Z_95));
        // ranks: two functions both ordered f > g -> tau 1, top-5 overlap 1, coverage 1
        assert_eq!(c.kendall_tau, Some(1.0));
        assert_eq!(c.top5_overlap, Some(1.0));
        assert_eq!(c.coverage, Some(1.0));
        let (name, rows) = c.hottest.unwrap();
        assert_eq!(name, "f");
        assert_eq!(rows, vec![(0x100, 4, 30), (0x104, 2, 30), (0x108, 0, 10)]);
    }

    #[test]
    fn rank_metrics_skip_unsampled_functions_under_the_threshold() {
        // f gets 200 more executions (at 0x10c) and two start-up functions run 1 and 2
        // instructions with no samples: shares 1/303 and 2/303, under 1%. f (6 samples,
        // 270) and g (4, 30) rank the same on both sides.
        let (s, mut e, prog) = fixture(Some(BuildId(vec![1, 2, 3])));
        let ei = ModuleIdx(0);
        for (a, c) in [(0x10c, 200), (0x300, 1), (0x310, 2)] {
            e.instructions.push(InstrCount {
                loc: Location::new(ei, a),
                count: c,
            });
        }
        e.normalize();
        let c = compare(
            &s,
            &e,
            std::slice::from_ref(&prog),
            &Fake,
            &CompareOptions::default(),
        )
        .unwrap();
        assert_eq!(c.kendall_tau, Some(1.0));
        assert_eq!((c.top5_overlap, c.top10_overlap), (Some(1.0), Some(1.0)));
        // With every function ranked: 4 items, n0 = 6 pairs; start1/start2 tie in samples
        // (tx = 1, ty = 0), the other 5 pairs are concordant: tau = 5 / sqrt(5 * 6).
        // Top-5: k' = min(5, max(2 sampled, 4 executed)) = 4, A = {f, g}, B = all 4 -> 2/4.
        let all = CompareOptions {
            rank_threshold: 0.0,
            ..CompareOptions::default()
        };
        let c = compare(&s, &e, &[prog], &Fake, &all).unwrap();
        assert!((c.kendall_tau.unwrap() - 5.0 / 30f64.sqrt()).abs() < 1e-12);
        assert_eq!(c.top5_overlap, Some(0.5));
    }

    #[test]
    fn build_id_mismatch_is_an_error() {
        let (s, e, prog) = fixture(Some(BuildId(vec![9, 9])));
        let err = compare(&s, &e, &[prog], &Fake, &CompareOptions::default()).unwrap_err();
        assert!(
            matches!(
                err,
                Error::BuildIdMismatch {
                    side: "samples",
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("0909"));
    }

    /// The time-model weight reads the `tip_cycles` column: with f charged 60 cycles and g
    /// 40 (of 100), the truth shares equal the sample shares (6 and 4 of 10): ε_function 0,
    /// where the instruction weight gives 0.1 (`hand_computed_comparison`). Without the
    /// column it is an error naming the fix.
    #[test]
    fn time_model_weight_reads_the_tip_column() {
        let (s, mut e, prog) = fixture(Some(BuildId(vec![1, 2, 3])));
        let tip = |a: u64| match a {
            0x100 | 0x104 => 30,
            0x108 => 0,
            0x200 | 0x204 => 10,
            _ => 20,
        };
        e.extra_cost_names = vec!["cycles".into(), TIME_MODEL_COLUMN.into()];
        e.extra_costs = e
            .instructions
            .iter()
            .map(|i| vec![i.count, tip(i.loc.svma.0)])
            .collect();
        let opts = CompareOptions {
            truth_weight: TruthWeight::TimeModel,
            ..Default::default()
        };
        let c = compare(&s, &e, std::slice::from_ref(&prog), &Fake, &opts).unwrap();
        assert!(c.epsilon_function.abs() < 1e-12, "{}", c.epsilon_function);
        assert!((c.functions[0].exact_share - 0.6).abs() < 1e-12);
        let (s, e, _) = fixture(None);
        let err = compare(&s, &e, &[prog], &Fake, &opts).unwrap_err();
        assert!(matches!(err, Error::MissingTimeColumn { .. }));
        assert!(err.to_string().contains("--mode tip"), "{err}");
    }

    #[test]
    fn other_program_and_empty_profiles_are_errors() {
        let (s, e, _) = fixture(None);
        let other = Module::new("/bin/other");
        let err = compare(&s, &e, &[other], &Fake, &CompareOptions::default()).unwrap_err();
        assert!(matches!(
            err,
            Error::BinaryNotInProfile {
                side: "samples",
                ..
            }
        ));
        // only libc samples left -> no samples in the binary
        let (mut s, e, prog) = fixture(None);
        s.samples.retain(|x| x.ip.svma.0 == 0x5000);
        let err = compare(
            &s,
            &e,
            std::slice::from_ref(&prog),
            &Fake,
            &CompareOptions::default(),
        )
        .unwrap_err();
        assert_eq!(
            err,
            Error::NoSamplesInBinary {
                binary: "prog".into(),
                elsewhere: 5
            }
        );
        // cycles estimate without cache columns
        let (s, e, _) = fixture(None);
        let opts = CompareOptions {
            truth_weight: TruthWeight::CyclesEstimate,
            ..Default::default()
        };
        assert!(matches!(
            compare(&s, &e, &[prog], &Fake, &opts),
            Err(Error::MissingCostColumn { .. })
        ));
    }
}
