//! Decoding the plugin's stream (version 8; layout in `docs/exact.md` and the plugin's
//! `wire` module) and turning it into module-relative blocks, traces and counts.

use crate::ExactError;
use proftrust_binary::LoadHeaders;
use proftrust_model::{
    CallCount, EdgeCount, ExactProfile, InstrCount, Location, Module, ModuleIdx, ModuleTable, Svma,
    TraceEnd,
};
use std::collections::HashMap;
use std::io::Read;

const MAGIC: &[u8; 4] = b"PTQP";
const VERSION: u32 = 9;
const HEADER_LEN: usize = 16;
const TAG_MODULE: u8 = 1;
const TAG_BLOCK: u8 = 2;
const TAG_TRACE: u8 = 3;
const TAG_SNAPSHOT: u8 = 4;
const TAG_END: u8 = 5;
const TAG_TRACE_MEM: u8 = 6;
const TAG_RING: u8 = 7;
const TAG_PROCESS: u8 = 8;
const TAG_EXEC: u8 = 9;
/// Words of the shared counter file before the counters (the plugin's
/// `wire::SHM_HEAD_WORDS`): the run state (word 0), the started program's thread count
/// (word 1), the last image id given out (word 2).
pub const SHM_HEAD_WORDS: u64 = 512;
/// TRACEMEM word flag: a data access (else a block id).
pub const MEM_FLAG: u32 = 1 << 31;
/// TRACEMEM access word: a store.
pub const MEM_STORE: u32 = 1 << 30;
/// TRACEMEM access word: the long form (the instruction index in bits 0..16, the address in
/// the next two words; else bits 16..26 hold the index, bits 0..16 the address's bits
/// 32..48 and the next word its low half).
pub const MEM_LONG: u32 = 1 << 26;
/// TRACEMEM outcome word (header `mem` = 2: the plugin simulated the caches): shift of the
/// 2-bit level where the access was served (0 L1D, 1 LLC, 2 memory); the instruction's index
/// is in bits 0..16, [`MEM_STORE`] marks a store, and no address words follow.
pub const MEM_LEVEL_POS: u32 = 28;
/// Most words a trace chunk may hold (the plugin flushes far earlier).
const MAX_CHUNK_WORDS: usize = 1 << 24;
const NO_MODULE: u32 = u32::MAX;

/// Why the plugin wrote a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotReason {
    /// At exit (normal, or a fatal signal through QEMU's exit path).
    Exit,
    /// Before `execve` (the new image is not followed).
    Exec,
    /// Before the guest sent itself SIGKILL.
    Kill,
    /// Asked by the runner at the timeout.
    Stop,
}

/// Cumulative counts written by the plugin.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Why it was written.
    pub reason: SnapshotReason,
    /// One more than the highest vcpu index that ran a block (threads alive at once, at
    /// most; 0 without a block callback).
    pub vcpus: u32,
    /// Guest threads started, the main thread included (QEMU's vcpu init hook: each guest
    /// thread is a vcpu in user mode).
    pub threads: u32,
    /// Inline counter per block id.
    pub inline: Vec<u64>,
    /// Per-vcpu callback count per block id (empty when edges are off).
    pub callback: Vec<u64>,
    /// (from block, to block, count).
    pub edges: Vec<(u32, u32, u64)>,
    /// Plugin API >= 4: block executions whose edge the plugin could neither see nor derive
    /// (0 in a consistent run).
    pub underived: u64,
    /// `bpred=on`: (block, mispredictions of its last instruction), blocks with none left
    /// out.
    pub misses: Vec<(u32, u64)>,
}

/// One record of the stream.
#[derive(Debug)]
pub enum Record {
    /// A module (file mapping).
    Module {
        /// Wire id.
        id: u32,
        /// Host address of file offset 0.
        base: u64,
        /// File path.
        path: String,
    },
    /// A block definition.
    Block {
        /// Wire id.
        id: u32,
        /// Wire module id or `u32::MAX`.
        module: u32,
        /// Guest address of the first instruction.
        vaddr: u64,
        /// End kind code.
        end: u8,
        /// File offsets (or guest addresses without a module).
        addrs: Vec<u64>,
    },
    /// Executed block ids of one thread.
    Trace {
        /// Thread id.
        tid: u32,
        /// Block ids in order.
        ids: Vec<u32>,
    },
    /// Executed block ids and data accesses of one thread (memory tracing): each word is a
    /// block id, or an access word (bit 31 set: [`MEM_FLAG`], [`MEM_STORE`], log2 size in
    /// bits 27..30) followed by the address's low word (short form: instruction index in
    /// bits 16..26, address bits 32..48 in bits 0..16) or by its low and high words
    /// ([`MEM_LONG`]: instruction index in bits 0..16). When the plugin simulates the
    /// caches ([`Decoder::mem_form`] 2) an access is one word: [`MEM_FLAG`], [`MEM_STORE`],
    /// the level in bits 28..30 ([`MEM_LEVEL_POS`]), the instruction index in bits 0..16;
    /// with `mem_form` 3 that word follows the address words.
    TraceMem {
        /// Thread id.
        tid: u32,
        /// Words in execution order.
        words: Vec<u32>,
    },
    /// A trace chunk in the trace ring (`ring=fd:N`; the plugin's `wire` module and
    /// `docs/exact.md` give the ring's layout): the `n` words at position `pos`, a
    /// [`Record::Trace`] chunk when the stream's header says `mem` is off, else a
    /// [`Record::TraceMem`] one. The reader decodes them in place and hands the space back.
    Ring {
        /// Thread id.
        tid: u32,
        /// Position of the first word in the ring (wrapping word count).
        pos: u32,
        /// Words.
        n: u32,
    },
    /// Counts.
    Snapshot(Snapshot),
    /// Clean end.
    End,
    /// Which process image the stream is about (following a process tree).
    Process(ProcessRecord),
    /// An `execve` of the image: the new image's id (`None` when the plugin did not
    /// follow it, with `why`), its name, ELF and arguments.
    Exec {
        /// The new image's id.
        image: Option<u32>,
        /// Its process name.
        comm: String,
        /// The ELF it runs.
        path: String,
        /// Why it is not followed (empty when it is).
        why: String,
        /// Its arguments.
        argv: Vec<String>,
    },
}

/// A PROCESS record (protocol in `docs/exact.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessRecord {
    /// The image's id (0: the started program).
    pub image: u32,
    /// The image it came from.
    pub parent: Option<u32>,
    /// How it began.
    pub start: proftrust_model::ImageStart,
    /// Its process id.
    pub pid: u32,
    /// A forked child: the block ids it inherits from its parent (those below).
    pub blocks: u32,
    /// A forked child: the module ids it inherits.
    pub modules: u32,
}

/// Reads records from the plugin's stream.
pub struct Decoder<R> {
    r: R,
    off: u64,
    /// Header fields: mode (0 count, 1 trace).
    pub mode: u8,
    /// Header: edges enabled.
    pub edges: bool,
    /// Header: whether and how data accesses are traced: 0 not, 1 addresses, 2 cache
    /// outcomes (one word each, [`MEM_LEVEL_POS`], simulated by the plugin), 3 addresses
    /// then the outcome.
    pub mem_form: u8,
    /// Header: the QEMU plugin API version the plugin runs with (1: shared inline
    /// counters and a callback per block for edges; 4: per-vCPU counters, edges derived).
    pub api: u8,
    /// Header: the process id of the QEMU that wrote the stream.
    pub pid: u32,
    /// A trace chunk's buffer handed back ([`Decoder::recycle`]) for the next chunk: a
    /// fresh 64 KiB vector per chunk made the kernel fault in and zero its pages each time.
    spare: Vec<u32>,
}

impl<R: Read> Decoder<R> {
    /// Hands back the words of a [`Record::Trace`] / [`Record::TraceMem`] once used: the
    /// next trace chunk is read into them.
    pub fn recycle(&mut self, words: Vec<u32>) {
        if words.capacity() > self.spare.capacity() {
            self.spare = words;
        }
    }

    /// Reads the header. `Ok(None)` when the stream is empty (the plugin never started).
    pub fn new(mut r: R) -> Result<Option<Decoder<R>>, ExactError> {
        let mut head = [0u8; HEADER_LEN];
        let mut got = 0;
        while got < head.len() {
            match r.read(&mut head[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ExactError::io("reading the plugin stream", e)),
            }
        }
        if got == 0 {
            return Ok(None);
        }
        if got < head.len() || &head[..4] != MAGIC {
            return Err(ExactError::Protocol {
                offset: 0,
                what: "not a proftrust plugin stream (bad magic or short header)".into(),
            });
        }
        let version = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        if version != VERSION {
            return Err(ExactError::Protocol {
                offset: 4,
                what: format!(
                    "plugin protocol version {version}, this proftrust reads {VERSION}: rebuild the plugin and proftrust from the same sources"
                ),
            });
        }
        Ok(Some(Decoder {
            r,
            off: HEADER_LEN as u64,
            mode: head[8],
            edges: head[9] != 0,
            mem_form: head[10],
            api: head[11],
            pid: u32::from_le_bytes([head[12], head[13], head[14], head[15]]),
            spare: Vec::new(),
        }))
    }

    fn fill(&mut self, buf: &mut [u8], what: &str) -> Result<(), ExactError> {
        self.r.read_exact(buf).map_err(|e| ExactError::Protocol {
            offset: self.off,
            what: format!("{what} cut short ({e})"),
        })?;
        self.off += buf.len() as u64;
        Ok(())
    }
    fn u8(&mut self, w: &str) -> Result<u8, ExactError> {
        let mut b = [0u8; 1];
        self.fill(&mut b, w)?;
        Ok(b[0])
    }
    fn u16(&mut self, w: &str) -> Result<u16, ExactError> {
        let mut b = [0u8; 2];
        self.fill(&mut b, w)?;
        Ok(u16::from_le_bytes(b))
    }
    fn u32(&mut self, w: &str) -> Result<u32, ExactError> {
        let mut b = [0u8; 4];
        self.fill(&mut b, w)?;
        Ok(u32::from_le_bytes(b))
    }
    fn u64(&mut self, w: &str) -> Result<u64, ExactError> {
        let mut b = [0u8; 8];
        self.fill(&mut b, w)?;
        Ok(u64::from_le_bytes(b))
    }
    fn u64s(&mut self, n: usize, w: &str) -> Result<Vec<u64>, ExactError> {
        let mut raw = vec![0u8; n * 8];
        self.fill(&mut raw, w)?;
        Ok(raw
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            .collect())
    }

    /// The next record; `Ok(None)` at the end of the stream (a stream may end without
    /// [`Record::End`] when the process exec'd or was killed).
    pub fn next_record(&mut self) -> Result<Option<Record>, ExactError> {
        let mut tag = [0u8; 1];
        loop {
            match self.r.read(&mut tag) {
                Ok(0) => return Ok(None),
                Ok(_) => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ExactError::io("reading the plugin stream", e)),
            }
        }
        let at = self.off;
        self.off += 1;
        let rec = match tag[0] {
            TAG_MODULE => self.module_record()?,
            TAG_BLOCK => self.block_record()?,
            TAG_TRACE | TAG_TRACE_MEM => self.trace_record(tag[0] == TAG_TRACE, at)?,
            TAG_RING => self.ring_record()?,
            TAG_SNAPSHOT => Record::Snapshot(self.snapshot_record()?),
            TAG_END => Record::End,
            TAG_PROCESS => Record::Process(self.process_record()?),
            TAG_EXEC => self.exec_record(at)?,
            t => {
                return Err(ExactError::Protocol {
                    offset: at,
                    what: format!("unknown record tag {t}"),
                })
            }
        };
        Ok(Some(rec))
    }

    /// The body of a [`Record::Module`].
    fn module_record(&mut self) -> Result<Record, ExactError> {
        let w = "module record";
        let id = self.u32(w)?;
        let base = self.u64(w)?;
        let len = self.u16(w)? as usize;
        let mut p = vec![0u8; len];
        self.fill(&mut p, w)?;
        Ok(Record::Module {
            id,
            base,
            path: String::from_utf8_lossy(&p).into_owned(),
        })
    }

    /// The body of a [`Record::Block`].
    fn block_record(&mut self) -> Result<Record, ExactError> {
        let w = "block record";
        let id = self.u32(w)?;
        let module = self.u32(w)?;
        let vaddr = self.u64(w)?;
        let end = self.u8(w)?;
        let n = self.u16(w)? as usize;
        let addrs = self.u64s(n, w)?;
        Ok(Record::Block {
            id,
            module,
            vaddr,
            end,
            addrs,
        })
    }

    /// The body of a [`Record::Trace`] (`ids`) or [`Record::TraceMem`], read into the
    /// recycled words; `at` is the record's offset.
    fn trace_record(&mut self, ids: bool, at: u64) -> Result<Record, ExactError> {
        let w = "trace record";
        let tid = self.u32(w)?;
        let n = self.u32(w)? as usize;
        if n > MAX_CHUNK_WORDS {
            return Err(ExactError::Protocol {
                offset: at,
                what: format!("trace chunk of {n} words is implausible"),
            });
        }
        let mut words = std::mem::take(&mut self.spare);
        words.clear();
        words.resize(n, 0);
        self.fill(crate::sys::u32_bytes_mut(&mut words), w)?;
        if cfg!(target_endian = "big") {
            for x in &mut words {
                *x = u32::from_le(*x);
            }
        }
        Ok(if ids {
            Record::Trace { tid, ids: words }
        } else {
            Record::TraceMem { tid, words }
        })
    }

    /// The body of a [`Record::Ring`].
    fn ring_record(&mut self) -> Result<Record, ExactError> {
        let w = "ring record";
        let tid = self.u32(w)?;
        let n = self.u32(w)?;
        let pos = self.u32(w)?;
        Ok(Record::Ring { tid, pos, n })
    }

    /// The body of a [`Record::Snapshot`].
    fn snapshot_record(&mut self) -> Result<Snapshot, ExactError> {
        let w = "snapshot record";
        let reason = match self.u8(w)? {
            0 => SnapshotReason::Exit,
            1 => SnapshotReason::Exec,
            2 => SnapshotReason::Kill,
            _ => SnapshotReason::Stop,
        };
        let vcpus = self.u32(w)?;
        let threads = self.u32(w)?;
        let n = self.u32(w)? as usize;
        let inline = self.u64s(n, w)?;
        let m = self.u32(w)? as usize;
        let callback = self.u64s(m, w)?;
        let e = self.u32(w)? as usize;
        let mut edges = Vec::with_capacity(e.min(1 << 20));
        for _ in 0..e {
            let from = self.u32(w)?;
            let to = self.u32(w)?;
            let c = self.u64(w)?;
            edges.push((from, to, c));
        }
        let underived = self.u64(w)?;
        let b = self.u32(w)? as usize;
        let mut misses = Vec::with_capacity(b.min(1 << 20));
        for _ in 0..b {
            let id = self.u32(w)?;
            misses.push((id, self.u64(w)?));
        }
        Ok(Snapshot {
            reason,
            vcpus,
            threads,
            inline,
            callback,
            edges,
            underived,
            misses,
        })
    }

    /// The body of a [`Record::Process`].
    fn process_record(&mut self) -> Result<ProcessRecord, ExactError> {
        let w = "process record";
        let image = self.u32(w)?;
        let parent = self.u32(w)?;
        let start = match self.u8(w)? {
            0 => proftrust_model::ImageStart::Root,
            1 => proftrust_model::ImageStart::Fork,
            _ => proftrust_model::ImageStart::Exec,
        };
        Ok(ProcessRecord {
            image,
            parent: (parent != u32::MAX).then_some(parent),
            start,
            pid: self.u32(w)?,
            blocks: self.u32(w)?,
            modules: self.u32(w)?,
        })
    }

    /// The body of a [`Record::Exec`]; `at` is the record's offset.
    fn exec_record(&mut self, at: u64) -> Result<Record, ExactError> {
        let w = "exec record";
        let image = self.u32(w)?;
        let n = self.u16(w)? as usize;
        let mut strings = Vec::with_capacity(n);
        for _ in 0..n {
            let len = self.u32(w)? as usize;
            if len > 1 << 20 {
                return Err(ExactError::Protocol {
                    offset: at,
                    what: format!("exec record string of {len} bytes is implausible"),
                });
            }
            let mut b = vec![0u8; len];
            self.fill(&mut b, w)?;
            strings.push(String::from_utf8_lossy(&b).into_owned());
        }
        let mut it = strings.into_iter();
        Ok(Record::Exec {
            image: (image != u32::MAX).then_some(image),
            comm: it.next().unwrap_or_default(),
            path: it.next().unwrap_or_default(),
            why: it.next().unwrap_or_default(),
            argv: it.collect(),
        })
    }
}

/// A defined block, module-relative.
#[derive(Debug, Clone)]
pub struct BlockDef {
    /// Module, if the block lies in a file mapping.
    pub module: Option<ModuleIdx>,
    /// Instruction addresses (SVMAs, or raw guest addresses without a module).
    pub insns: Vec<Svma>,
    /// How the block ends.
    pub end: TraceEnd,
    /// Dense key of this definition ([`TraceBlock::key`](proftrust_model::TraceBlock::key)):
    /// definitions are numbered 0, 1, 2, ... in stream order, so a wire id defined again
    /// gets a new key and a key always names one content.
    pub key: u32,
}

/// Turns wire modules and blocks into module-relative ones.
#[derive(Debug, Default, Clone)]
pub struct Resolver {
    /// Modules seen so far.
    pub modules: ModuleTable,
    wire_modules: HashMap<u32, (ModuleIdx, Option<LoadHeaders>)>,
    elf_cache: HashMap<String, Option<LoadHeaders>>,
    /// Blocks by wire id.
    pub blocks: Vec<Option<BlockDef>>,
    /// Block definitions applied so far (the next [`BlockDef::key`]).
    defined: u32,
}

impl Resolver {
    /// Applies a module record; returns the module index when the module is new to the table.
    pub fn module(&mut self, id: u32, base: u64, path: &str) -> Option<ModuleIdx> {
        let info = self
            .elf_cache
            .entry(path.to_string())
            .or_insert_with(|| LoadHeaders::read(std::path::Path::new(path)))
            .clone();
        let before = self.modules.len();
        let m = Module {
            path: path.to_string(),
            build_id: info.as_ref().and_then(|i| i.build_id.clone()),
            load_bias: info.as_ref().map_or(base, |i| i.bias_from_base(base)),
        };
        let idx = self.modules.intern(m);
        self.wire_modules.insert(id, (idx, info));
        (self.modules.len() > before).then_some(idx)
    }

    /// Applies a block record.
    pub fn block(
        &mut self,
        id: u32,
        module: u32,
        end: u8,
        addrs: &[u64],
    ) -> Result<(), ExactError> {
        let (midx, insns) = if module == NO_MODULE {
            (None, addrs.iter().map(|&a| Svma(a)).collect())
        } else {
            let (idx, info) =
                self.wire_modules
                    .get(&module)
                    .ok_or_else(|| ExactError::Protocol {
                        offset: 0,
                        what: format!("block {id} names undefined module {module}"),
                    })?;
            let insns = addrs
                .iter()
                .map(|&fo| {
                    info.as_ref()
                        .and_then(|i| i.segments.svma_of_offset(fo))
                        .unwrap_or(Svma(fo))
                })
                .collect();
            (Some(*idx), insns)
        };
        let end = match end {
            1 => TraceEnd::Call,
            2 => TraceEnd::Return,
            3 => TraceEnd::Syscall,
            _ => TraceEnd::Other,
        };
        let i = id as usize;
        if self.blocks.len() <= i {
            self.blocks.resize(i + 1, None);
        }
        self.blocks[i] = Some(BlockDef {
            module: midx,
            insns,
            end,
            key: self.defined,
        });
        // Saturates: the 2^32-th definition and later share `u32::MAX`, which the trace
        // hands over without a key.
        self.defined = self.defined.saturating_add(1);
        Ok(())
    }

    fn loc(b: &BlockDef, svma: Svma) -> Location {
        Location {
            module: b.module,
            svma,
        }
    }

    /// Builds the exact profile from block counts and edges. `counts[id]` is the number of
    /// executions of block `id`; every instruction of the block gets that count.
    pub fn profile(&self, counts: &[u64], edges: &[(u32, u32, u64)]) -> ExactProfile {
        let mut instr: HashMap<Location, u64> = HashMap::new();
        let mut returns = 0;
        for (id, &c) in counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let Some(Some(b)) = self.blocks.get(id) else {
                continue;
            };
            for &s in &b.insns {
                *instr.entry(Self::loc(b, s)).or_insert(0) += c;
            }
            if b.end == TraceEnd::Return {
                returns += c;
            }
        }
        let mut edge_map: HashMap<(Location, Location), u64> = HashMap::new();
        let mut call_map: HashMap<(Location, Location), u64> = HashMap::new();
        for &(from, to, c) in edges {
            let (Some(Some(a)), Some(Some(b))) =
                (self.blocks.get(from as usize), self.blocks.get(to as usize))
            else {
                continue;
            };
            let (Some(&last), Some(&first)) = (a.insns.last(), b.insns.first()) else {
                continue;
            };
            let key = (Self::loc(a, last), Self::loc(b, first));
            *edge_map.entry(key).or_insert(0) += c;
            if a.end == TraceEnd::Call {
                *call_map.entry(key).or_insert(0) += c;
            }
        }
        let mut p = ExactProfile {
            modules: self.modules.clone(),
            instructions: instr
                .into_iter()
                .map(|(loc, count)| InstrCount { loc, count })
                .collect(),
            edges: edge_map
                .into_iter()
                .map(|((from, to), count)| EdgeCount { from, to, count })
                .collect(),
            calls: call_map
                .into_iter()
                .map(|((site, target), count)| CallCount {
                    site,
                    target,
                    count,
                })
                .collect(),
            returns,
            ..Default::default()
        };
        p.edges.sort_by_key(|e| (e.from, e.to));
        p.calls.sort_by_key(|c| (c.site, c.target));
        p.normalize();
        p
    }

    /// Adds a snapshot's mispredictions (`bpred=on`: per block id, of its last
    /// instruction) to `p` (built by [`Resolver::profile`]) as the column
    /// [`proftrust_model::BRANCH_MISSES_COLUMN`]; nothing when `misses` is empty.
    pub fn add_branch_misses(&self, p: &mut ExactProfile, misses: &[(u32, u64)]) {
        if misses.is_empty() {
            return;
        }
        let k = Self::add_branch_misses_column(p);
        for &(id, n) in misses {
            let Some(Some(b)) = self.blocks.get(id as usize) else {
                continue;
            };
            let Some(&last) = b.insns.last() else {
                continue;
            };
            let loc = Self::loc(b, last);
            if let Ok(i) = p.instructions.binary_search_by_key(&loc, |ic| ic.loc) {
                p.extra_costs[i][k] += n;
            }
        }
    }

    /// Makes sure `p` has the [`proftrust_model::BRANCH_MISSES_COLUMN`] column (zeros
    /// when new; every row as wide as the names); returns its index.
    pub fn add_branch_misses_column(p: &mut ExactProfile) -> usize {
        let col = proftrust_model::BRANCH_MISSES_COLUMN;
        let k = match p.extra_cost_names.iter().position(|n| n == col) {
            Some(k) => k,
            None => {
                p.extra_cost_names.push(col.to_string());
                p.extra_cost_names.len() - 1
            }
        };
        let width = p.extra_cost_names.len();
        p.extra_costs.resize(p.instructions.len(), Vec::new());
        for row in &mut p.extra_costs {
            row.resize(width, 0);
        }
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream() -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(MAGIC);
        v.extend_from_slice(&VERSION.to_le_bytes());
        v.extend_from_slice(&[0, 1, 0, 1]);
        v.extend_from_slice(&42u32.to_le_bytes());
        // Two unmapped blocks: 0 = [0x10, 0x12] ending in a call, 1 = [0x20] ending in ret.
        for (id, end, addrs) in [(0u32, 1u8, vec![0x10u64, 0x12]), (1, 2, vec![0x20])] {
            v.push(TAG_BLOCK);
            v.extend_from_slice(&id.to_le_bytes());
            v.extend_from_slice(&NO_MODULE.to_le_bytes());
            v.extend_from_slice(&addrs[0].to_le_bytes());
            v.push(end);
            v.extend_from_slice(&(addrs.len() as u16).to_le_bytes());
            for a in addrs {
                v.extend_from_slice(&a.to_le_bytes());
            }
        }
        v.push(TAG_SNAPSHOT);
        v.push(0);
        v.extend_from_slice(&1u32.to_le_bytes());
        v.extend_from_slice(&1u32.to_le_bytes());
        v.extend_from_slice(&2u32.to_le_bytes());
        v.extend_from_slice(&3u64.to_le_bytes());
        v.extend_from_slice(&3u64.to_le_bytes());
        v.extend_from_slice(&0u32.to_le_bytes());
        v.extend_from_slice(&1u32.to_le_bytes());
        v.extend_from_slice(&0u32.to_le_bytes());
        v.extend_from_slice(&1u32.to_le_bytes());
        v.extend_from_slice(&3u64.to_le_bytes());
        v.extend_from_slice(&0u64.to_le_bytes());
        // One block with mispredictions: block 0, 2 of them.
        v.extend_from_slice(&1u32.to_le_bytes());
        v.extend_from_slice(&0u32.to_le_bytes());
        v.extend_from_slice(&2u64.to_le_bytes());
        v.push(TAG_END);
        v
    }

    #[test]
    fn decodes_a_hand_made_stream() {
        let bytes = stream();
        let mut d = Decoder::new(&bytes[..]).unwrap().unwrap();
        assert!(d.edges);
        let mut r = Resolver::default();
        let mut snap = None;
        let mut ended = false;
        while let Some(rec) = d.next_record().unwrap() {
            match rec {
                Record::Block {
                    id,
                    module,
                    end,
                    addrs,
                    ..
                } => r.block(id, module, end, &addrs).unwrap(),
                Record::Snapshot(s) => snap = Some(s),
                Record::End => ended = true,
                _ => {}
            }
        }
        assert!(ended);
        let s = snap.unwrap();
        let mut p = r.profile(&s.inline, &s.edges);
        assert_eq!(s.misses, vec![(0, 2)]);
        r.add_branch_misses(&mut p, &s.misses);
        // The call at 0x12 (block 0's last instruction) carries them, nothing else.
        let k = p
            .extra_cost_names
            .iter()
            .position(|n| n == proftrust_model::BRANCH_MISSES_COLUMN)
            .unwrap();
        let misses: Vec<(u64, u64)> = p
            .instructions
            .iter()
            .zip(&p.extra_costs)
            .map(|(i, c)| (i.loc.svma.0, c[k]))
            .collect();
        assert_eq!(misses, vec![(0x10, 0), (0x12, 2), (0x20, 0)]);
        assert_eq!(p.total_instructions, 9);
        assert_eq!(p.count_at(Location::unmapped(0x12)), 3);
        assert_eq!(p.returns, 3);
        assert_eq!(p.calls.len(), 1);
        assert_eq!(p.calls[0].site, Location::unmapped(0x12));
        assert_eq!(p.calls[0].target, Location::unmapped(0x20));
        assert_eq!(p.calls[0].count, 3);
    }

    #[test]
    fn truncated_and_foreign_streams_are_errors() {
        let bytes = stream();
        assert!(Decoder::new(&b""[..]).unwrap().is_none());
        assert!(Decoder::new(&b"PTQX\x04\0\0\0\0\0\0\0\0\0\0\0"[..]).is_err());
        // An older version is refused with a rebuild hint.
        let e = Decoder::new(&b"PTQP\x03\0\0\0\0\0\0\0\0\0\0\0"[..])
            .err()
            .unwrap();
        assert!(e.to_string().contains("rebuild"), "{e}");
        let cut = &bytes[..bytes.len() - 20];
        let mut d = Decoder::new(cut).unwrap().unwrap();
        let mut err = false;
        loop {
            match d.next_record() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(ExactError::Protocol { .. }) => {
                    err = true;
                    break;
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert!(err);
    }
}
