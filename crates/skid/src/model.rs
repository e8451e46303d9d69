//! The skid model of seed 000 §1 on one simple loop.
//!
//! A simple loop `I_1..I_N` runs forever in order; instruction `I_n` takes `c_n` cycles (its
//! CPI). The instruction counter overflows when `I_m` retires; the sample is attributed
//! `S` cycles later to `I_{m'}` with (seed 000 §1.2, the range before eq. 1)
//!
//! ```text
//!     sum_{n=m+1}^{m'-1} c_n  <  S  <=  sum_{n=m+1}^{m'} c_n ,      g(S, m, c) = m' - m
//! ```
//!
//! indices taken periodically (`I_{N*K+n} = I_n`, seed 000 §1).
//!
//! **Eq. 1 as extracted.** Its last case reads `N, sum_{n=m+1}^{m+N} c_n < S <=
//! sum_{n=m+1}^{m+N} c_n`, an empty interval. We read it as the general case with `m' = m + N`:
//! `sum_{n=m+1}^{m+N-1} c_n < S <= sum_{n=m+1}^{m+N} c_n`, which agrees with the range above and
//! with the paper's assumption `S <= sum_{n=1}^N c_n`. Beyond that assumption we keep the same
//! rule on the periodic sequence (so `g` may exceed `N`; the landing position is taken mod
//! `N`). `S = 0` means no skid: `g = 0`, the sample stays on `I_m` (`d(0, c, m)`).
//! Zero-cycle instructions are allowed (the rule simply passes over them); the sum of all CPIs
//! must be positive.
//!
//! **Eq. 2.** `D(S, c) = (N_S T / N) * sum_m d(S, c, m)`, where `d(S, c, m)` is the unit vector
//! on `I_m` shifted `g(S, m, c)` places. Since `N_S T / N = N_e` (§1.1), `D_j` is `N_e` times
//! the number of overflow positions `m` whose sample lands on `j`. [`distribution`] returns
//! the per-execution vector (`N_e = 1`); multiply by `N_e` (or use
//! [`distribution_scaled`]).
//!
//! Indices in this module are 0-based (`m = 0` is the paper's `I_1`).

use crate::SkidError;

fn check(skid: f64, cpi: &[f64]) -> Result<f64, SkidError> {
    if !(skid.is_finite() && skid >= 0.0) {
        return Err(SkidError::InvalidSkid { skid });
    }
    if cpi.is_empty() {
        return Err(SkidError::InvalidCpi {
            what: "the loop has no instructions".into(),
        });
    }
    if let Some((i, c)) = cpi
        .iter()
        .enumerate()
        .find(|(_, c)| !(c.is_finite() && **c >= 0.0))
    {
        return Err(SkidError::InvalidCpi {
            what: format!("c[{i}] = {c}"),
        });
    }
    let total: f64 = cpi.iter().sum();
    if total <= 0.0 {
        return Err(SkidError::InvalidCpi {
            what: "all CPIs are zero".into(),
        });
    }
    Ok(total)
}

/// Precomputed closed form of eq. 1 for one CPI vector: `g` for any `m` in `O(log N)`.
#[derive(Debug, Clone)]
pub struct SkidModel {
    /// `prefix[k] = c_0 + ... + c_{k-1}` over two periods (length `2N + 1`).
    prefix: Vec<f64>,
    n: usize,
    total: f64,
}

impl SkidModel {
    /// Builds the model for CPIs `cpi` (cycles per instruction, one per loop position).
    pub fn new(cpi: &[f64]) -> Result<SkidModel, SkidError> {
        let total = check(0.0, cpi)?;
        let n = cpi.len();
        let mut prefix = Vec::with_capacity(2 * n + 1);
        prefix.push(0.0);
        let mut acc = 0.0;
        for k in 0..2 * n {
            acc += cpi[k % n];
            prefix.push(acc);
        }
        Ok(SkidModel { prefix, n, total })
    }

    /// Number of instructions `N`.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Always false (a model has at least one instruction).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Cycles of one pass through the loop, `sum_n c_n`.
    pub fn loop_cycles(&self) -> f64 {
        self.total
    }

    /// `g(S, m, c)` (eq. 1, closed form): the smallest `k >= 1` with
    /// `sum_{n=m+1}^{m+k} c_n >= S`, or 0 when `S = 0`.
    pub fn g(&self, skid: f64, m: usize) -> Result<usize, SkidError> {
        check(skid, &[1.0])?;
        if m >= self.n {
            return Err(SkidError::IndexOutOfLoop {
                index: m,
                len: self.n,
            });
        }
        Ok(self.g_unchecked(skid, m))
    }

    fn g_unchecked(&self, skid: f64, m: usize) -> usize {
        if skid <= 0.0 {
            return 0;
        }
        // Whole periods first (only when S exceeds one pass, beyond the paper's assumption).
        let mut s = skid;
        let mut k0 = 0usize;
        if s > self.total {
            let whole = ((s / self.total).ceil() as usize).saturating_sub(1);
            s -= whole as f64 * self.total;
            k0 = whole * self.n;
            // Guard against rounding leaving s just above total.
            while s > self.total {
                s -= self.total;
                k0 += self.n;
            }
        }
        // Cumulative sum after I_m: prefix[m+1+k] - prefix[m+1] for k instructions.
        let base = self.prefix[m + 1];
        let target = base + s;
        // First index j in (m+1 ..= m+N) with prefix[j] >= target; k = j - (m+1) + ... careful:
        // sum_{n=m+1}^{m+k} c_n (1-based, i.e. 0-based positions m+1..m+k) = prefix[m+1+k] - prefix[m+1].
        let lo = m + 2;
        let hi = m + 1 + self.n;
        let slice = &self.prefix[lo..=hi];
        let pos = slice.partition_point(|&p| p < target - 1e-9 * self.total.max(1.0));
        let k = (pos + 1).min(self.n);
        k0 + k
    }

    /// The landing position of a sample whose overflow happened at `m`: `(m + g) mod N`.
    pub fn landing(&self, skid: f64, m: usize) -> Result<usize, SkidError> {
        Ok((m + self.g(skid, m)?) % self.n)
    }

    /// Per-execution distribution `D(S, c) / N_e` (eq. 2): entry `j` counts the overflow
    /// positions whose sample lands on `j`. Sums to `N`.
    pub fn distribution(&self, skid: f64) -> Result<Vec<f64>, SkidError> {
        check(skid, &[1.0])?;
        let mut d = vec![0.0; self.n];
        for m in 0..self.n {
            d[(m + self.g_unchecked(skid, m)) % self.n] += 1.0;
        }
        Ok(d)
    }
}

/// `g(S, m, c)` of eq. 1 in closed form (see [`SkidModel::g`]).
pub fn g(skid: f64, m: usize, cpi: &[f64]) -> Result<usize, SkidError> {
    SkidModel::new(cpi)?.g(skid, m)
}

/// `D(S, c)` of eq. 2 for one execution of the loop (`N_e = 1`).
pub fn distribution(skid: f64, cpi: &[f64]) -> Result<Vec<f64>, SkidError> {
    SkidModel::new(cpi)?.distribution(skid)
}

/// `D(S, c)` of eq. 2 exactly as printed: `(N_S * T / N) * sum_m d(S, c, m)`.
pub fn distribution_scaled(
    skid: f64,
    cpi: &[f64],
    n_s: f64,
    period: f64,
) -> Result<Vec<f64>, SkidError> {
    let n = cpi.len() as f64;
    Ok(distribution(skid, cpi)?
        .into_iter()
        .map(|x| x * n_s * period / n)
        .collect())
}

/// `g(S, m, c)` by direct emulation, cycle by cycle: the loop runs from the retirement of
/// `I_m`; each following instruction occupies its `c_n` cycles; the sample is taken on the
/// instruction retiring in the cycle where the `S`-th cycle after the overflow elapses.
/// Integer CPIs only (cycles are counted one by one). Independent of the closed form.
pub fn g_emulated(skid: u64, m: usize, cpi: &[u64]) -> Result<usize, SkidError> {
    let f: Vec<f64> = cpi.iter().map(|&c| c as f64).collect();
    check(skid as f64, &f)?;
    if m >= cpi.len() {
        return Err(SkidError::IndexOutOfLoop {
            index: m,
            len: cpi.len(),
        });
    }
    if skid == 0 {
        return Ok(0);
    }
    let n = cpi.len();
    let mut elapsed = 0u64;
    let mut k = 0usize;
    loop {
        k += 1;
        let pos = (m + k) % n;
        // Instruction `pos` executes its cycles one at a time.
        for _ in 0..cpi[pos] {
            elapsed += 1;
        }
        if elapsed >= skid {
            return Ok(k);
        }
    }
}

/// `D(S, c)` by direct emulation of a sampling run: the loop executes instruction by
/// instruction, cycle by cycle, for `N * T` instructions; the instruction counter overflows
/// every `period` retired instructions (`period` coprime with `N`, e.g. a prime not dividing
/// `N`, so every position overflows exactly once, seed 000 §1.1); each overflow arms a skid
/// timer of `S` cycles and the sample goes to the instruction retiring when it expires.
/// Returns per-position sample counts (`N_S = N`, so it equals [`distribution`] with `N_e = 1`
/// when the model holds). Independent of the closed form.
pub fn distribution_emulated(skid: u64, cpi: &[u64], period: u64) -> Result<Vec<u64>, SkidError> {
    let f: Vec<f64> = cpi.iter().map(|&c| c as f64).collect();
    check(skid as f64, &f)?;
    if period == 0 {
        return Err(SkidError::InvalidProblem {
            what: "sampling period 0".into(),
        });
    }
    let n = cpi.len();
    let mut hist = vec![0u64; n];
    let total_instr = n as u64 * period;
    let mut counter = 0u64;
    // Pending samples: remaining skid cycles.
    let mut pending: Vec<u64> = Vec::new();
    let mut executed = 0u64;
    let mut pos = 0usize;
    while executed < total_instr || !pending.is_empty() {
        // Execute instruction `pos` cycle by cycle.
        for _ in 0..cpi[pos] {
            for p in pending.iter_mut() {
                *p = p.saturating_sub(1);
            }
        }
        // Samples whose timer expired land on this retiring instruction.
        pending.retain(|&p| {
            if p == 0 {
                hist[pos] += 1;
                false
            } else {
                true
            }
        });
        if executed < total_instr {
            counter += 1;
            if counter == period {
                counter = 0;
                if skid == 0 {
                    hist[pos] += 1;
                } else {
                    pending.push(skid);
                }
            }
        }
        executed += 1;
        pos = (pos + 1) % n;
    }
    Ok(hist)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-worked: c = (1, 1, 10, 1), S = 3 (0-based positions).
    /// m=0: after it c1=1 (1), c2=10 (11 >= 3) -> g=2, lands on 2.
    /// m=1: c2=10 >= 3 -> g=1, lands on 2.
    /// m=2: c3=1 (1), c0=1 (2), c1=1 (3 >= 3) -> g=3, lands on 1.
    /// m=3: c0=1, c1=1 (2), c2=10 (12) -> g=3, lands on 2.
    /// D = (0, 1, 3, 0).
    #[test]
    fn hand_worked_loop() {
        let c = [1.0, 1.0, 10.0, 1.0];
        let gs: Vec<usize> = (0..4).map(|m| g(3.0, m, &c).unwrap()).collect();
        assert_eq!(gs, vec![2, 1, 3, 3]);
        assert_eq!(distribution(3.0, &c).unwrap(), vec![0.0, 1.0, 3.0, 0.0]);
        // Eq. 2 scaling with N_S = 8 samples, T = 101: N_e = 8*101/4 = 202.
        assert_eq!(
            distribution_scaled(3.0, &c, 8.0, 101.0).unwrap(),
            vec![0.0, 202.0, 606.0, 0.0]
        );
    }

    /// Boundaries of eq. 1: S exactly equal to a partial sum stays in the lower case
    /// (`<=`), S just above moves on. c = (2, 3, 4): from m=0, sums 3, 7, 9.
    #[test]
    fn eq1_boundaries() {
        let c = [2.0, 3.0, 4.0];
        assert_eq!(g(3.0, 0, &c).unwrap(), 1);
        assert_eq!(g(3.5, 0, &c).unwrap(), 2);
        assert_eq!(g(7.0, 0, &c).unwrap(), 2);
        // Last case (our reading): 7 < S <= 9 gives N = 3, landing back on I_m itself.
        assert_eq!(g(8.0, 0, &c).unwrap(), 3);
        assert_eq!(g(9.0, 0, &c).unwrap(), 3);
        // Beyond the paper's assumption: periodic extension, 9 < S <= 12 -> 4.
        assert_eq!(g(10.0, 0, &c).unwrap(), 4);
        assert_eq!(g(0.0, 1, &c).unwrap(), 0);
        assert!(g(-1.0, 0, &c).is_err());
        assert!(g(1.0, 3, &c).is_err());
        assert!(g(1.0, 0, &[0.0, 0.0]).is_err());
    }

    /// Uniform CPIs: every sample shifts by ceil(S / c), so D stays uniform (no bias).
    #[test]
    fn uniform_cpi_is_unbiased() {
        let c = [2.0; 7];
        assert_eq!(g(5.0, 3, &c).unwrap(), 3);
        assert_eq!(distribution(5.0, &c).unwrap(), vec![1.0; 7]);
    }

    /// Closed form = cycle-by-cycle emulation on many loops and skids.
    #[test]
    fn closed_form_matches_emulation() {
        let loops: [&[u64]; 4] = [
            &[1, 1, 10, 1],
            &[3, 1, 1, 1, 200, 1, 1, 2],
            &[1, 0, 5, 2, 0, 1],
            &[7],
        ];
        for c in loops {
            let cf: Vec<f64> = c.iter().map(|&x| x as f64).collect();
            let total: u64 = c.iter().sum();
            for s in 0..=total + 3 {
                for m in 0..c.len() {
                    assert_eq!(
                        g(s as f64, m, &cf).unwrap(),
                        g_emulated(s, m, c).unwrap(),
                        "c={c:?} S={s} m={m}"
                    );
                }
                // T = 101 is prime and does not divide any N here.
                let emu = distribution_emulated(s, c, 101).unwrap();
                let cfd = distribution(s as f64, &cf).unwrap();
                let emu_f: Vec<f64> = emu.iter().map(|&x| x as f64).collect();
                assert_eq!(emu_f, cfd, "c={c:?} S={s}");
            }
        }
    }
}
