//! Issue 20: the sizes a perf.data file declares are checked against what it holds. A table
//! of mutants of the committed golden recording (`tiny.perf.data`, 163 samples): each
//! case says whether the file must be refused or read with a warning, what the warning
//! says, and how many samples must be read. The expected counts come from walking the
//! records here (an independent count of the samples before the damaged record), and the
//! full reader and the streaming counter must agree.

use proftrust_formats::segments::NoSegments;
use proftrust_formats::{count_perf_data, read_perf_data_with, FormatError, PerfDataOptions};
use std::path::Path;

fn fixture() -> Vec<u8> {
    let p =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/golden/fixtures/tiny.perf.data");
    std::fs::read(p).expect("golden fixture tiny.perf.data")
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// `(offset, type, size)` of every record of the data section.
fn records(b: &[u8]) -> Vec<(usize, u32, u16)> {
    let (off, size) = (u64_at(b, 40) as usize, u64_at(b, 48) as usize);
    let mut out = Vec::new();
    let mut p = off;
    while p < off + size {
        let ty = u32::from_le_bytes(b[p..p + 4].try_into().unwrap());
        let s = u16::from_le_bytes(b[p + 6..p + 8].try_into().unwrap());
        out.push((p, ty, s));
        p += usize::from(s);
    }
    out
}

enum Want {
    /// Refused, the message containing these.
    Error(&'static [&'static str]),
    /// Read: this many samples, a warning containing these.
    Read(usize, Vec<String>),
}

#[test]
fn declared_record_and_section_sizes_are_checked() {
    let good = fixture();
    let recs = records(&good);
    let samples: Vec<usize> = recs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.1 == 9)
        .map(|(i, _)| i)
        .collect();
    let total = samples.len();
    assert_eq!(total, 163, "the golden recording holds 163 samples");
    let first = recs[samples[0]];
    let mid_i = samples[total / 2];
    let mid = recs[mid_i];
    // Samples before the middle one, counted here.
    let before_mid = samples.iter().filter(|&&i| i < mid_i).count();
    let set_u16 = |at: usize, v: u16| {
        let mut b = good.clone();
        b[at..at + 2].copy_from_slice(&v.to_le_bytes());
        b
    };
    let data_end = u64_at(&good, 40) + u64_at(&good, 48);
    let grow = |by: u64| {
        let mut b = good.clone();
        let s = u64_at(&b, 48) + by;
        b[48..56].copy_from_slice(&s.to_le_bytes());
        b
    };
    let cases: Vec<(&str, Vec<u8>, Want)> = vec![
        (
            "first sample's size 0x50 -> 0x4d50",
            set_u16(first.0 + 6, first.2 | 0x4d00),
            Want::Error(&[
                "declares 19792 bytes",
                "runs past its section",
                "no sample precedes it",
            ]),
        ),
        (
            "middle sample's size 0x50 -> 0x4d50",
            set_u16(mid.0 + 6, mid.2 | 0x4d00),
            Want::Read(
                before_mid,
                vec![
                    format!("the record at byte {} (type 9) declares 19792 bytes", mid.0),
                    format!("({before_mid} samples) were read"),
                    format!("{} bytes from it", data_end as usize - mid.0),
                ],
            ),
        ),
        (
            "middle sample's size 0x50 -> 4",
            set_u16(mid.0 + 6, 4),
            Want::Read(
                before_mid,
                vec!["declares 4 bytes but a record has at least its 8-byte header".into()],
            ),
        ),
        (
            "middle sample's type 9 -> 200",
            {
                let mut b = good.clone();
                b[mid.0..mid.0 + 4].copy_from_slice(&200u32.to_le_bytes());
                b
            },
            Want::Read(total - 1, vec!["1 of type 200".into()]),
        ),
        (
            // Past the end of the file: read as a cut copy.
            "data section size + 8192",
            grow(8192),
            Want::Read(total, vec!["a cut copy?".into()]),
        ),
        (
            // Still inside the file, over the feature table: the feature sections are
            // then looked for after the file's end.
            "data section size + 4096",
            grow(4096),
            Want::Error(&["truncated", "feature section"]),
        ),
        (
            "cut inside the middle sample",
            good[..mid.0 + 20].to_vec(),
            Want::Read(before_mid, vec!["a cut copy?".into()]),
        ),
    ];
    let p = Path::new("tiny.perf.data");
    let opts = PerfDataOptions::default();
    for (label, bytes, want) in cases {
        let full = read_perf_data_with(&bytes, p, &opts, &NoSegments);
        let counted = count_perf_data(&bytes, p, &opts, &NoSegments);
        match want {
            Want::Error(needles) => {
                for e in [full.err(), counted.err()] {
                    let e: FormatError = e.unwrap_or_else(|| panic!("{label}: accepted"));
                    let m = e.to_string();
                    for n in needles {
                        assert!(m.contains(n), "{label}: {m}");
                    }
                }
            }
            Want::Read(n, needles) => {
                let (s, notes) = full.unwrap_or_else(|e| panic!("{label}: {e}"));
                assert_eq!(s.samples.len(), n, "{label}: samples read");
                let (c, cnotes) = counted.unwrap_or_else(|e| panic!("{label}: {e}"));
                assert_eq!(c.total() as usize, n, "{label}: samples counted");
                for w in [&notes.warnings, &cnotes.warnings] {
                    for needle in &needles {
                        assert!(
                            w.iter().any(|x| x.contains(needle.as_str())),
                            "{label}: no warning with {needle:?}: {w:?}"
                        );
                    }
                }
            }
        }
    }
}
