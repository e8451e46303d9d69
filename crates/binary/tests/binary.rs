//! Integration tests of proftrust-binary on small C programs compiled at test time
//! (`gcc -O2 -g`), checked against binutils as independent oracles: `nm` for symbols,
//! `addr2line -i -f` for inline chains and lines, `objdump -d` / `objdump -s` for branch
//! and jump-table targets, `readelf -n` for build-ids.
//!
//! A test whose tool is missing prints `SKIP: <test>: <reason>` and returns.

use proftrust_binary::{
    dominators, simple_loops, Binary, BinaryError, Flow, FunctionOrigin, OpenOptions, Symbolizer,
};
use proftrust_model::{
    Attribution, BuildId, EdgeKind, Location, Module, ModuleIdx, ModuleTable, Svma,
};
use proftrust_testkit::have;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(name)
}

fn tools(test: &str, needed: &[&str]) -> bool {
    for t in needed {
        if !have(t) {
            proftrust_testkit::skip!(
                "{test}: `{t}` is not installed (apt-get install binutils gcc)"
            );
            return false;
        }
    }
    true
}

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

/// Compiles `sources` (in tests/c) with `gcc -O2 -g <extra>` into `dir/out`.
fn gcc(dir: &Path, out: &str, sources: &[&str], extra: &[&str]) -> PathBuf {
    let srcs: Vec<PathBuf> = sources.iter().map(|s| src(s)).collect();
    let refs: Vec<&Path> = srcs.iter().map(PathBuf::as_path).collect();
    proftrust_testkit::gcc(&dir.join(out), &refs, extra)
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// `nm --defined-only` code symbols: name -> address.
fn nm_functions(exe: &Path) -> BTreeMap<String, u64> {
    run("nm", &["--defined-only", p(exe)])
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let (a, t, n) = (it.next()?, it.next()?, it.next()?);
            matches!(t, "T" | "t").then(|| (n.to_string(), u64::from_str_radix(a, 16).ok()))
        })
        .filter_map(|(n, a)| Some((n, a?)))
        .collect()
}

/// One instruction line of `objdump -d`: (address, text after the tab).
fn objdump_function(exe: &Path, name: &str) -> Vec<(u64, String)> {
    let out = run("objdump", &["-d", "--no-show-raw-insn", p(exe)]);
    let header = format!("<{name}>:");
    let mut inside = false;
    let mut v = Vec::new();
    for l in out.lines() {
        if l.ends_with(&header) {
            inside = true;
            continue;
        }
        if inside {
            if l.trim().is_empty() {
                break;
            }
            let (a, rest) = l.trim().split_once(':').unwrap();
            v.push((
                u64::from_str_radix(a.trim(), 16).unwrap(),
                rest.trim().to_string(),
            ));
        }
    }
    assert!(!v.is_empty(), "objdump shows no function {name}");
    v
}

/// Direct jump targets objdump prints: `jle    1270 <work+0x50>` -> (1223, 1270).
fn objdump_direct_jumps(lines: &[(u64, String)]) -> Vec<(u64, String, u64)> {
    lines
        .iter()
        .filter(|(_, t)| t.starts_with('j') && !t.contains('*'))
        .filter_map(|(a, t)| {
            let mut it = t.split_whitespace();
            let m = it.next()?.to_string();
            let target = u64::from_str_radix(it.next()?, 16).ok()?;
            Some((*a, m, target))
        })
        .collect()
}

#[test]
fn functions_match_nm_and_function_at_finds_them() {
    let t = "functions_match_nm_and_function_at_finds_them";
    if !tools(t, &["gcc", "nm"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = gcc(dir.path(), "inline_loop", &["inline_loop.c"], &[]);
    let bin = Binary::open(&exe).unwrap();
    assert!(bin.is_pie() && !bin.is_shared_object());
    assert!(bin.has_symtab() && bin.has_debug_info());
    assert!(bin.warnings().is_empty(), "{:?}", bin.warnings());
    let nm = nm_functions(&exe);
    assert!(nm.contains_key("work") && nm.contains_key("main"));
    for (name, addr) in &nm {
        let f = bin
            .function_by_name(name)
            .or_else(|| bin.function_at(Svma(*addr)))
            .unwrap_or_else(|| panic!("{name} at {addr:#x} not found"));
        assert_eq!(f.start.0, *addr, "{name}");
        assert_eq!(bin.function_at(Svma(*addr)).unwrap().start.0, *addr);
    }
    let work = bin.function_by_name("work").unwrap();
    assert_eq!(work.start.0, nm["work"]);
    // Last byte inside, one past the end outside (unless another function starts there).
    assert_eq!(
        bin.function_at(Svma(work.start.0 + work.size - 1))
            .unwrap()
            .name,
        "work"
    );
    assert!(bin
        .function_at(work.end())
        .is_none_or(|f| f.start == work.end()));
    // sorted
    assert!(bin.functions().windows(2).all(|w| w[0].start < w[1].start));
    // PLT stubs are named like objdump does: `<printf@plt>:` / `<free@plt>:`.
    let od = run("objdump", &["-d", p(&exe)]);
    for stub in ["free@plt", "printf@plt"] {
        if let Some(line) = od.lines().find(|l| l.ends_with(&format!("<{stub}>:"))) {
            let a = u64::from_str_radix(line.split_whitespace().next().unwrap(), 16).unwrap();
            let f = bin.function_at(Svma(a)).unwrap_or_else(|| panic!("{stub}"));
            assert_eq!((f.name.as_str(), f.start.0), (stub, a));
        }
    }
    // The lazy-binding header before the first stub: objdump's `<free@plt-0x10>:`.
    let header = od
        .lines()
        .find(|l| l.ends_with("@plt-0x10>:"))
        .expect("objdump shows the .plt header");
    let a = u64::from_str_radix(header.split_whitespace().next().unwrap(), 16).unwrap();
    let f = bin.function_at(Svma(a)).expect("[plt]");
    assert_eq!((f.name.as_str(), f.start.0, f.size), ("[plt]", a, 16));
}

#[test]
fn ifunc_symbols_are_functions_as_nm_lists_them() {
    let t = "ifunc_symbols_are_functions_as_nm_lists_them";
    if !tools(t, &["gcc", "nm"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = gcc(dir.path(), "ifunc", &["ifunc.c"], &[]);
    // nm: `0000000000001190 i twice` (and the local resolver at the same address).
    let ifuncs: Vec<(String, u64)> = run("nm", &["--defined-only", p(&exe)])
        .lines()
        .filter_map(|l| {
            let t: Vec<&str> = l.split_whitespace().collect();
            (t.len() == 3 && t[1] == "i")
                .then(|| Some((t[2].to_string(), u64::from_str_radix(t[0], 16).ok()?)))
                .flatten()
        })
        .collect();
    assert_eq!(ifuncs.len(), 1, "{ifuncs:?}");
    let (name, addr) = &ifuncs[0];
    assert_eq!(name, "twice");
    let bin = Binary::open(&exe).unwrap();
    assert_eq!(bin.function_by_name("twice").unwrap().start.0, *addr);
    // The global IFUNC wins over the local resolver at the same address, as in perf.
    assert_eq!(bin.function_at(Svma(*addr)).unwrap().name, "twice");
    assert_eq!(
        bin.function_by_name("resolve_twice").unwrap().start.0,
        *addr
    );
}

#[test]
fn aliases_are_named_as_perf_names_them() {
    let t = "aliases_are_named_as_perf_names_them";
    if !tools(t, &["gcc", "nm"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = gcc(dir.path(), "aliases", &["aliases.c"], &[]);
    let nm = nm_functions(&exe);
    let bin = Binary::open(&exe).unwrap();
    // base, __base (global), base_local_longer (local), base_weak_and_longest (weak) at one
    // address: perf's choose_best_symbol drops the weak one, then the local one, then the
    // one with more leading underscores -> `base`.
    let a = nm["base"];
    assert_eq!(nm["__base"], a);
    assert_eq!(nm["base_local_longer"], a);
    assert_eq!(bin.function_at(Svma(a)).unwrap().name, "base");
    // g2 and g2_longer, both local: the longer name.
    let g = nm["g2"];
    assert_eq!(nm["g2_longer"], g);
    assert_eq!(bin.function_at(Svma(g)).unwrap().name, "g2_longer");
    // Every alias stays findable by name.
    for n in ["__base", "base_local_longer", "base_weak_and_longest", "g2"] {
        assert!(bin.function_by_name(n).is_some(), "{n}");
    }
}

#[test]
fn text_labels_are_functions_unless_hidden() {
    let t = "text_labels_are_functions_unless_hidden";
    if !tools(t, &["gcc", "nm"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = gcc(dir.path(), "labels", &["labels.c"], &[]);
    let nm = nm_functions(&exe); // T/t: all three .text labels
    let bin = Binary::open(&exe).unwrap();
    let (entry, after, hidden) = (nm["entry_label"], nm["after_label"], nm["hidden_label"]);
    // Size-0 labels run to the next symbol (as perf's symbols__fixup_end).
    let f = bin.function_at(Svma(entry)).unwrap();
    assert_eq!(
        (f.name.as_str(), f.start.0, f.size),
        ("entry_label", entry, after - entry)
    );
    // The hidden label is not a symbol perf uses: its byte belongs to after_label.
    assert!(bin.function_by_name("hidden_label").is_none());
    assert_eq!(bin.function_at(Svma(hidden)).unwrap().name, "after_label");
    // A label in .data is no code.
    assert!(bin.function_by_name("data_label").is_none());
}

#[test]
fn inline_frames_match_addr2line() {
    let t = "inline_frames_match_addr2line";
    if !tools(t, &["gcc", "addr2line", "objdump"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = gcc(dir.path(), "inline_loop", &["inline_loop.c"], &[]);
    let bin = Binary::open(&exe).unwrap();
    let work = bin.function_by_name("work").unwrap().clone();
    let addrs: Vec<u64> = bin
        .instructions(&work)
        .unwrap()
        .iter()
        .map(|i| i.addr.0)
        .collect();
    let args: Vec<String> = ["-i", "-f", "-e", p(&exe)]
        .iter()
        .map(|s| s.to_string())
        .chain(addrs.iter().map(|a| format!("{a:#x}")))
        .collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    // With several addresses, addr2line -i prints each chain; the chain of one address ends
    // with its outermost function `work` (no inlining across the noinline boundary).
    let out = run("addr2line", &a);
    let mut chains: Vec<Vec<(String, String, Option<u32>)>> = Vec::new();
    let mut cur = Vec::new();
    let lines: Vec<&str> = out.lines().collect();
    for pair in lines.chunks(2) {
        let func = pair[0].to_string();
        let loc = pair.get(1).copied().unwrap_or("??:0");
        let loc = loc.split(" (discriminator").next().unwrap();
        let (file, line) = loc.rsplit_once(':').unwrap();
        let line = line.parse::<u32>().ok().filter(|&l| l != 0);
        let file = file.rsplit('/').next().unwrap().to_string();
        cur.push((func.clone(), file, line));
        if func == "work" {
            chains.push(std::mem::take(&mut cur));
        }
    }
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
        assert_eq!(&ours, chain, "frames at {a:#x}");
        if ours.len() >= 2 {
            assert_eq!(ours[0].0, "scale", "innermost first at {a:#x}");
            inlined += 1;
        }
    }
    assert!(
        inlined >= 3,
        "the helper `scale` should be inlined into work"
    );
}

#[test]
fn cfg_blocks_and_branch_targets_match_objdump() {
    let t = "cfg_blocks_and_branch_targets_match_objdump";
    if !tools(t, &["gcc", "objdump"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = gcc(dir.path(), "inline_loop", &["inline_loop.c"], &[]);
    let bin = Binary::open(&exe).unwrap();
    for name in ["work", "main"] {
        let f = bin.function_by_name(name).unwrap().clone();
        let cfg = bin.cfg(&f).unwrap();
        let od = objdump_function(&exe, name);
        // Every instruction objdump shows is ours (same addresses), minus dropped padding.
        let ours: BTreeSet<u64> = bin
            .instructions(&f)
            .unwrap()
            .iter()
            .map(|i| i.addr.0)
            .collect();
        // objdump shows bytes up to the next symbol; the function ends at its symbol size.
        let od: Vec<(u64, String)> = od
            .into_iter()
            .filter(|(a, _)| f.contains(Svma(*a)))
            .collect();
        let theirs: BTreeSet<u64> = od.iter().map(|(a, _)| *a).collect();
        assert_eq!(ours, theirs, "{name}: instruction addresses");
        let in_blocks: BTreeSet<u64> = cfg
            .blocks
            .iter()
            .flat_map(|b| b.instructions.iter().map(|a| a.0))
            .collect();
        for (a, text) in &od {
            if !in_blocks.contains(a) {
                assert!(
                    text.starts_with("nop")
                        || text.starts_with("xchg")
                        || text.starts_with("cs nop")
                        || text.starts_with("data16"),
                    "{name}: only padding may be dropped, not {a:#x} {text}"
                );
            }
        }
        // Every direct jump target inside the function starts a block, with a matching edge.
        for (from, m, target) in objdump_direct_jumps(&od) {
            let fb = cfg.block_at(Svma(from)).unwrap();
            assert_eq!(cfg.block(fb).last().0, from, "{name}: jump ends its block");
            if f.contains(Svma(target)) {
                let tb = cfg.block_at(Svma(target)).unwrap();
                assert_eq!(
                    cfg.block(tb).start.0,
                    target,
                    "{name}: target starts a block"
                );
                let kind = if m == "jmp" {
                    EdgeKind::Unconditional
                } else {
                    EdgeKind::Taken
                };
                assert!(
                    cfg.successors(fb)
                        .any(|e| e.to == Some(tb) && e.kind == kind),
                    "{name}: edge {from:#x} -> {target:#x} ({kind:?})"
                );
                if m != "jmp" {
                    assert!(cfg.successors(fb).any(|e| e.kind == EdgeKind::FallThrough));
                }
            } else {
                assert!(cfg
                    .successors(fb)
                    .any(|e| e.to.is_none() && e.kind == EdgeKind::Exit));
            }
        }
        // Calls do not end blocks: each call is followed by the next instruction in its block
        // (unless the next is a jump target or the callee never returns).
        for i in bin.instructions(&f).unwrap() {
            if i.flow == Flow::Call {
                let b = cfg.block(cfg.block_at(i.addr).unwrap());
                if b.last() == i.addr {
                    let next = i.end();
                    let noreturn = i.text.contains("exit")
                        || i.text.contains("abort")
                        || i.text.contains("chk_fail");
                    assert!(
                        noreturn
                            || cfg
                                .block_at(next)
                                .is_none_or(|nb| cfg.block(nb).start == next),
                        "{name}: call at {} ends its block",
                        i.addr
                    );
                }
            }
        }
        // Returns have Return edges.
        for (a, text) in &od {
            if text.starts_with("ret") {
                let b = cfg.block_at(Svma(*a)).unwrap();
                assert!(cfg.successors(b).any(|e| e.kind == EdgeKind::Return));
            }
        }
        assert!(!cfg.has_unknown_indirect);
    }
}

#[test]
fn hot_loop_with_inlined_helper_has_two_simple_loops() {
    let t = "hot_loop_with_inlined_helper_has_two_simple_loops";
    if !tools(t, &["gcc", "objdump"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = gcc(dir.path(), "inline_loop", &["inline_loop.c"], &[]);
    let bin = Binary::open(&exe).unwrap();
    let f = bin.function_by_name("work").unwrap().clone();
    let cfg = bin.cfg(&f).unwrap();
    assert_eq!(cfg.loops.len(), 1, "{cfg:#?}");
    let l = &cfg.loops[0];
    assert_eq!(l.depth, 1);
    assert_eq!(l.parent, None);
    // The header dominates every block of its loop.
    let idom = dominators(&cfg);
    for b in &l.blocks {
        let mut x = *b;
        while x != l.header {
            x = idom[x.0 as usize].expect("header dominates the loop");
        }
    }
    // `if (x & 1)` inside the loop: two elementary cycles through the header, like the
    // hmmer loop of seed 000 Fig. 1. Oracle: objdump shows the loop's two back branches
    // (`je` to the even path, `jne` back to the header) -> the two cycles.
    let sl = simple_loops(&cfg, l, 100).unwrap();
    assert_eq!(sl.len(), 2, "{sl:?}");
    for s in &sl {
        assert_eq!(s.blocks[0], l.header);
        for w in s.blocks.windows(2) {
            assert!(cfg.successors(w[0]).any(|e| e.to == Some(w[1])));
        }
        let last = *s.blocks.last().unwrap();
        assert!(cfg.successors(last).any(|e| e.to == Some(l.header)));
        let set: BTreeSet<_> = s.blocks.iter().collect();
        assert_eq!(set.len(), s.blocks.len(), "elementary");
    }
    // The loop contains the load `mov (%rdi),%rcx` that objdump shows in work.
    let od = objdump_function(&exe, "work");
    let load = od
        .iter()
        .find(|(_, t)| t.starts_with("mov") && t.contains("(%rdi),"))
        .unwrap()
        .0;
    let lb = cfg.block_at(Svma(load)).unwrap();
    assert!(l.blocks.contains(&lb));
    let ins = bin.instructions(&f).unwrap();
    let li = ins.iter().find(|i| i.addr.0 == load).unwrap();
    assert!(li.memory && li.loads && !li.stores);
}

/// Jump-table targets read independently from `objdump -s` at the table address objdump
/// prints, for the PIC form (`lea T(%rip)`; i32 entries relative to T) and the absolute form
/// (`jmp *T(,%rdi,8)`; u64 entries).
fn check_jump_table(exe: &Path) {
    let bin = Binary::open(exe).unwrap();
    let f = bin.function_by_name("dispatch").unwrap().clone();
    let od = objdump_function(exe, "dispatch");
    // The bound: `cmp $0x7,%edi` -> 8 entries.
    let cmp = od
        .iter()
        .find(|(_, t)| t.starts_with("cmp") && t.contains("$0x"))
        .unwrap();
    let n = u64::from_str_radix(
        cmp.1
            .split("$0x")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap(),
        16,
    )
    .unwrap()
        + 1;
    let (jmp_addr, jmp_text) = od
        .iter()
        .find(|(_, t)| t.contains("jmp") && t.contains('*'))
        .unwrap()
        .clone();
    let (table, entry_size) = if let Some(lea) = od
        .iter()
        .find(|(_, t)| t.starts_with("lea") && t.contains("(%rip)"))
    {
        (
            u64::from_str_radix(
                lea.1
                    .rsplit("# ")
                    .next()
                    .unwrap()
                    .split_whitespace()
                    .next()
                    .unwrap(),
                16,
            )
            .unwrap(),
            4,
        )
    } else {
        // jmp    *0x402008(,%rdi,8)
        let s = jmp_text.split('*').nth(1).unwrap();
        (
            u64::from_str_radix(s.trim_start_matches("0x").split('(').next().unwrap(), 16).unwrap(),
            8,
        )
    };
    let dump = run(
        "objdump",
        &[
            "-s",
            &format!("--start-address={table:#x}"),
            &format!("--stop-address={:#x}", table + n * entry_size),
            p(exe),
        ],
    );
    let mut bytes = Vec::new();
    for l in dump.lines().filter(|l| l.starts_with(' ')) {
        let mut it = l.split_whitespace();
        it.next();
        for w in it.take(4) {
            if w.len() == 8 && w.chars().all(|c| c.is_ascii_hexdigit()) {
                for k in 0..4 {
                    bytes.push(u8::from_str_radix(&w[2 * k..2 * k + 2], 16).unwrap());
                }
            }
        }
    }
    assert_eq!(bytes.len() as u64, n * entry_size, "{dump}");
    let expected: Vec<u64> = bytes
        .chunks(entry_size as usize)
        .map(|c| {
            if entry_size == 4 {
                table.wrapping_add(i32::from_le_bytes(c.try_into().unwrap()) as i64 as u64)
            } else {
                u64::from_le_bytes(c.try_into().unwrap())
            }
        })
        .collect();
    let jts = bin.jump_tables(&f).unwrap();
    assert_eq!(jts.len(), 1);
    assert_eq!(jts[0].jump.0, jmp_addr);
    assert_eq!(jts[0].table.0, table);
    assert_eq!(jts[0].entries, n);
    assert_eq!(
        jts[0].targets.iter().map(|t| t.0).collect::<Vec<_>>(),
        expected
    );
    // Every target is an instruction objdump shows in dispatch.
    for t in &expected {
        assert!(od.iter().any(|(a, _)| a == t), "target {t:#x}");
    }
    let cfg = bin.cfg(&f).unwrap();
    assert!(!cfg.has_unknown_indirect);
    let jb = cfg.block_at(Svma(jmp_addr)).unwrap();
    let got: BTreeSet<u64> = cfg
        .successors(jb)
        .map(|e| {
            assert_eq!(e.kind, EdgeKind::IndirectResolved);
            cfg.block(e.to.unwrap()).start.0
        })
        .collect();
    assert_eq!(got, expected.iter().copied().collect::<BTreeSet<_>>());
    // `ja` to dispatch.cold leaves the function.
    let cb = cfg.block_at(Svma(cmp.0)).unwrap();
    assert!(cfg
        .successors(cb)
        .any(|e| e.kind == EdgeKind::Exit && e.to.is_none()));
}

#[test]
fn switch_jump_table_pie() {
    let t = "switch_jump_table_pie";
    if !tools(t, &["gcc", "objdump"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = gcc(
        dir.path(),
        "switch_pie",
        &["switch_table.c"],
        &["-fPIE", "-pie"],
    );
    check_jump_table(&exe);
}

#[test]
fn switch_jump_table_non_pie_absolute() {
    let t = "switch_jump_table_non_pie_absolute";
    if !tools(t, &["gcc", "objdump"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = gcc(
        dir.path(),
        "switch_nopie",
        &["switch_table.c"],
        &["-fno-pie", "-no-pie"],
    );
    let bin = Binary::open(&exe).unwrap();
    assert!(!bin.is_pie());
    check_jump_table(&exe);
}

#[test]
fn unresolvable_indirect_jump_is_marked_unknown() {
    let t = "unresolvable_indirect_jump_is_marked_unknown";
    if !tools(t, &["gcc"]) {
        return;
    }
    // A computed goto through a table in a register has no bound check: never guessed.
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("goto.c");
    std::fs::write(
        &c,
        "__attribute__((noinline)) int g(void **t, int i, int x) {\n goto *t[i];\n a: return x + 1;\n b: return x * 2;\n}\nint main(void) { static void *t[2]; return g(t, 0, 1); }\n",
    )
    .unwrap();
    let exe = dir.path().join("goto");
    run("gcc", &["-O2", "-g", "-o", p(&exe), p(&c)]);
    let bin = Binary::open(&exe).unwrap();
    let f = bin.function_by_name("g").unwrap().clone();
    let cfg = bin.cfg(&f).unwrap();
    let ins = bin.instructions(&f).unwrap();
    if ins.iter().any(|i| i.flow == Flow::IndirectJump) {
        assert!(cfg.has_unknown_indirect);
        assert!(cfg
            .edges
            .iter()
            .any(|e| e.kind == EdgeKind::IndirectUnknown && e.to.is_none()));
        assert!(!cfg
            .edges
            .iter()
            .any(|e| e.kind == EdgeKind::IndirectResolved));
    } else {
        proftrust_testkit::skip!("{t}: gcc compiled the computed goto without an indirect jump");
    }
}

#[test]
fn recursion_calls_do_not_end_blocks() {
    let t = "recursion_calls_do_not_end_blocks";
    if !tools(t, &["gcc", "objdump"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = gcc(dir.path(), "recursion", &["recursion.c"], &[]);
    let bin = Binary::open(&exe).unwrap();
    let f = bin.function_by_name("fib").unwrap().clone();
    let cfg = bin.cfg(&f).unwrap();
    let od = objdump_function(&exe, "fib");
    // objdump: `call   1190 <fib>` -> our call target is fib's start.
    let calls: Vec<u64> = od
        .iter()
        .filter(|(_, t)| t.starts_with("call") && t.ends_with("<fib>"))
        .map(|(a, _)| *a)
        .collect();
    assert!(!calls.is_empty(), "gcc keeps at least one recursive call");
    let ins = bin.instructions(&f).unwrap();
    for a in &calls {
        let i = ins.iter().find(|i| i.addr.0 == *a).unwrap();
        assert_eq!(i.flow, Flow::Call);
        assert_eq!(i.target, Some(f.start));
        let b = cfg.block(cfg.block_at(i.addr).unwrap());
        // Not the last instruction of its block unless the next one is a jump target.
        if b.last() == i.addr {
            let next = i.end();
            let targeted = objdump_direct_jumps(&od)
                .iter()
                .any(|(_, _, t)| *t == next.0);
            assert!(targeted, "call at {a:#x} ended its block");
        }
    }
    // Natural loops (gcc turns one recursive call into a loop) are consistent: header
    // dominates, depth >= 1, every latch has an edge to the header.
    let idom = dominators(&cfg);
    for l in &cfg.loops {
        for b in &l.blocks {
            let mut x = *b;
            while x != l.header {
                x = idom[x.0 as usize].unwrap();
            }
        }
        for la in &l.latches {
            assert!(cfg.successors(*la).any(|e| e.to == Some(l.header)));
        }
        for s in simple_loops(&cfg, l, 1000).unwrap() {
            assert_eq!(s.blocks[0], l.header);
        }
    }
}

fn readelf_build_id(path: &Path) -> Option<String> {
    run("readelf", &["-n", p(path)]).lines().find_map(|l| {
        l.trim()
            .strip_prefix("Build ID: ")
            .map(|s| s.trim().to_string())
    })
}

#[test]
fn shared_library_and_symbolizer() {
    let t = "shared_library_and_symbolizer";
    if !tools(t, &["gcc", "nm", "readelf"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let so = gcc(
        dir.path(),
        "libshlib.so",
        &["shlib.c"],
        &["-shared", "-fPIC"],
    );
    let exe = dir.path().join("uses_shlib");
    run(
        "gcc",
        &[
            "-O2",
            "-g",
            "-o",
            p(&exe),
            p(&src("uses_shlib.c")),
            "-L",
            p(dir.path()),
            "-lshlib",
        ],
    );
    let lib = Binary::open(&so).unwrap();
    assert!(lib.is_pie() && lib.is_shared_object());
    let id = readelf_build_id(&so).expect("gcc on Debian emits build-ids");
    assert_eq!(lib.build_id().unwrap().to_hex(), id);
    let nm = nm_functions(&so);
    let sum = lib.function_by_name("shlib_sum").unwrap();
    assert_eq!(sum.start.0, nm["shlib_sum"]);
    let cfg = lib.cfg(sum).unwrap();
    assert_eq!(cfg.loops.len(), 1);
    // The executable calls it through the PLT: objdump names the stub `shlib_sum@plt`.
    let bin = Binary::open(&exe).unwrap();
    let od = run("objdump", &["-d", p(&exe)]);
    let stub = od
        .lines()
        .find(|l| l.ends_with("<shlib_sum@plt>:"))
        .map(|l| u64::from_str_radix(l.split_whitespace().next().unwrap(), 16).unwrap());
    if let Some(a) = stub {
        assert_eq!(bin.function_at(Svma(a)).unwrap().name, "shlib_sum@plt");
    }

    // Symbolizer: module by own path with matching build-id; a renamed copy matched by
    // build-id through `extra`; a missing module falls back to name+offset.
    let mut mt = ModuleTable::default();
    let mut m = Module::new(p(&so));
    m.build_id = Some(BuildId::from_hex(&id).unwrap());
    m.load_bias = 0x7f00_0000_0000;
    let mi = mt.intern(m);
    let mut gone = Module::new("/nonexistent/libgone.so");
    gone.build_id = Some(BuildId(vec![1, 2, 3, 4]));
    let gi = mt.intern(gone);
    let mut renamed = Module::new("/elsewhere/libother.so");
    renamed.build_id = Some(BuildId::from_hex(&id).unwrap());
    let ri = mt.intern(renamed);
    let copy = dir.path().join("copy-of-lib.so");
    std::fs::copy(&so, &copy).unwrap();
    let s = Symbolizer::new(&mt, std::slice::from_ref(&copy));
    let inside = Location::new(mi, nm["shlib_sum"] + 1);
    assert_eq!(s.function_name(inside), "shlib_sum");
    assert_eq!(s.function(inside).unwrap().start.0, nm["shlib_sum"]);
    assert_eq!(
        s.function_name(Location::new(gi, 0x1234)),
        "libgone.so+0x1234"
    );
    assert_eq!(s.function_name(Location::unmapped(0xdead)), "[unknown]");
    assert_eq!(
        s.function_name(Location::new(ModuleIdx(99), 1)),
        "[unknown]"
    );
    assert_eq!(s.binary(ri).unwrap().path(), copy.as_path());
    assert_eq!(
        s.function_name(Location::new(ri, nm["shlib_sum"])),
        "shlib_sum"
    );
    let w = s.warnings();
    assert!(
        w.iter()
            .any(|x| x.contains("/nonexistent/libgone.so not found")),
        "{w:?}"
    );

    // Build-id mismatch on disk: not used, warned.
    let mut mt2 = ModuleTable::default();
    let mut bad = Module::new(p(&so));
    bad.build_id = Some(BuildId(vec![0xaa; 20]));
    let bi = mt2.intern(bad);
    let s2 = Symbolizer::new(&mt2, &[]);
    assert!(s2.binary(bi).is_none());
    assert!(
        s2.warnings().iter().any(|x| x.contains("build-id")),
        "{:?}",
        s2.warnings()
    );
    assert_eq!(
        s2.function_name(Location::new(bi, 0x10)),
        "libshlib.so+0x10"
    );
}

#[test]
fn cpp_and_rust_style_names_are_demangled_like_nm_c() {
    let t = "cpp_and_rust_style_names_are_demangled_like_nm_c";
    if !tools(t, &["g++", "nm"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("x.cpp");
    std::fs::write(
        &c,
        "namespace ns { struct K { __attribute__((noinline)) int f(int a) const { return a * 3; } }; }\n\
         __attribute__((noinline)) int g(double d, const char *s) { return (int)d + s[0]; }\n\
         int main(int argc, char **argv) { ns::K k; return k.f(argc) + g(1.5, argv[0]); }\n",
    )
    .unwrap();
    let exe = dir.path().join("x");
    run("g++", &["-O2", "-g", "-o", p(&exe), p(&c)]);
    let bin = Binary::open(&exe).unwrap();
    let raw = nm_functions(&exe);
    let demangled: BTreeMap<u64, String> = run("nm", &["-C", "--defined-only", p(&exe)])
        .lines()
        .filter_map(|l| {
            let (a, rest) = l.split_once(' ')?;
            let (_, name) = rest.split_once(' ')?;
            Some((u64::from_str_radix(a, 16).ok()?, name.to_string()))
        })
        .collect();
    let mut checked = 0;
    for (name, addr) in raw.iter().filter(|(n, _)| n.starts_with("_Z")) {
        let f = bin.function_by_name(name).unwrap();
        assert_eq!(&f.raw_name, name);
        assert_eq!(Some(&f.name), demangled.get(addr), "{name}");
        assert!(bin.function_by_name(&f.name).is_some());
        checked += 1;
    }
    assert!(checked >= 2);
    // gcc may emit the member as an IPA clone: `ns::K::f(int) const [clone .isra.0]`.
    assert!(bin
        .functions()
        .iter()
        .any(|f| f.name.starts_with("ns::K::f(int) const")));
    // Inline frames of C++ functions are demangled too.
    let f = bin.function_by_name("g(double, char const*)").unwrap();
    assert_eq!(
        bin.frames(f.start).last().unwrap().function,
        "g(double, char const*)"
    );
}

#[test]
fn bad_inputs_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let e = Binary::open(&empty).unwrap_err();
    assert!(matches!(e, BinaryError::Empty { .. }));
    assert!(e.to_string().contains(p(&empty)) && e.to_string().contains("empty"));

    let text = dir.path().join("notes.txt");
    std::fs::write(&text, b"hello, this is not a program\n").unwrap();
    let e = Binary::open(&text).unwrap_err();
    assert!(matches!(e, BinaryError::NotElf { .. }), "{e}");
    assert!(e.to_string().contains("not an ELF file") && e.to_string().contains("text file"));

    let missing = dir.path().join("missing");
    let e = Binary::open(&missing).unwrap_err();
    assert!(e.to_string().contains(p(&missing)));

    if !tools("bad_inputs_give_clear_errors (ELF part)", &["gcc"]) {
        return;
    }
    let exe = gcc(dir.path(), "rec", &["recursion.c"], &[]);
    let data = std::fs::read(&exe).unwrap();
    for cut in [10usize, 40, 100, data.len() / 2, data.len() - 1] {
        let tr = dir.path().join(format!("trunc{cut}"));
        std::fs::write(&tr, &data[..cut]).unwrap();
        let e = Binary::open(&tr).unwrap_err();
        assert!(matches!(e, BinaryError::Truncated { .. }), "cut {cut}: {e}");
        assert!(e.to_string().contains(p(&tr)) && e.to_string().contains("truncated"));
    }
    // Another architecture: patch e_machine to AArch64. Its symbols are read; decoding is
    // refused in one line (tests/foreign.rs reads real cross-compiled binaries).
    let mut arm = data.clone();
    arm[0x12] = 183;
    arm[0x13] = 0;
    let ap = dir.path().join("arm");
    std::fs::write(&ap, &arm).unwrap();
    let b = Binary::open(&ap).unwrap();
    assert_eq!(b.machine(), 183);
    let main = b.function_by_name("main").unwrap();
    let e = b.cfg(main).unwrap_err();
    assert!(matches!(e, BinaryError::NotX86_64 { .. }));
    assert!(e.to_string().contains("AArch64"), "{e}");
    // A 64-bit file patched to say class 32: whatever it reads as, never a panic; an
    // unknown class is a malformed identification.
    let mut c32 = data.clone();
    c32[4] = 1;
    let cp = dir.path().join("elf32");
    std::fs::write(&cp, &c32).unwrap();
    let _ = Binary::open(&cp);
    c32[4] = 7;
    std::fs::write(&cp, &c32).unwrap();
    let e = Binary::open(&cp).unwrap_err();
    assert!(matches!(e, BinaryError::Malformed { .. }), "{e}");
    assert!(e.to_string().contains("ELF class 7"), "{e}");
    // Garbage after a valid header: never a panic.
    for seed in 0..64u64 {
        let mut d = data.clone();
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        for _ in 0..32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x % d.len() as u64) as usize;
            d[i] = (x >> 32) as u8;
        }
        if let Ok(b) = Binary::from_bytes(&exe, d) {
            for f in b.functions().iter().take(50) {
                let _ = b.cfg(f);
                let _ = b.frames(f.start);
            }
        }
    }
}

#[test]
fn stripped_binaries_degrade_with_warnings() {
    let t = "stripped_binaries_degrade_with_warnings";
    if !tools(t, &["gcc", "strip", "nm"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = gcc(dir.path(), "inline_loop", &["inline_loop.c"], &[]);
    let nm = nm_functions(&exe);
    // No debug info: symbols still work, frames have no lines, a warning says why.
    let nodbg = dir.path().join("nodbg");
    run("strip", &["--strip-debug", "-o", p(&nodbg), p(&exe)]);
    let b = Binary::open(&nodbg).unwrap();
    assert!(!b.has_debug_info());
    assert!(
        b.warnings()
            .iter()
            .any(|w| w.contains("no debug info") && w.contains(p(&nodbg)) && w.contains("-g")),
        "{:?}",
        b.warnings()
    );
    let work = b.function_by_name("work").unwrap().clone();
    assert_eq!(work.start.0, nm["work"]);
    let fr = b.frames(Svma(work.start.0 + 4));
    assert_eq!(fr.len(), 1);
    assert_eq!(
        (fr[0].function.as_str(), fr[0].file.as_ref(), fr[0].line),
        ("work", None, None)
    );
    assert_eq!(b.cfg(&work).unwrap().loops.len(), 1);
    // Fully stripped: no .symtab, a PIE exports no functions; the PLT stubs are named and
    // every other function with an FDE is recovered as `stripped!sub_ADDR`.
    let all = dir.path().join("stripped");
    run("strip", &["--strip-all", "-o", p(&all), p(&exe)]);
    let b = Binary::open(&all).unwrap();
    assert!(!b.has_symtab());
    assert!(
        b.warnings()
            .iter()
            .any(|w| w.contains("no symbol table") && w.contains("stripped!sub_ADDR")),
        "{:?}",
        b.warnings()
    );
    let work = b.function_at(Svma(nm["work"])).expect("work recovered");
    assert_eq!(work.name, format!("stripped!sub_{:x}", nm["work"]));
    assert_eq!(work.origin, FunctionOrigin::Recovered);
    let mut mt = ModuleTable::default();
    let mi = mt.intern(Module::new(p(&all)));
    let s = Symbolizer::new(&mt, &[]);
    let at = Location::new(mi, nm["work"] + 4);
    assert_eq!(
        s.function_name(at),
        format!("stripped!sub_{:x}", nm["work"])
    );
    assert_eq!(s.attribution(at), Attribution::Recovered);
    assert!(!s.warnings().is_empty());
    // Without unwind tables there is nothing to recover: the address stays unattributed.
    let bare = gcc(
        dir.path(),
        "bare",
        &["inline_loop.c"],
        &["-fno-asynchronous-unwind-tables", "-fno-exceptions"],
    );
    let nm_bare = nm_functions(&bare);
    let bare_stripped = dir.path().join("bare_stripped");
    run("strip", &["--strip-all", "-o", p(&bare_stripped), p(&bare)]);
    let mut mt = ModuleTable::default();
    let mi = mt.intern(Module::new(p(&bare_stripped)));
    let s = Symbolizer::new(&mt, &[]);
    let at = Location::new(mi, nm_bare["work"]);
    assert_eq!(
        s.function_name(at),
        format!("bare_stripped+{:#x}", nm_bare["work"])
    );
    assert_eq!(s.attribution(at), Attribution::Unattributed);
    let per = s.attribution_by_module([(at, 3), (Location::unmapped(0x10), 1)]);
    assert_eq!(per.len(), 2);
    assert_eq!(
        (per[0].module.as_str(), per[0].samples, per[0].unattributed),
        ("bare_stripped", 3, 3)
    );
    assert_eq!(
        (per[1].module.as_str(), per[1].unattributed),
        ("[unknown]", 1)
    );
}

/// `nm -S --defined-only` sized code symbols: (start, size, name).
fn nm_sized(exe: &Path) -> Vec<(u64, u64, String)> {
    run("nm", &["-S", "--defined-only", p(exe)])
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() != 4 || !matches!(f[2], "T" | "t") {
                return None;
            }
            Some((
                u64::from_str_radix(f[0], 16).ok()?,
                u64::from_str_radix(f[1], 16).ok()?,
                f[3].to_string(),
            ))
        })
        .collect()
}

/// The FDE ranges `readelf --debug-dump=frames` prints (`pc=START..END`).
fn readelf_fdes(exe: &Path) -> BTreeSet<(u64, u64)> {
    run("readelf", &["--debug-dump=frames", p(exe)])
        .lines()
        .filter(|l| l.contains(" FDE "))
        .filter_map(|l| {
            let pc = l.split("pc=").nth(1)?;
            let (a, b) = pc.split_once("..")?;
            Some((
                u64::from_str_radix(a.trim(), 16).ok()?,
                u64::from_str_radix(b.trim(), 16).ok()?,
            ))
        })
        .collect()
}

#[test]
fn stripped_functions_are_recovered_from_fdes_as_the_symbols_had_them() {
    let t = "stripped_functions_are_recovered_from_fdes_as_the_symbols_had_them";
    if !tools(t, &["gcc", "strip", "nm", "readelf"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = gcc(dir.path(), "prog", &["stripped.c"], &[]);
    let all = dir.path().join("prog.stripped");
    run("strip", &["--strip-all", "-o", p(&all), p(&exe)]);
    let full = Binary::open(&exe).unwrap();
    let b = Binary::open(&all).unwrap();
    let fdes = readelf_fdes(&exe);
    let syms = nm_sized(&exe);
    // Oracle 1: every static function (mix, complain, check, check.cold, sum) and main has
    // an FDE of exactly its nm range; in the stripped copy it is a recovered function of
    // that range, named prog.stripped!sub_ADDR.
    let mut checked = 0;
    for (start, size, name) in &syms {
        if !fdes.contains(&(*start, start + size)) {
            continue;
        }
        let f = b
            .function_at(Svma(*start))
            .unwrap_or_else(|| panic!("{name}"));
        assert_eq!((f.start.0, f.size), (*start, *size), "{name}");
        assert_eq!(f.name, format!("prog.stripped!sub_{start:x}"), "{name}");
        assert_eq!(f.origin, FunctionOrigin::Recovered);
        let g = full.function_at(Svma(*start)).unwrap();
        assert_eq!(
            (g.name.as_str(), g.origin),
            (name.as_str(), FunctionOrigin::SymbolTable)
        );
        checked += 1;
    }
    for want in ["mix", "complain", "check", "check.cold", "sum", "main"] {
        assert!(syms.iter().any(|s| s.2 == want), "nm lists {want}");
    }
    assert!(checked >= 6, "{checked} functions checked");
    assert!(b.recovered_functions() >= 6, "{}", b.recovered_functions());
    // Oracle 2: every FDE readelf lists starts a function of the stripped copy (the .plt
    // FDEs start at the PLT stubs the stripped copy names too).
    for (lo, _) in &fdes {
        let f = b
            .function_at(Svma(*lo))
            .unwrap_or_else(|| panic!("FDE at {lo:#x}"));
        assert_eq!(f.start.0, *lo);
    }
    // The partition of the code into functions: byte by byte over .text, the -g build and
    // the stripped copy agree wherever an FDE covers the byte.
    let (lo, hi) = (
        syms.iter().map(|s| s.0).min().unwrap(),
        syms.iter().map(|s| s.0 + s.1).max().unwrap(),
    );
    let (mut same, mut covered) = (0u64, 0u64);
    for a in lo..hi {
        if !fdes.iter().any(|&(s, e)| a >= s && a < e) {
            continue;
        }
        covered += 1;
        let r = |x: Option<&proftrust_binary::Function>| x.map(|f| (f.start, f.size));
        if r(full.function_at(Svma(a))) == r(b.function_at(Svma(a))) {
            same += 1;
        }
    }
    assert!(covered > 200, "{covered}");
    assert_eq!(
        same, covered,
        "bytes in the same function range in both builds"
    );
}

#[test]
fn mini_debug_info_names_the_functions_dynsym_leaves_out() {
    let t = "mini_debug_info_names_the_functions_dynsym_leaves_out";
    if !tools(t, &["gcc", "strip", "nm", "objcopy", "xz"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = gcc(dir.path(), "prog", &["stripped.c"], &[]);
    // The GDB manual's recipe ("MiniDebugInfo"): the function symbols not in .dynsym, in
    // a debug-only copy with .symtab kept, xz-compressed into .gnu_debugdata.
    let dynsyms: BTreeSet<String> = run("nm", &["-D", "--defined-only", "--format=posix", p(&exe)])
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    let keep: Vec<String> = run("nm", &["--defined-only", "--format=posix", p(&exe)])
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 2 && matches!(f[1], "T" | "t") && !dynsyms.contains(f[0]))
                .then(|| f[0].to_string())
        })
        .collect();
    let keep_file = dir.path().join("keep_symbols");
    std::fs::write(&keep_file, keep.join("\n") + "\n").unwrap();
    let mini = dir.path().join("mini_debuginfo");
    run("objcopy", &["--only-keep-debug", p(&exe), p(&mini)]);
    run(
        "objcopy",
        &[
            "-S",
            "--remove-section",
            ".comment",
            &format!("--keep-symbols={}", p(&keep_file)),
            p(&mini),
        ],
    );
    run("xz", &["-f", p(&mini)]);
    let prog = dir.path().join("prog.mini");
    run("strip", &["--strip-all", "-o", p(&prog), p(&exe)]);
    run(
        "objcopy",
        &[
            "--add-section",
            &format!(".gnu_debugdata={}.xz", p(&mini)),
            p(&prog),
        ],
    );
    let b = Binary::open(&prog).unwrap();
    assert!(b.has_mini_debug_info());
    assert!(!b.has_symtab());
    // Oracle: nm of the unstripped build; each kept function is named again, at its
    // address, with its size.
    for (start, size, name) in nm_sized(&exe) {
        if !keep.contains(&name) {
            continue;
        }
        let f = b
            .function_by_name(&name)
            .unwrap_or_else(|| panic!("{name}"));
        assert_eq!((f.start.0, f.size), (start, size), "{name}");
        assert_eq!(f.origin, FunctionOrigin::MiniDebugInfo, "{name}");
    }
    for want in ["mix", "sum", "check.cold", "main"] {
        assert!(b.function_by_name(want).is_some(), "{want}");
    }
    // A corrupt section is a warning, not an error: the FDEs still name the ranges.
    let bad = dir.path().join("prog.badmini");
    let junk = dir.path().join("junk");
    std::fs::write(&junk, b"\xfd7zXZ\0 not really").unwrap();
    run("strip", &["--strip-all", "-o", p(&bad), p(&exe)]);
    run(
        "objcopy",
        &[
            "--add-section",
            &format!(".gnu_debugdata={}", p(&junk)),
            p(&bad),
        ],
    );
    let b = Binary::open(&bad).unwrap();
    assert!(!b.has_mini_debug_info());
    assert!(
        b.warnings().iter().any(|w| w.contains("MiniDebugInfo")),
        "{:?}",
        b.warnings()
    );
    let sum = nm_functions(&exe)["sum"];
    assert_eq!(
        b.function_at(Svma(sum)).unwrap().origin,
        FunctionOrigin::Recovered
    );
}

#[test]
fn separate_debug_files_by_debuglink_and_build_id() {
    let t = "separate_debug_files_by_debuglink_and_build_id";
    if !tools(t, &["gcc", "objcopy", "strip", "addr2line"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = gcc(dir.path(), "inline_loop", &["inline_loop.c"], &[]);
    let full = Binary::open(&exe).unwrap();
    let work = full.function_by_name("work").unwrap().clone();
    let probe: Vec<Svma> = full
        .instructions(&work)
        .unwrap()
        .iter()
        .map(|i| i.addr)
        .collect();
    let expected: Vec<_> = probe.iter().map(|a| full.frames(*a)).collect();

    // .gnu_debuglink next to the binary.
    let sub = dir.path().join("link");
    std::fs::create_dir(&sub).unwrap();
    let dbg = sub.join("prog.debug");
    let prog = sub.join("prog");
    run("objcopy", &["--only-keep-debug", p(&exe), p(&dbg)]);
    run("strip", &["--strip-debug", "-o", p(&prog), p(&exe)]);
    run(
        "objcopy",
        &[&format!("--add-gnu-debuglink={}", p(&dbg)), p(&prog)],
    );
    let opts = OpenOptions {
        debug_dirs: vec![],
        ..Default::default()
    };
    let b = Binary::open_with(&prog, &opts).unwrap();
    assert!(b.has_debug_info(), "{:?}", b.warnings());
    assert_eq!(b.debug_file(), Some(dbg.as_path()));
    assert!(b.warnings().is_empty(), "{:?}", b.warnings());
    let got: Vec<_> = probe.iter().map(|a| b.frames(*a)).collect();
    assert_eq!(got, expected);
    // addr2line on the stripped file agrees with our frames from the debug file (oracle).
    let a2l = run(
        "addr2line",
        &["-f", "-e", p(&dbg), &format!("{:#x}", work.start.0)],
    );
    assert_eq!(a2l.lines().next().unwrap(), "work");

    // Fully stripped binary: function symbols come from the debug file's .symtab.
    let prog2 = sub.join("prog2");
    run("strip", &["--strip-all", "-o", p(&prog2), p(&exe)]);
    run(
        "objcopy",
        &[&format!("--add-gnu-debuglink={}", p(&dbg)), p(&prog2)],
    );
    let b2 = Binary::open_with(&prog2, &opts).unwrap();
    assert!(b2.has_symtab(), "{:?}", b2.warnings());
    assert_eq!(b2.function_by_name("work").unwrap().start, work.start);
    assert_eq!(b2.frames(probe[3]), expected[3]);

    // A debug file whose CRC does not match is refused.
    std::fs::write(&dbg, b"not the debug file").unwrap();
    let b = Binary::open_with(&prog, &opts).unwrap();
    assert!(!b.has_debug_info());

    // Build-id directory.
    let id = full.build_id().unwrap().to_hex();
    let root = dir.path().join("debugroot");
    let bid_dir = root.join(".build-id").join(&id[..2]);
    std::fs::create_dir_all(&bid_dir).unwrap();
    let bid_file = bid_dir.join(format!("{}.debug", &id[2..]));
    run("objcopy", &["--only-keep-debug", p(&exe), p(&bid_file)]);
    let plain = dir.path().join("plain");
    run("strip", &["--strip-debug", "-o", p(&plain), p(&exe)]);
    let opts = OpenOptions {
        debug_dirs: vec![root.clone()],
        ..Default::default()
    };
    let b = Binary::open_with(&plain, &opts).unwrap();
    assert_eq!(b.debug_file(), Some(bid_file.as_path()));
    let got: Vec<_> = probe.iter().map(|a| b.frames(*a)).collect();
    assert_eq!(got, expected);
}

#[test]
fn calls_to_noreturn_functions_end_their_block() {
    let t = "calls_to_noreturn_functions_end_their_block";
    if !tools(t, &["gcc", "objdump"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("nr.c");
    std::fs::write(
        &c,
        "#include <stdlib.h>\n#include <stdio.h>\n\
         __attribute__((noinline)) long check(long x) {\n if (x < 0) { puts(\"negative\"); exit(3); }\n if (x > 1000) abort();\n return x * 2;\n}\n\
         int main(int argc, char **argv) { (void)argv; return (int)check(argc); }\n",
    )
    .unwrap();
    let exe = dir.path().join("nr");
    run("gcc", &["-O2", "-g", "-o", p(&exe), p(&c)]);
    let bin = Binary::open(&exe).unwrap();
    let f = bin.function_by_name("check").unwrap().clone();
    let cfg = bin.cfg(&f).unwrap();
    // Oracle: objdump's `call ... <exit@plt>` / `<abort@plt>` lines.
    let od = objdump_function(&exe, "check");
    let calls: Vec<u64> = od
        .iter()
        .filter(|(_, t)| {
            t.starts_with("call") && (t.contains("<exit@plt>") || t.contains("<abort@plt>"))
        })
        .map(|(a, _)| *a)
        .collect();
    assert!(!calls.is_empty(), "{od:?}");
    for a in calls {
        let b = cfg.block_at(Svma(a)).unwrap();
        assert_eq!(cfg.block(b).last().0, a, "the noreturn call ends its block");
        assert_eq!(cfg.successors(b).count(), 0, "no successor after {a:#x}");
    }
}

/// Aliases and versioned dynamic symbols are found by name: a PLT stub `printf@plt` names
/// `printf`, which libc exports as an alias of `_IO_printf`; `exp@plt` names `exp`, which
/// libm exports as `exp@@GLIBC_2.29` (next to the old `exp@GLIBC_2.2.5`). Oracle:
/// `readelf --dyn-syms` on the same files.
#[test]
fn versioned_and_alias_names() {
    let dynsym_addr = |lib: &std::path::Path, sym: &str| -> Option<u64> {
        let out = std::process::Command::new("readelf")
            .args(["--dyn-syms", "-W"])
            .arg(lib)
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .find(|l| l.split_whitespace().nth(7) == Some(sym))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|a| u64::from_str_radix(a, 16).ok())
    };
    for (lib, name, versioned) in [
        (
            "/lib/x86_64-linux-gnu/libc.so.6",
            "printf",
            "printf@@GLIBC_2.2.5",
        ),
        ("/lib/x86_64-linux-gnu/libm.so.6", "exp", "exp@@GLIBC_2.29"),
    ] {
        let lib = std::path::Path::new(lib);
        let Some(want) = dynsym_addr(lib, versioned) else {
            proftrust_testkit::skip!(
                "versioned_and_alias_names: no {versioned} in {} (or no readelf)",
                lib.display()
            );
            continue;
        };
        let bin = proftrust_binary::Binary::open(lib).unwrap();
        let f = bin
            .function_by_name(name)
            .unwrap_or_else(|| panic!("{name} by its plain name in {}", lib.display()));
        assert_eq!(f.start.0, want, "{name} in {}", lib.display());
    }
}

/// `direct_call_before` and `frame_established` against `objdump -d` of a program built at
/// -O0 with CET (`endbr64; push %rbp; mov %rsp,%rbp` in every function) and at -O2
/// (frameless leaf): the return address after each `call` names its target, or nothing for
/// an indirect call; a frame exists after the prologue and before `ret`.
#[test]
fn call_sites_and_frame_prologues_match_objdump() {
    if !tools(
        "call_sites_and_frame_prologues_match_objdump",
        &["gcc", "objdump"],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = gcc(
        dir.path(),
        "frames",
        &["frames.c"],
        &["-O0", "-fno-omit-frame-pointer", "-fcf-protection=full"],
    );
    let b = Binary::open(&exe).unwrap();
    let nm = nm_functions(&exe);
    // Calls in main: `call <framed>` (direct) and `call *%rdx` or similar (indirect).
    let main = objdump_function(&exe, "main");
    let mut direct = 0;
    let mut indirect = 0;
    for w in main.windows(2) {
        let (_, text) = &w[0];
        let ret = Svma(w[1].0);
        if !text.starts_with("call") {
            continue;
        }
        if text.contains('*') {
            assert_eq!(b.direct_call_before(ret), None, "{text}");
            indirect += 1;
        } else {
            assert_eq!(
                b.direct_call_before(ret),
                Some(Svma(nm["framed"])),
                "{text}"
            );
            direct += 1;
        }
    }
    assert_eq!((direct, indirect), (1, 1), "{main:?}");
    // Not after a call: the instruction before is not a call.
    assert_eq!(b.direct_call_before(Svma(main[2].0)), None);
    // framed: endbr64, push %rbp, mov %rsp,%rbp, ..., ret.
    let f = objdump_function(&exe, "framed");
    assert!(
        f[0].1.starts_with("endbr64") && f[1].1.starts_with("push") && f[2].1.starts_with("mov"),
        "{f:?}"
    );
    assert_eq!(b.frame_established(Svma(f[0].0)), Some(false));
    assert_eq!(b.frame_established(Svma(f[1].0)), Some(false));
    assert_eq!(b.frame_established(Svma(f[2].0)), Some(false));
    assert_eq!(b.frame_established(Svma(f[3].0)), Some(true));
    let ret = f.iter().find(|(_, t)| t.starts_with("ret")).unwrap();
    assert_eq!(b.frame_established(Svma(ret.0)), Some(false));
    // At -O2 GCC leaves `leaf` without a frame even with -fno-omit-frame-pointer.
    let exe2 = gcc(
        dir.path(),
        "frames2",
        &["frames.c"],
        &["-fno-omit-frame-pointer"],
    );
    let b2 = Binary::open(&exe2).unwrap();
    let leaf = objdump_function(&exe2, "leaf");
    assert!(!leaf[0].1.starts_with("push"), "{leaf:?}");
    assert_eq!(b2.frame_established(Svma(leaf[0].0)), Some(false));
}

/// A static glibc program's `.plt` stubs jump through GOT slots that `R_X86_64_IRELATIVE`
/// relocations fill (no symbol: objdump names them `*ABS*+0xADDEND@plt`, perf 6.1 counts
/// their samples under `_init`). Each stub is named after an IFUNC symbol at its
/// relocation's addend. Oracles: `objdump -d` (each stub's `jmp *…(%rip)` and its slot),
/// `readelf -rW` (slot → addend), `readelf -sW` (the symbols at the addend).
#[test]
fn static_irelative_plt_stubs_are_named_after_their_ifunc() {
    let t = "static_irelative_plt_stubs_are_named_after_their_ifunc";
    if !tools(t, &["gcc", "objdump", "readelf"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("ifunc.c");
    std::fs::write(
        &c,
        "#include <string.h>\nchar b[64], d[64];\nint main(int c, char **v) { b[c & 31] = 'a'; memcpy(d, b, (size_t)c * 8); return (int)strlen(b) + d[0]; }\n",
    )
    .unwrap();
    let exe = dir.path().join("ifunc");
    let o = Command::new("gcc")
        .args(["-O2", "-static", "-o"])
        .arg(&exe)
        .arg(&c)
        .output()
        .unwrap();
    if !o.status.success() {
        proftrust_testkit::skip!("{t}: gcc -static failed (no static libc?)");
        return;
    }
    let exe_s = exe.to_str().unwrap();
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    // slot -> addend
    let mut addend = BTreeMap::new();
    for l in run("readelf", &["-rW", exe_s]).lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 4 && f[2] == "R_X86_64_IRELATIVE" {
            addend.insert(hex(f[0]), hex(f[3]));
        }
    }
    // address -> symbol names there
    let mut names: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    for l in run("readelf", &["-sW", exe_s]).lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() == 8 && (f[3] == "IFUNC" || f[3] == "FUNC") {
            names.entry(hex(f[1])).or_default().insert(f[7].to_string());
        }
    }
    // stub address -> slot, from objdump's `jmp *0x…(%rip)  # SLOT <…>` in .plt.
    let dis = run("objdump", &["-d", "-j", ".plt", exe_s]);
    let b = Binary::open(&exe).unwrap();
    let mut checked = 0;
    for l in dis.lines() {
        let Some((at, rest)) = l.trim_start().split_once(':') else {
            continue;
        };
        if !rest.contains("jmp") || !rest.contains("(%rip)") {
            continue;
        }
        let Some(slot) = rest
            .split('#')
            .nth(1)
            .and_then(|x| x.split_whitespace().next())
        else {
            continue;
        };
        let Some(a) = addend.get(&hex(slot)) else {
            continue;
        };
        let want = &names[a];
        let f = b
            .function_at(Svma(hex(at)))
            .expect("a function at the stub");
        let got = f
            .name
            .strip_suffix("@plt")
            .unwrap_or_else(|| panic!("{}", f.name));
        assert!(want.contains(got), "stub {at}: {} not in {want:?}", f.name);
        checked += 1;
    }
    assert!(checked >= 2, "{checked} IRELATIVE stubs checked:\n{dis}");
}

/// A shared library's `.plt` holds stubs of IFUNCs resolved by `R_X86_64_IRELATIVE`
/// relocations (Debian's libc.so.6 has 50, libm.so.6 22): each is a function named as
/// `objdump -d` names it, so no sample in them is left outside every function. objdump
/// names such a stub `*ABS*+0xRESOLVER@plt`; proftrust names it after the IFUNC symbol at
/// the resolver when one exists (`strnlen@plt`, as for static binaries), else exactly as
/// objdump does (libm.so.6 of Debian 12 without its debug file has one:
/// `*ABS*+0x2e730@plt`).
#[test]
fn shared_library_plt_stubs_are_named_as_objdump_names_them() {
    let t = "shared_library_plt_stubs_are_named_as_objdump_names_them";
    if !tools(t, &["objdump"]) {
        return;
    }
    let mut libs: Vec<std::path::PathBuf> = ["libc.so.6", "libm.so.6"]
        .iter()
        .map(|l| Path::new("/lib/x86_64-linux-gnu").join(l))
        .filter(|l| l.exists())
        .collect();
    if libs.is_empty() {
        return proftrust_testkit::skip_test(t, "no libc.so.6/libm.so.6 in /lib/x86_64-linux-gnu");
    }
    // Where libc6-dbg is installed, its symbol tables name every resolver; a copy without
    // build-id and debuglink finds no debug file, as on a machine without the package.
    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join(libs.last().unwrap().file_name().unwrap());
    let o = std::process::Command::new("objcopy")
        .args(["--remove-section", ".note.gnu.build-id"])
        .args(["--remove-section", ".gnu_debuglink"])
        .arg(libs.last().unwrap())
        .arg(&bare)
        .output();
    if o.is_ok_and(|o| o.status.success()) {
        libs.push(bare);
    }
    let (mut checked, mut by_address) = (0, 0);
    for lib in &libs {
        let b = Binary::open(lib).unwrap();
        let out = run("objdump", &["-d", "-j", ".plt", p(lib)]);
        for l in out.lines() {
            // `0000000000026110 <*ABS*+0x9f1c0@plt>:`
            let Some((addr, rest)) = l.split_once(" <") else {
                continue;
            };
            let Some(name) = rest.strip_suffix(">:").filter(|n| n.ends_with("@plt")) else {
                continue;
            };
            let a = u64::from_str_radix(addr.trim(), 16).unwrap();
            let at = format!("{}: {name} at {a:#x}", lib.display());
            let f = b
                .function_at(Svma(a))
                .unwrap_or_else(|| panic!("{at}: no function"));
            assert_eq!(f.start.0, a, "{at}");
            assert_eq!(f.origin, FunctionOrigin::Plt, "{at}");
            match name
                .strip_prefix("*ABS*+0x")
                .and_then(|x| x.strip_suffix("@plt"))
            {
                Some(hex) => {
                    let resolver = u64::from_str_radix(hex, 16).unwrap();
                    // The IFUNC's own symbol, if a symbol (not an FDE) names the resolver.
                    let symbol = b
                        .function_at(Svma(resolver))
                        .filter(|r| r.start.0 == resolver && r.origin != FunctionOrigin::Recovered)
                        .map(|r| format!("{}@plt", r.name));
                    match symbol {
                        Some(s) => assert_eq!(f.name, s, "{at}"),
                        None => {
                            assert_eq!(f.name, name, "{at}");
                            by_address += 1;
                        }
                    }
                }
                None => assert_eq!(f.name, name.replace("@@", "@"), "{at}"),
            }
            checked += 1;
        }
    }
    eprintln!("{checked} .plt stubs checked, {by_address} named by their resolver's address");
    assert!(checked > 0, "no stub in objdump's .plt listings");
}

/// A module whose `-dbg` package is installed (`/usr/lib/debug/.build-id/xx/rest.debug`:
/// no code bytes, no `.plt`, its executable `PT_LOAD` with `p_filesz` 0) is located as the
/// recorded file with that debug file attached, as perf pairs them: symbols and lines from
/// the debug file, segments (`readelf -l` of the binary), code and PLT stubs from the file
/// that ran. Before, the debug file alone was taken: offsets "in none of its PT_LOAD
/// segments", "no code bytes", libc's `.plt` stubs in no function.
#[test]
fn debug_only_file_pairs_with_the_recorded_binary() {
    use proftrust_binary::{BinaryLocator, LoadHeaders, LocateOptions};
    use proftrust_model::segments::SegmentSource;
    let t = "debug_only_file_pairs_with_the_recorded_binary";
    if !tools(t, &["gcc", "objcopy", "strip", "nm"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = gcc(dir.path(), "prog", &["stripped.c"], &[]);
    let named = nm_functions(&exe);
    let id = Binary::open(&exe).unwrap().build_id().unwrap().clone();
    let hex = id.to_hex();
    let root = dir.path().join("debugroot");
    let bid_dir = root.join(".build-id").join(&hex[..2]);
    std::fs::create_dir_all(&bid_dir).unwrap();
    let dbg = bid_dir.join(format!("{}.debug", &hex[2..]));
    run("objcopy", &["--only-keep-debug", p(&exe), p(&dbg)]);
    run("strip", &[p(&exe)]);
    let dbg_segments = LoadHeaders::read(&dbg).unwrap().segments;
    assert!(
        dbg_segments
            .segments()
            .iter()
            .any(|g| g.flags & 1 != 0 && g.filesz == 0),
        "{dbg_segments:?}"
    );
    let mut lo = LocateOptions::default();
    lo.build_id_cache = None;
    lo.debuginfod_cache = None;
    lo.debug_dirs = vec![root.clone()];
    lo.open.debug_dirs = vec![root];
    lo.running_kernel = None;
    let locator = BinaryLocator::new(lo);
    let b = locator.locate(p(&exe), Some(&id)).binary.unwrap();
    assert_eq!(b.path(), exe.as_path());
    assert_eq!(b.debug_file(), Some(dbg.as_path()));
    // The debug file's names, the binary's code.
    let mix = named["mix"];
    let f = b.function_at(Svma(mix)).unwrap();
    assert_eq!((f.name.as_str(), f.start.0), ("mix", mix));
    assert!(!b.instructions(f).unwrap().is_empty());
    let got = locator.load_segments(p(&exe), Some(&id)).unwrap();
    assert_eq!(
        got.segments(),
        LoadHeaders::read(&exe).unwrap().segments.segments()
    );
}

/// `LoadHeaders` (what the recorder and the QEMU tracer read of an image, the one type
/// since issue 33 removed `exact`'s `ElfInfo`): file offsets to SVMAs through the
/// `PT_LOAD` segments, and the load bias of an image mapped whole from a base address.
/// Hand-computed: offset 0x1010 lies 0x10 into the segment at file 0x1000 / SVMA 0x401000.
#[test]
fn load_headers_map_offsets_and_bases() {
    use proftrust_binary::LoadHeaders;
    use proftrust_model::segments::{LoadSegment, SegmentTable};
    let h = LoadHeaders {
        build_id: None,
        segments: SegmentTable::new(vec![
            LoadSegment::new(0, 0x400000, 0x600),
            LoadSegment::new(0x1000, 0x401000, 0x200),
        ]),
    };
    assert_eq!(h.segments.svma_of_offset(0x1010), Some(Svma(0x401010)));
    assert_eq!(h.segments.svma_of_offset(0x10), Some(Svma(0x400010)));
    assert_eq!(h.segments.svma_of_offset(0x1200), None);
    // File offset 0 (SVMA 0x400000) at 0x7f00_0000_0000.
    assert_eq!(
        h.bias_from_base(0x7f00_0000_0000),
        0x7f00_0000_0000 - 0x400000
    );
    // No segment holds file offset 0: the base itself.
    let none = LoadHeaders::default();
    assert_eq!(none.bias_from_base(0x5000), 0x5000);
    // The test binary's own headers: an executable segment.
    let exe = std::env::current_exe().unwrap();
    let own = LoadHeaders::read(&exe).unwrap();
    assert!(own.segments.segments().iter().any(|s| s.is_executable()));
}
