//! Integration tests of the QEMU and callgrind runners on C programs compiled at test time
//! (`gcc -O2 -g`, sources in `tests/c/`). Oracles: `objdump -d` of the counted loop and the
//! known trip counts; callgrind's counts for the QEMU counts; the counting mode for the
//! block trace. Tests needing qemu-x86_64, valgrind, gcc or objdump skip loudly.

use proftrust_exact::{
    count_callgrind, count_qemu, counts_may_be_low, guest_threads, trace_qemu, CallgrindOptions,
    ExactError, QemuOptions,
};
use proftrust_model::{
    BlockVisitor, ExactProfile, Location, Module, ModuleIdx, RunOutcome, Svma, TraceBlock, TraceEnd,
};
use proftrust_testkit::need;
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Compiles `tests/c/<name>.c` with `gcc -O2 -g` into `dir`.
fn compile(dir: &Path, name: &str) -> PathBuf {
    compile_with(dir, name, &[])
}

/// Compiles `tests/c/<name>.c` with `gcc -O2 -g` and `extra` flags into `dir`.
fn compile_with(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    let mut flags = vec!["-pthread"];
    flags.extend_from_slice(extra);
    proftrust_testkit::compile_c(dir, &src, name, &flags)
}

fn cmd(prog: &Path, args: &[&str]) -> Vec<OsString> {
    let mut v = vec![prog.as_os_str().to_owned()];
    v.extend(args.iter().map(OsString::from));
    v
}

/// Every QEMU generation to test against: the one proftrust picks, and QEMU 7.2 (plugin
/// API v1) at /usr/bin when it is another one.
fn qemus() -> Vec<PathBuf> {
    let mut v = vec![proftrust_exact::find_qemu().expect("a qemu-x86_64 with plugins")];
    let sys = PathBuf::from("/usr/bin/qemu-x86_64");
    if sys.is_file() && v[0] != sys {
        v.push(sys);
    }
    v
}

/// The plugin API version a count ran with (from its backend line).
fn plugin_api(p: &ExactProfile) -> u32 {
    let at = p
        .backend_detail
        .find("plugin API v")
        .expect("plugin API in the detail")
        + 12;
    p.backend_detail[at..at + 1].parse().unwrap()
}

fn quiet_qemu() -> QemuOptions {
    QemuOptions {
        show_output: false,
        ..Default::default()
    }
}

/// The instructions of function `func` in `bin` as objdump prints them: (svma, text).
fn objdump_function(bin: &Path, func: &str) -> Vec<(u64, String)> {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(bin)
        .output()
        .expect("run objdump");
    let text = String::from_utf8_lossy(&out.stdout);
    let header = format!("<{func}>:");
    let mut v = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.ends_with(&header) {
            inside = true;
            continue;
        }
        if inside {
            if line.trim().is_empty() {
                break;
            }
            let Some((addr, rest)) = line.split_once(':') else {
                continue;
            };
            if let Ok(a) = u64::from_str_radix(addr.trim(), 16) {
                v.push((a, rest.trim().to_string()));
            }
        }
    }
    v
}

/// Addresses of the instructions in `.text` of `bin` (objdump), minus calls to `@plt` stubs.
fn text_scope(bin: &Path) -> Vec<u64> {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", "--section=.text"])
        .arg(bin)
        .output()
        .expect("run objdump");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(' ') && !l.contains("@plt>"))
        .filter_map(|l| {
            let (a, rest) = l.split_once(':')?;
            (!rest.trim().is_empty()).then_some(())?;
            u64::from_str_radix(a.trim(), 16).ok()
        })
        .collect()
}

/// The loop of `kernel`: (first instruction, back-edge jump) from objdump, i.e. the jump
/// inside the function whose target lies before it.
fn kernel_loop(bin: &Path) -> (Vec<u64>, u64, u64) {
    let f = objdump_function(bin, "kernel");
    assert!(
        !f.is_empty(),
        "objdump shows no kernel in {}",
        bin.display()
    );
    let (lo, hi) = (f[0].0, f.last().unwrap().0);
    for &(a, ref t) in &f {
        if !t.starts_with('j') {
            continue;
        }
        let target = t
            .split_whitespace()
            .nth(1)
            .and_then(|x| u64::from_str_radix(x, 16).ok());
        if let Some(tg) = target {
            if tg < a && tg >= lo && tg <= hi {
                let body: Vec<u64> = f
                    .iter()
                    .map(|x| x.0)
                    .filter(|&x| x >= tg && x <= a)
                    .collect();
                return (body, tg, a);
            }
        }
    }
    panic!("no backward jump in kernel: {f:?}");
}

fn main_module(p: &ExactProfile, bin: &Path) -> ModuleIdx {
    let name = bin.file_name().unwrap().to_str().unwrap();
    p.modules
        .find_by_file_name(name)
        .unwrap_or_else(|| panic!("no module {name} in {:?}", p.modules))
}

fn main_counts(p: &ExactProfile, bin: &Path) -> HashMap<u64, u64> {
    let m = main_module(p, bin);
    p.instructions
        .iter()
        .filter(|i| i.loc.module == Some(m))
        .map(|i| (i.loc.svma.0, i.count))
        .collect()
}

fn assert_loop_counts(p: &ExactProfile, bin: &Path, body_runs: u64, back_edges: Option<u64>) {
    let m = main_module(p, bin);
    let (body, head, jump) = kernel_loop(bin);
    for &a in &body {
        assert_eq!(
            p.count_at(Location::new(m, a)),
            body_runs,
            "loop instruction {a:#x} (loop {head:#x}..={jump:#x})"
        );
    }
    if let Some(be) = back_edges {
        let e = p
            .edges
            .iter()
            .find(|e| e.from == Location::new(m, jump) && e.to == Location::new(m, head))
            .map_or(0, |e| e.count);
        assert_eq!(e, be, "back-edge {jump:#x} -> {head:#x}");
    }
}

#[test]
fn qemu_counted_loop_is_exact() {
    if !need(
        "qemu_counted_loop_is_exact",
        &["qemu-x86_64", "gcc", "objdump"],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "loop");
    let n = 10_000u64;
    let p = count_qemu(&cmd(&bin, &[&n.to_string()]), &quiet_qemu()).unwrap();
    assert_eq!(p.outcome, Some(RunOutcome::Exited { code: 0 }));
    assert_eq!(p.backend, "qemu");
    assert!(
        p.backend_detail.contains("-cpu max"),
        "{}",
        p.backend_detail
    );
    // kernel(n), kernel(n+1), kernel(n+2): 3n+3 body runs, 3n taken back-edges.
    assert_loop_counts(&p, &bin, 3 * n + 3, Some(3 * n));
    assert_eq!(guest_threads(&p), Some(1), "{}", p.backend_detail);
    assert!(!counts_may_be_low(&p));
    // The body total equals (instructions in the loop per objdump) x trip count.
    let m = main_module(&p, &bin);
    let (body, _, _) = kernel_loop(&bin);
    let total: u64 = body.iter().map(|&a| p.count_at(Location::new(m, a))).sum();
    assert_eq!(total, body.len() as u64 * (3 * n + 3));
    // kernel is called 3 times from main.
    let entry = objdump_function(&bin, "kernel")[0].0;
    let calls: u64 = p
        .calls
        .iter()
        .filter(|c| c.target == Location::new(m, entry))
        .map(|c| c.count)
        .sum();
    assert_eq!(calls, 3);
    assert!(p.returns >= 3);
    assert_eq!(
        p.total_instructions,
        p.instructions.iter().map(|i| i.count).sum::<u64>()
    );
    // Other modules are there too: the dynamic loader and libc, module-relative.
    assert!(
        p.modules.find_by_file_name("libc.so.6").is_some(),
        "{:?}",
        p.modules
    );
    // Inline-only counting gives the same instruction counts (single thread).
    let o = QemuOptions {
        edges: false,
        ..quiet_qemu()
    };
    let q = count_qemu(&cmd(&bin, &[&n.to_string()]), &o).unwrap();
    assert!(q.edges.is_empty());
    assert_eq!(main_counts(&p, &bin), main_counts(&q, &bin));
    // Another CPU model is recorded; the main binary's loop counts do not depend on it.
    let o = QemuOptions {
        cpu: Some("qemu64".into()),
        ..quiet_qemu()
    };
    let r = count_qemu(&cmd(&bin, &[&n.to_string()]), &o).unwrap();
    assert!(
        r.backend_detail.contains("-cpu qemu64"),
        "{}",
        r.backend_detail
    );
    assert_loop_counts(&r, &bin, 3 * n + 3, Some(3 * n));
}

#[test]
fn qemu_agrees_with_callgrind_in_main_binary() {
    if !need(
        "qemu_agrees_with_callgrind_in_main_binary",
        &["qemu-x86_64", "valgrind", "gcc", "objdump"],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for (name, arg) in [("loop", "5000"), ("mix", "3000")] {
        let bin = compile(dir.path(), name);
        let c = cmd(&bin, &[arg]);
        let q = count_qemu(&c, &quiet_qemu()).unwrap();
        let g = count_callgrind(
            &c,
            &CallgrindOptions {
                show_output: false,
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(g.outcome, Some(RunOutcome::Exited { code: 0 }));
        let (qm, gm) = (main_counts(&q, &bin), main_counts(&g, &bin));
        // Scope: every instruction of the main executable's `.text` (start-up code, main
        // and its callees), except calls to PLT stubs: callgrind's default `--skip-plt=yes`
        // adds the stub's instructions to the call site, and it files `.init`, `.plt` and
        // `.fini` under an unknown object. The loader and libc are excluded (start-up paths
        // and ifunc choices differ between the two emulators).
        let scope = text_scope(&bin);
        assert!(scope.len() > 20);
        let mut diffs: Vec<(u64, u64, u64)> = scope
            .iter()
            .map(|&a| (a, *qm.get(&a).unwrap_or(&0), *gm.get(&a).unwrap_or(&0)))
            .filter(|&(_, x, y)| x != y)
            .collect();
        diffs.sort();
        diffs.dedup();
        assert!(
            diffs.is_empty(),
            "{name}: {} instructions differ (svma, qemu, callgrind): {:x?}",
            diffs.len(),
            &diffs[..diffs.len().min(20)]
        );
        let in_scope: u64 = scope.iter().map(|a| qm.get(a).unwrap_or(&0)).sum();
        assert!(in_scope > 10_000, "{name}: {in_scope}");
    }
}

/// Per-instruction counts rebuilt from the block trace.
#[derive(Default)]
struct TraceCounter {
    modules: Vec<(ModuleIdx, Module)>,
    counts: HashMap<(Option<ModuleIdx>, Svma), u64>,
    blocks: u64,
    calls: u64,
    returns: u64,
    tids: std::collections::HashSet<u32>,
    ended: Option<RunOutcome>,
}

impl TraceCounter {
    /// Per-instruction counts of the module whose file name is `name` (the main binary).
    fn main_counts(&self, name: &str) -> HashMap<u64, u64> {
        let main = self
            .modules
            .iter()
            .find(|(_, m)| m.file_name() == name)
            .map(|(i, _)| *i);
        self.counts
            .iter()
            .filter(|((m, _), _)| m.is_some() && *m == main)
            .map(|((_, s), n)| (s.0, *n))
            .collect()
    }
}

impl BlockVisitor for TraceCounter {
    fn module(&mut self, idx: ModuleIdx, module: &Module) {
        self.modules.push((idx, module.clone()));
    }
    fn block(&mut self, b: &TraceBlock<'_>) {
        assert!(
            b.module.is_none() || self.modules.iter().any(|(i, _)| Some(*i) == b.module),
            "block before its module"
        );
        self.blocks += 1;
        self.tids.insert(b.tid);
        match b.end {
            TraceEnd::Call => self.calls += 1,
            TraceEnd::Return => self.returns += 1,
            _ => {}
        }
        for &s in b.instructions {
            *self.counts.entry((b.module, s)).or_insert(0) += 1;
        }
    }
    fn end(&mut self, o: &RunOutcome) {
        self.ended = Some(o.clone());
    }
}

#[test]
fn block_trace_sums_to_counting_mode() {
    if !need(
        "block_trace_sums_to_counting_mode",
        &["qemu-x86_64", "gcc", "objdump"],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "mix");
    let c = cmd(&bin, &["2000"]);
    let p = count_qemu(&c, &quiet_qemu()).unwrap();
    let mut t = TraceCounter::default();
    let outcome = trace_qemu(&c, &quiet_qemu(), &mut t).unwrap();
    assert_eq!(outcome, RunOutcome::Exited { code: 0 });
    assert_eq!(t.ended, Some(outcome));
    let name = bin.file_name().unwrap().to_str().unwrap();
    let tm = t
        .modules
        .iter()
        .find(|(_, m)| m.file_name() == name)
        .map(|(i, _)| *i)
        .expect("main module announced");
    let from_trace: HashMap<u64, u64> = t
        .counts
        .iter()
        .filter(|((m, _), _)| *m == Some(tm))
        .map(|((_, s), c)| (s.0, *c))
        .collect();
    assert_eq!(from_trace, main_counts(&p, &bin));
    assert_eq!(t.tids.len(), 1);
    assert!(
        t.calls > 2000 && t.returns > 2000,
        "{} {}",
        t.calls,
        t.returns
    );
}

fn faults(test: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    if !need(test, &["qemu-x86_64", "gcc", "objdump"]) {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "faults");
    Some((dir, bin))
}

/// Pids of processes whose command line contains `bin` (QEMU's does, and so do its forked
/// children).
fn processes_naming(bin: &Path) -> Vec<u32> {
    let needle = bin.as_os_str().as_encoded_bytes();
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        if cmdline.windows(needle.len()).any(|w| w == needle) {
            v.push(pid);
        }
    }
    v
}

/// Zombie children of this test process: (pid, comm) from `/proc/*/stat` (state `Z`, parent
/// = us). A zombie has an empty command line, so [`processes_naming`] cannot see it.
fn zombie_children() -> Vec<(u32, String)> {
    let me = std::process::id();
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...; comm may contain spaces, so split after the last ')'.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if rest.len() >= 2 && rest[0] == "Z" && rest[1] == me.to_string() {
            let pid = stat[..open].trim().parse().unwrap_or(0);
            v.push((pid, stat[open + 1..close].to_string()));
        }
    }
    v
}

/// No process of the run is left: none names `bin` on its command line, and no child of
/// this test process is a zombie. Other tests run concurrently in this process, so a zombie
/// must still be one half a second later to count (a runner reaps its child at once).
fn assert_nothing_left(bin: &Path) {
    let left = processes_naming(bin);
    assert!(left.is_empty(), "still running: {left:?}");
    let z = zombie_children();
    if !z.is_empty() {
        std::thread::sleep(Duration::from_millis(500));
        let still: Vec<_> = zombie_children()
            .into_iter()
            .filter(|x| z.contains(x))
            .collect();
        assert!(still.is_empty(), "zombie children: {still:?}");
    }
}

#[test]
fn qemu_fault_endings_keep_the_profile() {
    let Some((_dir, bin)) = faults("qemu_fault_endings_keep_the_profile") else {
        return;
    };
    let n = 777u64;
    let cases: &[(&str, RunOutcome)] = &[
        ("exit3", RunOutcome::Exited { code: 3 }),
        (
            "segv",
            RunOutcome::Signaled {
                signal: 11,
                name: "SIGSEGV".into(),
            },
        ),
        (
            "kill",
            RunOutcome::Signaled {
                signal: 9,
                name: "SIGKILL".into(),
            },
        ),
        ("exec", RunOutcome::Exited { code: 4 }),
        ("fork", RunOutcome::Exited { code: 0 }),
    ];
    for (mode, want) in cases {
        // The started process alone (`follow: false`); trees are tested in the CLI's
        // processes tests.
        let started_only = QemuOptions {
            follow: false,
            ..quiet_qemu()
        };
        let p = count_qemu(&cmd(&bin, &[mode, &n.to_string()]), &started_only)
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_eq!(p.outcome.as_ref(), Some(want), "{mode}");
        // The main thread's kernel(n) is counted exactly; the forked child's kernel(5n) is
        // excluded.
        // A guest dying by SIGSEGV gets no QEMU exit hook: instruction counts come from the
        // shared counters, without edges.
        let edges = (*mode != "segv").then_some(n - 1);
        assert_loop_counts(&p, &bin, n, edges);
        assert_nothing_left(&bin);
        // One guest thread (a forked child's is not counted), also when the run died
        // without a snapshot (the count lives in the shared counter file).
        assert_eq!(guest_threads(&p), Some(1), "{mode}: {}", p.backend_detail);
        assert!(!counts_may_be_low(&p), "{mode}");
        if *mode == "exec" {
            assert!(p.backend_detail.contains("execve"), "{}", p.backend_detail);
        }
    }
}

#[test]
fn qemu_threads_are_counted_exactly() {
    let Some((_dir, bin)) = faults("qemu_threads_are_counted_exactly") else {
        return;
    };
    // Long enough that the 4 workers run the loop at the same time (a shared non-atomic
    // counter then loses increments: about a third with QEMU 7.2's inline add).
    let n = 2_000_000u64;
    let p = count_qemu(&cmd(&bin, &["threads", &n.to_string()]), &quiet_qemu()).unwrap();
    assert_eq!(p.outcome, Some(RunOutcome::Exited { code: 0 }));
    // Main thread once + 4 workers: 5n body runs, 5(n-1) back-edges.
    assert_loop_counts(&p, &bin, 5 * n, Some(5 * (n - 1)));
    // The profile says how many guest threads ran; the counts are exact.
    assert_eq!(guest_threads(&p), Some(5), "{}", p.backend_detail);
    assert!(!counts_may_be_low(&p), "{}", p.backend_detail);
    // Without edges too, with either plugin API: per-vCPU scoreboards (API v4), or per-vcpu
    // callbacks from the first thread on (API v1).
    for qemu in qemus() {
        let o = QemuOptions {
            edges: false,
            qemu: Some(qemu.clone()),
            ..quiet_qemu()
        };
        let q = count_qemu(&cmd(&bin, &["threads", &n.to_string()]), &o).unwrap();
        assert_eq!(guest_threads(&q), Some(5), "{}", q.backend_detail);
        assert!(!counts_may_be_low(&q), "{}", q.backend_detail);
        assert_loop_counts(&q, &bin, 5 * n, None);
    }
    assert_nothing_left(&bin);
    let mut t = TraceCounter::default();
    trace_qemu(&cmd(&bin, &["threads", "3000"]), &quiet_qemu(), &mut t).unwrap();
    assert!(t.tids.len() >= 5, "threads seen in the trace: {:?}", t.tids);
    // With data accesses (per-vcpu buffers, blocks reassembled per thread): same threads,
    // same per-instruction counts in the main binary.
    let mut r = MemRecorder {
        name: bin.file_name().unwrap().to_str().unwrap().into(),
        ..Default::default()
    };
    let o = QemuOptions {
        trace_memory: true,
        ..quiet_qemu()
    };
    trace_qemu(&cmd(&bin, &["threads", "3000"]), &o, &mut r).unwrap();
    assert!(!r.bad_index && !r.out_of_order);
    assert!(r.accesses > 0);
    assert_eq!(r.counter.tids.len(), t.tids.len());
    let main_of = |c: &TraceCounter| c.main_counts(&r.name);
    assert_eq!(main_of(&r.counter), main_of(&t));
    // With the plugin simulating the caches (outcome words; every access under the lock
    // once the threads exist): the same blocks, accesses in order and in range.
    let mut c = MemRecorder {
        name: r.name.clone(),
        ..Default::default()
    };
    let o = QemuOptions {
        trace_memory: true,
        cache: Some(proftrust_cachesim::Geometry::default()),
        ..quiet_qemu()
    };
    trace_qemu(&cmd(&bin, &["threads", "3000"]), &o, &mut c).unwrap();
    assert!(!c.bad_index && !c.out_of_order);
    assert!(
        c.accesses > r.accesses / 2,
        "{} vs {}",
        c.accesses,
        r.accesses
    );
    assert_eq!(c.counter.tids.len(), t.tids.len());
    assert_eq!(main_of(&c.counter), main_of(&t));
}

#[test]
fn qemu_timeout_stops_and_keeps_counts() {
    let Some((_dir, bin)) = faults("qemu_timeout_stops_and_keeps_counts") else {
        return;
    };
    let o = QemuOptions {
        timeout: Some(Duration::from_millis(500)),
        ..quiet_qemu()
    };
    let p = count_qemu(&cmd(&bin, &["spin", "1000"]), &o).unwrap();
    assert_eq!(p.outcome, Some(RunOutcome::TimedOut { millis: 500 }));
    // The plugin writes a full snapshot when told to stop: edges are kept.
    assert_loop_counts(&p, &bin, 1000, Some(999));
    assert!(
        p.backend_detail.contains("stopped at the timeout"),
        "{}",
        p.backend_detail
    );
    assert_nothing_left(&bin);
}

/// An outside SIGKILL to QEMU (nothing can run in the plugin): the profile still comes back,
/// from the shared inline counters, with the signal recorded and nothing left running.
#[test]
fn qemu_killed_from_outside_keeps_counts() {
    let Some((_dir, bin)) = faults("qemu_killed_from_outside_keeps_counts") else {
        return;
    };
    let b = bin.clone();
    let killer = std::thread::spawn(move || {
        // Wait until QEMU has used 0.3 s of CPU (start-up and kernel(1000) take far less;
        // then it spins), so the kill lands in the endless loop, then SIGKILL that pid.
        for _ in 0..1000 {
            if let Some(&pid) = processes_naming(&b).first() {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                let f: Vec<&str> = stat
                    .rsplit_once(')')
                    .map_or(vec![], |(_, r)| r.split_whitespace().collect());
                // Fields after the comm: state ppid ... utime is the 12th, stime the 13th.
                let ticks: u64 = f
                    .get(11..13)
                    .map_or(0, |t| t.iter().map(|x| x.parse::<u64>().unwrap_or(0)).sum());
                if ticks >= 30 {
                    let st = Command::new("kill")
                        .args(["-KILL", &pid.to_string()])
                        .status()
                        .expect("run kill");
                    return st.success();
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    });
    let o = QemuOptions {
        timeout: Some(Duration::from_secs(30)),
        ..quiet_qemu()
    };
    let probe = count_qemu(&cmd(&bin, &["exit3", "10"]), &quiet_qemu()).unwrap();
    let r = count_qemu(&cmd(&bin, &["spin", "1000"]), &o);
    assert!(killer.join().unwrap(), "the test could not kill QEMU");
    if plugin_api(&probe) >= 2 {
        // Plugin API v4 keeps counts in QEMU's per-vCPU memory: they die with QEMU, and the
        // error says so (and how to keep them).
        let e = r.expect_err("an outside SIGKILL under API v4 is an error");
        assert!(e.to_string().contains("lost"), "{e}");
        assert_nothing_left(&bin);
        return;
    }
    let p = r.unwrap();
    assert_eq!(
        p.outcome,
        Some(RunOutcome::Signaled {
            signal: 9,
            name: "SIGKILL".into()
        })
    );
    assert_loop_counts(&p, &bin, 1000, None);
    assert!(p.edges.is_empty());
    assert!(
        p.backend_detail.contains("without QEMU's exit hook"),
        "{}",
        p.backend_detail
    );
    assert_eq!(guest_threads(&p), Some(1), "{}", p.backend_detail);
    assert_nothing_left(&bin);
}

#[test]
fn bad_commands_are_clear_errors() {
    let e = count_qemu(&["/nonexistent/prog".into()], &quiet_qemu()).unwrap_err();
    assert!(matches!(e, ExactError::CommandNotFound { .. }), "{e}");
    assert!(e.to_string().contains("/nonexistent/prog"));
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("data.txt");
    std::fs::write(&f, "not a program").unwrap();
    let e = count_qemu(&[f.clone().into()], &quiet_qemu()).unwrap_err();
    assert!(matches!(e, ExactError::NotExecutable { .. }), "{e}");
    let e = count_callgrind(&[f.into()], &CallgrindOptions::default()).unwrap_err();
    assert!(matches!(e, ExactError::NotExecutable { .. }), "{e}");
    let e = count_qemu(&[], &quiet_qemu()).unwrap_err();
    assert!(matches!(e, ExactError::EmptyCommand));
    let e = count_qemu(
        &["sh".into()],
        &QemuOptions {
            qemu: None,
            plugin: Some("/nonexistent/plugin.so".into()),
            ..quiet_qemu()
        },
    )
    .unwrap_err();
    assert!(matches!(e, ExactError::PluginMissing { .. }), "{e}");
}

/// Address of the data symbol `sym` in `bin` (`nm`): with `-no-pie` it is the guest virtual
/// address QEMU runs it at.
fn nm_symbol(bin: &Path, sym: &str) -> u64 {
    let out = Command::new("nm").arg(bin).output().expect("run nm");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[2] == sym).then(|| u64::from_str_radix(f[0], 16).unwrap())
        })
        .unwrap_or_else(|| panic!("nm shows no {sym} in {}", bin.display()))
}

/// `memwalk`'s `buf` array: 1 MiB.
const BUF_BYTES: u64 = 1 << 20;

/// Everything a traced run of `memwalk` shows about its data accesses.
#[derive(Default)]
struct MemRecorder {
    counter: TraceCounter,
    main: Option<ModuleIdx>,
    name: String,
    buf: u64,
    /// Accesses to `buf`: (address, size, store, instruction svma).
    in_buf: Vec<(u64, u8, bool, u64)>,
    /// Accesses outside `buf` by main-module instructions: instruction svma -> count.
    elsewhere: HashMap<u64, u64>,
    accesses: u64,
    /// Some block carried an access whose instruction index was out of its block.
    bad_index: bool,
    /// Accesses were not in non-decreasing instruction order within a block.
    out_of_order: bool,
}

impl BlockVisitor for MemRecorder {
    fn module(&mut self, idx: ModuleIdx, module: &Module) {
        if module.file_name() == self.name {
            self.main = Some(idx);
        }
        self.counter.module(idx, module);
    }
    fn block(&mut self, b: &TraceBlock<'_>) {
        self.counter.block(b);
        self.accesses += b.mem.len() as u64;
        if b.mem.windows(2).any(|w| w[0].insn > w[1].insn) {
            self.out_of_order = true;
        }
        for a in b.mem {
            let Some(&svma) = b.instructions.get(a.insn as usize) else {
                self.bad_index = true;
                continue;
            };
            if (self.buf..self.buf + BUF_BYTES).contains(&a.addr) {
                self.in_buf.push((a.addr, a.size, a.store, svma.0));
            } else if b.module.is_some() && b.module == self.main {
                *self.elsewhere.entry(svma.0).or_insert(0) += 1;
            }
        }
    }
    fn end(&mut self, o: &RunOutcome) {
        self.counter.end(o);
    }
}

fn memwalk(test: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    if !need(test, &["qemu-x86_64", "gcc", "objdump", "nm"]) {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let bin = compile_with(dir.path(), "memwalk", &["-no-pie"]);
    Some((dir, bin))
}

/// Oracle: the C source. `fill` stores 8 bytes at `buf + 64 i` for i < lines, in order;
/// `walk` then loads the same addresses `passes` times, in order; nothing else touches `buf`.
/// Outside `buf`, the only accesses by the two functions are their `ret`s (one stack load
/// per call, per objdump). The trace with memory also sums to counting mode's counts.
#[test]
fn memory_trace_matches_the_source() {
    let Some((_dir, bin)) = memwalk("memory_trace_matches_the_source") else {
        return;
    };
    let (bytes, passes) = (8192u64, 3u64);
    let lines = bytes / 64;
    let c = cmd(&bin, &[&bytes.to_string(), &passes.to_string()]);
    let mut r = MemRecorder {
        name: bin.file_name().unwrap().to_str().unwrap().into(),
        buf: nm_symbol(&bin, "buf"),
        ..Default::default()
    };
    let o = QemuOptions {
        trace_memory: true,
        ..quiet_qemu()
    };
    let outcome = trace_qemu(&c, &o, &mut r).unwrap();
    assert_eq!(outcome, RunOutcome::Exited { code: 0 });
    assert!(!r.bad_index && !r.out_of_order);
    let fill: Vec<(u64, String)> = objdump_function(&bin, "fill");
    let walk: Vec<(u64, String)> = objdump_function(&bin, "walk");
    let fill_addrs: Vec<u64> = fill.iter().map(|x| x.0).collect();
    let walk_addrs: Vec<u64> = walk.iter().map(|x| x.0).collect();
    let mut want = Vec::new();
    for i in 0..lines {
        want.push((r.buf + 64 * i, 8u8, true));
    }
    for _ in 0..passes {
        for i in 0..lines {
            want.push((r.buf + 64 * i, 8u8, false));
        }
    }
    let got: Vec<(u64, u8, bool)> = r.in_buf.iter().map(|&(a, s, st, _)| (a, s, st)).collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "accesses to buf differ from the source's");
    for &(_, _, store, svma) in &r.in_buf {
        let f = if store { &fill_addrs } else { &walk_addrs };
        assert!(f.contains(&svma), "access to buf by {svma:#x}");
    }
    for f in [&fill, &walk] {
        let rets: Vec<u64> = f
            .iter()
            .filter(|(_, t)| t.starts_with("ret"))
            .map(|x| x.0)
            .collect();
        let mut other: Vec<(u64, u64)> = f
            .iter()
            .filter_map(|(a, _)| r.elsewhere.get(a).map(|&n| (*a, n)))
            .collect();
        other.sort();
        // One call each: exactly one return, whose stack load is the only other access.
        assert_eq!(other.len(), 1, "{other:x?}");
        assert!(rets.contains(&other[0].0) && other[0].1 == 1, "{other:x?}");
    }
    // Stack, loader and libc accesses exist too.
    assert!(r.accesses > r.in_buf.len() as u64 + 1000, "{}", r.accesses);
    // The same run counted: per-instruction sums from the memory trace are exact.
    let p = count_qemu(&c, &quiet_qemu()).unwrap();
    let tm = r.main.expect("main module announced");
    let from_trace: HashMap<u64, u64> = r
        .counter
        .counts
        .iter()
        .filter(|((m, _), _)| *m == Some(tm))
        .map(|((_, s), c)| (s.0, *c))
        .collect();
    assert_eq!(from_trace, main_counts(&p, &bin));
    // Without trace_memory no block carries accesses.
    let mut plain = MemRecorder {
        name: r.name.clone(),
        buf: r.buf,
        ..Default::default()
    };
    trace_qemu(&c, &quiet_qemu(), &mut plain).unwrap();
    assert_eq!(plain.accesses, 0);
    assert_eq!(plain.counter.counts, r.counter.counts);
}

/// Cache misses per function under a small configured cache (64-byte lines; L1D 4 KiB
/// 4-way = 16 sets; LLC 64 KiB 8-way = 128 sets), derived by hand from the source's pattern
/// (one access per line, in address order) and LRU:
/// * fill's stores touch each line for the first time: `lines` L1 and LLC misses;
/// * walk, 32 lines (2 per L1 set, fits): every load hits;
/// * walk, 256 lines (16 per L1 set > 4 ways: LRU evicts each line before its reuse; 2 per
///   LLC set, fits): every load misses L1, none the LLC;
/// * walk, 2048 lines (16 per LLC set > 8 ways): every load misses both.
///
/// The `ret` of each function (a stack load) is left out of the sums.
#[test]
fn cache_model_misses_match_hand_derivation() {
    use proftrust_vpmu::{CacheConfig, CycleModel, InstrTimer, InstrTiming};
    let Some((_dir, bin)) = memwalk("cache_model_misses_match_hand_derivation") else {
        return;
    };
    struct Timed {
        timer: InstrTimer,
        main: Option<ModuleIdx>,
        name: String,
        fill: Vec<u64>,
        walk: Vec<u64>,
        out: Vec<InstrTiming>,
        /// (fill L1, fill LLC, walk L1, walk LLC) misses.
        misses: [u64; 4],
    }
    impl BlockVisitor for Timed {
        fn module(&mut self, idx: ModuleIdx, module: &Module) {
            self.timer.module(idx, module);
            if module.file_name() == self.name {
                self.main = Some(idx);
            }
        }
        fn block(&mut self, b: &TraceBlock<'_>) {
            self.timer.time_block(b, &mut self.out);
            assert_eq!(self.out.len(), b.instructions.len());
            if b.module.is_none() || b.module != self.main {
                return;
            }
            for (s, t) in b.instructions.iter().zip(&self.out) {
                let k = if self.fill.contains(&s.0) {
                    0
                } else if self.walk.contains(&s.0) {
                    2
                } else {
                    continue;
                };
                self.misses[k] += t.l1_misses as u64;
                self.misses[k + 1] += t.llc_misses as u64;
            }
        }
    }
    let mut cfg = CacheConfig::default();
    cfg.line_size = 64;
    cfg.l1_size = 4096;
    cfg.l1_ways = 4;
    cfg.llc_size = 65536;
    cfg.llc_ways = 8;
    let not_ret = |f: &str| -> Vec<u64> {
        objdump_function(&bin, f)
            .into_iter()
            .filter(|(_, t)| !t.starts_with("ret"))
            .map(|x| x.0)
            .collect()
    };
    // The host simulating the traced addresses, and the plugin simulating where the
    // accesses happen (outcome words): the same hand-derived misses.
    for (plugin, lines, passes, walk_l1, walk_llc) in [false, true].into_iter().flat_map(|p| {
        [
            (p, 32u64, 4u64, 0u64, 0u64),
            (p, 256, 3, 256 * 3, 0),
            (p, 2048, 2, 2048 * 2, 2048 * 2),
        ]
    }) {
        let o = QemuOptions {
            trace_memory: true,
            cache: plugin.then(|| cfg.geometry()),
            ..quiet_qemu()
        };
        let mut t = Timed {
            timer: InstrTimer::new(CycleModel::flat(1), Some(cfg.clone())),
            main: None,
            name: bin.file_name().unwrap().to_str().unwrap().into(),
            fill: not_ret("fill"),
            walk: not_ret("walk"),
            out: Vec::new(),
            misses: [0; 4],
        };
        let c = cmd(&bin, &[&(lines * 64).to_string(), &passes.to_string()]);
        let outcome = trace_qemu(&c, &o, &mut t).unwrap();
        assert_eq!(outcome, RunOutcome::Exited { code: 0 });
        assert_eq!(
            t.misses,
            [lines, lines, walk_l1, walk_llc],
            "{lines} lines x {passes} passes, plugin simulation {plugin}: (fill L1, fill LLC, walk L1, walk LLC)"
        );
        let st = t.timer.cache_stats().unwrap();
        assert!(st.accesses > lines * (passes + 1), "{st:?}");
    }
}

/// The plugin's cache simulation (`QemuOptions::cache`) against the host's on the same
/// run: with `cache_with_addresses` every access arrives with its address and the level
/// the plugin served it at, and an independent host-side `Caches` over the addresses, in
/// trace order, must give every level (single-threaded programs: the trace order is the
/// execution order). Two geometries: the default, and a tiny one where every level occurs
/// often.
#[test]
fn plugin_cache_levels_equal_the_hosts() {
    use proftrust_cachesim::{Caches, Geometry};
    let Some((_dir, bin)) = memwalk("plugin_cache_levels_equal_the_hosts") else {
        return;
    };
    struct Check {
        host: Caches,
        accesses: u64,
        /// Accesses per level, as the plugin said.
        levels: [u64; 3],
        mismatches: u64,
        missing: u64,
    }
    impl BlockVisitor for Check {
        fn block(&mut self, b: &TraceBlock<'_>) {
            for a in b.mem {
                self.accesses += 1;
                let want = self.host.access(a.addr, u32::from(a.size));
                match a.level {
                    Some(l) => {
                        self.levels[usize::from(l.min(2))] += 1;
                        self.mismatches += u64::from(l != want);
                    }
                    None => self.missing += 1,
                }
            }
        }
    }
    let tiny = Geometry {
        line_size: 32,
        l1_size: 1024,
        l1_ways: 2,
        llc_size: 16384,
        llc_ways: 4,
    };
    for g in [Geometry::default(), tiny] {
        let o = QemuOptions {
            trace_memory: true,
            cache: Some(g),
            cache_with_addresses: true,
            ..quiet_qemu()
        };
        let mut c = Check {
            host: Caches::new(&g),
            accesses: 0,
            levels: [0; 3],
            mismatches: 0,
            missing: 0,
        };
        let outcome = trace_qemu(&cmd(&bin, &["1048576", "2"]), &o, &mut c).unwrap();
        assert_eq!(outcome, RunOutcome::Exited { code: 0 });
        // memwalk fills and walks 1 MiB twice: 16384 lines of 64 bytes per pass.
        assert!(c.accesses > 3 * 16384, "{g:?}: {} accesses", c.accesses);
        assert_eq!((c.missing, c.mismatches), (0, 0), "{g:?}: {:?}", c.levels);
        assert!(c.levels.iter().all(|&n| n > 1000), "{g:?}: {:?}", c.levels);
    }
}

/// A plugin QEMU cannot load (a file that is no shared object): QEMU exits before the guest
/// runs, and both counting and tracing say so instead of returning an empty profile.
#[test]
fn a_plugin_qemu_cannot_load_is_an_error() {
    if !need("a_plugin_qemu_cannot_load_is_an_error", &["qemu-x86_64"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bogus = dir.path().join("libbogus.so");
    std::fs::write(&bogus, "not a shared object").unwrap();
    let o = QemuOptions {
        plugin: Some(bogus),
        ..quiet_qemu()
    };
    let e = count_qemu(&["/bin/true".into()], &o).unwrap_err();
    assert!(matches!(e, ExactError::StartFailed { .. }), "{e}");
    assert!(e.to_string().contains("did not load the plugin"), "{e}");
    struct Blocks(u64);
    impl BlockVisitor for Blocks {
        fn block(&mut self, _b: &TraceBlock<'_>) {
            self.0 += 1;
        }
    }
    let mut v = Blocks(0);
    let e = trace_qemu(&["/bin/true".into()], &o, &mut v).unwrap_err();
    assert!(matches!(e, ExactError::StartFailed { .. }), "{e}");
    assert!(e.to_string().contains("did not load the plugin"), "{e}");
    assert_eq!(v.0, 0);
}

/// The plugin's `mode=idle` (the benchmark's floor: the translation hook alone) loads,
/// runs the program unchanged and writes nothing: the program's output and exit status are
/// those of plain QEMU.
#[test]
fn idle_mode_runs_the_program_unchanged() {
    if !need(
        "idle_mode_runs_the_program_unchanged",
        &["qemu-x86_64", "gcc"],
    ) {
        return;
    }
    let q = proftrust_exact::find_qemu().expect("a qemu-x86_64 with plugins");
    let plugin = proftrust_exact::find_plugin().expect("the plugin is built");
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "mix");
    let run = |plugin_arg: Option<String>| {
        let mut c = Command::new(&q);
        if let Some(a) = plugin_arg {
            c.arg("-plugin").arg(a);
        }
        c.arg(&bin).arg("7").output().unwrap()
    };
    let plain = run(None);
    let idle = run(Some(format!("{},mode=idle", plugin.display())));
    assert_eq!(idle.status.code(), plain.status.code());
    assert_eq!(idle.stdout, plain.stdout);
    assert!(
        idle.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&idle.stderr)
    );
    // mix.c prints two numbers and exits 0.
    assert_eq!(plain.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&plain.stdout)
            .split_whitespace()
            .count(),
        2
    );
}

/// Main-binary instruction counts, edges and calls of `p`, keyed by SVMA.
#[allow(clippy::type_complexity)]
fn main_graph(
    p: &ExactProfile,
    bin: &Path,
) -> (
    HashMap<u64, u64>,
    Vec<(u64, u64, u64)>,
    Vec<(u64, u64, u64)>,
) {
    let m = Some(main_module(p, bin));
    let mut edges: Vec<_> = p
        .edges
        .iter()
        .filter(|e| e.from.module == m && e.to.module == m)
        .map(|e| (e.from.svma.0, e.to.svma.0, e.count))
        .collect();
    let mut calls: Vec<_> = p
        .calls
        .iter()
        .filter(|c| c.site.module == m && c.target.module == m)
        .map(|c| (c.site.svma.0, c.target.svma.0, c.count))
        .collect();
    edges.sort();
    calls.sort();
    (main_counts(p, bin), edges, calls)
}

/// Edges and calls derived from block counts (plugin API v4: only unexpected successors are
/// seen by a callback) equal the ones QEMU 7.2's callback per block records, number for
/// number, in the main binary of the test programs, a threaded run and the bundled
/// workloads (`workloads/*.c`); and both agree with the loop oracle.
#[test]
fn derived_edges_equal_recorded_edges() {
    if !need(
        "derived_edges_equal_recorded_edges",
        &["qemu-x86_64", "gcc", "objdump"],
    ) {
        return;
    }
    let qs = qemus();
    if qs.len() < 2 {
        proftrust_testkit::skip!(
            "derived_edges_equal_recorded_edges: needs QEMU 7.2 (/usr/bin/qemu-x86_64) and a QEMU >= 9.2 with plugins (scripts/install-qemu.sh)"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut runs: Vec<(String, PathBuf, Vec<&str>)> = vec![
        ("loop".into(), compile(dir.path(), "loop"), vec!["5000"]),
        ("mix".into(), compile(dir.path(), "mix"), vec!["3000"]),
        (
            "threads".into(),
            compile(dir.path(), "faults"),
            vec!["threads", "20000"],
        ),
        // Returns to many sites from a function with two exits, a tail call, calls
        // through a table, computed gotos, longjmp, a signal handler: the entries API v4
        // passes silently by predecessor checks.
        (
            "returns".into(),
            compile(dir.path(), "returns"),
            vec!["3000"],
        ),
    ];
    for w in ["hmmer", "soplex", "omnet", "mcf", "libsvm"] {
        let out = dir.path().join(w);
        let st = Command::new("gcc")
            .args(["-O2", "-g", "-fno-omit-frame-pointer", "-o"])
            .arg(&out)
            .arg(root.join(format!("workloads/{w}.c")))
            .arg("-lm")
            .status()
            .expect("run gcc");
        assert!(st.success(), "gcc failed on workloads/{w}.c");
        runs.push((w.into(), out, vec!["2"]));
    }
    // The third-party workloads when `proftrust --workload` has built them (a few minutes
    // of cargo; scripts/bench-exact.sh does): real code with calls through the PLT,
    // indirect dispatch (Lua), deep call chains (SQLite). Their runs differ between two
    // QEMUs (and even between two runs: Rust's std start-up, allocation sizes), so there
    // the check is the derivation's own: every execution placed (no WARNING: the flow sums
    // close on every block and address), and edges and calls found.
    // Where `--workload` builds them (crates/cli/src/workload.rs, `workload_dir`).
    let wl_dir = std::env::var_os("PROFTRUST_WORKLOAD_DIR")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME")
                .map(std::path::PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|x| x.join("proftrust/workloads"))
        })
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| std::path::PathBuf::from(h).join(".cache/proftrust/workloads"))
        })
        .unwrap_or_else(|| root.join("target/workloads"));
    let tp = wl_dir.join("thirdparty/target/release");
    for w in ["bzip2", "zlib", "lua", "sqlite", "regex", "sort"] {
        let exe = tp.join(w);
        if !exe.is_file() {
            proftrust_testkit::skip!(
                "derived_edges_equal_recorded_edges: third-party workload {w} not built (proftrust truth --workload {w} builds it)"
            );
            continue;
        }
        let o = QemuOptions {
            qemu: Some(qs[0].clone()),
            ..quiet_qemu()
        };
        let p = count_qemu(&cmd(&exe, &["1"]), &o).unwrap();
        assert!(plugin_api(&p) >= 4, "{}", p.backend_detail);
        assert!(
            !p.backend_detail.contains("WARNING"),
            "{w}: {}",
            p.backend_detail
        );
        let (_, edges, calls) = main_graph(&p, &exe);
        assert!(
            edges.len() > 1000 && calls.len() > 50,
            "{w}: {} edges, {} calls",
            edges.len(),
            calls.len()
        );
    }
    for (name, bin, args) in &runs {
        let graphs: Vec<_> = qs
            .iter()
            .map(|q| {
                // One CPU model for both: `max` differs between QEMU versions, and code
                // that picks an implementation by CPUID (Rust's std and memchr do) would
                // run different instructions.
                let o = QemuOptions {
                    qemu: Some(q.clone()),
                    cpu: Some("Haswell".into()),
                    ..quiet_qemu()
                };
                let p = count_qemu(&cmd(bin, args), &o).unwrap();
                assert!(
                    !p.backend_detail.contains("WARNING"),
                    "{}",
                    p.backend_detail
                );
                (plugin_api(&p), main_graph(&p, bin))
            })
            .collect();
        let (api0, g0) = &graphs[0];
        let (api1, g1) = &graphs[1];
        assert_ne!(api0, api1, "{name}: both runs used plugin API v{api0}");
        assert!(g0.1.len() > 5 && !g0.2.is_empty(), "{name}: {:?}", g0.2);
        assert_eq!(g0.0, g1.0, "{name}: instruction counts differ");
        assert_eq!(g0.1, g1.1, "{name}: edges differ (API v{api0} vs v{api1})");
        assert_eq!(g0.2, g1.2, "{name}: calls differ (API v{api0} vs v{api1})");
    }
}

/// API v4's predecessor checks (a block first entered after a return, an indirect jump or
/// call, or from the unlisted side of a branch passes silently whenever that same block
/// precedes it again) leave far fewer callbacks than there are such transfers, each of
/// which called back before. Oracle: the executions of the `ret`, `jmp *` and `call *`
/// instructions of `returns.c`'s own functions (objdump; counts from the run, which
/// `derived_edges_equal_recorded_edges` checks against API v1's callback per block). The
/// plugin's own count of every callback of the run, start-up and libc included
/// (`PROFTRUST_PLUGIN_STATS`), stays below half of them (before: above all of them), and
/// the run's counts are exact (every silent entry placed by the derivation).
#[test]
fn predecessor_checks_silence_returns() {
    if !need(
        "predecessor_checks_silence_returns",
        &["qemu-x86_64", "gcc", "objdump"],
    ) {
        return;
    }
    let q = proftrust_exact::find_qemu().expect("a qemu-x86_64 with plugins");
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "returns");
    let n = "30000";
    let p = count_qemu(&cmd(&bin, &[n]), &quiet_qemu()).unwrap();
    if plugin_api(&p) < 4 {
        proftrust_testkit::skip!(
            "predecessor_checks_silence_returns: needs a QEMU >= 9.2 with plugins (scripts/install-qemu.sh)"
        );
        return;
    }
    assert!(
        !p.backend_detail.contains("WARNING"),
        "{}",
        p.backend_detail
    );
    let counts = main_counts(&p, &bin);
    let mut dynamic = 0u64;
    for f in [
        "main",
        "two_exits",
        "leaf_a",
        "leaf_b",
        "leaf_c",
        "tail",
        "interp",
        "jump_out",
    ] {
        let insns = objdump_function(&bin, f);
        assert!(!insns.is_empty(), "objdump shows no {f}");
        for (a, text) in insns {
            let t = text
                .trim_start_matches("bnd ")
                .trim_start_matches("notrack ");
            if t == "ret" || t.starts_with("jmp    *") || t.starts_with("call   *") {
                dynamic += counts.get(&a).copied().unwrap_or(0);
            }
        }
    }
    let err = plugin_stats(&q, &bin, n);
    // "proftrust-qemu-plugin: N block executions, M callbacks (x%), 0 underived; ..."
    let callbacks = stat_after(&err, " block executions, ");
    assert!(err.contains(", 0 underived"), "{err}");
    // Per iteration: 9 returns (two_exits three times, leaf_a, two table calls, interp,
    // jump_out or a second return from setjmp's caller...), 16 computed gotos, 2 calls
    // through the table.
    assert!(
        dynamic > 30000 * 20,
        "returns.c should execute over 20 returns and indirect transfers per iteration: {dynamic}"
    );
    assert!(
        2 * callbacks < dynamic,
        "{callbacks} callbacks for {dynamic} returns and indirect transfers"
    );
}

/// API v4 leaves out a block's slot store where every silent entry finds the slot holding
/// what the block would store. Oracle: `loop.c`'s loop body is one block (objdump: from the
/// backward jump's target to the jump) that lists its own start, and its 3n taken back
/// edges (hand count, see `qemu_counted_loop_is_exact`) each enter that block silently, so
/// the plugin's statistics count at least 3n executions without a slot store; the counts
/// stay exact (nothing underived; `derived_edges_equal_recorded_edges` compares them with
/// API v1's number for number).
#[test]
fn known_slots_are_not_stored() {
    if !need(
        "known_slots_are_not_stored",
        &["qemu-x86_64", "gcc", "objdump"],
    ) {
        return;
    }
    let q = proftrust_exact::find_qemu().expect("a qemu-x86_64 with plugins");
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "loop");
    let n = 200_000u64;
    let p = count_qemu(&cmd(&bin, &[&n.to_string()]), &quiet_qemu()).unwrap();
    if plugin_api(&p) < 4 {
        proftrust_testkit::skip!(
            "known_slots_are_not_stored: needs a QEMU >= 9.2 with plugins (scripts/install-qemu.sh)"
        );
        return;
    }
    let (body, head, jump) = kernel_loop(&bin);
    let counts = main_counts(&p, &bin);
    assert_eq!(
        counts.get(&jump).copied(),
        Some(3 * n + 3),
        "{body:?} from {head:#x}"
    );
    let err = plugin_stats(&q, &bin, &n.to_string());
    // "proftrust-qemu-plugin: N block executions, ...; executions without a slot store N (x%)"
    let elided = stat_after(&err, "executions without a slot store ");
    let blocks = stat_after(&err, "proftrust-qemu-plugin: ");
    assert!(err.contains(", 0 underived"), "{err}");
    assert!(
        elided >= 3 * n && elided <= blocks,
        "{elided} executions without a slot store of {blocks}; the loop's back edges alone are {}",
        3 * n
    );
}

/// The plugin's statistics line (`PROFTRUST_PLUGIN_STATS=1`, on stderr) of `bin ARG` run
/// under QEMU `q` with the plugin alone.
fn plugin_stats(q: &Path, bin: &Path, arg: &str) -> String {
    let plugin = proftrust_exact::find_plugin().unwrap();
    let out = Command::new(q)
        .arg("-plugin")
        .arg(format!("{},out=/dev/null", plugin.display()))
        .arg(bin)
        .arg(arg)
        .env("PROFTRUST_PLUGIN_STATS", "1")
        .output()
        .expect("run qemu");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The number right after `phrase` in the plugin's statistics `err`.
fn stat_after(err: &str, phrase: &str) -> u64 {
    err.split(phrase)
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {phrase:?} in the plugin statistics {err:?}"))
}

/// The main binary's part of a memory trace, per thread: a digest of its blocks in order
/// (first instruction, length, each access's instruction, size, direction and page offset:
/// the guest's stack and mappings move with the address space layout, whole pages at a
/// time) and the blocks' count.
#[derive(Default)]
struct MainDigest {
    name: String,
    main: Option<ModuleIdx>,
    per_tid: HashMap<u32, (u64, u64)>,
    counter: TraceCounter,
}

impl BlockVisitor for MainDigest {
    fn module(&mut self, idx: ModuleIdx, module: &Module) {
        if module.file_name() == self.name {
            self.main = Some(idx);
        }
        self.counter.module(idx, module);
    }
    fn block(&mut self, b: &TraceBlock<'_>) {
        self.counter.block(b);
        if b.module.is_none() || b.module != self.main {
            return;
        }
        let (h, n) = self
            .per_tid
            .entry(b.tid)
            .or_insert((0xcbf2_9ce4_8422_2325, 0));
        let mut mix = |v: u64| *h = (*h ^ v).wrapping_mul(0x0100_0000_01b3);
        mix(b.instructions[0].0);
        mix(b.instructions.len() as u64);
        for a in b.mem {
            mix(a.level.map_or(7, u64::from) << 48
                | (a.insn as u64) << 32
                | (a.size as u64) << 16
                | (a.addr & 0xfff) << 1
                | a.store as u64);
        }
        *n += 1;
    }
    fn end(&mut self, o: &RunOutcome) {
        self.counter.end(o);
    }
}

impl MainDigest {
    /// The per-thread digests, sorted (thread ids differ between runs).
    fn threads(&self) -> Vec<(u64, u64)> {
        let mut v: Vec<_> = self.per_tid.values().copied().collect();
        v.sort();
        v
    }

    /// Per-instruction counts of the main binary.
    fn main_counts(&self) -> HashMap<u64, u64> {
        self.counter.main_counts(&self.name)
    }
}

/// The trace ring (default size, and the smallest, 1 MiB, which a trace of several MiB
/// wraps many times with QEMU waiting for room) and the pipe-only transport give the same
/// trace: with both plugin APIs, a single thread's blocks and accesses in the same order,
/// per-instruction counts of the main binary equal to the counting mode's, also when the
/// program forks (the child is not traced), execs or kills itself; and a multi-threaded
/// program's counts. Memory accesses as addresses, and as the plugin's cache outcomes.
#[test]
fn trace_ring_and_pipe_give_the_same_trace() {
    let Some((_dir, bin)) = faults("trace_ring_and_pipe_give_the_same_trace") else {
        return;
    };
    let name = bin.file_name().unwrap().to_str().unwrap().to_string();
    let caches = [None, Some(proftrust_cachesim::Geometry::default())];
    for (qemu, cache) in qemus()
        .into_iter()
        .flat_map(|q| caches.map(|c| (q.clone(), c)))
    {
        for (mode, n) in [
            ("fork", 1_000_000u64),
            ("exec", 300_000),
            ("kill", 300_000),
            ("threads", 200_000),
        ] {
            let c = cmd(&bin, &[mode, &n.to_string()]);
            // The trace is of the started process alone; its counts are compared with a
            // count of the started process alone (`follow: false`).
            let base = QemuOptions {
                qemu: Some(qemu.clone()),
                trace_memory: true,
                cache,
                follow: false,
                ..quiet_qemu()
            };
            let counted = count_qemu(&c, &base).unwrap();
            let mut seen = Vec::new();
            for ring in [0, 1 << 20, proftrust_exact::TRACE_RING_BYTES] {
                let o = QemuOptions {
                    trace_ring_bytes: ring,
                    ..base.clone()
                };
                let mut d = MainDigest {
                    name: name.clone(),
                    ..Default::default()
                };
                let outcome = trace_qemu(&c, &o, &mut d)
                    .unwrap_or_else(|e| panic!("{mode}, ring {ring}: {e}"));
                assert_eq!(
                    Some(&outcome),
                    counted.outcome.as_ref(),
                    "{mode}, ring {ring}"
                );
                assert_eq!(
                    d.main_counts(),
                    main_counts(&counted, &bin),
                    "{mode}, ring {ring}, {}",
                    qemu.display()
                );
                seen.push((ring, d.threads()));
            }
            if mode == "threads" {
                // Threads wait for each other differently from run to run: their own
                // traces are compared through the counts only.
                assert!(seen.iter().all(|(_, t)| t.len() == 5), "{mode}: {seen:?}");
                continue;
            }
            let (_, pipe) = &seen[0];
            assert_eq!(pipe.len(), 1, "{mode}");
            assert!(pipe[0].1 as f64 > n as f64, "{mode}: {pipe:?}");
            for (ring, t) in &seen[1..] {
                assert_eq!(t, pipe, "{mode}: ring of {ring} bytes against the pipe");
            }
        }
    }
    assert_nothing_left(&bin);
}
