//! Path signatures: entry address + branch history (seed 004 §5.1).
//!
//! Seed 004 §5.1: "We combine the path PC and branch history bits to form a path signature
//! as a PC-branch history. [...] For example, the path signature, 0x0040211F-110, means the
//! path starts at PC=0x0040211F, executes through the first two taken branches and a third
//! non-taken branch, and is 3 basic blocks long."
//!
//! Here the entry is an [`Svma`] of the program's main executable (module-relative, so runs
//! at different load addresses, under QEMU or natively, agree), and the history is a
//! sequence of bits in execution order, printed first to last. Histories longer than the
//! recorder could store keep their first bits and the number of outcomes not stored
//! ([`PathSignature::overflow`], printed as `+N`).

use crate::Error;
use proftrust_model::Svma;
use std::fmt;
use std::str::FromStr;

/// Branch outcomes along a path, in execution order (`true` = taken).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BranchHistory {
    len: u32,
    words: Vec<u64>,
}

impl BranchHistory {
    /// An empty history.
    pub fn new() -> BranchHistory {
        BranchHistory::default()
    }
    /// The first `n` (at most 64) outcomes of `bits`, the first in bit 0 (the probe file's
    /// layout).
    pub fn from_bits(bits: u64, n: u32) -> BranchHistory {
        let mut h = BranchHistory::new();
        for i in 0..n.min(64) {
            h.push(bits >> i & 1 == 1);
        }
        h
    }
    /// Appends one outcome.
    pub fn push(&mut self, taken: bool) {
        let i = self.len as usize;
        if i % 64 == 0 {
            self.words.push(0);
        }
        if taken {
            self.words[i / 64] |= 1 << (i % 64);
        }
        self.len += 1;
    }
    /// Number of outcomes.
    pub fn len(&self) -> u32 {
        self.len
    }
    /// True when no outcome is recorded.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Outcome `i` (`None` past the end).
    pub fn get(&self, i: u32) -> Option<bool> {
        (i < self.len).then(|| self.words[i as usize / 64] >> (i % 64) & 1 == 1)
    }
    /// The outcomes in order.
    pub fn iter(&self) -> impl Iterator<Item = bool> + '_ {
        (0..self.len).map(|i| self.words[i as usize / 64] >> (i % 64) & 1 == 1)
    }
}

impl fmt::Display for BranchHistory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.iter() {
            f.write_str(if b { "1" } else { "0" })?;
        }
        Ok(())
    }
}

/// A path's identity: where it starts and which way its branches went.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PathSignature {
    /// Entry address (SVMA in the program's main executable).
    pub entry: Svma,
    /// Branch outcomes in execution order.
    pub history: BranchHistory,
    /// Outcomes the recorder could not store beyond `history` (0 normally).
    pub overflow: u32,
}

impl PathSignature {
    /// A signature with a complete history.
    pub fn new(entry: Svma, history: BranchHistory) -> PathSignature {
        PathSignature {
            entry,
            history,
            overflow: 0,
        }
    }
}

/// `0x401120-110`, `0x401120` (no branch), `0x401120-0101+3` (3 outcomes not stored).
impl fmt::Display for PathSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.entry.0)?;
        if !self.history.is_empty() || self.overflow > 0 {
            write!(f, "-{}", self.history)?;
        }
        if self.overflow > 0 {
            write!(f, "+{}", self.overflow)?;
        }
        Ok(())
    }
}

impl FromStr for PathSignature {
    type Err = Error;
    fn from_str(s: &str) -> Result<PathSignature, Error> {
        let bad = |why: &'static str| Error::BadSignature {
            text: s.chars().take(80).collect(),
            why,
        };
        let (entry, rest) = s.split_once('-').unwrap_or((s, ""));
        let hex = entry
            .strip_prefix("0x")
            .ok_or_else(|| bad("the entry must be a 0x-prefixed hex address"))?;
        let entry = u64::from_str_radix(hex, 16).map_err(|_| bad("the entry is not hex"))?;
        let (bits, overflow) = match rest.split_once('+') {
            Some((b, o)) => (
                b,
                o.parse::<u32>()
                    .map_err(|_| bad("the overflow after + must be a number"))?,
            ),
            None => (rest, 0),
        };
        let mut history = BranchHistory::new();
        for c in bits.chars() {
            match c {
                '0' => history.push(false),
                '1' => history.push(true),
                _ => return Err(bad("branch history bits must be 0 or 1")),
            }
        }
        Ok(PathSignature {
            entry: Svma(entry),
            history,
            overflow,
        })
    }
}

impl serde::Serialize for PathSignature {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_example_round_trips() {
        // Seed 004 §5.1: 0x0040211F-110 = two taken branches, then a non-taken one.
        let s: PathSignature = "0x40211f-110".parse().unwrap();
        assert_eq!(s.entry, Svma(0x40211f));
        assert_eq!(
            s.history.iter().collect::<Vec<_>>(),
            vec![true, true, false]
        );
        assert_eq!(s.to_string(), "0x40211f-110");
        let e: PathSignature = "0x11d9".parse().unwrap();
        assert!(e.history.is_empty());
        assert_eq!(e.to_string(), "0x11d9");
        let o: PathSignature = "0x10-01+3".parse().unwrap();
        assert_eq!((o.history.len(), o.overflow), (2, 3));
        assert_eq!(o.to_string(), "0x10-01+3");
        assert!("11d9-1".parse::<PathSignature>().is_err());
        assert!("0x11d9-102".parse::<PathSignature>().is_err());
        assert!("0xzz".parse::<PathSignature>().is_err());
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            "\"0x40211f-110\"".to_string()
        );
    }

    #[test]
    fn long_histories_and_probe_bits() {
        let mut h = BranchHistory::new();
        for i in 0..130 {
            h.push(i % 3 == 0);
        }
        assert_eq!(h.len(), 130);
        assert_eq!(h.get(129), Some(true));
        assert_eq!(h.get(128), Some(false));
        assert_eq!(h.get(130), None);
        assert_eq!(h.to_string().len(), 130);
        // Probe layout: first outcome in bit 0.
        let p = BranchHistory::from_bits(0b110, 3);
        assert_eq!(p.to_string(), "011");
        // Different lengths with the same prefix are different histories.
        assert_ne!(
            BranchHistory::from_bits(0, 1),
            BranchHistory::from_bits(0, 2)
        );
    }
}
