//! The rows of every level (function, inline function, source line, basic block): counts per
//! time slice into shares, intervals and verdicts.

use crate::report::{Attribution, CheckRow, Verdict};
use proftrust_metrics::resolution::{batch_means, rank_difference_z};
use proftrust_metrics::wilson_interval;
use proftrust_sim::granularity::RunningStates;
use rustc_hash::FxHashMap;

/// Names interned per level: dense ids for the per-sample passes.
#[derive(Debug, Default, Clone)]
pub struct Names {
    names: Vec<String>,
    ids: FxHashMap<String, u32>,
}

impl Names {
    /// The id of `s`, added when new.
    pub fn id(&mut self, s: String) -> u32 {
        if let Some(&i) = self.ids.get(&s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.ids.insert(s.clone(), i);
        self.names.push(s);
        i
    }
    /// The names, by id.
    pub fn names(&self) -> &[String] {
        &self.names
    }
    /// Number of names.
    pub fn len(&self) -> usize {
        self.names.len()
    }
    /// True when no name was added.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

impl std::str::FromStr for IntervalChoice {
    type Err = String;
    /// `wilson` or `auto`.
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "wilson" => Ok(IntervalChoice::Wilson),
            "auto" => Ok(IntervalChoice::Auto),
            _ => Err(format!("`{s}`: the interval is `wilson` or `auto`")),
        }
    }
}

impl IntervalChoice {
    /// The names [`std::str::FromStr`] takes.
    pub const NAMES: [&'static str; 2] = ["wilson", "auto"];
}

/// Which interval a row states.
///
/// The two answer different questions. Wilson bounds the sampling error of *this run's*
/// shares: with a fixed period the samples are a systematic sample of the run, whose
/// variance seed 002 §3.4-3.5 (eqs. 6, 9) shows is at most binomial, so Wilson is
/// conservative even when the run has phases. The batch-means interval measures how much
/// the share varies between stretches of the run; when a row clusters in time (phases), it
/// is the interval for "what share would another stretch of this run show".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IntervalChoice {
    /// Always the Wilson score interval (default).
    #[default]
    Wilson,
    /// The batch-means interval where the row's samples cluster in time (and it is wider),
    /// else Wilson.
    Auto,
}

/// The rules every row of a check is judged by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowRules {
    /// Samples of the checked event.
    pub n: u64,
    /// Confidence level of the intervals.
    pub confidence: f64,
    /// Which interval is stated.
    pub interval: IntervalChoice,
    /// Relative half-width at most this: act on it.
    pub act_precision: f64,
    /// Relative half-width beyond this: noise.
    pub noise_precision: f64,
    /// Aliasing was found: no row is acted on.
    pub aliased: bool,
}

impl RowRules {
    /// The two-sided normal quantile of the confidence level.
    pub fn z(&self) -> f64 {
        proftrust_metrics::resolution::z_for(self.confidence)
    }

    /// The fewest samples a row is acted on with: `⌈(z/act_precision)²⌉` (97 at 95% and
    /// ±20%), the samples at which a small share's interval reaches the act precision. A
    /// share near 100% is precise by construction (it cannot exceed 1: 10 samples of 10 give
    /// the Wilson interval 72%..100%, ±14% of the share), so the relative half-width alone
    /// would act on a handful of samples (issue 31 item 3); the count floor keeps the rule
    /// "about 100 samples" true for every share.
    pub fn act_floor(&self) -> u64 {
        (self.z() / self.act_precision).powi(2).ceil() as u64
    }

    /// The fewest samples a row is more than noise with: `⌈(z/noise_precision)²⌉` (16 at 95%
    /// and ±50%); 1 or 2 samples are noise whatever their share.
    pub fn noise_floor(&self) -> u64 {
        (self.z() / self.noise_precision).powi(2).ceil() as u64
    }
}

/// One level's input: interned names, per name its counts per time slice, and per name the
/// attribution of its samples.
#[derive(Debug, Clone, Copy)]
pub struct Level<'a> {
    /// Names by id.
    pub names: &'a [String],
    /// `counts[id][slice]`.
    pub counts: &'a [Vec<u64>],
    /// Samples per time slice (the same for every level).
    pub sizes: &'a [u64],
    /// Per id, the finest attribution at least 95% of its samples have.
    pub attribution: &'a [Attribution],
    /// The attribution a row of this level needs to be acted on: `Function` for functions
    /// and blocks, `Line` for inline functions and lines.
    pub needs: Attribution,
    /// Running states per id (functions), when known.
    pub states: Option<&'a [RunningStates]>,
    /// A remark that stops every row of the level from being acted on (skid across blocks).
    pub note: Option<&'a str>,
}

/// The finest attribution that at least 95% of a row's samples have, from its samples with
/// a function and with a line (issue 29: a verdict stands on the attribution actually there;
/// 95% so that a stray sample without line information does not demote a whole row).
pub fn attribution_of(samples: u64, with_function: u64, with_line: u64) -> Attribution {
    let enough = |k: u64| samples > 0 && k as f64 >= 0.95 * samples as f64;
    if enough(with_line) {
        Attribution::Line
    } else if enough(with_function) {
        Attribution::Function
    } else {
        Attribution::Module
    }
}

fn verdict_of(k: u64, rel: f64, rules: &RowRules) -> (Verdict, String) {
    let pct = rel * 100.0;
    let (act_floor, noise_floor) = (rules.act_floor(), rules.noise_floor());
    let plural = if k == 1 { "" } else { "s" };
    if rel > rules.noise_precision {
        (Verdict::Noise, format!("{k} sample{plural}: ±{pct:.0}%"))
    } else if k < noise_floor {
        (
            Verdict::Noise,
            format!("{k} sample{plural}: ±{pct:.0}%, but too few to tell from noise ({noise_floor} needed)"),
        )
    } else if rel > rules.act_precision {
        (Verdict::RankOnly, format!("share known only to ±{pct:.0}%"))
    } else if k < act_floor {
        (
            Verdict::RankOnly,
            format!("share known to ±{pct:.0}%, but on {k} samples only ({act_floor} to act on)"),
        )
    } else {
        (Verdict::Act, format!("share known to ±{pct:.0}%"))
    }
}

/// The rows of one level, most samples first (ties by name), rows without samples left
/// out.
///
/// Per row: the Wilson interval (seed 002 §3.5 eq. 9: the binomial variance bounds a
/// sampled share's), the batch-means interval over the time slices
/// ([`proftrust_metrics::resolution::batch_means`]) and whether the row clusters in time;
/// the stated interval by [`RowRules::interval`]; running states and `R` where known; the
/// verdict from the relative half-width (act at most `act_precision`, noise beyond
/// `noise_precision`) with the count floors of [`RowRules::act_floor`] and
/// [`RowRules::noise_floor`]; then the caps: aliasing, the level's note, and the attribution
/// (a row whose samples lack the attribution its level needs is not acted on: a module's
/// share is no function's, a function without debug information has no known inline frames).
/// Whether each row differs from the next at the confidence level uses the multinomial
/// variance of two cells ([`rank_difference_z`]), inflated like the stated interval.
pub fn rows(level: &Level<'_>, rules: &RowRules) -> Vec<CheckRow> {
    let n = rules.n;
    let z = rules.z();
    let total = |i: usize| level.counts[i].iter().sum::<u64>();
    let mut order: Vec<usize> = (0..level.names.len()).filter(|&i| total(i) > 0).collect();
    order.sort_by(|&a, &b| {
        total(b)
            .cmp(&total(a))
            .then(level.names[a].cmp(&level.names[b]))
    });
    let mut out: Vec<CheckRow> = order.iter().map(|&i| row(level, rules, i, n, z)).collect();
    for w in 0..out.len().saturating_sub(1) {
        let (a, b) = (&out[w], &out[w + 1]);
        let infl = |r: &CheckRow| {
            if r.interval == "batch-means" {
                r.inflation
            } else {
                1.0
            }
        };
        let zs = rank_difference_z(a.samples, b.samples, n, infl(a).max(infl(b)));
        out[w].distinct_from_next = Some(zs > z);
    }
    out
}

fn row(level: &Level<'_>, rules: &RowRules, i: usize, n: u64, z: f64) -> CheckRow {
    let k = level.counts[i].iter().sum::<u64>();
    let share = k as f64 / n as f64;
    let (wl, wh) = wilson_interval(k, n, z);
    let bm = batch_means(&level.counts[i], level.sizes, rules.confidence);
    let use_bm =
        rules.interval == IntervalChoice::Auto && bm.clustered && (bm.high - bm.low) > (wh - wl);
    let (lo, hi) = if use_bm {
        (bm.low.min(wl), bm.high.max(wh))
    } else {
        (wl, wh)
    };
    let (runs, r_mean) = match level.states.map(|s| s[i]) {
        Some(st) if st.runs > 0 => (Some(st.runs), st.r_mean()),
        _ => (None, None),
    };
    let rel = (hi - lo) / 2.0 / share;
    let (mut verdict, mut reason) = verdict_of(k, rel, rules);
    let mut flags = Vec::new();
    if bm.clustered && k >= 10 {
        flags.push("clustering".to_string());
    }
    if rules.aliased && verdict == Verdict::Act {
        verdict = Verdict::RankOnly;
        reason.push_str("; aliasing may bias it");
        flags.push("aliasing".to_string());
    }
    if let Some(note) = level.note {
        if verdict == Verdict::Act {
            verdict = Verdict::RankOnly;
        }
        reason.push_str(&format!("; {note}"));
    }
    let attribution = level.attribution[i];
    if attribution < level.needs {
        if verdict == Verdict::Act {
            verdict = Verdict::RankOnly;
        }
        reason.push_str(match attribution {
            Attribution::Module => {
                "; code without a function (no symbol or function range): a module's share, not a function's"
            }
            _ => "; no debug information for its samples: inline frames and lines unknown",
        });
    }
    CheckRow {
        name: level.names[i].clone(),
        samples: k,
        share,
        ci_low: lo,
        ci_high: hi,
        interval: if use_bm { "batch-means" } else { "wilson" }.into(),
        wilson_low: wl,
        wilson_high: wh,
        batch_low: bm.low,
        batch_high: bm.high,
        inflation: bm.inflation,
        run_low: None,
        run_high: None,
        distinct_from_next: None,
        runs,
        r_mean,
        hardware_time: None,
        hardware_time_low: None,
        hardware_time_high: None,
        hardware_time_windows: None,
        attribution,
        flags,
        verdict,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(n: u64) -> RowRules {
        RowRules {
            n,
            confidence: 0.95,
            interval: IntervalChoice::Wilson,
            act_precision: 0.2,
            noise_precision: 0.5,
            aliased: false,
        }
    }

    fn one_row(counts: &[u64], n: u64, attribution: Attribution, needs: Attribution) -> CheckRow {
        let names = vec!["f".to_string()];
        let c = vec![counts.to_vec()];
        let sizes = vec![n / counts.len() as u64; counts.len()];
        let level = Level {
            names: &names,
            counts: &c,
            sizes: &sizes,
            attribution: &[attribution],
            needs,
            states: None,
            note: None,
        };
        rows(&level, &rules(n)).remove(0)
    }

    /// The floors: z = 1.959964, (z/0.2)² = 96.04 -> 97, (z/0.5)² = 15.37 -> 16.
    #[test]
    fn floors_by_hand() {
        assert_eq!(rules(100).act_floor(), 97);
        assert_eq!(rules(100).noise_floor(), 16);
    }

    /// Issue 31 item 3: every sample in one row. 10 of 10: Wilson [0.7225, 1], ±13.9% of the
    /// share, was "act on it"; now 10 < 16 samples: noise. 1 of 1 ([0.2065, 1], ±40%) was
    /// "rank only": noise. 50 of 50 ([0.9287, 1], ±3.6%): rank only (50 < 97). 120 of 120:
    /// act.
    #[test]
    fn few_samples_in_one_row_are_not_acted_on() {
        let f = Attribution::Line;
        let r = one_row(&[5, 5], 10, f, Attribution::Function);
        assert!((r.ci_low - 0.722_467).abs() < 1e-5, "{}", r.ci_low);
        assert_eq!(r.verdict, Verdict::Noise, "{}", r.reason);
        assert!(r.reason.contains("too few to tell from noise (16 needed)"));
        assert_eq!(one_row(&[1], 1, f, f).verdict, Verdict::Noise);
        assert_eq!(one_row(&[1, 1], 2, f, f).verdict, Verdict::Noise);
        let r = one_row(&[25, 25], 50, f, f);
        assert_eq!(r.verdict, Verdict::RankOnly, "{}", r.reason);
        assert!(r.reason.contains("on 50 samples only (97 to act on)"));
        assert_eq!(one_row(&[60, 60], 120, f, f).verdict, Verdict::Act);
    }

    /// A row's samples without the attribution its level needs are not acted on.
    #[test]
    fn attribution_caps_the_verdict() {
        let r = one_row(
            &[500, 500],
            1000,
            Attribution::Module,
            Attribution::Function,
        );
        assert_eq!(r.verdict, Verdict::RankOnly);
        assert!(r.reason.contains("a module's share"), "{}", r.reason);
        assert_eq!(r.attribution, Attribution::Module);
        let r = one_row(&[500, 500], 1000, Attribution::Function, Attribution::Line);
        assert_eq!(r.verdict, Verdict::RankOnly);
        assert!(r.reason.contains("inline frames and lines unknown"));
        let r = one_row(
            &[500, 500],
            1000,
            Attribution::Function,
            Attribution::Function,
        );
        assert_eq!(r.verdict, Verdict::Act);
        // 95% rule.
        assert_eq!(attribution_of(100, 100, 95), Attribution::Line);
        assert_eq!(attribution_of(100, 100, 94), Attribution::Function);
        assert_eq!(attribution_of(100, 94, 0), Attribution::Module);
        assert_eq!(attribution_of(0, 0, 0), Attribution::Module);
    }

    #[test]
    fn names_intern() {
        let mut n = Names::default();
        assert_eq!(
            (n.id("a".into()), n.id("b".into()), n.id("a".into())),
            (0, 1, 0)
        );
        assert_eq!(n.names(), &["a".to_string(), "b".to_string()]);
        assert_eq!(n.len(), 2);
    }
}
