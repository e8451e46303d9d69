//! The probe file: what a probed program writes at exit (documented in `docs/vpp.md`).
//!
//! Line-based text, version 1, written by the Rust runtime and by the C header alike:
//!
//! ```text
//! proftrust-probe 1
//! pid 4242
//! exe /path/to/program
//! load_bias 0x555555554000
//! tsc_per_ns 2.592
//! n_check 10000
//! n_instr 1
//! randomize 1
//! seed 0
//! boundaries 52000000
//! program_ticks 1300000000
//! dropped 0
//! foreign 0
//! site 0x11d9 vpp.c:88
//! c 32 9120
//! c 34 880
//! s 0x11d9 2 10 311
//! end 1 2
//! ```
//!
//! * Header keys (any order, each once): `pid`, `exe` (the rest of the line), `load_bias`
//!   (hex, subtracted from runtime addresses), `tsc_per_ns` (TSC ticks per nanosecond,
//!   measured over the run against `CLOCK_MONOTONIC`), `n_check` / `n_instr` / `randomize` /
//!   `seed` (bursty tracing, [`crate::BurstyOptions`]), `boundaries` (dispatch checks
//!   executed by the recording thread), `program_ticks` (TSC ticks from the runtime's start
//!   to the write), `dropped` (timed paths lost to a full buffer), `foreign` (boundaries
//!   passed in threads other than the recording thread, not timed).
//! * `site ADDR FILE:LINE`: a probe site (module-relative address, hex) and where it is in
//!   the source.
//! * `c TICKS COUNT`: calibration histogram: how often an *empty* path measured `TICKS`
//!   (the instrumentation bias, seed 004 §4.2), timed at start-up.
//! * `ce TICKS COUNT`: the same calibration timed again at exit (optional; runtimes before
//!   it wrote only `c`). A CPU that starts cold or at a low clock speed and speeds up
//!   under load (frequency scaling, turbo) makes an empty path cost more TSC ticks at
//!   start-up than while the program's paths run; the exit calibration shows it.
//! * `s ENTRY NBITS BITS TICKS`: one timed path: its entry (module-relative address of the
//!   probe site where it started, hex), the number of branch outcomes recorded on it, the
//!   outcomes as `0`/`1` characters in execution order (`-` when there are none; at most 64
//!   characters — longer histories keep their first 64 and the true count), its duration in
//!   TSC ticks.
//! * `end NSAMPLES NCALIB`: the number of `s` lines and of `c` and `ce` lines; a file without it, or
//!   whose counts disagree, was cut short and is refused.

use std::io::Write;

/// Magic first line.
pub const MAGIC: &str = "proftrust-probe";
/// Current version.
pub const VERSION: u32 = 1;
/// Most branch outcomes stored per path.
pub const MAX_BITS: u32 = 64;

/// One timed path instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProbeSample {
    /// Module-relative address of the probe site where the path started.
    pub entry: u64,
    /// Branch outcomes recorded on the path (may exceed [`MAX_BITS`]).
    pub nbits: u32,
    /// The first `min(nbits, 64)` outcomes, the first in bit 0; 1 = taken / true.
    pub bits: u64,
    /// Duration in TSC ticks (instrumentation bias included).
    pub ticks: u64,
}

/// Everything a probed run wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeFile {
    /// Format version.
    pub version: u32,
    /// Process id of the run.
    pub pid: u32,
    /// Executable path.
    pub exe: String,
    /// Load bias of the executable (runtime address − SVMA).
    pub load_bias: u64,
    /// TSC ticks per nanosecond (0 when unknown).
    pub tsc_per_ns: f64,
    /// Bursty tracing nCheckThresh (0 = every path timed).
    pub n_check: u64,
    /// Bursty tracing nInstrThresh.
    pub n_instr: u64,
    /// Jittered nCheck resets.
    pub randomize: bool,
    /// Seed of the jitter.
    pub seed: u64,
    /// Dispatch checks passed by the recording thread.
    pub boundaries: u64,
    /// TSC ticks from the runtime's start to the write.
    pub program_ticks: u64,
    /// Timed paths lost to a full buffer.
    pub dropped: u64,
    /// Boundaries passed in other threads (not timed).
    pub foreign: u64,
    /// Probe sites: address and `file:line`.
    pub sites: Vec<(u64, String)>,
    /// Calibration histogram: (ticks of an empty path, occurrences), sorted by ticks;
    /// timed at start-up.
    pub calibration: Vec<(u64, u64)>,
    /// The same calibration timed again at exit (empty in files written without it).
    pub calibration_exit: Vec<(u64, u64)>,
    /// Timed paths, in the order they were taken.
    pub samples: Vec<ProbeSample>,
}

impl Default for ProbeFile {
    fn default() -> Self {
        ProbeFile {
            version: VERSION,
            pid: 0,
            exe: String::new(),
            load_bias: 0,
            tsc_per_ns: 0.0,
            n_check: 0,
            n_instr: 1,
            randomize: false,
            seed: 0,
            boundaries: 0,
            program_ticks: 0,
            dropped: 0,
            foreign: 0,
            sites: Vec::new(),
            calibration: Vec::new(),
            calibration_exit: Vec::new(),
            samples: Vec::new(),
        }
    }
}

/// Why a probe file cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// Not a probe file.
    #[error("not a proftrust probe file (first line {first:?}; expected `proftrust-probe 1`)")]
    NotProbeFile {
        /// The first line, shortened.
        first: String,
    },
    /// A version this reader does not know.
    #[error("probe file version {0} is not supported (this proftrust reads version 1); use the header of the same proftrust release")]
    Version(u32),
    /// A malformed line.
    #[error("line {line}: {what}")]
    Bad {
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        what: String,
    },
    /// No `end` line or counts that disagree: the program died while writing.
    #[error("the probe file is cut short ({0}); the program was probably killed while writing it, run it again")]
    Truncated(String),
    /// Writing failed.
    #[error("cannot write the probe file: {0}")]
    Io(#[from] std::io::Error),
    /// A runtime setting from the environment is not valid.
    #[error("{var}={value:?}: {why}")]
    Setting {
        /// The environment variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        why: &'static str,
    },
}

/// `0`/`1` characters of the first `min(nbits, 64)` outcomes, `-` for none.
pub fn bits_string(bits: u64, nbits: u32) -> String {
    let n = nbits.min(MAX_BITS);
    if n == 0 {
        return "-".into();
    }
    (0..n)
        .map(|i| if bits >> i & 1 == 1 { '1' } else { '0' })
        .collect()
}

/// Writes `f` in the text format.
pub fn write(w: &mut dyn Write, f: &ProbeFile) -> Result<(), ProbeError> {
    writeln!(w, "{MAGIC} {}", f.version)?;
    writeln!(w, "pid {}", f.pid)?;
    writeln!(w, "exe {}", f.exe.replace('\n', " "))?;
    writeln!(w, "load_bias {:#x}", f.load_bias)?;
    writeln!(w, "tsc_per_ns {}", f.tsc_per_ns)?;
    writeln!(w, "n_check {}", f.n_check)?;
    writeln!(w, "n_instr {}", f.n_instr)?;
    writeln!(w, "randomize {}", u8::from(f.randomize))?;
    writeln!(w, "seed {}", f.seed)?;
    writeln!(w, "boundaries {}", f.boundaries)?;
    writeln!(w, "program_ticks {}", f.program_ticks)?;
    writeln!(w, "dropped {}", f.dropped)?;
    writeln!(w, "foreign {}", f.foreign)?;
    for (a, name) in &f.sites {
        writeln!(w, "site {a:#x} {}", name.replace('\n', " "))?;
    }
    for (t, n) in &f.calibration {
        writeln!(w, "c {t} {n}")?;
    }
    for (t, n) in &f.calibration_exit {
        writeln!(w, "ce {t} {n}")?;
    }
    for s in &f.samples {
        writeln!(
            w,
            "s {:#x} {} {} {}",
            s.entry,
            s.nbits,
            bits_string(s.bits, s.nbits),
            s.ticks
        )?;
    }
    writeln!(
        w,
        "end {} {}",
        f.samples.len(),
        f.calibration.len() + f.calibration_exit.len()
    )?;
    Ok(())
}

fn hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x").unwrap_or(s), 16).ok()
}

/// Reads a probe file.
pub fn read(data: &[u8]) -> Result<ProbeFile, ProbeError> {
    let text = utf8_text(data)?;
    let mut lines = text.lines().enumerate();
    let first = lines.next().map(|(_, l)| l).unwrap_or("");
    let version = header_version(first)?;
    if version != VERSION {
        return Err(ProbeError::Version(version));
    }
    let mut f = ProbeFile {
        version,
        ..ProbeFile::default()
    };
    let mut end: Option<(usize, usize)> = None;
    let mut seen: Vec<&str> = Vec::new();
    for (i, text) in lines {
        let l = Line { ln: i + 1, text };
        if text.trim().is_empty() {
            continue;
        }
        if end.is_some() {
            return Err(ProbeError::Bad {
                line: l.ln,
                what: "text after the `end` line".into(),
            });
        }
        let (key, rest) = text.split_once(' ').unwrap_or((text, ""));
        if !matches!(key, "site" | "c" | "ce" | "s" | "end") {
            if seen.contains(&key) {
                return Err(l.bad("header key given twice"));
            }
            seen.push(key);
        }
        if key == "end" {
            end = Some(end_counts(l, rest)?);
        } else {
            read_line(&mut f, l, key, rest)?;
        }
    }
    check_end(f, end)
}

/// The file as text; an error names the line holding the first byte that is not UTF-8.
fn utf8_text(data: &[u8]) -> Result<&str, ProbeError> {
    std::str::from_utf8(data).map_err(|e| ProbeError::Bad {
        line: 1 + data[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count(),
        what: "not UTF-8 text".into(),
    })
}

/// The format version the first line (`MAGIC VERSION`) gives.
fn header_version(first: &str) -> Result<u32, ProbeError> {
    let not_probe = || ProbeError::NotProbeFile {
        first: first.chars().take(40).collect(),
    };
    match first.split_once(' ') {
        Some((MAGIC, v)) => v.trim().parse::<u32>().map_err(|_| not_probe()),
        _ => Err(not_probe()),
    }
}

/// One line of a probe file after the first: its number and text, for error messages.
#[derive(Clone, Copy)]
struct Line<'a> {
    ln: usize,
    text: &'a str,
}

impl Line<'_> {
    /// `what` is wrong with this line.
    fn bad(&self, what: &str) -> ProbeError {
        ProbeError::Bad {
            line: self.ln,
            what: format!(
                "{what}: {:?}",
                self.text.chars().take(80).collect::<String>()
            ),
        }
    }

    /// `s` as a decimal number.
    fn num(&self, s: &str) -> Result<u64, ProbeError> {
        s.trim()
            .parse::<u64>()
            .map_err(|_| self.bad("expected a number"))
    }
}

/// Reads a header, site, calibration or sample line (`key rest`) into `f`.
fn read_line(f: &mut ProbeFile, l: Line, key: &str, rest: &str) -> Result<(), ProbeError> {
    match key {
        "pid" => {
            f.pid = l
                .num(rest)?
                .try_into()
                .map_err(|_| l.bad("pid out of range"))?
        }
        "exe" => f.exe = rest.to_string(),
        "load_bias" => f.load_bias = hex(rest.trim()).ok_or_else(|| l.bad("expected hex"))?,
        "tsc_per_ns" => {
            f.tsc_per_ns = rest
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| l.bad("expected a non-negative number"))?
        }
        "n_check" => f.n_check = l.num(rest)?,
        "n_instr" => f.n_instr = l.num(rest)?,
        "randomize" => f.randomize = l.num(rest)? != 0,
        "seed" => f.seed = l.num(rest)?,
        "boundaries" => f.boundaries = l.num(rest)?,
        "program_ticks" => f.program_ticks = l.num(rest)?,
        "dropped" => f.dropped = l.num(rest)?,
        "foreign" => f.foreign = l.num(rest)?,
        "site" => {
            let (a, name) = rest.split_once(' ').unwrap_or((rest, ""));
            let a = hex(a).ok_or_else(|| l.bad("expected a hex site address"))?;
            f.sites.push((a, name.to_string()));
        }
        "c" | "ce" => {
            let mut it = rest.split_whitespace();
            let (Some(t), Some(n), None) = (it.next(), it.next(), it.next()) else {
                return Err(l.bad(&format!("expected `{key} TICKS COUNT`")));
            };
            let v = (l.num(t)?, l.num(n)?);
            if key == "c" {
                f.calibration.push(v);
            } else {
                f.calibration_exit.push(v);
            }
        }
        "s" => f.samples.push(sample_line(l, rest)?),
        _ => return Err(l.bad("unknown key")),
    }
    Ok(())
}

/// A sample line: `s ENTRY NBITS BITS TICKS` (`rest` is after the `s`).
fn sample_line(l: Line, rest: &str) -> Result<ProbeSample, ProbeError> {
    let mut it = rest.split_whitespace();
    let (Some(e), Some(nb), Some(bits), Some(t), None) =
        (it.next(), it.next(), it.next(), it.next(), it.next())
    else {
        return Err(l.bad("expected `s ENTRY NBITS BITS TICKS`"));
    };
    let entry = hex(e).ok_or_else(|| l.bad("expected a hex entry address"))?;
    let nbits: u32 = nb.parse().map_err(|_| l.bad("expected a bit count"))?;
    let want = nbits.min(MAX_BITS) as usize;
    let mut b = 0u64;
    if nbits == 0 {
        if bits != "-" {
            return Err(l.bad("no branch bits expected (`-`)"));
        }
    } else {
        if bits.len() != want {
            return Err(l.bad("branch bits do not match their count"));
        }
        for (k, ch) in bits.bytes().enumerate() {
            match ch {
                b'1' => b |= 1 << k,
                b'0' => {}
                _ => return Err(l.bad("branch bits must be 0 or 1")),
            }
        }
    }
    Ok(ProbeSample {
        entry,
        nbits,
        bits: b,
        ticks: l.num(t)?,
    })
}

/// The counts of the `end NSAMPLES NCALIB` line (`rest` is after the `end`).
fn end_counts(l: Line, rest: &str) -> Result<(usize, usize), ProbeError> {
    let mut it = rest.split_whitespace();
    let (Some(a), Some(b), None) = (it.next(), it.next(), it.next()) else {
        return Err(l.bad("expected `end NSAMPLES NCALIB`"));
    };
    Ok((l.num(a)? as usize, l.num(b)? as usize))
}

/// `f` once its `end` line (`None`: missing) is checked against what was read, its
/// calibration sorted.
fn check_end(mut f: ProbeFile, end: Option<(usize, usize)>) -> Result<ProbeFile, ProbeError> {
    match end {
        None => Err(ProbeError::Truncated("no `end` line".into())),
        Some((s, c))
            if s != f.samples.len() || c != f.calibration.len() + f.calibration_exit.len() =>
        {
            Err(ProbeError::Truncated(format!(
                "`end` says {s} samples and {c} calibration lines, the file has {} and {}",
                f.samples.len(),
                f.calibration.len() + f.calibration_exit.len()
            )))
        }
        Some(_) => {
            f.calibration.sort_unstable();
            f.calibration_exit.sort_unstable();
            Ok(f)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> ProbeFile {
        ProbeFile {
            pid: 4242,
            exe: "/tmp/x y/prog".into(),
            load_bias: 0x5555_5555_4000,
            tsc_per_ns: 2.5,
            n_check: 100,
            n_instr: 2,
            randomize: true,
            seed: 7,
            boundaries: 1234,
            program_ticks: 99_999,
            dropped: 3,
            foreign: 5,
            sites: vec![(0x11d9, "vpp.c:88".into()), (0x1200, "vpp.c:97".into())],
            calibration: vec![(30, 10), (32, 900)],
            calibration_exit: vec![(28, 5), (30, 995)],
            samples: vec![
                ProbeSample {
                    entry: 0x11d9,
                    nbits: 2,
                    bits: 0b01,
                    ticks: 311,
                },
                ProbeSample {
                    entry: 0x1200,
                    nbits: 0,
                    bits: 0,
                    ticks: 40,
                },
                ProbeSample {
                    entry: 0x11d9,
                    nbits: 70,
                    bits: u64::MAX,
                    ticks: 5000,
                },
            ],
            ..ProbeFile::default()
        }
    }

    #[test]
    fn round_trip() {
        let f = example();
        let mut out = Vec::new();
        write(&mut out, &f).unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(text.starts_with("proftrust-probe 1\npid 4242\nexe /tmp/x y/prog\n"));
        assert!(text.contains("\ns 0x11d9 2 10 311\n"), "{text}");
        assert!(text.contains("\ns 0x1200 0 - 40\n"));
        assert!(
            text.contains("\nc 32 900\nce 28 5\nce 30 995\ns "),
            "{text}"
        );
        assert!(text.ends_with("end 3 4\n"));
        assert_eq!(read(&out).unwrap(), f);
        // A file from a runtime without the exit calibration reads as before.
        let old = text
            .replace("ce 28 5\nce 30 995\n", "")
            .replace("end 3 4", "end 3 2");
        let g = read(old.as_bytes()).unwrap();
        assert!(g.calibration_exit.is_empty());
        assert_eq!(g.calibration, f.calibration);
    }

    #[test]
    fn damaged_files_are_refused() {
        let mut out = Vec::new();
        write(&mut out, &example()).unwrap();
        let text = String::from_utf8(out).unwrap();
        // Cut short: no end line.
        let cut = &text[..text.find("end").unwrap()];
        assert!(matches!(
            read(cut.as_bytes()),
            Err(ProbeError::Truncated(_))
        ));
        // A sample line lost before the end line.
        let lost = text.replace("s 0x1200 0 - 40\n", "");
        assert!(matches!(
            read(lost.as_bytes()),
            Err(ProbeError::Truncated(_))
        ));
        let e = read(text.replace("2 10 311", "3 10 311").as_bytes()).unwrap_err();
        assert!(e.to_string().contains("do not match"), "{e}");
        let e = read(text.replace("2 10 311", "2 12 311").as_bytes()).unwrap_err();
        assert!(e.to_string().contains("0 or 1"), "{e}");
        assert!(matches!(
            read(b"hello\n"),
            Err(ProbeError::NotProbeFile { .. })
        ));
        assert!(matches!(
            read(b"proftrust-probe 9\n"),
            Err(ProbeError::Version(9))
        ));
        let e = read(text.replace("seed 7", "seed 7\nseed 8").as_bytes()).unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
        assert!(read(&[0xff, 0xfe]).is_err());
        assert!(read(b"").is_err());
    }
}
