//! How names from binaries and profiles leave proftrust: one rule per kind of output.
//!
//! | output | rule | function |
//! |---|---|---|
//! | text for people (tables, notes, warnings, errors, annotate) | control characters, C1 controls and bidirectional marks escaped (`\x1b`, `\n`, `\u{202e}`) | [`quote_name`] (one line: [`quote_line`]) |
//! | HTML and SVG/XML (markup) | the text rule, then `& < > " '` as entities: nothing XML 1.0 forbids is left | [`escape_markup`] |
//! | folded stacks (`a;b;c N`) | the text rule, then `;` (the frame separator) as `:` | [`folded_frame`], [`folded_stack`] |
//! | LLVM sample profile text | the text rule, then a leading `#` or space (a comment or a body line) escaped | [`llvm_sample_name`] |
//! | JSON, pprof, Firefox, speedscope | names exact (the encoders escape what their syntax needs) | none |
//!
//! Bytes that are not UTF-8 were replaced by U+FFFD when the name was read, so every rule
//! works on `str`.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not reach a terminal raw: C0 and C1 controls, DEL, the Unicode
/// bidirectional overrides and isolates (which reorder what follows them on screen), and
/// the noncharacters U+FFFE and U+FFFF.
fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        // Not characters at all to XML 1.0 (its `Char` production leaves them out).
        || matches!(c, '\u{fffe}' | '\u{ffff}')
}

/// A name as text output shows it, the way `git` quotes paths and `perf` prints odd
/// bytes: `\n`, `\t`, `\r`, `\x1b` (other C0 controls and DEL as `\xHH`), C1 controls
/// and bidirectional marks as `\u{202e}`. When anything is escaped, backslashes are
/// doubled too, so the escaped form reads back unambiguously. A name without such
/// characters is returned as it is (borrowed). JSON output keeps names exact; HTML output
/// escapes markup and then shows control characters the same way ([`escape_markup`]).
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

/// A message (note, warning, error) as one line of text output: [`quote_name`] of the whole
/// message, so a name inside it can neither drive the terminal nor start a line of its own.
/// Messages are one line by construction (a tool's own output is joined with ` | `).
pub fn quote_line(s: &str) -> Cow<'_, str> {
    quote_name(s)
}

/// `s` with `& < > " '` as entities after [`quote_name`]: safe as HTML text or attribute
/// value and as XML 1.0 character data (no control character, which XML forbids even as
/// a character reference, is left). The one escaper of every HTML page and SVG document.
pub fn escape_markup(s: &str) -> String {
    let s = quote_name(s);
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

/// A frame of a folded stack (`root;caller;leaf COUNT`, read by `flamegraph.pl` and
/// inferno): [`quote_name`] (a line break would start a new stack), and `;`, which would
/// split the frame in two, written as `:`.
pub fn folded_frame(s: &str) -> Cow<'_, str> {
    let q = quote_name(s);
    if q.contains(';') {
        Cow::Owned(q.replace(';', ":"))
    } else {
        q
    }
}

/// Frames (root first) as one folded stack, each through [`folded_frame`], joined by `;`.
pub fn folded_stack<'a>(frames: impl IntoIterator<Item = &'a str>) -> String {
    let mut o = String::new();
    for (i, f) in frames.into_iter().enumerate() {
        if i > 0 {
            o.push(';');
        }
        o.push_str(&folded_frame(f));
    }
    o
}

/// A comment line of a folded-stack file, with its line break: `# proftrust: TEXT [not a
/// stack]` (`TEXT` through [`quote_name`]). `flamegraph.pl` and inferno skip a line that
/// does not end in a count (the closing bracket sees to that), so a mark such as "the run
/// was interrupted" travels with the stacks without adding one.
pub fn folded_comment(text: &str) -> String {
    format!("# proftrust: {} [not a stack]\n", quote_name(text))
}

/// A function name in LLVM's text sample profile (`NAME:TOTAL:HEAD`, ` OFFSET: NAME:COUNT`):
/// [`quote_name`] (a line break would split the record), and a leading `#` or space, which
/// `llvm-profdata` would read as a comment or a body line, as `\x23` / `\x20`. The name
/// `llvm-profdata` reads back is exactly the one written (names of C and C++ functions
/// have none of these characters, so they are written as they are).
pub fn llvm_sample_name(s: &str) -> Cow<'_, str> {
    let q = quote_name(s);
    match q.chars().next() {
        Some(c @ ('#' | ' ')) => {
            let mut o = format!("\\x{:02x}", c as u32);
            o.push_str(&q[1..]);
            Cow::Owned(o)
        }
        _ => q,
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
            ("nc\u{fffe}", "nc\\u{fffe}"),
        ];
        for (name, shown) in cases {
            let q = quote_name(name);
            assert_eq!(q, shown, "{name:?}");
            assert!(!q.chars().any(needs_escape), "{q:?}");
        }
        assert!(matches!(quote_name("plain"), Cow::Borrowed(_)));
    }

    /// Each machine rule on the hostile names: what the format reads back.
    #[test]
    fn machine_rules_table() {
        let cases = [
            // name, folded frame, LLVM name, markup
            ("main", "main", "main", "main"),
            ("a;b", "a:b", "a;b", "a;b"),
            (
                "f\nFAKE 99.99% row",
                "f\\nFAKE 99.99% row",
                "f\\nFAKE 99.99% row",
                "f\\nFAKE 99.99% row",
            ),
            (
                "x\x1b]0;t\x07",
                "x\\x1b]0:t\\x07",
                "x\\x1b]0;t\\x07",
                "x\\x1b]0;t\\x07",
            ),
            ("#define", "#define", "\\x23define", "#define"),
            (" lead", " lead", "\\x20lead", " lead"),
            (
                "<a href=\"x\">&'",
                "<a href=\"x\">&'",
                "<a href=\"x\">&'",
                "&lt;a href=&quot;x&quot;&gt;&amp;&#39;",
            ),
            (
                "rtl\u{202e}x",
                "rtl\\u{202e}x",
                "rtl\\u{202e}x",
                "rtl\\u{202e}x",
            ),
        ];
        for (name, folded, llvm, markup) in cases {
            assert_eq!(folded_frame(name), folded, "{name:?}");
            assert_eq!(llvm_sample_name(name), llvm, "{name:?}");
            assert_eq!(escape_markup(name), markup, "{name:?}");
            for out in [
                folded_frame(name).into_owned(),
                llvm_sample_name(name).into_owned(),
                escape_markup(name),
            ] {
                assert!(!out.chars().any(needs_escape), "{out:?}");
            }
        }
        assert_eq!(folded_stack(["a;b", "c\nd", "e"]), "a:b;c\\nd;e");
        assert_eq!(
            folded_comment("exited with status 3\n"),
            "# proftrust: exited with status 3\\n [not a stack]\n"
        );
        assert_eq!(quote_line("not found: a\nFAKE"), "not found: a\\nFAKE");
    }
}
