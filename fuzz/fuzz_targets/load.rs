//! The one loader (`proftrust_formats::load`), as every command reads a profile: any bytes
//! are sniffed (format, and gzip/zstd/xz compression by content) and read by whichever
//! reader, both as samples and as per-address counts, and as an exact profile; never a
//! panic, decompression bounded. Each input is also wrapped in a gzip container, so the
//! fuzzer's mutations reach the readers through the decompression path too (zstd and xz
//! containers come from the seed corpus: `scripts/fuzz.sh` compresses the seeds).
#![no_main]
use flate2::write::GzEncoder;
use libfuzzer_sys::fuzz_target;
use proftrust_formats::segments::NoSegments;
use proftrust_formats::{load, load_exact, LoadOptions, Source};
use std::io::Write;

fn all_ways(bytes: &[u8]) {
    let mut o = LoadOptions::default();
    o.segments = &NoSegments;
    o.max_decompressed = 64 << 20;
    let src = || Source::Bytes {
        bytes,
        name: "fuzz",
    };
    let _ = load(src(), &o);
    o.sample_counts = true;
    let _ = load(src(), &o);
    let _ = load_exact(src(), &o);
}

fuzz_target!(|data: &[u8]| {
    all_ways(data);
    let mut gz = GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(data).expect("write to Vec");
    all_ways(&gz.finish().expect("finish gzip"));
});
