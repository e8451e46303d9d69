//! Inline-frame lookup throughput, for comparison with `addr2line -i -f`:
//! `frames BINARY ADDRESS_FILE` reads one hex address per line and prints, per address,
//! the address and the inline chain innermost first as `addr2line -a -i -f` would
//! (function, then file:line).
//! Timing goes to stderr. Used by `scripts/bench-binary.sh`.

use proftrust_binary::{Binary, Svma};
use std::io::{BufWriter, Write};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 2 {
        eprintln!("usage: frames BINARY ADDRESS_FILE");
        std::process::exit(2);
    }
    let t = Instant::now();
    let bin = match Binary::open(std::path::Path::new(&args[0])) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let text = std::fs::read_to_string(&args[1]).unwrap_or_default();
    let addrs: Vec<u64> = text
        .lines()
        .filter_map(|l| u64::from_str_radix(l.trim().trim_start_matches("0x"), 16).ok())
        .collect();
    let out = std::io::stdout();
    let mut out = BufWriter::new(out.lock());
    let mut frames = 0usize;
    for a in &addrs {
        let fs = bin.frames(Svma(*a));
        frames += fs.len();
        let _ = writeln!(out, "{a:#018x}");
        for f in fs {
            let _ = writeln!(out, "{}", f.function);
            let line = f.line.map(|l| l.to_string()).unwrap_or_else(|| "?".into());
            let _ = writeln!(out, "{}:{line}", f.file.as_deref().unwrap_or("??"));
        }
    }
    let _ = out.flush();
    eprintln!(
        "frames: {} addresses, {} frames in {:.1} ms (including open and DWARF parse)",
        addrs.len(),
        frames,
        t.elapsed().as_secs_f64() * 1e3
    );
}
