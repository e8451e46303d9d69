//! The Rust probe runtime: [`boundary`] at path boundaries, [`branch`] around branch
//! conditions, a [`Session`] around the run.
//!
//! Cost model. In a [`probe_for!`](crate::probe_for) loop's clean copy a boundary is a
//! decrement and compare of a register (the dispatch check of seed 004 §4.1) and
//! `p.branch(c)` is `c`; elsewhere a [`boundary`] is one thread-local decrement and compare
//! and [`branch`] a thread-local flag test while no path is timed. Only the check that
//! brings nCheck to zero, and every boundary of a burst, calls the out-of-line slow path,
//! which reads the TSC, stores the timed path and starts the next.
//!
//! Timing (seed 004 §4.2): the TSC is read as the first thing the slow path does when a
//! path ends (`rdtscp`) and as the last thing before it returns when a path starts (`rdtsc;
//! lfence`), so a path's time is its own code plus a constant part of the probe (the
//! *bias*). At start, and again at exit, the session times `calibration` empty paths
//! through the very same code and keeps their histograms, from which the bias is estimated
//! and subtracted.
//!
//! Sites. Stable Rust cannot take a code address at a call site, so a Rust probe site is
//! identified by the module-relative address of its `core::panic::Location` record (static
//! data of the executable, one per call site, the same in every run of the binary); the
//! file's site table names it `file:line`. The C header uses the real return address.
//!
//! Threads: the thread that starts the session records; other threads' boundaries cost a
//! decrement and are not timed (the file counts those threads as `foreign`).

use crate::bursty::{splitmix64, BurstyOptions};
use crate::format::{ProbeError, ProbeFile, ProbeSample, MAX_BITS, VERSION};
use crate::sys;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::marker::PhantomData;
use std::panic::Location;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Settings of a probe session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeOptions {
    /// Bursty tracing counters. Default: [`BurstyOptions::default`] (nCheck 10000, nInstr 1).
    pub bursty: BurstyOptions,
    /// Timed paths kept; later ones are counted as dropped. Default 1 << 20.
    pub capacity: usize,
    /// Empty paths timed at start to measure the bias. Default 10000.
    pub calibration: u64,
    /// Where [`Session::finish_and_write`] writes. Default `proftrust-probe.PID.txt` in the
    /// working directory.
    pub output: Option<PathBuf>,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            bursty: BurstyOptions::default(),
            capacity: 1 << 20,
            calibration: 10_000,
            output: None,
        }
    }
}

fn env_u64(var: &'static str, default: u64) -> Result<u64, ProbeError> {
    match std::env::var(var) {
        Ok(v) => v.trim().parse().map_err(|_| ProbeError::Setting {
            var,
            value: v,
            why: "expected a non-negative integer",
        }),
        Err(_) => Ok(default),
    }
}

impl ProbeOptions {
    /// Options from the environment (what `proftrust vpp --source probe` sets), defaults
    /// for what is unset: `PROFTRUST_PROBE_NCHECK`, `PROFTRUST_PROBE_NINSTR`,
    /// `PROFTRUST_PROBE_RANDOMIZE` (0/1), `PROFTRUST_PROBE_SEED`,
    /// `PROFTRUST_PROBE_CAPACITY`, `PROFTRUST_PROBE_CALIBRATE`, `PROFTRUST_PROBE_OUT`.
    pub fn from_env() -> Result<ProbeOptions, ProbeError> {
        let d = ProbeOptions::default();
        let n_instr = env_u64("PROFTRUST_PROBE_NINSTR", d.bursty.n_instr)?;
        if n_instr == 0 {
            return Err(ProbeError::Setting {
                var: "PROFTRUST_PROBE_NINSTR",
                value: "0".into(),
                why: "at least one path per burst",
            });
        }
        Ok(ProbeOptions {
            bursty: BurstyOptions {
                n_check: env_u64("PROFTRUST_PROBE_NCHECK", d.bursty.n_check)?,
                n_instr,
                randomize: env_u64("PROFTRUST_PROBE_RANDOMIZE", 0)? != 0,
                seed: env_u64("PROFTRUST_PROBE_SEED", 0)?,
            },
            capacity: env_u64("PROFTRUST_PROBE_CAPACITY", d.capacity as u64)? as usize,
            calibration: env_u64("PROFTRUST_PROBE_CALIBRATE", d.calibration)?,
            output: std::env::var_os("PROFTRUST_PROBE_OUT").map(PathBuf::from),
        })
    }
}

/// The per-thread fast state.
struct Fast {
    /// Boundaries until the slow path (1 = the next one); 0 = not set up on this thread.
    countdown: Cell<u64>,
    /// A path is being timed: [`branch`] records.
    rec: Cell<bool>,
    bits: Cell<u64>,
    nbits: Cell<u32>,
}

thread_local! {
    static FAST: Fast = const {
        Fast {
            countdown: Cell::new(0),
            rec: Cell::new(false),
            bits: Cell::new(0),
            nbits: Cell::new(0),
        }
    };
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

static ACTIVE: AtomicBool = AtomicBool::new(false);
static FOREIGN: AtomicU64 = AtomicU64::new(0);

struct Local {
    opts: ProbeOptions,
    load_bias: u64,
    rng: u64,
    timing: bool,
    instr_left: u64,
    set_value: u64,
    boundaries: u64,
    entry: u64,
    t_in: u64,
    samples: Vec<ProbeSample>,
    dropped: u64,
    sites: HashMap<u64, &'static Location<'static>>,
    calibration: Option<BTreeMap<u64, u64>>,
}

impl Local {
    fn reset_value(&mut self) -> u64 {
        let c = self.opts.bursty.n_check;
        if c == 0 {
            1
        } else if self.opts.bursty.randomize && c >= 8 {
            c + splitmix64(&mut self.rng) % (c / 8 + 1)
        } else {
            c
        }
    }

    fn set(&mut self, f: &Fast, v: u64) {
        self.set_value = v;
        f.countdown.set(v);
    }

    fn start(&mut self, f: &Fast, site: &'static Location<'static>) {
        let at = (site as *const Location<'static> as u64).wrapping_sub(self.load_bias);
        self.entry = at;
        if self.calibration.is_none() {
            self.sites.entry(at).or_insert(site);
        }
        f.bits.set(0);
        f.nbits.set(0);
        f.rec.set(true);
        self.set(f, 1);
        self.timing = true;
    }

    /// The slow path: this boundary ends nCheck's countdown or a timed path. Returns true
    /// when a timed path starts here (the caller reads the TSC last).
    fn on_slow(&mut self, f: &Fast, site: &'static Location<'static>, t_end: u64) -> bool {
        self.boundaries += self.set_value;
        if !self.timing {
            self.instr_left = self.opts.bursty.n_instr.max(1);
            self.start(f, site);
            return true;
        }
        let ticks = t_end.wrapping_sub(self.t_in);
        if let Some(c) = self.calibration.as_mut() {
            *c.entry(ticks).or_insert(0) += 1;
        } else if self.samples.len() < self.opts.capacity {
            self.samples.push(ProbeSample {
                entry: self.entry,
                nbits: f.nbits.get(),
                bits: f.bits.get(),
                ticks,
            });
        } else {
            self.dropped += 1;
        }
        if self.opts.bursty.n_check == 0 || self.calibration.is_some() {
            self.start(f, site);
            return true;
        }
        self.instr_left -= 1;
        if self.instr_left == 0 {
            self.timing = false;
            f.rec.set(false);
            let v = self.reset_value();
            self.set(f, v);
            false
        } else {
            self.start(f, site);
            true
        }
    }
}

/// A path boundary (a dispatch check): put one at the top of each hot loop body and at the
/// entry of each hot function.
#[inline(always)]
#[track_caller]
pub fn boundary() {
    let site = Location::caller();
    FAST.with(|f| {
        let n = f.countdown.get();
        if n > 1 {
            f.countdown.set(n - 1);
        } else {
            slow(f, site);
        }
    });
}

#[cold]
#[inline(never)]
fn slow(f: &Fast, site: &'static Location<'static>) {
    let t_end = sys::tsc_end();
    let started = LOCAL.with(|l| match l.try_borrow_mut() {
        Ok(mut g) => match g.as_mut() {
            Some(local) => local.on_slow(f, site, t_end),
            None => {
                if ACTIVE.load(Ordering::Relaxed) {
                    FOREIGN.fetch_add(1, Ordering::Relaxed);
                }
                // Not the recording thread: stay in the clean code for good.
                f.countdown.set(u64::MAX);
                false
            }
        },
        Err(_) => false,
    });
    if started {
        let t = sys::tsc_start();
        LOCAL.with(|l| {
            if let Ok(mut g) = l.try_borrow_mut() {
                if let Some(local) = g.as_mut() {
                    local.t_in = t;
                }
            }
        });
    }
}

/// Which copy of a [`probe_for!`](crate::probe_for) body runs: the clean copy's
/// [`Clean::branch`] is the bare condition, the probed copy's [`Probed::branch`] records it.
#[derive(Debug, Clone, Copy)]
pub struct Clean;

/// The probed copy of a [`probe_for!`](crate::probe_for) body (see [`Clean`]).
#[derive(Debug, Clone, Copy)]
pub struct Probed;

impl Clean {
    /// The condition, unrecorded (the clean copy times nothing).
    #[inline(always)]
    pub fn branch(self, c: bool) -> bool {
        c
    }
}

impl Probed {
    /// The condition, recorded on the path being timed ([`branch`]).
    #[inline(always)]
    pub fn branch(self, c: bool) -> bool {
        branch(c)
    }
}

static NESTED: AtomicU64 = AtomicU64::new(0);

/// The clean copy's hold on the thread's countdown (used by [`probe_for!`](crate::probe_for)):
/// read once when the clean copy starts, counted down in a register, written back when it
/// ends, by whatever way (drop). When the thread's countdown is no longer the value read, a
/// probe ran inside the clean copy's body (misuse: `probe_for!` is for innermost loops);
/// [`Session::finish`] says so.
#[doc(hidden)]
pub struct Hold {
    n: u64,
    held: u64,
}

impl Hold {
    #[doc(hidden)]
    #[inline(always)]
    pub fn take() -> Hold {
        let n = FAST.with(|f| f.countdown.get());
        Hold { n, held: n }
    }

    /// One dispatch check in the clean copy: true when this boundary is the slow one (the
    /// iteration then runs in the probed copy).
    #[doc(hidden)]
    #[inline(always)]
    pub fn due(&mut self) -> bool {
        if self.n > 1 {
            self.n -= 1;
            false
        } else {
            true
        }
    }
}

impl Drop for Hold {
    #[inline(always)]
    fn drop(&mut self) {
        FAST.with(|f| {
            if f.countdown.get() != self.held {
                NESTED.fetch_add(1, Ordering::Relaxed);
            }
            f.countdown.set(self.n);
        });
    }
}

/// A loop with bursty tracing's two copies of its body (seed 004 §4.1: "The original
/// procedure is cloned, and the clone is embedded with instrumentation ... A dispatch check
/// is inserted at the back edges to manage execution transition between the two
/// versions"): `probe_for!(PAT in ITER, |p| { BODY })` is `for PAT in ITER { BODY }` where
/// every iteration is a path boundary and `p.branch(c)` records a branch outcome.
///
/// The clean copy runs nearly every iteration: a countdown in a register and `p.branch(c)`
/// = `c`, no call. When the countdown runs out the iteration runs in the probed copy: a
/// [`boundary`] (the timing), then the body with `p.branch` recording. `break`, `continue`,
/// `return` and `?` work as in a `for` loop. For innermost loops only: a probe inside the
/// body (a nested `probe_for!`, a [`boundary`], a probed function) would count against the
/// held countdown; [`Session::finish`] warns when that happened.
///
/// ```
/// let mut acc = 0u64;
/// proftrust_probe::probe_for!(i in 0..1000u64, |p| {
///     if p.branch(i % 3 == 0) {
///         acc += i;
///     }
/// });
/// assert_eq!(acc, (0..1000).filter(|i| i % 3 == 0).sum::<u64>());
/// ```
#[macro_export]
macro_rules! probe_for {
    ($pat:pat in $iter:expr, |$p:ident| $body:block) => {{
        let mut pt_iter = ::core::iter::IntoIterator::into_iter($iter);
        loop {
            let mut pt_due = ::core::option::Option::None;
            {
                let mut pt_hold = $crate::Hold::take();
                while let ::core::option::Option::Some(pt_x) = pt_iter.next() {
                    if pt_hold.due() {
                        pt_due = ::core::option::Option::Some(pt_x);
                        break;
                    }
                    #[allow(unused_variables)]
                    let $p = $crate::Clean;
                    let $pat = pt_x;
                    $body
                }
            }
            let ::core::option::Option::Some(pt_x) = pt_due else {
                break;
            };
            $crate::boundary();
            #[allow(unused_variables)]
            let $p = $crate::Probed;
            let $pat = pt_x;
            $body
        }
    }};
}

/// Records a branch outcome on the path being timed and returns it: `if branch(x < y)`.
#[inline(always)]
pub fn branch(c: bool) -> bool {
    FAST.with(|f| {
        if f.rec.get() {
            let n = f.nbits.get();
            if n < MAX_BITS {
                f.bits.set(f.bits.get() | u64::from(c) << n);
            }
            f.nbits.set(n.saturating_add(1));
        }
    });
    c
}

/// A probe session on the current thread: started by [`Session::start`], ended by
/// [`Session::finish`] (or [`Session::finish_and_write`]). Dropping it unfinished discards
/// what was recorded.
pub struct Session {
    start_tsc: u64,
    start_ns: u64,
    _not_send: PhantomData<*const ()>,
}

impl Session {
    /// Starts recording on this thread (times `opts.calibration` empty paths first). Fails
    /// when a session is already running.
    pub fn start(opts: ProbeOptions) -> Result<Session, ProbeError> {
        if ACTIVE.swap(true, Ordering::SeqCst) {
            return Err(ProbeError::Setting {
                var: "Session::start",
                value: String::new(),
                why: "a probe session is already running in this process",
            });
        }
        if !sys::has_rdtscp() {
            ACTIVE.store(false, Ordering::SeqCst);
            return Err(ProbeError::Setting {
                var: "Session::start",
                value: String::new(),
                why: "this CPU has no rdtscp instruction; the probe cannot time paths",
            });
        }
        FOREIGN.store(0, Ordering::SeqCst);
        NESTED.store(0, Ordering::SeqCst);
        let calib = opts.calibration;
        let local = Local {
            rng: opts.bursty.seed,
            opts,
            load_bias: sys::load_bias(),
            timing: false,
            instr_left: 0,
            set_value: 1,
            boundaries: 0,
            entry: 0,
            t_in: 0,
            samples: Vec::new(),
            dropped: 0,
            sites: HashMap::new(),
            calibration: Some(BTreeMap::new()),
        };
        LOCAL.with(|l| *l.borrow_mut() = Some(local));
        FAST.with(|f| f.countdown.set(1));
        // Calibration: empty paths through the same code as real ones (a `probe_for!` loop
        // with an empty body: a bare `boundary()` path costs a few instructions less).
        crate::probe_for!(_ in 0..=calib, |p| {});
        LOCAL.with(|l| {
            if let Some(local) = l.borrow_mut().as_mut() {
                FAST.with(|f| {
                    f.rec.set(false);
                    local.timing = false;
                    local.boundaries = 0;
                    let v = local.reset_value();
                    local.set(f, v);
                });
                local.samples.clear();
                local.sites.clear();
                // Keep the histogram aside: the map stays `Some` only while calibrating.
                let c = local.calibration.take();
                local.calibration = None;
                CALIB.with(|k| *k.borrow_mut() = c.unwrap_or_default());
            }
        });
        Ok(Session {
            start_tsc: sys::tsc_start(),
            start_ns: sys::monotonic_ns(),
            _not_send: PhantomData,
        })
    }

    /// Starts a session with [`ProbeOptions::from_env`].
    pub fn from_env() -> Result<Session, ProbeError> {
        Session::start(ProbeOptions::from_env()?)
    }

    /// Ends the session and returns what it recorded.
    pub fn finish(self) -> ProbeFile {
        let end_tsc = sys::tsc_end();
        let end_ns = sys::monotonic_ns();
        let pending = FAST.with(|f| f.countdown.get());
        // The calibration again, at exit (the file format's `ce` lines): empty paths timed
        // now that the CPU runs as it ran the program's paths; the boundaries they pass are
        // not the program's.
        let calib = LOCAL.with(|l| {
            l.borrow_mut()
                .as_mut()
                .filter(|x| x.opts.calibration > 0)
                .map(|local| {
                    let kept = (local.opts.calibration, local.boundaries, local.set_value);
                    local.calibration = Some(BTreeMap::new());
                    local.timing = false;
                    FAST.with(|f| local.set(f, 1));
                    kept
                })
        });
        let mut calibration_exit = Vec::new();
        if let Some((n, boundaries, set_value)) = calib {
            crate::probe_for!(_ in 0..=n, |p| {});
            LOCAL.with(|l| {
                if let Some(local) = l.borrow_mut().as_mut() {
                    calibration_exit = local
                        .calibration
                        .take()
                        .unwrap_or_default()
                        .into_iter()
                        .collect();
                    local.boundaries = boundaries;
                    local.set_value = set_value;
                }
            });
        }
        let local = LOCAL.with(|l| l.borrow_mut().take());
        let calibration: Vec<(u64, u64)> =
            CALIB.with(|k| std::mem::take(&mut *k.borrow_mut()).into_iter().collect());
        FAST.with(|f| {
            f.countdown.set(0);
            f.rec.set(false);
        });
        ACTIVE.store(false, Ordering::SeqCst);
        let nested = NESTED.swap(0, Ordering::SeqCst);
        if nested > 0 {
            eprintln!(
                "proftrust-probe: {nested} time(s) a probe_for! loop's clean copy met another probe in its body (a nested probe_for!, a boundary() or a probed function): the timed paths and boundaries around it are not exact; use probe_for! on innermost loops only and boundary() for the outer ones"
            );
        }
        let ticks = end_tsc.wrapping_sub(self.start_tsc);
        let ns = end_ns.saturating_sub(self.start_ns);
        let Some(l) = local else {
            return ProbeFile::default();
        };
        let mut sites: Vec<(u64, String)> = l
            .sites
            .iter()
            .map(|(a, loc)| (*a, format!("{}:{}", loc.file(), loc.line())))
            .collect();
        sites.sort();
        ProbeFile {
            version: VERSION,
            pid: std::process::id(),
            exe: std::env::current_exe()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            load_bias: l.load_bias,
            tsc_per_ns: if ns > 0 {
                ticks as f64 / ns as f64
            } else {
                0.0
            },
            n_check: l.opts.bursty.n_check,
            n_instr: l.opts.bursty.n_instr,
            randomize: l.opts.bursty.randomize,
            seed: l.opts.bursty.seed,
            boundaries: l.boundaries + l.set_value.saturating_sub(pending),
            program_ticks: ticks,
            dropped: l.dropped,
            foreign: FOREIGN.load(Ordering::SeqCst),
            sites,
            calibration,
            calibration_exit,
            samples: l.samples,
        }
    }

    /// Ends the session and writes the file to [`ProbeOptions::output`] (or
    /// `PROFTRUST_PROBE_OUT`, or `proftrust-probe.PID.txt`), through a temporary file renamed
    /// into place. Returns the path written.
    pub fn finish_and_write(self, output: Option<PathBuf>) -> Result<PathBuf, ProbeError> {
        let f = self.finish();
        let path = output
            .or_else(|| std::env::var_os("PROFTRUST_PROBE_OUT").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from(format!("proftrust-probe.{}.txt", f.pid)));
        let tmp = PathBuf::from(format!("{}.tmp.{}", path.display(), f.pid));
        let mut buf = Vec::new();
        crate::format::write(&mut buf, &f)?;
        std::fs::write(&tmp, &buf)?;
        if let Err(e) = std::fs::rename(&tmp, &path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(e.into());
        }
        Ok(path)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Unfinished: discard this thread's state so a new session can start.
        if LOCAL.with(|l| l.borrow_mut().take()).is_some() {
            FAST.with(|f| {
                f.countdown.set(0);
                f.rec.set(false);
            });
            ACTIVE.store(false, Ordering::SeqCst);
        }
    }
}

thread_local! {
    static CALIB: RefCell<BTreeMap<u64, u64>> = const { RefCell::new(BTreeMap::new()) };
}
