//! The crate's error type.

/// Why a virtual PMU or its timer cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum VpmuError {
    /// Options (period, skid distribution, cache geometry) are not usable.
    #[error("invalid sampler options: {what}; fix: {fix}")]
    InvalidOptions {
        /// What is wrong.
        what: String,
        /// How to fix it.
        fix: &'static str,
    },
}
