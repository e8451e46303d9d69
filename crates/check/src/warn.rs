//! The warnings of a check, in words: what was found and what to do about it. Each takes the
//! finding it words; the kinds are the JSON contract's (docs/check.md).

use crate::report::{AliasingCheck, ModuleAttribution, PhaseLock};
use proftrust_model::{RecordingHealth, RunOutcome, Warning, WarningKind};

/// `0.1234` as `12.34%`.
pub fn pct(x: f64) -> String {
    format!("{:.2}%", 100.0 * x)
}

fn again(randomized: bool) -> &'static str {
    if randomized {
        "the period was already randomised: record with a different period"
    } else {
        "record again with --randomize"
    }
}

/// A reader's note about the file: `ended-early` when it says the file was cut, else `input`.
pub fn reader_note(msg: String) -> Warning {
    Warning::by_words(
        msg,
        &["ends after", "truncated", "cut copy", "incomplete"],
        WarningKind::EndedEarly,
        WarningKind::Input,
    )
}

/// Samples recurring on the same instructions ([`crate::aliasing::recurrence`]).
pub fn recurrence(a: &AliasingCheck, randomized: bool) -> Warning {
    Warning::new(
        WarningKind::Aliasing,
        format!(
            "samples {} apart land on the same instruction {:.1}x as often as independent samples would ({} of {} pairs, {:.0} expected): the period may be locked to periodic code, so shares may be biased (paper 001 §4.2, paper 002 §3.3); {}",
            a.lag,
            a.ratio,
            a.same_observed,
            a.pairs,
            a.same_expected,
            again(randomized)
        ),
    )
}

/// Blocks whose samples sit on one instruction ([`crate::code::CodeFindings::locked`]).
pub fn locked_blocks(locked: &[(String, u64)], n: u64, randomized: bool) -> Warning {
    let samples: u64 = locked.iter().map(|x| x.1).sum();
    let names: Vec<&str> = locked.iter().take(5).map(|x| x.0.as_str()).collect();
    Warning::new(
        WarningKind::Aliasing,
        format!(
            "{} basic block{} holding {} of the samples ({}) have 80% of their samples on one instruction, though every instruction of a block retires equally often: the period is locked to the loop, so shares may be biased (paper 001 §4.2); {}",
            locked.len(),
            if locked.len() == 1 { "" } else { "s" },
            pct(samples as f64 / n.max(1) as f64),
            names.join(", "),
            again(randomized)
        ),
    )
}

/// The period locked to a cycle of the program ([`crate::aliasing::phase_lock`]). `unit` is
/// the period's unit (` ns` for time events).
pub fn phase_lock(p: &PhaseLock, unit: &str) -> Warning {
    let who = if p.functions.is_empty() {
        "the functions that change with it".to_string()
    } else {
        p.functions.join(", ")
    };
    Warning::new(
        WarningKind::Aliasing,
        format!(
            "the period ({}{unit}) is locked to a cycle of the program: between consecutive samples the function changes where the sampling instant moved against the period (median shift {:.0}{unit} at the {} changes against {:.0}{unit} elsewhere, z = {:.1}), so each of the {} uninterrupted stretches looked at the cycle at one phase and the shares of {who} may be far from their time (paper 001 §4.2, paper 002 §3.3); record again with a randomised period (proftrust record --randomize) or with a period prime to the program's cycle (perf record -c {})",
            p.period,
            p.shift_changed,
            p.changes,
            p.shift_unchanged,
            p.z,
            p.stretches,
            next_prime(p.period.saturating_add(p.period / 7).max(2)),
        ),
    )
}

/// The smallest prime at least `n` (advice for another period).
fn next_prime(n: u64) -> u64 {
    let is_prime = |k: u64| k >= 2 && (2..).take_while(|d| d * d <= k).all(|d| k % d != 0);
    (n..).find(|&k| is_prime(k)).unwrap_or(n)
}

/// Skid shadow: `share` of the samples on a slow instruction (or call) and its successor sit
/// on the successor; `across` when the pile-up crosses blocks; `precise_helps` when a precise
/// event would undo it (an imprecise hardware event).
pub fn skid(share: f64, across: bool, precise_helps: bool) -> Warning {
    Warning::new(
        WarningKind::Skid,
        format!(
            "{} of the samples on a slow instruction (load, division{}) and the one after it sit on the one after it (about half without skid): samples gather at or just after slow instructions (paper 000 §1.2), so instruction-level{} attribution is unreliable; {}",
            pct(share),
            if across { ", call" } else { "" },
            if across { " and block-level" } else { "" },
            if precise_helps {
                "a precise event (:pp) or `proftrust correct` undoes most of it"
            } else {
                "`proftrust correct --skid S` estimates the counts without it"
            }
        ),
    )
}

/// Functions whose running states are shorter than the period.
pub fn short_states(names: &[String]) -> Warning {
    Warning::new(
        WarningKind::Granularity,
        format!(
            "{} run{} for less than one sampling period at a time (R < 1.5, paper 002 §3.3 eq. 1): each state is caught or missed by chance, so their shares are unbiased but only as precise as their sample count says; a shorter period sharpens them",
            names.join(", "),
            if names.len() == 1 { "s" } else { "" }
        ),
    )
}

/// Functions seen in fewer than `min_states` running states (`names` with their counts).
pub fn few_states(names: &[String], min_states: u64) -> Warning {
    Warning::new(
        WarningKind::Granularity,
        format!(
            "{} sampled in fewer than {min_states} running states: precise for this run (a long state is caught to within one sample, paper 002 eqs. 5-6), but only that many independent looks at the code, so how long such states usually last is unknown",
            names.join(", "),
        ),
    )
}

/// Samples without a function: `share` of all, per module.
pub fn unsymbolized(share: f64, per_module: &[ModuleAttribution]) -> Warning {
    let modules: Vec<String> = per_module
        .iter()
        .take(5)
        .map(|m| format!("{} {} of its samples", m.module, pct(m.share)))
        .collect();
    Warning::new(
        WarningKind::Unsymbolized,
        format!(
            "{} of the samples have no function ({}): no binary, no symbol and no function range found for their code, so they count per module and no verdict stands on them; give the binaries with --binary (or --symfs)",
            pct(share),
            modules.join(", ")
        ),
    )
}

/// Lost samples.
pub fn lost(lost: u64, n: u64) -> Warning {
    Warning::new(
        WarningKind::Lost,
        format!(
            "{lost} samples were lost ({} of all): the kernel's ring buffer overflowed; lost samples cluster in time, so shares may be biased toward what ran when the buffer had room; record with a larger buffer (-m) or a longer period",
            pct(lost as f64 / (lost + n).max(1) as f64)
        ),
    )
}

/// The `throttling` warning from the file's own record of it ([`RecordingHealth`]), over the
/// sampled `span` (ns) when known.
///
/// Throttling stops the event's sampling for stretches of the run: a throttled event loses
/// its interrupts until the next timer tick (`perf_event_max_sample_rate`). The samples then
/// stand for the stretches the event was on only, so shares are unbiased only if the program
/// behaved the same while it was off (seed 002 §3.3: the sampling point must not depend on
/// the running state).
pub fn throttling(h: &RecordingHealth, span: Option<u64>) -> Option<Warning> {
    if h.throttles == 0 {
        return None;
    }
    let of_span = span.map_or(String::new(), |sp| {
        format!(
            " ({} of the sampled span)",
            pct(h.throttled_ns as f64 / sp as f64)
        )
    });
    Some(Warning::new(
        WarningKind::Throttling,
        format!(
            "the kernel throttled sampling {} time{} for {:.3} ms in all{}: the event interrupted more often than perf_event_max_sample_rate allows, and what ran while it was throttled has no samples; record with a longer period (-c) or a lower frequency (-F)",
            h.throttles,
            if h.throttles == 1 { "" } else { "s" },
            h.throttled_ns as f64 / 1e6,
            of_span
        ),
    ))
}

/// The `multiplexing` warning: the event counted for less than 99% of the time it was
/// enabled (a counter that ran its whole enabled time reads running == enabled). Like
/// throttling, what ran while it was off has no samples.
pub fn multiplexing(event: &str, ratio: f64, running_ns: u64, enabled_ns: u64) -> Option<Warning> {
    (ratio < 0.99).then(|| {
        Warning::new(
            WarningKind::Multiplexing,
            format!(
                "{event} counted during {} of the time it was enabled ({:.3} of {:.3} ms): the kernel multiplexed it with other events on the PMU, and what ran while it was off has no samples; record fewer events at once",
                pct(ratio),
                running_ns as f64 / 1e6,
                enabled_ns as f64 / 1e6
            ),
        )
    })
}

/// The program did not exit with status 0 ([`RunOutcome::warning`]).
pub fn ended_early(oc: &RunOutcome) -> Option<Warning> {
    oc.warning("the recorded program", "the samples")
}

/// Rows whose samples cluster in time; `batch_stated` when their intervals are batch means.
pub fn clustering(names: &[&str], slices: usize, batch_stated: bool) -> Warning {
    Warning::new(
        WarningKind::Clustering,
        format!(
            "the samples of {} cluster in time (their share varies between the {slices} time slices more than sampling explains: the run has phases); {}",
            names.join(", "),
            if batch_stated {
                "their intervals are batch means over the slices"
            } else {
                "the Wilson intervals bound this run's shares; for another stretch of the run use the batch-means intervals (--interval auto, JSON batch_low/batch_high), for another run run_low/run_high"
            }
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_by_hand() {
        assert_eq!(next_prime(114_285), 114_299);
        assert_eq!(next_prime(2), 2);
        assert_eq!(
            reader_note("the file ends after 3 records".into()).kind,
            WarningKind::EndedEarly
        );
        assert_eq!(
            reader_note("unknown record type 99".into()).kind,
            WarningKind::Input
        );
        assert!(ended_early(&RunOutcome::Exited { code: 0 }).is_none());
        let w = ended_early(&RunOutcome::Exited { code: 3 }).unwrap();
        assert_eq!(
            (w.kind, w.message.as_str()),
            (WarningKind::EndedEarly, "the recorded program exited with status 3, which usually means it failed: the samples may show its error path rather than its normal work; check its arguments and input")
        );
        assert!(multiplexing("cycles", 0.995, 1, 1).is_none());
        assert!(multiplexing("cycles", 0.5, 1, 2).is_some());
        let p = PhaseLock {
            period: 100_000,
            pairs: 1000,
            changes: 40,
            shift_changed: 1500.0,
            shift_unchanged: 40.0,
            z: 8.5,
            auc: 0.8,
            stretches: 3,
            functions: vec!["a".into(), "b".into()],
            flagged: true,
        };
        let w = phase_lock(&p, " ns");
        assert_eq!(w.kind, WarningKind::Aliasing);
        assert!(
            w.message.contains("the period (100000 ns) is locked"),
            "{}",
            w.message
        );
        assert!(w.message.contains("the shares of a, b may be far"));
        assert!(w.message.contains("--randomize") && w.message.contains("perf record -c 114299"));
    }
}
