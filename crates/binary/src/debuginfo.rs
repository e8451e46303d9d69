//! DWARF debug info: where it is (embedded, or a separate file found by build-id or
//! `.gnu_debuglink`) and lazy parsing with `addr2line`.

use crate::elf::Frame;
use object::{Object, ObjectSection};
use proftrust_model::BuildId;
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

pub(crate) type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;
pub(crate) type Ctx = addr2line::Context<Reader>;

enum Source {
    None,
    Embedded(Arc<[u8]>),
    Separate(PathBuf),
}

/// Debug info of one binary, parsed on first use.
pub(crate) struct DebugInfo {
    source: Source,
    /// `Ok(context)` once parsed, `Err(message)` when parsing failed.
    ctx: OnceLock<Result<Mutex<Ctx>, String>>,
    /// Line rows with discriminators per unit, built on demand (`srcframes.rs`).
    pub(crate) rows: crate::srcframes::RowCache,
}

impl DebugInfo {
    pub fn none() -> DebugInfo {
        DebugInfo {
            source: Source::None,
            ctx: OnceLock::new(),
            rows: Default::default(),
        }
    }
    pub fn embedded(data: Arc<[u8]>) -> DebugInfo {
        DebugInfo {
            source: Source::Embedded(data),
            ctx: OnceLock::new(),
            rows: Default::default(),
        }
    }
    pub fn separate(p: PathBuf) -> DebugInfo {
        DebugInfo {
            source: Source::Separate(p),
            ctx: OnceLock::new(),
            rows: Default::default(),
        }
    }
    pub fn is_present(&self) -> bool {
        !matches!(self.source, Source::None)
    }
    pub fn separate_path(&self) -> Option<&Path> {
        match &self.source {
            Source::Separate(p) => Some(p),
            _ => None,
        }
    }
    pub fn error(&self) -> Option<String> {
        match self.ctx.get() {
            Some(Err(e)) => Some(e.clone()),
            _ => None,
        }
    }

    pub(crate) fn context(&self) -> Option<&Mutex<Ctx>> {
        if matches!(self.source, Source::None) {
            return None;
        }
        self.ctx
            .get_or_init(|| match &self.source {
                Source::None => Err("no debug info".into()),
                Source::Embedded(d) => load(d).map(Mutex::new),
                Source::Separate(p) => std::fs::read(p)
                    .map_err(|e| format!("cannot read debug file {}: {e}", p.display()))
                    .and_then(|d| load(&d))
                    .map_err(|e| format!("debug file {}: {e}", p.display()))
                    .map(Mutex::new),
            })
            .as_ref()
            .ok()
    }

    /// Inline chain at `addr`, innermost first; empty when there is no DWARF for it.
    pub fn frames(&self, addr: u64) -> Vec<Frame> {
        let Some(m) = self.context() else {
            return Vec::new();
        };
        let ctx = match m.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let mut out = Vec::new();
        let Ok(mut it) = ctx.find_frames(addr).skip_all_loads() else {
            return out;
        };
        while let Ok(Some(f)) = it.next() {
            let function = f
                .function
                .as_ref()
                .and_then(|n| n.demangle().ok().map(|c| c.into_owned()))
                .unwrap_or_else(|| "??".to_string());
            let (file, line) = match &f.location {
                Some(l) => (l.file.map(|s| s.to_string()), l.line),
                None => (None, None),
            };
            out.push(Frame {
                function,
                file,
                line,
            });
            if out.len() > 256 {
                break;
            }
        }
        // A location without any function DIE gives one frame named "??"; callers fall back
        // to the symbol table for the name.
        if out.len() == 1 && out[0].function == "??" {
            out.clear();
        }
        out
    }
}

fn load(data: &[u8]) -> Result<Ctx, String> {
    let file = object::File::parse(data).map_err(|e| e.to_string())?;
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let dwarf = gimli::Dwarf::load(|id| -> Result<Reader, gimli::Error> {
        let bytes: Cow<'_, [u8]> = file
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .unwrap_or(Cow::Borrowed(&[]));
        Ok(gimli::EndianArcSlice::new(Arc::from(&*bytes), endian))
    })
    .map_err(|e| e.to_string())?;
    addr2line::Context::from_dwarf(dwarf).map_err(|e| e.to_string())
}

fn has_debug_info(data: &[u8]) -> bool {
    match object::File::parse(data) {
        Ok(f) => f
            .section_by_name(".debug_info")
            .or_else(|| f.section_by_name(".zdebug_info"))
            .is_some_and(|s| s.size() > 0),
        Err(_) => false,
    }
}

pub(crate) fn build_id_of(data: &[u8]) -> Option<Vec<u8>> {
    object::File::parse(data)
        .ok()?
        .build_id()
        .ok()
        .flatten()
        .map(|b| b.to_vec())
}

/// Finds a separate debug file for the binary at `path`, in GDB's order:
/// 1. `ROOT/.build-id/xx/rest.debug` for each root in `debug_dirs` (build-id must match);
/// 2. the `.gnu_debuglink` name in the binary's directory, in its `.debug/` subdirectory,
///    and under `ROOT/<binary's directory>/` (CRC-32 must match).
///
/// A candidate is used only when it holds `.debug_info`. Returns the path and the bytes
/// read (the caller takes the symbol table from them when the binary is stripped).
pub(crate) fn find_separate_debug_file(
    path: &Path,
    build_id: Option<&BuildId>,
    debuglink: Option<(String, u32)>,
    debug_dirs: &[PathBuf],
) -> Option<(PathBuf, Vec<u8>)> {
    if let Some(b) = build_id.filter(|b| b.0.len() >= 2) {
        let hex = b.to_hex();
        for root in debug_dirs {
            let p = root
                .join(".build-id")
                .join(&hex[..2])
                .join(format!("{}.debug", &hex[2..]));
            if let Ok(d) = std::fs::read(&p) {
                let id_ok = build_id_of(&d).is_none_or(|x| x == b.0);
                if id_ok && has_debug_info(&d) {
                    return Some((p, d));
                }
            }
        }
    }
    let (name, crc) = debuglink?;
    if name.is_empty() || name.contains('/') {
        return None;
    }
    let dir = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let abs_dir = std::fs::canonicalize(&dir).unwrap_or(dir.clone());
    let mut candidates = vec![dir.join(&name), dir.join(".debug").join(&name)];
    for root in debug_dirs {
        let rel = abs_dir.strip_prefix("/").unwrap_or(&abs_dir);
        candidates.push(root.join(rel).join(&name));
    }
    for c in candidates {
        if c == path {
            continue;
        }
        if let Ok(d) = std::fs::read(&c) {
            if crate::crc::crc32(&d) == crc && has_debug_info(&d) {
                return Some((c, d));
            }
        }
    }
    None
}
