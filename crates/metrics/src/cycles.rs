//! A cycle estimate from callgrind's cache and branch simulation.

use crate::Error;

/// The formula [`cycles_estimate`] applies, as printed in reports.
pub const CYCLES_FORMULA: &str =
    "cycles ~ Ir + 10*(I1mr+D1mr+D1mw) + 100*(ILmr+DLmr+DLmw) + 15*(Bcm+Bim)";

/// Estimated cycles of one instruction from callgrind's simulated events:
///
/// `cycles ≈ Ir + 10·(I1mr + D1mr + D1mw) + 100·(ILmr + DLmr + DLmw) + 15·(Bcm + Bim)`
///
/// This is a documented convention, not a measurement: one cycle per instruction, about 10
/// cycles per first-level miss served by the last level, about 100 per last-level miss
/// (memory), about 15 per mispredicted branch. The 1/10/100 cache weights are KCachegrind's
/// "Cycle Estimation" (`CEst = Ir + 10 Bm + 10 L1m + 20 Ge + 100 L2m + 100 LLm`, with
/// `L1m = I1mr + D1mr + D1mw`, `LLm = ILmr + DLmr + DLmw`, `Bm = Bim + Bcm`; its author calls
/// it a rough estimate); we weight a misprediction 15 rather than 10, the order of a modern
/// x86 pipeline flush, and ignore `Ge` (global bus events, absent from callgrind's default
/// simulation). Older valgrind files name the last level `I2mr/D2mr/D2mw`; they weigh 100
/// too. Columns absent from the file count as zero; at least one first-level cache column
/// must be present (otherwise the estimate would silently equal the instruction count).
///
/// `names` are the column names of `costs` (callgrind's `events:` line without `Ir`), `ir`
/// the instruction's executions.
pub fn cycles_estimate(names: &[String], costs: &[u64], ir: u64) -> u64 {
    let mut c = ir;
    for (n, &v) in names.iter().zip(costs) {
        let w = match n.as_str() {
            "I1mr" | "D1mr" | "D1mw" => 10,
            "ILmr" | "DLmr" | "DLmw" | "I2mr" | "D2mr" | "D2mw" => 100,
            "Bcm" | "Bim" => 15,
            _ => 0,
        };
        c = c.saturating_add(v.saturating_mul(w));
    }
    c
}

/// Checks that `names` holds the cache columns the estimate needs.
pub(crate) fn check_columns(names: &[String]) -> Result<(), Error> {
    if names.iter().any(|n| n == "D1mr" || n == "I1mr") {
        Ok(())
    } else {
        Err(Error::MissingCostColumn {
            missing: "D1mr/I1mr".into(),
            found: if names.is_empty() {
                "Ir only".into()
            } else {
                names.join(", ")
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_estimate() {
        // Ir=100, I1mr=1, D1mr=2, D1mw=0, ILmr=0, DLmr=1, DLmw=0, Bc=50 (weight 0), Bcm=3
        // = 100 + 10*3 + 100*1 + 15*3 = 275
        let names: Vec<String> = ["I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw", "Bc", "Bcm"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            cycles_estimate(&names, &[1, 2, 0, 0, 1, 0, 50, 3], 100),
            275
        );
        assert!(check_columns(&names).is_ok());
        assert!(check_columns(&["Bc".to_string()]).is_err());
    }
}
