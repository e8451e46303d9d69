//! Stability of the top paths across runs (seed 004 §5.3).
//!
//! Two runs `a` and `b` of the same program (light vs heavy system load, §5.3.1; train vs
//! reference input, §5.3.2). With `top_k(x)` the k paths of run `x` with the largest net
//! variation and `share_x(S)` the share of run `x`'s time that is the net variation of the
//! paths `S` *in run x*:
//!
//! * Fig. 4 (load, a = light, b = heavy): bar 1 `share_a(top_k(a))`, bar 2
//!   `share_a(top_k(b))`, bar 3 `share_b(top_k(b))`, bar 4 `share_b(top_k(a))`;
//! * Fig. 5 (input, a = train, b = ref): bar 1 `share_b(all)`, bar 2 (self-trained)
//!   `share_b(top_k(b))`, bar 3 (cross-trained) `share_b(top_k(a))`.
//!
//! Stable top paths show as bar 2 ≈ bar 1 and bar 4 ≈ bar 3 (load), bar 3 ≈ bar 2 (input);
//! [`StabilityComparison::overlap`] also counts the paths the two top-k sets share.

use crate::analysis::{ranked, Ranking, VppAnalysis};
use serde::Serialize;

/// Two runs compared (field names follow the module doc).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StabilityComparison {
    /// k.
    pub k: usize,
    /// `share_a(all)`.
    pub all_in_a: f64,
    /// `share_a(top_k(a))`.
    pub a_top_in_a: f64,
    /// `share_a(top_k(b))`.
    pub b_top_in_a: f64,
    /// `share_b(all)`.
    pub all_in_b: f64,
    /// `share_b(top_k(b))` (self-trained for b).
    pub b_top_in_b: f64,
    /// `share_b(top_k(a))` (cross-trained for b).
    pub a_top_in_b: f64,
    /// `|top_k(a) ∩ top_k(b)|`.
    pub overlap: usize,
    /// Size of the smaller top-k set (the largest possible overlap).
    pub possible_overlap: usize,
}

/// Compares the top `k` net-variation paths of two runs.
pub fn compare_runs(a: &VppAnalysis, b: &VppAnalysis, k: usize) -> StabilityComparison {
    let ta = ranked(a, Ranking::NetVariation, k);
    let tb = ranked(b, Ranking::NetVariation, k);
    StabilityComparison {
        k,
        all_in_a: a.total_share(),
        a_top_in_a: a.share_of(&ta),
        b_top_in_a: a.share_of(&tb),
        all_in_b: b.total_share(),
        b_top_in_b: b.share_of(&tb),
        a_top_in_b: b.share_of(&ta),
        overlap: ta.iter().filter(|s| tb.contains(s)).count(),
        possible_overlap: ta.len().min(tb.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{analyze, AnalysisOptions};
    use crate::signature::{BranchHistory, PathSignature};
    use crate::timings::{PathTimings, TimeUnit};
    use proftrust_model::Svma;

    fn sig(e: u64) -> PathSignature {
        PathSignature::new(Svma(e), BranchHistory::new())
    }

    /// Run a: P1 NV 60, P2 NV 30, P3 NV 10 (+ an invariant path), total 1000 given.
    /// Run b: P2 NV 200, P1 NV 100, P4 NV 100, total 2000 given.
    /// k = 2: top(a) = {P1, P2}, top(b) = {P2, P1 (ties with P4: 0x1 < 0x4)}.
    #[test]
    fn hand_computed_fig4_fig5_bars() {
        let run = |nvs: &[(u64, u64)], total| {
            let mut t = PathTimings::new(TimeUnit::Cycles);
            for &(e, nv) in nvs {
                t.add(sig(e), 10);
                t.add(sig(e), 10 + nv);
            }
            t.add(sig(0x9), 5);
            t.add(sig(0x9), 5);
            t.program_time = Some(total);
            analyze(&t, &AnalysisOptions::default())
        };
        let a = run(&[(1, 60), (2, 30), (3, 10)], 1000);
        let b = run(&[(2, 200), (1, 100), (4, 100)], 2000);
        let c = compare_runs(&a, &b, 2);
        let close = |x: f64, y: f64| (x - y).abs() < 1e-12;
        assert!(close(c.all_in_a, 0.1));
        assert!(close(c.a_top_in_a, 0.09));
        assert!(close(c.b_top_in_a, 0.09)); // same set {P1, P2}
        assert!(close(c.all_in_b, 0.2));
        assert!(close(c.b_top_in_b, 0.15));
        assert!(close(c.a_top_in_b, 0.15));
        assert_eq!((c.overlap, c.possible_overlap), (2, 2));
        // k = 1: top(a) = {P1}, top(b) = {P2}: disjoint.
        let c = compare_runs(&a, &b, 1);
        assert_eq!(c.overlap, 0);
        assert!(close(c.b_top_in_a, 0.03));
        assert!(close(c.a_top_in_b, 0.05));
    }
}
