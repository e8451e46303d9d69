//! Bursty tracing's dispatch check (seed 004 §4.1, after Hirzel & Chilimbi and Arnold &
//! Ryder), as a state machine over *path boundaries*.
//!
//! Seed 004 §4.1: "nCheck is set to nCheckThresh and nInstr is set to zero. Execution begins
//! in the checking code, and every time it passes through the dispatch check the nCheck is
//! decremented. Once nCheck reaches zero, nInstr is set to nInstrThresh and execution
//! transfers to the instrumented code. Each iteration through the back edge nInstr is
//! decremented. Once nInstr reaches zero, nCheck is initialized to its threshold again, and
//! execution transfers back to the clean code." §4.2 sets nInstrThresh = 1 so that one
//! acyclic path is timed per burst.
//!
//! Reading chosen here: every probe call is one dispatch check (a path boundary). The check
//! that brings nCheck to zero *starts* a timed path; each check while instrumented *ends*
//! the timed path in progress (and starts another unless nInstr reaches zero). So a cycle of
//! `nCheckThresh + nInstrThresh` boundaries times `nInstrThresh` paths, and after `B`
//! boundaries (no jitter) exactly
//! `(B div P)·I + clamp(B mod P − C, 0, I)` paths are timed, `P = C + I`.
//!
//! Optional jitter (not in the paper; against aliasing with periodic path sequences, as
//! py-spy jitters its interval): each reset of nCheck adds `U(0, C/8)` drawn from a seeded
//! splitmix64 generator. The C header (`include/proftrust_probe.h`) implements the same
//! machine and generator, so both give the same sequence for the same seed.
//!
//! `nCheckThresh = 0` means "time every path" (no sampling).

/// Parameters of the dispatch check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BurstyOptions {
    /// nCheckThresh: boundaries passed in the clean code before a burst; 0 = every path is
    /// timed. Default 10000 (seed 004 §4.1: "10,000 in our case").
    pub n_check: u64,
    /// nInstrThresh: paths timed per burst, at least 1. Default 1 (seed 004 §4.2).
    pub n_instr: u64,
    /// Add `U(0, n_check/8)` to every nCheck reset. Default false.
    pub randomize: bool,
    /// Seed of the jitter. Default 0.
    pub seed: u64,
}

impl Default for BurstyOptions {
    fn default() -> Self {
        BurstyOptions {
            n_check: 10_000,
            n_instr: 1,
            randomize: false,
            seed: 0,
        }
    }
}

/// What a boundary means for timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    /// The path that ends at this boundary was timed.
    pub ends_timed: bool,
    /// The path that starts at this boundary is timed.
    pub starts_timed: bool,
}

/// splitmix64 (Steele, Lea & Flood 2014): the jitter generator, also in the C header.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The nCheck / nInstr counters.
#[derive(Debug, Clone)]
pub struct Bursty {
    opts: BurstyOptions,
    n_check: u64,
    n_instr: u64,
    timing: bool,
    rng: u64,
}

impl Bursty {
    /// A counter in the clean code, nCheck at its (jittered) threshold. `n_instr` below 1
    /// is taken as 1.
    pub fn new(mut opts: BurstyOptions) -> Bursty {
        opts.n_instr = opts.n_instr.max(1);
        let mut b = Bursty {
            opts,
            n_check: 0,
            n_instr: 0,
            timing: false,
            rng: opts.seed,
        };
        b.n_check = b.reset_value();
        b
    }

    /// The options in force.
    pub fn options(&self) -> BurstyOptions {
        self.opts
    }

    fn reset_value(&mut self) -> u64 {
        let c = self.opts.n_check;
        if self.opts.randomize && c >= 8 {
            c + splitmix64(&mut self.rng) % (c / 8 + 1)
        } else {
            c
        }
    }

    /// True while a timed path is in progress.
    pub fn timing(&self) -> bool {
        self.timing
    }

    /// One dispatch check.
    pub fn boundary(&mut self) -> Step {
        if self.opts.n_check == 0 {
            let ends_timed = self.timing;
            self.timing = true;
            return Step {
                ends_timed,
                starts_timed: true,
            };
        }
        if !self.timing {
            self.n_check -= 1;
            if self.n_check == 0 {
                self.n_instr = self.opts.n_instr;
                self.timing = true;
                return Step {
                    ends_timed: false,
                    starts_timed: true,
                };
            }
            return Step {
                ends_timed: false,
                starts_timed: false,
            };
        }
        self.n_instr -= 1;
        if self.n_instr == 0 {
            self.n_check = self.reset_value();
            self.timing = false;
            Step {
                ends_timed: true,
                starts_timed: false,
            }
        } else {
            Step {
                ends_timed: true,
                starts_timed: true,
            }
        }
    }
}

/// Timed paths after `boundaries` checks without jitter (the closed form of the module
/// doc), for checking a run's sample count.
pub fn expected_timed(boundaries: u64, n_check: u64, n_instr: u64) -> u64 {
    let i = n_instr.max(1);
    if n_check == 0 {
        return boundaries.saturating_sub(1);
    }
    let p = n_check + i;
    (boundaries / p) * i + (boundaries % p).saturating_sub(n_check).min(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(opts: BurstyOptions, n: usize) -> Vec<Step> {
        let mut b = Bursty::new(opts);
        (0..n).map(|_| b.boundary()).collect()
    }

    /// nCheck = 3, nInstr = 2: boundaries 3 and 8 start bursts; 4, 5 and 9, 10 end timed
    /// paths (4 also starts the second path of the burst).
    #[test]
    fn hand_traced_sequence() {
        let s = run(
            BurstyOptions {
                n_check: 3,
                n_instr: 2,
                ..Default::default()
            },
            10,
        );
        let ends: Vec<usize> = (0..10)
            .filter(|&k| s[k].ends_timed)
            .map(|k| k + 1)
            .collect();
        let starts: Vec<usize> = (0..10)
            .filter(|&k| s[k].starts_timed)
            .map(|k| k + 1)
            .collect();
        assert_eq!(ends, vec![4, 5, 9, 10]);
        assert_eq!(starts, vec![3, 4, 8, 9]);
    }

    #[test]
    fn closed_form_matches_machine() {
        for (c, i) in [(1, 1), (3, 2), (10, 1), (7, 3), (0, 1)] {
            for n in [0usize, 1, 2, 5, 11, 12, 13, 100, 1001] {
                let s = run(
                    BurstyOptions {
                        n_check: c,
                        n_instr: i,
                        ..Default::default()
                    },
                    n,
                );
                let timed = s.iter().filter(|x| x.ends_timed).count() as u64;
                assert_eq!(timed, expected_timed(n as u64, c, i), "C={c} I={i} B={n}");
            }
        }
    }

    /// Every path is timed with nCheck = 0; with jitter the gaps lie in [C, C + C/8] and the
    /// sequence repeats for a seed.
    #[test]
    fn every_path_and_jitter() {
        let s = run(
            BurstyOptions {
                n_check: 0,
                ..Default::default()
            },
            4,
        );
        assert_eq!(
            s.iter()
                .map(|x| (x.ends_timed, x.starts_timed))
                .collect::<Vec<_>>(),
            vec![(false, true), (true, true), (true, true), (true, true)]
        );
        let o = BurstyOptions {
            n_check: 80,
            n_instr: 1,
            randomize: true,
            seed: 42,
        };
        let a = run(o, 100_000);
        assert_eq!(
            a.iter().map(|x| x.ends_timed).collect::<Vec<_>>(),
            run(o, 100_000)
                .iter()
                .map(|x| x.ends_timed)
                .collect::<Vec<_>>()
        );
        let ends: Vec<usize> = (0..a.len()).filter(|&k| a[k].ends_timed).collect();
        let gaps: Vec<usize> = ends.windows(2).map(|w| w[1] - w[0]).collect();
        // Gap = nCheck reset value + nInstr (1): in [81, 91].
        assert!(gaps.iter().all(|&g| (81..=91).contains(&g)), "{gaps:?}");
        assert!(gaps.iter().any(|&g| g != gaps[0]));
    }

    /// splitmix64 reference values (first outputs for seed 0, as published with the
    /// algorithm: 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4).
    #[test]
    fn splitmix_reference() {
        let mut s = 0;
        assert_eq!(splitmix64(&mut s), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix64(&mut s), 0x6e78_9e6a_a1b9_65f4);
    }
}
