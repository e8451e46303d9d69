//! Scans binaries and prints what the analysis finds and how fast:
//! `cargo run --release -p proftrust-binary --example scan -- /usr/lib/x86_64-linux-gnu/libc.so.6`
//!
//! Per file: open time, functions, CFG time for all functions, blocks, loops, resolved and
//! unresolved indirect jumps, and the time of 1,000,000 `Symbolizer::function_name` lookups
//! at addresses spread over the text (the attribution path of a 1M-sample perf.data).

use proftrust_binary::{Binary, Symbolizer};
use proftrust_model::{EdgeKind, Location, Module, ModuleTable};
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let paths: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if paths.is_empty() {
        eprintln!("usage: scan BINARY...");
        std::process::exit(2);
    }
    for p in paths {
        let t = Instant::now();
        let bin = match Binary::open(&p) {
            Ok(b) => b,
            Err(e) => {
                println!("{}: error: {e}", p.display());
                continue;
            }
        };
        let open = t.elapsed();
        let t = Instant::now();
        let (mut blocks, mut loops, mut resolved, mut unknown, mut failed, mut tail) =
            (0, 0, 0, 0, 0, 0);
        for f in bin.functions() {
            match bin.cfg(f) {
                Ok(c) => {
                    blocks += c.blocks.len();
                    loops += c.loops.len();
                    let mut jumps = std::collections::BTreeSet::new();
                    for e in &c.edges {
                        match e.kind {
                            EdgeKind::IndirectResolved => {
                                jumps.insert(e.from);
                            }
                            EdgeKind::IndirectUnknown => {
                                unknown += 1;
                                if std::env::var_os("SCAN_SHOW_UNKNOWN").is_some() {
                                    let ins = bin.instructions(f).unwrap_or_default();
                                    let last = c.block(e.from).last();
                                    let k = ins.iter().position(|i| i.addr == last).unwrap_or(0);
                                    println!("unknown indirect jump in {}:", f.name);
                                    for i in &ins[k.saturating_sub(8)..=k] {
                                        println!("    {:#x}: {}", i.addr.0, i.text);
                                    }
                                }
                            }
                            EdgeKind::Exit => tail += 1,
                            _ => {}
                        }
                    }
                    resolved += jumps.len();
                }
                Err(_) => failed += 1,
            }
        }
        let cfg_time = t.elapsed();
        let mut mt = ModuleTable::default();
        let mi = mt.intern(Module::new(p.display().to_string()));
        let s = Symbolizer::new(&mt, &[]);
        let (lo, hi) = match (bin.functions().first(), bin.functions().last()) {
            (Some(a), Some(b)) => (a.start.0, b.end().0),
            _ => (0, 1),
        };
        let t = Instant::now();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut named = 0usize;
        for _ in 0..1_000_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let a = lo + x % (hi - lo).max(1);
            if s.function(Location::new(mi, a)).is_some() {
                named += 1;
            }
        }
        let lookups = t.elapsed();
        println!(
            "{}: open {:.1} ms, {} functions, CFGs {:.1} ms ({} blocks, {} loops, {} jump tables resolved, {} indirect jumps unknown, {} exit edges, {} failed), 1M function lookups {:.1} ms ({} inside a function)",
            p.display(),
            open.as_secs_f64() * 1e3,
            bin.functions().len(),
            cfg_time.as_secs_f64() * 1e3,
            blocks,
            loops,
            resolved,
            unknown,
            tail,
            failed,
            lookups.as_secs_f64() * 1e3,
            named
        );
        println!(
            "  debug info: {}",
            match (bin.has_debug_info(), bin.debug_file()) {
                (true, Some(p)) => format!("separate file {}", p.display()),
                (true, None) => "embedded".to_string(),
                _ => "none".to_string(),
            }
        );
        for w in bin.warnings() {
            println!("  warning: {w}");
        }
    }
}
