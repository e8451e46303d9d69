//! `perf.data` files (file mode and pipe mode) through the `linux-perf-data` crate.
//!
//! * Samples: ip, pid/tid, time, cpu, period, event (the file's attribute index), call chain
//!   (context markers dropped, the leading copy of the ip dropped), branch stack (read from
//!   the raw record by [`crate::perf_record`], the repairs of `linux-perf-event-reader` 0.10
//!   shared with the recorder: `from`, `to`, flags bit 0 = mispredicted, bit 1 = predicted,
//!   bits 4..20 = cycles).
//! * Modules: `MMAP`/`MMAP2` records of executable mappings, per process, inherited on
//!   `FORK`, cleared on `exec`; the build-ids of the `HEADER_BUILD_ID` feature and of
//!   `MMAP2` records carrying one are put on the modules. A runtime ip becomes an SVMA
//!   through the mapping's file offset and the object's `PT_LOAD` segments
//!   (see [`crate::segments`]); kernel addresses go to a `[kernel.kallsyms]` module with
//!   SVMA = address.
//! * Lost samples: the larger of the sum of `LOST` records and the sum of `LOST_SAMPLES`
//!   records (both count the kernel's ring-buffer drops; perf ≥ 5.x writes both).
//! * Recording health ([`proftrust_model::RecordingHealth`]): `THROTTLE`/`UNTHROTTLE`
//!   records counted, the time between each throttle and the next unthrottle of its stream
//!   summed; `time_enabled`/`time_running` of `PERF_SAMPLE_READ` values and `READ` records,
//!   the last per stream, summed per event.
//! * Compressed (`COMPRESSED`/`COMPRESSED2`, zstd) records: decompressed by the crate.
//! * Only x86-64 files are accepted: another `arch` in the header gives
//!   [`FormatError::WrongArchitecture`].

use crate::error::FormatError;
pub(crate) use crate::perf_record::PERF_RECORD_LOST_SAMPLES;
use crate::perf_record::{read_values, RawBranch, ReadValues, SampleParts};
use crate::segments::{ElfSegmentsFromDisk, SegmentSource, SegmentTable};
use crate::stacks::Stacks;
use crate::ReadNotes;
use linux_perf_data::linux_perf_event_reader::{
    CommOrExecRecord, CpuMode, EventRecord, ForkOrExitRecord, HardwareEventId, LostRecord,
    Mmap2FileId, Mmap2Record, MmapRecord, PerfEventType, RawData, RawEventRecord, RecordParseInfo,
    SampleFormat, SampleRecord, SamplingPolicy, SoftwareCounterType, ThrottleRecord,
};
use linux_perf_data::{Endianness, PerfFileReader, PerfFileRecord};
use proftrust_model::unwind::UnwindSource;
use proftrust_model::{
    BuildId, EventDesc, EventKind, Location, Module, ModuleIdx, ModuleTable, PeriodMode, Sample,
    SampleSet, SamplingConfig, ThreadName, ThreadStart,
};
use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Cursor;
use std::path::Path;
use std::rc::Rc;

/// Values at or above this in a call chain are context markers (`PERF_CONTEXT_MAX` = -4095).
const PERF_CONTEXT_MAX: u64 = (-4095i64) as u64;
/// `PERF_RECORD_SAMPLE`.
const PERF_RECORD_SAMPLE: u32 = 9;
/// `PERF_RECORD_READ`: pid, tid, read values (written on exit with `inherit_stat`).
const PERF_RECORD_READ: u32 = 8;
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

/// Adds `m` to one process's mappings (sorted by start, disjoint). The parts of older
/// mappings that `m` overlaps are replaced, as a new `mmap` over part of an old range
/// replaces just that part in the kernel; the parts before and after stay (perf's
/// `maps__fixup_overlappings` does the same), so a loader that maps a library and then
/// remaps a piece of it keeps the rest attributed.
pub(crate) fn add_mapping(v: &mut Vec<Mapping>, m: Mapping) {
    let first = v.partition_point(|x| x.end <= m.start);
    let mut last = first;
    while last < v.len() && v[last].start < m.end {
        last += 1;
    }
    let mut keep: Vec<Mapping> = Vec::new();
    for x in &v[first..last] {
        if x.start < m.start {
            let mut head = x.clone();
            head.end = m.start;
            keep.push(head);
        }
        if x.end > m.end {
            let mut tail = x.clone();
            tail.pgoff = x.pgoff.saturating_add(m.end - x.start);
            tail.start = m.end;
            keep.push(tail);
        }
    }
    let mut new = keep;
    let i = new.partition_point(|x| x.start < m.start);
    new.insert(i, m);
    v.splice(first..last, new);
}

/// What a record does to the address spaces, from the crate's parsed record: the one rule
/// both readers of perf.data files follow, the full reader at once (`Mapper::apply`), the
/// streaming counter in time order into versions of each process's mappings
/// (`perf_counts.rs`).
#[derive(Debug, Clone)]
pub(crate) enum SpaceChange {
    /// A kernel-mode mapping (the kernel image or a module), whatever its protection.
    Kernel(Mapping),
    /// An executable mapping of process `pid`.
    Map { pid: i32, mapping: Mapping },
    /// Process `pid` forked from `ppid` (a new thread of a process is no change).
    Fork { pid: i32, ppid: i32 },
    /// Process `pid` exec'd.
    Exec { pid: i32 },
}

impl SpaceChange {
    /// The change a parsed record makes, if any: the full reader's handlers' rule
    /// ([`SpaceChange::of_mmap`], [`SpaceChange::of_mmap2`], [`SpaceChange::of_fork`],
    /// [`SpaceChange::of_comm`]), for the streaming counter, which keeps nothing else of
    /// these records. A new record type that changes address spaces gets its arm here.
    pub(crate) fn of(record: &EventRecord<'_>) -> Option<SpaceChange> {
        match record {
            EventRecord::Mmap(m) => SpaceChange::of_mmap(m),
            EventRecord::Mmap2(m) => SpaceChange::of_mmap2(m),
            EventRecord::Fork(f) => SpaceChange::of_fork(f),
            EventRecord::Comm(c) => SpaceChange::of_comm(c),
            _ => None,
        }
    }

    /// An `MMAP` record: kernel-mode, an executable mapping, or nothing (a data mapping,
    /// `PERF_RECORD_MISC_MMAP_DATA`).
    pub(crate) fn of_mmap(m: &MmapRecord<'_>) -> Option<SpaceChange> {
        let mapping = Mapping::new(m.address, m.length, m.page_offset, lossy(&m.path), None);
        match m.cpu_mode {
            CpuMode::Kernel => Some(SpaceChange::Kernel(mapping)),
            _ if m.is_executable => Some(SpaceChange::Map {
                pid: m.pid,
                mapping,
            }),
            _ => None,
        }
    }

    /// An `MMAP2` record: kernel-mode, an executable mapping (`PROT_EXEC`, with the build-id
    /// the record carries, if any), or nothing.
    pub(crate) fn of_mmap2(m: &Mmap2Record<'_>) -> Option<SpaceChange> {
        if matches!(m.cpu_mode, CpuMode::Kernel) {
            let mapping = Mapping::new(m.address, m.length, m.page_offset, lossy(&m.path), None);
            return Some(SpaceChange::Kernel(mapping));
        }
        if m.protection & PROT_EXEC == 0 {
            return None;
        }
        let build_id = match &m.file_id {
            Mmap2FileId::BuildId(b) if !b.is_empty() => Some(BuildId(b.clone())),
            _ => None,
        };
        let mapping = Mapping::new(m.address, m.length, m.page_offset, lossy(&m.path), build_id);
        Some(SpaceChange::Map {
            pid: m.pid,
            mapping,
        })
    }

    /// A `FORK` record: a new process (`pid != ppid`), or nothing (a new thread).
    pub(crate) fn of_fork(f: &ForkOrExitRecord) -> Option<SpaceChange> {
        (f.pid != f.ppid).then_some(SpaceChange::Fork {
            pid: f.pid,
            ppid: f.ppid,
        })
    }

    /// A `COMM` record: an exec (`PERF_RECORD_MISC_COMM_EXEC`), or nothing (a rename).
    pub(crate) fn of_comm(c: &CommOrExecRecord<'_>) -> Option<SpaceChange> {
        c.is_execve.then_some(SpaceChange::Exec { pid: c.pid })
    }

    /// Applies the change: a mapping replaces what it overlaps ([`add_mapping`]) among the
    /// kernel's or its process's mappings; a forked process starts with its parent's
    /// mappings (none when the parent's are not known); an exec empties the process's.
    /// Returns the process whose mappings changed (`None` for kernel mappings and for a
    /// change that changed nothing).
    pub(crate) fn apply(
        self,
        by_pid: &mut HashMap<i32, Vec<Mapping>>,
        kernel_maps: &mut Vec<Mapping>,
    ) -> Option<i32> {
        match self {
            SpaceChange::Kernel(m) => {
                add_mapping(kernel_maps, m);
                None
            }
            SpaceChange::Map { pid, mapping } => {
                add_mapping(by_pid.entry(pid).or_default(), mapping);
                Some(pid)
            }
            SpaceChange::Fork { pid, ppid } => {
                let parent = by_pid.get(&ppid)?.clone();
                by_pid.insert(pid, parent);
                Some(pid)
            }
            SpaceChange::Exec { pid } => by_pid.remove(&pid).map(|_| pid),
        }
    }
}

/// A path as a record holds it (not necessarily UTF-8).
fn lossy(path: &RawData<'_>) -> String {
    String::from_utf8_lossy(&path.as_slice()).into_owned()
}

/// The module name perf gives a kernel module mapped from `path`
/// (`/lib/modules/6.1.0/kernel/arch/x86/kvm/kvm-intel.ko.xz` -> `[kvm_intel]`).
pub(crate) fn kernel_module_name(path: &str) -> String {
    if path.starts_with('[') {
        return path.to_string();
    }
    let base = path.rsplit('/').next().unwrap_or(path);
    let stem = base.split(".ko").next().unwrap_or(base);
    format!("[{}]", stem.replace('-', "_"))
}

/// Where a sample or a call-chain entry was taken, from the record's `cpumode`
/// (`misc & 7`) or a call chain's context marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Space {
    /// User space of the sampled process.
    User,
    /// The host kernel (and its modules).
    Kernel,
    /// A guest's kernel.
    GuestKernel,
    /// A guest's user space.
    GuestUser,
    /// The hypervisor.
    Hypervisor,
    /// Not stated (cpumode 0): decided by address, as old perf versions did.
    Unknown,
}

impl Space {
    /// From `misc & PERF_RECORD_MISC_CPUMODE_MASK`.
    pub(crate) fn of_misc(misc: u16) -> Space {
        match misc & 7 {
            1 => Space::Kernel,
            2 => Space::User,
            3 => Space::Hypervisor,
            4 => Space::GuestKernel,
            5 => Space::GuestUser,
            _ => Space::Unknown,
        }
    }

    /// From a call-chain context marker (`PERF_CONTEXT_*`), `None` when `v` is no marker.
    pub(crate) fn of_marker(v: u64) -> Option<Space> {
        Some(match v as i64 {
            -32 => Space::Hypervisor,
            -128 => Space::Kernel,
            -512 => Space::User,
            -2048 | -2176 => Space::GuestKernel,
            -2560 => Space::GuestUser,
            _ => return None,
        })
    }

    /// User or kernel for an address of this space (`Unknown` by address).
    pub(crate) fn resolve(self, ip: u64) -> Space {
        match self {
            Space::Unknown if ip >= KERNEL_START => Space::Kernel,
            Space::Unknown => Space::User,
            s => s,
        }
    }

    /// Whether samples of this space are kernel samples (dropped without `keep_kernel`).
    pub(crate) fn is_kernel(self) -> bool {
        matches!(self, Space::Kernel | Space::GuestKernel | Space::Hypervisor)
    }
}

/// What turns runtime addresses into module-relative locations: the module table being
/// built, the build-ids of the file, the objects' load segments (cached per path).
pub(crate) struct MapCtx<'s> {
    pub(crate) modules: ModuleTable,
    pub(crate) build_ids: HashMap<String, BuildId>,
    pub(crate) segments: &'s dyn SegmentSource,
    pub(crate) seg_cache: HashMap<(String, Option<BuildId>), Option<Rc<SegmentTable>>>,
    pub(crate) kernel: Option<ModuleIdx>,
    /// Kernel mappings (`MMAP` records with cpumode kernel: the image and its modules),
    /// sorted by start, disjoint.
    pub(crate) kernel_maps: Vec<Mapping>,
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
            kernel_maps: Vec::new(),
            notes: ReadNotes::default(),
            unreadable: Default::default(),
        }
    }

    /// The `[kernel.kallsyms]` module (interned on first use), with the kernel's build-id
    /// when the file's `HEADER_BUILD_ID` states one (kernel symbols are matched by it).
    pub(crate) fn kernel(&mut self) -> ModuleIdx {
        if let Some(k) = self.kernel {
            return k;
        }
        let mut m = Module::new("[kernel.kallsyms]");
        m.build_id = self.build_ids.get("[kernel.kallsyms]").cloned();
        let k = self.modules.intern(m);
        self.kernel = Some(k);
        k
    }

    /// The location of kernel-mode address `ip`: in a loadable module's mapping, that
    /// module (named as perf names it, `[kvm]`); in the kernel image's mapping or at a
    /// kernel address (≥ `0xffff800000000000`), `[kernel.kallsyms]`; the SVMA is the address
    /// (kernel symbols, from kallsyms or vmlinux, are stated at run-time addresses). A
    /// kernel-mode sample at a user-space address no kernel mapping holds is in no module
    /// (perf: `[unknown]`; issue 31 item 6).
    pub(crate) fn locate_kernel(&mut self, ip: u64) -> Location {
        let i = self.kernel_maps.partition_point(|x| x.start <= ip);
        let held = i
            .checked_sub(1)
            .and_then(|i| self.kernel_maps.get_mut(i))
            .filter(|m| ip < m.end);
        let m = match held {
            Some(m) if !m.path.starts_with("[kernel.kallsyms]") => m,
            Some(_) => return Location::new(self.kernel(), ip),
            None if ip >= KERNEL_START => return Location::new(self.kernel(), ip),
            None => return Location::unmapped(ip),
        };
        let idx = match m.module {
            Some(x) => x,
            None => {
                let mut module = Module::new(kernel_module_name(&m.path));
                module.build_id = m
                    .build_id
                    .clone()
                    .or_else(|| self.build_ids.get(&m.path).cloned());
                let x = self.modules.intern(module);
                m.module = Some(x);
                x
            }
        };
        Location::new(idx, ip)
    }

    /// The location of `ip` in a space other than the sampled process's user space.
    pub(crate) fn locate_other(&mut self, space: Space, ip: u64) -> Location {
        match space {
            Space::GuestKernel => {
                let m = self.modules.intern(Module::new("[guest.kernel.kallsyms]"));
                Location::new(m, ip)
            }
            Space::Hypervisor => {
                let m = self.modules.intern(Module::new("[hypervisor]"));
                Location::new(m, ip)
            }
            Space::GuestUser => Location::unmapped(ip),
            _ => self.locate_kernel(ip),
        }
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
    /// The user stacks' unwinder (`--call-graph dwarf` recordings).
    stacks: Stacks<'s>,
}

impl Mapper<'_> {
    /// Applies an address-space change ([`SpaceChange::apply`]) to the mappings and to the
    /// user stacks' unwinder.
    fn apply(&mut self, change: SpaceChange) {
        match &change {
            SpaceChange::Map { pid, mapping: m } => {
                let build_id = m
                    .build_id
                    .clone()
                    .or_else(|| self.ctx.build_ids.get(&m.path).cloned());
                self.stacks
                    .map(*pid, m.start, m.end, m.pgoff, &m.path, build_id.as_ref());
            }
            SpaceChange::Fork { pid, ppid } if self.by_pid.contains_key(ppid) => {
                self.stacks.fork(*ppid, *pid);
            }
            SpaceChange::Exec { pid } => self.stacks.exec(*pid),
            _ => {}
        }
        change.apply(&mut self.by_pid, &mut self.ctx.kernel_maps);
    }

    fn locate(&mut self, pid: i32, space: Space, ip: u64) -> Location {
        match space.resolve(ip) {
            Space::User => match self.by_pid.get_mut(&pid) {
                Some(v) => self.ctx.locate_in(v, ip),
                None => Location::unmapped(ip),
            },
            other => self.ctx.locate_other(other, ip),
        }
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
    // An event the file does not name is named as perf names it.
    let name = attr
        .name()
        .map(str::to_string)
        .unwrap_or_else(|| crate::perf_names::event_name(&a.type_));
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

/// `perf_event_attr.read_format` of each attribute as the file states it, in the file's
/// attribute order (the attribute section in file mode, the `HEADER_ATTR` records in pipe
/// mode; the word at byte 32 of `perf_event_attr`). `linux-perf-event-reader` keeps only
/// the bits it knows (`from_bits_truncate`) and drops `PERF_FORMAT_LOST` (bit 4, Linux
/// 6.0), so a sample's read values would be measured 8 bytes short per value and the
/// fields after them (the call chain) misread (upstream report:
/// `docs/upstream/event-reader-read-format-lost.md`). An attribute this cannot find gets `None`.
pub(crate) fn raw_read_formats(bytes: &[u8]) -> Vec<Option<u64>> {
    let rd = |o: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            bytes.get(o..o.checked_add(8)?)?.try_into().ok()?,
        ))
    };
    let mut out = Vec::new();
    match rd(8) {
        Some(16) => {
            // Pipe mode: the HEADER_ATTR records (type 64), in stream order.
            let mut p = 16usize;
            while let Some(h) = bytes.get(p..p + 8) {
                let ty = u32::from_le_bytes(h[..4].try_into().expect("4 bytes"));
                let size = usize::from(u16::from_le_bytes(h[6..8].try_into().expect("2 bytes")));
                if size < 8 {
                    break;
                }
                if ty == 64 {
                    out.push(rd(p + 8 + 32));
                }
                p += size;
            }
        }
        Some(_) => {
            // File mode: attr_size at 16, the attribute section (offset, size) at 24.
            let (Some(entry), Some(off), Some(size)) = (rd(16), rd(24), rd(32)) else {
                return out;
            };
            if entry < 40 {
                return out;
            }
            for i in 0..(size / entry).min(1 << 16) {
                let at = off
                    .checked_add(i * entry)
                    .and_then(|a| usize::try_from(a).ok());
                out.push(at.and_then(|a| rd(a.checked_add(32)?)));
            }
        }
        None => {}
    }
    out
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
    /// The recording machine's architecture (`HEADER_ARCH`: `x86_64`, `aarch64`, `i686`).
    pub(crate) arch: Option<String>,
}

/// `PERF_RECORD_HEADER_TRACING_DATA`: in pipe mode, followed by that many bytes of tracing
/// data that its header size does not count.
const PERF_RECORD_HEADER_TRACING_DATA: u32 = 66;

/// The bytes to parse, after the repairs perf makes too (each one a warning):
///
/// * **pipe mode**: the tracing data after a `HEADER_TRACING_DATA` record (tracepoint
///   events) is skipped, since its size is not in the record header (linux-perf-data reads
///   it as records and loses every sample after it; upstream report:
///   `docs/upstream/perf-data-pipe-tracing-data.md`); a stream that ends inside a record is
///   read up to the last complete record ("perf record was interrupted?");
/// * **file mode**: a header whose data size is 0 (perf record killed before it rewrote the
///   header; no feature sections either) or whose data section runs past the end of the file
///   (a cut copy) is read up to the last complete record, without feature sections; in a
///   complete file, a record whose size field is impossible (under 8, or running past the
///   data section: perf 6.1 fails there) ends the reading: the records before it are read
///   (the rest of the section is overwritten with header-only `FINISHED_ROUND` records so
///   the feature sections stay where the header says), a warning gives the numbers, and it
///   is an error when no sample precedes it.
///
/// A version-1 file (`PERFFILE`) is refused naming its version.
pub(crate) fn prepare(bytes: &[u8]) -> Result<Prepared<'_>, FormatError> {
    if bytes.starts_with(b"PERFFILE") {
        return Err(FormatError::UnsupportedVersion {
            what: "perf.data file",
            found: "1 (magic PERFFILE)".into(),
            supported: "version 2 (magic PERFILE2, perf since Linux 2.6.37)",
            hint: "it was written by a perf from before 2011; convert it with that perf (`perf report -D`) or record again",
        });
    }
    if bytes.len() < 16 || !bytes.starts_with(b"PERFILE2") {
        return Ok((Cow::Borrowed(bytes), Vec::new()));
    }
    if le_u64_at(bytes, 8).unwrap_or(0) == 16 {
        return Ok(prepare_pipe(bytes));
    }
    // File mode: data section (offset, size) at 40.
    let (Some(off), Some(size)) = (le_u64_at(bytes, 40), le_u64_at(bytes, 48)) else {
        return Ok((Cow::Borrowed(bytes), Vec::new()));
    };
    let len = bytes.len() as u64;
    if off < 104 || off > len {
        return Ok((Cow::Borrowed(bytes), Vec::new()));
    }
    let stated_end = off.checked_add(size);
    let killed = size == 0 && len > off;
    let cut = stated_end.is_none_or(|e| e > len);
    // Walk the records up to the stated end (or the file's end), stopping at an impossible
    // record size.
    let walk_end = if killed || cut {
        len
    } else {
        stated_end.unwrap_or(len)
    } as usize;
    let walk = walk_records(bytes, off as usize, walk_end);
    if killed || cut {
        return Ok(read_unfinished(
            bytes,
            off,
            size,
            walk.end as u64 - off,
            killed,
        ));
    }
    match walk.bad.filter(|_| walk.end < walk_end) {
        None => Ok((Cow::Borrowed(bytes), Vec::new())),
        Some(bad) => skip_bad_record(bytes, off, walk_end, &walk, bad),
    }
}

/// The bytes to parse and the warnings about the repairs ([`prepare`]).
pub(crate) type Prepared<'a> = (Cow<'a, [u8]>, Vec<String>);

/// The little-endian `u64` at `o` of `b`, if `b` holds it.
fn le_u64_at(b: &[u8], o: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(o..o.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// [`prepare`] in pipe mode: the records walked from byte 16, the tracing data after a
/// `HEADER_TRACING_DATA` record left out, the stream read up to its last complete record.
fn prepare_pipe(bytes: &[u8]) -> Prepared<'_> {
    let mut warnings = Vec::new();
    let mut p = 16usize;
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0usize;
    let mut end = bytes.len();
    let mut declared: Option<usize> = None;
    while p < bytes.len() {
        let Some(h) = bytes.get(p..p + 8) else {
            end = p;
            break;
        };
        let ty = u32::from_le_bytes(h[..4].try_into().expect("4 bytes"));
        let size = usize::from(u16::from_le_bytes(h[6..8].try_into().expect("2 bytes")));
        if size < 8 || p + size > bytes.len() {
            end = p;
            declared = Some(size);
            break;
        }
        if ty == PERF_RECORD_HEADER_TRACING_DATA {
            let data = bytes.get(p + 8..p + 12).map_or(0, |b| {
                u32::from_le_bytes(b.try_into().expect("4 bytes")) as usize
            });
            let skip_to = p.saturating_add(size).saturating_add(data);
            let o = out.get_or_insert_with(|| Vec::with_capacity(bytes.len()));
            o.extend_from_slice(&bytes[copied..p]);
            if skip_to > bytes.len() {
                warnings.push(format!(
                    "the tracing data at byte {p} announces {data} bytes but the stream ends first: nothing after it was read (perf record was interrupted?)"
                ));
                copied = bytes.len();
                end = bytes.len();
                break;
            }
            copied = skip_to;
            p = skip_to;
            continue;
        }
        p += size;
    }
    if end < bytes.len() {
        warnings.push(format!(
            "the stream ends inside a record at byte {end} ({} bytes of it are there{}): the complete records before it were read (perf record was interrupted?)",
            bytes.len() - end,
            declared.map_or_else(String::new, |d| format!(", its header declares {d}"))
        ));
    }
    match out {
        Some(mut o) => {
            if copied < end {
                o.extend_from_slice(&bytes[copied..end]);
            }
            (Cow::Owned(o), warnings)
        }
        None => (Cow::Borrowed(&bytes[..end]), warnings),
    }
}

/// How far the records of a data section read ([`walk_records`]).
struct Walk {
    /// Where the walk stopped: the end of the last complete record.
    end: usize,
    /// Complete records, and samples among them.
    records: u64,
    samples: u64,
    /// The record that stopped the walk: (type, declared size).
    bad: Option<(u32, usize)>,
}

/// Walks the records from `off` up to `walk_end`, stopping at an impossible record size
/// (under 8, or running past `walk_end`); AUXTRACE data is stepped over.
fn walk_records(bytes: &[u8], off: usize, walk_end: usize) -> Walk {
    let mut p = off;
    let (mut records, mut samples) = (0u64, 0u64);
    let mut bad: Option<(u32, usize)> = None;
    while p < walk_end {
        let Some(h) = bytes.get(p..p + 8) else { break };
        let ty = u32::from_le_bytes(h[..4].try_into().expect("4 bytes"));
        let rsize = usize::from(u16::from_le_bytes(h[6..8].try_into().expect("2 bytes")));
        if rsize < 8 || p + rsize > walk_end {
            bad = Some((ty, rsize));
            break;
        }
        records += 1;
        samples += u64::from(ty == PERF_RECORD_SAMPLE);
        // AUXTRACE data follows its record (checked later by check_records).
        if ty == 71 {
            let aux = le_u64_at(bytes, p + 8).unwrap_or(u64::MAX);
            match (p + rsize).checked_add(usize::try_from(aux).unwrap_or(usize::MAX)) {
                Some(e) if e <= walk_end => {
                    p = e;
                    continue;
                }
                _ => break,
            }
        }
        p += rsize;
    }
    Walk {
        end: p,
        records,
        samples,
        bad,
    }
}

/// A complete file with a record whose size field is impossible (below the 8-byte header,
/// or running past the data section, which ends at `walk_end`): perf 6.1 stops with
/// "failed to process sample". Reads the complete records before it, and says what was
/// skipped; nothing readable is an error.
fn skip_bad_record<'a>(
    bytes: &'a [u8],
    off: u64,
    walk_end: usize,
    walk: &Walk,
    (ty, rsize): (u32, usize),
) -> Result<Prepared<'a>, FormatError> {
    let (p, records, samples) = (walk.end, walk.records, walk.samples);
    let good = p as u64 - off;
    let left = walk_end - p;
    let what = format!(
        "the record at byte {p} (type {ty}) declares {rsize} bytes but {} (its data section ends at byte {walk_end}, {left} bytes after it)",
        if rsize < 8 { "a record has at least its 8-byte header" } else { "runs past its section" }
    );
    if samples == 0 {
        return Err(FormatError::Corrupt {
            what: "perf.data file",
            offset: p as u64,
            detail: format!(
                "{what}: no sample precedes it ({records} records before it), so nothing can be read; the file is corrupt (perf report fails on it too)"
            ),
        });
    }
    let mut warnings = vec![format!(
        "{what}: the {records} records before it ({samples} samples) were read and the {left} bytes from it to the end of the data section skipped (a corrupt file?)"
    )];
    let mut fixed = bytes.to_vec();
    if left % 8 == 0 {
        // Header-only FINISHED_ROUND records over the skipped bytes keep the feature
        // sections (build-ids, event names) where the header says.
        for at in (p..walk_end).step_by(8) {
            fixed[at..at + 4].copy_from_slice(&PERF_RECORD_FINISHED_ROUND.to_le_bytes());
            fixed[at + 4..at + 6].copy_from_slice(&0u16.to_le_bytes());
            fixed[at + 6..at + 8].copy_from_slice(&8u16.to_le_bytes());
        }
    } else {
        // Not 8-byte aligned (records always are): end the data section at the bad
        // record; the feature sections, found after the data, are lost.
        warnings.push(
            "the skipped bytes are not a multiple of 8: the header features (build-ids, event names) were not read either".to_string(),
        );
        fixed.truncate(p);
        fixed[48..56].copy_from_slice(&good.to_le_bytes());
        for b in &mut fixed[72..104] {
            *b = 0;
        }
    }
    Ok((Cow::Owned(fixed), warnings))
}

/// A file whose header says its data size is 0 (`killed`: perf record did not rewrite the
/// header) or whose data section runs past its end (a cut copy): the `good` bytes of
/// complete records from `off` are read, without feature sections.
fn read_unfinished(bytes: &[u8], off: u64, size: u64, good: u64, killed: bool) -> Prepared<'_> {
    let len = bytes.len() as u64;
    let warning = if killed {
        format!(
            "the header states a data size of 0 and no feature sections: perf record did not finish (killed?); the {good} bytes of complete records up to the end of the file were read; missing: build-ids, the command line, event names and the other header features{}",
            if good < len - off {
                format!(", and {} bytes of a last cut record", len - off - good)
            } else {
                String::new()
            }
        )
    } else {
        format!(
            "the data section should hold {size} bytes from byte {off} but the file ends after {} (a cut copy?): the {good} bytes of complete records were read; the header features after the data are missing",
            len - off
        )
    };
    let mut fixed = bytes[..(off + good) as usize].to_vec();
    fixed[48..56].copy_from_slice(&good.to_le_bytes());
    // No feature sections follow the data: clear the feature bitmap.
    for b in &mut fixed[72..104] {
        *b = 0;
    }
    (Cow::Owned(fixed), vec![warning])
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
    let arch = perf_file.arch().ok().flatten().map(str::to_string);
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
            arch,
        },
    ))
}

/// Reads a perf.data file; `segments` supplies the objects' load segments. User stacks
/// (`--call-graph dwarf`) are not unwound: see [`read_perf_data_unwinding`].
pub fn read_perf_data_with(
    bytes: &[u8],
    path: &Path,
    opts: &PerfDataOptions,
    segments: &dyn SegmentSource,
) -> Result<(SampleSet, ReadNotes), FormatError> {
    read_perf_data_unwinding(bytes, path, opts, segments, None)
}

/// [`read_perf_data_with`], unwinding the user stacks of `--call-graph dwarf` recordings
/// with `unwind` (`proftrust_binary::BinaryLocator`; see `stacks.rs`): each sample's call
/// chain is then the kernel part, the user ip of a kernel sample, and the user callers.
pub fn read_perf_data_unwinding<'s>(
    bytes: &[u8],
    path: &Path,
    opts: &PerfDataOptions,
    segments: &'s dyn SegmentSource,
    unwind: Option<&'s dyn UnwindSource>,
) -> Result<(SampleSet, ReadNotes), FormatError> {
    let (bytes, repairs) = prepare(bytes)?;
    let bytes = &bytes[..];
    let (reader, info) = open_perf_data(bytes, path)?;
    if !info.pipe {
        check_data_section(bytes)?;
    }
    let arch_warning = arch_note(&info);
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
    let mut pass = RecordPass::new(path, opts, events, MapCtx::new(build_ids, segments));
    pass.read_formats = raw_read_formats(bytes);
    pass.mapper.stacks = Stacks::new(unwind);
    // A sample record is at least 40 bytes with the usual fields: reserve once.
    pass.samples.reserve((bytes.len() / 40).min(1 << 26));
    loop {
        let rec = match record_iter.next_record(&mut perf_file) {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => return Err(perf_err(path, format!("{e} (file truncated or corrupt?)"))),
        };
        match rec {
            PerfFileRecord::EventRecord { attr_index, record } => {
                pass.record(attr_index, &record)?
            }
            PerfFileRecord::UserRecord(u) => pass.on_user_record(&u),
        }
    }
    Ok(pass.finish(repairs.into_iter().chain(arch_warning).collect(), command))
}

/// One pass of [`read_perf_data_unwinding`] over a file's records: the address spaces
/// (mappings per process, user stacks) and what the records add up to (samples, thread
/// names, losses, health). One handler per record type (`on_*`), dispatched from
/// [`RecordPass::record`]; the address-space changes are [`SpaceChange`]s, as the streaming
/// counter (`perf_counts.rs`) replays them.
struct RecordPass<'a, 's> {
    path: &'a Path,
    opts: &'a PerfDataOptions,
    /// Each attribute's `read_format` as the file states it ([`raw_read_formats`]).
    read_formats: Vec<Option<u64>>,
    events: Vec<EventDesc>,
    mapper: Mapper<'s>,
    samples: Vec<Sample>,
    /// `LOST` records' counts and `LOST_SAMPLES` records' counts (the larger is reported).
    lost: u64,
    lost_samples: u64,
    unknown: UnknownRecords,
    health: HealthSeen,
    threads: Vec<ThreadName>,
    /// Thread starts (`FORK` records).
    forks: Vec<ThreadStart>,
}

impl<'a, 's> RecordPass<'a, 's> {
    /// A pass with nothing seen yet, no user-stack unwinder and the crate's `read_format`s.
    fn new(
        path: &'a Path,
        opts: &'a PerfDataOptions,
        events: Vec<EventDesc>,
        ctx: MapCtx<'s>,
    ) -> Self {
        RecordPass {
            path,
            opts,
            read_formats: Vec::new(),
            events,
            mapper: Mapper {
                by_pid: HashMap::new(),
                ctx,
                stacks: Stacks::new(None),
            },
            samples: Vec::new(),
            lost: 0,
            lost_samples: 0,
            unknown: UnknownRecords::default(),
            health: HealthSeen::default(),
            threads: Vec::new(),
            forks: Vec::new(),
        }
    }

    /// The `read_format` of attribute `attr`: the file's own, else the crate's reading.
    fn read_format(&self, attr: usize, info: &RecordParseInfo) -> u64 {
        self.read_formats
            .get(attr)
            .copied()
            .flatten()
            .unwrap_or_else(|| info.read_format.bits())
    }

    /// One event record, to its handler: `SAMPLE`, `READ` and `LOST_SAMPLES` from the raw
    /// record (the crate's parse needs repairs there, see `crate::perf_record`), the others
    /// parsed by the crate ([`RecordPass::on_parsed`]).
    fn record(
        &mut self,
        attr_index: usize,
        record: &RawEventRecord<'_>,
    ) -> Result<(), FormatError> {
        self.unknown.see(record.record_type.0);
        match record.record_type.0 {
            PERF_RECORD_SAMPLE => return self.on_sample(attr_index, record),
            PERF_RECORD_READ => self.on_read(attr_index, record),
            PERF_RECORD_LOST_SAMPLES => self.on_lost_samples(record),
            _ => return self.on_parsed(attr_index, record),
        }
        Ok(())
    }

    /// A record the crate parses, to its handler. `EXIT` changes nothing here: a process's
    /// mappings stay until a `FORK` or an exec reuses its pid (perf keeps them too, for
    /// late samples); other types carry nothing this reader uses.
    fn on_parsed(
        &mut self,
        attr_index: usize,
        record: &RawEventRecord<'_>,
    ) -> Result<(), FormatError> {
        let time = record.timestamp().unwrap_or(0);
        let parsed = crate::perf_record::parse_event(record).map_err(|e| perf_err(self.path, e))?;
        match parsed {
            EventRecord::Mmap(m) => self.on_mmap(&m),
            EventRecord::Mmap2(m) => self.on_mmap2(&m),
            EventRecord::Fork(f) => self.on_fork(&f, time),
            EventRecord::Comm(c) => self.on_comm(&c, time),
            EventRecord::Lost(l) => self.on_lost(&l),
            EventRecord::Throttle(t) => self.on_throttle(attr_index, &t),
            EventRecord::Unthrottle(t) => self.on_unthrottle(attr_index, &t),
            _ => {}
        }
        Ok(())
    }

    /// A record perf writes itself (types 64 and up) that reaches this loop. None changes
    /// what is read: `FINISHED_ROUND` is the crate's (it orders the records by it),
    /// `HEADER_ATTR`/`HEADER_FEATURE` of pipe mode are read when the file is opened, the
    /// others (`ID_INDEX`, `THREAD_MAP`, `CPU_MAP`, `TIME_CONV`, `FINISHED_INIT`,
    /// `HEADER_BUILD_ID` of `perf inject -b`, ...) carry nothing this reader uses. A type
    /// perf does not define is counted ([`UnknownRecords`]).
    fn on_user_record(&mut self, u: &linux_perf_data::RawUserRecord<'_>) {
        self.unknown.see(u.record_type.record_type().0);
    }

    /// A `SAMPLE`: the call chain checked, the read values and the branch stack read from
    /// the raw record, the rest parsed by the crate (see `crate::perf_record`), then
    /// located ([`RecordPass::add_sample`]).
    fn on_sample(
        &mut self,
        attr_index: usize,
        record: &RawEventRecord<'_>,
    ) -> Result<(), FormatError> {
        let rf = self.read_format(attr_index, &record.parse_info);
        let parts = SampleParts::of(record, rf)
            .map_err(|e| perf_err(self.path, format!("{e} (file corrupt)")))?;
        let s = parts.parse(record).map_err(|e| {
            perf_err(
                self.path,
                format!("a {:?} record cannot be parsed: {e}", record.record_type),
            )
        })?;
        if let Some(v) = parts.read {
            let tid = s.tid.map_or(0, |t| u64::from(t as u32));
            self.health.read(attr_index, v, tid);
        }
        let branches = parts.branches.as_deref().unwrap_or_default();
        self.add_sample(attr_index, record, &s, branches)
    }

    /// A `READ` record: pid, tid, then the read values (their times are all this reader
    /// needs).
    fn on_read(&mut self, attr_index: usize, record: &RawEventRecord<'_>) {
        let b = record.data.as_slice();
        if let Some(v) = b
            .get(8..)
            .and_then(|r| read_values(r, self.read_format(attr_index, &record.parse_info)))
        {
            let tid = b.get(4..8).map_or(0, |t| {
                u64::from(u32::from_le_bytes(t.try_into().expect("4 bytes")))
            });
            self.health.read(attr_index, v, tid);
        }
    }

    /// A `LOST_SAMPLES` record (read by `crate::perf_record`: the crate leaves it unparsed).
    fn on_lost_samples(&mut self, record: &RawEventRecord<'_>) {
        self.lost_samples += crate::perf_record::lost_samples(record).unwrap_or(0);
    }

    /// A `LOST` record: ring-buffer records the kernel dropped.
    fn on_lost(&mut self, l: &LostRecord) {
        self.lost += l.count;
    }

    /// A `THROTTLE` record: the stream stops sampling until its `UNTHROTTLE`.
    fn on_throttle(&mut self, attr_index: usize, t: &ThrottleRecord) {
        self.health.throttle(attr_index, t.id, t.timestamp);
    }

    /// An `UNTHROTTLE` record: the stream samples again.
    fn on_unthrottle(&mut self, attr_index: usize, t: &ThrottleRecord) {
        self.health.unthrottle(attr_index, t.id, t.timestamp);
    }

    /// An `MMAP` record: a kernel mapping, or an executable mapping of a process.
    fn on_mmap(&mut self, m: &MmapRecord<'_>) {
        if let Some(change) = SpaceChange::of_mmap(m) {
            self.mapper.apply(change);
        }
    }

    /// An `MMAP2` record: a kernel mapping, or an executable mapping of a process.
    fn on_mmap2(&mut self, m: &Mmap2Record<'_>) {
        if let Some(change) = SpaceChange::of_mmap2(m) {
            self.mapper.apply(change);
        }
    }

    /// A `FORK` record at `time`: a new process gets its parent's mappings, unwinder state
    /// and name (a new thread of a process changes nothing here).
    fn on_fork(&mut self, f: &ForkOrExitRecord, time: u64) {
        let Some(change) = SpaceChange::of_fork(f) else {
            return;
        };
        self.forks.push(ThreadStart {
            pid: f.pid as u32,
            tid: f.tid as u32,
            ppid: f.ppid as u32,
            ptid: f.ptid as u32,
            time,
        });
        self.mapper.apply(change);
        // The child has its parent's name until it renames itself or execs (perf script
        // names a sample between the fork and the exec's COMM so); without this entry the
        // lookup would fall back to the child's first own name, the exec'd program's.
        let parent = self.threads.iter().rev().find(|t| t.tid == f.ptid as u32);
        if let Some(comm) = parent.map(|t| t.comm.clone()) {
            self.threads.push(ThreadName {
                pid: f.pid as u32,
                tid: f.tid as u32,
                time,
                comm,
                exec: false,
            });
        }
    }

    /// A `COMM` record at `time`: the thread's name from then on (perf script's comm
    /// column), and on an exec the process's mappings and unwinder state dropped.
    fn on_comm(&mut self, c: &CommOrExecRecord<'_>, time: u64) {
        if let Some(change) = SpaceChange::of_comm(c) {
            self.mapper.apply(change);
        }
        // The name is NUL-terminated and padded to 8 bytes.
        let raw = c.name.as_slice();
        let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        self.threads.push(ThreadName {
            pid: c.pid as u32,
            tid: c.tid as u32,
            time,
            comm: String::from_utf8_lossy(&raw[..end]).into_owned(),
            exec: c.is_execve,
        });
    }

    /// A sample: its ip, call chain (unwound user stack) and branch stack located.
    fn add_sample(
        &mut self,
        attr_index: usize,
        record: &RawEventRecord<'_>,
        s: &SampleRecord<'_>,
        raw_branches: &[RawBranch],
    ) -> Result<(), FormatError> {
        let Some(ip) = s.ip else { return Ok(()) };
        // Kernel, user, guest or hypervisor from the record's cpumode (by address only when
        // the record does not say).
        let space = Space::of_misc(record.misc).resolve(ip);
        if space.is_kernel() && !self.opts.keep_kernel {
            return Ok(());
        }
        let pid = s.pid.unwrap_or(-1);
        let ip_loc = self.mapper.locate(pid, space, ip);
        let callchain = self.callchain(s, pid, space, ip);
        let branches = raw_branches
            .iter()
            .map(|b| b.located(|a| self.mapper.locate(pid, Space::Unknown, a)))
            .collect();
        let event = u16::try_from(attr_index)
            .map_err(|_| perf_err(self.path, format!("event index {attr_index} out of range")))?;
        self.health.last_time = self.health.last_time.max(s.timestamp.unwrap_or(0));
        let period = s
            .period
            .unwrap_or_else(|| match self.events.get(attr_index) {
                Some(EventDesc {
                    config:
                        SamplingConfig {
                            period: PeriodMode::Fixed(p),
                            ..
                        },
                    ..
                }) => *p,
                _ => 1,
            });
        self.samples.push(Sample {
            event,
            pid: s.pid.unwrap_or(-1) as u32,
            tid: s.tid.unwrap_or(-1) as u32,
            time: s.timestamp.unwrap_or(0),
            cpu: s.cpu.unwrap_or(u32::MAX),
            period,
            ip: ip_loc,
            callchain,
            branches,
        });
        Ok(())
    }

    /// A sample's callers: its call chain located (context markers switch the space, the
    /// first entry dropped when it repeats the ip), the user part replaced by the unwound
    /// user stack of a `--call-graph dwarf` recording.
    fn callchain(
        &mut self,
        s: &SampleRecord<'_>,
        pid: i32,
        space: Space,
        ip: u64,
    ) -> Vec<Location> {
        let mut callchain = Vec::new();
        // Where the call chain's user part starts (entries after it are user space).
        let mut user_from: Option<usize> = None;
        if let Some(cc) = &s.callchain {
            let mut first = true;
            let mut ctx = space;
            for i in 0..cc.len() {
                let Some(a) = cc.get(i) else { break };
                if a >= PERF_CONTEXT_MAX {
                    // A context marker: the entries after it are in that space.
                    ctx = Space::of_marker(a).unwrap_or(Space::Unknown);
                    continue;
                }
                if first {
                    first = false;
                    if a == ip {
                        continue;
                    }
                }
                if ctx.resolve(a) == Space::User && user_from.is_none() {
                    user_from = Some(callchain.len());
                }
                callchain.push(self.mapper.locate(pid, ctx, a));
            }
        }
        // A copy of the user stack (`--call-graph dwarf`): its unwound callers replace
        // whatever user part the call chain had.
        if let (Some(regs), Some((stack, dyn_size))) =
            (Stacks::regs(s.user_regs.as_ref()), s.user_stack.as_ref())
        {
            let stack = stack.as_slice();
            let n = usize::try_from(*dyn_size).map_or(stack.len(), |d| d.min(stack.len()));
            if let Some(ras) = self.mapper.stacks.unwind(pid, regs, &stack[..n]) {
                let ras = ras.to_vec();
                callchain.truncate(user_from.unwrap_or(callchain.len()));
                if space.is_kernel() {
                    callchain.push(self.mapper.locate(pid, Space::User, regs.ip));
                }
                for ra in ras {
                    callchain.push(self.mapper.locate(pid, Space::User, ra));
                }
            }
        }
        callchain
    }

    /// The sample set and notes: `first_warnings` (repairs, architecture) before the
    /// mapper's, then unknown records and the unwinder's.
    fn finish(
        mut self,
        first_warnings: Vec<String>,
        command: Vec<String>,
    ) -> (SampleSet, ReadNotes) {
        let mut notes = std::mem::take(&mut self.mapper.ctx.notes);
        notes.warnings.splice(0..0, first_warnings);
        if let Some(w) = self.unknown.warning() {
            notes.warnings.push(w);
        }
        notes.warnings.extend(self.mapper.stacks.warnings());
        (
            SampleSet {
                modules: self.mapper.ctx.modules,
                events: self.events,
                samples: self.samples,
                lost: self.lost.max(self.lost_samples),
                command,
                outcome: None,
                health: self.health.finish(),
                threads: self.threads,
                forks: self.forks,
                kernel_symbols: Vec::new(),
            },
            notes,
        )
    }
}

/// Throttling and enabled/running times gathered over a file's records.
#[derive(Debug, Default)]
struct HealthSeen {
    throttles: u64,
    unthrottles: u64,
    throttled_ns: u64,
    /// Open throttles by (event, stream id): their time stamp.
    open: HashMap<(usize, u64), u64>,
    /// Last time stamp of a sample or throttle record, where open throttles end.
    last_time: u64,
    /// Last (enabled, running) per (event, stream): id when the values carry one, else the
    /// thread. The values are running totals, so the last one counts.
    times: std::collections::BTreeMap<(usize, u64), (Option<u64>, Option<u64>)>,
}

impl HealthSeen {
    fn throttle(&mut self, event: usize, id: u64, time: u64) {
        self.throttles += 1;
        self.last_time = self.last_time.max(time);
        self.open.entry((event, id)).or_insert(time);
    }

    fn unthrottle(&mut self, event: usize, id: u64, time: u64) {
        self.unthrottles += 1;
        self.last_time = self.last_time.max(time);
        if let Some(t0) = self.open.remove(&(event, id)) {
            self.throttled_ns = self.throttled_ns.saturating_add(time.saturating_sub(t0));
        }
    }

    fn read(&mut self, event: usize, v: ReadValues, tid: u64) {
        if v.enabled.is_some() || v.running.is_some() {
            let stream = v.id.unwrap_or(tid);
            self.times.insert((event, stream), (v.enabled, v.running));
        }
    }

    fn finish(self) -> proftrust_model::RecordingHealth {
        let open: u64 = self
            .open
            .values()
            .map(|&t0| self.last_time.saturating_sub(t0))
            .fold(0u64, u64::saturating_add);
        let mut per_event: std::collections::BTreeMap<usize, proftrust_model::EventTimes> =
            Default::default();
        for (&(event, _), &(enabled, running)) in &self.times {
            let Ok(e) = u16::try_from(event) else {
                continue;
            };
            let t = per_event
                .entry(event)
                .or_insert(proftrust_model::EventTimes {
                    event: e,
                    ..Default::default()
                });
            // Without one of the two times the other stands for both (nothing to compare).
            let (en, ru) = match (enabled, running) {
                (Some(a), Some(b)) => (a, b),
                (Some(a), None) | (None, Some(a)) => (a, a),
                (None, None) => continue,
            };
            t.enabled_ns = t.enabled_ns.saturating_add(en);
            t.running_ns = t.running_ns.saturating_add(ru);
        }
        proftrust_model::RecordingHealth {
            throttles: self.throttles,
            unthrottles: self.unthrottles,
            throttled_ns: self.throttled_ns.saturating_add(open),
            event_times: per_event.into_values().collect(),
        }
    }
}

/// The note for a recording from another architecture than x86-64.
pub(crate) fn arch_note(info: &FileInfo) -> Option<String> {
    let a = info.arch.as_deref()?;
    (a != "x86_64").then(|| {
        format!(
            "recorded on {a}: samples are attributed to functions, inline frames and lines from the binaries; what decodes machine code (CFG, skid correction, paths) works on x86-64 binaries only"
        )
    })
}

/// Records of types perf 6.1 does not define, counted by type (reported, not silently
/// skipped: a corrupt size field shows up as such records).
#[derive(Debug, Default)]
pub(crate) struct UnknownRecords {
    by_type: std::collections::BTreeMap<u32, u64>,
}

impl UnknownRecords {
    /// Counts `ty` when it is not a record type perf defines (kernel 1-21, user 64-83) or
    /// simpleperf adds (32768-32776).
    pub(crate) fn see(&mut self, ty: u32) {
        if !((1..=21).contains(&ty) || (64..=83).contains(&ty) || (32768..=32776).contains(&ty)) {
            *self.by_type.entry(ty).or_default() += 1;
        }
    }

    /// The warning, when any was seen.
    pub(crate) fn warning(&self) -> Option<String> {
        if self.by_type.is_empty() {
            return None;
        }
        let total: u64 = self.by_type.values().sum();
        let list: Vec<String> = self
            .by_type
            .iter()
            .take(8)
            .map(|(t, n)| format!("{n} of type {t}"))
            .collect();
        Some(format!(
            "{total} records of types perf does not define were skipped ({}{}): the file may be corrupt or written by a newer perf",
            list.join(", "),
            if self.by_type.len() > 8 { ", ..." } else { "" }
        ))
    }
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
///   next records, so one corrupt size field shifts every record after it (upstream report:
///   `docs/upstream/perf-data-finished-round-body.md`);
/// * an `AUXTRACE` record announcing more trace data than the rest holds: the crate
///   allocates the announced size (up to 2^64 bytes) before reading it (upstream report:
///   `docs/upstream/perf-data-auxtrace-allocation.md`).
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
/// bytes than the slot holds, and the following counts would be misread (upstream report:
/// `docs/upstream/event-reader-attr-size.md`).
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

/// Records built byte by byte for the handlers' tests (here and in `perf_counts.rs`), with
/// the sample format `perf record` writes by default (`IP | TID | TIME | PERIOD`,
/// `sample_id_all`): every other record ends in the `sample_id` trailer `pid, tid, time`.
#[cfg(test)]
pub(crate) mod test_records {
    use linux_perf_data::linux_perf_event_reader::{
        BranchSampleFormat, Endianness, RawData, RawEventRecord, ReadFormat, RecordIdParseInfo,
        RecordParseInfo, RecordType, SampleFormat,
    };

    /// The parse info `linux-perf-data` derives for that attribute (trailer 16 bytes, its
    /// time 8 bytes before the end; in a sample the time is the third word).
    pub(crate) fn info() -> RecordParseInfo {
        RecordParseInfo {
            endian: Endianness::LittleEndian,
            sample_format: SampleFormat::IP
                | SampleFormat::TID
                | SampleFormat::TIME
                | SampleFormat::PERIOD,
            branch_sample_format: BranchSampleFormat::empty(),
            read_format: ReadFormat::empty(),
            common_data_offset_from_end: Some(16),
            sample_regs_user: 0,
            user_regs_count: 0,
            sample_regs_intr: 0,
            intr_regs_count: 0,
            id_parse_info: RecordIdParseInfo {
                nonsample_record_id_offset_from_end: None,
                sample_record_id_offset_from_start: None,
            },
            nonsample_record_time_offset_from_end: Some(8),
            sample_record_time_offset_from_start: Some(16),
        }
    }

    /// A record's body: `words` (each a little-endian `u32` or `u64` as given), a
    /// NUL-terminated string padded to 8 bytes (when `s` is `Some`), the trailer.
    pub(crate) struct Body(pub(crate) Vec<u8>);

    impl Body {
        pub(crate) fn new() -> Body {
            Body(Vec::new())
        }
        pub(crate) fn u32(mut self, v: u32) -> Body {
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        pub(crate) fn u64(mut self, v: u64) -> Body {
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        pub(crate) fn bytes(mut self, b: &[u8]) -> Body {
            self.0.extend_from_slice(b);
            self
        }
        pub(crate) fn string(mut self, s: &str) -> Body {
            self.0.extend_from_slice(s.as_bytes());
            self.0.push(0);
            while self.0.len() % 8 != 0 {
                self.0.push(0);
            }
            self
        }
        /// The `sample_id` trailer: pid, tid, time.
        pub(crate) fn trailer(self, pid: u32, tid: u32, time: u64) -> Vec<u8> {
            self.u32(pid).u32(tid).u64(time).0
        }
    }

    /// `MMAP`: pid, tid, addr, len, pgoff, filename.
    pub(crate) fn mmap(pid: u32, addr: u64, len: u64, path: &str, time: u64) -> Vec<u8> {
        Body::new()
            .u32(pid)
            .u32(pid)
            .u64(addr)
            .u64(len)
            .u64(0)
            .string(path)
            .trailer(pid, pid, time)
    }

    /// `MMAP2` (misc `PERF_RECORD_MISC_MMAP_BUILD_ID` when `build_id` is `Some`): pid, tid,
    /// addr, len, pgoff, the build-id (length byte, 3 bytes padding, 20 bytes) or
    /// maj/min/ino/generation, prot, flags, filename.
    pub(crate) fn mmap2(
        pid: u32,
        addr: u64,
        prot: u32,
        build_id: Option<&[u8]>,
        path: &str,
        time: u64,
    ) -> Vec<u8> {
        let b = Body::new().u32(pid).u32(pid).u64(addr).u64(0x1000).u64(0);
        let b = match build_id {
            Some(id) => {
                let mut field = [0u8; 24];
                field[0] = id.len() as u8;
                let n = id.len().min(20);
                field[4..4 + n].copy_from_slice(&id[..n]);
                b.bytes(&field)
            }
            None => b.u32(8).u32(1).u64(1234).u64(0),
        };
        b.u32(prot).u32(2).string(path).trailer(pid, pid, time)
    }

    /// `FORK`: pid, ppid, tid, ptid, time.
    pub(crate) fn fork(pid: u32, ppid: u32, tid: u32, ptid: u32, time: u64) -> Vec<u8> {
        Body::new()
            .u32(pid)
            .u32(ppid)
            .u32(tid)
            .u32(ptid)
            .u64(time)
            .trailer(pid, tid, time)
    }

    /// `COMM`: pid, tid, name.
    pub(crate) fn comm(pid: u32, name: &str, time: u64) -> Vec<u8> {
        Body::new()
            .u32(pid)
            .u32(pid)
            .string(name)
            .trailer(pid, pid, time)
    }

    /// The record of type `ty` with `misc` and `body`, parsed with [`info`].
    pub(crate) fn raw(ty: u32, misc: u16, body: &[u8]) -> RawEventRecord<'_> {
        RawEventRecord::new(RecordType(ty), misc, RawData::from(body), info())
    }
}

#[cfg(test)]
mod tests {
    use super::test_records::*;
    use super::*;
    use crate::perf_record::{MISC_MMAP_BUILD_ID, PERF_RECORD_MMAP2};
    use crate::segments::NoSegments;

    const MMAP: u32 = 1;
    const LOST: u32 = 2;
    const COMM: u32 = 3;
    const FORK: u32 = 7;
    const THROTTLE: u32 = 5;
    const UNTHROTTLE: u32 = 6;
    const USER: u16 = 2;
    const KERNEL: u16 = 1;
    const COMM_EXEC: u16 = 1 << 13;

    fn pass<'a>(opts: &'a PerfDataOptions) -> RecordPass<'a, 'static> {
        let events = vec![EventDesc {
            name: "cpu-clock".into(),
            kind: EventKind::CpuClock,
            config: SamplingConfig::default(),
        }];
        RecordPass::new(
            Path::new("t.data"),
            opts,
            events,
            MapCtx::new(HashMap::new(), &NoSegments),
        )
    }

    fn feed(p: &mut RecordPass<'_, '_>, ty: u32, misc: u16, body: &[u8]) {
        p.record(0, &raw(ty, misc, body)).expect("a valid record");
    }

    /// `(start, end, path, build-id)` of a process's mappings.
    fn maps(v: Option<&Vec<Mapping>>) -> Vec<(u64, u64, String, Option<Vec<u8>>)> {
        v.map_or(&[][..], |v| v.as_slice())
            .iter()
            .map(|m| {
                let id = m.build_id.as_ref().map(|b| b.0.clone());
                (m.start, m.end, m.path.clone(), id)
            })
            .collect()
    }

    #[test]
    fn mmap_maps_kernel_and_executable_code_not_data() {
        let opts = PerfDataOptions::default();
        let mut p = pass(&opts);
        let k = mmap(
            u32::MAX,
            0xffff_ffff_8100_0000,
            0x100_0000,
            "[kernel.kallsyms]_text",
            1,
        );
        feed(&mut p, MMAP, KERNEL, &k);
        feed(
            &mut p,
            MMAP,
            USER,
            &mmap(10, 0x40_0000, 0x2000, "/bin/a", 2),
        );
        // PERF_RECORD_MISC_MMAP_DATA: a data mapping, not code.
        feed(
            &mut p,
            MMAP,
            USER | (1 << 13),
            &mmap(10, 0x60_0000, 0x1000, "/d", 3),
        );
        assert_eq!(
            maps(Some(&p.mapper.ctx.kernel_maps)),
            vec![(
                0xffff_ffff_8100_0000,
                0xffff_ffff_8200_0000,
                "[kernel.kallsyms]_text".into(),
                None
            )]
        );
        assert_eq!(
            maps(p.mapper.by_pid.get(&10)),
            vec![(0x40_0000, 0x40_2000, "/bin/a".into(), None)]
        );
    }

    #[test]
    fn mmap2_keeps_its_build_id_and_skips_what_is_not_executable() {
        let opts = PerfDataOptions::default();
        let mut p = pass(&opts);
        let id = [0xab, 0xcd, 0xef, 0x01];
        let with_id = mmap2(10, 0x40_0000, 5, Some(&id), "/bin/a", 1);
        feed(
            &mut p,
            PERF_RECORD_MMAP2,
            USER | MISC_MMAP_BUILD_ID,
            &with_id,
        );
        // PROT_READ only: not code.
        feed(
            &mut p,
            PERF_RECORD_MMAP2,
            USER,
            &mmap2(10, 0x80_0000, 1, None, "/ro", 2),
        );
        feed(
            &mut p,
            PERF_RECORD_MMAP2,
            USER,
            &mmap2(10, 0x90_0000, 4, None, "/x", 3),
        );
        assert_eq!(
            maps(p.mapper.by_pid.get(&10)),
            vec![
                (0x40_0000, 0x40_1000, "/bin/a".into(), Some(id.to_vec())),
                (0x90_0000, 0x90_1000, "/x".into(), None)
            ]
        );
        // A build-id longer than 20 bytes (the crate would assert): an error naming it.
        let bad = mmap2(10, 0xa0_0000, 5, Some(&[7; 21]), "/bad", 4);
        let e = p
            .record(0, &raw(PERF_RECORD_MMAP2, USER | MISC_MMAP_BUILD_ID, &bad))
            .unwrap_err();
        assert!(
            e.to_string().contains("build-id longer than 20 bytes"),
            "{e}"
        );
    }

    #[test]
    fn fork_copies_the_parent_and_exec_drops_the_mappings() {
        let opts = PerfDataOptions::default();
        let mut p = pass(&opts);
        feed(&mut p, COMM, USER, &comm(10, "sh", 1));
        feed(
            &mut p,
            PERF_RECORD_MMAP2,
            USER,
            &mmap2(10, 0x40_0000, 5, None, "/bin/sh", 2),
        );
        // A new thread of process 10: no process start, no change of mappings.
        feed(&mut p, FORK, USER, &fork(10, 10, 12, 10, 3));
        feed(&mut p, FORK, USER, &fork(11, 10, 11, 10, 4));
        assert_eq!(
            p.forks,
            vec![ThreadStart {
                pid: 11,
                tid: 11,
                ppid: 10,
                ptid: 10,
                time: 4
            }]
        );
        assert_eq!(
            maps(p.mapper.by_pid.get(&11)),
            maps(p.mapper.by_pid.get(&10))
        );
        feed(&mut p, COMM, USER | COMM_EXEC, &comm(11, "ls", 5));
        assert!(!p.mapper.by_pid.contains_key(&11));
        assert_eq!(maps(p.mapper.by_pid.get(&10)).len(), 1);
        // Names: sh; the child sh from its fork; ls from its exec.
        let names: Vec<(u32, u64, &str, bool)> = p
            .threads
            .iter()
            .map(|t| (t.tid, t.time, t.comm.as_str(), t.exec))
            .collect();
        assert_eq!(
            names,
            vec![
                (10, 1, "sh", false),
                (11, 4, "sh", false),
                (11, 5, "ls", true)
            ]
        );
    }

    #[test]
    fn losses_are_the_larger_of_lost_and_lost_samples() {
        let opts = PerfDataOptions::default();
        let mut p = pass(&opts);
        feed(
            &mut p,
            LOST,
            USER,
            &Body::new().u64(1).u64(5).trailer(1, 1, 1),
        );
        feed(
            &mut p,
            LOST,
            USER,
            &Body::new().u64(1).u64(2).trailer(1, 1, 2),
        );
        let ls = Body::new().u64(6).trailer(1, 1, 3);
        feed(&mut p, PERF_RECORD_LOST_SAMPLES, USER, &ls);
        assert_eq!((p.lost, p.lost_samples), (7, 6));
        let (s, _) = p.finish(Vec::new(), Vec::new());
        assert_eq!(s.lost, 7);
    }

    #[test]
    fn throttles_last_until_their_unthrottle_or_the_last_record() {
        let opts = PerfDataOptions::default();
        let mut p = pass(&opts);
        // THROTTLE/UNTHROTTLE body: time, id, stream_id, then the trailer.
        let t = |time: u64, id: u64| Body::new().u64(time).u64(id).u64(id).trailer(1, 1, time);
        feed(&mut p, THROTTLE, USER, &t(100, 7));
        feed(&mut p, UNTHROTTLE, USER, &t(350, 7));
        feed(&mut p, THROTTLE, USER, &t(400, 8));
        // An unthrottle of a stream never throttled ends nothing.
        feed(&mut p, UNTHROTTLE, USER, &t(500, 9));
        let (s, _) = p.finish(Vec::new(), Vec::new());
        // 350 - 100, and stream 8 open from 400 to the last time stamp, 500.
        assert_eq!(
            (
                s.health.throttles,
                s.health.unthrottles,
                s.health.throttled_ns
            ),
            (2, 2, 350)
        );
    }

    #[test]
    fn read_records_sum_the_last_times_of_each_thread() {
        let opts = PerfDataOptions::default();
        let mut p = pass(&opts);
        // read_format TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING: value, enabled, running.
        p.read_formats = vec![Some(3)];
        let r = |tid: u32, en: u64, ru: u64| {
            Body::new()
                .u32(10)
                .u32(tid)
                .u64(99)
                .u64(en)
                .u64(ru)
                .trailer(10, tid, 1)
        };
        feed(&mut p, PERF_RECORD_READ, USER, &r(5, 100, 50));
        feed(&mut p, PERF_RECORD_READ, USER, &r(5, 200, 150));
        feed(&mut p, PERF_RECORD_READ, USER, &r(6, 10, 10));
        let (s, _) = p.finish(Vec::new(), Vec::new());
        let t = &s.health.event_times;
        assert_eq!(t.len(), 1);
        assert_eq!(
            (t[0].event, t[0].enabled_ns, t[0].running_ns),
            (0, 210, 160)
        );
    }

    #[test]
    fn user_records_perf_does_not_define_are_counted() {
        let opts = PerfDataOptions::default();
        let mut p = pass(&opts);
        let record = |ty: u32| linux_perf_data::RawUserRecord {
            record_type: linux_perf_data::UserRecordType::try_from(
                linux_perf_data::linux_perf_event_reader::RecordType(ty),
            )
            .expect("a user type"),
            endian: Endianness::LittleEndian,
            misc: 0,
            data: RawData::from(&[][..]),
        };
        // THREAD_MAP (73) is perf's; 200 is no type perf defines.
        p.on_user_record(&record(73));
        p.on_user_record(&record(200));
        let (_, notes) = p.finish(Vec::new(), Vec::new());
        assert_eq!(notes.warnings.len(), 1);
        assert!(
            notes.warnings[0].starts_with(
                "1 records of types perf does not define were skipped (1 of type 200)"
            ),
            "{:?}",
            notes.warnings
        );
    }

    #[test]
    fn space_changes_of_unknown_processes_change_nothing() {
        let mut by_pid = HashMap::new();
        let mut kernel = Vec::new();
        assert_eq!(
            SpaceChange::Fork { pid: 2, ppid: 1 }.apply(&mut by_pid, &mut kernel),
            None
        );
        assert_eq!(
            SpaceChange::Exec { pid: 1 }.apply(&mut by_pid, &mut kernel),
            None
        );
        let mapping = Mapping::new(0x1000, 0x1000, 0, "/a".into(), None);
        let map = SpaceChange::Map { pid: 1, mapping };
        assert_eq!(map.apply(&mut by_pid, &mut kernel), Some(1));
        assert_eq!(
            SpaceChange::Fork { pid: 2, ppid: 1 }.apply(&mut by_pid, &mut kernel),
            Some(2)
        );
        assert_eq!(
            SpaceChange::Exec { pid: 1 }.apply(&mut by_pid, &mut kernel),
            Some(1)
        );
        assert_eq!(
            (
                by_pid.contains_key(&1),
                maps(by_pid.get(&2)).len(),
                kernel.len()
            ),
            (false, 1, 0)
        );
    }
}
