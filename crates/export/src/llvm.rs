//! LLVM's sample profile, text format: what `clang -fprofile-sample-use=FILE` and
//! `llvm-profdata merge --sample` read (the AutoFDO flow).
//!
//! ```text
//! main:5000:10                  function (linkage name) : total samples : head samples
//!  2: 10                        line offset from the function's start line : count
//!  3.1: 1000                    offset . discriminator : count
//!  4: 10 helper:10              a call site with its targets and call counts
//!  5: inlined_fn:2000           a call site into which `inlined_fn` was inlined ...
//!   1: 1000                     ... followed by that inlined instance's lines, one
//!                               space deeper
//! ```
//!
//! How the numbers are made, as AutoFDO's `create_llvm_prof` makes them from per-address
//! counts:
//!
//! * each counted address is symbolized to its inline chain (DWARF, [`crate::Resolver`]);
//!   the outermost frame names the top-level function, each inner frame nests under the
//!   call site (line offset and discriminator) of the frame it was inlined into;
//! * a line's count is the **maximum** over its instructions of the instruction's count
//!   times the duplication factor its discriminator states (the instructions of one line in
//!   one block run equally often; a sum would weigh long lines more); lines are keyed by
//!   `(line - function start line) & 0xffff` and the base discriminator, as LLVM's
//!   `FunctionSamples::getOffset` and `DILocation::getBaseDiscriminator` key them;
//! * head samples: the count at the function's entry address (the entry block's
//!   executions for exact and corrected profiles);
//! * total samples: the function's line counts plus its inlined instances' totals;
//! * call targets: from exact call counts when given ([`write_llvm_sample`]'s `calls`),
//!   attached to the call site's line; sampled profiles have none.
//!
//! Addresses without a source line (no DWARF) are left out and counted in the summary.
//! Names go through [`proftrust_model::llvm_sample_name`]: a name holding a line break or
//! another control character (no C or C++ function has one) is written escaped, so that
//! `llvm-profdata` reads every record.

use crate::profile::Profile;
use crate::symbols::{Frame, Resolver};
use crate::ExportError;
use proftrust_model::{llvm_sample_name, Location};
use std::collections::BTreeMap;
use std::io::Write;

/// A line key: (line offset, base discriminator).
type LineKey = (u32, u32);

#[derive(Debug, Default, Clone, PartialEq)]
struct FunctionSamples {
    head: u64,
    body: BTreeMap<LineKey, u64>,
    targets: BTreeMap<LineKey, BTreeMap<String, u64>>,
    inlined: BTreeMap<LineKey, BTreeMap<String, FunctionSamples>>,
}

impl FunctionSamples {
    fn total(&self) -> u64 {
        self.body.values().sum::<u64>()
            + self
                .inlined
                .values()
                .flat_map(|m| m.values())
                .map(|f| f.total())
                .sum::<u64>()
    }
}

fn key(f: &Frame) -> LineKey {
    (
        f.line.wrapping_sub(f.function_line) & 0xffff,
        f.discriminator,
    )
}

/// What [`write_llvm_sample`] wrote.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LlvmSummary {
    /// Top-level functions written.
    pub functions: usize,
    /// Sum of the top-level functions' total samples.
    pub total_samples: u64,
    /// Counted addresses without a source line (left out).
    pub unlined_addresses: usize,
    /// Their summed counts.
    pub unlined_count: f64,
}

/// One exact call count for [`write_llvm_sample`]: call instruction, callee entry, calls.
pub type CallSite = (Location, Location, u64);

fn node<'a>(
    top: &'a mut BTreeMap<String, FunctionSamples>,
    frames: &[Frame],
) -> &'a mut FunctionSamples {
    let outer = frames.last().expect("frames are never empty");
    let mut n = top.entry(outer.linkage_name.clone()).or_default();
    for k in (1..frames.len()).rev() {
        n = n
            .inlined
            .entry(key(&frames[k]))
            .or_default()
            .entry(frames[k - 1].linkage_name.clone())
            .or_default();
    }
    n
}

fn has_lines(frames: &[Frame]) -> bool {
    frames
        .iter()
        .all(|f| f.line > 0 && f.function_line > 0 && f.symbolized && f.linkage_name != "??")
}

/// Writes column `value` of `p` (its self counts per address) as an LLVM sample profile
/// (module docs). `calls`: exact call counts to record as call targets.
pub fn write_llvm_sample<W: Write>(
    mut w: W,
    p: &Profile,
    r: &Resolver<'_>,
    value: usize,
    calls: &[CallSite],
) -> Result<LlvmSummary, ExportError> {
    crate::folded::check_value(p, value)?;
    let mut top: BTreeMap<String, FunctionSamples> = BTreeMap::new();
    let mut summary = LlvmSummary::default();
    for (loc, c) in p.self_counts(value) {
        let frames = r.frames(loc, false);
        if !has_lines(&frames) {
            summary.unlined_addresses += 1;
            summary.unlined_count += c;
            continue;
        }
        let inner = &frames[0];
        let n = (c * inner.duplication as f64).round().max(0.0) as u64;
        if n == 0 {
            continue;
        }
        let k = key(inner);
        let fs = node(&mut top, &frames);
        let e = fs.body.entry(k).or_default();
        *e = (*e).max(n);
        if let Some(f) = r.function(loc) {
            if f.start == loc.svma {
                let outer = frames.last().expect("non-empty");
                top.entry(outer.linkage_name.clone()).or_default().head += c.round() as u64;
            }
        }
    }
    for &(site, target, n) in calls {
        if n == 0 {
            continue;
        }
        let frames = r.frames(site, false);
        if !has_lines(&frames) {
            continue;
        }
        let Some(callee) = r.function(target).filter(|f| f.start == target.svma) else {
            continue;
        };
        let k = key(&frames[0]);
        let fs = node(&mut top, &frames);
        *fs.targets
            .entry(k)
            .or_default()
            .entry(callee.raw_name)
            .or_default() += n;
    }
    let mut order: Vec<(&String, &FunctionSamples, u64)> =
        top.iter().map(|(n, f)| (n, f, f.total())).collect();
    order.retain(|(_, f, t)| *t > 0 || f.head > 0);
    order.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| a.0.cmp(b.0)));
    for (name, f, total) in &order {
        writeln!(w, "{}:{total}:{}", llvm_sample_name(name), f.head)?;
        write_body(&mut w, f, 1)?;
        summary.functions += 1;
        summary.total_samples += total;
    }
    w.flush()?;
    Ok(summary)
}

fn loc_text((off, disc): LineKey) -> String {
    if disc == 0 {
        off.to_string()
    } else {
        format!("{off}.{disc}")
    }
}

fn write_body<W: Write>(w: &mut W, f: &FunctionSamples, depth: usize) -> std::io::Result<()> {
    let pad = " ".repeat(depth);
    let mut keys: Vec<LineKey> = f.body.keys().chain(f.targets.keys()).copied().collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        let n = f.body.get(&k).copied().unwrap_or(0);
        let mut line = format!("{pad}{}: {n}", loc_text(k));
        if let Some(t) = f.targets.get(&k) {
            for (callee, c) in t {
                line.push_str(&format!(" {}:{c}", llvm_sample_name(callee)));
            }
        }
        writeln!(w, "{line}")?;
    }
    for (k, callees) in &f.inlined {
        for (callee, g) in callees {
            let t = g.total();
            if t == 0 {
                continue;
            }
            writeln!(w, "{pad}{}: {}:{t}", loc_text(*k), llvm_sample_name(callee))?;
            write_body(w, g, depth + 1)?;
        }
    }
    Ok(())
}
