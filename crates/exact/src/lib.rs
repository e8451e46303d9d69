//! # proftrust-exact
//!
//! Exact ground truth for a program: how many times each instruction really executed.
//!
//! * [`count_qemu`] runs the program under `qemu-x86_64` with proftrust's own TCG plugin
//!   (crate `proftrust-qemu-plugin`): per-instruction counts from inline per-block counters,
//!   block→block edges, calls and returns, for every module, module-relative.
//! * [`trace_qemu`] streams the exact sequence of executed blocks to a
//!   [`BlockVisitor`](proftrust_model::BlockVisitor) while the program runs; nothing keeps
//!   the whole trace.
//! * [`count_callgrind`] runs valgrind's callgrind and imports its per-instruction counts.
//! * [`find_plugin`] finds the plugin next to the running executable.
//! * [`run_native`] runs a program natively under the same supervision (for programs that
//!   measure themselves, such as `proftrust-probe` users).
//!
//! Every runner records how the program ended ([`RunOutcome`](proftrust_model::RunOutcome)),
//! stops it at a timeout (SIGTERM, then SIGKILL to its process group), reaps it and kills
//! whatever it left running in its process group. Design, protocol and limits:
//! `docs/exact.md`.
//!
//! Entry point: exact counts of a command under QEMU with the plugin ([`count_qemu`]) or
//! callgrind ([`count_callgrind`]):
//!
//! ```no_run
//! use proftrust_exact::{count_qemu, QemuOptions};
//!
//! let exact = count_qemu(&["./prog".into()], &QemuOptions::default())?;
//! println!("{} instructions", exact.total_instructions);
//! # Ok::<(), proftrust_exact::ExactError>(())
//! ```
#![warn(missing_docs)]

mod callgrind;
mod error;
mod native;
pub mod protocol;
mod qemu;
mod run;
mod sys;
mod tree;

pub use callgrind::{count_callgrind, CallgrindOptions};
pub use error::ExactError;
pub use native::{run_native, NativeOptions};
pub use qemu::{
    count_qemu, counts_may_be_low, find_plugin, find_qemu, guest_threads, trace_qemu, QemuOptions,
    DEFAULT_CPU, PLUGIN_FILE, TRACE_RING_BYTES,
};
pub use run::{plan, signal_name};

/// The warnings a backend recorded in a profile's `backend_detail` (its `; `-separated
/// phrases that start with `WARNING`, and a plugin stream that ended early), worded for a
/// reader: every command that runs or reads a count shows them on stderr and puts them in
/// its JSON `warnings`.
pub fn warnings(p: &proftrust_model::ExactProfile) -> Vec<String> {
    p.backend_detail
        .split("; ")
        .filter_map(|part| {
            let part = part.trim();
            if let Some(w) = part.strip_prefix("WARNING ") {
                Some(format!("{} backend: {w}", p.backend))
            } else if part == "stream ended early" {
                Some(format!(
                    "{} backend: the plugin's stream ended early (QEMU died before the end of the run); the counts may be incomplete",
                    p.backend
                ))
            } else {
                None
            }
        })
        .collect()
}
