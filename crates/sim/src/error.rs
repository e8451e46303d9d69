//! The crate's error type.

/// Why a simulation or an analysis could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// A scenario (tasks, shares, granularities, number of units) is not usable.
    #[error("invalid scenario: {what}; fix: {fix}")]
    InvalidScenario {
        /// What is wrong.
        what: String,
        /// How to fix it.
        fix: &'static str,
    },
    /// Sampler options (interval, start, noise) are not usable.
    #[error("invalid sampler options: {what}; fix: {fix}")]
    InvalidSampler {
        /// What is wrong.
        what: String,
        /// How to fix it.
        fix: &'static str,
    },
    /// No preset of that name.
    #[error("unknown preset {name:?}; known presets: {known}")]
    UnknownPreset {
        /// The name asked for.
        name: String,
        /// The names that exist, comma-separated.
        known: String,
    },
    /// A sample set has too few samples of the base event for a granularity analysis.
    #[error("{what}: {found} samples of event {event}, need at least {needed}; record longer or at a higher frequency")]
    TooFewSamples {
        /// Which analysis.
        what: &'static str,
        /// Index of the event in the sample set.
        event: u16,
        /// Samples found.
        found: usize,
        /// Samples needed.
        needed: usize,
    },
    /// The requested event index does not exist in the sample set.
    #[error("event {event} does not exist: the sample set has {available} event(s)")]
    NoSuchEvent {
        /// Requested index.
        event: u16,
        /// Number of events present.
        available: usize,
    },
}
