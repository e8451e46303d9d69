//! The peer of the benchmark: a per-unit simulation of the paper's kind (seed 002 §4: "we
//! regard the smallest resource amount allocated to run tasks as a resource unit"), which
//! steps through every resource unit of the timeline in every repetition and takes a sample
//! each time an interval's worth of units has passed.
//!
//! `cargo run --release -p proftrust-sim --example per-unit-baseline [reps]` times `reps`
//! (default 20) repetitions of one 1M-unit cell (Table 2, granularity 30), checks that they
//! give exactly the sample counts of the run-based sampler for the same starts, and
//! extrapolates to Tables 2-6 at 1000 repetitions (22.25M units per repetition over the
//! 53 rows' 24 cells). Used by scripts/bench-sim.sh.

use proftrust_sim::sampling::{Scenario, StartTable};
use rand::{Rng, SeedableRng};
use std::time::Instant;

fn main() {
    let reps: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(1);
    let tl = Scenario::single(1_000_000, 0.8, 30)
        .generate(&mut rng)
        .expect("valid scenario");
    // The per-unit representation: one task id per resource unit.
    let mut units: Vec<u8> = Vec::with_capacity(tl.len() as usize);
    for (task, a, b) in tl.runs() {
        units.extend(std::iter::repeat_n(task as u8, (b - a) as usize));
    }
    let table = StartTable::new(&tl, 100).expect("interval 100");
    let t = Instant::now();
    let mut checked = 0;
    for _ in 0..reps {
        let t0: u64 = rng.gen_range(0..100);
        // Step every unit; a sample falls when the counter reaches the interval.
        let mut counts = [0u64; 2];
        let mut left = t0;
        for &u in &units {
            if left == 0 {
                counts[u as usize] += 1;
                left = 100;
            }
            left -= 1;
        }
        assert_eq!(&counts[..], table.counts(t0), "t0 {t0}");
        checked += 1;
    }
    let secs = t.elapsed().as_secs_f64();
    let per_step = secs / (reps as f64 * units.len() as f64);
    // Tables 2-6: 22 cells of 1M units (6 + 12 + 1 + 3), two of 100k and one of 50k (Table 6).
    let total_units_per_rep = 22.0e6 + 2.0 * 100e3 + 50e3;
    let extrapolated = per_step * total_units_per_rep * 1000.0;
    println!(
        "per-unit walk: {reps} repetitions of 1M units in {secs:.3} s ({:.2} ns per unit step, {checked} repetitions equal to the run-based counts)",
        per_step * 1e9
    );
    println!(
        "per-unit estimate for Tables 2-6 at 1000 repetitions: {extrapolated:.1} s on one core ({:.2e} unit steps)",
        total_units_per_rep * 1000.0
    );
}
