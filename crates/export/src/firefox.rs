//! The Firefox Profiler's processed profile format, written with `fxprof-processed-profile`
//! (the crate samply writes its profiles with): open the file at profiler.firefox.com
//! ("Load a profile from file"), or with `samply load`.
//!
//! * One process per pid and one thread per tid for sampled profiles, samples at their
//!   time stamps (relative to the first), weight 1, the CPU delta of a clock event's period.
//! * Exact and estimated profiles become one thread whose samples carry the counts as
//!   weights (the format's weights are 32-bit: a larger count is split over several
//!   samples, the totals stay exact; estimates are rounded).
//! * Frames: the outermost function of a location is an address frame into its library
//!   (library-relative address = SVMA, with the build-id as code id and debug id), named
//!   through a symbol table of the functions the profile touches; functions inlined into it
//!   follow as label frames, so the call tree shows them as callees. The profile is marked
//!   symbolicated, so the profiler does not ask a symbol server.

use crate::folded::check_value;
use crate::profile::{Origin, Profile};
use crate::symbols::Resolver;
use crate::ExportError;
use fxprof_processed_profile::debugid::DebugId;
use fxprof_processed_profile::{
    CategoryHandle, CpuDelta, Frame, FrameFlags, FrameInfo, LibraryHandle, LibraryInfo,
    Profile as FxProfile, ReferenceTimestamp, SamplingInterval, StackHandle, Symbol, SymbolTable,
    ThreadHandle, Timestamp,
};
use proftrust_model::{BuildId, Location, ModuleIdx};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::sync::Arc;

/// Breakpad's debug id of an ELF build-id: its first 16 bytes (zero-padded) read as a GUID
/// whose first three fields are little-endian, age 0 — the id samply and the Firefox
/// Profiler's symbol server use for Linux binaries.
pub fn debug_id(build_id: Option<&BuildId>) -> DebugId {
    let Some(b) = build_id else {
        return DebugId::nil();
    };
    let mut g = [0u8; 16];
    for (d, s) in g.iter_mut().zip(&b.0) {
        *d = *s;
    }
    g[0..4].reverse();
    g[4..6].reverse();
    g[6..8].reverse();
    DebugId::from_guid_age(&g, 0).unwrap_or_else(|_| DebugId::nil())
}

struct Builder<'r, 'a> {
    fx: FxProfile,
    r: &'r Resolver<'a>,
    libs: HashMap<ModuleIdx, LibraryHandle>,
    symbols: BTreeMap<ModuleIdx, BTreeMap<u32, Symbol>>,
    stacks: HashMap<(ThreadHandle, usize), Option<StackHandle>>,
}

impl Builder<'_, '_> {
    fn lib(&mut self, m: ModuleIdx) -> Option<LibraryHandle> {
        if let Some(&h) = self.libs.get(&m) {
            return Some(h);
        }
        let module = self.r.modules().get(m)?;
        let name = module.file_name().to_string();
        let h = self.fx.add_lib(LibraryInfo {
            name: name.clone(),
            debug_name: name,
            path: module.path.clone(),
            debug_path: module.path.clone(),
            debug_id: debug_id(module.build_id.as_ref()),
            code_id: module.build_id.as_ref().map(|b| b.to_hex()),
            arch: Some("x86_64".into()),
            symbol_table: self
                .symbols
                .get(&m)
                .map(|s| Arc::new(SymbolTable::new(s.values().cloned().collect()))),
        });
        self.libs.insert(m, h);
        Some(h)
    }

    fn frames_of(&mut self, loc: Location, ret: bool, out: &mut Vec<FrameInfo>) {
        let frames = self.r.frames(loc, ret);
        let cat = CategoryHandle::OTHER.into();
        let flags = FrameFlags::empty();
        let outer = frames.last().expect("a resolver never returns no frame");
        let func = self.r.function(Resolver::lookup_address(loc, ret));
        let lib_frame = match (loc.module, func, u32::try_from(loc.svma.0)) {
            (Some(m), Some(f), Ok(rva)) if f.start.0 <= u32::MAX as u64 => self.lib(m).map(|h| {
                if ret {
                    Frame::RelativeAddressFromReturnAddress(h, rva)
                } else {
                    Frame::RelativeAddressFromInstructionPointer(h, rva)
                }
            }),
            _ => None,
        };
        let first = match lib_frame {
            Some(f) => f,
            None => Frame::Label(self.fx.intern_string(&outer.name)),
        };
        out.push(FrameInfo {
            frame: first,
            category_pair: cat,
            flags,
        });
        for f in frames.iter().rev().skip(1) {
            out.push(FrameInfo {
                frame: Frame::Label(self.fx.intern_string(&f.name)),
                category_pair: cat,
                flags,
            });
        }
    }

    /// The symbol tables of the libraries, from every location of the profile: the crate
    /// names address frames when they are interned, so the tables come first.
    fn collect_symbols(&mut self, p: &Profile) {
        for s in &p.stacks {
            for (i, &loc) in s.frames.iter().enumerate() {
                let at = Resolver::lookup_address(loc, i > 0);
                let (Some(m), Some(f)) = (loc.module, self.r.function(at)) else {
                    continue;
                };
                let Ok(start) = u32::try_from(f.start.0) else {
                    continue;
                };
                let outer = self.r.frames(loc, i > 0);
                let name = outer.last().map_or(f.name.clone(), |x| x.name.clone());
                self.symbols
                    .entry(m)
                    .or_default()
                    .entry(start)
                    .or_insert(Symbol {
                        address: start,
                        size: u32::try_from(f.size).ok(),
                        name,
                    });
            }
        }
    }

    fn stack(&mut self, p: &Profile, t: ThreadHandle, s: usize) -> Option<StackHandle> {
        if let Some(h) = self.stacks.get(&(t, s)) {
            return *h;
        }
        let mut infos = Vec::new();
        for (i, &loc) in p.stacks[s].frames.iter().enumerate().rev() {
            self.frames_of(loc, i > 0, &mut infos);
        }
        let h = self.fx.intern_stack_frames(t, infos.into_iter());
        self.stacks.insert((t, s), h);
        h
    }
}

/// Writes `p` in the Firefox Profiler's processed format (module docs); `value` picks the
/// column of exact and estimated profiles (sampled profiles are per sample).
pub fn write_firefox<W: Write>(
    mut w: W,
    p: &Profile,
    r: &Resolver<'_>,
    value: usize,
) -> Result<(), ExportError> {
    check_value(p, value)?;
    let time_based = p
        .period
        .as_ref()
        .is_some_and(|(v, _)| v.unit == "nanoseconds");
    let interval = match &p.period {
        Some((_, n)) if time_based && *n > 0 => SamplingInterval::from_nanos(*n),
        _ => SamplingInterval::from_millis(1),
    };
    let fx = FxProfile::new(
        &p.title,
        ReferenceTimestamp::from_millis_since_unix_epoch(0.0),
        interval,
    );
    let mut b = Builder {
        fx,
        r,
        libs: HashMap::new(),
        symbols: BTreeMap::new(),
        stacks: HashMap::new(),
    };
    b.collect_symbols(p);
    let zero = Timestamp::from_nanos_since_reference(0);
    if !p.timeline.is_empty() && p.origin == Origin::Sampled {
        let t0 = p
            .timeline
            .iter()
            .map(|t| t.time)
            .filter(|&t| t > 0)
            .min()
            .unwrap_or(0);
        let mut processes = BTreeMap::new();
        let mut threads: BTreeMap<(u32, u32), ThreadHandle> = BTreeMap::new();
        let mut order: Vec<usize> = (0..p.timeline.len())
            .filter(|&i| p.counts_in(&p.timeline[i], value))
            .collect();
        order.sort_by_key(|&i| p.timeline[i].time);
        for i in order {
            let ts = p.timeline[i];
            let th = match threads.get(&(ts.pid, ts.tid)) {
                Some(&h) => h,
                None => {
                    // Processes and threads by their own names (`comm`), not by the
                    // recording's command line (issue 31 item 14: perf's `perf record ...`).
                    let name = |pid: u32, tid: u32| p.thread_names.get(&(pid, tid));
                    let proc = *processes.entry(ts.pid).or_insert_with(|| {
                        let pname = name(ts.pid, ts.pid)
                            .or_else(|| name(ts.pid, ts.tid))
                            .map_or(p.title.as_str(), String::as_str);
                        b.fx.add_process(&format!("{pname} ({})", ts.pid), ts.pid, zero)
                    });
                    let h = b.fx.add_thread(proc, ts.tid, zero, ts.pid == ts.tid);
                    let main = ts.pid == ts.tid;
                    b.fx.set_thread_name(
                        h,
                        &match name(ts.pid, ts.tid) {
                            Some(n) if main => n.clone(),
                            Some(n) => format!("{n} ({})", ts.tid),
                            None if main => "main thread".to_string(),
                            None => format!("thread {}", ts.tid),
                        },
                    );
                    threads.insert((ts.pid, ts.tid), h);
                    h
                }
            };
            let stack = b.stack(p, th, ts.stack);
            let cpu = if time_based {
                CpuDelta::from_nanos(ts.period)
            } else {
                CpuDelta::ZERO
            };
            let at = Timestamp::from_nanos_since_reference(ts.time.saturating_sub(t0));
            b.fx.add_sample(th, at, stack, cpu, 1);
        }
    } else {
        let proc = b.fx.add_process(&p.title, 0, zero);
        let th = b.fx.add_thread(proc, 0, zero, true);
        b.fx.set_thread_name(th, &p.value_types[value].kind);
        for s in 0..p.stacks.len() {
            let v = p.stacks[s]
                .values
                .get(value)
                .copied()
                .unwrap_or(0.0)
                .round();
            if v < 1.0 {
                continue;
            }
            let stack = b.stack(p, th, s);
            let mut left = v as u64;
            while left > 0 {
                let w = left.min(i32::MAX as u64);
                b.fx.add_sample(th, zero, stack, CpuDelta::ZERO, w as i32);
                left -= w;
            }
        }
    }
    b.fx.set_symbolicated(true);
    serde_json::to_writer(&mut w, &b.fx)?;
    w.write_all(b"\n")?;
    w.flush()?;
    Ok(())
}
