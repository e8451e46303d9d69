//! Golden files: a test's output compared with an expected file kept in the repository.
//!
//! [`assert_golden`] compares a test's output with the file; it **fails when the file is
//! missing** (so a new test cannot pass unchecked) and when the text differs, printing the
//! differing lines. Run the tests with [`BLESS_VAR`] set (`PROFTRUST_BLESS=1 cargo test ...`)
//! to write the files from the current output instead; review the diff (`git diff`) before
//! committing them. [`Masks`] replaces what is genuinely not deterministic (temporary paths,
//! tool versions) by placeholders before the comparison.
//!
//! Plain files rather than `insta` snapshots: the expected file is exactly the command's
//! output (plus a header naming the command), readable and diffable by hand, re-blessed by
//! one environment variable, with no dependency tree; masks are literal substitutions of
//! values the test knows, so no regular expressions hide more than they should.

use std::path::Path;

/// The environment variable that re-blesses golden files: set to anything but `0` or empty,
/// [`assert_golden`] writes the expected file from the actual output and passes.
pub const BLESS_VAR: &str = "PROFTRUST_BLESS";

/// Whether this run re-blesses golden files ([`BLESS_VAR`] set, not `0`).
pub fn blessing() -> bool {
    std::env::var_os(BLESS_VAR).is_some_and(|v| !v.is_empty() && v != "0")
}

/// Compares `actual` with the golden file at `path`. With [`BLESS_VAR`] set, writes `actual`
/// to `path` (creating its directory) instead. Panics when the file is missing or differs,
/// naming the file and showing the first differing lines.
pub fn assert_golden(path: &Path, actual: &str) {
    if blessing() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("create the golden directory");
        }
        let old = std::fs::read_to_string(path).ok();
        if old.as_deref() != Some(actual) {
            std::fs::write(path, actual)
                .unwrap_or_else(|e| panic!("cannot write golden file {}: {e}", path.display()));
            eprintln!("blessed {}", path.display());
        }
        return;
    }
    let expected = match std::fs::read_to_string(path) {
        Ok(s) => s,
        Err(e) => panic!(
            "golden file {} cannot be read ({e}): run the test with {BLESS_VAR}=1 to create \
             it from this output, and review it before committing",
            path.display()
        ),
    };
    if expected != actual {
        panic!(
            "output differs from golden file {} (re-bless with {BLESS_VAR}=1 if the change \
             is intended):\n{}",
            path.display(),
            line_diff(&expected, actual, 40)
        );
    }
}

/// The differing lines of two texts, as `-expected` / `+actual` pairs with line numbers, at
/// most `max` lines; lines are paired by position after the longest common prefix and suffix.
pub fn line_diff(expected: &str, actual: &str, max: usize) -> String {
    let e: Vec<&str> = expected.lines().collect();
    let a: Vec<&str> = actual.lines().collect();
    let prefix = e.iter().zip(&a).take_while(|(x, y)| x == y).count();
    let suffix = e[prefix..]
        .iter()
        .rev()
        .zip(a[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (e_mid, a_mid) = (&e[prefix..e.len() - suffix], &a[prefix..a.len() - suffix]);
    let mut out = Vec::new();
    for i in 0..e_mid.len().max(a_mid.len()) {
        if let Some(l) = e_mid.get(i) {
            out.push(format!("{:5} -{l}", prefix + i + 1));
        }
        if let Some(l) = a_mid.get(i) {
            out.push(format!("{:5} +{l}", prefix + i + 1));
        }
    }
    if out.is_empty() && expected != actual {
        out.push("(the texts differ only in their final newline)".to_string());
    }
    let more = out.len().saturating_sub(max);
    out.truncate(max);
    if more > 0 {
        out.push(format!("... {more} more differing line(s)"));
    }
    out.join("\n")
}

/// Literal substitutions applied to an output before it is compared: each value the test
/// knows to vary between machines or runs (a temporary directory, a tool's version) becomes
/// a placeholder such as `[DIR]`. Applied in the order added; longer values first when one
/// contains another.
#[derive(Debug, Default, Clone)]
pub struct Masks {
    pairs: Vec<(String, String)>,
}

impl Masks {
    /// No substitutions.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces every occurrence of `value` by `placeholder` (an empty `value` is ignored).
    pub fn add(mut self, value: impl Into<String>, placeholder: impl Into<String>) -> Self {
        let value = value.into();
        if !value.is_empty() {
            self.pairs.push((value, placeholder.into()));
        }
        self
    }

    /// `text` with every substitution applied.
    pub fn apply(&self, text: &str) -> String {
        let mut s = text.to_string();
        for (value, placeholder) in &self.pairs {
            s = s.replace(value.as_str(), placeholder);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_names_the_changed_line_only() {
        let d = line_diff("a\nb\nc\n", "a\nB\nc\n", 10);
        assert_eq!(d, "    2 -b\n    2 +B");
        let d = line_diff("a\nc\n", "a\nb\nc\n", 10);
        assert_eq!(d, "    2 +b");
        assert_eq!(
            line_diff("a", "a\n", 10),
            "(the texts differ only in their final newline)"
        );
        let d = line_diff("1\n2\n3\n", "x\ny\nz\n", 2);
        assert_eq!(d, "    1 -1\n    1 +x\n... 4 more differing line(s)");
    }

    #[test]
    fn masks_replace_in_order() {
        let m = Masks::new()
            .add("/tmp/abc/bin", "[BIN]")
            .add("/tmp/abc", "[DIR]")
            .add("", "[NOTHING]");
        assert_eq!(m.apply("/tmp/abc/bin/x /tmp/abc/y z"), "[BIN]/x [DIR]/y z");
    }

    #[test]
    fn missing_golden_file_fails() {
        if blessing() {
            return; // blessing would create it
        }
        let dir = std::env::temp_dir().join("proftrust-testkit-no-such-golden");
        let r = std::panic::catch_unwind(|| assert_golden(&dir.join("nothing.txt"), "x"));
        let msg = *r.unwrap_err().downcast::<String>().unwrap();
        assert!(msg.contains("cannot be read"), "{msg}");
        assert!(msg.contains(BLESS_VAR), "{msg}");
    }

    #[test]
    fn differing_golden_file_fails_and_equal_passes() {
        if blessing() {
            return;
        }
        let dir = tempfile_dir();
        let p = dir.join("g.txt");
        std::fs::write(&p, "one\ntwo\n").unwrap();
        assert_golden(&p, "one\ntwo\n");
        let r = std::panic::catch_unwind(|| assert_golden(&p, "one\nthree\n"));
        let msg = *r.unwrap_err().downcast::<String>().unwrap();
        assert!(msg.contains("    2 -two\n    2 +three"), "{msg}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let d =
            std::env::temp_dir().join(format!("proftrust-testkit-golden-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
