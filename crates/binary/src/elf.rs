//! One ELF file: header checks, sections, function symbols, build-id, debug info.

use crate::debuginfo::{find_separate_debug_file, DebugInfo};
use crate::demangle::demangle;
use crate::error::BinaryError;
use crate::recover;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SectionKind, SymbolKind};
use proftrust_model::segments::{LoadSegment, SegmentTable};
use proftrust_model::{BuildId, Svma};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where a [`Function`] comes from: what its name and its extent stand on.
///
/// This is the attribution fact reports and verdicts need: a function named by a symbol
/// table is what the developer calls it; a recovered one has the exact extent of its FDE
/// but a made-up name (`gawk!sub_46dd00`, see `recover.rs`); code in no function has
/// neither (see [`Symbolizer::attribution`](crate::Symbolizer::attribution)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FunctionOrigin {
    /// `.symtab` of the file, or of its separate debug file.
    SymbolTable,
    /// `.dynsym` only (an exported function of a stripped file).
    DynamicSymbol,
    /// The symbol table of the file's MiniDebugInfo (`.gnu_debugdata`).
    MiniDebugInfo,
    /// A synthesized `name@plt` (or `[plt]`) stub.
    Plt,
    /// An `.eh_frame`/`.debug_frame` FDE no symbol names: exact range, synthetic name.
    Recovered,
}

impl FunctionOrigin {
    /// How reports name the origin: `symtab`, `dynsym`, `minidebuginfo`, `plt`, `fde`.
    pub fn as_str(self) -> &'static str {
        match self {
            FunctionOrigin::SymbolTable => "symtab",
            FunctionOrigin::DynamicSymbol => "dynsym",
            FunctionOrigin::MiniDebugInfo => "minidebuginfo",
            FunctionOrigin::Plt => "plt",
            FunctionOrigin::Recovered => "fde",
        }
    }

    /// Whether a symbol (or the PLT) names the function, rather than a made-up
    /// `MODULE!sub_ADDR`.
    pub fn is_named(self) -> bool {
        self != FunctionOrigin::Recovered
    }
}

/// A function: a code symbol of the binary, a synthesized `name@plt` stub, or a range of
/// the call-frame information no symbol names (`gawk!sub_46dd00`; see [`FunctionOrigin`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Demangled name (`foo::bar(int)`, `core::fmt::write`, `main`).
    pub name: String,
    /// Name as the symbol table holds it (mangled).
    pub raw_name: String,
    /// Entry address.
    pub start: Svma,
    /// Size in bytes. Symbols of size 0 take the size of an FDE starting at them, else run
    /// to the next function or section end.
    pub size: u64,
    /// Where it comes from.
    pub origin: FunctionOrigin,
}

impl Function {
    /// One past the last byte.
    pub fn end(&self) -> Svma {
        Svma(self.start.0.saturating_add(self.size))
    }
    /// Whether `a` lies inside the function.
    pub fn contains(&self, a: Svma) -> bool {
        a >= self.start && a < self.end()
    }
}

/// One stack frame of an inline chain (see [`Binary::frames`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Demangled function name.
    pub function: String,
    /// Source file: for the innermost frame the file of the address, for outer frames the
    /// file of the call site of the next inner frame (as `addr2line -i` prints them).
    pub file: Option<String>,
    /// Source line, same convention as `file`.
    pub line: Option<u32>,
}

/// Options for [`Binary::open_with`].
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// Roots searched for separate debug files: `ROOT/.build-id/xx/rest.debug` and
    /// `ROOT/<dir of the binary>/<debuglink name>`.
    /// Default is `["/usr/lib/debug"]`.
    pub debug_dirs: Vec<PathBuf>,
    /// Whether to look for separate debug files at all. Default is `true`.
    pub separate_debug: bool,
    /// The module name recovered functions are prefixed with (`gawk` in
    /// `gawk!sub_46dd00`). Default: `None`, the file name of the path opened (a locator
    /// that finds a module in a cache under another name passes the recorded one).
    pub module_name: Option<String>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            debug_dirs: vec![PathBuf::from("/usr/lib/debug")],
            separate_debug: true,
            module_name: None,
        }
    }
}

/// A section with its address range and where its bytes lie in the file.
#[derive(Debug, Clone)]
pub(crate) struct SectionInfo {
    pub name: String,
    pub addr: u64,
    pub size: u64,
    /// File offset and size of the bytes, `None` for NOBITS.
    pub file: Option<(u64, u64)>,
    pub exec: bool,
}

/// One ELF file (executable or shared object, PIE or not) with lazily parsed debug info.
///
/// Opening reads the file, checks its headers, and reads sections and symbols; DWARF is
/// parsed on the first call to [`frames`](Binary::frames). Everything is owned, so a
/// `Binary` is `Send + Sync` and can be shared between threads.
pub struct Binary {
    path: PathBuf,
    pub(crate) data: Arc<[u8]>,
    /// `e_machine` of the ELF header.
    machine: u16,
    build_id: Option<BuildId>,
    pie: bool,
    shared_object: bool,
    functions: Vec<Function>,
    by_name: HashMap<String, usize>,
    pub(crate) sections: Vec<SectionInfo>,
    /// `PT_LOAD` program headers.
    segments: SegmentTable,
    /// GOT slot address -> name of the symbol it holds (from dynamic relocations).
    pub(crate) got_names: HashMap<u64, String>,
    has_symtab: bool,
    /// Whether function names came from MiniDebugInfo.
    has_mini_debug_info: bool,
    /// Functions recovered from FDEs (no symbol names them).
    recovered: usize,
    /// Whether any two functions overlap (then `function_at` looks further back).
    overlapping: bool,
    /// `functions[i].start`, for the binary search.
    starts: Vec<u64>,
    debug: DebugInfo,
    warnings: Vec<String>,
}

impl std::fmt::Debug for Binary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binary")
            .field("path", &self.path)
            .field("build_id", &self.build_id)
            .field("pie", &self.pie)
            .field("functions", &self.functions.len())
            .finish()
    }
}

const EM_X86_64: u16 = 62;
const EM_386: u16 = 3;

/// The architecture an ELF `e_machine` names, as messages show it (`AArch64 (EM_AARCH64)`).
fn machine_name(m: u16) -> String {
    match m {
        3 => "x86 (EM_386)".into(),
        40 => "ARM (EM_ARM)".into(),
        183 => "AArch64 (EM_AARCH64)".into(),
        243 => "RISC-V (EM_RISCV)".into(),
        8 => "MIPS (EM_MIPS)".into(),
        20 => "PowerPC (EM_PPC)".into(),
        21 => "PowerPC64 (EM_PPC64)".into(),
        22 => "s390 (EM_S390)".into(),
        62 => "x86-64 (EM_X86_64)".into(),
        2 => "SPARC (EM_SPARC)".into(),
        43 => "SPARC v9 (EM_SPARCV9)".into(),
        258 => "LoongArch (EM_LOONGARCH)".into(),
        other => format!("machine {other}"),
    }
}

fn describe_non_elf(data: &[u8]) -> String {
    let head = &data[..data.len().min(4)];
    if head.starts_with(b"MZ") {
        "it is a PE/Windows file".into()
    } else if head == [0xcf, 0xfa, 0xed, 0xfe] || head == [0xca, 0xfe, 0xba, 0xbe] {
        "it is a Mach-O file".into()
    } else if head.starts_with(b"#!") {
        "it is a script".into()
    } else if data
        .iter()
        .take(256)
        .all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace())
    {
        "it is a text file".into()
    } else {
        format!("it starts with bytes {head:02x?}, not 7f 45 4c 46")
    }
}

/// Reads the ELF header's fields in the file's byte order.
#[derive(Clone, Copy)]
struct Header<'a> {
    data: &'a [u8],
    big: bool,
}

impl Header<'_> {
    fn u16(&self, o: usize) -> u16 {
        let b = [self.data[o], self.data[o + 1]];
        if self.big {
            u16::from_be_bytes(b)
        } else {
            u16::from_le_bytes(b)
        }
    }
    fn u32(&self, o: usize) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.data[o..o + 4]);
        if self.big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    }
    fn u64(&self, o: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.data[o..o + 8]);
        if self.big {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        }
    }
}

/// Checks the ELF header by hand so that each kind of bad input gets its own clear error;
/// returns `e_machine`. Both classes (32- and 64-bit) and both byte orders are read: the
/// symbols, inline frames and lines of any architecture's binary are named; only what
/// decodes machine code needs x86-64 ([`Binary::is_x86_64`]).
fn check_header(path: &Path, data: &[u8]) -> Result<u16, BinaryError> {
    let len = data.len() as u64;
    if data.is_empty() {
        return Err(BinaryError::Empty { path: path.into() });
    }
    if !data.starts_with(b"\x7fELF") {
        return Err(BinaryError::NotElf {
            path: path.into(),
            what: describe_non_elf(data),
        });
    }
    if data.len() < 6 {
        return Err(BinaryError::Truncated {
            path: path.into(),
            what: "the ELF identification".into(),
            needed: 16,
            len,
        });
    }
    let (class, endian) = (data[4], data[5]);
    if !matches!(class, 1 | 2) || !matches!(endian, 1 | 2) {
        return Err(BinaryError::Malformed {
            path: path.into(),
            what: format!(
                "ELF class {class} / data encoding {endian} in the identification (1 or 2 each)"
            ),
        });
    }
    let wide = class == 2;
    let needed = if wide { 64 } else { 52 };
    if data.len() < needed {
        return Err(BinaryError::Truncated {
            path: path.into(),
            what: "the ELF header".into(),
            needed: needed as u64,
            len,
        });
    }
    let h = Header {
        data,
        big: endian == 2,
    };
    let machine = h.u16(0x12);
    // e_phoff, e_shoff, then e_phentsize, e_phnum, e_shentsize, e_shnum (ELF gABI, "ELF
    // Header"; the offsets differ between the classes).
    let (phoff, shoff, sizes) = if wide {
        (h.u64(0x20), h.u64(0x28), 0x36)
    } else {
        (h.u32(0x1c) as u64, h.u32(0x20) as u64, 0x2a)
    };
    let phentsize = h.u16(sizes) as u64;
    let phnum = h.u16(sizes + 2) as u64;
    let shentsize = h.u16(sizes + 4) as u64;
    let shnum = h.u16(sizes + 6) as u64;
    let ph_end = phoff.saturating_add(phentsize.saturating_mul(phnum));
    if phnum > 0 && ph_end > len {
        return Err(BinaryError::Truncated {
            path: path.into(),
            what: "the program header table".into(),
            needed: ph_end,
            len,
        });
    }
    // shnum == 0 with shoff != 0 means the count is in section 0's sh_size; at least
    // section 0 must be present.
    let sh_end = shoff.saturating_add(shentsize.saturating_mul(shnum.max(1)));
    if shoff != 0 && sh_end > len {
        return Err(BinaryError::Truncated {
            path: path.into(),
            what: "the section header table".into(),
            needed: sh_end,
            len,
        });
    }
    Ok(machine)
}

/// Names of functions that never return; a call to one ends its basic block with no
/// successor. Matched after removing an `@plt` suffix.
pub(crate) fn is_noreturn(name: &str) -> bool {
    let n = name.strip_suffix("@plt").unwrap_or(name);
    matches!(
        n,
        "abort"
            | "exit"
            | "_exit"
            | "_Exit"
            | "quick_exit"
            | "__stack_chk_fail"
            | "__assert_fail"
            | "__assert_perror_fail"
            | "__fortify_fail"
            | "__chk_fail"
            | "__cxa_throw"
            | "__cxa_rethrow"
            | "__cxa_bad_cast"
            | "__cxa_bad_typeid"
            | "__cxa_call_unexpected"
            | "_Unwind_Resume"
            | "_ZSt9terminatev"
            | "std::terminate()"
            | "longjmp"
            | "_longjmp"
            | "siglongjmp"
            | "__longjmp_chk"
            | "pthread_exit"
            | "err"
            | "errx"
            | "verr"
            | "verrx"
    ) || n.starts_with("core::panicking::")
        || n.starts_with("std::panicking::begin_panic")
        || n.starts_with("core::option::unwrap_failed")
        || n.starts_with("core::option::expect_failed")
        || n.starts_with("core::result::unwrap_failed")
        || n.starts_with("alloc::alloc::handle_alloc_error")
        || n.starts_with("std::process::exit")
        || n.starts_with("std::process::abort")
}

/// The section table, each section's file range checked against the file's `len`, and
/// whether DWARF (`.debug_info`) is embedded.
fn section_infos(
    path: &Path,
    file: &object::File<'_>,
    len: u64,
) -> Result<(Vec<SectionInfo>, bool), BinaryError> {
    let mut sections = Vec::new();
    let mut has_dwarf = false;
    for s in file.sections() {
        let name = s.name().unwrap_or("").to_string();
        let file_range = s.file_range();
        if let Some((off, size)) = file_range {
            let end = off.saturating_add(size);
            if end > len {
                return Err(BinaryError::Truncated {
                    path: path.into(),
                    what: format!("section {name}"),
                    needed: end,
                    len,
                });
            }
        }
        if (name == ".debug_info" || name == ".zdebug_info") && s.size() > 0 {
            has_dwarf = true;
        }
        sections.push(SectionInfo {
            exec: s.kind() == SectionKind::Text,
            addr: s.address(),
            size: s.size(),
            file: file_range,
            name,
        });
    }
    Ok((sections, has_dwarf))
}

/// GOT slots -> symbol names, from the dynamic relocations (JUMP_SLOT, GLOB_DAT).
fn got_slot_names(file: &object::File<'_>) -> HashMap<u64, String> {
    let mut got_names = HashMap::new();
    if let Some(relocs) = file.dynamic_relocations() {
        let mut names: Vec<Option<&str>> = Vec::new();
        for sym in file.dynamic_symbols() {
            let i = sym.index().0;
            if i < (1 << 24) {
                if names.len() <= i {
                    names.resize(i + 1, None);
                }
                names[i] = sym.name().ok().filter(|n| !n.is_empty());
            }
        }
        for (slot, r) in relocs {
            if let object::RelocationTarget::Symbol(idx) = r.target() {
                if let Some(Some(n)) = names.get(idx.0) {
                    got_names.insert(slot, n.to_string());
                }
            }
        }
    }
    got_names
}

/// The debug info of a binary without embedded DWARF: a separate debug file (by build-id
/// or `.gnu_debuglink`, with its bytes) when `opts` allow, else none with a warning.
fn find_debug(
    path: &Path,
    file: &object::File<'_>,
    build_id: Option<&BuildId>,
    opts: &OpenOptions,
    warnings: &mut Vec<String>,
) -> (DebugInfo, Option<Vec<u8>>) {
    if !opts.separate_debug {
        warnings.push(format!(
            "no debug info in {}: inline frames and source lines are unavailable; build with -g",
            path.display()
        ));
        return (DebugInfo::none(), None);
    }
    let link = file
        .gnu_debuglink()
        .ok()
        .flatten()
        .map(|(n, crc)| (String::from_utf8_lossy(n).into_owned(), crc));
    match find_separate_debug_file(path, build_id, link, &opts.debug_dirs) {
        Some((p, bytes)) => (DebugInfo::separate(p), Some(bytes)),
        None => {
            warnings.push(format!(
                "no debug info in {}: inline frames and source lines are unavailable; install the -dbg/-dbgsym package or build with -g",
                path.display()
            ));
            (DebugInfo::none(), None)
        }
    }
}

/// A binary's function symbols and where they came from.
struct FunctionSymbols {
    raw: Vec<RawSymbol>,
    has_symtab: bool,
    has_mini_debug_info: bool,
}

impl FunctionSymbols {
    /// `.symtab`, else the `.symtab` of the separate debug file (`debug_bytes`; Debian's
    /// -dbgsym files keep it), else `.dynsym` plus the `.symtab` of MiniDebugInfo.
    fn read(
        path: &Path,
        file: &object::File<'_>,
        debug_bytes: Option<&[u8]>,
        warnings: &mut Vec<String>,
    ) -> FunctionSymbols {
        let mut raw: Vec<RawSymbol> = Vec::new();
        collect_functions(file, false, FunctionOrigin::SymbolTable, &mut raw);
        if raw.is_empty() {
            if let Some(df) = debug_bytes.and_then(|dd| object::File::parse(dd).ok()) {
                collect_functions(&df, false, FunctionOrigin::SymbolTable, &mut raw);
            }
        }
        if !raw.is_empty() {
            return FunctionSymbols {
                raw,
                has_symtab: true,
                has_mini_debug_info: false,
            };
        }
        let mut has_mini_debug_info = false;
        collect_functions(file, true, FunctionOrigin::DynamicSymbol, &mut raw);
        match recover::mini_debug_info(path, file) {
            Ok(Some(mini)) => match object::File::parse(&*mini) {
                Ok(mf) => {
                    let before = raw.len();
                    collect_functions(&mf, false, FunctionOrigin::MiniDebugInfo, &mut raw);
                    has_mini_debug_info = raw.len() > before;
                }
                Err(e) => warnings.push(format!(
                    "{}: the MiniDebugInfo (.gnu_debugdata) is not an ELF file ({e}): its function names are not used",
                    path.display()
                )),
            },
            Ok(None) => {}
            Err(e) => warnings.push(format!("{e}: its function names are not used")),
        }
        FunctionSymbols {
            raw,
            has_symtab: false,
            has_mini_debug_info,
        }
    }
}

/// The functions being built from the symbols, PLT stubs and call-frame information, with
/// the index of every name they are found by.
struct FunctionTable {
    functions: Vec<Function>,
    by_name: HashMap<String, usize>,
    /// Every symbol name with its address: aliases at one address share a function.
    all_names: Vec<(String, u64)>,
}

impl FunctionTable {
    /// One function per address of `raw` (sorted by [`alias_order`]), the others aliases;
    /// room for `extra` more.
    fn from_symbols(raw: Vec<RawSymbol>, extra: usize) -> FunctionTable {
        let mut functions: Vec<Function> = Vec::with_capacity(raw.len() + extra);
        let mut by_name = HashMap::new();
        let mut all_names: Vec<(String, u64)> = Vec::with_capacity(raw.len());
        for r in raw {
            let RawSymbol {
                addr,
                size,
                name,
                origin,
                ..
            } = r;
            all_names.push((name.clone(), addr));
            let idx = match functions.last_mut() {
                Some(last) if last.start.0 == addr => {
                    if last.size == 0 {
                        last.size = size;
                    }
                    // An alias: findable by its own names too.
                    let demangled = demangle(&name);
                    if demangled != name {
                        by_name.entry(demangled).or_insert(functions.len() - 1);
                    }
                    functions.len() - 1
                }
                _ => {
                    let demangled = demangle(&name);
                    if demangled != name {
                        by_name.entry(demangled.clone()).or_insert(functions.len());
                    }
                    functions.push(Function {
                        name: demangled,
                        raw_name: name.clone(),
                        start: Svma(addr),
                        size,
                        origin,
                    });
                    functions.len() - 1
                }
            };
            by_name.entry(name).or_insert(idx);
        }
        FunctionTable {
            functions,
            by_name,
            all_names,
        }
    }

    /// PLT stubs where no symbol is, and the functions only the call-frame information
    /// knows (`fdes`, recover.rs; named `prefix!sub_ADDR`) between the named ones; sizes the
    /// FDEs give to size-0 symbols. Returns how many functions were recovered.
    fn add_stubs_and_recovered(
        &mut self,
        plt: Vec<Function>,
        fdes: &[(u64, u64)],
        prefix: &str,
    ) -> usize {
        let functions = &mut self.functions;
        let mut extra: Vec<Function> = plt
            .into_iter()
            .filter(|p| {
                let i = functions.partition_point(|f| f.start.0 <= p.start.0);
                i == 0 || !functions[i - 1].contains(p.start) && functions[i - 1].start != p.start
            })
            .collect();
        let mut named: Vec<Function> = functions.clone();
        named.extend(extra.iter().cloned());
        named.sort_by_key(|f| f.start);
        let recovered = recover::add_recovered(&mut named, fdes, prefix);
        for f in functions.iter_mut().chain(extra.iter_mut()) {
            if f.size == 0 {
                if let Ok(i) = named.binary_search_by_key(&f.start, |n| n.start) {
                    f.size = named[i].size;
                }
            }
        }
        let recovered_count = recovered.len();
        extra.extend(recovered);
        if !extra.is_empty() {
            // Stubs and recovered functions go between the symbols: move every name
            // (aliases included) to its function's new index (starts are distinct), then
            // add their names.
            let old_starts: Vec<Svma> = functions.iter().map(|f| f.start).collect();
            let stub_names: Vec<(String, Svma)> =
                extra.iter().map(|f| (f.name.clone(), f.start)).collect();
            functions.append(&mut extra);
            functions.sort_by_key(|f| f.start);
            let index_of = |a: Svma| functions.partition_point(|f| f.start < a);
            for v in self.by_name.values_mut() {
                *v = index_of(old_starts[*v]);
            }
            for (name, start) in stub_names {
                self.by_name.entry(name).or_insert_with(|| index_of(start));
            }
        }
        recovered_count
    }

    /// Aliases (kept through the rebuild of [`add_stubs_and_recovered`]), and dynamic
    /// symbols also under their name without the version (`printf@@GLIBC_2.2.5` as
    /// `printf`, as a PLT stub or a relocation names it).
    fn add_alias_names(&mut self) {
        let (functions, by_name) = (&self.functions, &mut self.by_name);
        for (name, addr) in &self.all_names {
            if let Ok(i) = functions.binary_search_by_key(addr, |f| f.start.0) {
                by_name.entry(name.clone()).or_insert(i);
                by_name.entry(demangle(name)).or_insert(i);
            }
        }
        // The default version (`@@`) first: that is what a new link binds to.
        for default in [true, false] {
            for (name, addr) in &self.all_names {
                let Some((base, ver)) = name.split_once('@') else {
                    continue;
                };
                if base.is_empty() || ver.starts_with('@') != default {
                    continue;
                }
                if let Ok(i) = functions.binary_search_by_key(addr, |f| f.start.0) {
                    by_name.entry(base.to_string()).or_insert(i);
                }
            }
        }
    }

    /// Size-0 symbols run to the next function or the end of their section.
    fn size_zero_to_next(&mut self, sections: &[SectionInfo]) {
        let functions = &mut self.functions;
        for i in 0..functions.len() {
            if functions[i].size == 0 {
                let start = functions[i].start.0;
                let sec_end = sections
                    .iter()
                    .find(|s| s.exec && start >= s.addr && start < s.addr + s.size)
                    .map(|s| s.addr + s.size)
                    .unwrap_or(start);
                let next = functions
                    .get(i + 1)
                    .map(|f| f.start.0)
                    .unwrap_or(u64::MAX)
                    .min(sec_end);
                functions[i].size = next.saturating_sub(start);
            }
        }
    }
}

/// The warning of a binary without `.symtab`: where its `functions` are named from
/// (`.dynsym`, MiniDebugInfo), how many were `recovered`, and the fix.
fn no_symtab_warning(
    path: &Path,
    opts: &OpenOptions,
    functions: &[Function],
    recovered: usize,
    has_mini_debug_info: bool,
) -> Option<String> {
    let named = functions.len() - recovered;
    let sources = if has_mini_debug_info {
        ".dynsym and MiniDebugInfo"
    } else {
        ".dynsym"
    };
    let fix = "install the -dbgsym/-debuginfo package or use an unstripped build for their names";
    if functions.is_empty() {
        Some(format!(
            "no function symbols and no call-frame information (.eh_frame) in {}: locations are shown as module+offset; use an unstripped build",
            path.display()
        ))
    } else if recovered > 0 {
        Some(format!(
            "no symbol table (.symtab) in {}: {named} functions are named from {sources}, {recovered} more are recovered from the call-frame information (.eh_frame) and named {}!sub_ADDR; {fix}",
            path.display(),
            opts.module_name.as_deref().unwrap_or_else(|| path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("MODULE"))
        ))
    } else if !has_mini_debug_info {
        Some(format!(
            "no symbol table (.symtab) and no call-frame information (.eh_frame) in {}: only exported functions (.dynsym) are named, samples in other code keep their addresses (module+offset); {fix}",
            path.display()
        ))
    } else {
        None
    }
}

impl Binary {
    /// Opens an ELF file with default [`OpenOptions`].
    ///
    /// Errors name the file: empty, not ELF, truncated, unsupported architecture, malformed.
    pub fn open(path: &Path) -> Result<Binary, BinaryError> {
        Binary::open_with(path, &OpenOptions::default())
    }

    /// Opens an ELF file.
    pub fn open_with(path: &Path, opts: &OpenOptions) -> Result<Binary, BinaryError> {
        let io = |err| BinaryError::Io {
            path: path.into(),
            err,
        };
        if std::fs::metadata(path).map_err(io)?.is_dir() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "it is a directory, not an ELF file",
            )));
        }
        let data = std::fs::read(path).map_err(io)?;
        Binary::from_bytes_with(path, data, opts)
    }

    /// Parses ELF bytes already in memory; `path` is used in messages and to find separate
    /// debug files. Never panics on bad input.
    pub fn from_bytes(path: &Path, data: Vec<u8>) -> Result<Binary, BinaryError> {
        Binary::from_bytes_with(path, data, &OpenOptions::default())
    }

    /// [`from_bytes`](Binary::from_bytes) with options.
    pub fn from_bytes_with(
        path: &Path,
        data: Vec<u8>,
        opts: &OpenOptions,
    ) -> Result<Binary, BinaryError> {
        let machine = check_header(path, &data)?;
        let data: Arc<[u8]> = Arc::from(data);
        let malformed = |e: object::Error| BinaryError::Malformed {
            path: path.into(),
            what: e.to_string(),
        };
        let file = object::File::parse(&*data).map_err(malformed)?;
        let (sections, has_dwarf) = section_infos(path, &file, data.len() as u64)?;
        let segments = segment_table(&file);
        let build_id = match file.build_id() {
            Ok(Some(b)) if !b.is_empty() => Some(BuildId(b.to_vec())),
            _ => None,
        };
        // ET_DYN = 3: position independent (PIE executable or shared object).
        let e_type = Header {
            data: &data,
            big: data[5] == 2,
        }
        .u16(0x10);
        let pie = e_type == 3;
        let has_interp = sections.iter().any(|s| s.name == ".interp");
        let shared_object = pie && !has_interp;
        let mut warnings = Vec::new();
        let mut got_names = got_slot_names(&file);
        let (debug, debug_bytes) = if has_dwarf {
            (DebugInfo::embedded(data.clone()), None)
        } else {
            find_debug(path, &file, build_id.as_ref(), opts, &mut warnings)
        };
        let symbols = FunctionSymbols::read(path, &file, debug_bytes.as_deref(), &mut warnings);
        let mut raw = symbols.raw;
        // A static binary's PLT stubs jump through slots IRELATIVE relocations fill: name
        // them after the IFUNC they resolve.
        if machine == EM_X86_64 || machine == EM_386 {
            for (slot, name) in irelative_names(&sections, &data, data[5] == 2, &raw) {
                got_names.entry(slot).or_insert(name);
            }
        }
        // Synthesize `name@plt` for PLT stubs, as objdump and perf show them.
        let plt = if machine == EM_X86_64 || machine == EM_386 {
            plt_stubs(&sections, &data, &got_names, machine == EM_386)
        } else {
            plt_stubs_by_relocation(&file, machine, &sections, &data, &got_names)
        };
        // Stable: symbol-table order breaks the remaining ties.
        raw.sort_by_key(alias_order);
        let mut table = FunctionTable::from_symbols(raw, plt.len());
        let prefix = opts.module_name.clone().unwrap_or_else(|| {
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        let recovered = table.add_stubs_and_recovered(plt, &recover::fde_ranges(&file), &prefix);
        table.add_alias_names();
        table.size_zero_to_next(&sections);
        let FunctionTable {
            functions, by_name, ..
        } = table;
        if !symbols.has_symtab {
            warnings.extend(no_symtab_warning(
                path,
                opts,
                &functions,
                recovered,
                symbols.has_mini_debug_info,
            ));
        }
        let overlapping = functions.windows(2).any(|w| w[0].end() > w[1].start);
        let starts = functions.iter().map(|f| f.start.0).collect();
        Ok(Binary {
            starts,
            overlapping,
            path: path.to_path_buf(),
            data,
            machine,
            build_id,
            pie,
            shared_object,
            functions,
            by_name,
            sections,
            segments,
            got_names,
            has_symtab: symbols.has_symtab,
            has_mini_debug_info: symbols.has_mini_debug_info,
            recovered,
            debug,
            warnings,
        })
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `e_machine` of the ELF header (62 for x86-64, 183 for AArch64).
    pub fn machine(&self) -> u16 {
        self.machine
    }

    /// The architecture as messages name it (`x86-64 (EM_X86_64)`, `AArch64 (EM_AARCH64)`).
    pub fn arch(&self) -> String {
        machine_name(self.machine)
    }

    /// Whether the code is x86-64, the one architecture whose machine code this crate
    /// decodes (instructions, CFGs, jump tables, call sites). Symbols, inline frames and
    /// lines work for every architecture.
    pub fn is_x86_64(&self) -> bool {
        self.machine == EM_X86_64
    }

    /// `Ok` for an x86-64 binary, else the one-line [`BinaryError::NotX86_64`] naming
    /// `what` needed the decoding (`"the control-flow graph"`).
    pub fn require_x86_64(&self, what: &str) -> Result<(), BinaryError> {
        if self.is_x86_64() {
            Ok(())
        } else {
            Err(BinaryError::NotX86_64 {
                path: self.path.clone(),
                arch: self.arch(),
                what: what.to_string(),
            })
        }
    }

    /// The GNU build-id, when the file has one.
    pub fn build_id(&self) -> Option<&BuildId> {
        self.build_id.as_ref()
    }

    /// The `PT_LOAD` segments: with the mapping a profiler saw, they turn runtime addresses
    /// into SVMAs (see [`proftrust_model::segments`]).
    pub fn segments(&self) -> &SegmentTable {
        &self.segments
    }

    /// Whether the file is position independent (ELF type `ET_DYN`: a PIE executable or a
    /// shared object), i.e. loaded at a load bias that must be subtracted from runtime
    /// addresses. See [`is_shared_object`](Binary::is_shared_object) to tell the two apart.
    pub fn is_pie(&self) -> bool {
        self.pie
    }

    /// Whether the file is a shared library (`ET_DYN` without a `.interp` section).
    pub fn is_shared_object(&self) -> bool {
        self.shared_object
    }

    /// Whether function names come from a full symbol table (`.symtab`) rather than only the
    /// dynamic symbols.
    pub fn has_symtab(&self) -> bool {
        self.has_symtab
    }

    /// Whether function names came from MiniDebugInfo (`.gnu_debugdata`).
    pub fn has_mini_debug_info(&self) -> bool {
        self.has_mini_debug_info
    }

    /// How many functions were recovered from FDEs, named `MODULE!sub_ADDR`
    /// ([`FunctionOrigin::Recovered`]).
    pub fn recovered_functions(&self) -> usize {
        self.recovered
    }

    /// Whether DWARF debug info (embedded or in a separate file) was found.
    pub fn has_debug_info(&self) -> bool {
        self.debug.is_present()
    }

    /// Path of the separate debug file in use, if any.
    pub fn debug_file(&self) -> Option<&Path> {
        self.debug.separate_path()
    }

    /// Functions sorted by start address; aliases at one address appear once.
    pub fn functions(&self) -> &[Function] {
        &self.functions
    }

    /// The function containing `a` (the outermost one when symbols overlap). Binary search.
    pub fn function_at(&self, a: Svma) -> Option<&Function> {
        // Search the dense start array (8 bytes per function, cache friendly).
        let i = self.starts.partition_point(|&s| s <= a.0);
        if !self.overlapping {
            return self.functions[..i].last().filter(|f| f.contains(a));
        }
        // Usually the closest start contains `a`; overlapping symbols are rare, so look a
        // few back for an enclosing one and keep the earliest start (the outermost).
        let mut best = None;
        for f in self.functions[..i].iter().rev().take(8) {
            if f.contains(a) {
                best = Some(f);
            }
        }
        best
    }

    /// The function with this raw (mangled) or demangled name — also under an alias at the
    /// same address, and a dynamic symbol under its name without the version
    /// (`printf@@GLIBC_2.2.5` as `printf`, as `printf@plt` calls it).
    pub fn function_by_name(&self, name: &str) -> Option<&Function> {
        self.by_name.get(name).map(|&i| &self.functions[i])
    }

    /// The inline chain at `a`, innermost first; the last frame is the outermost function.
    ///
    /// Without DWARF, one frame from the symbol table (no file or line); outside any
    /// function, empty.
    pub fn frames(&self, a: Svma) -> Vec<Frame> {
        let mut out = self.debug.frames(a.0);
        if out.is_empty() {
            if let Some(f) = self.function_at(a) {
                out.push(Frame {
                    function: f.name.clone(),
                    file: None,
                    line: None,
                });
            }
        }
        out
    }

    /// The inline chain at `a`, innermost first, with each frame's linkage name, column,
    /// discriminator and its function's start line: what a PGO profile keys lines by
    /// (see [`SourceFrame`](crate::SourceFrame)). Without DWARF, one frame from the symbol
    /// table; outside any function, empty.
    pub fn source_frames(&self, a: Svma) -> Vec<crate::SourceFrame> {
        let mut out = self.debug.source_frames(a.0);
        if out.is_empty() {
            if let Some(f) = self.function_at(a) {
                out.push(crate::SourceFrame {
                    function: f.name.clone(),
                    linkage_name: f.raw_name.clone(),
                    duplication: 1,
                    ..Default::default()
                });
            }
        }
        out
    }

    /// Warnings found while opening (no debug info, no symbol table) and while loading
    /// debug info so far.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Problems met while loading the debug info lazily (corrupt DWARF, unreadable separate
    /// debug file), if it was loaded.
    pub fn debug_info_error(&self) -> Option<String> {
        self.debug.error()
    }

    /// The section holding address `a` with its file bytes.
    pub(crate) fn bytes_at(&self, a: u64) -> Option<(&SectionInfo, &[u8])> {
        let s = self
            .sections
            .iter()
            .find(|s| s.addr != 0 && a >= s.addr && a < s.addr.saturating_add(s.size))?;
        let (off, size) = s.file?;
        let d = self
            .data
            .get(off as usize..off.saturating_add(size) as usize)?;
        Some((s, d.get((a - s.addr) as usize..)?))
    }

    /// The name of the function starting exactly at `a` (call and jump targets).
    pub(crate) fn name_of_target(&self, a: u64) -> Option<&str> {
        self.function_at(Svma(a))
            .filter(|f| f.start.0 == a)
            .map(|f| f.name.as_str())
    }
}

/// A code symbol as read.
#[derive(Debug, Clone)]
struct RawSymbol {
    addr: u64,
    size: u64,
    name: String,
    /// Binding rank: global 0, local 1, weak 2 (see [`alias_order`]).
    rank: u8,
    /// An `STT_NOTYPE` symbol (a label).
    label: bool,
    /// The table it was read from.
    origin: FunctionOrigin,
}

/// Defined code symbols of `file` in symbol-table order (`dynamic`: `.dynsym`, else
/// `.symtab`), as perf takes them (tools/perf/util/symbol-elf.c): `STT_FUNC` and
/// `STT_GNU_IFUNC` (whose address is the resolver, named like the function it resolves,
/// as nm's `i`; object's `is_definition` leaves IFUNC out) in a real section, plus
/// **labels**: named `STT_NOTYPE` symbols in an executable section whose visibility is
/// not hidden or internal (ld.so's `_start`, `_dl_start_user`; perf's `elf_sym__is_label`).
fn collect_functions(
    file: &object::File<'_>,
    dynamic: bool,
    origin: FunctionOrigin,
    raw: &mut Vec<RawSymbol>,
) {
    use object::{ObjectSection, SectionFlags, SymbolFlags};
    const SHF_EXECINSTR: u64 = 4;
    const STV_INTERNAL: u8 = 1;
    const STV_HIDDEN: u8 = 2;
    let exec = |i: object::SectionIndex| {
        file.section_by_index(i).is_ok_and(|sec| {
            matches!(sec.flags(), SectionFlags::Elf { sh_flags } if sh_flags & SHF_EXECINSTR != 0)
        })
    };
    // ARM and AArch64 mapping symbols (`$x`, `$d.12`) mark code and data, they name no
    // function (perf rejects them too, symbol-elf.c).
    let arm = matches!(
        file.architecture(),
        object::Architecture::Arm | object::Architecture::Aarch64
    );
    let syms = if dynamic {
        file.dynamic_symbols()
    } else {
        file.symbols()
    };
    for s in syms {
        let Some(section) = s.section_index() else {
            continue;
        };
        if s.address() == 0 {
            continue;
        }
        let label = match s.kind() {
            SymbolKind::Text => false,
            SymbolKind::Unknown => {
                let SymbolFlags::Elf { st_info, st_other } = s.flags() else {
                    continue;
                };
                let visibility = st_other & 3;
                if st_info & 0xf != 0 // not STT_NOTYPE
                    || visibility == STV_HIDDEN
                    || visibility == STV_INTERNAL
                    || !exec(section)
                {
                    continue;
                }
                true
            }
            _ => continue,
        };
        // A name that is not UTF-8 still names its function (perf prints its bytes): kept
        // with the invalid bytes replaced by U+FFFD.
        let Ok(name) = s.name_bytes().map(String::from_utf8_lossy) else {
            continue;
        };
        if name.is_empty() || arm && is_mapping_symbol(&name) {
            continue;
        }
        let rank = if s.is_weak() {
            2
        } else if s.is_global() {
            0
        } else {
            1
        };
        raw.push(RawSymbol {
            addr: s.address(),
            size: s.size(),
            name: name.into_owned(),
            rank,
            label,
            origin,
        });
    }
}

/// An ARM ELF mapping symbol: `$a`, `$d`, `$t`, `$x`, alone or followed by `.` and more
/// (ELF for the Arm Architecture, "Mapping symbols").
fn is_mapping_symbol(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() >= 2 && b[0] == b'$' && b"adtx".contains(&b[1]) && (b.len() == 2 || b[2] == b'.')
}

/// Sort key of a raw symbol: by address, and among aliases at one address the one perf
/// names a sample with first (perf's `choose_best_symbol`, tools/perf/util/symbol.c): a
/// sized symbol before a size-0 one, a typed one before a label, non-weak before weak, global before local, fewer
/// leading underscores (`printf` before `_IO_printf`), the longer name
/// (`__x86_cacheinfo_ifunc` before `__x86_cacheinfo`); then the symbol-table order (the
/// sort is stable), as perf keeps the first.
fn alias_order(s: &RawSymbol) -> (u64, bool, bool, u8, usize, std::cmp::Reverse<usize>) {
    let underscores = s.name.bytes().take_while(|&b| b == b'_').count();
    (
        s.addr,
        s.size == 0,
        s.label,
        s.rank,
        underscores,
        std::cmp::Reverse(s.name.len()),
    )
}

/// GOT slots filled by `R_X86_64_IRELATIVE` (`.rela.plt`, type 37) or `R_386_IRELATIVE`
/// (`.rel.plt`, type 42, the addend stored in the slot) relocations, named after the
/// function at the relocation's addend, the IFUNC resolver, which carries the IFUNC's
/// name (`strlen`; among aliases the one [`alias_order`] puts first). A static glibc
/// program calls `strlen`, `memcpy` and the like through such `.plt` stubs; perf 6.1 counts
/// their samples under `_init` (it synthesizes PLT names from JUMP_SLOT relocations only),
/// proftrust names them `strlen@plt` (objdump: `*ABS*+0x418d80@plt`); an addend no symbol
/// names gives objdump's name (`*ABS*+0x9f1c0`).
fn irelative_names(
    sections: &[SectionInfo],
    data: &[u8],
    big: bool,
    raw: &[RawSymbol],
) -> Vec<(u64, String)> {
    let Some(rel) = sections
        .iter()
        .find(|s| s.name == ".rela.plt" || s.name == ".rel.plt")
    else {
        return Vec::new();
    };
    let Some(bytes) = rel
        .file
        .and_then(|(off, size)| data.get(off as usize..off.checked_add(size)? as usize))
    else {
        return Vec::new();
    };
    let h = Header { data: bytes, big };
    let rela = rel.name == ".rela.plt";
    // The 32-bit addend of a REL relocation: the word in the slot's file bytes.
    let slot_word = |slot: u64| -> Option<u64> {
        let s = sections.iter().find(|s| {
            s.file.is_some() && slot >= s.addr && slot.saturating_add(4) <= s.addr + s.size
        })?;
        let at = usize::try_from(s.file?.0 + (slot - s.addr)).ok()?;
        let w = data.get(at..at.checked_add(4)?)?;
        let w: [u8; 4] = w.try_into().ok()?;
        Some(if big {
            u32::from_be_bytes(w)
        } else {
            u32::from_le_bytes(w)
        } as u64)
    };
    let mut wanted: Vec<(u64, u64)> = Vec::new();
    if rela {
        for i in 0..bytes.len() / 24 {
            let (slot, info, addend) = (h.u64(i * 24), h.u64(i * 24 + 8), h.u64(i * 24 + 16));
            if info & 0xffff_ffff == 37 {
                wanted.push((slot, addend));
            }
        }
    } else {
        for i in 0..bytes.len() / 8 {
            let (slot, info) = (h.u32(i * 8) as u64, h.u32(i * 8 + 4));
            if info & 0xff == 42 {
                if let Some(a) = slot_word(slot) {
                    wanted.push((slot, a));
                }
            }
        }
    }
    if wanted.is_empty() {
        return Vec::new();
    }
    let addends: std::collections::HashSet<u64> = wanted.iter().map(|w| w.1).collect();
    let mut best: HashMap<u64, &RawSymbol> = HashMap::new();
    for r in raw.iter().filter(|r| addends.contains(&r.addr)) {
        best.entry(r.addr)
            .and_modify(|b| {
                if alias_order(r) < alias_order(b) {
                    *b = r;
                }
            })
            .or_insert(r);
    }
    // An IFUNC no symbol names (a shared library's internal one, e.g. in libc.so.6 with only
    // .dynsym) is named as objdump names it, `*ABS*+0x9f1c0`, so that its stub is a function.
    wanted
        .into_iter()
        .map(|(slot, a)| {
            let name = best
                .get(&a)
                .map_or_else(|| format!("*ABS*+{a:#x}"), |r| r.name.clone());
            (slot, name)
        })
        .collect()
}

/// `name@plt` stubs: every `jmp *slot(%rip)` in `.plt`, `.plt.sec` or `.plt.got` whose slot
/// a JUMP_SLOT/GLOB_DAT relocation names. A stub starts after the previous stub's jump
/// (padding skipped) and runs to the next stub. `i386`: 32-bit code, where a PIC stub
/// jumps through `slot@GOT(%ebx)` (`%ebx` holds `_GLOBAL_OFFSET_TABLE_`, the start of
/// `.got.plt`) and a non-PIC one through an absolute `*slot`.
fn plt_stubs(
    sections: &[SectionInfo],
    data: &[u8],
    got_names: &HashMap<u64, String>,
    i386: bool,
) -> Vec<Function> {
    use iced_x86::{Decoder, DecoderOptions, FlowControl, Mnemonic};
    let mut out = Vec::new();
    for s in sections {
        if !matches!(s.name.as_str(), ".plt" | ".plt.sec" | ".plt.got") {
            continue;
        }
        let Some((off, size)) = s.file else { continue };
        let Some(bytes) = data.get(off as usize..(off + size) as usize) else {
            continue;
        };
        let got = sections
            .iter()
            .find(|g| g.name == ".got.plt")
            .or_else(|| sections.iter().find(|g| g.name == ".got"))
            .map_or(0, |g| g.addr);
        let bitness = if i386 { 32 } else { 64 };
        let mut dec = Decoder::with_ip(bitness, bytes, s.addr, DecoderOptions::NONE);
        let mut entry: Option<u64> = None;
        let mut pending: Vec<Function> = Vec::new();
        // The lazy-binding header of `.plt` (PLT0: `push GOT+8; jmp *GOT+16`) jumps through
        // a slot no relocation names; it is the `[plt]` stub (perf 6.1 folds it into a
        // sizeless `_init` before it, objdump calls it `<first@plt-0x10>`).
        let mut header = s.name == ".plt";
        while dec.can_decode() {
            let ins = dec.decode();
            // Padding: nops, int3, or zero bytes (i386's PLT0 is padded with zeros, which
            // decode as `add %al,(%eax)`).
            let at = (ins.ip() - s.addr) as usize;
            let zeros = bytes
                .get(at..at + ins.len())
                .is_some_and(|b| b.iter().all(|&x| x == 0));
            let is_pad = zeros || matches!(ins.mnemonic(), Mnemonic::Nop | Mnemonic::Int3);
            if entry.is_none() && !is_pad {
                entry = Some(ins.ip());
            }
            let slot = if ins.flow_control() != FlowControl::IndirectBranch
                || ins.op0_kind() != iced_x86::OpKind::Memory
            {
                None
            } else if ins.is_ip_rel_memory_operand() {
                Some(ins.ip_rel_memory_address())
            } else if !i386 || ins.memory_index() != iced_x86::Register::None {
                None
            } else {
                match ins.memory_base() {
                    // 32-bit address arithmetic: `-0x10(%ebx)` wraps at 2^32.
                    iced_x86::Register::EBX => {
                        Some((got as u32).wrapping_add(ins.memory_displacement32()) as u64)
                    }
                    iced_x86::Register::None => Some(ins.memory_displacement32() as u64),
                    _ => None,
                }
            };
            if let Some(slot) = slot {
                if let (Some(name), Some(e)) = (got_names.get(&slot), entry) {
                    pending.push(Function {
                        name: format!("{}@plt", demangle(name)),
                        raw_name: format!("{name}@plt"),
                        start: Svma(e),
                        size: 0,
                        origin: FunctionOrigin::Plt,
                    });
                } else if let (true, Some(e)) = (header, entry) {
                    pending.push(Function {
                        name: "[plt]".into(),
                        raw_name: "[plt]".into(),
                        start: Svma(e),
                        size: 0,
                        origin: FunctionOrigin::Plt,
                    });
                }
                header = false;
            }
            if matches!(
                ins.flow_control(),
                FlowControl::IndirectBranch | FlowControl::UnconditionalBranch
            ) {
                entry = None;
            }
        }
        // Each stub runs to the next one (or the section end).
        let end = s.addr + s.size;
        for i in 0..pending.len() {
            let next = pending.get(i + 1).map(|f| f.start.0).unwrap_or(end);
            pending[i].size = next.saturating_sub(pending[i].start.0).min(16);
        }
        out.extend(pending);
    }
    out
}

/// `name@plt` stubs of a non-x86 binary as perf 6.1 synthesizes them
/// (`dso__synthesize_plt_symbols`, tools/perf/util/symbol-elf.c): a header of
/// `plt_header_size` bytes, then one `plt_entry_size` stub per `.rela.plt` (`.rel.plt`)
/// relocation, in relocation order, named after the symbol the relocation binds. The sizes
/// are perf's: ARM 20 and 12, AArch64 32 and 16, SPARC 48 and 12, SPARC v9 128 and 32,
/// otherwise the `.plt` section's `sh_entsize` for both (i386 excepted: 16 and 16).
fn plt_stubs_by_relocation(
    file: &object::File<'_>,
    machine: u16,
    sections: &[SectionInfo],
    data: &[u8],
    got_names: &HashMap<u64, String>,
) -> Vec<Function> {
    let Some(plt) = sections.iter().find(|s| s.name == ".plt") else {
        return Vec::new();
    };
    let Some(rel) = sections
        .iter()
        .find(|s| s.name == ".rela.plt" || s.name == ".rel.plt")
    else {
        return Vec::new();
    };
    let entsize = section_entsize(file, ".plt").unwrap_or(0);
    let (header, entry) = match machine {
        40 => (20, 12),
        183 => (32, 16),
        // i386: perf takes sh_entsize (4 in binutils' output), which is not the stub size;
        // PLT0 and every stub are 16 bytes (the i386 psABI, "Procedure Linkage Table").
        3 => (16, 16),
        2 => (48, 12),
        43 => (128, 32),
        _ => (entsize, entsize),
    };
    if entry == 0 {
        return Vec::new();
    }
    let Some((off, size)) = rel.file else {
        return Vec::new();
    };
    let Some(bytes) = data.get(off as usize..off.saturating_add(size) as usize) else {
        return Vec::new();
    };
    let wide = file.is_64();
    let big = !file.is_little_endian();
    let rela = rel.name == ".rela.plt";
    // Each relocation starts with r_offset, the GOT slot it fills.
    let step = match (wide, rela) {
        (true, true) => 24,
        (true, false) => 16,
        (false, true) => 12,
        (false, false) => 8,
    };
    let h = Header { data: bytes, big };
    let mut out = Vec::new();
    let mut at = plt.addr.saturating_add(header);
    for i in 0..bytes.len() / step {
        let slot = if wide {
            h.u64(i * step)
        } else {
            h.u32(i * step) as u64
        };
        let end = at.saturating_add(entry);
        if end > plt.addr.saturating_add(plt.size) {
            break;
        }
        if let Some(name) = got_names.get(&slot) {
            out.push(Function {
                name: format!("{}@plt", demangle(name)),
                raw_name: format!("{name}@plt"),
                start: Svma(at),
                size: entry,
                origin: FunctionOrigin::Plt,
            });
        }
        at = end;
    }
    out
}

/// `sh_entsize` of a section (object does not expose it): read from the section header.
fn section_entsize(file: &object::File<'_>, name: &str) -> Option<u64> {
    use object::read::elf::SectionHeader;
    match file {
        object::File::Elf64(f) => {
            let e = f.endian();
            let (_, sh) = f.elf_section_table().section_by_name(e, name.as_bytes())?;
            Some(sh.sh_entsize(e))
        }
        object::File::Elf32(f) => {
            let e = f.endian();
            let (_, sh) = f.elf_section_table().section_by_name(e, name.as_bytes())?;
            Some(sh.sh_entsize(e).into())
        }
        _ => None,
    }
}

/// The `PT_LOAD` program headers of a parsed object as the one address rule's table
/// ([`proftrust_model::segments`]).
pub fn segment_table<'d, R: object::ReadRef<'d>>(file: &object::File<'d, R>) -> SegmentTable {
    SegmentTable::new(
        file.segments()
            .map(|g| {
                let (offset, filesz) = g.file_range();
                LoadSegment {
                    offset,
                    vaddr: g.address(),
                    filesz,
                    memsz: g.size(),
                    flags: match g.flags() {
                        object::SegmentFlags::Elf { p_flags } => p_flags,
                        _ => 0,
                    },
                }
            })
            .collect(),
    )
}

/// What a recorder or a tracer needs of an object file to turn file offsets into SVMAs:
/// its loadable segments and its build-id (no symbols, no debug information).
#[derive(Debug, Clone, Default)]
pub struct LoadHeaders {
    /// GNU build-id, when the file has a non-empty one.
    pub build_id: Option<BuildId>,
    /// The `PT_LOAD` segments.
    pub segments: SegmentTable,
}

impl LoadHeaders {
    /// Reads `path`; `None` when it cannot be read or is not an object file (the caller then
    /// takes file offsets as addresses and says so). Only the headers and the build-id note
    /// are read (`object::ReadCache`), not the whole file: a binary with debug information
    /// is tens of megabytes, of which this needs a few kilobytes.
    pub fn read(path: &Path) -> Option<LoadHeaders> {
        let cache = object::ReadCache::new(std::fs::File::open(path).ok()?);
        let file = object::File::parse(&cache).ok()?;
        let build_id = match file.build_id() {
            Ok(Some(b)) if !b.is_empty() => Some(BuildId(b.to_vec())),
            _ => None,
        };
        Some(LoadHeaders {
            build_id,
            segments: segment_table(&file),
        })
    }

    /// Load bias (runtime address minus SVMA) of the file mapped from runtime address
    /// `base` on (file offset 0 at `base`: how QEMU user mode names an image); `base` itself
    /// when no segment places it.
    pub fn bias_from_base(&self, base: u64) -> u64 {
        self.segments
            .load_bias(&proftrust_model::segments::Mapping {
                start: base,
                end: u64::MAX,
                pgoff: 0,
            })
            .unwrap_or(base)
    }
}
