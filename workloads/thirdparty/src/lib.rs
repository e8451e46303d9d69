//! Shared by the workload programs: the size argument and a seeded text generator.

/// The size scale from the first argument (default 100: about 0.3-1 s natively).
pub fn size() -> u64 {
    std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(100)
}

/// Deterministic pseudo-random words (splitmix64, seed fixed): `n` bytes of lowercase
/// words, digits and punctuation, compressible like prose.
pub fn text(n: usize, seed: u64) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "the",
        "profile",
        "sample",
        "branch",
        "cache",
        "miss",
        "loop",
        "function",
        "call",
        "return",
        "thread",
        "exact",
        "count",
        "skid",
        "path",
        "context",
        "tree",
        "edge",
        "block",
        "instruction",
        "cycle",
        "memory",
        "load",
        "store",
        "and",
        "of",
        "to",
        "in",
    ];
    let mut s = seed;
    let mut next = move || {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut out = Vec::with_capacity(n + 16);
    while out.len() < n {
        let r = next();
        match r % 16 {
            0 => out.extend_from_slice(format!("{} ", r % 10_000).as_bytes()),
            1 => out.extend_from_slice(b". "),
            _ => {
                out.extend_from_slice(WORDS[(r >> 8) as usize % WORDS.len()].as_bytes());
                out.push(b' ');
            }
        }
    }
    out.truncate(n);
    out
}

/// Prints the workload's checksum (so the work cannot be optimised away) and exits 0.
pub fn done(name: &str, checksum: u64) {
    println!("{name}: checksum {checksum:#x}");
}
