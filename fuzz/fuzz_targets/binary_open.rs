//! ELF reader and code analysis: any bytes give a binary or an error, never a panic; the
//! CFG, loops, simple loops, instructions and inline frames of its functions likewise.
#![no_main]
use libfuzzer_sys::fuzz_target;
use proftrust_binary::{simple_loops, Binary, OpenOptions};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let opts = OpenOptions {
        debug_dirs: vec![],
        separate_debug: false,
    };
    if let Ok(b) = Binary::from_bytes_with(Path::new("fuzz.elf"), data.to_vec(), &opts) {
        let _ = b.build_id();
        for f in b.functions().iter().take(64) {
            let _ = b.function_at(f.start);
            let _ = b.frames(f.start);
            let _ = b.instructions(f);
            let _ = b.jump_tables(f);
            if let Ok(cfg) = b.cfg(f) {
                for l in &cfg.loops {
                    let _ = simple_loops(&cfg, l, 64);
                }
            }
        }
    }
});
