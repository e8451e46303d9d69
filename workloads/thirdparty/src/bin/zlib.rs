//! zlib (from libz-sys, through flate2): deflate and inflate generated text.
use std::io::{Read, Write};

fn main() {
    let n = proftrust_workloads::size() as usize;
    let data = proftrust_workloads::text(15_000 * n, 2);
    let mut sum = 0u64;
    for level in [1, 6, 9] {
        let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level));
        enc.write_all(&data).unwrap();
        let packed = enc.finish().unwrap();
        let mut out = Vec::with_capacity(data.len());
        flate2::read::ZlibDecoder::new(&packed[..])
            .read_to_end(&mut out)
            .unwrap();
        assert_eq!(out, data);
        sum += packed.len() as u64;
    }
    proftrust_workloads::done("zlib", sum);
}
