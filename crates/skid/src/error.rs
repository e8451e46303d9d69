//! The crate's error type.

/// Everything that can go wrong in skid modelling, correction and calibration.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SkidError {
    /// A CPI vector was empty or held a negative / non-finite value.
    #[error("invalid CPI vector: {what}; every CPI must be finite and >= 0, and their sum > 0")]
    InvalidCpi {
        /// What is wrong.
        what: String,
    },
    /// The skid was negative or not finite.
    #[error("invalid skid {skid}: the skid must be a finite number of cycles >= 0")]
    InvalidSkid {
        /// The offending value.
        skid: f64,
    },
    /// An instruction index was outside the loop.
    #[error("instruction index {index} is outside the loop of {len} instructions")]
    IndexOutOfLoop {
        /// The index.
        index: usize,
        /// Loop length.
        len: usize,
    },
    /// A correction problem was malformed.
    #[error("invalid loop problem: {what}")]
    InvalidProblem {
        /// What is wrong, naming the block / simple loop.
        what: String,
    },
    /// A profile cannot be corrected.
    #[error("cannot correct this profile: {what}")]
    Profile {
        /// What is wrong and how to fix it.
        what: String,
    },
    /// A calibration input was unusable.
    #[error("cannot calibrate: {what}")]
    Calibration {
        /// What is wrong and how to fix it.
        what: String,
    },
}
