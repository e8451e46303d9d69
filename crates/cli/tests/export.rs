//! `proftrust export` and `--export`, checked by the consumers of the formats where they are
//! installed (scripts/test.sh installs them: Go's `go tool pprof`, `llvm-profdata`, clang,
//! chromium) and against hand-computed counts of the golden fixture program
//! (`tests/golden/fixtures/tiny.c`, N = 30000):
//!
//! * `work` runs once; its loop calls `leaf` for the 15000 odd i; `walk` runs once with 40
//!   rounds of a 256-step inner loop and calls `leaf` once per round: `leaf` is entered
//!   15040 times.
//!
//! Text outputs (folded, differential folded, LLVM sample profile, annotated source) are
//! golden files in `tests/golden/expected/export-*.txt`, re-blessed by `PROFTRUST_BLESS=1`.

use proftrust_testkit::{assert_golden, have, skip};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_proftrust");

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/fixtures")
}

fn expected(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/expected")
        .join(name)
}

/// A scratch directory with the fixtures copied in.
fn sandbox() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for e in std::fs::read_dir(fixtures()).expect("fixtures") {
        let p = e.expect("entry").path();
        std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).expect("copy");
    }
    dir
}

/// Runs proftrust in `dir`; panics with its stderr on failure.
fn pt(dir: &Path, args: &[&str]) -> String {
    let o = Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run proftrust");
    assert!(
        o.status.success(),
        "proftrust {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("utf-8")
}

fn read_file(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// `proftrust read --json`: samples per symbol (of the first event when there are several).
fn read_symbols(dir: &Path, file: &str) -> BTreeMap<String, u64> {
    let j: Value =
        serde_json::from_str(&pt(dir, &["read", "--json", file, "--binary", "tiny"])).unwrap();
    let table = match j["events"][0].get("symbols") {
        Some(t) if t.is_array() => t.clone(),
        _ => j["symbols"].clone(),
    };
    let mut out = BTreeMap::new();
    for s in table.as_array().unwrap() {
        *out.entry(s["name"].as_str().unwrap().to_string())
            .or_default() += s["samples"].as_u64().unwrap();
    }
    out
}

/// Sums folded counts per outermost-but-leaf function: the last frame outside inlined ones
/// is not known from the text, so sum per leaf frame and per frame anywhere.
fn folded_total(text: &str) -> u64 {
    text.lines()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

#[test]
fn folded_and_flame_graph_of_samples_match_read() {
    let d = sandbox();
    let dir = d.path();
    pt(
        dir,
        &[
            "export",
            "tiny.ptsamp",
            "--to",
            "folded",
            "-o",
            "tiny.folded",
            "--binary",
            "tiny",
        ],
    );
    let folded = read_file(dir, "tiny.folded");
    assert_golden(&expected("export-folded.txt"), &folded);
    // The first event of the virtual-PMU file, as `read` counts it.
    let j: Value = serde_json::from_str(&pt(
        dir,
        &["read", "--json", "tiny.ptsamp", "--binary", "tiny"],
    ))
    .unwrap();
    assert_eq!(
        folded_total(&folded),
        j["events"][0]["samples"].as_u64().unwrap()
    );
    // inferno draws it: one frame per function with the folded counts in its title.
    pt(
        dir,
        &[
            "export",
            "tiny.ptsamp",
            "--to",
            "flamegraph",
            "-o",
            "tiny.svg",
            "--binary",
            "tiny",
        ],
    );
    let svg = read_file(dir, "tiny.svg");
    assert!(
        svg.starts_with("<?xml") && svg.contains("<svg"),
        "not an SVG"
    );
    let syms = read_symbols(dir, "tiny.ptsamp");
    for (name, n) in &syms {
        let title = format!("<title>{name} ({} samples,", fmt_thousands(*n));
        assert!(svg.contains(&title), "{title} missing from the flame graph");
    }
}

/// inferno prints counts with thousands separators.
fn fmt_thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn differential_folded_pairs_samples_with_exact_counts() {
    let d = sandbox();
    let dir = d.path();
    pt(
        dir,
        &[
            "export",
            "tiny.ptsamp",
            "--to",
            "folded-diff",
            "--against",
            "tiny.ptexact",
            "-o",
            "diff.folded",
            "--binary",
            "tiny",
        ],
    );
    let text = read_file(dir, "diff.folded");
    assert_golden(&expected("export-folded-diff.txt"), &text);
    // The exact column is the exact instruction count per function (callgrind-free oracle:
    // the exact file's own per-function table, as `read` prints it).
    let j: Value = serde_json::from_str(&pt(
        dir,
        &["read", "--json", "tiny.ptexact", "--binary", "tiny"],
    ))
    .unwrap();
    let exact: BTreeMap<String, u64> = j["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["name"].as_str().unwrap().into(),
                f["instructions"].as_u64().unwrap(),
            )
        })
        .collect();
    let mut before = 0;
    for l in text.lines() {
        let parts: Vec<&str> = l.rsplitn(3, ' ').collect();
        let (after, b, stack) = (parts[0], parts[1], parts[2]);
        before += b.parse::<u64>().unwrap();
        assert_eq!(after.parse::<u64>().unwrap(), exact[stack], "{stack}");
    }
    // Normalised: the samples are scaled to the exact total (rounding per line aside).
    let total: u64 = exact.values().sum();
    assert!(
        before.abs_diff(total) <= text.lines().count() as u64,
        "{before} vs {total}"
    );
}

/// `Function: NAME: TOTAL, HEAD, N sampled lines` lines of `llvm-profdata show --sample`.
fn profdata_functions(text: &str) -> BTreeMap<String, (u64, u64)> {
    let mut m = BTreeMap::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("Function: ") {
            let (name, nums) = rest.split_once(": ").unwrap();
            let v: Vec<u64> = nums
                .split(", ")
                .take(2)
                .map(|x| x.trim().parse().unwrap())
                .collect();
            m.insert(name.to_string(), (v[0], v[1]));
        }
    }
    m
}

#[test]
fn llvm_sample_profile_reads_back_in_llvm_profdata_with_the_programs_counts() {
    let d = sandbox();
    let dir = d.path();
    pt(
        dir,
        &[
            "export",
            "tiny.ptexact",
            "--to",
            "llvm-sample",
            "-o",
            "tiny.prof",
            "--binary",
            "tiny",
        ],
    );
    let prof = read_file(dir, "tiny.prof");
    assert_golden(&expected("export-llvm-sample.txt"), &prof);
    // Our own header lines: name:total:head.
    let ours: BTreeMap<String, (u64, u64)> = prof
        .lines()
        .filter(|l| !l.starts_with(' '))
        .map(|l| {
            let v: Vec<&str> = l.split(':').collect();
            (
                v[0].to_string(),
                (v[1].parse().unwrap(), v[2].parse().unwrap()),
            )
        })
        .collect();
    // Hand-computed entry counts (module docs).
    assert_eq!(ours["leaf"].1, 15040);
    assert_eq!(ours["work"].1, 1);
    assert_eq!(ours["walk"].1, 1);
    // walk's inner loop (line 23, offset 3 from line 20) runs 40 x 256 times; work calls
    // leaf from line 33 (offset 4) 15000 times, walk from line 24 (offset 4) 40 times.
    assert!(
        prof.contains("\n 3: 10240\n")
            || prof
                .lines()
                .any(|l| l.starts_with(" 3.") && l.ends_with(": 10240")),
        "{prof}"
    );
    assert!(
        prof.lines()
            .any(|l| l.starts_with(" 4") && l.ends_with(" leaf:15000")),
        "{prof}"
    );
    assert!(
        prof.lines()
            .any(|l| l.starts_with(" 4") && l.ends_with(" leaf:40")),
        "{prof}"
    );
    if !have("llvm-profdata") {
        skip!("llvm_sample_profile: llvm-profdata not installed (apt-get install llvm)");
        return;
    }
    let o = Command::new("llvm-profdata")
        .args(["show", "--sample", "--all-functions"])
        .arg(dir.join("tiny.prof"))
        .output()
        .expect("llvm-profdata");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let shown = profdata_functions(&String::from_utf8_lossy(&o.stdout));
    assert_eq!(shown, ours, "llvm-profdata reads other totals than written");
    // And merges it into its binary form and back with the same totals.
    let o = Command::new("llvm-profdata")
        .args(["merge", "--sample", "--extbinary", "-o"])
        .arg(dir.join("tiny.afdo"))
        .arg(dir.join("tiny.prof"))
        .output()
        .expect("llvm-profdata merge");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new("llvm-profdata")
        .args(["show", "--sample", "--all-functions"])
        .arg(dir.join("tiny.afdo"))
        .output()
        .unwrap();
    assert_eq!(
        profdata_functions(&String::from_utf8_lossy(&o.stdout)),
        ours
    );
}

#[test]
fn clang_annotates_the_program_with_the_exported_entry_counts() {
    let clang = ["clang-14", "clang"].into_iter().find(|c| have(c));
    let Some(clang) = clang else {
        skip!("clang_annotates: clang not installed (apt-get install clang-14)");
        return;
    };
    let d = sandbox();
    let dir = d.path();
    pt(
        dir,
        &[
            "export",
            "tiny.ptexact",
            "--to",
            "llvm-sample",
            "-o",
            "tiny.prof",
            "--binary",
            "tiny",
        ],
    );
    // clang reads the profile while compiling the same source: the IR carries the counts.
    let o = Command::new(clang)
        .args([
            "-O2",
            "-g",
            "-fprofile-sample-use=tiny.prof",
            "-S",
            "-emit-llvm",
            "-o",
            "-",
            "tiny.c",
        ])
        .current_dir(dir)
        .output()
        .expect("clang");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ir = String::from_utf8_lossy(&o.stdout);
    // `define ... @leaf(...) ... !prof !N` and `!N = !{!"function_entry_count", i64 C}`: the
    // sample loader sets the entry count to head samples + 1.
    let entry = |f: &str| -> u64 {
        let def = ir
            .lines()
            .find(|l| l.starts_with("define") && l.contains(&format!("@{f}(")))
            .unwrap_or_else(|| panic!("no definition of {f}"));
        let id = def
            .split("!prof ")
            .nth(1)
            .expect("no !prof")
            .split(' ')
            .next()
            .unwrap();
        let md = ir
            .lines()
            .find(|l| l.starts_with(&format!("{id} = ")))
            .expect("metadata");
        md.rsplit("i64 ")
            .next()
            .unwrap()
            .trim_end_matches('}')
            .trim()
            .parse()
            .unwrap()
    };
    assert_eq!(entry("leaf"), 15041);
    assert_eq!(entry("work"), 2);
}

/// `go tool pprof -top` rows: flat count per function.
fn pprof_top(out: &str) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    let mut body = false;
    for l in out.lines() {
        if l.trim_start().starts_with("flat") {
            body = true;
            continue;
        }
        if !body {
            continue;
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() >= 6 {
            let n: u64 = f[0].parse().unwrap_or(0);
            if n > 0 {
                m.insert(f[5..].join(" "), n);
            }
        }
    }
    m
}

#[test]
fn go_pprof_shows_the_per_function_numbers_of_read() {
    if !have("go") {
        skip!("go_pprof: Go not installed (apt-get install golang-go)");
        return;
    }
    let d = sandbox();
    let dir = d.path();
    // perf's own file (with call chains) and proftrust's virtual-PMU samples.
    for (file, bin) in [("tiny.perf.data", "tiny"), ("tiny.ptsamp", "tiny")] {
        pt(
            dir,
            &[
                "export", file, "--to", "pprof", "-o", "p.pb.gz", "--binary", bin,
            ],
        );
        let o = Command::new("go")
            .args([
                "tool",
                "pprof",
                "-top",
                "-noinlines",
                "-nodefraction=0",
                "-symbolize=none",
                "p.pb.gz",
            ])
            .current_dir(dir)
            .env("PPROF_TMPDIR", dir)
            .env("HOME", dir)
            .output()
            .expect("go tool pprof");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let top = pprof_top(&String::from_utf8_lossy(&o.stdout));
        let read = read_symbols(dir, file);
        assert_eq!(
            top, read,
            "{file}: go tool pprof -top against proftrust read"
        );
    }
}

#[test]
fn firefox_profile_has_the_processed_format_and_reads_samples() {
    let d = sandbox();
    let dir = d.path();
    pt(
        dir,
        &[
            "export",
            "tiny.perf.data",
            "--to",
            "firefox",
            "-o",
            "ff.json",
            "--binary",
            "tiny",
        ],
    );
    let j: Value = serde_json::from_str(&read_file(dir, "ff.json")).unwrap();
    // Issue 31 item 14: the process and its main thread carry the program's name (`comm`,
    // as perf script shows it), not perf's command line.
    // (The Firefox Profiler shows a main thread by its process's name: `tiny (22000)`;
    // main wrote `/usr/bin/perf record -q -g ... ./tiny 2000000 (22000)`.)
    for t in j["threads"].as_array().unwrap() {
        for key in ["name", "processName"] {
            assert_eq!(t[key], "tiny (22000)", "{key}");
        }
    }
    // The processed format's skeleton (the Firefox Profiler's build is not on npm, so it
    // cannot be loaded offline: this walks the tables the way the profiler's call tree does).
    assert!(j["meta"]["version"].as_u64().is_some());
    assert!(j["meta"]["symbolicated"].as_bool().unwrap());
    assert!(!j["libs"].as_array().unwrap().is_empty());
    let shared_strings = j["shared"]["stringArray"].as_array().cloned();
    let mut self_counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut root_counts: BTreeMap<String, u64> = BTreeMap::new();
    for t in j["threads"].as_array().unwrap() {
        let strings = t["stringArray"]
            .as_array()
            .cloned()
            .or(shared_strings.clone())
            .expect("string table");
        let samples = &t["samples"];
        let stacks = samples["stack"].as_array().unwrap();
        let weights = samples["weight"].as_array();
        let st = &t["stackTable"];
        let frame_of = st["frame"].as_array().unwrap();
        let prefix = st["prefix"].as_array().unwrap();
        let func_of_frame = t["frameTable"]["func"].as_array().unwrap();
        let func_name = t["funcTable"]["name"].as_array().unwrap();
        let name = |stack: usize| -> String {
            let f = frame_of[stack].as_u64().unwrap() as usize;
            let func = func_of_frame[f].as_u64().unwrap() as usize;
            strings[func_name[func].as_u64().unwrap() as usize]
                .as_str()
                .unwrap()
                .to_string()
        };
        for (i, s) in stacks.iter().enumerate() {
            let w = weights
                .and_then(|w| w.get(i))
                .and_then(|w| w.as_u64())
                .unwrap_or(1);
            let mut s = s.as_u64().expect("every sample has a stack") as usize;
            *self_counts.entry(name(s)).or_default() += w;
            while let Some(p) = prefix[s].as_u64() {
                s = p as usize;
            }
            *root_counts.entry(name(s)).or_default() += w;
        }
    }
    // Leaf functions as `read` counts them (no inlining in this fixture's hot code).
    assert_eq!(self_counts, read_symbols(dir, "tiny.perf.data"));
    // perf recorded call chains: every stack starts at the program's entry.
    assert_eq!(root_counts.keys().collect::<Vec<_>>(), ["_start"]);
}

#[test]
fn speedscope_profile_weights_match_read() {
    let d = sandbox();
    let dir = d.path();
    pt(
        dir,
        &[
            "export",
            "tiny.perf.data",
            "--to",
            "speedscope",
            "-o",
            "ss.json",
            "--binary",
            "tiny",
        ],
    );
    let j: Value = serde_json::from_str(&read_file(dir, "ss.json")).unwrap();
    assert_eq!(
        j["$schema"],
        "https://www.speedscope.app/file-format-schema.json"
    );
    let frames = j["shared"]["frames"].as_array().unwrap();
    let mut leaf: BTreeMap<String, u64> = BTreeMap::new();
    for p in j["profiles"].as_array().unwrap() {
        assert_eq!(p["type"], "sampled");
        let samples = p["samples"].as_array().unwrap();
        let weights = p["weights"].as_array().unwrap();
        assert_eq!(samples.len(), weights.len());
        let total: f64 = weights.iter().map(|w| w.as_f64().unwrap()).sum();
        assert_eq!(p["endValue"].as_f64().unwrap(), total);
        for (s, w) in samples.iter().zip(weights) {
            let last = s.as_array().unwrap().last().unwrap().as_u64().unwrap() as usize;
            *leaf
                .entry(frames[last]["name"].as_str().unwrap().to_string())
                .or_default() += w.as_f64().unwrap() as u64;
        }
    }
    assert_eq!(leaf, read_symbols(dir, "tiny.perf.data"));
}

#[test]
fn annotated_source_marks_lines_outside_the_interval() {
    let d = sandbox();
    let dir = d.path();
    let dstr = dir.display().to_string();
    pt(
        dir,
        &[
            "export",
            "tiny.ptsamp",
            "--to",
            "annotate",
            "--against",
            "tiny.ptexact",
            "-o",
            "ann.txt",
            "--binary",
            "tiny",
            "--source-dir",
            &dstr,
        ],
    );
    let text = read_file(dir, "ann.txt");
    assert_golden(&expected("export-annotate.txt"), &text);
    // The line shares of `work` are its exact per-line counts over its total: line 33
    // (`s += leaf(i)`) holds the odd iterations' 15000 x (its instructions) of 300013.
    assert!(text.contains("s += leaf(i);"), "source text missing");
    pt(
        dir,
        &[
            "export",
            "tiny.ptsamp",
            "--to",
            "annotate-html",
            "--against",
            "tiny.ptexact",
            "-o",
            "ann.html",
            "--binary",
            "tiny",
            "--source-dir",
            &dstr,
        ],
    );
    let html = read_file(dir, "ann.html");
    assert!(html.contains("id=\"annotate-0\"") && !html.contains("<script"));
}

#[test]
fn audit_exports_and_html_with_flame_graphs_render_in_chromium() {
    let d = sandbox();
    let dir = d.path();
    pt(
        dir,
        &[
            "audit",
            "--samples",
            "tiny.ptsamp",
            "--truth",
            "tiny.ptexact",
            "--binary",
            "tiny",
            "--correct-skid",
            "3",
            "--html",
            "a.html",
            "--export",
            "folded-diff:a.diff",
            "--export",
            "llvm-sample:a.prof",
            "--export",
            "pprof@exact:e.pb.gz",
        ],
    );
    // --export llvm-sample with --correct-skid: the corrected profile.
    assert!(read_file(dir, "a.prof")
        .lines()
        .any(|l| l.starts_with("leaf:")));
    assert!(read_file(dir, "a.diff").lines().count() >= 3);
    assert!(dir.join("e.pb.gz").is_file());
    let html = read_file(dir, "a.html");
    for id in ["flame-sampled", "flame-exact", "flame-diff", "annotate-0"] {
        assert!(html.contains(&format!("id=\"{id}\"")), "{id} missing");
    }
    if !have("chromium") {
        skip!("audit html: chromium not installed (apt-get install chromium)");
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/html-check.sh");
    let png = dir.join("a.png");
    let o = Command::new("bash")
        .arg(script)
        .arg(dir.join("a.html"))
        .args([
            "plot-functions",
            "plot-instructions",
            "flame-sampled",
            "flame-exact",
            "flame-diff",
            "annotate-0",
        ])
        .env("SCREENSHOT", &png)
        .env("DOM_OUT", dir.join("a.dom.html"))
        .output()
        .expect("html-check");
    assert!(
        o.status.success(),
        "html-check failed: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    // A real screenshot: a PNG as wide as the window.
    let b = std::fs::read(&png).expect("screenshot written");
    assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n");
    let width = u32::from_be_bytes([b[16], b[17], b[18], b[19]]);
    assert_eq!(width, 1200);
    // The rendered DOM's per-function chart: tick labels (shares in %) and one value label
    // per bar, all inside the SVG's viewBox.
    let dom = read_file(dir, "a.dom.html");
    let start = dom
        .find(r#"id="plot-functions""#)
        .expect("plot-functions in the DOM");
    let svg = &dom[start..start + dom[start..].find("</svg>").expect("svg closes")];
    let attr = |el: &str, name: &str| -> f64 {
        let k = el
            .find(&format!(" {name}=\""))
            .unwrap_or_else(|| panic!("{name} in {el}"));
        let v = &el[k + name.len() + 3..];
        v[..v.find('"').unwrap()].parse().unwrap()
    };
    let vb = &svg[svg.find(r#"viewBox=""#).unwrap() + 9..];
    let vb: Vec<f64> = vb[..vb.find('"').unwrap()]
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    let (w, h) = (vb[2], vb[3]);
    let texts = |class: &str| -> Vec<(f64, f64, String)> {
        svg.split("<text ")
            .skip(1)
            .filter(|t| t.starts_with(&format!(r#"class="{class}""#)))
            .map(|t| {
                let body = &t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()];
                (attr(t, "x"), attr(t, "y"), body.to_string())
            })
            .collect()
    };
    let ticks = texts("tick");
    assert!(ticks.len() >= 3, "{svg}");
    let values = texts("value");
    assert_eq!(values.len(), svg.matches("<g>").count(), "{svg}");
    for (x, y, t) in ticks.iter().chain(&values) {
        assert!(t.ends_with('%'), "{t}");
        assert!(
            (0.0..=w).contains(x) && (0.0..=h).contains(y),
            "{t} at ({x}, {y}) outside the viewBox {w}x{h}"
        );
    }
    // The per-instruction picture of the hottest function (leaf) is a listing: every
    // instruction labelled `ADDRESS  INSTRUCTION` inside the viewBox, the mnemonics those
    // objdump prints at the same addresses.
    let start = dom
        .find(r#"id="plot-instructions""#)
        .expect("plot-instructions in the DOM");
    let svg = &dom[start..start + dom[start..].find("</svg>").expect("svg closes")];
    let vb = &svg[svg.find(r#"viewBox=""#).unwrap() + 9..];
    let vb: Vec<f64> = vb[..vb.find('"').unwrap()]
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    let rows: Vec<(f64, f64, String)> = svg
        .split("<text ")
        .skip(1)
        .filter(|t| t.contains(r#"font-family="monospace""#))
        .map(|t| {
            let body = &t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()];
            (attr(t, "x"), attr(t, "y"), body.to_string())
        })
        .collect();
    assert_eq!(rows.len(), svg.matches("<g>").count(), "{svg}");
    assert!(rows.len() >= 10, "{svg}");
    if !have("objdump") {
        skip!("audit html: objdump not installed (apt-get install binutils)");
        return;
    }
    let od = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(dir.join("tiny"))
        .output()
        .expect("objdump");
    let od = String::from_utf8_lossy(&od.stdout).into_owned();
    let mnemonic_at = |a: &str| -> Option<String> {
        od.lines()
            .find(|l| l.trim_start().starts_with(&format!("{a}:")))
            .and_then(|l| l.split('\t').nth(1))
            .and_then(|i| i.split_whitespace().next())
            .map(str::to_string)
    };
    for (x, y, t) in &rows {
        assert!(
            (0.0..=vb[2]).contains(x) && (0.0..=vb[3]).contains(y),
            "{t} at ({x}, {y}) outside the viewBox"
        );
        let (addr, ins) = t.split_once("  ").unwrap_or_else(|| panic!("{t}"));
        let ours = ins.split_whitespace().next().unwrap_or("");
        assert_eq!(Some(ours.to_string()), mnemonic_at(addr), "{t}");
    }
}

#[test]
fn bad_input_fails_with_a_clear_message_and_no_file() {
    let d = sandbox();
    let dir = d.path();
    std::fs::write(dir.join("junk"), b"\x00\x01 not a profile").unwrap();
    for (args, needle) in [
        (
            vec!["export", "junk", "--to", "pprof", "-o", "x"],
            "unknown file format",
        ),
        (
            vec!["export", "tiny.ptsamp", "--to", "folded-diff", "-o", "x"],
            "--against",
        ),
        (
            vec!["export", "tiny.ptexact", "--to", "annotate", "-o", "x"],
            "sample profile",
        ),
    ] {
        let o = Command::new(BIN)
            .args(&args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(needle), "{args:?}: {e}");
        assert!(!dir.join("x").exists(), "{args:?} left a file");
    }
}

/// Issue 31 item 4: a hybrid CPU's recording names two PMUs' `cycles`; the first
/// (`cpu_atom`) took no sample, the second every one. `export` took the first and wrote a
/// 0-byte file (exit 0), `check` failed; both now take the event with the samples, and an
/// export of an empty event is an error. The perf.data is built byte by byte
/// (`proftrust_testkit::perf_data`): 3 samples in `leaf` (0x401080..) and 1 in `work` of the
/// golden `tiny` (non-PIE: runtime addresses are SVMAs).
#[test]
fn the_event_with_the_samples_is_exported() {
    use proftrust_testkit::perf_data::{Event, PerfData};
    let dir = sandbox();
    let d = dir.path();
    let tiny = d.join("tiny");
    let mut p = PerfData::new(vec![
        Event::new(0, 10 << 32, 100).named("cpu_atom/cycles/"),
        Event::new(0, 4 << 32, 200).named("cpu_core/cycles/"),
    ]);
    p.comm(7, "tiny", 1);
    p.mmap2(7, 0x401000, 0x1000, 0x1000, tiny.to_str().unwrap(), 2);
    for (t, ip) in [(3, 0x401090), (4, 0x401098), (5, 0x4010a0), (6, 0x401150)] {
        p.sample(200, ip, 7, t, 1000);
    }
    std::fs::write(d.join("hybrid.data"), p.file_mode()).unwrap();
    let o = Command::new(BIN)
        .args(["export", "hybrid.data", "--to", "folded", "-o", "h.folded"])
        .current_dir(d)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("exporting cpu_core/cycles/, the first with samples"),
        "{err}"
    );
    assert_eq!(read_file(d, "h.folded"), "leaf 3\nwork 1\n");
    // Asked for by name, the empty event is refused: no empty file written silently.
    let o = Command::new(BIN)
        .args([
            "export",
            "hybrid.data",
            "--to",
            "folded",
            "--event",
            "cpu_atom/cycles/",
        ])
        .args(["-o", "a.folded"])
        .current_dir(d)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("no samples of cpu_atom/cycles/"), "{err}");
    assert!(!d.join("a.folded").exists());
    // check takes the same event.
    let out = pt(d, &["check", "hybrid.data", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["event"]["name"], "cpu_core/cycles/", "{v}");
    assert_eq!(v["samples"], 4);
}

/// `export` reads its input through the one loader, as `read` and `check` do: a gzip-
/// compressed `perf script` text or callgrind file and standard input (`-`) give the same
/// export as the plain file (export had its own path, which sniffed the compressed bytes
/// and refused them as an unknown format, and opened `-` as a file).
#[test]
fn export_reads_what_read_reads() {
    if !have("gzip") {
        skip!("export_reads_what_read_reads: needs gzip");
        return;
    }
    let dir = sandbox();
    let d = dir.path();
    for (input, flags) in [
        ("tiny.perf-script", &["--binary", "tiny"][..]),
        ("tiny.callgrind", &["--binary", "tiny"][..]),
    ] {
        let export = |from: &str, out: &str, stdin: Option<&Path>| {
            let mut c = Command::new(BIN);
            c.args(["export", from, "--to", "folded", "-o", out])
                .args(flags)
                .current_dir(d);
            if let Some(f) = stdin {
                c.stdin(std::fs::File::open(f).unwrap());
            }
            let o = c.output().unwrap();
            assert!(
                o.status.success(),
                "export {from}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            read_file(d, out)
        };
        let plain = export(input, "plain.folded", None);
        // Every line a stack and its count (the callgrind fixture names no object: one
        // `[unknown]` line of its 761048 Ir).
        assert!(!plain.is_empty(), "{input}");
        for l in plain.lines() {
            assert!(
                l.rsplit_once(' ')
                    .is_some_and(|(_, n)| n.parse::<u64>().is_ok()),
                "{l}"
            );
        }
        let gz = format!("{input}.gz");
        let o = Command::new("gzip")
            .args(["-k", input])
            .current_dir(d)
            .output()
            .unwrap();
        assert!(o.status.success());
        assert_eq!(export(&gz, "gz.folded", None), plain, "{gz}");
        assert_eq!(
            export("-", "stdin.folded", Some(&d.join(input))),
            plain,
            "{input} on stdin"
        );
    }
}

/// Issue 32 item 3: a profile of many distinct addresses in a module that is not on disk
/// (each its own `lib+0xOFFSET` name) is exported from the compact tables (folded: every
/// address once, its count, lines in byte order; the differential form of a profile
/// against itself has equal columns), and a format estimated to need more memory than
/// `--max-memory` is refused before it is written, the error naming the estimate, the
/// limit and the formats that fit. (Speed and memory on 26.8 M addresses:
/// scripts/bench-export.sh.)
#[test]
fn many_unknown_addresses_export_compactly_or_are_refused_up_front() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let mut cg = String::from(
        "version: 1\ncreator: test\ncmd: ./many\npositions: instr\nevents: Ir\nob=/nonexistent/libmany.so\nfn=f\n",
    );
    let mut want = Vec::new();
    for i in 0..3000u64 {
        let (addr, count) = (0x1000 + 3 * i, i % 7 + 1);
        cg.push_str(&format!("{addr:#x} {count}\n"));
        want.push((format!("libmany.so+{addr:#x}"), count));
    }
    std::fs::write(dir.join("many.out"), cg).unwrap();
    want.sort();
    pt(
        dir,
        &["export", "many.out", "--to", "folded", "-o", "m.folded"],
    );
    let got: Vec<(String, u64)> = read_file(dir, "m.folded")
        .lines()
        .map(|l| {
            let (s, n) = l.rsplit_once(' ').unwrap();
            (s.to_string(), n.parse().unwrap())
        })
        .collect();
    assert_eq!(got, want);
    pt(
        dir,
        &[
            "export",
            "many.out",
            "--to",
            "folded-diff",
            "--against",
            "many.out",
            "-o",
            "d.folded",
        ],
    );
    let diff = read_file(dir, "d.folded");
    assert_eq!(diff.lines().count(), 3000);
    for (l, (name, n)) in diff.lines().zip(&want) {
        assert_eq!(l, format!("{name} {n} {n}"));
    }
    for to in ["firefox", "speedscope", "pprof"] {
        let out = format!("m.{to}");
        let o = Command::new(BIN)
            .args(["export", "many.out", "--to", to, "-o", &out])
            .args(["--max-memory", "0.00001"])
            .current_dir(dir)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!("--to {to}: 3000 distinct stacks would take about"))
                && err.contains("more than the limit of 0.0 GB")
                && err.contains("--max-memory"),
            "{err}"
        );
        assert!(!dir.join(&out).exists(), "{to}: refused, yet written");
    }
}
