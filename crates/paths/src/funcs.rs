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
    /// Per function, the function it is a part of (GCC's hot/cold split: `f.cold`,
    /// `f(int) [clone .cold]`), itself otherwise.
    family: Vec<u32>,
}

/// The function a hot/cold fragment belongs to: `f.cold`, `f.cold.N`, `f [clone .cold]` and
/// `f [clone .cold.N]` are parts of `f`.
fn cold_parent(name: &str) -> Option<&str> {
    let digits = |s: &str| {
        s.is_empty()
            || (s.starts_with('.') && s[1..].bytes().all(|b| b.is_ascii_digit()) && s.len() > 1)
    };
    if let Some(base) = name.strip_suffix(']') {
        let (base, clone) = base.rsplit_once(" [clone .cold")?;
        return digits(clone).then_some(base);
    }
    let (base, rest) = name.rsplit_once(".cold")?;
    digits(rest).then_some(base)
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
        let mut by_name: HashMap<&str, u32> = HashMap::new();
        for (f, c) in cfgs.iter().enumerate() {
            by_name.entry(c.function.as_str()).or_insert(f as u32);
        }
        let family = cfgs
            .iter()
            .enumerate()
            .map(|(f, c)| {
                cold_parent(&c.function)
                    .and_then(|b| by_name.get(b).copied())
                    .unwrap_or(f as u32)
            })
            .collect();
        ProgramCfgs {
            module,
            cfgs,
            numberings,
            index,
            entries,
            family,
        }
    }
    /// Whether `a` and `b` are parts of one function (the same function, or a hot part and
    /// its `.cold` part).
    pub fn same_function(&self, a: FuncIdx, b: FuncIdx) -> bool {
        self.family[a.0 as usize] == self.family[b.0 as usize]
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

#[cfg(test)]
mod tests {
    use super::cold_parent;

    #[test]
    fn cold_fragments_name_their_function() {
        assert_eq!(cold_parent("main.cold"), Some("main"));
        assert_eq!(cold_parent("main.cold.3"), Some("main"));
        assert_eq!(
            cold_parent("thrower(int) [clone .cold]"),
            Some("thrower(int)")
        );
        assert_eq!(cold_parent("f [clone .cold.1]"), Some("f"));
        assert_eq!(cold_parent("main"), None);
        assert_eq!(cold_parent("scold"), None);
        assert_eq!(cold_parent("f.coldx"), None);
        assert_eq!(cold_parent("f.cold."), None);
        assert_eq!(cold_parent("g [clone .constprop.0]"), None);
    }
}
