//! The golden tests' sandbox (docs/testing.md): a temporary directory holding a copy of the
//! fixtures, in which commands run with a fixed environment; their transcripts are masked
//! and compared with expected files. Shared by `crates/cli/tests/golden.rs` and the fleet
//! binary's golden test (`crates/fleet-cli/tests/fleet.rs`, through `#[path]`).

#![allow(dead_code)] // each including test uses its own part

use proftrust_testkit::{assert_golden, Masks};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where make.sh ran the program the recorded fixtures name (the sandbox holds a copy of it
/// under `root/` for `--symfs root`).
pub const RECORDED: &str = "/tmp/proftrust-golden/tiny";

/// The committed fixtures (`crates/cli/tests/golden/fixtures`).
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../cli/tests/golden/fixtures")
        .canonicalize()
        .expect("crates/cli/tests/golden/fixtures")
}

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// A scratch directory holding a copy of the fixtures; every command runs in it.
pub struct Sandbox {
    dir: tempfile::TempDir,
    /// What varies between machines, replaced before comparing.
    pub masks: Masks,
    /// The binary the commands run (`proftrust`, or `proftrust-fleet` as `proftrust fleet`).
    bin: PathBuf,
    /// Where `expected/NAME.txt` files are.
    golden: PathBuf,
}

impl Sandbox {
    /// A sandbox with a copy of the fixtures (in `fixtures_dir()`), running `bin` and
    /// comparing with `golden/expected/`.
    pub fn new(bin: &str, golden: &Path) -> Self {
        // In /tmp itself, not $TMPDIR: the program runs by its absolute path, which sits in
        // the guest's stack (argv[0], AT_EXECFN), so the directory's length moves the stack and
        // the cache-model outputs (paths, cct, vpp) with it; `/tmp/.tmpXXXXXX` has the same
        // length everywhere. A new directory of the test's own, removed when it ends.
        let dir = tempfile::Builder::new()
            .tempdir_in("/tmp")
            .expect("a temporary directory in /tmp");
        for entry in std::fs::read_dir(fixtures_dir()).expect("fixtures") {
            let p = entry.expect("fixture").path();
            std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).expect("copy fixture");
        }
        // The recorded fixtures (perf.data, perf script, ptsamp) name the program where
        // make.sh ran it, /tmp/proftrust-golden/tiny. Commands find it as perf does: with
        // `--binary tiny`, or with `--symfs root` under the sandbox's own `root/` (never at
        // the recorded path itself: a test owns nothing outside its directory).
        let under = dir.path().join("root").join(&RECORDED[1..]);
        std::fs::create_dir_all(under.parent().unwrap()).expect("symfs root");
        std::fs::copy(fixtures_dir().join("tiny"), &under).expect("copy tiny to root/");
        let build = Path::new(bin).parent().unwrap().to_path_buf();
        let canonical = dir.path().canonicalize().unwrap();
        let masks = Masks::new()
            .add(canonical.display().to_string(), "[DIR]")
            .add(dir.path().display().to_string(), "[DIR]")
            // Cargo leaves the plugin in target/*/ and target/*/deps/; proftrust takes the
            // newer copy, which depends on the build order.
            .add(
                format!("{}/deps/libproftrust_qemu_plugin.so", build.display()),
                "[BUILD]/libproftrust_qemu_plugin.so",
            )
            .add(build.display().to_string(), "[BUILD]")
            .add(
                tool_version("qemu-x86_64", "--version", "version "),
                "[QEMU-VERSION]",
            )
            .add(
                tool_version("valgrind", "--version", "valgrind-"),
                "[VALGRIND-VERSION]",
            )
            // The kernel release the audit stores among its tool versions.
            .add(kernel_release(), "[KERNEL]")
            .add(
                format!("\"proftrust_version\": \"{VERSION}\""),
                "\"proftrust_version\": \"[VERSION]\"",
            )
            .add(
                format!("<th>proftrust</th><td class=\"mono\">{VERSION}</td>"),
                "<th>proftrust</th><td class=\"mono\">[VERSION]</td>",
            );
        Sandbox {
            dir,
            masks,
            bin: PathBuf::from(bin),
            golden: golden.to_path_buf(),
        }
    }

    /// `NAME` in the sandbox.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Runs `proftrust ARGS` in the sandbox with a fixed environment and returns the
    /// transcript: the command, stdout, stderr (when not empty) and the exit status.
    pub fn run(&self, args: &[&str]) -> String {
        let out = Command::new(&self.bin)
            .args(args)
            .current_dir(self.dir.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LC_ALL", "C")
            .output()
            .expect("run proftrust");
        let mut t = format!("$ proftrust {}\n", args.join(" "));
        t.push_str(&String::from_utf8_lossy(&out.stdout));
        if !t.ends_with('\n') {
            t.push('\n');
        }
        if !out.stderr.is_empty() {
            t.push_str("--- stderr\n");
            t.push_str(&String::from_utf8_lossy(&out.stderr));
            if !t.ends_with('\n') {
                t.push('\n');
            }
        }
        t.push_str(&format!("--- exit {}\n", out.status.code().unwrap_or(-1)));
        self.masks.apply(&t)
    }

    /// Runs each command and compares the transcripts, joined, with `expected/NAME.txt`.
    pub fn check(&self, name: &str, commands: &[&[&str]]) {
        let text: Vec<String> = commands.iter().map(|a| self.run(a)).collect();
        assert_golden(
            &self.golden.join("expected").join(format!("{name}.txt")),
            &text.join("\n"),
        );
    }

    /// `check` of one JSON command into `expected/NAME.json` (stdout alone, as printed);
    /// stderr must be empty and the exit status 0.
    pub fn check_json(&self, name: &str, args: &[&str]) {
        let out = Command::new(&self.bin)
            .args(args)
            .current_dir(self.dir.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LC_ALL", "C")
            .output()
            .expect("run proftrust");
        let stdout = String::from_utf8(out.stdout).expect("JSON is UTF-8");
        assert!(
            out.status.success(),
            "proftrust {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str::<serde_json::Value>(&stdout)
            .unwrap_or_else(|e| panic!("proftrust {args:?}: not JSON ({e})"));
        assert_golden(
            &self.golden.join("expected").join(format!("{name}.json")),
            &self.masks.apply(&stdout),
        );
    }

    /// The contents of a text file a command wrote, masked, after a `--- file NAME` line.
    pub fn file(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.path(name))
            .unwrap_or_else(|e| panic!("{name} was not written: {e}"));
        format!("--- file {name}\n{}", self.masks.apply(&text))
    }
}

/// `uname -r`: the kernel release the audit stores among its tool versions.
pub fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// The version in the first line of `tool FLAG` after `marker` (up to the end of the line),
/// or "" when the tool is absent.
pub fn tool_version(tool: &str, flag: &str, marker: &str) -> String {
    let Ok(out) = Command::new(tool).arg(flag).output() else {
        return String::new();
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().next().unwrap_or("");
    match line.find(marker) {
        Some(i) => line[i + marker.len()..].trim().to_string(),
        None => String::new(),
    }
}

/// valgrind's banner lines start with `==PID==`: the pid becomes `PID`.
pub fn valgrind_pids(text: &str) -> String {
    text.lines()
        .map(
            |l| match l.strip_prefix("==").and_then(|r| r.split_once("==")) {
                Some((pid, rest)) if pid.bytes().all(|b| b.is_ascii_digit()) => {
                    format!("==PID=={rest}\n")
                }
                _ => format!("{l}\n"),
            },
        )
        .collect()
}
