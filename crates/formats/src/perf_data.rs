//! `perf.data` files (file mode and pipe mode) through the `linux-perf-data` crate.
//!
//! * Samples: ip, pid/tid, time, cpu, period, event (the file's attribute index), call chain
//!   (context markers dropped, the leading copy of the ip dropped), branch stack (parsed here
//!   from the raw record because `linux-perf-event-reader` skips it: `from`, `to`, flags bit
//!   0 = mispredicted, bit 1 = predicted, bits 4..20 = cycles).
//! * Modules: `MMAP`/`MMAP2` records of executable mappings, per process, inherited on
//!   `FORK`, cleared on `exec`; the build-ids of the `HEADER_BUILD_ID` feature and of
//!   `MMAP2` records carrying one are put on the modules. A runtime ip becomes an SVMA
//!   through the mapping's file offset and the object's `PT_LOAD` segments
//!   (see [`crate::segments`]); kernel addresses go to a `[kernel.kallsyms]` module with
//!   SVMA = address.
//! * Lost samples: the larger of the sum of `LOST` records and the sum of `LOST_SAMPLES`
//!   records (both count the kernel's ring-buffer drops; perf ≥ 5.x writes both).
//! * Compressed (`COMPRESSED`/`COMPRESSED2`, zstd) records: decompressed by the crate.
//! * Only x86-64 files are accepted: another `arch` in the header gives
//!   [`FormatError::WrongArchitecture`].

use crate::error::FormatError;
use crate::segments::{ElfSegmentsFromDisk, SegmentSource, SegmentTable};
use crate::ReadNotes;
use linux_perf_data::linux_perf_event_reader::{
    CpuMode, EventRecord, HardwareEventId, PerfEventType, RawData, SampleFormat, SamplingPolicy,
    SoftwareCounterType,
};
use linux_perf_data::{Endianness, PerfFileReader, PerfFileRecord};
use proftrust_model::{
    Branch, BuildId, EventDesc, EventKind, Location, Module, ModuleIdx, ModuleTable, PeriodMode,
    Sample, SampleSet, SamplingConfig,
};
use std::collections::HashMap;
use std::io::Cursor;
use std::path::Path;
use std::rc::Rc;

/// Values at or above this in a call chain are context markers (`PERF_CONTEXT_MAX` = -4095).
const PERF_CONTEXT_MAX: u64 = (-4095i64) as u64;
/// `PERF_RECORD_LOST_SAMPLES`.
pub(crate) const PERF_RECORD_LOST_SAMPLES: u32 = 13;
/// `PERF_RECORD_SAMPLE`.
const PERF_RECORD_SAMPLE: u32 = 9;
/// `PERF_RECORD_MMAP2`.
pub(crate) const PERF_RECORD_MMAP2: u32 = 10;
/// `PERF_RECORD_MISC_MMAP_BUILD_ID`: the MMAP2 record carries a build-id.
pub(crate) const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
/// Lowest kernel address on x86-64.
pub(crate) const KERNEL_START: u64 = 0xffff_8000_0000_0000;
/// `PROT_EXEC` in `MMAP2` protections.
pub(crate) const PROT_EXEC: u32 = 4;

/// Options of [`read_perf_data_with`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PerfDataOptions {
    /// Keep samples taken in the kernel. Default: `true`.
    pub keep_kernel: bool,
}

impl Default for PerfDataOptions {
    fn default() -> Self {
        PerfDataOptions { keep_kernel: true }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Mapping {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) pgoff: u64,
    pub(crate) path: String,
    pub(crate) build_id: Option<BuildId>,
    pub(crate) module: Option<ModuleIdx>,
    /// Load segments of the object, once looked up (`Some(None)`: not readable).
    pub(crate) segs: Option<Option<Rc<SegmentTable>>>,
}

impl Mapping {
    /// An executable mapping not yet resolved to a module.
    pub(crate) fn new(
        start: u64,
        len: u64,
        pgoff: u64,
        path: String,
        build_id: Option<BuildId>,
    ) -> Mapping {
        Mapping {
            start,
            end: start.saturating_add(len),
            pgoff,
            path,
            build_id,
            module: None,
            segs: None,
        }
    }
}

/// Adds `m` to one process's mappings (sorted by start, disjoint): mappings it overlaps are
/// replaced, as a new `mmap` over an old range replaces it in the kernel.
pub(crate) fn add_mapping(v: &mut Vec<Mapping>, m: Mapping) {
    v.retain(|x| x.end <= m.start || x.start >= m.end);
    let i = v.partition_point(|x| x.start < m.start);
    v.insert(i, m);
}

/// What turns runtime addresses into module-relative locations: the module table being
/// built, the build-ids of the file, the objects' load segments (cached per path).
pub(crate) struct MapCtx<'s> {
    pub(crate) modules: ModuleTable,
    pub(crate) build_ids: HashMap<String, BuildId>,
    pub(crate) segments: &'s dyn SegmentSource,
    pub(crate) seg_cache: HashMap<(String, Option<BuildId>), Option<Rc<SegmentTable>>>,
    pub(crate) kernel: Option<ModuleIdx>,
    pub(crate) notes: ReadNotes,
    pub(crate) unreadable: std::collections::HashSet<String>,
}

impl<'s> MapCtx<'s> {
    pub(crate) fn new(
        build_ids: HashMap<String, BuildId>,
        segments: &'s dyn SegmentSource,
    ) -> Self {
        MapCtx {
            modules: ModuleTable::default(),
            build_ids,
            segments,
            seg_cache: HashMap::new(),
            kernel: None,
            notes: ReadNotes::default(),
            unreadable: Default::default(),
        }
    }

    /// The `[kernel.kallsyms]` module (interned on first use).
    pub(crate) fn kernel(&mut self) -> ModuleIdx {
        *self
            .kernel
            .get_or_insert_with(|| self.modules.intern(Module::new("[kernel.kallsyms]")))
    }

    /// The location of user-space `ip` in a process whose executable mappings are `v`
    /// (sorted by start, disjoint); unmapped when no mapping holds it.
    pub(crate) fn locate_in(&mut self, v: &mut [Mapping], ip: u64) -> Location {
        let i = v.partition_point(|x| x.start <= ip);
        let Some(m) = i.checked_sub(1).and_then(|i| v.get_mut(i)) else {
            return Location::unmapped(ip);
        };
        let range = proftrust_model::segments::Mapping {
            start: m.start,
            end: m.end,
            pgoff: m.pgoff,
        };
        // Outside the mapping, or a corrupt page offset that pushes the file offset past
        // 2^64 (a fuzz finding).
        let Some(off) = range.file_offset(ip) else {
            return Location::unmapped(ip);
        };
        let build_id = m
            .build_id
            .clone()
            .or_else(|| self.build_ids.get(&m.path).cloned());
        if m.segs.is_none() {
            let path = &m.path;
            let segments = self.segments;
            let s = self
                .seg_cache
                .entry((path.clone(), build_id.clone()))
                .or_insert_with(|| {
                    if path.starts_with('[') || path.starts_with("//") {
                        None
                    } else {
                        segments.load_segments(path, build_id.as_ref()).map(Rc::new)
                    }
                })
                .clone();
            m.segs = Some(s);
        }
        let segs = m.segs.as_ref().and_then(|s| s.as_deref());
        let svma = match segs.and_then(|s| s.svma_of_offset(off)) {
            Some(s) => s.0,
            None => {
                if !m.path.starts_with('[') && self.unreadable.insert(m.path.clone()) {
                    self.notes.warnings.push(if segs.is_some() {
                        format!(
                            "{}: file offset {off:#x} lies in none of its PT_LOAD segments; such addresses are taken as file offsets",
                            m.path
                        )
                    } else {
                        format!(
                            "{}: binary not found (give it with --binary or --symfs); its addresses are taken as file offsets (exact for PIE executables and shared objects, wrong for non-PIE executables)",
                            m.path
                        )
                    });
                }
                off
            }
        };
        let module = match m.module {
            Some(x) => x,
            None => {
                let x = self.modules.intern(Module {
                    path: m.path.clone(),
                    build_id,
                    load_bias: ip.wrapping_sub(svma),
                });
                m.module = Some(x);
                x
            }
        };
        Location::new(module, svma)
    }
}

struct Mapper<'s> {
    by_pid: HashMap<i32, Vec<Mapping>>,
    ctx: MapCtx<'s>,
}

impl Mapper<'_> {
    fn add(&mut self, pid: i32, m: Mapping) {
        add_mapping(self.by_pid.entry(pid).or_default(), m);
    }

    fn locate(&mut self, pid: i32, ip: u64) -> Location {
        if ip >= KERNEL_START {
            return Location::new(self.ctx.kernel(), ip);
        }
        let Some(v) = self.by_pid.get_mut(&pid) else {
            return Location::unmapped(ip);
        };
        self.ctx.locate_in(v, ip)
    }
}

pub(crate) fn perf_err(path: &Path, e: impl std::fmt::Display) -> FormatError {
    FormatError::PerfData {
        path: path.to_path_buf(),
        detail: e.to_string(),
    }
}

fn event_desc(attr: &linux_perf_data::AttributeDescription) -> EventDesc {
    let a = attr.attributes();
    let kind = match a.type_ {
        PerfEventType::Software(SoftwareCounterType::CpuClock) => EventKind::CpuClock,
        PerfEventType::Software(SoftwareCounterType::TaskClock) => EventKind::TaskClock,
        PerfEventType::Hardware(HardwareEventId::CpuCycles, _) => EventKind::Cycles,
        PerfEventType::Hardware(HardwareEventId::Instructions, _) => EventKind::Instructions,
        PerfEventType::DynamicPmu(4, config, _, _) => EventKind::Raw(config),
        _ => EventKind::Other,
    };
    let name = attr
        .name()
        .map(str::to_string)
        .unwrap_or_else(|| match kind {
            EventKind::CpuClock => "cpu-clock".into(),
            EventKind::TaskClock => "task-clock".into(),
            EventKind::Cycles => "cycles".into(),
            EventKind::Instructions => "instructions".into(),
            EventKind::Raw(c) => format!("r{c:x}"),
            EventKind::Other => format!("{:?}", a.type_),
        });
    let period = match a.sampling_policy {
        SamplingPolicy::Period(p) => PeriodMode::Fixed(p.get()),
        SamplingPolicy::Frequency(f) => PeriodMode::Frequency(f),
        SamplingPolicy::NoSampling => PeriodMode::Unknown,
    };
    let flags = a.flags.bits();
    EventDesc {
        name,
        kind,
        config: SamplingConfig {
            period,
            randomize_max: None,
            precise: ((flags >> 15) & 3) as u8,
            seed: None,
            user_only: flags & (1 << 5) != 0,
            callchain: a.sample_format.contains(SampleFormat::CALLCHAIN),
            branch_stack: a.sample_format.contains(SampleFormat::BRANCH_STACK),
        },
    }
}

/// Offset of the `PERF_SAMPLE_CALLCHAIN` count (or, without a call chain, of the field that
/// would follow it) in a raw `SAMPLE` body: fields in the kernel's order (see
/// `perf_event_open(2)`), `READ` with and without `GROUP`. `None` when the body is too short.
fn callchain_offset(
    b: &[u8],
    info: &linux_perf_data::linux_perf_event_reader::RecordParseInfo,
) -> Option<usize> {
    let sf = info.sample_format.bits();
    const IDENTIFIER: u64 = 1 << 16;
    const IP: u64 = 1 << 0;
    const TID: u64 = 1 << 1;
    const TIME: u64 = 1 << 2;
    const ADDR: u64 = 1 << 3;
    const READ: u64 = 1 << 4;
    const ID: u64 = 1 << 6;
    const CPU: u64 = 1 << 7;
    const PERIOD: u64 = 1 << 8;
    const STREAM_ID: u64 = 1 << 9;
    let mut p = 0usize;
    for bit in [IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU, PERIOD] {
        if sf & bit != 0 {
            p = p.checked_add(8)?;
        }
    }
    if sf & READ != 0 {
        let rf = info.read_format.bits();
        let n_opt = |m: u64| u64::from(rf & m != 0);
        if rf & 8 != 0 {
            // GROUP: nr, [enabled], [running], nr × (value, [id], [lost]).
            let nr = u64::from_le_bytes(b.get(p..p + 8)?.try_into().ok()?);
            p += 8;
            let per = 1 + n_opt(4) + n_opt(16);
            let skip = (n_opt(1) + n_opt(2)).checked_add(nr.checked_mul(per)?)?;
            p = p.checked_add(usize::try_from(skip.checked_mul(8)?).ok()?)?;
        } else {
            let words = 1 + n_opt(1) + n_opt(2) + n_opt(4) + n_opt(16);
            p = p.checked_add(8 * words as usize)?;
        }
    }
    (p <= b.len()).then_some(p)
}

/// A `SAMPLE` body whose call-chain count does not fit the record: `linux-perf-event-reader`
/// multiplies the count by 8 unchecked (an overflow panic in debug builds, a wrapped length
/// and a misread record otherwise; found by the perf_counts fuzz target).
fn check_callchain(
    b: &[u8],
    info: &linux_perf_data::linux_perf_event_reader::RecordParseInfo,
) -> Result<(), String> {
    const CALLCHAIN: u64 = 1 << 5;
    if info.sample_format.bits() & CALLCHAIN == 0 {
        return Ok(());
    }
    let Some(p) = callchain_offset(b, info) else {
        return Err("a SAMPLE record ends before its call chain".into());
    };
    let Some(nr) = b
        .get(p..p + 8)
        .map(|x| u64::from_le_bytes(x.try_into().expect("8 bytes")))
    else {
        return Err("a SAMPLE record ends before its call chain".into());
    };
    let room = (b.len() - p - 8) as u64 / 8;
    if nr > room {
        return Err(format!(
            "a SAMPLE record's call chain of {nr} entries does not fit its {} bytes",
            b.len()
        ));
    }
    Ok(())
}

/// Reads the branch stack of a raw `SAMPLE` record body (fields in the kernel's order up to
/// `PERF_SAMPLE_BRANCH_STACK`, see `perf_event_open(2)`). Little-endian files only.
fn branch_stack(
    data: &RawData<'_>,
    info: &linux_perf_data::linux_perf_event_reader::RecordParseInfo,
) -> Option<Vec<(u64, u64, u64)>> {
    let sf = info.sample_format.bits();
    const CALLCHAIN: u64 = 1 << 5;
    const RAW: u64 = 1 << 10;
    const BRANCH_STACK: u64 = 1 << 11;
    const HW_INDEX: u64 = 1 << 17;
    if sf & BRANCH_STACK == 0 {
        return None;
    }
    let b = data.as_slice();
    let rd = |p: &mut usize| -> Option<u64> {
        let v = u64::from_le_bytes(b.get(*p..*p + 8)?.try_into().ok()?);
        *p += 8;
        Some(v)
    };
    let mut p = callchain_offset(&b, info)?;
    if sf & CALLCHAIN != 0 {
        let nr = rd(&mut p)?;
        p = p.checked_add(usize::try_from(nr.checked_mul(8)?).ok()?)?;
    }
    if sf & RAW != 0 {
        let size = u32::from_le_bytes(b.get(p..p + 4)?.try_into().ok()?) as usize;
        p = p.checked_add(4 + size)?;
    }
    let nr = rd(&mut p)?;
    if info.branch_sample_format.bits() & HW_INDEX != 0 {
        rd(&mut p)?;
    }
    if nr > (b.len() as u64) / 24 {
        return None;
    }
    let mut out = Vec::with_capacity(nr as usize);
    for _ in 0..nr {
        out.push((rd(&mut p)?, rd(&mut p)?, rd(&mut p)?));
    }
    Some(out)
}

/// Reads a perf.data file with default options, taking ELF load segments from the local
/// disk (the paths the mmap records name).
pub fn read_perf_data(bytes: &[u8], path_for_errors: &Path) -> Result<SampleSet, FormatError> {
    let segs = ElfSegmentsFromDisk;
    read_perf_data_with(bytes, path_for_errors, &PerfDataOptions::default(), &segs).map(|x| x.0)
}

/// What the header of a perf.data file says, beyond its attributes.
pub(crate) struct FileInfo {
    /// One per attribute, in the file's order.
    pub(crate) events: Vec<EventDesc>,
    /// Build-ids of the `HEADER_BUILD_ID` feature, by path.
    pub(crate) build_ids: HashMap<String, BuildId>,
    /// The recorded command line.
    pub(crate) command: Vec<String>,
    /// Pipe mode (no header sections, metadata in the stream).
    pub(crate) pipe: bool,
}

/// `linux-perf-data`'s reader over a byte slice.
pub(crate) type SliceReader<'b> = PerfFileReader<Cursor<&'b [u8]>>;

/// Checks a perf.data file's header (size, magic, sections, feature counts, architecture,
/// byte order) and opens it with `linux-perf-data`.
pub(crate) fn open_perf_data<'b>(
    bytes: &'b [u8],
    path: &Path,
) -> Result<(SliceReader<'b>, FileInfo), FormatError> {
    if bytes.is_empty() {
        return Err(FormatError::Empty {
            what: "perf.data file",
        });
    }
    if bytes.len() < 16 {
        return Err(FormatError::Truncated {
            what: "perf.data file",
            offset: bytes.len() as u64,
            expected: "the 16-byte file header".into(),
        });
    }
    if bytes.starts_with(b"2ELIFREP") {
        // Refused before parsing: the header checks below read little-endian fields (a
        // big-endian header made linux-perf-data overflow; found by the perf_data fuzz
        // target).
        return Err(FormatError::WrongArchitecture {
            path: path.to_path_buf(),
            arch: "a big-endian machine".into(),
        });
    }
    if !bytes.starts_with(b"PERFILE2") {
        return Err(FormatError::NotThisFormat {
            what: "perf.data file",
            detail: format!("{}: the magic is not PERFILE2", path.display()),
        });
    }
    let header_size = u64::from_le_bytes(bytes[8..16].try_into().expect("16 bytes checked"));
    let pipe = header_size == 16;
    let reader = if pipe {
        check_pipe(bytes)?;
        PerfFileReader::parse_pipe(Cursor::new(bytes)).map_err(|e| perf_err(path, e))?
    } else {
        check_file_header(bytes, path)?;
        PerfFileReader::parse_file(Cursor::new(bytes)).map_err(|e| perf_err(path, e))?
    };
    let perf_file = &reader.perf_file;
    if let Ok(Some(arch)) = perf_file.arch() {
        if arch != "x86_64" {
            return Err(FormatError::WrongArchitecture {
                path: path.to_path_buf(),
                arch: arch.to_string(),
            });
        }
    }
    if perf_file.endian() != Endianness::LittleEndian {
        return Err(FormatError::WrongArchitecture {
            path: path.to_path_buf(),
            arch: "a big-endian machine".into(),
        });
    }
    let events: Vec<EventDesc> = perf_file
        .event_attributes()
        .iter()
        .map(event_desc)
        .collect();
    let mut build_ids = HashMap::new();
    if let Ok(ids) = perf_file.build_ids() {
        for (_, info) in ids {
            if !info.build_id.is_empty() {
                build_ids.insert(
                    String::from_utf8_lossy(&info.path).into_owned(),
                    BuildId(info.build_id),
                );
            }
        }
    }
    let command: Vec<String> = perf_file
        .cmdline()
        .ok()
        .flatten()
        .map(|v| v.iter().map(|s| s.to_string()).collect())
        .unwrap_or_default();
    Ok((
        reader,
        FileInfo {
            events,
            build_ids,
            command,
            pipe,
        },
    ))
}

/// Reads a perf.data file; `segments` supplies the objects' load segments.
pub fn read_perf_data_with(
    bytes: &[u8],
    path: &Path,
    opts: &PerfDataOptions,
    segments: &dyn SegmentSource,
) -> Result<(SampleSet, ReadNotes), FormatError> {
    let (reader, info) = open_perf_data(bytes, path)?;
    if !info.pipe {
        check_data_section(bytes)?;
    }
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = reader;
    let FileInfo {
        events,
        build_ids,
        command,
        ..
    } = info;
    let mut mapper = Mapper {
        by_pid: HashMap::new(),
        ctx: MapCtx::new(build_ids, segments),
    };
    // A sample record is at least 40 bytes with the usual fields: reserve once.
    let mut samples = Vec::with_capacity((bytes.len() / 40).min(1 << 26));
    let (mut lost, mut lost_samples) = (0u64, 0u64);
    loop {
        let rec = match record_iter.next_record(&mut perf_file) {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => return Err(perf_err(path, format!("{e} (file truncated or corrupt?)"))),
        };
        let PerfFileRecord::EventRecord { attr_index, record } = rec else {
            continue;
        };
        if record.record_type.0 == PERF_RECORD_LOST_SAMPLES {
            let b = record.data.as_slice();
            if let Some(v) = b.get(..8) {
                lost_samples += u64::from_le_bytes(v.try_into().expect("8 bytes"));
            }
            continue;
        }
        // linux-perf-event-reader asserts (panics) on an MMAP2 build-id longer than 20 bytes:
        // reject such a record here (found by the perf_data fuzz target).
        if record.record_type.0 == PERF_RECORD_MMAP2 && record.misc & MISC_MMAP_BUILD_ID != 0 {
            let body = record.data.as_slice();
            if body.get(32).is_some_and(|&n| n > 20) {
                return Err(perf_err(
                    path,
                    "an MMAP2 record states a build-id longer than 20 bytes (file corrupt)",
                ));
            }
        }
        if record.record_type.0 == PERF_RECORD_SAMPLE {
            check_callchain(&record.data.as_slice(), &record.parse_info)
                .map_err(|e| perf_err(path, format!("{e} (file corrupt)")))?;
        }
        let parsed = match record.parse() {
            Ok(p) => p,
            Err(e) => {
                return Err(perf_err(
                    path,
                    format!("a {:?} record cannot be parsed: {e}", record.record_type),
                ))
            }
        };
        match parsed {
            EventRecord::Sample(s) => {
                let Some(ip) = s.ip else { continue };
                let kernel = matches!(s.cpu_mode, CpuMode::Kernel) || ip >= KERNEL_START;
                if kernel && !opts.keep_kernel {
                    continue;
                }
                let pid = s.pid.unwrap_or(-1);
                let ip_loc = mapper.locate(pid, ip);
                let mut callchain = Vec::new();
                if let Some(cc) = s.callchain {
                    let mut first = true;
                    for i in 0..cc.len() {
                        let Some(a) = cc.get(i) else { break };
                        if a >= PERF_CONTEXT_MAX {
                            continue;
                        }
                        if first {
                            first = false;
                            if a == ip {
                                continue;
                            }
                        }
                        callchain.push(mapper.locate(pid, a));
                    }
                }
                let mut branches = Vec::new();
                if let Some(bs) = branch_stack(&record.data, &record.parse_info) {
                    for (from, to, flags) in bs {
                        branches.push(Branch {
                            from: mapper.locate(pid, from),
                            to: mapper.locate(pid, to),
                            mispredicted: flags & 1 != 0,
                            predicted_known: flags & 3 != 0,
                            cycles: ((flags >> 4) & 0xffff) as u32,
                        });
                    }
                }
                let event = u16::try_from(attr_index).map_err(|_| {
                    perf_err(path, format!("event index {attr_index} out of range"))
                })?;
                samples.push(Sample {
                    event,
                    pid: s.pid.unwrap_or(-1) as u32,
                    tid: s.tid.unwrap_or(-1) as u32,
                    time: s.timestamp.unwrap_or(0),
                    cpu: s.cpu.unwrap_or(u32::MAX),
                    period: s.period.unwrap_or_else(|| match events.get(attr_index) {
                        Some(EventDesc {
                            config:
                                SamplingConfig {
                                    period: PeriodMode::Fixed(p),
                                    ..
                                },
                            ..
                        }) => *p,
                        _ => 1,
                    }),
                    ip: ip_loc,
                    callchain,
                    branches,
                });
            }
            EventRecord::Mmap(m) if m.is_executable && !matches!(m.cpu_mode, CpuMode::Kernel) => {
                mapper.add(
                    m.pid,
                    Mapping::new(
                        m.address,
                        m.length,
                        m.page_offset,
                        String::from_utf8_lossy(&m.path.as_slice()).into_owned(),
                        None,
                    ),
                );
            }
            EventRecord::Mmap2(m)
                if m.protection & PROT_EXEC != 0 && !matches!(m.cpu_mode, CpuMode::Kernel) =>
            {
                let build_id = match &m.file_id {
                    linux_perf_data::linux_perf_event_reader::Mmap2FileId::BuildId(b)
                        if !b.is_empty() =>
                    {
                        Some(BuildId(b.clone()))
                    }
                    _ => None,
                };
                mapper.add(
                    m.pid,
                    Mapping::new(
                        m.address,
                        m.length,
                        m.page_offset,
                        String::from_utf8_lossy(&m.path.as_slice()).into_owned(),
                        build_id,
                    ),
                );
            }
            EventRecord::Fork(f) if f.pid != f.ppid => {
                if let Some(v) = mapper.by_pid.get(&f.ppid).cloned() {
                    mapper.by_pid.insert(f.pid, v);
                }
            }
            EventRecord::Comm(c) if c.is_execve => {
                mapper.by_pid.remove(&c.pid);
            }
            EventRecord::Lost(l) => lost += l.count,
            _ => {}
        }
    }
    let notes = std::mem::take(&mut mapper.ctx.notes);
    Ok((
        SampleSet {
            modules: mapper.ctx.modules,
            events,
            samples,
            lost: lost.max(lost_samples),
            command,
            outcome: None,
        },
        notes,
    ))
}

/// `PERF_RECORD_FINISHED_ROUND`: a header-only record (8 bytes).
pub(crate) const PERF_RECORD_FINISHED_ROUND: u32 = 68;

/// Walks the record headers of a file-mode data section (see [`check_records`]).
fn check_data_section(b: &[u8]) -> Result<(), FormatError> {
    let rd =
        |o: usize| -> Option<u64> { Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?)) };
    let (Some(off), Some(size)) = (rd(40), rd(48)) else {
        return Ok(());
    };
    let (Ok(off), Ok(size)) = (usize::try_from(off), usize::try_from(size)) else {
        return Ok(());
    };
    match off.checked_add(size) {
        Some(end) if end <= b.len() => check_records(b, off, end, false),
        _ => Ok(()),
    }
}

/// Walks the records of `b[start..end]` by their headers and refuses what
/// `linux-perf-data` would mishandle (both found by the fuzz targets):
/// * a `FINISHED_ROUND` record with a body: the crate does not skip it and reads it as the
///   next records, so one corrupt size field shifts every record after it;
/// * an `AUXTRACE` record announcing more trace data than the rest holds: the crate
///   allocates the announced size (up to 2^64 bytes) before reading it.
///
/// In pipe mode the `HEADER_FEATURE` records are checked too (see [`check_feature`]).
/// Like the crate, a record that starts before `end` is read whole even when it runs past
/// `end` (into the bytes that follow in the file). Impossible record sizes end the walk; the
/// crate reports them.
fn check_records(b: &[u8], start: usize, end: usize, pipe: bool) -> Result<(), FormatError> {
    const PERF_RECORD_AUXTRACE: u32 = 71;
    const PERF_RECORD_HEADER_FEATURE: u32 = 80;
    let mut p = start;
    while p < end && p + 8 <= b.len() {
        let ty = u32::from_le_bytes(b[p..p + 4].try_into().expect("4 bytes"));
        let size = usize::from(u16::from_le_bytes(
            b[p + 6..p + 8].try_into().expect("2 bytes"),
        ));
        if size < 8 || p + size > b.len() {
            break;
        }
        let body = &b[p + 8..p + size];
        match ty {
            PERF_RECORD_FINISHED_ROUND if size != 8 => {
                return Err(FormatError::Corrupt {
                    what: "perf.data file",
                    offset: p as u64,
                    detail: format!("a FINISHED_ROUND record of {size} bytes (it has no body: 8)"),
                });
            }
            PERF_RECORD_AUXTRACE => {
                let Some(aux) = body.get(..8) else { break };
                let aux = u64::from_le_bytes(aux.try_into().expect("8 bytes"));
                let after = p + size;
                let left = b.len() - after;
                if aux > left as u64 {
                    return Err(FormatError::Truncated {
                        what: "perf.data file",
                        offset: after as u64,
                        expected: format!(
                            "{aux} bytes of AUX trace data announced by the AUXTRACE record at byte {p}, {left} left"
                        ),
                    });
                }
                p = after + aux as usize;
                continue;
            }
            PERF_RECORD_HEADER_FEATURE if pipe && size >= 16 => {
                let feat = u64::from_le_bytes(body[..8].try_into().expect("8 bytes"));
                // The crate keeps the low 32 bits, so do the same.
                check_feature(feat as u32, &body[8..], (p + 16) as u64)?;
            }
            _ => {}
        }
        p += size;
    }
    Ok(())
}

/// Checks the file-mode header's sections lie inside the file before the crate reads them.
fn check_file_header(b: &[u8], path: &Path) -> Result<(), FormatError> {
    let rd =
        |o: usize| -> Option<u64> { Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?)) };
    let trunc = |what: &str| FormatError::Truncated {
        what: "perf.data file",
        offset: b.len() as u64,
        expected: format!("{what} (is {} complete?)", path.display()),
    };
    let header_size = rd(8).ok_or_else(|| trunc("the file header"))?;
    if header_size < 104 || header_size > b.len() as u64 {
        return Err(trunc("the 104-byte file header"));
    }
    // attrs at 24, data at 40, event_types at 56: each (offset, size).
    for (o, what) in [(24usize, "the attribute section"), (40, "the data section")] {
        let off = rd(o).ok_or_else(|| trunc(what))?;
        let size = rd(o + 8).ok_or_else(|| trunc(what))?;
        if off.checked_add(size).is_none_or(|e| e > b.len() as u64) {
            return Err(trunc(what));
        }
    }
    let attr_size = rd(16).ok_or_else(|| trunc("the file header"))?;
    if attr_size == 0 || attr_size > 4096 {
        return Err(FormatError::Corrupt {
            what: "perf.data file",
            offset: 16,
            detail: format!("attribute size {attr_size} is impossible"),
        });
    }
    // Event types section (56) and the feature table after the data section: one
    // (offset, size) per bit set in the 256-bit feature bitmap at 72.
    let et_off = rd(56).ok_or_else(|| trunc("the file header"))?;
    let et_size = rd(64).ok_or_else(|| trunc("the file header"))?;
    if et_off
        .checked_add(et_size)
        .is_none_or(|e| e > b.len() as u64)
    {
        return Err(trunc("the event types section"));
    }
    let data_end = rd(40).unwrap_or(0).saturating_add(rd(48).unwrap_or(0));
    let mut table = usize::try_from(data_end).map_err(|_| trunc("the feature table"))?;
    for word in 0..4usize {
        let bits = rd(72 + 8 * word).ok_or_else(|| trunc("the file header"))?;
        for bit in 0..64u32 {
            if bits & (1u64 << bit) == 0 {
                continue;
            }
            let feature = word as u32 * 64 + bit;
            let off = rd(table).ok_or_else(|| trunc("the feature table"))?;
            let size = rd(table + 8).ok_or_else(|| trunc("the feature table"))?;
            table += 16;
            let end = off.checked_add(size).filter(|&e| e <= b.len() as u64);
            let Some(end) = end else {
                return Err(trunc(&format!("feature section {feature}")));
            };
            check_feature(feature, &b[off as usize..end as usize], off)?;
        }
    }
    let has_event_desc = rd(72).is_some_and(|w| w & (1 << 12) != 0);
    if !has_event_desc {
        // perf_file_attr = attr + ids section; attr_size in the header covers both.
        let (a_off, a_size) = (rd(24).unwrap_or(0), rd(32).unwrap_or(0));
        if attr_size >= 64 + 16 {
            check_attr_entries(
                b,
                a_off,
                a_size,
                attr_size,
                attr_size - 16,
                "attribute section",
            )?;
        }
        check_attr_entries(
            b,
            et_off,
            et_size,
            attr_size + 16,
            attr_size,
            "event types section",
        )?;
    }
    Ok(())
}

/// Validates the counts inside the feature sections the reader parses (event descriptions,
/// strings, string lists) so that a corrupt count is an error, not a huge allocation.
fn check_feature(feature: u32, d: &[u8], at: u64) -> Result<(), FormatError> {
    const HOSTNAME: u32 = 3;
    const OSRELEASE: u32 = 4;
    const VERSION: u32 = 5;
    const ARCH: u32 = 6;
    const CPUDESC: u32 = 8;
    const CPUID: u32 = 9;
    const CMDLINE: u32 = 11;
    const EVENT_DESC: u32 = 12;
    let bad = |detail: &str| FormatError::Corrupt {
        what: "perf.data file",
        offset: at,
        detail: format!("feature section {feature}: {detail}"),
    };
    let u32_at = |p: usize| -> Option<u64> {
        Some(u64::from(u32::from_le_bytes(
            d.get(p..p.checked_add(4)?)?.try_into().ok()?,
        )))
    };
    // A perf_header_string at p: u32 len + len bytes; returns the end.
    let string_end = |p: usize| -> Option<usize> {
        let len = usize::try_from(u32_at(p)?).ok()?;
        let end = p.checked_add(4)?.checked_add(len)?;
        (end <= d.len()).then_some(end)
    };
    match feature {
        HOSTNAME | OSRELEASE | VERSION | ARCH | CPUDESC | CPUID => {
            string_end(0).ok_or_else(|| bad("string longer than its section"))?;
        }
        CMDLINE => {
            let nr = u32_at(0).ok_or_else(|| bad("no string count"))?;
            if nr > d.len() as u64 / 4 {
                return Err(bad("more strings than bytes"));
            }
            let mut p = 4usize;
            for _ in 0..nr {
                p = string_end(p).ok_or_else(|| bad("string longer than its section"))?;
            }
        }
        EVENT_DESC => {
            let nr = u32_at(0).ok_or_else(|| bad("no event count"))?;
            let attr_size = u32_at(4).ok_or_else(|| bad("no attribute size"))? as usize;
            if nr > d.len() as u64 / 8 {
                return Err(bad("more events than bytes"));
            }
            let mut p = 8usize;
            for _ in 0..nr {
                let s = u32_at(p + 4).ok_or_else(|| bad("attribute beyond the section"))?;
                if !attr_size_ok(s, attr_size as u64) {
                    return Err(bad(&format!(
                        "attribute size {s} is not a perf_event_attr version (or exceeds {attr_size})"
                    )));
                }
                p = p
                    .checked_add(attr_size)
                    .filter(|&e| e <= d.len())
                    .ok_or_else(|| bad("attribute beyond the section"))?;
                let nr_ids = u32_at(p).ok_or_else(|| bad("no id count"))? as usize;
                p = string_end(p + 4).ok_or_else(|| bad("event name beyond the section"))?;
                p = nr_ids
                    .checked_mul(8)
                    .and_then(|n| p.checked_add(n))
                    .filter(|&e| e <= d.len())
                    .ok_or_else(|| bad("event ids beyond the section"))?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Whether `s`, the size field of a `perf_event_attr` stored in `slot` bytes, makes the
/// parser consume exactly `slot` bytes: `s` must be a published attr version size
/// (`PERF_ATTR_SIZE_VER0..7` = 64, 72, 80, 96, 104, 112, 120, 128) or larger than the last,
/// and fit the slot. Other sizes make `linux-perf-event-reader` read a different number of
/// bytes than the slot holds, and the following counts would be misread.
fn attr_size_ok(s: u64, slot: u64) -> bool {
    (s >= 128 || [64, 72, 80, 96, 104, 112, 120].contains(&s)) && s <= slot
}

/// Validates the attribute and event-types sections the crate parses when a file has no
/// `EVENT_DESC` feature: every entry's attr size field, and every ids section in the file.
fn check_attr_entries(
    b: &[u8],
    off: u64,
    size: u64,
    entry: u64,
    attr_slot: u64,
    what: &'static str,
) -> Result<(), FormatError> {
    let bad = |at: u64, detail: String| FormatError::Corrupt {
        what: "perf.data file",
        offset: at,
        detail: format!("{what}: {detail}"),
    };
    if entry == 0 {
        return Ok(());
    }
    let rd = |o: u64| -> Option<u64> {
        let o = usize::try_from(o).ok()?;
        Some(u64::from_le_bytes(
            b.get(o..o.checked_add(8)?)?.try_into().ok()?,
        ))
    };
    for k in 0..size / entry {
        let at = off + k * entry;
        let s = rd(at)
            .map(|v| v >> 32)
            .ok_or_else(|| bad(at, "entry beyond the file".into()))?;
        if !attr_size_ok(s, attr_slot) {
            return Err(bad(
                at,
                format!("attribute size {s} is not a perf_event_attr version"),
            ));
        }
        if entry >= attr_slot + 16 {
            let ids_off = rd(at + attr_slot).unwrap_or(u64::MAX);
            let ids_size = rd(at + attr_slot + 8).unwrap_or(u64::MAX);
            if ids_off
                .checked_add(ids_size)
                .is_none_or(|e| e > b.len() as u64)
            {
                return Err(bad(at, "event ids beyond the file".into()));
            }
        }
    }
    Ok(())
}

/// Pipe mode: the records after the 16-byte header (see [`check_records`]), before the
/// crate parses the `HEADER_FEATURE` records eagerly.
fn check_pipe(b: &[u8]) -> Result<(), FormatError> {
    check_records(b, 16, b.len(), true)
}
