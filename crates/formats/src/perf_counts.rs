//! Sample counts per (event, location) of a perf.data file, by a lean streaming pass.
//!
//! A per-symbol table needs neither the samples in time order nor their call chains: only
//! how many samples fell on each module-relative address. [`count_perf_data`] gets that
//! without sorting and without allocating per sample:
//!
//! 1. the header, attributes and feature sections are read by `linux-perf-data` (as in
//!    [`crate::read_perf_data_with`]);
//! 2. **one pass** over the data section (8-byte record headers, no copies) counts each
//!    `SAMPLE` under the key `(pid, event, runtime ip)` in a hash table with a cheap
//!    multiplicative hash, remembering the first and last `(time, file offset)` of the key
//!    (the fast path: the few fields a sample needs read at their offsets, [`Layout`]);
//!    every other kernel record is parsed by `linux-perf-event-reader` as the full reader
//!    parses it (`perf_record::parse_event`), and the changes of address space the full
//!    reader's handlers take from them (`perf_data::SpaceChange`: kernel and executable
//!    `MMAP`/`MMAP2`, `FORK` of a process, `COMM` of an exec) are kept, with the
//!    `LOST`/`LOST_SAMPLES` counts;
//! 3. the changes are sorted by `(time, file offset)` — the order in which the full
//!    reader's sorter delivers records — and replayed by the full reader's rule
//!    (`SpaceChange::apply`) into per-process **versions** of the mapping table;
//! 4. each **distinct key** is turned into a module-relative location once (load segments
//!    and module interning as in the full reader), with the version in effect at its
//!    samples: when the ip lies in the same mapping in every version between the key's
//!    first and last sample (the usual case), all its samples share that location; when a
//!    change in between moved the ip to another mapping (an exec, or `dlclose` + `dlopen`
//!    at the same address), a second pass re-counts just those keys per version;
//! 5. the counts are merged by `(event, location)`. Names come last, in the caller, once
//!    per location.
//!
//! The result equals what [`SampleCounts::from_samples`] computes from the full reader's
//! samples (tests check this on real recordings, including forks, execs and threads).
//! Files outside the streaming path's assumptions are handed to the full reader instead,
//! which then also gives the precise error for corrupt input: pipe mode, compressed or
//! AUX records, attributes without `sample_id_all` or `TIME` or with `BRANCH_STACK` (kept
//! per sample in [`SampleCounts::branch_stacks`]), several attributes that
//! neither all sample `IDENTIFIER` nor share one sample format with `ID`, any record that
//! is short, crosses the end of the data section or that the crate cannot parse (an
//! `MMAP2` build-id longer than 20 bytes among them), or more than 4M mapping entries
//! across versions.
//! [`SampleCounts::streamed`] says which path was taken.

use crate::error::FormatError;
use crate::perf_data::{
    arch_note, open_perf_data, prepare, FileInfo, MapCtx, Mapping, Space, SpaceChange,
    UnknownRecords, PERF_RECORD_FINISHED_ROUND, PERF_RECORD_LOST_SAMPLES,
};
use crate::perf_record::{lost_samples, parse_event};
use crate::segments::SegmentSource;
use crate::{read_perf_data_with, PerfDataOptions, ReadNotes};
use linux_perf_data::linux_perf_event_reader::{
    EventRecord, RawData, RawEventRecord, RecordParseInfo, RecordType,
};
use linux_perf_data::Endianness;
use proftrust_model::{Branch, EventDesc, Location, ModuleTable, SampleSet};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::path::Path;

/// Samples on one module-relative address for one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LocationCount {
    /// Index into [`SampleCounts::events`].
    pub event: u16,
    /// The sampled address.
    pub ip: Location,
    /// How many samples.
    pub samples: u64,
}

/// Per-(event, location) sample counts of a profile: everything a per-symbol table needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SampleCounts {
    /// Modules referenced by the locations.
    pub modules: ModuleTable,
    /// Events, indexed by [`LocationCount::event`].
    pub events: Vec<EventDesc>,
    /// One entry per distinct `(event, location)`, in the order first seen in the file.
    pub counts: Vec<LocationCount>,
    /// Samples the kernel reported lost.
    pub lost: u64,
    /// The recorded command line, when known.
    pub command: Vec<String>,
    /// `true` when the streaming reader produced the counts, `false` when the file was
    /// handed to the full reader (see the module documentation for when).
    pub streamed: bool,
    /// The branch stacks (LBR) of the samples that have one, in file order; empty when
    /// none was recorded (a file sampling `BRANCH_STACK` is read by the full reader).
    pub branch_stacks: Vec<SampleBranches>,
    /// Kernel functions the file carries (see
    /// [`SampleSet::kernel_symbols`](proftrust_model::SampleSet::kernel_symbols)).
    pub kernel_symbols: Vec<proftrust_model::KernelSymbol>,
    /// How the recorded run ended, when the file says (proftrust's sample files do; an
    /// interrupted `record` writes `Interrupted`).
    pub outcome: Option<proftrust_model::RunOutcome>,
}

/// The branch stack of one sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SampleBranches {
    /// The sample's index in the file (0-based, all events, file order).
    pub sample: u64,
    /// Index into [`SampleCounts::events`].
    pub event: u16,
    /// Taken branches, most recent first.
    pub branches: Vec<Branch>,
}

impl SampleCounts {
    /// Counts the samples of a sample set by `(event, ip)`, in the order first seen.
    pub fn from_samples(s: &SampleSet) -> SampleCounts {
        let mut index: HashMap<(u16, Location), usize> = HashMap::new();
        let mut counts: Vec<LocationCount> = Vec::new();
        for x in &s.samples {
            let i = *index.entry((x.event, x.ip)).or_insert_with(|| {
                counts.push(LocationCount {
                    event: x.event,
                    ip: x.ip,
                    samples: 0,
                });
                counts.len() - 1
            });
            counts[i].samples += 1;
        }
        let branch_stacks = s
            .samples
            .iter()
            .enumerate()
            .filter(|(_, x)| !x.branches.is_empty())
            .map(|(i, x)| SampleBranches {
                sample: i as u64,
                event: x.event,
                branches: x.branches.clone(),
            })
            .collect();
        SampleCounts {
            modules: s.modules.clone(),
            events: s.events.clone(),
            counts,
            lost: s.lost,
            command: s.command.clone(),
            streamed: false,
            branch_stacks,
            kernel_symbols: s.kernel_symbols.clone(),
            outcome: s.outcome.clone(),
        }
    }

    /// All samples.
    pub fn total(&self) -> u64 {
        self.counts.iter().map(|c| c.samples).sum()
    }

    /// Samples per event, indexed like [`SampleCounts::events`].
    pub fn per_event(&self) -> Vec<u64> {
        let mut v = vec![0u64; self.events.len()];
        for c in &self.counts {
            if let Some(n) = v.get_mut(usize::from(c.event)) {
                *n += c.samples;
            }
        }
        v
    }
}

/// Counts the samples of a perf.data file per `(event, location)`: the streaming pass when
/// the file allows it, else the full reader ([`read_perf_data_with`]) and
/// [`SampleCounts::from_samples`]. Errors are the full reader's.
pub fn count_perf_data(
    bytes: &[u8],
    path: &Path,
    opts: &PerfDataOptions,
    segments: &dyn SegmentSource,
) -> Result<(SampleCounts, ReadNotes), FormatError> {
    let (bytes, repairs) = prepare(bytes)?;
    let bytes = &bytes[..];
    let (reader, info) = open_perf_data(bytes, path)?;
    if !info.pipe {
        let attrs = reader.perf_file.event_attributes();
        if let Some(plan) = Plan::new(attrs) {
            let arch = arch_note(&info);
            if let Some((c, mut notes)) = stream(bytes, &plan, info, opts, segments) {
                notes.warnings.splice(0..0, repairs.into_iter().chain(arch));
                return Ok((c, notes));
            }
        }
    }
    let (s, mut notes) = read_perf_data_with(bytes, path, opts, segments)?;
    notes.warnings.splice(0..0, repairs);
    Ok((SampleCounts::from_samples(&s), notes))
}

// perf_event_open(2) sample_type bits.
const S_IP: u64 = 1 << 0;
const S_TID: u64 = 1 << 1;
const S_TIME: u64 = 1 << 2;
const S_ADDR: u64 = 1 << 3;
const S_ID: u64 = 1 << 6;
#[cfg(test)]
const S_CPU: u64 = 1 << 7;
const S_IDENTIFIER: u64 = 1 << 16;
const S_BRANCH_STACK: u64 = 1 << 11;
/// `perf_event_attr.sample_id_all` (flag bit 18).
const ATTR_SAMPLE_ID_ALL: u64 = 1 << 18;

// Record types.
const R_SAMPLE: u32 = 9;
const R_AUXTRACE: u32 = 71;
const R_COMPRESSED: u32 = 81;
const R_COMPRESSED2: u32 = 83;
/// Record types from here on are written by perf itself, not the kernel.
const R_USER_TYPE_START: u32 = 64;

/// Beyond this many mapping entries summed over all versions, use the full reader (a
/// profile with thousands of `mmap`s per process would make the versions quadratic).
const MAX_VERSION_ENTRIES: usize = 1 << 22;

/// Where the fields the counter needs sit in a `SAMPLE` body, for one attribute (the fast
/// path: other records are parsed by the crate, see [`Plan::record`]).
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// Offset of the ip in a sample body (`None`: samples carry no ip and are skipped, as
    /// the full reader skips them).
    ip: Option<usize>,
    /// Offset of `pid, tid` in a sample body.
    tid: Option<usize>,
    /// Offset of the time in a sample body.
    time: usize,
    /// Smallest sample body holding these fields.
    min_sample: usize,
}

impl Layout {
    fn new(sample_format: u64) -> Layout {
        // SAMPLE: IDENTIFIER, IP, TID, TIME, ... (perf_event_open(2) order).
        let mut p = 0;
        if sample_format & S_IDENTIFIER != 0 {
            p += 8;
        }
        let ip = (sample_format & S_IP != 0).then(|| {
            p += 8;
            p - 8
        });
        let tid = (sample_format & S_TID != 0).then(|| {
            p += 8;
            p - 8
        });
        let time = p;
        Layout {
            ip,
            tid,
            time,
            min_sample: time + 8,
        }
    }
}

/// Where a record names its attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdAt {
    /// There is one attribute.
    Single,
    /// Every attribute samples `IDENTIFIER`: the first word of a sample, the last word of
    /// other records.
    Identifier,
    /// All attributes share one sample format with `ID` (what perf writes when the formats
    /// agree): at this offset in a sample; other records have the same layout whatever
    /// their attribute, so they need no id.
    Id(usize),
}

/// How to read the records of one file; `None` when the streaming path does not apply.
struct Plan {
    layouts: Vec<Layout>,
    /// Each attribute's parse info for the crate (other records than samples).
    infos: Vec<RecordParseInfo>,
    how: IdAt,
    /// Event id -> attribute (several attributes only).
    by_id: HashMap<u64, usize>,
}

impl Plan {
    fn new(attrs: &[linux_perf_data::AttributeDescription]) -> Option<Plan> {
        if attrs.is_empty() || attrs.len() > usize::from(u16::MAX) {
            return None;
        }
        let mut layouts = Vec::with_capacity(attrs.len());
        let formats: Vec<u64> = attrs
            .iter()
            .map(|a| a.attributes().sample_format.bits())
            .collect();
        for a in attrs {
            let sf = a.attributes().sample_format.bits();
            let flags = a.attributes().flags.bits();
            if sf & S_TIME == 0 || flags & ATTR_SAMPLE_ID_ALL == 0 {
                return None;
            }
            // Branch stacks are per sample: the full reader keeps them.
            if sf & S_BRANCH_STACK != 0 {
                return None;
            }
            layouts.push(Layout::new(sf));
        }
        let how = if attrs.len() == 1 {
            IdAt::Single
        } else if formats.iter().all(|f| f & S_IDENTIFIER != 0) {
            IdAt::Identifier
        } else if formats.iter().all(|&f| f == formats[0]) && formats[0] & S_ID != 0 {
            // SAMPLE: IDENTIFIER, IP, TID, TIME, ADDR, ID, ... (perf_event_open(2)).
            let f = formats[0];
            let before = [S_IDENTIFIER, S_IP, S_TID, S_TIME, S_ADDR]
                .iter()
                .filter(|&&b| f & b != 0)
                .count();
            let at = 8 * before;
            for l in &mut layouts {
                l.min_sample = l.min_sample.max(at + 8);
            }
            IdAt::Id(at)
        } else {
            return None;
        };
        let mut by_id = HashMap::new();
        if how != IdAt::Single {
            for (i, a) in attrs.iter().enumerate() {
                for &id in a.ids() {
                    by_id.insert(id, i);
                }
            }
        }
        let infos = attrs
            .iter()
            .map(|a| RecordParseInfo::new(a.attributes(), Endianness::LittleEndian))
            .collect();
        Some(Plan {
            layouts,
            infos,
            how,
            by_id,
        })
    }

    /// A record other than a sample as the crate sees it, with its attribute's parse info:
    /// by the identifier that ends it when every attribute samples one, else the first's
    /// (the attributes then share one sample format, so their `sample_id` trailers are
    /// alike). `None` when the body is shorter than that trailer.
    fn record<'b>(&self, ty: u32, misc: u16, body: &'b [u8]) -> Option<RawEventRecord<'b>> {
        let mut r = RawEventRecord::new(RecordType(ty), misc, RawData::from(body), self.infos[0]);
        if self.how == IdAt::Identifier {
            r.parse_info = self.infos[self.attr(r.id()?)];
        }
        let trailer = r
            .parse_info
            .common_data_offset_from_end
            .map_or(0, usize::from);
        (body.len() >= trailer).then_some(r)
    }

    /// Attribute of a record from its id (unknown ids go to attribute 0, as in
    /// `linux-perf-data`).
    fn attr(&self, id: u64) -> usize {
        self.by_id.get(&id).copied().unwrap_or(0)
    }
}

/// The little-endian `u64` at `o` (the sample fast path and the file header).
fn u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(o..o.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// The little-endian `u32` at `o` (the sample fast path).
fn u32_at(b: &[u8], o: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(o..o.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// One record of the data section: `(type, misc, body, offset of the record)`.
struct Records<'b> {
    data: &'b [u8],
    p: usize,
    /// Set when a record header is impossible or crosses the end.
    broken: bool,
}

impl<'b> Iterator for Records<'b> {
    type Item = (u32, u16, &'b [u8], usize);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let d = self.data;
        let p = self.p;
        if p >= d.len() {
            return None;
        }
        let Some(h) = d.get(p..p + 8) else {
            self.broken = true;
            return None;
        };
        let ty = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let misc = u16::from_le_bytes([h[4], h[5]]);
        let size = usize::from(u16::from_le_bytes([h[6], h[7]]));
        if size < 8 || p + size > d.len() {
            self.broken = true;
            return None;
        }
        self.p = p + size;
        Some((ty, misc, &d[p + 8..p + size], p))
    }
}

/// A change to the address spaces, at `(time, offset)`.
struct MapEvent {
    key: (u64, u64),
    what: SpaceChange,
}

/// What a sample counter is keyed by: pid, event, kernel flag (packed in `tag`) and the
/// runtime ip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    /// `pid as u32 | event << 32 | kernel << 48`.
    tag: u64,
    ip: u64,
}

impl Key {
    fn new(pid: i32, event: u16, kernel: bool, ip: u64) -> Key {
        Key {
            tag: u64::from(pid as u32) | u64::from(event) << 32 | u64::from(kernel) << 48,
            ip,
        }
    }
    fn pid(self) -> i32 {
        self.tag as u32 as i32
    }
    fn event(self) -> u16 {
        (self.tag >> 32) as u16
    }
    fn kernel(self) -> bool {
        self.tag >> 48 != 0
    }
}

/// Samples of one [`Key`], with the first and last `(time, offset)` they were taken at.
struct Counter {
    key: Key,
    samples: u64,
    first: (u64, u64),
    last: (u64, u64),
}

/// A multiplicative hasher for small integer keys (the sample counters' hot path; the
/// keys are not attacker-chosen in a way that matters: a bad file makes it slower, not
/// wrong). Each word is mixed as `h = (h.rotl(5) ^ w) * K` with `K` = 2^64 / golden ratio.
#[derive(Default, Clone, Copy)]
struct WordHasher(u64);

impl Hasher for WordHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    #[inline]
    fn write_u16(&mut self, v: u16) {
        self.write_u64(u64::from(v));
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    #[inline]
    fn finish(&self) -> u64 {
        // Fold the high bits down: hashbrown takes its bucket index from the low bits.
        self.0 ^ (self.0 >> 29)
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<WordHasher>>;

/// Reads the fields of a `SAMPLE` body: `None` = malformed (hand the file to the full
/// reader), `Some(None)` = skipped (no ip, or a kernel sample not kept), else the counter key
/// and the time.
#[inline]
fn read_sample(
    plan: &Plan,
    misc: u16,
    body: &[u8],
    keep_kernel: bool,
) -> Option<Option<(Key, u64)>> {
    let attr = match plan.how {
        IdAt::Single => 0,
        IdAt::Identifier => plan.attr(u64_at(body, 0)?),
        IdAt::Id(at) => plan.attr(u64_at(body, at)?),
    };
    let l = &plan.layouts[attr];
    if body.len() < l.min_sample {
        return None;
    }
    let Some(ip_at) = l.ip else {
        return Some(None);
    };
    let ip = u64_at(body, ip_at)?;
    let kernel_mode = match Space::of_misc(misc).resolve(ip) {
        Space::Kernel => true,
        Space::User => false,
        // Guests and the hypervisor: the full reader names them.
        _ => return None,
    };
    if kernel_mode && !keep_kernel {
        return Some(None);
    }
    let pid = match l.tid {
        Some(o) => u32_at(body, o)? as i32,
        None => -1,
    };
    let time = u64_at(body, l.time)?;
    // Kernel addresses do not depend on the process: one counter for all pids.
    let key = if kernel_mode {
        Key::new(0, attr as u16, true, ip)
    } else {
        Key::new(pid, attr as u16, false, ip)
    };
    Some(Some((key, time)))
}

/// `((time, file offset) from which a version applies, version index)`.
type VersionStart = ((u64, u64), u32);

/// Index of the version of a process's timeline in effect at `at`, `None` before its first.
fn version_at(tl: &[VersionStart], at: (u64, u64)) -> Option<usize> {
    tl.partition_point(|(k, _)| *k <= at).checked_sub(1)
}

/// The mapping holding `ip` among `v` (sorted by start, disjoint).
fn holder(v: &[Mapping], ip: u64) -> Option<&Mapping> {
    let i = v.partition_point(|x| x.start <= ip).checked_sub(1)?;
    let m = &v[i];
    (ip < m.end).then_some(m)
}

/// Whether two mappings of `ip` give the same location.
fn same_mapping(a: Option<&Mapping>, b: Option<&Mapping>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            a.start == b.start
                && a.end == b.end
                && a.pgoff == b.pgoff
                && a.path == b.path
                && a.build_id == b.build_id
        }
        _ => false,
    }
}

/// The streaming pass; `None` hands the file to the full reader.
///
/// One pass over the data section counts samples by `(pid, event, ip)` and remembers, per
/// counter, the first and last `(time, offset)`; the same pass collects the address-space
/// changes. After replaying the changes into versions, a counter whose first and last
/// sample see the same mapping of its ip in every version in between (the usual case: all
/// mappings of a process are made before it runs hot code) is resolved once. Counters for
/// which a change in between moved their ip to another mapping (an exec, a `dlclose` +
/// `dlopen` at the same address) are counted again per version by a second pass over the
/// samples of just those counters.
fn stream(
    bytes: &[u8],
    plan: &Plan,
    info: FileInfo,
    opts: &PerfDataOptions,
    segments: &dyn SegmentSource,
) -> Option<(SampleCounts, ReadNotes)> {
    // File header: data section (offset, size) at 40 (checked by open_perf_data).
    let off = usize::try_from(u64_at(bytes, 40)?).ok()?;
    let size = usize::try_from(u64_at(bytes, 48)?).ok()?;
    let data = bytes.get(off..off.checked_add(size)?)?;
    let FileInfo {
        events,
        build_ids,
        command,
        ..
    } = info;
    let mut first = FirstPass::run(data, plan, opts.keep_kernel)?;
    first.changes.sort_by_key(|e| e.key);
    let mut versions = Versions::replay(std::mem::take(&mut first.changes))?;
    let mut tally = Tally {
        ctx: MapCtx::new(build_ids, segments),
        merged: HashMap::new(),
        counts: Vec::new(),
    };
    tally.ctx.kernel_maps = std::mem::take(&mut versions.kernel_maps);
    let split = tally.counters(&first.counters, &mut versions);
    if !split.is_empty() {
        tally.split_counters(data, plan, opts.keep_kernel, &split, &mut versions)?;
    }
    let mut notes = std::mem::take(&mut tally.ctx.notes);
    notes.warnings.extend(first.unknown.warning());
    Some((
        SampleCounts {
            modules: tally.ctx.modules,
            events,
            counts: tally.counts,
            lost: first.lost.max(first.lost_samples),
            command,
            streamed: true,
            branch_stacks: Vec::new(),
            kernel_symbols: Vec::new(),
            outcome: None,
        },
        notes,
    ))
}

/// The first pass of [`stream`]: the sample counters, the address-space changes, the
/// losses and the unknown records.
#[derive(Default)]
struct FirstPass {
    index: FastMap<Key, u32>,
    counters: Vec<Counter>,
    changes: Vec<MapEvent>,
    unknown: UnknownRecords,
    lost: u64,
    lost_samples: u64,
}

impl FirstPass {
    /// One pass over the data section's records; `None` hands the file to the full reader.
    fn run(data: &[u8], plan: &Plan, keep_kernel: bool) -> Option<Self> {
        let mut pass = FirstPass::default();
        let mut recs = Records {
            data,
            p: 0,
            broken: false,
        };
        for (ty, misc, body, at) in recs.by_ref() {
            match ty {
                R_SAMPLE => {
                    if let Some((key, time)) = read_sample(plan, misc, body, keep_kernel)? {
                        pass.count(key, (time, at as u64));
                    }
                }
                R_AUXTRACE | R_COMPRESSED | R_COMPRESSED2 => return None,
                // A FINISHED_ROUND with a body: the full reader reports it as corrupt.
                PERF_RECORD_FINISHED_ROUND if !body.is_empty() => return None,
                ty if ty < R_USER_TYPE_START => {
                    pass.event(&plan.record(ty, misc, body)?, at)?;
                }
                _ => pass.unknown.see(ty),
            }
        }
        (!recs.broken).then_some(pass)
    }

    /// One sample of `key` at `when`.
    fn count(&mut self, key: Key, when: (u64, u64)) {
        match self.index.get(&key) {
            Some(&i) => {
                let c = &mut self.counters[i as usize];
                c.samples += 1;
                if when > c.last {
                    c.last = when;
                } else if when < c.first {
                    c.first = when;
                }
            }
            None => {
                self.index.insert(key, self.counters.len() as u32);
                self.counters.push(Counter {
                    key,
                    samples: 1,
                    first: when,
                    last: when,
                });
            }
        }
    }

    /// A kernel record other than a sample, at offset `at`, parsed by the crate as the full
    /// reader parses it ([`parse_event`]; one it cannot parse hands the file to the full
    /// reader, which names it): the losses (`LOST`, `LOST_SAMPLES`) and the address-space
    /// changes the full reader's handlers take from it ([`SpaceChange::of`]: `MMAP`,
    /// `MMAP2`, `FORK`, `COMM`), kept to be replayed in time order by [`Versions::replay`].
    fn event(&mut self, record: &RawEventRecord<'_>, at: usize) -> Option<()> {
        self.unknown.see(record.record_type.0);
        if record.record_type.0 == PERF_RECORD_LOST_SAMPLES {
            self.lost_samples += lost_samples(record).unwrap_or(0);
            return Some(());
        }
        let parsed = parse_event(record).ok()?;
        if let EventRecord::Lost(l) = &parsed {
            self.lost += l.count;
        }
        if let Some(what) = SpaceChange::of(&parsed) {
            let key = (record.timestamp()?, at as u64);
            self.changes.push(MapEvent { key, what });
        }
        Some(())
    }
}

/// The address-space changes replayed into per-process versions of the mapping table.
struct Versions {
    versions: Vec<Vec<Mapping>>,
    /// Per process, where each of its versions starts.
    timeline: HashMap<i32, Vec<VersionStart>>,
    /// The kernel's mappings (one version: kernel addresses do not move).
    kernel_maps: Vec<Mapping>,
}

impl Versions {
    /// Replays `changes` (sorted by time) by [`SpaceChange::apply`], the full reader's
    /// rule; `None` past [`MAX_VERSION_ENTRIES`].
    fn replay(changes: Vec<MapEvent>) -> Option<Self> {
        let mut current: HashMap<i32, Vec<Mapping>> = HashMap::new();
        let mut out = Versions {
            versions: Vec::new(),
            timeline: HashMap::new(),
            kernel_maps: Vec::new(),
        };
        let mut entries = 0usize;
        for e in changes {
            let Some(pid) = e.what.apply(&mut current, &mut out.kernel_maps) else {
                continue;
            };
            let snapshot = current.get(&pid).cloned().unwrap_or_default();
            entries += snapshot.len();
            if entries > MAX_VERSION_ENTRIES || out.versions.len() >= u32::MAX as usize {
                return None;
            }
            out.timeline
                .entry(pid)
                .or_default()
                .push((e.key, out.versions.len() as u32));
            out.versions.push(snapshot);
        }
        Some(out)
    }

    /// The timeline of process `pid` (empty when its address space never changed).
    fn of(&self, pid: i32) -> &[VersionStart] {
        self.timeline.get(&pid).map_or(&[], Vec::as_slice)
    }
}

/// Addresses to locations, counts merged by (event, location).
struct Tally<'s> {
    ctx: MapCtx<'s>,
    merged: HashMap<(u16, Location), usize>,
    counts: Vec<LocationCount>,
}

impl Tally<'_> {
    /// `n` samples of `event` at `loc`.
    fn add(&mut self, event: u16, loc: Location, n: u64) {
        let counts = &mut self.counts;
        let i = *self.merged.entry((event, loc)).or_insert_with(|| {
            counts.push(LocationCount {
                event,
                ip: loc,
                samples: 0,
            });
            counts.len() - 1
        });
        counts[i].samples += n;
    }

    /// Each counter resolved once, except those whose ip changed mapping between their
    /// first and last sample: returned, to be counted per version.
    fn counters(&mut self, counters: &[Counter], versions: &mut Versions) -> FastMap<Key, ()> {
        let mut split: FastMap<Key, ()> = FastMap::default();
        for c in counters {
            let k = c.key;
            if k.kernel() {
                let loc = self.ctx.locate_kernel(k.ip);
                self.add(k.event(), loc, c.samples);
                continue;
            }
            let tl = versions.of(k.pid());
            let (a, b) = (version_at(tl, c.first), version_at(tl, c.last));
            let maps_of = |v: Option<usize>| {
                v.map_or(&[][..], |i| versions.versions[tl[i].1 as usize].as_slice())
            };
            if a != b {
                // Versions changed between the first and the last sample: same mapping of
                // ip in all of them?
                let first = holder(maps_of(a), k.ip);
                let lo = a.map_or(0, |i| i + 1);
                let hi = b.map_or(0, |i| i + 1);
                if !(lo..hi).all(|i| same_mapping(first, holder(maps_of(Some(i)), k.ip))) {
                    split.insert(k, ());
                    continue;
                }
            }
            let loc = match b.map(|i| tl[i].1 as usize) {
                Some(v) => self.ctx.locate_in(&mut versions.versions[v], k.ip),
                None => Location::unmapped(k.ip),
            };
            self.add(k.event(), loc, c.samples);
        }
        split
    }

    /// Second pass over the records: the `split` counters' samples, per version.
    fn split_counters(
        &mut self,
        data: &[u8],
        plan: &Plan,
        keep_kernel: bool,
        split: &FastMap<Key, ()>,
        versions: &mut Versions,
    ) -> Option<()> {
        let mut per_version: FastMap<(u32, u16, u64), u64> = FastMap::default();
        let mut order: Vec<(u32, u16, u64)> = Vec::new();
        let mut recs = Records {
            data,
            p: 0,
            broken: false,
        };
        for (ty, misc, body, at) in recs.by_ref() {
            if ty != R_SAMPLE {
                continue;
            }
            let Some((key, time)) = read_sample(plan, misc, body, keep_kernel)? else {
                continue;
            };
            if !split.contains_key(&key) {
                continue;
            }
            let tl = versions.of(key.pid());
            let v = version_at(tl, (time, at as u64)).map_or(u32::MAX, |i| tl[i].1);
            let e = per_version.entry((v, key.event(), key.ip)).or_insert(0);
            if *e == 0 {
                order.push((v, key.event(), key.ip));
            }
            *e += 1;
        }
        for k in order {
            let (v, event, ip) = k;
            let loc = match v {
                u32::MAX => Location::unmapped(ip),
                v => self.ctx.locate_in(&mut versions.versions[v as usize], ip),
            };
            self.add(event, loc, per_version[&k]);
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf_data::test_records::{comm, fork, info, mmap, mmap2, Body};
    use crate::perf_record::{MISC_MMAP_BUILD_ID, PERF_RECORD_MMAP2};

    /// One attribute, `perf record`'s default sample format ([`info`]).
    fn plan() -> Plan {
        Plan {
            layouts: vec![Layout::new(S_IP | S_TID | S_TIME | (1 << 8))],
            infos: vec![info()],
            how: IdAt::Single,
            by_id: HashMap::new(),
        }
    }

    /// A data section of `(type, misc, body)` records.
    fn section(records: &[(u32, u16, Vec<u8>)]) -> Vec<u8> {
        let mut d = Vec::new();
        for (ty, misc, body) in records {
            d.extend_from_slice(&ty.to_le_bytes());
            d.extend_from_slice(&misc.to_le_bytes());
            d.extend_from_slice(&(8 + body.len() as u16).to_le_bytes());
            d.extend_from_slice(body);
        }
        d
    }

    /// `(start, path)` of each mapping.
    fn starts(v: &[Mapping]) -> Vec<(u64, &str)> {
        v.iter().map(|m| (m.start, m.path.as_str())).collect()
    }

    #[test]
    fn other_records_are_replayed_as_the_full_reader_takes_them() {
        let (user, kernel, exec) = (2u16, 1u16, 2u16 | 1 << 13);
        let d = section(&[
            (3, user, comm(10, "sh", 1)),
            (
                PERF_RECORD_MMAP2,
                user,
                mmap2(10, 0x40_0000, 5, None, "/bin/sh", 2),
            ),
            // Written after the fork but earlier in time: replayed before it.
            (10, user, mmap2(10, 0x50_0000, 5, None, "/lib/c.so", 3)),
            (7, user, fork(11, 10, 11, 10, 4)),
            (7, user, fork(11, 11, 12, 11, 5)),
            (3, exec, comm(11, "ls", 6)),
            (
                PERF_RECORD_MMAP2,
                user,
                mmap2(11, 0x40_0000, 5, None, "/bin/ls", 7),
            ),
            // Not executable: no change.
            (
                PERF_RECORD_MMAP2,
                user,
                mmap2(11, 0x70_0000, 1, None, "/ro", 8),
            ),
            (
                1,
                kernel,
                mmap(
                    u32::MAX,
                    0xffff_ffff_8100_0000,
                    0x1000,
                    "[kernel.kallsyms]",
                    0,
                ),
            ),
            (2, user, Body::new().u64(1).u64(3).trailer(1, 1, 9)),
            (
                PERF_RECORD_LOST_SAMPLES,
                user,
                Body::new().u64(4).trailer(1, 1, 9),
            ),
        ]);
        // The MMAP2 of /lib/c.so at time 3 comes after the fork at time 4 in the file.
        let d = {
            let mut records = d;
            let cut = 8 + comm(10, "sh", 1).len() + 8 + mmap2(10, 0, 5, None, "/bin/sh", 2).len();
            let len_c = 8 + mmap2(10, 0, 5, None, "/lib/c.so", 3).len();
            let len_f = 8 + fork(11, 10, 11, 10, 4).len();
            records[cut..cut + len_c + len_f].rotate_left(len_c);
            records
        };
        let mut first = FirstPass::run(&d, &plan(), true).expect("streamed");
        assert_eq!((first.lost, first.lost_samples), (3, 4));
        first.changes.sort_by_key(|e| e.key);
        let v = Versions::replay(std::mem::take(&mut first.changes)).expect("versions");
        let of = |pid: i32| -> Vec<Vec<(u64, &str)>> {
            v.of(pid)
                .iter()
                .map(|&(_, i)| starts(&v.versions[i as usize]))
                .collect()
        };
        let (sh, libc) = ((0x40_0000, "/bin/sh"), (0x50_0000, "/lib/c.so"));
        assert_eq!(of(10), vec![vec![sh], vec![sh, libc]]);
        // The fork copies both mappings (c.so is older than it), the exec empties, ls maps;
        // the thread 12 of process 11 changes nothing.
        assert_eq!(
            of(11),
            vec![vec![sh, libc], vec![], vec![(0x40_0000, "/bin/ls")]]
        );
        assert_eq!(
            v.of(11).iter().map(|&(k, _)| k.0).collect::<Vec<_>>(),
            vec![4, 6, 7]
        );
        assert_eq!(
            starts(&v.kernel_maps),
            vec![(0xffff_ffff_8100_0000, "[kernel.kallsyms]")]
        );
    }

    #[test]
    fn records_the_crate_cannot_take_go_to_the_full_reader() {
        let user = 2u16;
        // An MMAP2 build-id of 21 bytes (the crate asserts at most 20).
        let bad = mmap2(10, 0x40_0000, 5, Some(&[7; 21]), "/a", 1);
        let d = section(&[(PERF_RECORD_MMAP2, user | MISC_MMAP_BUILD_ID, bad)]);
        assert!(FirstPass::run(&d, &plan(), true).is_none());
        // A LOST record shorter than its sample_id trailer (the full reader cannot parse
        // it either).
        let d = section(&[(2, user, Body::new().u64(1).0)]);
        assert!(FirstPass::run(&d, &plan(), true).is_none());
        // The same with its trailer counts.
        let d = section(&[(2, user, Body::new().u64(1).u64(3).trailer(1, 1, 1))]);
        assert_eq!(FirstPass::run(&d, &plan(), true).map(|p| p.lost), Some(3));
    }

    #[test]
    fn layouts_follow_the_kernel_field_order() {
        // perf record's usual: IP | TID | TIME | PERIOD (+ IDENTIFIER with several events).
        let l = Layout::new(S_IP | S_TID | S_TIME | (1 << 8));
        assert_eq!(
            (l.ip, l.tid, l.time, l.min_sample),
            (Some(0), Some(8), 16, 24)
        );
        let l = Layout::new(S_IDENTIFIER | S_IP | S_TID | S_TIME | S_CPU | S_ID);
        assert_eq!((l.ip, l.tid, l.time), (Some(8), Some(16), 24));
        let l = Layout::new(S_TIME);
        assert_eq!((l.ip, l.tid, l.time, l.min_sample), (None, None, 0, 8));
    }

    #[test]
    fn records_stop_at_impossible_headers() {
        // Two records (sizes 16 and 8), then a header claiming 64 bytes in 8.
        let mut d = Vec::new();
        d.extend_from_slice(&9u32.to_le_bytes());
        d.extend_from_slice(&0u16.to_le_bytes());
        d.extend_from_slice(&16u16.to_le_bytes());
        d.extend_from_slice(&7u64.to_le_bytes());
        d.extend_from_slice(&68u32.to_le_bytes());
        d.extend_from_slice(&0u16.to_le_bytes());
        d.extend_from_slice(&8u16.to_le_bytes());
        let mut r = Records {
            data: &d,
            p: 0,
            broken: false,
        };
        let v: Vec<_> = r.by_ref().map(|(t, _, b, at)| (t, b.len(), at)).collect();
        assert_eq!(v, vec![(9, 8, 0), (68, 0, 16)]);
        assert!(!r.broken);
        d.extend_from_slice(&1u32.to_le_bytes());
        d.extend_from_slice(&0u16.to_le_bytes());
        d.extend_from_slice(&64u16.to_le_bytes());
        d.extend_from_slice(&[0; 8]);
        let mut r = Records {
            data: &d,
            p: 0,
            broken: false,
        };
        assert_eq!(r.by_ref().count(), 2);
        assert!(r.broken);
        // size < 8 is impossible too.
        let z = [9u8, 0, 0, 0, 0, 0, 4, 0];
        let mut r = Records {
            data: &z,
            p: 0,
            broken: false,
        };
        assert_eq!(r.by_ref().count(), 0);
        assert!(r.broken);
    }

    #[test]
    fn word_hasher_spreads_nearby_addresses() {
        use std::hash::BuildHasher;
        let b = BuildHasherDefault::<WordHasher>::default();
        let h = |ip: u64| b.hash_one(Key::new(1234, 0, false, ip));
        // 4096 instruction addresses at strides 1, 16 (aligned loop heads) and 64 must use
        // at least half of 4096 buckets by the low 12 bits (a random function fills
        // 1 - 1/e = 63%; a plain multiplication would put stride 64 into 64 buckets), and
        // the top 7 bits (hashbrown's tag byte) must take most of their 128 values.
        for stride in [1u64, 16, 64] {
            let mut low = std::collections::HashSet::new();
            let mut top = std::collections::HashSet::new();
            for k in 0..4096u64 {
                let x = h(0x40_1000 + k * stride);
                low.insert(x & 0xfff);
                top.insert(x >> 57);
            }
            assert!(low.len() >= 2048, "stride {stride}: {} buckets", low.len());
            assert!(top.len() >= 100, "stride {stride}: {} tags", top.len());
        }
    }
}
