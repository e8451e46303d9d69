//! The CLI's numeric flag parsers (`crates/cli/src/args.rs`, compiled in here as it is): any
//! string gives a value inside the documented range or an error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "../../crates/cli/src/args.rs"]
#[allow(dead_code)]
mod args;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(t) = args::timeout(s) {
        assert!(t.as_secs_f64() > 0.0 && t.as_secs_f64() <= args::MAX_TIMEOUT_SECS);
    }
    for (f, lo, hi) in [
        (args::share as fn(&str) -> Result<f64, String>, 0.0, 1.0),
        (args::positive_share, f64::MIN_POSITIVE, 1.0),
        (args::skid, 0.0, args::MAX_SKID as f64),
        (args::spread, 0.0, args::MAX_SKID as f64),
        (args::utilisation, f64::MIN_POSITIVE, 1.0),
        (args::ratio, f64::MIN_POSITIVE, 1000.0),
    ] {
        if let Ok(v) = f(s) {
            assert!(v.is_finite() && v >= lo && v <= hi, "{s:?} -> {v}");
        }
    }
    // Ranges from the first bytes, the value from the rest.
    let (lo, hi) = match data {
        [a, b, ..] => (u64::from(*a) * 1000, u64::from(*a) * 1000 + u64::from(*b).pow(8)),
        _ => (1, 1_000_000),
    };
    if let Ok(v) = args::int::<u64>(lo, hi)(s) {
        assert!((lo..=hi).contains(&v), "{s:?} -> {v}");
    }
    if let Ok(v) = args::int::<u32>(0, u64::MAX)(s) {
        assert!(u64::from(v) <= u64::from(u32::MAX));
    }
    let _ = args::human_bytes(s.len() as f64 * 1e15);
    let _ = args::human_seconds(s.len() as f64 * 1e9);
});
