//! The fleet report and fleet diff pages load in headless Chromium without console errors and
//! with their SVG plots in the rendered DOM (scripts/html-check.sh, as the audit and check
//! pages are tested); skipped loudly where Chromium is not installed.

use proftrust_report::fleet::{sample_reports, HostShare};
use std::path::Path;
use std::process::Command;

fn html_check(page: &Path, ids: &[&str]) -> Option<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/html-check.sh");
    let o = Command::new("bash")
        .arg(script)
        .arg(page)
        .args(ids)
        .output()
        .expect("bash");
    match o.status.code() {
        Some(0) => Some(String::from_utf8_lossy(&o.stdout).into_owned()),
        Some(77) => None,
        _ => panic!(
            "html-check failed on {}: {}{}",
            page.display(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    }
}

#[test]
fn fleet_pages_render_in_headless_chromium() {
    let name = "fleet_pages_render_in_headless_chromium";
    if !["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .any(|c| proftrust_testkit::have(c))
    {
        proftrust_testkit::skip!("{name}: chromium not installed (apt-get install -y chromium)");
        return;
    }
    let (report, diff) = sample_reports();
    let dir = tempfile::tempdir().unwrap();
    let spread = vec![HostShare {
        host: "db<1>".into(),
        function: "idle".into(),
        share: 0.09,
    }];
    let pages = [
        (
            "report.html",
            report.render_html_with_hosts(10, &spread),
            vec!["plot-shares", "plot-hosts"],
        ),
        ("diff.html", diff.render_html(10), vec!["plot-diff"]),
    ];
    for (file, html, ids) in pages {
        let path = dir.path().join(file);
        std::fs::write(&path, html).unwrap();
        match html_check(&path, &ids) {
            Some(out) => assert!(out.contains("html-check: ok"), "{out}"),
            None => {
                proftrust_testkit::skip!("{name}: html-check found no chromium");
                return;
            }
        }
    }
}
