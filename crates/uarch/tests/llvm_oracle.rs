//! The embedded instruction tables against their source: every 40th form of each table is
//! given to `llvm-mca-19` again (its example instruction, alone in a region) and must get the
//! same micro-ops and latency. Skips when llvm-mca-19 is absent (`scripts/test.sh` installs
//! llvm-19).

use std::process::Command;

fn check(table: &str, cpu: &str) {
    let rows: Vec<Vec<&str>> = table
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split('\t').collect())
        .filter(|f: &Vec<&str>| f.len() >= 9)
        .step_by(40)
        .collect();
    assert!(rows.len() > 10, "{cpu}: {} rows", rows.len());
    let mut src = String::new();
    for (k, f) in rows.iter().enumerate() {
        src.push_str(&format!(
            "# LLVM-MCA-BEGIN r{k}\n{}\n# LLVM-MCA-END\n",
            f[8]
        ));
    }
    let dir = tempfile_dir();
    let input = dir.join("oracle.s");
    std::fs::write(&input, src).unwrap();
    let out = Command::new("llvm-mca-19")
        .args([
            &format!("-mcpu={cpu}"),
            "-iterations=1",
            "-instruction-info",
            "-resource-pressure=false",
        ])
        .arg(&input)
        .output()
        .expect("run llvm-mca-19");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    // Per region, the row after the `[1] [2] ... Instructions:` header: uops, latency.
    let mut got: Vec<(String, String)> = Vec::new();
    let mut take = false;
    for l in text.lines() {
        if l.trim_start().starts_with("[1]    [2]    [3]") {
            take = true;
            continue;
        }
        if take {
            let c: Vec<&str> = l.split_whitespace().collect();
            got.push((c[0].to_string(), c[1].to_string()));
            take = false;
        }
    }
    assert_eq!(got.len(), rows.len(), "{cpu}: one answer per region");
    for (f, (uops, lat)) in rows.iter().zip(&got) {
        assert_eq!(
            (f[2], f[3]),
            (uops.as_str(), lat.as_str()),
            "{cpu}: {} ({})",
            f[0],
            f[8]
        );
    }
}

fn tempfile_dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("uarch-oracle-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn tables_match_llvm_mca() {
    if !proftrust_testkit::need("tables_match_llvm_mca", &["llvm-mca-19"]) {
        return;
    }
    check(
        include_str!("../tables/sapphirerapids.tsv"),
        "sapphirerapids",
    );
    check(include_str!("../tables/znver4.tsv"), "znver4");
}
