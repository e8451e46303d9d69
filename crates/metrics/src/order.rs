//! NRMSE_SR, SC and OD with order levels (seed 001 §3.2).

use crate::Error;
use serde::{Deserialize, Serialize};

/// One entry of the sampled IP histogram `S` of seed 001 §3.1, with its exact counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampledIp {
    /// `c_i`: samples whose IP is this address.
    pub samples: u64,
    /// `r_i`: real executions of the instruction at this address.
    pub executions: u64,
    /// Executions of the basic block containing this address (`bc` of seed 001 §3.1), used
    /// for `ROLevel`. Equal to `executions` except when the block has a call in the middle
    /// that did not return.
    pub block_executions: u64,
}

/// The three measurements of seed 001 §3.2.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HotspotMetrics {
    /// Weighted normalised root mean square error NRMSE_SR (0 = perfect).
    pub nrmse_sr: f64,
    /// Sample coverage SC (share of all executed instructions that sit at sampled IPs).
    pub sc: f64,
    /// Order deviation OD as printed (seed 001 §3.2's displayed equation, `/m` under the
    /// root).
    pub od: f64,
    /// Order deviation per seed 001 §4.2's prose ("an OD value of 2.0 means that in average
    /// the order of each sampled IP address is deviated by 2"): the sample-weighted root
    /// mean square level difference `sqrt(Σ_i (c_i/N_S) d_i²)`, without `/m` (the weights
    /// already sum to 1). `od_prose = od · √m`.
    pub od_prose: f64,
    /// `m`, the number of distinct sampled IPs.
    pub m: usize,
    /// `N_S`, the number of samples.
    pub n_s: u64,
    /// `N_I`, the number of executed instructions in scope.
    pub n_i: u64,
}

/// Dense order levels of `values` (seed 001 §3.2, "order level"): the largest value has level
/// 1, equal values share a level, and the next smaller distinct value has the next level.
/// The level of `x` is `1 + |{distinct v in values : v > x}|`.
///
/// Example: `[5, 7, 5, 2]` → `[2, 1, 2, 3]`.
pub fn dense_order_levels(values: &[u64]) -> Vec<u32> {
    let distinct = distinct_desc(values);
    values.iter().map(|&v| level_in(&distinct, v)).collect()
}

/// Distinct values, largest first.
fn distinct_desc(values: &[u64]) -> Vec<u64> {
    let mut d: Vec<u64> = values.to_vec();
    d.sort_unstable_by(|a, b| b.cmp(a));
    d.dedup();
    d
}

/// `1 + |{v in distinct : v > x}|` for `distinct` sorted descending.
fn level_in(distinct_desc: &[u64], x: u64) -> u32 {
    (distinct_desc.partition_point(|&v| v > x) + 1) as u32
}

/// NRMSE_SR, SC and OD of seed 001 (Wu & Mencer, "Evaluating Sampling Based Hotspot
/// Detection", §3.2), exactly as defined there:
///
/// * `NRMSE_SR = sqrt( Σ_i (c_i/N_S) (c_i/N_S − r_i/N_I)² ) / ( max F − min F )` with
///   `F = {c_i/N_S} ∪ {r_i/N_I}` over the `m` sampled IPs. When `max F = min F` every
///   difference is zero too; we return 0 (the text leaves 0/0 undefined).
/// * `SC = Σ_i r_i / N_I`.
/// * `OD = sqrt( Σ_i (c_i/N_S) (SOLevel(IP_i) − ROLevel(IP_i))² / m )`. The extracted text
///   puts `/m` under the root after the weighted sum; we read it as dividing the weighted sum
///   by `m` (the only grouping the layout allows, and the one DESIGN.md records "as printed").
///   `SOLevel` is the dense order level of `c_i` among the sampled counts; `ROLevel` is the
///   dense order level of the block containing `IP_i` among **all executed** basic blocks
///   (`all_block_counts`, zeros ignored). A sampled IP whose block never executed (a skidded
///   or foreign sample) gets the level after the last executed block — our reading, since the
///   paper's IPs always fall in executed blocks.
/// * `OD_prose = sqrt( Σ_i (c_i/N_S) (SOLevel(IP_i) − ROLevel(IP_i))² )`: §4.2 reads OD as
///   an average deviation in levels ("an OD value of 2.0 means that in average the order of
///   each sampled IP address is deviated by 2 from the real execution order"), which the
///   printed `/m` contradicts (every IP deviated by 2 gives `2/√m`). The weights `c_i/N_S`
///   sum to 1, so without `/m` the value is that weighted average (RMS) deviation. Both are
///   reported: `od` keeps the printed equation (comparable with the paper's Fig. 4 values if
///   those were computed as printed), `od_prose` the stated meaning (comparable with its
///   "above 2 is not good" threshold).
///
/// `ips` holds one entry per distinct sampled IP (entries with `samples == 0` are ignored);
/// `n_i` is `N_I`, all instructions executed in scope.
pub fn hotspot_metrics(
    ips: &[SampledIp],
    all_block_counts: &[u64],
    n_i: u64,
) -> Result<HotspotMetrics, Error> {
    let ips: Vec<SampledIp> = ips.iter().copied().filter(|x| x.samples > 0).collect();
    let n_s: u64 = ips.iter().map(|x| x.samples).sum();
    if n_s == 0 {
        return Err(Error::NoSamples { what: "NRMSE_SR" });
    }
    if n_i == 0 {
        return Err(Error::NoExecutions { what: "NRMSE_SR" });
    }
    if let Some(x) = ips.iter().find(|x| x.executions > n_i) {
        return Err(Error::CountExceedsTotal {
            what: "SC",
            count: x.executions,
            total: n_i,
        });
    }
    let m = ips.len();
    let (ns, ni) = (n_s as f64, n_i as f64);

    // NRMSE_SR
    let mut num = 0.0;
    let (mut fmax, mut fmin) = (f64::NEG_INFINITY, f64::INFINITY);
    for x in &ips {
        let s = x.samples as f64 / ns;
        let r = x.executions as f64 / ni;
        num += s * (s - r) * (s - r);
        fmax = fmax.max(s).max(r);
        fmin = fmin.min(s).min(r);
    }
    let range = fmax - fmin;
    let nrmse_sr = if range > 0.0 { num.sqrt() / range } else { 0.0 };

    // SC
    let sc = ips.iter().map(|x| x.executions as f64).sum::<f64>() / ni;

    // OD
    let sampled: Vec<u64> = ips.iter().map(|x| x.samples).collect();
    let so = dense_order_levels(&sampled);
    let executed: Vec<u64> = all_block_counts
        .iter()
        .copied()
        .filter(|&c| c > 0)
        .collect();
    let blocks_desc = distinct_desc(&executed);
    let mut acc = 0.0;
    for (x, &sol) in ips.iter().zip(&so) {
        let rol = level_in(&blocks_desc, x.block_executions);
        let d = sol as f64 - rol as f64;
        acc += (x.samples as f64 / ns) * d * d;
    }
    let od = (acc / m as f64).sqrt();
    let od_prose = acc.sqrt();

    Ok(HotspotMetrics {
        nrmse_sr,
        sc,
        od,
        od_prose,
        m,
        n_s,
        n_i,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(c: u64, r: u64) -> SampledIp {
        SampledIp {
            samples: c,
            executions: r,
            block_executions: r,
        }
    }

    #[test]
    fn dense_levels_share_ties() {
        // sorted distinct: 7, 5, 2 -> levels 1, 2, 3
        assert_eq!(dense_order_levels(&[5, 7, 5, 2]), vec![2, 1, 2, 3]);
        assert_eq!(dense_order_levels(&[4, 4, 4]), vec![1, 1, 1]);
        assert_eq!(dense_order_levels(&[]), Vec::<u32>::new());
        // 0 is a value like any other here
        assert_eq!(dense_order_levels(&[0, 3, 3, 1]), vec![3, 1, 1, 2]);
    }

    #[test]
    fn hand_computed_example() {
        // Three sampled IPs: c = [5, 3, 2], N_S = 10; r = [40, 40, 10], N_I = 100.
        // Executed blocks: A=40 (IP1), B=40 (IP2), C=10 (IP3), D=10, E=5, F=0 (not executed).
        //
        // NRMSE_SR: c/N_S = [.5, .3, .2], r/N_I = [.4, .4, .1]; differences .1, -.1, .1;
        //   Σ w d² = .5*.01 + .3*.01 + .2*.01 = .01 -> sqrt = .1;
        //   F = {.5,.3,.2,.4,.4,.1}, range = .5 - .1 = .4 -> NRMSE_SR = .1/.4 = .25.
        // SC = (40 + 40 + 10)/100 = .9.
        // OD: SOLevel = [1, 2, 3]; block levels: distinct {40, 10, 5} -> ROLevel = [1, 1, 2];
        //   d = [0, 1, 1]; Σ w d² = .3 + .2 = .5; / m = .5/3; OD = sqrt(1/6) = 0.408248...
        let ips = [ip(5, 40), ip(3, 40), ip(2, 10)];
        let blocks = [40, 40, 10, 10, 5, 0];
        let h = hotspot_metrics(&ips, &blocks, 100).unwrap();
        assert!((h.nrmse_sr - 0.25).abs() < 1e-12, "{h:?}");
        assert!((h.sc - 0.9).abs() < 1e-12);
        assert!((h.od - (1.0f64 / 6.0).sqrt()).abs() < 1e-12);
        // Prose reading: sqrt(.5) = 0.7071...: the samples' RMS level deviation (0 for half
        // of them, 1 for the other half).
        assert!((h.od_prose - 0.5f64.sqrt()).abs() < 1e-12);
        assert_eq!((h.m, h.n_s, h.n_i), (3, 10, 100));
    }

    #[test]
    fn ties_in_sampled_counts_share_a_level() {
        // c = [4, 4, 2], N_S = 10 -> SOLevel = [1, 1, 2].
        // r = block = [30, 20, 20], blocks {30, 20, 20, 10} -> distinct 30, 20, 10 -> ROLevel [1, 2, 2].
        // d = [0, -1, 0]; Σ w d² = .4 * 1 = .4; / 3 = .1333...; OD = sqrt(.4/3) = 0.365148...
        let ips = [ip(4, 30), ip(4, 20), ip(2, 20)];
        let h = hotspot_metrics(&ips, &[30, 20, 20, 10], 100).unwrap();
        assert!((h.od - (0.4f64 / 3.0).sqrt()).abs() < 1e-12, "{h:?}");
        assert!((h.od_prose - 0.4f64.sqrt()).abs() < 1e-12, "{h:?}");
        // NRMSE: s = [.4,.4,.2], r = [.3,.2,.2]; d = [.1,.2,0];
        //   Σ w d² = .4*.01 + .4*.04 = .004 + .016 = .02; sqrt = .141421...;
        //   F range = .4 - .2 = .2 -> .707106...
        assert!((h.nrmse_sr - 0.02f64.sqrt() / 0.2).abs() < 1e-12);
        // SC = 70/100
        assert!((h.sc - 0.7).abs() < 1e-12);
    }

    #[test]
    fn unexecuted_block_gets_level_after_last() {
        // one IP in a never-executed block: c = [1], r = 0; executed blocks {9, 3}
        // SOLevel 1, ROLevel 3 (after levels 1 and 2): OD = sqrt(1 * 4 / 1) = 2.
        let h = hotspot_metrics(&[ip(1, 0)], &[9, 3], 12).unwrap();
        assert!((h.od - 2.0).abs() < 1e-12);
        assert!((h.od_prose - 2.0).abs() < 1e-12);
        assert_eq!(h.sc, 0.0);
        // F = {1, 0}: sqrt(1*(1-0)^2)/1 = 1
        assert!((h.nrmse_sr - 1.0).abs() < 1e-12);
    }

    /// The paper's prose: every sampled IP deviated by exactly 2 levels. Sampled counts
    /// [4, 3, 2, 1] (SOLevels 1..4); blocks [10, 9, 8, 7, 6, 5] with the IPs in the blocks
    /// of 8, 7, 6, 5 (ROLevels 3..6): d = -2 for each. OD_prose = sqrt(Σ w·4) = 2; OD as
    /// printed = sqrt(4/4) = 1 (the `/m` shrinks it by √m = 2).
    #[test]
    fn prose_reading_deviated_by_two_is_two() {
        let ips = [ip(4, 8), ip(3, 7), ip(2, 6), ip(1, 5)];
        let h = hotspot_metrics(&ips, &[10, 9, 8, 7, 6, 5], 100).unwrap();
        assert!((h.od_prose - 2.0).abs() < 1e-12, "{h:?}");
        assert!((h.od - 1.0).abs() < 1e-12, "{h:?}");
    }

    #[test]
    fn perfect_profile_is_zero() {
        // shares equal: c = [2, 1], r = [20, 10], N_I = 30 -> every difference 0.
        let h = hotspot_metrics(&[ip(2, 20), ip(1, 10)], &[20, 10], 30).unwrap();
        assert_eq!(h.nrmse_sr, 0.0);
        assert_eq!(h.od, 0.0);
        assert!((h.sc - 1.0).abs() < 1e-12);
        // single IP holding everything: F range 0 -> defined as 0
        let h = hotspot_metrics(&[ip(3, 7)], &[7], 7).unwrap();
        assert_eq!(h.nrmse_sr, 0.0);
    }

    #[test]
    fn degenerate_inputs_are_errors() {
        assert_eq!(
            hotspot_metrics(&[], &[1], 1),
            Err(Error::NoSamples { what: "NRMSE_SR" })
        );
        assert_eq!(
            hotspot_metrics(&[ip(1, 0)], &[], 0),
            Err(Error::NoExecutions { what: "NRMSE_SR" })
        );
        assert!(matches!(
            hotspot_metrics(&[ip(1, 5)], &[5], 4),
            Err(Error::CountExceedsTotal { .. })
        ));
    }
}
