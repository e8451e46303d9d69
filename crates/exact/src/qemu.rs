//! Running a program under `qemu-x86_64` with the proftrust plugin.

use crate::protocol::{
    Decoder, Record, Resolver, Snapshot, SnapshotReason, MEM_FLAG, MEM_LEVEL_POS, MEM_LONG,
    MEM_STORE, SHM_HEAD_WORDS,
};
use crate::run::{self, Ended, StderrTail};
use crate::tree::{self, ImageNotes};
use crate::{sys, ExactError};
use proftrust_model::{BlockVisitor, ExactProfile, MemAccess, RunOutcome, TraceBlock};
use proftrust_supervise::StopSignal;
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// File name of the plugin shared object.
pub const PLUGIN_FILE: &str = "libproftrust_qemu_plugin.so";

/// Blocks whose inline counters live in the shared counter file (128 MiB of address space,
/// sparse), after its head page ([`SHM_HEAD_WORDS`]: the run state, [`RUN_EXITED`],
/// [`RUN_FORKED`], [`RUN_EXECED`], in word 0, the number of guest threads started in word
/// 1, the process tree's image counter in word 2); later blocks use plugin-private counters
/// that do not survive a fatal signal.
const SHARED_COUNTERS: u64 = 1 << 24;
/// Index of the shared file's thread count (in `u64`s).
const THREADS_AT: u64 = 1;
/// Index of the shared file's first counter (in `u64`s).
const COUNTERS_AT: u64 = SHM_HEAD_WORDS;
/// Run state bit: the plugin's exit hook ran in the process QEMU started.
const RUN_EXITED: u64 = 1;
/// Run state bit: that process forked (set before the child exists).
const RUN_FORKED: u64 = 2;
/// Run state bit: the guest asked for `execve` (set before the exec).
const RUN_EXECED: u64 = 4;

/// The run state word of the shared file (0 when it cannot be read).
fn run_state(shm: &std::fs::File) -> u64 {
    use std::os::unix::fs::FileExt;
    let mut w = [0u8; 8];
    match shm.read_exact_at(&mut w, 0) {
        Ok(()) => u64::from_le_bytes(w),
        Err(_) => 0,
    }
}

/// Whether a run with this state word may have started processes besides QEMU: while it
/// runs (`ended` false), unless the plugin saw neither a fork nor an exec; once it ended,
/// unless the exit hook ran as well (a SIGKILL, a timeout's stop or an exec leave it unset).
fn may_have_descendants(state: u64, ended: bool) -> bool {
    state & (RUN_FORKED | RUN_EXECED) != 0 || (ended && state & RUN_EXITED == 0)
}

/// The phrase of `backend_detail` that records the guest threads (see [`guest_threads`]).
const THREADS_PHRASE: &str = "guest threads: ";
/// The phrase of `backend_detail` saying counts came from non-atomic inline counters with
/// several threads (see [`counts_may_be_low`]).
const LOW_PHRASE: &str = "counts may be slightly low";

/// QEMU's CPU model for x86-64 user mode when `-cpu` is not given (QEMU 7.2: `max`, all
/// features TCG can emulate).
pub const DEFAULT_CPU: &str = "max";

/// How to run QEMU.
#[derive(Debug, Clone)]
pub struct QemuOptions {
    /// QEMU `-cpu` model (`qemu-x86_64 -cpu help` lists them). Default `None`: QEMU's own
    /// default ([`DEFAULT_CPU`]). Recorded in `backend_detail`. The model decides which
    /// libc ifunc variants (memcpy, strlen, ...) run, so library code differs from a native
    /// run unless the model matches the host.
    pub cpu: Option<String>,
    /// Stop the program after this long (SIGTERM to its process group, SIGKILL 2 s later);
    /// the counts up to then are kept. Default `None`: no limit.
    pub timeout: Option<Duration>,
    /// Plugin shared object. Default `None`: [`find_plugin`].
    pub plugin: Option<PathBuf>,
    /// [`count_qemu`]: count the whole process tree, forked children and the programs an
    /// `execve` starts (QEMU run again on them, `#!` scripts through their interpreter), each
    /// process image listed in [`ExactProfile::processes`] with its own counts; the profile
    /// is their sum. Default `true`. `false` counts the started process up to its first
    /// `execve` (forked children excluded). [`trace_qemu`] always traces the started process
    /// alone.
    pub follow: bool,
    /// Count block→block edges, calls and returns with a per-block callback (per vcpu,
    /// race-free). Default `true`. `false` counts with inline counters only: faster, no
    /// edges or calls, and with several threads running the same block at once counts can
    /// be slightly low (QEMU plugin API v1 inline adds are not atomic).
    pub edges: bool,
    /// The QEMU executable. Default `None`: [`find_qemu`] (`$PROFTRUST_QEMU`, else the newest
    /// `qemu-x86_64` with plugin support on `PATH` or built by `scripts/install-qemu.sh`).
    pub qemu: Option<PathBuf>,
    /// Where the program's stdout/stderr go. Default `true`: inherited from proftrust;
    /// `false`: discarded.
    pub show_output: bool,
    /// Raised to stop the program as at the timeout (the counts or trace up to then are
    /// kept; the outcome is [`RunOutcome::Interrupted`]). Default `None`.
    pub stop: Option<StopSignal>,
    /// [`trace_qemu`] only: also trace every data access (guest virtual address, size,
    /// load/store) into [`TraceBlock::mem`]. Costs a helper call per access. Default
    /// `false` (`mem` is then empty). [`count_qemu`] ignores it.
    pub trace_memory: bool,
    /// [`trace_qemu`] only: bytes of the trace ring, the shared mapping the plugin writes
    /// trace chunks into (the pipe then carries a short record per chunk; docs/exact.md,
    /// "Trace ring"). Rounded up to whole MiB, at least 1 MiB. Default
    /// [`TRACE_RING_BYTES`], or `$PROFTRUST_TRACE_RING` (bytes) when set; 0 sends the trace
    /// through the pipe, as does a ring that cannot be made.
    pub trace_ring_bytes: usize,
    /// With [`QemuOptions::trace_memory`]: the plugin simulates data caches of this
    /// geometry in its memory callback ([`proftrust_cachesim::Caches`], the code
    /// `proftrust-vpmu`'s timer runs on addresses) and ships where each access was served
    /// ([`MemAccess::level`]) instead of its address: one word per access instead of two,
    /// and no simulation left for the host. Same levels as the host's simulation of the
    /// same accesses; threads share the one cache in the order their accesses happen.
    /// Default `None`: addresses are shipped.
    pub cache: Option<proftrust_cachesim::Geometry>,
    /// With [`QemuOptions::cache`]: ship each access's address and size as well as its
    /// level, so that the host can run its own simulation beside the plugin's (a check of
    /// the two against each other in one run: QEMU's own memory layout changes with the
    /// plugin's allocations, so two runs do not see the same addresses). Costs the
    /// address words. Default `false`.
    pub cache_with_addresses: bool,
    /// Count mode: the plugin also runs every executed branch through a history-based
    /// predictor (`proftrust-bpred`: TAGE, an ITTAGE-like indirect predictor, a return
    /// stack; one per guest thread) and ships its mispredictions per branch instruction,
    /// the profile's [`proftrust_model::BRANCH_MISSES_COLUMN`]. Costs one plugin call per
    /// executed block. Default `false`.
    pub branch_predictor: bool,
}

impl Default for QemuOptions {
    fn default() -> Self {
        QemuOptions {
            cpu: None,
            timeout: None,
            plugin: None,
            follow: true,
            edges: true,
            qemu: None,
            show_output: true,
            trace_memory: false,
            trace_ring_bytes: std::env::var("PROFTRUST_TRACE_RING")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(TRACE_RING_BYTES),
            cache: None,
            cache_with_addresses: false,
            branch_predictor: false,
            stop: None,
        }
    }
}

/// Finds the plugin: `$PROFTRUST_QEMU_PLUGIN`, else the newest of the copies next to the
/// running executable, in `deps/` below it, and in its parent directory (test binaries live
/// in `target/*/deps`, the plugin in `target/*`).
pub fn find_plugin() -> Result<PathBuf, ExactError> {
    let mut looked = Vec::new();
    if let Some(p) = std::env::var_os("PROFTRUST_QEMU_PLUGIN") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        // Asked for this plugin: another one would count with code the user did not pick.
        return Err(ExactError::EnvPath {
            var: "PROFTRUST_QEMU_PLUGIN".into(),
            path: p,
        });
    }
    // Several copies can exist (cargo leaves one in `target/*/` and one in `deps/`); a
    // stale one would not match this analyzer, so the newest wins.
    let mut best: Option<(std::time::SystemTime, PathBuf)> = None;
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            let mut cands = vec![dir.join(PLUGIN_FILE), dir.join("deps").join(PLUGIN_FILE)];
            if let Some(up) = dir.parent() {
                cands.push(up.join(PLUGIN_FILE));
            }
            for c in cands {
                match std::fs::metadata(&c).and_then(|m| m.modified()) {
                    Ok(t) if c.is_file() => {
                        if best.as_ref().is_none_or(|(bt, _)| t > *bt) {
                            best = Some((t, c));
                        }
                    }
                    _ => looked.push(c.display().to_string()),
                }
            }
        }
    }
    if let Some((_, p)) = best {
        return Ok(p);
    }
    Err(ExactError::PluginMissing {
        looked: looked.join(", "),
    })
}

/// `qemu-x86_64 --version`, first line, e.g. `qemu-x86_64 version 7.2.22 (Debian ...)`.
fn qemu_version(qemu: &Path) -> String {
    Command::new(qemu)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(str::to_string)
        })
        .unwrap_or_else(|| "qemu-x86_64 (version unknown)".into())
}

/// `(major, minor, patch)` from a `--version` line (`... version 10.0.2 ...`).
fn parse_version(line: &str) -> Option<(u32, u32, u32)> {
    let v = line
        .split_whitespace()
        .skip_while(|w| *w != "version")
        .nth(1)?;
    let mut it = v.split(['.', '-', '+', '~']).map(|x| x.parse::<u32>().ok());
    Some((
        it.next()??,
        it.next().flatten().unwrap_or(0),
        it.next().flatten().unwrap_or(0),
    ))
}

/// Whether this QEMU was built with TCG plugin support (`-plugin` in its help; Debian's
/// statically linked QEMU 10 packages lack it).
fn has_plugins(qemu: &Path) -> bool {
    Command::new(qemu)
        .arg("-h")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("-plugin"))
}

/// Where `scripts/install-qemu.sh` builds QEMU with plugin support:
/// `$PROFTRUST_QEMU_PREFIX/bin`, and `${XDG_CACHE_HOME:-~/.cache}/proftrust/qemu-*/bin`.
fn managed_qemus() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("PROFTRUST_QEMU_PREFIX") {
        out.push(PathBuf::from(p).join("bin/qemu-x86_64"));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")));
    if let Some(dir) = cache.map(|c| c.join("proftrust")) {
        if let Ok(rd) = std::fs::read_dir(&dir) {
            let mut v: Vec<PathBuf> = rd
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("qemu-"))
                .map(|e| e.path().join("bin/qemu-x86_64"))
                .collect();
            v.sort();
            out.extend(v);
        }
    }
    out
}

/// The QEMU to run: `$PROFTRUST_QEMU` when set, else the newest `qemu-x86_64` with plugin
/// support among those on `PATH` and those `scripts/install-qemu.sh` builds (see
/// `managed_qemus`). QEMU >= 9.2 (plugin API v4) is the fast path: per-vCPU counters and
/// edges derived from block counts; QEMU 7.x/8.x (API v1) count with a callback per block
/// when edges are on. Decided once per process.
pub fn find_qemu() -> Result<PathBuf, ExactError> {
    static FOUND: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    if let Some(p) = std::env::var_os("PROFTRUST_QEMU") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        return Err(ExactError::EnvPath {
            var: "PROFTRUST_QEMU".into(),
            path: p,
        });
    }
    let found = FOUND.get_or_init(|| {
        let mut cands: Vec<PathBuf> = std::env::var_os("PATH")
            .map(|path| {
                std::env::split_paths(&path)
                    .map(|d| d.join("qemu-x86_64"))
                    .filter(|c| c.is_file())
                    .collect()
            })
            .unwrap_or_default();
        cands.extend(managed_qemus().into_iter().filter(|c| c.is_file()));
        let mut best: Option<((u32, u32, u32), PathBuf)> = None;
        let mut without_plugins = Vec::new();
        for c in cands {
            if !has_plugins(&c) {
                without_plugins.push(c.display().to_string());
                continue;
            }
            let v = parse_version(&qemu_version(&c)).unwrap_or((0, 0, 0));
            if best.as_ref().is_none_or(|(bv, _)| v > *bv) {
                best = Some((v, c));
            }
        }
        match best {
            Some((_, p)) => Ok(p),
            None => Err(without_plugins.join(", ")),
        }
    });
    match found {
        Ok(p) => Ok(p.clone()),
        Err(e) if e.is_empty() => Err(ExactError::ToolMissing {
            tool: "qemu-x86_64".into(),
            install: "apt-get install qemu-user, or scripts/install-qemu.sh for QEMU 10".into(),
        }),
        Err(found) => Err(ExactError::QemuWithoutPlugins {
            found: found.clone(),
        }),
    }
}

/// `qemu-x86_64 --version` being asked on another thread; joined when read and at the
/// latest when dropped, so an early return leaves no child process behind.
struct Version(Option<std::thread::JoinHandle<String>>);

impl Version {
    fn get(&mut self) -> Option<String> {
        self.0.take()?.join().ok()
    }
}

impl Drop for Version {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            let _ = t.join();
        }
    }
}

/// What a QEMU run left behind.
struct QemuRun {
    shm: std::fs::File,
    outcome: RunOutcome,
    resolver: Resolver,
    snapshot: Option<Snapshot>,
    clean_end: bool,
    detail: String,
    edges: bool,
    /// The plugin API version the plugin ran with (1 or 4).
    api: u8,
    pid: u32,
    /// The plugin wrote its header (it writes it when QEMU installs it, before the guest
    /// runs): false means QEMU never loaded it.
    started: bool,
    /// What the started image's stream said of its process and its `execve`.
    notes: ImageNotes,
    /// The streams of the other images of a followed tree.
    others: Vec<tree::Stream>,
    /// What `execve` of the command ran (the `#!` chain resolved).
    plan: proftrust_supervise::exec::ExecPlan,
    /// The command as given.
    command: Vec<OsString>,
}

/// What the plugin is asked to do (its `-plugin` options), from the options and whether a
/// block trace is wanted.
#[derive(Debug, Clone, Copy)]
struct PluginMode {
    trace: bool,
    edges: bool,
    /// Memory accesses traced.
    mem: bool,
    /// The cache the plugin simulates on the traced accesses.
    cache: Option<proftrust_cachesim::Geometry>,
}

impl PluginMode {
    fn new(o: &QemuOptions, trace: bool) -> PluginMode {
        let mem = trace && o.trace_memory;
        PluginMode {
            trace,
            edges: trace || o.edges,
            mem,
            cache: o.cache.filter(|_| mem),
        }
    }

    /// What the trace says of each access: its address, the simulated cache's outcome, or
    /// both.
    fn mem_form(self, o: &QemuOptions) -> MemForm {
        match (self.cache.is_some(), o.cache_with_addresses) {
            (false, _) => MemForm::Addresses,
            (true, false) => MemForm::Outcomes,
            (true, true) => MemForm::Both,
        }
    }
}

/// The channels between proftrust and the plugin: the output pipe (`rd` ours, `wr` the
/// plugin's) or the trace ring, the shared counters, the control pipe (`ctl_rd` the
/// plugin's, `ctl_wr` ours) and, following a process tree, the socket the other images
/// report on.
struct Channels {
    rd: std::fs::File,
    wr: std::os::fd::OwnedFd,
    ring: Option<sys::Ring>,
    shm: std::fs::File,
    listener: Option<tree::Listener>,
    ctl_rd: std::fs::File,
    ctl_wr: std::os::fd::OwnedFd,
}

fn open_channels(o: &QemuOptions, trace: bool) -> Result<Channels, ExactError> {
    let (rd, wr) = sys::pipe().map_err(|e| ExactError::io("creating a pipe", e))?;
    // The trace ring when asked for and possible, else the whole trace through the pipe.
    let ring = (trace && o.trace_ring_bytes > 0)
        .then(|| sys::Ring::create(ring_words(o.trace_ring_bytes)).ok())
        .flatten();
    if trace && ring.is_none() {
        sys::grow_pipe(&rd, TRACE_PIPE_BYTES);
    }
    let shm = sys::memfd(c"proftrust-counters", (COUNTERS_AT + SHARED_COUNTERS) * 8)
        .map_err(|e| ExactError::io("creating the shared counter file", e))?;
    // Following the process tree (count mode): the socket the other images report on.
    let listener = if o.follow && !trace {
        Some(tree::Listener::start()?)
    } else {
        None
    };
    let (ctl_rd, ctl_wr) = sys::pipe().map_err(|e| ExactError::io("creating a pipe", e))?;
    Ok(Channels {
        rd,
        wr,
        ring,
        shm,
        listener,
        ctl_rd,
        ctl_wr,
    })
}

/// QEMU and the plugin to run: the options', else found ([`find_qemu`], [`find_plugin`]).
fn qemu_and_plugin(o: &QemuOptions) -> Result<(PathBuf, PathBuf), ExactError> {
    let qemu = match &o.qemu {
        Some(q) => q.clone(),
        None => find_qemu()?,
    };
    let plugin = match &o.plugin {
        Some(p) if p.is_file() => p.clone(),
        Some(p) => {
            return Err(ExactError::PluginMissing {
                looked: p.display().to_string(),
            })
        }
        None => find_plugin()?,
    };
    Ok((qemu, plugin))
}

/// `qemu-x86_64 -plugin ... -0 ARGV0 ELF ARGS`: QEMU running what `execve` would load (a
/// script's interpreter, with the arguments the kernel would give it) under the plugin,
/// which inherits the channels' descriptors.
fn qemu_command(
    qemu: &Path,
    plugin: &str,
    plan: &proftrust_supervise::exec::ExecPlan,
    o: &QemuOptions,
    mode: PluginMode,
    ch: &Channels,
) -> Command {
    let mut c = Command::new(qemu);
    c.arg("-plugin").arg(format!(
        "{plugin},out=fd:{},shm=fd:{},ctl=fd:{},mode={},edges={},mem={}{}{}{}{}",
        sys::raw(&ch.wr),
        sys::raw(&ch.shm),
        sys::raw(&ch.ctl_rd),
        if mode.trace { "trace" } else { "count" },
        if mode.edges { "on" } else { "off" },
        if mode.mem { "on" } else { "off" },
        ch.ring.as_ref().map_or(String::new(), |r| format!(
            ",ring=fd:{}",
            sys::raw(r.file())
        )),
        mode.cache.map_or(String::new(), |g| format!(
            ",cache={}{}",
            g.to_arg(),
            if o.cache_with_addresses {
                ",addrs=on"
            } else {
                ""
            }
        )),
        ch.listener
            .as_ref()
            .map_or(String::new(), |l| format!(",follow={}", l.name)),
        if o.branch_predictor && !mode.trace {
            ",bpred=on"
        } else {
            ""
        },
    ));
    if let Some(cpu) = &o.cpu {
        c.arg("-cpu").arg(cpu);
    }
    c.arg("-0")
        .arg(&plan.argv[0])
        .arg(&plan.elf)
        .args(&plan.argv[1..]);
    if !o.show_output {
        // The program's output is not shown, but QEMU's messages are kept for an error.
        c.stdout(Stdio::null()).stderr(Stdio::piped());
    }
    let mut fds = vec![sys::raw(&ch.wr), sys::raw(&ch.shm), sys::raw(&ch.ctl_rd)];
    fds.extend(ch.ring.as_ref().map(|r| sys::raw(r.file())));
    sys::inherit_fds(&mut c, &fds);
    proftrust_supervise::die_with_parent(&mut c);
    proftrust_supervise::default_signals(&mut c);
    c
}

/// Runs `cmd` under QEMU and the plugin (counting, or tracing blocks into `visitor` when
/// `trace`), supervised (timeout, stop, the process tree), and decodes what the plugin
/// wrote.
fn run_qemu(
    cmd: &[OsString],
    o: &QemuOptions,
    trace: bool,
    visitor: Option<&mut dyn BlockVisitor>,
) -> Result<QemuRun, ExactError> {
    let (_, plan) = run::plan_x86_64(cmd, "qemu-x86_64")?;
    let (qemu, plugin) = qemu_and_plugin(o)?;
    // `qemu-x86_64 --version` (a process of its own, ~15 ms) runs beside the guest, on the
    // second core, instead of after it.
    let mut version = Version(Some({
        let q = qemu.clone();
        std::thread::spawn(move || qemu_version(&q))
    }));
    let plugin_str = plugin.to_string_lossy();
    if plugin_str.contains(',') {
        return Err(ExactError::Unsupported(format!(
            "plugin path {plugin_str} contains a comma, which QEMU's -plugin option cannot take"
        )));
    }
    let mode = PluginMode::new(o, trace);
    let ch = open_channels(o, trace)?;
    let mut c = qemu_command(&qemu, &plugin_str, &plan, o, mode, &ch);
    let mut supervision = proftrust_supervise::Run::begin();
    let mut child = supervision
        .spawn(|| c.spawn(), |c| c.id() as i32)
        .map_err(|e| ExactError::io(format!("starting {}", qemu.display()), e))?;
    drop(ch.wr);
    drop(ch.ctl_rd);
    let pid = child.id();
    let stderr = child.stderr.take().map(StderrTail::capture);
    let sup = supervise_qemu(child, o, ch.ctl_wr, &ch.shm)?;
    let decoded = decode(ch.rd, trace, mode.mem, mode.mem_form(o), visitor, ch.ring);
    if decoded.is_err() {
        sys::kill_group(pid, libc::SIGKILL);
    }
    let ended = wait_qemu(sup)?;
    if !may_have_descendants(run_state(&ch.shm), true) {
        supervision.left_no_processes();
    }
    drop(supervision);
    // Every process of the run is gone: the other images' streams are complete.
    let others = ch.listener.map(tree::Listener::finish).unwrap_or_default();
    let Decoded {
        resolver,
        snapshot,
        clean: clean_end,
        edges: mode_edges,
        started,
        api,
        notes,
    } = decoded?;
    let outcome = run::outcome(&ended);
    if resolver.blocks.is_empty() && matches!(outcome, RunOutcome::Exited { .. }) {
        return Err(start_failed(
            stderr.as_ref(),
            o.show_output,
            started,
            &outcome,
        ));
    }
    let version = version.get().unwrap_or_else(|| qemu_version(&qemu));
    Ok(QemuRun {
        shm: ch.shm,
        detail: backend_detail(&version, api, o, &plugin, mode_edges, trace),
        outcome,
        resolver,
        snapshot,
        clean_end,
        edges: mode_edges,
        api,
        pid,
        started,
        notes,
        others,
        plan,
        command: cmd.to_vec(),
    })
}

/// Supervises the started QEMU on a thread of its own ([`run::supervise`]): the timeout,
/// the stop signal (through the control pipe `ctl_wr`), and the processes it may have left
/// (the shared counters `shm` say).
fn supervise_qemu(
    child: std::process::Child,
    o: &QemuOptions,
    ctl_wr: std::os::fd::OwnedFd,
    shm: &std::fs::File,
) -> Result<std::thread::JoinHandle<std::io::Result<Ended>>, ExactError> {
    let probe = shm
        .try_clone()
        .map_err(|e| ExactError::io("sharing the shared counter file", e))?;
    Ok(run::supervise(
        child,
        o.timeout,
        Some(std::fs::File::from(ctl_wr)),
        o.stop.clone(),
        Some(Box::new(move |ended| {
            may_have_descendants(run_state(&probe), ended)
        })),
    ))
}

/// How the supervised QEMU ended.
fn wait_qemu(sup: std::thread::JoinHandle<std::io::Result<Ended>>) -> Result<Ended, ExactError> {
    sup.join()
        .map_err(|_| ExactError::io("waiting for qemu", std::io::Error::other("waiter panicked")))?
        .map_err(|e| ExactError::io("waiting for qemu", e))
}

/// QEMU exited without one guest block translated: it refused the program or its options
/// (`-cpu bogus`, an ELF for another machine). (A run that ended by a signal or an
/// interrupt is not a failed start: a trace whose buffers died with QEMU, or a stop before
/// the first block, gives an empty profile with that outcome.) The error says what QEMU
/// said, and whether it loaded the plugin (`started`).
fn start_failed(
    stderr: Option<&StderrTail>,
    show_output: bool,
    started: bool,
    outcome: &RunOutcome,
) -> ExactError {
    let said = match stderr.and_then(StderrTail::text) {
        Some(t) => t,
        None if show_output => "see QEMU's message above".into(),
        None => "QEMU said nothing".into(),
    };
    ExactError::StartFailed {
        tool: "qemu-x86_64".into(),
        outcome: outcome.to_string(),
        why: if started {
            said
        } else {
            format!("{said} (QEMU did not load the plugin: a plugin from another build is refused, rebuild with `cargo build --release`)")
        },
    }
}

/// The exact profile's backend detail: QEMU's version, the plugin API and how it counts,
/// the CPU model, the plugin, the edges mode and whether the process tree was followed.
fn backend_detail(
    version: &str,
    api: u8,
    o: &QemuOptions,
    plugin: &Path,
    edges: bool,
    trace: bool,
) -> String {
    format!(
        "{version}; plugin API v{api} ({}); -cpu {}; plugin {}; edges {}; {}",
        if api >= 2 {
            "per-vCPU counters; edges seen only where control went elsewhere than the block's static successor, the rest derived from block counts"
        } else {
            "QEMU < 9.2: shared inline counters; edges from a callback per block"
        },
        o.cpu.as_deref().unwrap_or(DEFAULT_CPU),
        plugin.display(),
        if edges { "on" } else { "off" },
        if o.follow && !trace {
            "process tree followed (forks and execs)"
        } else {
            "forked children excluded; exec not followed"
        },
    )
}

/// Pipe buffer asked for a block trace without the trace ring (see [`sys::grow_pipe`]).
const TRACE_PIPE_BYTES: usize = 4 << 20;
/// The default [`QemuOptions::trace_ring_bytes`].
pub const TRACE_RING_BYTES: usize = 4 << 20;
/// The smallest trace ring: the plugin needs room for two of its largest chunks (64 Ki + 64
/// words each).
const MIN_RING_BYTES: usize = 1 << 20;

/// The ring's capacity in words for a request of `bytes`: the mapping (a header page and
/// the words) is a whole number of MiB. QEMU lays the guest's address space out below its
/// own mappings, so the ring moves the guest's stack and mappings down by its size; a
/// multiple of 1 MiB keeps every address's cache set (any cache whose sets span at most
/// 1 MiB), so simulated caches give the same results as without the ring.
fn ring_words(bytes: usize) -> u32 {
    let bytes = bytes
        .clamp(MIN_RING_BYTES, 1 << 30)
        .next_multiple_of(1 << 20);
    ((bytes - sys::RING_DATA) / 4) as u32
}
/// Read buffer of the trace decoder: many plugin chunks per `read`.
const TRACE_READ_BYTES: usize = 1 << 20;

/// What the started image's stream gave.
struct Decoded {
    resolver: Resolver,
    /// The final snapshot.
    snapshot: Option<Snapshot>,
    /// END came.
    clean: bool,
    /// Edges mode.
    edges: bool,
    /// The plugin wrote its header.
    started: bool,
    /// Plugin API version.
    api: u8,
    /// Its PROCESS and EXEC records.
    notes: ImageNotes,
}

/// Hands block `id` of thread `tid` with its accesses to `v`.
fn emit(
    v: &mut dyn BlockVisitor,
    resolver: &Resolver,
    tid: u32,
    id: u32,
    mem: &[MemAccess],
) -> Result<(), ExactError> {
    let Some(Some(b)) = resolver.blocks.get(id as usize) else {
        return Err(ExactError::Protocol {
            offset: 0,
            what: format!("trace names undefined block {id}"),
        });
    };
    if let Some(a) = mem.last() {
        // `insn` never decreases, so the last access has the largest index.
        if a.insn as usize >= b.insns.len() {
            return Err(ExactError::Protocol {
                offset: 0,
                what: format!(
                    "data access of instruction {} in block {id} of {} instructions",
                    a.insn,
                    b.insns.len()
                ),
            });
        }
    }
    v.block(&TraceBlock {
        tid,
        module: b.module,
        instructions: &b.insns,
        end: b.end,
        mem,
        key: (b.key != u32::MAX).then_some(b.key),
    });
    Ok(())
}

/// How a TRACEMEM chunk's accesses are written (header `mem`: 1, 2, 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MemForm {
    /// Address words (short or long form).
    Addresses,
    /// One outcome word (the plugin simulated the caches).
    Outcomes,
    /// Address words, then the outcome word.
    Both,
}

impl MemForm {
    fn header(self) -> u8 {
        match self {
            MemForm::Addresses => 1,
            MemForm::Outcomes => 2,
            MemForm::Both => 3,
        }
    }
}

/// The level of an outcome word (the plugin's cache simulation: 0 L1D, 1 LLC, 2 memory).
fn outcome_level(w: u32) -> u8 {
    ((w >> MEM_LEVEL_POS) & 3) as u8
}

/// Hands the blocks of one trace chunk of thread `tid` to `v`: block ids alone (a TRACE
/// chunk, `mem` `None`) or ids and accesses written in `mem`'s form (TRACEMEM).
fn trace_chunk(
    v: &mut dyn BlockVisitor,
    resolver: &Resolver,
    pending: &mut PendingBlocks,
    tid: u32,
    words: &[u32],
    mem: Option<MemForm>,
) -> Result<(), ExactError> {
    match mem {
        Some(form) => trace_mem_chunk(v, resolver, pending, tid, words, form),
        None => words
            .iter()
            .try_for_each(|&id| emit(v, resolver, tid, id, &[])),
    }
}

/// Per thread, the block whose accesses may continue in the thread's next TRACEMEM chunk.
type PendingBlocks = HashMap<u32, (u32, Vec<MemAccess>)>;
const NO_BLOCK: u32 = u32::MAX;

/// Decodes one TRACEMEM chunk of thread `tid`; a block is handed over once the next block
/// id of its thread arrives (or at the end of the stream, see [`decode`]).
fn trace_mem_chunk(
    v: &mut dyn BlockVisitor,
    resolver: &Resolver,
    pending: &mut PendingBlocks,
    tid: u32,
    words: &[u32],
    form: MemForm,
) -> Result<(), ExactError> {
    let (mut cur, mut mem) = pending.remove(&tid).unwrap_or((NO_BLOCK, Vec::new()));
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        if w & MEM_FLAG == 0 {
            if cur != NO_BLOCK {
                emit(v, resolver, tid, cur, &mem)?;
            }
            mem.clear();
            cur = w;
            i += 1;
            continue;
        }
        if form == MemForm::Outcomes {
            // One word: the level the plugin's cache simulation served the access at.
            if cur != NO_BLOCK {
                mem.push(MemAccess {
                    insn: (w & 0xffff) as u16,
                    addr: 0,
                    size: 0,
                    store: w & MEM_STORE != 0,
                    level: Some(outcome_level(w)),
                });
            }
            i += 1;
            continue;
        }
        let cut = || ExactError::Protocol {
            offset: 0,
            what: "data access cut short at the end of a trace chunk".into(),
        };
        let lo = *words.get(i + 1).ok_or_else(cut)? as u64;
        let (insn, addr, len) = if w & MEM_LONG == 0 {
            ((w >> 16) & 0x3ff, lo | ((w & 0xffff) as u64) << 32, 2)
        } else {
            let hi = *words.get(i + 2).ok_or_else(cut)? as u64;
            (w & 0xffff, lo | hi << 32, 3)
        };
        let shift = (w >> 27) & 7;
        let level = match form {
            MemForm::Both => Some(outcome_level(*words.get(i + len).ok_or_else(cut)?)),
            _ => None,
        };
        // An access before any block of this thread can only come from two threads sharing
        // a plugin vcpu slot (more than 1024 at once); it is dropped.
        if cur != NO_BLOCK {
            mem.push(MemAccess {
                insn: insn as u16,
                addr,
                size: (1u32 << shift).min(255) as u8,
                store: w & MEM_STORE != 0,
                level,
            });
        }
        i += len + usize::from(level.is_some());
    }
    pending.insert(tid, (cur, mem));
    Ok(())
}

fn decode(
    rd: std::fs::File,
    trace: bool,
    mem: bool,
    form: MemForm,
    mut visitor: Option<&mut dyn BlockVisitor>,
    mut ring: Option<sys::Ring>,
) -> Result<Decoded, ExactError> {
    let mut resolver = Resolver::default();
    let Some(mut d) = Decoder::new(BufReader::with_capacity(
        if trace { TRACE_READ_BYTES } else { 1 << 16 },
        rd,
    ))?
    else {
        return Ok(Decoded {
            resolver,
            snapshot: None,
            clean: false,
            edges: false,
            started: false,
            api: 0,
            notes: ImageNotes::default(),
        });
    };
    if (d.mode == 1) != trace || d.mem_form != if mem { form.header() } else { 0 } {
        return Err(ExactError::Protocol {
            offset: 8,
            what: "plugin mode differs from the one asked".into(),
        });
    }
    let mut pending = PendingBlocks::new();
    let edges = d.edges;
    let api = d.api;
    let mut snapshot = None;
    let mut clean = false;
    let mut notes = ImageNotes::default();
    while let Some(rec) = d.next_record()? {
        tree::note_record(&mut notes, &rec);
        match rec {
            Record::Module { id, base, path } => {
                if let Some(idx) = resolver.module(id, base, &path) {
                    if let (Some(v), Some(m)) = (visitor.as_deref_mut(), resolver.modules.get(idx))
                    {
                        v.module(idx, m);
                    }
                }
            }
            Record::Block {
                id,
                module,
                end,
                addrs,
                ..
            } => resolver.block(id, module, end, &addrs)?,
            Record::Trace { tid, ids } => {
                if let Some(v) = visitor.as_deref_mut() {
                    trace_chunk(v, &resolver, &mut pending, tid, &ids, None)?;
                }
                d.recycle(ids);
            }
            Record::TraceMem { tid, words } => {
                if let Some(v) = visitor.as_deref_mut() {
                    trace_chunk(v, &resolver, &mut pending, tid, &words, Some(form))?;
                }
                d.recycle(words);
            }
            Record::Ring { tid, pos, n } => {
                // Decoded in place, then the space goes back to the plugin.
                let bad = |what: &str| ExactError::Protocol {
                    offset: 0,
                    what: format!("ring record of thread {tid} ({n} words at {pos}): {what}"),
                };
                let r = ring.as_mut().ok_or_else(|| bad("no trace ring was made"))?;
                let words = r
                    .chunk(pos, n)
                    .ok_or_else(|| bad("not a chunk the plugin wrote"))?;
                if let Some(v) = visitor.as_deref_mut() {
                    let form = mem.then_some(form);
                    trace_chunk(v, &resolver, &mut pending, tid, words, form)?;
                }
                r.release(pos, n);
            }
            Record::Snapshot(s) => snapshot = Some(s),
            Record::End => clean = true,
            Record::Process(_) | Record::Exec { .. } => {}
        }
    }
    // The last block of each thread (its accesses are complete now), in thread-id order.
    if let Some(v) = visitor {
        let mut last: Vec<_> = pending.into_iter().collect();
        last.sort_by_key(|(tid, _)| *tid);
        for (tid, (id, mem)) in last {
            if id != NO_BLOCK {
                emit(v, &resolver, tid, id, &mem)?;
            }
        }
    }
    Ok(Decoded {
        resolver,
        snapshot,
        clean,
        edges,
        started: true,
        api,
        notes,
    })
}

/// Runs `cmd` under QEMU with the plugin and returns exact counts for every module (main
/// binary, dynamic loader, shared libraries), module-relative.
///
/// The profile is written whatever the program does: non-zero exit, fatal signal, SIGKILL
/// to itself, `execve` (counts up to the exec), timeout (counts up to the SIGTERM); the
/// ending is in `outcome`. Only when QEMU dies without the plugin writing anything (it
/// could not load the plugin, or an outside SIGKILL) is this an error.
pub fn count_qemu(cmd: &[OsString], o: &QemuOptions) -> Result<ExactProfile, ExactError> {
    let mut r = run_qemu(cmd, o, false, None)?;
    let others = std::mem::take(&mut r.others);
    let notes = std::mem::take(&mut r.notes);
    let plan = r.plan.clone();
    let pid = r.pid;
    let resolver = r.resolver.clone();
    let followed_exec = o.follow && notes.exec.as_ref().is_some_and(|e| e.image.is_some());
    let mut root = started_image_profile(r, followed_exec)?;
    if o.branch_predictor {
        // A run whose predictor missed nothing still says it ran.
        Resolver::add_branch_misses_column(&mut root);
    }
    if !o.follow {
        return Ok(root);
    }
    Ok(with_tree(root, resolver, &notes, others, &plan, pid))
}

/// The block counts a snapshot gives, by plugin API and edges mode. API >= 2: the inline
/// counters are per vCPU, exact under threads. API 1: with edges, the per-vcpu callback
/// counts; without, the shared inline counters plus the callback counts of blocks
/// translated once a guest thread existed (the plugin then counts with per-vcpu callbacks
/// instead of the racy shared add).
fn block_counts(snap: &Snapshot, api: u8, edges: bool) -> std::borrow::Cow<'_, [u64]> {
    let from_callback = api < 2 && !snap.callback.is_empty();
    if api >= 2 {
        snap.inline.as_slice().into()
    } else if edges && from_callback {
        snap.callback.as_slice().into()
    } else if from_callback {
        let n = snap.inline.len().max(snap.callback.len());
        (0..n)
            .map(|i| {
                snap.inline.get(i).copied().unwrap_or(0)
                    + snap.callback.get(i).copied().unwrap_or(0)
            })
            .collect::<Vec<u64>>()
            .into()
    } else {
        snap.inline.as_slice().into()
    }
}

/// The started image's counts with the other images of its tree (see
/// [`QemuOptions::follow`]): each image's counts from its own stream (a forked child's
/// definitions start from its parent's), the images listed in
/// [`ExactProfile::processes`], the profile their sum.
fn with_tree(
    root: ExactProfile,
    root_resolver: Resolver,
    root_notes: &ImageNotes,
    others: Vec<tree::Stream>,
    plan: &proftrust_supervise::exec::ExecPlan,
    pid: u32,
) -> ExactProfile {
    let lossy = |s: &std::ffi::OsStr| s.to_string_lossy().into_owned();
    let root_process = proftrust_model::ExactProcess {
        pid,
        parent: None,
        start: proftrust_model::ImageStart::Root,
        comm: plan.comm.clone(),
        path: lossy(plan.elf.as_os_str()),
        argv: plan.argv.iter().map(|a| lossy(a)).collect(),
        total_instructions: root.total_instructions,
        instructions: Vec::new(),
        not_counted: None,
        outcome: root.outcome.clone(),
        replaced: false,
    };
    // Each stream's records applied in image order, a fork's onto its parent's definitions.
    let mut resolvers: HashMap<u32, Resolver> = HashMap::new();
    resolvers.insert(0, root_resolver);
    // Each image's notes and pid (for the image list) and its counts, by image id.
    let mut pairs: Vec<(ImageNotes, u32)> = Vec::new();
    let mut profiles: HashMap<u32, Result<ExactProfile, String>> = HashMap::new();
    let mut streams: Vec<(u32, tree::Stream)> = others
        .into_iter()
        .map(|s| {
            let id = s.records.iter().find_map(|r| match r {
                Record::Process(p) => Some(p.image),
                _ => None,
            });
            (id.unwrap_or(u32::MAX), s)
        })
        .collect();
    streams.sort_by_key(|(id, _)| *id);
    let mut warnings = Vec::new();
    for (id, st) in streams {
        let fork_parent = st.records.iter().find_map(|r| match r {
            Record::Process(p) if p.start == proftrust_model::ImageStart::Fork => p.parent,
            _ => None,
        });
        let mut resolver = fork_parent
            .and_then(|p| resolvers.get(&p).cloned())
            .unwrap_or_default();
        let (pid, api, edges, error) = (st.pid, st.api, st.edges, st.error);
        let applied = tree::apply_records(&mut resolver, st.records);
        let (notes, counts) = match applied {
            Ok((snap, _clean, notes)) => {
                let counts = match (snap, error) {
                    (Some(snap), _) => {
                        if snap.underived > 0 {
                            warnings.push(format!(
                                "WARNING {} block executions of pid {pid} had an edge the plugin could not derive",
                                snap.underived
                            ));
                        }
                        let mut p = resolver.profile(&block_counts(&snap, api, edges), &snap.edges);
                        resolver.add_branch_misses(&mut p, &snap.misses);
                        Ok(p)
                    }
                    (None, Some(e)) => Err(format!("its stream broke off: {e}")),
                    (None, None) => Err("killed before it wrote its counts (the run ended while it ran, or a SIGKILL)".into()),
                };
                (notes, counts)
            }
            Err(e) => (
                ImageNotes::default(),
                Err(format!("its stream is unreadable: {e}")),
            ),
        };
        resolvers.insert(id, resolver);
        if let Some(p) = notes.process {
            profiles.insert(p.image, counts);
        }
        pairs.push((notes, pid));
    }
    let images = tree::image_list(root_process, root_notes, &pairs);
    let mut root = Some(root);
    let list = images
        .into_iter()
        .map(|im| {
            let mut proc = im.process;
            if let Some(root) = root.take() {
                return (proc, Some(root));
            }
            let counts = match profiles.remove(&im.id) {
                Some(Ok(p)) if proc.not_counted.is_none() => {
                    proc.total_instructions = p.total_instructions;
                    Some(p)
                }
                Some(Err(why)) if proc.not_counted.is_none() => {
                    proc.not_counted = Some(why);
                    None
                }
                _ => None,
            };
            (proc, counts)
        })
        .collect();
    let mut out = tree::assemble(list);
    out.backend_detail.push_str(&tree::images_phrase(&out));
    for w in warnings {
        out.backend_detail.push_str("; ");
        out.backend_detail.push_str(&w);
    }
    out
}

/// The started image's profile (the whole run's without [`QemuOptions::follow`]);
/// `followed_exec`: its `execve` was followed (the next image has the counts after it).
fn started_image_profile(r: QemuRun, followed_exec: bool) -> Result<ExactProfile, ExactError> {
    let mut died = false;
    let snap = match r.snapshot {
        Some(s) => s,
        None if !r.resolver.blocks.is_empty() && r.api >= 2 => {
            return Err(ExactError::NoCounts {
                backend: "qemu".into(),
                detail: format!(
                    "pid {} {} without the plugin's exit hook (QEMU killed from outside?): with plugin API v{} the counts live in QEMU's per-vCPU memory and are lost; stop runs with --timeout instead, or use QEMU 7.2 (PROFTRUST_QEMU=/usr/bin/qemu-x86_64), whose shared counters survive",
                    r.pid, r.outcome, r.api
                ),
            })
        }
        None if !r.resolver.blocks.is_empty() => {
            // QEMU 7.2 runs no plugin exit hook when the guest dies by a signal (or is
            // stopped at the timeout): read the shared inline counters instead.
            died = true;
            let n = (r.resolver.blocks.len() as u64).min(SHARED_COUNTERS) as usize;
            let mut raw = vec![0u8; n * 8];
            use std::os::unix::fs::FileExt;
            r.shm
                .read_exact_at(&mut raw, COUNTERS_AT * 8)
                .map_err(|e| ExactError::io("reading the shared counters", e))?;
            let mut threads = [0u8; 8];
            r.shm
                .read_exact_at(&mut threads, THREADS_AT * 8)
                .map_err(|e| ExactError::io("reading the shared counters", e))?;
            Snapshot {
                reason: SnapshotReason::Exit,
                vcpus: 0,
                threads: u64::from_le_bytes(threads).min(u32::MAX as u64) as u32,
                inline: raw
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect(),
                callback: Vec::new(),
                edges: Vec::new(),
                underived: 0,
                misses: Vec::new(),
            }
        }
        None if matches!(r.outcome, RunOutcome::Interrupted { .. }) => Snapshot {
            // Interrupted before the guest ran: an empty profile, marked by its outcome.
            reason: SnapshotReason::Stop,
            vcpus: 0,
            threads: 0,
            inline: Vec::new(),
            callback: Vec::new(),
            edges: Vec::new(),
            underived: 0,
            misses: Vec::new(),
        },
        None => {
            return Err(ExactError::NoCounts {
                backend: "qemu".into(),
                detail: format!(
                    "pid {} {} before the plugin wrote anything; see QEMU's messages above (plugin load failure?)",
                    r.pid, r.outcome
                ),
            })
        }
    };
    let from_callback = r.api < 2 && !snap.callback.is_empty();
    let counts = block_counts(&snap, r.api, r.edges);
    let mut p = r.resolver.profile(&counts, &snap.edges);
    r.resolver.add_branch_misses(&mut p, &snap.misses);
    let mut detail = r.detail;
    if died {
        detail.push_str("; the run ended without QEMU's exit hook (fatal signal or timeout): instruction counts from the shared inline counters (the block holding a faulting instruction counts whole), no edges or calls");
    }
    detail.push_str(&format!("; {THREADS_PHRASE}{}", snap.threads));
    if snap.underived > 0 {
        detail.push_str(&format!(
            "; WARNING {} block executions had an edge the plugin could not derive",
            snap.underived
        ));
    }
    if r.edges && from_callback && snap.threads <= 1 {
        if let Some(w) = block_count_mismatch(&snap.inline, &snap.callback) {
            detail.push_str(&format!("; WARNING {w}"));
        }
    }
    if r.api < 2 && !from_callback && snap.threads > 1 {
        detail.push_str(&format!(
            "; {} threads counted with non-atomic inline counters ({}): {LOW_PHRASE} where threads ran the same code at once",
            snap.threads,
            if r.edges { "the run ended without a snapshot" } else { "edges off" },
        ));
    }
    match snap.reason {
        SnapshotReason::Exec if followed_exec => {}
        SnapshotReason::Exec => detail
            .push_str("; the program called execve: counts stop there (new image not followed)"),
        SnapshotReason::Kill => detail.push_str("; counts written just before a self-SIGKILL"),
        SnapshotReason::Stop if matches!(r.outcome, RunOutcome::Interrupted { .. }) => {
            detail.push_str(&format!("; {}: counts up to then", r.outcome))
        }
        SnapshotReason::Stop => detail.push_str("; stopped at the timeout: counts up to then"),
        SnapshotReason::Exit if !r.clean_end && !died => detail.push_str("; stream ended early"),
        SnapshotReason::Exit => {}
    }
    p.backend = "qemu".into();
    p.backend_detail = detail;
    p.command = r
        .command
        .iter()
        .map(|s| s.to_string_lossy().into_owned())
        .collect();
    p.outcome = Some(r.outcome);
    Ok(p)
}

/// Runs `cmd` under QEMU streaming every executed block to `v`: a module event before the
/// first block that lies in it, then the blocks of each thread in execution order, then
/// `end`. Blocks of different threads interleave in chunks (per-thread order is exact;
/// the global order across threads is not). With [`QemuOptions::trace_memory`] each block
/// carries its data accesses ([`TraceBlock::mem`]); a thread's block is then handed over when
/// its next block starts, so blocks of different threads may interleave differently from
/// the run without memory. Returns how the program ended.
pub fn trace_qemu(
    cmd: &[OsString],
    o: &QemuOptions,
    v: &mut dyn BlockVisitor,
) -> Result<RunOutcome, ExactError> {
    let r = run_qemu(cmd, o, true, Some(&mut *v))?;
    if !r.started && !matches!(r.outcome, RunOutcome::Interrupted { .. }) {
        return Err(ExactError::NoCounts {
            backend: "qemu".into(),
            detail: format!(
                "pid {} {} before the plugin wrote anything: QEMU did not load the plugin (run with -v to see QEMU's message; a plugin from another build is refused: rebuild with `cargo build --release`)",
                r.pid, r.outcome
            ),
        });
    }
    v.end(&r.outcome);
    Ok(r.outcome)
}

/// How many guest threads a QEMU count saw (the main thread included), as recorded in the
/// profile's `backend_detail` by [`count_qemu`]. `None` for other backends and for files
/// written before proftrust recorded it.
pub fn guest_threads(p: &ExactProfile) -> Option<u32> {
    if p.backend != "qemu" {
        return None;
    }
    let at = p.backend_detail.find(THREADS_PHRASE)? + THREADS_PHRASE.len();
    let digits: String = p.backend_detail[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Whether a QEMU count's instruction counts may have lost increments: they came from QEMU
/// plugin API v1 inline counters (not atomic) while several guest threads ran, i.e. a
/// multi-threaded run counted with `edges: false` (`--no-edges`) or one that died without a
/// snapshot. Single-threaded runs, and runs with edges (per-vcpu callback counts), are exact.
/// A caller that used `edges: false` for speed can rerun with edges when this is true.
pub fn counts_may_be_low(p: &ExactProfile) -> bool {
    p.backend == "qemu" && p.backend_detail.contains(LOW_PHRASE)
}

/// Issue 31 item 14: on a single-threaded run the plugin counts every block twice, with its
/// inline counters and with the per-vCPU callbacks the edges need (QEMU plugin API 1); both
/// must agree. When they do not, what differs, which count is used and what to do.
fn block_count_mismatch(inline: &[u64], callback: &[u64]) -> Option<String> {
    let n = inline.len().max(callback.len());
    let (mut blocks, mut most, mut total) = (0usize, 0u64, 0u64);
    for i in 0..n {
        let a = inline.get(i).copied().unwrap_or(0);
        let b = callback.get(i).copied().unwrap_or(0);
        if a != b {
            blocks += 1;
            most = most.max(a.abs_diff(b));
            total += a.abs_diff(b);
        }
    }
    (blocks > 0).then(|| {
        format!(
            "the plugin's two counts of the same blocks disagree (inline counters and edge callbacks: {blocks} of {n} blocks, {total} executions in all, up to {most} in one block): the counts shown are the callbacks', which may be off by that much; check them against `truth --backend callgrind` and report it with the program and `qemu --version`"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Collects each block's thread, first instruction and accesses.
    #[derive(Default)]
    struct Blocks(Vec<(u32, u64, Vec<MemAccess>)>);

    impl BlockVisitor for Blocks {
        fn block(&mut self, b: &TraceBlock<'_>) {
            self.0.push((b.tid, b.instructions[0].0, b.mem.to_vec()));
        }
    }

    /// TRACEMEM words in both access forms (docs/exact.md, "Protocol"), built by hand: a
    /// block's accesses are handed over with it when the thread's next block starts, also
    /// across chunks; a chunk cut inside an access is an error.
    #[test]
    fn trace_mem_words_decode_in_both_forms() {
        let mut r = Resolver::default();
        r.block(0, u32::MAX, 0, &[0x10, 0x12]).unwrap();
        r.block(1, u32::MAX, 2, &[0x20]).unwrap();
        let mut v = Blocks::default();
        let mut pending = PendingBlocks::new();
        let words = [
            0,
            // Short: load, 8 bytes, instruction 1, address 0x7ffd_1234_5678.
            MEM_FLAG | 3 << 27 | 1 << 16 | 0x7ffd,
            0x1234_5678,
            // Long: store, 2 bytes, instruction 1, address 0xffff_ffff_ff60_0008.
            MEM_FLAG | MEM_STORE | 1 << 27 | MEM_LONG | 1,
            0xff60_0008,
            0xffff_ffff,
            1,
        ];
        trace_mem_chunk(&mut v, &r, &mut pending, 7, &words, MemForm::Addresses).unwrap();
        // The next chunk of thread 7 continues block 1 (an access of its instruction 0),
        // then block 0 starts again.
        trace_mem_chunk(
            &mut v,
            &r,
            &mut pending,
            7,
            &[MEM_FLAG, 0x40, 0],
            MemForm::Addresses,
        )
        .unwrap();
        let acc = |insn, addr, size, store| MemAccess {
            insn,
            addr,
            size,
            store,
            level: None,
        };
        assert_eq!(
            v.0,
            vec![
                (
                    7,
                    0x10,
                    vec![
                        acc(1, 0x7ffd_1234_5678, 8, false),
                        acc(1, 0xffff_ffff_ff60_0008, 2, true)
                    ]
                ),
                (7, 0x20, vec![acc(0, 0x40, 1, false)])
            ]
        );
        let (id, mem) = &pending[&7];
        assert_eq!((*id, mem.len()), (0, 0));
        for cut in [&[0, MEM_FLAG][..], &[0, MEM_FLAG | MEM_LONG, 5][..]] {
            let e = trace_mem_chunk(
                &mut v,
                &r,
                &mut PendingBlocks::new(),
                1,
                cut,
                MemForm::Addresses,
            )
            .unwrap_err();
            assert!(e.to_string().contains("cut short"), "{e}");
        }
    }

    /// The reader gone while the plugin waits for room in a full trace ring: QEMU ends
    /// (by `SIGPIPE`, as with a dead reader of the pipe-only stream) instead of waiting.
    #[test]
    fn a_full_ring_whose_reader_is_gone_ends_qemu() {
        use std::os::unix::process::ExitStatusExt;
        let (Ok(qemu), Ok(plugin)) = (find_qemu(), find_plugin()) else {
            proftrust_testkit::skip!(
                "a_full_ring_whose_reader_is_gone_ends_qemu: no qemu-x86_64 or plugin"
            );
            return;
        };
        let ring = sys::Ring::create(ring_words(MIN_RING_BYTES)).unwrap();
        let (rd, wr) = sys::pipe().unwrap();
        let mut c = Command::new(&qemu);
        c.arg("-plugin")
            .arg(format!(
                "{},out=fd:{},mode=trace,mem=on,ring=fd:{}",
                plugin.display(),
                sys::raw(&wr),
                sys::raw(ring.file())
            ))
            .arg("/usr/bin/yes")
            .stdout(Stdio::null());
        sys::inherit_fds(&mut c, &[sys::raw(&wr), sys::raw(ring.file())]);
        // Registered with the supervision, so that another test's sweep of orphans leaves
        // it alone.
        let mut supervision = proftrust_supervise::Run::begin();
        let mut child = supervision.spawn(|| c.spawn(), |c| c.id() as i32).unwrap();
        drop(wr);
        // Read every record, handing no chunk back, until the stream pauses: `yes` fills
        // the ring at once, and the plugin then sleeps for room (not on a full pipe).
        let probe = rd.try_clone().unwrap();
        let mut d = Decoder::new(rd).unwrap().unwrap();
        let mut chunks = 0;
        while sys::readable(&probe, 1000) {
            match d.next_record().unwrap() {
                Some(Record::Ring { .. }) => chunks += 1,
                Some(_) => {}
                None => panic!("the stream ended: {:?}", child.wait()),
            }
        }
        assert!(chunks > 0);
        assert!(ring.plugin_waits(), "the plugin sleeps for room");
        assert!(child.try_wait().unwrap().is_none(), "QEMU waits");
        drop((d, probe));
        let t0 = std::time::Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if t0.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                let _ = child.wait();
                panic!("QEMU still runs 10 s after its reader went away");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(status.signal(), Some(libc::SIGPIPE), "{status:?}");
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    }

    /// TRACEMEM outcome words (the plugin simulated the caches): one word per access, the
    /// level in bits 28..30, the instruction index in bits 0..16, no address; continued
    /// across chunks like the address form.
    #[test]
    fn trace_mem_outcome_words_decode() {
        let mut r = Resolver::default();
        r.block(0, u32::MAX, 0, &[0x10, 0x12, 0x14]).unwrap();
        r.block(1, u32::MAX, 2, &[0x20]).unwrap();
        let mut v = Blocks::default();
        let mut pending = PendingBlocks::new();
        let out = |insn: u32, store: bool, level: u32| {
            MEM_FLAG | if store { MEM_STORE } else { 0 } | level << MEM_LEVEL_POS | insn
        };
        let words = [0, out(0, false, 0), out(2, true, 1), out(2, false, 2), 1];
        trace_mem_chunk(&mut v, &r, &mut pending, 3, &words, MemForm::Outcomes).unwrap();
        trace_mem_chunk(
            &mut v,
            &r,
            &mut pending,
            3,
            &[out(0, false, 1), 0],
            MemForm::Outcomes,
        )
        .unwrap();
        let acc = |insn, store, level| MemAccess {
            insn,
            addr: 0,
            size: 0,
            store,
            level: Some(level),
        };
        assert_eq!(
            v.0,
            vec![
                (
                    3,
                    0x10,
                    vec![acc(0, false, 0), acc(2, true, 1), acc(2, false, 2)]
                ),
                (3, 0x20, vec![acc(0, false, 1)])
            ]
        );
        assert_eq!(pending[&3].0, 0);
        // Both: the short-form address words, then the outcome word.
        let mut v = Blocks::default();
        let words = [1, MEM_FLAG | 3 << 27, 0x40, out(0, false, 2), 0];
        trace_mem_chunk(
            &mut v,
            &r,
            &mut PendingBlocks::new(),
            3,
            &words,
            MemForm::Both,
        )
        .unwrap();
        let both = MemAccess {
            insn: 0,
            addr: 0x40,
            size: 8,
            store: false,
            level: Some(2),
        };
        assert_eq!(v.0, vec![(3, 0x20, vec![both])]);
        let cut = [1, MEM_FLAG | 3 << 27, 0x40];
        let e = trace_mem_chunk(
            &mut v,
            &r,
            &mut PendingBlocks::new(),
            3,
            &cut,
            MemForm::Both,
        )
        .unwrap_err();
        assert!(e.to_string().contains("cut short"), "{e}");
    }

    #[test]
    fn orphans_are_looked_for_unless_the_plugin_saw_no_other_process() {
        // Running: nothing forked or exec'd yet means no other process to watch.
        assert!(!may_have_descendants(0, false));
        assert!(may_have_descendants(RUN_FORKED, false));
        assert!(may_have_descendants(RUN_EXECED, false));
        // Ended: only a run whose exit hook ran, without a fork or an exec, is alone
        // (no exit hook: SIGKILL, a stop, an exec whose image never returned).
        assert!(!may_have_descendants(RUN_EXITED, true));
        assert!(may_have_descendants(0, true));
        assert!(may_have_descendants(RUN_EXITED | RUN_FORKED, true));
        assert!(may_have_descendants(RUN_EXITED | RUN_EXECED, true));
    }

    #[test]
    fn threads_are_read_back_from_the_detail() {
        let mut p = ExactProfile {
            backend: "qemu".into(),
            backend_detail: format!("qemu-x86_64 version 7.2; -cpu max; {THREADS_PHRASE}12; 12 threads counted with non-atomic inline counters (edges off): {LOW_PHRASE} where threads ran the same code at once"),
            ..Default::default()
        };
        assert_eq!(guest_threads(&p), Some(12));
        assert!(counts_may_be_low(&p));
        p.backend_detail = "qemu-x86_64 version 7.2; -cpu max".into();
        assert_eq!(guest_threads(&p), None);
        assert!(!counts_may_be_low(&p));
        p.backend = "callgrind".into();
        p.backend_detail = format!("{THREADS_PHRASE}3");
        assert_eq!(guest_threads(&p), None);
    }

    #[test]
    fn block_count_mismatch_says_how_much_and_what_to_do() {
        assert_eq!(block_count_mismatch(&[3, 4], &[3, 4]), None);
        assert_eq!(block_count_mismatch(&[3, 4], &[3, 4, 0]), None);
        let w = block_count_mismatch(&[3, 4, 10], &[3, 6, 7]).unwrap();
        assert!(
            w.contains("2 of 3 blocks, 5 executions in all, up to 3 in one block"),
            "{w}"
        );
        assert!(w.contains("truth --backend callgrind"), "{w}");
    }
}
