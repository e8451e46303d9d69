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
use hashbrown::HashTable;
use proftrust_model::{folded_frame, Location};
use rustc_hash::FxBuildHasher;
use std::hash::BuildHasher;
use std::io::Write;

/// Distinct folded stacks with `K` summed value columns. The stacks' text lies in one
/// buffer and a table of indices finds them again: a profile of millions of distinct
/// stacks holds ~20 bytes of text and ~25 of index and values per stack, no heap block of
/// its own (issue 32: a `BTreeMap<String, f64>` of 26.8 M stacks took ~4 GB).
pub(crate) struct Folded<const K: usize> {
    text: Vec<u8>,
    /// End of each stack's text in `text` (its start is the previous end).
    ends: Vec<usize>,
    values: Vec<[f64; K]>,
    table: HashTable<(u32, u32)>,
    hasher: FxBuildHasher,
    /// Scratch for one stack and one name.
    line: Vec<u8>,
    name: String,
}

/// 32 bits of hash spread over 64 (hashbrown takes its tag from the top bits).
fn spread(h: u32) -> u64 {
    u64::from(h).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

impl<const K: usize> Folded<K> {
    /// Room for `stacks` distinct stacks (at most the profiles' stacks).
    pub(crate) fn new(stacks: usize) -> Folded<K> {
        Folded {
            text: Vec::new(),
            ends: Vec::with_capacity(stacks),
            values: Vec::with_capacity(stacks),
            table: HashTable::with_capacity(stacks),
            hasher: FxBuildHasher,
            line: Vec::new(),
            name: String::new(),
        }
    }

    fn stack(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
    }

    /// Adds `v` to column `col` of the stack `frames` (leaf first), named root first with
    /// inline frames expanded, each name through [`folded_frame`].
    pub(crate) fn add(&mut self, r: &Resolver<'_>, frames: &[Location], col: usize, v: f64) {
        let mut line = std::mem::take(&mut self.line);
        line.clear();
        for (i, &loc) in frames.iter().enumerate().rev() {
            let ret = i > 0;
            match r.known_frames(loc, ret) {
                Some(fr) => {
                    for f in fr.iter().rev() {
                        if !line.is_empty() {
                            line.push(b';');
                        }
                        line.extend_from_slice(folded_frame(&f.name).as_bytes());
                    }
                }
                None => {
                    self.name.clear();
                    r.write_fallback_name(loc, &mut self.name);
                    if !line.is_empty() {
                        line.push(b';');
                    }
                    line.extend_from_slice(folded_frame(&self.name).as_bytes());
                }
            }
        }
        // The table holds (index, 32 bits of hash): growing it hashes no text again.
        let h32 = self.hasher.hash_one(&line[..]) as u32;
        let h = spread(h32);
        let found = self
            .table
            .find(h, |&(i, g)| g == h32 && self.stack(i as usize) == &line[..])
            .map(|&(i, _)| i);
        let i = match found {
            Some(i) => i as usize,
            None => {
                let i = self.ends.len();
                self.text.extend_from_slice(&line);
                self.ends.push(self.text.len());
                self.values.push([0.0; K]);
                self.table
                    .insert_unique(h, (i as u32, h32), |&(_, g)| spread(g));
                i
            }
        };
        self.values[i][col] += v;
        self.line = line;
    }

    /// Adds column `value` of every stack of `p` (only its leaf when `leaf_only`) to
    /// column `col`.
    pub(crate) fn add_profile(
        &mut self,
        p: &Profile,
        r: &Resolver<'_>,
        value: usize,
        col: usize,
        leaf_only: bool,
    ) {
        for s in &p.stacks {
            let v = s.values.get(value).copied().unwrap_or(0.0);
            if v == 0.0 {
                continue;
            }
            let frames = if leaf_only {
                &s.frames[..s.frames.len().min(1)]
            } else {
                &s.frames[..]
            };
            self.add(r, frames, col, v);
        }
    }

    /// The stacks in byte order of their text, with their values (the table is dropped).
    pub(crate) fn into_sorted(mut self) -> SortedFolded<K> {
        self.table = HashTable::new();
        self.line = Vec::new();
        // Sorted by the 8 bytes after the prefix all stacks share (the common prefix of
        // the least and the greatest), then by the rest: most comparisons read no text.
        let n = self.ends.len();
        let (mut lo, mut hi) = (0, 0);
        for i in 1..n {
            if self.stack(i) < self.stack(lo) {
                lo = i;
            }
            if self.stack(i) > self.stack(hi) {
                hi = i;
            }
        }
        let common = if n == 0 {
            0
        } else {
            let (a, b) = (self.stack(lo), self.stack(hi));
            a.iter().zip(b).take_while(|(x, y)| x == y).count()
        };
        let key = |s: &[u8]| {
            let mut k = [0u8; 8];
            let tail = s.get(common..).unwrap_or_default();
            let m = tail.len().min(8);
            k[..m].copy_from_slice(&tail[..m]);
            u64::from_be_bytes(k)
        };
        let mut order: Vec<(u64, u32)> = (0..n).map(|i| (key(self.stack(i)), i as u32)).collect();
        order.sort_unstable_by(|&(ka, a), &(kb, b)| {
            ka.cmp(&kb).then_with(|| {
                let (a, b) = (self.stack(a as usize), self.stack(b as usize));
                a[common.min(a.len())..].cmp(&b[common.min(b.len())..])
            })
        });
        let order = order.into_iter().map(|(_, i)| i).collect();
        SortedFolded { f: self, order }
    }
}

/// [`Folded`] stacks in order.
pub(crate) struct SortedFolded<const K: usize> {
    f: Folded<K>,
    order: Vec<u32>,
}

impl<const K: usize> SortedFolded<K> {
    /// Stacks (text, values) in byte order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, [f64; K])> + '_ {
        self.order.iter().map(|&i| {
            let i = i as usize;
            // Every stack is made of `&str` names joined by `;`.
            let s = std::str::from_utf8(self.f.stack(i)).unwrap_or_default();
            (s, self.f.values[i])
        })
    }
}

/// The stacks of `f` with their values rounded (the first column scaled by `scale`),
/// those with no count of at least 1 left out: the lines of the folded form.
pub(crate) fn counted<const K: usize>(
    f: &SortedFolded<K>,
    scale: f64,
) -> impl Iterator<Item = (&str, [f64; K])> + '_ {
    f.iter().filter_map(move |(s, mut v)| {
        v[0] *= scale;
        let v = v.map(f64::round);
        v.iter().any(|&n| n >= 1.0).then_some((s, v))
    })
}

/// Appends the line `stack COUNT...` (no newline) to `out`.
pub(crate) fn push_line(out: &mut Vec<u8>, stack: &str, counts: &[f64]) {
    out.extend_from_slice(stack.as_bytes());
    for &n in counts {
        out.push(b' ');
        push_count(out, n);
    }
}

/// Writes a count (a rounded value, >= 1) as `{n:.0}` does, integers the fast way.
fn push_count(out: &mut Vec<u8>, n: f64) {
    if n.is_sign_positive() && n < 9.0e18 {
        let _ = write!(out, "{}", n as u64);
    } else {
        let _ = write!(out, "{n:.0}");
    }
}

/// Writes `lines` one a line, in blocks of 64 KiB.
fn write_lines<'a, const K: usize>(
    w: &mut impl Write,
    lines: impl Iterator<Item = (&'a str, [f64; K])>,
) -> Result<(), ExportError> {
    let mut out = Vec::with_capacity(1 << 16);
    for (stack, counts) in lines {
        push_line(&mut out, stack, &counts);
        out.push(b'\n');
        if out.len() >= 1 << 16 {
            w.write_all(&out)?;
            out.clear();
        }
    }
    w.write_all(&out)?;
    w.flush()?;
    Ok(())
}

/// Folded stack -> summed value of column `value`, in byte order of the stacks.
pub(crate) fn fold(p: &Profile, r: &Resolver<'_>, value: usize) -> SortedFolded<1> {
    let mut f = Folded::<1>::new(p.stacks.len());
    f.add_profile(p, r, value, 0, false);
    f.into_sorted()
}

/// Writes `p` as folded stacks of column `value` (module docs).
pub fn write_folded<W: Write>(
    mut w: W,
    p: &Profile,
    r: &Resolver<'_>,
    value: usize,
) -> Result<(), ExportError> {
    check_value(p, value)?;
    write_lines(&mut w, counted(&fold(p, r, value), 1.0))
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

/// The two sides of a differential profile: folded stack -> [before, after] (before
/// scaled), and the scale applied to `before`.
pub(crate) fn fold_diff(
    before: (&Profile, &Resolver<'_>, usize),
    after: (&Profile, &Resolver<'_>, usize),
    opts: &DiffOptions,
) -> (SortedFolded<2>, f64) {
    // Stacks compare only at the same depth: when one side is flat, so is the other.
    let flat = !(before.0.has_callers && after.0.has_callers);
    let mut f = Folded::<2>::new(before.0.stacks.len() + after.0.stacks.len());
    f.add_profile(before.0, before.1, before.2, 0, flat);
    f.add_profile(after.0, after.1, after.2, 1, flat);
    let sorted = f.into_sorted();
    let (mut tb, mut ta) = (0.0, 0.0);
    for (_, [b, a]) in sorted.iter() {
        tb += b;
        ta += a;
    }
    let scale = if opts.normalize && tb > 0.0 {
        ta / tb
    } else {
        1.0
    };
    (sorted, scale)
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
    write_lines(&mut w, counted(&m, scale))?;
    Ok(scale)
}
