//! File-backed mappings of the QEMU process (`/proc/self/maps`), used to turn the host
//! address of a guest instruction into (file, file offset). In user mode the guest's code
//! pages are host mappings of the guest's files (QEMU's ELF loader and the guest's `mmap`
//! both map the file), so this works for the main binary (PIE or not), the dynamic loader
//! and every shared library, whatever QEMU's guest base.

/// One file-backed mapping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// First host address.
    pub start: u64,
    /// One past the last host address.
    pub end: u64,
    /// File offset of `start`.
    pub offset: u64,
    /// File path as the kernel prints it.
    pub path: String,
}

/// Parses the text of `/proc/PID/maps`, keeping mappings whose path is absolute (files).
/// The kernel writes a newline of a path as `\012` (`seq_file_path` with `"\n"` as the
/// characters to escape, the only one it escapes there); it is turned back into the
/// newline, so a path reads as the program's own `mmap` records give it.
pub fn parse(text: &str) -> Vec<Mapping> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut it = line.splitn(6, ' ');
        let (Some(range), Some(_perms), Some(off), Some(_dev), Some(_inode)) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        else {
            continue;
        };
        let path = it.next().unwrap_or("").trim_start();
        if !path.starts_with('/') {
            continue;
        }
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end), Ok(offset)) = (
            u64::from_str_radix(s, 16),
            u64::from_str_radix(e, 16),
            u64::from_str_radix(off, 16),
        ) else {
            continue;
        };
        out.push(Mapping {
            start,
            end,
            offset,
            path: path.replace("\\012", "\n"),
        });
    }
    out.sort_by_key(|m| m.start);
    out
}

/// The mapping containing `addr` in a list sorted by `start`.
pub fn lookup(maps: &[Mapping], addr: u64) -> Option<&Mapping> {
    let i = maps.partition_point(|m| m.start <= addr);
    let m = maps.get(i.checked_sub(1)?)?;
    (addr < m.end).then_some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_looks_up() {
        let text = "\
55d0c0000000-55d0c0001000 r--p 00000000 08:01 123 /tmp/a out
55d0c0001000-55d0c0002000 r-xp 00001000 08:01 123 /tmp/a out
7f0000000000-7f0000021000 rw-p 00000000 00:00 0 
7ffd1000000-7ffd1001000 r-xp 00000000 00:00 0                          [vdso]
";
        let m = parse(text);
        assert_eq!(m.len(), 2);
        assert_eq!(m[1].path, "/tmp/a out");
        let hit = lookup(&m, 0x55d0c0001234).unwrap();
        assert_eq!(hit.offset + (0x55d0c0001234 - hit.start), 0x1234);
        assert!(lookup(&m, 0x55d0c0002000).is_none());
        assert!(lookup(&m, 0x1000).is_none());
        let nl = parse("1000-2000 r-xp 00000000 08:01 1 /tmp/a\\012b/prog\n");
        assert_eq!(nl[0].path, "/tmp/a\nb/prog");
    }
}
