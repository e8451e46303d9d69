//! The profile's verdict and the finest granularity it can be trusted at, from the rows'
//! verdicts, the warnings and what the samples are attributed with.

use crate::report::{Attribution, CheckRow, Granularity, Verdict};
use proftrust_model::{Warning, WarningKind};

/// The profile's verdict and its reason.
///
/// `noise` when the hottest attributed function is noise or no sample has a function (what
/// is hot cannot be told: leaving out the binary must never raise the verdict, issue 31 item
/// 3); `rank-only` under aliasing, lost samples, throttling or multiplexing, when the hottest
/// function is not acted on, or when more samples have no function than the hottest function
/// has (a function without a symbol may be hotter); else `act`. Rows without a function
/// (`[module]`) are skipped when looking for the hottest function. `act_floor` is the fewest
/// samples a row is acted on with ([`crate::rows::RowRules::act_floor`]), for the reason.
pub fn profile_verdict(
    functions: &[CheckRow],
    warnings: &[Warning],
    aliased: bool,
    top: usize,
    act_floor: u64,
) -> (Verdict, String) {
    if functions.is_empty() {
        return (Verdict::Noise, "no samples".into());
    }
    let unattributed: u64 = functions
        .iter()
        .filter(|r| r.attribution == Attribution::Module)
        .map(|r| r.samples)
        .sum();
    let total: u64 = functions.iter().map(|r| r.samples).sum();
    let Some(first) = functions
        .iter()
        .find(|r| r.attribution > Attribution::Module)
    else {
        return (
            Verdict::Noise,
            format!(
                "no sample has a function ({} in code without a symbol or function range): what is hot cannot be told; give the binaries with --binary (or --symfs)",
                pct(unattributed as f64 / total.max(1) as f64)
            ),
        );
    };
    if first.verdict == Verdict::Noise {
        return (
            Verdict::Noise,
            format!(
                "even the hottest function, {}, has too few samples ({})",
                first.name, first.samples
            ),
        );
    }
    if aliased {
        return (
            Verdict::RankOnly,
            "aliasing: the period may be locked to periodic code (record with --randomize)".into(),
        );
    }
    if unattributed > first.samples {
        return (
            Verdict::RankOnly,
            format!(
                "{} of the samples are in code without a function, more than the hottest function, {}, has: a function without a symbol may be hotter; give the binaries with --binary (or --symfs)",
                pct(unattributed as f64 / total.max(1) as f64),
                first.name
            ),
        );
    }
    // Lost samples, throttling and multiplexing all leave stretches of the run unsampled.
    let gap = warnings.iter().find(|w| {
        matches!(
            w.kind,
            WarningKind::Lost | WarningKind::Throttling | WarningKind::Multiplexing
        )
    });
    if let Some(w) = gap {
        return (Verdict::RankOnly, gap_reason(w.kind).into());
    }
    if first.verdict == Verdict::Act {
        let top_rows: Vec<&CheckRow> = functions
            .iter()
            .filter(|r| r.attribution > Attribution::Module)
            .take(top)
            .collect();
        return (Verdict::Act, act_reason(&top_rows));
    }
    let reason = if first.samples < act_floor {
        format!(
            "the hottest function, {}, has {} samples only ({act_floor} to act on)",
            first.name, first.samples
        )
    } else {
        format!(
            "the hottest function, {}, is known only to ±{:.0}%",
            first.name,
            (first.ci_high - first.ci_low) / 2.0 / first.share * 100.0
        )
    };
    (Verdict::RankOnly, reason)
}

/// "k of the top n functions can be acted on", and how many of them are not told apart from
/// the next in rank.
fn act_reason(top_rows: &[&CheckRow]) -> String {
    let act = top_rows
        .iter()
        .filter(|r| r.verdict == Verdict::Act)
        .count();
    let tied = top_rows
        .iter()
        .take(act.max(1))
        .filter(|r| r.distinct_from_next == Some(false))
        .count();
    let mut reason = format!(
        "{act} of the top {} function{} can be acted on",
        top_rows.len(),
        if top_rows.len() == 1 { "" } else { "s" }
    );
    if tied > 0 {
        reason.push_str(&format!(
            "; {tied} of them not told apart from the next in rank"
        ));
    }
    reason
}

fn gap_reason(kind: WarningKind) -> &'static str {
    match kind {
        WarningKind::Lost => {
            "samples were lost: shares may be biased toward what ran when the buffer had room"
        }
        WarningKind::Throttling => {
            "the kernel throttled sampling: shares may be biased against what ran while it was off"
        }
        _ => "the event was multiplexed: shares may be biased against what ran while it was off",
    }
}

fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

/// What the code said, for the levels below a source line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CodeLevel {
    /// Functions whose code was examined (0: no binary).
    pub functions_examined: usize,
    /// Skid across blocks: the share of the samples on a call and its return site that sit
    /// on the return site, when it shows skid.
    pub skid_across: Option<f64>,
    /// Skid within blocks (the shadow after slow instructions), when it shows skid.
    pub skid_within: Option<f64>,
    /// The share on successors within blocks, when any slow instruction was sampled.
    pub shadow_share: Option<f64>,
    /// Aliasing was found.
    pub aliased: bool,
}

/// The event's precision, for the instruction level.
#[derive(Debug, Clone, PartialEq)]
pub struct EventPrecision {
    /// A hardware event (not a software timer).
    pub hardware: bool,
    /// Its precise level (`:pp` = 2).
    pub precise: u8,
    /// A virtual-PMU event (its skid is modelled).
    pub virtual_pmu: bool,
}

/// The finest level whose hottest row can be acted on and whose samples are attributed that
/// finely: `none`, `function`, `inline`, `line`, `block`, `instruction` (issue 29: no "trust
/// down to" finer than the attribution available for the samples behind the row).
pub fn trustworthy_at(
    functions: &[CheckRow],
    inlines: &[CheckRow],
    lines: &[CheckRow],
    blocks: &[CheckRow],
    code: &CodeLevel,
    event: &EventPrecision,
) -> Granularity {
    source_level(functions, inlines, lines, code.aliased)
        .unwrap_or_else(|| code_level(blocks, code, event))
}

fn g(level: &str, reason: String) -> Granularity {
    Granularity {
        level: level.into(),
        reason,
    }
}

fn level_ok(rows: &[CheckRow]) -> bool {
    rows.first().is_some_and(|r| r.verdict == Verdict::Act)
}

/// The levels down to source lines: where the trust stops there, else `None`.
fn source_level(
    functions: &[CheckRow],
    inlines: &[CheckRow],
    lines: &[CheckRow],
    aliased: bool,
) -> Option<Granularity> {
    if let Some(f) = functions
        .first()
        .filter(|f| f.attribution == Attribution::Module)
    {
        return Some(g(
            "none",
            format!(
                "the hottest row, {}, is code without a function (no symbol or function range): give the binary (--binary) or its debug file",
                f.name
            ),
        ));
    }
    if !level_ok(functions) {
        return Some(g(
            "none",
            if aliased {
                "aliasing: the period may be locked to the program, so even the hottest function's share may be biased".into()
            } else {
                "the hottest function's share is not precise enough to act on".into()
            },
        ));
    }
    if let Some(i) = inlines
        .first()
        .filter(|i| i.attribution < Attribution::Line)
    {
        return Some(g(
            "function",
            format!(
                "no debug information for the samples of {}: inline frames and lines unknown (build with -g, or give the debug file with --binary)",
                i.name
            ),
        ));
    }
    if !level_ok(inlines) {
        return Some(g(
            "function",
            "inline functions have too few samples".into(),
        ));
    }
    if lines.is_empty() {
        return Some(g("inline", "no line information".into()));
    }
    if !level_ok(lines) {
        return Some(g("inline", "source lines have too few samples".into()));
    }
    None
}

/// The levels below source lines, from what the code says and the event's precision.
fn code_level(blocks: &[CheckRow], code: &CodeLevel, event: &EventPrecision) -> Granularity {
    if code.functions_examined == 0 {
        return g(
            "line",
            "no code to examine block and instruction attribution (give the binary)".into(),
        );
    }
    if let Some(f) = code.skid_across {
        return g(
            "line",
            format!(
                "samples skid across blocks: {} of the samples on a call and its return site sit on the return site",
                pct(f)
            ),
        );
    }
    if !level_ok(blocks) {
        return g("line", "basic blocks have too few samples".into());
    }
    if let Some(f) = code.skid_within {
        return g(
            "block",
            format!(
                "skid shadow: {} of the samples on a slow instruction and the next sit on the next",
                pct(f)
            ),
        );
    }
    if code.aliased {
        return g("block", "aliasing: instruction shares may be biased".into());
    }
    if !(event.hardware && event.precise >= 2) {
        return g(
            "block",
            format!(
                "{} event: each sample lands some cycles after the instruction that triggered it (paper 000 §1.2), so single instructions are unreliable even without a visible pile-up",
                if event.virtual_pmu {
                    "a virtual-PMU (skid as modelled)".to_string()
                } else if event.hardware {
                    format!("an imprecise (precise level {})", event.precise)
                } else {
                    "a software timer".to_string()
                }
            ),
        );
    }
    g(
        "instruction",
        match code.shadow_share {
            Some(f) => format!(
                "no skid shadow ({} of the samples on slow instructions and their successors sit on the successors)",
                pct(f)
            ),
            None => "no slow instruction sampled to test for skid".into(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, samples: u64, verdict: Verdict, attribution: Attribution) -> CheckRow {
        CheckRow {
            name: name.into(),
            samples,
            share: 0.5,
            ci_low: 0.45,
            ci_high: 0.55,
            interval: "wilson".into(),
            wilson_low: 0.45,
            wilson_high: 0.55,
            batch_low: 0.4,
            batch_high: 0.6,
            inflation: 1.0,
            run_low: None,
            run_high: None,
            distinct_from_next: Some(true),
            runs: None,
            r_mean: None,
            hardware_time: None,
            hardware_time_low: None,
            hardware_time_high: None,
            hardware_time_windows: None,
            attribution,
            flags: vec![],
            verdict,
            reason: String::new(),
        }
    }

    /// Lost samples, throttling and multiplexing leave stretches unsampled: not acted on.
    #[test]
    fn gaps_demote_the_verdict() {
        let f = [row("main", 1000, Verdict::Act, Attribution::Line)];
        assert_eq!(profile_verdict(&f, &[], false, 10, 97).0, Verdict::Act);
        for kind in [
            WarningKind::Lost,
            WarningKind::Throttling,
            WarningKind::Multiplexing,
        ] {
            let w = [Warning::new(kind, String::new())];
            let (v, reason) = profile_verdict(&f, &w, false, 10, 97);
            assert_eq!(v, Verdict::RankOnly, "{kind}");
            assert!(reason.contains("may be biased"), "{reason}");
        }
        let (v, reason) = profile_verdict(&f, &[], true, 10, 97);
        assert_eq!(v, Verdict::RankOnly);
        assert!(reason.starts_with("aliasing"));
    }

    /// Issue 31 item 3 / issue 29: every sample in one `[prog]` row (no binary) was "act on
    /// it, trust down to inline"; now noise with trust none, and never above the verdict the
    /// same samples get with the binary.
    #[test]
    fn no_function_no_trust() {
        let lump = [row("[prog]", 1000, Verdict::RankOnly, Attribution::Module)];
        let (v, reason) = profile_verdict(&lump, &[], false, 10, 97);
        assert_eq!(v, Verdict::Noise);
        assert!(
            reason.contains("no sample has a function (100.00%"),
            "{reason}"
        );
        let code = CodeLevel {
            functions_examined: 0,
            skid_across: None,
            skid_within: None,
            shadow_share: None,
            aliased: false,
        };
        let ev = EventPrecision {
            hardware: false,
            precise: 0,
            virtual_pmu: false,
        };
        let t = trustworthy_at(&lump, &lump, &[], &[], &code, &ev);
        assert_eq!(t.level, "none");
        // More samples without a function than the hottest function: not acted on.
        let mixed = [
            row("[libx.so]", 600, Verdict::RankOnly, Attribution::Module),
            row("main", 400, Verdict::Act, Attribution::Line),
        ];
        let (v, reason) = profile_verdict(&mixed, &[], false, 10, 97);
        assert_eq!(v, Verdict::RankOnly);
        assert!(reason.contains("may be hotter"), "{reason}");
        // A function without debug information: trust down to function, not inline.
        let f = [row("main", 1000, Verdict::Act, Attribution::Function)];
        let i = [row("main", 1000, Verdict::RankOnly, Attribution::Function)];
        assert_eq!(profile_verdict(&f, &[], false, 10, 97).0, Verdict::Act);
        let t = trustworthy_at(&f, &i, &[], &[], &code, &ev);
        assert_eq!(t.level, "function");
        assert!(t.reason.contains("no debug information"), "{}", t.reason);
    }
}
