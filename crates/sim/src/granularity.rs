//! Running granularity of real samples (seed 002 §5.1.2-5.1.3, Figs. 6-9).
//!
//! * Sampling intervals: time between consecutive samples of the base event on the same CPU
//!   (Fig. 6).
//! * Running granularity: "continuing samples with the same module name" form a run; its
//!   granularity is the sum of their sampling intervals (a run of one sample counts one
//!   interval, as the paper does) (§5.1.2, Fig. 7). The key (module, function) is the caller's
//!   choice. Reading chosen for gaps: an interval longer than `gap_factor` times the median
//!   interval (the CPU idled or the thread was switched out) ends the run and is not added to
//!   it; it still counts in the interval distribution.
//! * Second event: for each base interval on a CPU, the second event's periods whose samples
//!   fall in it, divided by the interval length, is the event's rate in that interval,
//!   attributed to the key of the sample closing the interval. Fig. 8 plots the rate as a
//!   proportion of the available maximum: the maximum observed rate is used as that maximum
//!   (reading chosen; the paper does not say). Per key with more than `min_samples` intervals
//!   (§5.1.3 keeps modules with more than 10 samples), the variance of that proportion
//!   (Fig. 9; the paper's mean is 0.3171) and the squared coefficient of variation of the
//!   rate, which is directly comparable with `sigma^2` of the unit noise `U(1 + N(0, sigma))`
//!   of eq. 10.

use crate::SimError;
use proftrust_model::{escape_markup as esc, Sample, SampleSet};
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt::Write as _;

/// Options of the analysis.
#[derive(Debug, Clone, PartialEq)]
pub struct GranularityOptions {
    /// Index of the base (sampling) event. Default 0.
    pub base_event: u16,
    /// Index of the second event; `None` = none. Default `None` (the CLI picks event 1 when
    /// the file has one).
    pub second_event: Option<u16>,
    /// Keys need more than this many intervals for a variance. Default 10 (seed 002 §5.1.3).
    pub min_samples: usize,
    /// An interval longer than this many median intervals ends a run. Default 4.
    pub gap_factor: f64,
    /// Histogram bins. Default 30.
    pub bins: usize,
    /// Keys listed in the tables (largest first). Default 20.
    pub top: usize,
}

impl Default for GranularityOptions {
    fn default() -> Self {
        GranularityOptions {
            base_event: 0,
            second_event: None,
            min_samples: 10,
            gap_factor: 4.0,
            bins: 30,
            top: 20,
        }
    }
}

/// Histogram with equal-width bins, or log-spaced bins when `log` is set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// Lower edge of the first bin.
    pub lo: f64,
    /// Upper edge of the last bin.
    pub hi: f64,
    /// Count per bin.
    pub counts: Vec<u64>,
    /// Bins of equal width in log(value): bin `i` spans `lo·(hi/lo)^(i/n)` to
    /// `lo·(hi/lo)^((i+1)/n)`. Absent (false) in JSON for equal-width bins.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub log: bool,
}

impl Histogram {
    /// Histogram of `vals` over `[min, max]` in `bins` bins (the maximum goes in the last bin).
    pub fn of(vals: &[f64], bins: usize) -> Histogram {
        let bins = bins.max(1);
        let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if vals.is_empty() || !lo.is_finite() || !hi.is_finite() {
            return Histogram {
                lo: 0.0,
                hi: 0.0,
                counts: vec![0; bins],
                log: false,
            };
        }
        let mut counts = vec![0u64; bins];
        let w = (hi - lo) / bins as f64;
        for &v in vals {
            let b = if w > 0.0 {
                (((v - lo) / w) as usize).min(bins - 1)
            } else {
                0
            };
            counts[b] += 1;
        }
        Histogram {
            lo,
            hi,
            counts,
            log: false,
        }
    }

    /// Histogram of `vals` in `bins` log-spaced bins over `[min, max]`, so that one long
    /// outlier (an 8 ms gap among 0.1 ms sampling intervals) does not squeeze the bulk into a
    /// single bar. Falls back to [`Histogram::of`] when a value is not positive or the values
    /// span less than a factor of 10 (equal widths read more easily there).
    pub fn log_of(vals: &[f64], bins: usize) -> Histogram {
        let bins = bins.max(1);
        let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if vals.is_empty() || lo <= 0.0 || !hi.is_finite() || hi < 10.0 * lo {
            return Histogram::of(vals, bins);
        }
        let (l0, span) = (lo.ln(), (hi / lo).ln());
        let mut counts = vec![0u64; bins];
        for &v in vals {
            let b = (((v.ln() - l0) / span * bins as f64) as usize).min(bins - 1);
            counts[b] += 1;
        }
        Histogram {
            lo,
            hi,
            counts,
            log: true,
        }
    }

    /// The value at fraction `f` (0 to 1) of the x axis: linear or logarithmic.
    pub fn value_at(&self, f: f64) -> f64 {
        if self.log {
            self.lo * (self.hi / self.lo).powf(f)
        } else {
            self.lo + f * (self.hi - self.lo)
        }
    }
}

/// Order statistics of a set of values.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Summary {
    /// Number of values.
    pub n: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// 10th percentile.
    pub p10: f64,
    /// 90th percentile.
    pub p90: f64,
    /// Largest value.
    pub max: f64,
}

impl Summary {
    /// Summary of `vals` (nearest-rank percentiles).
    pub fn of(vals: &[f64]) -> Summary {
        if vals.is_empty() {
            return Summary::default();
        }
        let mut v = vals.to_vec();
        v.sort_by(f64::total_cmp);
        let q = |p: f64| v[((p * (v.len() - 1) as f64).round() as usize).min(v.len() - 1)];
        Summary {
            n: v.len() as u64,
            mean: v.iter().sum::<f64>() / v.len() as f64,
            median: q(0.5),
            p10: q(0.1),
            p90: q(0.9),
            max: v[v.len() - 1],
        }
    }
}

/// Running granularity of one key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyGranularity {
    /// Module or function.
    pub key: String,
    /// Base-event samples.
    pub samples: u64,
    /// Runs of consecutive samples.
    pub runs: u64,
    /// Run lengths in ns.
    pub run_ns: Summary,
    /// Mean run length over the median sampling interval: the `R` of eq. 1, a lower bound
    /// at 1 since a run is at least one interval.
    pub r_mean: f64,
}

/// Second-event variability of one key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyVariance {
    /// Module or function.
    pub key: String,
    /// Base intervals attributed to the key.
    pub intervals: u64,
    /// Mean rate (second-event count per ns).
    pub mean_rate: f64,
    /// Variance of the rate as a proportion of the maximum rate (Fig. 9).
    pub var_of_max_share: f64,
    /// Squared coefficient of variation of the rate (compare with sigma^2 of eq. 10).
    pub cv2: f64,
}

/// The second event's analysis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SecondEvent {
    /// Event name.
    pub event: String,
    /// Maximum observed rate (events per ns), the denominator of the proportions.
    pub max_rate: f64,
    /// Histogram of per-interval proportions of the maximum rate (Fig. 8).
    pub share_hist: Histogram,
    /// Keys with more than `min_samples` intervals, most intervals first.
    pub per_key: Vec<KeyVariance>,
    /// Histogram of `var_of_max_share` over those keys (Fig. 9).
    pub variance_hist: Histogram,
    /// Mean of `var_of_max_share` over those keys (paper: 0.3171).
    pub mean_variance: f64,
    /// Mean of `cv2` over those keys.
    pub mean_cv2: f64,
}

/// The analysis of one sample set at one key level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GranularityReport {
    /// Key level (`module`, `function`).
    pub level: String,
    /// Base event name.
    pub base_event: String,
    /// Base-event samples.
    pub samples: u64,
    /// CPUs seen.
    pub cpus: u64,
    /// Sampling intervals in ns (Fig. 6).
    pub intervals: Summary,
    /// Histogram of sampling intervals in ns.
    pub interval_hist: Histogram,
    /// Run lengths in ns over all keys (Fig. 7).
    pub runs: Summary,
    /// Histogram of run lengths in ns.
    pub run_hist: Histogram,
    /// Per key, most samples first (at most `top`).
    pub per_key: Vec<KeyGranularity>,
    /// Second-event analysis, when asked for and present.
    pub second: Option<SecondEvent>,
}

/// Running states of one key (seed 002 §5.1.2), from [`running_states`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RunningStates {
    /// Runs: maximal stretches of consecutive samples of one thread in the key.
    pub runs: u64,
    /// Samples in those runs (all the key's samples).
    pub samples: u64,
}

impl RunningStates {
    /// Mean run length in samples, the `R` of seed 002 eq. 1 (each sample stands for one
    /// sampling interval); `None` without runs.
    pub fn r_mean(&self) -> Option<f64> {
        (self.runs > 0).then(|| self.samples as f64 / self.runs as f64)
    }
}

/// Running states of each key over samples in time order: maximal runs of consecutive
/// samples of one thread (`tid`) with the same key (seed 002 §5.1.2: "continuing samples with
/// the same module name" form a run; the key here is the caller's, `check` passes the
/// function). A time gap longer than `gap_factor` median sampling intervals of the thread ends
/// a run (the thread was switched out or idle; the reading [`analyze`] chose too, with 4).
/// `key_of[i]` is sample `i`'s key, below `nkeys`; samples without time stamps (0) never end a
/// run by a gap.
pub fn running_states(
    samples: &[&Sample],
    key_of: &[u32],
    nkeys: usize,
    gap_factor: f64,
) -> Vec<RunningStates> {
    let mut out = vec![RunningStates::default(); nkeys];
    // Median interval over consecutive samples of one thread (time stamps, when present).
    let mut last: FxHashMap<u32, (u64, u32)> = FxHashMap::default();
    let mut gaps: Vec<u64> = Vec::new();
    for s in samples {
        if let Some((t, _)) = last.get(&s.tid) {
            if s.time > *t && *t > 0 {
                gaps.push(s.time - t);
            }
        }
        last.insert(s.tid, (s.time, 0));
    }
    let limit = if gaps.is_empty() {
        u64::MAX
    } else {
        let mid = gaps.len() / 2;
        let (_, m, _) = gaps.select_nth_unstable(mid);
        (*m as f64 * gap_factor).min(u64::MAX as f64) as u64
    };
    last.clear();
    for (s, &k) in samples.iter().zip(key_of) {
        let cont = match last.get(&s.tid) {
            Some(&(t, pk)) => pk == k && s.time.saturating_sub(t) <= limit,
            None => false,
        };
        let e = &mut out[k as usize];
        if !cont {
            e.runs += 1;
        }
        e.samples += 1;
        last.insert(s.tid, (s.time, k));
    }
    out
}

/// Analyses `set`. `key_of` names the key of a sample (module file name, function name).
pub fn analyze(
    set: &SampleSet,
    level: &str,
    key_of: impl Fn(&Sample) -> String,
    opts: &GranularityOptions,
) -> Result<GranularityReport, SimError> {
    for e in std::iter::once(opts.base_event).chain(opts.second_event) {
        if e as usize >= set.events.len() {
            return Err(SimError::NoSuchEvent {
                event: e,
                available: set.events.len(),
            });
        }
    }
    let mut base: Vec<&Sample> = set
        .samples
        .iter()
        .filter(|s| s.event == opts.base_event && s.time != 0)
        .collect();
    if base.len() < 2 {
        return Err(SimError::TooFewSamples {
            what: "granularity analysis (samples with time stamps)",
            event: opts.base_event,
            found: base.len(),
            needed: 2,
        });
    }
    base.sort_by_key(|s| (s.cpu, s.time));
    let keys: Vec<String> = base.iter().map(|s| key_of(s)).collect();
    // Interval of each sample: time since the previous sample on the same CPU.
    let mut iv: Vec<Option<u64>> = vec![None; base.len()];
    for i in 1..base.len() {
        if base[i].cpu == base[i - 1].cpu {
            iv[i] = Some(base[i].time.saturating_sub(base[i - 1].time));
        }
    }
    let intervals: Vec<f64> = iv.iter().flatten().map(|&x| x as f64).collect();
    let interval_sum = Summary::of(&intervals);
    let median = interval_sum.median.max(1.0);
    let gap = opts.gap_factor * median;
    let cpus = {
        let mut c: Vec<u32> = base.iter().map(|s| s.cpu).collect();
        c.dedup();
        c.sort_unstable();
        c.dedup();
        c.len() as u64
    };
    // Runs.
    struct Acc {
        samples: u64,
        runs: Vec<f64>,
    }
    let mut per: HashMap<&str, Acc> = HashMap::new();
    let mut all_runs = Vec::new();
    let mut i = 0;
    while i < base.len() {
        let own = |j: usize| iv[j].map_or(median, |x| x as f64).min(gap).max(0.0);
        let mut len = own(i);
        let mut j = i + 1;
        while j < base.len()
            && base[j].cpu == base[i].cpu
            && keys[j] == keys[i]
            && iv[j].is_some_and(|x| (x as f64) <= gap)
        {
            len += own(j);
            j += 1;
        }
        let a = per.entry(keys[i].as_str()).or_insert(Acc {
            samples: 0,
            runs: Vec::new(),
        });
        a.samples += (j - i) as u64;
        a.runs.push(len);
        all_runs.push(len);
        i = j;
    }
    let mut per_key: Vec<KeyGranularity> = per
        .iter()
        .map(|(k, a)| {
            let s = Summary::of(&a.runs);
            KeyGranularity {
                key: k.to_string(),
                samples: a.samples,
                runs: a.runs.len() as u64,
                run_ns: s,
                r_mean: s.mean / median,
            }
        })
        .collect();
    per_key.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.key.cmp(&b.key)));
    per_key.truncate(opts.top.max(1));
    let second = match opts.second_event {
        Some(e) => Some(second_event(set, e, &base, &keys, &iv, opts)?),
        None => None,
    };
    Ok(GranularityReport {
        level: level.to_string(),
        base_event: set.events[opts.base_event as usize].name.clone(),
        samples: base.len() as u64,
        cpus,
        intervals: interval_sum,
        interval_hist: Histogram::log_of(&intervals, opts.bins),
        runs: Summary::of(&all_runs),
        run_hist: Histogram::of(&all_runs, opts.bins),
        per_key,
        second,
    })
}

fn second_event(
    set: &SampleSet,
    e: u16,
    base: &[&Sample],
    keys: &[String],
    iv: &[Option<u64>],
    opts: &GranularityOptions,
) -> Result<SecondEvent, SimError> {
    let mut sec: Vec<&Sample> = set
        .samples
        .iter()
        .filter(|s| s.event == e && s.time != 0)
        .collect();
    if sec.is_empty() {
        return Err(SimError::TooFewSamples {
            what: "second-event variance",
            event: e,
            found: 0,
            needed: 1,
        });
    }
    sec.sort_by_key(|s| (s.cpu, s.time));
    // Two pointers over (cpu, time): sum the periods in (prev, cur] of each base interval.
    let mut rates: Vec<(usize, f64)> = Vec::new();
    let mut j = 0usize;
    for i in 1..base.len() {
        let Some(len) = iv[i] else { continue };
        if len == 0 {
            continue;
        }
        let (cpu, lo, hi) = (base[i].cpu, base[i - 1].time, base[i].time);
        while j < sec.len() && (sec[j].cpu, sec[j].time) <= (cpu, lo) {
            j += 1;
        }
        let mut sum = 0u64;
        let mut k = j;
        while k < sec.len() && sec[k].cpu == cpu && sec[k].time <= hi {
            sum = sum.saturating_add(sec[k].period);
            k += 1;
        }
        j = k;
        rates.push((i, sum as f64 / len as f64));
    }
    let max_rate = rates.iter().map(|r| r.1).fold(0.0, f64::max);
    let shares: Vec<f64> = rates
        .iter()
        .map(|r| if max_rate > 0.0 { r.1 / max_rate } else { 0.0 })
        .collect();
    let mut by_key: HashMap<&str, Vec<(f64, f64)>> = HashMap::new();
    for (&(i, rate), &sh) in rates.iter().zip(&shares) {
        by_key.entry(keys[i].as_str()).or_default().push((rate, sh));
    }
    let mut per_key: Vec<KeyVariance> = by_key
        .iter()
        .filter(|(_, v)| v.len() > opts.min_samples)
        .map(|(k, v)| {
            let (m_rate, sd_rate) = crate::sampling::mean_sd(v.iter().map(|x| x.0));
            let (_, sd_share) = crate::sampling::mean_sd(v.iter().map(|x| x.1));
            KeyVariance {
                key: k.to_string(),
                intervals: v.len() as u64,
                mean_rate: m_rate,
                var_of_max_share: sd_share * sd_share,
                cv2: if m_rate > 0.0 {
                    (sd_rate / m_rate).powi(2)
                } else {
                    0.0
                },
            }
        })
        .collect();
    per_key.sort_by(|a, b| b.intervals.cmp(&a.intervals).then(a.key.cmp(&b.key)));
    let vars: Vec<f64> = per_key.iter().map(|k| k.var_of_max_share).collect();
    let n = per_key.len().max(1) as f64;
    Ok(SecondEvent {
        event: set.events[e as usize].name.clone(),
        max_rate,
        share_hist: Histogram::of(&shares, opts.bins),
        variance_hist: Histogram::of(&vars, opts.bins),
        mean_variance: vars.iter().sum::<f64>() / n,
        mean_cv2: per_key.iter().map(|k| k.cv2).sum::<f64>() / n,
        per_key,
    })
}

/// Text tables of a report.
pub fn render_text(r: &GranularityReport, top: usize) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} samples of {} on {} CPU(s), by {}",
        r.samples, r.base_event, r.cpus, r.level
    );
    let _ = writeln!(
        s,
        "sampling interval (ns): mean {:.0}  median {:.0}  p10 {:.0}  p90 {:.0}  max {:.0}",
        r.intervals.mean, r.intervals.median, r.intervals.p10, r.intervals.p90, r.intervals.max
    );
    let _ = writeln!(
        s,
        "running granularity (ns): mean {:.0}  median {:.0}  p90 {:.0}  max {:.0}",
        r.runs.mean, r.runs.median, r.runs.p90, r.runs.max
    );
    let _ = writeln!(
        s,
        "{:<40} {:>8} {:>7} {:>12} {:>12} {:>7}",
        r.level, "samples", "runs", "mean run ns", "max run ns", "R"
    );
    for k in r.per_key.iter().take(top) {
        let _ = writeln!(
            s,
            "{:<40} {:>8} {:>7} {:>12.0} {:>12.0} {:>7.2}",
            truncate(&k.key, 40),
            k.samples,
            k.runs,
            k.run_ns.mean,
            k.run_ns.max,
            k.r_mean
        );
    }
    if let Some(sec) = &r.second {
        let _ = writeln!(
            s,
            "second event {}: {} {}s with > 10 intervals; mean variance of the proportion of max {:.4} (paper 002: 0.3171); mean CV^2 {:.4} (compare sigma^2 of eq. 10)",
            sec.event,
            sec.per_key.len(),
            r.level,
            sec.mean_variance,
            sec.mean_cv2
        );
        let _ = writeln!(
            s,
            "{:<40} {:>9} {:>12} {:>10} {:>8}",
            r.level, "intervals", "mean rate", "var/max", "CV^2"
        );
        for k in sec.per_key.iter().take(top) {
            let _ = writeln!(
                s,
                "{:<40} {:>9} {:>12.4e} {:>10.4} {:>8.4}",
                truncate(&k.key, 40),
                k.intervals,
                k.mean_rate,
                k.var_of_max_share,
                k.cv2
            );
        }
    }
    s
}

/// `s` as text output shows a name ([`proftrust_model::quote_name`]), cut to `n`
/// characters with `~` when longer.
fn truncate(s: &str, n: usize) -> String {
    let s = proftrust_model::quote_name(s);
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let t: String = s.chars().take(n.saturating_sub(1)).collect();
        format!("{t}~")
    }
}

/// A self-contained SVG bar chart of a histogram.
pub fn histogram_svg(title: &str, x_label: &str, h: &Histogram) -> String {
    let (w, ht, ml, mb, mt, mr) = (640.0, 360.0, 60.0, 50.0, 30.0, 20.0);
    let pw = w - ml - mr;
    let ph = ht - mt - mb;
    let maxc = h.counts.iter().copied().max().unwrap_or(0).max(1) as f64;
    let n = h.counts.len().max(1) as f64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{ht}" viewBox="0 0 {w} {ht}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{ht}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="18" text-anchor="middle" font-size="14">{}</text>"#,
        w / 2.0,
        esc(title)
    );
    for (i, &c) in h.counts.iter().enumerate() {
        let bh = c as f64 / maxc * ph;
        let x = ml + i as f64 * pw / n;
        let _ = writeln!(
            s,
            r##"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{bh:.1}" fill="#4878a8"><title>{c}</title></rect>"##,
            mt + ph - bh,
            (pw / n - 1.0).max(0.5)
        );
    }
    let _ = writeln!(
        s,
        r#"<line x1="{ml}" y1="{}" x2="{}" y2="{}" stroke="black"/>"#,
        mt + ph,
        ml + pw,
        mt + ph
    );
    let _ = writeln!(
        s,
        r#"<line x1="{ml}" y1="{mt}" x2="{ml}" y2="{}" stroke="black"/>"#,
        mt + ph
    );
    for (f, anchor) in [(0.0, "start"), (0.5, "middle"), (1.0, "end")] {
        let v = h.value_at(f);
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="{anchor}">{}</text>"#,
            ml + f * pw,
            mt + ph + 16.0,
            fmt_num(v)
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        ml + pw / 2.0,
        ht - 8.0,
        esc(&if h.log {
            format!("{x_label}, log scale")
        } else {
            x_label.to_string()
        })
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
        ml - 4.0,
        mt + 10.0,
        maxc as u64
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="end">0</text>"#,
        ml - 4.0,
        mt + ph
    );
    s.push_str("</svg>\n");
    s
}

fn fmt_num(v: f64) -> String {
    if v.abs() >= 1e5 || (v != 0.0 && v.abs() < 1e-2) {
        format!("{v:.2e}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proftrust_model::{EventDesc, EventKind, Location, SamplingConfig};

    /// 100 sampling intervals of 60 to 198.6 µs (60 + 1.4·k µs) and one 8 ms gap, 30 bins.
    /// Equal widths (266 µs) put all 100 in the first bar; log bins (factor
    /// (8000/60)^(1/30) = 1.1771 per bin) spread them: bin 0 is [60, 70.63) µs, k = 0..=7,
    /// 8 values; bin 1 is [70.63, 83.13) µs, k = 8..=16, 9 values; the bulk ends in bin 7
    /// (198.6 µs / 60 µs = 3.31, ln 3.31 / ln 1.1771 = 7.3).
    #[test]
    fn log_bins_keep_the_bulk_apart_when_one_outlier_sets_the_axis() {
        let mut iv: Vec<f64> = (0..100).map(|k| 60_000.0 + 1_400.0 * k as f64).collect();
        iv.push(8_000_000.0);
        let nonempty = |h: &Histogram| h.counts.iter().filter(|&&c| c > 0).count();
        let lin = Histogram::of(&iv, 30);
        assert_eq!((lin.counts[0], lin.counts[29], nonempty(&lin)), (100, 1, 2));
        let h = Histogram::log_of(&iv, 30);
        assert!(h.log);
        assert_eq!(&h.counts[..8], &[8, 9, 11, 12, 15, 17, 20, 8]);
        assert_eq!((h.counts[29], nonempty(&h)), (1, 9));
        assert!(
            (h.value_at(0.5) - 692_820.3).abs() < 0.1,
            "{}",
            h.value_at(0.5)
        );
        let svg = histogram_svg("t", "interval (ns)", &h);
        let bars: Vec<&str> = svg.lines().filter(|l| l.starts_with("<rect x=")).collect();
        let drawn = bars
            .iter()
            .filter(|l| !l.contains(r#"height="0.0""#))
            .count();
        assert_eq!((bars.len(), drawn), (30, 9), "{svg}");
        assert!(svg.contains("interval (ns), log scale"), "{svg}");
        // Narrow spreads stay linear, and so do zeros.
        assert!(!Histogram::log_of(&[1.0, 2.0, 9.0], 3).log);
        assert!(!Histogram::log_of(&[0.0, 2.0, 900.0], 3).log);
    }

    fn ev(name: &str) -> EventDesc {
        EventDesc {
            name: name.into(),
            kind: EventKind::CpuClock,
            config: SamplingConfig::default(),
        }
    }

    fn s(event: u16, cpu: u32, time: u64, svma: u64, period: u64) -> Sample {
        Sample {
            event,
            pid: 1,
            tid: 1,
            time,
            cpu,
            period,
            ip: Location::unmapped(svma),
            callchain: vec![],
            branches: vec![],
        }
    }

    #[test]
    fn running_states_by_hand() {
        // Thread 1: f f g f at 10 ns apart, then f after a long gap (median interval 10,
        // limit 40): f has runs [2], [1], [1] = 3 runs of 4 samples, g one run of 1. Thread 2's
        // sample in f between them does not break thread 1's runs.
        let mut v: Vec<Sample> = [10, 20, 30, 40, 1000]
            .iter()
            .map(|&t| s(0, 0, t, 0, 1))
            .collect();
        let mut other = s(0, 1, 25, 0, 1);
        other.tid = 2;
        v.insert(2, other);
        let refs: Vec<&Sample> = v.iter().collect();
        let st = running_states(&refs, &[0, 0, 0, 1, 0, 0], 2, 4.0);
        assert_eq!(
            st,
            vec![
                RunningStates {
                    runs: 4,
                    samples: 5
                },
                RunningStates {
                    runs: 1,
                    samples: 1
                }
            ]
        );
        assert_eq!(st[0].r_mean(), Some(1.25));
        assert_eq!(RunningStates::default().r_mean(), None);
    }

    #[test]
    fn hand_built_runs_and_second_event() {
        // CPU 0, interval 100 ns: keys a a a b a ; second event: 50 per interval except the
        // interval closing the `b` sample (200).
        let mut set = SampleSet {
            events: vec![ev("cpu-clock"), ev("cycles")],
            ..Default::default()
        };
        let keys = [1u64, 1, 1, 2, 1];
        for (i, k) in keys.iter().enumerate() {
            let t = 1000 + 100 * i as u64;
            set.samples.push(s(0, 0, t, *k, 100));
            if i > 0 {
                let p = if *k == 2 { 200 } else { 50 };
                set.samples.push(s(1, 0, t - 10, 0, p));
            }
        }
        let o = GranularityOptions {
            second_event: Some(1),
            min_samples: 0,
            ..Default::default()
        };
        let r = analyze(&set, "module", |x| format!("m{}", x.ip.svma.0), &o).unwrap();
        assert_eq!(r.samples, 5);
        assert_eq!(r.intervals.n, 4);
        assert_eq!(r.intervals.median, 100.0);
        // runs: a a a (first sample gets the median interval) = 300, b = 100, a = 100.
        let a = r.per_key.iter().find(|k| k.key == "m1").unwrap();
        assert_eq!((a.samples, a.runs), (4, 2));
        assert_eq!(a.run_ns.max, 300.0);
        assert_eq!(a.run_ns.mean, 200.0);
        assert_eq!(a.r_mean, 2.0);
        let sec = r.second.unwrap();
        assert!((sec.max_rate - 2.0).abs() < 1e-12);
        let a = sec.per_key.iter().find(|k| k.key == "m1").unwrap();
        // a's rates 0.5 0.5 0.5 -> variance 0.
        assert_eq!(a.intervals, 3);
        assert_eq!(a.var_of_max_share, 0.0);
    }

    #[test]
    fn too_few_and_missing_event_are_errors() {
        let set = SampleSet {
            events: vec![ev("cpu-clock")],
            samples: vec![s(0, 0, 5, 1, 1)],
            ..Default::default()
        };
        let o = GranularityOptions::default();
        assert!(matches!(
            analyze(&set, "module", |_| String::new(), &o),
            Err(SimError::TooFewSamples { .. })
        ));
        let o = GranularityOptions {
            second_event: Some(3),
            ..Default::default()
        };
        assert!(matches!(
            analyze(&set, "module", |_| String::new(), &o),
            Err(SimError::NoSuchEvent { .. })
        ));
    }

    #[test]
    fn histogram_and_svg() {
        let h = Histogram::of(&[0.0, 1.0, 1.0, 2.0], 2);
        assert_eq!(h.counts, vec![1, 3]);
        let svg = histogram_svg("a<b", "x", &h);
        assert!(
            svg.starts_with("<svg") && svg.contains("a&lt;b") && svg.trim_end().ends_with("</svg>")
        );
        assert_eq!(svg.matches("<rect").count(), 3);
    }
}
