//! # proftrust-qemu-plugin
//!
//! A QEMU user-mode TCG plugin that gives proftrust exact ground truth. One shared object
//! serves QEMU 7.x/8.x (plugin API version 1) and QEMU >= 9.2 (version 4): `ffi` picks the
//! version at load and resolves the API at run time. Under version 4 blocks count with
//! per-vCPU inline adds and only transitions the entry checks did not expect call back
//! (a block's predecessor listed it, or is the one predecessor it checks for); the silent
//! edges are derived from the counts (`docs/exact.md`, "API v4"). What follows
//! describes version 1, whose mechanisms version 4 keeps where it has no better one. Load it with
//! `qemu-x86_64 -plugin libproftrust_qemu_plugin.so,out=fd:N,mode=count,edges=on -- PROG`;
//! `proftrust-exact` does this for you and decodes what it writes (protocol in [`wire`]).
//!
//! * **Counting** (`mode=count`): every translated block gets an *inline* counter
//!   (`qemu_plugin_register_vcpu_tb_exec_inline`, `ADD_U64` of 1 at block entry), so a block
//!   execution costs one add in generated code, never a helper call per instruction. An
//!   instruction's count is the count of every block that contains it. With `edges=on`
//!   (the default) a per-block exec callback also runs: it keeps, **per vcpu** (a guest thread
//!   in user mode), the block count and the previous block, giving exact block→block edges
//!   (and so calls and returns). Its cost is one helper call per executed block. API v1 has no
//!   per-vcpu inline counters and its inline add is not atomic, so with several guest threads
//!   running the same block at once the inline counters can lose increments; the per-vcpu
//!   callback counts cannot, and the analyzer uses them whenever they exist.
//! * **Tracing** (`mode=trace`): block definitions are written once (module, instruction file
//!   offsets, end kind) when QEMU translates a block, then each vcpu appends executed block ids
//!   to its own buffer, flushed as (tid, ids) chunks. Nothing keeps the trace: the buffers are
//!   16 Ki entries and the stream goes to a pipe the analyzer reads while the guest runs;
//!   with `ring=fd:N` the chunks go through a shared-memory ring instead (`ring.rs`), the
//!   pipe carrying a short record per chunk.
//!   With `mem=on` every instruction also gets a memory callback
//!   (`qemu_plugin_register_vcpu_mem_cb`, loads and stores), which appends each executed
//!   access (guest virtual address, size, load/store, instruction index) to the same per-vcpu
//!   buffer after its block's id, so the stream keeps execution order per thread. With
//!   `cache=LINE:L1:WAYS:LLC:WAYS` as well, the callback runs the access through the data
//!   caches of `proftrust-cachesim` (the same code the analyzer would run) and appends where
//!   it was served instead of its address: one word per access, no simulation on the host.
//!   One cache serves the process; once the guest creates a thread (`THREADED`) every
//!   access takes a lock around it, before that none is needed.
//! * **Modules**: the host address of each instruction (`qemu_plugin_insn_haddr`) is looked up
//!   in the QEMU process's own `/proc/self/maps`; a file-backed mapping gives (file, file
//!   offset), which the analyzer turns into an SVMA with the ELF program headers. The map is
//!   re-read after the guest calls `mmap`/`munmap`/`mremap`.
//! * **fork** and **exec**: with `follow=NAME` (count mode) the whole process tree is
//!   counted, each process image on a stream of its own (`follow.rs`, protocol in [`wire`]):
//!   a forked child reports from the fork on, and an `execve` runs QEMU with this plugin on
//!   the new program (`#!` scripts resolved as the kernel does). Without it a forked child
//!   is **excluded** (a `pthread_atfork` child handler silences every callback in it; the
//!   parent's counts are unaffected) and **exec is not followed** (QEMU runs the new image
//!   natively; the plugin writes a snapshot before `execve`, so the profile covers the
//!   program up to the exec). The `pthread_atfork` prepare handler, the system call hook
//!   (fork, vfork, clone of a process, clone3, execve) and the exit hook set bits of a
//!   run-state word in the shared file, so the analyzer looks for orphaned descendants in
//!   `/proc` only after runs that may have left some. A guest sending itself `SIGKILL` gets a
//!   snapshot first; other fatal signals go through QEMU's exit path, which runs the plugin's
//!   at-exit dump.
//!
//! Licence: GPL-2.0-or-later, because it builds on QEMU's GPL plugin API. The FFI
//! declarations in `ffi` are written from the documented signatures in QEMU's header.
#![warn(missing_docs)]

pub mod classify;
mod ffi;
mod follow;
pub mod maps;
mod ring;
mod vcpu;
pub mod wire;

use maps::Mapping;
use std::cell::UnsafeCell;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::fs::File;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::Write;
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU8};
use std::sync::atomic::{Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::sync::{Mutex, MutexGuard};
use vcpu::{bump, Entry, Slot, NO_BLOCK, WAYS};
use wire::Put;

const MODE_COUNT: u8 = 0;
const MODE_TRACE: u8 = 1;
/// `mode=idle`: the translation hook only, which instruments nothing (the benchmarks'
/// floor: what QEMU adds for any plugin that instruments code).
const MODE_IDLE: u8 = 2;
/// Trace buffer entries per vcpu before a flush.
const TRACE_CHUNK: usize = 16 * 1024;
/// With memory tracing, a flush happens at the next block start after `TRACE_CHUNK` words;
/// this bounds a buffer whose block makes very many accesses.
const TRACE_MEM_CAP: usize = 4 * TRACE_CHUNK;
/// Words of a per-vcpu trace buffer (a flush happens before it fills).
const TRACE_BUF_WORDS: usize = TRACE_MEM_CAP + 64;
/// Counters per allocation chunk (chunks never move, so inline pointers stay valid).
const COUNTER_CHUNK: usize = 4096;
/// Output buffer size before a write.
const OUT_FLUSH: usize = 256 * 1024;

static MODE: AtomicU8 = AtomicU8::new(MODE_COUNT);
static EDGES: AtomicBool = AtomicBool::new(true);
static MEM: AtomicBool = AtomicBool::new(false);
static IN_CHILD: AtomicBool = AtomicBool::new(false);
static MAPS_DIRTY: AtomicBool = AtomicBool::new(true);
/// One more than the highest vcpu index that ran a block.
static VCPUS_SEEN: AtomicU32 = AtomicU32::new(0);
/// Guest threads started (vcpu init hook; the main thread included).
static THREADS: AtomicU32 = AtomicU32::new(0);
/// A guest thread was (or is being) created: from then on, API v1 counting without edges
/// uses per-vcpu callbacks instead of the shared, non-atomic inline add (QEMU flushes every
/// translation when the first thread starts, so all code is retranslated after this).
static THREADED: AtomicBool = AtomicBool::new(false);
/// The data caches simulated in [`on_mem`] (`cache=`), in [`SIM`].
struct SimCell {
    lock: Mutex<()>,
    caches: std::cell::UnsafeCell<Option<proftrust_cachesim::Caches>>,
}

// SAFETY: `caches` is written once at install time, before any vCPU runs, and afterwards
// touched only by `simulate`: by the one guest thread while [`THREADED`] is false (set by
// that thread before any other exists), under `lock` once it is true.
unsafe impl Sync for SimCell {}

static SIM: SimCell = SimCell {
    lock: Mutex::new(()),
    caches: std::cell::UnsafeCell::new(None),
};
/// `cache=` was given: [`on_mem`] ships cache outcomes.
static SIM_ON: AtomicBool = AtomicBool::new(false);
/// `addrs=on`: [`on_mem`] ships the address words before each outcome.
static SIM_ADDRS: AtomicBool = AtomicBool::new(false);

/// Where the access of `size` bytes at `vaddr` is served, and the caches updated.
///
/// # Safety
/// The caller is the only guest thread ([`THREADED`] false) or holds `SIM.lock`.
#[inline(always)]
unsafe fn simulate(vaddr: u64, size: u32) -> u8 {
    // SAFETY: see `SimCell` and the caller's promise: nothing else touches the caches now.
    let caches = unsafe { &mut *SIM.caches.get() };
    caches.as_mut().map_or(0, |c| c.access(vaddr, size))
}

/// [`simulate`] once the guest has threads: under the lock.
#[inline(never)]
fn simulate_locked(vaddr: u64, size: u32) -> u8 {
    let _g = SIM.lock.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: the lock is held.
    unsafe { simulate(vaddr, size) }
}

/// One more than the highest vcpu index QEMU initialised.
static VCPU_MAX: AtomicU32 = AtomicU32::new(0);
/// API v4: the per-vcpu state scoreboard ([`VcpuState`] per vcpu).
static STATE_SB: AtomicPtr<ffi::Scoreboard> = AtomicPtr::new(std::ptr::null_mut());

/// API v4 per-vcpu state, one cache line per vcpu, written by inline stores at every block
/// entry (count mode with edges).
#[repr(C, align(64))]
struct VcpuState {
    /// 1 + id of the block that ran last on this vcpu (0: none yet in this thread).
    pred: u64,
    /// Where that block lets control go without a callback: slot `k` holds its static
    /// successor `a` with [`slot_of`]`(a) == k`, or 0 (only known at run time, or no
    /// successor with that slot), so a block at `a` checks slot `slot_of(a)` only.
    slot: [u64; SLOTS],
}
const PRED_OFF: usize = 0;
const SLOT_OFF: usize = 8;

/// The expectation slot a block at guest address `a` checks: the address modulo [`SLOTS`].
/// Several slots let both sides of a conditional branch pass silently when their addresses
/// fall in different slots; otherwise only the predicted side does.
#[inline(always)]
#[allow(clippy::modulo_one)] // SLOTS is a tuning constant, 1 today
fn slot_of(a: u64) -> usize {
    (a as usize) % SLOTS
}
/// Expectation slots per vCPU. One: since predecessor checks ([`Global::pred_check`])
/// make the unlisted side of a branch silent too (when the branch is the first block to
/// reach it), more slots save few callbacks and cost an inline store each per block
/// execution. Measured on the third-party workloads, size 30 (callbacks per block
/// execution, 4 / 2 / 1 slots): lua 3.99 / 4.02 / 4.18%, sqlite 8.35 / 8.36 / 8.56%, zlib
/// 1.35 / 1.53 / 1.95%, regex 8.7 / 10.5 / 10.1%, sort 10.5 / 10.5 / 10.0%; `truth`'s CPU
/// time with one slot was 5-10% below four (lua 0.96 / 1.02 s, sqlite 1.30 / 1.44 s).
/// Before predecessor checks, four slots had cut callbacks 2-3x against one. mcf needed
/// two slots (13.1% with one) until a branch listed the side whose block checks the slot
/// (4.3% with one, as with four; see [`Global::silent_slots`]).
const SLOTS: usize = 1;

/// The union-find key of block `id`'s exit side (guest addresses, the entry sides, are
/// below 2^63 in user mode).
fn block_node(id: u32) -> u64 {
    (1 << 63) | id as u64
}

thread_local! {
    /// The vCPU index of this host thread (set by the vCPU init hook, which QEMU runs on
    /// the vCPU's own thread; translation runs there too).
    static MY_VCPU: std::cell::Cell<Option<c_uint>> = const { std::cell::Cell::new(None) };
}
/// Blocks per per-vcpu counter scoreboard (API v4): 32 KiB per vcpu each.
const SB_CHUNK: usize = 4096;

/// The last `u64` of the shared counter file: a copy of `THREADS` that survives a fatal
/// signal (null without `shm=`).
static THREADS_SHARED: AtomicPtr<u64> = AtomicPtr::new(std::ptr::null_mut());
/// The `u64` before it: what the process did besides running guest code, as
/// [`RUN_EXITED`], [`RUN_FORKED`] and [`RUN_EXECED`] bits (null without `shm=`). The
/// analyzer reads it during and after the run: a run whose exit hook ran and that neither
/// forked nor exec'd started no other process, so there is nothing to look for in `/proc`.
static RUN_SHARED: AtomicPtr<u64> = AtomicPtr::new(std::ptr::null_mut());
/// [`RUN_SHARED`]: the exit hook of the process QEMU started ran (never set in a fork).
const RUN_EXITED: u64 = 1;
/// [`RUN_SHARED`]: the process forked (QEMU's `fork()`, or a guest fork, vfork, clone
/// without `CLONE_VM` or clone3 asked for; set before the child exists).
const RUN_FORKED: u64 = 2;
/// [`RUN_SHARED`]: the guest asked for `execve`/`execveat` (set before the exec).
const RUN_EXECED: u64 = 4;

/// Sets `bit` in [`RUN_SHARED`] (async-signal-safe: one atomic or).
fn run_state(bit: u64) {
    let p = RUN_SHARED.load(Relaxed);
    if !p.is_null() {
        // SAFETY: `p` is a u64 of the shared mapping: 8-aligned (the mapping is
        // page-aligned), mapped for the life of the process and only accessed atomically.
        unsafe { std::sync::atomic::AtomicU64::from_ptr(p) }.fetch_or(bit, Relaxed);
    }
}

/// Multiplicative hasher for the small integer keys of the edge maps.
#[derive(Default)]
struct Mix(u64);
impl Hasher for Mix {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(26) ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}
pub(crate) type EdgeMap = HashMap<u64, u64, BuildHasherDefault<Mix>>;

struct Global {
    /// Inline counters shared with the analyzer (`shm=fd:N`): they survive a fatal signal.
    shared: *mut u64,
    shared_cap: usize,
    out: File,
    buf: Vec<u8>,
    failed: bool,
    /// The trace ring (`ring=fd:N`): trace chunks go there, the pipe gets RING records.
    ring: Option<ring::Ring>,
    dedup: HashMap<(u64, Box<[u8]>), u32>,
    nblocks: u32,
    counters: Vec<Box<[UnsafeCell<u64>]>>,
    modules: HashMap<(String, u64), u32>,
    maps: Vec<Mapping>,
    missed_pages: HashSet<u64>,
    /// API v4: per-vcpu counter scoreboards, [`SB_CHUNK`] blocks each.
    count_sbs: Vec<*mut ffi::Scoreboard>,
    /// Per block id: what it stores in the expectation slots (API v4 count mode with
    /// edges): its silent successors, 0 where none.
    expect: Vec<[u64; SLOTS]>,
    /// Per block id: its guest address.
    vaddr_of: Vec<u64>,
    /// Per block id: 0 when its entry is checked against the expectation slots, else
    /// `p + 1`: its entry is silent exactly when block `p` ran just before it (a
    /// *predecessor check*, see [`Global::pred_check`]).
    check: Vec<u64>,
    /// Guest addresses some block lists in its expectation slots.
    listed: HashSet<u64>,
    /// The (predecessor block, address) pairs of predecessor checks.
    pred_edges: HashSet<(u32, u64)>,
    /// Union-find over the nodes of the silent-edge graph: guest addresses (the entry
    /// sides) and blocks (the exit sides, keys [`block_node`]). Every silent edge joins
    /// its two nodes, and one that would join two nodes already connected (a cycle of
    /// unknowns that the counts cannot resolve) is not made silent.
    joined: HashMap<u64, u64>,
    /// The first block id defined at each guest address.
    by_vaddr: HashMap<u64, u32>,
    /// Per block id whose instrumentation leaves out slot stores: the address of its
    /// leaked [`Elided`] (the callback's `udata`), reused when the block is retranslated.
    elided: HashMap<u32, usize>,
}

// SAFETY: the raw pointer is to a process-wide shared mapping that is never unmapped; all
// other fields are Send. Access goes through the GLOBAL mutex.
unsafe impl Send for Global {}

static GLOBAL: Mutex<Option<Global>> = Mutex::new(None);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Global {
    fn put(&mut self, rec: &[u8]) {
        self.buf.extend_from_slice(rec);
        if self.buf.len() >= OUT_FLUSH {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if !self.failed && !self.buf.is_empty() && self.out.write_all(&self.buf).is_err() {
            self.failed = true;
        }
        self.buf.clear();
    }

    /// Writes a trace chunk of thread `tid`: into the trace ring with a RING record written
    /// at once (the analyzer decodes a chunk when its record arrives, and the ring's space
    /// comes back only then), else as a TRACE or TRACEMEM record. When the ring waits on an
    /// analyzer that is gone, the chunk goes to the pipe, whose write then fails as it
    /// always did for a dead reader (QEMU ends by `SIGPIPE`).
    fn put_trace(&mut self, tid: u32, words: &[u32]) {
        let mut gone = false;
        if !self.failed {
            if let Some(r) = self.ring.as_mut() {
                if let Ok(pos) = r.put(words, &self.out) {
                    self.buf.u8(wire::TAG_RING);
                    self.buf.u32(tid);
                    self.buf.u32(words.len() as u32);
                    self.buf.u32(pos);
                    self.flush();
                    return;
                }
                self.ring = None;
                gone = true;
            }
        }
        self.buf.reserve(9 + 4 * words.len());
        self.buf.u8(if MEM.load(Relaxed) {
            wire::TAG_TRACE_MEM
        } else {
            wire::TAG_TRACE
        });
        self.buf.u32(tid);
        self.buf.u32(words.len() as u32);
        if cfg!(target_endian = "little") {
            // SAFETY: `u32` slices are `4 * len` initialised bytes; `u8` has alignment 1.
            let bytes =
                unsafe { std::slice::from_raw_parts(words.as_ptr() as *const u8, 4 * words.len()) };
            self.buf.extend_from_slice(bytes);
        } else {
            for &w in words {
                self.buf.u32(w);
            }
        }
        if self.buf.len() >= OUT_FLUSH || gone {
            self.flush();
        }
    }

    fn reread_maps(&mut self) {
        if let Ok(text) = std::fs::read_to_string("/proc/self/maps") {
            self.maps = maps::parse(&text);
        }
    }

    fn mapping(&mut self, haddr: u64) -> Option<Mapping> {
        if MAPS_DIRTY.swap(false, Relaxed) {
            self.reread_maps();
        }
        if let Some(m) = maps::lookup(&self.maps, haddr) {
            return Some(m.clone());
        }
        if self.missed_pages.insert(haddr >> 12) {
            self.reread_maps();
            return maps::lookup(&self.maps, haddr).cloned();
        }
        None
    }

    fn module_id(&mut self, m: &Mapping) -> u32 {
        let base = m.start.wrapping_sub(m.offset);
        let key = (m.path.clone(), base);
        if let Some(&id) = self.modules.get(&key) {
            return id;
        }
        let id = self.modules.len() as u32;
        self.modules.insert(key, id);
        let path = m.path.as_bytes();
        let len = path.len().min(u16::MAX as usize);
        let mut rec = Vec::with_capacity(17 + len);
        rec.u8(wire::TAG_MODULE);
        rec.u32(id);
        rec.u64(base);
        rec.u16(len as u16);
        rec.extend_from_slice(&path[..len]);
        self.put(&rec);
        id
    }

    /// Defines a new block: module, per-instruction file offsets, end kind; returns its id.
    fn define(&mut self, vaddr: u64, insns: &[(u64, u64)], end: u8) -> u32 {
        // (guest vaddr, host addr) per instruction.
        let mut module = wire::NO_MODULE;
        let mut addrs: Vec<u64> = insns.iter().map(|&(v, _)| v).collect();
        if insns.iter().all(|&(_, h)| h != 0) {
            if let Some(first) = self.mapping(insns[0].1) {
                let mut offs = Vec::with_capacity(insns.len());
                for &(_, h) in insns {
                    let m = if (first.start..first.end).contains(&h) {
                        Some(first.clone())
                    } else {
                        self.mapping(h)
                    };
                    match m {
                        Some(m)
                            if m.path == first.path
                                && m.start.wrapping_sub(m.offset)
                                    == first.start.wrapping_sub(first.offset) =>
                        {
                            offs.push(h - m.start + m.offset)
                        }
                        _ => break,
                    }
                }
                if offs.len() == insns.len() {
                    module = self.module_id(&first);
                    addrs = offs;
                }
            }
        }
        let id = self.nblocks;
        self.nblocks += 1;
        self.by_vaddr.entry(vaddr).or_insert(id);
        if let Some(v4) = &ffi::api().v4 {
            while (id as usize) / SB_CHUNK >= self.count_sbs.len() {
                // SAFETY: allocating a scoreboard has no preconditions; it is never freed.
                self.count_sbs
                    .push(unsafe { (v4.scoreboard_new)(SB_CHUNK * 8) });
            }
        } else {
            while (id as usize) / COUNTER_CHUNK >= self.counters.len() {
                self.counters
                    .push((0..COUNTER_CHUNK).map(|_| UnsafeCell::new(0)).collect());
            }
        }
        let n = addrs.len().min(u16::MAX as usize);
        let mut rec = Vec::with_capacity(24 + 8 * n);
        rec.u8(wire::TAG_BLOCK);
        rec.u32(id);
        rec.u32(module);
        rec.u64(vaddr);
        rec.u8(end);
        rec.u16(n as u16);
        for &a in &addrs[..n] {
            rec.u64(a);
        }
        self.put(&rec);
        id
    }

    fn counter_ptr(&self, id: u32) -> *mut u64 {
        let id = id as usize;
        if id < self.shared_cap {
            // SAFETY: `shared` maps `shared_cap` u64s for the life of the process.
            return unsafe { self.shared.add(id) };
        }
        self.counters[id / COUNTER_CHUNK][id % COUNTER_CHUNK].get()
    }

    /// API v4: the per-vcpu counter of block `id`.
    fn count_entry(&self, id: u32) -> ffi::ScoreU64 {
        ffi::ScoreU64 {
            score: self.count_sbs[id as usize / SB_CHUNK],
            offset: (id as usize % SB_CHUNK) * 8,
        }
    }

    /// Every block counter back to 0 (a forked child): API v4's per-vcpu scoreboards; API
    /// v1's private chunks, and the shared counters, which the child maps privately (zeroed)
    /// over the shared ones so that its inline adds no longer reach the parent's.
    fn zero_counts(&mut self) {
        if let Some(v4) = &ffi::api().v4 {
            for &sb in &self.count_sbs {
                for v in 0..VCPU_MAX.load(Relaxed) {
                    // SAFETY: the element of vcpu `v` is SB_CHUNK u64s; in the forked child
                    // only this thread runs.
                    unsafe {
                        let base = (v4.scoreboard_find)(sb, v) as *mut u64;
                        if !base.is_null() {
                            std::ptr::write_bytes(base, 0, SB_CHUNK);
                        }
                    }
                }
            }
            return;
        }
        for c in &self.counters {
            for x in c.iter() {
                // SAFETY: in the forked child only this thread runs; nothing else touches
                // the counter now.
                unsafe { *x.get() = 0 };
            }
        }
        if self.shared_cap > 0 {
            // SAFETY: `shared` maps `shared_cap` u64s on whole pages (the counters start a
            // page after the shared file's head); MAP_FIXED replaces exactly those pages of
            // this process with private zeroed memory, at the same address, so the inline
            // adds already generated keep valid pointers.
            let p = unsafe {
                libc::mmap(
                    self.shared as *mut c_void,
                    self.shared_cap * 8,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                // The counters stay shared: none of them is used from here on.
                self.shared_cap = 0;
            }
        }
    }

    fn inline_counts(&self) -> Vec<u64> {
        if let Some(v4) = &ffi::api().v4 {
            // Per-vcpu counters: the sum over vcpus (each written only by its own vcpu).
            let mut out = vec![0u64; self.nblocks as usize];
            let vcpus = VCPU_MAX.load(Relaxed);
            for (k, &sb) in self.count_sbs.iter().enumerate() {
                for v in 0..vcpus {
                    // SAFETY: the element of vcpu `v` in a live scoreboard is SB_CHUNK u64s;
                    // QEMU only moves it while all vcpus are stopped (exclusive section), and
                    // a concurrent add by a running vcpu is an aligned 8-byte store.
                    let base = unsafe { (v4.scoreboard_find)(sb, v) } as *const u64;
                    if base.is_null() {
                        continue;
                    }
                    for j in 0..SB_CHUNK {
                        let id = k * SB_CHUNK + j;
                        if id >= out.len() {
                            break;
                        }
                        // SAFETY: see above; j < SB_CHUNK.
                        out[id] += unsafe { base.add(j).read_volatile() };
                    }
                }
            }
            return out;
        }
        (0..self.nblocks)
            // SAFETY: the pointer is to a live counter; generated code may be adding to it
            // concurrently (only while other vcpus run), a torn read is impossible for an
            // aligned u64 on x86-64 and the value is a snapshot either way.
            .map(|id| unsafe { self.counter_ptr(id).read_volatile() })
            .collect()
    }
}

/// Writes the trace words of `s` not yet written as one TRACE (or TRACEMEM) record. The
/// owner (the vcpu's own thread) empties the buffer; another thread (a snapshot while the
/// vcpu runs) only marks the words written.
fn flush_trace(s: &Slot, owner: bool) {
    let Some(t) = s.trace_if_any() else { return };
    let _g = lock(&s.shared);
    let (from, to) = t.unsent();
    if to > from {
        if let Some(g) = lock(&GLOBAL).as_mut() {
            g.put_trace(s.tid.load(Relaxed), t.words(from, to));
        }
    }
    t.mark_sent(owner, to);
}

fn add_edge(map: &mut Option<EdgeMap>, from: u32, to: u32, n: u64) {
    *map.get_or_insert_with(EdgeMap::default)
        .entry(((from as u64) << 32) | to as u64)
        .or_insert(0) += n;
}

/// First block of a guest thread on this vcpu (`prev` is [`NO_BLOCK`] until then, and again
/// after `on_vcpu_exit`).
#[cold]
fn thread_start(s: &Slot, vcpu: c_uint) {
    if vcpu >= VCPUS_SEEN.load(Relaxed) {
        VCPUS_SEEN.fetch_max(vcpu + 1, Relaxed);
    }
    // SAFETY: gettid has no preconditions.
    s.tid.store(unsafe { libc::gettid() } as u32, Relaxed);
}

/// Block `prev` was followed by `id`, which none of its cache ways holds: take the way with
/// the fewest pending executions (a free one if any). A way still holding counts moves them
/// to the edge map first, under the lock, so a concurrent snapshot sees them in one place
/// or the other, never both or neither.
#[cold]
#[inline(never)]
fn successor_missed(s: &Slot, prev: u32, p: &Entry, id: u32) {
    let (k, pending) = (0..WAYS)
        .map(|k| (k, p.pending[k].load(Relaxed)))
        .min_by_key(|&(_, n)| n)
        .unwrap_or((0, 0));
    if pending == 0 {
        p.succ[k].store(id, Relaxed);
        p.pending[k].store(1, Release);
        return;
    }
    let mut g = lock(&s.shared);
    add_edge(&mut g.edges, prev, p.succ[k].load(Relaxed), pending);
    p.succ[k].store(id, Relaxed);
    p.pending[k].store(1, Release);
}

/// Count mode with edges: one call per executed block, on the vcpu's own thread. No lock on
/// the common path (see [`vcpu`]): the block's count and the previous block's cached
/// successor are updated with plain loads and stores.
extern "C" fn on_block_count(vcpu: c_uint, udata: *mut c_void) {
    if IN_CHILD.load(Relaxed) {
        return;
    }
    let id = udata as usize as u32;
    let s = vcpu::slot(vcpu);
    let prev = s.prev.load(Relaxed);
    s.prev.store(id, Relaxed);
    if prev == NO_BLOCK {
        thread_start(s, vcpu);
    }
    if let Some(e) = s.entry(id) {
        bump(&e.count);
    }
    if prev == NO_BLOCK {
        return;
    }
    record_edge(s, prev, id);
}

/// Edge `prev -> id` on vcpu slot `s` (its owner thread): the successor cache of `prev`,
/// else [`successor_missed`].
#[inline(always)]
fn record_edge(s: &Slot, prev: u32, id: u32) {
    let Some(p) = s.entry(prev) else { return };
    for k in 0..WAYS {
        if p.succ[k].load(Relaxed) == id {
            bump(&p.pending[k]);
            return;
        }
    }
    successor_missed(s, prev, p, id);
}

/// API v1 count mode without edges once a guest thread exists: the block's per-vcpu count
/// (single writer, so threads cannot lose increments as with the shared inline add).
extern "C" fn on_block_count_only(vcpu: c_uint, udata: *mut c_void) {
    if IN_CHILD.load(Relaxed) {
        return;
    }
    let s = vcpu::slot(vcpu);
    if s.prev.load(Relaxed) == NO_BLOCK {
        s.prev.store(0, Relaxed);
        thread_start(s, vcpu);
    }
    if let Some(e) = s.entry(udata as usize as u32) {
        bump(&e.count);
    }
}

/// The API v4 state of `vcpu` (its element of [`STATE_SB`]).
fn vcpu_state(vcpu: c_uint) -> *mut VcpuState {
    let sb = STATE_SB.load(Relaxed);
    match (&ffi::api().v4, sb.is_null()) {
        // SAFETY: a live scoreboard of VcpuState elements; QEMU grows it (moving it) only
        // inside an exclusive section, never during a callback.
        (Some(v4), false) => unsafe { (v4.scoreboard_find)(sb, vcpu) as *mut VcpuState },
        _ => std::ptr::null_mut(),
    }
}

/// vCPU 0's element of [`STATE_SB`], found once: until the guest creates a thread
/// ([`THREADED`], set by the syscall hook before the `clone` runs, on the cloning thread)
/// no other vCPU exists, and QEMU moves a scoreboard only when a new vCPU needs room.
static STATE0: AtomicPtr<VcpuState> = AtomicPtr::new(std::ptr::null_mut());

/// [`vcpu_state`] for the callback: vCPU 0 of a single-threaded guest without the call
/// into QEMU (`qemu_plugin_scoreboard_find`, which also asserts the index through two more
/// calls: about a fifth of the callback's time).
#[inline(always)]
fn vcpu_state_hot(vcpu: c_uint) -> *mut VcpuState {
    if vcpu != 0 || THREADED.load(Relaxed) {
        return vcpu_state(vcpu);
    }
    let p = STATE0.load(Relaxed);
    if !p.is_null() {
        return p;
    }
    let p = vcpu_state(0);
    STATE0.store(p, Relaxed);
    p
}

/// API v4, count mode with edges: block `udata` started somewhere its predecessor did not
/// expect (the conditional callback fires only then: after a return, an indirect jump or
/// call, a system call, the less likely side of a conditional branch, a signal or fault,
/// or at a thread's first block). Records the edge; expected edges are derived from the
/// block counts in [`snapshot`].
extern "C" fn on_unexpected(vcpu: c_uint, udata: *mut c_void) {
    if let Some(st) = entry_state(vcpu) {
        unexpected(vcpu, st, udata as usize as u32);
    }
}

/// The vcpu's state for an entry callback; `None` in a forked child (whose counts are not
/// ours) or before the vcpu has one.
#[inline(always)]
fn entry_state(vcpu: c_uint) -> Option<*mut VcpuState> {
    if IN_CHILD.load(Relaxed) {
        return None;
    }
    let st = vcpu_state_hot(vcpu);
    (!st.is_null()).then_some(st)
}

/// A block some of whose slot stores are left out (see [`known_slots`]): its silent
/// entries find those slots holding its values already; this entry callback, the one way
/// in when they may not, stores all its slots (before the block's inline operations run,
/// which store the others again).
#[derive(Debug)]
struct Elided {
    id: u32,
    slots: [u64; SLOTS],
}

/// [`on_unexpected`] of a block with [`Elided`] stores (`udata`: a leaked `Elided`).
extern "C" fn on_unexpected_storing(vcpu: c_uint, udata: *mut c_void) {
    let Some(st) = entry_state(vcpu) else { return };
    // SAFETY: `udata` is an `Elided` leaked at translation and never freed; `st` is this
    // vcpu's own element, written only on its own thread (inline stores, this callback).
    let id = unsafe {
        let e = &*(udata as *const Elided);
        (*st).slot = e.slots;
        e.id
    };
    unexpected(vcpu, st, id);
}

/// Which expectation slots a block at `vaddr` with entry check `check` finds already
/// holding what it would store (`slots`) whenever its entry is silent, so that it can leave
/// out their inline stores. Every block leaves the slots holding its own listing (stored,
/// or known and, after a callback, stored by [`on_unexpected_storing`]), so:
/// * a slot check (`check` 0) passes only when the slot of `vaddr` holds `vaddr`: known
///   for that slot when the block lists its own address (a loop of one block);
/// * a predecessor check on block `p` (`check` `p + 1`) passes only right after `p`: every
///   slot holds `p`'s listing `pred_slots`, known where the block lists the same (an
///   if-then whose branch lists the join that the then-part also lists, a block after a
///   return that lists nothing either).
///
/// The `pred` store is never left out: every callback reads it for the edge's source.
fn known_slots(
    vaddr: u64,
    check: u64,
    slots: &[u64; SLOTS],
    pred_slots: Option<&[u64; SLOTS]>,
) -> [bool; SLOTS] {
    let mut known = [false; SLOTS];
    for (k, kn) in known.iter_mut().enumerate() {
        *kn = if check == 0 {
            k == slot_of(vaddr) && slots[k] == vaddr
        } else {
            pred_slots.is_some_and(|p| p[k] == slots[k])
        };
    }
    known
}

/// Records the entry of block `id` through an unexpected edge (or a thread start).
fn unexpected(vcpu: c_uint, st: *mut VcpuState, id: u32) {
    // SAFETY: the vcpu's own element, written by this vcpu's inline stores only.
    let pred = unsafe { (*st).pred };
    let s = vcpu::slot(vcpu);
    if pred == 0 {
        thread_start(s, vcpu);
        *lock(&s.shared).starts.entry(id).or_insert(0) += 1;
        return;
    }
    record_edge(s, (pred - 1) as u32, id);
}

/// Trace mode: appends the block id to the vcpu's buffer.
extern "C" fn on_block_trace(vcpu: c_uint, udata: *mut c_void) {
    if IN_CHILD.load(Relaxed) {
        return;
    }
    let id = udata as usize as u32;
    let s = vcpu::slot(vcpu);
    if s.prev.load(Relaxed) == NO_BLOCK {
        thread_start(s, vcpu);
    }
    s.prev.store(id, Relaxed);
    let t = s.trace(TRACE_BUF_WORDS);
    if MEM.load(Relaxed) {
        // Flush before the id, so a chunk normally holds whole blocks (id + accesses).
        if t.len() >= TRACE_CHUNK {
            flush_trace(s, true);
        }
        t.push(&[id]);
        return;
    }
    if !t.push(&[id]) {
        flush_trace(s, true);
        t.push(&[id]);
    }
    if t.len() >= TRACE_CHUNK {
        flush_trace(s, true);
    }
}

/// Accesses whose size and direction [`meminfo_checked`] compares with QEMU's accessors
/// before [`on_mem`] decodes the meminfo word itself.
const MEMINFO_CHECKS: u32 = 1 << 16;
/// Accesses checked and agreeing so far (below [`MEMINFO_CHECKS`]: still checking;
/// [`MEMINFO_CHECKS`]: [`meminfo_bits`] is used; `u32::MAX`: a decoding differed, the
/// accessors are used for the rest of the run).
static MEMINFO_STATE: AtomicU32 = AtomicU32::new(0);

/// (log2 size, store) of an access from its meminfo word, as QEMU 4.2 to 10 build it
/// (`make_plugin_meminfo`: the `MemOpIdx` `memop << 4 | mmu_idx` in the low 16 bits, the
/// `qemu_plugin_mem_rw` above them; the size is the `MO_SIZE` bits of the `MemOp`), without
/// the two accessor calls per access. The layout is QEMU's internal one, so it is used
/// only once [`meminfo_checked`] has found it agreeing with the accessors.
#[inline]
fn meminfo_bits(info: ffi::MemInfo) -> (u32, bool) {
    ((info >> 4) & 7, (info >> 16) & 2 != 0)
}

/// (log2 size, store) of an access through QEMU's accessors, compared with
/// [`meminfo_bits`] on the run's first [`MEMINFO_CHECKS`] accesses: when all agree,
/// [`on_mem`] decodes the word itself from then on; one difference keeps the accessors.
#[cold]
fn meminfo_checked(info: ffi::MemInfo) -> (u32, bool) {
    // SAFETY: plain accessors of the meminfo value QEMU passed to this callback.
    let api = ffi::api();
    let got = unsafe { ((api.mem_size_shift)(info), (api.mem_is_store)(info)) };
    if got != meminfo_bits(info) {
        MEMINFO_STATE.store(u32::MAX, Relaxed);
    } else {
        // Counts up to MEMINFO_CHECKS, never from u32::MAX.
        let _ =
            MEMINFO_STATE.fetch_update(Relaxed, Relaxed, |n| (n < MEMINFO_CHECKS).then_some(n + 1));
    }
    got
}

/// A data access of instruction `udata` (its index in the block) of the current block.
extern "C" fn on_mem(vcpu: c_uint, info: ffi::MemInfo, vaddr: u64, udata: *mut c_void) {
    if IN_CHILD.load(Relaxed) {
        return;
    }
    let (shift, store) = if MEMINFO_STATE.load(Relaxed) == MEMINFO_CHECKS {
        meminfo_bits(info)
    } else {
        meminfo_checked(info)
    };
    let insn = udata as usize as u16;
    let mut words = [0u32; 4];
    let n = if SIM_ON.load(Relaxed) {
        let level = if THREADED.load(Relaxed) {
            simulate_locked(vaddr, 1 << shift)
        } else {
            // SAFETY: no other guest thread exists (`THREADED` is set by the creating
            // thread before the clone runs).
            unsafe { simulate(vaddr, 1 << shift) }
        };
        let w = wire::outcome_word(insn, store, level);
        if SIM_ADDRS.load(Relaxed) {
            // The address words, then the outcome (`addrs=on`: the host checks the levels).
            let (a, n) = wire::mem_words(insn, shift, store, vaddr);
            words[..n].copy_from_slice(&a[..n]);
            words[n] = w;
            n + 1
        } else {
            words[0] = w;
            1
        }
    } else {
        let (a, n) = wire::mem_words(insn, shift, store, vaddr);
        words[..3].copy_from_slice(&a);
        n
    };
    let s = vcpu::slot(vcpu);
    let t = s.trace(TRACE_BUF_WORDS);
    let pushed = t.push(&words[..n]);
    if !pushed || t.len() >= TRACE_MEM_CAP {
        mem_flush(s, &words[..n], pushed);
    }
}

/// [`on_mem`]'s words did not fit (`pushed` false: flush, then append them) or filled the
/// buffer past [`TRACE_MEM_CAP`] (flush).
#[cold]
#[inline(never)]
fn mem_flush(s: &vcpu::Slot, w: &[u32], pushed: bool) {
    let t = s.trace(TRACE_BUF_WORDS);
    if !pushed {
        flush_trace(s, true);
        t.push(w);
    }
    if t.len() >= TRACE_MEM_CAP {
        flush_trace(s, true);
    }
}

/// Writes a cumulative snapshot of all counts (and flushes every trace buffer first).
fn snapshot(reason: u8) {
    let seen = (VCPUS_SEEN.load(Relaxed) as usize).min(vcpu::MAX_VCPUS);
    let mut counts: Vec<u64> = Vec::new();
    let mut edges: EdgeMap = EdgeMap::default();
    let mut sinks: HashMap<u32, u64> = HashMap::new();
    let mut starts: HashMap<u32, u64> = HashMap::new();
    for v in 0..seen {
        let Some(s) = vcpu::existing(v) else { continue };
        flush_trace(s, false);
        // Under the lock the edge map and the successor caches are consistent; counts of a
        // vcpu still running are read as they are at this moment.
        let g = lock(&s.shared);
        s.for_each_entry(|id, e| {
            let c = e.count.load(Relaxed);
            if c > 0 {
                let i = id as usize;
                if counts.len() <= i {
                    counts.resize(i + 1, 0);
                }
                counts[i] += c;
            }
            for k in 0..WAYS {
                let n = e.pending[k].load(Acquire);
                if n > 0 {
                    let to = e.succ[k].load(Relaxed);
                    *edges.entry(((id as u64) << 32) | to as u64).or_insert(0) += n;
                }
            }
        });
        if let Some(m) = &g.edges {
            for (k, v) in m {
                *edges.entry(*k).or_insert(0) += v;
            }
        }
        for (&b, &n) in &g.sinks {
            *sinks.entry(b).or_insert(0) += n;
        }
        for (&b, &n) in &g.starts {
            *starts.entry(b).or_insert(0) += n;
        }
    }
    let mut guard = lock(&GLOBAL);
    let Some(g) = guard.as_mut() else { return };
    let inline = g.inline_counts();
    counts.resize(counts.len().max(inline.len()).min(g.nblocks as usize), 0);
    let mut underived = 0u64;
    if MODE.load(Relaxed) == MODE_COUNT && EDGES.load(Relaxed) && ffi::api().v4.is_some() {
        // The block each vcpu ran last has not gone anywhere yet.
        for v in 0..VCPU_MAX.load(Relaxed) {
            let st = vcpu_state(v);
            if st.is_null() {
                continue;
            }
            // SAFETY: the vcpu's element; a running vcpu may be storing to it (aligned
            // 8-byte stores), and what is read is this moment's state either way.
            let pred = unsafe { std::ptr::addr_of!((*st).pred).read_volatile() };
            if pred != 0 {
                *sinks.entry((pred - 1) as u32).or_insert(0) += 1;
            }
        }
        // What the edges cost, asked for by PROFTRUST_PLUGIN_STATS: the share of block
        // executions that called back, and why they did (`recorded_by_kind`, of the
        // recorded edges, before the derived ones join them).
        let stats = std::env::var_os("PROFTRUST_PLUGIN_STATS")
            .is_some()
            .then(|| (edges.values().sum::<u64>(), recorded_by_kind(g, &edges)));
        underived = derive_edges(g, &inline, &sinks, &starts, &mut edges);
        if let Some((recorded, [dynamic, other_pred, unlisted, dead])) = stats {
            let blocks: u64 = inline.iter().sum();
            let elided: u64 = g
                .elided
                .keys()
                .filter_map(|&id| inline.get(id as usize))
                .sum();
            eprintln!(
                "proftrust-qemu-plugin: {blocks} block executions, {recorded} callbacks ({:.2}%), {underived} underived; callbacks after a return, indirect transfer or system call into a block checking another predecessor {other_pred}, into a block checking the slots {dynamic}; from a branch or fall-through to an unlisted address {unlisted}, to a listed address whose block checks its predecessor {dead}; executions without a slot store {elided} ({:.2}%)",
                100.0 * recorded as f64 / blocks.max(1) as f64,
                100.0 * elided as f64 / blocks.max(1) as f64
            );
        }
    }
    let mut rec = Vec::with_capacity(16 + 8 * (inline.len() + counts.len()) + 16 * edges.len());
    rec.u8(wire::TAG_SNAPSHOT);
    rec.u8(reason);
    rec.u32(seen as u32);
    rec.u32(THREADS.load(Relaxed));
    rec.u32(inline.len() as u32);
    for c in &inline {
        rec.u64(*c);
    }
    // Callback counts: API v1 count mode (with edges for every block; without edges for
    // the blocks translated once a guest thread existed).
    let cb = if MODE.load(Relaxed) == MODE_COUNT && ffi::api().v1.is_some() {
        &counts[..]
    } else {
        &[]
    };
    rec.u32(cb.len() as u32);
    for c in cb {
        rec.u64(*c);
    }
    rec.u32(edges.len() as u32);
    for (k, v) in &edges {
        rec.u32((k >> 32) as u32);
        rec.u32(*k as u32);
        rec.u64(*v);
    }
    rec.u64(underived);
    g.put(&rec);
    g.flush();
}

/// Recorded executions of `edges` by why they called back: a predecessor without static
/// successors (return, indirect transfer, system call) into a block with a predecessor
/// check on another block, or into one checking the slots; a predecessor with static
/// successors into an address it did not list (the same slot, or a cycle of unknowns), or
/// into one it listed but whose block checks its predecessor instead.
fn recorded_by_kind(g: &Global, edges: &EdgeMap) -> [u64; 4] {
    let mut out = [0u64; 4];
    for (&k, &c) in edges {
        let (from, to) = ((k >> 32) as usize, k as u32 as usize);
        let (Some(ex), Some(&check), Some(&a)) =
            (g.expect.get(from), g.check.get(to), g.vaddr_of.get(to))
        else {
            continue;
        };
        let i = match (*ex == [0; SLOTS], check != 0, ex.contains(&a)) {
            (true, true, _) => 1,
            (true, false, _) => 0,
            (false, true, true) => 3,
            (false, _, _) => 2,
        };
        out[i] += c;
    }
    out
}

/// API v4: adds the silent edges, which no callback saw. Every execution of a block `b`
/// left it by a recorded edge, a silent edge to one of its (one or two) silent successors,
/// or not at all (`sinks`: a thread's or the run's last block); every execution of a block
/// at address `v` was entered by a recorded edge, a thread start, or a silent edge from a
/// block listing `v`. So per block `out(b) = count(b) - recorded(b -> *) - sinks(b)` is
/// the sum of its silent edges, and per address `in(v) = count(blocks at v) - recorded(*
/// -> v) - starts(v)` the sum of the silent edges into `v`. The silent edges form a forest
/// between blocks and addresses (the plugin never lets a branch close a cycle, see
/// `Global::joined`), so peeling leaves solves every edge from these sums: Knuth's optimal
/// edge profiling ("Optimal measurement points for program frequency counts", BIT 13,
/// 1973: the edges not measured follow from flow conservation when the measured ones
/// break every cycle). Returns the executions that could not be placed (inconsistent
/// sums: a snapshot taken while other threads ran), which the analyzer reports; 0 in a
/// consistent run.
fn derive_edges(
    g: &Global,
    counts: &[u64],
    sinks: &HashMap<u32, u64>,
    starts: &HashMap<u32, u64>,
    edges: &mut EdgeMap,
) -> u64 {
    let n = counts.len().min(g.expect.len());
    // Nodes: 0..n are blocks (out sides); n.. are addresses (in sides).
    let mut addr_node: HashMap<u64, usize> = HashMap::new();
    let mut addrs: Vec<u64> = Vec::new();
    let mut silent: Vec<(usize, usize)> = Vec::new();
    let pred_edges = g
        .pred_edges
        .iter()
        .filter(|&&(p, _)| (p as usize) < n)
        .map(|&(p, a)| (p as usize, a));
    let listings = g
        .expect
        .iter()
        .enumerate()
        .take(n)
        .flat_map(|(b, ex)| ex.iter().filter(|&&a| a != 0).map(move |&a| (b, a)));
    for (b, a) in listings.chain(pred_edges) {
        let v = *addr_node.entry(a).or_insert_with(|| {
            addrs.push(a);
            n + addrs.len() - 1
        });
        silent.push((b, v));
    }
    let mut rem: Vec<i128> = vec![0; n + addrs.len()];
    for b in 0..n {
        rem[b] = counts[b] as i128 - sinks.get(&(b as u32)).copied().unwrap_or(0) as i128;
    }
    let node_of = |id: u32| -> Option<usize> {
        g.vaddr_of
            .get(id as usize)
            .and_then(|a| addr_node.get(a))
            .copied()
    };
    for (id, &c) in counts.iter().enumerate() {
        if let Some(v) = node_of(id as u32) {
            rem[v] += c as i128 - starts.get(&(id as u32)).copied().unwrap_or(0) as i128;
        }
    }
    for (&k, &c) in edges.iter() {
        let (from, to) = ((k >> 32) as usize, k as u32);
        if from < n {
            rem[from] -= c as i128;
        }
        if let Some(v) = node_of(to) {
            rem[v] -= c as i128;
        }
    }
    // Leaf peeling.
    let mut inc: Vec<Vec<usize>> = vec![Vec::new(); rem.len()];
    for (e, &(b, v)) in silent.iter().enumerate() {
        inc[b].push(e);
        inc[v].push(e);
    }
    let mut deg: Vec<usize> = inc.iter().map(Vec::len).collect();
    let mut value: Vec<Option<i128>> = vec![None; silent.len()];
    let mut queue: Vec<usize> = (0..rem.len()).filter(|&x| deg[x] == 1).collect();
    let mut underived: u64 = 0;
    while let Some(x) = queue.pop() {
        if deg[x] != 1 {
            continue;
        }
        let Some(&e) = inc[x].iter().find(|&&e| value[e].is_none()) else {
            continue;
        };
        let val = rem[x];
        value[e] = Some(val);
        let (b, v) = silent[e];
        let other = if x == b { v } else { b };
        rem[x] = 0;
        rem[other] -= val;
        deg[x] -= 1;
        deg[other] -= 1;
        if deg[other] == 1 {
            queue.push(other);
        }
    }
    // A consistent run leaves nothing over anywhere in the forest (blocks without silent
    // successors are outside it: a dynamic block's executions all left by recorded edges,
    // but the run's last one left by none).
    for (r, i) in rem.iter().zip(&inc) {
        if !i.is_empty() {
            underived += r.unsigned_abs().min(u64::MAX as u128) as u64;
        }
    }
    for (e, &(b, v)) in silent.iter().enumerate() {
        let Some(val) = value[e] else {
            continue;
        };
        if val < 0 {
            underived += val.unsigned_abs().min(u64::MAX as u128) as u64;
            continue;
        }
        if val == 0 {
            continue;
        }
        let a = addrs[v - n];
        match g.by_vaddr.get(&a) {
            Some(&t) => *edges.entry(((b as u64) << 32) | t as u64).or_insert(0) += val as u64,
            None => underived += val as u64,
        }
    }
    underived
}

impl Global {
    /// The root of `a` in [`Global::joined`] (path halving).
    fn root(&mut self, mut a: u64) -> u64 {
        loop {
            let p = *self.joined.get(&a).unwrap_or(&a);
            if p == a {
                return a;
            }
            let gp = *self.joined.get(&p).unwrap_or(&p);
            self.joined.insert(a, gp);
            a = gp;
        }
    }

    /// Joins nodes `a` and `b` of the silent-edge graph; false (joining nothing) when
    /// they are already connected.
    fn join(&mut self, a: u64, b: u64) -> bool {
        let (ra, rb) = (self.root(a), self.root(b));
        if ra == rb {
            return false;
        }
        self.joined.insert(ra, rb);
        true
    }

    /// What new block `id` with these static successors stores in the expectation slots.
    fn silent_slots(&mut self, id: u32, succ: classify::Successors) -> [u64; SLOTS] {
        let mut slots = [0u64; SLOTS];
        let b = block_node(id);
        match succ {
            classify::Successors::Dynamic => {}
            classify::Successors::One(e) => {
                if self.join(b, e) {
                    slots[slot_of(e)] = e;
                }
            }
            classify::Successors::Two { predicted, other } => {
                // A side whose block already checks the slot passes only if listed; a
                // side without a block yet may still get a predecessor check on this one.
                let slot_checked = |x: u64| {
                    self.by_vaddr
                        .get(&x)
                        .is_some_and(|&i| self.check.get(i as usize) == Some(&0))
                };
                let (predicted, other) = if slot_checked(other) && !slot_checked(predicted) {
                    (other, predicted)
                } else {
                    (predicted, other)
                };
                if self.join(b, predicted) {
                    slots[slot_of(predicted)] = predicted;
                }
                if slot_of(other) != slot_of(predicted)
                    && slots[slot_of(predicted)] != 0
                    && self.join(b, other)
                {
                    slots[slot_of(other)] = other;
                }
            }
        }
        for &a in &slots {
            if a != 0 {
                self.listed.insert(a);
            }
        }
        slots
    }

    /// The entry check of a new block at `vaddr`, decided as QEMU translates it, i.e. just
    /// before its first execution: `p + 1` (a predecessor check: silent exactly when block
    /// `p` ran just before) when `p`, the block this vCPU ran last, does not list `vaddr`
    /// and no other block does either (the targets of returns and indirect jumps and calls,
    /// the unlisted side of a branch), and the edge closes no cycle of unknowns; else 0
    /// (the expectation-slot check). A return site thus passes silently whenever the
    /// callee's return block that returned there first returns there again; an
    /// interpreter's handler whenever the dispatch jump that reached it first reaches it
    /// again. Any other entry calls back, so a wrong guess costs time, never a number.
    fn pred_check(&mut self, vaddr: u64) -> u64 {
        if self.listed.contains(&vaddr) {
            return 0;
        }
        let Some(v) = MY_VCPU.with(|c| c.get()) else {
            return 0;
        };
        let st = vcpu_state(v);
        if st.is_null() {
            return 0;
        }
        // SAFETY: this vCPU's own element, read on its own thread between blocks.
        let pred = unsafe { (*st).pred };
        if pred == 0 || pred > self.expect.len() as u64 {
            return 0;
        }
        let p = (pred - 1) as u32;
        if self.pred_edges.contains(&(p, vaddr)) || self.join(block_node(p), vaddr) {
            self.pred_edges.insert((p, vaddr));
            return pred;
        }
        0
    }
}

extern "C" fn on_translate(_id: ffi::PluginId, tb: *mut ffi::Tb) {
    if IN_CHILD.load(Relaxed) {
        return;
    }
    let api = ffi::api();
    let trace = MODE.load(Relaxed) == MODE_TRACE;
    let edges = EDGES.load(Relaxed);
    let mem = trace && MEM.load(Relaxed);
    // SAFETY: `tb` is valid for the duration of this callback (QEMU's contract), and so are
    // its instruction handles; registering a memory callback on one of its instructions is
    // allowed during translation.
    let (vaddr, insns, bytes, last) = unsafe {
        let n = (api.tb_n_insns)(tb);
        if n == 0 {
            return;
        }
        let mut insns = Vec::with_capacity(n);
        let mut bytes = Vec::new();
        let mut last = 0..0;
        let mut buf = [0u8; 16];
        for i in 0..n {
            let insn = (api.tb_get_insn)(tb, i);
            if mem {
                // Called after each load or store of this instruction, in execution order.
                (api.register_vcpu_mem_cb)(
                    insn,
                    on_mem,
                    ffi::CB_NO_REGS,
                    ffi::MEM_RW,
                    i as *mut c_void,
                );
            }
            let len = ffi::insn_bytes(insn, &mut buf);
            last = bytes.len()..bytes.len() + len;
            bytes.extend_from_slice(&buf[..len]);
            insns.push(((api.insn_vaddr)(insn), (api.insn_haddr)(insn) as u64));
        }
        follow::note_guest_base(insns[0].0, insns[0].1);
        (insns[0].0, insns, bytes, last)
    };
    let last_bytes = &bytes[last];
    let end = classify::classify(last_bytes);
    let last_vaddr = insns.last().map_or(vaddr, |i| i.0);
    let succ = classify::successors(last_bytes, last_vaddr);
    let (id, ptr, count_entry, slots, check, (known, elided)) = {
        let mut guard = lock(&GLOBAL);
        let Some(g) = guard.as_mut() else { return };
        let key = (vaddr, bytes.into_boxed_slice());
        let (id, new) = match g.dedup.get(&key) {
            Some(&id) => (id, false),
            None => {
                let id = g.define(vaddr, &insns, end);
                g.dedup.insert(key, id);
                let derive = api.v4.is_some() && edges && !trace;
                // A loop of one block checks the slot, so that its back edge can pass by its
                // own listing: a predecessor check would name the block that first entered
                // the loop and call back on every iteration.
                let self_loop = match succ {
                    classify::Successors::One(e) => e == vaddr,
                    classify::Successors::Two { predicted, other } => {
                        predicted == vaddr || other == vaddr
                    }
                    classify::Successors::Dynamic => false,
                };
                let check = if derive && !self_loop {
                    g.pred_check(vaddr)
                } else {
                    0
                };
                // Known before the slots are chosen: a side that checks the slot (this
                // block's own address too) is the one a branch lists.
                g.check.push(check);
                let slots = if derive {
                    g.silent_slots(id, succ)
                } else {
                    [0; SLOTS]
                };
                g.expect.push(slots);
                g.vaddr_of.push(vaddr);
                (id, true)
            }
        };
        let slots = g.expect[id as usize];
        let check = g.check.get(id as usize).copied().unwrap_or(0);
        let known = if api.v4.is_some() && edges && !trace {
            let pred_slots = (check != 0)
                .then(|| g.expect.get((check - 1) as usize))
                .flatten();
            known_slots(vaddr, check, &slots, pred_slots)
        } else {
            [false; SLOTS]
        };
        let elided = known.contains(&true).then(|| {
            *g.elided
                .entry(id)
                .or_insert_with(|| Box::into_raw(Box::new(Elided { id, slots })) as usize)
        });
        if !trace && new && (api.v4.is_none() || id == 0) {
            // API v1: definitions reach the pipe at once, so that they survive a fatal
            // signal with the shared counters. API v4 keeps its counts in QEMU's memory,
            // which a fatal signal the exit hook cannot see loses anyway: definitions go
            // out in batches (a write per translated block cost the analyzer a wake-up
            // each), except the first, which tells the analyzer the guest started.
            g.flush();
        }
        if api.v4.is_some() {
            (
                id,
                std::ptr::null_mut(),
                Some(g.count_entry(id)),
                slots,
                check,
                (known, elided),
            )
        } else {
            (
                id,
                g.counter_ptr(id),
                None,
                slots,
                check,
                ([false; SLOTS], None),
            )
        }
    };
    let udata = id as usize as *mut c_void;
    // SAFETY: `tb` is the block being translated; `ptr` points into a counter chunk that is
    // never freed or moved; scoreboard entries belong to scoreboards that are never freed.
    unsafe {
        if let (Some(v4), Some(count)) = (&api.v4, count_entry) {
            if trace {
                (api.register_vcpu_tb_exec_cb)(tb, on_block_trace, ffi::CB_NO_REGS, udata);
                return;
            }
            let st = STATE_SB.load(Relaxed);
            let pred = ffi::ScoreU64 {
                score: st,
                offset: PRED_OFF,
            };
            let slot = |k: usize| ffi::ScoreU64 {
                score: st,
                offset: SLOT_OFF + 8 * k,
            };
            // In registration order at block entry: check where the predecessor expected
            // control to go (a callback only when it went elsewhere), count, then say
            // where this block expects to go.
            if edges {
                // Either where the predecessor expected control to go, or which block
                // ran just before (a predecessor check).
                let (entry, value) = if check != 0 {
                    (pred, check)
                } else {
                    (slot(slot_of(vaddr)), vaddr)
                };
                let (cb, data): (ffi::VcpuUdataCb, *mut c_void) = match elided {
                    Some(e) => (on_unexpected_storing, e as *mut c_void),
                    None => (on_unexpected, udata),
                };
                (v4.tb_exec_cond_cb)(tb, cb, ffi::CB_NO_REGS, ffi::COND_NE, entry, value, data);
            }
            (v4.tb_exec_inline_per_vcpu)(tb, ffi::INLINE_ADD_U64, count, 1);
            if edges {
                (v4.tb_exec_inline_per_vcpu)(tb, ffi::INLINE_STORE_U64, pred, id as u64 + 1);
                for (k, &a) in slots.iter().enumerate() {
                    if known[k] {
                        continue;
                    }
                    (v4.tb_exec_inline_per_vcpu)(tb, ffi::INLINE_STORE_U64, slot(k), a);
                }
            }
            return;
        }
        let Some(v1) = &api.v1 else { return };
        let threaded_count = !trace && !edges && THREADED.load(Relaxed);
        if !threaded_count {
            (v1.tb_exec_inline)(tb, ffi::INLINE_ADD_U64, ptr as *mut c_void, 1);
        }
        let cb: Option<ffi::VcpuUdataCb> = if trace {
            Some(on_block_trace)
        } else if edges {
            Some(on_block_count)
        } else if threaded_count {
            Some(on_block_count_only)
        } else {
            None
        };
        if let Some(cb) = cb {
            (api.register_vcpu_tb_exec_cb)(tb, cb, ffi::CB_NO_REGS, udata);
        }
    }
}

extern "C" fn on_vcpu_exit(_id: ffi::PluginId, vcpu: c_uint) {
    if IN_CHILD.load(Relaxed) {
        return;
    }
    let Some(s) = vcpu::existing(vcpu as usize % vcpu::MAX_VCPUS) else {
        return;
    };
    flush_trace(s, true);
    s.prev.store(NO_BLOCK, Relaxed);
    s.tid.store(0, Relaxed);
    let st = vcpu_state(vcpu);
    if !st.is_null() {
        // SAFETY: the exiting vcpu's own element; its thread runs no more guest code.
        unsafe {
            if (*st).pred != 0 {
                // The thread's last block never went anywhere (blocks without silent
                // edges are outside the derivation, so a sink there changes nothing).
                *lock(&s.shared)
                    .sinks
                    .entry(((*st).pred - 1) as u32)
                    .or_insert(0) += 1;
            }
            (*st).pred = 0;
            (*st).slot = [0; SLOTS];
        }
    }
}

extern "C" fn on_vcpu_init(_id: ffi::PluginId, vcpu: c_uint) {
    if IN_CHILD.load(Relaxed) {
        return;
    }
    VCPU_MAX.fetch_max(vcpu + 1, Relaxed);
    MY_VCPU.with(|c| c.set(Some(vcpu)));
    THREADS.fetch_add(1, Relaxed);
    let p = THREADS_SHARED.load(Relaxed);
    if !p.is_null() {
        // SAFETY: `p` is the last u64 of the shared mapping: 8-aligned (the mapping is
        // page-aligned), mapped for the life of the process and only accessed atomically
        // here; the analyzer reads it after the process is gone.
        unsafe { std::sync::atomic::AtomicU64::from_ptr(p) }.fetch_add(1, Relaxed);
    }
}

#[allow(clippy::too_many_arguments)]
extern "C" fn on_syscall(
    _id: ffi::PluginId,
    _vcpu: c_uint,
    num: i64,
    a1: u64,
    a2: u64,
    a3: u64,
    a4: u64,
    a5: u64,
    _a6: u64,
    _a7: u64,
    _a8: u64,
) {
    if IN_CHILD.load(Relaxed) {
        return;
    }
    match num {
        // clone with CLONE_VM (a thread), clone3 (glibc's pthread_create; its flags are in
        // guest memory, so any clone3 counts as a thread: at worst slower, never wrong).
        56 if a1 & libc::CLONE_VM as u64 != 0 => THREADED.store(true, Relaxed),
        435 => {
            THREADED.store(true, Relaxed);
            run_state(RUN_FORKED);
        }
        // fork, vfork, clone of a process (QEMU forks; `in_fork_parent` sees it too).
        56..=58 => run_state(RUN_FORKED),
        // mmap, munmap, mremap: code mappings may change.
        9 | 11 | 25 => MAPS_DIRTY.store(true, Relaxed),
        // execve, execveat: followed (`follow=`: QEMU is started again on the new program
        // and this call does not return), else keep what we have.
        59 | 322 => {
            run_state(RUN_EXECED);
            if follow::on() {
                match num {
                    59 => follow::on_exec(a1, a2, a3, None),
                    _ => follow::on_exec(a2, a3, a4, Some((a1 as i64, a5))),
                }
            }
            snapshot(1);
        }
        // kill, tkill: SIGKILL leaves no exit path, so dump first.
        62 | 200 if a2 == libc::SIGKILL as u64 => snapshot(2),
        // tgkill
        234 if a3 == libc::SIGKILL as u64 => snapshot(2),
        _ => {}
    }
}

extern "C" fn on_exit(_id: ffi::PluginId, _udata: *mut c_void) {
    if IN_CHILD.load(Relaxed) {
        return;
    }
    snapshot(0);
    end_stream();
    // The started program's own exit (not a forked child's, nor an exec'd image's).
    if follow::IMAGE.load(Relaxed) == 0 {
        run_state(RUN_EXITED);
    }
}

/// Writes `rec` and flushes.
fn put_record(rec: &[u8]) {
    if let Some(g) = lock(&GLOBAL).as_mut() {
        g.put(rec);
        g.flush();
    }
}

/// Writes END and flushes.
fn end_stream() {
    put_record(&[wire::TAG_END]);
}

/// `execve(exe, argv, envp)` with the descriptors `keep` (negative ones skipped) left open
/// across it and no signal blocked; returns only on failure.
fn sys_exec(
    exe: &std::ffi::CStr,
    argv: &[std::ffi::CString],
    envp: &[std::ffi::CString],
    keep: &[c_int],
) -> Result<(), String> {
    let mut a: Vec<*const c_char> = argv.iter().map(|c| c.as_ptr()).collect();
    a.push(std::ptr::null());
    let mut e: Vec<*const c_char> = envp.iter().map(|c| c.as_ptr()).collect();
    e.push(std::ptr::null());
    // SAFETY: fcntl on integer fds; sigprocmask with a zeroed, emptied set; execve with
    // NUL-terminated strings in NULL-terminated arrays that live across the call.
    unsafe {
        for &fd in keep.iter().filter(|&&fd| fd >= 0) {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
            }
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        libc::execve(exe.as_ptr(), a.as_ptr(), e.as_ptr());
    }
    Err(std::io::Error::last_os_error().to_string())
}

/// Waits on the control pipe: on `S` (the analyzer's timeout) writes a final snapshot and
/// kills the process, so a stopped run keeps its edges and calls. EOF means the analyzer
/// is gone or done; the thread then ends quietly. The thread does not exist in forked
/// children.
fn spawn_control(mut f: File) {
    use std::io::Read;
    // The thread starts with every signal blocked (it inherits the mask of the thread that
    // spawns it, set around the spawn): QEMU's host signal handlers expect to run on a
    // vCPU thread, and a SIGCHLD of the guest's child delivered here crashed QEMU.
    // SAFETY: sigfillset/pthread_sigmask on zeroed sets owned by this frame.
    let old = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        old
    };
    let _ = std::thread::Builder::new().spawn(move || {
        let mut b = [0u8; 1];
        loop {
            match f.read(&mut b) {
                Ok(1) if b[0] == b'S' => break,
                Ok(1) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                _ => return,
            }
        }
        if IN_CHILD.load(Relaxed) {
            return;
        }
        snapshot(3);
        end_stream();
        // SAFETY: kill on our own pid; SIGKILL ends QEMU and its guest at once.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    });
    // SAFETY: restores this thread's mask saved above.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}

thread_local! {
    /// The plugin's lock, taken by the forking thread before `fork()` (following a tree)
    /// and released by it after: the child then has the lock and a consistent state.
    static FORK_GUARD: std::cell::RefCell<Option<MutexGuard<'static, Option<Global>>>> =
        const { std::cell::RefCell::new(None) };
}

/// In the child of a `fork()` of the QEMU process: counts its own image from here on
/// (following a tree), else nothing of it is counted.
extern "C" fn in_fork_child() {
    let guard = FORK_GUARD.with(|g| g.borrow_mut().take());
    let Some(mut guard) = guard else {
        IN_CHILD.store(true, Relaxed);
        return;
    };
    let ok = match guard.as_mut() {
        Some(g) => match child_setup(g) {
            Ok(()) => true,
            Err(e) => {
                eprintln!(
                    "proftrust-qemu-plugin: the forked child (pid {}) is not counted: {e}",
                    std::process::id()
                );
                false
            }
        },
        None => false,
    };
    drop(guard);
    if !ok {
        IN_CHILD.store(true, Relaxed);
    }
}

/// After a `fork()`, in the parent: releases the lock taken before it.
extern "C" fn in_fork_parent_after() {
    FORK_GUARD.with(|g| g.borrow_mut().take());
}

/// Before any `fork()` of the QEMU process: the run has another process now; following a
/// tree, the records so far are written (the child inherits the definitions among them)
/// and the plugin's lock is held across the fork.
extern "C" fn in_fork_parent() {
    if IN_CHILD.load(Relaxed) {
        return;
    }
    run_state(RUN_FORKED);
    if follow::on() {
        let mut g = lock(&GLOBAL);
        if let Some(g) = g.as_mut() {
            g.flush();
        }
        FORK_GUARD.with(|slot| *slot.borrow_mut() = Some(g));
    }
}

/// The forked child's own image (see `follow.rs`): a new id and connection, every count
/// zeroed, every vcpu at a thread start.
fn child_setup(g: &mut Global) -> Result<(), String> {
    let out = follow::connect()?;
    let parent = follow::IMAGE.load(Relaxed);
    let image = follow::next_image();
    follow::IMAGE.store(image, Relaxed);
    g.out = out;
    g.buf.clear();
    g.failed = false;
    g.ring = None;
    g.zero_counts();
    for v in 0..vcpu::MAX_VCPUS {
        if let Some(s) = vcpu::existing(v) {
            s.reset();
        }
    }
    for v in 0..VCPU_MAX.load(Relaxed) {
        let st = vcpu_state(v);
        if !st.is_null() {
            // SAFETY: the vcpu's element; in the child only this thread runs.
            unsafe {
                (*st).pred = 0;
                (*st).slot = [0; SLOTS];
            }
        }
    }
    THREADS.store(1, Relaxed);
    THREADS_SHARED.store(std::ptr::null_mut(), Relaxed);
    let head = stream_header(MODE.load(Relaxed), EDGES.load(Relaxed), 0);
    g.put(&head);
    g.put(&follow::process_record(
        image,
        parent,
        wire::START_FORK,
        g.nblocks,
        g.modules.len() as u32,
    ));
    g.flush();
    if g.failed {
        return Err("cannot write to the analyzer".into());
    }
    Ok(())
}

/// The stream header (see [`wire`]).
fn stream_header(mode: u8, edges: bool, mem: u8) -> Vec<u8> {
    let mut head = Vec::new();
    head.extend_from_slice(wire::MAGIC);
    head.u32(wire::VERSION);
    head.u8(mode);
    head.u8(edges as u8);
    head.u8(mem);
    head.u8(ffi::api().version as u8);
    head.u32(std::process::id());
    head
}

/// Plugin options parsed from `-plugin lib.so,k=v,...`.
struct Args {
    out: Option<String>,
    shm: Option<String>,
    ctl: Option<String>,
    ring: Option<String>,
    mode: u8,
    edges: bool,
    mem: bool,
    cache: Option<proftrust_cachesim::Geometry>,
    addrs: bool,
    /// `follow=NAME`: count the process tree (`follow.rs`).
    follow: Option<String>,
    /// `image=K`: this QEMU runs image K of a followed tree (an `execve`'s new image).
    image: u32,
    /// `parent=K`: the image an `image=` replaces.
    parent: u32,
}

fn on_off(k: &str, v: &str) -> Result<bool, String> {
    match v {
        "on" | "true" | "yes" => Ok(true),
        "off" | "false" | "no" => Ok(false),
        _ => Err(format!("{k}={v}: expected on or off")),
    }
}

fn parse_args(args: &[String]) -> Result<Args, String> {
    let mut a = Args {
        out: None,
        shm: None,
        ctl: None,
        ring: None,
        mode: MODE_COUNT,
        edges: true,
        mem: false,
        cache: None,
        addrs: false,
        follow: None,
        image: 0,
        parent: u32::MAX,
    };
    for arg in args {
        let (k, v) = arg
            .split_once('=')
            .ok_or_else(|| format!("argument {arg:?} is not key=value"))?;
        match k {
            "out" => a.out = Some(v.to_string()),
            "shm" => a.shm = Some(v.to_string()),
            "ctl" => a.ctl = Some(v.to_string()),
            "ring" => a.ring = Some(v.to_string()),
            "mode" => {
                a.mode = match v {
                    "count" => MODE_COUNT,
                    "trace" => MODE_TRACE,
                    "idle" => MODE_IDLE,
                    _ => return Err(format!("mode={v}: expected count, trace or idle")),
                }
            }
            "edges" => a.edges = on_off(k, v)?,
            "mem" => a.mem = on_off(k, v)?,
            "cache" => {
                a.cache = Some(proftrust_cachesim::Geometry::from_arg(v).ok_or_else(|| {
                    format!("cache={v}: expected line:l1_size:l1_ways:llc_size:llc_ways (positive integers)")
                })?)
            }
            "addrs" => a.addrs = on_off(k, v)?,
            "follow" => a.follow = Some(v.to_string()),
            "image" | "parent" => {
                let n = v
                    .parse()
                    .map_err(|_| format!("{k}={v}: expected an image number"))?;
                if k == "image" {
                    a.image = n;
                } else {
                    a.parent = n;
                }
            }
            _ => {
                return Err(format!(
                    "unknown argument {k:?} (known: out, shm, ctl, ring, mode, edges, mem, cache, addrs, follow, image, parent)"
                ))
            }
        }
    }
    Ok(a)
}

fn open_out(spec: &str) -> Result<File, String> {
    if let Some(fd) = spec.strip_prefix("fd:") {
        let fd: c_int = fd
            .parse()
            .map_err(|_| format!("out=fd:{fd}: not a file descriptor number"))?;
        // SAFETY: F_GETFD/F_SETFD on an integer fd have no memory-safety preconditions.
        let ok = unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            flags >= 0 && libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) == 0
        };
        if !ok {
            return Err(format!("out=fd:{fd}: descriptor is not open"));
        }
        // SAFETY: the descriptor is open (checked above) and handed to us by the runner for
        // our exclusive use; the File owns it from here on.
        Ok(unsafe { File::from_raw_fd(fd) })
    } else {
        File::create(spec).map_err(|e| format!("out={spec}: {e}"))
    }
}

/// Maps the counter file `fd:N` (sized by the analyzer) shared; returns (base, capacity in
/// u64s, the descriptor when `keep`: left open, close-on-exec, for the next image of a
/// followed tree).
fn map_shared(spec: &str, keep: bool) -> Result<(*mut u64, usize, c_int), String> {
    let fd = if keep {
        let fd: c_int = spec
            .strip_prefix("fd:")
            .and_then(|x| x.parse().ok())
            .ok_or_else(|| format!("shm={spec}: expected fd:N"))?;
        // SAFETY: fcntl F_DUPFD_CLOEXEC on an integer fd; a failure is checked.
        let d = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
        if d < 0 {
            return Err(format!("shm={spec}: descriptor is not open"));
        }
        d
    } else {
        -1
    };
    let (p, len) = map_fd("shm", spec, 8 * (wire::SHM_HEAD_WORDS + 1))?;
    Ok((p as *mut u64, len / 8, fd))
}

/// Maps the trace ring `fd:N` (made and sized by the analyzer, see [`wire`]).
fn map_ring(spec: &str) -> Result<ring::Ring, String> {
    let (p, len) = map_fd("ring", spec, wire::RING_DATA)?;
    // SAFETY: `map_fd` mapped `len` bytes at the page-aligned `p`, shared with the
    // analyzer and never unmapped.
    unsafe { ring::Ring::new(p, len, TRACE_BUF_WORDS) }
}

/// Maps the file `fd:N` of plugin argument `key` shared (at least `min` bytes) and closes
/// the descriptor; returns (base, length in bytes).
fn map_fd(key: &str, spec: &str, min: usize) -> Result<(*mut u8, usize), String> {
    let fd: c_int = spec
        .strip_prefix("fd:")
        .and_then(|x| x.parse().ok())
        .ok_or_else(|| format!("{key}={spec}: expected fd:N"))?;
    // SAFETY: fstat fills a plain struct; mmap of an fd we were given, checked for failure;
    // the mapping is never unmapped, so pointers into it stay valid.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(fd, &mut st) != 0 {
            return Err(format!("{key}=fd:{fd}: descriptor is not open"));
        }
        let len = st.st_size as usize;
        if len < min {
            return Err(format!(
                "{key}=fd:{fd}: file is too small ({len} bytes, at least {min})"
            ));
        }
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        );
        if p == libc::MAP_FAILED {
            return Err(format!(
                "{key}=fd:{fd}: mmap failed: {}",
                std::io::Error::last_os_error()
            ));
        }
        libc::close(fd);
        Ok((p as *mut u8, len))
    }
}

/// `mode=idle`'s translation hook: looks at nothing, instruments nothing. Its cost over
/// plain QEMU is what QEMU itself adds once any plugin hooks translation: QEMU 10's code
/// generator then stores every guest load's and store's value into the CPU state
/// (`plugin_mem_value_low`, for the memory-value plugin API) and keeps a copy of each load's
/// address, instrumented or not (`tcg/tcg-op-ldst.c`, `plugin_gen_mem_callbacks_i64`, under
/// `tcg_ctx->plugin_insn != NULL`, which `plugin_gen_insn_start` sets for every
/// instruction of a translation a plugin watches). `scripts/bench-exact.sh` prints it as
/// the floor under `truth`.
extern "C" fn on_translate_idle(_id: ffi::PluginId, _tb: *mut ffi::Tb) {}

/// Entry point called by QEMU when it loads the plugin.
///
/// # Safety
/// Called by QEMU with `argc` valid C strings in `argv`.
#[no_mangle]
pub unsafe extern "C" fn qemu_plugin_install(
    id: ffi::PluginId,
    _info: *const c_void,
    argc: c_int,
    argv: *const *const c_char,
) -> c_int {
    let mut args = Vec::new();
    for i in 0..argc.max(0) as usize {
        // SAFETY: QEMU passes `argc` valid NUL-terminated strings.
        let p = unsafe { *argv.add(i) };
        if !p.is_null() {
            // SAFETY: see above.
            args.push(unsafe { ffi::c_str(p) });
        }
    }
    let api = match ffi::init() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("proftrust-qemu-plugin: {e}");
            return -1;
        }
    };
    let a = match parse_args(&args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("proftrust-qemu-plugin: {e}");
            return -1;
        }
    };
    if a.mode == MODE_IDLE {
        // SAFETY: registering a callback with the id QEMU gave us, of the header's signature.
        unsafe { (api.register_vcpu_tb_trans_cb)(id, on_translate_idle) };
        return 0;
    }
    if a.follow.is_some() && a.mode != MODE_COUNT {
        eprintln!("proftrust-qemu-plugin: follow= needs mode=count");
        return -1;
    }
    let (shared, shared_cap, shm_fd) =
        match a.shm.as_deref().map(|s| map_shared(s, a.follow.is_some())) {
            None => (std::ptr::null_mut(), 0, -1),
            Some(Ok((p, cap, fd))) => {
                // Layout: the head page (run state, thread count, image counter), then the
                // inline counters, which only the started program's image uses (an exec'd
                // image counts in private memory).
                // SAFETY: `cap > SHM_HEAD_WORDS` u64s are mapped at `p` (map_shared refuses
                // less).
                unsafe {
                    RUN_SHARED.store(p.add(wire::SHM_RUN), Relaxed);
                    follow::IMAGES_SHARED.store(p.add(wire::SHM_IMAGES), Relaxed);
                    if a.image == 0 {
                        THREADS_SHARED.store(p.add(wire::SHM_THREADS), Relaxed);
                        (p.add(wire::SHM_HEAD_WORDS), cap - wire::SHM_HEAD_WORDS, fd)
                    } else {
                        (std::ptr::null_mut(), 0, fd)
                    }
                }
            }
            Some(Err(e)) => {
                eprintln!("proftrust-qemu-plugin: {e}");
                return -1;
            }
        };
    let ctl = match a.ctl.as_deref().map(open_out) {
        None => None,
        Some(Ok(f)) => Some(f),
        Some(Err(e)) => {
            eprintln!("proftrust-qemu-plugin: ctl: {e}");
            return -1;
        }
    };
    if let Some(name) = &a.follow {
        use std::os::fd::AsRawFd;
        let _ = follow::FOLLOW.set(follow::Follow {
            name: name.clone(),
            shm_fd,
            ctl_fd: ctl.as_ref().map_or(-1, |f| f.as_raw_fd()),
            edges: a.edges,
        });
        follow::IMAGE.store(a.image, Relaxed);
    }
    let out = match (&a.out, a.image) {
        (_, image) if image != 0 => follow::connect(),
        (Some(spec), _) => open_out(spec),
        (None, _) => Err("missing out=PATH or out=fd:N".to_string()),
    };
    let out = match out {
        Ok(f) => f,
        Err(e) => {
            eprintln!("proftrust-qemu-plugin: {e}");
            return -1;
        }
    };
    if a.mem && a.mode != MODE_TRACE {
        eprintln!("proftrust-qemu-plugin: mem=on needs mode=trace");
        return -1;
    }
    let ring = match a.ring.as_deref().map(map_ring) {
        None => None,
        Some(Ok(r)) => Some(r),
        Some(Err(e)) => {
            eprintln!("proftrust-qemu-plugin: {e}");
            return -1;
        }
    };
    MODE.store(a.mode, Relaxed);
    EDGES.store(a.edges, Relaxed);
    if a.cache.is_some() && !a.mem || a.addrs && a.cache.is_none() {
        eprintln!("proftrust-qemu-plugin: cache= needs mem=on, addrs=on needs cache=");
        return -1;
    }
    MEM.store(a.mem, Relaxed);
    if let Some(g) = &a.cache {
        // SAFETY: install time: no vCPU runs yet, nothing else touches the cell.
        unsafe { *SIM.caches.get() = Some(proftrust_cachesim::Caches::new(g)) };
        SIM_ON.store(true, Relaxed);
        SIM_ADDRS.store(a.addrs, Relaxed);
    }
    if let Some(v4) = &api.v4 {
        // SAFETY: allocating a scoreboard has no preconditions; it is never freed.
        let sb = unsafe { (v4.scoreboard_new)(std::mem::size_of::<VcpuState>()) };
        STATE_SB.store(sb, Relaxed);
    }
    let mut g = Global {
        shared,
        shared_cap,
        out,
        buf: Vec::with_capacity(OUT_FLUSH + 4096),
        failed: false,
        ring,
        dedup: HashMap::new(),
        nblocks: 0,
        counters: Vec::new(),
        modules: HashMap::new(),
        maps: Vec::new(),
        missed_pages: HashSet::new(),
        count_sbs: Vec::new(),
        expect: Vec::new(),
        vaddr_of: Vec::new(),
        check: Vec::new(),
        listed: HashSet::new(),
        pred_edges: HashSet::new(),
        joined: HashMap::new(),
        by_vaddr: HashMap::new(),
        elided: HashMap::new(),
    };
    let head = stream_header(
        a.mode,
        a.edges,
        match (a.mem, a.cache.is_some(), a.addrs) {
            (false, _, _) => 0,
            (true, false, _) => 1,
            (true, true, false) => 2,
            (true, true, true) => 3,
        },
    );
    g.put(&head);
    if a.follow.is_some() {
        let start = if a.image == 0 {
            wire::START_ROOT
        } else {
            wire::START_EXEC
        };
        g.put(&follow::process_record(a.image, a.parent, start, 0, 0));
    }
    // Written at once: a stream without a header then means QEMU never installed us.
    g.flush();
    *lock(&GLOBAL) = Some(g);
    if let Some(f) = ctl {
        spawn_control(f);
    }
    // SAFETY: registering callbacks with the id QEMU gave us; the callbacks match the
    // signatures of QEMU's header. pthread_atfork takes a plain function.
    unsafe {
        libc::pthread_atfork(
            Some(in_fork_parent),
            Some(in_fork_parent_after),
            Some(in_fork_child),
        );
        (api.register_vcpu_tb_trans_cb)(id, on_translate);
        (api.register_vcpu_init_cb)(id, on_vcpu_init);
        (api.register_vcpu_exit_cb)(id, on_vcpu_exit);
        (api.register_vcpu_syscall_cb)(id, on_syscall);
        (api.register_atexit_cb)(id, on_exit, std::ptr::null_mut());
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Meminfo words built as QEMU's `make_plugin_meminfo` does: `MemOpIdx` = `memop << 4 |
    /// mmu_idx`, `qemu_plugin_mem_rw` (1 R, 2 W, 3 RW) << 16; `MemOp` sizes MO_8..MO_128 =
    /// 0..4 in its low 3 bits, MO_SIGN = 8, MO_BSWAP = 16, MO_ALIGN = 1 << 5 (QEMU 10's
    /// `MO_ASHIFT`) above them.
    #[test]
    fn meminfo_words_decode_to_size_and_direction() {
        let word = |memop: u32, mmu: u32, rw: u32| (memop << 4 | mmu) | rw << 16;
        assert_eq!(meminfo_bits(word(0, 0, 1)), (0, false));
        assert_eq!(meminfo_bits(word(3, 1, 2)), (3, true));
        // A sign-extending, byte-swapped, aligned 4-byte load in mmu index 15.
        assert_eq!(meminfo_bits(word(2 | 8 | 16 | 1 << 5, 15, 1)), (2, false));
        // Atomic read-modify-write: a store.
        assert_eq!(meminfo_bits(word(4, 0, 3)), (4, true));
    }

    #[test]
    fn parses_plugin_args() {
        let a = parse_args(&["out=fd:5".into(), "mode=trace".into(), "edges=off".into()]).unwrap();
        assert_eq!(a.out.as_deref(), Some("fd:5"));
        assert_eq!(a.mode, MODE_TRACE);
        assert!(!a.edges);
        assert!(!a.mem);
        assert!(parse_args(&["mem=on".into()]).unwrap().mem);
        let r = parse_args(&["ring=fd:7".into()]).unwrap();
        assert_eq!(r.ring.as_deref(), Some("fd:7"));
        assert!(map_ring("7").is_err_and(|e| e.contains("expected fd:N")));
        assert!(parse_args(&["mem=maybe".into()]).is_err());
        assert_eq!(
            parse_args(&["cache=64:32768:8:8388608:16".into()])
                .unwrap()
                .cache,
            Some(proftrust_cachesim::Geometry::default())
        );
        assert!(parse_args(&["cache=64:32768:8".into()]).is_err());
        // Outcome word: store, served by the LLC, instruction 5.
        assert_eq!(wire::outcome_word(5, true, 1), 0xD000_0005);
        assert_eq!(wire::outcome_word(300, false, 2), 0xA000_012C);
        // Short form: store, 4 bytes, instruction 3, address 0x1234_5678_9abc.
        assert_eq!(
            wire::mem_words(3, 2, true, 0x1234_5678_9abc),
            ([0xD003_1234, 0x5678_9abc, 0], 2)
        );
        // Long forms: an address at or above 2^48, an instruction index of 1024 or more.
        assert_eq!(
            wire::mem_words(5, 3, false, 0xffff_ffff_ff60_0000),
            ([0x9C00_0005, 0xff60_0000, 0xffff_ffff], 3)
        );
        assert_eq!(
            wire::mem_words(1024, 0, false, 0x10),
            ([0x8400_0400, 0x10, 0], 3)
        );
        assert!(parse_args(&["mode=fast".into()]).is_err());
        assert_eq!(parse_args(&["mode=idle".into()]).unwrap().mode, MODE_IDLE);
        assert!(parse_args(&["bogus".into()]).is_err());
        assert!(parse_args(&["x=1".into()]).is_err());
    }
}
