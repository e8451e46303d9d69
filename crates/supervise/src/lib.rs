//! # proftrust-supervise
//!
//! How proftrust supervises the programs it runs, in one place for the recorder
//! (`proftrust-record`) and the exact runners (`proftrust-exact`: QEMU, callgrind, native):
//!
//! * [`StopSignal`]: a flag a caller raises (the CLI does it from its SIGINT/SIGTERM/SIGHUP
//!   handler) to ask a running recording or count to stop its program like a timeout does
//!   and return what was sampled or counted so far;
//! * [`Run`]: one supervised run. While any run lives the process is a **child subreaper**
//!   (`PR_SET_CHILD_SUBREAPER`), so descendants orphaned by their parent's death (daemons,
//!   double forks) are reparented to it instead of init. When the run ends, its process
//!   group gets SIGKILL and [`sweep_orphans`] kills and reaps every orphaned descendant that
//!   left it. An observer ([`set_group_observer`]) hears of every process group a run starts
//!   and ends, so the CLI's watchdog can kill them if proftrust itself dies by SIGKILL;
//! * [`die_with_parent`]: `PR_SET_PDEATHSIG(SIGKILL)` for a child, so a program (or QEMU,
//!   valgrind) never outlives the proftrust thread that started it;
//! * [`kill_group`], [`signal_name`], [`TERM_GRACE`]: the shared vocabulary of the TERM-then-
//!   KILL escalation;
//! * [`default_signals`]: every child starts with default signal dispositions and an empty
//!   mask;
//! * [`exec::plan_exec`]: what `execve` runs (`#!` scripts resolved to their interpreter as
//!   the kernel does, the process name it gives), so every runner runs the same program and
//!   refuses up front what the kernel would refuse.
//!
//! The policy these implement is documented in `docs/processes.md`. All `unsafe` is in the
//! private `sys` module.
//!
//! The stop flag is shared by clones: the CLI's signal handler raises its copy, the running
//! recording sees it on its own (and names the signal in the outcome):
//!
//! ```
//! use proftrust_supervise::{signal_name, StopSignal};
//!
//! let stop = StopSignal::new();
//! let seen_by_the_run = stop.clone();
//! assert_eq!(seen_by_the_run.signal(), None);
//! stop.raise(15);
//! assert_eq!(seen_by_the_run.signal(), Some(15));
//! assert_eq!(signal_name(15), "SIGTERM");
//! ```
#![warn(missing_docs)]

pub mod exec;
mod sys;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long a stopped process group gets between SIGTERM (which lets QEMU, valgrind and the
/// program write what they have) and SIGKILL.
pub const TERM_GRACE: Duration = Duration::from_secs(2);

/// A request to stop, shared between the code that raises it (a signal handler, another
/// thread) and the supervisors that poll it. Cloning shares the flag.
///
/// The value is the number of the signal that asked for the stop (`SIGINT`, `SIGTERM`,
/// `SIGHUP`, or any positive number a caller chooses); the first raise wins.
#[derive(Debug, Clone, Default)]
pub struct StopSignal(Arc<AtomicI32>);

impl StopSignal {
    /// A flag that is not raised.
    pub fn new() -> StopSignal {
        StopSignal::default()
    }

    /// Raises the flag with signal number `sig` (> 0) unless it is raised already.
    /// Async-signal-safe (one atomic compare-and-swap).
    pub fn raise(&self, sig: i32) {
        let _ = self
            .0
            .compare_exchange(0, sig.max(1), Ordering::SeqCst, Ordering::SeqCst);
    }

    /// The signal that raised the flag, `None` while it is not raised.
    pub fn signal(&self) -> Option<i32> {
        match self.0.load(Ordering::SeqCst) {
            0 => None,
            s => Some(s),
        }
    }
}

impl PartialEq for StopSignal {
    /// Two handles are equal when they share the flag.
    fn eq(&self, other: &StopSignal) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// The conventional name of signal `sig` (`SIGSEGV`), `SIG<n>` for others.
pub fn signal_name(sig: i32) -> String {
    let n = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => return format!("SIG{sig}"),
    };
    n.to_string()
}

/// Sends `sig` to every process of group `pgid` (and to `pgid` itself, in case it left its
/// group); a vanished group is not an error. `pgid <= 1` is ignored.
pub fn kill_group(pgid: i32, sig: i32) {
    if pgid > 1 {
        sys::kill(-pgid, sig);
        sys::kill(pgid, sig);
    }
}

/// Makes the child of `cmd` receive SIGKILL when the thread that spawns it dies (also by
/// SIGKILL), and exit at once if proftrust is already gone when it starts. Linux ties the
/// parent-death signal to the spawning *thread*: spawn from a thread that lives as long as
/// the run (every runner of this workspace blocks in the spawning thread until the end).
pub fn die_with_parent(cmd: &mut Command) {
    sys::die_with_parent(cmd);
}

/// Starts the child of `cmd` with every signal at its default disposition and an empty
/// signal mask, whatever proftrust's own are (the Rust runtime ignores SIGPIPE; a shell
/// running proftrust in the background ignores SIGINT): every program proftrust runs, under
/// any runner, sees the same signal state, that of a program started from a login shell.
pub fn default_signals(cmd: &mut Command) {
    sys::default_signals_in(cmd);
}

/// [`default_signals`] for a child forked without [`Command`]: call it in the child before
/// `execve` (async-signal-safe).
pub fn reset_signals() -> std::io::Result<()> {
    sys::default_signals()
}

/// Called with `(pgid, true)` when a run's process group starts and `(pgid, false)` when it
/// is over. Set once per process (later calls are ignored).
pub fn set_group_observer(f: fn(i32, bool)) {
    let _ = OBSERVER.set(f);
}

static OBSERVER: OnceLock<fn(i32, bool)> = OnceLock::new();

/// Live runs: count (for the subreaper setting) and their process groups.
struct Registry {
    runs: usize,
    /// Subreaper setting before the first live run, to restore after the last.
    before: Option<bool>,
    /// Process groups of live runs, with how many runs use each.
    groups: BTreeMap<i32, usize>,
}

/// Held while a run spawns its program and registers its group, and while orphans are
/// looked for.
static SPAWNING: Mutex<()> = Mutex::new(());

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    runs: 0,
    before: None,
    groups: BTreeMap::new(),
});

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// One supervised run, from before its program starts until it is over.
///
/// [`Run::begin`] makes the process a child subreaper (counted: runs in several threads
/// share the setting; the last one restores what was there before); [`Run::started`]
/// registers the program's process group. Dropping the run unregisters the group, kills
/// what is left of it (SIGKILL) and sweeps the orphans ([`sweep_orphans`]), so nothing the
/// program started keeps running.
#[derive(Debug)]
pub struct Run {
    pgid: Option<i32>,
    /// Set by [`Run::left_no_processes`]: the drop sweeps no orphans.
    alone: bool,
}

impl Run {
    /// Starts supervising: call before spawning the program.
    pub fn begin() -> Run {
        let mut r = registry();
        if r.runs == 0 {
            r.before = sys::set_child_subreaper(true).ok();
        }
        r.runs += 1;
        Run {
            pgid: None,
            alone: false,
        }
    }

    /// Spawns the program with `spawn` and registers its process group (`pgid_of` the
    /// spawned value), with no sweep in between: a sweep of another thread would take the
    /// new child, in its own group and not yet registered, for an orphan.
    pub fn spawn<T, E>(
        &mut self,
        spawn: impl FnOnce() -> Result<T, E>,
        pgid_of: impl FnOnce(&T) -> i32,
    ) -> Result<T, E> {
        let _quiet = SPAWNING.lock().unwrap_or_else(|p| p.into_inner());
        let child = spawn()?;
        self.started(pgid_of(&child));
        Ok(child)
    }

    /// The program was spawned as the leader of process group `pgid` (prefer
    /// [`Run::spawn`], which keeps sweeps out of the way).
    pub fn started(&mut self, pgid: i32) {
        if pgid <= 1 || self.pgid.is_some() {
            return;
        }
        self.pgid = Some(pgid);
        *registry().groups.entry(pgid).or_default() += 1;
        if let Some(f) = OBSERVER.get() {
            f(pgid, true);
        }
    }

    /// The process group of the program, once started.
    pub fn pgid(&self) -> Option<i32> {
        self.pgid
    }

    /// The caller knows that the program, now ended and reaped, started no other process
    /// (the QEMU plugin saw no fork and no exec, and its exit hook ran): dropping the run
    /// still kills its process group but does not sweep `/proc` for orphans, which cannot
    /// exist (each sweep costs two scans of `/proc` 5 ms apart).
    pub fn left_no_processes(&mut self) {
        self.alone = true;
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(g) = self.pgid.take() {
            {
                let mut r = registry();
                if let Some(n) = r.groups.get_mut(&g) {
                    *n -= 1;
                    if *n == 0 {
                        r.groups.remove(&g);
                    }
                }
            }
            kill_group(g, libc::SIGKILL);
            if let Some(f) = OBSERVER.get() {
                f(g, false);
            }
        }
        if !self.alone {
            sweep_orphans();
        }
        let mut r = registry();
        r.runs -= 1;
        if r.runs == 0 {
            if let Some(before) = r.before.take() {
                let _ = sys::set_child_subreaper(before);
            }
        }
    }
}

/// One line of `/proc/PID/stat` that matters here.
#[derive(Debug, Clone, Copy)]
struct Stat {
    pid: i32,
    ppid: i32,
    pgrp: i32,
    zombie: bool,
}

fn stat_of(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name is parenthesised and may hold anything, so parse after the last ')'.
    let (_, rest) = text.rsplit_once(')')?;
    let mut f = rest.split_whitespace();
    let state = f.next()?;
    let ppid = f.next()?.parse().ok()?;
    let pgrp = f.next()?.parse().ok()?;
    Some(Stat {
        pid,
        ppid,
        pgrp,
        zombie: matches!(state, "Z" | "X"),
    })
}

/// Children of this process that are orphans of a supervised run: their parent died and
/// they were reparented here (the subreaper), and they are neither in this process's own
/// process group (children other code spawned) nor in the group of a run that is still
/// going (it handles its own at its end).
fn orphans() -> Vec<Stat> {
    let _quiet = SPAWNING.lock().unwrap_or_else(|p| p.into_inner());
    let me = sys::getpid();
    let mine = sys::getpgrp();
    let live: Vec<i32> = registry().groups.keys().copied().collect();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat_of)
        .filter(|s| s.ppid == me && s.pgrp != mine && !live.contains(&s.pgrp))
        .collect()
}

/// Process groups of orphans told to the observer by [`watch_orphans`], not yet swept.
static WATCHED: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// While runs go on: tells the group observer ([`set_group_observer`]) of every orphan (a
/// daemonised descendant, see [`sweep_orphans`]) not told yet, by its process group when it
/// leads one, so that a watchdog can kill it too if this process dies before the run ends.
/// Supervisors call it every half second or so.
pub fn watch_orphans() {
    let Some(f) = OBSERVER.get() else { return };
    for o in orphans() {
        if o.zombie {
            continue;
        }
        let g = if o.pgrp == o.pid { o.pgrp } else { o.pid };
        let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
        if !w.contains(&g) {
            w.push(g);
            drop(w);
            f(g, true);
        }
    }
}

/// Kills and reaps every orphaned descendant of a finished run (see [`Run`]): processes that
/// left the run's process group (`setsid`, `daemon()`) and whose parent has died, so they
/// were reparented to this subreaper. Repeats until two scans 5 ms apart find none (killing
/// an orphan orphans its own children), for at most 2 s. Returns how many were killed.
///
/// Runs of several threads share the subreaper: an orphan of a run that is still going is
/// left alone while it stays in that run's process group, but one that left its group is
/// indistinguishable from another run's and goes at the first sweep.
pub fn sweep_orphans() -> usize {
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut killed = 0;
    let mut quiet = 0;
    let watched = std::mem::take(&mut *WATCHED.lock().unwrap_or_else(|p| p.into_inner()));
    while quiet < 2 && Instant::now() < deadline {
        let found = orphans();
        if found.is_empty() {
            quiet += 1;
        } else {
            quiet = 0;
        }
        for s in &found {
            if s.zombie {
                sys::reap(s.pid);
            } else {
                // Its whole group when it leads one (a daemon after setsid), else itself.
                if s.pgrp == s.pid {
                    sys::kill(-s.pid, libc::SIGKILL);
                }
                sys::kill(s.pid, libc::SIGKILL);
                killed += 1;
            }
        }
        if quiet < 2 {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    if let Some(f) = OBSERVER.get() {
        for g in watched {
            f(g, false);
        }
    }
    killed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_signal_keeps_the_first_raise() {
        let s = StopSignal::new();
        assert_eq!(s.signal(), None);
        let t = s.clone();
        t.raise(libc::SIGTERM);
        s.raise(libc::SIGINT);
        assert_eq!(s.signal(), Some(libc::SIGTERM));
        assert_eq!(t.signal(), Some(libc::SIGTERM));
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(11), "SIGSEGV");
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(1), "SIGHUP");
        assert_eq!(signal_name(64), "SIG64");
    }

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let me = sys::getpid();
        let s = stat_of(me).unwrap();
        assert_eq!(s.pid, me);
        assert!(s.ppid > 0);
        assert!(!s.zombie);
    }
}
