//! The crate's error type.

use std::path::{Path, PathBuf};

/// Why a fleet step failed. Messages name the store or file, the problem and the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An option or input is not usable; the message says which and how to fix it.
    #[error("{0}")]
    Invalid(String),
    /// A file or directory could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A store file is not a readable proftrust fleet Parquet file.
    #[error("{} is not a usable fleet store file: {problem}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// The query engine failed (the message says what was being computed).
    #[error("{what}: {message}")]
    Engine {
        /// What was being computed.
        what: String,
        /// The engine's message.
        message: String,
    },
    /// A bug: the data did not have the shape this crate wrote.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn corrupt(path: &Path, e: impl std::fmt::Display) -> Error {
        Error::Corrupt {
            path: path.to_path_buf(),
            problem: e.to_string(),
        }
    }

    pub(crate) fn engine(what: &str, e: impl std::fmt::Display) -> Error {
        Error::Engine {
            what: what.to_string(),
            message: e.to_string(),
        }
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
