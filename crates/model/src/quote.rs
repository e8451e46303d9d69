//! Names from binaries and profiles shown on a terminal: control characters escaped so
//! that a symbol cannot move the cursor, set the terminal title or forge a table row.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not reach a terminal raw: C0 and C1 controls, DEL, and the Unicode
/// bidirectional overrides and isolates (which reorder what follows them on screen).
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// A name as text output shows it, the way `git` quotes paths and `perf` prints odd
/// bytes: `\n`, `\t`, `\r`, `\x1b` (other C0 controls and DEL as `\xHH`), C1 controls
/// and bidirectional marks as `\u{202e}`. When anything is escaped, backslashes are
/// doubled too, so the escaped form reads back unambiguously. A name without such
/// characters is returned as it is (borrowed). JSON output keeps names exact; HTML output
/// escapes markup and then shows control characters the same way.
pub fn quote_name(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\t' => o.push_str("\\t"),
            '\r' => o.push_str("\\r"),
            c if (c as u32) < 0x80 && needs_escape(c) => {
                let _ = write!(o, "\\x{:02x}", c as u32);
            }
            c if needs_escape(c) => {
                let _ = write!(o, "\\u{{{:x}}}", c as u32);
            }
            c => o.push(c),
        }
    }
    Cow::Owned(o)
}

/// What a report of a traced or recorded run says when the program did not end normally
/// (`None` for exit status 0): `the program exited with status 3`, `the program was killed
/// by SIGSEGV: the paths cover the run up to then` (`what` names the report's contents).
pub fn outcome_warning(o: &crate::RunOutcome, what: &str) -> Option<String> {
    use crate::RunOutcome;
    match o {
        RunOutcome::Exited { code: 0 } => None,
        RunOutcome::Exited { .. } => Some(format!("the program {o}")),
        _ => Some(format!(
            "the program was {o}: {what} cover the run up to then"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each case: a hostile name and how text output shows it.
    #[test]
    fn hostile_names_table() {
        let cases = [
            ("main", "main"),
            ("a\\b", "a\\b"),
            ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),
            ("f\nFAKE 99.99% row", "f\\nFAKE 99.99% row"),
            ("tab\there", "tab\\there"),
            ("cr\rx", "cr\\rx"),
            ("del\x7f", "del\\x7f"),
            ("c1\u{9b}31m", "c1\\u{9b}31m"),
            ("rtl\u{202e}txt.exe", "rtl\\u{202e}txt.exe"),
            ("back\\slash\n", "back\\\\slash\\n"),
            ("<script>alert(1)</script>", "<script>alert(1)</script>"),
            ("operator<<(std::ostream&)", "operator<<(std::ostream&)"),
        ];
        for (name, shown) in cases {
            let q = quote_name(name);
            assert_eq!(q, shown, "{name:?}");
            assert!(!q.chars().any(needs_escape), "{q:?}");
        }
        assert!(matches!(quote_name("plain"), Cow::Borrowed(_)));
    }
}
