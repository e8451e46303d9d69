//! Kernel symbols from a `/proc/kallsyms` copy (`--kallsyms FILE`), as perf reads them.
//!
//! Each line is `ADDRESS TYPE NAME [MODULE]`. Function symbols are those of type `t`, `T`,
//! `w` or `W` (perf's `kallsyms__is_function`); a symbol runs to the start of the next one
//! (kallsyms has no sizes; perf fixes the ends up the same way). Symbols of loadable modules
//! carry their module (`[kvm]`), so samples in a module are named too.

use crate::error::BinaryError;
use std::path::Path;

/// One kernel function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSymbol {
    /// Start address.
    pub start: u64,
    /// Name.
    pub name: String,
    /// The loadable module (`kvm` for `[kvm]`), `None` for the kernel image.
    pub module: Option<String>,
}

/// The function symbols of a kernel, sorted by address.
#[derive(Debug, Clone, Default)]
pub struct Kallsyms {
    symbols: Vec<KernelSymbol>,
}

impl Kallsyms {
    /// Reads a kallsyms file. Errors: unreadable, no function symbol, or every address 0
    /// (read as an unprivileged user under `kptr_restrict`).
    pub fn open(path: &Path) -> Result<Kallsyms, BinaryError> {
        let text = std::fs::read(path).map_err(|err| BinaryError::Io {
            path: path.into(),
            err,
        })?;
        let k = Kallsyms::parse(&String::from_utf8_lossy(&text));
        let bad = |what: &str| BinaryError::Malformed {
            path: path.into(),
            what: what.into(),
        };
        if k.symbols.is_empty() {
            return Err(bad(
                "no function symbol (lines `ADDRESS t|T|w|W NAME [MODULE]`): not a copy of /proc/kallsyms",
            ));
        }
        if k.symbols.iter().all(|s| s.start == 0) {
            return Err(bad(
                "every address is 0: it was read without privilege (kernel.kptr_restrict); copy /proc/kallsyms as root",
            ));
        }
        Ok(k)
    }

    /// Parses kallsyms text; lines that do not fit are skipped.
    pub fn parse(text: &str) -> Kallsyms {
        let mut symbols: Vec<KernelSymbol> = text
            .lines()
            .filter_map(|l| {
                let mut t = l.split_ascii_whitespace();
                let start = u64::from_str_radix(t.next()?, 16).ok()?;
                let ty = t.next()?;
                let name = t.next()?;
                if !matches!(ty, "t" | "T" | "w" | "W") {
                    return None;
                }
                let module = t
                    .next()
                    .and_then(|m| m.strip_prefix('[')?.strip_suffix(']'))
                    .map(str::to_string);
                Some(KernelSymbol {
                    start,
                    name: name.to_string(),
                    module,
                })
            })
            .collect();
        symbols.sort_by_key(|s| s.start);
        Kallsyms { symbols }
    }

    /// Number of function symbols.
    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    /// True when there is no function symbol.
    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    /// The function containing `addr`: the last symbol starting at or before it (the first
    /// of several at one address).
    pub fn function_at(&self, addr: u64) -> Option<&KernelSymbol> {
        let i = self.symbols.partition_point(|s| s.start <= addr);
        let last = self.symbols.get(i.checked_sub(1)?)?;
        let first = self.symbols.partition_point(|s| s.start < last.start);
        self.symbols.get(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
0000000000000000 A fixed_percpu_data
ffffffff81000000 T _stext
ffffffff81000000 T _text
ffffffff81001000 t do_one_initcall
ffffffff81002000 D some_data
ffffffff81003000 W weak_fn
ffffffffc0a01000 t kvm_arch_hardware_enable\t[kvm]
ffffffffc0a02000 T kvm_vcpu_ioctl\t[kvm]
";

    #[test]
    fn names_kernel_and_module_addresses() {
        let k = Kallsyms::parse(TEXT);
        assert_eq!(k.len(), 6);
        assert_eq!(k.function_at(0xffffffff81000010).unwrap().name, "_stext");
        // Data symbols do not end a function: the range runs to the next function.
        assert_eq!(
            k.function_at(0xffffffff81002500).unwrap().name,
            "do_one_initcall"
        );
        let m = k.function_at(0xffffffffc0a01234).unwrap();
        assert_eq!(
            (m.name.as_str(), m.module.as_deref()),
            ("kvm_arch_hardware_enable", Some("kvm"))
        );
        assert!(k.function_at(0x1000).is_none());
    }

    #[test]
    fn refuses_restricted_and_non_kallsyms() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("k");
        std::fs::write(&p, "0000000000000000 T _stext\n0000000000000000 t x\n").unwrap();
        let e = Kallsyms::open(&p).unwrap_err().to_string();
        assert!(e.contains("kptr_restrict"), "{e}");
        std::fs::write(&p, "hello\n").unwrap();
        let e = Kallsyms::open(&p).unwrap_err().to_string();
        assert!(e.contains("not a copy of /proc/kallsyms"), "{e}");
    }
}
