//! Names, inline frames and source lines for locations.
//!
//! Exporters ask a [`Symbols`] source; the implementation for
//! [`proftrust_binary::Symbolizer`] (binaries found by build-id or path, DWARF inline chains
//! with start lines and discriminators) is the one the CLI uses. A [`Resolver`] wraps it
//! with a per-location cache and the fallback names (`file+0xOFFSET`, `[unknown]`) every
//! writer shares.

use proftrust_binary::{Function, SourceFrame, Symbolizer};
use proftrust_model::segments::LoadSegment;
use proftrust_model::{Location, ModuleIdx, ModuleTable, Svma};
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

/// Where exporters get names, inline chains and lines from.
pub trait Symbols {
    /// The inline chain at `loc`, innermost first (empty when nothing is known).
    fn frames(&self, loc: Location) -> Vec<SourceFrame>;
    /// The function containing `loc` (outermost, as the symbol table states it).
    fn function(&self, loc: Location) -> Option<Function>;
    /// The module's load segments, when its binary was found (pprof mappings).
    fn segments(&self, _m: ModuleIdx) -> Vec<LoadSegment> {
        Vec::new()
    }
    /// The instructions of the function containing `loc`, in address order: address,
    /// length, text (AT&T syntax). Empty when the binary or the function is unknown.
    fn instructions(&self, _loc: Location) -> Vec<(Svma, u32, String)> {
        Vec::new()
    }
}

/// Knows nothing: every location is named `file+0xOFFSET`.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSymbols;

impl Symbols for NoSymbols {
    fn frames(&self, _loc: Location) -> Vec<SourceFrame> {
        Vec::new()
    }
    fn function(&self, _loc: Location) -> Option<Function> {
        None
    }
}

impl Symbols for Symbolizer {
    fn frames(&self, loc: Location) -> Vec<SourceFrame> {
        match loc.module.and_then(|m| self.binary(m)) {
            Some(b) => b.source_frames(loc.svma),
            None => Vec::new(),
        }
    }
    fn function(&self, loc: Location) -> Option<Function> {
        Symbolizer::function(self, loc).cloned()
    }
    fn instructions(&self, loc: Location) -> Vec<(Svma, u32, String)> {
        let Some(b) = loc.module.and_then(|m| self.binary(m)) else {
            return Vec::new();
        };
        let Some(f) = b.function_at(loc.svma) else {
            return Vec::new();
        };
        b.instructions(f)
            .map(|v| v.into_iter().map(|i| (i.addr, i.len, i.text)).collect())
            .unwrap_or_default()
    }
}

/// One resolved frame: a function (outermost or inlined) at a source position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Display name (demangled), or `file+0xOFFSET` / `[unknown]` when unknown.
    pub name: String,
    /// Linkage name (what PGO profiles key functions by).
    pub linkage_name: String,
    /// Source file.
    pub file: Option<String>,
    /// Source line (0 = unknown).
    pub line: u32,
    /// Column (0 = unknown).
    pub column: u32,
    /// Base discriminator.
    pub discriminator: u32,
    /// Duplication factor (1 unless the compiler duplicated the code and said so).
    pub duplication: u32,
    /// First line of the function (0 = unknown).
    pub function_line: u32,
    /// Whether the frame was inlined into the next outer one.
    pub inlined: bool,
    /// Whether anything beyond the fallback name is known.
    pub symbolized: bool,
}

impl Frame {
    /// A frame known by its name only: no source position, not inlined.
    fn named(name: String, linkage_name: String, symbolized: bool) -> Frame {
        Frame {
            name,
            linkage_name,
            file: None,
            line: 0,
            column: 0,
            discriminator: 0,
            duplication: 1,
            function_line: 0,
            inlined: false,
            symbolized,
        }
    }
}

/// Frames per (location, is a return address).
type FrameCache = HashMap<(Location, bool), Rc<[Frame]>>;

/// Entries a [`Resolver`] cache holds before it starts again (~250 MB of frames): a
/// profile's memory stays proportional to its output, not to its distinct addresses.
const CACHE_MAX: usize = 1 << 20;

/// Inserts into a cache of at most [`CACHE_MAX`] entries (emptied when full).
fn insert_bounded<K: std::hash::Hash + Eq, V>(c: &mut HashMap<K, V>, k: K, v: V) {
    if c.len() >= CACHE_MAX {
        c.clear();
    }
    c.insert(k, v);
}

/// Cached resolution of locations into frames (module docs).
pub struct Resolver<'a> {
    symbols: &'a dyn Symbols,
    modules: &'a ModuleTable,
    cache: RefCell<FrameCache>,
    functions: RefCell<HashMap<Location, Function>>,
}

impl<'a> Resolver<'a> {
    /// A resolver over `symbols` for a profile with these modules.
    pub fn new(symbols: &'a dyn Symbols, modules: &'a ModuleTable) -> Resolver<'a> {
        Resolver {
            symbols,
            modules,
            cache: RefCell::new(HashMap::new()),
            functions: RefCell::new(HashMap::new()),
        }
    }

    /// The modules.
    pub fn modules(&self) -> &ModuleTable {
        self.modules
    }

    /// The symbol source.
    pub fn symbols(&self) -> &dyn Symbols {
        self.symbols
    }

    /// `file+0xOFFSET` for a location outside any known function, `[unknown]` outside any
    /// module (the names `proftrust read` prints).
    pub fn fallback_name(&self, loc: Location) -> String {
        let mut s = String::new();
        self.write_fallback_name(loc, &mut s);
        s
    }

    /// Appends [`Resolver::fallback_name`] to `out` (exporters of millions of unknown
    /// addresses write the names without holding them).
    pub fn write_fallback_name(&self, loc: Location, out: &mut impl std::fmt::Write) {
        // Writing to a String or a Vec-backed writer cannot fail.
        let _ = match loc.module.and_then(|m| self.modules.get(m)) {
            Some(m) => write!(out, "{}+{:#x}", m.file_name(), loc.svma.0),
            None => out.write_str("[unknown]"),
        };
    }

    /// The address whose source position a frame shows: `loc` for the sampled instruction,
    /// `loc - 1` for a return address (inside the call instruction).
    pub fn lookup_address(loc: Location, return_address: bool) -> Location {
        if return_address && loc.svma.0 > 0 {
            Location {
                module: loc.module,
                svma: Svma(loc.svma.0 - 1),
            }
        } else {
            loc
        }
    }

    /// The function symbol containing `loc` (cached when there is one: a miss costs a
    /// lookup again, but a profile of millions of addresses in a module whose binary is
    /// missing holds no cache entry per address).
    pub fn function(&self, loc: Location) -> Option<Function> {
        if let Some(f) = self.functions.borrow().get(&loc) {
            return Some(f.clone());
        }
        let f = self.symbols.function(loc)?;
        insert_bounded(&mut self.functions.borrow_mut(), loc, f.clone());
        Some(f)
    }

    /// The frames at `loc`, innermost first; never empty (a fallback frame when nothing is
    /// known). `return_address`: `loc` is a caller's return address.
    pub fn frames(&self, loc: Location, return_address: bool) -> Rc<[Frame]> {
        if let Some(f) = self.known_frames(loc, return_address) {
            return f;
        }
        let name = self.fallback_name(loc);
        Rc::new([Frame::named(name.clone(), name, false)])
    }

    /// The frames at `loc` when anything is known there (inline frames or a function
    /// symbol); `None` where [`Resolver::frames`] gives the one fallback frame named by
    /// [`Resolver::fallback_name`] (an exporter of millions of such addresses can write the
    /// name without making it).
    pub fn known_frames(&self, loc: Location, return_address: bool) -> Option<Rc<[Frame]>> {
        if let Some(f) = self.cache.borrow().get(&(loc, return_address)) {
            return Some(f.clone());
        }
        let at = Self::lookup_address(loc, return_address);
        let raw = if at.module.is_some() {
            self.symbols.frames(at)
        } else {
            Vec::new()
        };
        let n = raw.len();
        let mut out: Vec<Frame> = raw
            .into_iter()
            .enumerate()
            .map(|(i, f)| Frame {
                name: f.function,
                linkage_name: f.linkage_name,
                file: f.file,
                line: f.line.unwrap_or(0),
                column: f.column.unwrap_or(0),
                discriminator: f.discriminator,
                duplication: f.duplication.max(1),
                function_line: f.function_line.unwrap_or(0),
                inlined: i + 1 < n,
                symbolized: true,
            })
            .collect();
        if out.is_empty() {
            // Only what took a lookup to find is kept: the fallback name of an address
            // nothing is known about is made again when asked (issue 32: 26.8 M such
            // addresses of a module not on disk held ~9 GB of cache).
            let f = self.function(at)?;
            out.push(Frame::named(f.name, f.raw_name, true));
        }
        let rc: Rc<[Frame]> = out.into();
        insert_bounded(
            &mut self.cache.borrow_mut(),
            (loc, return_address),
            rc.clone(),
        );
        Some(rc)
    }

    /// Function names of a stack from the root to the leaf, inline frames expanded
    /// (outermost first within each location).
    pub fn names_root_first(&self, stack: &[Location]) -> Vec<String> {
        let mut out = Vec::with_capacity(stack.len() * 2);
        for (i, &loc) in stack.iter().enumerate().rev() {
            let fr = self.frames(loc, i > 0);
            out.extend(fr.iter().rev().map(|f| f.name.clone()));
        }
        out
    }
}
