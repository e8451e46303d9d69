//! The kernel's vDSO (`[vdso]`): the small shared object the kernel maps into every process
//! (`clock_gettime`, `gettimeofday`, `time`, `getcpu`). It has no file, so perf saves a copy
//! in its build-id cache when it records (`~/.debug/[vdso]/ID/vdso`); on the machine that
//! recorded, the running kernel's vDSO is the same image and can be read from our own
//! process, which has it mapped too (`/proc/self/maps` gives its range, `/proc/self/mem` its
//! bytes). Its code has symbols (`.dynsym`: `__vdso_clock_gettime`, ...) and unwind tables,
//! so samples in it land in functions as perf names them.

use crate::elf::{Binary, OpenOptions};
use proftrust_model::BuildId;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// The module path perf and proftrust give the vDSO.
pub const VDSO: &str = "[vdso]";

/// The vDSO's address range in a `/proc/PID/maps` text: `(start, end)`.
pub fn vdso_range(maps: &str) -> Option<(u64, u64)> {
    maps.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let range = f.next()?;
        if f.nth(4)? != VDSO {
            return None;
        }
        let (a, b) = range.split_once('-')?;
        Some((
            u64::from_str_radix(a, 16).ok()?,
            u64::from_str_radix(b, 16).ok()?,
        ))
    })
}

/// The bytes of this process's vDSO (the running kernel's), or why they cannot be read.
pub fn running_vdso_bytes() -> Result<Vec<u8>, String> {
    let maps =
        std::fs::read_to_string("/proc/self/maps").map_err(|e| format!("/proc/self/maps: {e}"))?;
    let (start, end) = vdso_range(&maps).ok_or("no [vdso] mapping in /proc/self/maps")?;
    let len = end
        .checked_sub(start)
        .filter(|&n| n > 0 && n <= 1 << 24)
        .ok_or("the [vdso] mapping has an implausible size")?;
    let mut mem =
        std::fs::File::open("/proc/self/mem").map_err(|e| format!("/proc/self/mem: {e}"))?;
    mem.seek(SeekFrom::Start(start))
        .map_err(|e| format!("/proc/self/mem: {e}"))?;
    let mut bytes = vec![0u8; len as usize];
    mem.read_exact(&mut bytes)
        .map_err(|e| format!("/proc/self/mem at the [vdso] mapping: {e}"))?;
    Ok(bytes)
}

/// The running kernel's vDSO as a binary named `[vdso]`, or why not.
pub fn running_vdso(opts: &OpenOptions) -> Result<Binary, String> {
    let bytes = running_vdso_bytes()?;
    Binary::from_bytes_with(Path::new(VDSO), bytes, opts).map_err(|e| e.to_string())
}

/// The build-id of the running kernel's vDSO (what a recorder stamps on `[vdso]` samples, as
/// `perf record` does in its build-id table), when it can be read.
pub fn running_vdso_build_id() -> Option<BuildId> {
    // The note alone: no symbols, unwind tables or function recovery for a build-id.
    crate::debuginfo::build_id_of(&running_vdso_bytes().ok()?)
        .filter(|b| !b.is_empty())
        .map(BuildId)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vdso_range_from_maps() {
        let maps = "55d0c0a00000-55d0c0a02000 r--p 00000000 fe:01 123 /usr/bin/cat\n\
                    7ffd1a5f0000-7ffd1a5f4000 r--p 00000000 00:00 0                          [vvar]\n\
                    7ffd1a5f4000-7ffd1a5f6000 r-xp 00000000 00:00 0                          [vdso]\n";
        assert_eq!(vdso_range(maps), Some((0x7ffd1a5f4000, 0x7ffd1a5f6000)));
        assert_eq!(
            vdso_range("00400000-00401000 r-xp 00000000 00:00 0 /a b\n"),
            None
        );
    }

    /// The running vDSO parses, and names `clock_gettime`'s code as the kernel's own symbol
    /// table does (`nm -D` of the copy perf saves would say the same; here `.dynsym` read back
    /// through `object` is the oracle).
    #[test]
    fn running_vdso_has_its_dynamic_symbols() {
        let bytes = match running_vdso_bytes() {
            Ok(b) => b,
            Err(e) => {
                eprintln!("SKIP running_vdso_has_its_dynamic_symbols: {e}");
                return;
            }
        };
        use object::{Object, ObjectSymbol};
        let file = object::File::parse(&*bytes).unwrap();
        let sym = file
            .dynamic_symbols()
            .find(|s| s.name() == Ok("__vdso_clock_gettime"))
            .expect("the vDSO exports __vdso_clock_gettime");
        let b = Binary::from_bytes(Path::new(VDSO), bytes.clone()).unwrap();
        let f = b.function_at(proftrust_model::Svma(sym.address())).unwrap();
        assert_eq!(f.start.0, sym.address());
        assert!(
            f.name.contains("clock_gettime"),
            "function at __vdso_clock_gettime: {}",
            f.name
        );
        assert_eq!(running_vdso_build_id(), b.build_id().cloned());
    }
}
