//! The stream this plugin writes (version 8, little-endian). The analyzer in
//! `proftrust-exact` decodes it; `docs/exact.md` documents it.
//!
//! ```text
//! header   "PTQP" u32:version u8:mode(0 count, 1 trace) u8:edges(0/1) u8:mem(0-3) u8:api
//!          u32:pid                       mem 1 addresses, 2 cache outcomes, 3 both
//! MODULE   u8:1 u32:id u64:base u16:len path[len]          base = host address of file offset 0
//! BLOCK    u8:2 u32:id u32:module(MAX none) u64:vaddr u8:end u16:n u64[n]
//!               (file offsets of the n instructions, or guest addresses when module is MAX)
//! TRACE    u8:3 u32:tid u32:n u32[n]                         block ids in execution order
//! SNAPSHOT u8:4 u8:reason(0 exit, 1 exec, 2 kill, 3 stop) u32:vcpus u32:threads
//!               u32:n u64[n]                                  inline counter per block id
//!               u32:m u64[m]                                  callback count per block id
//!               u32:e (u32 from, u32 to, u64 count)[e]        block->block edges
//! END      u8:5                                                after the exit snapshot
//! TRACEMEM u8:6 u32:tid u32:n u32[n]                         (mem=on) words, see below
//! RING     u8:7 u32:tid u32:n u32:pos                        a TRACE (mem=off) or TRACEMEM
//!               (mem=on) chunk of n words in the trace ring at position pos (ring=fd:N)
//! PROCESS  u8:8 u32:image u32:parent(MAX none) u8:start(0 root, 1 fork, 2 exec) u32:pid
//!               u32:blocks u32:modules            (follow=: right after the header)
//! EXEC     u8:9 u32:image(MAX not followed) u16:n (u32:len bytes[len])[n]
//!               strings: comm, ELF path, why not followed (empty when followed), argv...
//! ```
//! Snapshots are cumulative; the last one wins.
//!
//! **Process trees** (`follow=NAME`, count mode): every process image (the started program,
//! each forked child, each image an `execve` starts) writes a stream of its own, the
//! started one to `out=`, the others to a new connection to the analyzer's listening Unix
//! socket with abstract name `NAME`. Each stream begins with its header and a PROCESS
//! record: the image's id (0 for the started program; the others take the next value of
//! the shared file's image counter), the image it came from, how it began, and, for a
//! forked child, how many of its parent's block and module ids it inherits (the
//! definitions its parent wrote before the fork, which the child does not write again; its
//! own definitions continue the ids from there). Before an `execve` the image writes an
//! EXEC record (the new image's id, or `MAX` with the reason when the plugin does not
//! follow it: the program then runs outside QEMU, uncounted), its final snapshot and END;
//! the plugin then runs QEMU with this plugin on the new program, `#!` scripts resolved as
//! the kernel resolves them. An `execve` that fails leaves the image running: an EXEC
//! record followed by more records of the same stream did not happen.
//!
//! A TRACEMEM chunk replaces TRACE when memory tracing is on. Its words are, in execution
//! order, a block id (bit 31 clear) or a data access of the current block: a word with bit
//! 31 set, bit 30 = store, bits 27..30 = log2(size), and then either (bit 26 clear, the
//! short form: an address below 2^48 of an instruction with an index below 1024) bits
//! 16..26 = index of the instruction in the block and bits 0..16 = bits 32..48 of the guest
//! virtual address, followed by one word, the address's low half; or (bit 26 set, the long
//! form) bits 0..16 = the instruction's index, followed by two words, the low and high
//! halves of the address. A block's accesses follow its id; a chunk may end between them
//! (the next chunk of the same thread continues the block).
//!
//! With `cache=` (header mem = 2) the plugin simulates the data caches itself
//! (`proftrust-cachesim`) and an access is one word: bit 31 set, bit 30 = store, bits
//! 28..30 = the level it was served at (0 L1D, 1 LLC, 2 memory), bits 0..16 = the index of
//! the instruction in the block; no address follows. With `addrs=on` as well (header mem =
//! 3, a check of the plugin's simulation against the host's) each access is its address
//! words as above followed by its outcome word.
//!
//! **Trace ring** (`ring=fd:N`, when the analyzer made one): trace chunks go through a
//! shared mapping and the stream carries a RING record in their place, so the records keep
//! their order. The mapping is a header page, then the data area of `cap` native-endian
//! `u32` words (at most 2^30, at least two of the plugin's largest chunks; the analyzer
//! sizes the mapping to whole MiB). Header words (`u32`, byte offsets): [`RING_CAP`] `cap`,
//! written by the analyzer; [`RING_HEAD`] the plugin's position after its last chunk
//! (Release); [`RING_TAIL`] the analyzer's position after the last chunk it decoded
//! (everything before it is free; the plugin sleeps on it with `FUTEX_WAIT`, 50 ms at a
//! time, and gives up when the pipe has no reader left); [`RING_WAITING`] 1 while the
//! plugin sleeps (the analyzer then clears it and wakes the plugin with `FUTEX_WAKE`).
//! Positions count words modulo `2 * cap`; position `pos` is word `pos % cap` of the data
//! area. A chunk is contiguous: one that would cross the end starts at the next multiple
//! of `cap`, and the words skipped are freed with it. The analyzer decodes chunks in stream
//! order and stores `tail = (pos + n) % (2 * cap)` after each.

/// Magic at the start of the stream.
pub const MAGIC: &[u8; 4] = b"PTQP";
/// Protocol version.
pub const VERSION: u32 = 8;
/// Record tag: module.
pub const TAG_MODULE: u8 = 1;
/// Record tag: block definition.
pub const TAG_BLOCK: u8 = 2;
/// Record tag: trace chunk.
pub const TAG_TRACE: u8 = 3;
/// Record tag: counts snapshot.
pub const TAG_SNAPSHOT: u8 = 4;
/// Record tag: end of stream.
pub const TAG_END: u8 = 5;
/// Record tag: trace chunk with data accesses.
pub const TAG_TRACE_MEM: u8 = 6;
/// Record tag: a trace chunk in the trace ring.
pub const TAG_RING: u8 = 7;
/// Record tag: which process image the stream is about.
pub const TAG_PROCESS: u8 = 8;
/// Record tag: an `execve` of the image, followed or not.
pub const TAG_EXEC: u8 = 9;
/// PROCESS start: the started program.
pub const START_ROOT: u8 = 0;
/// PROCESS start: a forked child.
pub const START_FORK: u8 = 1;
/// PROCESS start: an image an `execve` started.
pub const START_EXEC: u8 = 2;
/// Words of the shared counter file before the counters: the run state, the thread count,
/// the image counter, then padding to a page (a forked child maps the counters privately
/// over the shared ones, a page at a time).
pub const SHM_HEAD_WORDS: usize = 512;
/// Shared file word: the run state bits.
pub const SHM_RUN: usize = 0;
/// Shared file word: guest threads of the started program.
pub const SHM_THREADS: usize = 1;
/// Shared file word: the last image id given out.
pub const SHM_IMAGES: usize = 2;
/// Trace ring header: byte offset of the data area's capacity in words.
pub const RING_CAP: usize = 0;
/// Trace ring header: byte offset of the producer's published position.
pub const RING_HEAD: usize = 64;
/// Trace ring header: byte offset of the consumer's position (the futex word).
pub const RING_TAIL: usize = 128;
/// Trace ring header: byte offset of the producer's "sleeping on the tail" flag.
pub const RING_WAITING: usize = 192;
/// Trace ring: byte offset of the data area (the header is one page).
pub const RING_DATA: usize = 4096;
/// TRACEMEM word flag: a data access (else a block id).
pub const MEM_FLAG: u32 = 1 << 31;
/// TRACEMEM access word: the access is a store.
pub const MEM_STORE: u32 = 1 << 30;
/// TRACEMEM access word: shift of the log2(size) field (3 bits).
pub const MEM_SHIFT_POS: u32 = 27;
/// TRACEMEM access word: the long form (instruction index in bits 0..16, two address words
/// follow).
pub const MEM_LONG: u32 = 1 << 26;

/// The TRACEMEM words of one access of instruction `insn` (log2 size `size_shift`, at most
/// 7): the short form (two words) when the address is below 2^48 and the index below 1024,
/// else the long form (three); returns the words and how many of them to write.
#[inline]
pub fn mem_words(insn: u16, size_shift: u32, store: bool, vaddr: u64) -> ([u32; 3], usize) {
    let head = MEM_FLAG | if store { MEM_STORE } else { 0 } | ((size_shift & 7) << MEM_SHIFT_POS);
    if vaddr >> 48 == 0 && insn < 1024 {
        (
            [
                head | (insn as u32) << 16 | (vaddr >> 32) as u32,
                vaddr as u32,
                0,
            ],
            2,
        )
    } else {
        (
            [
                head | MEM_LONG | insn as u32,
                vaddr as u32,
                (vaddr >> 32) as u32,
            ],
            3,
        )
    }
}

/// TRACEMEM outcome word (`cache=`): shift of the 2-bit level.
pub const MEM_LEVEL_POS: u32 = 28;

/// The TRACEMEM word of an access of instruction `insn` that the plugin's cache simulation
/// served at `level` (the `cache=` form).
#[inline]
pub fn outcome_word(insn: u16, store: bool, level: u8) -> u32 {
    MEM_FLAG
        | if store { MEM_STORE } else { 0 }
        | u32::from(level & 3) << MEM_LEVEL_POS
        | u32::from(insn)
}

/// Module id meaning "no module".
pub const NO_MODULE: u32 = u32::MAX;

/// Little-endian appends to a byte buffer.
pub trait Put {
    /// Appends a `u8`.
    fn u8(&mut self, v: u8);
    /// Appends a `u16`.
    fn u16(&mut self, v: u16);
    /// Appends a `u32`.
    fn u32(&mut self, v: u32);
    /// Appends a `u64`.
    fn u64(&mut self, v: u64);
}

impl Put for Vec<u8> {
    fn u8(&mut self, v: u8) {
        self.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
}
