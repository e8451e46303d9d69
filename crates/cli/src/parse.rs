//! Value parsers of the command line shared by several subcommands.

/// `65536`, `64K`, `16M` (binary multiples, as seed 001 writes its periods).
pub fn period(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1u64 << 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 1u64 << 30),
        _ => (t, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("not a period: {s:?} (examples: 100000, 64K, 16M)"))?;
    match n.checked_mul(mult) {
        Some(0) | None => Err(format!("period out of range: {s:?}")),
        Some(v) => Ok(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_parse_with_binary_suffixes() {
        assert_eq!(period("64K"), Ok(65536));
        assert_eq!(period("16M"), Ok(16 << 20));
        assert_eq!(period("100000"), Ok(100000));
        assert!(period("0").is_err());
        assert!(period("x").is_err());
    }
}
