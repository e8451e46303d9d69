//! Issue 32 items 1 and 2: names from a hostile program through every output. The program
//! (`c/hostile.c`) has functions whose symbol-table and DWARF names hold ESC, OSC (title
//! and hyperlink), BEL, CR, newline, `;`, quotes, bytes that are not UTF-8, a bidirectional
//! override, C1 controls, markup and 10 kB of name; an inlined function whose name exists
//! only in DWARF; a thread name (comm) with a newline; it also runs from a directory whose
//! name holds a newline. Text output (stdout and stderr of every command) must hold no raw
//! control byte and no line the names forged; each machine format is read by its consumer:
//! folded stacks line by line, the LLVM sample profile by `llvm-profdata`, the flame graph
//! SVGs (export and the three in the audit page) by `xmllint` and Chromium, pprof by
//! `go tool pprof`, JSON by serde_json with the names exact.

use proftrust_testkit::{have, need, skip};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

thread_local! {
    /// The test's own HOME: perf's build-id cache under the real one would find a moved
    /// program by its build-id.
    static HOME: std::cell::RefCell<Option<PathBuf>> = const { std::cell::RefCell::new(None) };
}

fn proftrust() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_proftrust"));
    c.env("NO_COLOR", "1");
    HOME.with(|h| {
        if let Some(h) = &*h.borrow() {
            c.env("HOME", h);
        }
    });
    c
}

/// The hostile names: the macro of `hostile.c` each replaces, and its bytes.
fn hostile_names() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("N_ESC", b"\x1b]0;pwned\x07".to_vec()),
        ("N_NL", b"f\nFAKE 99.99% row".to_vec()),
        ("N_HTML", b"<script>alert(1)</script>&amp;".to_vec()),
        ("N_CLEAR", b"\x1b[2J\x1b[Hclear".to_vec()),
        (
            "N_OSC8",
            b"\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\".to_vec(),
        ),
        ("N_CR", b"cr\rFAKE 88.88% row".to_vec()),
        ("N_SEMI", b"semi;colon \"dq\" 'sq' `bt`".to_vec()),
        ("N_BYTES", b"bad\xff\xfeutf8\x9b\xc0".to_vec()),
        ("N_BIDI", "rtl\u{202e}gnp.exe".as_bytes().to_vec()),
        ("N_C1", "c1\u{9b}31m\u{85}nel".as_bytes().to_vec()),
        ("N_INL", b"inl\x1b[31m;red\nFAKE 77.77% row".to_vec()),
    ]
}

/// The 10 kB name (kept as it is: a plain identifier).
fn long_name() -> String {
    format!("long_{}", "x".repeat(10_000))
}

/// The thread name the program sets (comm: at most 15 bytes).
const COMM: &str = "c\x1b[2J\nFAKE 1%";

/// Compiles `hostile.c` with each hostile name as a placeholder identifier of the same
/// length, replaces every placeholder's bytes in the object (symbol table and DWARF) by the
/// hostile name, and links.
fn build(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/hostile.c");
    let obj = dir.join("hostile.o");
    let mut defs = Vec::new();
    let mut subst = Vec::new();
    for (i, (mac, bytes)) in hostile_names().into_iter().enumerate() {
        let mut ph = format!("PTH{}_", (b'A' + i as u8) as char);
        assert!(ph.len() <= bytes.len(), "{mac} too short for a placeholder");
        ph.push_str(&"Z".repeat(bytes.len() - ph.len()));
        defs.push(format!("-D{mac}={ph}"));
        subst.push((mac, ph.into_bytes(), bytes));
    }
    defs.push(format!("-DN_LONG={}", long_name()));
    let comm: String = COMM
        .bytes()
        .map(|b| format!("\\x{b:02x}"))
        .collect::<String>();
    defs.push(format!("-DCOMM=\"{comm}\""));
    let st = Command::new("gcc")
        .args(["-O1", "-g", "-c"])
        .args(&defs)
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .status()
        .unwrap();
    assert!(st.success(), "gcc hostile.c");
    let mut b = std::fs::read(&obj).unwrap();
    for (mac, ph, name) in &subst {
        let mut found = 0;
        let mut i = 0;
        while let Some(k) = b[i..].windows(ph.len()).position(|w| w == &ph[..]) {
            b[i + k..i + k + ph.len()].copy_from_slice(name);
            i += k + ph.len();
            found += 1;
        }
        // The symbol table and DWARF's name (the inlined function: DWARF's alone).
        let places = if *mac == "N_INL" { 1 } else { 2 };
        assert!(found >= places, "{mac}: found {found} times");
    }
    std::fs::write(&obj, b).unwrap();
    let exe = dir.join("hostile");
    let st = Command::new("gcc")
        .arg(&obj)
        .arg("-o")
        .arg(&exe)
        .status()
        .unwrap();
    assert!(st.success(), "link hostile");
    exe
}

/// What a name looks like once read (bytes that are not UTF-8 replaced).
fn read_name(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Why `bytes` (text output) is not clean: a raw control byte (C0 but tab and line feed,
/// DEL), a C1 control or bidirectional mark, or a line that starts with a forged `FAKE`.
fn dirt(bytes: &[u8]) -> Option<String> {
    if let Some(i) = bytes
        .iter()
        .position(|&b| (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f)
    {
        let from = i.saturating_sub(40);
        return Some(format!(
            "raw control byte {:#04x} at {i}: {:?}",
            bytes[i],
            String::from_utf8_lossy(&bytes[from..(i + 40).min(bytes.len())])
        ));
    }
    let s = String::from_utf8_lossy(bytes);
    if let Some(c) = s.chars().find(|&c| {
        ('\u{80}'..='\u{9f}').contains(&c)
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    }) {
        return Some(format!("raw {c:?}"));
    }
    s.lines()
        .find(|l| l.trim_start().starts_with("FAKE"))
        .map(|l| format!("forged line {:?}", l.chars().take(80).collect::<String>()))
}

fn assert_clean(label: &str, o: &Output) {
    for (what, b) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
        if let Some(d) = dirt(b) {
            panic!("{label} {what}: {d}");
        }
    }
}

fn run(label: &str, args: &[std::ffi::OsString]) -> Output {
    let o = proftrust().args(args).output().unwrap();
    assert_clean(label, &o);
    assert!(
        !String::from_utf8_lossy(&o.stderr).contains("panicked"),
        "{label}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// A JSON run: stderr clean, stdout JSON without a raw control byte (JSON keeps names
/// exact: serde_json escapes C0 controls, other characters stay as they are).
fn ok_json(label: &str, args: &[std::ffi::OsString]) -> Value {
    let o = proftrust().args(args).output().unwrap();
    if let Some(d) = dirt(&o.stderr) {
        panic!("{label} stderr: {d}");
    }
    assert!(
        o.status.success(),
        "{label}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        !o.stdout.iter().any(|&b| b < 0x20 && b != b'\n'),
        "{label}: raw control byte in JSON"
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{label}: not JSON: {e}"))
}

fn ok(label: &str, args: &[std::ffi::OsString]) -> Output {
    let o = run(label, args);
    assert!(
        o.status.success(),
        "{label}: {:?}\n{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

macro_rules! args {
    ($($a:expr),* $(,)?) => {
        [$(std::ffi::OsString::from($a)),*]
            .into_iter()
            .collect::<Vec<std::ffi::OsString>>()
    };
}

/// The inputs every output is made from.
struct Inputs {
    dir: PathBuf,
    exe: PathBuf,
    samples: PathBuf,
    exact: PathBuf,
    vsamples: PathBuf,
    /// Recorded from a directory whose name holds a newline, since renamed.
    moved: PathBuf,
    /// perf script text with a hostile event name.
    event_text: PathBuf,
    /// A copy of the program whose file name holds a newline and a forged row.
    named: PathBuf,
    /// Exact counts of another program (`/bin/true`).
    other_exact: PathBuf,
}

fn inputs(dir: &Path) -> Inputs {
    let home = dir.join("home");
    std::fs::create_dir(&home).unwrap();
    HOME.with(|h| *h.borrow_mut() = Some(home));
    let exe = build(dir);
    let p = |n: &str| dir.join(n);
    let e = exe.as_os_str();
    let (samples, exact, vsamples) = (p("h.ptsamp"), p("h.ptexact"), p("v.ptsamp"));
    ok(
        "record",
        &args!["record", "-o", samples.as_os_str(), "--", e, "20000000"],
    );
    ok(
        "truth",
        &args!["truth", "-o", exact.as_os_str(), "--", e, "3000000"],
    );
    ok(
        "vpmu",
        &args!["vpmu", "-o", vsamples.as_os_str(), "--", e, "3000000"],
    );
    // A program in a directory named with a newline and a forged row, then moved away:
    // its samples name a module that is not found.
    let hd = dir.join("d\x1b]0;t\x07\nFAKE 55.55% row");
    std::fs::create_dir(&hd).unwrap();
    std::fs::copy(&exe, hd.join("hostile")).unwrap();
    let moved = p("moved.ptsamp");
    ok(
        "record from a hostile directory",
        &args![
            "record",
            "-o",
            moved.as_os_str(),
            "--",
            hd.join("hostile").as_os_str(),
            "3000000"
        ],
    );
    std::fs::rename(&hd, dir.join("gone")).unwrap();
    let named = dir.join("h\x1b]0;t\x07\nFAKE 44.44% row");
    std::fs::copy(&exe, &named).unwrap();
    let other_exact = p("true.ptexact");
    ok(
        "truth of /bin/true",
        &args!["truth", "-o", other_exact.as_os_str(), "--", "/bin/true"],
    );
    // An event named with control characters, in perf script text.
    let o = ok(
        "read --script",
        &args!["read", "--script", samples.as_os_str()],
    );
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains(" cpu-clock: "), "{}", &text[..200]);
    let event_text = p("event.perf-script");
    std::fs::write(
        &event_text,
        text.replace(" cpu-clock: ", " cpu\x1b]0;ev\x07\u{202e}clock: "),
    )
    .unwrap();
    Inputs {
        dir: dir.to_path_buf(),
        exe,
        samples,
        exact,
        vsamples,
        moved,
        event_text,
        named,
        other_exact,
    }
}

#[test]
fn hostile_names_through_every_text_output() {
    if !need(
        "hostile_names_through_every_text_output",
        &["gcc", "qemu-x86_64"],
    ) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let i = inputs(d.path());
    let (e, s, x, v) = (
        i.exe.as_os_str(),
        i.samples.as_os_str(),
        i.exact.as_os_str(),
        i.vsamples.as_os_str(),
    );
    let (m, ev) = (i.moved.as_os_str(), i.event_text.as_os_str());
    let runs: Vec<(&str, Vec<std::ffi::OsString>)> = vec![
        ("read samples", args!["read", s]),
        ("read exact", args!["read", x]),
        ("read vpmu samples", args!["read", v]),
        ("read moved", args!["read", m]),
        ("read hostile event", args!["read", ev]),
        ("read -v", args!["-v", "read", m]),
        ("check", args!["check", s, "--binary", e]),
        ("check moved", args!["check", m]),
        ("check hostile event", args!["check", ev, "--binary", e]),
        ("check vpmu", args!["check", v, "--binary", e]),
        (
            "audit",
            args!["audit", "--samples", s, "--truth", x, "--binary", e],
        ),
        (
            "audit vpmu",
            args!["audit", "--samples", v, "--truth", x, "--binary", e],
        ),
        (
            "audit hostile event",
            args!["audit", "--samples", ev, "--truth", x, "--binary", e],
        ),
        ("inspect", args!["inspect", e]),
        (
            "inspect --function",
            args!["inspect", "--function", "main", e],
        ),
        (
            "correct",
            args!["correct", "--skid", "5", "--samples", v, "--binary", e],
        ),
        ("analyze", args!["analyze", "granularity", s, "--binary", e]),
        (
            "paths",
            args!["paths", "--cpi-model", "flat", "--", e, "300000"],
        ),
        (
            "cct",
            args!["cct", "--cpi-model", "flat", "--", e, "300000"],
        ),
        ("vpp", args!["vpp", "--", e, "300000"]),
        (
            "export annotate",
            args![
                "export",
                "--to",
                "annotate",
                s,
                "--against",
                x,
                "--binary",
                e,
                "-o",
                "-"
            ],
        ),
    ];
    for (label, a) in &runs {
        ok(label, a);
    }
    // An error naming the hostile file: one line on stderr.
    let o = run(
        "audit against the truth of another program",
        &args![
            "audit",
            "--samples",
            s,
            "--truth",
            i.other_exact.as_os_str(),
            "--binary",
            i.named.as_os_str()
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the truth contains nothing from h\\x1b]0;t\\x07\\nFAKE 44.44% row"),
        "{err}"
    );
    let o = ok("read moved, warnings", &args!["read", m]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("not found: its samples are shown as hostile+0xOFFSET"),
        "{err}"
    );
    assert!(
        err.contains("d\\x1b]0;t\\x07\\nFAKE 55.55% row/hostile"),
        "{err}"
    );
    // What text shows: the escaped forms.
    let o = ok("read, escaped forms", &args!["read", "--top", "0", s]);
    let out = String::from_utf8_lossy(&o.stdout);
    for shown in [
        "\\x1b]0;pwned\\x07",
        "f\\nFAKE 99.99% row",
        "cr\\rFAKE 88.88% row",
        "rtl\\u{202e}gnp.exe",
        "c1\\u{9b}31m\\u{85}nel",
        "bad\u{fffd}\u{fffd}utf8\u{fffd}\u{fffd}",
        "semi;colon \"dq\" 'sq' `bt`",
    ] {
        assert!(out.contains(shown), "{shown:?} not in {out}");
    }
    assert!(out.contains(&long_name()), "the 10 kB name is shown whole");
    let o = ok("check, escaped event", &args!["check", ev, "--binary", e]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("samples:") && out.contains("cpu\\x1b]0;ev\\x07\\u{202e}clock"),
        "{out}"
    );
    // JSON keeps the names exact.
    let j = ok_json("read --json", &args!["read", "--json", "--top", "0", s]);
    let names: Vec<&str> = j["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["name"].as_str())
        .collect();
    for (mac, b) in hostile_names() {
        if mac == "N_INL" {
            continue; // inlined: no symbol of its own
        }
        let n = read_name(&b);
        assert!(names.contains(&n.as_str()), "{n:?} not in {names:?}");
    }
    let j = ok_json("check --json", &args!["check", "--json", ev, "--binary", e]);
    assert_eq!(j["event"]["name"], "cpu\x1b]0;ev\x07\u{202e}clock");
    let j = ok_json(
        "check --json inline",
        &args!["check", "--json", s, "--binary", e],
    );
    let inl = read_name(b"inl\x1b[31m;red\nFAKE 77.77% row");
    assert!(
        j["inlines"]
            .as_array()
            .unwrap()
            .iter()
            // check names an inlined row `INLINE (inlined in FUNCTION)` (docs/check.md).
            .any(|r| r["name"] == format!("{inl} (inlined in host)").as_str()),
        "the DWARF-only name {inl:?} in {}",
        j["inlines"]
    );
}

/// The stacks of folded text: each line `FRAMES COUNT`; panics on a line that is not.
fn folded_lines(label: &str, text: &str) -> Vec<(Vec<String>, u64)> {
    text.lines()
        .map(|l| {
            let (stack, n) = l
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("{label}: no count in {l:?}"));
            let n: u64 = n
                .parse()
                .unwrap_or_else(|_| panic!("{label}: count {n:?} in {l:?}"));
            (stack.split(';').map(str::to_string).collect(), n)
        })
        .collect()
}

/// Checks an SVG with xmllint and Chromium (each skipped loudly when absent).
fn svg_consumers(label: &str, path: &Path) {
    if have("xmllint") {
        let o = Command::new("xmllint")
            .args(["--noout", "--nonet"])
            .arg(path)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{label}: xmllint: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    } else {
        skip!("hostile_names_through_machine_formats: {label}: xmllint missing (libxml2-utils)");
    }
    if have("chromium") {
        let o = Command::new("chromium")
            .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
            .arg(format!("file://{}", path.display()))
            .output()
            .unwrap();
        let dom = String::from_utf8_lossy(&o.stdout);
        assert!(
            dom.contains("<svg"),
            "{label}: chromium shows no SVG: {dom:.300}"
        );
        assert!(
            !dom.contains("parsererror") && !dom.contains("Invalid character"),
            "{label}: chromium: {dom:.600}"
        );
    } else {
        skip!("hostile_names_through_machine_formats: {label}: chromium missing");
    }
}

#[test]
fn hostile_names_through_machine_formats() {
    if !need(
        "hostile_names_through_machine_formats",
        &["gcc", "qemu-x86_64"],
    ) {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let i = inputs(d.path());
    let dir = &i.dir;
    let (e, s, x) = (
        i.exe.as_os_str(),
        i.samples.as_os_str(),
        i.exact.as_os_str(),
    );
    let names: Vec<String> = hostile_names().iter().map(|(_, b)| read_name(b)).collect();
    // Folded stacks, from export and from cct: every line one stack, each hostile name one
    // frame.
    let folded_cct = dir.join("cct.folded");
    ok(
        "cct --folded",
        &args![
            "cct",
            "--cpi-model",
            "flat",
            "--folded",
            folded_cct.as_os_str(),
            "--",
            e,
            "300000"
        ],
    );
    let cct = std::fs::read(&folded_cct).unwrap();
    let o = ok(
        "export folded",
        &args!["export", "--to", "folded", x, "--binary", e, "-o", "-"],
    );
    for (label, text) in [("export --to folded", o.stdout), ("cct --folded", cct)] {
        if let Some(d) = dirt(&text) {
            panic!("{label}: {d}");
        }
        let lines = folded_lines(label, &String::from_utf8(text).unwrap());
        for n in &names {
            if label == "cct --folded" && n.starts_with("inl") {
                continue; // the calling-context tree knows functions, not inline frames
            }
            let frame = folded_oracle(n);
            assert!(
                lines.iter().any(|(st, _)| st.contains(&frame)),
                "{label}: no frame {frame:?}"
            );
        }
    }
    // LLVM sample profile: llvm-profdata reads every record, names as written.
    let prof = dir.join("h.llvm.prof");
    let o = ok(
        "export llvm-sample",
        &args![
            "export",
            "--to",
            "llvm-sample",
            x,
            "--binary",
            e,
            "-o",
            prof.as_os_str()
        ],
    );
    let written = std::fs::read(&prof).unwrap();
    if let Some(d) = dirt(&written) {
        panic!("llvm-sample: {d}\n{}", String::from_utf8_lossy(&o.stderr));
    }
    let written = String::from_utf8(written).unwrap();
    let heads: Vec<&str> = written
        .lines()
        .filter(|l| !l.starts_with(' '))
        .map(|l| l.rsplitn(3, ':').nth(2).unwrap())
        .collect();
    for n in &names {
        let shown = llvm_name(n);
        assert!(
            written.contains(&shown),
            "llvm-sample: {shown:?} missing in {written:.2000}"
        );
    }
    if have("llvm-profdata") {
        let o = Command::new("llvm-profdata")
            .args(["merge", "--sample", "--text", "-o", "-"])
            .arg(&prof)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "llvm-profdata: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let back = String::from_utf8(o.stdout).unwrap();
        let mut back_heads: Vec<&str> = back
            .lines()
            .filter(|l| !l.starts_with(' '))
            .map(|l| l.rsplitn(3, ':').nth(2).unwrap())
            .collect();
        let mut ours = heads.clone();
        back_heads.sort();
        ours.sort();
        assert_eq!(back_heads, ours, "llvm-profdata reads other names");
    } else {
        skip!("hostile_names_through_machine_formats: llvm-profdata missing (llvm)");
    }
    // Flame graph SVGs: export, differential export, and the three in the audit page.
    let fg = dir.join("h.svg");
    let fgd = dir.join("hd.svg");
    ok(
        "export flamegraph",
        &args![
            "export",
            "--to",
            "flamegraph",
            s,
            "--binary",
            e,
            "-o",
            fg.as_os_str()
        ],
    );
    ok(
        "export flamegraph-diff",
        &args![
            "export",
            "--to",
            "flamegraph-diff",
            s,
            "--against",
            x,
            "--binary",
            e,
            "-o",
            fgd.as_os_str()
        ],
    );
    svg_consumers("export --to flamegraph", &fg);
    svg_consumers("export --to flamegraph-diff", &fgd);
    let html = dir.join("h.html");
    ok(
        "audit --html",
        &args![
            "audit",
            "--html",
            html.as_os_str(),
            "--samples",
            s,
            "--truth",
            x,
            "--binary",
            e
        ],
    );
    let page = std::fs::read(&html).unwrap();
    if let Some(d) = dirt(&page) {
        panic!("audit HTML: {d}");
    }
    let page = String::from_utf8(page).unwrap();
    assert!(!page.contains("<script>"), "unescaped markup");
    let mut svgs = 0;
    for (k, part) in page
        .split("src=\"data:image/svg+xml;base64,")
        .skip(1)
        .enumerate()
    {
        let b64 = &part[..part.find('"').unwrap()];
        let svg = base64_decode(b64);
        if let Some(d) = dirt(&svg) {
            panic!("audit flame graph {k}: {d}");
        }
        let p = dir.join(format!("audit-flame-{k}.svg"));
        std::fs::write(&p, svg).unwrap();
        svg_consumers(&format!("audit flame graph {k}"), &p);
        svgs += 1;
    }
    assert_eq!(svgs, 3, "sampled, exact and differential flame graphs");
    // pprof: go tool pprof reads it and shows the names.
    let pb = dir.join("h.pb.gz");
    ok(
        "export pprof",
        &args![
            "export",
            "--to",
            "pprof",
            s,
            "--binary",
            e,
            "-o",
            pb.as_os_str()
        ],
    );
    if have("go") {
        let home = dir.join("gohome");
        let o = Command::new("go")
            .args(["tool", "pprof", "-raw"])
            .arg(&pb)
            .env("HOME", &home)
            .env("GOCACHE", home.join("cache"))
            .env("GOPATH", home.join("path"))
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "go tool pprof: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let raw = String::from_utf8_lossy(&o.stdout);
        for n in &names {
            assert!(raw.contains(n.as_str()), "pprof lacks {n:?}");
        }
    } else {
        skip!("hostile_names_through_machine_formats: go missing (golang-go)");
    }
    // Firefox and speedscope JSON: valid, names exact.
    for to in ["firefox", "speedscope"] {
        let v = ok_json(
            to,
            &args!["export", "--to", to, s, "--binary", e, "-o", "-"],
        );
        let all = v.to_string();
        for n in &names {
            let json = serde_json::to_string(n).unwrap();
            assert!(all.contains(&json[1..json.len() - 1]), "{to} lacks {n:?}");
        }
    }
    // The annotated page: no raw control byte, no live markup.
    let o = ok(
        "export annotate-html",
        &args![
            "export",
            "--to",
            "annotate-html",
            s,
            "--against",
            x,
            "--binary",
            e,
            "-o",
            "-"
        ],
    );
    if let Some(d) = dirt(&o.stdout) {
        panic!("annotate-html: {d}");
    }
    assert!(!String::from_utf8_lossy(&o.stdout).contains("<script>"));
}

/// A frame as folded text shows it (the rule of `proftrust_model::folded_frame`, spelled
/// out here as the oracle: control characters escaped, `;` as `:`).
fn folded_oracle(n: &str) -> String {
    escaped(n).replace(';', ":")
}

/// A name as the LLVM sample profile shows it (no hostile name starts with `#` or space).
fn llvm_name(n: &str) -> String {
    escaped(n)
}

/// The text rule, written out independently: `\n \t \r`, other C0 and DEL as `\xHH`, C1
/// and bidirectional marks as `\u{..}`, backslashes doubled when anything is escaped.
fn escaped(n: &str) -> String {
    let bad =
        |c: char| c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{fffe}' | '\u{ffff}');
    if !n.chars().any(bad) {
        return n.to_string();
    }
    n.chars()
        .map(|c| match c {
            '\\' => "\\\\".to_string(),
            '\n' => "\\n".into(),
            '\t' => "\\t".into(),
            '\r' => "\\r".into(),
            c if (c as u32) < 0x80 && bad(c) => format!("\\x{:02x}", c as u32),
            c if bad(c) => format!("\\u{{{:x}}}", c as u32),
            c => c.to_string(),
        })
        .collect()
}

fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| -> u32 {
        match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' => 62,
            b'/' => 63,
            _ => panic!("base64 {c}"),
        }
    };
    let mut out = Vec::new();
    for chunk in s.as_bytes().chunks(4) {
        let pad = chunk.iter().filter(|&&c| c == b'=').count();
        let mut n = 0u32;
        for &c in chunk {
            n = n << 6 | if c == b'=' { 0 } else { val(c) };
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..3 - pad]);
    }
    out
}
