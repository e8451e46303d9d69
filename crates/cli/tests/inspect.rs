//! `proftrust inspect` end to end on C programs compiled at test time (gcc -O2 -g), with
//! `nm` and `objdump` as oracles; bad input exits with status 2 and names the file.

use proftrust_testkit::have;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn proftrust(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_proftrust"))
        .args(args)
        .output()
        .expect("run proftrust")
}

fn build(dir: &Path, name: &str) -> Option<PathBuf> {
    if !have("gcc") {
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../binary/tests/c")
        .join(format!("{name}.c"));
    let exe = dir.join(name);
    let st = Command::new("gcc")
        .args(["-O2", "-g", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("gcc");
    assert!(st.success());
    Some(exe)
}

fn nm_address(exe: &Path, sym: &str) -> u64 {
    let out = Command::new("nm").arg(exe).output().expect("nm");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.split_whitespace().nth(2) == Some(sym))
        .expect("symbol in nm");
    u64::from_str_radix(line.split_whitespace().next().unwrap(), 16).unwrap()
}

#[test]
fn json_lists_functions_with_blocks_and_loops() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build(dir.path(), "inline_loop") else {
        proftrust_testkit::skip!("json_lists_functions_with_blocks_and_loops: gcc not installed");
        return;
    };
    if !have("nm") {
        proftrust_testkit::skip!("json_lists_functions_with_blocks_and_loops: nm not installed");
        return;
    }
    let o = proftrust(&["inspect", exe.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let fs = v["functions"].as_array().unwrap();
    for f in fs {
        for k in ["name", "address", "size", "blocks", "loops"] {
            assert!(f.get(k).is_some(), "missing {k} in {f}");
        }
    }
    let work = fs.iter().find(|f| f["name"] == "work").unwrap();
    assert_eq!(work["address"].as_u64().unwrap(), nm_address(&exe, "work"));
    assert!(work["size"].as_u64().unwrap() > 0);
    assert!(work["blocks"].as_array().unwrap().len() >= 4);
    let loops = work["loops"].as_array().unwrap();
    assert_eq!(loops.len(), 1);
    assert_eq!(loops[0]["depth"], 1);
    let main = fs.iter().find(|f| f["name"] == "main").unwrap();
    assert_eq!(main["address"].as_u64().unwrap(), nm_address(&exe, "main"));
}

#[test]
fn function_detail_has_cfg_simple_loops_and_jump_table() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build(dir.path(), "switch_table") else {
        proftrust_testkit::skip!(
            "function_detail_has_cfg_simple_loops_and_jump_table: gcc not installed"
        );
        return;
    };
    let e = exe.to_str().unwrap();
    let o = proftrust(&["inspect", e, "--function", "dispatch", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let fs = v["functions"].as_array().unwrap();
    assert_eq!(fs.len(), 1);
    let d = &fs[0];
    assert_eq!(d["name"], "dispatch");
    let jt = d["jump_tables"].as_array().unwrap();
    assert_eq!(jt.len(), 1);
    assert_eq!(jt[0]["entries"], 8, "cmp $0x7 bounds the table");
    assert_eq!(d["has_unknown_indirect"], false);
    let resolved = d["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| b["successors"].as_array().unwrap().iter())
        .filter(|s| s["kind"] == "indirect_resolved")
        .count();
    assert_eq!(resolved, 8);
    assert!(!d["instructions"].as_array().unwrap().is_empty());

    // main's loop has simple loops listed with --function.
    let o = proftrust(&["inspect", e, "--function", "main", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let l = &v["functions"][0]["loops"][0];
    assert!(!l["simple_loops"].as_array().unwrap().is_empty());

    // Text and dot.
    let o = proftrust(&["inspect", e, "--function", "dispatch"]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("jump table") && t.contains("8 entries"), "{t}");
    let o = proftrust(&["inspect", e, "--function", "dispatch", "--dot"]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.starts_with("digraph \"dispatch\""));
    assert_eq!(t.matches("label=\"table\"").count(), 8);

    // Unknown function: exit 2 with a hint.
    let o = proftrust(&["inspect", e, "--function", "no_such_function"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no_such_function"));
}

#[test]
fn bad_input_exits_2_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.bin");
    std::fs::write(&empty, b"").unwrap();
    let text = dir.path().join("readme.txt");
    std::fs::write(&text, b"just some text\n").unwrap();
    let mut cases = vec![(empty, "empty"), (text, "not an ELF file")];
    if let Some(exe) = build(dir.path(), "recursion") {
        let data = std::fs::read(&exe).unwrap();
        let tr = dir.path().join("truncated");
        std::fs::write(&tr, &data[..data.len() / 3]).unwrap();
        cases.push((tr, "truncated"));
    } else {
        proftrust_testkit::skip!(
            "bad_input_exits_2_naming_the_file (truncated ELF part): gcc not installed"
        );
    }
    for (path, what) in cases {
        let o = proftrust(&["inspect", path.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{}", path.display());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(path.to_str().unwrap()) && err.contains(what),
            "{err}"
        );
        assert!(!err.contains("panicked"));
    }
}

#[test]
fn no_debug_info_warns_but_works() {
    let dir = tempfile::tempdir().unwrap();
    let Some(exe) = build(dir.path(), "inline_loop") else {
        proftrust_testkit::skip!("no_debug_info_warns_but_works: gcc not installed");
        return;
    };
    if !have("strip") {
        proftrust_testkit::skip!("no_debug_info_warns_but_works: strip not installed");
        return;
    }
    let st = Command::new("strip")
        .arg("--strip-debug")
        .arg(&exe)
        .status()
        .unwrap();
    assert!(st.success());
    let o = proftrust(&["inspect", exe.to_str().unwrap(), "--function", "work"]);
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no debug info"), "{err}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("simple loop"));
}
