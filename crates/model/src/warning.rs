//! One warning of a report: a closed [`WarningKind`] a program can act on and the
//! [`Warning::message`] a person reads. Every report of proftrust carries its warnings as
//! `[{"kind": "...", "message": "..."}]` (docs/audit.md, docs/check.md); the text and HTML
//! renderers print the message.
//!
//! A report written by an earlier proftrust held its warnings as plain strings; reading one
//! back gives each the kind [`WarningKind::Other`].

use serde::{Deserialize, Serialize};
use std::fmt;

/// What a warning is about: the `kind` of the JSON reports, spelled in kebab-case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum WarningKind {
    /// The sampling period may be locked to periodic code (recurring instructions, locked
    /// blocks, a phase lock): shares may be biased.
    Aliasing,
    /// Samples land after the instruction that caused them (skid shadows).
    Skid,
    /// Functions or states too short for the period to resolve them.
    Granularity,
    /// Samples lost by the kernel (ring-buffer overflow).
    Lost,
    /// The kernel throttled the sampling rate.
    Throttling,
    /// The event was multiplexed: counted only part of the time.
    Multiplexing,
    /// Samples, or branch-stack ranges, in no known function or code (a binary not found,
    /// no symbols).
    Unsymbolized,
    /// Samples clustered in time: the intervals of independent samples are too narrow.
    Clustering,
    /// The program, the recording, the exact run or the command itself ended before the end
    /// of the run: crashed, killed, interrupted, timed out, a stream or file cut short.
    EndedEarly,
    /// A reader's note about the input file.
    Input,
    /// The sampled shares and the hardware time (branch stacks' cycles) disagree.
    HardwareTime,
    /// Too few samples for a verdict (the whole profile, or points of a sweep).
    FewSamples,
    /// Samples that measure time compared with a truth that counts instructions: differences
    /// of CPI between functions show up as error.
    Cpi,
    /// The truth is a model or a coverage count, not a measured execution count.
    TruthModel,
    /// How the exact count was made: the backend's own warnings, a fallback to another
    /// backend, a second count.
    Backend,
    /// A binary without debug info, or whose symbols or debug file could not be read.
    MissingDebugInfo,
    /// Functions without a control-flow graph (no paths, blocks derived otherwise).
    Cfg,
    /// The measurement itself is imprecise or incomplete: paths merged by a shared
    /// signature, timings dropped or noisy, probes passed by other threads.
    Measurement,
    /// What was compared was narrowed: samples outside the audited binaries, processes left
    /// out of both sides, one event of several.
    Scope,
    /// Any other warning, and every warning of a report written before warnings had kinds.
    #[serde(other)]
    Other,
}

impl WarningKind {
    /// Every kind, in the order of the enum.
    pub const ALL: [WarningKind; 20] = [
        WarningKind::Aliasing,
        WarningKind::Skid,
        WarningKind::Granularity,
        WarningKind::Lost,
        WarningKind::Throttling,
        WarningKind::Multiplexing,
        WarningKind::Unsymbolized,
        WarningKind::Clustering,
        WarningKind::EndedEarly,
        WarningKind::Input,
        WarningKind::HardwareTime,
        WarningKind::FewSamples,
        WarningKind::Cpi,
        WarningKind::TruthModel,
        WarningKind::Backend,
        WarningKind::MissingDebugInfo,
        WarningKind::Cfg,
        WarningKind::Measurement,
        WarningKind::Scope,
        WarningKind::Other,
    ];

    /// The JSON spelling (`ended-early`).
    pub fn name(self) -> &'static str {
        match self {
            WarningKind::Aliasing => "aliasing",
            WarningKind::Skid => "skid",
            WarningKind::Granularity => "granularity",
            WarningKind::Lost => "lost",
            WarningKind::Throttling => "throttling",
            WarningKind::Multiplexing => "multiplexing",
            WarningKind::Unsymbolized => "unsymbolized",
            WarningKind::Clustering => "clustering",
            WarningKind::EndedEarly => "ended-early",
            WarningKind::Input => "input",
            WarningKind::HardwareTime => "hardware-time",
            WarningKind::FewSamples => "few-samples",
            WarningKind::Cpi => "cpi",
            WarningKind::TruthModel => "truth-model",
            WarningKind::Backend => "backend",
            WarningKind::MissingDebugInfo => "missing-debug-info",
            WarningKind::Cfg => "cfg",
            WarningKind::Measurement => "measurement",
            WarningKind::Scope => "scope",
            WarningKind::Other => "other",
        }
    }
}

impl fmt::Display for WarningKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One warning of a report: what it is about and what was found (and what to do about it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(from = "WarningForm")]
pub struct Warning {
    /// What the warning is about.
    pub kind: WarningKind,
    /// What was found and what to do about it, in words.
    pub message: String,
}

impl Warning {
    /// A warning worded by a crate that reports plain text: kind `hit` when the message
    /// contains one of `keys`, else `miss` (the one rule the pipeline and `check` use to
    /// give such texts their kinds).
    pub fn by_words(
        message: impl Into<String>,
        keys: &[&str],
        hit: WarningKind,
        miss: WarningKind,
    ) -> Warning {
        let message = message.into();
        let kind = if keys.iter().any(|k| message.contains(k)) {
            hit
        } else {
            miss
        };
        Warning::new(kind, message)
    }

    /// A warning of `kind`.
    pub fn new(kind: WarningKind, message: impl Into<String>) -> Warning {
        Warning {
            kind,
            message: message.into(),
        }
    }
}

impl fmt::Display for Warning {
    /// The message (the kind is for programs).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// What a report's JSON may hold for a warning: the object, or the plain string of a report
/// written before warnings had kinds.
#[derive(Deserialize)]
#[serde(untagged)]
enum WarningForm {
    Typed { kind: WarningKind, message: String },
    Text(String),
}

impl From<WarningForm> for Warning {
    fn from(f: WarningForm) -> Warning {
        match f {
            WarningForm::Typed { kind, message } => Warning { kind, message },
            WarningForm::Text(message) => Warning {
                kind: WarningKind::Other,
                message,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind serialises as its name and reads back.
    #[test]
    fn kinds_serialise_as_their_kebab_names() {
        for k in WarningKind::ALL {
            let j = serde_json::to_string(&k).unwrap();
            assert_eq!(j, format!("\"{}\"", k.name()));
            let back: WarningKind = serde_json::from_str(&j).unwrap();
            assert_eq!(back, k);
        }
        assert_eq!(WarningKind::EndedEarly.to_string(), "ended-early");
        assert_eq!(WarningKind::MissingDebugInfo.name(), "missing-debug-info");
    }

    /// The object form, written and read; the plain string of an earlier release read as
    /// kind `other`; a kind this release does not know read as `other`.
    #[test]
    fn warnings_read_both_forms() {
        let w = Warning::new(WarningKind::Lost, "3 samples were lost");
        let j = serde_json::to_string(&w).unwrap();
        assert_eq!(j, r#"{"kind":"lost","message":"3 samples were lost"}"#);
        assert_eq!(serde_json::from_str::<Warning>(&j).unwrap(), w);
        let old: Vec<Warning> =
            serde_json::from_str(r#"["the program was killed by SIGKILL", "x"]"#).unwrap();
        assert_eq!(
            old,
            vec![
                Warning::new(WarningKind::Other, "the program was killed by SIGKILL"),
                Warning::new(WarningKind::Other, "x"),
            ]
        );
        let newer: Warning =
            serde_json::from_str(r#"{"kind":"from-the-future","message":"m"}"#).unwrap();
        assert_eq!(newer, Warning::new(WarningKind::Other, "m"));
        assert!(serde_json::from_str::<Warning>("42").is_err());
        assert_eq!(w.to_string(), "3 samples were lost");
    }
}
