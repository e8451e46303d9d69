//! Functions of stripped code: the ranges of the call-frame information (`.eh_frame` and
//! `.debug_frame` FDEs) and the symbol table of MiniDebugInfo (`.gnu_debugdata`).
//!
//! Every function a compiler emits for x86-64 Linux has an FDE in `.eh_frame` (the psABI
//! requires unwind tables; gcc and clang emit them by default, `-fasynchronous-unwind-tables`)
//! whose `initial_location` and `address_range` are the function's exact extent, and a
//! `.cold` part split off by the optimiser has its own FDE. A stripped binary keeps
//! `.eh_frame` (the C++ runtime and `backtrace` need it), so its functions are known even
//! where no symbol names them. The rule (see [`add_recovered`]):
//!
//! * a symbol (`.symtab`, `.dynsym`, MiniDebugInfo) or a PLT stub names a function; an FDE
//!   starting at a symbol of size 0 gives it its size;
//! * an FDE that starts outside every named function is a function of its own, cut at the
//!   next named function, named `MODULE!sub_ADDR` (the module's file name, `!`, `sub_` and
//!   the start SVMA in lower-case hex without `0x`: `gawk!sub_46dd00`; the prefix keeps two
//!   modules' unnamed functions apart wherever rows are keyed by name; `sub_` is what IDA
//!   and Ghidra call an unnamed function);
//! * code covered by neither stays outside every function: its samples keep their address
//!   (`gawk+0x46dd58`) and count as unattributed.
//!
//! MiniDebugInfo (Fedora's and others' `.gnu_debugdata`, GDB manual "MiniDebugInfo") is an
//! xz-compressed ELF file whose `.symtab` lists the functions `.dynsym` leaves out; it is
//! read with `lzma-rs`.

use crate::elf::{Function, FunctionOrigin};
use crate::error::BinaryError;
use gimli::{BaseAddresses, CieOrFde, DebugFrame, EhFrame, RunTimeEndian, UnwindSection};
use object::{Object, ObjectSection};
use proftrust_model::Svma;
use std::path::Path;

/// Largest MiniDebugInfo accepted once decompressed (a real one is a few hundred KiB; the
/// cap keeps a corrupt or hostile section from exhausting memory).
const MAX_MINI_DEBUG_INFO: u64 = 256 << 20;

/// `(start, end)` of every FDE of `.eh_frame` and `.debug_frame` in `file` that covers
/// executable code, sorted by start. Unparsable entries end the walk of their section
/// (the ranges read before them are kept).
pub(crate) fn fde_ranges(file: &object::File<'_>) -> Vec<(u64, u64)> {
    let endian = if file.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    let address_size = if file.is_64() { 8 } else { 4 };
    let section = |name: &str| {
        file.section_by_name(name)
            .filter(|s| s.kind() != object::SectionKind::UninitializedData)
    };
    let exec: Vec<(u64, u64)> = file
        .sections()
        .filter(|s| s.kind() == object::SectionKind::Text)
        .map(|s| (s.address(), s.address().saturating_add(s.size())))
        .collect();
    let in_code = |lo: u64| exec.iter().any(|&(a, b)| lo >= a && lo < b);
    let mut bases = BaseAddresses::default();
    if let Some(t) = section(".text") {
        bases = bases.set_text(t.address());
    }
    if let Some(g) = section(".got") {
        bases = bases.set_got(g.address());
    }
    let mut out = Vec::new();
    let mut push = |lo: u64, len: u64| {
        if len > 0 && lo != 0 && in_code(lo) {
            out.push((lo, lo.saturating_add(len)));
        }
    };
    if let Some(s) = section(".eh_frame") {
        if let Ok(bytes) = s.data() {
            let mut eh = EhFrame::new(bytes, endian);
            eh.set_address_size(address_size);
            let mut b = bases.clone().set_eh_frame(s.address());
            if let Some(h) = section(".eh_frame_hdr") {
                b = b.set_eh_frame_hdr(h.address());
            }
            let mut entries = eh.entries(&b);
            while let Ok(Some(e)) = entries.next() {
                if let CieOrFde::Fde(partial) = e {
                    if let Ok(fde) = partial.parse(EhFrame::cie_from_offset) {
                        push(fde.initial_address(), fde.len());
                    }
                }
            }
        }
    }
    if let Some(s) = section(".debug_frame") {
        if let Ok(bytes) = s.data() {
            let mut df = DebugFrame::new(bytes, endian);
            df.set_address_size(address_size);
            let mut entries = df.entries(&bases);
            while let Ok(Some(e)) = entries.next() {
                if let CieOrFde::Fde(partial) = e {
                    if let Ok(fde) = partial.parse(DebugFrame::cie_from_offset) {
                        push(fde.initial_address(), fde.len());
                    }
                }
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The decompressed MiniDebugInfo of `file` (the ELF file inside `.gnu_debugdata`), `None`
/// when there is none; an error when the section cannot be decompressed.
pub(crate) fn mini_debug_info(
    path: &Path,
    file: &object::File<'_>,
) -> Result<Option<Vec<u8>>, BinaryError> {
    let Some(s) = file.section_by_name(".gnu_debugdata") else {
        return Ok(None);
    };
    let bad = |what: String| BinaryError::Malformed {
        path: path.into(),
        what,
    };
    let bytes = s
        .data()
        .map_err(|e| bad(format!("section .gnu_debugdata: {e}")))?;
    // A writer that refuses bytes past the cap, so a hostile section cannot exhaust memory.
    struct Capped(Vec<u8>);
    impl std::io::Write for Capped {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.0.len() as u64 + b.len() as u64 > MAX_MINI_DEBUG_INFO {
                return Err(std::io::Error::other("too large"));
            }
            self.0.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut out = Capped(Vec::new());
    let mut input = std::io::BufReader::new(bytes);
    // MiniDebugInfo is one xz stream (`xz` of the symbol file).
    lzma_rs::xz_decompress(&mut input, &mut out).map_err(|e| {
        bad(format!(
            "section .gnu_debugdata (MiniDebugInfo) does not decompress (an xz stream of at most {MAX_MINI_DEBUG_INFO} bytes expected): {e}"
        ))
    })?;
    let out = out.0;
    Ok(Some(out))
}

/// Adds to `functions` (named functions sorted by start; symbols of size 0 not yet
/// extended) the functions only the FDE ranges `fdes` (sorted) know, by the rule of the
/// module documentation, named with `prefix` (`gawk!sub_46dd00`). A size-0 symbol an FDE
/// starts at takes the FDE's size. Returns the recovered functions, sorted; `functions` is
/// left sorted and otherwise unchanged (the caller merges and re-indexes).
pub(crate) fn add_recovered(
    functions: &mut [Function],
    fdes: &[(u64, u64)],
    prefix: &str,
) -> Vec<Function> {
    let mut out: Vec<Function> = Vec::new();
    let mut last_end = 0u64;
    for &(lo, hi) in fdes {
        if hi <= lo || lo < last_end {
            continue;
        }
        let i = functions.partition_point(|f| f.start.0 <= lo);
        if let Some(f) = i.checked_sub(1).map(|j| &mut functions[j]) {
            if f.start.0 == lo {
                if f.size == 0 {
                    f.size = hi - lo;
                }
                continue;
            }
            if f.size > 0 && lo < f.end().0 {
                continue;
            }
        }
        let hi = functions.get(i).map_or(hi, |n| hi.min(n.start.0));
        let name = recovered_name(prefix, lo);
        out.push(Function {
            raw_name: name.clone(),
            name,
            start: Svma(lo),
            size: hi - lo,
            origin: FunctionOrigin::Recovered,
        });
        last_end = hi;
    }
    out
}

/// The name of an unnamed function recovered at `start` in the module named `prefix`.
pub(crate) fn recovered_name(prefix: &str, start: u64) -> String {
    format!("{prefix}!sub_{start:x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str, start: u64, size: u64) -> Function {
        Function {
            name: name.into(),
            raw_name: name.into(),
            start: Svma(start),
            size,
            origin: FunctionOrigin::DynamicSymbol,
        }
    }

    #[test]
    fn fde_ranges_fill_the_gaps_between_symbols() {
        // Hand-made layout: `main` 0x1000..0x1040 (a symbol), `lab` 0x1100 of size 0, FDEs
        // for main, two unnamed functions, one starting at `lab`, and one running into `tail`.
        let mut f = vec![
            named("main", 0x1000, 0x40),
            named("lab", 0x1100, 0),
            named("tail", 0x1300, 0x10),
        ];
        let fdes = [
            (0x1000, 0x1040),
            (0x1040, 0x1080),
            (0x1090, 0x10a0),
            (0x1100, 0x1180),
            (0x1200, 0x1400),
            (0x1210, 0x1220), // inside the previous FDE: ignored
            (0x1300, 0x1310),
        ];
        let r = add_recovered(&mut f, &fdes, "prog");
        let got: Vec<(&str, u64, u64)> = r
            .iter()
            .map(|f| (f.name.as_str(), f.start.0, f.size))
            .collect();
        assert_eq!(
            got,
            vec![
                ("prog!sub_1040", 0x1040, 0x40),
                ("prog!sub_1090", 0x1090, 0x10),
                ("prog!sub_1200", 0x1200, 0x100), // cut at `tail`
            ]
        );
        assert!(r.iter().all(|f| f.origin == FunctionOrigin::Recovered));
        assert_eq!(f[1].size, 0x80, "the label takes its FDE's size");
        assert_eq!(f[0].size, 0x40);
    }

    #[test]
    fn a_size_zero_label_is_cut_by_a_recovered_function() {
        // `lab` has no size and no FDE of its own; the FDE at 0x1020 starts a function.
        let mut f = vec![named("lab", 0x1000, 0)];
        let r = add_recovered(&mut f, &[(0x1020, 0x1030)], "m");
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].start.0, 0x1020);
        assert_eq!(f[0].size, 0, "extended later, to the recovered function");
    }
}
