//! The crate's error type.
//!
//! [`Error`] is typed where a caller would branch: a tool that is not installed
//! ([`Error::ToolMissing`], with the [`Tool`] and the fix), an event name nobody knows
//! ([`Error::NoSuchEvent`]), an event this machine cannot count ([`Error::EventUnavailable`],
//! with the fallback), a program that could not be run or ended abnormally
//! ([`Error::Program`]) and options that cannot be used together or out of range
//! ([`Error::Options`]). The library errors these come from (the recorder's
//! [`RecordError`](proftrust_record::RecordError), the exact backends'
//! [`ExactError`](proftrust_exact::ExactError)) become them through `From` and through
//! [`Context`], which looks through the cause chain; the message is the one the library
//! error (or the context) wrote, so what the CLI prints does not depend on the variant.

use proftrust_exact::ExactError;
use proftrust_record::RecordError;

/// A tool proftrust runs, for [`Error::ToolMissing`]. (perf and llvm-mca are never run:
/// the recorder calls `perf_event_open` itself, and the llvm-mca tables are committed.)
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Tool {
    /// `qemu-x86_64` with TCG plugin support (`scripts/install-qemu.sh` builds QEMU 10).
    Qemu,
    /// proftrust's QEMU plugin (`libproftrust_qemu_plugin.so`).
    QemuPlugin,
    /// valgrind (callgrind).
    Valgrind,
    /// Another tool, by the name it is run as.
    Other(String),
}

impl Tool {
    /// The tool by the name it is run as (`qemu-x86_64`, `valgrind`).
    pub fn from_program(name: &str) -> Tool {
        match name {
            "qemu-x86_64" => Tool::Qemu,
            "valgrind" => Tool::Valgrind,
            other => Tool::Other(other.to_string()),
        }
    }

    /// The tool an environment variable of proftrust points at, if any.
    fn from_env_var(var: &str) -> Option<Tool> {
        match var {
            "PROFTRUST_QEMU" => Some(Tool::Qemu),
            "PROFTRUST_QEMU_PLUGIN" => Some(Tool::QemuPlugin),
            "PROFTRUST_VALGRIND" => Some(Tool::Valgrind),
            _ => None,
        }
    }
}

impl std::fmt::Display for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Tool::Qemu => "qemu-x86_64",
            Tool::QemuPlugin => "the proftrust QEMU plugin",
            Tool::Valgrind => "valgrind",
            Tool::Other(name) => name,
        })
    }
}

/// The cause of a typed variant: the library error under the message, if any (spelled
/// out in the enum, where `thiserror` needs to see the `Option`).
type Cause = Option<Box<dyn std::error::Error + Send + Sync + 'static>>;

/// Why a command could not run. The message names the input and the problem (and the fix
/// where there is one); [`std::error::Error::source`] gives the cause from the library that
/// failed, so a caller printing the chain (`error: outer: inner`) shows both.
///
/// The typed variants carry `message` (what the error prints) and `source` (the library
/// error under it, when the message is a context put around it).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An input is not usable (an empty profile, a file of another kind); the message says
    /// which and how to fix it.
    #[error("{0}")]
    Invalid(String),
    /// The options cannot be used: out of range, contradicting each other, or missing
    /// what they need; the message names the option and the fix.
    #[error("{0}")]
    Options(String),
    /// A tool the command runs is not installed (or an environment variable points at
    /// nothing): which one, and how to install it.
    #[error("{message}")]
    ToolMissing {
        /// The tool.
        tool: Tool,
        /// How to get it (`scripts/install-qemu.sh`, `apt-get install valgrind`, or which
        /// variable to unset).
        fix: String,
        /// The message.
        message: String,
        /// The library error, when `message` is a context around it.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// No event has this name (the recorder does not know it, or the profile has no such
    /// event).
    #[error("{message}")]
    NoSuchEvent {
        /// The event as written.
        event: String,
        /// The message.
        message: String,
        /// The library error, when `message` is a context around it.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// The event exists but this machine cannot count it (no hardware PMU visible to
    /// `perf_event_open`, no branch record facility).
    #[error("{message}")]
    EventUnavailable {
        /// The event as written.
        event: String,
        /// Why it cannot be counted here.
        why: String,
        /// What to use instead (`-e cpu-clock or -e task-clock`, `drop -b`).
        fallback: String,
        /// The message.
        message: String,
        /// The library error, when `message` is a context around it.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// The program could not be run (not found, not executable, built for another machine,
    /// the runner never started it), or it ended abnormally where the command needs it to
    /// finish.
    #[error("{message}")]
    Program {
        /// The program as given, when known.
        program: Option<String>,
        /// How it ended when it did run (`killed by signal 11`), else `None`.
        ended: Option<String>,
        /// The message.
        message: String,
        /// The library error, when `message` is a context around it.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },
    /// A step failed: what was being done, and the library error that stopped it.
    #[error("{what}")]
    Step {
        /// What was being done (names the file or program).
        what: String,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// A metric could not be computed (empty sides, mismatched inputs).
    #[error(transparent)]
    Metrics(#[from] proftrust_metrics::Error),
    /// A profile file could not be read (the reader's message names the file and the
    /// problem).
    #[error(transparent)]
    Format(#[from] proftrust_formats::FormatError),
    /// A binary or symbol file could not be read.
    #[error(transparent)]
    Binary(#[from] proftrust_binary::BinaryError),
    /// The recorder could not record (bad options, no permission); the failures above
    /// (events, programs) come as their own variants.
    #[error(transparent)]
    Record(RecordError),
    /// The exact counts could not be made (the failures above come as their own
    /// variants).
    #[error(transparent)]
    Exact(ExactError),
    /// An export could not be written (the message names the format and the problem).
    #[error(transparent)]
    Export(#[from] proftrust_export::ExportError),
}

/// What a library error means to a caller: the fields of a typed variant but its message
/// and source.
enum Kind {
    ToolMissing {
        tool: Tool,
        fix: String,
    },
    NoSuchEvent {
        event: String,
    },
    EventUnavailable {
        event: String,
        why: String,
        fallback: String,
    },
    Program {
        program: Option<String>,
        ended: Option<String>,
    },
    Options,
}

impl Kind {
    fn of_exact(e: &ExactError) -> Option<Kind> {
        Some(match e {
            ExactError::ToolMissing { tool, install } => Kind::ToolMissing {
                tool: Tool::from_program(tool),
                fix: install.clone(),
            },
            ExactError::PluginMissing { .. } => Kind::ToolMissing {
                tool: Tool::QemuPlugin,
                fix: "cargo build --release -p proftrust-qemu-plugin, or set PROFTRUST_QEMU_PLUGIN"
                    .into(),
            },
            ExactError::QemuWithoutPlugins { .. } => Kind::ToolMissing {
                tool: Tool::Qemu,
                fix: "scripts/install-qemu.sh".into(),
            },
            ExactError::EnvPath { var, .. } => Kind::ToolMissing {
                tool: Tool::from_env_var(var)?,
                fix: format!("unset {var} to use the default, or point it at the file"),
            },
            ExactError::EmptyCommand => Kind::Program {
                program: None,
                ended: None,
            },
            ExactError::CommandNotFound { name } => Kind::Program {
                program: Some(name.clone()),
                ended: None,
            },
            ExactError::NotExecutable { path } | ExactError::WrongMachine { program: path, .. } => {
                Kind::Program {
                    program: Some(path.display().to_string()),
                    ended: None,
                }
            }
            ExactError::StartFailed { .. } | ExactError::Exec(_) => Kind::Program {
                program: None,
                ended: None,
            },
            ExactError::Unsupported(_) => Kind::Options,
            _ => return None,
        })
    }

    fn of_record(e: &RecordError) -> Option<Kind> {
        Some(match e {
            RecordError::BadEvent { name, .. } => Kind::NoSuchEvent {
                event: name.clone(),
            },
            RecordError::HardwareUnavailable { name } => Kind::EventUnavailable {
                event: name.clone(),
                why: "no PMU visible to perf_event_open".into(),
                fallback: "-e cpu-clock or -e task-clock".into(),
            },
            RecordError::BranchStackUnsupported { name } => Kind::EventUnavailable {
                event: name.clone(),
                why: "no branch record facility (Intel LBR, AMD BRS/LbrExtV2)".into(),
                fallback: "drop -b".into(),
            },
            RecordError::Program { program, .. } => Kind::Program {
                program: Some(program.clone()),
                ended: None,
            },
            RecordError::BadOptions(_) => Kind::Options,
            _ => return None,
        })
    }

    /// The kind of a pipeline error (`None` for the untyped ones).
    fn of_error(e: &Error) -> Option<Kind> {
        Some(match e {
            Error::Options(_) => Kind::Options,
            Error::ToolMissing { tool, fix, .. } => Kind::ToolMissing {
                tool: tool.clone(),
                fix: fix.clone(),
            },
            Error::NoSuchEvent { event, .. } => Kind::NoSuchEvent {
                event: event.clone(),
            },
            Error::EventUnavailable {
                event,
                why,
                fallback,
                ..
            } => Kind::EventUnavailable {
                event: event.clone(),
                why: why.clone(),
                fallback: fallback.clone(),
            },
            Error::Program { program, ended, .. } => Kind::Program {
                program: program.clone(),
                ended: ended.clone(),
            },
            Error::Record(r) => Kind::of_record(r)?,
            Error::Exact(x) => Kind::of_exact(x)?,
            _ => return None,
        })
    }

    /// The first typed failure along `e`'s cause chain.
    fn in_chain(e: &(dyn std::error::Error + 'static)) -> Option<Kind> {
        let mut cur = Some(e);
        while let Some(c) = cur {
            let k = if let Some(x) = c.downcast_ref::<ExactError>() {
                Kind::of_exact(x)
            } else if let Some(r) = c.downcast_ref::<RecordError>() {
                Kind::of_record(r)
            } else if let Some(n) = c.downcast_ref::<proftrust_model::NoSuchEvent>() {
                Some(Kind::NoSuchEvent {
                    event: n.name.clone(),
                })
            } else if let Some(p) = c.downcast_ref::<Error>() {
                Kind::of_error(p)
            } else {
                None
            };
            if k.is_some() {
                return k;
            }
            cur = c.source();
        }
        None
    }

    fn into_error(self, message: String, source: Cause) -> Error {
        match self {
            Kind::ToolMissing { tool, fix } => Error::ToolMissing {
                tool,
                fix,
                message,
                source,
            },
            Kind::NoSuchEvent { event } => Error::NoSuchEvent {
                event,
                message,
                source,
            },
            Kind::EventUnavailable {
                event,
                why,
                fallback,
            } => Error::EventUnavailable {
                event,
                why,
                fallback,
                message,
                source,
            },
            Kind::Program { program, ended } => Error::Program {
                program,
                ended,
                message,
                source,
            },
            // `Options` has no source: the library error's message joins the context's.
            Kind::Options => match source {
                Some(s) => Error::Step {
                    what: message,
                    source: s,
                },
                None => Error::Options(message),
            },
        }
    }
}

impl Error {
    /// `what` around `source`: a typed variant when `source` (or a cause of it) is a
    /// failure a caller can act on, else [`Error::Step`]. The message is `what` either way.
    pub(crate) fn step(
        what: String,
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    ) -> Error {
        match Kind::in_chain(source.as_ref()) {
            Some(Kind::Options) | None => Error::Step { what, source },
            Some(k) => k.into_error(what, Some(source)),
        }
    }

    /// An exact-count failure with `message` for its text (the error's own message, with a
    /// hint added), typed as the error is.
    pub(crate) fn exact_with_message(e: ExactError, message: String) -> Error {
        match Kind::of_exact(&e) {
            Some(k) => k.into_error(message, None),
            None => Error::Invalid(message),
        }
    }

    /// The program `program` ended abnormally (`ended`, e.g. `killed by signal 11`) where
    /// the command needs it to finish; `message` is the error's text.
    pub(crate) fn program_ended(program: Option<String>, ended: String, message: String) -> Error {
        Error::Program {
            program,
            ended: Some(ended),
            message,
            source: None,
        }
    }

    /// The program `program` could not be run; `message` is the error's text.
    pub(crate) fn program_not_run(program: Option<String>, message: String) -> Error {
        Error::Program {
            program,
            ended: None,
            message,
            source: None,
        }
    }
}

/// A library error without a cause of its own becomes its typed variant with the same
/// message; one with a cause stays whole (`Error::Exact`/`Error::Record`), so the chain
/// prints as before.
fn typed_or<E: std::error::Error>(
    e: E,
    kind: Option<Kind>,
    whole: impl FnOnce(E) -> Error,
) -> Error {
    match kind {
        Some(k) if e.source().is_none() => k.into_error(e.to_string(), None),
        _ => whole(e),
    }
}

impl From<ExactError> for Error {
    fn from(e: ExactError) -> Error {
        let k = Kind::of_exact(&e);
        typed_or(e, k, Error::Exact)
    }
}

/// The recorder's errors: an event `perf_event_open` says the machine has no counter for
/// (`ENOENT` for `cycles` without a hardware PMU: [`RecordError::HardwareUnavailable`])
/// becomes [`Error::EventUnavailable`], an unknown event name [`Error::NoSuchEvent`], a
/// program that cannot be run [`Error::Program`], bad options [`Error::Options`].
impl From<RecordError> for Error {
    fn from(e: RecordError) -> Error {
        let k = Kind::of_record(&e);
        typed_or(e, k, Error::Record)
    }
}

/// `e` and its causes, `outer: inner` (as `anyhow`'s `{:#}` prints a chain).
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `context` / `with_context` on results and options, as the CLI's `anyhow` offers: the
/// message becomes [`Error::Step`] (with the error as its source) or, when the error or
/// one of its causes is a typed failure (a missing tool, an event, a program), that
/// variant with the error as its source; for a `None`, [`Error::Invalid`].
pub trait Context<T> {
    /// Wraps a failure with `what`.
    fn context(self, what: impl Into<String>) -> Result<T>;
    /// Wraps a failure with the message `f` makes (called only on failure).
    fn with_context<S: Into<String>>(self, f: impl FnOnce() -> S) -> Result<T>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl Into<String>) -> Result<T> {
        self.map_err(|e| Error::step(what.into(), Box::new(e)))
    }
    fn with_context<S: Into<String>>(self, f: impl FnOnce() -> S) -> Result<T> {
        self.map_err(|e| Error::step(f().into(), Box::new(e)))
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: impl Into<String>) -> Result<T> {
        self.ok_or_else(|| Error::Invalid(what.into()))
    }
    fn with_context<S: Into<String>>(self, f: impl FnOnce() -> S) -> Result<T> {
        self.ok_or_else(|| Error::Invalid(f().into()))
    }
}

/// Returns early with [`Error::Invalid`] and a formatted message.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::Error::Invalid(format!($($arg)*)))
    };
}
pub(crate) use bail;

/// Returns early with [`Error::Options`] and a formatted message.
macro_rules! bail_options {
    ($($arg:tt)*) => {
        return Err($crate::Error::Options(format!($($arg)*)))
    };
}
pub(crate) use bail_options;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{execute as record, RecordRunOptions, RecordTarget};
    use crate::truth::{execute as truth, TruthBackend, TruthOptions};

    fn record_options(event: &str) -> RecordRunOptions {
        RecordRunOptions {
            target: RecordTarget::Command(vec!["/bin/true".into()]),
            events: vec![event.into()],
            ..Default::default()
        }
    }

    /// An event name the recorder does not know is `NoSuchEvent`, with the recorder's
    /// message unchanged.
    #[test]
    fn unknown_event_is_no_such_event() {
        let e = record(&record_options("no-such-event"), &crate::Silent).unwrap_err();
        let want = proftrust_record::EventSpec::parse_list("no-such-event")
            .unwrap_err()
            .to_string();
        match &e {
            Error::NoSuchEvent { event, source, .. } => {
                assert_eq!(event, "no-such-event");
                assert!(source.is_none());
            }
            other => panic!("not NoSuchEvent: {other:?}"),
        }
        assert_eq!(chain(&e), want);
        // Behind a context (audit's `bad --event`), the same variant and the same chain.
        let c = proftrust_record::EventSpec::parse_list("no-such-event")
            .context("bad --event \"no-such-event\"")
            .unwrap_err();
        assert!(matches!(&c, Error::NoSuchEvent { event, .. } if event == "no-such-event"));
        assert_eq!(chain(&c), format!("bad --event \"no-such-event\": {want}"));
    }

    /// An event the profile does not have, asked through `context` (audit's
    /// `--sample-event`), is `NoSuchEvent` too.
    #[test]
    fn event_missing_from_profile_is_no_such_event() {
        let set = proftrust_model::SampleSet::default();
        let e = set
            .event_named("cycles")
            .context("--sample-event")
            .unwrap_err();
        assert!(matches!(&e, Error::NoSuchEvent { event, .. } if event == "cycles"));
        assert_eq!(
            chain(&e),
            "--sample-event: the profile has no event cycles; it has none"
        );
    }

    /// `cycles` on a machine without a hardware PMU: perf_event_open's ENOENT, which the
    /// recorder reports as `HardwareUnavailable`, is `EventUnavailable` with the software
    /// clocks as the fallback.
    #[test]
    fn cycles_without_pmu_is_event_unavailable() {
        let test = "cycles_without_pmu_is_event_unavailable";
        if let Err(e) = record(&record_options("cpu-clock"), &crate::Silent) {
            proftrust_testkit::skip!("{test}: perf_event_open cannot record here: {}", chain(&e));
            return;
        }
        match record(&record_options("cycles"), &crate::Silent) {
            Ok(_) => proftrust_testkit::skip!("{test}: this machine has a hardware PMU"),
            Err(e) => {
                match &e {
                    Error::EventUnavailable {
                        event, fallback, ..
                    } => {
                        assert_eq!(event, "cycles");
                        assert_eq!(fallback, "-e cpu-clock or -e task-clock");
                    }
                    other => panic!("not EventUnavailable: {other:?}"),
                }
                let want = RecordError::HardwareUnavailable {
                    name: "cycles".into(),
                };
                assert_eq!(chain(&e), want.to_string());
            }
        }
    }

    /// Looking QEMU up with `$PROFTRUST_QEMU` pointing nowhere is `ToolMissing` for QEMU,
    /// through `truth` and with exact's message. The variable is set in a child process
    /// (this test binary running the part below alone): the lookup reads the environment,
    /// and other tests of this process run at the same time.
    #[test]
    fn qemu_pointing_nowhere_is_tool_missing() {
        const CHILD: &str = "PROFTRUST_TEST_QEMU_LOOKUP_CHILD";
        if std::env::var_os(CHILD).is_some() {
            let o = TruthOptions {
                backend: TruthBackend::Qemu,
                command: vec!["/bin/true".into()],
                ..Default::default()
            };
            let e = truth(&o, &crate::Silent).unwrap_err();
            let nowhere = std::env::var("PROFTRUST_QEMU").unwrap();
            match &e {
                Error::ToolMissing { tool, fix, .. } => {
                    assert_eq!(*tool, Tool::Qemu);
                    assert_eq!(
                        fix,
                        "unset PROFTRUST_QEMU to use the default, or point it at the file"
                    );
                }
                other => panic!("not ToolMissing: {other:?}"),
            }
            assert_eq!(
                chain(&e),
                format!("$PROFTRUST_QEMU={nowhere}: no such file (unset PROFTRUST_QEMU to use the default, or point it at the file)")
            );
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "error::tests::qemu_pointing_nowhere_is_tool_missing",
                "--nocapture",
            ])
            .env(CHILD, "1")
            .env("PROFTRUST_QEMU", dir.path().join("no-qemu-here"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("1 passed"), "{text}");
    }

    /// Each way the exact backends say a tool is missing maps to its tool and fix, with the
    /// message unchanged.
    #[test]
    fn exact_tool_errors_are_tool_missing() {
        let cases = [
            (
                ExactError::ToolMissing {
                    tool: "valgrind".into(),
                    install: "apt-get install valgrind".into(),
                },
                Tool::Valgrind,
                "apt-get install valgrind",
            ),
            (
                ExactError::QemuWithoutPlugins {
                    found: "/usr/bin/qemu-x86_64".into(),
                },
                Tool::Qemu,
                "scripts/install-qemu.sh",
            ),
            (
                ExactError::PluginMissing {
                    looked: "target/release".into(),
                },
                Tool::QemuPlugin,
                "cargo build --release -p proftrust-qemu-plugin, or set PROFTRUST_QEMU_PLUGIN",
            ),
        ];
        for (x, want_tool, want_fix) in cases {
            let text = x.to_string();
            let e = Error::from(x);
            assert_eq!(e.to_string(), text);
            assert!(
                matches!(&e, Error::ToolMissing { tool, fix, .. } if *tool == want_tool && fix == want_fix),
                "{e:?}"
            );
        }
        // Behind two contexts (the time-model run around the virtual PMU's trace), the
        // variant survives and the chain is the contexts then exact's message.
        let inner: Result<()> = Err(ExactError::ToolMissing {
            tool: "qemu-x86_64".into(),
            install: "scripts/install-qemu.sh".into(),
        })
        .context("cannot trace the program under QEMU");
        let outer = inner.context("the time-model run failed").unwrap_err();
        assert!(matches!(
            &outer,
            Error::ToolMissing {
                tool: Tool::Qemu,
                ..
            }
        ));
        assert_eq!(
            chain(&outer),
            "the time-model run failed: cannot trace the program under QEMU: qemu-x86_64 not found; install it with `scripts/install-qemu.sh`"
        );
    }

    /// A program that is not there is `Program`, not a missing tool.
    #[test]
    fn missing_program_is_program() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("absent");
        let e = crate::program::find(&p).unwrap_err();
        assert!(
            matches!(&e, Error::Program { program: Some(n), ended: None, .. } if *n == p.display().to_string()),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "{}: no such file (give the program's path, or a name on PATH)",
                p.display()
            )
        );
    }

    /// Options that contradict each other are `Options`.
    #[test]
    fn contradicting_options_are_options() {
        let o = TruthOptions {
            command: vec!["/bin/true".into()],
            backend: TruthBackend::Callgrind,
            edges: false,
            ..Default::default()
        };
        let e = truth(&o, &crate::Silent).unwrap_err();
        assert!(matches!(&e, Error::Options(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            "--cpu, --no-edges and --qemu apply to --backend qemu only"
        );
    }
}
