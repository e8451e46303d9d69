//! Finding the binary of a profile's module the way perf and samply do, and serving its
//! symbols and segments to the readers ([`SymbolSource`], [`SegmentSource`]).
//!
//! For a module recorded at `PATH` with build-id `ID` (when the profile states one), the
//! places tried, in order (each step is logged in [`BinaryLocator::trace`], which
//! `proftrust -v` prints):
//!
//! 1. `--binary` files ([`LocateOptions::binaries`]): the one whose build-id is `ID`, else
//!    the one whose file name is `PATH`'s (refused, with a warning naming both build-ids,
//!    when both are known and differ);
//! 2. `--symfs DIR` ([`LocateOptions::symfs`], perf's meaning): `DIR/PATH`;
//! 3. perf's build-id cache ([`LocateOptions::build_id_cache`], `$PERF_BUILDID_DIR` or
//!    `~/.debug`): `.build-id/ID[..2]/ID[2..]/elf`;
//! 4. the debuginfod client cache ([`LocateOptions::debuginfod_cache`],
//!    `$DEBUGINFOD_CACHE_PATH`, else `$XDG_CACHE_HOME/debuginfod_client`, else
//!    `~/.cache/debuginfod_client`): `ID/executable`;
//! 5. `PATH` itself, when its build-id is `ID` or the profile recorded none (opening it
//!    finds its separate debug file, so a `-dbg` package's symbols and lines come with the
//!    code, PLT stubs and segments of the file that ran);
//! 6. debug-only files: the debuginfod cache's `ID/debuginfo`, then the distribution's
//!    debug files ([`LocateOptions::debug_dirs`], `/usr/lib/debug`):
//!    `.build-id/ID[..2]/ID[2..].debug`.
//!
//! `[vdso]` has no file: with `ID`, perf's build-id cache copy (`[vdso]/ID/vdso`), else the
//! running kernel's vDSO read from this process when its build-id is `ID`
//! ([`LocateOptions::running_vdso`]).
//!
//! Steps 3, 4 and 6 need `ID`. Every candidate from steps 2-6 must have build-id `ID` when both are
//! known. The module's segments come from the file found; a debug-only file (step 6, used
//! only when the recorded file is gone or another build) gives symbols and lines, and its
//! program headers keep the binary's addresses but not its file offsets.

use crate::elf::{Binary, OpenOptions};
use crate::kallsyms::Kallsyms;
use proftrust_model::segments::{SegmentSource, SegmentTable};
use proftrust_model::symbols::{FunctionSymbol, ObjectSymbols, SymbolSource};
use proftrust_model::BuildId;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Where [`BinaryLocator`] looks for binaries. See the module documentation for the order.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct LocateOptions {
    /// Binaries given by the user (`--binary`). Default: none.
    pub binaries: Vec<PathBuf>,
    /// A directory holding the recorded paths (`--symfs`). Default: none.
    pub symfs: Option<PathBuf>,
    /// perf's build-id cache directory. Default: `$PERF_BUILDID_DIR`, else `$HOME/.debug`.
    pub build_id_cache: Option<PathBuf>,
    /// The debuginfod client cache. Default: `$DEBUGINFOD_CACHE_PATH`, else
    /// `$XDG_CACHE_HOME/debuginfod_client`, else `$HOME/.cache/debuginfod_client`.
    pub debuginfod_cache: Option<PathBuf>,
    /// Roots of separate debug files. Default: `["/usr/lib/debug"]`.
    pub debug_dirs: Vec<PathBuf>,
    /// Try the recorded path (step 5). Default: `true`.
    pub recorded_path: bool,
    /// How binaries are opened. Default: [`OpenOptions::default`] with `debug_dirs`.
    pub open: OpenOptions,
    /// The running kernel's symbols and build-id note, used for `[kernel.kallsyms]` when the
    /// profile's kernel build-id is the running kernel's (perf does the same). Default:
    /// `Some(("/proc/kallsyms", "/sys/kernel/notes"))`; `None` never reads them.
    pub running_kernel: Option<(PathBuf, PathBuf)>,
    /// Use the running kernel's vDSO (read from this process) for a `[vdso]` module whose
    /// recorded build-id is its build-id. Default: `true`.
    pub running_vdso: bool,
}

impl Default for LocateOptions {
    fn default() -> Self {
        let env = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let home = env("HOME");
        LocateOptions {
            binaries: Vec::new(),
            symfs: None,
            build_id_cache: env("PERF_BUILDID_DIR")
                .or_else(|| home.as_ref().map(|h| h.join(".debug"))),
            debuginfod_cache: env("DEBUGINFOD_CACHE_PATH")
                .or_else(|| env("XDG_CACHE_HOME").map(|x| x.join("debuginfod_client")))
                .or_else(|| home.as_ref().map(|h| h.join(".cache/debuginfod_client"))),
            debug_dirs: vec![PathBuf::from("/usr/lib/debug")],
            recorded_path: true,
            open: OpenOptions::default(),
            running_kernel: Some((
                PathBuf::from("/proc/kallsyms"),
                PathBuf::from("/sys/kernel/notes"),
            )),
            running_vdso: true,
        }
    }
}

impl LocateOptions {
    /// Default places plus these `--binary` files and `--symfs` directory.
    pub fn new(binaries: &[PathBuf], symfs: Option<&Path>) -> LocateOptions {
        LocateOptions {
            binaries: binaries.to_vec(),
            symfs: symfs.map(Path::to_path_buf),
            ..LocateOptions::default()
        }
    }
}

/// What was found for one module.
#[derive(Debug, Clone)]
pub struct Located {
    /// The binary, when one was found.
    pub binary: Option<Arc<Binary>>,
    /// Which step found it (`--binary`, `--symfs`, `build-id cache`, `debuginfod cache`,
    /// `debug directory`, `recorded path`, `running kernel` for `[vdso]`), or `None`.
    pub step: Option<&'static str>,
}

struct Given {
    binary: Arc<Binary>,
    used: bool,
}

struct State {
    given: Vec<Given>,
    found: HashMap<(String, Option<BuildId>), Located>,
    /// Kernel symbols found per kernel build-id (`None`: looked for, none found).
    kernels: HashMap<Option<BuildId>, Option<Arc<Kallsyms>>>,
    trace: Vec<String>,
    warnings: Vec<String>,
}

/// Finds the binaries of a profile's modules (see the module documentation) and serves
/// their symbols and segments. One per profile; lookups are cached per (path, build-id).
pub struct BinaryLocator {
    opts: LocateOptions,
    state: Mutex<State>,
}

impl std::fmt::Debug for BinaryLocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BinaryLocator")
            .field("opts", &self.opts)
            .finish()
    }
}

/// Pseudo-modules perf and the kernel report without a file.
pub(crate) fn is_pseudo(path: &str) -> bool {
    path.is_empty()
        || path.starts_with('[')
        || path.starts_with("//anon")
        || path.starts_with("/dev/")
        || path.starts_with("anon_inode:")
        || path.starts_with("/memfd:")
        || path == "???"
}

fn file_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

fn hex_or_none(b: Option<&BuildId>) -> String {
    b.map_or_else(|| "none".to_string(), |b| b.to_hex())
}

/// What one opened candidate is for a module recorded with build-id `want`: the one to use,
/// another build (its build-id), or a file that did not open.
enum Judged {
    Use(Arc<Binary>),
    Other(Option<BuildId>),
    Failed(String),
}

/// The step every candidate goes through ([`BinaryLocator::search`] and the vDSO's): opened,
/// then compared by build-id. `strict` asks for the wanted build-id itself (a vDSO image is
/// only known by it); otherwise a file without a build-id, or a module recorded without
/// one, is used.
fn judge<E: std::fmt::Display>(
    opened: Result<Binary, E>,
    want: Option<&BuildId>,
    strict: bool,
) -> Judged {
    match opened {
        Err(e) => Judged::Failed(e.to_string()),
        Ok(b) => {
            let matches = match (want, b.build_id()) {
                (Some(w), Some(h)) => w == h,
                (Some(_), None) | (None, _) => !strict,
            };
            if matches {
                Judged::Use(Arc::new(b))
            } else {
                Judged::Other(b.build_id().cloned())
            }
        }
    }
}

impl BinaryLocator {
    /// A locator; the `--binary` files are opened now (a file that cannot be opened is a
    /// warning).
    pub fn new(opts: LocateOptions) -> BinaryLocator {
        let mut warnings = Vec::new();
        let mut given = Vec::new();
        for p in &opts.binaries {
            match Binary::open_with(p, &opts.open) {
                Ok(b) => given.push(Given {
                    binary: Arc::new(b),
                    used: false,
                }),
                Err(e) => warnings.push(format!("--binary {}: {e}", p.display())),
            }
        }
        BinaryLocator {
            opts,
            state: Mutex::new(State {
                given,
                found: HashMap::new(),
                kernels: HashMap::new(),
                trace: Vec::new(),
                warnings,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The binary of the module recorded at `path` with `build_id` (cached).
    pub fn locate(&self, path: &str, build_id: Option<&BuildId>) -> Located {
        let key = (path.to_string(), build_id.cloned());
        if let Some(l) = self.state().found.get(&key) {
            return l.clone();
        }
        let mut st = self.state();
        let l = self.search(&mut st, path, build_id);
        st.found.insert(key, l.clone());
        l
    }

    fn search(&self, st: &mut State, path: &str, want: Option<&BuildId>) -> Located {
        let who = format!("{path} (build-id {})", hex_or_none(want));
        let log = |st: &mut State, msg: String| st.trace.push(format!("{who}: {msg}"));
        // 1. --binary by build-id, then by file name.
        if let Some(w) = want {
            if let Some(g) = st.given.iter_mut().find(|g| g.binary.build_id() == Some(w)) {
                g.used = true;
                let b = self.named_after(g.binary.clone(), path);
                log(
                    st,
                    format!("--binary {}: build-id matches: used", b.path().display()),
                );
                return Located {
                    binary: Some(b),
                    step: Some("--binary"),
                };
            }
        }
        // A kernel image given as `--binary vmlinux*` names `[kernel.kallsyms]` (perf's
        // `--vmlinux`), when no build-id says otherwise.
        let by_name = st.given.iter().position(|g| {
            let given = g.binary.path().file_name().and_then(|n| n.to_str());
            given == Some(file_name(path))
                || (path == "[kernel.kallsyms]" && given.is_some_and(|n| n.starts_with("vmlinux")))
        });
        if let Some(i) = by_name {
            let b = st.given[i].binary.clone();
            match (want, b.build_id()) {
                (Some(w), Some(h)) if w != h => {
                    let msg = format!(
                        "--binary {} has build-id {h}, but the profile recorded {path} with build-id {w}: not used (it is another build; give the binary that was profiled)",
                        b.path().display()
                    );
                    log(st, msg.clone());
                    st.warnings.push(msg);
                }
                _ => {
                    st.given[i].used = true;
                    let b = self.named_after(b, path);
                    log(
                        st,
                        format!("--binary {}: file name matches: used", b.path().display()),
                    );
                    return Located {
                        binary: Some(b),
                        step: Some("--binary"),
                    };
                }
            }
        }
        if path == crate::vdso::VDSO {
            return self.vdso(st, want, &who);
        }
        if is_pseudo(path) {
            log(st, "no file (pseudo-module)".into());
            return Located {
                binary: None,
                step: None,
            };
        }
        let candidates = self.candidates(path, want);
        // Functions recovered from FDEs are named after the recorded file (`gawk!sub_..`),
        // not after a cache's file name (`elf`, `debuginfo`).
        let mut open = self.opts.open.clone();
        open.module_name = Some(file_name(path).to_string());
        for (step, p) in candidates {
            if !p.is_file() {
                log(st, format!("{step} {}: not found", p.display()));
                continue;
            }
            match judge(Binary::open_with(&p, &open), want, false) {
                Judged::Use(b) => {
                    log(st, format!("{step} {}: used", p.display()));
                    return Located {
                        binary: Some(b),
                        step: Some(step),
                    };
                }
                Judged::Other(h) => {
                    let msg = format!(
                        "{step} {} has build-id {}, but the profile recorded build-id {}: not used{}",
                        p.display(),
                        hex_or_none(h.as_ref()),
                        hex_or_none(want),
                        if step == "recorded path" {
                            " (rebuilt since the recording? give the original with --binary)"
                        } else {
                            ""
                        }
                    );
                    log(st, msg.clone());
                    if step == "recorded path" || step == "--symfs" {
                        st.warnings.push(msg);
                    }
                }
                Judged::Failed(e) => {
                    log(st, format!("{step} {}: {e}", p.display()));
                    st.warnings.push(e);
                }
            }
        }
        st.warnings.push(format!(
            "{path} not found: its samples are shown as {}+0xOFFSET; give the binary with --binary or --symfs",
            file_name(path)
        ));
        Located {
            binary: None,
            step: None,
        }
    }

    /// Steps 2-6 of the module documentation: the files to try for `path` (build-id
    /// `want`), in order, each with the step's name.
    fn candidates(&self, path: &str, want: Option<&BuildId>) -> Vec<(&'static str, PathBuf)> {
        let mut candidates: Vec<(&'static str, PathBuf)> = Vec::new();
        if let Some(dir) = &self.opts.symfs {
            candidates.push(("--symfs", dir.join(path.trim_start_matches('/'))));
        }
        if let Some(w) = want {
            let hex = w.to_hex();
            if hex.len() > 2 {
                if let Some(c) = &self.opts.build_id_cache {
                    candidates.push((
                        "build-id cache",
                        c.join(".build-id")
                            .join(&hex[..2])
                            .join(&hex[2..])
                            .join("elf"),
                    ));
                }
                if let Some(c) = &self.opts.debuginfod_cache {
                    candidates.push(("debuginfod cache", c.join(&hex).join("executable")));
                }
                // The recorded file, when its build-id is the one wanted, before debug-only
                // files: it has the code, `.plt` and segments, and opening it finds its debug
                // file (by build-id under the debug directories) for symbols and lines, as
                // perf pairs them. A debug-only file alone has no code bytes, no PLT stubs
                // and zeroed segment offsets.
                if self.opts.recorded_path {
                    candidates.push(("recorded path", PathBuf::from(path)));
                }
                if let Some(c) = &self.opts.debuginfod_cache {
                    candidates.push(("debuginfod cache", c.join(&hex).join("debuginfo")));
                }
                for d in &self.opts.debug_dirs {
                    candidates.push((
                        "debug directory",
                        d.join(".build-id")
                            .join(&hex[..2])
                            .join(format!("{}.debug", &hex[2..])),
                    ));
                }
            }
        }
        if self.opts.recorded_path && !candidates.iter().any(|(s, _)| *s == "recorded path") {
            candidates.push(("recorded path", PathBuf::from(path)));
        }
        candidates
    }

    /// `[vdso]` recorded with build-id `want`: perf's build-id cache copy, else the running
    /// kernel's vDSO when its build-id is `want`. Without a recorded build-id none is used
    /// (another kernel's vDSO would name the wrong code); its samples keep their addresses.
    fn vdso(&self, st: &mut State, want: Option<&BuildId>, who: &str) -> Located {
        let none = Located {
            binary: None,
            step: None,
        };
        let Some(w) = want else {
            st.trace.push(format!(
                "{who}: no build-id recorded: no vDSO image can be matched"
            ));
            return none;
        };
        let hex = w.to_hex();
        let mut open = self.opts.open.clone();
        open.module_name = Some(crate::vdso::VDSO.to_string());
        if let Some(c) = &self.opts.build_id_cache {
            let p = c.join(crate::vdso::VDSO).join(&hex).join("vdso");
            if p.is_file() {
                match judge(Binary::open_with(&p, &open), want, true) {
                    Judged::Use(b) => {
                        st.trace
                            .push(format!("{who}: build-id cache {}: used", p.display()));
                        return Located {
                            binary: Some(b),
                            step: Some("build-id cache"),
                        };
                    }
                    Judged::Other(h) => st.trace.push(format!(
                        "{who}: build-id cache {} has build-id {}: not used",
                        p.display(),
                        hex_or_none(h.as_ref())
                    )),
                    Judged::Failed(e) => st.trace.push(format!("{who}: build-id cache: {e}")),
                }
            } else {
                st.trace
                    .push(format!("{who}: build-id cache {}: not found", p.display()));
            }
        }
        if self.opts.running_vdso {
            match judge(crate::vdso::running_vdso(&open), want, true) {
                Judged::Use(b) => {
                    st.trace
                        .push(format!("{who}: the running kernel's vDSO: build-id matches: used"));
                    return Located {
                        binary: Some(b),
                        step: Some("running kernel"),
                    };
                }
                Judged::Other(h) => st.trace.push(format!(
                    "{who}: the running kernel's vDSO has build-id {}: not used (recorded on another kernel)",
                    hex_or_none(h.as_ref())
                )),
                Judged::Failed(e) => st.trace.push(format!("{who}: the running kernel's vDSO: {e}")),
            }
        }
        none
    }

    /// Kernel symbols for a `[kernel.kallsyms]` recorded with build-id `build_id`, found as
    /// perf finds them without `--kallsyms`: perf's build-id cache
    /// (`[kernel.kallsyms]/ID/kallsyms` under [`LocateOptions::build_id_cache`], which
    /// `perf record` fills), else the running kernel's `/proc/kallsyms` when its build-id
    /// (`/sys/kernel/notes`) is `build_id`. Cached; `None` when neither applies.
    pub fn kernel_symbols(&self, build_id: Option<&BuildId>) -> Option<Arc<Kallsyms>> {
        let key = build_id.cloned();
        if let Some(k) = self.state().kernels.get(&key) {
            return k.clone();
        }
        let who = format!("[kernel.kallsyms] (build-id {})", hex_or_none(build_id));
        let mut trace = Vec::new();
        let mut found = None;
        if let (Some(w), Some(c)) = (build_id, &self.opts.build_id_cache) {
            let p = c
                .join("[kernel.kallsyms]")
                .join(w.to_hex())
                .join("kallsyms");
            match Kallsyms::open(&p) {
                Ok(k) => {
                    trace.push(format!("{who}: build-id cache {}: used", p.display()));
                    found = Some(Arc::new(k));
                }
                Err(e) => trace.push(format!("{who}: build-id cache {}: {e}", p.display())),
            }
        }
        if let (None, Some(w), Some((syms, notes))) = (&found, build_id, &self.opts.running_kernel)
        {
            let running = std::fs::read(notes)
                .ok()
                .and_then(|b| crate::kallsyms::build_id_in_notes(&b));
            if running.as_ref() == Some(w) {
                match Kallsyms::open(syms) {
                    Ok(k) => {
                        trace.push(format!(
                            "{who}: running kernel {}: build-id matches: used",
                            syms.display()
                        ));
                        found = Some(Arc::new(k));
                    }
                    Err(e) => trace.push(format!("{who}: running kernel: {e}")),
                }
            } else {
                trace.push(format!(
                    "{who}: the running kernel has build-id {}: its {} not used",
                    hex_or_none(running.as_ref()),
                    syms.display()
                ));
            }
        }
        let mut st = self.state();
        st.trace.extend(trace);
        st.kernels.insert(key, found.clone());
        found
    }

    /// `b` with its recovered functions named after the recorded module (`gawk!sub_..`
    /// for a module recorded as `/usr/bin/gawk` and given as `--binary gawk.stripped`):
    /// opened again under that name when the names differ and it has recovered functions.
    fn named_after(&self, b: Arc<Binary>, path: &str) -> Arc<Binary> {
        let recorded = file_name(path);
        if b.recovered_functions() == 0
            || b.path().file_name().and_then(|n| n.to_str()) == Some(recorded)
            || is_pseudo(path)
        {
            return b;
        }
        let mut open = self.opts.open.clone();
        open.module_name = Some(recorded.to_string());
        Binary::open_with(b.path(), &open).map_or(b, Arc::new)
    }

    /// Every lookup step so far, one line each (for `-v`).
    pub fn trace(&self) -> Vec<String> {
        self.state().trace.clone()
    }

    /// Warnings: unusable `--binary` files, build-id mismatches, binaries not found, and a
    /// `--binary` that matched no module looked up so far.
    pub fn warnings(&self) -> Vec<String> {
        let st = self.state();
        let mut w = st.warnings.clone();
        for g in st.given.iter().filter(|g| !g.used) {
            w.push(format!(
                "--binary {} matches no module of the profile (build-id {}, file name {})",
                g.binary.path().display(),
                hex_or_none(g.binary.build_id()),
                g.binary
                    .path()
                    .file_name()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            ));
        }
        w
    }
}

/// The symbols of a binary as readers match them: each function under its raw name and,
/// when different, its demangled name.
pub fn object_symbols(b: &Binary) -> ObjectSymbols {
    let mut functions = Vec::with_capacity(b.functions().len());
    for f in b.functions() {
        functions.push(FunctionSymbol {
            name: f.raw_name.clone(),
            start: f.start.0,
            size: f.size,
        });
        if f.name != f.raw_name {
            functions.push(FunctionSymbol {
                name: f.name.clone(),
                start: f.start.0,
                size: f.size,
            });
        }
    }
    ObjectSymbols {
        build_id: b.build_id().cloned(),
        functions,
    }
}

impl SymbolSource for BinaryLocator {
    fn symbols(&self, path: &str, build_id: Option<&BuildId>) -> Option<ObjectSymbols> {
        self.locate(path, build_id)
            .binary
            .map(|b| object_symbols(&b))
    }
}

impl SegmentSource for BinaryLocator {
    fn load_segments(&self, path: &str, build_id: Option<&BuildId>) -> Option<SegmentTable> {
        let b = self.locate(path, build_id).binary?;
        (!b.segments().is_empty()).then(|| b.segments().clone())
    }
}
