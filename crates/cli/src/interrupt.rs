//! SIGINT, SIGTERM and SIGHUP while a command runs a program, and the watchdog that stops
//! what proftrust started if proftrust itself is killed (policy: `docs/processes.md`).
//!
//! * [`install`] (called by every command that runs a program) replaces the default action
//!   of the three signals: the first one raises the command's [`StopSignal`], which the
//!   recorder and the exact runners poll; they stop the program like `--timeout` does
//!   (SIGTERM to its process group, SIGKILL 2 s later; QEMU's plugin writes its counts
//!   first) and return what was sampled or counted. The command writes its output marked
//!   "interrupted" and `main` then ends proftrust by the same signal ([`exit_if_interrupted`]),
//!   so a shell sees 130 (SIGINT), 143 (SIGTERM) or 129 (SIGHUP) and stops a script, as for
//!   any program killed by the signal. A second signal does not wait: it kills the process
//!   groups of the running programs and ends proftrust at once.
//! * A watchdog process (`proftrust __watchdog`, started by [`install`]) learns every process
//!   group a run starts and ends through a pipe. When proftrust dies, even by SIGKILL, the
//!   pipe closes and the watchdog kills the groups still running. The programs' direct
//!   children (the program, QEMU, valgrind) also get `PR_SET_PDEATHSIG`.
//!
//! Commands that run no program keep the default actions (a signal ends them at once; their
//! outputs are written atomically, so nothing half-written is left).

use crate::sys;
use proftrust_supervise::StopSignal;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

/// The stop flag of this process, once [`install`]ed.
static STOP: OnceLock<StopSignal> = OnceLock::new();
/// Signals received so far.
static RECEIVED: AtomicU32 = AtomicU32::new(0);
/// Process groups of the runs going on (0 = free slot), for the second signal's hard stop.
static GROUPS: [AtomicI32; 16] = [const { AtomicI32::new(0) }; 16];
/// The write end of the watchdog's pipe.
static WATCHDOG: Mutex<Option<std::process::ChildStdin>> = Mutex::new(None);

const SIGNALS: [i32; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

extern "C" fn on_signal(sig: libc::c_int) {
    if RECEIVED.fetch_add(1, Ordering::SeqCst) == 0 {
        if let Some(s) = STOP.get() {
            s.raise(sig);
        }
        return;
    }
    // Second signal: stop now.
    for g in &GROUPS {
        let pgid = g.load(Ordering::SeqCst);
        if pgid > 1 {
            sys::kill_group_now(pgid);
        }
    }
    sys::die_by(sig);
}

/// Run groups start and end: kept for the hard stop and told to the watchdog.
fn on_group(pgid: i32, added: bool) {
    if added {
        if let Some(slot) = GROUPS.iter().find(|g| g.load(Ordering::SeqCst) == 0) {
            slot.store(pgid, Ordering::SeqCst);
        }
    } else if let Some(slot) = GROUPS.iter().find(|g| g.load(Ordering::SeqCst) == pgid) {
        slot.store(0, Ordering::SeqCst);
    }
    let mut w = WATCHDOG.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(pipe) = w.as_mut() {
        let line = format!("{}{pgid}\n", if added { '+' } else { '-' });
        if pipe.write_all(line.as_bytes()).is_err() {
            *w = None;
        }
    }
}

/// Installs the signal handlers and starts the watchdog; returns the stop flag to hand to
/// the recorder and the exact runners. Idempotent.
pub fn install() -> StopSignal {
    let stop = STOP.get_or_init(StopSignal::new).clone();
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        sys::set_handler(&SIGNALS, on_signal);
        proftrust_supervise::set_group_observer(on_group);
        start_watchdog();
    });
    stop
}

/// The signal that interrupted this command, if any.
pub fn received() -> Option<i32> {
    STOP.get().and_then(StopSignal::signal)
}

/// After the command has written its outputs: when it was interrupted, ends proftrust by the
/// signal it received (exit status 128 + signal as a shell reports it).
pub fn exit_if_interrupted() {
    if let Some(sig) = received() {
        let _ = std::io::stdout().flush();
        sys::die_by(sig);
    }
}

fn start_watchdog() {
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    let child = std::process::Command::new(exe)
        .arg("__watchdog")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Ok(mut c) = child {
        *WATCHDOG.lock().unwrap_or_else(|p| p.into_inner()) = c.stdin.take();
    }
}

/// The watchdog: reads `+PGID` / `-PGID` lines until end of file (proftrust is gone, or
/// done), then kills the groups still listed. It ignores the terminal's signals (it stays
/// in proftrust's process group, so a Ctrl-C reaches it too) and ends only at end of file.
pub fn watchdog_main() {
    sys::ignore(&[libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT]);
    let mut live: Vec<i32> = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let (op, n) = line.split_at(line.len().min(1));
        let Ok(pgid) = n.trim().parse::<i32>() else {
            continue;
        };
        match op {
            "+" => live.push(pgid),
            "-" => live.retain(|&g| g != pgid),
            _ => {}
        }
    }
    for pgid in live {
        proftrust_supervise::kill_group(pgid, libc::SIGKILL);
    }
}
