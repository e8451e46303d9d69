//! `proftrust fleet` end to end on a real fleet: the bundled `hmmer` workload run under the
//! virtual PMU as four "hosts" with different inputs, seeds and skids, ingested with labels,
//! reported and diffed. Oracles: `proftrust read --json` of every ingested file (per-function
//! samples summed over the hosts), the store's files on disk (append-only: inodes and
//! mtimes; symbols once per (binary, address), read back with the Parquet reader), and the
//! errors' exit status. Needs qemu-x86_64 and gcc (skipped loudly otherwise).

use proftrust_fleet::datafusion::arrow::array::AsArray;
use proftrust_fleet::datafusion::arrow::datatypes::UInt64Type;
use proftrust_fleet::datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
#[path = "../../cli/tests/golden/sandbox.rs"]
mod sandbox;

use proftrust_testkit::{need, skip};
use sandbox::Sandbox;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `proftrust` beside this crate's `proftrust-fleet` (cargo puts both in one target directory:
/// `cargo build --release --workspace`, or `cargo build --release` then `-p
/// proftrust-fleet-cli`); the tests run `proftrust fleet …`, which execs the fleet binary
/// beside it, as users do. `None` (the test skips loudly) when it is not built.
fn proftrust_bin() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_BIN_EXE_proftrust-fleet")).with_file_name("proftrust");
    p.exists().then_some(p)
}

const NOT_BUILT: &str =
    "proftrust is not built beside proftrust-fleet (cargo build --release -p proftrust)";

fn proftrust(args: &[&str]) -> Output {
    Command::new(proftrust_bin().expect(NOT_BUILT))
        .args(args)
        .output()
        .expect("run proftrust")
}

fn ok(args: &[&str]) -> String {
    let out = proftrust(args);
    assert!(
        out.status.success(),
        "proftrust {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&ok(args)).expect("JSON")
}

/// Exit status 2 and a message containing `needle`, nothing on stdout.
fn fails(args: &[&str], needle: &str) {
    let out = proftrust(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: `{needle}` not in: {err}");
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    assert!(out.stdout.is_empty(), "{args:?} printed on stdout");
}

/// The four hosts: (name, labels, workload size, seed, skid).
const HOSTS: [(&str, &str, &str, &str, &str); 4] = [
    ("h1", "build=A,dc=eu", "3", "1", "0"),
    ("h2", "build=A,dc=us", "4", "2", "2"),
    ("h3", "build=B,dc=eu", "3", "3", "0"),
    ("h4", "build=B,dc=us", "5", "4", "3"),
];

fn record(dir: &Path) -> Vec<PathBuf> {
    HOSTS
        .iter()
        .map(|(h, _, size, seed, skid)| {
            let out = dir.join(format!("{h}.ptsamp"));
            ok(&[
                "-q",
                "vpmu",
                "--workload",
                "hmmer",
                "--size",
                size,
                "--period",
                "997",
                "--seed",
                seed,
                "--skid",
                skid,
                "-o",
                out.to_str().unwrap(),
            ]);
            out
        })
        .collect()
}

fn ingest(store: &Path, i: usize, file: &Path) {
    let (h, labels, ..) = HOSTS[i];
    ingest_into(store, h, Some(labels), file);
}

/// `proftrust -q fleet ingest --host HOST [--labels LABELS] --out STORE FILE`, which must
/// succeed.
fn ingest_into(store: &Path, host: &str, labels: Option<&str>, file: &Path) {
    let mut a = vec!["-q", "fleet", "ingest", "--host", host];
    if let Some(l) = labels {
        a.extend(["--labels", l]);
    }
    a.extend(["--out", store.to_str().unwrap(), file.to_str().unwrap()]);
    ok(&a);
}

/// Per (function, module file name): samples of `event`, from `proftrust read --json`
/// (its per-event tables when the file has several events, else its `symbols`).
fn read_symbols(file: &Path, event: &str) -> BTreeMap<(String, String), u64> {
    let v = json(&["read", file.to_str().unwrap(), "--json"]);
    let events = v["events"].as_array().expect("events");
    let table = if events.len() > 1 {
        events
            .iter()
            .find(|e| e["name"] == event)
            .map(|e| e["symbols"].as_array().expect("symbols").clone())
            .unwrap_or_default()
    } else if events[0]["name"] == event {
        v["symbols"].as_array().expect("symbols").clone()
    } else {
        Vec::new()
    };
    let mut m = BTreeMap::new();
    for s in &table {
        let module = s["module"].as_str().unwrap();
        let module = module.rsplit('/').next().unwrap().to_string();
        *m.entry((s["name"].as_str().unwrap().to_string(), module))
            .or_insert(0) += s["samples"].as_u64().unwrap();
    }
    m
}

/// (path, inode, mtime) of every file under `dir`.
fn snapshot(dir: &Path) -> BTreeSet<(PathBuf, u64, i64, i64)> {
    let mut out = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let md = std::fs::metadata(&p).unwrap();
            if md.is_dir() {
                stack.push(p);
            } else {
                out.insert((p, md.ino(), md.mtime(), md.mtime_nsec()));
            }
        }
    }
    out
}

/// Every (binary_key, address) row of the symbols table, with duplicates.
fn symbol_keys(store: &Path) -> Vec<(String, u64)> {
    let mut keys = Vec::new();
    for e in std::fs::read_dir(store.join("symbols")).unwrap() {
        let p = e.unwrap().path();
        let f = std::fs::File::open(&p).unwrap();
        let r = ParquetRecordBatchReaderBuilder::try_new(f)
            .unwrap()
            .build()
            .unwrap();
        for b in r {
            let b = b.unwrap();
            let k = b.column(0).as_string::<i32>();
            let a = b.column(1).as_primitive::<UInt64Type>();
            for i in 0..b.num_rows() {
                keys.push((k.value(i).to_string(), a.value(i)));
            }
        }
    }
    keys
}

#[test]
fn real_fleet_report_diff_and_store() {
    if !need("real_fleet_report_diff_and_store", &["qemu-x86_64", "gcc"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let files = record(dir.path());
    let store = dir.path().join("store");
    let s = store.to_str().unwrap();

    // Three hosts first; the fourth later must only add files.
    for (i, f) in files.iter().enumerate().take(3) {
        ingest(&store, i, f);
    }
    let before = snapshot(&store);
    let keys_before = symbol_keys(&store);
    ingest(&store, 3, &files[3]);
    let after = snapshot(&store);
    assert!(
        before.is_subset(&after),
        "an ingest rewrote or removed files: {:?}",
        before.difference(&after).collect::<Vec<_>>()
    );
    let added: Vec<_> = after.difference(&before).collect();
    // samples, recordings, labels and the files manifest of h4, and possibly symbols of
    // addresses new with it.
    assert!(added.len() >= 4 && added.len() <= 5, "{added:?}");
    assert!(added
        .iter()
        .all(|(p, ..)| p.extension().is_some_and(|e| e == "parquet")));

    // Symbols: once per (binary, address) over all files, and the first three hosts' keys
    // were not written again.
    let keys = symbol_keys(&store);
    let distinct: BTreeSet<_> = keys.iter().cloned().collect();
    assert_eq!(keys.len(), distinct.len(), "a symbol was stored twice");
    assert!(keys.len() >= keys_before.len());

    let r = json(&["fleet", "report", s, "--json"]);
    let event = r["event"].as_str().unwrap().to_string();
    // The oracle: read --json of every file, summed, for the event reported.
    let mut want: BTreeMap<(String, String), u64> = BTreeMap::new();
    for f in &files {
        for (k, n) in read_symbols(f, &event) {
            *want.entry(k).or_insert(0) += n;
        }
    }
    let total: u64 = want.values().sum();
    assert!(total > 1000, "too few samples for a test: {total}");
    assert_eq!(r["hosts"], 4);
    assert_eq!(r["recordings"], 4);
    assert_eq!(r["samples"].as_u64().unwrap(), total);
    let mut got: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut share_sum = 0.0;
    for f in r["functions"].as_array().unwrap() {
        let share = f["share"].as_f64().unwrap();
        let (lo, hi) = (
            f["ci_low"].as_f64().unwrap(),
            f["ci_high"].as_f64().unwrap(),
        );
        assert!(lo <= share && share <= hi && lo >= 0.0 && hi <= 1.0, "{f}");
        let n = f["samples"].as_u64().unwrap();
        assert!((share - n as f64 / total as f64).abs() < 1e-12, "{f}");
        share_sum += share;
        got.insert(
            (
                f["name"].as_str().unwrap().to_string(),
                f["module"].as_str().unwrap().to_string(),
            ),
            n,
        );
    }
    assert!((share_sum - 1.0).abs() < 1e-9, "shares sum to {share_sum}");
    assert_eq!(got, want, "per-function samples differ from read --json");
    let hosts: Vec<&str> = r["host_table"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["h1", "h2", "h3", "h4"]);
    assert_eq!(
        r["host_table"][1]["labels"],
        serde_json::json!(["build=A", "dc=us"])
    );

    // Diff: each side's samples are its hosts' samples.
    let d = json(&[
        "fleet", "diff", s, "--a", "build=A", "--b", "build=B", "--json",
    ]);
    let side = |hs: &[usize]| -> u64 {
        hs.iter()
            .map(|&i| read_symbols(&files[i], &event).values().sum::<u64>())
            .sum()
    };
    assert_eq!(d["a"]["samples"].as_u64().unwrap(), side(&[0, 1]));
    assert_eq!(d["b"]["samples"].as_u64().unwrap(), side(&[2, 3]));
    assert_eq!(d["a"]["hosts"], 2);
    for row in d["functions"].as_array().unwrap() {
        let (a, b) = (
            row["share_a"].as_f64().unwrap(),
            row["share_b"].as_f64().unwrap(),
        );
        assert!((row["delta"].as_f64().unwrap() - (b - a)).abs() < 1e-12);
        let q = row["q"].as_f64().unwrap();
        assert!(q >= row["p"].as_f64().unwrap() - 1e-15 && q <= 1.0);
    }

    // Levels: inline and line rows partition the same samples.
    for level in ["inline", "line"] {
        let r = json(&["fleet", "report", s, "--json", "--level", level]);
        let n: u64 = r["functions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["samples"].as_u64().unwrap())
            .sum();
        assert_eq!(n, total, "level {level}");
    }

    // Bad input: exit 2, a message naming the problem, nothing half-written.
    fails(
        &["fleet", "diff", s, "--a", "build=A", "--b", "team=x"],
        "no recording in the store has the key `team`",
    );
    fails(
        &["fleet", "diff", s, "--a", "build=A", "--b", "build=Z"],
        "no recording has build=Z",
    );
    fails(&["fleet", "report", s, "--event", "nope"], "--event nope");
    let html = dir.path().join("no/such/dir/r.html");
    fails(
        &["fleet", "report", s, "--html", html.to_str().unwrap()],
        "--html",
    );
    let corrupt = store.join("samples/host=h9/bad.parquet");
    std::fs::create_dir_all(corrupt.parent().unwrap()).unwrap();
    std::fs::write(&corrupt, b"not parquet at all").unwrap();
    // A file no ingest listed (docs/fleet.md, "Store integrity"): named and left out, the
    // report of the listed files stands.
    let r = proftrust(&["fleet", "report", s]);
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr)
    );
    assert_eq!(r.status.code(), Some(0), "{all}");
    assert!(all.contains("bad.parquet"), "{all}");
}

#[test]
fn bad_stores_and_flags() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    fails(
        &["fleet", "report", missing.to_str().unwrap()],
        "does not exist",
    );
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    fails(
        &["fleet", "report", empty.to_str().unwrap()],
        "holds no recordings",
    );
    fails(
        &[
            "fleet",
            "diff",
            empty.to_str().unwrap(),
            "--a",
            "x",
            "--b",
            "y=1",
        ],
        "is not KEY=VALUE",
    );
    let e = empty.to_str().unwrap();
    for bad in ["spark://h:1", "ballista://h", "ballista://h:0"] {
        let out = proftrust(&["fleet", "report", e, "--engine", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
    }
    let store = dir.path().join("s");
    fails(
        &[
            "fleet",
            "ingest",
            "--host",
            "a/b",
            "--out",
            store.to_str().unwrap(),
            "x",
        ],
        "not usable as a host name",
    );
    fails(
        &[
            "fleet",
            "ingest",
            "--host",
            "a",
            "--labels",
            "build",
            "--out",
            store.to_str().unwrap(),
            "x",
        ],
        "is not KEY=VALUE",
    );
    let junk = dir.path().join("junk.txt");
    std::fs::write(&junk, "hello\n").unwrap();
    fails(
        &[
            "fleet",
            "ingest",
            "--host",
            "a",
            "--out",
            store.to_str().unwrap(),
            junk.to_str().unwrap(),
        ],
        "junk.txt",
    );
    // Nothing was written by the failed ingests.
    assert!(
        !store.join("samples").exists(),
        "a failed ingest wrote samples"
    );
}

/// The fleet commands' text and JSON on the golden fixtures (docs/testing.md), byte for byte
/// against `tests/golden/expected/` (re-blessed with `PROFTRUST_BLESS=1`).
#[test]
fn golden_fleet() {
    let Some(bin) = proftrust_bin() else {
        skip!("golden_fleet: {NOT_BUILT}");
        return;
    };
    let s = Sandbox::new(
        bin.to_str().unwrap(),
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden"),
    );
    // A store of four "hosts" from the committed fixtures: two virtual-PMU files (events
    // instructions:vpmu and cycles:vpmu) and the perf.data and its perf script (cpu-clock:u).
    // The ingest's own output names recording ids and times, so it is not compared.
    for (host, labels, file) in [
        ("a", "build=A", "tiny.ptsamp"),
        ("b", "build=B", "tiny.lbr.ptsamp"),
        ("c", "build=B", "tiny.perf.data"),
        ("d", "build=A", "tiny.perf-script"),
    ] {
        let t = s.run(&[
            "fleet", "ingest", "--host", host, "--labels", labels, "--binary", "tiny", "--out",
            "store", file,
        ]);
        assert!(t.ends_with("--- exit 0\n"), "{t}");
    }
    s.check(
        "fleet",
        &[
            &["fleet", "report", "store"],
            &[
                "fleet",
                "report",
                "store",
                "--event",
                "cpu-clock:u",
                "--level",
                "line",
            ],
            &["fleet", "diff", "store", "--a", "build=A", "--b", "build=B"],
        ],
    );
    s.check_json("fleet-report", &["fleet", "report", "store", "--json"]);
    s.check_json(
        "fleet-diff",
        &[
            "fleet", "diff", "store", "--a", "build=A", "--b", "build=B", "--json",
        ],
    );
    std::fs::create_dir(s.path("empty")).unwrap();
    s.check(
        "fleet-errors",
        &[
            &["fleet", "report", "missing"],
            &["fleet", "report", "empty"],
            &["fleet", "report", "store", "--event", "nope"],
            &["fleet", "diff", "store", "--a", "build=A", "--b", "team=x"],
            &["fleet", "diff", "store", "--a", "build=A", "--b", "build=Z"],
            &["fleet", "report", "store", "--engine", "spark://h:1"],
            &[
                "fleet",
                "ingest",
                "--host",
                "a/b",
                "--out",
                "store",
                "tiny.ptsamp",
            ],
            &[
                "fleet",
                "ingest",
                "--host",
                "e",
                "--labels",
                "build",
                "--out",
                "store",
                "tiny.ptsamp",
            ],
            &["fleet", "ingest", "--host", "e", "--out", "store", "tiny.c"],
        ],
    );
}

/// One synthetic host's samples: `(function of the golden `tiny`, or `None` for one of
/// `kernel_addrs` kernel addresses, count)` at one period (ns), as a proftrust sample file.
fn write_host(
    path: &Path,
    event: &str,
    period: u64,
    rows: &[(Option<&str>, u64)],
    kernel_addrs: u64,
) {
    write_host_ending(path, event, period, rows, kernel_addrs, None);
}

/// [`write_host`], with how the recorded program ended.
fn write_host_ending(
    path: &Path,
    event: &str,
    period: u64,
    rows: &[(Option<&str>, u64)],
    kernel_addrs: u64,
    outcome: Option<proftrust_model::RunOutcome>,
) {
    use proftrust_model::{
        EventDesc, EventKind, Location, Module, ModuleTable, Sample, SampleSet, SamplingConfig,
    };
    let tiny = sandbox::fixtures_dir().join("tiny");
    let bin = proftrust_binary::Binary::open(&tiny).unwrap();
    let mut module = Module::new(tiny.display().to_string());
    module.build_id = bin.build_id().cloned();
    let mut modules = ModuleTable::default();
    let m = modules.intern(module);
    let k = modules.intern(Module::new("[kernel.kallsyms]"));
    let mut samples = Vec::new();
    let mut t = 0;
    for (func, n) in rows {
        for i in 0..*n {
            t += period;
            let ip = match func {
                Some(f) => {
                    let f = bin.functions().iter().find(|x| x.name == *f).unwrap();
                    Location::new(m, f.start.0 + i % f.size.max(1))
                }
                None => Location::new(k, 0xffff_ffff_8100_0000 + 0x40 * (i % kernel_addrs)),
            };
            samples.push(Sample {
                event: 0,
                pid: 7,
                tid: 7,
                time: t,
                cpu: 0,
                period,
                ip,
                callchain: Vec::new(),
                branches: Vec::new(),
            });
        }
    }
    let set = SampleSet {
        modules,
        events: vec![EventDesc {
            name: event.to_string(),
            kind: EventKind::CpuClock,
            config: SamplingConfig::default(),
        }],
        samples,
        outcome,
        ..SampleSet::default()
    };
    let f = std::fs::File::create(path).unwrap();
    proftrust_formats::native::write_samples(std::io::BufWriter::new(f), &set).unwrap();
}

fn share_of(report: &Value, name: &str) -> f64 {
    report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {report}"))["share"]
        .as_f64()
        .unwrap()
}

/// Issue 31 item 1: two hosts with equal CPU time, one sampled at 1 kHz and one at 10 kHz,
/// running different code: each has half of the fleet's time (the store keeps every sample's
/// period); counting samples gave the fast host 10/11 of the fleet. A host with periods
/// unknown (perf script without the period field) and a host of another event are named in
/// warnings.
#[test]
fn fleet_shares_weigh_time_not_samples() {
    if proftrust_bin().is_none() {
        skip!("fleet_shares_weigh_time_not_samples: {NOT_BUILT}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (d, st) = (dir.path(), dir.path().join("store"));
    let store = st.to_str().unwrap();
    // One second of CPU each: 1,000 samples of 1 ms and 10,000 samples of 100 µs.
    write_host(
        &d.join("slow.ptsamp"),
        "cpu-clock",
        1_000_000,
        &[(Some("walk"), 1000)],
        1,
    );
    write_host(
        &d.join("fast.ptsamp"),
        "cpu-clock",
        100_000,
        &[(Some("work"), 10_000)],
        1,
    );
    for (h, f) in [("slow", "slow.ptsamp"), ("fast", "fast.ptsamp")] {
        ingest_into(&st, h, None, &d.join(f));
    }
    let r = json(&["fleet", "report", store, "--json"]);
    assert_eq!(r["samples"], 11_000);
    assert_eq!(r["weight"], 2_000_000_000u64);
    assert_eq!(r["unit"], "ns");
    assert!((share_of(&r, "walk") - 0.5).abs() < 1e-12, "{r}");
    assert!((share_of(&r, "work") - 0.5).abs() < 1e-12, "{r}");
    let text = ok(&["fleet", "report", store]);
    assert!(
        text.contains("shares of cpu-clock time (2.00 s in all)"),
        "{text}"
    );

    // A third host without periods (every sample weighs 1), and one of another event.
    write_host(
        &d.join("bare.ptsamp"),
        "cpu-clock",
        1,
        &[(Some("leaf"), 500)],
        1,
    );
    write_host(
        &d.join("cyc.ptsamp"),
        "cycles",
        1000,
        &[(Some("leaf"), 500)],
        1,
    );
    for (h, f) in [("bare", "bare.ptsamp"), ("cyc", "cyc.ptsamp")] {
        ingest_into(&st, h, None, &d.join(f));
    }
    let r = json(&["fleet", "report", store, "--json"]);
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains("carry no sample periods") && warnings.contains("bare"),
        "{warnings}"
    );
    assert!(
        warnings.contains("cyc (cycles)") && warnings.contains("not in these shares"),
        "{warnings}"
    );
}

/// Issue 31 item 2: 3 hosts a side, `work` planted at 0% on side A and 11.4% on side B, and
/// a kernel without symbols sampled at 300 distinct addresses. The diff finds the change:
/// the kernel's unnamed addresses are one row, rows under --min-share are not tested, and
/// each side's samples weigh their time. With every row tested and only 2 hosts a side
/// the report says the design has little power instead of "nothing changed".
#[test]
fn fleet_diff_finds_a_planted_regression_with_three_hosts_a_side() {
    if proftrust_bin().is_none() {
        skip!("fleet_diff_finds_a_planted_regression_with_three_hosts_a_side: {NOT_BUILT}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (d, st) = (dir.path(), dir.path().join("store"));
    let store = st.to_str().unwrap();
    for h in 0..6u64 {
        let b = h % 2 == 1;
        // Equal time per host (5 s), rates 1 kHz and 2 kHz mixed on both sides.
        let (period, n) = if h < 3 {
            (1_000_000, 5000)
        } else {
            (500_000, 10_000)
        };
        let work = if b { n * 114 / 1000 } else { 0 };
        let kernel = n / 10;
        let walk = n * 3 / 10 + h; // a little host-to-host spread
        let leaf = n - work - kernel - walk;
        let f = d.join(format!("h{h}.ptsamp"));
        write_host(
            &f,
            "cpu-clock",
            period,
            &[
                (Some("leaf"), leaf),
                (Some("walk"), walk),
                (Some("work"), work),
                (None, kernel),
            ],
            300,
        );
        let labels = if b { "build=B" } else { "build=A" };
        ingest_into(&st, &format!("h{h}"), Some(labels), &f);
    }
    let r = json(&[
        "fleet", "diff", store, "--a", "build=A", "--b", "build=B", "--json",
    ]);
    let rows = r["functions"].as_array().unwrap();
    let work = rows.iter().find(|x| x["name"] == "work").unwrap();
    assert!(
        (work["share_b"].as_f64().unwrap() - 0.114).abs() < 0.002,
        "{work}"
    );
    assert_eq!(work["significant"], true, "{r}");
    assert!(work["q"].as_f64().unwrap() <= 0.05, "{work}");
    // The 300 kernel addresses are one row.
    let kernel: Vec<_> = rows
        .iter()
        .filter(|x| x["module"] == "[kernel.kallsyms]")
        .collect();
    assert_eq!(kernel.len(), 1, "{kernel:?}");
    assert_eq!(kernel[0]["name"], "[kernel.kallsyms] (unnamed)");
    assert_eq!(r["tested"].as_u64(), Some(rows.len() as u64));
    // leaf lost what work gained; walk and the kernel did not move: no false discovery
    // among them (walk's planted spread is 1-5 samples in 3,000).
    for x in rows {
        if x["name"] == "walk" || x["module"] == "[kernel.kallsyms]" {
            assert_eq!(x["significant"], false, "{x}");
        }
    }
    let text = ok(&["fleet", "diff", store, "--a", "build=A", "--b", "build=B"]);
    assert!(text.contains("tested:       the 4 of 4 rows"), "{text}");

    // Two hosts a side and the line level (more rows): little power, said so.
    let st2 = d.join("store2");
    for h in [0u64, 1, 3, 4] {
        let labels = if h % 2 == 1 { "build=B" } else { "build=A" };
        ingest_into(
            &st2,
            &format!("h{h}"),
            Some(labels),
            &d.join(format!("h{h}.ptsamp")),
        );
    }
    let r = json(&[
        "fleet",
        "diff",
        st2.to_str().unwrap(),
        "--a",
        "build=A",
        "--b",
        "build=B",
        "--json",
        "--level",
        "line",
        "--min-share",
        "0",
    ]);
    let w = r["warnings"].to_string();
    assert!(w.contains("little power"), "{w}");
    assert!(r["critical_t"].as_f64().unwrap() > 10.0, "{r}");
}

/// Issue 32 item 5: a damaged store is never counted wrong in silence. A recording whose
/// samples file was deleted, a samples file copied in place and into a subdirectory, and a
/// symbols file in place of a samples file: each is named, the damaged recording is left out
/// of every table (the report is that of the intact ones, the same as a store without them),
/// copies are not read. Item 9: a temporary an interrupted ingest left is swept by the next.
#[test]
fn damaged_store_is_named_and_left_out() {
    if proftrust_bin().is_none() {
        skip!("damaged_store_is_named_and_left_out: {NOT_BUILT}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Three hosts; the store `ref` holds hosts a and b only (the oracle of a report
    // without host c).
    let hosts = [("a", 1000u64), ("b", 2000), ("c", 1500)];
    for (h, n) in hosts {
        let f = d.join(format!("{h}.ptsamp"));
        write_host(
            &f,
            "cpu-clock",
            1_000_000,
            &[(Some("walk"), n), (Some("leaf"), n / 2)],
            1,
        );
        for store in ["s1", "s2", "s3"] {
            ingest_into(&d.join(store), h, None, &f);
        }
        if h != "c" {
            ingest_into(&d.join("ref"), h, None, &f);
        }
    }
    let samples_of = |store: &str, host: &str| -> PathBuf {
        let dir = d.join(store).join(format!("samples/host={host}"));
        std::fs::read_dir(&dir)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
    };
    let report =
        |store: &str| json(&["fleet", "report", d.join(store).to_str().unwrap(), "--json"]);
    let reference = report("ref");
    let intact = report("s1");
    assert_eq!(intact["samples"], 6750);
    assert_eq!(
        intact["warnings"].as_array().map(Vec::len),
        Some(1),
        "{intact}"
    ); // 3 hosts

    // 1. Host c's samples file deleted: c is left out and named.
    std::fs::remove_file(samples_of("s1", "c")).unwrap();
    let r = report("s1");
    let w = r["warnings"].to_string();
    assert!(
        w.contains("(host c) left out") && w.contains("missing"),
        "{w}"
    );
    assert_eq!(r["samples"], reference["samples"]);
    assert_eq!(r["functions"], reference["functions"]);

    // 2. A samples file copied in place and into a subdirectory: not read, named.
    let a = samples_of("s2", "a");
    std::fs::copy(&a, a.with_file_name("copy.parquet")).unwrap();
    std::fs::create_dir(a.with_file_name("sub")).unwrap();
    std::fs::copy(&a, a.with_file_name("sub").join(a.file_name().unwrap())).unwrap();
    let r = report("s2");
    let w = r["warnings"].to_string();
    assert!(w.contains("copy.parquet") && w.contains("sub/"), "{w}");
    assert_eq!(r["samples"], intact["samples"], "copies counted");

    // 3. A symbols file in place of host c's samples file: c left out, the file named.
    let sym = std::fs::read_dir(d.join("s3/symbols"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let c = samples_of("s3", "c");
    std::fs::copy(&sym, &c).unwrap();
    let r = report("s3");
    let w = r["warnings"].to_string();
    assert!(
        w.contains("(host c) left out") && w.contains("not the file the ingest wrote"),
        "{w}"
    );
    assert!(
        w.contains(&c.strip_prefix(d.join("s3")).unwrap().display().to_string()),
        "{w}"
    );
    assert_eq!(r["functions"], reference["functions"]);

    // Item 9: a stale temporary of a dead ingest is swept by the next ingest; one of a
    // live process stays.
    let stale = d.join("ref/samples/host=a/.x.parquet.tmp-999999999");
    let live = d.join(format!(
        "ref/samples/host=a/.y.parquet.tmp-{}",
        std::process::id()
    ));
    std::fs::write(&stale, b"half").unwrap();
    std::fs::write(&live, b"half").unwrap();
    let f = d.join("a.ptsamp");
    let out = proftrust(&[
        "fleet",
        "ingest",
        "--host",
        "a",
        "--out",
        d.join("ref").to_str().unwrap(),
        f.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert!(!stale.exists() && live.exists());
    assert!(String::from_utf8_lossy(&out.stderr).contains("removed 1 temporary file"));
}

/// Issue 32 item 6: a recording of a program that was interrupted (or killed) is stored as
/// such (`recordings.ending`), said at ingest, and named in the report's and the diff's
/// warnings; a complete recording is not. Issue 32 item 10: `--out` a dangling symbolic
/// link is named as one (it was "File exists").
#[test]
fn interrupted_recordings_are_named() {
    if proftrust_bin().is_none() {
        skip!("interrupted_recordings_are_named: {NOT_BUILT}");
        return;
    }
    use proftrust_model::RunOutcome;
    let dir = tempfile::tempdir().unwrap();
    let (d, st) = (dir.path(), dir.path().join("store"));
    let store = st.to_str().unwrap();
    let cut = RunOutcome::Interrupted {
        signal: 2,
        name: "SIGINT".into(),
    };
    write_host(
        &d.join("whole.ptsamp"),
        "cpu-clock",
        1_000,
        &[(Some("walk"), 300)],
        1,
    );
    write_host_ending(
        &d.join("cut.ptsamp"),
        "cpu-clock",
        1_000,
        &[(Some("walk"), 100)],
        1,
        Some(cut.clone()),
    );
    let whole = ok(&[
        "fleet",
        "ingest",
        "--host",
        "h1",
        "--labels",
        "build=A",
        "--out",
        store,
        d.join("whole.ptsamp").to_str().unwrap(),
    ]);
    assert!(!whole.contains("ENDED EARLY"), "{whole}");
    let said = ok(&[
        "fleet",
        "ingest",
        "--host",
        "h2",
        "--labels",
        "build=B",
        "--out",
        store,
        d.join("cut.ptsamp").to_str().unwrap(),
    ]);
    let ending = cut.to_string();
    assert!(said.contains(&format!("ENDED EARLY: {ending}")), "{said}");
    let r = json(&["fleet", "report", store, "--json"]);
    let warned: Vec<&str> = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["kind"] == "ended-early")
        .filter_map(|w| w["message"].as_str())
        .filter(|w| w.contains("did not end normally"))
        .collect();
    assert_eq!(warned.len(), 1, "{r}");
    assert!(warned[0].starts_with("1 recording(s)"), "{}", warned[0]);
    assert!(
        warned[0].contains("h2/") && warned[0].contains(&ending),
        "{}",
        warned[0]
    );
    assert!(!warned[0].contains("h1/"), "{}", warned[0]);
    // The diff names it on the side that holds it.
    let diff = json(&[
        "fleet", "diff", store, "--a", "build=A", "--b", "build=B", "--json",
    ]);
    let text = diff["warnings"].to_string();
    assert!(
        text.contains("did not end normally") && text.contains("h2/"),
        "{text}"
    );
    // --out a dangling symbolic link.
    let link = d.join("link");
    std::os::unix::fs::symlink(d.join("missing-dir"), &link).unwrap();
    fails(
        &[
            "fleet",
            "ingest",
            "--host",
            "h3",
            "--out",
            link.to_str().unwrap(),
            d.join("whole.ptsamp").to_str().unwrap(),
        ],
        "is a symbolic link to",
    );
    assert!(!d.join("missing-dir").exists());
}
