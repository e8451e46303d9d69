//! `perf script` text: reading it back into a [`SampleSet`], and writing perf-script-like
//! text from one.
//!
//! ## What is read
//!
//! * Sample header lines of the default output and of the common `-F` field sets
//!   (`comm`, `pid`, `tid`, `pid/tid`, `[cpu]`, `time:`, `period`, `event:`, then `ip sym+off
//!   (dso)` inline): the line is recognised by a `SECONDS.MICROS:` time token or an `event:`
//!   token; the `comm` is everything before the pid token.
//! * Call-chain frames (`-g`): indented `ADDR sym+off (dso)` lines after a header, ended by a
//!   blank line. When the header carries no ip, the first frame is the ip (`perf script -g`
//!   prints it that way).
//! * Lines that are only `ADDR sym (dso)` (`-F ip,sym,dso` without header fields): one sample
//!   each.
//! * `brstack` tokens `0xFROM/0xTO/P|M|-/X/A/CYCLES` (and the longer forms newer perf prints,
//!   whose extra fields are ignored).
//! * `--show-mmap-events` lines (`PERF_RECORD_MMAP`/`PERF_RECORD_MMAP2`).
//! * Branch-stack lines (` 0xFROM/0xTO/...` only) after a call stack: they end the sample.
//! * llvm-profgen's perf scripts: LBR-only (`-F ip,brstack`), hybrid (bare call-stack
//!   addresses, leaf first, then a branch-stack line) and aggregated (an unindented decimal
//!   count before each sample: its weight, the sample is repeated that many times).
//! * Lines that are none of the above are skipped, and samples without an address dropped;
//!   both are counted in one warning.
//!
//! ## Module-relative addresses (in order of preference)
//!
//! 1. With `--show-mmap-events`, runtime addresses are mapped exactly as for perf.data
//!    (mapping, file offset, `PT_LOAD` segments).
//! 2. With `sym+0xOFF` and `dso` fields and the dso's symbols available (a
//!    [`SymbolSource`]), SVMA = symbol start + offset; this also teaches the dso's load bias
//!    (runtime ip − SVMA), used for other addresses of that dso (branch-stack entries).
//! 3. Addresses below 4 GiB are taken as already module-relative: a tab-indented call-chain
//!    frame is what perf 6.x prints there, the **file offset** in its dso (`map__map_ip`:
//!    `ip - start + pgoff`; 0x1080 for a non-PIE executable's 0x401080), turned into an
//!    SVMA through the dso's `PT_LOAD` segments (an offset no segment holds, as a raw ip of
//!    an older perf, is kept as it is); a sample's own ip (on the header line, or a
//!    frame line without a tab: `-F ip` without call chains) is a runtime address, an SVMA
//!    for a non-PIE executable. [`write_perf_script`]'s output starts with
//!    [`SVMA_MARKER`]: its frames are SVMAs and are taken as they are.
//! 4. Otherwise the address stays unmapped and a warning says how to do better (add
//!    `--show-mmap-events`, or `-F +symoff,+dso` and the binaries).

use crate::error::FormatError;
use crate::segments::{SegmentSource, SegmentTable};
use crate::ReadNotes;
use proftrust_model::symbols::SymbolSource;
use proftrust_model::{
    quote_name, Branch, EventDesc, EventKind, Location, Module, ModuleIdx, ModuleTable,
    RecordingHealth, Sample, SampleSet, SamplingConfig, ThreadName,
};
use std::collections::HashMap;
use std::io::{self, Write};

const WHAT: &str = "perf script text";
const SMALL: u64 = 1 << 32;
/// The first line of [`write_perf_script`]'s output: its addresses, call-chain frames
/// included, are SVMAs (perf prints call-chain frames as file offsets).
pub(crate) const SVMA_MARKER: &str =
    "# proftrust: addresses are SVMAs (module-relative), call-chain frames too";
const KERNEL_START: u64 = 0xffff_8000_0000_0000;

#[derive(Clone)]
struct Map {
    start: u64,
    end: u64,
    pgoff: u64,
    path: String,
}

/// A frame as printed: address, symbol, offset in symbol, dso.
#[derive(Debug, Clone, Default)]
struct Frame<'a> {
    addr: u64,
    sym: Option<&'a str>,
    off: Option<u64>,
    dso: Option<&'a str>,
    /// A call-chain line (tab-indented): perf 6.x prints its address relative to the dso's
    /// mapping (`map__map_ip`: the file offset), not the runtime address.
    chain: bool,
}

struct Resolver<'s> {
    symbols: &'s dyn SymbolSource,
    segments: &'s dyn SegmentSource,
    modules: ModuleTable,
    maps: HashMap<u32, Vec<Map>>,
    syms: HashMap<String, Option<HashMap<String, u64>>>,
    segs: HashMap<String, Option<SegmentTable>>,
    bias: HashMap<String, u64>,
    notes: ReadNotes,
    warned: std::collections::HashSet<String>,
    /// The text says its call-chain frames are SVMAs ([`SVMA_MARKER`]: written by
    /// [`write_perf_script`]), not perf's file offsets.
    svma_frames: bool,
}

impl Resolver<'_> {
    fn module(&mut self, path: &str, bias: u64) -> ModuleIdx {
        if let Some(i) = self
            .modules
            .iter()
            .find(|(_, m)| m.path == path)
            .map(|(i, _)| i)
        {
            return i;
        }
        let mut m = Module::new(path);
        m.load_bias = bias;
        self.modules.intern(m)
    }

    fn warn_once(&mut self, key: &str, msg: String) {
        if self.warned.insert(key.to_string()) {
            self.notes.warnings.push(msg);
        }
    }

    fn by_mmap(&mut self, pid: u32, ip: u64) -> Option<Location> {
        let v = self.maps.get(&pid)?;
        let m = v
            .iter()
            .rev()
            .find(|m| ip >= m.start && ip < m.end)?
            .clone();
        let off = proftrust_model::segments::Mapping {
            start: m.start,
            end: m.end,
            pgoff: m.pgoff,
        }
        .file_offset(ip)?;
        let segs = self
            .segs
            .entry(m.path.clone())
            .or_insert_with(|| {
                if m.path.starts_with('[') {
                    None
                } else {
                    self.segments.load_segments(&m.path, None)
                }
            })
            .clone();
        let svma = segs
            .as_ref()
            .and_then(|s| s.svma_of_offset(off))
            .map_or(off, |s| s.0);
        let idx = self.module(&m.path, ip.wrapping_sub(svma));
        Some(Location::new(idx, svma))
    }

    /// The SVMA of file offset `off` in `dso`, through its `PT_LOAD` segments (when the
    /// dso is found).
    fn svma_of_offset(&mut self, dso: &str, off: u64) -> Option<u64> {
        let segments = self.segments;
        self.segs
            .entry(dso.to_string())
            .or_insert_with(|| {
                (!dso.starts_with('['))
                    .then(|| segments.load_segments(dso, None))
                    .flatten()
            })
            .as_ref()?
            .svma_of_offset(off)
            .map(|s| s.0)
    }

    fn by_symbol(&mut self, f: &Frame<'_>) -> Option<Location> {
        let (sym, off, dso) = (f.sym?, f.off?, f.dso?);
        let table = self
            .syms
            .entry(dso.to_string())
            .or_insert_with(|| {
                self.symbols.symbols(dso, None).map(|o| {
                    o.functions
                        .into_iter()
                        .map(|s| (s.name, s.start))
                        .collect::<HashMap<_, _>>()
                })
            })
            .as_ref()?;
        let start = *table.get(sym)?;
        let svma = start.checked_add(off)?;
        if f.addr >= SMALL {
            self.bias
                .entry(dso.to_string())
                .or_insert(f.addr.wrapping_sub(svma));
        }
        let idx = self.module(dso, f.addr.wrapping_sub(svma));
        Some(Location::new(idx, svma))
    }

    fn resolve(&mut self, pid: u32, f: &Frame<'_>, fallback_dso: Option<&str>) -> Location {
        let dso = f.dso.or(fallback_dso);
        if f.addr >= KERNEL_START || dso.is_some_and(|d| d.starts_with("[kernel")) {
            let k = self.module("[kernel.kallsyms]", 0);
            return Location::new(k, f.addr);
        }
        if let Some(l) = self.by_mmap(pid, f.addr) {
            return l;
        }
        if let Some(l) = self.by_symbol(f) {
            return l;
        }
        if let Some(d) = dso {
            if d != "[unknown]" {
                if let Some(&b) = self.bias.get(d) {
                    if f.addr >= SMALL {
                        let idx = self.module(d, b);
                        return Location::new(idx, f.addr.wrapping_sub(b));
                    }
                }
                if f.addr < SMALL {
                    // A call-chain frame is a file offset in the dso (perf 6.x); a
                    // sample's own ip is a runtime address, small for a non-PIE executable
                    // (which runs at its SVMAs). An offset no segment holds (a raw ip from
                    // an older perf) is taken as an SVMA too.
                    let svma = if f.chain && !self.svma_frames {
                        self.svma_of_offset(d, f.addr).unwrap_or(f.addr)
                    } else {
                        f.addr
                    };
                    let idx = self.module(d, 0);
                    return Location::new(idx, svma);
                }
                self.warn_once(
                    d,
                    format!(
                        "{d}: runtime addresses cannot be made module-relative; run perf script with --show-mmap-events, or with -F +sym,+symoff,+dso and the binary available"
                    ),
                );
            }
        }
        Location::unmapped(f.addr)
    }
}

fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn parse_hex(s: &str) -> Option<u64> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    if !is_hex(s) || s.len() > 16 {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

fn is_time(t: &str) -> bool {
    let Some(t) = t.strip_suffix(':') else {
        return false;
    };
    let Some((a, b)) = t.split_once('.') else {
        return false;
    };
    !a.is_empty()
        && !b.is_empty()
        && a.bytes().all(|c| c.is_ascii_digit())
        && b.bytes().all(|c| c.is_ascii_digit())
}

fn parse_time(t: &str) -> Option<u64> {
    let t = t.strip_suffix(':')?;
    let (a, b) = t.split_once('.')?;
    let secs: u64 = a.parse().ok()?;
    let mut frac: u64 = b.parse().ok()?;
    // Scale the fraction to nanoseconds.
    let digits = b.len() as u32;
    if digits > 9 {
        return None;
    }
    frac *= 10u64.pow(9 - digits);
    secs.checked_mul(1_000_000_000)?.checked_add(frac)
}

fn is_pid(t: &str) -> bool {
    let mut parts = t.split('/');
    let ok =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()));
    let a = parts.next();
    if !ok(a) {
        return false;
    }
    match parts.next() {
        None => true,
        b => ok(b) && parts.next().is_none(),
    }
}

fn is_cpu(t: &str) -> bool {
    t.len() > 2
        && t.starts_with('[')
        && t.ends_with(']')
        && t[1..t.len() - 1].bytes().all(|c| c.is_ascii_digit())
}

/// Splits `sym+0xOFF` into name and offset.
fn split_symoff(s: &str) -> (&str, Option<u64>) {
    if let Some(i) = s.rfind("+0x") {
        if let Some(o) = parse_hex(&s[i + 3..]) {
            return (&s[..i], Some(o));
        }
    }
    (s, None)
}

/// Parses `ADDR [sym[+0xOFF]] [(dso)]` at the start of `s`; returns the frame and the rest.
fn parse_frame(s: &str) -> Option<(Frame<'_>, &str)> {
    let s = s.trim_start();
    let (addr_tok, mut rest) = match s.find(char::is_whitespace) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    };
    if addr_tok.contains('/') {
        return None;
    }
    let addr = parse_hex(addr_tok)?;
    let mut f = Frame {
        addr,
        ..Frame::default()
    };
    rest = rest.trim_start();
    // dso is the last parenthesised group on the frame: "(path)".
    if let Some(open) = find_dso_open(rest) {
        let close = open + rest[open..].find(')')?;
        let sym = rest[..open].trim();
        if !sym.is_empty() {
            let (n, o) = split_symoff(sym);
            f.sym = Some(n);
            f.off = o;
        }
        f.dso = Some(&rest[open + 1..close]);
        return Some((f, &rest[close + 1..]));
    }
    // No dso: the symbol is the next token, if it is not a brstack entry.
    let (tok, after) = match rest.find(char::is_whitespace) {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if !tok.is_empty() && !tok.contains('/') {
        let (n, o) = split_symoff(tok);
        f.sym = Some(n);
        f.off = o;
        return Some((f, after));
    }
    Some((f, rest))
}

/// Position of the `(` opening the dso group: a `(` preceded by whitespace (or at the
/// start) whose group closes before the next whitespace-separated brstack token.
fn find_dso_open(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'(' && (i == 0 || b[i - 1] == b' ' || b[i - 1] == b'\t') {
            return Some(i);
        }
        if b[i] == b'/'
            && i > 0
            && s[..i]
                .split_ascii_whitespace()
                .last()
                .is_some_and(|t| t.starts_with("0x"))
        {
            // Reached a brstack entry: no dso group on this frame.
            return None;
        }
        i += 1;
    }
    None
}

/// Parses a brstack entry `0xFROM/0xTO/FLAG/...[/CYCLES]`.
fn parse_branch(t: &str) -> Option<(u64, u64, bool, bool, u32)> {
    let mut it = t.split('/');
    let from = parse_hex(it.next()?.strip_prefix("0x")?)?;
    let to = parse_hex(it.next()?.strip_prefix("0x")?)?;
    let flag = it.next()?;
    let (mis, known) = match flag {
        "M" => (true, true),
        "P" => (false, true),
        "-" => (false, false),
        _ => return None,
    };
    let _in_tx = it.next()?;
    let _abort = it.next()?;
    let cycles = it.next().and_then(|c| c.parse().ok()).unwrap_or(0);
    Some((from, to, mis, known, cycles))
}

/// Parses `PERF_RECORD_MMAP[2] PID/TID: [0xSTART(0xLEN) @ PGOFF ...]: PROT PATH`.
fn parse_mmap(line: &str) -> Option<(u32, Map, bool)> {
    let i = line.find("PERF_RECORD_MMAP")?;
    let rest = &line[i..];
    let rest = rest.split_once(' ')?.1.trim_start();
    let (pidtid, rest) = rest.split_once(':')?;
    let pid_s = pidtid.split('/').next()?.trim();
    let pid: i64 = pid_s.parse().ok()?;
    let open = rest.find('[')?;
    let close = open + rest[open..].find(']')?;
    let inner = &rest[open + 1..close];
    let (range, after_at) = inner.split_once('@')?;
    let (start_s, len_s) = range.trim().split_once('(')?;
    let start = parse_hex(start_s.trim())?;
    let len = parse_hex(len_s.trim_end_matches(')').trim())?;
    let pg_tok = after_at.split_ascii_whitespace().next()?;
    let pgoff = if pg_tok.starts_with("0x") {
        parse_hex(pg_tok)?
    } else {
        pg_tok.parse().ok()?
    };
    let tail = rest[close + 1..].trim_start_matches(':').trim();
    let (prot, path) = tail.split_once(' ')?;
    let exec = prot.contains('x');
    Some((
        pid as u32,
        Map {
            start,
            end: start.saturating_add(len),
            pgoff,
            path: path.trim().to_string(),
        },
        exec,
    ))
}

struct Pending {
    sample: Sample,
    ip_known: bool,
    dso: Option<String>,
}

/// Reads `perf script` text. `symbols` resolves `sym+off` to SVMAs; `segments` is used with
/// `--show-mmap-events` output.
pub fn read_perf_script(
    text: &str,
    symbols: &dyn SymbolSource,
    segments: &dyn SegmentSource,
) -> Result<(SampleSet, ReadNotes), FormatError> {
    if text.trim().is_empty() {
        return Err(FormatError::Empty { what: WHAT });
    }
    let r = Resolver {
        symbols,
        segments,
        modules: ModuleTable::default(),
        maps: HashMap::new(),
        syms: HashMap::new(),
        segs: HashMap::new(),
        bias: HashMap::new(),
        notes: ReadNotes::default(),
        warned: Default::default(),
        svma_frames: false,
    };
    let mut p = ScriptParse {
        r,
        events: Vec::new(),
        out: Sink::default(),
        cur: None,
        threads: Vec::new(),
        names: HashMap::new(),
        recognised: 0,
        bare: Vec::new(),
        dropped: Dropped::default(),
    };
    for (i, raw) in text.split('\n').enumerate() {
        p.line(i + 1, raw.trim_end_matches('\r'))?;
    }
    p.end_sample(text.lines().count())?;
    p.finish()
}

/// The state of [`read_perf_script`] between lines: the sample being read, the bare
/// addresses not yet placed, and what the lines so far add up to.
struct ScriptParse<'s> {
    r: Resolver<'s>,
    events: Vec<EventDesc>,
    out: Sink,
    cur: Option<Pending>,
    threads: Vec<ThreadName>,
    /// Each thread's last name (a `ThreadName` is kept when it changes).
    names: HashMap<u32, String>,
    /// Lines recognised as this format (headers, frames, records, counts, branch stacks).
    recognised: usize,
    /// Bare addresses (`\t4005dc`) not yet known to be a call stack (followed by a
    /// branch-stack line: llvm-profgen's hybrid sample) or samples of their own (`-F ip`).
    bare: Vec<u64>,
    dropped: Dropped,
}

impl ScriptParse<'_> {
    /// Ends the pending sample and places the bare addresses (before a blank line, a
    /// record, a header and at the end).
    fn end_sample(&mut self, lineno: usize) -> Result<(), FormatError> {
        self.out.finish(&mut self.cur, &mut self.dropped, lineno)?;
        self.out
            .flush_bare(&mut self.r, &mut self.bare, &mut self.events)
    }

    /// One line (without its line end), by kind.
    fn line(&mut self, lineno: usize, line: &str) -> Result<(), FormatError> {
        if line.trim().is_empty() {
            return self.end_sample(lineno);
        }
        if line.trim_start().starts_with('#') {
            if line.trim() == SVMA_MARKER {
                self.r.svma_frames = true;
            }
            return Ok(());
        }
        if line.contains("PERF_RECORD_") {
            self.end_sample(lineno)?;
            if let Some((pid, m, exec)) = parse_mmap(line) {
                if exec {
                    let v = self.r.maps.entry(pid).or_default();
                    v.retain(|x| x.end <= m.start || x.start >= m.end);
                    v.push(m);
                }
            }
            self.recognised += 1;
            return Ok(());
        }
        // llvm-profgen's aggregated script: a count before each sample.
        if is_count_line(line) && !line.starts_with([' ', '\t']) && self.cur.is_none() {
            self.out
                .flush_bare(&mut self.r, &mut self.bare, &mut self.events)?;
            self.out.weight = line.trim_end().parse().map_err(|_| FormatError::Syntax {
                what: WHAT,
                line: lineno,
                detail: format!("sample count {:?} is over 2^64 - 1", line.trim_end()),
            })?;
            self.recognised += 1;
            return Ok(());
        }
        if is_branch_line(line) {
            return self.branch_line(lineno, line);
        }
        let toks: Vec<&str> = line.split_ascii_whitespace().collect();
        // A header has a time token, or an `event:` token after a pid token.
        let time_i = toks.iter().position(|t| is_time(t));
        let ev_i = toks
            .iter()
            .enumerate()
            .skip(time_i.map_or(0, |t| t + 1))
            .find(|(k, t)| {
                t.len() > 1
                    && t.ends_with(':')
                    && !is_time(t)
                    && (time_i.is_some() || toks[..*k].iter().any(|x| is_pid(x)))
            })
            .map(|(k, _)| k);
        let is_frame_line = line.starts_with('\t')
            || line.starts_with("  ")
                && parse_frame(line).is_some()
                && time_i.is_none()
                && ev_i.is_none();
        if is_frame_line || (time_i.is_none() && ev_i.is_none()) {
            return self.frame_line(lineno, line);
        }
        self.header(lineno, line, &toks, time_i, ev_i)
    }

    /// A branch-stack line: it ends the sample before it (call stack, or header).
    fn branch_line(&mut self, lineno: usize, line: &str) -> Result<(), FormatError> {
        self.recognised += 1;
        if let Some(p) = self.cur.as_mut() {
            let dso = p.dso.clone();
            branches_into(&mut self.r, &mut p.sample, line, dso.as_deref());
            return self.out.finish(&mut self.cur, &mut self.dropped, lineno);
        }
        ensure_event(&mut self.events);
        let mut s = blank_sample();
        branches_into(&mut self.r, &mut s, line, None);
        if let Some((&leaf, callers)) = self.bare.split_first() {
            s.ip = self.r.resolve(u32::MAX, &frame_at(leaf), None);
            s.callchain = callers
                .iter()
                .map(|&a| self.r.resolve(u32::MAX, &frame_at(a), None))
                .collect();
            self.bare.clear();
        } else if let Some(b) = s.branches.first() {
            // No ip printed: the newest branch's target is where the sample was taken
            // (llvm-profgen takes it as the leaf too).
            s.ip = b.to;
        }
        self.out.push(s)
    }

    /// A frame line: the pending sample's ip or next caller, else a bare address, a call
    /// stack without a header, or a sample of its own.
    fn frame_line(&mut self, lineno: usize, line: &str) -> Result<(), FormatError> {
        let Some((f, rest)) = parse_frame(line) else {
            if self.cur.is_none() && self.recognised == 0 {
                return Err(FormatError::NotThisFormat {
                    what: WHAT,
                    detail: format!(
                        "line {lineno} is neither a sample header nor a frame: {:?}",
                        line.chars().take(60).collect::<String>()
                    ),
                });
            }
            // Tolerant: a line neither header nor frame (a non-hex address, a field this
            // reader does not know) is skipped, counted and reported.
            self.dropped.line(lineno, line);
            return Ok(());
        };
        self.recognised += 1;
        let f = Frame {
            chain: line.starts_with('\t'),
            ..f
        };
        match self.cur.as_mut() {
            Some(p) => {
                let pid = p.sample.pid;
                let loc = self.r.resolve(pid, &f, None);
                if p.ip_known {
                    p.sample.callchain.push(loc);
                } else {
                    p.sample.ip = loc;
                    p.ip_known = true;
                    p.dso = f.dso.map(str::to_string);
                }
            }
            None if f.sym.is_none() && f.dso.is_none() && rest.trim().is_empty() => {
                // A bare address: a call-stack line or a sample of its own, decided by what
                // follows.
                self.bare.push(f.addr);
            }
            None if f.chain => {
                // A call stack without a header (`-F ip,sym,dso` of a `-g` recording): its
                // first frame is the sample's ip, the others its callers, up to the blank
                // line.
                self.out
                    .flush_bare(&mut self.r, &mut self.bare, &mut self.events)?;
                ensure_event(&mut self.events);
                let mut s = blank_sample();
                s.ip = self.r.resolve(u32::MAX, &f, None);
                self.cur = Some(Pending {
                    sample: s,
                    ip_known: true,
                    dso: f.dso.map(str::to_string),
                });
            }
            None => {
                // A sample of its own (`-F ip,sym,dso`).
                self.out
                    .flush_bare(&mut self.r, &mut self.bare, &mut self.events)?;
                ensure_event(&mut self.events);
                let loc = self.r.resolve(u32::MAX, &f, None);
                let mut s = blank_sample();
                s.ip = loc;
                let dso = f.dso.map(str::to_string);
                branches_into(&mut self.r, &mut s, rest, dso.as_deref());
                self.out.push(s)?;
            }
        }
        Ok(())
    }

    /// A sample header (`toks`: its tokens; `time_i`, `ev_i`: where the time and the
    /// `event:` are): starts a pending sample, with the inline frame and branch stack that
    /// follow the event.
    fn header(
        &mut self,
        lineno: usize,
        line: &str,
        toks: &[&str],
        time_i: Option<usize>,
        ev_i: Option<usize>,
    ) -> Result<(), FormatError> {
        self.end_sample(lineno)?;
        self.recognised += 1;
        let stop = time_i.or(ev_i).unwrap_or(0);
        let cpu_i = toks[..stop].iter().position(|t| is_cpu(t));
        let pid_limit = cpu_i.unwrap_or(stop);
        let pid_i = toks[..pid_limit].iter().rposition(|t| is_pid(t));
        let mut s = blank_sample();
        if let Some(pi) = pid_i {
            let t = toks[pi];
            match t.split_once('/') {
                Some((a, b)) => {
                    s.pid = a.parse().unwrap_or(u32::MAX);
                    s.tid = b.parse().unwrap_or(u32::MAX);
                }
                None => {
                    let v = t.parse().unwrap_or(u32::MAX);
                    s.pid = v;
                    s.tid = v;
                }
            }
        }
        if let Some(ci) = cpu_i {
            s.cpu = toks[ci][1..toks[ci].len() - 1].parse().unwrap_or(u32::MAX);
        }
        if let Some(ti) = time_i {
            s.time = parse_time(toks[ti]).ok_or_else(|| FormatError::Syntax {
                what: WHAT,
                line: lineno,
                detail: format!("bad time {:?}", toks[ti]),
            })?;
        }
        // The comm column (everything before the pid token; a name may hold spaces): the
        // thread's name from this sample on, kept when it changes.
        if let Some(pi) = pid_i.filter(|&pi| pi > 0) {
            self.thread_name(&s, toks[..pi].join(" "));
        }
        self.header_event(lineno, toks, ev_i, pid_i, &mut s)?;
        // What follows the event (or the time): an inline frame and brstack entries.
        let after_idx = ev_i.or(time_i).unwrap_or(0);
        let mut rest = line;
        for t in &toks[..=after_idx] {
            let at = rest.find(t).unwrap_or(0) + t.len();
            rest = &rest[at..];
        }
        let mut ip_known = false;
        let mut dso = None;
        let mut tail = rest;
        if let Some((f, after)) = parse_frame(rest) {
            s.ip = self.r.resolve(s.pid, &f, None);
            ip_known = true;
            dso = f.dso.map(str::to_string);
            tail = after;
        }
        branches_into(&mut self.r, &mut s, tail, dso.as_deref());
        self.cur = Some(Pending {
            sample: s,
            ip_known,
            dso,
        });
        Ok(())
    }

    /// `comm` as the name of `s`'s thread from `s` on, when it changes.
    fn thread_name(&mut self, s: &Sample, comm: String) {
        if self.names.get(&s.tid) != Some(&comm) {
            self.names.insert(s.tid, comm.clone());
            self.threads.push(ThreadName {
                pid: s.pid,
                tid: s.tid,
                time: s.time,
                comm,
                exec: false,
            });
        }
    }

    /// A header's event (`ev_i`; "unknown" without one) and the period before it, into `s`.
    fn header_event(
        &mut self,
        lineno: usize,
        toks: &[&str],
        ev_i: Option<usize>,
        pid_i: Option<usize>,
        s: &mut Sample,
    ) -> Result<(), FormatError> {
        let ev_name = match ev_i {
            Some(e) => {
                if e > 0 {
                    if let Ok(p) = toks[e - 1].parse::<u64>() {
                        if Some(e - 1) != pid_i {
                            s.period = p;
                        }
                    }
                }
                toks[e].trim_end_matches(':').to_string()
            }
            None => "unknown".to_string(),
        };
        let ev = match self.events.iter().position(|x| x.name == ev_name) {
            Some(i) => i,
            None => {
                self.events.push(EventDesc {
                    kind: EventKind::of(&ev_name),
                    name: ev_name,
                    config: SamplingConfig::default(),
                });
                self.events.len() - 1
            }
        };
        s.event = u16::try_from(ev).map_err(|_| FormatError::Syntax {
            what: WHAT,
            line: lineno,
            detail: "more than 65535 distinct events".into(),
        })?;
        Ok(())
    }

    /// The sample set, once every line is read.
    fn finish(mut self) -> Result<(SampleSet, ReadNotes), FormatError> {
        let samples = self.out.samples;
        if samples.is_empty() && self.recognised == 0 {
            return Err(FormatError::NotThisFormat {
                what: WHAT,
                detail: "no sample lines found".into(),
            });
        }
        if let Some(w) = self.dropped.warning() {
            self.r.notes.warnings.push(w);
        }
        Ok((
            SampleSet {
                modules: self.r.modules,
                events: self.events,
                samples,
                lost: 0,
                command: Vec::new(),
                outcome: None,
                // perf script text has no throttle records (perf 6.1 cannot print them) and no
                // enabled/running times: the health is unknown.
                health: RecordingHealth::default(),
                threads: self.threads,
                // perf script prints no fork records.
                forks: Vec::new(),
                kernel_symbols: Vec::new(),
            },
            self.r.notes,
        ))
    }
}

/// Whether `text` looks like `perf script` output: the first line that decides (up to 200
/// lines in, past comments, blank lines and the lines that decide nothing: bare addresses
/// and llvm-profgen's sample counts) is a sample header (a time or an `event:` after a pid),
/// an `ADDR sym (dso)` frame, a branch-stack line (`0xFROM/0xTO/...`, optionally after a
/// leading ip, as `perf script -F ip,brstack` and llvm-profgen write it) or a
/// `PERF_RECORD_` line.
pub(crate) fn looks_like_perf_script(text: &str) -> bool {
    for line in text.lines().filter(|l| !l.trim().is_empty()).take(200) {
        if line.trim_start().starts_with('#') {
            continue;
        }
        if line.contains("PERF_RECORD_") {
            return true;
        }
        let toks: Vec<&str> = line.split_ascii_whitespace().collect();
        if let Some(t) = toks.iter().position(|t| is_time(t)) {
            if toks[t + 1..]
                .iter()
                .any(|x| x.len() > 1 && x.ends_with(':'))
            {
                return true;
            }
        }
        if header_event(&toks).is_some() {
            return true;
        }
        if is_branch_line(line) {
            return true;
        }
        if is_count_line(line) || toks.len() == 1 && parse_hex(toks[0]).is_some() {
            continue;
        }
        if let Some((f, rest)) = parse_frame(line) {
            if f.dso.is_some()
                || rest
                    .split_ascii_whitespace()
                    .any(|t| parse_branch(t).is_some())
            {
                return true;
            }
        }
        return false;
    }
    false
}

/// The index of an `event:` token that follows a `pid` or `pid/tid` token (a header
/// printed without a time, `-F comm,pid,event,ip,sym`).
fn header_event(toks: &[&str]) -> Option<usize> {
    let pid = toks.iter().position(|t| is_pid(t))?;
    toks.iter()
        .enumerate()
        .skip(pid + 1)
        .find(|(_, t)| t.len() > 1 && t.ends_with(':') && !is_time(t))
        .map(|(k, _)| k)
}

/// A line of branch-stack entries only (`0xFROM/0xTO/P/-/-/0 ...`), what llvm-profgen's
/// hybrid scripts put after a call stack and `perf script -F brstack` prints.
fn is_branch_line(line: &str) -> bool {
    let mut toks = line.split_ascii_whitespace();
    toks.next().is_some_and(|t| parse_branch(t).is_some())
}

/// An llvm-profgen aggregated-script count: an unindented line of decimal digits before a
/// sample, the number of identical samples it stands for.
fn is_count_line(line: &str) -> bool {
    let t = line.trim_end();
    !t.is_empty() && t.len() <= 20 && t.bytes().all(|c| c.is_ascii_digit())
}

/// Most samples an aggregated script may expand to (its counts are replicated into
/// samples): 2^27, about 13 GB of samples with short call stacks.
const MAX_SAMPLES: u64 = 1 << 27;

/// The samples read so far, and the weight of the next one (llvm-profgen's count line).
struct Sink {
    samples: Vec<Sample>,
    weight: u64,
}

impl Default for Sink {
    fn default() -> Self {
        Sink {
            samples: Vec::new(),
            weight: 1,
        }
    }
}

impl Sink {
    /// Adds `s` as many times as the pending count says (once without one).
    fn push(&mut self, s: Sample) -> Result<(), FormatError> {
        let n = std::mem::replace(&mut self.weight, 1);
        let total = (self.samples.len() as u64).saturating_add(n);
        if total > MAX_SAMPLES {
            return Err(FormatError::TooLarge {
                what: WHAT,
                detail: format!(
                    "its sample counts add up to more than {MAX_SAMPLES} samples (a count of {n} at sample {}); an aggregated script this large is not read",
                    self.samples.len() + 1
                ),
            });
        }
        for _ in 1..n {
            self.samples.push(s.clone());
        }
        if n > 0 {
            self.samples.push(s);
        }
        Ok(())
    }

    /// Ends the sample being read: kept when it has an address, else counted as dropped.
    fn finish(
        &mut self,
        cur: &mut Option<Pending>,
        dropped: &mut Dropped,
        lineno: usize,
    ) -> Result<(), FormatError> {
        if let Some(p) = cur.take() {
            if p.ip_known {
                self.push(p.sample)?;
            } else if p.sample.branches.is_empty() {
                dropped.no_address(lineno);
            } else {
                let mut s = p.sample;
                s.ip = s.branches[0].to;
                self.push(s)?;
            }
        }
        Ok(())
    }

    /// Bare addresses no branch-stack line followed: one sample each (`-F ip`).
    fn flush_bare(
        &mut self,
        r: &mut Resolver<'_>,
        bare: &mut Vec<u64>,
        events: &mut Vec<EventDesc>,
    ) -> Result<(), FormatError> {
        if bare.is_empty() {
            return Ok(());
        }
        ensure_event(events);
        for a in std::mem::take(bare) {
            let mut s = blank_sample();
            s.ip = r.resolve(u32::MAX, &frame_at(a), None);
            self.push(s)?;
        }
        Ok(())
    }
}

/// Lines skipped and samples without an address, reported in one warning.
#[derive(Default)]
struct Dropped {
    lines: usize,
    first: Option<(usize, String)>,
    no_address: usize,
    first_no_address: usize,
}

impl Dropped {
    fn line(&mut self, lineno: usize, line: &str) {
        self.lines += 1;
        self.first
            .get_or_insert_with(|| (lineno, line.chars().take(60).collect()));
    }
    fn no_address(&mut self, lineno: usize) {
        self.no_address += 1;
        if self.first_no_address == 0 {
            self.first_no_address = lineno;
        }
    }
    fn warning(&self) -> Option<String> {
        let mut parts = Vec::new();
        if let Some((n, l)) = &self.first {
            parts.push(format!(
                "{} line(s) neither a sample header, a frame nor a branch stack were skipped (first: line {n}: {l:?})",
                self.lines
            ));
        }
        if self.no_address > 0 {
            parts.push(format!(
                "{} sample(s) without a readable address were dropped (first ends at line {}; an ip field that is not hex?)",
                self.no_address, self.first_no_address
            ));
        }
        (!parts.is_empty()).then(|| format!("perf script text: {}", parts.join("; ")))
    }
}

/// The one event of a script whose samples name none.
fn ensure_event(events: &mut Vec<EventDesc>) {
    if events.is_empty() {
        events.push(EventDesc {
            name: "unknown".into(),
            kind: EventKind::Other,
            config: SamplingConfig::default(),
        });
    }
}

fn frame_at(addr: u64) -> Frame<'static> {
    Frame {
        addr,
        ..Frame::default()
    }
}

fn blank_sample() -> Sample {
    Sample {
        event: 0,
        pid: u32::MAX,
        tid: u32::MAX,
        time: 0,
        cpu: u32::MAX,
        period: 1,
        ip: Location::unmapped(0),
        callchain: Vec::new(),
        branches: Vec::new(),
    }
}

fn branches_into(r: &mut Resolver<'_>, s: &mut Sample, text: &str, dso: Option<&str>) {
    for t in text.split_ascii_whitespace() {
        if let Some((from, to, mis, known, cycles)) = parse_branch(t) {
            let ff = Frame {
                addr: from,
                ..Frame::default()
            };
            let tf = Frame {
                addr: to,
                ..Frame::default()
            };
            s.branches.push(Branch {
                from: r.resolve(s.pid, &ff, dso),
                to: r.resolve(s.pid, &tf, dso),
                mispredicted: mis,
                predicted_known: known,
                cycles,
            });
        }
    }
}

/// Writes perf-script-like text: one header line per sample
/// (`comm pid/tid [cpu] secs.nanos: period event: ADDR sym (dso)`), brstack entries on the
/// same line, call-chain frames on indented lines followed by a blank line. Addresses are
/// **module-relative** (SVMAs), unlike perf's runtime addresses; `sym` names a location.
pub fn write_perf_script<W: Write>(
    w: W,
    s: &SampleSet,
    sym: impl Fn(Location) -> String,
) -> io::Result<()> {
    let mut w = io::BufWriter::new(w);
    writeln!(w, "{SVMA_MARKER}")?;
    // A sample's comm is its thread's name at the sample's time (perf script's rule), else
    // the profiled command's file name cut to the kernel's 15 bytes, else `-`.
    let command: String = s
        .command
        .first()
        .map(|c| c.rsplit('/').next().unwrap_or(c).chars().take(15).collect())
        .unwrap_or_else(|| "-".to_string());
    let names = s.comm_index();
    // Names come from the recorded program (its thread names, paths, event names): their
    // control characters are escaped, so a name cannot forge a line or drive a terminal.
    let dso = |l: Location| -> String {
        match l.module.and_then(|m| s.modules.get(m)) {
            Some(m) => quote_name(&m.path).into_owned(),
            None => "[unknown]".to_string(),
        }
    };
    for x in &s.samples {
        let ev = quote_name(
            s.events
                .get(usize::from(x.event))
                .map_or("unknown", |e| e.name.as_str()),
        );
        let comm = quote_name(names.at(x.pid, x.tid, x.time).unwrap_or(&command));
        write!(w, "{comm:>16} {}/{}", x.pid as i32, x.tid as i32)?;
        if x.cpu != u32::MAX {
            write!(w, " [{:03}]", x.cpu)?;
        }
        write!(
            w,
            " {}.{:09}: {:>10} {ev}: {:>16x} {} ({})",
            x.time / 1_000_000_000,
            x.time % 1_000_000_000,
            x.period,
            x.ip.svma.0,
            sym(x.ip),
            dso(x.ip)
        )?;
        for b in &x.branches {
            let f = match (b.predicted_known, b.mispredicted) {
                (false, _) => "-",
                (true, true) => "M",
                (true, false) => "P",
            };
            write!(
                w,
                " {:#x}/{:#x}/{f}/-/-/{}",
                b.from.svma.0, b.to.svma.0, b.cycles
            )?;
        }
        writeln!(w)?;
        if !x.callchain.is_empty() {
            for &c in &x.callchain {
                writeln!(w, "\t{:>16x} {} ({})", c.svma.0, sym(c), dso(c))?;
            }
            writeln!(w)?;
        }
    }
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segments::NoSegments;
    use proftrust_model::symbols::{FunctionSymbol, NoSymbols, ObjectSymbols};
    use proftrust_model::BuildId;

    struct Syms;
    impl SymbolSource for Syms {
        fn symbols(&self, path: &str, _: Option<&BuildId>) -> Option<ObjectSymbols> {
            (path == "/tmp/fmt/hot").then(|| ObjectSymbols {
                build_id: None,
                functions: vec![FunctionSymbol {
                    name: "fa".into(),
                    start: 0x11c0,
                    size: 0x40,
                }],
            })
        }
    }

    const DEFAULT: &str = "\
             hot 23174  3233.481746:     100000 cpu-clock:  ffffffff81d7fadd crng_make_state+0x6d ([kernel.kallsyms])
             hot 23174  3233.503831:     100000 cpu-clock:      5560a69e91ed fa+0x2d (/tmp/fmt/hot)
             hot 23174  3233.503930:     100000 cpu-clock:      5560a69e91f0 fa+0x30 (/tmp/fmt/hot)
";

    /// A hybrid machine's events (`perf record -e cpu_core/cycles/u,r1c0`) get their kinds
    /// by the model's one rule (`EventKind::of`), not `Other`.
    #[test]
    fn hybrid_and_raw_event_kinds() {
        let text = DEFAULT
            .replacen("cpu-clock:", "cpu_core/cycles/u:", 1)
            .replacen("cpu-clock:", "r1c0:", 1);
        let (s, _) = read_perf_script(&text, &Syms, &NoSegments).unwrap();
        let kinds: Vec<(&str, EventKind)> =
            s.events.iter().map(|e| (e.name.as_str(), e.kind)).collect();
        assert_eq!(
            kinds,
            [
                ("cpu_core/cycles/u", EventKind::Cycles),
                ("r1c0", EventKind::Raw(0x1c0)),
                ("cpu-clock", EventKind::CpuClock)
            ]
        );
    }

    #[test]
    fn default_output_with_symbols() {
        let (s, notes) = read_perf_script(DEFAULT, &Syms, &NoSegments).unwrap();
        assert!(notes.warnings.is_empty(), "{notes:?}");
        assert_eq!(s.samples.len(), 3);
        assert_eq!(s.events[0].name, "cpu-clock");
        assert_eq!(s.events[0].kind, EventKind::CpuClock);
        let x = &s.samples[1];
        assert_eq!((x.pid, x.tid, x.period), (23174, 23174, 100000));
        assert_eq!(x.time, 3_233_481_746_000 + 22_085_000);
        let m = s.modules.get(x.ip.module.unwrap()).unwrap();
        assert_eq!(m.path, "/tmp/fmt/hot");
        assert_eq!(x.ip.svma.0, 0x11c0 + 0x2d);
        assert_eq!(m.load_bias, 0x5560a69e91ed - 0x11ed);
        assert_eq!(s.samples[2].ip.svma.0, 0x11f0);
        assert_eq!(
            s.modules.get(s.samples[0].ip.module.unwrap()).unwrap().path,
            "[kernel.kallsyms]"
        );
    }

    #[test]
    fn without_symbols_runtime_addresses_warn() {
        let (s, notes) = read_perf_script(DEFAULT, &NoSymbols, &NoSegments).unwrap();
        assert_eq!(s.samples[1].ip.module, None);
        assert_eq!(notes.warnings.len(), 1);
    }

    #[test]
    fn callchains_mmap_events_and_brstack() {
        let text = "\
hot 26197  3274.697121: PERF_RECORD_MMAP2 26197/26197: [0x555cafb9b000(0x1000) @ 0x1000 fe:00 10011559 955282047]: r-xp /tmp/fmt/hot
hot 26197/26198 [001]  3274.698087:    1000000 cpu-clock: 
\t            11ed fa+0x2d (/tmp/fmt/hot)
\t    555cafb9b080 main+0x20 (/tmp/fmt/hot)

hot 26197/26198 [001] 3274.699000: 1000 cycles:  555cafb9b1ed fa+0x2d (/tmp/fmt/hot) 0x555cafb9b1f0/0x555cafb9b1d0/M/-/-/17 0x555cafb9b1e0/0x555cafb9b1c0/P/-/-/3
";
        let (s, _) = read_perf_script(text, &NoSymbols, &NoSegments).unwrap();
        assert_eq!(s.samples.len(), 2);
        let a = &s.samples[0];
        assert_eq!((a.pid, a.tid, a.cpu), (26197, 26198, 1));
        assert_eq!(a.ip.svma.0, 0x11ed);
        assert_eq!(a.callchain.len(), 1);
        // Mapped through the mmap: 0x555cafb9b080 - 0x555cafb9b000 + 0x1000.
        assert_eq!(a.callchain[0].svma.0, 0x1080);
        let b = &s.samples[1];
        assert_eq!(s.events[usize::from(b.event)].name, "cycles");
        assert_eq!(b.period, 1000);
        assert_eq!(b.ip.svma.0, 0x11ed);
        assert_eq!(b.branches.len(), 2);
        assert_eq!(b.branches[0].from.svma.0, 0x11f0);
        assert_eq!(b.branches[0].to.svma.0, 0x11d0);
        assert!(b.branches[0].mispredicted && b.branches[0].predicted_known);
        assert_eq!(b.branches[0].cycles, 17);
        assert!(!b.branches[1].mispredicted && b.branches[1].predicted_known);
    }

    #[test]
    fn ip_sym_dso_only_and_garbage() {
        let text = "     5560a69e91ed fa (/tmp/fmt/hot)\n     5560a69e91ed fa (/tmp/fmt/hot)\n";
        let (s, _) = read_perf_script(text, &NoSymbols, &NoSegments).unwrap();
        assert_eq!(s.samples.len(), 2);
        assert!(read_perf_script("hello world\n", &NoSymbols, &NoSegments).is_err());
        assert!(read_perf_script("", &NoSymbols, &NoSegments).is_err());
    }

    #[test]
    fn writer_output_reads_back() {
        let (s, _) = read_perf_script(DEFAULT, &Syms, &NoSegments).unwrap();
        let mut out = Vec::new();
        write_perf_script(&mut out, &s, |l| format!("f{:x}", l.svma.0)).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(" cpu-clock: "), "{text}");
        let (back, _) = read_perf_script(&text, &NoSymbols, &NoSegments).unwrap();
        assert_eq!(back.samples.len(), 3);
        assert_eq!(back.samples[1].ip.svma.0, 0x11ed);
        assert_eq!(back.samples[1].time, s.samples[1].time);
    }

    /// The segments of `tiny`, a non-PIE executable (`readelf -l`): text at file offset
    /// 0x1000, SVMA 0x401000.
    struct NonPie;
    impl SegmentSource for NonPie {
        fn load_segments(&self, path: &str, _: Option<&BuildId>) -> Option<SegmentTable> {
            (path == "/tmp/proftrust-golden/tiny").then(|| {
                SegmentTable::new(vec![
                    crate::segments::LoadSegment::new(0, 0x400000, 0x158),
                    crate::segments::LoadSegment::new(0x1000, 0x401000, 0x1d1),
                ])
            })
        }
    }

    /// What perf 6.1 prints for one sample of the non-PIE `tiny` (the golden fixture) with
    /// and without its call chain: `perf script -F ip,sym,dso` gives the chain frames as
    /// file offsets (`1080`), `-G` the runtime ip (`401080`).
    #[test]
    fn call_chain_frames_are_file_offsets_and_ips_runtime_addresses() {
        let chain = "tiny 22000  6758.543590:      50021 cpu-clock:u: \n\t            1080 [unknown] (/tmp/proftrust-golden/tiny)\n\t            104b [unknown] (/tmp/proftrust-golden/tiny)\n\n";
        let (s, _) = read_perf_script(chain, &NoSymbols, &NonPie).unwrap();
        assert_eq!(s.samples[0].ip.svma.0, 0x401080);
        assert_eq!(s.samples[0].callchain[0].svma.0, 0x40104b);
        let flat = "           401080 leaf (/tmp/proftrust-golden/tiny)\n";
        let (s, _) = read_perf_script(flat, &NoSymbols, &NonPie).unwrap();
        assert_eq!(s.samples[0].ip.svma.0, 0x401080);
        // `-F ip,sym,dso` of the same recording: call stacks without headers.
        let bare = "\t            1080 leaf (/tmp/proftrust-golden/tiny)\n\t            104b main (/tmp/proftrust-golden/tiny)\n\n\t            109b leaf (/tmp/proftrust-golden/tiny)\n\t            104b main (/tmp/proftrust-golden/tiny)\n\n";
        let (s, _) = read_perf_script(bare, &NoSymbols, &NonPie).unwrap();
        assert_eq!(s.samples.len(), 2);
        assert_eq!(s.samples[1].ip.svma.0, 0x40109b);
        assert_eq!(s.samples[1].callchain.len(), 1);
        assert_eq!(s.samples[1].callchain[0].svma.0, 0x40104b);
        // An offset no segment holds stays as printed (a raw ip of an older perf).
        let old = "tiny 1 1.5: 1 cpu-clock: \n\t 401080 x (/tmp/proftrust-golden/tiny)\n\n";
        let (s, _) = read_perf_script(old, &NoSymbols, &NonPie).unwrap();
        assert_eq!(s.samples[0].ip.svma.0, 0x401080);
        // The writer's frames are SVMAs: they read back as they were.
        let mut out = Vec::new();
        let (s, _) = read_perf_script(chain, &NoSymbols, &NonPie).unwrap();
        write_perf_script(&mut out, &s, |_| "f".to_string()).unwrap();
        let (back, _) =
            read_perf_script(&String::from_utf8(out).unwrap(), &NoSymbols, &NonPie).unwrap();
        assert_eq!(back.samples[0].ip.svma.0, 0x401080);
        assert_eq!(back.samples[0].callchain[0].svma.0, 0x40104b);
    }

    #[test]
    fn mutations_do_not_panic() {
        let text = format!("{DEFAULT}hot 1/2 [001] 1.5: 10 cycles: 11ed fa+0x2d (/x) 0x1/0x2/M/-/-/3\n\t 11ed a (b)\n\n");
        let b = text.as_bytes();
        for i in 0..b.len() {
            for c in [
                b' ', b'\t', b'\n', b':', b'/', b'(', b')', b'0', b'x', b'[', b'+',
            ] {
                let mut m = b.to_vec();
                m[i] = c;
                if let Ok(s) = std::str::from_utf8(&m) {
                    let _ = read_perf_script(s, &Syms, &NoSegments);
                }
            }
            if let Ok(s) = std::str::from_utf8(&b[..i]) {
                let _ = read_perf_script(s, &Syms, &NoSegments);
            }
        }
    }

    /// llvm-profgen's hybrid sample (its PerfReader.h comment): a call stack of bare
    /// addresses, leaf first, ended by a branch-stack line; and a second sample whose stack
    /// leaf has no branch line yet is followed by a header, so it is a sample of its own.
    #[test]
    fn llvm_profgen_hybrid_samples() {
        let text = "\
\t          4005dc
\t          400634
\t          400684
 0x4005c8/0x4005dc/P/-/-/0   0x40062f/0x4005b0/M/-/-/7
\t          4005e0
\t          400634
 0x4005d0/0x4005e0/P/-/-/3
";
        let (s, notes) = read_perf_script(text, &NoSymbols, &NoSegments).unwrap();
        assert!(notes.warnings.is_empty(), "{notes:?}");
        assert_eq!(s.samples.len(), 2);
        let a = &s.samples[0];
        assert_eq!(a.ip.svma.0, 0x4005dc);
        let chain: Vec<u64> = a.callchain.iter().map(|l| l.svma.0).collect();
        assert_eq!(chain, vec![0x400634, 0x400684]);
        assert_eq!(a.branches.len(), 2);
        assert_eq!(
            (a.branches[0].from.svma.0, a.branches[0].to.svma.0),
            (0x4005c8, 0x4005dc)
        );
        assert!(!a.branches[0].mispredicted && a.branches[0].predicted_known);
        assert!(a.branches[1].mispredicted);
        assert_eq!(a.branches[1].cycles, 7);
        assert_eq!(s.samples[1].ip.svma.0, 0x4005e0);
        assert_eq!(s.samples[1].branches[0].cycles, 3);
        assert!(looks_like_perf_script(text));
    }

    /// The aggregated forms: a count line before each sample weighs it (hybrid and
    /// LBR-only, `perf script -F ip,brstack` with a leading ip). 3 + 2 + 1 samples.
    #[test]
    fn llvm_profgen_aggregated_counts_are_weights() {
        let text = "\
3
\t          4005dc
\t          400684
 0x4005c8/0x4005dc/P/-/-/0
2
 0x4005c8/0x4005dc/P/-/-/0   0x40062f/0x4005b0/P/-/-/0
";
        let (s, _) = read_perf_script(text, &NoSymbols, &NoSegments).unwrap();
        assert_eq!(s.samples.len(), 5);
        assert!(s.samples[..3]
            .iter()
            .all(|x| x.ip.svma.0 == 0x4005dc && x.callchain.len() == 1 && x.branches.len() == 1));
        // No ip printed: the newest branch's target is the sample's address.
        assert!(s.samples[3..]
            .iter()
            .all(|x| x.ip.svma.0 == 0x4005dc && x.branches.len() == 2));
        // LBR-only with the leading ip (`-F ip,brstack`), and a count of 0 (no sample).
        let text = "\
4
          40062f 0x4005c8/0x4005dc/P/-/-/0  0x40062f/0x4005b0/P/-/-/0
0
          400700 0x4005c8/0x4005dc/P/-/-/0
          400800 0x4005c8/0x4005dc/P/-/-/0
";
        let (s, _) = read_perf_script(text, &NoSymbols, &NoSegments).unwrap();
        let ips: Vec<u64> = s.samples.iter().map(|x| x.ip.svma.0).collect();
        assert_eq!(ips, vec![0x40062f, 0x40062f, 0x40062f, 0x40062f, 0x400800]);
        assert!(s.samples.iter().all(|x| !x.branches.is_empty()));
        assert!(looks_like_perf_script(text));
        // A count that would expand beyond the limit is refused up front.
        let e = read_perf_script(
            "18446744073709551615\n 0x1/0x2/P/-/-/0\n",
            &NoSymbols,
            &NoSegments,
        )
        .unwrap_err();
        assert!(e.to_string().contains("too large"), "{e}");
    }

    /// perf's own call-stack output followed by a branch-stack line (`-F +brstack` with
    /// `-g` on some perf versions); a header without a time (`-F comm,pid,event,ip,sym`);
    /// frames without `sym (dso)`; lines that are none of these are counted, not fatal.
    #[test]
    fn tolerant_frames_lbr_after_callchain_and_dropped_lines() {
        let text = "\
hot 23174 cpu-clock:  5560a69e91ed fa+0x2d (/tmp/fmt/hot)
\t    5560a69e9200 main+0x10 (/tmp/fmt/hot)
\t    5560a69e9300
 0x5560a69e91c0/0x5560a69e91ed/P/-/-/0
hot 23174 cpu-clock:  5560a69e91f0 fa+0x30 (/tmp/fmt/hot)
\t    zzzz not a frame
hot 23174 cpu-clock:  xyz fa (/tmp/fmt/hot)
";
        assert!(looks_like_perf_script(text));
        let (s, notes) = read_perf_script(text, &Syms, &NoSegments).unwrap();
        assert_eq!(s.samples.len(), 2);
        let a = &s.samples[0];
        assert_eq!(a.ip.svma.0, 0x11c0 + 0x2d);
        assert_eq!(a.callchain.len(), 2);
        assert_eq!(a.branches.len(), 1);
        // The branch is made module-relative with the bias `fa+0x2d` taught.
        assert_eq!(a.branches[0].to.svma.0, 0x11ed);
        assert_eq!(s.samples[1].ip.svma.0, 0x11f0);
        let w = notes.warnings.join(" ");
        assert!(w.contains("1 line(s)") && w.contains("line 6"), "{w}");
        assert!(w.contains("1 sample(s) without a readable address"), "{w}");
    }

    /// Sniffing looks past long comment headers and decides on the first line that says
    /// something.
    #[test]
    fn sniffing_past_long_headers() {
        let mut text = String::new();
        for i in 0..150 {
            text.push_str(&format!("# header line {i}\n"));
        }
        text.push_str("hot 23174 cpu-clock:  5560a69e91ed fa+0x2d (/tmp/fmt/hot)\n");
        assert!(looks_like_perf_script(&text));
        assert!(!looks_like_perf_script("hello world\n0x1/0x2/P/-/-/0\n"));
        assert!(!looks_like_perf_script("12\n13\n"));
    }
}
