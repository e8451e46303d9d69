//! `fleet report --engine ballista://...` on a real local Apache Ballista cluster (a
//! scheduler and two executors on 127.0.0.1, free ports, started here and killed on drop)
//! gives the same report as the embedded engine on the same store. Needs the fleet binary built
//! with the `ballista` feature (`cargo test --release -p proftrust-fleet-cli --features
//! ballista --test fleet_ballista`); skipped loudly otherwise or when the cluster cannot start.

use proftrust_testkit::skip;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The fleet binary itself (`proftrust fleet ARGS` execs it with ARGS).
const BIN: &str = env!("CARGO_BIN_EXE_proftrust-fleet");

/// Child processes killed (and reaped) when dropped.
struct Cluster(Vec<Child>);

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn listening(port: u16, within: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

fn report(store: &Path, engine: &str) -> serde_json::Value {
    let out = Command::new(BIN)
        .args(["report", store.to_str().unwrap(), "--json"])
        .args(["--engine", engine])
        .output()
        .expect("run proftrust");
    assert!(
        out.status.success(),
        "fleet report --engine {engine}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    v.as_object_mut().unwrap().remove("engine");
    v
}

#[test]
fn ballista_cluster_gives_the_embedded_report() {
    if !cfg!(feature = "ballista") {
        skip!("proftrust-fleet built without the `ballista` feature (cargo test -p proftrust-fleet-cli --features ballista)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    // A synthetic fleet of 12 hosts in the committed golden binary's functions.
    let tiny = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/golden/fixtures/tiny");
    let profiles = dir.path().join("profiles");
    let synth = Command::new(BIN)
        .args(["-q", "synth", "--binary", tiny.to_str().unwrap()])
        .args(["--out", profiles.to_str().unwrap(), "--hosts", "12"])
        .args(["--samples", "60000", "--functions", "8", "--seed", "3"])
        .output()
        .unwrap();
    assert!(
        synth.status.success(),
        "{}",
        String::from_utf8_lossy(&synth.stderr)
    );
    for i in 0..12 {
        let f = profiles.join(format!("host-{i:04}.ptsamp"));
        let st = Command::new(BIN)
            .args(["-q", "ingest", "--host", &format!("h{i}")])
            .args(["--labels", if i % 2 == 0 { "build=A" } else { "build=B" }])
            .args(["--out", store.to_str().unwrap(), f.to_str().unwrap()])
            .status()
            .unwrap();
        assert!(st.success());
    }
    let embedded = report(&store, "embedded");

    let sched = free_port();
    let spawn = |args: &[String]| {
        Command::new(BIN)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
    };
    let mut cluster = Cluster(Vec::new());
    match spawn(&[
        "scheduler".into(),
        "--bind".into(),
        format!("127.0.0.1:{sched}"),
    ]) {
        Ok(c) => cluster.0.push(c),
        Err(e) => {
            skip!("cannot start the Ballista scheduler: {e}");
            return;
        }
    }
    if !listening(sched, Duration::from_secs(30)) {
        skip!("the Ballista scheduler did not listen on 127.0.0.1:{sched} within 30 s");
        return;
    }
    for _ in 0..2 {
        let (flight, grpc) = (free_port(), free_port());
        match spawn(&[
            "executor".into(),
            "--scheduler".into(),
            format!("127.0.0.1:{sched}"),
            "--bind".into(),
            format!("127.0.0.1:{flight}"),
            "--grpc-port".into(),
            grpc.to_string(),
        ]) {
            Ok(c) => cluster.0.push(c),
            Err(e) => {
                skip!("cannot start a Ballista executor: {e}");
                return;
            }
        }
        if !listening(flight, Duration::from_secs(30)) {
            skip!("a Ballista executor did not listen on 127.0.0.1:{flight} within 30 s");
            return;
        }
    }
    let remote = report(&store, &format!("ballista://127.0.0.1:{sched}"));
    assert_eq!(remote, embedded, "Ballista and embedded reports differ");
    drop(cluster);
}
