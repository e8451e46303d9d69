//! Process trees and scripts on both sides of an audit (docs/processes.md, "Process
//! trees"; issue 30), on Debian's own programs (`scripts/test.sh` installs them): a
//! `#!/usr/bin/python3` script, a shell pipeline of `sort` and `uniq`, `sh -c 'exec gawk'`,
//! `bzip2` (its time in libbz2), callgrind on `lua5.4` (libm, stripped libraries), and the
//! perf-first workflow (`audit --samples perf.data -- PROGRAM`). Each report's two sides
//! must hold the same processes, checked against what the command line makes by
//! construction (a pipeline of three commands forks three children, ...), with the rows
//! per process.

use proftrust_testkit::{need, skip_test};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn proftrust() -> Command {
    Command::new(env!("CARGO_BIN_EXE_proftrust"))
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `audit --backend BACKEND --json -o - [ARGS] -- CMD` in `dir`: the JSON report (on stdout,
/// the program's own output moved to stderr).
fn audit_json(dir: &Path, backend: &str, args: &[&str], cmd: &[&str]) -> Value {
    let o = proftrust()
        .current_dir(dir)
        .args(["-q", "audit", "--backend", backend, "--json", "-o", "-"])
        .args(args)
        .arg("--")
        .args(cmd)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)))
}

/// The processes rows as (name, start, sampled images, exact images, compared).
fn rows(v: &Value) -> Vec<(String, String, u64, u64, bool)> {
    v["processes"]
        .as_array()
        .unwrap_or_else(|| panic!("no processes rows: {v}"))
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["start"].as_str().unwrap().to_string(),
                r["sampled_images"].as_u64().unwrap(),
                r["exact_images"].as_u64().unwrap(),
                r.get("left_out").is_none(),
            )
        })
        .collect()
}

/// Every row compared, the same number of images on both sides: the two sides cover the
/// same processes.
fn assert_same_processes(label: &str, v: &Value) {
    for r in rows(v) {
        assert!(r.4 && r.2 == r.3, "{label}: {r:?} in {}", v["processes"]);
    }
    let w = v["warnings"].to_string();
    assert!(!w.contains("left out of both sides"), "{label}: {w}");
    assert!(!w.contains("outside the audited program"), "{label}: {w}");
}

/// A text file of `n` numbered lines in a pseudo-random order.
fn numbers(dir: &Path, n: u64) -> PathBuf {
    let p = dir.join("f");
    let mut s = String::new();
    let mut x: u64 = 12345;
    for _ in 0..n {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s.push_str(&format!("{}\n", (x >> 33) % 5000));
    }
    std::fs::write(&p, s).unwrap();
    p
}

/// `audit -- ./s.py` of a `#!/usr/bin/python3` script: both sides run the interpreter on
/// the script (QEMU cannot run a script itself: it failed with "QEMU said nothing"); the
/// process is named after the script as the kernel names it, the audited binary is the
/// interpreter holding the samples, and the report says so.
#[test]
fn audit_of_a_python_script_runs_its_interpreter_on_both_sides() {
    let t = "audit_of_a_python_script_runs_its_interpreter_on_both_sides";
    if !need(t, &["qemu-x86_64"]) {
        return;
    }
    if !Path::new("/usr/bin/python3").is_file() {
        skip_test(t, "no /usr/bin/python3 (apt-get install python3)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let script = d.path().join("s.py");
    std::fs::write(
        &script,
        "#!/usr/bin/python3\ns = 0\nfor i in range(300000):\n    s += i * i\nprint(s)\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let v = audit_json(d.path(), "qemu", &[], &["./s.py"]);
    assert_same_processes("s.py", &v);
    assert_eq!(
        rows(&v),
        vec![("s.py".into(), "started".into(), 1, 1, true)]
    );
    let reason = v["config"]["binary_reason"].as_str().unwrap();
    assert!(reason.starts_with("python3"), "{reason}");
    assert!(
        v["metrics"]["samples"].as_u64().unwrap() > 100,
        "{}",
        v["metrics"]
    );
}

/// `audit -- sh -c 'sort f | uniq -c | sort -rn >/dev/null'`: the shell, its three forked
/// children, which exec two sorts and a uniq, on both sides (it was refused as "samples
/// and truth must come from the same program"). The rows by construction of the command
/// line; most of the work is the sorts'.
#[test]
fn audit_of_a_shell_pipeline_compares_the_same_processes() {
    let t = "audit_of_a_shell_pipeline_compares_the_same_processes";
    if !need(t, &["qemu-x86_64", "sort", "uniq", "sh"]) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    numbers(d.path(), 200_000);
    let v = audit_json(
        d.path(),
        "qemu",
        &["--binary", "/usr/bin/sort"],
        &["sh", "-c", "sort f | uniq -c | sort -rn >/dev/null"],
    );
    assert_same_processes("pipeline", &v);
    let mut r = rows(&v);
    r.sort();
    assert_eq!(
        r,
        vec![
            ("sh".into(), "forked, then exec".into(), 3, 3, true),
            ("sh".into(), "started".into(), 1, 1, true),
            ("sort".into(), "exec".into(), 2, 2, true),
            ("uniq".into(), "exec".into(), 1, 1, true),
        ]
    );
    let sort = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "sort")
        .unwrap();
    assert!(sort["exact_share"].as_f64().unwrap() > 0.5, "{sort}");
    assert_eq!(sort["exact_pids"].as_array().unwrap().len(), 2);
    assert_eq!(sort["sampled_pids"].as_array().unwrap().len(), 2);
}

/// `audit -- sh -c 'exec gawk ... f'`: the shell's image, then gawk's in the same process,
/// on both sides. The program's own output stays on stdout, exactly (issue 31: the report
/// was written into it), and the text report goes to stderr.
#[test]
fn audit_of_sh_exec_gawk_keeps_stdout_and_reports_on_stderr() {
    let t = "audit_of_sh_exec_gawk_keeps_stdout_and_reports_on_stderr";
    if !need(t, &["qemu-x86_64", "gawk", "sh"]) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let f = numbers(d.path(), 100_000);
    let sum: u64 = std::fs::read_to_string(&f)
        .unwrap()
        .lines()
        .map(|l| l.parse::<u64>().unwrap())
        .sum();
    let prog = "{s += $1} END {print s}";
    let o = proftrust()
        .current_dir(d.path())
        .args(["-q", "audit", "--backend", "qemu", "--", "sh", "-c"])
        .arg(format!("exec gawk '{prog}' f"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), format!("{sum}\n"));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("epsilon (function)"), "{err}");
    let v = audit_json(
        d.path(),
        "qemu",
        &[],
        &["sh", "-c", &format!("exec gawk '{prog}' f")],
    );
    assert_same_processes("exec gawk", &v);
    let mut r = rows(&v);
    r.sort();
    assert_eq!(
        r,
        vec![
            ("gawk".into(), "exec".into(), 1, 1, true),
            ("sh".into(), "started, then exec".into(), 1, 1, true),
        ]
    );
}

/// The build-id of an ELF file, as `readelf -n` prints it.
fn build_id(path: &Path) -> Option<String> {
    let o = Command::new("readelf").arg("-n").arg(path).output().ok()?;
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
}

/// `audit -- bzip2 -kf f`: the time is in libbz2, so that is the audited binary, stated
/// (it was refused with a false cause after the whole exact run). Oracle: libbz2's
/// build-id from `readelf -n`.
#[test]
fn audit_of_bzip2_audits_libbz2_where_the_samples_are() {
    let t = "audit_of_bzip2_audits_libbz2_where_the_samples_are";
    if !need(t, &["qemu-x86_64", "bzip2", "readelf"]) {
        return;
    }
    let lib = [
        "/usr/lib/x86_64-linux-gnu/libbz2.so.1.0",
        "/lib/x86_64-linux-gnu/libbz2.so.1.0",
    ]
    .iter()
    .map(Path::new)
    .find(|p| p.exists());
    let Some(lib) = lib else {
        skip_test(t, "no libbz2.so.1.0 (apt-get install libbz2-1.0)");
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let mut s = String::new();
    let mut x: u64 = 7;
    while s.len() < 2_000_000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        s.push_str(&format!("{:016x} {}\n", x, x % 977));
    }
    std::fs::write(d.path().join("f"), s).unwrap();
    let v = audit_json(d.path(), "qemu", &[], &["bzip2", "-kf", "f"]);
    assert_same_processes("bzip2", &v);
    let reason = v["config"]["binary_reason"].as_str().unwrap();
    assert!(reason.starts_with("libbz2.so.1.0"), "{reason}");
    assert!(reason.contains("the program bzip2"), "{reason}");
    // Named by the path the program mapped, not by a copy in perf's build-id cache.
    let binary = v["config"]["binary"].as_str().unwrap();
    assert!(
        binary.contains("/libbz2.so") && !binary.contains(".build-id"),
        "{binary}"
    );
    assert_eq!(
        v["config"]["build_id"].as_str(),
        build_id(lib).as_deref(),
        "{}",
        v["config"]
    );
}

/// `truth --backend callgrind -- lua5.4 -e ...`: lua links libm and is stripped, and both
/// failed with "cannot map .../libm.so.6"; now every object is mapped as callgrind wrote
/// it. Oracle: `callgrind_annotate` of a callgrind run of the same command, function by
/// function of libm (the sine the loop calls 20000 times): the same counts.
#[test]
fn truth_callgrind_of_lua_maps_libm_and_stripped_objects() {
    let t = "truth_callgrind_of_lua_maps_libm_and_stripped_objects";
    if !need(t, &["valgrind", "lua5.4", "callgrind_annotate"]) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let code = "local s = 0 for i = 1, 20000 do s = s + math.sin(i) end print(s)";
    let out = d.path().join("t.ptexact");
    let o = proftrust()
        .args(["-q", "truth", "--backend", "callgrind", "-o"])
        .arg(&out)
        .args(["--", "lua5.4", "-e", code])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let o = proftrust()
        .args(["read", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let ours: std::collections::BTreeMap<String, u64> = v["functions"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .iter()
        .filter(|f| {
            f["module"]
                .as_str()
                .is_some_and(|m| m.ends_with("libm.so.6"))
        })
        .map(|f| {
            (
                f["name"].as_str().unwrap().to_string(),
                f["instructions"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let cg = d.path().join("cg.out");
    let st = Command::new("valgrind")
        .args(["-q", "--tool=callgrind", "--dump-instr=yes"])
        .arg(format!("--callgrind-out-file={}", cg.display()))
        .args(["lua5.4", "-e", code])
        .output()
        .unwrap();
    assert!(st.status.success(), "{}", text(&st));
    let ann = Command::new("callgrind_annotate")
        .args(["--inclusive=no", "--threshold=100"])
        .arg(&cg)
        .output()
        .unwrap();
    let ann = String::from_utf8_lossy(&ann.stdout);
    // "1,689,901 (14.37%)  FILE:FUNCTION [OBJECT]" (the share may hold a space: "( 1.70%)";
    // a function's lines from other files, inlined there, carry no object): per function,
    // summed over its files.
    let mut theirs: std::collections::BTreeMap<String, u64> = Default::default();
    for l in ann.lines() {
        let Some((n, rest)) = l.trim_start().split_once(" (") else {
            continue;
        };
        let Some(loc) = rest
            .split_once(')')
            .and_then(|(_, r)| r.split_whitespace().next())
        else {
            continue;
        };
        let (Ok(n), Some(f)) = (n.replace(',', "").parse::<u64>(), loc.rsplit(':').next()) else {
            continue;
        };
        *theirs.entry(f.to_string()).or_default() += n;
    }
    let hot: Vec<(&String, &u64)> = ours.iter().filter(|(_, &n)| n > 20_000).collect();
    assert!(
        !hot.is_empty(),
        "no libm function with the loop's work: {ours:?}"
    );
    for (name, n) in hot {
        assert_eq!(Some(n), theirs.get(name), "{name}: {ann}");
    }
}

/// `audit --samples perf.data -- ./forker N`: perf recorded the program (perf's own
/// process and its child before the exec are not the program), the audit counts it
/// exactly itself (no --truth: it demanded one), and both sides hold the program and its
/// forked child, whose work (child_work, 3/4 of the run) is compared on both sides.
#[test]
fn audit_perf_first_counts_the_recorded_program_with_its_child() {
    let t = "audit_perf_first_counts_the_recorded_program_with_its_child";
    if !need(t, &["gcc", "qemu-x86_64", "perf"]) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let forker = proftrust_testkit::compile_c(
        d.path(),
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c"),
        "forker",
        &["-O1", "-g"],
    );
    let data = d.path().join("perf.data");
    let o = Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-c", "100003", "-o"])
        .arg(&data)
        .arg(&forker)
        .arg("40000000")
        .output()
        .unwrap();
    if !o.status.success() {
        skip_test(t, &format!("perf record failed: {}", text(&o)));
        return;
    }
    let o = proftrust()
        .args(["-q", "audit", "--backend", "qemu", "--json", "--samples"])
        .arg(&data)
        .arg("--")
        .arg(&forker)
        .arg("40000000")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_same_processes("perf-first", &v);
    let mut r = rows(&v);
    r.sort();
    assert_eq!(
        r,
        vec![
            ("forker".into(), "forked".into(), 1, 1, true),
            ("forker".into(), "started".into(), 1, 1, true),
        ]
    );
    let child = v["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == "child_work")
        .unwrap_or_else(|| panic!("{}", v["functions"]));
    // 3n of 4n iterations: the exact share of the child's loop is about 3/4.
    let share = child["exact_share"].as_f64().unwrap();
    assert!((0.6..0.9).contains(&share), "{child}");
    assert!(child["samples"].as_u64().unwrap() > 0, "{child}");
    assert!(
        v["metrics"]["epsilon_function"].as_f64().unwrap() < 0.2,
        "{}",
        v["metrics"]
    );
    // No program and no truth: refused, with what to give.
    let o = proftrust()
        .args(["-q", "audit", "--samples"])
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("the program that was recorded after `--`"),
        "{}",
        text(&o)
    );
}

/// Under callgrind a shell pipeline's processes are followed too; the part of each forked
/// child before its exec is not counted there (callgrind writes a process's counts at its
/// exit), so those images are named and left out of both sides, and the rest compared.
#[test]
fn audit_of_a_pipeline_under_callgrind_leaves_out_what_callgrind_cannot_count() {
    let t = "audit_of_a_pipeline_under_callgrind_leaves_out_what_callgrind_cannot_count";
    if !need(t, &["valgrind", "sort", "uniq", "sh"]) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    numbers(d.path(), 100_000);
    let v = audit_json(
        d.path(),
        "callgrind",
        &["--binary", "/usr/bin/sort"],
        &["sh", "-c", "sort f | uniq -c | sort -rn >/dev/null"],
    );
    let r = rows(&v);
    let compared: Vec<_> = r.iter().filter(|x| x.4).cloned().collect();
    assert!(
        compared.contains(&("sort".into(), "exec".into(), 2, 2, true)),
        "{r:?}"
    );
    assert!(
        compared.contains(&("uniq".into(), "exec".into(), 1, 1, true)),
        "{r:?}"
    );
    let left = r
        .iter()
        .find(|x| !x.4)
        .unwrap_or_else(|| panic!("the pre-exec images are not named: {r:?}"));
    assert_eq!((left.1.as_str(), left.2), ("forked, then exec", 3), "{r:?}");
    let w = v["warnings"].to_string();
    assert!(w.contains("left out of both sides"), "{w}");
}

/// `truth -- sh -c 'sort f | uniq -c | sort -rn'` lists the run's process images by name
/// and how they began (the shell, its three forked children, which exec two sorts and a
/// uniq: by construction of the command line), and their instructions add up to the
/// run's total.
#[test]
fn truth_lists_the_process_images_of_a_pipeline() {
    let t = "truth_lists_the_process_images_of_a_pipeline";
    if !need(t, &["qemu-x86_64", "sort", "uniq", "sh"]) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    numbers(d.path(), 20_000);
    let o = proftrust()
        .current_dir(d.path())
        .args(["truth", "--backend", "qemu", "-o", "t.ptexact", "--"])
        .args(["sh", "-c", "sort f | uniq -c | sort -rn >/dev/null"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let total: u64 = err
        .lines()
        .find_map(|l| l.split_once(" instructions executed"))
        .and_then(|(l, _)| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no total: {err}"));
    assert!(err.contains("7 process images, 7 counted:"), "{err}");
    // "  sort (exec) x2: 124467796 instructions"
    let mut images = Vec::new();
    let mut sum = 0;
    for l in err.lines() {
        let l = l.trim_start_matches("proftrust:").trim();
        let Some((what, n)) = l.split_once(": ") else {
            continue;
        };
        let Some(n) = n
            .strip_suffix(" instructions")
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        images.push(what.to_string());
        sum += n;
    }
    images.sort();
    assert_eq!(
        images,
        [
            "sh (forked, then exec) x3",
            "sh (started) x1",
            "sort (exec) x2",
            "uniq (exec) x1"
        ],
        "{err}"
    );
    assert_eq!(sum, total, "{err}");
}

/// `audit --samples perf.data --truth callgrind.out` of a program that forks, where the
/// callgrind file counts the parent alone (no `--trace-children`): the child's samples are
/// left out and named, not compared with the parent's truth (epsilon was 0.999 without a
/// word). Oracle: the fixture's loops (the child does 3n of the 4n iterations, so about
/// 3/4 of the samples are left out) and callgrind's own file (the parent's only).
#[test]
fn audit_of_files_leaves_out_a_child_the_truth_does_not_count() {
    let t = "audit_of_files_leaves_out_a_child_the_truth_does_not_count";
    if !need(t, &["gcc", "perf", "valgrind"]) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let forker = proftrust_testkit::compile_c(
        d.path(),
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c"),
        "forker",
        &["-O1", "-g"],
    );
    let data = d.path().join("perf.data");
    let o = Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-c", "100003", "-o"])
        .arg(&data)
        .arg(&forker)
        .arg("40000000")
        .output()
        .unwrap();
    if !o.status.success() {
        skip_test(t, &format!("perf record failed: {}", text(&o)));
        return;
    }
    let cg = d.path().join("cg.out");
    let o = Command::new("valgrind")
        .args(["-q", "--tool=callgrind", "--dump-instr=yes"])
        .arg(format!("--callgrind-out-file={}", cg.display()))
        .arg(&forker)
        .arg("40000000")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let o = proftrust()
        .args(["-q", "audit", "--json", "--samples"])
        .arg(&data)
        .arg("--truth")
        .arg(&cg)
        .arg("--binary")
        .arg(&forker)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let w: Vec<String> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["kind"] == "scope")
        .map(|w| w["message"].as_str().unwrap().to_string())
        .collect();
    let left = w
        .iter()
        .find(|w| w.starts_with("processes left out of both sides: forker (forked"))
        .unwrap_or_else(|| panic!("the child is not named (kind scope): {}", v["warnings"]));
    // "...; D of N samples and 0 of E exact instructions left out"
    let nums: Vec<u64> = left
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|x| x.parse().ok())
        .collect();
    let (dropped, total) = (nums[nums.len() - 4], nums[nums.len() - 3]);
    let share = dropped as f64 / total as f64;
    assert!((0.6..0.9).contains(&share), "{left}");
    assert_eq!(nums[nums.len() - 2], 0, "{left}");
    let funcs = v["functions"].as_array().unwrap();
    assert!(
        funcs
            .iter()
            .all(|f| f["name"] != "child_work" || f["samples"] == 0),
        "{funcs:?}"
    );
    assert!(
        v["metrics"]["epsilon_function"].as_f64().unwrap() < 0.05,
        "{}",
        v["metrics"]
    );
}
