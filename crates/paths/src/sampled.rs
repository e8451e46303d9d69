//! The calling contexts a call-chain sampler sees, against the exact CCT.

use crate::cct::anchor_stack;
use crate::funcs::FunctionMap;
use crate::Error;
use proftrust_metrics::{epsilon, wilson_interval, Z_95};
use proftrust_model::{Location, ModuleTable, SampleSet, Svma};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::Write;

/// Samples per calling context (procedure names from the outermost frame), recursion folded
/// like the exact CCT: when a procedure reappears in a chain, the sample goes to its
/// outermost occurrence (seed 003 §4 backedges).
#[derive(Debug, Clone, Default, Serialize)]
pub struct SampledCct {
    /// Samples per context.
    pub contexts: BTreeMap<Vec<String>, u64>,
    /// Samples used.
    pub total: u64,
    /// Samples without a call chain (counted as a one-frame context).
    pub without_chain: u64,
    /// Samples whose chain missed the sampled function's caller (the sample fell where the
    /// function had no frame of its own: a leaf function compiled without a frame pointer, a
    /// prologue or epilogue) and got it back from the direct call at the first return
    /// address ([`CodeOracle`]).
    pub repaired: u64,
    /// Samples that had no frame of their own at the sampled address and whose first return
    /// address follows an indirect or unknown call: the caller is missing from the chain and
    /// could not be restored.
    pub unrepaired: u64,
}

impl SampledCct {
    /// Writes collapsed stacks (`a;b;c N`; frames through [`proftrust_model::folded_frame`]).
    pub fn write_folded(&self, w: &mut impl Write) -> std::io::Result<()> {
        for (st, n) in &self.contexts {
            writeln!(
                w,
                "{} {n}",
                proftrust_model::folded_stack(st.iter().map(String::as_str))
            )?;
        }
        Ok(())
    }
}

/// What a frame-pointer call chain cannot tell, answered from the program's code (the CLI
/// implements it over the binaries; analysis code reads no files).
///
/// A frame-pointer unwinder reads the return address of each *established* frame. Where the
/// sampled function has no frame of its own — GCC 12 gives leaf functions that use no stack
/// no frame even with `-fno-omit-frame-pointer`; any function before its `push rbp; mov
/// rbp, rsp` or at its final `ret` — the frame pointer still points at the caller's frame,
/// so the chain's first return address is the *caller's* return address and the caller is
/// missing. The call instruction before that return address names the missing caller when
/// it is a direct call.
pub trait CodeOracle {
    /// Target of the direct call instruction that ends at return address `ret` (`None`: not
    /// a direct call, or the code is unknown).
    fn direct_call_target(&self, modules: &ModuleTable, ret: Location) -> Option<Location>;
    /// Whether the function containing `at` has its own frame established at `at` (the frame
    /// pointer holds its frame). `None` when unknown.
    fn frame_established(&self, modules: &ModuleTable, at: Location) -> Option<bool>;
}

/// An oracle that knows nothing: no repair.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoCode;

impl CodeOracle for NoCode {
    fn direct_call_target(&self, _: &ModuleTable, _: Location) -> Option<Location> {
        None
    }
    fn frame_established(&self, _: &ModuleTable, _: Location) -> Option<bool> {
        None
    }
}

/// Folds recursion: each name keeps only its first occurrence, cutting what follows.
fn push_folded(st: &mut Vec<String>, name: String) {
    if let Some(i) = st.iter().position(|s| *s == name) {
        st.truncate(i + 1);
    } else {
        st.push(name);
    }
}

/// Builds the sampled contexts of event `event` (all events when `None`). Call-chain
/// entries are return addresses, so each is named at `address − 1` (the call instruction).
/// No frame repair; see [`sampled_cct_with`].
pub fn sampled_cct(set: &SampleSet, names: &FunctionMap, event: Option<u16>) -> SampledCct {
    sampled_cct_with(set, names, event, &NoCode)
}

/// [`sampled_cct`] with missing callers restored: when `code` says the sampled function had
/// no frame of its own at the sampled address and the first return address follows a direct
/// call to another function, that function is the missing caller and is inserted between
/// the chain and the sampled function ([`SampledCct::repaired`]); after an indirect call it
/// cannot be named ([`SampledCct::unrepaired`]).
pub fn sampled_cct_with(
    set: &SampleSet,
    names: &FunctionMap,
    event: Option<u16>,
    code: &dyn CodeOracle,
) -> SampledCct {
    let mut out = SampledCct::default();
    for s in &set.samples {
        if event.is_some_and(|e| e != s.event) {
            continue;
        }
        if s.callchain.is_empty() {
            out.without_chain += 1;
        }
        let mut st: Vec<String> = Vec::with_capacity(s.callchain.len() + 2);
        for l in s.callchain.iter().rev() {
            let at = Location {
                module: l.module,
                svma: Svma(l.svma.0.saturating_sub(1)),
            };
            push_folded(&mut st, names.name(&set.modules, at));
        }
        let leaf = names.name(&set.modules, s.ip);
        if let Some(&ret) = s.callchain.first() {
            if code.frame_established(&set.modules, s.ip) == Some(false) {
                match code.direct_call_target(&set.modules, ret) {
                    Some(t) => {
                        let callee = names.name(&set.modules, t);
                        if callee != leaf {
                            push_folded(&mut st, callee);
                            out.repaired += 1;
                        }
                    }
                    None => out.unrepaired += 1,
                }
            }
        }
        push_folded(&mut st, leaf);
        *out.contexts.entry(st).or_insert(0) += 1;
        out.total += 1;
    }
    out
}

/// One context of a comparison.
#[derive(Debug, Clone, Serialize)]
pub struct ContextShare {
    /// Procedure names from the outermost frame.
    pub stack: Vec<String>,
    /// Samples.
    pub samples: u64,
    /// Sampled share `s/N_S`.
    pub share: f64,
    /// 95% Wilson interval of the share.
    pub ci: (f64, f64),
    /// Exact share `e/N_I` (exclusive instructions).
    pub exact_share: f64,
}

/// Sampled against exact contexts.
#[derive(Debug, Clone, Serialize)]
pub struct SampledComparison {
    /// `1/2 Σ_c |s_c/N_S − e_c/N_I|` over contexts (DESIGN.md epsilon at context
    /// granularity).
    pub epsilon: f64,
    /// Contexts with exact instructions.
    pub exact_contexts: usize,
    /// Contexts with samples.
    pub sampled_contexts: usize,
    /// Exact contexts that got no sample.
    pub missed: usize,
    /// Exact share of the missed contexts.
    pub missed_share: f64,
    /// Sampled contexts absent from the exact CCT (wrong chains, unwinding failures).
    pub spurious: usize,
    /// Contexts whose exact share lies inside the sampled Wilson interval.
    pub within_ci: usize,
    /// With an anchor: share of the samples whose stack does not contain it (left out of
    /// the comparison); 0 without an anchor.
    pub outside_anchor_sampled: f64,
    /// With an anchor: share of the exact instructions whose context does not contain it
    /// (left out of the comparison); 0 without an anchor.
    pub outside_anchor_exact: f64,
    /// Rows, largest exact share first.
    pub contexts: Vec<ContextShare>,
}

/// Compares sampled contexts with exact ones (e.g. [`Cct::context_instructions`](crate::Cct::context_instructions)).
/// With `anchor` (e.g. `main`), both sides start at the outermost frame of that name, which
/// hides frames a frame-pointer unwinder cannot see (libc start-up code); stacks without the
/// anchor (start-up and exit code, the dynamic loader, chains the unwinder broke) are left
/// out of both sides, their shares reported as `outside_anchor_*`, and the shares compared
/// are normalised within the anchor's subtree. A program's start-up cost does not scale
/// with its input, so this also makes a short exact run comparable with a long sampled one.
pub fn compare_cct(
    sampled: &SampledCct,
    exact: &BTreeMap<Vec<String>, u64>,
    anchor: Option<&str>,
) -> Result<SampledComparison, Error> {
    fn anchored(
        m: &BTreeMap<Vec<String>, u64>,
        anchor: Option<&str>,
    ) -> (BTreeMap<Vec<String>, u64>, f64) {
        let mut out: BTreeMap<Vec<String>, u64> = BTreeMap::new();
        let (mut outside, mut total) = (0u64, 0u64);
        for (k, v) in m {
            total += v;
            match anchor {
                Some(a) if !k.iter().any(|f| f == a) => outside += v,
                _ => *out.entry(anchor_stack(k.clone(), anchor)).or_insert(0) += v,
            }
        }
        (out, outside as f64 / total.max(1) as f64)
    }
    let (s, outside_s) = anchored(&sampled.contexts, anchor);
    let (e, outside_e) = anchored(exact, anchor);
    let eps = epsilon(
        s.iter().map(|(k, v)| (k.clone(), *v)),
        e.iter().map(|(k, v)| (k.clone(), *v)),
    )
    .map_err(|x| Error::Empty {
        what: "sampled CCT comparison",
        why: x.to_string(),
    })?;
    let ns: u64 = s.values().sum();
    let ni: u64 = e.values().sum();
    let mut keys: Vec<&Vec<String>> = s.keys().chain(e.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut rows = Vec::new();
    let (mut missed, mut missed_e, mut spurious, mut within) = (0, 0u64, 0, 0);
    for k in keys {
        let sc = s.get(k).copied().unwrap_or(0);
        let ec = e.get(k).copied().unwrap_or(0);
        if ec > 0 && sc == 0 {
            missed += 1;
            missed_e += ec;
        }
        if sc > 0 && ec == 0 {
            spurious += 1;
        }
        let ci = wilson_interval(sc, ns, Z_95);
        let es = ec as f64 / ni as f64;
        if es >= ci.0 && es <= ci.1 {
            within += 1;
        }
        rows.push(ContextShare {
            stack: k.clone(),
            samples: sc,
            share: sc as f64 / ns as f64,
            ci,
            exact_share: es,
        });
    }
    rows.sort_by(|a, b| {
        b.exact_share
            .total_cmp(&a.exact_share)
            .then_with(|| a.stack.cmp(&b.stack))
    });
    Ok(SampledComparison {
        epsilon: eps,
        exact_contexts: e.len(),
        sampled_contexts: s.len(),
        missed,
        missed_share: missed_e as f64 / ni as f64,
        spurious,
        within_ci: within,
        outside_anchor_sampled: outside_s,
        outside_anchor_exact: outside_e,
        contexts: rows,
    })
}
