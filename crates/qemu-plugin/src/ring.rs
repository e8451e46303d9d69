//! The trace ring: trace chunks go through a shared mapping the analyzer made
//! (`ring=fd:N`) instead of through the output pipe, which then carries only a short RING
//! record per chunk (layout in [`wire`](crate::wire), "Trace ring").
//!
//! One producer at a time (every chunk is written under the `GLOBAL` lock, which also
//! orders the pipe's records) and one consumer, the analyzer, which decodes chunks in the
//! pipe's order, so space is handed back in the order it was taken: a classic
//! single-producer single-consumer ring over word positions counted modulo twice the
//! capacity (so a full ring and an empty one differ, whatever the capacity: the analyzer
//! sizes the mapping to a whole number of MiB, which shifts the guest's address space, laid
//! out below it, by a multiple of every cache's set span, so simulated caches see the same
//! sets as without the ring). A chunk never wraps around the end of the data area; the
//! words skipped to keep it contiguous are freed with it.
//!
//! Flow control: the analyzer stores its `tail` (everything before it is free) after
//! decoding a chunk. A producer that finds too little room sets `waiting` and sleeps on
//! `tail` (`FUTEX_WAIT`, shared: the word is in a `MAP_SHARED` mapping of two processes);
//! the analyzer wakes it when it sees `waiting`. The sleep is timed ([`WAIT`]): after each
//! timeout the producer asks whether the pipe still has a reader (`poll`: `POLLERR` on a
//! pipe's write end means its read end is closed), so a dead analyzer never leaves QEMU
//! waiting; the caller then writes to the pipe, which ends QEMU with `SIGPIPE` as a dead
//! reader always did.

use crate::wire;
use std::os::fd::AsRawFd;
use std::sync::atomic::AtomicU32;
use std::sync::atomic::Ordering::{Acquire, Release, SeqCst};
use std::time::Duration;

/// How long a producer sleeps on a full ring before it checks that the analyzer lives.
pub const WAIT: Duration = Duration::from_millis(50);

/// The reader of the output pipe is gone.
#[derive(Debug, PartialEq, Eq)]
pub struct Gone;

/// The producer's side of the trace ring.
pub struct Ring {
    /// The start of the mapping (the header).
    base: *mut u8,
    /// Data words.
    cap: u32,
    /// The position after the last chunk written (modulo `2 * cap`), published as `head`.
    head: u32,
}

// SAFETY: the pointer is to a mapping that stays mapped for the life of the process; the
// ring is used under the GLOBAL mutex only.
unsafe impl Send for Ring {}

impl Ring {
    /// The ring in the mapping at `base` of `len` bytes, whose header the analyzer wrote;
    /// refused when the header's capacity does not fit `len` or cannot take two chunks of
    /// `max_chunk` words.
    ///
    /// # Safety
    /// `base` is page-aligned and maps `len` readable and writable bytes for the life of
    /// the process, shared with the analyzer only.
    pub unsafe fn new(base: *mut u8, len: usize, max_chunk: usize) -> Result<Ring, String> {
        if len < wire::RING_DATA {
            return Err(format!("ring: mapping of {len} bytes is too small"));
        }
        // SAFETY: the header is inside the mapping (len >= RING_DATA).
        let cap = unsafe { (base.add(wire::RING_CAP) as *const u32).read() };
        if cap > 1 << 30
            || wire::RING_DATA + 4 * cap as usize > len
            || (cap as usize) < 2 * max_chunk
        {
            return Err(format!(
                "ring: capacity of {cap} words does not fit a mapping of {len} bytes or is below {} words",
                2 * max_chunk
            ));
        }
        let r = Ring { base, cap, head: 0 };
        r.word(wire::RING_HEAD).store(0, Release);
        Ok(r)
    }

    fn word(&self, off: usize) -> &AtomicU32 {
        // SAFETY: `off` is one of the header's 4-aligned offsets, inside the mapping, and
        // both processes access these words atomically only.
        unsafe { AtomicU32::from_ptr(self.base.add(off) as *mut u32) }
    }

    /// Copies `words` (at most half the capacity) into the ring, waiting for room; returns
    /// the position of its first word. `Err(Gone)` when the pipe `out` has no reader left.
    pub fn put(&mut self, words: &[u32], out: &impl AsRawFd) -> Result<u32, Gone> {
        let (n, cap) = (words.len() as u32, self.cap);
        let at = self.head % cap;
        let skip = if at + n > cap { cap - at } else { 0 };
        let need = skip + n;
        let tail = self.word(wire::RING_TAIL);
        loop {
            let t = tail.load(Acquire);
            let used = (self.head + 2 * cap - t) % (2 * cap);
            if cap - used.min(cap) >= need {
                break;
            }
            // Announce the sleep, then look again: the analyzer stores `tail` before it
            // reads `waiting`, so one of the two sees the other (both SeqCst).
            self.word(wire::RING_WAITING).store(1, SeqCst);
            if tail.load(SeqCst) != t {
                continue;
            }
            if !futex_wait(tail, t, WAIT) && !has_reader(out) {
                return Err(Gone);
            }
        }
        let pos = (self.head + skip) % (2 * cap);
        let off = (pos % cap) as usize;
        // SAFETY: `off + n <= cap` (a chunk never wraps), the data area holds `cap` words,
        // and words between `tail` and `tail + cap` not yet published are the producer's
        // alone: the analyzer reads a chunk only after its RING record, written after
        // `head` is published below.
        unsafe {
            let dst = (self.base.add(wire::RING_DATA) as *mut u32).add(off);
            std::ptr::copy_nonoverlapping(words.as_ptr(), dst, words.len());
        }
        self.head = (pos + n) % (2 * cap);
        self.word(wire::RING_HEAD).store(self.head, Release);
        Ok(pos)
    }
}

/// Sleeps until `w` differs from `v`, a wake, or `timeout`; false on the timeout.
fn futex_wait(w: &AtomicU32, v: u32, timeout: Duration) -> bool {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: FUTEX_WAIT (not private: the word is shared between processes) on a live,
    // aligned u32 with a valid relative timeout; the kernel only reads these.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            w.as_ptr(),
            libc::FUTEX_WAIT,
            v,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    !(r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ETIMEDOUT))
}

/// Whether the pipe `out` still has a reader (`poll` flags `POLLERR` on a pipe's write end
/// whose read end is closed). Anything else (a file, an error of `poll`) counts as a reader.
pub fn has_reader(out: &impl AsRawFd) -> bool {
    let mut p = libc::pollfd {
        fd: out.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: poll on one valid pollfd, no wait.
    let r = unsafe { libc::poll(&mut p, 1, 0) };
    !(r == 1 && p.revents & libc::POLLERR != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::os::fd::FromRawFd;
    use std::time::Instant;

    /// A ring of `cap` words in anonymous shared memory, as the analyzer lays it out.
    fn mapping(cap: u32) -> (*mut u8, usize) {
        let len = wire::RING_DATA + 4 * cap as usize;
        // SAFETY: a fresh anonymous mapping, never unmapped by the test.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        // SAFETY: the capacity word is inside the mapping.
        unsafe { (p as *mut u8).add(wire::RING_CAP).cast::<u32>().write(cap) };
        (p as *mut u8, len)
    }

    fn pipe() -> (File, File) {
        let mut fds = [0; 2];
        // SAFETY: pipe fills two ints.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: both descriptors are new and owned here.
        unsafe { (File::from_raw_fd(fds[0]), File::from_raw_fd(fds[1])) }
    }

    fn word(base: *mut u8, off: usize) -> &'static AtomicU32 {
        // SAFETY: a header word of a mapping the test never unmaps.
        unsafe { AtomicU32::from_ptr(base.add(off) as *mut u32) }
    }

    fn data(base: *mut u8, pos: u32, cap: u32, n: usize) -> Vec<u32> {
        let off = (pos % cap) as usize;
        // SAFETY: inside the data area.
        unsafe { std::slice::from_raw_parts((base.add(wire::RING_DATA) as *const u32).add(off), n) }
            .to_vec()
    }

    #[test]
    fn refuses_rings_that_cannot_take_two_chunks() {
        let (base, len) = mapping(64);
        // SAFETY: the mapping above.
        assert!(unsafe { Ring::new(base, len, 33) }.is_err());
        assert!(unsafe { Ring::new(base, len - 4, 32) }.is_err());
        assert!(unsafe { Ring::new(base, len, 32) }.is_ok());
    }

    /// Chunks land contiguously, the one that would wrap starts again at 0, a full ring
    /// waits until the consumer's tail frees room (woken, not timed out), and a ring whose
    /// reader closed the pipe gives up after about one wait.
    #[test]
    fn waits_for_room_and_notices_a_gone_reader() {
        let cap = 64;
        // Positions run modulo 128: after two rounds they come back to 0.
        {
            let (base, len) = mapping(cap);
            // SAFETY: the mapping above.
            let mut r = unsafe { Ring::new(base, len, 32) }.unwrap();
            let (_rd, wr) = pipe();
            let mut got = Vec::new();
            for k in 0..5 {
                let pos = r.put(&[k; 32], &wr).unwrap();
                got.push(pos);
                word(base, wire::RING_TAIL).store((pos + 32) % 128, SeqCst);
            }
            assert_eq!(got, [0, 32, 64, 96, 0]);
            // A chunk that would cross the end skips to the next round (offset 0), and
            // the skipped words count as used until it is released.
            assert_eq!(r.put(&[7; 8], &wr), Ok(32));
            word(base, wire::RING_TAIL).store(40, SeqCst);
            assert_eq!(r.put(&[9; 30], &wr), Ok(64));
            assert_eq!(data(base, 64, cap, 30), [9; 30]);
            assert_eq!(word(base, wire::RING_HEAD).load(Acquire), 94);
        }
        // A capacity that is no power of two: 60 words.
        let cap = 60;
        let (base, len) = mapping(cap);
        // SAFETY: the mapping above.
        let mut r = unsafe { Ring::new(base, len, 30) }.unwrap();
        let (rd, wr) = pipe();
        let a: Vec<u32> = (0..30).collect();
        assert_eq!(r.put(&a, &wr), Ok(0));
        assert_eq!(r.put(&a, &wr), Ok(30));
        assert_eq!(data(base, 30, cap, 30), a);
        assert_eq!(word(base, wire::RING_HEAD).load(Acquire), 60);
        // None free: the next chunk waits for the first to be released, skips nothing
        // (positions 60..80 are offsets 0..20) and starts at position 60.
        let addr = base as usize;
        let consumer = std::thread::spawn(move || {
            let base = addr as *mut u8;
            std::thread::sleep(Duration::from_millis(20));
            word(base, wire::RING_TAIL).store(30, SeqCst);
            if word(base, wire::RING_WAITING).swap(0, SeqCst) == 1 {
                // SAFETY: FUTEX_WAKE on the live tail word.
                unsafe {
                    libc::syscall(
                        libc::SYS_futex,
                        word(base, wire::RING_TAIL).as_ptr(),
                        libc::FUTEX_WAKE,
                        1,
                    )
                };
            }
        });
        let t0 = Instant::now();
        let b: Vec<u32> = (100..120).collect();
        assert_eq!(r.put(&b, &wr), Ok(60));
        assert!(
            t0.elapsed() < WAIT,
            "woken, not timed out: {:?}",
            t0.elapsed()
        );
        consumer.join().unwrap();
        assert_eq!(data(base, 60, cap, 20), b);
        // Full again and the reader gone: Gone after a wait or so, nothing written.
        assert!(has_reader(&wr));
        drop(rd);
        assert!(!has_reader(&wr));
        let t0 = Instant::now();
        assert_eq!(r.put(&a, &wr), Err(Gone));
        assert!(t0.elapsed() < 4 * WAIT, "{:?}", t0.elapsed());
        assert_eq!(word(base, wire::RING_HEAD).load(Acquire), 80);
    }
}
