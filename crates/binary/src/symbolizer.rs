//! Maps the modules of a profile to binaries on disk and names locations.

use crate::elf::{Binary, Frame, Function, OpenOptions};
use proftrust_model::{Location, Module, ModuleIdx, ModuleTable};
use std::path::{Path, PathBuf};
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
}

/// Pseudo-modules perf and the kernel report without a file.
fn is_pseudo(path: &str) -> bool {
    path.is_empty()
        || path.starts_with('[')
        || path.starts_with("//anon")
        || path.starts_with("/dev/")
        || path.starts_with("anon_inode:")
        || path.starts_with("/memfd:")
}

impl Symbolizer {
    /// `extra` = user's `--binary` paths: matched to modules by build-id, else by file name.
    /// Otherwise the module's own path is opened if it exists (and its build-id matches when
    /// known), then perf's cache `~/.debug/.build-id/xx/rest/elf`. Separate debug files are
    /// found by [`Binary::open`] (`/usr/lib/debug/.build-id/xx/rest.debug`,
    /// `.gnu_debuglink`).
    pub fn new(modules: &ModuleTable, extra: &[PathBuf]) -> Symbolizer {
        Symbolizer::with_options(modules, extra, &OpenOptions::default())
    }

    /// [`new`](Symbolizer::new) with options for opening binaries.
    pub fn with_options(
        modules: &ModuleTable,
        extra: &[PathBuf],
        opts: &OpenOptions,
    ) -> Symbolizer {
        let mut warnings = Vec::new();
        let mut extras: Vec<(Arc<Binary>, bool)> = Vec::new(); // (binary, used)
        for p in extra {
            match Binary::open_with(p, opts) {
                Ok(b) => extras.push((Arc::new(b), false)),
                Err(e) => warnings.push(format!("--binary {}: {e}", p.display())),
            }
        }
        let mut binaries = Vec::with_capacity(modules.len());
        for (_, m) in modules.iter() {
            binaries.push(Self::resolve(m, &mut extras, opts, &mut warnings));
        }
        for (b, used) in &extras {
            if !*used {
                warnings.push(format!(
                    "--binary {} matches no module of the profile (build-id {}, file name {})",
                    b.path().display(),
                    b.build_id()
                        .map(|x| x.to_hex())
                        .unwrap_or_else(|| "none".into()),
                    b.path()
                        .file_name()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default()
                ));
            }
        }
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
        }
    }

    fn resolve(
        m: &Module,
        extras: &mut [(Arc<Binary>, bool)],
        opts: &OpenOptions,
        warnings: &mut Vec<String>,
    ) -> Option<Arc<Binary>> {
        // 1. --binary by build-id, 2. --binary by file name.
        if let Some(id) = &m.build_id {
            if let Some(e) = extras.iter_mut().find(|(b, _)| b.build_id() == Some(id)) {
                e.1 = true;
                return Some(e.0.clone());
            }
        }
        let by_name = extras.iter_mut().find(|(b, _)| {
            b.path().file_name().map(|s| s.to_string_lossy()) == Some(m.file_name().into())
        });
        if let Some(e) = by_name {
            match (&m.build_id, e.0.build_id()) {
                (Some(want), Some(have)) if want != have => {
                    warnings.push(format!(
                        "--binary {} has build-id {} but the profile's {} has {}: not used",
                        e.0.path().display(),
                        have,
                        m.path,
                        want
                    ));
                }
                _ => {
                    e.1 = true;
                    return Some(e.0.clone());
                }
            }
        }
        if is_pseudo(&m.path) {
            return None;
        }
        // 3. The module's own path.
        let own = Path::new(&m.path);
        if own.exists() {
            match Binary::open_with(own, opts) {
                Ok(b) => match (&m.build_id, b.build_id()) {
                    (Some(want), Some(have)) if want != have => {
                        warnings.push(format!(
                            "{} has build-id {} on disk but {} in the profile (rebuilt since?): not used; pass the original with --binary",
                            m.path, have, want
                        ));
                    }
                    _ => return Some(Arc::new(b)),
                },
                Err(e) => {
                    warnings.push(format!("{e}"));
                    return None;
                }
            }
        }
        // 4. perf's build-id cache.
        if let (Some(id), Some(home)) = (&m.build_id, std::env::var_os("HOME")) {
            let hex = id.to_hex();
            if hex.len() > 2 {
                let p = PathBuf::from(home)
                    .join(".debug/.build-id")
                    .join(&hex[..2])
                    .join(&hex[2..])
                    .join("elf");
                if let Ok(b) = Binary::open_with(&p, opts) {
                    if b.build_id() == Some(id) {
                        return Some(Arc::new(b));
                    }
                }
            }
        }
        if !own.exists() {
            warnings.push(format!(
                "{} not found: its samples are shown as {}+0xOFFSET; pass the binary with --binary",
                m.path,
                m.file_name()
            ));
        }
        None
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
