//! Block-trace throughput: runs a program under `trace_qemu` with a visitor that only counts,
//! and prints blocks, instructions, data accesses, seconds and blocks per second.
//!
//! ```text
//! cargo run --release -p proftrust-exact --example trace-throughput -- [--mem] PROGRAM ARGS
//! ```
//!
//! `--mem` also traces every data access (`QemuOptions::trace_memory`) and prints accesses
//! per second.

use proftrust_exact::{trace_qemu, QemuOptions};
use proftrust_model::{BlockVisitor, TraceBlock};
use std::ffi::OsString;
use std::time::Instant;

#[derive(Default)]
struct Count {
    blocks: u64,
    instructions: u64,
    accesses: u64,
}

impl BlockVisitor for Count {
    fn block(&mut self, b: &TraceBlock<'_>) {
        self.blocks += 1;
        self.instructions += b.instructions.len() as u64;
        self.accesses += b.mem.len() as u64;
    }
}

fn main() {
    let mut cmd: Vec<OsString> = std::env::args_os().skip(1).collect();
    let mem = cmd.first().is_some_and(|a| a == "--mem");
    if mem {
        cmd.remove(0);
    }
    if cmd.is_empty() {
        eprintln!("usage: trace-throughput [--mem] PROGRAM ARGS");
        std::process::exit(2);
    }
    let mut c = Count::default();
    let t = Instant::now();
    let o = QemuOptions {
        show_output: false,
        trace_memory: mem,
        ..Default::default()
    };
    match trace_qemu(&cmd, &o, &mut c) {
        Ok(outcome) => {
            let s = t.elapsed().as_secs_f64();
            println!(
                "blocks={} instructions={} accesses={} seconds={:.3} blocks_per_second={:.0} accesses_per_second={:.0} outcome={:?}",
                c.blocks,
                c.instructions,
                c.accesses,
                s,
                c.blocks as f64 / s,
                c.accesses as f64 / s,
                outcome
            );
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
