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

/// Reads the file at `path`: mapped when it is a regular file of at least 4 MiB, else read.
pub(crate) fn read_path(path: &Path) -> Result<Bytes<'static>, FormatError> {
    let io = |source: std::io::Error| FormatError::Read {
        detail: source.to_string(),
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.is_dir() {
        return Err(FormatError::Read {
            detail: "is a directory; give a profile file (perf.data, perf script text, callgrind.out.PID, a proftrust file)".into(),
        });
    }
    let file = std::fs::File::open(path).map_err(io)?;
    crate::sys::file_bytes(file, &meta).map_err(io)
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

/// Reads everything from `r`.
pub(crate) fn read_all(mut r: impl Read) -> Result<Vec<u8>, FormatError> {
    let mut v = Vec::new();
    r.read_to_end(&mut v).map_err(|e| FormatError::Read {
        detail: e.to_string(),
    })?;
    Ok(v)
}

/// Undoes the compression `bytes` start with (up to two layers, e.g. a gzipped zstd file),
/// streaming from the compressed bytes into one buffer of at most `limit` bytes.
pub(crate) fn decompress<'b>(
    bytes: &'b [u8],
    limit: u64,
) -> Result<(Cow<'b, [u8]>, Option<Compression>), FormatError> {
    if let Some(what) = unsupported_compression(bytes) {
        return Err(FormatError::NotThisFormat {
            what: "profile file",
            detail: format!("the file is compressed with {what}"),
        });
    }
    let Some(c) = Compression::sniff(bytes) else {
        return Ok((Cow::Borrowed(bytes), None));
    };
    let mut out = decompress_one(bytes, c, limit)?;
    if let Some(inner) = Compression::sniff(&out) {
        out = decompress_one(&out, inner, limit)?;
    }
    Ok((Cow::Owned(out), Some(c)))
}

fn decompress_one(b: &[u8], c: Compression, limit: u64) -> Result<Vec<u8>, FormatError> {
    let mut out = Vec::with_capacity(b.len().saturating_mul(4).min(1 << 30));
    let res = match c {
        Compression::Gzip => copy_limited(flate2::read::MultiGzDecoder::new(b), &mut out, limit, c),
        Compression::Zstd => zstd_all(b, &mut out, limit),
        Compression::Xz => {
            let mut r = std::io::BufReader::new(b);
            let mut w = LimitedWriter {
                out: &mut out,
                limit,
            };
            lzma_rs::xz_decompress(&mut r, &mut w).map_err(|e| match e {
                lzma_rs::error::Error::IoError(e)
                    if e.kind() == std::io::ErrorKind::OutOfMemory =>
                {
                    too_big(c, limit)
                }
                e => bad_stream(c, &e.to_string(), w.out.len()),
            })
        }
    };
    res.map(|()| out)
}

/// Zstandard frames one after the other (as `zstd -d` reads concatenated frames; skippable
/// frames are skipped by the decoder).
fn zstd_all(b: &[u8], out: &mut Vec<u8>, limit: u64) -> Result<(), FormatError> {
    let mut rest = b;
    while !rest.is_empty() {
        let mut dec = ruzstd::StreamingDecoder::new(&mut rest)
            .map_err(|e| bad_stream(Compression::Zstd, &e.to_string(), out.len()))?;
        copy_limited(&mut dec, out, limit, Compression::Zstd)?;
    }
    Ok(())
}

fn copy_limited(
    mut r: impl Read,
    out: &mut Vec<u8>,
    limit: u64,
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
        if out.len() as u64 + n as u64 > limit {
            return Err(too_big(c, limit));
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
        if self.out.len() as u64 + b.len() as u64 > self.limit {
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

fn too_big(c: Compression, limit: u64) -> FormatError {
    FormatError::TooLarge {
        what: c.name_of_stream(),
        detail: format!(
            "it decompresses to more than {limit} bytes (LoadOptions::max_decompressed); decompress it with `{} -d` and read the result",
            c.tool()
        ),
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
        let (out, c) = decompress(&gz, 1 << 30).unwrap();
        assert_eq!(c, Some(Compression::Gzip));
        assert_eq!(&*out, &text[..]);
        // Two members, as `cat a.gz b.gz` makes.
        let two = [gz.clone(), gz.clone()].concat();
        assert_eq!(decompress(&two, 1 << 30).unwrap().0.len(), 2 * text.len());
        let e = decompress(&gz[..gz.len() / 2], 1 << 30).unwrap_err();
        assert!(e.to_string().contains("cut or damaged"), "{e}");
        let e = decompress(&gz, 100).unwrap_err();
        assert!(matches!(e, FormatError::TooLarge { .. }), "{e}");
    }

    #[test]
    fn plain_and_refused() {
        let (out, c) = decompress(b"PERFILE2", 10).unwrap();
        assert_eq!((c, &*out), (None, &b"PERFILE2"[..]));
        let e = decompress(b"BZh91AY&SY", 10).unwrap_err();
        assert!(e.to_string().contains("bunzip2"), "{e}");
    }
}
