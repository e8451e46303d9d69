//! # proftrust-record
//!
//! A `perf_event_open(2)` sampler that writes proftrust's own [`SampleSet`]: every sample's
//! address is already module-relative (a [`proftrust_model::Location`] in a
//! [`proftrust_model::Module`] with build-id and load bias).
//!
//! Entry point: [`record`] with a [`Target`] (a command to start, or a running `--pid`) and
//! [`RecordOptions`]. It returns a [`Recording`]: the samples, the seed, how the program ended.
//!
//! Design (see `docs/record.md`):
//! * one event per online CPU with `pid = child`, `inherit = 1`, so threads and forked
//!   children are followed (as `perf record` does); the child is forked blocked on a pipe,
//!   the events are opened `disabled` + `enable_on_exec`, then the child is released to `execv`;
//! * user-only by default (`exclude_kernel`, `exclude_hv`, `exclude_callchain_kernel`);
//! * `mmap2` records (`mmap_data = 0`) + `comm`/`fork` records track every process's executable
//!   mappings; `/proc/PID/maps` gives the initial maps of a `--pid` target;
//! * **period randomisation** (seed 001 §4): after each overflow of an event instance the
//!   recorder draws `T + U(0, T/8)` from a seeded ChaCha8 generator and issues
//!   `PERF_EVENT_IOC_PERIOD`; the period in effect for each sample is reconstructed exactly
//!   from the time of each ioctl (see [`RecordOptions::randomize`]);
//! * all `unsafe` lives in the private `sys` module.
//!
//! Entry point: [`record`] a command (or a pid) into a `SampleSet`:
//!
//! ```no_run
//! use proftrust_record::{record, EventSpec, RecordOptions, Target};
//!
//! let mut o = RecordOptions::default();
//! o.events = vec![EventSpec::parse("task-clock").unwrap()];
//! o.seed = Some(7);
//! let r = record(&Target::Command(vec!["./prog".into()]), &o)?;
//! println!("{} samples", r.samples.samples.len());
//! # Ok::<(), proftrust_record::RecordError>(())
//! ```
#![warn(missing_docs)]

mod error;
mod event;
mod maps;
mod parse;
mod sys;

pub use error::RecordError;
pub use event::{EventSpec, DEFAULT_CLOCK_PERIOD_NS, DEFAULT_HW_PERIOD, DEFAULT_RAW_PERIOD};
pub use proftrust_supervise::StopSignal;

use parse::{RawSample, Rec};
use proftrust_model::{
    EventDesc, EventTimes, Location, PeriodMode, RecordingHealth, RunOutcome, Sample, SampleSet,
    SamplingConfig, StackUnwinder, ThreadName, ThreadStart,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// What to profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Start this command (program + arguments) and profile it, its threads and children.
    Command(Vec<String>),
    /// Attach to the running process with this pid (all its threads, and children it forks
    /// later) until it exits, the timeout expires, or SIGINT/SIGTERM arrives.
    Pid(i32),
}

/// How to sample.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RecordOptions {
    /// Events to sample. Default: `[cpu-clock]`.
    pub events: Vec<EventSpec>,
    /// Fixed period (events, or ns for clock events). Default `None`: the event's prime
    /// default ([`DEFAULT_CLOCK_PERIOD_NS`], [`DEFAULT_HW_PERIOD`], [`DEFAULT_RAW_PERIOD`]).
    pub period: Option<u64>,
    /// Frequency in Hz instead of a fixed period (the kernel adapts the period). Default `None`.
    pub frequency: Option<u64>,
    /// Period randomisation (seed 001 §4: "a random value up to T/8 is added"): every next
    /// period is `T + U{0..=T/8}`. Default `false`.
    pub randomize: bool,
    /// Seed of the period generator (ChaCha8). Default `None`: drawn from the clock and the
    /// pid; the seed used is returned in [`Recording::seed`] and stored in the sample set.
    pub seed: Option<u64>,
    /// Frame-pointer user call chains (`PERF_SAMPLE_CALLCHAIN`). Default `false`.
    pub callchain: bool,
    /// DWARF call chains (`perf record --call-graph dwarf,SIZE`): each sample copies this
    /// many bytes of the user stack with the registers (`PERF_SAMPLE_STACK_USER` +
    /// `PERF_SAMPLE_REGS_USER`), unwound with the binaries' call-frame information when the
    /// recording ends (`proftrust_binary::ProcessUnwinder`). A multiple of 8, at most
    /// 65528. Default `None` (off).
    pub dwarf_stack: Option<u32>,
    /// Branch stacks (`PERF_SAMPLE_BRANCH_STACK`, any taken branch). Default `false`.
    pub branch_stack: bool,
    /// Exclude kernel and hypervisor. Default `true`.
    pub user_only: bool,
    /// Kill the program (its whole process group) after this long. Default `None`.
    pub timeout: Option<Duration>,
    /// Data pages per CPU ring buffer (a power of two). Default 128 (512 KiB), like `perf record`.
    pub buffer_pages: usize,
    /// Raised to end the recording early: a started program is stopped as at the timeout
    /// (SIGTERM to its process group, SIGKILL [`proftrust_supervise::TERM_GRACE`] later) and
    /// its outcome is [`RunOutcome::Interrupted`]; a `--pid` recording detaches. Default
    /// `None`: a `Target::Pid` recording then installs its own SIGINT/SIGTERM handler.
    pub stop: Option<StopSignal>,
    /// Send a started program's standard output to `/dev/null` (repeated recordings of one
    /// program, such as `audit --sweep`, whose output was already shown once). Default false.
    pub discard_stdout: bool,
}

impl Default for RecordOptions {
    fn default() -> Self {
        RecordOptions {
            events: vec![EventSpec {
                name: "cpu-clock".into(),
                kind: proftrust_model::EventKind::CpuClock,
                precise: 0,
            }],
            period: None,
            frequency: None,
            randomize: false,
            seed: None,
            callchain: false,
            dwarf_stack: None,
            branch_stack: false,
            user_only: true,
            timeout: None,
            buffer_pages: 128,
            stop: None,
            discard_stdout: false,
        }
    }
}

/// Counters about the recording itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordStats {
    /// Ring-buffer batches drained.
    pub batches: u64,
    /// `PERF_EVENT_IOC_PERIOD` calls issued.
    pub period_updates: u64,
    /// `PERF_RECORD_THROTTLE` records (the kernel slowed sampling down).
    pub throttled: u64,
    /// Samples whose address fell outside every known module.
    pub unmapped_samples: u64,
    /// Samples from inherited event instances (other threads/processes) which the period
    /// randomisation cannot reach (see `docs/record.md`).
    pub unrandomized_samples: u64,
    /// With `--randomize`: for every sample of a randomised instance after its first, the
    /// realised interval (the instance's own count difference between the two overflows,
    /// `PERF_SAMPLE_READ`) minus the recorded period, in events (ns for clocks). This is the
    /// reaction latency `L` of `docs/record.md`; empty when the kernel refuses
    /// `PERF_SAMPLE_READ` on inherited events (before Linux 6.12).
    pub interval_excess: Vec<i64>,
}

/// What [`record`] produced.
#[derive(Debug, Clone)]
pub struct Recording {
    /// The samples, modules, events (with their configuration and the seed), the command and
    /// how it ended.
    pub samples: SampleSet,
    /// The seed used for every random choice.
    pub seed: u64,
    /// Set when the program could not be started (`execv` failed): the reason. The outcome is
    /// then `Exited { code: 127 }` (not found) or `126` (not executable), as a shell reports.
    pub exec_error: Option<String>,
    /// Counters about the recording.
    pub stats: RecordStats,
    /// The started program's process id (`None` for a `--pid` recording).
    pub pid: Option<u32>,
    /// Every process the recording saw start or exec (from the kernel's `FORK` and `COMM`
    /// exec records), in order of pid.
    pub processes: Vec<ProcessInfo>,
}

/// A process a recording saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessInfo {
    /// Its process id.
    pub pid: u32,
    /// The process that forked it, when the fork was recorded.
    pub parent: Option<u32>,
    /// Times (the samples' clock) at which it called `execve`; the started program's own
    /// first exec (of the command line) is among them.
    pub execs: Vec<u64>,
}

struct Opened {
    spec_idx: usize,
    /// The process it was opened on (one instance per CPU).
    pid: i32,
    fd: OwnedFd,
    id: u64,
}

fn resolve_program(prog: &str) -> String {
    if prog.contains('/') {
        return prog.to_string();
    }
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in path.split(':') {
        let cand = std::path::Path::new(if dir.is_empty() { "." } else { dir }).join(prog);
        if cand.is_file() {
            return cand.to_string_lossy().into_owned();
        }
    }
    prog.to_string()
}

fn online_cpus() -> Vec<i32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut v = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
                    v.extend(a..=b);
                }
            }
            None => v.extend(part.parse::<i32>().ok()),
        }
    }
    if v.is_empty() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        v.extend(0..n as i32);
    }
    v
}

/// The randomised period generator of seed 001 §4: `T + U{0..=T/8}`.
///
/// Seed 001 (Wu & Mencer, §4 "sampling period ... randomization"): "a random value up to T/8 is
/// added to the sampling period T". We read "up to" as inclusive and uniform over the integers
/// `0..=floor(T/8)`.
#[derive(Debug, Clone)]
pub struct PeriodRandomizer {
    base: u64,
    rng: ChaCha8Rng,
}

impl PeriodRandomizer {
    /// A generator for base period `base` seeded with `seed`.
    pub fn new(base: u64, seed: u64) -> PeriodRandomizer {
        PeriodRandomizer {
            base,
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }
    /// The largest value added (`T/8`).
    pub fn max_added(&self) -> u64 {
        self.base / 8
    }
    /// The next period.
    pub fn next_period(&mut self) -> u64 {
        self.base + self.rng.gen_range(0..=self.base / 8)
    }
}

fn open_hint(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "; hint: run as root or lower /proc/sys/kernel/perf_event_paranoid (sysctl kernel.perf_event_paranoid=1)".into()
        }
        Some(libc::EMFILE) => "; hint: raise the open-file limit (ulimit -n)".into(),
        _ => String::new(),
    }
}

fn build_attr(spec: &EventSpec, opts: &RecordOptions, first_period: u64, read: bool) -> sys::Attr {
    let mut a = sys::zeroed_attr();
    let (t, c) = spec.type_config();
    a.type_ = t;
    a.config = c;
    a.sample_type = parse::SAMPLE_TYPE_BASE;
    // Enabled and running time on every read (the final one and PERF_SAMPLE_READ's): less
    // running than enabled means the kernel multiplexed the event (`check` warns).
    a.read_format = parse::READ_FORMAT;
    if read {
        a.sample_type |= perf_event_open_sys::bindings::PERF_SAMPLE_READ as u64;
    }
    if opts.callchain {
        a.sample_type |= perf_event_open_sys::bindings::PERF_SAMPLE_CALLCHAIN as u64;
    }
    if let Some(size) = opts.dwarf_stack {
        // As perf's --call-graph dwarf: registers and a stack copy for the user part, the
        // kernel's call chain (when kernel samples are recorded) for the kernel part.
        a.sample_type |= (perf_event_open_sys::bindings::PERF_SAMPLE_REGS_USER
            | perf_event_open_sys::bindings::PERF_SAMPLE_STACK_USER)
            as u64;
        a.sample_regs_user = parse::REGS_USER;
        a.sample_stack_user = size;
        if !opts.user_only {
            a.sample_type |= perf_event_open_sys::bindings::PERF_SAMPLE_CALLCHAIN as u64;
            a.set_exclude_callchain_user(1);
        }
    }
    if opts.branch_stack {
        a.sample_type |= perf_event_open_sys::bindings::PERF_SAMPLE_BRANCH_STACK as u64;
        a.branch_sample_type = perf_event_open_sys::bindings::PERF_SAMPLE_BRANCH_ANY as u64;
        if opts.user_only {
            a.branch_sample_type |= perf_event_open_sys::bindings::PERF_SAMPLE_BRANCH_USER as u64;
        }
    }
    match opts.frequency {
        Some(f) => {
            a.set_freq(1);
            a.__bindgen_anon_1.sample_freq = f;
        }
        None => a.__bindgen_anon_1.sample_period = first_period,
    }
    a.set_disabled(1);
    a.set_inherit(1);
    a.set_mmap2(1);
    a.set_mmap(1);
    a.set_comm(1);
    a.set_comm_exec(1);
    a.set_task(1);
    a.set_sample_id_all(1);
    a.set_use_clockid(1);
    a.clockid = libc::CLOCK_MONOTONIC;
    a.set_precise_ip(u64::from(spec.precise));
    if opts.user_only {
        a.set_exclude_kernel(1);
        a.set_exclude_hv(1);
        a.set_exclude_callchain_kernel(1);
    }
    if opts.randomize {
        // wake the recorder on every sample so the next period is set right after it
        a.__bindgen_anon_2.wakeup_events = 1;
    }
    a
}

fn check_options(opts: &RecordOptions) -> Result<(), RecordError> {
    if opts.events.is_empty() {
        return Err(RecordError::BadOptions("no event given".into()));
    }
    if opts.period.is_some() && opts.frequency.is_some() {
        return Err(RecordError::BadOptions(
            "give either a period (-c) or a frequency (-F), not both".into(),
        ));
    }
    if opts.period == Some(0) || opts.frequency == Some(0) {
        return Err(RecordError::BadOptions(
            "period and frequency must be positive".into(),
        ));
    }
    if opts.randomize && opts.frequency.is_some() {
        return Err(RecordError::BadOptions(
            "--randomize needs a fixed period (-c), not a frequency (-F)".into(),
        ));
    }
    if let Some(s) = opts.dwarf_stack {
        if s == 0 || s % 8 != 0 || s > 65528 {
            return Err(RecordError::BadOptions(format!(
                "the stack copy of --call-graph dwarf must be a positive multiple of 8 of at most 65528 bytes, not {s}"
            )));
        }
    }
    if !opts.buffer_pages.is_power_of_two() {
        return Err(RecordError::BadOptions(format!(
            "ring buffer pages must be a power of two, not {}",
            opts.buffer_pages
        )));
    }
    Ok(())
}

fn default_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    t ^ (u64::from(std::process::id()) << 32)
}

/// Per parent-event-instance randomisation state.
struct Randomized {
    fd_idx: usize,
    rng: PeriodRandomizer,
    /// `(time after which the period applies, period)`, time-ordered; first entry at 0.
    history: Vec<(u64, u64)>,
}

struct Session {
    opened: Vec<Opened>,
    rings: Vec<sys::RingBuffer>,
    randomized: HashMap<u64, Randomized>,
    recs: Vec<Rec>,
    scratch: Vec<u8>,
    seen_streams: Vec<u64>,
    stats: RecordStats,
    /// The decoder of the rings' records (from the attribute the first event was opened
    /// with; `None` while no event is open).
    decoder: Option<parse::Decoder>,
}

impl Session {
    /// Drains every ring buffer, decodes, and re-arms the randomised periods.
    fn drain(&mut self) -> Result<(), RecordError> {
        for ring in &mut self.rings {
            self.scratch.clear();
            ring.drain_into(&mut self.scratch);
            if self.scratch.is_empty() {
                continue;
            }
            self.stats.batches += 1;
            let before = self.recs.len();
            if let Some(d) = &self.decoder {
                d.decode_batch(&self.scratch, &mut self.recs)?;
            }
            if self.randomized.is_empty() {
                continue;
            }
            self.seen_streams.clear();
            for r in &self.recs[before..] {
                if let Rec::Sample(RawSample { stream_id, .. }) = r {
                    if self.randomized.contains_key(stream_id)
                        && !self.seen_streams.contains(stream_id)
                    {
                        self.seen_streams.push(*stream_id);
                    }
                }
            }
            for s in &self.seen_streams {
                let r = self.randomized.get_mut(s).expect("checked above");
                let p = r.rng.next_period();
                // An error here (event gone with its task) just ends randomisation for it.
                if sys::set_period(&self.opened[r.fd_idx].fd, p).is_ok() {
                    let t = sys::monotonic_ns();
                    r.history.push((t, p));
                    self.stats.period_updates += 1;
                }
            }
        }
        Ok(())
    }
}

fn open_events(
    opts: &RecordOptions,
    pids: &[i32],
    seed: u64,
    enable_on_exec: bool,
) -> Result<Session, RecordError> {
    let cpus = online_cpus();
    let mut opened = Vec::new();
    let mut rings: Vec<sys::RingBuffer> = Vec::new();
    let mut randomized = HashMap::new();
    let mut seed_rng = ChaCha8Rng::seed_from_u64(seed);
    let mut read = opts.randomize;
    let mut decoder = None;
    for &cpu in &cpus {
        let mut leader: Option<usize> = None;
        for &pid in pids {
            for (si, spec) in opts.events.iter().enumerate() {
                let base = opts.period.unwrap_or_else(|| spec.default_period());
                let mut rz = PeriodRandomizer::new(base, seed_rng.gen());
                let first = if opts.randomize {
                    rz.next_period()
                } else {
                    base
                };
                let mut attr = build_attr(spec, opts, first, read);
                if enable_on_exec {
                    attr.set_enable_on_exec(1);
                }
                let mut res = sys::perf_event_open(&attr, pid, cpu);
                if read
                    && opened.is_empty()
                    && matches!(&res, Err(e) if e.raw_os_error() == Some(libc::EINVAL))
                {
                    // PERF_SAMPLE_READ with inherit needs Linux 6.12: go on without it.
                    read = false;
                    attr = build_attr(spec, opts, first, false);
                    if enable_on_exec {
                        attr.set_enable_on_exec(1);
                    }
                    res = sys::perf_event_open(&attr, pid, cpu);
                }
                let fd = res.map_err(|e| {
                    let code = e.raw_os_error();
                    if opts.branch_stack
                        && matches!(code, Some(libc::EOPNOTSUPP) | Some(libc::EINVAL))
                        && !spec.kind.is_hardware()
                    {
                        return RecordError::BranchStackUnsupported {
                            name: spec.name.clone(),
                        };
                    }
                    if spec.kind.is_hardware()
                        && matches!(
                            code,
                            Some(libc::ENOENT) | Some(libc::ENODEV) | Some(libc::EOPNOTSUPP)
                        )
                    {
                        if opts.branch_stack && code == Some(libc::EOPNOTSUPP) {
                            return RecordError::BranchStackUnsupported {
                                name: spec.name.clone(),
                            };
                        }
                        return RecordError::HardwareUnavailable {
                            name: spec.name.clone(),
                        };
                    }
                    if code == Some(libc::ESRCH) {
                        return RecordError::NoSuchPid(pid);
                    }
                    // Attaching to a running process (not our own child): a refusal is about
                    // that process, and says so.
                    if !enable_on_exec && matches!(code, Some(libc::EACCES) | Some(libc::EPERM)) {
                        return RecordError::PidNotPermitted {
                            pid,
                            why: format!("perf_event_open: {e}"),
                        };
                    }
                    RecordError::Open {
                        name: spec.name.clone(),
                        pid,
                        cpu,
                        hint: open_hint(&e),
                        source: e,
                    }
                })?;
                if decoder.is_none() {
                    // `read` is settled by the first open: every event has this layout.
                    decoder = Some(parse::Decoder::new(&attr)?);
                }
                let id =
                    sys::event_id(&fd).map_err(|e| RecordError::sys("PERF_EVENT_IOC_ID", e))?;
                match leader {
                    None => {
                        let ring = sys::RingBuffer::map(&fd, opts.buffer_pages).map_err(|e| {
                            RecordError::sys(
                                format!(
                                    "cannot map the ring buffer ({} pages) of cpu {cpu}",
                                    opts.buffer_pages
                                ),
                                e,
                            )
                        })?;
                        rings.push(ring);
                        leader = Some(opened.len());
                    }
                    Some(l) => {
                        let target: &Opened = &opened[l];
                        sys::set_output(&fd, &target.fd)
                            .map_err(|e| RecordError::sys("PERF_EVENT_IOC_SET_OUTPUT", e))?;
                    }
                }
                if opts.randomize {
                    randomized.insert(
                        id,
                        Randomized {
                            fd_idx: opened.len(),
                            rng: rz,
                            history: vec![(0, first)],
                        },
                    );
                }
                opened.push(Opened {
                    spec_idx: si,
                    pid,
                    fd,
                    id,
                });
            }
        }
    }
    Ok(Session {
        opened,
        rings,
        randomized,
        recs: Vec::new(),
        scratch: Vec::new(),
        seen_streams: Vec::new(),
        stats: RecordStats::default(),
        decoder,
    })
}

fn outcome_of(w: sys::WaitStatus) -> RunOutcome {
    match w {
        sys::WaitStatus::Exited(code) => RunOutcome::Exited { code },
        sys::WaitStatus::Signaled(signal) => RunOutcome::Signaled {
            signal,
            name: sys::signal_name(signal),
        },
    }
}

/// Records `target` with `opts`.
///
/// A program that cannot be started, exits non-zero, is killed by a signal or times out
/// still yields a [`Recording`] with the outcome; errors are for things that prevent
/// recording at all (bad options, events the machine cannot count, system failures). No
/// child is left running and none is left a zombie: on every path the child is reaped, and
/// on timeout or error its whole process group is killed first.
pub fn record(target: &Target, opts: &RecordOptions) -> Result<Recording, RecordError> {
    check_options(opts)?;
    let seed = opts.seed.unwrap_or_else(default_seed);
    match target {
        Target::Command(argv) => record_command(argv, opts, seed),
        Target::Pid(pid) => record_pid(*pid, opts, seed),
    }
}

fn record_command(
    argv: &[String],
    opts: &RecordOptions,
    seed: u64,
) -> Result<Recording, RecordError> {
    let Some(prog) = argv.first() else {
        return Err(RecordError::BadOptions("no program given".into()));
    };
    let to_c = |s: &str| {
        CString::new(s).map_err(|_| RecordError::Program {
            program: prog.clone(),
            why: "an argument contains a NUL byte".into(),
        })
    };
    let path = to_c(&resolve_program(prog))?;
    let cargs = argv
        .iter()
        .map(|a| to_c(a))
        .collect::<Result<Vec<_>, _>>()?;
    // Descendants orphaned while we record are reparented to this process, so that none is
    // left running or unreaped when `record` returns (see `reap_descendants` and the sweep
    // when `supervision` is dropped).
    let devnull = if opts.discard_stdout {
        Some(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/null")
                .map_err(|e| RecordError::sys("cannot open /dev/null", e))?,
        )
    } else {
        None
    };
    let out_fd = devnull.as_ref().map(std::os::fd::AsRawFd::as_raw_fd);
    let mut supervision = proftrust_supervise::Run::begin();
    let mut child = supervision
        .spawn(|| sys::spawn_blocked(&path, &cargs, out_fd), |c| c.pid)
        .map_err(|e| RecordError::sys("fork failed", e))?;
    let pid = child.pid;
    // From here on, any error must not leave the child behind.
    let cleanup = |e: RecordError| {
        sys::kill_group(pid);
        let _ = sys::wait_blocking(pid);
        e
    };
    let mut session = open_events(opts, &[pid], seed, true).map_err(cleanup)?;
    let pidfd = sys::pidfd_open(pid).map_err(|e| cleanup(RecordError::sys("pidfd_open", e)))?;
    let exec = child
        .release()
        .map_err(|e| cleanup(RecordError::sys("cannot release the child", e)))?;
    let mut exec_error = None;
    if let sys::ExecResult::Failed(errno) = exec {
        exec_error = Some(format!(
            "{}: {}",
            prog,
            std::io::Error::from_raw_os_error(errno)
        ));
    }
    let start = Instant::now();
    let mut polls = 0u32;
    let outcome = loop {
        polls += 1;
        if polls % 5 == 0 {
            proftrust_supervise::watch_orphans();
        }
        let mut fds: Vec<i32> = session.opened.iter().map(|o| o.fd.as_raw_fd()).collect();
        fds.push(pidfd.as_raw_fd());
        let mut wait_ms = 100i32;
        if let Some(t) = opts.timeout {
            let left = t.saturating_sub(start.elapsed());
            wait_ms = wait_ms.min(left.as_millis() as i32);
        }
        sys::poll_readable(&fds, wait_ms).map_err(|e| cleanup(RecordError::sys("poll", e)))?;
        session.drain().map_err(cleanup)?;
        match sys::has_exited(pid) {
            Ok(true) => {
                // The program has ended: what is left of its process group goes with it,
                // killed while the unreaped leader still holds the group id.
                sys::kill_group(pid);
                let w =
                    sys::wait_blocking(pid).map_err(|e| cleanup(RecordError::sys("waitpid", e)))?;
                break outcome_of(w);
            }
            Ok(false) => {}
            Err(e) => return Err(cleanup(RecordError::sys("waitid", e))),
        }
        let stop = match (
            opts.stop.as_ref().and_then(StopSignal::signal),
            opts.timeout,
        ) {
            (Some(signal), _) => Some(RunOutcome::Interrupted {
                signal,
                name: sys::signal_name(signal),
            }),
            (None, Some(t)) if start.elapsed() >= t => Some(RunOutcome::TimedOut {
                millis: t.as_millis() as u64,
            }),
            _ => None,
        };
        if let Some(outcome) = stop {
            // SIGTERM lets the program end cleanly; SIGKILL after the grace period. Samples
            // keep being drained meanwhile.
            sys::signal_group(pid, libc::SIGTERM);
            let grace = Instant::now() + proftrust_supervise::TERM_GRACE;
            while Instant::now() < grace && !sys::has_exited(pid).unwrap_or(true) {
                let _ = sys::poll_readable(&[pidfd.as_raw_fd()], 20);
                session.drain().map_err(cleanup)?;
            }
            sys::kill_group(pid);
            let _ = sys::wait_blocking(pid);
            break outcome;
        }
    };
    for o in &session.opened {
        let _ = sys::disable(&o.fd);
    }
    let drained = session.drain();
    reap_descendants(&session.recs, pid);
    drained?;
    let recording = finish(
        session,
        opts,
        seed,
        argv.to_vec(),
        Some(outcome),
        maps::AddressSpaces::default(),
    )?;
    Ok(Recording {
        exec_error,
        pid: Some(pid as u32),
        ..recording
    })
}

/// The parent pid of `pid` from `/proc/PID/stat` (the field after the parenthesised name).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Whether `pid` is a live descendant of this process (its parent chain reaches us).
fn is_descendant(pid: i32) -> bool {
    let me = std::process::id() as i32;
    let mut p = pid;
    for _ in 0..256 {
        match parent_of(p) {
            Some(pp) if pp == me => return true,
            Some(pp) if pp > 1 => p = pp,
            _ => return false,
        }
    }
    false
}

/// After the program has ended (and its process group was killed): every process it forked
/// (the `FORK` records) that is still around is killed if it is still our descendant (it
/// left the group) and reaped once it is our child (orphans are reparented to us, see
/// [`Subreaper`]). Gives up after 2 s; a process that is gone or belongs to someone else is
/// left alone (its pid may have been reused).
fn reap_descendants(recs: &[Rec], leader: i32) {
    let mut pids: Vec<i32> = recs
        .iter()
        .filter_map(|r| match r {
            Rec::Fork { pid, .. } => Some(*pid as i32),
            _ => None,
        })
        .filter(|&p| p != leader && p > 1)
        .collect();
    pids.sort_unstable();
    pids.dedup();
    let deadline = Instant::now() + Duration::from_secs(2);
    while !pids.is_empty() {
        pids.retain(|&p| match sys::reap_if_ended(p) {
            Ok(true) => false,
            Ok(false) => {
                sys::kill_process(p);
                true
            }
            // Not our child: gone, someone else's, or a descendant whose parent has not
            // died yet (it will be reparented to us).
            Err(_) => {
                if is_descendant(p) {
                    sys::kill_process(p);
                    true
                } else {
                    false
                }
            }
        });
        if pids.is_empty() || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Whether `pid` still runs: present in /proc and not a zombie (`Z`) or dead (`X`). A zombie
/// stays visible to `kill(pid, 0)` until its parent reaps it, which may be never.
fn process_alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, Some('Z') | Some('X') | None)
}

fn record_pid(pid: i32, opts: &RecordOptions, seed: u64) -> Result<Recording, RecordError> {
    if pid <= 0 {
        return Err(RecordError::NoSuchPid(pid));
    }
    match sys::process_signalable(pid) {
        Ok(()) => {}
        Err(libc::EPERM) => {
            return Err(RecordError::PidNotPermitted {
                pid,
                why: format!(
                    "kill -0: {}",
                    std::io::Error::from_raw_os_error(libc::EPERM)
                ),
            })
        }
        Err(_) => return Err(RecordError::NoSuchPid(pid)),
    }
    let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map_err(|_| RecordError::NoSuchPid(pid))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_unstable();
    let mut session = open_events(opts, &tids, seed, false)?;
    let pidfd = sys::pidfd_open(pid).map_err(|e| RecordError::sys("pidfd_open", e))?;
    let stop = match &opts.stop {
        Some(s) => s.clone(),
        None => sys::install_stop_handler(),
    };
    for o in &session.opened {
        sys::enable(&o.fd).map_err(|e| RecordError::sys("PERF_EVENT_IOC_ENABLE", e))?;
    }
    // Read the maps only now: every mapping made from here on also arrives as an mmap2
    // record, so a process caught in the middle of exec (or of dlopen) is still covered.
    let mut initial = maps::AddressSpaces::default();
    initial.load_proc_maps(pid as u32);
    let start = Instant::now();
    let command = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default();
    loop {
        let mut fds: Vec<i32> = session.opened.iter().map(|o| o.fd.as_raw_fd()).collect();
        fds.push(pidfd.as_raw_fd());
        sys::poll_readable(&fds, 100).map_err(|e| RecordError::sys("poll", e))?;
        session.drain()?;
        if !process_alive(pid) || stop.signal().is_some() {
            break;
        }
        if let Some(t) = opts.timeout {
            if start.elapsed() >= t {
                break;
            }
        }
    }
    for o in &session.opened {
        let _ = sys::disable(&o.fd);
    }
    session.drain()?;
    finish(session, opts, seed, command, None, initial)
}

/// Throttling from the records, enabled/running time from a final `read(2)` of every event
/// (inherited children's times included), summed per event.
fn recording_health(session: &Session, recs: &[Rec], n_events: usize) -> RecordingHealth {
    let mut h = RecordingHealth::default();
    let mut open: HashMap<u64, u64> = HashMap::new();
    let last = recs.iter().map(Rec::time).max().unwrap_or(0);
    for r in recs {
        match *r {
            Rec::Throttle { stream_id, time } => {
                h.throttles += 1;
                open.entry(stream_id).or_insert(time);
            }
            Rec::Unthrottle { stream_id, time } => {
                h.unthrottles += 1;
                if let Some(t0) = open.remove(&stream_id) {
                    h.throttled_ns = h.throttled_ns.saturating_add(time.saturating_sub(t0));
                }
            }
            _ => {}
        }
    }
    for t0 in open.values() {
        h.throttled_ns = h.throttled_ns.saturating_add(last.saturating_sub(*t0));
    }
    // One instance per (event, process, CPU): each is enabled while the process runs on any
    // CPU and running while it runs on its own, so the process's enabled time is the
    // instances' largest and its running time their sum.
    let mut per: HashMap<(usize, i32), (u64, u64)> = HashMap::new();
    for o in &session.opened {
        if let Ok((_, enabled, running)) = sys::read_times(&o.fd) {
            let t = per.entry((o.spec_idx, o.pid)).or_default();
            t.0 = t.0.max(enabled);
            t.1 = t.1.saturating_add(running);
        }
    }
    let mut times = vec![(0u64, 0u64, false); n_events];
    for ((si, _), (enabled, running)) in per {
        if let Some(t) = times.get_mut(si) {
            t.0 = t.0.saturating_add(enabled);
            t.1 = t.1.saturating_add(running);
            t.2 = true;
        }
    }
    h.event_times = times
        .into_iter()
        .enumerate()
        .filter(|(_, t)| t.2)
        .map(|(i, (enabled_ns, running_ns, _))| EventTimes {
            event: i as u16,
            enabled_ns,
            running_ns,
        })
        .collect();
    h
}

/// The recording from the session's records, replayed in time order ([`Replay`]), with the
/// events as recorded, the process tree, the health of the recording and the kernel
/// symbols its samples fall in.
fn finish(
    mut session: Session,
    opts: &RecordOptions,
    seed: u64,
    command: Vec<String>,
    outcome: Option<RunOutcome>,
    spaces: maps::AddressSpaces,
) -> Result<Recording, RecordError> {
    let mut recs = std::mem::take(&mut session.recs);
    recs.sort_by_key(Rec::time);
    let mut set = SampleSet {
        command,
        outcome,
        health: recording_health(&session, &recs, opts.events.len()),
        events: event_descs(opts, seed),
        ..SampleSet::default()
    };
    // DWARF stacks: unwound with the binaries the mappings name, found as perf finds them.
    let locator = proftrust_binary::BinaryLocator::new(proftrust_binary::LocateOptions::default());
    let processes = process_tree(&recs);
    let mut replay = Replay::new(&session, opts, spaces, &locator);
    for r in recs {
        replay.apply(r, &mut set);
    }
    set.modules = replay.spaces.modules;
    set.kernel_symbols = kernel_symbols_of(&set);
    Ok(Recording {
        samples: set,
        seed,
        exec_error: None,
        stats: replay.stats,
        pid: None,
        processes,
    })
}

/// The recorded events as the sample file describes them (period or frequency, the
/// randomisation's bound, the seed, what each sample carries).
fn event_descs(opts: &RecordOptions, seed: u64) -> Vec<EventDesc> {
    opts.events
        .iter()
        .map(|spec| {
            let base = opts.period.unwrap_or_else(|| spec.default_period());
            EventDesc {
                name: spec.name.clone(),
                kind: spec.kind,
                config: SamplingConfig {
                    period: match opts.frequency {
                        Some(f) => PeriodMode::Frequency(f),
                        None => PeriodMode::Fixed(base),
                    },
                    randomize_max: opts.randomize.then_some(base / 8),
                    precise: spec.precise,
                    seed: Some(seed),
                    user_only: opts.user_only,
                    callchain: opts.callchain || opts.dwarf_stack.is_some(),
                    branch_stack: opts.branch_stack,
                },
            }
        })
        .collect()
}

/// The processes of the recording from its fork and exec records: each one's parent and
/// the times of its `execve`s.
fn process_tree(recs: &[Rec]) -> Vec<ProcessInfo> {
    let mut processes: std::collections::BTreeMap<u32, ProcessInfo> = Default::default();
    for r in recs {
        match *r {
            Rec::Fork { pid, ppid, .. } if pid != ppid => {
                let p = processes.entry(pid).or_default();
                p.pid = pid;
                p.parent = Some(ppid);
            }
            Rec::Comm {
                pid,
                time,
                exec: true,
                ..
            } => {
                let p = processes.entry(pid).or_default();
                p.pid = pid;
                p.execs.push(time);
            }
            _ => {}
        }
    }
    processes.into_values().collect()
}

/// The records replayed in time order into a [`SampleSet`]: the address spaces (and the
/// DWARF unwinder's copy of them) follow mmaps, execs and forks; each sample is located,
/// gets its actual period and its call chain (recorded, or unwound from its stack copy).
struct Replay<'a> {
    session: &'a Session,
    opts: &'a RecordOptions,
    /// The event index of each event id.
    id_to_event: HashMap<u64, u16>,
    spaces: maps::AddressSpaces,
    unwinder: Option<proftrust_binary::ProcessUnwinder<'a>>,
    /// Scratch for the unwound return addresses.
    unwound: Vec<u64>,
    stats: RecordStats,
    /// The last count read per event instance (`PERF_SAMPLE_READ`).
    last_count: HashMap<u64, u64>,
}

impl<'a> Replay<'a> {
    fn new(
        session: &'a Session,
        opts: &'a RecordOptions,
        spaces: maps::AddressSpaces,
        locator: &'a proftrust_binary::BinaryLocator,
    ) -> Replay<'a> {
        let mut unwinder = opts
            .dwarf_stack
            .map(|_| proftrust_binary::ProcessUnwinder::new(locator));
        if let Some(u) = &mut unwinder {
            for (pid, start, end, pgoff, path) in spaces.mappings() {
                u.map(pid, start, end, pgoff, &path, None);
            }
        }
        Replay {
            session,
            opts,
            id_to_event: session
                .opened
                .iter()
                .map(|o| (o.id, o.spec_idx as u16))
                .collect(),
            spaces,
            unwinder,
            unwound: Vec::new(),
            stats: session.stats.clone(),
            last_count: HashMap::new(),
        }
    }

    /// Applies one record: to the address spaces, or to `set`.
    fn apply(&mut self, r: Rec, set: &mut SampleSet) {
        match r {
            Rec::Mmap {
                pid,
                start,
                len,
                pgoff,
                prot,
                path,
                ..
            } => {
                if prot & libc::PROT_EXEC as u32 != 0 {
                    self.spaces.map(pid, start, len, pgoff, &path);
                    if let Some(u) = &mut self.unwinder {
                        u.map(pid, start, start.saturating_add(len), pgoff, &path, None);
                    }
                }
            }
            Rec::Comm {
                pid,
                tid,
                time,
                comm,
                exec,
            } => {
                if exec {
                    self.spaces.exec(pid);
                    if let Some(u) = &mut self.unwinder {
                        u.exec(pid);
                    }
                }
                let name = ThreadName {
                    pid,
                    tid,
                    time,
                    comm,
                    exec,
                };
                set.threads.push(name);
            }
            Rec::Fork {
                pid,
                tid,
                ppid,
                ptid,
                time,
            } => {
                self.spaces.fork(pid, ppid);
                if let Some(u) = &mut self.unwinder {
                    u.fork(ppid, pid);
                }
                let start = ThreadStart {
                    pid,
                    tid,
                    ppid,
                    ptid,
                    time,
                };
                set.forks.push(start);
            }
            Rec::Lost { lost } => set.lost += lost,
            Rec::Throttle { .. } => self.stats.throttled += 1,
            Rec::Unthrottle { .. } => {}
            Rec::Sample(s) => set.samples.push(self.sample(s)),
        }
    }

    /// The sample of `s`: its event, actual period, location, call chain and branches.
    fn sample(&mut self, s: RawSample) -> Sample {
        let period = self.period(s.stream_id, s.time, s.period, s.count);
        let loc = self.spaces.locate(s.pid, s.ip);
        if loc.module.is_none() {
            self.stats.unmapped_samples += 1;
        }
        let callchain = self.callchain(s.pid, s.ip, &s.callchain, s.user_stack.as_ref());
        let branches = s
            .branches
            .iter()
            .map(|b| b.located(|a| self.spaces.locate(s.pid, a)))
            .collect();
        Sample {
            event: *self.id_to_event.get(&s.id).unwrap_or(&0),
            pid: s.pid,
            tid: s.tid,
            time: s.time,
            cpu: s.cpu,
            period,
            ip: loc,
            callchain,
            branches,
        }
    }

    /// The period a sample of instance `stream_id` at `time` stands for: with randomised
    /// periods, the one in force then (and the gap between the counts it read, when it
    /// read them, against it); else the recorded one.
    fn period(&mut self, stream_id: u64, time: u64, period: u64, count: Option<u64>) -> u64 {
        let randomized = self.session.randomized.get(&stream_id);
        let period = match randomized {
            Some(r) => {
                let i = r.history.partition_point(|&(t, _)| t <= time);
                r.history[i.saturating_sub(1)].1
            }
            None => {
                if self.opts.randomize {
                    self.stats.unrandomized_samples += 1;
                }
                period
            }
        };
        if let (Some(c), true) = (count, randomized.is_some()) {
            if let Some(prev) = self.last_count.insert(stream_id, c) {
                self.stats
                    .interval_excess
                    .push(c.wrapping_sub(prev) as i64 - period as i64);
            }
        }
        period
    }

    /// The callers of a sample at `ip` of `pid`: the recorded call chain without its
    /// context markers and the sampled ip heading it; with a user stack copy, then the
    /// user ip of a kernel sample and the unwound user callers.
    fn callchain(
        &mut self,
        pid: u32,
        ip: u64,
        callchain: &[u64],
        user_stack: Option<&(proftrust_model::UserRegs, Vec<u8>)>,
    ) -> Vec<Location> {
        let mut chain: Vec<Location> = Vec::new();
        for (k, &a) in callchain.iter().enumerate() {
            if a >= perf_event_open_sys::bindings::PERF_CONTEXT_MAX {
                continue; // context marker (PERF_CONTEXT_USER etc.)
            }
            if k <= 1 && a == ip && chain.is_empty() {
                continue; // the sampled ip itself heads the chain
            }
            chain.push(self.spaces.locate(pid, a));
        }
        if let (Some(u), Some((regs, stack))) = (&mut self.unwinder, user_stack) {
            self.unwound.clear();
            u.unwind(pid, *regs, stack, &mut self.unwound);
            if ip != regs.ip {
                chain.push(self.spaces.locate(pid, regs.ip));
            }
            for &ra in &self.unwound {
                chain.push(self.spaces.locate(pid, ra));
            }
        }
        chain
    }
}

/// The kernel functions the kernel samples and call-chain entries of `set` fall in, copied
/// from `/proc/kallsyms` now (the running kernel is the recorded one) with their extents,
/// so the file names them on any machine later. Empty without kernel samples, or when
/// kallsyms cannot be read with addresses (`kernel.kptr_restrict`; the samples keep their
/// addresses and `--kallsyms` names them later).
fn kernel_symbols_of(set: &SampleSet) -> Vec<proftrust_model::KernelSymbol> {
    let kernel: Vec<bool> = set
        .modules
        .iter()
        .map(|(_, m)| proftrust_binary::is_kernel_module(&m.path))
        .collect();
    let is_kernel = |l: &Location| l.module.is_some_and(|m| kernel[m.0 as usize]);
    let addrs: Vec<u64> = set
        .samples
        .iter()
        .flat_map(|s| std::iter::once(&s.ip).chain(&s.callchain))
        .filter(|l| is_kernel(l))
        .map(|l| l.svma.0)
        .collect();
    if addrs.is_empty() {
        return Vec::new();
    }
    match proftrust_binary::Kallsyms::open(std::path::Path::new("/proc/kallsyms")) {
        Ok(k) => k.covering(addrs),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 001 §4 as read in `docs/record.md`: `T + U{0..=T/8}`, seeded. With T = 800 the
    /// added value takes the 101 values 0..=100: every one appears (both ends included), the
    /// counts pass a chi-square test of uniformity (100 degrees of freedom, critical value
    /// 149.45 at p = 0.001), the same seed repeats the sequence and another seed does not.
    #[test]
    fn period_randomizer_is_uniform_inclusive_and_seeded() {
        let t = 800u64;
        let mut r = PeriodRandomizer::new(t, 42);
        assert_eq!(r.max_added(), 100);
        let n = 101_000usize;
        let mut counts = [0u64; 101];
        let mut first = Vec::new();
        for i in 0..n {
            let p = r.next_period();
            assert!((t..=t + t / 8).contains(&p), "{p}");
            counts[(p - t) as usize] += 1;
            if i < 64 {
                first.push(p);
            }
        }
        assert!(counts.iter().all(|&c| c > 0), "{counts:?}");
        let e = n as f64 / 101.0;
        let chi2: f64 = counts.iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
        assert!(chi2 < 149.45, "chi-square {chi2:.1}");
        let again: Vec<u64> = {
            let mut r = PeriodRandomizer::new(t, 42);
            (0..64).map(|_| r.next_period()).collect()
        };
        assert_eq!(again, first);
        let other: Vec<u64> = {
            let mut r = PeriodRandomizer::new(t, 43);
            (0..64).map(|_| r.next_period()).collect()
        };
        assert_ne!(other, first);
    }
}
