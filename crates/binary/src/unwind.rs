//! DWARF unwinding of user stacks the kernel copied (`PERF_SAMPLE_REGS_USER` +
//! `PERF_SAMPLE_STACK_USER`, `perf record --call-graph dwarf`), with framehop (the unwinder
//! samply uses) over each binary's call-frame information: `.eh_frame` through its
//! `.eh_frame_hdr` index, `.debug_frame`, and framehop's own prologue/epilogue analysis of
//! `.text` for the innermost frame; where a module has no unwind information framehop
//! follows the frame pointer (`rbp`), as perf's libunwind does.
//!
//! One [`ProcessUnwinder`] per recording ([`BinaryLocator`] is the
//! [`UnwindSource`](proftrust_model::UnwindSource)): every process's executable mappings,
//! each a framehop module at its load bias (runtime start minus the SVMA of its file
//! offset, the one address rule of `proftrust_model::segments`), built when the process's
//! first stack is unwound after a change. The binary is the one [`BinaryLocator`] finds for
//! symbols; when that is a debug-only file (its `.eh_frame` has no bytes), the recorded
//! path is opened too when its build-id matches.

use crate::elf::Binary;
use crate::locate::BinaryLocator;
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use proftrust_model::unwind::{StackUnwinder, UnwindEnd, UnwindSource, UserRegs};
use proftrust_model::BuildId;
use std::collections::HashMap;
use std::ops::{Deref, Range};
use std::path::Path;
use std::sync::Arc;

/// Frames followed at most (perf's `PERF_MAX_STACK_DEPTH`, `kernel.perf_event_max_stack`).
const MAX_FRAMES: usize = 127;

/// A section's bytes inside the binary's shared file contents.
#[derive(Clone, Default)]
pub(crate) struct SectionBytes {
    data: Option<Arc<[u8]>>,
    range: Range<usize>,
}

impl Deref for SectionBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.data {
            Some(d) => d.get(self.range.clone()).unwrap_or(&[]),
            None => &[],
        }
    }
}

impl Binary {
    /// The SVMA range and file bytes of section `name`, when it has bytes in the file.
    pub(crate) fn section_bytes(&self, name: &str) -> Option<(Range<u64>, SectionBytes)> {
        let s = self.sections.iter().find(|s| s.name == name)?;
        let (off, size) = s.file?;
        let start = usize::try_from(off).ok()?;
        let end = start.checked_add(usize::try_from(size).ok()?)?;
        (end <= self.data.len() && size > 0).then(|| {
            (
                s.addr..s.addr.saturating_add(s.size),
                SectionBytes {
                    data: Some(self.data.clone()),
                    range: start..end,
                },
            )
        })
    }
}

/// The framehop description of `b`'s unwind sections (SVMAs, `base_svma` 0 for ELF).
fn section_info(b: &Binary) -> ExplicitModuleSectionInfo<SectionBytes> {
    let (text_svma, text) = b.section_bytes(".text").unzip();
    let (eh_frame_svma, eh_frame) = b.section_bytes(".eh_frame").unzip();
    let (eh_frame_hdr_svma, eh_frame_hdr) = b.section_bytes(".eh_frame_hdr").unzip();
    let debug_frame = b.section_bytes(".debug_frame").map(|x| x.1);
    let got_svma = b
        .sections
        .iter()
        .find(|s| s.name == ".got")
        .map(|s| s.addr..s.addr.saturating_add(s.size));
    ExplicitModuleSectionInfo {
        base_svma: 0,
        text_svma,
        text,
        eh_frame_svma,
        eh_frame,
        eh_frame_hdr_svma,
        eh_frame_hdr,
        debug_frame,
        got_svma,
        ..Default::default()
    }
}

#[derive(Debug, Clone)]
struct Mapped {
    start: u64,
    end: u64,
    pgoff: u64,
    path: String,
    build_id: Option<BuildId>,
}

#[derive(Default)]
struct Space {
    maps: Vec<Mapped>,
    /// Built from `maps` at the first unwinding after a change.
    unwinder: Option<UnwinderX86_64<SectionBytes>>,
}

/// Unwinds the user stacks of one recording's processes (see the module documentation).
pub struct ProcessUnwinder<'a> {
    locator: &'a BinaryLocator,
    spaces: HashMap<u32, Space>,
    cache: CacheX86_64,
    /// The binary with unwind sections for each (path, build-id), once looked up.
    unwind_binaries: HashMap<(String, Option<BuildId>), Option<Arc<Binary>>>,
}

impl<'a> ProcessUnwinder<'a> {
    /// An unwinder finding binaries through `locator`.
    pub fn new(locator: &'a BinaryLocator) -> ProcessUnwinder<'a> {
        ProcessUnwinder {
            locator,
            spaces: HashMap::new(),
            cache: CacheX86_64::new(),
            unwind_binaries: HashMap::new(),
        }
    }

    /// The binary whose unwind sections serve `path`: the located one, or the recorded
    /// file when the located one is debug-only (no `.eh_frame` bytes) and the build-ids
    /// agree.
    fn unwind_binary(&mut self, path: &str, build_id: Option<&BuildId>) -> Option<Arc<Binary>> {
        let key = (path.to_string(), build_id.cloned());
        if let Some(b) = self.unwind_binaries.get(&key) {
            return b.clone();
        }
        let located = self.locator.locate(path, build_id).binary;
        let b = match located {
            Some(b) if b.section_bytes(".eh_frame").is_some() => Some(b),
            other => {
                let recorded = (path.starts_with('/'))
                    .then(|| Binary::open(Path::new(path)).ok())
                    .flatten()
                    .filter(|r| {
                        r.section_bytes(".eh_frame").is_some()
                            && match (
                                build_id.or(other.as_ref().and_then(|b| b.build_id())),
                                r.build_id(),
                            ) {
                                (Some(w), Some(h)) => w == h,
                                _ => true,
                            }
                    })
                    .map(Arc::new);
                recorded.or(other)
            }
        };
        self.unwind_binaries.insert(key, b.clone());
        b
    }

    fn build(&mut self, maps: &[Mapped]) -> UnwinderX86_64<SectionBytes> {
        let mut u = UnwinderX86_64::new();
        for m in maps {
            let Some(b) = self.unwind_binary(&m.path, m.build_id.as_ref()) else {
                continue;
            };
            // Load bias: the runtime start minus the SVMA its file offset has.
            let svma = b
                .segments()
                .svma_of_offset(m.pgoff)
                .map_or(m.pgoff, |s| s.0);
            let bias = m.start.wrapping_sub(svma);
            u.add_module(Module::new(
                m.path.clone(),
                m.start..m.end,
                bias,
                section_info(&b),
            ));
        }
        u
    }
}

impl StackUnwinder for ProcessUnwinder<'_> {
    fn map(
        &mut self,
        pid: u32,
        start: u64,
        end: u64,
        pgoff: u64,
        path: &str,
        build_id: Option<&BuildId>,
    ) {
        if end <= start || path.starts_with('[') || path.starts_with("//") {
            return;
        }
        let s = self.spaces.entry(pid).or_default();
        // A new mapping over part of older ones replaces that part (as the readers'
        // address rule does): keep what it does not cover.
        let mut kept = Vec::with_capacity(s.maps.len() + 2);
        for m in s.maps.drain(..) {
            if m.end <= start || m.start >= end {
                kept.push(m);
                continue;
            }
            if m.start < start {
                kept.push(Mapped {
                    end: start,
                    ..m.clone()
                });
            }
            if m.end > end {
                kept.push(Mapped {
                    pgoff: m.pgoff.saturating_add(end - m.start),
                    start: end,
                    ..m
                });
            }
        }
        kept.push(Mapped {
            start,
            end,
            pgoff,
            path: path.to_string(),
            build_id: build_id.cloned(),
        });
        kept.sort_by_key(|m| m.start);
        s.maps = kept;
        s.unwinder = None;
    }

    fn fork(&mut self, parent: u32, child: u32) {
        if let Some(maps) = self.spaces.get(&parent).map(|s| s.maps.clone()) {
            self.spaces.insert(
                child,
                Space {
                    maps,
                    unwinder: None,
                },
            );
        }
    }

    fn exec(&mut self, pid: u32) {
        self.spaces.remove(&pid);
    }

    fn unwind(&mut self, pid: u32, regs: UserRegs, stack: &[u8], out: &mut Vec<u64>) -> UnwindEnd {
        let Some(space) = self.spaces.get(&pid) else {
            return UnwindEnd::Truncated;
        };
        if space.unwinder.is_none() {
            let maps = space.maps.clone();
            let u = self.build(&maps);
            self.spaces.get_mut(&pid).expect("present").unwinder = Some(u);
        }
        let unwinder = self.spaces[&pid].unwinder.as_ref().expect("built");
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let off = usize::try_from(addr.checked_sub(regs.sp).ok_or(())?).map_err(|_| ())?;
            let b = stack.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(b.try_into().map_err(|_| ())?))
        };
        let mut it = unwinder.iter_frames(
            regs.ip,
            UnwindRegsX86_64::new(regs.ip, regs.sp, regs.bp),
            &mut self.cache,
            &mut read_stack,
        );
        let mut n = 0usize;
        loop {
            match it.next() {
                Ok(Some(FrameAddress::InstructionPointer(_))) => {}
                Ok(Some(FrameAddress::ReturnAddress(ra))) => {
                    out.push(ra.get());
                    n += 1;
                    if n >= MAX_FRAMES {
                        return UnwindEnd::Truncated;
                    }
                }
                Ok(None) => return UnwindEnd::Root,
                Err(_) => return UnwindEnd::Truncated,
            }
        }
    }
}

impl UnwindSource for BinaryLocator {
    fn unwinder(&self) -> Box<dyn StackUnwinder + '_> {
        Box::new(ProcessUnwinder::new(self))
    }
}
