//! The report of `read` (what a profile file holds): per kind of file its data, which is
//! the `--json` document (keys in field order), and the text summary and table.

use crate::quote_name;
use proftrust_model::RunOutcome;
use serde::Serialize;
use std::fmt::Write as _;

/// What `read` found, by kind of file.
#[derive(Debug, Clone)]
pub enum ReadReport {
    /// A sample file (perf.data, `perf script` text, proftrust samples).
    Samples(ReadSamples),
    /// An exact-count file.
    Exact(ReadExact),
    /// A callgrind out file.
    Callgrind(ReadCallgrind),
}

/// A sample file's events and per-symbol counts.
#[derive(Debug, Clone, Serialize)]
pub struct ReadSamples {
    /// `perf.data`, `perf-script` or `samples`.
    pub format: String,
    /// The file as named.
    pub file: String,
    /// Its events.
    pub events: Vec<ReadEvent>,
    /// Lost samples.
    pub lost: u64,
    /// Samples of all events.
    pub samples: u64,
    /// Its modules.
    pub modules: Vec<ReadModule>,
    /// Samples per symbol over all events, largest first.
    pub symbols: Vec<ReadSymbol>,
    /// The branch table: taken branches aggregated over every branch stack, most frequent
    /// first (absent when the file has no branch stacks).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub branches: Vec<ReadBranchCount>,
    /// Samples with a branch stack (absent when none has one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch_samples: Option<u64>,
    /// The branch stack of each sample that has one, in file order: only when asked for
    /// (`read --branch-stacks`; tens of megabytes for a few thousand samples), else absent.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub branch_stacks: Vec<ReadBranchStack>,
    /// Per module, how its samples are attributed: in a named function, in a function
    /// recovered from the call-frame information (`gawk!sub_46dd00`), or in none.
    pub attribution: Vec<crate::attribution::ModuleAttribution>,
    /// How the recorded run ended, when the file says (absent when it does not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<RunOutcome>,
    /// Reader and symbolizer warnings.
    pub warnings: Vec<crate::Warning>,
}

/// A code address of a branch entry, module-relative where it maps to a module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadAddress {
    /// The module's path; `None` when the address maps to no module (then `address` is the
    /// address as recorded).
    pub module: Option<String>,
    /// The SVMA (the address as the ELF file states it, what `objdump -d` prints).
    pub address: u64,
    /// The function holding it.
    pub symbol: String,
}

/// One entry of a sample's branch stack, as perf's `brstack` gives it.
#[derive(Debug, Clone, Serialize)]
pub struct ReadBranch {
    /// The branch instruction.
    pub from: ReadAddress,
    /// Its target.
    pub to: ReadAddress,
    /// `true` mispredicted (`M`), `false` predicted (`P`), `null` when the hardware did
    /// not say (`-`).
    pub mispredicted: Option<bool>,
    /// Cycles since the previous entry, 0 when not recorded.
    pub cycles: u32,
}

/// The branch stack of one sample.
#[derive(Debug, Clone, Serialize)]
pub struct ReadBranchStack {
    /// The sample's index in the file (0-based, file order, all events).
    pub sample: u64,
    /// Its event.
    pub event: String,
    /// Taken branches, most recent first.
    pub branches: Vec<ReadBranch>,
}

/// One taken branch `from -> to` counted over all branch stacks.
#[derive(Debug, Clone, Serialize)]
pub struct ReadBranchCount {
    /// The branch instruction.
    pub from: ReadAddress,
    /// Its target.
    pub to: ReadAddress,
    /// Entries of the branch stacks with this pair.
    pub count: u64,
    /// Of those, entries marked mispredicted (`M`).
    pub mispredicted: u64,
}

/// One event of a sample file.
#[derive(Debug, Clone, Serialize)]
pub struct ReadEvent {
    /// Name.
    pub name: String,
    /// Kind, as perf spells the event (`cpu-clock`, `instructions`, `r1c0`).
    pub kind: String,
    /// Samples.
    pub samples: u64,
    /// This event's per-symbol table, when the file holds several events (the top-level
    /// `symbols` then sums all events).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbols: Option<Vec<ReadSymbol>>,
}

/// Samples of one symbol.
#[derive(Debug, Clone, Serialize)]
pub struct ReadSymbol {
    /// Function name.
    pub name: String,
    /// Module path.
    pub module: String,
    /// Samples.
    pub samples: u64,
}

/// A module of the profile.
#[derive(Debug, Clone, Serialize)]
pub struct ReadModule {
    /// Recorded path.
    pub path: String,
    /// Build-id (hex).
    pub build_id: Option<String>,
}

/// Instructions of one function.
#[derive(Debug, Clone, Serialize)]
pub struct ReadFunction {
    /// Name.
    pub name: String,
    /// Module (exact files) or object (callgrind).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// Source file (callgrind).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Instructions (self).
    pub instructions: u64,
}

/// An event total of a callgrind file.
#[derive(Debug, Clone, Serialize)]
pub struct ReadCgEvent {
    /// Name.
    pub name: String,
    /// Total.
    pub total: u64,
}

/// A callgrind file's totals and functions.
#[derive(Debug, Clone, Serialize)]
pub struct ReadCallgrind {
    /// `callgrind`.
    pub format: String,
    /// The file as named.
    pub file: String,
    /// `creator:` line.
    pub creator: Option<String>,
    /// `cmd:` line.
    pub command: Option<String>,
    /// Parts.
    pub parts: usize,
    /// The `Ir` total.
    pub total_instructions: u64,
    /// The `totals:`/`summary:` the file states.
    pub stated_totals: Option<Vec<u64>>,
    /// Per event, its total.
    pub events: Vec<ReadCgEvent>,
    /// Call lines.
    pub calls: usize,
    /// Jump lines.
    pub jumps: usize,
    /// Per function, self `Ir`, largest first.
    pub functions: Vec<ReadFunction>,
    /// Reader warnings (a stated total the records do not quite reach).
    pub warnings: Vec<crate::Warning>,
}

/// An exact file's totals and functions.
#[derive(Debug, Clone, Serialize)]
pub struct ReadExact {
    /// `exact`.
    pub format: String,
    /// The file as named.
    pub file: String,
    /// Backend (`qemu`, `callgrind`).
    pub backend: String,
    /// Its version and settings.
    pub backend_detail: String,
    /// The program run.
    pub command: Vec<String>,
    /// How it ended.
    pub outcome: Option<RunOutcome>,
    /// Instructions in all.
    pub total_instructions: u64,
    /// Distinct instructions.
    pub distinct_instructions: usize,
    /// Edges.
    pub edges: usize,
    /// Call sites.
    pub calls: usize,
    /// Its modules.
    pub modules: Vec<ReadModule>,
    /// Per function, instructions, largest first.
    pub functions: Vec<ReadFunction>,
    /// Reader and symbolizer warnings.
    pub warnings: Vec<crate::Warning>,
}

impl ReadReport {
    /// The JSON document (keys in field order), pretty-printed, without a final newline.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        match self {
            ReadReport::Samples(r) => serde_json::to_string_pretty(r),
            ReadReport::Exact(r) => serde_json::to_string_pretty(r),
            ReadReport::Callgrind(r) => serde_json::to_string_pretty(r),
        }
    }

    /// Warnings to show beside the text report.
    pub fn warnings(&self) -> &[crate::Warning] {
        match self {
            ReadReport::Samples(r) => &r.warnings,
            ReadReport::Exact(r) => &r.warnings,
            ReadReport::Callgrind(r) => &r.warnings,
        }
    }

    /// The text summary and table of the `top` first rows (all when 0). Warnings are not
    /// included.
    pub fn render_text(&self, top: usize) -> String {
        let n = if top == 0 { usize::MAX } else { top };
        let mut out = String::new();
        match self {
            ReadReport::Samples(r) => r.render(&mut out, n),
            ReadReport::Exact(r) => {
                _ = writeln!(
                    out,
                    "{}: exact profile ({} {}), {} instructions, {} distinct, {} edges, {} call sites",
                    quote_name(&r.file),
                    quote_name(&r.backend),
                    quote_name(&r.backend_detail),
                    r.total_instructions,
                    r.distinct_instructions,
                    r.edges,
                    r.calls
                );
                ended_early(&mut out, r.outcome.as_ref(), "the counts");
                instruction_table(&mut out, &r.functions, r.total_instructions, n, "module");
            }
            ReadReport::Callgrind(r) => {
                _ = writeln!(
                    out,
                    "{}: callgrind ({}), {} instructions, {} part(s), {} calls, {} jumps",
                    quote_name(&r.file),
                    quote_name(r.creator.as_deref().unwrap_or("unknown creator")),
                    r.total_instructions,
                    r.parts,
                    r.calls,
                    r.jumps
                );
                for e in &r.events {
                    _ = writeln!(out, "  event {}: {}", quote_name(&e.name), e.total);
                }
                instruction_table(&mut out, &r.functions, r.total_instructions, n, "object");
            }
        }
        out
    }
}

impl ReadSamples {
    fn render(&self, out: &mut String, n: usize) {
        _ = writeln!(
            out,
            "{}: {} ({} samples, {} lost)",
            quote_name(&self.file),
            self.format,
            self.samples,
            self.lost
        );
        ended_early(out, self.outcome.as_ref(), "the samples");
        for e in &self.events {
            // The kind only where the name does not already say it (`cpu-clock:u`).
            let base = e.name.split(':').next().unwrap_or("");
            let kind = if base == e.kind {
                String::new()
            } else {
                format!(" ({})", e.kind)
            };
            _ = writeln!(
                out,
                "  event {}{kind}: {} samples",
                quote_name(&e.name),
                e.samples
            );
        }
        for (label, l) in crate::attribution::attribution_lines(&self.attribution) {
            _ = writeln!(out, "  {label}: {l}");
        }
        let table = |out: &mut String, title: Option<&str>, symbols: &[ReadSymbol], total: u64| {
            if let Some(t) = title {
                _ = writeln!(out, "\n{t}");
            }
            _ = writeln!(out, "{:>10} {:>7}  symbol (module)", "samples", "%");
            for x in symbols.iter().take(n) {
                _ = writeln!(
                    out,
                    "{:>10} {:>6.2}%  {} ({})",
                    x.samples,
                    100.0 * x.samples as f64 / total.max(1) as f64,
                    quote_name(&x.name),
                    quote_name(&x.module)
                );
            }
        };
        if self.events.len() > 1 {
            // One table per event, as `perf report` does: summing instruction and cycle
            // samples would mean nothing.
            for e in &self.events {
                if let Some(syms) = &e.symbols {
                    table(
                        out,
                        Some(&format!("event {}:", quote_name(&e.name))),
                        syms,
                        e.samples,
                    );
                }
            }
        } else {
            table(out, None, &self.symbols, self.samples);
        }
        if !self.branches.is_empty() {
            let entries: u64 = self.branches.iter().map(|b| b.count).sum();
            let mispredicted: u64 = self.branches.iter().map(|b| b.mispredicted).sum();
            _ = writeln!(
                out,
                "\nbranch stacks: {} samples, {entries} taken branches ({mispredicted} mispredicted), {} distinct",
                self.branch_samples.unwrap_or_default(),
                self.branches.len()
            );
            _ = writeln!(out, "{:>10} {:>9}  from -> to", "count", "mispred");
            let at = |a: &ReadAddress| format!("{} 0x{:x}", quote_name(&a.symbol), a.address);
            for b in self.branches.iter().take(n) {
                _ = writeln!(
                    out,
                    "{:>10} {:>9}  {} -> {}",
                    b.count,
                    b.mispredicted,
                    at(&b.from),
                    at(&b.to)
                );
            }
        }
    }
}

/// The line saying a recorded or counted run did not end normally (issue 32: an
/// interrupted file looked complete to `read`): `ENDED EARLY: the program was interrupted
/// (proftrust received SIGINT): the samples cover the run up to then`.
fn ended_early(out: &mut String, outcome: Option<&RunOutcome>, what: &str) {
    if let Some(w) = outcome.and_then(|o| o.sentence("the program", what)) {
        _ = writeln!(out, "ENDED EARLY: {}", quote_name(&w));
    }
}

/// The per-function instruction table of callgrind and exact files: the `n` first
/// functions with their share of `total`; `place` names the module column.
fn instruction_table(
    out: &mut String,
    functions: &[ReadFunction],
    total: u64,
    n: usize,
    place: &str,
) {
    let total = total.max(1) as f64;
    _ = writeln!(out, "{:>14} {:>7}  function ({place})", "instructions", "%");
    for f in functions.iter().take(n) {
        _ = writeln!(
            out,
            "{:>14} {:>6.2}%  {} ({})",
            f.instructions,
            100.0 * f.instructions as f64 / total,
            quote_name(&f.name),
            quote_name(f.module.as_deref().unwrap_or("?"))
        );
    }
}
