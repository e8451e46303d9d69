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
    ok(&[
        "-q",
        "fleet",
        "ingest",
        "--host",
        h,
        "--labels",
        labels,
        "--out",
        store.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
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
    // samples, recordings, labels of h4, and possibly symbols of addresses new with it.
    assert!(added.len() >= 3 && added.len() <= 4, "{added:?}");
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
    fails(&["fleet", "report", s], "bad.parquet");
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
