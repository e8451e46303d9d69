//! Maps the modules of a profile to binaries on disk and names locations.

use crate::elf::{Binary, Frame, Function, OpenOptions};
use crate::kallsyms::Kallsyms;
use crate::locate::{BinaryLocator, LocateOptions};
use proftrust_model::{Location, ModuleIdx, ModuleTable};
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
    kallsyms: Option<Arc<Kallsyms>>,
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
        Symbolizer {
            modules: modules.clone(),
            binaries,
            warnings,
            kallsyms: None,
        }
    }

    /// Names kernel samples (modules [`is_kernel_module`] says are the kernel) from these
    /// kernel symbols (`--kallsyms FILE`).
    pub fn with_kallsyms(mut self, k: Arc<Kallsyms>) -> Symbolizer {
        self.kallsyms = Some(k);
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

    /// Outermost function name, or `module+0xoffset` / `[unknown]` fallback (never panics).
    pub fn function_name(&self, loc: Location) -> String {
        if let Some(f) = self.function(loc) {
            return f.name.clone();
        }
        if let (Some(k), Some(m)) = (&self.kallsyms, loc.module.and_then(|m| self.modules.get(m))) {
            if is_kernel_module(&m.path) {
                if let Some(s) = k.function_at(loc.svma.0) {
                    return s.name.clone();
                }
            }
        }
        match loc.module.and_then(|m| self.modules.get(m)) {
            Some(m) => format!("{}+{:#x}", m.file_name(), loc.svma.0),
            None => "[unknown]".to_string(),
        }
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
