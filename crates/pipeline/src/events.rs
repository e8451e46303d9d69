//! What a running command tells its caller besides its report: notes (for a person, on
//! the side) and the progress of long steps. The CLI prints notes on stderr and draws
//! progress bars on a terminal; a library caller can collect the notes or ignore both
//! ([`Silent`]).

/// Receiver of notes and progress.
pub trait Events {
    /// A note for the person running the command (a warning about an input, what was
    /// written where).
    fn note(&self, msg: &str);
    /// A detail shown only on request (`-v`): how an input was read, where a binary was
    /// looked for. Default: dropped.
    fn detail(&self, msg: &str) {
        let _ = msg;
    }
    /// A long step starts; `len` is its number of units when known. The returned task is
    /// advanced and finished by the command.
    fn task(&self, len: Option<u64>, what: &str) -> Box<dyn Task + '_>;
}

/// A long step in progress.
pub trait Task {
    /// `n` more units are done.
    fn inc(&self, n: u64);
    /// The step is over (a progress bar disappears).
    fn finish(&self);
}

/// Ignores notes and progress.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl Task for Silent {
    fn inc(&self, _: u64) {}
    fn finish(&self) {}
}

impl Events for Silent {
    fn note(&self, _: &str) {}
    fn task(&self, _: Option<u64>, _: &str) -> Box<dyn Task + '_> {
        Box::new(Silent)
    }
}

/// Keeps the notes (e.g. to show them after the report); no progress.
#[derive(Debug, Default)]
pub struct Notes(pub std::sync::Mutex<Vec<String>>);

impl Events for Notes {
    fn note(&self, msg: &str) {
        if let Ok(mut v) = self.0.lock() {
            v.push(msg.to_string());
        }
    }
    fn task(&self, _: Option<u64>, _: &str) -> Box<dyn Task + '_> {
        Box::new(Silent)
    }
}
