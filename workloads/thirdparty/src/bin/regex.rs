//! regex (the `regex` crate): several patterns over generated text.
fn main() {
    let n = proftrust_workloads::size() as usize;
    let text = String::from_utf8(proftrust_workloads::text(150_000 * n, 3)).unwrap();
    let patterns = [
        r"\b\w+ion\b",
        r"[0-9]{3,4}",
        r"(?i)CACHE\s+(miss|load)",
        r"(\w+) \1",
        r"p[a-z]*h|c[a-z]*l",
        r"\.\s+[a-z]",
    ];
    let mut sum = 0u64;
    for p in patterns {
        // `(\w+) \1` has a backreference, which `regex` does not support: skip it cleanly.
        let Ok(re) = regex::Regex::new(p) else {
            continue;
        };
        sum += re.find_iter(&text).count() as u64;
        if let Some(c) = re.captures_iter(&text).take(1000).last() {
            sum += c.get(0).map_or(0, |m| m.len() as u64);
        }
    }
    proftrust_workloads::done("regex", sum);
}
