//! bzip2 (libbzip2 1.0.8 from bzip2-sys): compress and decompress generated text.
use std::io::{Read, Write};

fn main() {
    let n = proftrust_workloads::size() as usize;
    let data = proftrust_workloads::text(12_000 * n, 1);
    let mut enc = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::new(9));
    enc.write_all(&data).unwrap();
    let packed = enc.finish().unwrap();
    let mut out = Vec::with_capacity(data.len());
    bzip2::read::BzDecoder::new(&packed[..])
        .read_to_end(&mut out)
        .unwrap();
    assert_eq!(out, data);
    proftrust_workloads::done("bzip2", packed.len() as u64);
}
