//! Maps the modules of a profile to binaries on disk and names locations.

use crate::elf::{Binary, Frame, Function, OpenOptions};
use crate::kallsyms::Kallsyms;
use crate::locate::{BinaryLocator, LocateOptions};
use proftrust_model::{Attribution, Location, ModuleAttribution, ModuleIdx, ModuleTable};
use std::path::PathBuf;
use std::sync::Arc;

/// Maps the modules of a profile to binaries on disk and names locations.
///
/// Lookups are a binary search over the module's sorted function table (no allocation
/// except for the returned name), so attributing a million samples takes milliseconds.
#[derive(Debug)]
pub struct Symbolizer {
    modules: ModuleTable,
    binaries: Vec<Option<Arc<Binary>>>,
    warnings: Vec<String>,
    kallsyms: Option<(Arc<Kallsyms>, KernelSource)>,
}

/// Where the kernel symbols came from, weakest first: a stronger source replaces a weaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum KernelSource {
    /// perf's build-id cache or the running kernel (the locator's).
    Found,
    /// Copied into the sample file when it was recorded.
    Recorded,
    /// `--kallsyms FILE`.
    Given,
}

/// Whether a module is the kernel or a loadable kernel module as perf names them
/// (`[kernel.kallsyms]`, `[kvm]`, `/lib/modules/.../kvm.ko`).
pub fn is_kernel_module(path: &str) -> bool {
    path.starts_with("[kernel")
        || path.starts_with("[guest.kernel")
        || path.ends_with(".ko")
        || path.ends_with(".ko.xz")
        || path.ends_with(".ko.zst")
        || (path.starts_with('[')
            && path.ends_with(']')
            && !matches!(
                path,
                "[vdso]" | "[vsyscall]" | "[stack]" | "[heap]" | "[unknown]"
            ))
}

impl Symbolizer {
    /// `extra` = user's `--binary` paths; modules are looked up as
    /// [`BinaryLocator`] does with default places (build-id caches, debug directories,
    /// the recorded path).
    pub fn new(modules: &ModuleTable, extra: &[PathBuf]) -> Symbolizer {
        Symbolizer::with_options(modules, extra, &OpenOptions::default())
    }

    /// [`new`](Symbolizer::new) with options for opening binaries.
    pub fn with_options(
        modules: &ModuleTable,
        extra: &[PathBuf],
        opts: &OpenOptions,
    ) -> Symbolizer {
        let mut lo = LocateOptions::new(extra, None);
        lo.open = opts.clone();
        Symbolizer::with_locator(modules, &BinaryLocator::new(lo))
    }

    /// The binaries of `modules` as `locator` finds them (the same locator the readers
    /// used, so each file is opened once).
    pub fn with_locator(modules: &ModuleTable, locator: &BinaryLocator) -> Symbolizer {
        let binaries: Vec<Option<Arc<Binary>>> = modules
            .iter()
            .map(|(_, m)| locator.locate(&m.path, m.build_id.as_ref()).binary)
            .collect();
        let mut warnings = locator.warnings();
        // Each binary's own warnings, once.
        let mut seen: Vec<*const Binary> = Vec::new();
        for b in binaries.iter().flatten() {
            let p = Arc::as_ptr(b);
            if !seen.contains(&p) {
                seen.push(p);
                warnings.extend(b.warnings().iter().cloned());
            }
        }
        // Kernel symbols for the kernel's samples, found as perf finds them (a vmlinux given
        // with --binary is a binary like any other and comes first).
        let kallsyms = modules
            .iter()
            .find(|(_, m)| m.path == "[kernel.kallsyms]")
            .and_then(|(_, m)| locator.kernel_symbols(m.build_id.as_ref()))
            .map(|k| (k, KernelSource::Found));
        Symbolizer {
            modules: modules.clone(),
            binaries,
            warnings,
            kallsyms,
        }
    }

    /// Names kernel samples (modules [`is_kernel_module`] says are the kernel) from these
    /// kernel symbols (`--kallsyms FILE`), before any other source but a vmlinux binary.
    pub fn with_kallsyms(mut self, k: Arc<Kallsyms>) -> Symbolizer {
        self.kallsyms = Some((k, KernelSource::Given));
        self
    }

    /// Names kernel samples from the kernel symbols a sample file carries
    /// ([`SampleSet::kernel_symbols`](proftrust_model::SampleSet::kernel_symbols): copied
    /// from `/proc/kallsyms` at record time), unless `--kallsyms` gave some. Nothing
    /// changes when `symbols` is empty.
    pub fn with_recorded_kernel_symbols(
        mut self,
        symbols: &[proftrust_model::KernelSymbol],
    ) -> Symbolizer {
        if !symbols.is_empty()
            && self
                .kallsyms
                .as_ref()
                .is_none_or(|(_, s)| *s < KernelSource::Recorded)
        {
            self.kallsyms = Some((
                Arc::new(Kallsyms::from_symbols(symbols.to_vec())),
                KernelSource::Recorded,
            ));
        }
        self
    }

    /// The binary of module `m`, when one was found.
    pub fn binary(&self, m: ModuleIdx) -> Option<&Binary> {
        self.binaries.get(m.0 as usize)?.as_deref()
    }

    /// The modules this symbolizer was built for.
    pub fn modules(&self) -> &ModuleTable {
        &self.modules
    }

    /// The function containing `loc`.
    pub fn function(&self, loc: Location) -> Option<&Function> {
        self.binary(loc.module?)?.function_at(loc.svma)
    }

    /// The kernel symbol naming `loc`, when `loc` is in the kernel or a kernel module and
    /// kernel symbols were given.
    fn kernel_symbol(&self, loc: Location) -> Option<&crate::KernelSymbol> {
        let (k, _) = self.kallsyms.as_ref()?;
        let m = self.modules.get(loc.module?)?;
        if !is_kernel_module(&m.path) {
            return None;
        }
        k.function_at(loc.svma.0)
    }

    /// Outermost function name, or `module+0xoffset` / `[unknown]` fallback (never panics).
    /// A function recovered from an FDE is named `MODULE!sub_ADDR`.
    pub fn function_name(&self, loc: Location) -> String {
        if let Some(f) = self.function(loc) {
            return f.name.clone();
        }
        if let Some(s) = self.kernel_symbol(loc) {
            return s.name.clone();
        }
        match loc.module.and_then(|m| self.modules.get(m)) {
            Some(m) => format!("{}+{:#x}", m.file_name(), loc.svma.0),
            None => "[unknown]".to_string(),
        }
    }

    /// What the function of `loc` stands on: a symbol ([`Attribution::Named`]: symbol
    /// tables, PLT stubs, kernel symbols), an FDE only ([`Attribution::Recovered`]), or
    /// nothing ([`Attribution::Unattributed`]: `function_name` is then `module+0xoffset`).
    pub fn attribution(&self, loc: Location) -> Attribution {
        match self.function(loc) {
            Some(f) if f.origin.is_named() => Attribution::Named,
            Some(_) => Attribution::Recovered,
            None if self.kernel_symbol(loc).is_some() => Attribution::Named,
            None => Attribution::Unattributed,
        }
    }

    /// How the weighted locations `locs` are attributed, per module (in module-table
    /// order, modules without a location left out; locations in no module last, as
    /// `[unknown]`): the share of samples without a function every report states.
    pub fn attribution_by_module(
        &self,
        locs: impl IntoIterator<Item = (Location, u64)>,
    ) -> Vec<ModuleAttribution> {
        let mut per: Vec<ModuleAttribution> = self
            .modules
            .iter()
            .map(|(_, m)| ModuleAttribution {
                module: m.file_name().to_string(),
                ..Default::default()
            })
            .collect();
        let mut unknown = ModuleAttribution {
            module: "[unknown]".into(),
            ..Default::default()
        };
        for (loc, n) in locs {
            let a = self.attribution(loc);
            match loc.module.and_then(|m| per.get_mut(m.0 as usize)) {
                Some(x) => x.add(a, n),
                None => unknown.add(a, n),
            }
        }
        per.push(unknown);
        per.retain(|m| m.samples > 0);
        per
    }

    /// Inline chain at `loc`, innermost first (empty when nothing is known).
    pub fn frames(&self, loc: Location) -> Vec<Frame> {
        match loc.module.and_then(|m| self.binary(m)) {
            Some(b) => b.frames(loc.svma),
            None => Vec::new(),
        }
    }

    /// Build-id mismatches, missing files, binaries without symbols or debug info.
    pub fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }
}
