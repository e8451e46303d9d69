//! Annotated source and disassembly: for the hottest functions of a sampled profile, each
//! instruction and each source line (innermost inline frame) with its share of the
//! function's samples and the 95% Wilson interval of that share (seed 002 shows the
//! sampled share is an unbiased binomial estimate; DESIGN.md: Wilson score interval),
//! next to its share of the function's exact count and of a corrected estimate. A line or
//! instruction whose exact share lies outside the interval gets the audit's `!`.
//!
//! Profiles with different module tables are joined by module identity (build-id, else
//! file name), as everywhere in proftrust.

use crate::profile::Profile;
use crate::symbols::Resolver;
use crate::ExportError;
use proftrust_metrics::wilson_interval;
use proftrust_model::{Location, ModuleIdx, ModuleTable, Svma};
use proftrust_report::{AnnotatedInstruction, AnnotatedLine, Annotation, Shares};
use std::collections::{BTreeMap, HashMap};

/// Source text for annotated lines (the CLI reads files from disk).
pub trait SourceText {
    /// Line `line` (1-based) of `file`, without its line break.
    fn line(&self, file: &str, line: u32) -> Option<String>;
}

impl SourceText for () {
    fn line(&self, _file: &str, _line: u32) -> Option<String> {
        None
    }
}

/// The profiles an annotation compares (value column of each).
#[derive(Debug, Clone, Copy)]
pub struct AnnotateInput<'a> {
    /// The samples (column of sample counts): shares and intervals.
    pub sampled: (&'a Profile, usize),
    /// Exact counts.
    pub exact: Option<(&'a Profile, usize)>,
    /// Corrected estimates.
    pub corrected: Option<(&'a Profile, usize)>,
}

/// Which functions to annotate.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AnnotateOptions {
    /// Function names (demangled or linkage) to annotate; empty = the `top` hottest by
    /// samples. Default empty.
    pub functions: Vec<String>,
    /// How many of the hottest functions. Default 3.
    pub top: usize,
    /// What a sample is, for the headings. Default `"samples"`.
    pub sampled_label: String,
}

impl Default for AnnotateOptions {
    fn default() -> Self {
        AnnotateOptions {
            functions: Vec::new(),
            top: 3,
            sampled_label: "samples".into(),
        }
    }
}

/// Self counts of `p`'s column `v` with locations mapped onto `reference`'s modules
/// (locations in modules `reference` lacks are dropped).
fn remapped(p: &Profile, v: usize, reference: &ModuleTable) -> HashMap<Location, f64> {
    let mut map: HashMap<ModuleIdx, Option<ModuleIdx>> = HashMap::new();
    let mut out = HashMap::new();
    for (loc, c) in p.self_counts(v) {
        let Some(m) = loc.module else {
            continue;
        };
        let to = *map
            .entry(m)
            .or_insert_with(|| p.modules.get(m).and_then(|x| reference.find_same_binary(x)));
        if let Some(to) = to {
            *out.entry(Location {
                module: Some(to),
                svma: loc.svma,
            })
            .or_default() += c;
        }
    }
    out
}

#[derive(Default, Clone, Copy)]
struct Acc {
    samples: f64,
    exact: f64,
    corrected: f64,
}

impl Acc {
    fn add(&mut self, o: Acc) {
        self.samples += o.samples;
        self.exact += o.exact;
        self.corrected += o.corrected;
    }
}

/// Annotates the hottest (or the named) functions of `input.sampled` (module docs).
pub fn annotate(
    input: &AnnotateInput<'_>,
    r: &Resolver<'_>,
    source: &dyn SourceText,
    opts: &AnnotateOptions,
) -> Result<Vec<Annotation>, ExportError> {
    let (sp, sv) = input.sampled;
    crate::folded::check_value(sp, sv)?;
    let reference = r.modules();
    let sampled = remapped(sp, sv, reference);
    let exact = input.exact.map(|(p, v)| remapped(p, v, reference));
    let corrected = input.corrected.map(|(p, v)| remapped(p, v, reference));
    let all_samples: f64 = sampled.values().sum();
    let mut fns = PerFunction::default();
    fns.add(r, &sampled, |c| Acc {
        samples: c,
        ..Acc::default()
    });
    if let Some(e) = &exact {
        fns.add(r, e, |c| Acc {
            exact: c,
            ..Acc::default()
        });
    }
    if let Some(c) = &corrected {
        fns.add(r, c, |c| Acc {
            corrected: c,
            ..Acc::default()
        });
    }
    let mut out = Vec::new();
    for key in fns.chosen(opts)? {
        let locs = &fns.per_fn[&key];
        let a = FunctionAnnotator {
            r,
            source,
            module: key.0,
            total: total(locs),
            has_exact: exact.is_some(),
            has_corrected: corrected.is_some(),
        };
        let (lines, instructions) = a.lines_and_instructions(key.1, locs);
        let t = a.total;
        out.push(Annotation {
            function: fns.names[&key].0.clone(),
            module: reference
                .get(key.0)
                .map(|x| x.file_name().to_string())
                .unwrap_or_default(),
            start: key.1 .0,
            sampled_label: opts.sampled_label.clone(),
            samples: t.samples.round() as u64,
            sampled_share: if all_samples > 0.0 {
                t.samples / all_samples
            } else {
                0.0
            },
            exact_total: exact.as_ref().map(|_| t.exact.round() as u64),
            corrected_total: corrected.as_ref().map(|_| t.corrected),
            lines,
            instructions,
        });
    }
    Ok(out)
}

/// The sum of a function's counts.
fn total(m: &HashMap<Location, Acc>) -> Acc {
    let mut t = Acc::default();
    for a in m.values() {
        t.add(*a);
    }
    t
}

/// Every location's counts, per function (module, start), and the functions' names
/// (demangled, raw).
#[derive(Default)]
struct PerFunction {
    per_fn: BTreeMap<(ModuleIdx, Svma), HashMap<Location, Acc>>,
    names: HashMap<(ModuleIdx, Svma), (String, String)>,
}

impl PerFunction {
    /// The counts of `counts` (as `acc` makes them) to their functions; locations in no
    /// known function are dropped.
    fn add(&mut self, r: &Resolver<'_>, counts: &HashMap<Location, f64>, acc: fn(f64) -> Acc) {
        for (&loc, &c) in counts {
            let (Some(m), Some(f)) = (loc.module, r.function(loc)) else {
                continue;
            };
            self.names
                .entry((m, f.start))
                .or_insert((f.name, f.raw_name));
            self.per_fn
                .entry((m, f.start))
                .or_default()
                .entry(loc)
                .or_default()
                .add(acc(c));
        }
    }

    /// The functions to annotate: the `opts.top` most sampled, or those `opts.functions`
    /// names (an error when there is none).
    fn chosen(&self, opts: &AnnotateOptions) -> Result<Vec<(ModuleIdx, Svma)>, ExportError> {
        let mut chosen: Vec<(ModuleIdx, Svma)> = if opts.functions.is_empty() {
            let mut v: Vec<((ModuleIdx, Svma), f64)> = self
                .per_fn
                .iter()
                .map(|(k, m)| (*k, total(m).samples))
                .filter(|(_, s)| *s > 0.0)
                .collect();
            v.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            v.into_iter().take(opts.top).map(|(k, _)| k).collect()
        } else {
            self.per_fn
                .keys()
                .filter(|k| {
                    self.names
                        .get(k)
                        .is_some_and(|(n, raw)| opts.functions.iter().any(|f| f == n || f == raw))
                })
                .copied()
                .collect()
        };
        if chosen.is_empty() {
            return Err(ExportError::Empty {
                what: if opts.functions.is_empty() {
                    "no sampled function to annotate (no sample falls into a known function symbol)"
                        .into()
                } else {
                    format!(
                        "no function named {} has samples or counts in the profile",
                        opts.functions.join(", ")
                    )
                },
            });
        }
        chosen.dedup();
        Ok(chosen)
    }
}

/// The annotation of one function of `module`, whose counts sum to `total`.
struct FunctionAnnotator<'a> {
    r: &'a Resolver<'a>,
    source: &'a dyn SourceText,
    module: ModuleIdx,
    total: Acc,
    has_exact: bool,
    has_corrected: bool,
}

impl FunctionAnnotator<'_> {
    /// The shares of the function's counts that `a` holds, with the sampled share's
    /// Wilson interval.
    fn shares(&self, a: Acc) -> Shares {
        let t = self.total;
        let n = t.samples.round().max(0.0) as u64;
        let k = (a.samples.round().max(0.0) as u64).min(n);
        let sampled = if n > 0 { k as f64 / n as f64 } else { 0.0 };
        let (lo, hi) = if n > 0 {
            wilson_interval(k, n, proftrust_metrics::Z_95)
        } else {
            (0.0, 0.0)
        };
        let exact_share = self.has_exact.then(|| {
            if t.exact > 0.0 {
                a.exact / t.exact
            } else {
                0.0
            }
        });
        Shares {
            samples: k,
            sampled,
            ci_low: lo,
            ci_high: hi,
            exact_count: self.has_exact.then(|| a.exact.round() as u64),
            exact: exact_share,
            corrected: self.has_corrected.then(|| {
                if t.corrected > 0.0 {
                    a.corrected / t.corrected
                } else {
                    0.0
                }
            }),
            // The `!` of the annotation: outside the interval on enough samples to call it
            // bias (proftrust_metrics::evidence, as the audit's function table).
            outside_ci: n > 0
                && exact_share.is_some_and(|e| {
                    (e < lo - 1e-12 || e > hi + 1e-12)
                        && proftrust_metrics::evidence::enough_for_bias(k, n, e)
                }),
        }
    }

    /// The source lines (innermost frame of each instruction) and the instructions of the
    /// function at `start`, with their shares of `locs`.
    fn lines_and_instructions(
        &self,
        start: Svma,
        locs: &HashMap<Location, Acc>,
    ) -> (Vec<AnnotatedLine>, Vec<AnnotatedInstruction>) {
        let m = self.module;
        let mut instrs = self.r.symbols().instructions(Location {
            module: Some(m),
            svma: start,
        });
        if instrs.is_empty() {
            // No code at hand: the counted addresses stand for the instructions.
            let mut a: Vec<Svma> = locs.keys().map(|l| l.svma).collect();
            a.sort();
            instrs = a.into_iter().map(|s| (s, 0, String::from("?"))).collect();
        }
        let mut line_acc: BTreeMap<(String, u32), Acc> = BTreeMap::new();
        let mut instr_line: Vec<Option<(String, u32)>> = Vec::with_capacity(instrs.len());
        let mut instr_acc: Vec<Acc> = Vec::with_capacity(instrs.len());
        for (addr, _, _) in &instrs {
            let loc = Location {
                module: Some(m),
                svma: *addr,
            };
            let a = locs.get(&loc).copied().unwrap_or_default();
            let fr = self.r.frames(loc, false);
            let key = fr[0]
                .file
                .clone()
                .filter(|_| fr[0].line > 0)
                .map(|f| (f, fr[0].line));
            if let Some(k) = &key {
                line_acc.entry(k.clone()).or_default().add(a);
            }
            instr_line.push(key);
            instr_acc.push(a);
        }
        let line_index: HashMap<(String, u32), usize> = line_acc
            .keys()
            .enumerate()
            .map(|(i, k)| (k.clone(), i))
            .collect();
        let lines: Vec<AnnotatedLine> = line_acc
            .iter()
            .map(|((file, line), a)| AnnotatedLine {
                file: file.clone(),
                line: *line,
                text: self.source.line(file, *line),
                shares: self.shares(*a),
            })
            .collect();
        let instructions: Vec<AnnotatedInstruction> = instrs
            .iter()
            .zip(instr_line)
            .zip(instr_acc)
            .map(|(((addr, _, text), line), a)| AnnotatedInstruction {
                address: addr.0,
                text: text.clone(),
                line: line.and_then(|k| line_index.get(&k).copied()),
                shares: self.shares(a),
            })
            .collect();
        (lines, instructions)
    }
}
