//! `check`'s recording health from what the file says: throttling (`PERF_RECORD_THROTTLE` /
//! `UNTHROTTLE`) and multiplexing (`time_enabled` / `time_running` of `PERF_SAMPLE_READ`
//! values and `PERF_RECORD_READ` records). perf 6.1 on cpu-clock neither throttles (the
//! hrtimer period is clamped to 10 µs, below `perf_event_max_sample_rate`) nor multiplexes
//! (software events always run), so the perf.data here is built byte by byte from the
//! layouts of `perf_event_open(2)` and perf's perf.data format; perf itself reads it back as
//! the oracle (`perf report --stats` counts the records, `perf script -D` prints the times),
//! and the numbers are also hand-computed below. A real `perf record -e cpu-clock:S` file (non-group `READ` values,
//! with `LOST`) must read with the counts `perf report` gives.

use proftrust_testkit::{have, skip_test};
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_proftrust");

const IP: u64 = 1;
const TID: u64 = 1 << 1;
const TIME: u64 = 1 << 2;
const READ: u64 = 1 << 4;
const ID: u64 = 1 << 6;
const PERIOD: u64 = 1 << 8;
/// `read_format`: `TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING | ID` (non-group: value,
/// enabled, running, id).
const READ_FORMAT: u64 = 1 | 2 | 4;
const SAMPLE_TYPE: u64 = IP | TID | TIME | READ | ID | PERIOD;
const PID: u32 = 4242;
const STREAM: u64 = 77;

fn record(ty: u32, misc: u16, body: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&ty.to_le_bytes());
    v.extend_from_slice(&misc.to_le_bytes());
    v.extend_from_slice(&((8 + body.len()) as u16).to_le_bytes());
    v.extend_from_slice(body);
    v
}

fn u64s(v: &mut Vec<u8>, xs: &[u64]) {
    for x in xs {
        v.extend_from_slice(&x.to_le_bytes());
    }
}

/// The `sample_id_all` trailer for [`SAMPLE_TYPE`]: pid/tid, time, id.
fn trailer(time: u64) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&PID.to_le_bytes());
    v.extend_from_slice(&PID.to_le_bytes());
    u64s(&mut v, &[time, STREAM]);
    v
}

/// A user-space sample: ip, pid/tid, time, id, period, read values.
fn sample(ip: u64, time: u64, enabled: u64, running: u64) -> Vec<u8> {
    let mut b = Vec::new();
    u64s(&mut b, &[ip]);
    b.extend_from_slice(&PID.to_le_bytes());
    b.extend_from_slice(&PID.to_le_bytes());
    u64s(&mut b, &[time, STREAM, 1000]);
    u64s(&mut b, &[time / 1000, enabled, running, STREAM]);
    record(9, 2, &b)
}

/// `PERF_RECORD_THROTTLE` (5) or `UNTHROTTLE` (6): time, id, stream_id, trailer.
fn throttle(unthrottle: bool, time: u64) -> Vec<u8> {
    let mut b = Vec::new();
    u64s(&mut b, &[time, STREAM, STREAM]);
    b.extend_from_slice(&trailer(time));
    record(if unthrottle { 6 } else { 5 }, 0, &b)
}

/// `PERF_RECORD_READ` (8): pid, tid, read values, trailer.
fn read_record(time: u64, enabled: u64, running: u64) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&PID.to_le_bytes());
    b.extend_from_slice(&PID.to_le_bytes());
    u64s(&mut b, &[999, enabled, running, STREAM]);
    b.extend_from_slice(&trailer(time));
    record(8, 0, &b)
}

/// `PERF_RECORD_LOST` (2): id, lost, trailer.
fn lost_record(time: u64, n: u64) -> Vec<u8> {
    let mut b = Vec::new();
    u64s(&mut b, &[STREAM, n]);
    b.extend_from_slice(&trailer(time));
    record(2, 0, &b)
}

/// A `COMM` record (3): pid, tid, name, trailer.
fn comm(time: u64) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&PID.to_le_bytes());
    b.extend_from_slice(&PID.to_le_bytes());
    b.extend_from_slice(b"prog\0\0\0\0");
    b.extend_from_slice(&trailer(time));
    record(3, 0, &b)
}

/// File mode: header, one 128-byte cpu-clock attribute (period 1000, `sample_id_all`) with
/// its id section, the data section; no features.
fn perf_file(records: &[Vec<u8>]) -> Vec<u8> {
    let attr_entry = 128 + 16;
    let attrs_off = 104u64;
    let ids_off = attrs_off + attr_entry;
    let data_off = ids_off + 8;
    let data: Vec<u8> = records.concat();
    let mut f = Vec::new();
    f.extend_from_slice(b"PERFILE2");
    u64s(
        &mut f,
        &[
            104,
            attr_entry,
            attrs_off,
            attr_entry,
            data_off,
            data.len() as u64,
            0,
            0,
            0, // feature bitmap
            0,
            0,
            0,
        ],
    );
    assert_eq!(f.len(), 104);
    let mut a = vec![0u8; 128];
    a[0..4].copy_from_slice(&1u32.to_le_bytes()); // PERF_TYPE_SOFTWARE
    a[4..8].copy_from_slice(&128u32.to_le_bytes());
    a[16..24].copy_from_slice(&1000u64.to_le_bytes()); // sample_period
    a[24..32].copy_from_slice(&SAMPLE_TYPE.to_le_bytes());
    a[32..40].copy_from_slice(&READ_FORMAT.to_le_bytes());
    a[40..48].copy_from_slice(&(1u64 << 18).to_le_bytes()); // sample_id_all
    f.extend_from_slice(&a);
    u64s(&mut f, &[ids_off, 8]);
    u64s(&mut f, &[STREAM]);
    f.extend_from_slice(&data);
    f
}

/// 400 samples 1 µs apart on four addresses; the event ran half the time it was enabled
/// (enabled = 2 × running on every read); two throttles, of 4000 ns and 1000 ns; a final
/// `READ` record with enabled 900000, running 450000 (the last values of the stream); 12
/// samples lost. No `MMAP`: every sample is unsymbolised.
fn health_file() -> Vec<u8> {
    let mut recs = vec![comm(500)];
    for k in 1..=400u64 {
        let t = 1000 * k;
        recs.push(sample(0x40_1000 + 16 * (k % 4), t, 2 * t, t));
        if t == 50_000 {
            recs.push(throttle(false, 50_500));
            recs.push(throttle(true, 54_500));
        }
        if t == 120_000 {
            recs.push(throttle(false, 120_000));
            recs.push(throttle(true, 121_000));
        }
        if t == 300_000 {
            recs.push(lost_record(300_100, 12));
        }
    }
    recs.push(read_record(400_500, 900_000, 450_000));
    perf_file(&recs)
}

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("LC_ALL", "C")
        .output()
        .expect("run proftrust")
}

fn check_json(p: &Path) -> Value {
    let out = run(&["check", p.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "check {p:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn warning<'a>(r: &'a Value, kind: &str) -> Option<&'a str> {
    r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["kind"] == kind)
        .map(|w| w["message"].as_str().unwrap())
}

fn perf(args: &[&str]) -> String {
    let out = Command::new("perf")
        .args(args)
        .env("LC_ALL", "C")
        .output()
        .expect("run perf");
    assert!(
        out.status.success(),
        "perf {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The count `perf report --stats` prints for `NAME events:`.
fn stat(stats: &str, name: &str) -> u64 {
    stats
        .lines()
        .find_map(|l| {
            let l = l.trim();
            let rest = l.strip_prefix(name)?.trim_start().strip_prefix("events:")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or(0)
}

#[test]
fn throttling_and_multiplexing_from_a_perf_data() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("health.perf.data");
    std::fs::write(&p, health_file()).unwrap();
    let r = check_json(&p);
    assert_eq!(r["samples"], 400);
    // By hand: 2 throttles, (54500 - 50500) + (121000 - 120000) = 5000 ns throttled;
    // running / enabled of the last values (the READ record) = 450000 / 900000.
    assert_eq!(r["health"]["throttled"], 2);
    assert_eq!(r["health"]["running_ratio"].as_f64().unwrap(), 0.5);
    let t = warning(&r, "throttling").expect("a throttling warning");
    assert!(t.contains("throttled sampling 2 times for 0.005 ms"), "{t}");
    // The sampled span is 399 µs: 5000 / 399000 = 1.25%.
    assert!(t.contains("(1.25% of the sampled span)"), "{t}");
    let m = warning(&r, "multiplexing").expect("a multiplexing warning");
    assert!(
        m.contains("counted during 50.00% of the time it was enabled (0.450 of 0.900 ms)"),
        "{m}"
    );
    assert_eq!(r["health"]["lost"], 12);
    // Its samples are at addresses in no module: no function, so no verdict stands on them
    // (issue 29; the demotion by lost samples, throttling and multiplexing is
    // verdict::tests::gaps_demote_the_verdict in proftrust-check).
    assert_eq!(r["verdict"], "noise", "{}", r["reason"]);
    assert!(r["reason"]
        .as_str()
        .unwrap()
        .starts_with("no sample has a function (100.00%"));

    // perf's own reading of the same file.
    if !have("perf") {
        skip_test(
            "throttling_and_multiplexing_from_a_perf_data (perf's reading)",
            "perf not installed",
        );
        return;
    }
    let ps = p.to_str().unwrap();
    let stats = perf(&["report", "-i", ps, "--stats"]);
    assert_eq!(stat(&stats, "THROTTLE"), 2, "{stats}");
    assert_eq!(stat(&stats, "UNTHROTTLE"), 2, "{stats}");
    assert_eq!(stat(&stats, "READ"), 1, "{stats}");
    assert_eq!(stat(&stats, "SAMPLE"), 400, "{stats}");
    assert_eq!(stat(&stats, "LOST"), 1, "{stats}");
    // perf's own decoding of the last read values.
    let dump = perf(&["script", "-i", ps, "-D"]);
    let enabled: Vec<u64> = dump
        .lines()
        .filter_map(|l| l.trim().strip_prefix("... time enabled"))
        .filter_map(|v| v.trim_start_matches([' ', ':']).trim().parse().ok())
        .collect();
    let running: Vec<u64> = dump
        .lines()
        .filter_map(|l| l.trim().strip_prefix("... time running"))
        .filter_map(|v| v.trim_start_matches([' ', ':']).trim().parse().ok())
        .collect();
    assert_eq!(
        enabled.last(),
        Some(&900_000),
        "{}",
        &dump[..dump.len().min(3000)]
    );
    assert_eq!(running.last(), Some(&450_000));
}

/// `perf record -e cpu-clock:S` writes `PERF_SAMPLE_READ` values without `GROUP` and with
/// `LOST` (perf 6.1): the file reads, with the per-function counts perf reports, and with the
/// event's times (no multiplexing warning: a software event runs all the time it is enabled).
#[test]
fn sample_read_perf_data_reads() {
    if !have("perf") || !have("gcc") {
        skip_test("sample_read_perf_data_reads", "perf or gcc not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("spin.c");
    std::fs::write(
        &src,
        "int main(void){volatile unsigned long x=0; for(unsigned long i=0;i<40000000UL;i++) x+=i; return 0;}\n",
    )
    .unwrap();
    let exe = dir.path().join("spin");
    let st = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    let data = dir.path().join("read.perf.data");
    let rec = Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock:S", "-o"])
        .arg(&data)
        .arg(&exe)
        .output()
        .unwrap();
    if !rec.status.success() {
        skip_test(
            "sample_read_perf_data_reads",
            &format!(
                "perf record -e cpu-clock:S failed: {}",
                String::from_utf8_lossy(&rec.stderr)
            ),
        );
        return;
    }
    let ds = data.to_str().unwrap();
    let stats = perf(&["report", "-i", ds, "--stats"]);
    let r = check_json(&data);
    assert_eq!(r["samples"].as_u64().unwrap(), stat(&stats, "SAMPLE"));
    assert!(warning(&r, "multiplexing").is_none(), "{}", r["warnings"]);
    assert!(warning(&r, "throttling").is_none(), "{}", r["warnings"]);
}

/// `proftrust record` reads every event's enabled and running time at the end (read_format
/// `TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING`) and stores them in the sample file's header.
/// Oracle: a clock event fires once per period of running time, so samples × period must
/// come within 10% (and one period) of the running time the kernel reports; software events
/// are never multiplexed, so running equals enabled and `check` does not warn.
#[test]
fn record_stores_enabled_and_running_time() {
    if !have("gcc") {
        skip_test(
            "record_stores_enabled_and_running_time",
            "gcc not installed",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("spin.c");
    std::fs::write(
        &src,
        "int main(void){volatile unsigned long x=0; for(unsigned long i=0;i<60000000UL;i++) x+=i; return 0;}\n",
    )
    .unwrap();
    let exe = dir.path().join("spin");
    let st = Command::new("gcc")
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success());
    let out = dir.path().join("spin.ptsamp");
    let rec = run(&[
        "record",
        "-e",
        "cpu-clock",
        "-e",
        "task-clock",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "--",
        exe.to_str().unwrap(),
    ]);
    if !rec.status.success() {
        let err = String::from_utf8_lossy(&rec.stderr);
        if err.contains("perf_event_paranoid") {
            skip_test("record_stores_enabled_and_running_time", &err);
            return;
        }
        panic!("record: {err}");
    }
    // The header of the sample file (docs/file-formats.md): magic, u64 length, JSON.
    let b = std::fs::read(&out).unwrap();
    let n = u64::from_le_bytes(b[8..16].try_into().unwrap()) as usize;
    let h: Value = serde_json::from_slice(&b[16..16 + n]).unwrap();
    let times = h["health"]["event_times"].as_array().unwrap();
    assert_eq!(times.len(), 2, "{}", h["health"]);
    let check = check_json(&out);
    assert_eq!(check["health"]["running_ratio"].as_f64(), Some(1.0));
    assert!(warning(&check, "multiplexing").is_none());
    for (e, t) in times.iter().enumerate() {
        assert_eq!(t["event"], e as u64);
        let enabled = t["enabled_ns"].as_u64().unwrap();
        let running = t["running_ns"].as_u64().unwrap();
        assert_eq!(running, enabled, "{t}");
        let period = h["events"][e]["config"]["period"]["value"]
            .as_u64()
            .unwrap();
        let samples = check_event_samples(&out, e);
        let timed = samples * period;
        assert!(
            (timed as f64 - running as f64).abs() <= 0.1 * running as f64 + period as f64,
            "event {e}: {samples} samples × {period} ns = {timed} ns against {running} ns running"
        );
    }
}

/// Samples of event `e` as `check --event` counts them.
fn check_event_samples(p: &Path, e: usize) -> u64 {
    let name = ["cpu-clock", "task-clock"][e];
    let out = run(&["check", p.to_str().unwrap(), "--json", "--event", name]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    r["samples"].as_u64().unwrap()
}

/// The fixture binary `tiny` (its disassembly: `leaf`'s loop at 0x401098.., `walk` from
/// 0x4010b0, `work` from 0x401120, `main` calls `work` at 0x401046 and returns to 0x40104b).
fn tiny() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/fixtures/tiny")
}

/// `perf script` text, one sample per line (`comm pid [cpu] time: period event: ip sym+off
/// (dso)`), 1 ms apart, for `tiny`.
fn script(samples: &[(u64, &str, u64)]) -> String {
    let mut out = String::new();
    for (i, &(ip, sym, base)) in samples.iter().enumerate() {
        let t = 1_000_000 + 1000 * i as u64; // µs
        out.push_str(&format!(
            "tiny 22000 [000] {}.{:06}: 1000000 cpu-clock:u: {ip:x} {sym}+{:#x} (/tmp/x/tiny)\n",
            t / 1_000_000,
            t % 1_000_000,
            ip - base
        ));
    }
    out
}

/// Issue 14's CLI contract: `proftrust check PROFILE [--binary PATH]... [--json]`, the JSON
/// top-level keys `verdict`, `samples`, `event`, `functions` (each `name`, `samples`,
/// `share`, `ci_low`, `ci_high`, `verdict`) and `warnings` (each `kind`, `message`), and a
/// case that triggers each of the kinds `aliasing`, `skid`, `granularity`, `lost`,
/// `throttling`, `multiplexing`, `unsymbolized`:
/// - the synthetic perf.data above (no binary): lost, throttling, multiplexing,
///   unsymbolized;
/// - `walk` and `work` alternating sample by sample (running states of one sample, R = 1 <
///   1.5: granularity) and `main`'s call of `work` with 60 of its 64 samples on the return
///   site after it (93.75% >= 75% on the successor of a call: skid);
/// - `leaf`'s four-instruction loop sampled in a fixed order 240 times: at lag 4 all 236
///   pairs recur against 236 × q = 58.26 expected (q = 4·60·59 / (240·239)): aliasing.
#[test]
fn contract_names_and_every_warning_kind() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("health.perf.data");
    std::fs::write(&data, health_file()).unwrap();
    let leaf = 0x40_1080;
    let (walk, work, main) = (0x40_10b0, 0x40_1120, 0x40_1000);
    let mut gs: Vec<(u64, &str, u64)> = Vec::new();
    // A fixed scramble of each function's first instructions (not periodic at any lag).
    let walk_at = [0x40_10d8, 0x40_10db, 0x40_10df, 0x40_10b0];
    let work_at = [0x40_1120, 0x40_1123, 0x40_1126, 0x40_1129];
    for k in 0..120usize {
        let j = (k * 7 + k / 5) % 4;
        gs.push(if k % 2 == 1 {
            (walk_at[j], "walk", walk)
        } else {
            (work_at[j], "work", work)
        });
    }
    for k in 0..64 {
        gs.push(if k % 16 == 0 {
            (0x40_1046, "main", main)
        } else {
            (0x40_104b, "main", main)
        });
    }
    let gran = dir.path().join("granularity-skid.perf-script");
    std::fs::write(&gran, script(&gs)).unwrap();
    let loop_at = [0x40_1098, 0x40_109b, 0x40_109f, 0x40_10a3];
    let al: Vec<(u64, &str, u64)> = (0..240).map(|k| (loop_at[k % 4], "leaf", leaf)).collect();
    let alias = dir.path().join("alias.perf-script");
    std::fs::write(&alias, script(&al)).unwrap();

    let bin = tiny();
    let b = bin.to_str().unwrap();
    let mut kinds = std::collections::BTreeSet::new();
    for (p, with_binary) in [(&data, false), (&gran, true), (&alias, true)] {
        let ps = p.to_str().unwrap();
        let args: Vec<&str> = if with_binary {
            vec!["check", ps, "--binary", b, "--json"]
        } else {
            vec!["check", ps, "--json"]
        };
        let out = run(&args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        for key in [
            "verdict",
            "samples",
            "event",
            "functions",
            "warnings",
            "run_interval",
        ] {
            assert!(r.get(key).is_some(), "{p:?}: no top-level {key}");
        }
        assert!(r["health"]["unattributed"].is_array(), "{p:?}");
        assert!(["act", "rank-only", "noise"].contains(&r["verdict"].as_str().unwrap()));
        assert!(r["samples"].as_u64().unwrap() > 0);
        let rows = r["functions"].as_array().unwrap();
        assert!(!rows.is_empty());
        let total: u64 = rows.iter().map(|f| f["samples"].as_u64().unwrap()).sum();
        assert_eq!(total, r["samples"].as_u64().unwrap(), "{p:?}");
        for f in rows {
            for key in [
                "name",
                "samples",
                "share",
                "ci_low",
                "ci_high",
                "run_low",
                "run_high",
                "attribution",
                "verdict",
            ] {
                assert!(
                    f.get(key).is_some(),
                    "{p:?}: function row without {key}: {f}"
                );
            }
            let (lo, sh, hi) = (
                f["ci_low"].as_f64().unwrap(),
                f["share"].as_f64().unwrap(),
                f["ci_high"].as_f64().unwrap(),
            );
            assert!(lo <= sh && sh <= hi, "{f}");
        }
        for w in r["warnings"].as_array().unwrap() {
            assert!(!w["message"].as_str().unwrap().is_empty(), "{w}");
            kinds.insert(w["kind"].as_str().unwrap().to_string());
        }
        if p == &alias {
            let a = &r["aliasing"];
            assert_eq!(a["lag"], 4, "{a}");
            assert_eq!(a["pairs"], 236, "{a}");
            assert_eq!(a["same_observed"], 236.0, "{a}");
            let q = 4.0 * 60.0 * 59.0 / (240.0 * 239.0);
            assert!((a["same_expected"].as_f64().unwrap() - 236.0 * q).abs() < 1e-9);
            assert_eq!(r["verdict"], "rank-only");
        }
        if p == &gran {
            let skid = warning(&r, "skid").expect("skid");
            assert!(skid.starts_with("93.75% of the samples"), "{skid}");
            let g = warning(&r, "granularity").expect("granularity");
            assert!(
                g.starts_with("walk, work run for less than one sampling period"),
                "{g}"
            );
        }
    }
    for k in [
        "aliasing",
        "skid",
        "granularity",
        "lost",
        "throttling",
        "multiplexing",
        "unsymbolized",
    ] {
        assert!(kinds.contains(k), "no {k} warning in {kinds:?}");
    }
}
