//! A closed pipe ends proftrust quietly: `proftrust read perf.data | head` stops when `head`
//! has its lines, with no `error: Broken pipe` and no panic, the way perf and coreutils end.
//!
//! Rust ignores `SIGPIPE`, so a write to a closed pipe fails with `EPIPE` instead of killing
//! the process. The error travels up like any other (output files are dropped unwritten on
//! the way: they are written atomically); at the top, [`end_if_broken_pipe`] recognises it
//! and ends the process by `SIGPIPE` with the default action, so the shell sees what it sees
//! for coreutils (status 141, no message). `print!` panics on `EPIPE` instead of returning an
//! error; the panic hook of [`install`] treats that panic the same way.

use std::io::ErrorKind;

/// Whether `e`'s chain holds an `EPIPE` write error.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == ErrorKind::BrokenPipe)
    })
}

/// Ends the process by `SIGPIPE` when `e` is a closed pipe; returns otherwise.
pub fn end_if_broken_pipe(e: &anyhow::Error) {
    if is_broken_pipe(e) {
        die_of_sigpipe();
    }
}

/// Ends the process as a write to a closed pipe ends coreutils: killed by `SIGPIPE` (status
/// 141 in a shell), silently.
fn die_of_sigpipe() -> ! {
    crate::sys::die_by(libc::SIGPIPE)
}

/// Installs a panic hook that ends the process quietly when the panic is `print!`'s
/// "failed printing to stdout: Broken pipe", and prints every other panic as before.
pub fn install() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.contains("failed printing to stdout") && msg.contains("Broken pipe") {
            die_of_sigpipe();
        }
        previous(info);
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_epipe_anywhere_in_the_chain() {
        let io = std::io::Error::from(ErrorKind::BrokenPipe);
        let e = anyhow::Error::new(io).context("cannot write the table");
        assert!(is_broken_pipe(&e));
        let other = anyhow::Error::new(std::io::Error::from(ErrorKind::NotFound));
        assert!(!is_broken_pipe(&other));
        assert!(!is_broken_pipe(&anyhow::anyhow!(
            "Broken pipe (os error 32)"
        )));
    }
}
