//! The kinds of the warnings the lower crates word as plain text (the binary's and the
//! symbolizer's, the exact backends', the readers'), given where they enter a report. The
//! pipeline's own warnings are made with their kind where they are worded.

use proftrust_model::{ExactProfile, Warning, WarningKind};

/// A binary's or the symbolizer's warning (`proftrust_binary`): `missing-debug-info` for a
/// binary without debug info or unreadable symbols, else `unsymbolized` (a binary not found,
/// a build-id mismatch: its samples get no function).
pub(crate) fn symbols(message: impl Into<String>) -> Warning {
    Warning::by_words(
        message,
        &["no debug info", "function names are not used", "debug file"],
        WarningKind::MissingDebugInfo,
        WarningKind::Unsymbolized,
    )
}

/// Every [`symbols`] warning of `messages`.
pub(crate) fn all_symbols(messages: impl IntoIterator<Item = impl Into<String>>) -> Vec<Warning> {
    messages.into_iter().map(symbols).collect()
}

/// The exact backend's warnings about a count (`proftrust_exact::warnings`): `ended-early`
/// when the plugin's stream ended before the run did, else `backend`.
pub(crate) fn exact(e: &ExactProfile) -> Vec<Warning> {
    proftrust_exact::warnings(e)
        .into_iter()
        .map(|m| {
            Warning::by_words(
                m,
                &["ended early"],
                WarningKind::EndedEarly,
                WarningKind::Backend,
            )
        })
        .collect()
}

/// A reader's note about an input file: `ended-early` when it says the file was cut, else
/// `input` (the rule `check` uses, `proftrust_check::warn::reader_note`).
pub(crate) fn input(message: impl Into<String>) -> Warning {
    proftrust_check::warn::reader_note(message.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The binary crate's and the exact backends' wordings get the kinds their causes have.
    #[test]
    fn lower_crates_warnings_get_their_kinds() {
        let k = |m: &str| symbols(m).kind;
        assert_eq!(
            k("no debug info in /bin/x: inline frames and source lines are unavailable; build with -g"),
            WarningKind::MissingDebugInfo
        );
        assert_eq!(
            k("/w/prog not found: its samples are shown as prog+0xOFFSET; give the binary with --binary or --symfs"),
            WarningKind::Unsymbolized
        );
        assert_eq!(
            input("the file ends after 3 records").kind,
            WarningKind::EndedEarly
        );
        assert_eq!(input("unknown record type 99").kind, WarningKind::Input);
        let mut e = ExactProfile {
            backend: "qemu".into(),
            backend_detail: "plugin v4; stream ended early; WARNING 3 block executions had an edge the plugin could not derive".into(),
            ..Default::default()
        };
        let w = exact(&e);
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(w[0].kind, WarningKind::EndedEarly);
        assert!(w[0]
            .message
            .starts_with("qemu backend: the plugin's stream ended early"));
        assert_eq!(w[1].kind, WarningKind::Backend);
        assert_eq!(
            w[1].message,
            "qemu backend: 3 block executions had an edge the plugin could not derive"
        );
        e.backend_detail = "plugin v4".into();
        assert!(exact(&e).is_empty());
    }
}
