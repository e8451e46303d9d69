//! The report of `calibrate` (the skid `S` of a PMU fitted from a kernel with a known
//! instruction mix, seed 000 eq. 2): its data, which is the `--json` document (keys in
//! alphabetical order, as the fields are declared), and the text.

use serde::Serialize;

/// The calibration kernel: one load of `heavy_cycles` followed by `light_instructions`
/// one-cycle instructions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalibrationKernel {
    /// Cycles of the heavy load.
    pub heavy_cycles: u32,
    /// One-cycle instructions after it.
    pub light_instructions: usize,
}

/// The fitted skid beside the skid the samples were taken with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalibrateReport {
    /// Where the samples came from (`vpmu`: the virtual PMU).
    pub backend: String,
    /// The smallest best-fitting skid, in cycles.
    pub fitted_skid: f64,
    /// The largest skid that fits equally well.
    pub fitted_skid_high: f64,
    /// The kernel replayed.
    pub kernel: CalibrationKernel,
    /// Instruction-event period.
    pub period: u64,
    /// Whether the period was randomised.
    pub randomize: bool,
    /// Sum of squared differences of the normalised histograms at the fit.
    pub residual: f64,
    /// Samples in the observed histogram.
    pub samples: f64,
    /// Seed of the virtual PMU's random choices.
    pub seed: u64,
    /// The skid the virtual PMU applied, in cycles.
    pub true_skid: u64,
}

impl CalibrateReport {
    /// The JSON document, pretty-printed, with a final newline.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        let mut s = serde_json::to_string_pretty(self)?;
        s.push('\n');
        Ok(s)
    }

    /// The text: the kernel and the run, the samples, the fit against the true skid.
    pub fn render_text(&self) -> String {
        let mut s = format!(
            "kernel: 1 load of {} cycles + {} one-cycle instructions; virtual PMU, period {}{}, seed {}\n",
            self.kernel.heavy_cycles,
            self.kernel.light_instructions,
            self.period,
            if self.randomize { " randomised" } else { "" },
            self.seed
        );
        s.push_str(&format!("samples: {}\n", self.samples));
        if self.fitted_skid == self.fitted_skid_high {
            s.push_str(&format!(
                "fitted skid: {} cycles (true: {})\n",
                self.fitted_skid, self.true_skid
            ));
        } else {
            s.push_str(&format!(
                "fitted skid: {} .. {} cycles (equally good; true: {})\n",
                self.fitted_skid, self.fitted_skid_high, self.true_skid
            ));
        }
        s.push_str(&format!("residual: {:.3e}\n", self.residual));
        s
    }
}
