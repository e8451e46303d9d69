//! proftrust's own files: the sample file (`PTSAMP01`) and the exact file (`PTEXACT1`).
//!
//! Both share one framing, all integers little-endian:
//!
//! ```text
//! magic        8 bytes   "PTSAMP01" or "PTEXACT1" (the last two bytes are the version)
//! header_len   u64       length of the JSON header
//! header       JSON      UTF-8; modules, events, counts of the records that follow, ...
//! records      binary    fixed-layout records, counts given by the header
//! ```
//!
//! A location is 12 bytes: `module: u32` (`0xffff_ffff` = unmapped) then `svma: u64`.
//!
//! **Sample records** (`PTSAMP01`, `header.sample_count` of them):
//!
//! ```text
//! event u16 | pid u32 | tid u32 | time u64 | cpu u32 | period u64 | ip loc(12)
//! | n_callchain u32 | n_branches u32              (50 bytes)
//! then n_callchain × loc(12)
//! then n_branches × (from loc(12) | to loc(12) | flags u8 | cycles u32)   (29 bytes)
//!      flags bit 0 = mispredicted, bit 1 = prediction known
//! ```
//!
//! **Exact records** (`PTEXACT1`): `header.instruction_count` × (loc(12) | count u64 |
//! `extra_cost_names.len()` × u64), then `header.edge_count` × (from loc | to loc | count u64),
//! then `header.call_count` × (site loc | target loc | count u64). A profile of several
//! process images (`header.processes`) is written as `PTEXACT2`: the same, then each
//! process's own instruction counts, `header.process_counts[i]` × (loc(12) | count u64) for
//! process `i` in order. A one-process profile is still `PTEXACT1`.
//!
//! The file must end right after the last record; anything else is reported as corruption.
//! A file whose magic has a known prefix but another version gives
//! [`FormatError::UnsupportedVersion`].
//!
//! Keys added to a header within a version are optional (`health` of the sample header:
//! throttling and enabled/running times, absent in older files and then read as unknown), so
//! older files still read and older readers skip them; a change to the records' layout needs
//! a new version.

use crate::error::FormatError;
use proftrust_model::{
    Branch, CallCount, EdgeCount, EventDesc, ExactProcess, ExactProfile, InstrCount, Location,
    ModuleIdx, ModuleTable, RecordingHealth, RunOutcome, Sample, SampleSet, Svma, ThreadName,
    ThreadStart,
};
use serde::{Deserialize, Serialize};
use std::io::Write;

/// Magic and version of the sample file.
pub const SAMPLES_MAGIC: &[u8; 8] = b"PTSAMP01";
/// Magic and version of the exact file.
pub const EXACT_MAGIC: &[u8; 8] = b"PTEXACT1";
/// Magic and version of the exact file of several process images with their own counts.
pub const EXACT2_MAGIC: &[u8; 8] = b"PTEXACT2";

const SAMPLES_WHAT: &str = "proftrust sample file";
const EXACT_WHAT: &str = "proftrust exact file";
const NO_MODULE: u32 = u32::MAX;
const LOC_BYTES: usize = 12;
const SAMPLE_FIXED_BYTES: usize = 50;
const BRANCH_BYTES: usize = 29;
/// Bytes gathered before each `write_all` on the caller's writer.
const CHUNK: usize = 1 << 16;

#[derive(Serialize, Deserialize)]
struct SamplesHeader {
    modules: ModuleTable,
    events: Vec<EventDesc>,
    lost: u64,
    command: Vec<String>,
    outcome: Option<RunOutcome>,
    /// Added within version 01: files written before it have no `health` key and read as
    /// "the file does not say" (the default); readers that predate it ignore the key.
    #[serde(default)]
    health: RecordingHealth,
    /// Threads' names over time (added within version 01 like `health`: older files read
    /// as "no names", older readers ignore the key).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    threads: Vec<ThreadName>,
    /// New processes and threads (added within version 01 like `threads`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    forks: Vec<ThreadStart>,
    /// Kernel functions copied from `/proc/kallsyms` at record time (added within version
    /// 01 like `threads`: older files read with none, older readers ignore the key).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    kernel_symbols: Vec<proftrust_model::KernelSymbol>,
    sample_count: u64,
}

#[derive(Serialize, Deserialize)]
struct ExactHeader {
    modules: ModuleTable,
    returns: u64,
    total_instructions: u64,
    extra_cost_names: Vec<String>,
    backend: String,
    backend_detail: String,
    command: Vec<String>,
    outcome: Option<RunOutcome>,
    instruction_count: u64,
    edge_count: u64,
    call_count: u64,
    /// The process images (added within version 1: older files have none; their own
    /// counts, when there are several, follow the calls in a `PTEXACT2` file).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    processes: Vec<ExactProcess>,
    /// `PTEXACT2`: records of each process's own instruction counts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    process_counts: Vec<u64>,
}

/// Buffered little-endian record writer over any `Write`.
struct Out<W: Write> {
    w: W,
    buf: Vec<u8>,
    what: &'static str,
}

impl<W: Write> Out<W> {
    fn new(w: W, what: &'static str) -> Self {
        Out {
            w,
            buf: Vec::with_capacity(CHUNK + 1024),
            what,
        }
    }
    fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn loc(&mut self, l: Location) {
        self.u32(l.module.map_or(NO_MODULE, |m| m.0));
        self.u64(l.svma.0);
    }
    fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    /// Flushes the gathered bytes when the chunk is full.
    fn maybe_flush(&mut self) -> Result<(), FormatError> {
        if self.buf.len() >= CHUNK {
            self.flush()?;
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<(), FormatError> {
        let what = self.what;
        self.w
            .write_all(&self.buf)
            .map_err(|err| FormatError::Io { what, err })?;
        self.buf.clear();
        Ok(())
    }
    fn finish(mut self) -> Result<(), FormatError> {
        self.flush()?;
        let what = self.what;
        self.w.flush().map_err(|err| FormatError::Io { what, err })
    }
}

/// Bounds-checked little-endian reader over a byte slice.
struct In<'a> {
    b: &'a [u8],
    pos: usize,
    what: &'static str,
    modules: usize,
}

impl<'a> In<'a> {
    fn take(&mut self, n: usize, expected: &str) -> Result<&'a [u8], FormatError> {
        match self.pos.checked_add(n) {
            Some(end) if end <= self.b.len() => {
                let s = &self.b[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            _ => Err(FormatError::Truncated {
                what: self.what,
                offset: self.b.len() as u64,
                expected: expected.to_string(),
            }),
        }
    }
    fn arr<const N: usize>(&mut self, expected: &str) -> Result<[u8; N], FormatError> {
        let s = self.take(N, expected)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    fn u8(&mut self, e: &str) -> Result<u8, FormatError> {
        Ok(self.arr::<1>(e)?[0])
    }
    fn u16(&mut self, e: &str) -> Result<u16, FormatError> {
        Ok(u16::from_le_bytes(self.arr(e)?))
    }
    fn u32(&mut self, e: &str) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(self.arr(e)?))
    }
    fn u64(&mut self, e: &str) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(self.arr(e)?))
    }
    fn loc(&mut self, e: &str) -> Result<Location, FormatError> {
        let at = self.pos;
        let m = self.u32(e)?;
        let svma = Svma(self.u64(e)?);
        if m == NO_MODULE {
            return Ok(Location { module: None, svma });
        }
        if m as usize >= self.modules {
            return Err(FormatError::Corrupt {
                what: self.what,
                offset: at as u64,
                detail: format!(
                    "location refers to module {m} but the header lists {} modules",
                    self.modules
                ),
            });
        }
        Ok(Location {
            module: Some(ModuleIdx(m)),
            svma,
        })
    }
    fn remaining(&self) -> usize {
        self.b.len() - self.pos
    }
    /// Fails unless `count` records of at least `min_bytes` each can still fit.
    fn check_fits(&self, count: u64, min_bytes: usize, expected: &str) -> Result<(), FormatError> {
        let need = count.checked_mul(min_bytes as u64);
        if need.is_none_or(|n| n > self.remaining() as u64) {
            return Err(FormatError::Truncated {
                what: self.what,
                offset: self.b.len() as u64,
                expected: format!("{count} {expected} announced by the header"),
            });
        }
        Ok(())
    }
    fn end(&self) -> Result<(), FormatError> {
        if self.pos != self.b.len() {
            return Err(FormatError::Corrupt {
                what: self.what,
                offset: self.pos as u64,
                detail: format!(
                    "{} unexpected bytes after the last record",
                    self.b.len() - self.pos
                ),
            });
        }
        Ok(())
    }
}

fn write_header<W: Write, H: Serialize>(
    out: &mut Out<W>,
    magic: &[u8; 8],
    h: &H,
) -> Result<(), FormatError> {
    let what = out.what;
    let json = serde_json::to_vec(h).map_err(|err| FormatError::Header { what, err })?;
    out.bytes(magic);
    out.u64(json.len() as u64);
    out.bytes(&json);
    Ok(())
}

fn read_header<'a, H: for<'de> Deserialize<'de>>(
    bytes: &'a [u8],
    magic: &[u8; 8],
    what: &'static str,
) -> Result<(H, In<'a>), FormatError> {
    if bytes.is_empty() {
        return Err(FormatError::Empty { what });
    }
    // The name, then the version: `PTSAMP` `01`, `PTEXACT` `1`.
    let name_len = magic.iter().take_while(|b| b.is_ascii_alphabetic()).count();
    let prefix = &magic[..name_len];
    if !bytes.starts_with(prefix) {
        let shown: String = bytes
            .iter()
            .take(8)
            .map(|&b| if b.is_ascii_graphic() { b as char } else { '.' })
            .collect();
        return Err(FormatError::NotThisFormat {
            what,
            detail: format!(
                "starts with {shown:?}, expected {:?}",
                String::from_utf8_lossy(magic)
            ),
        });
    }
    let mut r = In {
        b: bytes,
        pos: 0,
        what,
        modules: 0,
    };
    let m = r.take(8, "the 8-byte magic")?;
    if m != magic {
        return Err(FormatError::UnsupportedVersion {
            what,
            found: String::from_utf8_lossy(&m[prefix.len()..]).into_owned(),
            supported: if magic == SAMPLES_MAGIC {
                "01"
            } else {
                "1 and 2"
            },
            hint: "write the file again with this proftrust version, or read it with the version that wrote it",
        });
    }
    let len = r.u64("the header length")?;
    let len = usize::try_from(len).map_err(|_| FormatError::Corrupt {
        what,
        offset: 8,
        detail: format!("header length {len} is impossible"),
    })?;
    let json = r.take(len, "the JSON header")?;
    let h: H = serde_json::from_slice(json).map_err(|err| FormatError::Header { what, err })?;
    Ok((h, r))
}

/// Writes a sample set as a `PTSAMP01` file.
pub fn write_samples<W: Write>(w: W, s: &SampleSet) -> Result<(), FormatError> {
    let mut out = Out::new(w, SAMPLES_WHAT);
    let h = SamplesHeader {
        modules: s.modules.clone(),
        events: s.events.clone(),
        lost: s.lost,
        command: s.command.clone(),
        outcome: s.outcome.clone(),
        health: s.health.clone(),
        threads: s.threads.clone(),
        forks: s.forks.clone(),
        kernel_symbols: s.kernel_symbols.clone(),
        sample_count: s.samples.len() as u64,
    };
    write_header(&mut out, SAMPLES_MAGIC, &h)?;
    for x in &s.samples {
        out.u16(x.event);
        out.u32(x.pid);
        out.u32(x.tid);
        out.u64(x.time);
        out.u32(x.cpu);
        out.u64(x.period);
        out.loc(x.ip);
        out.u32(x.callchain.len() as u32);
        out.u32(x.branches.len() as u32);
        for &l in &x.callchain {
            out.loc(l);
        }
        for b in &x.branches {
            out.loc(b.from);
            out.loc(b.to);
            out.u8(u8::from(b.mispredicted) | (u8::from(b.predicted_known) << 1));
            out.u32(b.cycles);
        }
        out.maybe_flush()?;
    }
    out.finish()
}

/// Reads a `PTSAMP01` file.
pub fn read_samples(bytes: &[u8]) -> Result<SampleSet, FormatError> {
    let (h, mut r): (SamplesHeader, _) = read_header(bytes, SAMPLES_MAGIC, SAMPLES_WHAT)?;
    r.modules = h.modules.len();
    r.check_fits(h.sample_count, SAMPLE_FIXED_BYTES, "samples")?;
    let mut samples = Vec::with_capacity(h.sample_count as usize);
    for _ in 0..h.sample_count {
        let at = r.pos;
        let e = "a sample record";
        let event = r.u16(e)?;
        if usize::from(event) >= h.events.len() {
            return Err(FormatError::Corrupt {
                what: SAMPLES_WHAT,
                offset: at as u64,
                detail: format!(
                    "sample of event {event} but the header lists {} events",
                    h.events.len()
                ),
            });
        }
        let pid = r.u32(e)?;
        let tid = r.u32(e)?;
        let time = r.u64(e)?;
        let cpu = r.u32(e)?;
        let period = r.u64(e)?;
        let ip = r.loc(e)?;
        let nc = r.u32(e)?;
        let nb = r.u32(e)?;
        r.check_fits(u64::from(nc), LOC_BYTES, "call-chain entries")?;
        let callchain = (0..nc)
            .map(|_| r.loc("a call-chain entry"))
            .collect::<Result<Vec<_>, _>>()?;
        r.check_fits(u64::from(nb), BRANCH_BYTES, "branch entries")?;
        let mut branches = Vec::with_capacity(nb as usize);
        for _ in 0..nb {
            let e = "a branch entry";
            let from = r.loc(e)?;
            let to = r.loc(e)?;
            let flags = r.u8(e)?;
            let cycles = r.u32(e)?;
            branches.push(Branch {
                from,
                to,
                mispredicted: flags & 1 != 0,
                predicted_known: flags & 2 != 0,
                cycles,
            });
        }
        samples.push(Sample {
            event,
            pid,
            tid,
            time,
            cpu,
            period,
            ip,
            callchain,
            branches,
        });
    }
    r.end()?;
    Ok(SampleSet {
        modules: h.modules,
        events: h.events,
        samples,
        lost: h.lost,
        command: h.command,
        outcome: h.outcome,
        health: h.health,
        threads: h.threads,
        forks: h.forks,
        kernel_symbols: h.kernel_symbols,
    })
}

/// Writes an exact profile as a `PTEXACT1` file.
///
/// `extra_costs` must be empty or have one row per instruction with one value per
/// `extra_cost_names` entry; otherwise the missing values are written as 0.
pub fn write_exact<W: Write>(w: W, e: &ExactProfile) -> Result<(), FormatError> {
    let mut out = Out::new(w, EXACT_WHAT);
    let own = e.processes.len() > 1;
    let process_counts: Vec<u64> = if own {
        e.processes
            .iter()
            .map(|p| p.instructions.len() as u64)
            .collect()
    } else {
        Vec::new()
    };
    let h = ExactHeader {
        modules: e.modules.clone(),
        returns: e.returns,
        total_instructions: e.total_instructions,
        extra_cost_names: e.extra_cost_names.clone(),
        backend: e.backend.clone(),
        backend_detail: e.backend_detail.clone(),
        command: e.command.clone(),
        outcome: e.outcome.clone(),
        instruction_count: e.instructions.len() as u64,
        edge_count: e.edges.len() as u64,
        call_count: e.calls.len() as u64,
        processes: e
            .processes
            .iter()
            .map(|p| ExactProcess {
                instructions: Vec::new(),
                ..p.clone()
            })
            .collect(),
        process_counts,
    };
    write_header(&mut out, if own { EXACT2_MAGIC } else { EXACT_MAGIC }, &h)?;
    let k = e.extra_cost_names.len();
    for (i, ic) in e.instructions.iter().enumerate() {
        out.loc(ic.loc);
        out.u64(ic.count);
        let row = e.extra_costs.get(i);
        for j in 0..k {
            out.u64(row.and_then(|r| r.get(j)).copied().unwrap_or(0));
        }
        out.maybe_flush()?;
    }
    for ed in &e.edges {
        out.loc(ed.from);
        out.loc(ed.to);
        out.u64(ed.count);
        out.maybe_flush()?;
    }
    for c in &e.calls {
        out.loc(c.site);
        out.loc(c.target);
        out.u64(c.count);
        out.maybe_flush()?;
    }
    if own {
        for p in &e.processes {
            for ic in &p.instructions {
                out.loc(ic.loc);
                out.u64(ic.count);
                out.maybe_flush()?;
            }
        }
    }
    out.finish()
}

/// Reads a `PTEXACT1` file.
pub fn read_exact(bytes: &[u8]) -> Result<ExactProfile, FormatError> {
    let magic = if bytes.starts_with(EXACT2_MAGIC) {
        EXACT2_MAGIC
    } else {
        EXACT_MAGIC
    };
    let (mut h, mut r): (ExactHeader, _) = read_header(bytes, magic, EXACT_WHAT)?;
    r.modules = h.modules.len();
    let k = h.extra_cost_names.len();
    r.check_fits(
        h.instruction_count,
        LOC_BYTES + 8 + 8 * k,
        "instruction counts",
    )?;
    let mut instructions = Vec::with_capacity(h.instruction_count as usize);
    let mut extra_costs = Vec::with_capacity(if k > 0 {
        h.instruction_count as usize
    } else {
        0
    });
    for _ in 0..h.instruction_count {
        let e = "an instruction count";
        let loc = r.loc(e)?;
        let count = r.u64(e)?;
        instructions.push(InstrCount { loc, count });
        if k > 0 {
            extra_costs.push((0..k).map(|_| r.u64(e)).collect::<Result<Vec<_>, _>>()?);
        }
    }
    // Issue 20: the stated total must be what the counts add up to (checked, no wrap), or
    // every share computed from it is wrong (a total 10^6 times too small printed shares
    // of millions of per cent).
    let mut sum = 0u64;
    for i in &instructions {
        sum = sum.checked_add(i.count).ok_or(FormatError::TooLarge {
            what: EXACT_WHAT,
            detail: "its instruction counts add up to more than 2^64 - 1".into(),
        })?;
    }
    if sum != h.total_instructions {
        return Err(FormatError::TotalsMismatch {
            what: EXACT_WHAT,
            stated_as: "its header".into(),
            stated: h.total_instructions,
            read: sum,
            unit: "instructions".into(),
            hint: ": the file was edited or is corrupt; record the truth again".into(),
        });
    }
    r.check_fits(h.edge_count, 2 * LOC_BYTES + 8, "edge counts")?;
    let mut edges = Vec::with_capacity(h.edge_count as usize);
    for _ in 0..h.edge_count {
        let e = "an edge count";
        edges.push(EdgeCount {
            from: r.loc(e)?,
            to: r.loc(e)?,
            count: r.u64(e)?,
        });
    }
    r.check_fits(h.call_count, 2 * LOC_BYTES + 8, "call counts")?;
    let mut calls = Vec::with_capacity(h.call_count as usize);
    for _ in 0..h.call_count {
        let e = "a call count";
        calls.push(CallCount {
            site: r.loc(e)?,
            target: r.loc(e)?,
            count: r.u64(e)?,
        });
    }
    if magic == EXACT2_MAGIC {
        if h.process_counts.len() != h.processes.len() {
            return Err(FormatError::Corrupt {
                what: EXACT_WHAT,
                offset: 8,
                detail: format!(
                    "the header lists {} processes but {} counts of their records",
                    h.processes.len(),
                    h.process_counts.len()
                ),
            });
        }
        for (p, &n) in h.processes.iter_mut().zip(&h.process_counts) {
            r.check_fits(n, LOC_BYTES + 8, "a process's instruction counts")?;
            let mut v = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let e = "a process's instruction count";
                v.push(InstrCount {
                    loc: r.loc(e)?,
                    count: r.u64(e)?,
                });
            }
            p.instructions = v;
        }
    }
    r.end()?;
    Ok(ExactProfile {
        modules: h.modules,
        instructions,
        edges,
        calls,
        returns: h.returns,
        total_instructions: h.total_instructions,
        extra_costs,
        extra_cost_names: h.extra_cost_names,
        backend: h.backend,
        backend_detail: h.backend_detail,
        command: h.command,
        outcome: h.outcome,
        processes: h.processes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proftrust_model::{EventKind, Module, PeriodMode, SamplingConfig};

    fn sample_set() -> SampleSet {
        let mut modules = ModuleTable::default();
        let m = modules.intern(Module {
            path: "/bin/prog".into(),
            build_id: proftrust_model::BuildId::from_hex("abcd"),
            load_bias: 0x5555_0000_0000,
        });
        SampleSet {
            modules,
            events: vec![EventDesc {
                name: "cpu-clock".into(),
                kind: EventKind::CpuClock,
                config: SamplingConfig {
                    period: PeriodMode::Fixed(10_007),
                    randomize_max: Some(1250),
                    seed: Some(42),
                    ..Default::default()
                },
            }],
            samples: vec![
                Sample {
                    event: 0,
                    pid: 7,
                    tid: 8,
                    time: 123,
                    cpu: 1,
                    period: 10_007,
                    ip: Location::new(m, 0x1130),
                    callchain: vec![Location::new(m, 0x1200), Location::unmapped(0xffff_1234)],
                    branches: vec![Branch {
                        from: Location::new(m, 0x1140),
                        to: Location::new(m, 0x1120),
                        mispredicted: true,
                        predicted_known: true,
                        cycles: 17,
                    }],
                },
                Sample {
                    event: 0,
                    pid: 7,
                    tid: 9,
                    time: 456,
                    cpu: u32::MAX,
                    period: 10_007,
                    ip: Location::unmapped(0x42),
                    callchain: vec![],
                    branches: vec![],
                },
            ],
            lost: 3,
            command: vec!["prog".into(), "x".into()],
            outcome: Some(RunOutcome::Exited { code: 0 }),
            health: RecordingHealth {
                throttles: 2,
                unthrottles: 1,
                throttled_ns: 5_000,
                event_times: vec![proftrust_model::EventTimes {
                    event: 0,
                    enabled_ns: 1_000,
                    running_ns: 400,
                }],
            },
            threads: vec![ThreadName {
                pid: 7,
                tid: 9,
                time: 400,
                comm: "worker 1".into(),
                exec: false,
            }],
            forks: vec![ThreadStart {
                pid: 8,
                tid: 8,
                ppid: 7,
                ptid: 9,
                time: 450,
            }],
            kernel_symbols: vec![proftrust_model::KernelSymbol {
                start: 0xffff_ffff_8100_1000,
                size: 0x40,
                name: "do_syscall_64".into(),
                module: None,
            }],
        }
    }

    fn exact() -> ExactProfile {
        let mut modules = ModuleTable::default();
        let m = modules.intern(Module::new("/bin/prog"));
        ExactProfile {
            modules,
            instructions: vec![
                InstrCount {
                    loc: Location::new(m, 0x10),
                    count: 5,
                },
                InstrCount {
                    loc: Location::new(m, 0x14),
                    count: 6,
                },
            ],
            edges: vec![EdgeCount {
                from: Location::new(m, 0x14),
                to: Location::new(m, 0x10),
                count: 4,
            }],
            calls: vec![CallCount {
                site: Location::new(m, 0x14),
                target: Location::unmapped(0x9999),
                count: 1,
            }],
            returns: 1,
            total_instructions: 11,
            extra_costs: vec![vec![1, 2], vec![3, 4]],
            extra_cost_names: vec!["D1mr".into(), "DLmr".into()],
            backend: "qemu".into(),
            backend_detail: "max".into(),
            command: vec!["prog".into()],
            outcome: Some(RunOutcome::Signaled {
                signal: 11,
                name: "SIGSEGV".into(),
            }),
            processes: Vec::new(),
        }
    }

    /// A profile of two process images is a `PTEXACT2` file that gives back each image's
    /// own counts; one image stays `PTEXACT1`.
    #[test]
    fn processes_round_trip_as_version_2() {
        let mut a = exact();
        a.extra_costs.clear();
        a.extra_cost_names.clear();
        let process = |pid: u32, comm: &str| proftrust_model::ExactProcess {
            pid,
            parent: None,
            start: proftrust_model::ImageStart::Root,
            comm: comm.into(),
            path: "/bin/prog".into(),
            argv: vec!["prog".into()],
            total_instructions: 0,
            instructions: Vec::new(),
            not_counted: None,
            outcome: None,
            replaced: false,
        };
        a.processes = vec![process(1, "prog")];
        let mut buf = Vec::new();
        write_exact(&mut buf, &a).unwrap();
        assert_eq!(&buf[..8], EXACT_MAGIC);
        let mut b = a.clone();
        b.processes = vec![process(2, "child")];
        a.merge(&b);
        assert_eq!(a.total_instructions, 22);
        let mut buf = Vec::new();
        write_exact(&mut buf, &a).unwrap();
        assert_eq!(&buf[..8], EXACT2_MAGIC);
        let back = read_exact(&buf).unwrap();
        assert_eq!(back, a);
        assert_eq!(
            back.process_instructions(1)
                .iter()
                .map(|i| i.count)
                .sum::<u64>(),
            11
        );
        // Cut inside the per-process records: corrupt, not silently short.
        assert!(read_exact(&buf[..buf.len() - 4]).is_err());
    }

    #[test]
    fn samples_round_trip_and_layout() {
        let s = sample_set();
        let mut buf = Vec::new();
        write_samples(&mut buf, &s).unwrap();
        assert_eq!(&buf[..8], b"PTSAMP01");
        let hl = u64::from_le_bytes(buf[8..16].try_into().unwrap()) as usize;
        // Record sizes by hand: 50 + 2*12 + 29 for the first sample, 50 for the second.
        assert_eq!(buf.len(), 16 + hl + (50 + 24 + 29) + 50);
        assert_eq!(read_samples(&buf).unwrap(), s);
    }

    /// A `PTSAMP01` file written before the header had `health` (the key absent) still reads,
    /// with the health unknown; the records are untouched.
    #[test]
    fn samples_without_health_key_read_as_before() {
        let s = sample_set();
        let mut buf = Vec::new();
        write_samples(&mut buf, &s).unwrap();
        let hl = u64::from_le_bytes(buf[8..16].try_into().unwrap()) as usize;
        let mut header: serde_json::Value = serde_json::from_slice(&buf[16..16 + hl]).unwrap();
        assert!(header.as_object_mut().unwrap().remove("health").is_some());
        let old_header = serde_json::to_vec(&header).unwrap();
        let mut old = b"PTSAMP01".to_vec();
        old.extend_from_slice(&(old_header.len() as u64).to_le_bytes());
        old.extend_from_slice(&old_header);
        old.extend_from_slice(&buf[16 + hl..]);
        let read = read_samples(&old).unwrap();
        assert_eq!(read.health, RecordingHealth::default());
        assert_eq!(read.samples, s.samples);
        assert_eq!(read.lost, 3);
    }

    #[test]
    fn exact_round_trip_and_layout() {
        let e = exact();
        let mut buf = Vec::new();
        write_exact(&mut buf, &e).unwrap();
        assert_eq!(&buf[..8], b"PTEXACT1");
        let hl = u64::from_le_bytes(buf[8..16].try_into().unwrap()) as usize;
        assert_eq!(buf.len(), 16 + hl + 2 * (12 + 8 + 16) + 32 + 32);
        assert_eq!(read_exact(&buf).unwrap(), e);
    }

    #[test]
    fn versions_and_garbage_are_clear_errors() {
        let mut buf = Vec::new();
        write_samples(&mut buf, &sample_set()).unwrap();
        let mut v2 = buf.clone();
        v2[6..8].copy_from_slice(b"02");
        let err = read_samples(&v2).unwrap_err().to_string();
        assert!(err.contains("version \"02\""), "{err}");
        // Issue 32 item 10: PTEXACT2 was reported as version "T2". PTEXACT2 is now the
        // file of several process images: the next, unknown, version is 3.
        let mut x = Vec::new();
        write_exact(&mut x, &exact()).unwrap();
        x[7] = b'3';
        let err = read_exact(&x).unwrap_err().to_string();
        assert!(err.contains("version \"3\""), "{err}");
        assert!(matches!(
            read_samples(b"").unwrap_err(),
            FormatError::Empty { .. }
        ));
        assert!(matches!(
            read_samples(b"hello world").unwrap_err(),
            FormatError::NotThisFormat { .. }
        ));
        assert!(matches!(
            read_exact(&buf).unwrap_err(),
            FormatError::NotThisFormat { .. }
        ));
        let mut extra = buf.clone();
        extra.push(0);
        assert!(matches!(
            read_samples(&extra).unwrap_err(),
            FormatError::Corrupt { .. }
        ));
    }

    #[test]
    fn every_truncation_and_bit_flip_is_an_error_not_a_panic() {
        let mut s = Vec::new();
        write_samples(&mut s, &sample_set()).unwrap();
        let mut e = Vec::new();
        write_exact(&mut e, &exact()).unwrap();
        for n in 0..s.len() {
            assert!(read_samples(&s[..n]).is_err(), "prefix {n} accepted");
        }
        for n in 0..e.len() {
            assert!(read_exact(&e[..n]).is_err(), "prefix {n} accepted");
        }
        for i in 0..s.len() {
            for bit in [0x01u8, 0x80, 0xff] {
                let mut m = s.clone();
                m[i] ^= bit;
                let _ = read_samples(&m);
            }
        }
        for i in 0..e.len() {
            let mut m = e.clone();
            m[i] ^= 0xff;
            let _ = read_exact(&m);
        }
    }

    /// Issue 20: an exact file whose header total disagrees with its counts (here 10^6
    /// times too small once, too large once) is an error naming both numbers, and counts
    /// past 2^64 - 1 do not wrap.
    #[test]
    fn exact_totals_are_checked() {
        let mut e = exact();
        let mut ok = Vec::new();
        write_exact(&mut ok, &e).unwrap();
        assert_eq!(read_exact(&ok).unwrap().total_instructions, 11);
        for stated in [0u64, 12, 11_000_000] {
            e.total_instructions = stated;
            let mut b = Vec::new();
            write_exact(&mut b, &e).unwrap();
            let err = read_exact(&b).unwrap_err();
            assert!(matches!(err, FormatError::TotalsMismatch { .. }), "{err}");
            let m = err.to_string();
            assert!(
                m.contains(&format!("states {stated} instructions")) && m.contains("add up to 11"),
                "{m}"
            );
        }
        e.instructions[0].count = u64::MAX;
        e.total_instructions = 0;
        let mut b = Vec::new();
        write_exact(&mut b, &e).unwrap();
        assert!(read_exact(&b)
            .unwrap_err()
            .to_string()
            .contains("more than 2^64 - 1"));
    }
}
