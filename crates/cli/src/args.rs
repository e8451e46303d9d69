//! Parsers of numeric flags, each with a documented range (`docs/cli-limits.md`), used from
//! the `Args` structs as `value_parser = args::...` one-liners. A value out of range is a
//! clap usage error (exit status 2) that names the range; nothing downstream sees NaN, an
//! infinity, a negative duration or a count that would need absurd memory or time.

use std::time::Duration;

/// Longest `--timeout`: 30 days, in seconds.
pub const MAX_TIMEOUT_SECS: f64 = 30.0 * 86_400.0;

/// Largest skid, in cycles (`correct --skid`, `audit --correct-skid`, `vpmu --skid`,
/// `calibrate --skid`). Measured skids are tens of cycles (seed 000 reports 10 to 70). The
/// flow correction walks the code a skid can cross, which costs about the square of the
/// skid: on a one-loop program 0.4 s at 100 cycles, 3 s at 1000, 40 s at 4096.
pub const MAX_SKID: u64 = 1024;

/// A number as typed: digits (with optional `_` separators) or scientific notation that is
/// an exact integer (`1e6`, `2.5e3`).
fn integer(s: &str) -> Option<u128> {
    let t = s.trim().replace('_', "");
    if t.is_empty() {
        return None;
    }
    if t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse::<u128>().ok();
    }
    let f: f64 = t.parse().ok()?;
    if !f.is_finite() || f < 0.0 || f.fract() != 0.0 || f >= 3.4e38 {
        return None;
    }
    Some(f as u128)
}

/// `lo..=hi` as the message shows it.
fn range_text(lo: u64, hi: u64) -> String {
    format!("{lo} to {hi}")
}

/// An integer flag in `lo..=hi`, as type `T`.
pub fn int<T>(lo: u64, hi: u64) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
{
    move |s: &str| {
        let n = integer(s)
            .ok_or_else(|| format!("not a whole number (expected {})", range_text(lo, hi)))?;
        if n < u128::from(lo) || n > u128::from(hi) {
            return Err(format!("out of range (expected {})", range_text(lo, hi)));
        }
        T::try_from(n as u64).map_err(|_| format!("out of range (expected {})", range_text(lo, hi)))
    }
}

/// Largest sampling period (`-c` of `record` and `audit`, `audit --sweep`): 10^15 events or
/// ns (11.6 days of a clock event).
pub const MAX_PERIOD: u64 = 1_000_000_000_000_000;

/// A sampling period (`record -c`, `audit -c`, `audit --sweep`, one parser for all): a
/// whole number as [`int`] takes it (`100003`, `1e6`, `1_000_000`) or with a binary suffix
/// (`64K` = 2^16, `16M` = 16 * 2^20, `10G` = 10 * 2^30), from 1 to [`MAX_PERIOD`].
pub fn period(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1u128 << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1u128 << 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 1u128 << 30),
        _ => (t, 1),
    };
    let expected = format!(
        "expected {} events or ns, as 100003, 1e6, 64K, 16M or 10G",
        range_text(1, MAX_PERIOD)
    );
    let n = integer(num).ok_or_else(|| format!("not a period ({expected})"))?;
    match n.checked_mul(mult) {
        Some(v) if v >= 1 && v <= u128::from(MAX_PERIOD) => Ok(v as u64),
        _ => Err(format!("out of range ({expected})")),
    }
}

/// A finite real number.
fn real(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| "not a number".to_string())?;
    if !v.is_finite() {
        return Err("must be a finite number".into());
    }
    Ok(v)
}

/// `--timeout SECS`: a finite number of seconds, `0 < SECS <= 2592000` (30 days).
pub fn timeout(s: &str) -> Result<Duration, String> {
    let v = real(s)?;
    if !(v > 0.0 && v <= MAX_TIMEOUT_SECS) {
        return Err(format!(
            "must be more than 0 and at most {MAX_TIMEOUT_SECS} seconds (30 days)"
        ));
    }
    Ok(Duration::from_secs_f64(v))
}

/// A share in `[0, 1]` (`--rank-threshold`, `--hot-share`).
pub fn share(s: &str) -> Result<f64, String> {
    let v = real(s)?;
    if !(0.0..=1.0).contains(&v) {
        return Err("must be a share from 0 to 1".into());
    }
    Ok(v)
}

/// A share in `(0, 1]` (`--cover`).
pub fn positive_share(s: &str) -> Result<f64, String> {
    let v = real(s)?;
    if !(v > 0.0 && v <= 1.0) {
        return Err("must be a share above 0 and at most 1".into());
    }
    Ok(v)
}

/// A skid in cycles, `0 <= S <= 1024` (fractions allowed).
pub fn skid(s: &str) -> Result<f64, String> {
    let v = real(s)?;
    if !(v >= 0.0 && v <= MAX_SKID as f64) {
        return Err(format!("must be from 0 to {MAX_SKID} cycles"));
    }
    Ok(v)
}

/// A spread of cycles, `0 <= W <= 1024`.
pub fn spread(s: &str) -> Result<f64, String> {
    skid(s)
}

/// A utilisation strictly between 0 and 1.
pub fn utilisation(s: &str) -> Result<f64, String> {
    let v = real(s)?;
    if !(v > 0.0 && v < 1.0) {
        return Err("must be above 0 and below 1".into());
    }
    Ok(v)
}

/// `R = granularity / interval` of `simulate --preset sweep`: `0 < R <= 1000`.
pub fn ratio(s: &str) -> Result<f64, String> {
    let v = real(s)?;
    if !(v > 0.0 && v <= 1000.0) {
        return Err("must be above 0 and at most 1000".into());
    }
    Ok(v)
}

/// The memory this machine has available (`MemAvailable` of `/proc/meminfo`), in bytes.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// `12 GB`, `2 TB`, `640 KB` (decimal units).
pub fn human_bytes(b: f64) -> String {
    let units = ["B", "KB", "MB", "GB", "TB", "PB", "EB"];
    let mut v = b;
    let mut i = 0;
    while v >= 1000.0 && i + 1 < units.len() {
        v /= 1000.0;
        i += 1;
    }
    if v >= 1e3 {
        format!("{v:.1e} {}", units[i])
    } else if v >= 10.0 || i == 0 {
        format!("{v:.0} {}", units[i])
    } else {
        format!("{v:.1} {}", units[i])
    }
}

/// Refuses work whose estimated memory exceeds what the machine has available (or
/// `fallback` bytes when that is unknown): `"--reps 1e12 needs ~2 TB of memory (this
/// machine has 3.1 GB available); use --reps 1000000 or less"`.
pub fn check_memory(
    flag: &str,
    value: &str,
    bytes: f64,
    fallback: u64,
    fix: impl FnOnce(f64) -> String,
) -> anyhow::Result<()> {
    let have = available_memory().unwrap_or(fallback) as f64;
    if bytes > have {
        anyhow::bail!(
            "{flag} {value} needs ~{} of memory (this machine has {} available); {}",
            human_bytes(bytes),
            human_bytes(have),
            fix(have)
        );
    }
    Ok(())
}

/// `--skid-dist`: `uniform:LO:HI`, `normal:MEAN:SD` or `constant:S`, in cycles from 0 to
/// [`MAX_SKID`].
pub fn skid_dist(s: &str) -> Result<proftrust_pipeline::vpmu::SkidDist, String> {
    use proftrust_pipeline::vpmu::SkidDist;
    let max = MAX_SKID as f64;
    let cycles = |x: &str| -> Result<f64, String> {
        let v: f64 = x.parse().map_err(|_| format!("{x:?} is not a number"))?;
        if !(v.is_finite() && (0.0..=max).contains(&v)) {
            return Err(format!("{x:?} must be from 0 to {max} cycles"));
        }
        Ok(v)
    };
    match s.split(':').collect::<Vec<_>>().as_slice() {
        ["uniform", lo, hi] => {
            let (lo, hi) = (cycles(lo)?, cycles(hi)?);
            if lo > hi {
                return Err("LO must not exceed HI".into());
            }
            Ok(SkidDist::Uniform {
                lo: lo as u64,
                hi: hi as u64,
            })
        }
        ["normal", m, sd] => Ok(SkidDist::Normal {
            mean: cycles(m)?,
            sd: cycles(sd)?,
        }),
        ["constant", s0] => Ok(SkidDist::Constant(cycles(s0)? as u64)),
        _ => Err("expected uniform:LO:HI, normal:MEAN:SD or constant:S".into()),
    }
}

/// `--latency 0xSVMA=CYCLES`: a module-relative address (hex) and its cycles.
pub fn latency(s: &str) -> Result<(u64, u32), String> {
    let (addr, cyc) = s.split_once('=').ok_or("expected 0xADDR=CYCLES")?;
    let a = u64::from_str_radix(addr.trim_start_matches("0x"), 16)
        .map_err(|_| format!("{addr:?} is not a hex address"))?;
    let c = cyc
        .parse()
        .map_err(|_| format!("{cyc:?} is not a cycle count"))?;
    Ok((a, c))
}

/// Value parser of `export --to`: the formats of [`proftrust_pipeline::export::Target`],
/// each with its description in `--help`.
pub fn export_target(
) -> impl clap::builder::TypedValueParser<Value = proftrust_pipeline::export::Target> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    use proftrust_pipeline::export::Target;
    PossibleValuesParser::new(
        Target::ALL.map(|t| PossibleValue::new(t.name()).help(t.description())),
    )
    .map(|s| Target::parse(&s).expect("one of the possible values"))
}

/// Value parser of a flag that takes a library enum by name: the names of its
/// [`Named`](proftrust_model::named::Named) table, each with its description in `--help`,
/// parsed by the enum's `FromStr` (one enum, no copy of it in the CLI).
pub fn named<T>() -> impl clap::builder::TypedValueParser<Value = T>
where
    T: proftrust_model::named::Named + std::str::FromStr + Clone + Send + Sync,
{
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new(T::ALL.iter().map(|(_, name, help)| match *help {
        // No description: `--help` lists the names only, as for a value without one.
        "" => PossibleValue::new(*name),
        help => PossibleValue::new(*name).help(help),
    }))
    .map(|s| {
        s.parse::<T>()
            .unwrap_or_else(|_| unreachable!("{s} is one of the possible values"))
    })
}

/// `--seed N`, the same in every command that draws (`audit`, `record`, `vpmu`, `vpp`,
/// `correct`, `simulate`, `calibrate`): default [`proftrust_pipeline::DEFAULT_SEED`], printed
/// in the text report (or as a note by commands that write a file) and stored in the JSON
/// and in written files (docs/ARCHITECTURE.md, "Randomness").
#[derive(Debug, Clone, clap::Args)]
pub struct Seed {
    /// Seed of every random choice (0 to 2^64-1): printed, and stored in the report
    /// and in written files; the same seed and inputs make the same choices.
    #[arg(long, value_name = "N", default_value_t = proftrust_pipeline::DEFAULT_SEED)]
    pub seed: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One parser for every `-c`: suffixes, scientific notation, separators; 0 and more
    /// than 10^15 refused (`record -c 10G` was refused while `audit -c 10G` was taken).
    #[test]
    fn periods_parse_the_same_everywhere() {
        assert_eq!(period("64K"), Ok(65536));
        assert_eq!(period("16M"), Ok(16 << 20));
        assert_eq!(period("10G"), Ok(10 << 30));
        assert_eq!(period("100003"), Ok(100003));
        assert_eq!(period("1e6"), Ok(1_000_000));
        assert_eq!(period("1_000"), Ok(1000));
        for bad in ["0", "x", "-5", "2e15", "1000000G", "K", "1.5"] {
            assert!(period(bad).is_err(), "{bad}");
        }
    }

    /// Every parser against the values of the issue-20 campaign: each case is (parser,
    /// input, accepted?).
    #[test]
    fn flag_parsers_table() {
        let cases: &[(&str, &str, bool)] = &[
            ("timeout", "1e30", false),
            ("timeout", "NaN", false),
            ("timeout", "-1", false),
            ("timeout", "0", false),
            ("timeout", "inf", false),
            ("timeout", "2592001", false),
            ("timeout", "0.25", true),
            ("timeout", "2592000", true),
            ("share", "NaN", false),
            ("share", "-0.1", false),
            ("share", "1.5", false),
            ("share", "0", true),
            ("share", "1", true),
            ("positive_share", "0", false),
            ("positive_share", "0.9", true),
            ("skid", "1000000", false),
            ("skid", "10000", false),
            ("skid", "-3", false),
            ("skid", "NaN", false),
            ("skid", "37", true),
            ("skid", "1024", true),
            ("skid", "1025", false),
            ("utilisation", "1", false),
            ("utilisation", "0.5", true),
            ("ratio", "0", false),
            ("ratio", "2.8", true),
            ("int", "18446744073709551615", false),
            ("int", "1e12", false),
            ("int", "-1", false),
            ("int", "0", false),
            ("int", "1.5", false),
            ("int", "", false),
            ("int", "1e6", true),
            ("int", "1_000", true),
            ("int", "1000000", true),
        ];
        let int = int::<u64>(1, 1_000_000);
        for &(p, input, ok) in cases {
            let got = match p {
                "timeout" => timeout(input).is_ok(),
                "share" => share(input).is_ok(),
                "positive_share" => positive_share(input).is_ok(),
                "skid" => skid(input).is_ok(),
                "utilisation" => utilisation(input).is_ok(),
                "ratio" => ratio(input).is_ok(),
                "int" => int(input).is_ok(),
                _ => unreachable!(),
            };
            assert_eq!(got, ok, "{p}({input:?})");
        }
        assert_eq!(int("1e6"), Ok(1_000_000));
        assert_eq!(timeout("0.5"), Ok(Duration::from_millis(500)));
        assert!(int("0").unwrap_err().contains("1 to 1000000"));
        assert!(super::int::<u8>(0, 300)("300").is_err());
    }

    #[test]
    fn skid_dist_and_latency_by_hand() {
        use proftrust_pipeline::vpmu::SkidDist;
        assert_eq!(
            skid_dist("uniform:0:8"),
            Ok(SkidDist::Uniform { lo: 0, hi: 8 })
        );
        assert_eq!(skid_dist("constant:3"), Ok(SkidDist::Constant(3)));
        assert!(skid_dist("uniform:8:0")
            .unwrap_err()
            .contains("LO must not"));
        assert!(skid_dist("normal:1:9999")
            .unwrap_err()
            .contains("from 0 to 1024"));
        assert!(skid_dist("gauss:1").is_err());
        assert_eq!(latency("0x401000=200"), Ok((0x401000, 200)));
        assert!(latency("401000").is_err());
        assert!(latency("0xzz=1").unwrap_err().contains("hex address"));
    }

    #[test]
    fn human_units() {
        assert_eq!(human_bytes(2.0e12), "2.0 TB");
        assert_eq!(human_bytes(640_000.0), "640 KB");
    }
}
