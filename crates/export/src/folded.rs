//! Folded stacks (Brendan Gregg's FlameGraph input, read by `flamegraph.pl` and inferno):
//! one line per distinct stack, `root;caller;leaf COUNT`, and the differential form
//! `root;...;leaf COUNT1 COUNT2` that `difffolded.pl` writes and `flamegraph.pl` /
//! `inferno-flamegraph` draw as a differential flame graph.
//!
//! Frames are function names, callers first; inline frames are expanded (the function a
//! call was inlined into comes before the inlined one), as `stackcollapse-perf.pl --inline`
//! does. Each frame goes through [`proftrust_model::folded_frame`]: control characters
//! escaped as text output shows them (a line break would start a new stack), and a `;`
//! inside a name, which would split the frame, written as `:`. Counts are integers
//! (rounded); stacks with a count of 0 are left out.
//! Lines are sorted, so the output is deterministic.

use crate::profile::Profile;
use crate::symbols::Resolver;
use crate::ExportError;
use proftrust_model::folded_stack;
use std::collections::BTreeMap;
use std::io::Write;

/// Folded stack -> summed value of column `value`.
pub(crate) fn fold(p: &Profile, r: &Resolver<'_>, value: usize) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    for s in &p.stacks {
        let v = s.values.get(value).copied().unwrap_or(0.0);
        if v == 0.0 {
            continue;
        }
        let names = r.names_root_first(&s.frames);
        *out.entry(folded_stack(names.iter().map(String::as_str)))
            .or_default() += v;
    }
    out
}

/// Writes `p` as folded stacks of column `value` (module docs).
pub fn write_folded<W: Write>(
    mut w: W,
    p: &Profile,
    r: &Resolver<'_>,
    value: usize,
) -> Result<(), ExportError> {
    check_value(p, value)?;
    for (stack, v) in fold(p, r, value) {
        let n = v.round();
        if n >= 1.0 {
            writeln!(w, "{stack} {n:.0}")?;
        }
    }
    w.flush()?;
    Ok(())
}

pub(crate) fn check_value(p: &Profile, value: usize) -> Result<(), ExportError> {
    if value >= p.value_types.len() {
        return Err(ExportError::NoSuchValue {
            index: value,
            available: p
                .value_types
                .iter()
                .map(|v| v.kind.clone())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(())
}

/// How [`write_folded_diff`] compares two profiles.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct DiffOptions {
    /// Scale the first profile so both have the same total, as `difffolded.pl -n` does:
    /// needed when the two count different things (samples against instructions). Default
    /// `true`.
    pub normalize: bool,
}

impl Default for DiffOptions {
    fn default() -> Self {
        DiffOptions { normalize: true }
    }
}

/// The two sides of a differential profile: folded stack -> (before, after), and the
/// scale applied to `before`.
pub(crate) fn fold_diff(
    before: (&Profile, &Resolver<'_>, usize),
    after: (&Profile, &Resolver<'_>, usize),
    opts: &DiffOptions,
) -> (BTreeMap<String, (f64, f64)>, f64) {
    // Stacks compare only at the same depth: when one side is flat, so is the other.
    let flat = !(before.0.has_callers && after.0.has_callers);
    let fb;
    let fa;
    let (pb, pa) = if flat {
        fb = before.0.flattened();
        fa = after.0.flattened();
        (&fb, &fa)
    } else {
        (before.0, after.0)
    };
    let b = fold(pb, before.1, before.2);
    let a = fold(pa, after.1, after.2);
    let tb: f64 = b.values().sum();
    let ta: f64 = a.values().sum();
    let scale = if opts.normalize && tb > 0.0 {
        ta / tb
    } else {
        1.0
    };
    let mut out: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for (k, v) in b {
        out.entry(k).or_default().0 += v * scale;
    }
    for (k, v) in a {
        out.entry(k).or_default().1 += v;
    }
    (out, scale)
}

/// Writes the differential folded form `stack BEFORE AFTER` of two profiles (sampled vs
/// exact, raw vs corrected): `before` first, as `difffolded.pl` orders its two inputs.
/// When either profile has no call chains both are compared by their leaf frames only.
/// Returns the scale applied to `before` (1 without normalisation).
pub fn write_folded_diff<W: Write>(
    mut w: W,
    before: (&Profile, &Resolver<'_>, usize),
    after: (&Profile, &Resolver<'_>, usize),
    opts: &DiffOptions,
) -> Result<f64, ExportError> {
    check_value(before.0, before.2)?;
    check_value(after.0, after.2)?;
    let (m, scale) = fold_diff(before, after, opts);
    for (stack, (b, a)) in m {
        let (b, a) = (b.round(), a.round());
        if b >= 1.0 || a >= 1.0 {
            writeln!(w, "{stack} {b:.0} {a:.0}")?;
        }
    }
    w.flush()?;
    Ok(scale)
}
