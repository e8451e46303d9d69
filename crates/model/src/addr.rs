//! Modules and module-relative addresses.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An address as the ELF file states it (*stated virtual memory address*): the runtime
/// address minus the module's load bias. For a non-PIE executable the two are equal; for a
/// PIE or shared object the bias is the load base. `objdump -d` and `addr2line` speak SVMAs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Svma(pub u64);

impl fmt::Display for Svma {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

/// An address in a running process. Only the recorder and the exact runners see these; they
/// turn them into [`Location`]s with the process's memory map before anything else uses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RuntimeAddress(pub u64);

/// A GNU build-id (the bytes of the `NT_GNU_BUILD_ID` note).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct BuildId(pub Vec<u8>);

impl BuildId {
    /// Lower-case hex, as `file` and `readelf -n` print it.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses lower- or upper-case hex.
    pub fn from_hex(s: &str) -> Option<BuildId> {
        if s.len() % 2 != 0 || s.is_empty() {
            return None;
        }
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
            .collect::<Option<Vec<u8>>>()
            .map(BuildId)
    }
}

impl fmt::Display for BuildId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl From<BuildId> for String {
    fn from(b: BuildId) -> String {
        b.to_hex()
    }
}

impl TryFrom<String> for BuildId {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        BuildId::from_hex(&s).ok_or_else(|| format!("not a hex build-id: {s:?}"))
    }
}

/// A loaded binary: executable or shared object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Module {
    /// Path as the process saw it (mmap record, `/proc/PID/maps`, or the runner's view).
    pub path: String,
    /// Build-id when known; the identity used to match a module across runs.
    pub build_id: Option<BuildId>,
    /// Runtime address minus SVMA, as observed in the run this module comes from.
    /// Informational only: everything downstream uses [`Svma`].
    pub load_bias: u64,
}

impl Module {
    /// A module known only by path.
    pub fn new(path: impl Into<String>) -> Module {
        Module {
            path: path.into(),
            build_id: None,
            load_bias: 0,
        }
    }

    /// File name without directories (`/usr/lib/libc.so.6` -> `libc.so.6`).
    pub fn file_name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }

    /// The module's name in brackets, as a row standing for the whole module
    /// (`[libc.so.6]`); a pseudo-module perf already names in brackets keeps its name
    /// (`[kernel.kallsyms]`, `[vdso]`, never `[[vdso]]`).
    pub fn bracketed_name(&self) -> String {
        let n = self.file_name();
        if n.starts_with('[') && n.ends_with(']') {
            n.to_string()
        } else {
            format!("[{n}]")
        }
    }

    /// Whether two modules are the same binary: equal build-ids when both have one, else
    /// equal file names.
    pub fn same_binary(&self, other: &Module) -> bool {
        match (&self.build_id, &other.build_id) {
            (Some(a), Some(b)) => a == b,
            _ => self.file_name() == other.file_name(),
        }
    }
}

/// Index of a module in its profile's [`ModuleTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ModuleIdx(pub u32);

/// A module-relative code location. `module == None` means the address could not be mapped
/// to any module (JIT code, vdso without a file, kernel); `svma` then holds the raw runtime
/// address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Location {
    /// Which module, if known.
    pub module: Option<ModuleIdx>,
    /// Address inside the module (or the raw address when `module` is `None`).
    pub svma: Svma,
}

impl Location {
    /// A location inside module `m`.
    pub fn new(m: ModuleIdx, svma: u64) -> Location {
        Location {
            module: Some(m),
            svma: Svma(svma),
        }
    }
    /// A location outside any known module.
    pub fn unmapped(raw: u64) -> Location {
        Location {
            module: None,
            svma: Svma(raw),
        }
    }
}

/// The modules of one profile, indexed by [`ModuleIdx`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ModuleTable {
    modules: Vec<Module>,
}

impl ModuleTable {
    /// Adds `m` unless a module with the same path and a compatible build-id (equal, or one of
    /// them unknown) is present; returns its index.
    pub fn intern(&mut self, m: Module) -> ModuleIdx {
        if let Some(i) = self.modules.iter().position(|x| {
            x.path == m.path
                && (x.build_id == m.build_id || x.build_id.is_none() || m.build_id.is_none())
        }) {
            if self.modules[i].build_id.is_none() && m.build_id.is_some() {
                self.modules[i].build_id = m.build_id;
            }
            return ModuleIdx(i as u32);
        }
        self.modules.push(m);
        ModuleIdx((self.modules.len() - 1) as u32)
    }
    /// The module at `i`.
    pub fn get(&self, i: ModuleIdx) -> Option<&Module> {
        self.modules.get(i.0 as usize)
    }
    /// Mutable access to the module at `i`.
    pub fn get_mut(&mut self, i: ModuleIdx) -> Option<&mut Module> {
        self.modules.get_mut(i.0 as usize)
    }
    /// All modules with their indices.
    pub fn iter(&self) -> impl Iterator<Item = (ModuleIdx, &Module)> {
        self.modules
            .iter()
            .enumerate()
            .map(|(i, m)| (ModuleIdx(i as u32), m))
    }
    /// Number of modules.
    pub fn len(&self) -> usize {
        self.modules.len()
    }
    /// True when there are no modules.
    pub fn is_empty(&self) -> bool {
        self.modules.is_empty()
    }
    /// First module whose file name equals `name` (`a.out`, `libc.so.6`).
    pub fn find_by_file_name(&self, name: &str) -> Option<ModuleIdx> {
        self.iter()
            .find(|(_, m)| m.file_name() == name)
            .map(|(i, _)| i)
    }
    /// First module that is the same binary as `m` (see [`Module::same_binary`]).
    pub fn find_same_binary(&self, m: &Module) -> Option<ModuleIdx> {
        self.iter().find(|(_, x)| x.same_binary(m)).map(|(i, _)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_id_hex_round_trip() {
        let b = BuildId(vec![0xde, 0xad, 0x01]);
        assert_eq!(b.to_hex(), "dead01");
        assert_eq!(BuildId::from_hex("DEAD01"), Some(b));
        assert_eq!(BuildId::from_hex("abc"), None);
        assert_eq!(BuildId::from_hex("zz"), None);
    }

    #[test]
    fn module_table_interns_by_path_and_fills_build_id() {
        let mut t = ModuleTable::default();
        let a = t.intern(Module::new("/bin/a"));
        let b = t.intern(Module::new("/lib/libc.so.6"));
        let mut again = Module::new("/bin/a");
        again.build_id = Some(BuildId(vec![1, 2]));
        assert_eq!(t.intern(again), a);
        assert_eq!(t.get(a).unwrap().build_id, Some(BuildId(vec![1, 2])));
        assert_ne!(a, b);
        assert_eq!(t.find_by_file_name("libc.so.6"), Some(b));
    }

    #[test]
    fn bracketed_names_are_never_doubled() {
        assert_eq!(
            Module::new("/lib/libc.so.6").bracketed_name(),
            "[libc.so.6]"
        );
        assert_eq!(
            Module::new("[kernel.kallsyms]").bracketed_name(),
            "[kernel.kallsyms]"
        );
        assert_eq!(Module::new("[vdso]").bracketed_name(), "[vdso]");
    }

    #[test]
    fn same_binary_prefers_build_id() {
        let mut x = Module::new("/a/prog");
        let mut y = Module::new("/b/prog");
        assert!(x.same_binary(&y));
        x.build_id = Some(BuildId(vec![1]));
        y.build_id = Some(BuildId(vec![2]));
        assert!(!x.same_binary(&y));
    }
}
