//! The crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong while recording.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The event name does not parse.
    #[error("bad event `{name}`: {why}")]
    BadEvent {
        /// As written.
        name: String,
        /// What is wrong and what is accepted.
        why: String,
    },
    /// A hardware event on a machine whose PMU perf_event_open cannot see.
    #[error(
        "hardware event `{name}` is not available on this machine (no PMU visible to perf_event_open); use -e cpu-clock or -e task-clock"
    )]
    HardwareUnavailable {
        /// The event as written.
        name: String,
    },
    /// Branch stacks asked for but not supported by this event/PMU.
    #[error(
        "branch stacks (-b) are not supported for `{name}` here: they need a hardware PMU with a branch record facility (Intel LBR, AMD BRS/LbrExtV2); drop -b"
    )]
    BranchStackUnsupported {
        /// The event as written.
        name: String,
    },
    /// The options contradict each other or are out of range.
    #[error("invalid options: {0}")]
    BadOptions(String),
    /// perf_event_open failed for another reason.
    #[error("perf_event_open for `{name}` (pid {pid}, cpu {cpu}) failed: {source}{hint}")]
    Open {
        /// Event name.
        name: String,
        /// Target pid.
        pid: i32,
        /// CPU.
        cpu: i32,
        /// The OS error.
        source: std::io::Error,
        /// A hint (`; hint: ...`) or empty.
        hint: String,
    },
    /// The program to run does not exist or is not executable.
    #[error("cannot run `{program}`: {why}")]
    Program {
        /// As given.
        program: String,
        /// Why.
        why: String,
    },
    /// The process given with `--pid` does not exist.
    #[error("no process with pid {0}; check the pid (ps -p PID)")]
    NoSuchPid(i32),
    /// The process given with `--pid` exists but this user may not profile it.
    #[error("process {pid} exists but this user may not profile it ({why}): run as the process's owner or as root (profiling another user's process needs the right to trace it; one's own needs kernel.perf_event_paranoid at most 2)")]
    PidNotPermitted {
        /// The pid.
        pid: i32,
        /// What refused (`kill -0: Operation not permitted`, perf_event_open's error).
        why: String,
    },
    /// A system call of the recorder failed.
    #[error("{what}: {source}")]
    Sys {
        /// What we were doing.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A ring-buffer record is shorter than its type requires.
    #[error(
        "malformed perf record of type {kind} at byte {offset} of the ring-buffer batch: {why}"
    )]
    BadRecord {
        /// `perf_event_header.type`.
        kind: u32,
        /// Offset in the drained batch.
        offset: usize,
        /// What is wrong.
        why: String,
    },
    /// Reading a binary for its build-id and segments failed.
    #[error("cannot read ELF file {path}: {why}")]
    Elf {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

impl RecordError {
    pub(crate) fn sys(what: impl Into<String>, source: std::io::Error) -> RecordError {
        RecordError::Sys {
            what: what.into(),
            source,
        }
    }
}
