//! The functions of one program: CFGs with their numberings, and name lookup.

use crate::numbering::PathNumbering;
use crate::Error;
use proftrust_model::{BlockId, Cfg, Location, Module, ModuleTable, Svma};
use serde::Serialize;
use std::collections::HashMap;

/// Index of a function in [`ProgramCfgs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct FuncIdx(pub u32);

/// The CFGs of the functions of one module (usually the main executable), numbered, with an
/// address index that maps an instruction to its function and static block.
#[derive(Debug)]
pub struct ProgramCfgs {
    module: Module,
    cfgs: Vec<Cfg>,
    numberings: Vec<Result<PathNumbering, Error>>,
    /// (start, end, function, block) of every block, sorted by start.
    index: Vec<(u64, u64, u32, u32)>,
    entries: HashMap<u64, u32>,
}

impl ProgramCfgs {
    /// Numbers every CFG. A function whose numbering fails keeps its error (shown in the
    /// profile as degraded); the others are unaffected.
    pub fn new(module: Module, cfgs: Vec<Cfg>) -> ProgramCfgs {
        let numberings = cfgs.iter().map(PathNumbering::new).collect();
        let mut index = Vec::new();
        let mut entries = HashMap::new();
        for (f, c) in cfgs.iter().enumerate() {
            entries.entry(c.entry.0).or_insert(f as u32);
            for b in &c.blocks {
                index.push((b.start.0, b.end.0, f as u32, b.id.0));
            }
        }
        index.sort_unstable();
        ProgramCfgs {
            module,
            cfgs,
            numberings,
            index,
            entries,
        }
    }
    /// The module the CFGs belong to.
    pub fn module(&self) -> &Module {
        &self.module
    }
    /// Number of functions.
    pub fn len(&self) -> usize {
        self.cfgs.len()
    }
    /// True when there are no functions.
    pub fn is_empty(&self) -> bool {
        self.cfgs.is_empty()
    }
    /// The CFG of `f`.
    pub fn cfg(&self, f: FuncIdx) -> &Cfg {
        &self.cfgs[f.0 as usize]
    }
    /// The numbering of `f`, or why it has none.
    pub fn numbering(&self, f: FuncIdx) -> Result<&PathNumbering, &Error> {
        self.numberings[f.0 as usize].as_ref()
    }
    /// All functions with their indices.
    pub fn iter(&self) -> impl Iterator<Item = (FuncIdx, &Cfg)> {
        self.cfgs
            .iter()
            .enumerate()
            .map(|(i, c)| (FuncIdx(i as u32), c))
    }
    /// First function with this name.
    pub fn find(&self, name: &str) -> Option<FuncIdx> {
        self.cfgs
            .iter()
            .position(|c| c.function == name)
            .map(|i| FuncIdx(i as u32))
    }
    /// The function whose entry is `a`.
    pub fn function_at_entry(&self, a: Svma) -> Option<FuncIdx> {
        self.entries.get(&a.0).map(|&f| FuncIdx(f))
    }
    /// Function and static block holding the instruction at `a`.
    pub fn lookup(&self, a: Svma) -> Option<(FuncIdx, BlockId)> {
        let i = self.index.partition_point(|x| x.0 <= a.0);
        let &(_, end, f, b) = self.index.get(i.checked_sub(1)?)?;
        (a.0 < end).then_some((FuncIdx(f), BlockId(b)))
    }
    /// A name map built from these CFGs (function extents = their blocks' extents).
    pub fn function_map(&self) -> FunctionMap {
        let mut m = FunctionMap::default();
        for c in &self.cfgs {
            let lo = c
                .blocks
                .iter()
                .map(|b| b.start.0)
                .min()
                .unwrap_or(c.entry.0);
            let hi = c
                .blocks
                .iter()
                .map(|b| b.end.0)
                .max()
                .unwrap_or(c.entry.0 + 1);
            m.insert(self.module.file_name(), lo, hi, &c.function);
        }
        m
    }
}

/// Names of functions by address range, per module file name. Used to name CCT nodes and to
/// resolve sampled call chains; built by the caller from symbols (or from CFGs).
#[derive(Debug, Clone, Default)]
pub struct FunctionMap {
    by_module: HashMap<String, Vec<(u64, u64, String)>>,
    sorted: bool,
}

impl FunctionMap {
    /// Adds function `name` covering `[start, end)` in the module with file name `module`.
    pub fn insert(&mut self, module: &str, start: u64, end: u64, name: &str) {
        self.by_module.entry(module.to_string()).or_default().push((
            start,
            end.max(start + 1),
            name.to_string(),
        ));
        self.sorted = false;
    }
    fn sort(&mut self) {
        if !self.sorted {
            for v in self.by_module.values_mut() {
                v.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
            }
            self.sorted = true;
        }
    }
    /// Finishes insertion (sorts); lookups on an unsorted map fall back to a linear scan.
    pub fn finish(mut self) -> FunctionMap {
        self.sort();
        self
    }
    /// Name of the function containing `svma` in `module`.
    pub fn lookup(&self, module: &Module, svma: Svma) -> Option<&str> {
        let v = self.by_module.get(module.file_name())?;
        if !self.sorted {
            return v
                .iter()
                .find(|(s, e, _)| *s <= svma.0 && svma.0 < *e)
                .map(|x| x.2.as_str());
        }
        let i = v.partition_point(|x| x.0 <= svma.0);
        // Walk back over ranges starting before svma (nested or overlapping symbols).
        v[..i]
            .iter()
            .rev()
            .take(8)
            .find(|(_, e, _)| svma.0 < *e)
            .map(|x| x.2.as_str())
    }
    /// A printable name for `loc`: the function name, else `module+0xoffset`, else the raw
    /// address.
    pub fn name(&self, modules: &ModuleTable, loc: Location) -> String {
        match loc.module.and_then(|m| modules.get(m)) {
            Some(m) => match self.lookup(m, loc.svma) {
                Some(n) => n.to_string(),
                None => format!("{}+{:#x}", m.file_name(), loc.svma.0),
            },
            None => format!("{:#x}", loc.svma.0),
        }
    }
}
