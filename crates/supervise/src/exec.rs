//! What `execve(2)` runs, decided as the Linux kernel decides it, so that every runner (the
//! recorder, QEMU, valgrind, the QEMU plugin following an `execve` of the guest) runs the
//! same program with the same arguments, and refuses before any long work what the kernel
//! would refuse.
//!
//! The kernel's rules (`fs/exec.c`, `fs/binfmt_script.c`, `fs/binfmt_elf.c`):
//! * the file must exist, be a regular file and be executable by the caller;
//! * an ELF file (`\x7fELF`) is loaded as it is;
//! * a file starting with `#!` is a script: the first line (at most 256 bytes,
//!   `BINPRM_BUF_SIZE`) names the interpreter (up to the first blank) and at most one
//!   argument (the rest of the line, blanks trimmed at both ends, kept whole); the
//!   interpreter then runs with `argv = [interpreter as written, argument (if any), the
//!   script's path as given, the original argv[1..]]`, and is itself resolved by the same
//!   rules, at most 5 scripts in a row (then `ELOOP`);
//! * anything else (an empty file, text without `#!`) is `ENOEXEC` (a shell would then run
//!   it with `/bin/sh`; `execve` does not);
//! * the process's name (`comm`, what perf's `COMM` records carry) is the last component of
//!   the path given to `execve` (the script's, not the interpreter's), cut to 15 bytes.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// `BINPRM_BUF_SIZE`: the bytes of a file the kernel reads to decide its format.
const HEAD: usize = 256;
/// `#!` scripts the kernel follows in a row before `ELOOP` (`exec_binprm`'s `depth > 5`:
/// five scripts and then an ELF run, six do not; measured on Linux 6.18).
const MAX_DEPTH: usize = 5;
/// `TASK_COMM_LEN - 1`.
const COMM_LEN: usize = 15;

/// `e_machine` of x86-64.
pub const EM_X86_64: u16 = 62;

/// The ELF file an `execve` finally loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElfIdent {
    /// 64-bit (`ELFCLASS64`).
    pub class64: bool,
    /// `e_machine` (62: x86-64, 3: i386, 183: AArch64).
    pub machine: u16,
}

impl ElfIdent {
    /// Whether this is an x86-64 program (what `qemu-x86_64` and the x86-64 valgrind run).
    pub fn is_x86_64(&self) -> bool {
        self.class64 && self.machine == EM_X86_64
    }

    /// `x86-64`, `i386`, `AArch64`, ... for messages.
    pub fn machine_name(&self) -> String {
        match (self.machine, self.class64) {
            (62, true) => "x86-64".into(),
            (62, false) => "x32".into(),
            (3, _) => "i386".into(),
            (183, _) => "AArch64".into(),
            (40, _) => "ARM".into(),
            (243, _) => "RISC-V".into(),
            (m, c) => format!("machine {m} ({}-bit)", if c { 64 } else { 32 }),
        }
    }
}

/// What `execve(file, argv)` runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecPlan {
    /// The ELF file the kernel loads: `file`, or the last interpreter of its `#!` chain.
    pub elf: PathBuf,
    /// The ELF's arguments as the kernel builds them (`argv[0]` first).
    pub argv: Vec<OsString>,
    /// The `#!` scripts on the way, the one given first.
    pub scripts: Vec<PathBuf>,
    /// The process's name after the `execve` (see the module docs).
    pub comm: String,
    /// The ELF's class and machine.
    pub ident: ElfIdent,
}

/// Why `execve` would fail, with the errno the kernel returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecError {
    /// The file at fault (the program, or an interpreter of its `#!` chain).
    pub path: PathBuf,
    /// The errno `execve` returns (`ENOENT`, `EACCES`, `ENOEXEC`, `ELOOP`, ...).
    pub errno: i32,
    /// What is wrong, for a message (names the fix where there is one).
    pub why: String,
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A newline in the path would start a line of its own on a terminal.
        let path = self.path.display().to_string().replace('\n', "\\n");
        write!(f, "{path}: {}", self.why)
    }
}

impl std::error::Error for ExecError {}

/// The process name the kernel gives a process that `execve`s `file` (see the module
/// docs): its last path component, cut to 15 bytes (invalid UTF-8 replaced).
pub fn comm_of(file: &OsStr) -> String {
    let b = file.as_bytes();
    let base = match b.iter().rposition(|&c| c == b'/') {
        Some(i) => &b[i + 1..],
        None => b,
    };
    String::from_utf8_lossy(&base[..base.len().min(COMM_LEN)]).into_owned()
}

/// Resolves `execve(file, argv)` as the kernel does (module docs): the ELF that runs, its
/// arguments and the process name, or why the kernel would refuse. `file` relative to the
/// working directory, as `execve` takes it (no `PATH` search).
pub fn plan_exec(file: &Path, argv: &[OsString]) -> Result<ExecPlan, ExecError> {
    let mut path = file.to_path_buf();
    let mut args: Vec<OsString> = argv.to_vec();
    let mut scripts = Vec::new();
    for depth in 0..=MAX_DEPTH {
        let head = read_head(&path)?;
        if head.starts_with(b"\x7fELF") {
            let ident = ElfIdent {
                class64: head.get(4) == Some(&2),
                machine: head
                    .get(18..20)
                    .map_or(0, |m| u16::from_le_bytes([m[0], m[1]])),
            };
            return Ok(ExecPlan {
                elf: path,
                argv: args,
                scripts,
                comm: comm_of(file.as_os_str()),
                ident,
            });
        }
        if !head.starts_with(b"#!") {
            return Err(ExecError {
                path,
                errno: libc::ENOEXEC,
                why: if head.is_empty() {
                    "an empty file is not a program (execve: Exec format error)".into()
                } else {
                    "neither an ELF program nor a #! script (execve: Exec format error; a shell would run it with /bin/sh: give `sh FILE`)".into()
                },
            });
        }
        if depth == MAX_DEPTH {
            return Err(ExecError {
                path,
                errno: libc::ELOOP,
                why: format!(
                    "more than {MAX_DEPTH} #! scripts in a row (execve: Too many levels of symbolic links)"
                ),
            });
        }
        let (interp, arg) = shebang(&head).ok_or_else(|| ExecError {
            path: path.clone(),
            errno: libc::ENOEXEC,
            why: "its #! line names no interpreter, or one longer than the 256 bytes the kernel reads".into(),
        })?;
        let mut next = vec![interp.clone()];
        next.extend(arg);
        next.push(path.clone().into_os_string());
        next.extend(args.into_iter().skip(1));
        scripts.push(path);
        args = next;
        path = PathBuf::from(interp);
    }
    unreachable!("the loop returns at MAX_DEPTH")
}

/// The first bytes of `path` after the kernel's checks (exists, regular, executable).
fn read_head(path: &Path) -> Result<Vec<u8>, ExecError> {
    let err = |errno: i32, why: String| ExecError {
        path: path.to_path_buf(),
        errno,
        why,
    };
    let meta = std::fs::metadata(path).map_err(|e| {
        err(
            e.raw_os_error().unwrap_or(libc::ENOENT),
            format!("cannot run it: {e}"),
        )
    })?;
    if !meta.is_file() {
        return Err(err(
            libc::EACCES,
            "not a regular file (execve: Permission denied)".into(),
        ));
    }
    if !crate::sys::may_execute(path) {
        return Err(err(
            libc::EACCES,
            "not executable by this user (execve: Permission denied; chmod +x it)".into(),
        ));
    }
    let mut f = std::fs::File::open(path).map_err(|e| {
        err(
            e.raw_os_error().unwrap_or(libc::EACCES),
            format!("cannot read it: {e}"),
        )
    })?;
    let mut head = Vec::with_capacity(HEAD);
    f.by_ref()
        .take(HEAD as u64)
        .read_to_end(&mut head)
        .map_err(|e| err(libc::EIO, format!("cannot read it: {e}")))?;
    Ok(head)
}

/// Interpreter and optional argument of a `#!` line (`binfmt_script`'s parse): blanks are
/// spaces and tabs; the line ends at a newline or at the end of the bytes read. `None`
/// when no interpreter is named, or the interpreter's name runs to the end of the bytes
/// read without a newline (the kernel cannot tell it is complete).
fn shebang(head: &[u8]) -> Option<(OsString, Option<OsString>)> {
    let body = &head[2..];
    let (line, complete) = match body.iter().position(|&c| c == b'\n') {
        Some(i) => (&body[..i], true),
        None => (body, false),
    };
    let blank = |c: &u8| *c == b' ' || *c == b'\t';
    let start = line.iter().position(|c| !blank(c))?;
    let line = &line[start..];
    let end = line
        .iter()
        .position(|c| blank(c) || *c == 0)
        .unwrap_or(line.len());
    if end == line.len() && !complete {
        return None;
    }
    let interp = &line[..end];
    if interp.is_empty() {
        return None;
    }
    let rest = &line[end..];
    let rest = match rest.iter().position(|c| !blank(c)) {
        Some(i) => &rest[i..],
        None => &[][..],
    };
    let rest = match rest.iter().rposition(|c| !blank(c)) {
        Some(i) => &rest[..=i],
        None => &[][..],
    };
    let arg = (!rest.is_empty()).then(|| OsString::from_vec(rest.to_vec()));
    Some((OsString::from_vec(interp.to_vec()), arg))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, text: &[u8]) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    /// binfmt_script's parse, by hand: blanks around the interpreter and its one argument
    /// dropped, the argument kept whole (inner blanks too).
    #[test]
    fn shebang_lines_parse_as_the_kernel_parses_them() {
        assert_eq!(shebang(b"#!/bin/sh\necho"), Some(("/bin/sh".into(), None)));
        assert_eq!(
            shebang(b"#! \t/usr/bin/env  python3 -u \t\nx"),
            Some(("/usr/bin/env".into(), Some("python3 -u".into())))
        );
        assert_eq!(shebang(b"#!\n"), None);
        assert_eq!(shebang(b"#!   \n"), None);
        // No newline in the bytes read: complete only when a blank ends the name.
        assert_eq!(shebang(b"#!/bin/sh"), None);
        assert_eq!(
            shebang(b"#!/bin/sh -e"),
            Some(("/bin/sh".into(), Some("-e".into())))
        );
    }

    /// A script of a script: argv as the kernel builds it (interpreter as written, its
    /// argument, the script's path as given, the original arguments), comm from the path
    /// given; a text file without `#!`, an empty file and a loop of five scripts are refused
    /// with the kernel's errno.
    #[test]
    fn scripts_resolve_to_their_interpreter_recursively() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let sh = std::fs::canonicalize("/bin/sh").unwrap();
        let inner = script(d, "inner", format!("#!{} -e\n", sh.display()).as_bytes());
        let outer = script(
            d,
            "outer-script-with-a-long-name",
            format!("#!{}\n", inner.display()).as_bytes(),
        );
        let p = plan_exec(&outer, &os(&["argv0", "a", "b c"])).unwrap();
        assert_eq!(p.elf, sh);
        assert_eq!(
            p.argv,
            vec![
                sh.clone().into_os_string(),
                "-e".into(),
                inner.clone().into_os_string(),
                outer.clone().into_os_string(),
                "a".into(),
                "b c".into()
            ]
        );
        assert_eq!(p.scripts, vec![outer.clone(), inner.clone()]);
        assert_eq!(p.comm, "outer-script-wi");
        assert!(p.ident.is_x86_64() || !cfg!(target_arch = "x86_64"));
        let text = script(d, "text", b"echo hi\n");
        assert_eq!(plan_exec(&text, &[]).unwrap_err().errno, libc::ENOEXEC);
        let empty = script(d, "empty", b"");
        let e = plan_exec(&empty, &[]).unwrap_err();
        assert_eq!(e.errno, libc::ENOEXEC);
        assert!(e.why.contains("empty file"), "{e}");
        let mut prev = script(d, "s0", format!("#!{}\n", sh.display()).as_bytes());
        for i in 1..=5 {
            prev = script(
                d,
                &format!("s{i}"),
                format!("#!{}\n", prev.display()).as_bytes(),
            );
            // Five scripts in a row run (s4 -> ... -> s0 -> sh); the sixth is ELOOP.
            let r = plan_exec(&prev, &[]);
            if i < 5 {
                assert_eq!(r.unwrap().scripts.len(), i + 1);
            } else {
                assert_eq!(r.unwrap_err().errno, libc::ELOOP);
            }
        }
        let missing = script(d, "missing-interp", b"#!/no/such/interpreter\n");
        let e = plan_exec(&missing, &[]).unwrap_err();
        assert_eq!(
            (e.errno, e.path),
            (libc::ENOENT, PathBuf::from("/no/such/interpreter"))
        );
        let plain = d.join("plain");
        std::fs::write(&plain, b"\x7fELF").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        if !crate::sys::may_execute(&plain) {
            assert_eq!(plan_exec(&plain, &[]).unwrap_err().errno, libc::EACCES);
        }
        assert_eq!(plan_exec(d, &[]).unwrap_err().errno, libc::EACCES);
    }

    #[test]
    fn comm_is_the_given_paths_last_component_cut_to_15_bytes() {
        assert_eq!(comm_of(OsStr::new("/usr/bin/sh")), "sh");
        assert_eq!(
            comm_of(OsStr::new("a-very-long-program-name")),
            "a-very-long-pro"
        );
        assert_eq!(comm_of(OsStr::new("dir/x")), "x");
    }
}
