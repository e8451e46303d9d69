//! Address spaces: which file is mapped where in each process, and the conversion of a
//! runtime address to a module-relative [`Location`].
//!
//! For an executable mapping `[start, start+len)` of file offset `pgoff`, a runtime address
//! `ip` is at file offset `off = ip - start + pgoff`; the ELF `PT_LOAD` segment with
//! `p_offset <= off < p_offset + p_filesz` states it at `svma = off - p_offset + p_vaddr`,
//! and the module's load bias is `ip - svma` (0 for a non-PIE executable).

use proftrust_model::segments::Mapping as Range;
use proftrust_model::{Location, Module, ModuleIdx, ModuleTable};
use std::collections::HashMap;

/// What we need from an ELF file: its build-id and its `PT_LOAD` segments (the address
/// rule is [`proftrust_model::segments`]).
pub(crate) use proftrust_binary::LoadHeaders as ElfInfo;

/// Reads the build-id note and the loadable segments of `path`; `None` when the file cannot
/// be read or is not an object file (the mapping then gets file-offset addresses).
pub(crate) fn read_elf_info(path: &str) -> Option<ElfInfo> {
    ElfInfo::read(std::path::Path::new(path))
}

#[derive(Debug, Clone)]
struct Mapping {
    start: u64,
    end: u64,
    pgoff: u64,
    path: String,
}

/// The executable mappings of every traced process plus the module table being built.
#[derive(Debug, Default)]
pub(crate) struct AddressSpaces {
    per_pid: HashMap<u32, Vec<Mapping>>,
    elf: HashMap<String, Option<ElfInfo>>,
    module_of_path: HashMap<String, ModuleIdx>,
    pub modules: ModuleTable,
}

impl AddressSpaces {
    /// Records an executable mapping. A later mapping over part of an earlier one replaces
    /// only that part (as `mmap` does in the kernel, and perf's reader): the pieces before
    /// and after stay, the tail with its file offset moved.
    pub(crate) fn map(&mut self, pid: u32, start: u64, len: u64, pgoff: u64, path: &str) {
        let end = start.saturating_add(len);
        let v = self.per_pid.entry(pid).or_default();
        let mut kept = Vec::with_capacity(v.len() + 2);
        for m in v.drain(..) {
            if m.end <= start || m.start >= end {
                kept.push(m);
                continue;
            }
            if m.start < start {
                kept.push(Mapping {
                    end: start,
                    ..m.clone()
                });
            }
            if m.end > end {
                kept.push(Mapping {
                    start: end,
                    pgoff: m.pgoff.saturating_add(end - m.start),
                    ..m
                });
            }
        }
        kept.push(Mapping {
            start,
            end,
            pgoff,
            path: path.to_string(),
        });
        *v = kept;
    }

    /// `pid` called exec: its old mappings are gone.
    pub(crate) fn exec(&mut self, pid: u32) {
        self.per_pid.remove(&pid);
    }

    /// `pid` was forked from `ppid`: it starts with a copy of the parent's mappings.
    pub(crate) fn fork(&mut self, pid: u32, ppid: u32) {
        if let Some(v) = self.per_pid.get(&ppid).cloned() {
            self.per_pid.insert(pid, v);
        }
    }

    /// Loads the mappings of a running process from `/proc/PID/maps` (executable ones).
    pub(crate) fn load_proc_maps(&mut self, pid: u32) {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            return;
        };
        for line in text.lines() {
            // The path is the rest of the line (it may hold spaces); the kernel writes a
            // newline in it as `\012`, turned back here as the mmap records give it raw.
            let mut f = line.splitn(6, ' ');
            let (Some(range), Some(perms), Some(off)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            let path = f.nth(2).unwrap_or("").trim_start().replace("\\012", "\n");
            let path = path.as_str();
            if !perms.contains('x') || path.is_empty() {
                continue;
            }
            let Some((a, b)) = range.split_once('-') else {
                continue;
            };
            let (Ok(a), Ok(b), Ok(off)) = (
                u64::from_str_radix(a, 16),
                u64::from_str_radix(b, 16),
                u64::from_str_radix(off, 16),
            ) else {
                continue;
            };
            self.map(pid, a, b - a, off, path);
        }
    }

    /// Module-relative location of runtime address `ip` in process `pid`.
    pub(crate) fn locate(&mut self, pid: u32, ip: u64) -> Location {
        let Some(m) = self
            .per_pid
            .get(&pid)
            .and_then(|v| v.iter().rev().find(|m| m.start <= ip && ip < m.end))
            .cloned()
        else {
            return Location::unmapped(ip);
        };
        if !m.path.starts_with('/') && m.path != "[vdso]" {
            return Location::unmapped(ip);
        }
        let range = Range {
            start: m.start,
            end: m.end,
            pgoff: m.pgoff,
        };
        let Some(off) = range.file_offset(ip) else {
            return Location::unmapped(ip);
        };
        let info = if m.path.starts_with('/') {
            self.elf
                .entry(m.path.clone())
                .or_insert_with(|| read_elf_info(&m.path))
                .clone()
        } else {
            None
        };
        let svma = match &info {
            Some(i) => i.segments.svma_of_offset(off).map_or(off, |s| s.0),
            // [vdso] is linked at 0 and mapped from its start; other files: file offset.
            None => off,
        };
        let idx = match self.module_of_path.get(&m.path) {
            Some(&i) => i,
            None => {
                let mut module = Module::new(m.path.clone());
                module.build_id = info.as_ref().and_then(|i| i.build_id.clone());
                module.load_bias = ip.wrapping_sub(svma);
                let i = self.modules.intern(module);
                self.module_of_path.insert(m.path.clone(), i);
                i
            }
        };
        Location::new(idx, svma)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proftrust_model::segments::{LoadSegment, SegmentTable};
    use proftrust_model::BuildId;

    #[test]
    fn pie_address_becomes_svma_via_segments() {
        let mut a = AddressSpaces::default();
        a.elf.insert(
            "/x/prog".into(),
            Some(ElfInfo {
                build_id: Some(BuildId(vec![0xab])),
                segments: SegmentTable::new(vec![
                    LoadSegment::new(0, 0, 0x600),
                    LoadSegment::new(0x1000, 0x1000, 0x200),
                ]),
            }),
        );
        // text segment (file offset 0x1000) mapped at 0x5555_5555_5000
        a.map(9, 0x5555_5555_5000, 0x1000, 0x1000, "/x/prog");
        let l = a.locate(9, 0x5555_5555_5123);
        assert_eq!(l.svma.0, 0x1123);
        let m = a.modules.get(l.module.unwrap()).unwrap();
        assert_eq!(m.load_bias, 0x5555_5555_4000);
        assert_eq!(m.build_id, Some(BuildId(vec![0xab])));
        // forked child sees the same mapping; exec clears it
        a.fork(10, 9);
        assert_eq!(a.locate(10, 0x5555_5555_5123), l);
        a.exec(10);
        assert_eq!(a.locate(10, 0x5555_5555_5123).module, None);
        assert_eq!(a.locate(9, 0x10).module, None);
        // A later mapping over the middle keeps both ends of the earlier one.
        a.map(9, 0x5555_5555_5400, 0x100, 0, "/x/other");
        assert_eq!(a.locate(9, 0x5555_5555_5123).svma.0, 0x1123);
        assert_eq!(a.locate(9, 0x5555_5555_5600).svma.0, 0x1600);
        let o = a.locate(9, 0x5555_5555_5410);
        assert_eq!(a.modules.get(o.module.unwrap()).unwrap().path, "/x/other");
    }
}
