//! Flame graph SVGs drawn by inferno (the Rust port of FlameGraph) from the folded stacks
//! of [`crate::write_folded`]: a profile's own flame graph, and the differential flame
//! graph of two profiles (`flamegraph.pl`'s red/blue: widths are the second profile, red
//! where it has more than the first, blue where less).

use crate::folded::{check_value, counted, fold, fold_diff, push_line, DiffOptions};
use crate::profile::Profile;
use crate::symbols::Resolver;
use crate::ExportError;
use inferno::flamegraph::{self, Options, Palette};
use proftrust_model::quote_name;
use std::io::Write;

/// What a flame graph is called and counts.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlameOptions {
    /// Title at the top. Default `"Flame Graph"`.
    pub title: String,
    /// Second line under the title. Default none.
    pub subtitle: Option<String>,
    /// What a count is (`samples`, `instructions`). Default `"samples"`.
    pub count_name: String,
    /// Width in pixels. Default 1200.
    pub width: usize,
}

impl Default for FlameOptions {
    fn default() -> Self {
        FlameOptions {
            title: "Flame Graph".into(),
            subtitle: None,
            count_name: "samples".into(),
            width: 1200,
        }
    }
}

fn inferno_options(o: &FlameOptions) -> Options<'static> {
    let mut opt = Options::default();
    // inferno escapes markup; control characters (which XML 1.0 forbids: a browser shows
    // an error instead of the graph) are escaped here, as the frames are (`folded_frame`).
    let q = |s: &str| quote_name(s).into_owned();
    opt.title = q(&o.title);
    opt.subtitle = o.subtitle.as_deref().map(q);
    opt.count_name = q(&o.count_name);
    opt.image_width = Some(o.width);
    // Colours by a hash of the name, the same from run to run (golden files, side-by-side
    // graphs of one program).
    opt.hash = true;
    opt.deterministic = true;
    opt.colors = Palette::Basic(flamegraph::color::BasicPalette::Hot);
    opt
}

/// Folded lines (`stack COUNT...`) in one buffer, for inferno.
struct Lines {
    text: String,
    ends: Vec<usize>,
}

impl Lines {
    fn from<'a, const K: usize>(lines: impl Iterator<Item = (&'a str, [f64; K])>) -> Lines {
        let mut text = Vec::new();
        let mut ends = Vec::new();
        for (s, counts) in lines {
            push_line(&mut text, s, &counts);
            ends.push(text.len());
        }
        Lines {
            // Stacks are `&str` and counts ASCII digits.
            text: String::from_utf8(text).unwrap_or_default(),
            ends,
        }
    }

    fn iter(&self) -> impl Iterator<Item = &str> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(a, &b)| &self.text[a..b])
    }
}

fn render(lines: &Lines, opt: &mut Options<'_>, w: impl Write) -> Result<(), ExportError> {
    if lines.ends.is_empty() {
        return Err(ExportError::Empty {
            what: "flame graph: the profile has no stack with a count of at least 1".into(),
        });
    }
    flamegraph::from_lines(opt, lines.iter(), w).map_err(|e| ExportError::Flamegraph(e.to_string()))
}

/// Draws `p`'s column `value` as a flame graph SVG.
pub fn write_flamegraph<W: Write>(
    w: W,
    p: &Profile,
    r: &Resolver<'_>,
    value: usize,
    o: &FlameOptions,
) -> Result<(), ExportError> {
    check_value(p, value)?;
    let lines = Lines::from(counted(&fold(p, r, value), 1.0));
    render(&lines, &mut inferno_options(o), w)
}

/// Draws the differential flame graph of `before` -> `after` (see
/// [`crate::write_folded_diff`] for the pairing and normalisation).
pub fn write_diff_flamegraph<W: Write>(
    w: W,
    before: (&Profile, &Resolver<'_>, usize),
    after: (&Profile, &Resolver<'_>, usize),
    d: &DiffOptions,
    o: &FlameOptions,
) -> Result<(), ExportError> {
    check_value(before.0, before.2)?;
    check_value(after.0, after.2)?;
    let (m, scale) = fold_diff(before, after, d);
    let lines = Lines::from(counted(&m, scale));
    render(&lines, &mut inferno_options(o), w)
}
