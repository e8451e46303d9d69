//! The error type of this crate.

use std::path::PathBuf;

/// Everything that can go wrong while getting exact counts.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExactError {
    /// The command line was empty.
    #[error("no program to run: give the program and its arguments after `--`")]
    EmptyCommand,
    /// The program was not found on `PATH` or at the given path.
    #[error("command not found: {name} (not a file, and not on PATH)")]
    CommandNotFound {
        /// The name as given.
        name: String,
    },
    /// The program exists but cannot be executed.
    #[error("{}: not an executable file (check the path and `chmod +x`)", path.display())]
    NotExecutable {
        /// The resolved path.
        path: PathBuf,
    },
    /// A required external tool is missing.
    #[error("{tool} not found; install it with `{install}`")]
    ToolMissing {
        /// The tool (`qemu-x86_64`, `valgrind`).
        tool: String,
        /// The command that installs it.
        install: String,
    },
    /// The plugin shared object was not found.
    #[error("the proftrust QEMU plugin was not found (looked in: {looked}); build it with `cargo build --release -p proftrust-qemu-plugin` (it lands next to the proftrust binary) or set PROFTRUST_QEMU_PLUGIN=/path/to/libproftrust_qemu_plugin.so")]
    PluginMissing {
        /// Where it was looked for.
        looked: String,
    },
    /// Spawning or waiting for a process failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The plugin's stream could not be decoded.
    #[error("plugin stream at byte {offset}: {what}")]
    Protocol {
        /// Byte offset in the stream.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// QEMU ended without the plugin writing any counts (it could not load the plugin, or
    /// was killed before it could write).
    #[error("{backend} wrote no counts ({detail})")]
    NoCounts {
        /// `qemu` or `callgrind`.
        backend: String,
        /// What is known (exit status, stderr tail).
        detail: String,
    },
    /// QEMU or valgrind ran but never started the program (unknown `-cpu` model, an ELF
    /// for another architecture, a tool that refused its options).
    #[error("{tool} did not run the program ({outcome}): {why}")]
    StartFailed {
        /// `qemu-x86_64` or `valgrind`.
        tool: String,
        /// How the tool ended (`exited with status 1`).
        outcome: String,
        /// The tool's own message (the end of its stderr), or where to find it.
        why: String,
    },
    /// A callgrind output file could not be read or parsed.
    #[error("callgrind output {}: {what}", path.display())]
    Callgrind {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
    /// Every `qemu-x86_64` found lacks TCG plugin support.
    #[error("unsupported option: {found} (no TCG plugin support: run scripts/install-qemu.sh, or set PROFTRUST_QEMU to a qemu-x86_64 built with --enable-plugins)")]
    QemuWithoutPlugins {
        /// The QEMUs found, comma-separated.
        found: String,
    },
    /// An option is not supported.
    #[error("unsupported option: {0}")]
    Unsupported(String),
    /// The program is built for another machine than the runner executes.
    #[error("{} is an {machine} program; {runner} runs x86-64 programs only (give an x86-64 build of the program, or run proftrust on a {machine} machine)", program.display())]
    WrongMachine {
        /// The program's ELF file.
        program: PathBuf,
        /// Its machine (`e_machine`), by name.
        machine: String,
        /// The runner that cannot execute it (`qemu-x86_64`, `this valgrind`).
        runner: &'static str,
    },
    /// The kernel would not run the program (`execve` fails): an empty or text file, a
    /// `#!` interpreter that is missing, too many `#!` levels.
    #[error("cannot run the program: {0}")]
    Exec(#[from] proftrust_supervise::exec::ExecError),
    /// A variable of the environment names a file that is not there (it is not silently
    /// replaced by the default).
    #[error("${var}={}: no such file (unset {var} to use the default, or point it at the file)", path.display())]
    EnvPath {
        /// The variable.
        var: String,
        /// The path it gives.
        path: PathBuf,
    },
}

impl ExactError {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> ExactError {
        ExactError::Io {
            what: what.into(),
            source,
        }
    }
}
