//! What readers need to know about the objects a profile names: their function symbols
//! (to turn `sym+off` into addresses and to infer load biases) through [`SymbolSource`].
//!
//! The one implementation that reads binaries lives in `proftrust-binary`
//! (`BinaryLocator`, which finds each object the way perf does); readers take the trait so
//! that they stay free of ELF parsing and file lookups.

use crate::addr::BuildId;
use serde::{Deserialize, Serialize};

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

/// What the function of a location stands on: the attribution fact behind a profile row.
///
/// A verdict or a "trust down to" can be no finer than this: a row of [`Recovered`]
/// locations has exact function boundaries (the FDE of the call-frame information) but a
/// made-up name (`gawk!sub_46dd00`), and [`Unattributed`] locations have no function at all.
///
/// [`Recovered`]: Attribution::Recovered
/// [`Unattributed`]: Attribution::Unattributed
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Attribution {
    /// A symbol table (`.symtab`, `.dynsym`, MiniDebugInfo, kallsyms, vmlinux) or a PLT
    /// stub names the function.
    Named,
    /// No symbol names the function; its range is an FDE of `.eh_frame`/`.debug_frame`.
    Recovered,
    /// No function covers the location (no symbol, no FDE, no binary): it keeps its
    /// address (`gawk+0x46dd58`) and belongs to no function row.
    Unattributed,
}

/// How the samples of one module are attributed (a [`Attribution`] count per module):
/// what every report states per module as "samples without a function".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleAttribution {
    /// The module's file name (`gawk`, `libc.so.6`, `[kernel.kallsyms]`, `[unknown]` for
    /// addresses in no module).
    pub module: String,
    /// Samples in the module.
    pub samples: u64,
    /// Samples in functions named by a symbol.
    pub named: u64,
    /// Samples in functions recovered from FDEs.
    pub recovered: u64,
    /// Samples in no function.
    pub unattributed: u64,
}

impl ModuleAttribution {
    /// Counts one sample of this attribution.
    pub fn add(&mut self, a: Attribution, n: u64) {
        self.samples += n;
        match a {
            Attribution::Named => self.named += n,
            Attribution::Recovered => self.recovered += n,
            Attribution::Unattributed => self.unattributed += n,
        }
    }

    /// The share of the module's samples in no function (0 without samples).
    pub fn unattributed_share(&self) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            self.unattributed as f64 / self.samples as f64
        }
    }

    /// One line for a report: `gawk: 0.4% of 12345 samples in no function (52), 61.2% in
    /// recovered functions (gawk!sub_ADDR)`.
    pub fn describe(&self) -> String {
        let pct = |n: u64| 100.0 * n as f64 / self.samples.max(1) as f64;
        let mut s = format!(
            "{}: {:.1}% of {} samples in no function ({})",
            self.module,
            pct(self.unattributed),
            self.samples,
            self.unattributed
        );
        if self.recovered > 0 {
            s.push_str(&format!(
                ", {:.1}% in functions recovered from .eh_frame without a name ({}!sub_ADDR)",
                pct(self.recovered),
                self.module
            ));
        }
        s
    }
}

/// One kernel function as `/proc/kallsyms` states it (run-time address), with its extent
/// when known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelSymbol {
    /// Start address.
    pub start: u64,
    /// Size in bytes; 0 = unknown (the symbol runs to the next one, as perf fixes kallsyms
    /// ends up).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub size: u64,
    /// Name.
    pub name: String,
    /// The loadable module (`kvm` for `[kvm]`), `None` for the kernel image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
}

fn is_zero(x: &u64) -> bool {
    *x == 0
}
