//! The crate's error type.

/// Why a command could not run. The message names the input and the problem (and the fix
/// where there is one); [`std::error::Error::source`] gives the cause from the library that
/// failed, so a caller printing the chain (`error: outer: inner`) shows both.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An option or input is not usable; the message says which and how to fix it.
    #[error("{0}")]
    Invalid(String),
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
    /// The recorder could not record (bad events or options, no permission, a missing
    /// PMU); the message says which and how to fix it.
    #[error(transparent)]
    Record(#[from] proftrust_record::RecordError),
    /// An export could not be written (the message names the format and the problem).
    #[error(transparent)]
    Export(#[from] proftrust_export::ExportError),
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
/// message becomes [`Error::Step`] (with the error as its source) or [`Error::Invalid`]
/// (for a `None`).
pub trait Context<T> {
    /// Wraps a failure with `what`.
    fn context(self, what: impl Into<String>) -> Result<T>;
    /// Wraps a failure with the message `f` makes (called only on failure).
    fn with_context<S: Into<String>>(self, f: impl FnOnce() -> S) -> Result<T>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl Into<String>) -> Result<T> {
        self.map_err(|e| Error::Step {
            what: what.into(),
            source: Box::new(e),
        })
    }
    fn with_context<S: Into<String>>(self, f: impl FnOnce() -> S) -> Result<T> {
        self.map_err(|e| Error::Step {
            what: f().into(),
            source: Box::new(e),
        })
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
