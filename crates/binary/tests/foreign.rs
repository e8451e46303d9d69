//! Binaries of other architectures (AArch64, i686), cross-compiled at test time, read as
//! perf reads them: functions against the cross binutils' `nm`, inline chains and lines
//! against their `addr2line -a -i -f`, `name@plt` stubs against their `objdump -d` labels;
//! what decodes machine code refuses them in one line.
//!
//! A test whose cross compiler is missing prints `SKIP: <test>: <reason>` and returns
//! (`scripts/test.sh` installs `gcc-aarch64-linux-gnu` and `gcc-i686-linux-gnu`).

use proftrust_binary::{Binary, BinaryError};
use proftrust_model::Svma;
use proftrust_testkit::have;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn run(cmd: &str, args: &[&str]) -> String {
    let o = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd}: {e}"));
    assert!(
        o.status.success(),
        "{cmd} {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Cross-compiles tests/c/`name`.c with `PREFIX-gcc -O2 -g`, or skips.
fn cross(test: &str, prefix: &str, dir: &Path, name: &str) -> Option<PathBuf> {
    for tool in ["gcc", "nm", "addr2line", "objdump"] {
        let t = format!("{prefix}-{tool}");
        if !have(&t) {
            proftrust_testkit::skip!(
                "{test}: `{t}` is not installed (apt-get install gcc-{prefix} binutils-{prefix})"
            );
            return None;
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c"));
    let out = dir.join(format!("{name}-{prefix}"));
    run(
        &format!("{prefix}-gcc"),
        &[
            "-O2",
            "-g",
            src.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ],
    );
    Some(out)
}

/// `nm --defined-only` code symbols (`T`/`t`): name -> address.
fn nm_functions(prefix: &str, exe: &Path) -> BTreeMap<String, u64> {
    run(
        &format!("{prefix}-nm"),
        &["--defined-only", exe.to_str().unwrap()],
    )
    .lines()
    .filter_map(|l| {
        let mut it = l.split_whitespace();
        let (a, t, n) = (it.next()?, it.next()?, it.next()?);
        let a = u64::from_str_radix(a, 16).ok()?;
        matches!(t, "T" | "t").then(|| (n.to_string(), a))
    })
    .collect()
}

/// `addr2line -a -i -f` of `addrs`: per address its chain, innermost first, as
/// (function, file name, line).
fn addr2line_chains(
    prefix: &str,
    exe: &Path,
    addrs: &[u64],
) -> Vec<Vec<(String, String, Option<u32>)>> {
    let mut args = vec![
        "-a".to_string(),
        "-i".into(),
        "-f".into(),
        "-e".into(),
        exe.to_str().unwrap().into(),
    ];
    args.extend(addrs.iter().map(|a| format!("{a:#x}")));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&format!("{prefix}-addr2line"), &a);
    let mut chains: Vec<Vec<(String, String, Option<u32>)>> = Vec::new();
    let mut lines = out.lines().peekable();
    while let Some(l) = lines.next() {
        if l.starts_with("0x") {
            chains.push(Vec::new());
            continue;
        }
        let loc = lines.next().unwrap_or("??:0");
        let loc = loc.split(" (discriminator").next().unwrap();
        let (file, line) = loc.rsplit_once(':').unwrap();
        let line = line.parse::<u32>().ok().filter(|&l| l != 0);
        let file = file.rsplit('/').next().unwrap().to_string();
        chains
            .last_mut()
            .expect("an address line first")
            .push((l.to_string(), file, line));
    }
    chains
}

/// `<name@plt>:` labels of `objdump -d`: address -> name.
fn objdump_plt(prefix: &str, exe: &Path) -> BTreeMap<u64, String> {
    run(&format!("{prefix}-objdump"), &["-d", exe.to_str().unwrap()])
        .lines()
        .filter_map(|l| {
            let (a, rest) = l.split_once(" <")?;
            let name = rest.strip_suffix(">:")?;
            name.ends_with("@plt")
                .then(|| Some((u64::from_str_radix(a.trim(), 16).ok()?, name.to_string())))?
        })
        .collect()
}

fn check_architecture(test: &str, prefix: &str, arch: &str, step: u64) {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = cross(test, prefix, dir.path(), "inline_loop") else {
        return;
    };
    let bin = Binary::open(&exe).unwrap_or_else(|e| panic!("{e}"));
    assert!(!bin.is_x86_64());
    assert!(bin.arch().contains(arch), "{}", bin.arch());
    assert!(bin.has_symtab() && bin.has_debug_info());
    assert!(bin.build_id().is_some());
    assert!(bin.is_pie(), "Debian's cross gcc links PIE by default");
    // Every code symbol nm lists is a function at its address.
    let nm = nm_functions(prefix, &exe);
    assert!(nm.contains_key("work") && nm.contains_key("main"), "{nm:?}");
    for (name, addr) in &nm {
        let f = bin
            .function_by_name(name)
            .unwrap_or_else(|| panic!("{name} at {addr:#x} not found"));
        assert_eq!(f.start.0, *addr, "{name}");
    }
    // No ARM mapping symbol (`$x`, `$d`) is taken for a function (nm hides them too).
    assert!(
        bin.functions().iter().all(|f| !f.name.starts_with('$')),
        "{:?}",
        bin.functions().iter().map(|f| &f.name).collect::<Vec<_>>()
    );
    // Inline chains and lines of every `step` bytes of `work` equal addr2line's.
    let work = bin.function_by_name("work").unwrap().clone();
    let addrs: Vec<u64> = (work.start.0..work.end().0)
        .step_by(step as usize)
        .collect();
    let chains = addr2line_chains(prefix, &exe, &addrs);
    assert_eq!(chains.len(), addrs.len());
    let mut inlined = 0;
    for (a, chain) in addrs.iter().zip(&chains) {
        let ours: Vec<(String, String, Option<u32>)> = bin
            .frames(Svma(*a))
            .into_iter()
            .map(|f| {
                (
                    f.function,
                    f.file
                        .map(|x| x.rsplit('/').next().unwrap().to_string())
                        .unwrap_or_else(|| "??".into()),
                    f.line,
                )
            })
            .collect();
        assert_eq!(&ours, chain, "at {a:#x}");
        inlined += usize::from(chain.len() > 1);
    }
    assert!(inlined > 0, "inline_loop.c inlines into work at -O2");
    // PLT stubs named as objdump labels them (and perf synthesizes them).
    let plt = objdump_plt(prefix, &exe);
    assert!(plt.len() >= 2, "{plt:?}");
    for (addr, name) in &plt {
        let f = bin
            .function_at(Svma(*addr))
            .unwrap_or_else(|| panic!("no function at {name} {addr:#x}"));
        assert_eq!((&f.name, f.start.0), (name, *addr));
    }
    // What decodes machine code says so in one line, naming the file and both machines.
    let e = bin.cfg(&work).unwrap_err();
    assert!(matches!(e, BinaryError::NotX86_64 { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        !msg.contains('\n') && msg.contains(arch) && msg.contains("x86-64"),
        "{msg}"
    );
    assert!(msg.contains(exe.to_str().unwrap()), "{msg}");
    assert!(bin.instructions(&work).is_err());
    assert!(bin.direct_call_before(Svma(work.start.0 + 8)).is_none());
}

#[test]
fn aarch64_binaries_are_named_like_binutils_names_them() {
    check_architecture(
        "aarch64_binaries_are_named_like_binutils_names_them",
        "aarch64-linux-gnu",
        "AArch64",
        4,
    );
}

#[test]
fn i686_binaries_are_named_like_binutils_names_them() {
    check_architecture(
        "i686_binaries_are_named_like_binutils_names_them",
        "i686-linux-gnu",
        "EM_386",
        1,
    );
}
