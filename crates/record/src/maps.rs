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

// What we need from an ELF file: its build-id and its `PT_LOAD` segments (the address rule
// is `proftrust_model::segments`).
use proftrust_binary::LoadHeaders;

/// Reads the build-id note and the loadable segments of `path`; `None` when the file cannot
/// be read or is not an object file (the mapping then gets file-offset addresses).
pub(crate) fn read_elf_info(path: &str) -> Option<LoadHeaders> {
    LoadHeaders::read(std::path::Path::new(path))
}

#[derive(Debug, Clone)]
struct Mapping {
    start: u64,
    end: u64,
    pgoff: u64,
    path: String,
}

/// Lowest kernel address on x86-64.
pub(crate) const KERNEL_START: u64 = 0xffff_8000_0000_0000;

/// The executable mappings of every traced process plus the module table being built.
#[derive(Debug, Default)]
pub(crate) struct AddressSpaces {
    per_pid: HashMap<u32, Vec<Mapping>>,
    elf: HashMap<String, Option<LoadHeaders>>,
    module_of_path: HashMap<String, ModuleIdx>,
    pub modules: ModuleTable,
    /// Loadable kernel modules `(start, end, name)` from `/proc/modules`, read at the first
    /// kernel address (`None` until then).
    kernel_modules: Option<Vec<(u64, u64, String)>>,
}

/// `/proc/modules` lines (`name size refcount deps state address`) as `(start, end,
/// name)`, sorted; modules whose address reads 0 (no privilege) are left out.
pub(crate) fn parse_proc_modules(text: &str) -> Vec<(u64, u64, String)> {
    let mut v: Vec<(u64, u64, String)> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let size: u64 = f.get(1)?.parse().ok()?;
            let addr = u64::from_str_radix(f.get(5)?.trim_start_matches("0x"), 16).ok()?;
            (addr != 0).then(|| (addr, addr.saturating_add(size), f[0].to_string()))
        })
        .collect();
    v.sort();
    v
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

    /// Every mapping known now: `(pid, start, end, pgoff, path)`.
    pub(crate) fn mappings(&self) -> Vec<(u32, u64, u64, u64, String)> {
        let mut v: Vec<(u32, u64, u64, u64, String)> = self
            .per_pid
            .iter()
            .flat_map(|(&pid, maps)| {
                maps.iter()
                    .map(move |m| (pid, m.start, m.end, m.pgoff, m.path.clone()))
            })
            .collect();
        v.sort();
        v
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

    /// The location of kernel address `ip`: in a loadable module (`/proc/modules`), that
    /// module named as perf names it (`[kvm_intel]`); else `[kernel.kallsyms]` with the
    /// running kernel's build-id. The SVMA is the address (kallsyms speaks run-time
    /// addresses).
    fn locate_kernel(&mut self, ip: u64) -> Location {
        let mods = self.kernel_modules.get_or_insert_with(|| {
            std::fs::read_to_string("/proc/modules")
                .map(|t| parse_proc_modules(&t))
                .unwrap_or_default()
        });
        let i = mods.partition_point(|m| m.0 <= ip);
        let name = match i.checked_sub(1).map(|i| &mods[i]) {
            Some((_, end, name)) if ip < *end => format!("[{name}]"),
            _ => "[kernel.kallsyms]".to_string(),
        };
        let idx = match self.module_of_path.get(&name) {
            Some(&i) => i,
            None => {
                let mut module = Module::new(name.clone());
                if name == "[kernel.kallsyms]" {
                    module.build_id = std::fs::read("/sys/kernel/notes")
                        .ok()
                        .and_then(|b| proftrust_binary::build_id_in_notes(&b));
                }
                let i = self.modules.intern(module);
                self.module_of_path.insert(name, i);
                i
            }
        };
        Location::new(idx, ip)
    }

    /// Module-relative location of runtime address `ip` in process `pid`.
    pub(crate) fn locate(&mut self, pid: u32, ip: u64) -> Location {
        if ip >= KERNEL_START {
            return self.locate_kernel(ip);
        }
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
                module.build_id = match &info {
                    Some(i) => i.build_id.clone(),
                    // The child's vDSO is the running kernel's, as ours: its build-id lets
                    // a reader find the image (perf's build-id table does the same).
                    None => proftrust_binary::running_vdso_build_id(),
                };
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
    fn kernel_modules_from_proc_modules() {
        let text = "kvm_intel 380928 0 - Live 0xffffffffc0a00000\nkvm 1146880 1 kvm_intel, Live 0xffffffffc0800000 (E)\nhidden 4096 0 - Live 0x0000000000000000\n";
        assert_eq!(
            parse_proc_modules(text),
            vec![
                (
                    0xffffffffc0800000,
                    0xffffffffc0800000 + 1146880,
                    "kvm".to_string()
                ),
                (
                    0xffffffffc0a00000,
                    0xffffffffc0a00000 + 380928,
                    "kvm_intel".to_string()
                ),
            ]
        );
        let mut a = AddressSpaces {
            kernel_modules: Some(parse_proc_modules(text)),
            ..Default::default()
        };
        let k = a.locate(1, 0xffffffffc0a00010);
        assert_eq!(
            a.modules.get(k.module.unwrap()).unwrap().path,
            "[kvm_intel]"
        );
        assert_eq!(k.svma.0, 0xffffffffc0a00010);
        let k = a.locate(1, 0xffffffff81000010);
        assert_eq!(
            a.modules.get(k.module.unwrap()).unwrap().path,
            "[kernel.kallsyms]"
        );
    }

    #[test]
    fn pie_address_becomes_svma_via_segments() {
        let mut a = AddressSpaces::default();
        a.elf.insert(
            "/x/prog".into(),
            Some(LoadHeaders {
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
