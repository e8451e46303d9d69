//! Block-trace throughput: runs a program under `trace_qemu` with a visitor that only counts,
//! and prints blocks, instructions, seconds and blocks per second.
//!
//! ```text
//! cargo run --release -p proftrust-exact --example trace-throughput -- PROGRAM ARGS
//! ```

use proftrust_exact::{trace_qemu, QemuOptions};
use proftrust_model::{BlockVisitor, TraceBlock};
use std::ffi::OsString;
use std::time::Instant;

#[derive(Default)]
struct Count {
    blocks: u64,
    instructions: u64,
}

impl BlockVisitor for Count {
    fn block(&mut self, b: &TraceBlock<'_>) {
        self.blocks += 1;
        self.instructions += b.instructions.len() as u64;
    }
}

fn main() {
    let cmd: Vec<OsString> = std::env::args_os().skip(1).collect();
    if cmd.is_empty() {
        eprintln!("usage: trace-throughput PROGRAM ARGS");
        std::process::exit(2);
    }
    let mut c = Count::default();
    let t = Instant::now();
    let o = QemuOptions {
        show_output: false,
        ..Default::default()
    };
    match trace_qemu(&cmd, &o, &mut c) {
        Ok(outcome) => {
            let s = t.elapsed().as_secs_f64();
            println!(
                "blocks={} instructions={} seconds={:.3} blocks_per_second={:.0} outcome={:?}",
                c.blocks,
                c.instructions,
                s,
                c.blocks as f64 / s,
                outcome
            );
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    }
}
