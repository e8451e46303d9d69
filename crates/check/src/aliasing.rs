//! Aliasing: the sampling point depending on the program's state, which biases shares.
//!
//! Seed 001 §3.1 and §4.2 randomise the period "to avoid biased sampling result"; seed 002
//! §3.3 shows a sampled share is unbiased when "the sampling point is independent of running
//! this task". Two measurements, each for the pattern it can see:
//!
//! * [`recurrence`]: a period locked to a loop of a few instructions sends samples back to the
//!   same instructions more often than independent samples would (any event).
//! * [`phase_lock`]: a period locked to a cycle of the program (a loop paced by a clock, or
//!   any loop whose length divides the period) makes the sampled *function* depend on the
//!   exact sampling instant: consecutive samples stay in one function while the instant keeps
//!   its phase, and change where it moved (time events).

use crate::report::{AliasingCheck, PhaseLock};
use proftrust_model::Sample;
use rustc_hash::FxHashMap;

/// Share of the pairs at a lag that must recur for a locked phase (see [`recurrence`]).
pub const LOCKED_SHARE: f64 = 0.8;

/// Samples of each thread, in order: indices into `samples`.
fn by_thread(samples: &[&Sample]) -> Vec<Vec<usize>> {
    let mut threads: FxHashMap<u32, usize> = FxHashMap::default();
    let mut out: Vec<Vec<usize>> = Vec::new();
    for (i, s) in samples.iter().enumerate() {
        let t = *threads.entry(s.tid).or_insert_with(|| {
            out.push(Vec::new());
            out.len() - 1
        });
        out[t].push(i);
    }
    out
}

/// The recurrence measurement: for lags `1..=max_lag`, pairs of samples `lag` apart in one
/// thread and in the same function, and how many land on the same instruction, against what
/// independent samples give. `loc_of[i]` and `func_of[i]` are sample `i`'s dense location
/// and function ids.
///
/// Model (seed 002 §3.3, line "the sampling point is independent of running this task";
/// seed 001 §3.1: the period is randomised "to avoid biased sampling result"): if the
/// sampling point is independent of the code's phase, two samples in function `f` land on
/// the same instruction with the collision probability `q_f = Σ_a c_a(c_a − 1) / (c_f(c_f −
/// 1))` of `f`'s sampled instructions (`c_a` samples at `a`, `c_f` in `f`; the unbiased
/// estimate). Over the pairs, the expected same-instruction count is `E = Σ q_f`, with
/// variance `V = Σ q_f(1 − q_f)`. A period locked to periodic code (a loop whose length in
/// events divides, or nearly divides, the period) makes samples recur at one or a few
/// instructions: the observed count `O` exceeds `E`. Flagged when, at some lag,
/// `O/E >= 3`, `(O − E)/√V >= 4` (a conservative bound: 16 lags are tried and pairs are
/// not independent) and `O >= 20`. Reading chosen: the seeds give no test; phases of a
/// function that run different loops also raise `O/E`, which is why the ratio bound is 3.
/// A period that divides the loop exactly sends every sample of the loop to one
/// instruction and leaves `O/E` at 1; that case is found from the code (a block whose
/// samples sit on one instruction, [`crate::code`]), not here.
///
/// A fixed period against a loop whose length does not divide it makes the phase drift: a
/// pattern recurs every few samples (a stroboscope) but over the run every phase is
/// visited, and the shares are not biased (on the golden fixture `tiny` with period 1009
/// the recurrence at lag 11 is 39% of pairs, 4.6x the independent rate, and the profile is
/// closer to the truth than randomised ones). Only a pattern that recurs in at least
/// [`LOCKED_SHARE`] (80%) of the pairs at its lag visits too few phases: that is flagged.
pub fn recurrence(
    samples: &[&Sample],
    loc_of: &[u32],
    func_of: &[u32],
    max_lag: usize,
) -> Option<AliasingCheck> {
    // Collision probability per function (locations and functions are dense ids).
    let nloc = loc_of.iter().max().map_or(0, |&m| m as usize + 1);
    let nfun = func_of.iter().max().map_or(0, |&m| m as usize + 1);
    let mut by_loc: Vec<(u32, u64)> = vec![(0, 0); nloc];
    for (&l, &f) in loc_of.iter().zip(func_of) {
        let e = &mut by_loc[l as usize];
        e.0 = f;
        e.1 += 1;
    }
    let mut fsum: Vec<(u64, f64)> = vec![(0, 0.0); nfun];
    for &(f, c) in &by_loc {
        let e = &mut fsum[f as usize];
        e.0 += c;
        e.1 += (c * c.saturating_sub(1)) as f64;
    }
    let q: Vec<f64> = fsum
        .iter()
        .map(|&(c, s)| {
            if c >= 2 {
                s / (c as f64 * (c - 1) as f64)
            } else {
                0.0
            }
        })
        .collect();
    let threads = by_thread(samples);
    let mut best: Option<AliasingCheck> = None;
    for lag in 1..=max_lag {
        let (mut pairs, mut obs, mut exp, mut var) = (0u64, 0u64, 0.0f64, 0.0f64);
        for idx in &threads {
            for w in lag..idx.len() {
                let (i, j) = (idx[w - lag], idx[w]);
                if func_of[i] != func_of[j] {
                    continue;
                }
                let qf = q[func_of[j] as usize];
                pairs += 1;
                exp += qf;
                var += qf * (1.0 - qf);
                if loc_of[i] == loc_of[j] {
                    obs += 1;
                }
            }
        }
        if pairs == 0 {
            continue;
        }
        let z = if var > 0.0 {
            (obs as f64 - exp) / var.sqrt()
        } else {
            0.0
        };
        let ratio = if exp > 0.0 { obs as f64 / exp } else { 1.0 };
        let flagged =
            ratio >= 3.0 && z >= 4.0 && obs >= 20 && obs as f64 >= LOCKED_SHARE * pairs as f64;
        let cand = AliasingCheck {
            pairs,
            lag: lag as u64,
            same_observed: obs as f64,
            same_expected: exp,
            ratio,
            z,
            flagged,
        };
        let better = match &best {
            None => true,
            Some(b) => (cand.flagged, cand.z) > (b.flagged, b.z),
        };
        if better {
            best = Some(cand);
        }
    }
    best
}

/// The smallest Mann-Whitney `z` that flags a phase lock.
pub const PHASE_LOCK_Z: f64 = 4.0;
/// The smallest effect (probability that a change's shift exceeds a non-change's) that flags
/// a phase lock.
pub const PHASE_LOCK_AUC: f64 = 0.6;
/// The fewest function changes between consecutive samples the test needs.
pub const PHASE_LOCK_CHANGES: u64 = 20;

/// The phase-lock measurement of aliasing, for an event sampled with a period that is not
/// randomised (a fixed period, or a kernel-adjusted frequency) and whose time stamps are in
/// the period's unit (time events: cpu-clock, task-clock). `func_of[i]` is sample `i`'s
/// function id, `names` the functions' names.
///
/// Model. Sample `i` of a thread is taken at `t_i`; with a period `P` that is not randomised
/// the instants keep their phase `t_i mod P` from one sample to the next, up to the timer's
/// jitter (a late interrupt, a few µs), unless the thread stopped running (a gap). If the
/// program runs a cycle whose length `T` is commensurate with `P` (a loop paced by a clock,
/// seed 002 §3.3's case of a sampling point that depends on the running state), consecutive
/// samples see the cycle at (nearly) the same phase and land in the same function, and the
/// function changes only when the sampling instant moved against the cycle: the sampled
/// function is a function of the instant modulo the period. Every phase of the cycle is then
/// not visited in proportion to its time and the shares are biased (issue 35: a()/b() in a
/// strict 100 µs cycle, 20/80, at a fixed 100 µs period: a() 46% of the samples). If the
/// sampling point is independent of the program's state, whether the function changes
/// between two consecutive samples does not depend on how far the second instant is from a
/// whole number of periods after the first.
///
/// Test (reading chosen; the seeds give none). For every pair of consecutive samples of one
/// thread at most `4P` apart (a longer interval is a gap: the thread was off the CPU, and a
/// program that changes function around its blocking calls must not count), the shift
/// `d = |((t_j − t_i) + P/2) mod P − P/2|` and whether the function changed. The
/// Mann-Whitney statistic of `d`, changed pairs against unchanged ones (ties by average
/// ranks, the tie-corrected variance), gives `z` and the effect `auc = U/(n_1 n_2)`.
/// Flagged when `z >= 4` (pairs overlap and are not independent: a conservative bound),
/// `auc >= 0.6` (a tiny effect over many pairs is a drifting stroboscope, not a lock) and at
/// least 20 changes. Measured (docs/check.md): the program at a fixed 100 µs gives
/// z 4.5 to 22.4 (auc 0.63 to 0.88) on seven recordings; pointer-chasing, phased, steady and
/// sleeping programs at the same fixed period give z <= 3.3 (auc 0.51 where z is above 2).
/// A period that is randomised moves every instant by a random shift, so the function follows
/// the shift for any program with a cycle near the period, without bias: the caller does not
/// apply the test then.
///
/// `period_of` gives sample `j`'s period (the interval it closes; 0 when unknown: the pair is
/// left out). The suspect functions are those taking part in at least a fifth of the changes
/// whose shift exceeds the unchanged pairs' median shift (at most five, most involved first).
/// `None` when no pair qualifies.
pub fn phase_lock(
    samples: &[&Sample],
    func_of: &[u32],
    names: &[String],
    period_of: impl Fn(&Sample) -> u64,
) -> Option<PhaseLock> {
    let (pairs, periods, stretches) = shift_pairs(samples, func_of, period_of);
    if pairs.is_empty() {
        return None;
    }
    let n = pairs.len();
    let n1 = pairs.iter().filter(|p| p.1).count();
    let (z, auc) = mann_whitney(&pairs);
    let changed: Vec<u64> = pairs.iter().filter(|p| p.1).map(|p| p.0).collect();
    let typical = median(pairs.iter().filter(|p| !p.1).map(|p| p.0).collect());
    let flagged = z >= PHASE_LOCK_Z && auc >= PHASE_LOCK_AUC && n1 as u64 >= PHASE_LOCK_CHANGES;
    Some(PhaseLock {
        period: median(periods) as u64,
        pairs: n as u64,
        changes: n1 as u64,
        shift_changed: median(changed),
        shift_unchanged: typical,
        z,
        auc,
        stretches,
        functions: suspects(&pairs, typical, names),
        flagged,
    })
}

/// A pair of consecutive samples of one thread: (shift, changed function, from, to).
type ShiftPair = (u64, bool, u32, u32);

/// The pairs of [`phase_lock`], the period of each, and the uninterrupted stretches.
fn shift_pairs(
    samples: &[&Sample],
    func_of: &[u32],
    period_of: impl Fn(&Sample) -> u64,
) -> (Vec<ShiftPair>, Vec<u64>, u64) {
    let mut pairs: Vec<ShiftPair> = Vec::new();
    let mut periods: Vec<u64> = Vec::new();
    let mut stretches = 0u64;
    for idx in &by_thread(samples) {
        stretches += 1;
        for w in idx.windows(2) {
            let (a, b) = (samples[w[0]], samples[w[1]]);
            let p = period_of(b);
            if p == 0 || a.time == 0 || b.time < a.time {
                continue;
            }
            let iv = b.time - a.time;
            if iv > p.saturating_mul(4) {
                stretches += 1;
                continue;
            }
            let r = iv % p;
            let (fa, fb) = (func_of[w[0]], func_of[w[1]]);
            pairs.push((r.min(p - r), fa != fb, fa, fb));
            periods.push(p);
        }
    }
    (pairs, periods, stretches)
}

fn median(mut v: Vec<u64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mid = v.len() / 2;
    *v.select_nth_unstable(mid).1 as f64
}

/// The functions taking part in at least a fifth of the changes that moved more than a
/// typical unchanged pair (`typical`), most involved first, at most five.
fn suspects(pairs: &[ShiftPair], typical: f64, names: &[String]) -> Vec<String> {
    let moved: Vec<&ShiftPair> = pairs
        .iter()
        .filter(|p| p.1 && p.0 as f64 > typical)
        .collect();
    let mut involved: FxHashMap<u32, u64> = FxHashMap::default();
    for p in &moved {
        *involved.entry(p.2).or_default() += 1;
        *involved.entry(p.3).or_default() += 1;
    }
    let mut functions: Vec<(u64, u32)> = involved
        .into_iter()
        .filter(|&(_, c)| c as f64 >= 0.2 * moved.len() as f64)
        .map(|(f, c)| (c, f))
        .collect();
    functions.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| names[a.1 as usize].cmp(&names[b.1 as usize]))
    });
    functions
        .into_iter()
        .take(5)
        .map(|(_, f)| names[f as usize].clone())
        .collect()
}

/// Mann-Whitney `U` of the shifts of changed pairs (`.1`) against unchanged ones, as `(z,
/// U/(n1·n2))`: ranks by the shift with ties at their average rank, `z = (U − n1n2/2)/σ` with
/// the tie-corrected `σ² = n1n2/12 · ((n+1) − Σ(t³ − t)/(n(n − 1)))` (Lehmann, Nonparametrics,
/// 1975, §1.4). `(0, 0.5)` when a group is empty or every shift is tied.
fn mann_whitney(pairs: &[ShiftPair]) -> (f64, f64) {
    let n = pairs.len();
    let n1 = pairs.iter().filter(|p| p.1).count();
    let n2 = n - n1;
    if n1 == 0 || n2 == 0 {
        return (0.0, 0.5);
    }
    let mut order: Vec<(u64, bool)> = pairs.iter().map(|p| (p.0, p.1)).collect();
    order.sort_unstable_by_key(|p| p.0);
    let (mut r1, mut ties) = (0.0f64, 0.0f64);
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && order[j + 1].0 == order[i].0 {
            j += 1;
        }
        // Ranks i+1 ..= j+1, average (i + j)/2 + 1.
        let avg = (i + j) as f64 / 2.0 + 1.0;
        let in_group = order[i..=j].iter().filter(|p| p.1).count();
        r1 += avg * in_group as f64;
        let t = (j - i + 1) as f64;
        ties += t * t * t - t;
        i = j + 1;
    }
    let (n1f, n2f, nf) = (n1 as f64, n2 as f64, n as f64);
    let u = r1 - n1f * (n1f + 1.0) / 2.0;
    let auc = u / (n1f * n2f);
    let var = n1f * n2f / 12.0 * ((nf + 1.0) - ties / (nf * (nf - 1.0)));
    if var <= 0.0 {
        return (0.0, 0.5);
    }
    ((u - n1f * n2f / 2.0) / var.sqrt(), auc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proftrust_model::{Location, ModuleIdx};

    fn sample(tid: u32, time: u64, period: u64) -> Sample {
        Sample {
            event: 0,
            pid: 1,
            tid,
            time,
            cpu: 0,
            period,
            ip: Location::new(ModuleIdx(0), 0),
            callchain: Vec::new(),
            branches: Vec::new(),
        }
    }

    #[test]
    fn recurrence_flags_locked_phase_not_drift_or_random() {
        // One function of 8 instructions sampled 400 times, in three ways.
        let s: Vec<Sample> = (0..400).map(|i| sample(1, i as u64, 1)).collect();
        let refs: Vec<&Sample> = s.iter().collect();
        let f = vec![0u32; 400];
        // Locked: the period is a multiple of a third of the loop, so samples cycle over
        // instructions 0, 3, 6 (every 50th sample is displaced to 1, interrupt jitter).
        let locked: Vec<u32> = (0..400u32)
            .map(|i| {
                if i % 50 == 49 {
                    1
                } else {
                    [0, 3, 6][i as usize % 3]
                }
            })
            .collect();
        let a = recurrence(&refs, &locked, &f, 16).unwrap();
        assert!(a.flagged, "{a:?}");
        assert_eq!(a.lag, 3);
        // Lag-3 pairs: 397; a pair fails when either end is displaced: samples 49, 99, ...
        // 399 (8 of them) each break the pair ending there and the one starting there
        // (except 399, the last, and 49 is reached from 46): 16 - 1 = 15 broken.
        assert_eq!(a.same_observed, 382.0);
        // q from the counts: 0 -> 131, 3 -> 131, 6 -> 130, 1 -> 8 (of 400).
        let q = (131.0 * 130.0 * 2.0 + 130.0 * 129.0 + 8.0 * 7.0) / (400.0 * 399.0);
        assert!((a.same_expected - 397.0 * q).abs() < 1e-6, "{a:?} {q}");
        // Drifting: the phase advances one instruction every 4 samples and sweeps the
        // whole loop (a stroboscope: recurrent, but every phase is visited): not flagged.
        let drift: Vec<u32> = (0..400u32).map(|i| (i / 4) % 8).collect();
        let d = recurrence(&refs, &drift, &f, 16).unwrap();
        assert!(!d.flagged, "{d:?}");
        assert!(d.ratio > 3.0); // recurrent all the same
                                // Independent: a fixed pseudo-random sequence.
        let mut x = 12345u64;
        let random: Vec<u32> = (0..400)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 33) % 8) as u32
            })
            .collect();
        let r = recurrence(&refs, &random, &f, 16).unwrap();
        assert!(!r.flagged, "{r:?}");
    }

    /// Mann-Whitney by hand: shifts 1, 2 (unchanged) and 3, 3 (changed): ranks 1, 2, 3.5,
    /// 3.5; R1 = 7, U = 7 − 3 = 4 = n1·n2, auc 1; tie term 2³ − 2 = 6, σ² = 4/12·(5 − 6/12)
    /// = 1.5, z = (4 − 2)/√1.5 = 1.63299.
    #[test]
    fn mann_whitney_by_hand() {
        let p = [
            (1, false, 0, 0),
            (2, false, 0, 0),
            (3, true, 0, 1),
            (3, true, 1, 0),
        ];
        let (z, auc) = mann_whitney(&p);
        assert!((auc - 1.0).abs() < 1e-12);
        assert!((z - 2.0 / 1.5f64.sqrt()).abs() < 1e-9, "{z}");
        // All tied: no information.
        let p = [(5, false, 0, 0), (5, true, 0, 1)];
        assert_eq!(mann_whitney(&p), (0.0, 0.5));
    }

    /// A locked cycle against one that is not: a program alternating a (20%) and b (80%) of a
    /// 100-unit cycle, sampled every 100 units with a jitter, the cycle's phase drifting
    /// slowly so the sampling instant crosses the a/b boundaries; against a program whose
    /// functions change at random, independently of the instant, at the same rate.
    #[test]
    fn phase_lock_flags_a_locked_cycle_only() {
        let names: Vec<String> = vec!["a".into(), "b".into()];
        let mut x = 7u64;
        let mut rnd = move || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as f64 / (1u64 << 31) as f64
        };
        let (mut locked, mut indep) = (Vec::new(), Vec::new());
        let (mut lf, mut rf) = (Vec::new(), Vec::new());
        for i in 0..4000u64 {
            // Jitter 0..4 units late; the cycle drifts by 0.05 unit per sample.
            let jitter = (rnd() * 4.0) as u64;
            let t = 1000 + 100 * i + jitter;
            let phase = (t as f64 + 0.05 * i as f64) % 100.0;
            locked.push(sample(1, t, 100));
            lf.push(u32::from(phase >= 20.0));
            indep.push(sample(1, t, 100));
            rf.push(u32::from(rnd() < 0.8));
        }
        let lr: Vec<&Sample> = locked.iter().collect();
        let l = phase_lock(&lr, &lf, &names, |s| s.period).unwrap();
        assert!(l.flagged, "{l:?}");
        assert_eq!(l.period, 100);
        assert_eq!(l.pairs, 3999);
        assert_eq!(l.functions, vec!["a".to_string(), "b".to_string()]);
        let ir: Vec<&Sample> = indep.iter().collect();
        let r = phase_lock(&ir, &rf, &names, |s| s.period).unwrap();
        assert!(!r.flagged && r.z.abs() < 4.0, "{r:?}");
        assert!(r.changes > 1000);
        // A gap (a blocking call) is no pair; an unknown period neither.
        let g = [
            sample(1, 100, 100),
            sample(1, 10_000, 100),
            sample(1, 10_100, 0),
        ];
        let gr: Vec<&Sample> = g.iter().collect();
        assert!(phase_lock(&gr, &[0, 1, 0], &names, |s| s.period).is_none());
    }
}
