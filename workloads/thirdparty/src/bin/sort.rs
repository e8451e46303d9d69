//! sort (Rust std): sorting integers, strings and records, and a BTreeMap.
use std::collections::BTreeMap;

fn main() {
    let n = proftrust_workloads::size() as usize;
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut v: Vec<u64> = (0..12_000 * n).map(|_| rnd() % 1_000_000).collect();
    v.sort_unstable();
    let mut words: Vec<String> = (0..2_000 * n)
        .map(|_| format!("w{:x}", rnd() % 100_000))
        .collect();
    words.sort();
    words.dedup();
    let mut recs: Vec<(u32, u64)> = (0..6_000 * n)
        .map(|_| ((rnd() % 100) as u32, rnd()))
        .collect();
    recs.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let mut m = BTreeMap::new();
    for i in 0..6_000 * n {
        *m.entry(rnd() % 50_000).or_insert(0u64) += i as u64;
    }
    let mut sum = v[v.len() / 2] + words.len() as u64 + recs[0].1 % 1000;
    for k in (0..50_000).step_by(7) {
        sum = sum.wrapping_add(*m.get(&k).unwrap_or(&0));
    }
    sum = sum.wrapping_add(m.range(1000..2000).map(|(_, v)| v).sum::<u64>());
    proftrust_workloads::done("sort", sum);
}
