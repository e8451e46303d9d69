//! The calling contexts a call-chain sampler sees, against the exact CCT.

use crate::cct::anchor_stack;
use crate::funcs::FunctionMap;
use crate::Error;
use proftrust_metrics::{epsilon, wilson_interval, Z_95};
use proftrust_model::{Location, SampleSet, Svma};
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
}

impl SampledCct {
    /// Writes collapsed stacks (`a;b;c N`).
    pub fn write_folded(&self, w: &mut impl Write) -> std::io::Result<()> {
        for (st, n) in &self.contexts {
            writeln!(w, "{} {}", st.join(";"), n)?;
        }
        Ok(())
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
pub fn sampled_cct(set: &SampleSet, names: &FunctionMap, event: Option<u16>) -> SampledCct {
    let mut out = SampledCct::default();
    for s in &set.samples {
        if event.is_some_and(|e| e != s.event) {
            continue;
        }
        if s.callchain.is_empty() {
            out.without_chain += 1;
        }
        let mut st: Vec<String> = Vec::with_capacity(s.callchain.len() + 1);
        for l in s.callchain.iter().rev() {
            let at = Location {
                module: l.module,
                svma: Svma(l.svma.0.saturating_sub(1)),
            };
            push_folded(&mut st, names.name(&set.modules, at));
        }
        push_folded(&mut st, names.name(&set.modules, s.ip));
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
    /// Rows, largest exact share first.
    pub contexts: Vec<ContextShare>,
}

/// Compares sampled contexts with exact ones (e.g. [`Cct::context_instructions`](crate::Cct::context_instructions)).
/// With `anchor` (e.g. `main`), both sides start at the outermost frame of that name, which
/// hides frames a frame-pointer unwinder cannot see (libc start-up code).
pub fn compare_cct(
    sampled: &SampledCct,
    exact: &BTreeMap<Vec<String>, u64>,
    anchor: Option<&str>,
) -> Result<SampledComparison, Error> {
    let mut s: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    for (k, v) in &sampled.contexts {
        *s.entry(anchor_stack(k.clone(), anchor)).or_insert(0) += v;
    }
    let mut e: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    for (k, v) in exact {
        *e.entry(anchor_stack(k.clone(), anchor)).or_insert(0) += v;
    }
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
        contexts: rows,
    })
}
