//! Profile files for every subcommand: the one loader of `proftrust-formats`
//! ([`proftrust_formats::load`] and friends) with the one binary lookup of
//! `proftrust-binary` ([`BinaryLocator`]: `--binary`, `--symfs`, build-id caches, the
//! recorded path). With `-v` each lookup step is printed.

use crate::util;
use proftrust_binary::{BinaryLocator, Kallsyms, LocateOptions, Symbolizer};
use proftrust_formats::{LoadOptions, Source};
use proftrust_model::ModuleTable;
use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The binaries of the profiles a command reads, found as perf finds them.
pub struct Lookup {
    /// The locator (also the readers' symbol and segment source).
    pub locator: BinaryLocator,
    /// Kernel symbols (`--kallsyms`), naming kernel samples.
    pub kallsyms: Option<Arc<Kallsyms>>,
    traced: Cell<usize>,
}

impl Lookup {
    /// `--binary` files and `--symfs` directory on top of the default places.
    pub fn new(binaries: &[PathBuf], symfs: Option<&Path>) -> Lookup {
        Lookup {
            locator: BinaryLocator::new(LocateOptions::new(binaries, symfs)),
            kallsyms: None,
            traced: Cell::new(0),
        }
    }

    /// Reads kernel symbols from a `/proc/kallsyms` copy (`--kallsyms FILE`).
    pub fn with_kallsyms(mut self, path: Option<&Path>) -> anyhow::Result<Lookup> {
        if let Some(p) = path {
            self.kallsyms = Some(Arc::new(Kallsyms::open(p)?));
        }
        Ok(self)
    }

    /// A symbolizer of `modules` through this lookup (and the kernel symbols, if any).
    pub fn symbolizer(&self, modules: &ModuleTable) -> Symbolizer {
        let s = Symbolizer::with_locator(modules, &self.locator);
        self.print_trace();
        match &self.kallsyms {
            Some(k) => s.with_kallsyms(k.clone()),
            None => s,
        }
    }

    /// Loader options reading objects through this lookup.
    pub fn options(&self) -> LoadOptions<'_> {
        LoadOptions::with_sources(&self.locator, &self.locator)
    }

    /// Prints the lookup steps not printed yet (with `-v`).
    pub fn print_trace(&self) {
        let t = self.locator.trace();
        if util::verbosity() >= 2 {
            for line in t.iter().skip(self.traced.get()) {
                eprintln!("proftrust: binary lookup: {line}");
            }
        }
        self.traced.set(t.len());
    }
}

/// The source for a path, `-` being standard input.
pub fn source(path: &Path) -> Source<'_> {
    if path.as_os_str() == "-" {
        Source::stdin()
    } else {
        Source::Path(path)
    }
}
