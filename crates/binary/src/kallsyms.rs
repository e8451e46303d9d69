//! Kernel symbols from a `/proc/kallsyms` copy (`--kallsyms FILE`), as perf reads them.
//!
//! Each line is `ADDRESS TYPE NAME [MODULE]`. Function symbols are those of type `t`, `T`,
//! `w` or `W` (perf's `kallsyms__is_function`); a symbol runs to the start of the next one
//! (kallsyms has no sizes; perf fixes the ends up the same way). Symbols of loadable modules
//! carry their module (`[kvm]`), so samples in a module are named too.

use crate::error::BinaryError;
pub use proftrust_model::KernelSymbol;
use std::path::Path;

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

    /// Kernel symbols as a sample file carries them (explicit sizes where known).
    pub fn from_symbols(mut symbols: Vec<KernelSymbol>) -> Kallsyms {
        symbols.sort_by_key(|s| s.start);
        Kallsyms { symbols }
    }

    /// The symbols, sorted by address.
    pub fn symbols(&self) -> &[KernelSymbol] {
        &self.symbols
    }

    /// The functions holding `addrs`, each with its extent made explicit (to the next
    /// symbol's start): what a recording keeps of `/proc/kallsyms` so that its kernel
    /// samples can be named on any machine later. Sorted, each once.
    pub fn covering(&self, addrs: impl IntoIterator<Item = u64>) -> Vec<KernelSymbol> {
        let mut idx: Vec<usize> = addrs.into_iter().filter_map(|a| self.index_at(a)).collect();
        idx.sort_unstable();
        idx.dedup();
        idx.into_iter()
            .map(|i| {
                let mut s = self.symbols[i].clone();
                if s.size == 0 {
                    s.size = self.end_of(i).map_or(0, |e| e - s.start);
                }
                s
            })
            .collect()
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
                    size: 0,
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

    /// The end of symbol `i` when its size is 0: the next symbol starting after it.
    fn end_of(&self, i: usize) -> Option<u64> {
        let start = self.symbols[i].start;
        let j = self.symbols.partition_point(|s| s.start <= start);
        self.symbols.get(j).map(|s| s.start)
    }

    /// Index of the function containing `addr`.
    fn index_at(&self, addr: u64) -> Option<usize> {
        let i = self.symbols.partition_point(|s| s.start <= addr);
        let last = self.symbols.get(i.checked_sub(1)?)?;
        let first = self.symbols.partition_point(|s| s.start < last.start);
        let s = &self.symbols[first];
        // A symbol with a stated size ends there; one without runs to the next symbol.
        (s.size == 0 || addr < s.start.saturating_add(s.size)).then_some(first)
    }

    /// The function containing `addr`: the last symbol starting at or before it (the first
    /// of several at one address), within its size when it has one.
    pub fn function_at(&self, addr: u64) -> Option<&KernelSymbol> {
        self.index_at(addr).map(|i| &self.symbols[i])
    }
}

/// The GNU build-id in an ELF note section's bytes (`/sys/kernel/notes` holds the running
/// kernel's: the same build-id perf records for `[kernel.kallsyms]` and `vmlinux` carries).
/// Notes are `namesz, descsz, type` (u32 each, native order), then the name and the
/// descriptor, each padded to 4 bytes; the build-id is type 3 (`NT_GNU_BUILD_ID`) named
/// `GNU`.
pub fn build_id_in_notes(b: &[u8]) -> Option<proftrust_model::BuildId> {
    let word = |o: usize| -> Option<usize> {
        Some(u32::from_ne_bytes(b.get(o..o.checked_add(4)?)?.try_into().ok()?) as usize)
    };
    let pad = |n: usize| n.checked_add(3).map(|x| x & !3);
    let mut p = 0usize;
    while p + 12 <= b.len() {
        let (namesz, descsz, ty) = (word(p)?, word(p + 4)?, word(p + 8)?);
        let name_at = p + 12;
        let desc_at = name_at.checked_add(pad(namesz)?)?;
        let next = desc_at.checked_add(pad(descsz)?)?;
        if ty == 3 && b.get(name_at..name_at + namesz)? == b"GNU\0" && descsz > 0 {
            return Some(proftrust_model::BuildId(
                b.get(desc_at..desc_at + descsz)?.to_vec(),
            ));
        }
        p = next;
    }
    None
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
        // What a recording keeps: the symbols holding the addresses, with explicit ends;
        // read back, an address past a kept symbol's end is in no function.
        let kept = k.covering([0xffffffff81001010, 0xffffffff81001020, 0xffffffffc0a02005]);
        assert_eq!(
            kept.iter()
                .map(|s| (s.name.as_str(), s.size))
                .collect::<Vec<_>>(),
            vec![("do_one_initcall", 0x2000), ("kvm_vcpu_ioctl", 0)]
        );
        let r = Kallsyms::from_symbols(kept);
        assert_eq!(
            r.function_at(0xffffffff81002fff).unwrap().name,
            "do_one_initcall"
        );
        assert!(r.function_at(0xffffffff81003000).is_none());
        assert_eq!(
            r.function_at(0xffffffffc0a03000).unwrap().name,
            "kvm_vcpu_ioctl"
        );
    }

    #[test]
    fn build_id_from_kernel_notes() {
        // Two notes as /sys/kernel/notes lays them out: an `Xen` note, then GNU build-id.
        let mut b = Vec::new();
        for (name, ty, desc) in [
            (&b"Xen\0"[..], 6u32, &[1u8, 2, 3, 4, 5, 6][..]),
            (&b"GNU\0"[..], 3u32, &[0xab, 0xcd, 0xef][..]),
        ] {
            b.extend_from_slice(&(name.len() as u32).to_ne_bytes());
            b.extend_from_slice(&(desc.len() as u32).to_ne_bytes());
            b.extend_from_slice(&ty.to_ne_bytes());
            b.extend_from_slice(name);
            b.extend_from_slice(desc);
            while b.len() % 4 != 0 {
                b.push(0);
            }
        }
        assert_eq!(build_id_in_notes(&b).unwrap().to_hex(), "abcdef");
        assert!(build_id_in_notes(&b[..20]).is_none());
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
