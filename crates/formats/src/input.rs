//! Getting a profile's bytes: a file (mapped when large), bytes in memory, or any reader;
//! and transparent decompression of gzip, zstd and xz, recognised by content.

use crate::error::FormatError;
use std::borrow::Cow;
use std::io::Read;
use std::path::Path;

/// A compression the loader undoes by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Compression {
    /// gzip (`.gz`; several members are read one after the other, as `zcat` does).
    Gzip,
    /// Zstandard (`.zst`; several frames likewise).
    Zstd,
    /// xz (`.xz`).
    Xz,
}

impl Compression {
    /// The name used in messages and JSON (`gzip`, `zstd`, `xz`).
    pub fn name(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Xz => "xz",
        }
    }

    /// The compression whose magic `head` starts with.
    pub fn sniff(head: &[u8]) -> Option<Compression> {
        if head.starts_with(&[0x1f, 0x8b]) {
            Some(Compression::Gzip)
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Some(Compression::Zstd)
        } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
            Some(Compression::Xz)
        } else {
            None
        }
    }
}

/// Compressions recognised only to be refused with a hint.
fn unsupported_compression(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"BZh") && head.get(3).is_some_and(|c| c.is_ascii_digit()) {
        Some("bzip2 (decompress it with `bunzip2 -k FILE` first)")
    } else if head.starts_with(&[0x04, 0x22, 0x4d, 0x18]) {
        Some("lz4 (decompress it with `lz4 -d FILE` first)")
    } else if head.starts_with(b"PK\x03\x04") {
        Some("a zip archive (extract the profile with `unzip` first)")
    } else {
        None
    }
}

/// An error when `head` starts with a compression the loader does not undo (bzip2, lz4,
/// zip), with how to undo it.
pub(crate) fn refuse_compression(head: &[u8]) -> Result<(), FormatError> {
    match unsupported_compression(head) {
        Some(what) => Err(FormatError::NotThisFormat {
            what: "profile file",
            detail: format!("the file is compressed with {what}"),
        }),
        None => Ok(()),
    }
}

/// The bytes of an input: borrowed, read, or mapped.
pub(crate) enum Bytes<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>),
    Mapped(crate::sys::Mapped),
}

impl std::ops::Deref for Bytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Borrowed(b) => b,
            Bytes::Owned(v) => v,
            Bytes::Mapped(m) => m,
        }
    }
}

/// How much of an input the loader looks at before it reads the rest.
pub(crate) const HEAD_BYTES: usize = 1 << 16;

/// Reads the file at `path`: its first [`HEAD_BYTES`] are read and handed to `check_head`
/// (the loader refuses an unknown format there, before a byte more is read: a 50 GB file of
/// zeros is refused at once); then the whole file is mapped when it is a regular file of at
/// least 4 MiB, else read, in at most `max_bytes` (a pipe or device) with fallible
/// allocation, so that no size taken from input aborts the process.
pub(crate) fn read_path(
    path: &Path,
    check_head: &dyn Fn(&[u8]) -> Result<(), FormatError>,
    max_bytes: u64,
) -> Result<Bytes<'static>, FormatError> {
    let io = |source: std::io::Error| FormatError::Read {
        detail: source.to_string(),
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.is_dir() {
        return Err(FormatError::Read {
            detail: "is a directory; give a profile file (perf.data, perf script text, callgrind.out.PID, a proftrust file)".into(),
        });
    }
    let mut file = std::fs::File::open(path).map_err(io)?;
    if !meta.is_file() {
        // A pipe, a FIFO, a device: read as a stream.
        return read_all(file, check_head, max_bytes).map(Bytes::Owned);
    }
    let head = read_head(&mut file, HEAD_BYTES).map_err(io)?;
    if head.is_empty() {
        return Ok(Bytes::Owned(head));
    }
    check_head(&head)?;
    crate::sys::file_bytes(file, meta.len(), head)
}

/// Up to `n` bytes from the start of `r` (fewer at its end).
fn read_head(r: &mut impl Read, n: usize) -> std::io::Result<Vec<u8>> {
    let mut head = vec![0u8; n];
    let mut got = 0;
    while got < n {
        match r.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    head.truncate(got);
    Ok(head)
}

/// Grows `v` by `n` bytes' room without aborting when memory is short.
pub(crate) fn reserve(v: &mut Vec<u8>, n: usize, what: &'static str) -> Result<(), FormatError> {
    v.try_reserve(n).map_err(|_| FormatError::TooLarge {
        what,
        detail: format!(
            "{} bytes do not fit in memory (an address-space limit, `ulimit -v`, or too little memory); give a smaller file or raise the limit",
            v.len() as u64 + n as u64
        ),
    })
}

/// The first `n` bytes of what `r` holds, decompressed when it starts with a compression's
/// magic (a cut or damaged stream gives what could be decompressed).
pub(crate) fn head_decompressed(r: impl Read, n: usize) -> std::io::Result<Vec<u8>> {
    let mut r = std::io::BufReader::new(r);
    let magic = std::io::BufRead::fill_buf(&mut r)?.to_vec();
    let mut out = Vec::with_capacity(n);
    let mut dec: Box<dyn Read> = match Compression::sniff(&magic) {
        Some(Compression::Gzip) => Box::new(flate2::bufread::MultiGzDecoder::new(r)),
        Some(Compression::Zstd) => match ruzstd::StreamingDecoder::new(r) {
            Ok(d) => Box::new(d),
            Err(_) => return Ok(magic),
        },
        Some(Compression::Xz) => {
            // lzma-rs decodes whole streams only: decompress and keep the head.
            let mut all = Vec::new();
            let mut w = LimitedWriter {
                out: &mut all,
                limit: n as u64,
            };
            let _ = lzma_rs::xz_decompress(&mut r, &mut w);
            all.truncate(n);
            return Ok(all);
        }
        None => Box::new(r),
    };
    let mut buf = vec![0u8; 8192];
    while out.len() < n {
        match dec.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(k) => out.extend_from_slice(&buf[..k.min(n - out.len())]),
        }
    }
    Ok(out)
}

/// Reads everything from `r` (a pipe, a device, standard input): the first [`HEAD_BYTES`]
/// go to `check_head` before anything more is read (an endless device of zeros is refused
/// at once), then at most `max_bytes` in all, in memory allocated fallibly.
pub(crate) fn read_all(
    mut r: impl Read,
    check_head: &dyn Fn(&[u8]) -> Result<(), FormatError>,
    max_bytes: u64,
) -> Result<Vec<u8>, FormatError> {
    let io = |e: std::io::Error| FormatError::Read {
        detail: e.to_string(),
    };
    let mut v = read_head(&mut r, HEAD_BYTES).map_err(io)?;
    if v.is_empty() {
        return Ok(v);
    }
    check_head(&v)?;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(v),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(e)),
        };
        if v.len() as u64 + n as u64 > max_bytes {
            return Err(FormatError::TooLarge {
                what: "the input",
                detail: format!(
                    "more than {max_bytes} bytes came from a pipe or device (LoadOptions::max_decompressed); write it to a file first"
                ),
            });
        }
        if v.len() + n > v.capacity() {
            let more = v.len().max(n);
            reserve(&mut v, more, "the input")?;
        }
        v.extend_from_slice(&buf[..n]);
    }
}

/// Decompressed sizes up to this much are allowed whatever the ratio (a small file of a
/// very repetitive profile).
pub(crate) const RATIO_FLOOR: u64 = 64 << 20;

/// Undoes the compression `bytes` start with (up to two layers, e.g. a gzipped zstd file),
/// streaming from the compressed bytes into one buffer of at most `limit` bytes and at
/// most `max_ratio` times the compressed size (but at least [`RATIO_FLOOR`]): a
/// decompression bomb (394 KB of zstd holding 4 GB of text) is refused after that much,
/// not read until memory runs out. Real profiles compress 4x (callgrind) to 260x (`perf
/// script` text under `xz -9`).
pub(crate) fn decompress<'b>(
    bytes: &'b [u8],
    limit: u64,
    max_ratio: u64,
) -> Result<(Cow<'b, [u8]>, Option<Compression>), FormatError> {
    refuse_compression(bytes)?;
    let Some(c) = Compression::sniff(bytes) else {
        return Ok((Cow::Borrowed(bytes), None));
    };
    let cap = Cap::new(bytes.len() as u64, limit, max_ratio);
    let mut out = decompress_one(bytes, c, &cap)?;
    if let Some(inner) = Compression::sniff(&out) {
        out = decompress_one(&out, inner, &cap)?;
    }
    Ok((Cow::Owned(out), Some(c)))
}

/// The most a compressed input may decompress to, and why.
struct Cap {
    bytes: u64,
    compressed: u64,
    by_ratio: bool,
    ratio: u64,
}

impl Cap {
    fn new(compressed: u64, limit: u64, ratio: u64) -> Cap {
        let by_ratio = compressed.saturating_mul(ratio).max(RATIO_FLOOR);
        Cap {
            bytes: limit.min(by_ratio),
            compressed,
            by_ratio: by_ratio < limit,
            ratio,
        }
    }
}

fn decompress_one(b: &[u8], c: Compression, cap: &Cap) -> Result<Vec<u8>, FormatError> {
    let mut out = Vec::new();
    reserve(
        &mut out,
        (b.len() as u64)
            .saturating_mul(4)
            .min(1 << 30)
            .min(cap.bytes) as usize,
        "the decompressed profile",
    )?;
    let res = match c {
        Compression::Gzip => copy_limited(flate2::read::MultiGzDecoder::new(b), &mut out, cap, c),
        Compression::Zstd => zstd_all(b, &mut out, cap),
        Compression::Xz => {
            let mut r = std::io::BufReader::new(b);
            let mut w = LimitedWriter {
                out: &mut out,
                limit: cap.bytes,
            };
            lzma_rs::xz_decompress(&mut r, &mut w).map_err(|e| match e {
                lzma_rs::error::Error::IoError(e)
                    if e.kind() == std::io::ErrorKind::OutOfMemory =>
                {
                    too_big(c, cap)
                }
                e => bad_stream(c, &e.to_string(), w.out.len()),
            })
        }
    };
    res.map(|()| out)
}

/// Zstandard frames one after the other (as `zstd -d` reads concatenated frames; skippable
/// frames are skipped by the decoder).
fn zstd_all(b: &[u8], out: &mut Vec<u8>, cap: &Cap) -> Result<(), FormatError> {
    let mut rest = b;
    while !rest.is_empty() {
        let mut dec = ruzstd::StreamingDecoder::new(&mut rest)
            .map_err(|e| bad_stream(Compression::Zstd, &e.to_string(), out.len()))?;
        copy_limited(&mut dec, out, cap, Compression::Zstd)?;
    }
    Ok(())
}

fn copy_limited(
    mut r: impl Read,
    out: &mut Vec<u8>,
    cap: &Cap,
    c: Compression,
) -> Result<(), FormatError> {
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(bad_stream(c, &e.to_string(), out.len())),
        };
        if out.len() as u64 + n as u64 > cap.bytes {
            return Err(too_big(c, cap));
        }
        if out.len() + n > out.capacity() {
            let more = out.len().max(n);
            reserve(out, more, "the decompressed profile")?;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

struct LimitedWriter<'a> {
    out: &'a mut Vec<u8>,
    limit: u64,
}

impl std::io::Write for LimitedWriter<'_> {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.out.len() as u64 + b.len() as u64 > self.limit
            || self.out.try_reserve(b.len()).is_err()
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                "decompressed size limit",
            ));
        }
        self.out.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn bad_stream(c: Compression, detail: &str, produced: usize) -> FormatError {
    FormatError::Corrupt {
        what: c.name_of_stream(),
        offset: produced as u64,
        detail: format!(
            "{detail} (the compressed file is cut or damaged; {produced} bytes were decompressed; check it with `{} -t FILE`)",
            c.tool()
        ),
    }
}

fn too_big(c: Compression, cap: &Cap) -> FormatError {
    FormatError::TooLarge {
        what: c.name_of_stream(),
        detail: if cap.by_ratio {
            format!(
                "it decompresses to more than {} bytes, {} times its {} compressed bytes (LoadOptions::max_ratio; real profiles compress up to about 260 times): a decompression bomb, or a profile that needs `--max-decompression-ratio` raised (or decompress it with `{} -d` and read the result)",
                cap.bytes,
                cap.ratio,
                cap.compressed,
                c.tool()
            )
        } else {
            format!(
                "it decompresses to more than {} bytes (LoadOptions::max_decompressed); decompress it with `{} -d` and read the result",
                cap.bytes,
                c.tool()
            )
        },
    }
}

impl Compression {
    fn name_of_stream(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip stream",
            Compression::Zstd => "zstd stream",
            Compression::Xz => "xz stream",
        }
    }
    fn tool(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Xz => "xz",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn gzip_round_trip_and_cut_stream() {
        let text = b"version: 1\nevents: Ir\nfn=main\n1 2\n".repeat(100);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&text).unwrap();
        let gz = gz.finish().unwrap();
        let (out, c) = decompress(&gz, 1 << 30, 1000).unwrap();
        assert_eq!(c, Some(Compression::Gzip));
        assert_eq!(&*out, &text[..]);
        // Two members, as `cat a.gz b.gz` makes.
        let two = [gz.clone(), gz.clone()].concat();
        assert_eq!(
            decompress(&two, 1 << 30, 1000).unwrap().0.len(),
            2 * text.len()
        );
        let e = decompress(&gz[..gz.len() / 2], 1 << 30, 1000).unwrap_err();
        assert!(e.to_string().contains("cut or damaged"), "{e}");
        let e = decompress(&gz, 100, 1000).unwrap_err();
        assert!(matches!(e, FormatError::TooLarge { .. }), "{e}");
    }

    #[test]
    fn plain_and_refused() {
        let (out, c) = decompress(b"PERFILE2", 10, 1000).unwrap();
        assert_eq!((c, &*out), (None, &b"PERFILE2"[..]));
        let e = decompress(b"BZh91AY&SY", 10, 1000).unwrap_err();
        assert!(e.to_string().contains("bunzip2"), "{e}");
    }

    /// Issue 32 item 4: a decompression bomb (here 100 MiB of one repeated line, gzip
    /// ~1000:1) is refused once the output passes the ratio cap; raising the cap reads it.
    #[test]
    fn decompression_ratio_is_capped() {
        let line = b"prog 1 1.0: 1 cpu-clock: 401000 main (/prog)\n";
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let mut written = 0u64;
        while written < 100 << 20 {
            gz.write_all(line).unwrap();
            written += line.len() as u64;
        }
        let gz = gz.finish().unwrap();
        let ratio = written / gz.len() as u64;
        assert!(ratio > 300, "gzip made only {ratio}:1");
        let e = decompress(&gz, 32 << 30, 200).unwrap_err().to_string();
        assert!(e.contains("200 times its"), "{e}");
        assert!(e.contains("--max-decompression-ratio"), "{e}");
        // The cap: max(compressed x ratio, the 64 MiB floor).
        assert!(
            e.contains(&format!("more than {} bytes", RATIO_FLOOR)),
            "{e}"
        );
        let (out, _) = decompress(&gz, 32 << 30, 2 * ratio).unwrap();
        assert_eq!(out.len() as u64, written);
    }

    #[test]
    fn streams_are_sniffed_before_they_are_read_whole() {
        let refuse = |h: &[u8]| -> Result<(), FormatError> {
            if h.iter().all(|&b| b == 0) {
                Err(FormatError::UnknownFormat {
                    start: "zeros".into(),
                })
            } else {
                Ok(())
            }
        };
        // An endless device of zeros: refused after its first 64 KiB.
        let e = read_all(std::io::repeat(0), &refuse, u64::MAX).unwrap_err();
        assert!(matches!(e, FormatError::UnknownFormat { .. }), "{e}");
        // An endless stream that looks fine: refused at the cap.
        let e = read_all(std::io::repeat(b'a'), &refuse, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("more than 1048576 bytes"), "{e}");
        let v = read_all(&b"abc"[..], &refuse, 10).unwrap();
        assert_eq!(v, b"abc");
    }
}
