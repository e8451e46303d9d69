//! Skid calibration: fit `S` from the sampled distribution of a kernel with known CPIs.
//!
//! A calibration kernel is one simple loop whose CPIs are known (e.g. one heavy instruction
//! followed by many one-cycle instructions). Under skid `S` its instruction samples follow
//! `D(S, c)` (seed 000 eq. 2). We pick the `S` on a grid whose normalised `D(S, c) / N`
//! is closest (sum of squared differences) to the normalised observed histogram.
//! `D` is a step function of `S` (it changes only where `S` crosses a partial sum of `c`,
//! eq. 1), so `S` is identifiable only up to an interval; the fit reports the whole interval
//! of grid values that reach the minimum. With one-cycle instructions the interval is one
//! cycle wide.

use crate::model::SkidModel;
use crate::SkidError;
use serde::{Deserialize, Serialize};

/// Result of [`fit_skid`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkidFit {
    /// The smallest best-fitting skid on the grid, in cycles.
    pub skid: f64,
    /// The largest grid value with the same (minimal) residual.
    pub skid_high: f64,
    /// Sum of squared differences of the normalised histograms at the fit.
    pub residual: f64,
    /// Samples in the observed histogram.
    pub samples: f64,
}

/// Fits `S` over the grid `step, 2 step, ..., max_skid` (all in cycles).
pub fn fit_skid(
    cpi: &[f64],
    observed: &[f64],
    max_skid: f64,
    step: f64,
) -> Result<SkidFit, SkidError> {
    let model = SkidModel::new(cpi)?;
    if observed.len() != cpi.len() {
        return Err(SkidError::Calibration {
            what: format!(
                "{} histogram bins for a kernel of {} instructions",
                observed.len(),
                cpi.len()
            ),
        });
    }
    let n_obs: f64 = observed.iter().sum();
    if n_obs.is_nan() || n_obs <= 0.0 {
        return Err(SkidError::Calibration {
            what: "no samples landed in the kernel; run it longer or lower the period".into(),
        });
    }
    if !(step > 0.0 && max_skid >= step) {
        return Err(SkidError::Calibration {
            what: format!("empty skid grid (step {step}, max {max_skid})"),
        });
    }
    let obs: Vec<f64> = observed.iter().map(|x| x / n_obs).collect();
    let n = cpi.len() as f64;
    let steps = (max_skid / step).floor() as usize;
    let mut best: Option<(f64, f64, f64)> = None; // (residual, low, high)
    for k in 1..=steps {
        let s = k as f64 * step;
        let d = model.distribution(s)?;
        let r: f64 = d
            .iter()
            .zip(&obs)
            .map(|(a, b)| (a / n - b) * (a / n - b))
            .sum();
        best = match best {
            None => Some((r, s, s)),
            Some((br, lo, _)) if (r - br).abs() <= 1e-12 => Some((br, lo, s)),
            Some((br, _, _)) if r < br => Some((r, s, s)),
            keep => keep,
        };
    }
    let (residual, skid, skid_high) = best.ok_or_else(|| SkidError::Calibration {
        what: "empty skid grid".into(),
    })?;
    Ok(SkidFit {
        skid,
        skid_high,
        residual,
        samples: n_obs,
    })
}

/// The bundled calibration kernel's CPIs: one load of `heavy` cycles followed by `light`
/// one-cycle instructions (the known instruction mix `calibrate` runs).
pub fn kernel_cpi(heavy: u64, light: usize) -> Vec<f64> {
    let mut c = vec![heavy as f64];
    c.extend(std::iter::repeat_n(1.0, light));
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::distribution;

    #[test]
    fn recovers_skid_from_model_histogram() {
        let c = kernel_cpi(200, 100);
        for s in [1.0, 10.0, 37.0, 60.0, 99.0] {
            let h = distribution(s, &c).unwrap();
            let fit = fit_skid(&c, &h, 150.0, 1.0).unwrap();
            assert_eq!((fit.skid, fit.skid_high), (s, s), "S={s}");
            assert!(fit.residual < 1e-15);
        }
        // Hand check of the histogram shape for S = 3: positions 1, 2 (right after the heavy
        // load) only receive samples that would cross it; overflow at 0 lands on 3, at 99 on
        // 0 (c_100 = 1, c_0 = 200 >= 2 more), at 98 on 0, at 100 on 0.
        let h = distribution(3.0, &c).unwrap();
        assert_eq!((h[0], h[1], h[2], h[3]), (3.0, 0.0, 0.0, 1.0));
    }

    #[test]
    fn errors_are_clear() {
        let c = kernel_cpi(10, 3);
        assert!(fit_skid(&c, &[0.0; 4], 10.0, 1.0).is_err());
        assert!(fit_skid(&c, &[1.0; 3], 10.0, 1.0).is_err());
        assert!(fit_skid(&c, &[1.0; 4], 0.5, 1.0).is_err());
    }
}
