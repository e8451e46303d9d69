//! Per-vcpu state. In user mode each guest thread is a vcpu, and QEMU calls a vcpu's
//! callbacks on that vcpu's own thread, so each slot has a **single writer**. The hot paths
//! (one block execution, one data access) therefore take no lock: every field is an atomic
//! read and written with `Relaxed` loads and stores by its owner (plain moves on x86-64, no
//! locked instructions), in storage that never moves once allocated, so another thread
//! writing a snapshot (at `execve`, a self-`SIGKILL`, the timeout's stop request) can read it
//! at any moment without undefined behaviour.
//!
//! What a concurrent reader must see consistently lives behind the slot's mutex, which the
//! owner takes only on rare paths: the edge map (updated when a block's successor differs
//! from its last one) and trace-buffer flushes (every 16 Ki words).

use crate::EdgeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Acquire};
use std::sync::atomic::{Ordering::Relaxed, Ordering::Release};
use std::sync::{Mutex, OnceLock};

/// "No block" in `prev`.
pub const NO_BLOCK: u32 = u32::MAX;
/// Vcpu slots. QEMU numbers vcpus from 0 and reuses the numbers of exited threads; an index
/// beyond this (65536 live threads) shares a slot, and its counts can then race.
pub const MAX_VCPUS: usize = 1 << 16;
/// Blocks per chunk of per-vcpu entries.
const CHUNK: usize = 16 * 1024;
/// Chunks per vcpu: block ids up to 64 Mi get per-vcpu counts and edges (beyond that the
/// analyzer's check of callback against inline counts reports the difference).
const MAX_CHUNKS: usize = 4096;

/// Successors cached per block (a switch, a return to a few call sites, a call through a
/// pointer with a few targets stay off the locked path).
pub const WAYS: usize = 4;

/// Per (vcpu, block): executions and a small successor cache, one cache line.
///
/// Way `k` counts `pending[k]` executions of the edge block -> `succ[k]` not yet moved to
/// the edge map; a way with `pending == 0` is free (its `succ` means nothing). The owner
/// stores `succ` before publishing `pending` (Release), and readers load `pending` first
/// (Acquire), so a reader never pairs a new count with an old successor.
#[derive(Default)]
#[repr(align(64))]
pub struct Entry {
    /// Executions of the block by this vcpu.
    pub count: AtomicU64,
    /// The cached successors.
    pub succ: [AtomicU32; WAYS],
    /// Executions of each cached edge not yet in the edge map.
    pub pending: [AtomicU64; WAYS],
}

/// `a += 1` by its only writer: a plain load and store, no locked instruction (Release is a
/// plain store on x86-64 too).
#[inline(always)]
pub fn bump(a: &AtomicU64) {
    a.store(a.load(Relaxed).wrapping_add(1), Release);
}

/// A vcpu's trace buffer: words written by the owner, then published by `len` (Release).
pub struct TraceBuf {
    words: Box<[AtomicU32]>,
    /// Words written.
    len: AtomicUsize,
    /// Words already flushed by another thread's snapshot (changed under the slot lock).
    sent: AtomicUsize,
}

impl TraceBuf {
    fn new(cap: usize) -> TraceBuf {
        TraceBuf {
            words: (0..cap).map(|_| AtomicU32::new(0)).collect(),
            len: AtomicUsize::new(0),
            sent: AtomicUsize::new(0),
        }
    }

    /// Words written so far (owner's view).
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len.load(Relaxed)
    }

    /// Appends `w` (owner only); returns false, writing nothing, when it does not fit.
    #[inline(always)]
    pub fn push(&self, w: &[u32]) -> bool {
        let l = self.len.load(Relaxed);
        let Some(dst) = self.words.get(l..l + w.len()) else {
            return false;
        };
        for (d, &x) in dst.iter().zip(w) {
            d.store(x, Relaxed);
        }
        self.len.store(l + w.len(), Release);
        true
    }

    /// Under the slot lock: the range of words not yet flushed (`from..to`).
    pub fn unsent(&self) -> (usize, usize) {
        let to = self.len.load(Acquire);
        (self.sent.load(Relaxed).min(to), to)
    }

    /// Words `from..to` (from [`TraceBuf::unsent`]), to be copied out under the slot lock
    /// before [`TraceBuf::mark_sent`].
    pub fn words(&self, from: usize, to: usize) -> &[u32] {
        let words = &self.words[from..to];
        // SAFETY: `AtomicU32` has the layout of `u32`. The owner wrote these words before
        // publishing `len` with Release (loaded with Acquire in `unsent`) and writes only
        // beyond `len` until the buffer is marked sent under the slot lock, which the
        // caller holds for as long as it uses the slice (the borrow cannot outlive a flush:
        // the caller copies the words out and then marks them sent): no concurrent write
        // touches these words.
        unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u32, words.len()) }
    }

    /// Under the slot lock, after writing `..to`: the owner empties the buffer; another
    /// thread only advances the sent mark (the owner may be appending meanwhile).
    pub fn mark_sent(&self, owner: bool, to: usize) {
        if owner {
            self.sent.store(0, Relaxed);
            self.len.store(0, Release);
        } else {
            self.sent.store(to, Relaxed);
        }
    }
}

/// What a reader must see consistently with the entries' successor caches.
#[derive(Default)]
pub struct Shared {
    /// Block->block edge counts moved out of the successor caches.
    pub edges: Option<EdgeMap>,
    /// API v4: per block, the times it was a thread's last block (its expected successor
    /// never ran), from the vcpu exit hook.
    pub sinks: std::collections::HashMap<u32, u64>,
    /// API v4: per block, the times it was a thread's first block.
    pub starts: std::collections::HashMap<u32, u64>,
}

/// One vcpu's state.
pub struct Slot {
    /// Host thread id of the guest thread now on this vcpu (0 before its first block).
    pub tid: AtomicU32,
    /// The vcpu's previous block ([`NO_BLOCK`] at a thread's start).
    pub prev: AtomicU32,
    chunks: Box<[OnceLock<Box<[Entry]>>]>,
    trace: OnceLock<TraceBuf>,
    /// The edge map; its lock also orders trace flushes.
    pub shared: Mutex<Shared>,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            tid: AtomicU32::new(0),
            prev: AtomicU32::new(NO_BLOCK),
            chunks: (0..MAX_CHUNKS).map(|_| OnceLock::new()).collect(),
            trace: OnceLock::new(),
            shared: Mutex::new(Shared::default()),
        }
    }

    /// The entry of block `id` (allocated on first use; `None` beyond the id limit).
    #[inline(always)]
    pub fn entry(&self, id: u32) -> Option<&Entry> {
        let c = self.chunks.get(id as usize / CHUNK)?;
        let c = c.get_or_init(|| (0..CHUNK).map(|_| Entry::default()).collect());
        Some(&c[id as usize % CHUNK])
    }

    /// Every allocated entry with its block id (any thread).
    pub fn for_each_entry(&self, mut f: impl FnMut(u32, &Entry)) {
        for (k, c) in self.chunks.iter().enumerate() {
            if let Some(c) = c.get() {
                for (j, e) in c.iter().enumerate() {
                    f((k * CHUNK + j) as u32, e);
                }
            }
        }
    }

    /// Forgets every count and edge and the thread on this vcpu (a forked child's counts
    /// start at the fork); the next block is a thread start.
    pub fn reset(&self) {
        self.for_each_entry(|_, e| {
            e.count.store(0, Relaxed);
            for k in 0..WAYS {
                e.pending[k].store(0, Relaxed);
            }
        });
        // A lock held at the fork by a thread the child does not have stays held: its
        // maps are then left as they are rather than waiting for ever.
        match self.shared.try_lock() {
            Ok(mut g) => *g = Shared::default(),
            Err(std::sync::TryLockError::Poisoned(p)) => *p.into_inner() = Shared::default(),
            Err(std::sync::TryLockError::WouldBlock) => {}
        }
        self.prev.store(NO_BLOCK, Relaxed);
        self.tid.store(0, Relaxed);
    }

    /// The trace buffer, `cap` words (allocated on first use).
    #[inline(always)]
    pub fn trace(&self, cap: usize) -> &TraceBuf {
        self.trace.get_or_init(|| TraceBuf::new(cap))
    }

    /// The trace buffer if it exists.
    pub fn trace_if_any(&self) -> Option<&TraceBuf> {
        self.trace.get()
    }
}

static SLOTS: [OnceLock<Box<Slot>>; MAX_VCPUS] = [const { OnceLock::new() }; MAX_VCPUS];

/// The slot of `vcpu`, created on first use.
#[inline(always)]
pub fn slot(vcpu: u32) -> &'static Slot {
    SLOTS[vcpu as usize % MAX_VCPUS].get_or_init(|| Box::new(Slot::new()))
}

/// The slot of `vcpu` if it was ever used.
pub fn existing(vcpu: usize) -> Option<&'static Slot> {
    SLOTS.get(vcpu).and_then(|s| s.get()).map(|b| &**b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_stable_and_enumerable() {
        let s = Slot::new();
        bump(&s.entry(3).unwrap().count);
        bump(&s.entry(3).unwrap().count);
        bump(&s.entry(CHUNK as u32 + 1).unwrap().count);
        assert!(s.entry((MAX_CHUNKS * CHUNK) as u32).is_none());
        let mut seen = Vec::new();
        s.for_each_entry(|id, e| {
            let c = e.count.load(Relaxed);
            if c > 0 {
                seen.push((id, c));
            }
        });
        assert_eq!(seen, vec![(3, 2), (CHUNK as u32 + 1, 1)]);
    }

    #[test]
    fn trace_buffer_flushes_by_reader_then_owner_without_duplicates() {
        let t = TraceBuf::new(8);
        assert!(t.push(&[1, 2, 0x0403_0201]));
        let (from, to) = t.unsent();
        assert_eq!(t.words(from, to), &[1, 2, 0x0403_0201]);
        t.mark_sent(false, to);
        assert!(t.push(&[5]));
        let (from, to) = t.unsent();
        assert_eq!((from, to), (3, 4));
        assert_eq!(t.words(from, to), &[5]);
        t.mark_sent(true, to);
        assert_eq!(t.len(), 0);
        assert_eq!(t.unsent(), (0, 0));
        assert!(t.push(&[5; 8]));
        assert!(!t.push(&[6]));
    }
}
