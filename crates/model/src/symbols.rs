//! What readers need to know about the objects a profile names: their function symbols
//! (to turn `sym+off` into addresses and to infer load biases) through [`SymbolSource`].
//!
//! The one implementation that reads binaries lives in `proftrust-binary`
//! (`BinaryLocator`, which finds each object the way perf does); readers take the trait so
//! that they stay free of ELF parsing and file lookups.

use crate::addr::BuildId;

/// A function symbol of an object, as its symbol table states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionSymbol {
    /// Name (`@VERSION` suffixes are ignored when matching). A source lists a function
    /// under its raw (mangled) name and, when it differs, under its demangled name too:
    /// valgrind and `perf script` print demangled names by default, `--no-demangle` raw ones.
    pub name: String,
    /// Start SVMA.
    pub start: u64,
    /// Size in bytes (0 = unknown; such symbols do not vote in bias inference).
    pub size: u64,
}

/// What a [`SymbolSource`] knows about one object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectSymbols {
    /// Build-id of the file found, if it has one; copied to the module.
    pub build_id: Option<BuildId>,
    /// Function symbols, raw and demangled names (see [`FunctionSymbol::name`]).
    pub functions: Vec<FunctionSymbol>,
}

/// Supplies the function symbols of the objects a profile names.
pub trait SymbolSource {
    /// Symbols of the object recorded at `path` (with `build_id` when the profile states
    /// one), or `None` when no matching file is available.
    fn symbols(&self, path: &str, build_id: Option<&BuildId>) -> Option<ObjectSymbols>;
}

/// A [`SymbolSource`] that knows nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoSymbols;

impl SymbolSource for NoSymbols {
    fn symbols(&self, _path: &str, _build_id: Option<&BuildId>) -> Option<ObjectSymbols> {
        None
    }
}
