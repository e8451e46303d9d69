//! The report of `record` (a sampled run written as a sample file): what was recorded, as
//! the notes the command prints beside the file it writes, and as JSON.

use serde::Serialize;

/// Percentiles of the realised interval minus the recorded period (the recorder's reaction
/// latency, docs/record.md), over the randomised samples.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IntervalExcess {
    /// Smallest.
    pub min: i64,
    /// Median.
    pub median: i64,
    /// 90th percentile.
    pub p90: i64,
    /// Largest.
    pub max: i64,
    /// Samples measured.
    pub samples: usize,
}

impl IntervalExcess {
    /// The percentiles of `v` (`None` when empty).
    pub fn of(v: &[i64]) -> Option<IntervalExcess> {
        if v.is_empty() {
            return None;
        }
        let mut v = v.to_vec();
        v.sort_unstable();
        Some(IntervalExcess {
            min: v[0],
            median: v[v.len() / 2],
            p90: v[v.len() * 9 / 10],
            max: v[v.len() - 1],
            samples: v.len(),
        })
    }
}

/// What a recording took (the samples themselves are the file the command writes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecordSummary {
    /// Seed of every random choice (also stored in the sample file).
    pub seed: u64,
    /// Samples taken.
    pub samples: usize,
    /// Samples the kernel reported lost.
    pub lost: u64,
    /// Modules seen.
    pub modules: usize,
    /// Ring-buffer batches drained.
    pub batches: u64,
    /// Period updates issued (randomisation).
    pub period_updates: u64,
    /// Throttle records (the kernel slowed sampling down).
    pub throttled: u64,
    /// Samples outside every known module.
    pub unmapped_samples: u64,
    /// Samples of inherited instances, which randomisation cannot reach.
    pub unrandomized_samples: u64,
    /// The reaction latency, when measured.
    pub interval_excess: Option<IntervalExcess>,
}

impl RecordSummary {
    /// The JSON document, pretty-printed, with a final newline.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        let mut s = serde_json::to_string_pretty(self)?;
        s.push('\n');
        Ok(s)
    }

    /// The notes, one per line: the seed, the totals and where they were written
    /// (`written_to`), and with `verbose` the recorder's own counters.
    pub fn render_text(&self, written_to: &str, verbose: bool) -> String {
        let mut s = format!("seed {}\n", self.seed);
        s.push_str(&format!(
            "{} samples, {} lost, {} modules written to {}\n",
            self.samples,
            self.lost,
            self.modules,
            crate::quote_name(written_to)
        ));
        if verbose {
            s.push_str(&format!(
                "{} ring-buffer batches, {} period updates, {} throttle records, {} unmapped samples, {} samples not randomised (inherited instances)\n",
                self.batches, self.period_updates, self.throttled, self.unmapped_samples, self.unrandomized_samples
            ));
            if let Some(x) = &self.interval_excess {
                s.push_str(&format!(
                    "realised interval - recorded period (reaction latency): min {} median {} p90 {} max {} over {} samples\n",
                    x.min, x.median, x.p90, x.max, x.samples
                ));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_percentiles_by_hand() {
        let x = IntervalExcess::of(&[5, -1, 3, 9, 0, 2, 7, 4, 1, 6]).unwrap();
        // Sorted: -1 0 1 2 3 4 5 6 7 9; median index 5, p90 index 9.
        assert_eq!(
            (x.min, x.median, x.p90, x.max, x.samples),
            (-1, 4, 9, 9, 10)
        );
        assert!(IntervalExcess::of(&[]).is_none());
    }
}
