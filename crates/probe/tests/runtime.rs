//! The Rust probe runtime in this process. Oracle: the bursty state machine
//! (`proftrust_probe::Bursty`, itself checked against hand traces and the closed form)
//! tells which loop iterations are timed, and the branch outcomes of those iterations are
//! known from the loop index. A session is process-wide: the tests take `ONE_SESSION`.

use proftrust_probe::{
    boundary, branch, expected_timed, format, Bursty, BurstyOptions, ProbeOptions, Session,
};

static ONE_SESSION: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn looped(n: u64) -> u64 {
    let mut acc = 0u64;
    for i in 0..n {
        boundary();
        if branch(i % 3 == 0) {
            acc += i;
        }
        if branch(i % 2 == 0) {
            acc ^= i;
        }
    }
    acc
}

/// Bits of the paths the machine times, in order: the path starting at boundary `k`
/// (iteration `k`) ends timed at boundary `k + 1`.
fn expected_bits(o: BurstyOptions, n: u64) -> Vec<u64> {
    let mut b = Bursty::new(o);
    let steps: Vec<_> = (0..n).map(|_| b.boundary()).collect();
    (0..n as usize - 1)
        .filter(|&k| steps[k].starts_timed && steps[k + 1].ends_timed)
        .map(|k| u64::from(k % 3 == 0) | u64::from(k % 2 == 0) << 1)
        .collect()
}

#[test]
fn sessions() {
    let _one = ONE_SESSION.lock().unwrap_or_else(|e| e.into_inner());
    // 1. Counters and bits, no jitter.
    let bo = BurstyOptions {
        n_check: 3,
        n_instr: 2,
        randomize: false,
        seed: 0,
    };
    let s = Session::start(ProbeOptions {
        bursty: bo,
        calibration: 100,
        ..ProbeOptions::default()
    })
    .unwrap();
    // A second session while one runs is refused.
    assert!(Session::start(ProbeOptions::default()).is_err());
    // Another thread's boundaries are foreign.
    std::thread::spawn(|| {
        for _ in 0..10 {
            boundary();
        }
    })
    .join()
    .unwrap();
    let acc = looped(1000);
    assert_ne!(acc, 0);
    let f = s.finish();
    assert_eq!(f.boundaries, 1000);
    assert_eq!(f.foreign, 1);
    assert_eq!(f.samples.len() as u64, expected_timed(1000, 3, 2));
    let bits: Vec<u64> = f.samples.iter().map(|s| s.bits).collect();
    assert_eq!(bits, expected_bits(bo, 1000));
    assert!(f.samples.iter().all(|s| s.nbits == 2));
    assert_eq!(f.calibration.iter().map(|c| c.1).sum::<u64>(), 100);
    assert_eq!(f.calibration_exit.iter().map(|c| c.1).sum::<u64>(), 100);
    // One site: the boundary in `looped`, named by its source line.
    assert_eq!(f.sites.len(), 1, "{:?}", f.sites);
    let line = 1 + include_str!("runtime.rs")
        .lines()
        .position(|l| l == "        boundary();")
        .unwrap();
    assert!(
        f.sites[0].1.ends_with(&format!("runtime.rs:{line}")),
        "{:?}",
        f.sites
    );
    assert!(f.samples.iter().all(|s| s.entry == f.sites[0].0));
    assert!(f.tsc_per_ns > 0.0 && f.program_ticks > 0);
    assert_eq!((f.n_check, f.n_instr, f.dropped), (3, 2, 0));

    // 2. Every path, a full buffer, and the file written and read back.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("p.txt");
    let s = Session::start(ProbeOptions {
        bursty: BurstyOptions {
            n_check: 0,
            ..BurstyOptions::default()
        },
        capacity: 50,
        calibration: 10,
        output: None,
    })
    .unwrap();
    looped(101);
    let written = s.finish_and_write(Some(out.clone())).unwrap();
    assert_eq!(written, out);
    let f = format::read(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!((f.samples.len(), f.dropped), (50, 50));
    assert_eq!(f.boundaries, 101);
    // Every iteration timed from the first: bits of iterations 0..50.
    let want: Vec<u64> = (0..50u64)
        .map(|k| u64::from(k % 3 == 0) | u64::from(k % 2 == 0) << 1)
        .collect();
    assert_eq!(f.samples.iter().map(|s| s.bits).collect::<Vec<_>>(), want);
    assert!(
        std::fs::read_dir(dir.path()).unwrap().count() == 1,
        "no temporary left"
    );

    // 3. Jitter: the same seed gives the same sample count; the count lies between the
    //    bounds of the gap range [C + 1, C + C/8 + 1].
    let run = |seed| {
        let s = Session::start(ProbeOptions {
            bursty: BurstyOptions {
                n_check: 80,
                n_instr: 1,
                randomize: true,
                seed,
            },
            calibration: 0,
            ..ProbeOptions::default()
        })
        .unwrap();
        looped(100_000);
        s.finish()
    };
    let (a, b) = (run(5), run(5));
    assert_eq!(a.samples.len(), b.samples.len());
    let mut m = Bursty::new(BurstyOptions {
        n_check: 80,
        n_instr: 1,
        randomize: true,
        seed: 5,
    });
    let want = (0..100_000).filter(|_| m.boundary().ends_timed).count();
    assert_eq!(a.samples.len(), want);
    assert!(a.seed == 5 && a.randomize);

    // 4. Settings from the environment.
    std::env::set_var("PROFTRUST_PROBE_NCHECK", "12");
    std::env::set_var("PROFTRUST_PROBE_NINSTR", "3");
    let o = ProbeOptions::from_env().unwrap();
    assert_eq!((o.bursty.n_check, o.bursty.n_instr), (12, 3));
    std::env::set_var("PROFTRUST_PROBE_NINSTR", "0");
    assert!(ProbeOptions::from_env().is_err());
    std::env::set_var("PROFTRUST_PROBE_NINSTR", "x");
    let e = ProbeOptions::from_env().unwrap_err().to_string();
    assert!(e.contains("PROFTRUST_PROBE_NINSTR"), "{e}");
    std::env::remove_var("PROFTRUST_PROBE_NCHECK");
    std::env::remove_var("PROFTRUST_PROBE_NINSTR");
}

/// `looped` written with `probe_for!`: bursty tracing's clean and probed copies.
fn looped_for(n: u64) -> u64 {
    let mut acc = 0u64;
    proftrust_probe::probe_for!(i in 0..n, |p| {
        if p.branch(i % 3 == 0) {
            acc += i;
        }
        if p.branch(i % 2 == 0) {
            acc ^= i;
        }
    });
    acc
}

/// Returns at `i == stop`: iterations 0..=stop are boundaries.
fn first_at(n: u64, stop: u64) -> Option<u64> {
    proftrust_probe::probe_for!(i in 0..n, |p| {
        if p.branch(i == stop) {
            return Some(i);
        }
    });
    None
}

/// `continue` skips odd `i`, `break` ends at `i == stop`: iterations 0..=stop.
fn skip_and_stop(n: u64, stop: u64) -> u64 {
    let mut s = 0;
    proftrust_probe::probe_for!(i in 0..n, |_p| {
        if i % 2 == 1 {
            continue;
        }
        if i == stop {
            break;
        }
        s += i;
    });
    s
}

/// `probe_for!`: the same timed iterations, bits and counts as `boundary()` per iteration
/// (the machine's), the same results as a plain `for` loop with `break`, `continue` and
/// `return` in the body, and its one site named by the macro's line.
#[test]
fn probe_for_loops() {
    let _one = ONE_SESSION.lock().unwrap_or_else(|e| e.into_inner());
    let bo = BurstyOptions {
        n_check: 3,
        n_instr: 2,
        randomize: false,
        seed: 0,
    };
    let s = Session::start(ProbeOptions {
        bursty: bo,
        calibration: 100,
        ..ProbeOptions::default()
    })
    .unwrap();
    let plain = |n: u64| {
        let mut acc = 0u64;
        for i in 0..n {
            if i % 3 == 0 {
                acc += i;
            }
            if i % 2 == 0 {
                acc ^= i;
            }
        }
        acc
    };
    assert_eq!(looped_for(1000), plain(1000));
    let f = s.finish();
    assert_eq!(f.boundaries, 1000);
    assert_eq!(f.samples.len() as u64, expected_timed(1000, 3, 2));
    let bits: Vec<u64> = f.samples.iter().map(|s| s.bits).collect();
    assert_eq!(bits, expected_bits(bo, 1000));
    assert!(f.samples.iter().all(|s| s.nbits == 2));
    assert_eq!(f.calibration.iter().map(|c| c.1).sum::<u64>(), 100);
    assert_eq!(f.calibration_exit.iter().map(|c| c.1).sum::<u64>(), 100);
    let line = 1 + include_str!("runtime.rs")
        .lines()
        .position(|l| l.contains("probe_for!(i in 0..n, |p| {"))
        .unwrap();
    assert_eq!(f.sites.len(), 1, "{:?}", f.sites);
    assert!(
        f.sites[0].1.ends_with(&format!("runtime.rs:{line}")),
        "{:?}",
        f.sites
    );

    // Early exits: the held countdown is written back on every way out.
    let s = Session::start(ProbeOptions {
        bursty: BurstyOptions {
            n_check: 7,
            ..BurstyOptions::default()
        },
        calibration: 0,
        ..ProbeOptions::default()
    })
    .unwrap();
    assert_eq!(first_at(1001, 500), Some(500));
    assert_eq!(skip_and_stop(1001, 500), (0..500).step_by(2).sum::<u64>());
    assert_eq!(looped_for(1001), plain(1001));
    let f = s.finish();
    assert_eq!(f.boundaries, 501 + 501 + 1001);
    assert_eq!(f.samples.len() as u64, expected_timed(2003, 7, 1));
}
