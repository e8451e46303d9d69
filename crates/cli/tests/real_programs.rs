//! Programs as users have them (issue 29): Debian's stripped, dynamically linked gawk, xz
//! (liblzma), bzip2 (libbz2) and lua5.4, which `scripts/test.sh` installs, recorded with
//! perf and read, checked and audited by proftrust, with perf as the oracle:
//!
//! * every sample in a function where `.eh_frame` covers the code (< 1% in none), and each
//!   function recovered from an FDE holding exactly the samples perf places in that FDE's
//!   range (`readelf --debug-dump=frames`);
//! * the same recording read with the `-g` build and with its `objcopy --strip-all` copy
//!   partitions the samples into the same functions;
//! * DWARF stacks (`perf record --call-graph dwarf`) equal `perf script`'s, with and without
//!   frame pointers;
//! * the kernel samples of a syscall-heavy program (`dd bs=1`) in kernel functions, from
//!   perf.data and from `proftrust record --kernel` (the kallsyms it stores).
//!
//! docs/real-programs.md shows the same commands and their output. Each test skips (loudly)
//! when perf cannot record here or a program is missing.

use proftrust_testkit::{have, skip_test};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_proftrust");

/// A build-id cache of the tests' own for perf and proftrust (`PERF_BUILDID_DIR`): perf
/// record copies every binary it sees into `~/.debug` by build-id and both tools look there
/// first, so a stripped copy one test recorded would otherwise stand for the `-g` build of
/// another with the same build-id.
fn buildid_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

/// `perf` with the tests' own build-id cache.
fn perf() -> Command {
    let mut c = Command::new("perf");
    c.env("PERF_BUILDID_DIR", buildid_dir());
    c
}

/// `proftrust` with the tests' own build-id cache.
fn pt() -> Command {
    let mut c = Command::new(BIN);
    c.env("PERF_BUILDID_DIR", buildid_dir());
    c
}

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        o.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn proftrust(args: &[&str]) -> String {
    run(pt().args(args))
}

/// The test's inputs, in its own directory: numbers for gawk, text for the compressors, a
/// Lua script.
struct Inputs {
    dir: tempfile::TempDir,
}

impl Inputs {
    fn new() -> Inputs {
        let dir = tempfile::tempdir().unwrap();
        let nums: String = (1..=150_000).map(|i| format!("{i}\n")).collect();
        std::fs::write(dir.path().join("nums"), &nums).unwrap();
        // Compressible but not trivial: a seeded linear congruential stream of words.
        let mut x: u64 = 42;
        let mut text = String::with_capacity(3 << 20);
        while text.len() < 3 << 20 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            text.push_str(["alpha ", "beta ", "gamma\n", "delta ", "eps "][(x >> 60) as usize % 5]);
            text.push_str(&format!("{} ", (x >> 40) % 1000));
        }
        std::fs::write(dir.path().join("text"), text).unwrap();
        std::fs::write(
            dir.path().join("work.lua"),
            "local function fib(n) if n < 2 then return n end return fib(n-1) + fib(n-2) end\n\
             local t = {}\nfor i = 1, 150000 do t[#t + 1] = tostring(i * 7919 % 150001) end\n\
             table.sort(t)\nprint(fib(26), #t)\n",
        )
        .unwrap();
        Inputs { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// The corpus: (name, command line).
    fn programs(&self) -> Vec<(&'static str, Vec<String>)> {
        vec![
            (
                "gawk",
                vec![
                    "gawk".into(),
                    "{s+=$1*$1; a[$1%100]++} END{print s, length(a)}".into(),
                    self.path("nums"),
                ],
            ),
            (
                "xz",
                vec!["xz".into(), "-6".into(), "-c".into(), self.path("text")],
            ),
            (
                "bzip2",
                vec!["bzip2".into(), "-9".into(), "-c".into(), self.path("text")],
            ),
            ("lua5.4", vec!["lua5.4".into(), self.path("work.lua")]),
        ]
    }
}

/// Whether perf records here and every program of the corpus is installed.
fn corpus_ready(test: &str) -> bool {
    for t in ["perf", "readelf", "gawk", "xz", "bzip2", "lua5.4"] {
        if !have(t) {
            skip_test(
                test,
                &format!("{t} is not installed (scripts/test.sh installs linux-perf, binutils, gawk, xz-utils, bzip2, lua5.4)"),
            );
            return false;
        }
    }
    true
}

/// `perf record -q EXTRA -o OUT -- CMD` (output of the program discarded); `None` when perf
/// cannot record here.
fn perf_record(out: &Path, extra: &[&str], cmd: &[String]) -> Option<PathBuf> {
    let o = perf()
        .arg("record")
        .arg("-q")
        .args(extra)
        .arg("-o")
        .arg(out)
        .arg("--")
        .args(cmd)
        .stdout(std::process::Stdio::null())
        .output()
        .ok()?;
    if !o.status.success() {
        eprintln!("perf record failed: {}", String::from_utf8_lossy(&o.stderr));
        return None;
    }
    Some(out.to_path_buf())
}

/// `PT_LOAD` segments of `path` as `readelf -lW` prints them: (offset, vaddr, filesz).
fn load_segments(path: &str) -> Vec<(u64, u64, u64)> {
    let Ok(o) = Command::new("readelf").args(["-lW", path]).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.first() != Some(&"LOAD") {
                return None;
            }
            let h = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
            Some((h(f[1])?, h(f[2])?, h(f[4])?))
        })
        .collect()
}

/// perf prints a frame of a file-backed module map-relative (`map__map_ip`: the file
/// offset); proftrust prints SVMAs. The file offset of SVMA `a` in `dso`.
struct Offsets(HashMap<String, Vec<(u64, u64, u64)>>);

impl Offsets {
    fn of(&mut self, a: u64, dso: &str) -> u64 {
        if dso.starts_with('[') {
            return a;
        }
        let segs = self
            .0
            .entry(dso.to_string())
            .or_insert_with(|| load_segments(dso));
        segs.iter()
            .find(|(_, va, sz)| a >= *va && a < va + sz)
            .map_or(a, |(off, va, _)| a - va + off)
    }
}

/// One sample's frames, innermost first: (address, module).
type Chain = Vec<(u64, String)>;

/// `perf script --no-inline -F ip,dso` (the ip, then one frame per line; a final
/// `ffffffffffffffff` perf adds when its unwinder stops early is left out: it is no frame).
fn perf_chains(data: &Path) -> Vec<Chain> {
    let out = run(perf()
        .args(["script", "--no-inline", "-F", "ip,dso", "-i"])
        .arg(data));
    let mut all = Vec::new();
    let mut cur: Chain = Vec::new();
    for l in out.lines() {
        let t = l.trim();
        if t.is_empty() {
            if !cur.is_empty() {
                all.push(std::mem::take(&mut cur));
            }
            continue;
        }
        let Some((a, rest)) = t.split_once(' ') else {
            continue;
        };
        let dso = rest.trim().trim_start_matches('(').trim_end_matches(')');
        if let Ok(a) = u64::from_str_radix(a, 16) {
            cur.push((a, dso.to_string()));
        }
    }
    if !cur.is_empty() {
        all.push(cur);
    }
    for c in &mut all {
        while c.last().is_some_and(|f| f.0 == u64::MAX) {
            c.pop();
        }
    }
    all
}

/// `proftrust read --script` frames: (address, module), innermost first.
fn our_chains(data: &Path, extra: &[&str]) -> Vec<Chain> {
    let mut args = vec!["read", "--script", data.to_str().unwrap()];
    args.extend(extra);
    let out = proftrust(&args);
    let mut all: Vec<Chain> = Vec::new();
    for l in out.lines() {
        if l.starts_with('#') || l.trim().is_empty() {
            continue;
        }
        let dso = l
            .rsplit_once(" (")
            .map(|(_, d)| d.trim_end_matches(')').to_string())
            .unwrap_or_default();
        if let Some(frame) = l.strip_prefix('\t') {
            let a = frame.split_whitespace().next().unwrap();
            all.last_mut()
                .unwrap()
                .push((u64::from_str_radix(a, 16).unwrap(), dso));
        } else {
            // `comm pid/tid [cpu] time: period event: ADDR name (module)`
            let after = l.split(": ").nth(2).expect("a sample line");
            let a = after.split_whitespace().next().unwrap();
            all.push(vec![(u64::from_str_radix(a, 16).unwrap(), dso)]);
        }
    }
    all
}

/// Our frames as perf prints them: user frames after the first user frame are return
/// addresses, which perf's DWARF unwinder prints minus 1 (the call instruction); file
/// offsets, not SVMAs.
fn as_perf_prints(c: &Chain, offsets: &mut Offsets) -> Vec<u64> {
    let mut seen_user = false;
    c.iter()
        .map(|(a, dso)| {
            if dso.starts_with("[kernel") || dso.starts_with('[') && dso != "[vdso]" {
                return *a;
            }
            let a = if seen_user { a - 1 } else { *a };
            seen_user = true;
            offsets.of(a, dso)
        })
        .collect()
}

/// DWARF call stacks of `perf record --call-graph dwarf` recordings of the corpus and of a
/// C program with and without frame pointers (stripped): proftrust's stacks equal
/// `perf script`'s for at least 99% of the samples of each.
#[test]
fn dwarf_stacks_equal_perf_script() {
    let t = "dwarf_stacks_equal_perf_script";
    if !corpus_ready(t) || !have("gcc") {
        return;
    }
    let inputs = Inputs::new();
    let mut cases = inputs.programs();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../binary/tests/c/stripped.c");
    for (name, flags) in [
        (
            "c-fp",
            &["-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer"][..],
        ),
        ("c-nofp", &["-fomit-frame-pointer"][..]),
    ] {
        let exe = inputs.dir.path().join(name);
        proftrust_testkit::gcc(&exe, &[&src], flags);
        run(Command::new("strip").arg(&exe));
        cases.push((
            if name == "c-fp" { "c-fp" } else { "c-nofp" },
            vec![exe.display().to_string(), "40000000".into()],
        ));
    }
    let mut offsets = Offsets(HashMap::new());
    for (name, cmd) in cases {
        let data = inputs.dir.path().join(format!("{name}.dwarf.data"));
        let Some(data) = perf_record(
            &data,
            &["--call-graph", "dwarf", "-e", "cpu-clock", "-c", "250000"],
            &cmd,
        ) else {
            return skip_test(t, "perf record --call-graph dwarf does not work here");
        };
        let theirs = perf_chains(&data);
        let ours = our_chains(&data, &[]);
        assert_eq!(theirs.len(), ours.len(), "{name}: samples");
        let mut same = 0usize;
        // Stacks where perf's unwinder stopped early and ours went on: perf's stack is a
        // proper prefix of ours (seen at start-up, inside ld.so's relocation of a library).
        let mut longer = 0usize;
        let mut first_diff = None;
        let mut deep = 0usize;
        for (p, o) in theirs.iter().zip(&ours) {
            let pa: Vec<u64> = p.iter().map(|f| f.0).collect();
            let oa = as_perf_prints(o, &mut offsets);
            if pa == oa {
                same += 1;
            } else if pa.len() < oa.len() && oa.starts_with(&pa) {
                longer += 1;
            } else if first_diff.is_none() {
                first_diff = Some((p.clone(), o.clone()));
            }
            deep += usize::from(o.len() >= 4);
        }
        let share = (same + longer) as f64 / theirs.len().max(1) as f64;
        eprintln!(
            "{name}: {same} of {} stacks equal perf script's, {longer} extend it (perf stopped early) ({:.2}% agree), {deep} with 4 frames or more",
            theirs.len(),
            100.0 * share
        );
        if let Some((p, o)) = &first_diff {
            eprintln!("{name}: first difference: perf script {p:x?}, proftrust {o:x?}");
        }
        assert!(theirs.len() >= 50, "{name}: {} samples", theirs.len());
        assert!(deep * 2 >= theirs.len(), "{name}: {deep} deep stacks");
        assert!(
            share >= 0.99 && same as f64 >= 0.95 * theirs.len() as f64,
            "{name}: {share} ({same} equal, {longer} longer); first difference {first_diff:?}"
        );
    }
}

/// The FDE ranges `readelf --debug-dump=frames` lists for `path` (`pc=START..END`).
fn readelf_fdes(path: &str) -> Vec<(u64, u64)> {
    let out = run(Command::new("readelf").args(["--debug-dump=frames", path]));
    let mut v: Vec<(u64, u64)> = out
        .lines()
        .filter(|l| l.contains(" FDE "))
        .filter_map(|l| {
            let (a, b) = l.split("pc=").nth(1)?.split_once("..")?;
            Some((
                u64::from_str_radix(a.trim(), 16).ok()?,
                u64::from_str_radix(b.trim(), 16).ok()?,
            ))
        })
        .collect();
    v.sort_unstable();
    v
}

/// perf report's rows (`--sort dso,sym -n`: `12.34%  1234  dso  [.] symbol`): (dso file
/// name, symbol, samples).
fn perf_report_rows(data: &Path) -> Vec<(String, String, u64)> {
    let out = run(perf()
        .args(["report", "--stdio", "--sort", "dso,sym", "-n", "-i"])
        .arg(data));
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 5 || !f[0].ends_with('%') || f[3] != "[.]" {
                return None;
            }
            Some((f[2].to_string(), f[4..].join(" "), f[1].parse().ok()?))
        })
        .collect()
}

/// perf report's per-address rows of code no symbol names (`5.91%  107  gawk  [.]
/// 0x00000000000662b9`, the address map-relative, i.e. the file offset): (dso file name,
/// offset, samples).
fn perf_report_addresses(data: &Path) -> Vec<(String, u64, u64)> {
    perf_report_rows(data)
        .into_iter()
        .filter_map(|(dso, sym, n)| {
            let a = u64::from_str_radix(sym.strip_prefix("0x")?, 16).ok()?;
            Some((dso, a, n))
        })
        .collect()
}

/// Every sample of the corpus lands in a function where `.eh_frame` covers the code (< 1%
/// in none per module), and each function recovered from an FDE holds exactly the samples
/// perf places in that FDE's range (perf script's addresses, readelf's FDEs).
#[test]
fn stripped_programs_every_sample_in_a_function() {
    let t = "stripped_programs_every_sample_in_a_function";
    if !corpus_ready(t) {
        return;
    }
    let inputs = Inputs::new();
    for (name, cmd) in inputs.programs() {
        let data = inputs.dir.path().join(format!("{name}.data"));
        let Some(data) = perf_record(&data, &["-e", "cpu-clock:u", "-c", "250000"], &cmd) else {
            return skip_test(t, "perf record does not work here");
        };
        let json: serde_json::Value =
            serde_json::from_str(&proftrust(&["read", data.to_str().unwrap(), "--json"])).unwrap();
        let total = json["samples"].as_u64().unwrap();
        assert!(total >= 100, "{name}: {total} samples");
        // Share without a function, per module (the report's own statement).
        for m in json["attribution"].as_array().unwrap() {
            let (module, n, none) = (
                m["module"].as_str().unwrap(),
                m["samples"].as_u64().unwrap(),
                m["unattributed"].as_u64().unwrap(),
            );
            eprintln!(
                "{name}: {module}: {n} samples, {none} in no function, {} recovered",
                m["recovered"]
            );
            if n >= 20 && module != "[unknown]" {
                let rows: Vec<&serde_json::Value> = json["symbols"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|r| r["name"].as_str().unwrap().contains("+0x"))
                    .collect();
                assert!(
                    (none as f64) < 0.01 * n as f64,
                    "{name}: {module}: {none} of {n} samples in no function: {rows:?}"
                );
            }
        }
        // Oracle: perf report's per-address counts of unnamed code summed over each FDE
        // range readelf lists.
        let modules: Vec<String> = json["modules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["path"].as_str().unwrap().to_string())
            .collect();
        let mut want: BTreeMap<(String, u64), u64> = BTreeMap::new();
        let mut fdes_of: HashMap<String, Vec<(u64, u64)>> = HashMap::new();
        for (short, off, n) in perf_report_addresses(&data) {
            let Some(dso) = modules
                .iter()
                .find(|p| p.rsplit('/').next() == Some(short.as_str()))
            else {
                continue;
            };
            // perf's address is the file offset; the FDEs speak SVMAs.
            let svma = load_segments(dso)
                .iter()
                .find(|(o, _, sz)| off >= *o && off < o + sz)
                .map_or(off, |(o, va, _)| off - o + va);
            let fdes = fdes_of
                .entry(dso.clone())
                .or_insert_with(|| readelf_fdes(dso));
            let i = fdes.partition_point(|f| f.0 <= svma);
            if let Some(&(lo, hi)) = i.checked_sub(1).map(|i| &fdes[i]) {
                if svma < hi {
                    *want.entry((dso.clone(), lo)).or_default() += n;
                }
            }
        }
        let mut checked = 0u64;
        for row in json["symbols"].as_array().unwrap() {
            let sym = row["name"].as_str().unwrap();
            let Some((_, hex)) = sym.split_once("!sub_") else {
                continue;
            };
            let start = u64::from_str_radix(hex, 16).unwrap();
            let module = row["module"].as_str().unwrap().to_string();
            let n = row["samples"].as_u64().unwrap();
            assert_eq!(
                Some(&n),
                want.get(&(module.clone(), start)),
                "{name}: {sym} in {module}"
            );
            checked += n;
        }
        eprintln!("{name}: {checked} samples in recovered functions equal perf's per FDE range");
        assert!(
            checked * 4 >= total,
            "{name}: only {checked} of {total} samples checked"
        );
    }
}

/// The same perf.data read with the `-g` build and with its `objcopy --strip-all` copy:
/// the samples fall into the same functions (the names differ: symbols against
/// `MODULE!sub_ADDR`), for at least 99% of them.
#[test]
fn g_build_and_stripped_copy_partition_the_samples_alike() {
    let t = "g_build_and_stripped_copy_partition_the_samples_alike";
    if !have("perf") || !have("gcc") || !have("objcopy") {
        return skip_test(t, "needs perf, gcc and objcopy");
    }
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../binary/tests/c/stripped.c");
    let exe = dir.path().join("prog");
    proftrust_testkit::gcc(&exe, &[&src], &[]);
    let stripped = dir.path().join("prog.stripped");
    run(Command::new("objcopy")
        .arg("--strip-all")
        .arg(&exe)
        .arg(&stripped));
    let Some(data) = perf_record(
        &dir.path().join("p.data"),
        &["-e", "cpu-clock:u", "-c", "100000"],
        &[exe.display().to_string(), "60000000".into()],
    ) else {
        return skip_test(t, "perf record does not work here");
    };
    let names = |binary: &Path| -> Vec<String> {
        let out = proftrust(&[
            "read",
            "--script",
            data.to_str().unwrap(),
            "--binary",
            binary.to_str().unwrap(),
        ]);
        out.lines()
            .filter(|l| !l.starts_with('#') && !l.starts_with('\t') && !l.trim().is_empty())
            .map(|l| {
                let after = l.split(": ").nth(2).unwrap();
                after.split_whitespace().nth(1).unwrap().to_string()
            })
            .collect()
    };
    let g = names(&exe);
    let s = names(&stripped);
    assert_eq!(g.len(), s.len());
    // The partition: each -g function maps to the stripped name most of its samples have;
    // a sample agrees when its stripped name is that one and no other -g function maps there.
    let mut votes: HashMap<&str, HashMap<&str, usize>> = HashMap::new();
    for (a, b) in g.iter().zip(&s) {
        *votes.entry(a).or_default().entry(b).or_default() += 1;
    }
    let map: HashMap<&str, &str> = votes
        .iter()
        .map(|(a, v)| (*a, *v.iter().max_by_key(|x| x.1).unwrap().0))
        .collect();
    let mut image: HashMap<&str, usize> = HashMap::new();
    for b in map.values() {
        *image.entry(b).or_default() += 1;
    }
    let agree = g
        .iter()
        .zip(&s)
        .filter(|(a, b)| map[a.as_str()] == b.as_str() && image[b.as_str()] == 1)
        .count();
    let share = agree as f64 / g.len() as f64;
    eprintln!(
        "{agree} of {} samples in the same function with the -g build and the stripped copy ({:.2}%); {:?}",
        g.len(),
        100.0 * share,
        map
    );
    assert!(g.len() >= 100);
    assert!(
        map.get("sum").is_some_and(|n| n.starts_with("prog!sub_")),
        "{map:?}"
    );
    assert!(share >= 0.99, "{share}");
}

/// `dd bs=1` spends its time in read(2) and write(2): with kernel samples (cpu-clock
/// without `:u`), at least 90% of them are in a named kernel function, from perf.data (the
/// running kernel's kallsyms, its build-id matching the recording's) and from
/// `proftrust record --kernel` (the kallsyms stored in the file, read here without the
/// running kernel).
#[test]
fn kernel_samples_of_a_syscall_heavy_program_are_named() {
    let t = "kernel_samples_of_a_syscall_heavy_program_are_named";
    if !have("perf") || !have("dd") {
        return skip_test(t, "needs perf and dd");
    }
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
    if kallsyms.lines().all(|l| l.starts_with("0000000000000000")) {
        return skip_test(t, "/proc/kallsyms shows no addresses here (kptr_restrict)");
    }
    let dir = tempfile::tempdir().unwrap();
    let dd: Vec<String> = [
        "dd",
        "if=/dev/zero",
        "of=/dev/null",
        "bs=1",
        "count=1500000",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let Some(data) = perf_record(
        &dir.path().join("dd.data"),
        &["-e", "cpu-clock", "-c", "200000"],
        &dd,
    ) else {
        return skip_test(t, "perf record does not work here");
    };
    let kernel_named = |json: &serde_json::Value| -> (u64, u64) {
        let m = json["attribution"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["module"] == "[kernel.kallsyms]")
            .cloned()
            .unwrap_or_default();
        (
            m["named"].as_u64().unwrap_or(0),
            m["samples"].as_u64().unwrap_or(0),
        )
    };
    let json: serde_json::Value =
        serde_json::from_str(&proftrust(&["read", data.to_str().unwrap(), "--json"])).unwrap();
    let (named, n) = kernel_named(&json);
    eprintln!("perf.data: {named} of {n} kernel samples in a named function");
    if n == 0 {
        return skip_test(
            t,
            "perf recorded no kernel samples here (perf_event_paranoid?)",
        );
    }
    assert!(n >= 50, "{n} kernel samples");
    assert!(named as f64 >= 0.9 * n as f64, "{named} of {n}");
    // perf names them too: its symbols agree with ours on the hottest kernel function.
    let hottest = json["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["module"] == "[kernel.kallsyms]")
        .unwrap()["name"]
        .as_str()
        .unwrap()
        .to_string();
    let report = run(perf()
        .args(["report", "--stdio", "--sort", "sym", "-i"])
        .arg(&data));
    assert!(
        report.contains(&format!("[k] {hottest}")),
        "{hottest} not in perf report:\n{report}"
    );

    // proftrust's own recording stores the kallsyms its kernel samples fall in.
    let out = dir.path().join("dd.ptsamp");
    let mut args = vec!["record", "--kernel", "-o", out.to_str().unwrap(), "--"];
    args.extend(dd.iter().map(String::as_str));
    let o = pt().args(&args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let set = proftrust_formats::native::read_samples(&std::fs::read(&out).unwrap()).unwrap();
    assert!(!set.kernel_symbols.is_empty(), "no kernel symbols stored");
    let mut lo = proftrust_binary::LocateOptions::new(&[], None);
    lo.running_kernel = None;
    lo.build_id_cache = None;
    let locator = proftrust_binary::BinaryLocator::new(lo);
    let sym = proftrust_binary::Symbolizer::with_locator(&set.modules, &locator)
        .with_recorded_kernel_symbols(&set.kernel_symbols);
    let per = sym.attribution_by_module(set.samples.iter().map(|s| (s.ip, 1)));
    let k = per
        .iter()
        .find(|m| m.module == "[kernel.kallsyms]")
        .expect("kernel samples recorded");
    eprintln!(
        "proftrust record --kernel: {} of {} kernel samples named from the stored kallsyms ({} symbols stored)",
        k.named,
        k.samples,
        set.kernel_symbols.len()
    );
    assert!(k.samples >= 50, "{}", k.samples);
    assert!(k.named as f64 >= 0.9 * k.samples as f64, "{k:?}");
}

/// `nm -S` ranges of the `-g` build: name -> (start, end).
fn nm_ranges(exe: &Path) -> HashMap<String, (u64, u64)> {
    run(Command::new("nm").args(["-S", "--defined-only"]).arg(exe))
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() != 4 || !matches!(f[2], "T" | "t") {
                return None;
            }
            let a = u64::from_str_radix(f[0], 16).ok()?;
            let n = u64::from_str_radix(f[1], 16).ok()?;
            Some((f[3].to_string(), (a, a + n)))
        })
        .collect()
}

/// The unwound stacks reach the exports and proftrust's own recorder: a program without
/// frame pointers (`-O2`, where `main` calls `sum`, which calls `check` and `mix`).
/// `export --to folded` of a `perf record --call-graph dwarf` recording puts `main;sum;mix`
/// above ≥ 95% of the samples in `mix`; `proftrust record --call-graph dwarf` of its
/// stripped copy gives the samples in `mix` (by nm's range in the `-g` build) the callers
/// `sum`, then `main`, for ≥ 95% of them.
#[test]
fn dwarf_stacks_reach_exports_and_the_recorder() {
    let t = "dwarf_stacks_reach_exports_and_the_recorder";
    if !have("perf") || !have("gcc") || !have("nm") || !have("strip") {
        return skip_test(t, "needs perf, gcc, nm and strip");
    }
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../binary/tests/c/stripped.c");
    let exe = dir.path().join("prog");
    proftrust_testkit::gcc(&exe, &[&src], &["-fomit-frame-pointer"]);
    let ranges = nm_ranges(&exe);
    let Some(data) = perf_record(
        &dir.path().join("d.data"),
        &["--call-graph", "dwarf", "-e", "cpu-clock:u", "-c", "200000"],
        &[exe.display().to_string(), "40000000".into()],
    ) else {
        return skip_test(t, "perf record --call-graph dwarf does not work here");
    };
    let folded = dir.path().join("d.folded");
    proftrust(&[
        "export",
        data.to_str().unwrap(),
        "--to",
        "folded",
        "-o",
        folded.to_str().unwrap(),
    ]);
    let (mut in_mix, mut under_main) = (0u64, 0u64);
    for l in std::fs::read_to_string(&folded).unwrap().lines() {
        let (stack, n) = l.rsplit_once(' ').unwrap();
        let n: u64 = n.parse().unwrap();
        if stack.ends_with(";mix") {
            in_mix += n;
            if stack.contains(";main;sum;mix") {
                under_main += n;
            }
        }
    }
    eprintln!("export folded: {under_main} of {in_mix} samples in mix under main;sum");
    let text = std::fs::read_to_string(&folded).unwrap();
    assert!(in_mix >= 20, "{in_mix}: {}", &text[..text.len().min(2000)]);
    assert!(under_main as f64 >= 0.95 * in_mix as f64);

    // proftrust's own recorder, on the stripped copy.
    let stripped = dir.path().join("prog.stripped");
    run(Command::new("strip").arg("-o").arg(&stripped).arg(&exe));
    let out = dir.path().join("r.ptsamp");
    let o = pt()
        .args([
            "record",
            "--call-graph",
            "dwarf",
            "-o",
            out.to_str().unwrap(),
            "--",
        ])
        .arg(&stripped)
        .arg("40000000")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let set = proftrust_formats::native::read_samples(&std::fs::read(&out).unwrap()).unwrap();
    assert!(set.events[0].config.callchain);
    let m = set.modules.find_by_file_name("prog.stripped").unwrap();
    let within = |l: &proftrust_model::Location, f: &str| {
        let (a, b) = ranges[f];
        l.module == Some(m) && l.svma.0 >= a && l.svma.0 < b
    };
    let mix: Vec<&proftrust_model::Sample> = set
        .samples
        .iter()
        .filter(|s| within(&s.ip, "mix"))
        .collect();
    let good = mix
        .iter()
        .filter(|s| {
            s.callchain.len() >= 2
                && within(&s.callchain[0], "sum")
                && within(&s.callchain[1], "main")
        })
        .count();
    eprintln!(
        "record --call-graph dwarf: {good} of {} samples in mix called from sum from main",
        mix.len()
    );
    assert!(mix.len() >= 20, "{}", mix.len());
    assert!(good as f64 >= 0.95 * mix.len() as f64);
}

/// `check` judges only what the samples stand on (issue 29): the same program (`-O2`,
/// stripped) recorded by perf, built with unwind tables (every function recovered from an
/// FDE: `prog!sub_ADDR`) and without (`-fno-asynchronous-unwind-tables`: the hot code in no
/// function). With FDEs the hottest row is a recovered function and "trust down to" stops
/// at `function` (no line below its range is known; was `inline`); without, the code in no
/// function (one `[nofde]` row, docs/check.md) is never "act on it" (was), nor is the
/// profile, and trust goes down to `none`, each saying why.
#[test]
fn check_verdicts_stand_on_the_attribution_available() {
    let t = "check_verdicts_stand_on_the_attribution_available";
    if !have("perf") || !have("gcc") || !have("strip") {
        return skip_test(t, "needs perf, gcc and strip");
    }
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../binary/tests/c/stripped.c");
    for (name, flags) in [
        ("fde", &[][..]),
        (
            "nofde",
            &["-fno-asynchronous-unwind-tables", "-fno-unwind-tables"][..],
        ),
    ] {
        let exe = dir.path().join(name);
        proftrust_testkit::gcc(&exe, &[&src], flags);
        run(Command::new("strip").arg(&exe));
        let Some(data) = perf_record(
            &dir.path().join(format!("{name}.data")),
            &["-e", "cpu-clock:u", "-c", "200000"],
            &[exe.display().to_string(), "40000000".into()],
        ) else {
            return skip_test(t, "perf record does not work here");
        };
        let r: serde_json::Value =
            serde_json::from_str(&proftrust(&["check", data.to_str().unwrap(), "--json"])).unwrap();
        let rows = r["functions"].as_array().unwrap();
        let top = &rows[0];
        let top_name = top["name"].as_str().unwrap();
        let level = r["trustworthy_at"]["level"].as_str().unwrap();
        let why = r["trustworthy_at"]["reason"].as_str().unwrap();
        eprintln!(
            "{name}: top row {top_name} ({} samples, {}), verdict {}, trust down to {level}: {why}",
            top["samples"], top["verdict"], r["verdict"]
        );
        assert!(top["samples"].as_u64().unwrap() >= 100, "{top}");
        if name == "fde" {
            assert!(top_name.starts_with("fde!sub_"), "{top_name}");
            assert_eq!(level, "function", "{why}");
            assert!(why.contains(top_name), "{why}");
        } else {
            let no_function = |n: &str| n == "[nofde]" || n.starts_with("nofde+0x");
            assert!(no_function(top_name), "{top_name}");
            for f in rows
                .iter()
                .filter(|f| no_function(f["name"].as_str().unwrap()))
            {
                assert_ne!(f["verdict"], "act", "{f}");
                assert!(
                    f["reason"].as_str().unwrap().contains("without a function"),
                    "{f}"
                );
            }
            assert_ne!(r["verdict"], "act", "{}", r["reason"]);
            assert_eq!(level, "none", "{why}");
            assert!(
                why.contains(top_name) && why.contains("without a function"),
                "{why}"
            );
        }
    }
}

/// perf report's rows of one module: symbol name against samples.
fn perf_report_symbols(data: &Path, module: &str) -> BTreeMap<String, u64> {
    perf_report_rows(data)
        .into_iter()
        .filter(|(dso, _, _)| dso == module)
        .map(|(_, sym, n)| (sym, n))
        .collect()
}

/// The rows of module `module` in a `read --json` report: name against samples, and the
/// module's samples in no function.
fn read_module_rows(json: &serde_json::Value, module: &str) -> (BTreeMap<String, u64>, u64) {
    let rows = json["symbols"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["module"] == module)
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["samples"].as_u64().unwrap(),
            )
        })
        .collect();
    let none = json["attribution"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["module"] == module)
        .map_or(0, |m| m["unattributed"].as_u64().unwrap());
    (rows, none)
}

/// Samples in the kernel's vDSO (`clock_gettime` in a loop: every program that reads the
/// clock runs there) land in its functions as perf names them: from perf's build-id cache
/// copy (`[vdso]/ID/vdso`, which perf record writes), from the running kernel's vDSO when
/// the cache has none (same build-id), and in `proftrust record`'s files (the recorder
/// stamps the vDSO's build-id). Oracle: perf report's per-symbol counts of `[vdso]`.
#[test]
fn vdso_samples_are_named_as_perf_names_them() {
    let t = "vdso_samples_are_named_as_perf_names_them";
    if !have("perf") || !have("gcc") {
        return skip_test(t, "needs perf and gcc");
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("clock.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <stdlib.h>\n#include <time.h>\n\
         int main(int argc, char **argv) {\n  long n = argc > 1 ? atol(argv[1]) : 3000000;\n\
         struct timespec ts; unsigned long s = 0;\n\
         for (long i = 0; i < n; i++) { clock_gettime(CLOCK_MONOTONIC, &ts); s += ts.tv_nsec; }\n\
         printf(\"%lu\\n\", s);\n  return 0;\n}\n",
    )
    .unwrap();
    let exe = dir.path().join("clock");
    run(Command::new("gcc").args(["-O2", "-o"]).arg(&exe).arg(&src));
    let cmd = vec![exe.display().to_string(), "3000000".to_string()];
    let Some(data) = perf_record(
        &dir.path().join("clock.data"),
        &["-e", "cpu-clock:u", "-c", "100000"],
        &cmd,
    ) else {
        return skip_test(t, "perf record does not work here");
    };
    let want = perf_report_symbols(&data, "[vdso]");
    let in_vdso: u64 = want.values().sum();
    eprintln!("perf report: [vdso] {want:?}");
    if in_vdso < 50 || want.keys().any(|k| k.starts_with("0x")) {
        return skip_test(
            t,
            &format!("perf itself named {in_vdso} [vdso] samples as {want:?} here (a kernel without a vDSO, or perf without its copy)"),
        );
    }
    let d = data.to_str().unwrap();
    // From perf's build-id cache (the tests' own, which perf record filled).
    let json: serde_json::Value = serde_json::from_str(&proftrust(&["read", d, "--json"])).unwrap();
    assert_eq!(read_module_rows(&json, "[vdso]"), (want.clone(), 0));
    // From the running kernel's vDSO: an empty build-id cache.
    let empty = tempfile::tempdir().unwrap();
    let out = run(Command::new(BIN)
        .env("PERF_BUILDID_DIR", empty.path())
        .args(["read", d, "--json"]));
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(read_module_rows(&json, "[vdso]"), (want.clone(), 0));
    // proftrust record's own file: every [vdso] sample in one of perf's vDSO functions.
    let ours = dir.path().join("clock.ptsamp");
    let o = pt()
        .args(["-q", "record", "-c", "100000", "-o"])
        .arg(&ours)
        .arg("--")
        .args(&cmd)
        .output()
        .unwrap();
    if !o.status.success() {
        return skip_test(
            t,
            &format!(
                "proftrust record failed: {}",
                String::from_utf8_lossy(&o.stderr)
            ),
        );
    }
    let json: serde_json::Value =
        serde_json::from_str(&proftrust(&["read", ours.to_str().unwrap(), "--json"])).unwrap();
    let (rows, none) = read_module_rows(&json, "[vdso]");
    eprintln!("proftrust record: [vdso] {rows:?}, {none} in no function");
    assert!(rows.values().sum::<u64>() >= 50, "{rows:?}");
    assert_eq!(none, 0, "{rows:?}");
    for name in rows.keys() {
        assert!(
            want.contains_key(name),
            "{name} is not one of perf's {want:?}"
        );
    }
}
