//! `proftrust truth` end to end: counts a C program compiled at test time, writes the exact
//! file atomically, `proftrust read --json` reads it back. Oracle for the numbers: the known
//! trip count of `kernel`'s loop times its instruction count per `objdump -d`.

use proftrust_testkit::need;
use std::path::{Path, PathBuf};
use std::process::Command;

fn proftrust() -> Command {
    Command::new(env!("CARGO_BIN_EXE_proftrust"))
}

fn compile(dir: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../exact/tests/c");
    proftrust_testkit::compile_c(dir, &src, name, &["-pthread"])
}

/// Number of instructions in `kernel`'s loop body per objdump (from the backward jump's
/// target to the jump).
fn loop_len(bin: &Path) -> u64 {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(bin)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let f: Vec<(u64, String)> = text
        .split("<kernel>:\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let (a, r) = l.split_once(':')?;
            Some((
                u64::from_str_radix(a.trim(), 16).ok()?,
                r.trim().to_string(),
            ))
        })
        .collect();
    for (a, t) in &f {
        if let Some(tg) = t
            .strip_prefix('j')
            .and_then(|r| r.split_whitespace().nth(1))
            .and_then(|x| u64::from_str_radix(x, 16).ok())
        {
            if tg < *a && tg >= f[0].0 {
                return f.iter().filter(|x| x.0 >= tg && x.0 <= *a).count() as u64;
            }
        }
    }
    panic!("no loop in kernel");
}

#[test]
fn truth_writes_an_exact_file_read_understands() {
    if !need(
        "truth_writes_an_exact_file_read_understands",
        &["qemu-x86_64", "gcc", "objdump"],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "loop");
    let out = dir.path().join("loop.ptexact");
    let n = 4000u64;
    let st = proftrust()
        .args(["-q", "truth", "-o"])
        .arg(&out)
        .arg("--")
        .arg(&bin)
        .arg(n.to_string())
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let r = proftrust()
        .arg("read")
        .arg(&out)
        .arg("--json")
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["format"], "exact");
    let total = v["total_instructions"].as_u64().unwrap();
    let body = loop_len(&bin) * (3 * n + 3);
    assert!(total > body, "total {total} <= loop body {body}");
    if let Some(funcs) = v["functions"].as_array() {
        let k = funcs
            .iter()
            .find(|f| f["name"] == "kernel")
            .expect("kernel in functions");
        // kernel = its loop body (exact) plus a few instructions per call.
        let ki = k["instructions"].as_u64().unwrap();
        assert!(ki >= body && ki < body + 3 * 40, "kernel {ki}, loop {body}");
    }
}

#[test]
fn truth_records_failures_and_rejects_bad_commands() {
    if !need(
        "truth_records_failures_and_rejects_bad_commands",
        &["qemu-x86_64", "gcc"],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "faults");
    let out = dir.path().join("f.ptexact");
    let st = proftrust()
        .args(["truth", "--timeout", "30", "-o"])
        .arg(&out)
        .arg("--")
        .arg(&bin)
        .args(["exit3", "100"])
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let err = String::from_utf8_lossy(&st.stderr);
    let said = format!(
        "proftrust: the program exited with status 3, which usually means it failed: the counts in {} may show its error path rather than its normal work; check its arguments and input",
        out.display()
    );
    assert!(err.lines().any(|l| l == said), "{err}");
    assert!(out.is_file());

    let missing = dir.path().join("nope.ptexact");
    let st = proftrust()
        .args(["truth", "-o"])
        .arg(&missing)
        .args(["--", "/nonexistent/program"])
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&st.stderr).contains("command not found"));
    assert!(!missing.exists(), "no file on failure");

    let st = proftrust()
        .args(["truth", "--backend", "callgrind", "--cpu", "max", "-o"])
        .arg(&missing)
        .arg("--")
        .arg(&bin)
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(2));
}

fn read_json(file: &Path) -> serde_json::Value {
    let r = proftrust()
        .arg("read")
        .arg(file)
        .arg("--json")
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    serde_json::from_slice(&r.stdout).unwrap()
}

/// A fatal signal, a timeout and threads: the file is written, the ending recorded, and the
/// thread count stated; `--no-edges` with threads is exact (no possibly-low note).
#[test]
fn truth_writes_the_ending_and_the_threads() {
    if !need(
        "truth_writes_the_ending_and_the_threads",
        &["qemu-x86_64", "gcc"],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "faults");
    let cases: &[(&[&str], &[&str], serde_json::Value)] = &[
        (
            &[],
            &["segv", "100"],
            serde_json::json!({"kind": "signaled", "signal": 11, "name": "SIGSEGV"}),
        ),
        (
            &["--timeout", "1"],
            &["spin", "100"],
            serde_json::json!({"kind": "timed_out", "millis": 1000}),
        ),
        (
            &["--no-edges"],
            &["threads", "1000"],
            serde_json::json!({"kind": "exited", "code": 0}),
        ),
    ];
    for (k, (opts, args, outcome)) in cases.iter().enumerate() {
        let out = dir.path().join(format!("f{k}.ptexact"));
        let st = proftrust()
            .arg("truth")
            .args(*opts)
            .arg("-o")
            .arg(&out)
            .arg("--")
            .arg(&bin)
            .args(*args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&st.stderr);
        assert!(st.status.success(), "{args:?}: {err}");
        let v = read_json(&out);
        assert_eq!(v["outcome"], *outcome, "{args:?}");
        let detail = v["backend_detail"].as_str().unwrap();
        let threads = if args[0] == "threads" { 5 } else { 1 };
        assert!(
            detail.contains(&format!("guest threads: {threads}")),
            "{args:?}: {detail}"
        );
        assert!(!err.contains("may be slightly low"), "{args:?}: {err}");
    }
}

/// `proftrust vpmu --cpi-model cache-sim`: the exact file it writes carries per-instruction
/// L1D and LLC misses. Oracle: `memwalk.c`'s pattern (one 8-byte access per 64-byte line, in
/// order; `fill` stores once, `walk` loads twice) under the default cache (32 KiB 8-way L1D
/// = 512 lines, 64 sets; 8 MiB LLC): 2048 lines are 32 per L1 set > 8 ways, so every access
/// misses L1 (LRU); they fit the LLC, so only the first touch (fill) goes to memory. The
/// instructions are found with `objdump -d`: the only store in `fill`, the only load in
/// `walk`'s inner loop.
#[test]
fn vpmu_cache_sim_writes_misses_per_instruction() {
    if !need(
        "vpmu_cache_sim_writes_misses_per_instruction",
        &["qemu-x86_64", "gcc", "objdump"],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "memwalk");
    let samples = dir.path().join("s.ptsamples");
    let exact = dir.path().join("e.ptexact");
    let st = proftrust()
        .args([
            "vpmu",
            "--skid",
            "0",
            "--cpi-model",
            "cache-sim",
            "--period",
            "1009",
            "-o",
        ])
        .arg(&samples)
        .arg("--exact")
        .arg(&exact)
        .arg("--")
        .arg(&bin)
        .args(["131072", "2"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&st.stderr);
    assert!(st.status.success(), "{err}");
    assert!(err.contains("cache simulation"), "{err}");
    let e = proftrust_formats::native::read_exact(&std::fs::read(&exact).unwrap()).unwrap();
    assert_eq!(e.extra_cost_names, ["cycles", "l1d_misses", "llc_misses"]);
    // The memory instruction of a function per objdump: `mov %REG,(%REG)` (store) in fill,
    // `mov (%REG),%REG` (load) in walk.
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(&bin)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mem_insn = |func: &str, store: bool| -> u64 {
        let body = text.split(&format!("<{func}>:\n")).nth(1).unwrap();
        let hits: Vec<u64> = body
            .lines()
            .take_while(|l| !l.trim().is_empty())
            .filter_map(|l| {
                let (a, r) = l.split_once(':')?;
                let r = r.trim();
                let ops = r.strip_prefix("mov")?.trim_start();
                let is = if store {
                    ops.ends_with(')') && !ops.starts_with('(')
                } else {
                    ops.starts_with('(')
                };
                is.then(|| u64::from_str_radix(a.trim(), 16).ok())?
            })
            .collect();
        assert_eq!(hits.len(), 1, "{func}: {hits:x?}");
        hits[0]
    };
    let (st_at, ld_at) = (mem_insn("fill", true), mem_insn("walk", false));
    let main = e.modules.find_by_file_name("memwalk").expect("main module");
    let costs = |svma: u64| -> Vec<u64> {
        let k = e
            .instructions
            .iter()
            .position(|i| i.loc.module == Some(main) && i.loc.svma.0 == svma)
            .expect("instruction counted");
        e.extra_costs[k].clone()
    };
    let lines = 131072 / 64;
    assert_eq!(costs(st_at)[1..], [lines, lines]);
    assert_eq!(costs(ld_at)[1..], [2 * lines, 0]);
    // Each of walk's loads misses L1 and hits the LLC: 40 cycles, plus its static cost.
    let ld = costs(ld_at)[0];
    assert!(
        ld >= 2 * lines * 40 && ld <= 2 * lines * 45,
        "walk's load: {ld} cycles"
    );
}

/// `--workload NAME --size N` is `-- DIR/NAME N` with the workload built into
/// `$PROFTRUST_WORKLOAD_DIR`: the exact counts of the two spellings are identical (the
/// workloads are deterministic), and giving both is refused without writing a file.
#[test]
fn workload_flag_stands_for_the_built_program() {
    if !need(
        "workload_flag_stands_for_the_built_program",
        &["qemu-x86_64", "gcc"],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let wl = dir.path().join("wl");
    let a = dir.path().join("a.ptexact");
    let st = proftrust()
        .env("PROFTRUST_WORKLOAD_DIR", &wl)
        .args(["-q", "truth", "--workload", "mcf", "--size", "2", "-o"])
        .arg(&a)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let exe = wl.join("mcf");
    assert!(exe.is_file(), "no workload built at {}", exe.display());
    let b = dir.path().join("b.ptexact");
    let st = proftrust()
        .args(["-q", "truth", "-o"])
        .arg(&b)
        .arg("--")
        .arg(&exe)
        .arg("2")
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    // Inside the program the counts are identical; the loader and libc start-up are not
    // compared (the environment differs by PROFTRUST_WORKLOAD_DIR, and they scan it).
    let in_main = |v: serde_json::Value| -> Vec<(String, u64)> {
        let mut f: Vec<(String, u64)> = v["functions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["module"].as_str().is_some_and(|m| m.ends_with("/mcf")))
            .map(|f| {
                (
                    f["name"].as_str().unwrap().to_string(),
                    f["instructions"].as_u64().unwrap(),
                )
            })
            .collect();
        f.sort();
        f
    };
    let (fa, fb) = (in_main(read_json(&a)), in_main(read_json(&b)));
    assert!(fa.iter().map(|f| f.1).sum::<u64>() > 1_000_000, "{fa:?}");
    assert!(fa.iter().any(|f| f.0.starts_with("scan")), "{fa:?}");
    assert_eq!(fa, fb);

    let c = dir.path().join("c.ptexact");
    let st = proftrust()
        .env("PROFTRUST_WORKLOAD_DIR", &wl)
        .args(["-q", "truth", "--workload", "mcf", "-o"])
        .arg(&c)
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(2));
    let err = String::from_utf8_lossy(&st.stderr);
    assert!(err.contains("either --workload or a program"), "{err}");
    assert!(!c.exists());
}

/// `truth --branch-sim` under QEMU: the plugin runs every branch through its history-based
/// predictor (`proftrust-bpred`) and writes the mispredictions per branch instruction
/// (column `bpred_misses`). `branches.c`: a loop whose branch follows a xorshift bit (no
/// predictor can do better than a coin: about half of the iterations mispredicted) and a
/// loop whose branch is taken every 4th iteration (learned from the history: about none).
/// Oracles: the iteration count given, the instruction addresses of each function per
/// `objdump -d`, and the two rates any predictor must show on such outcomes.
#[test]
fn branch_sim_counts_mispredictions_per_branch() {
    if !need(
        "branch_sim_counts_mispredictions_per_branch",
        &["qemu-x86_64", "gcc", "objdump"],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "branches");
    let exact = dir.path().join("e.ptexact");
    let n = 200_000u64;
    let st = proftrust()
        .args(["-q", "truth", "--branch-sim", "-o"])
        .arg(&exact)
        .arg("--")
        .arg(&bin)
        .arg(n.to_string())
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(&bin)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // (executions, mispredictions) over the instructions of `func` in the exact file.
    let per_function = |exact: &Path, func: &str| -> (u64, u64) {
        let e = proftrust_formats::native::read_exact(&std::fs::read(exact).unwrap()).unwrap();
        let col = e
            .extra_cost_names
            .iter()
            .position(|c| c == "bpred_misses")
            .unwrap_or_else(|| panic!("no bpred_misses column: {:?}", e.extra_cost_names));
        let module = e
            .modules
            .iter()
            .find(|(_, m)| m.path.ends_with("/branches"))
            .map(|(i, _)| i)
            .unwrap();
        let body = text.split(&format!("<{func}>:\n")).nth(1).unwrap();
        let addrs: Vec<u64> = body
            .lines()
            .take_while(|l| !l.trim().is_empty())
            .filter_map(|l| u64::from_str_radix(l.trim().split(':').next()?, 16).ok())
            .collect();
        let mut misses = 0;
        let mut most = 0;
        for (ic, costs) in e.instructions.iter().zip(&e.extra_costs) {
            if ic.loc.module == Some(module) && addrs.contains(&ic.loc.svma.0) {
                misses += costs[col];
                most = most.max(ic.count);
            }
        }
        (most, misses)
    };
    let (runs, random) = per_function(&exact, "random_branch");
    assert_eq!(runs, n, "the loop body runs n times");
    let rate = random as f64 / n as f64;
    assert!(
        (0.45..0.55).contains(&rate),
        "random branch: {random} of {n}"
    );
    let (runs, periodic) = per_function(&exact, "periodic_branch");
    assert_eq!(runs, n);
    eprintln!("mispredicted: random_branch {random} of {n}, periodic_branch {periodic} of {n}");
    assert!(
        (periodic as f64) < 0.005 * n as f64,
        "periodic branch: {periodic} of {n}"
    );
    // The same program started by `exec` from a shell: the image QEMU runs anew gets the
    // predictor too (the plugin passes `bpred=on` on).
    let via_sh = dir.path().join("sh.ptexact");
    let st = proftrust()
        .args(["-q", "truth", "--branch-sim", "-o"])
        .arg(&via_sh)
        .args(["--", "/bin/sh", "-c"])
        .arg(format!("exec {} {n}", bin.display()))
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let (runs, random) = per_function(&via_sh, "random_branch");
    assert_eq!(runs, n);
    assert!(
        (0.45..0.55).contains(&(random as f64 / n as f64)),
        "after exec: random branch {random} of {n}"
    );
    let (_, periodic) = per_function(&via_sh, "periodic_branch");
    assert!(
        (periodic as f64) < 0.005 * n as f64,
        "after exec: {periodic}"
    );
    // Without --branch-sim there is no such column.
    let plain = dir.path().join("p.ptexact");
    let st = proftrust()
        .args(["-q", "truth", "-o"])
        .arg(&plain)
        .arg("--")
        .arg(&bin)
        .arg("1000")
        .output()
        .unwrap();
    assert!(st.status.success());
    let p = proftrust_formats::native::read_exact(&std::fs::read(&plain).unwrap()).unwrap();
    assert!(!p.extra_cost_names.iter().any(|c| c == "bpred_misses"));
    // The audit's flag runs the same predictor for the time model, and says so; without
    // the time model it is refused.
    let out = proftrust()
        .args([
            "audit",
            "--truth-weight",
            "time-model",
            "--time-branches",
            "--json",
            "-o",
            "-",
            "--",
        ])
        .arg(&bin)
        .arg(n.to_string())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("counted by the plugin's TAGE/ITTAGE-like predictor"),
        "{err}"
    );
    let out = proftrust()
        .args(["audit", "--time-branches", "--"])
        .arg(&bin)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--truth-weight time-model"), "{err}");
}
