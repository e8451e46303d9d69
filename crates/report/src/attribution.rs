//! How every report states what its function rows stand on: per module, the share of
//! samples in no function, and the share in functions recovered from the call-frame
//! information without a name (`gawk!sub_46dd00`). The counts come from
//! `proftrust_binary::Symbolizer::attribution_by_module`, the one symbol source.

pub use proftrust_model::ModuleAttribution;

/// Modules listed by name before the rest are summed up.
const LISTED: usize = 6;

fn pct(n: u64, of: u64) -> String {
    format!("{:.1}%", 100.0 * n as f64 / of.max(1) as f64)
}

/// The lines of a text report as `(label, text)`: `("no function", "gawk 0.3% (52 of 15034),
/// libc.so.6 0.0% (0 of 410)")` (most samples first; modules past the sixth with every
/// sample in a function are counted, not named), and, when some function was recovered,
/// `("recovered", "gawk 60.8% in gawk!sub_ADDR functions (...)")`. Empty without samples.
pub fn attribution_lines(v: &[ModuleAttribution]) -> Vec<(&'static str, String)> {
    let mut m: Vec<&ModuleAttribution> = v.iter().filter(|m| m.samples > 0).collect();
    if m.is_empty() {
        return Vec::new();
    }
    m.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| a.module.cmp(&b.module))
    });
    let mut parts = Vec::new();
    let mut quiet = 0usize;
    for (i, x) in m.iter().enumerate() {
        if i >= LISTED && x.unattributed == 0 {
            quiet += 1;
            continue;
        }
        parts.push(format!(
            "{} {} ({} of {})",
            crate::quote_name(&x.module),
            pct(x.unattributed, x.samples),
            x.unattributed,
            x.samples
        ));
    }
    if quiet > 0 {
        parts.push(format!(
            "{quiet} more module{} with every sample in a function",
            if quiet == 1 { "" } else { "s" }
        ));
    }
    let mut out = vec![("no function", parts.join(", "))];
    let rec: Vec<String> = m
        .iter()
        .filter(|x| x.recovered > 0)
        .map(|x| {
            format!(
                "{} {} in {}!sub_ADDR functions",
                crate::quote_name(&x.module),
                pct(x.recovered, x.samples),
                crate::quote_name(&x.module)
            )
        })
        .collect();
    if !rec.is_empty() {
        out.push((
            "recovered",
            format!(
                "{} (.eh_frame ranges no symbol names: boundaries exact, names made up)",
                rec.join(", ")
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(module: &str, named: u64, recovered: u64, unattributed: u64) -> ModuleAttribution {
        ModuleAttribution {
            module: module.into(),
            samples: named + recovered + unattributed,
            named,
            recovered,
            unattributed,
        }
    }

    #[test]
    fn lines_name_every_module_with_unattributed_samples() {
        let v = vec![
            m("libc.so.6", 400, 0, 10),
            m("gawk", 40, 9000, 3),
            m("[kernel.kallsyms]", 0, 0, 7),
        ];
        let l = attribution_lines(&v);
        assert_eq!(
            l,
            vec![
                ("no function", "gawk 0.0% (3 of 9043), libc.so.6 2.4% (10 of 410), [kernel.kallsyms] 100.0% (7 of 7)".to_string()),
                ("recovered", "gawk 99.5% in gawk!sub_ADDR functions (.eh_frame ranges no symbol names: boundaries exact, names made up)".to_string()),
            ]
        );
        let many: Vec<ModuleAttribution> = (0..9)
            .map(|i| m(&format!("lib{i}.so"), 10 - i, 0, 0))
            .collect();
        let l = attribution_lines(&many);
        assert_eq!(l.len(), 1);
        assert!(
            l[0].1
                .ends_with("3 more modules with every sample in a function"),
            "{l:?}"
        );
        assert!(attribution_lines(&[]).is_empty());
    }
}
