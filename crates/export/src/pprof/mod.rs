//! pprof's `profile.proto`, gzipped: what `go tool pprof`, `pprof`, Pyroscope, Parca and
//! many other tools read.
//!
//! * **Sample types** with units: the profile's value columns (`samples/count` and the
//!   event's period sum, `cpu-clock/nanoseconds`; `instructions/count` for exact counts);
//!   `default_sample_type` is the first column, so `pprof -top` shows the numbers
//!   `proftrust read` shows. `period_type`/`period` when the period was fixed.
//! * **Mappings**, one per module with a location: file name, build-id, and the range of
//!   the module's executable `PT_LOAD` segment at its recorded load bias with the segment's
//!   file offset (so `pprof` can find instructions in the file for `-disasm`); when the
//!   binary is not at hand, the range the locations span, file offset 0.
//! * **Locations**: the runtime address (SVMA + load bias; a caller's return address minus
//!   one, inside the call instruction, as the format asks), and the inline chain as lines,
//!   innermost first, each with function, line and column.
//! * **Functions**: demangled name, linkage name as `system_name`, file and start line.

//!
//! The message is encoded as it is written, never held as a tree: an exact profile of
//! 26.8 million addresses in a module that is not on disk is 26.8 million locations,
//! functions and names. Locations are numbered by their place in the sorted list of
//! distinct (location, return address) keys (16 bytes each, found again by binary
//! search); the name of a location nothing is known about (`libbig.so+0x1234`, its own
//! function) is not held at all: such functions are numbered by their sorted
//! (module name, address) keys and their names written from them at the end of the
//! string table. What symbols name is interned (strings, and functions deduplicated by
//! name, linkage name, file and start line). About 45 bytes per address beyond the
//! profile itself (`scripts/bench-export.sh`, docs/export.md).

mod proto;

use crate::folded::check_value;
use crate::profile::{Origin, Profile, Stack};
use crate::symbols::Resolver;
use crate::ExportError;
use proftrust_model::{Location, ModuleIdx, Svma};
use prost::Message;
use std::collections::HashMap;
use std::io::Write;

pub use proto::Profile as PprofProfile;

/// Protocol-buffer wire encoding of the few shapes `profile.proto` uses, field by field
/// as prost encodes them (proto3: zero scalars and `false` left out, repeated scalars
/// packed, every element of a repeated string written).
mod wire {
    pub fn varint(b: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            b.push(v as u8 | 0x80);
            v >>= 7;
        }
        b.push(v as u8);
    }
    fn key(b: &mut Vec<u8>, field: u32, wire_type: u8) {
        varint(b, (u64::from(field) << 3) | u64::from(wire_type));
    }
    /// A `uint64` (or a non-negative `int64`) field; 0 is left out.
    pub fn uint(b: &mut Vec<u8>, field: u32, v: u64) {
        if v != 0 {
            key(b, field, 0);
            varint(b, v);
        }
    }
    /// An `int64` field (negative values take ten bytes, as the format says); 0 left out.
    pub fn int(b: &mut Vec<u8>, field: u32, v: i64) {
        uint(b, field, v as u64);
    }
    /// A length-delimited field (a string, a nested message, a packed list).
    pub fn bytes(b: &mut Vec<u8>, field: u32, v: &[u8]) {
        key(b, field, 2);
        varint(b, v.len() as u64);
        b.extend_from_slice(v);
    }
    /// A packed repeated varint field; an empty list is left out. `scratch` is reused.
    pub fn packed(
        b: &mut Vec<u8>,
        field: u32,
        vals: impl Iterator<Item = u64>,
        scratch: &mut Vec<u8>,
    ) {
        scratch.clear();
        for v in vals {
            varint(scratch, v);
        }
        if !scratch.is_empty() {
            bytes(b, field, scratch);
        }
    }
}

/// Strings interned by content (the names symbols give, paths, value types).
struct Strings {
    table: Vec<Box<str>>,
    index: HashMap<Box<str>, u64>,
}

impl Strings {
    fn new() -> Strings {
        let mut s = Strings {
            table: Vec::new(),
            index: HashMap::new(),
        };
        s.id("");
        s
    }
    fn id(&mut self, s: &str) -> u64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as u64;
        self.table.push(s.into());
        self.index.insert(s.into(), i);
        i
    }
}

/// A distinct location of the samples: where, and whether it is a caller's return
/// address (looked up at `address - 1`). 16 bytes; sorted, its index + 1 is the pprof id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct LocKey {
    /// Module index, `u32::MAX` for none.
    module: u32,
    ret: bool,
    svma: u64,
}

impl LocKey {
    fn new(loc: Location, ret: bool) -> LocKey {
        LocKey {
            module: loc.module.map_or(u32::MAX, |m| m.0),
            ret,
            svma: loc.svma.0,
        }
    }
    fn location(self) -> Location {
        Location {
            module: (self.module != u32::MAX).then_some(ModuleIdx(self.module)),
            svma: Svma(self.svma),
        }
    }
}

/// One line of a symbolized location: function (index among the named functions), line,
/// column.
struct LineRec {
    function: u32,
    line: u32,
    column: u32,
}

/// Encoded bytes are handed to the writer in blocks of this size.
const BLOCK: usize = 1 << 16;

/// Writes `p` as an (unzipped) `profile.proto` to `w` (module docs). String ids are given
/// in the order of the steps: the profile's own strings, the mappings', the functions'.
fn encode(w: &mut dyn Write, p: &Profile, r: &Resolver<'_>) -> Result<(), ExportError> {
    check_value(p, p.default_value)?;
    let mut st = Strings::new();
    let head = Head::new(p, &mut st);
    let (keys, span) = distinct_locations(p, r);
    let (mut mappings, mapping_id) = make_mappings(p, r, &span, &mut st);
    let mut res = resolve(r, &keys, &mapping_id, &mut mappings, &mut st)?;

    let mut e = Encoder {
        w,
        out: Vec::with_capacity(2 * BLOCK),
        msg: Vec::new(),
        scratch: Vec::new(),
    };
    for &t in &head.sample_type {
        e.value_type(1, t);
    }
    e.samples(p, &keys)?;
    for m in &mappings {
        e.msg.clear();
        m.encode_raw(&mut e.msg);
        wire::bytes(&mut e.out, 3, &e.msg);
    }
    e.locations(r, &keys, &mapping_id, &res)?;
    res.lines = Vec::new();
    res.loc_lines = Vec::new();
    // Function ids: the fallback functions first (1..=F), then the named ones. String ids:
    // the interned strings, then one name per fallback function.
    let nstrings = st.table.len() as u64;
    e.functions(&res, nstrings)?;
    for s in &st.table {
        wire::bytes(&mut e.out, 6, s.as_bytes());
        e.flush(false)?;
    }
    let mut name = String::new();
    for &(class, svma) in &res.fallback {
        name.clear();
        r.write_fallback_name(Location::new(ModuleIdx(class), svma), &mut name);
        wire::bytes(&mut e.out, 6, name.as_bytes());
        e.flush(false)?;
    }
    e.tail(p, &head)?;
    Ok(())
}

/// The string ids of the profile-wide fields (interned first).
struct Head {
    sample_type: Vec<(u64, u64)>,
    default_sample_type: u64,
    period_type: Option<(u64, u64)>,
    comment: u64,
}

impl Head {
    fn new(p: &Profile, st: &mut Strings) -> Head {
        let sample_type = p
            .value_types
            .iter()
            .map(|v| (st.id(&v.kind), st.id(&v.unit)))
            .collect();
        let default_sample_type = st.id(&p.value_types[p.default_value].kind);
        let period_type = p
            .period
            .as_ref()
            .map(|(v, _)| (st.id(&v.kind), st.id(&v.unit)));
        let comment = st.id(&format!(
            "proftrust {} export ({}): {}",
            env!("CARGO_PKG_VERSION"),
            match p.origin {
                Origin::Sampled => "sampled",
                Origin::Exact => "exact counts",
                Origin::Estimated => "estimated",
            },
            p.title
        ));
        Head {
            sample_type,
            default_sample_type,
            period_type,
            comment,
        }
    }
}

/// Whether a stack has a value that rounds to non-zero (the others are left out).
fn counted(s: &Stack) -> bool {
    s.values.iter().any(|v| v.round() as i64 != 0)
}

/// The runtime address of a frame (SVMA + load bias; a return address minus one).
fn runtime(r: &Resolver<'_>, loc: Location, ret: bool) -> u64 {
    let bias = loc
        .module
        .and_then(|m| r.modules().get(m))
        .map_or(0, |m| m.load_bias);
    let a = loc.svma.0.wrapping_add(bias);
    if ret {
        a.saturating_sub(1)
    } else {
        a
    }
}

/// The distinct locations of the counted stacks, sorted, and the runtime address span of
/// each module's.
fn distinct_locations(
    p: &Profile,
    r: &Resolver<'_>,
) -> (Vec<LocKey>, HashMap<ModuleIdx, (u64, u64)>) {
    let mut keys: Vec<LocKey> = Vec::new();
    let mut span: HashMap<ModuleIdx, (u64, u64)> = HashMap::new();
    for s in p.stacks.iter().filter(|s| counted(s)) {
        for (i, &loc) in s.frames.iter().enumerate() {
            keys.push(LocKey::new(loc, i > 0));
            if let Some(m) = loc.module {
                let a = runtime(r, loc, i > 0);
                let e = span.entry(m).or_insert((a, a));
                e.0 = e.0.min(a);
                e.1 = e.1.max(a);
            }
        }
    }
    keys.sort_unstable();
    keys.dedup();
    keys.shrink_to_fit();
    (keys, span)
}

/// One mapping per module of `span`, and the mapping id of each module. pprof takes the
/// first mapping for the main binary: the profiled program (the first word of the
/// command) when it is among the modules, then the rest by index.
fn make_mappings(
    p: &Profile,
    r: &Resolver<'_>,
    span: &HashMap<ModuleIdx, (u64, u64)>,
    st: &mut Strings,
) -> (Vec<proto::Mapping>, HashMap<ModuleIdx, u64>) {
    let program = p
        .title
        .split_whitespace()
        .next()
        .map(|c| c.rsplit('/').next().unwrap_or(c));
    let mut modules: Vec<ModuleIdx> = span.keys().copied().collect();
    modules.sort_by_key(|m| {
        let is_main = r
            .modules()
            .get(*m)
            .is_some_and(|x| Some(x.file_name()) == program);
        (!is_main, *m)
    });
    let mut mapping_id: HashMap<ModuleIdx, u64> = HashMap::new();
    let mut mappings = Vec::new();
    for m in modules {
        let Some(module) = r.modules().get(m) else {
            continue;
        };
        let (lo, hi) = span[&m];
        let bias = module.load_bias;
        let seg = r.symbols().segments(m).into_iter().find(|g| {
            g.is_executable()
                && lo >= g.vaddr.wrapping_add(bias)
                && hi < g.vaddr.wrapping_add(bias).wrapping_add(g.memsz)
        });
        let (start, limit, offset) = match seg {
            Some(g) => (
                g.vaddr.wrapping_add(bias),
                g.vaddr.wrapping_add(bias).wrapping_add(g.memsz),
                g.offset,
            ),
            None => (lo, hi + 1, 0),
        };
        let id = mappings.len() as u64 + 1;
        mapping_id.insert(m, id);
        let build_id = module
            .build_id
            .as_ref()
            .map(|b| b.to_hex())
            .unwrap_or_default();
        mappings.push(proto::Mapping {
            id,
            memory_start: start,
            memory_limit: limit,
            file_offset: offset,
            filename: st.id(&module.path) as i64,
            build_id: st.id(&build_id) as i64,
            has_functions: false,
            has_filenames: false,
            has_line_numbers: false,
            has_inline_frames: false,
        });
    }
    (mappings, mapping_id)
}

/// What the locations resolve to.
struct Resolved {
    /// The named functions: name, linkage name, file (string ids) and start line.
    functions: Vec<[u64; 4]>,
    /// The lines of the symbolized locations, one run per location.
    lines: Vec<LineRec>,
    /// Per location: (first line, count); count 0 = the fallback function.
    loc_lines: Vec<(u32, u32)>,
    /// The fallback functions, sorted: (module name class, address).
    fallback: Vec<(u32, u64)>,
    /// Per module, the first module of its file name: modules named alike (`lib.so` in
    /// two directories) give alike fallback names, so the first stands for the others.
    name_class: Vec<u32>,
}

impl Resolved {
    /// The name class of `m`'s module.
    fn class(&self, m: u32) -> u32 {
        self.name_class.get(m as usize).copied().unwrap_or(m)
    }
}

/// Resolves each location once: its lines (symbolized), or its fallback function; marks
/// what the mappings have.
fn resolve(
    r: &Resolver<'_>,
    keys: &[LocKey],
    mapping_id: &HashMap<ModuleIdx, u64>,
    mappings: &mut [proto::Mapping],
    st: &mut Strings,
) -> Result<Resolved, ExportError> {
    let mut first_of_name: HashMap<&str, u32> = HashMap::new();
    let name_class: Vec<u32> = r
        .modules()
        .iter()
        .map(|(i, m)| *first_of_name.entry(m.file_name()).or_insert(i.0))
        .collect();
    let mut res = Resolved {
        functions: Vec::new(),
        lines: Vec::new(),
        loc_lines: Vec::with_capacity(keys.len()),
        fallback: Vec::new(),
        name_class,
    };
    let mut function_id: HashMap<[u64; 4], u32> = HashMap::new();
    let too_many = || ExportError::Empty {
        what: "pprof: more than 2^32 lines of symbolized locations".into(),
    };
    for k in keys {
        let loc = k.location();
        let mp = loc
            .module
            .and_then(|m| mapping_id.get(&m))
            .map(|&id| &mut mappings[id as usize - 1]);
        match (r.known_frames(loc, k.ret), loc.module) {
            (None, Some(m)) => {
                res.fallback.push((res.class(m.0), loc.svma.0));
                res.loc_lines.push((0, 0));
            }
            (known, _) => {
                let frames = known.unwrap_or_else(|| r.frames(loc, k.ret));
                let first = u32::try_from(res.lines.len()).map_err(|_| too_many())?;
                for f in frames.iter() {
                    let key = [
                        st.id(&f.name),
                        st.id(&f.linkage_name),
                        st.id(f.file.as_deref().unwrap_or("")),
                        u64::from(f.function_line),
                    ];
                    let n = res.functions.len() as u32;
                    let function = *function_id.entry(key).or_insert_with(|| {
                        res.functions.push(key);
                        n
                    });
                    res.lines.push(LineRec {
                        function,
                        line: f.line,
                        column: f.column,
                    });
                }
                res.loc_lines.push((first, frames.len() as u32));
                if let Some(mp) = mp {
                    mp.has_functions |= frames.iter().any(|f| f.symbolized);
                    mp.has_filenames |= frames.iter().any(|f| f.file.is_some());
                    mp.has_line_numbers |= frames.iter().any(|f| f.line > 0);
                    mp.has_inline_frames |= frames.len() > 1;
                }
            }
        }
    }
    drop(function_id);
    res.fallback.sort_unstable();
    res.fallback.dedup();
    res.fallback.shrink_to_fit();
    Ok(res)
}

/// The message's bytes on their way to the writer, and scratch for nested messages.
struct Encoder<'w> {
    w: &'w mut dyn Write,
    out: Vec<u8>,
    msg: Vec<u8>,
    scratch: Vec<u8>,
}

impl Encoder<'_> {
    /// Hands the bytes to the writer when a block is full (or `force`).
    fn flush(&mut self, force: bool) -> std::io::Result<()> {
        if force || self.out.len() >= BLOCK {
            self.w.write_all(&self.out)?;
            self.out.clear();
        }
        Ok(())
    }

    /// A `ValueType` (type, unit string ids) as field `field`.
    fn value_type(&mut self, field: u32, (t, u): (u64, u64)) {
        self.msg.clear();
        wire::uint(&mut self.msg, 1, t);
        wire::uint(&mut self.msg, 2, u);
        wire::bytes(&mut self.out, field, &self.msg);
    }

    /// The counted stacks: location ids (index + 1 among `keys`) and rounded values.
    fn samples(&mut self, p: &Profile, keys: &[LocKey]) -> std::io::Result<()> {
        // Every frame of a counted stack is among the keys.
        let loc_id = |loc: Location, ret: bool| -> u64 {
            keys.binary_search(&LocKey::new(loc, ret))
                .map_or(0, |i| i as u64 + 1)
        };
        for s in p.stacks.iter().filter(|s| counted(s)) {
            self.msg.clear();
            let ids = s.frames.iter().enumerate().map(|(i, &l)| loc_id(l, i > 0));
            wire::packed(&mut self.msg, 1, ids, &mut self.scratch);
            let values = s.values.iter().map(|v| v.round() as i64 as u64);
            wire::packed(&mut self.msg, 2, values, &mut self.scratch);
            wire::bytes(&mut self.out, 2, &self.msg);
            self.flush(false)?;
        }
        Ok(())
    }

    /// One location per key: id, mapping, runtime address and its lines.
    fn locations(
        &mut self,
        r: &Resolver<'_>,
        keys: &[LocKey],
        mapping_id: &HashMap<ModuleIdx, u64>,
        res: &Resolved,
    ) -> std::io::Result<()> {
        let nfallback = res.fallback.len() as u64;
        let mut line_msg = Vec::new();
        for (i, (k, &(first, n))) in keys.iter().zip(&res.loc_lines).enumerate() {
            let loc = k.location();
            let msg = &mut self.msg;
            msg.clear();
            wire::uint(msg, 1, i as u64 + 1);
            let mid = loc.module.and_then(|m| mapping_id.get(&m).copied());
            wire::uint(msg, 2, mid.unwrap_or(0));
            wire::uint(msg, 3, runtime(r, loc, k.ret));
            let mut line = |function: u64, line: u32, column: u32| {
                line_msg.clear();
                wire::uint(&mut line_msg, 1, function);
                wire::uint(&mut line_msg, 2, u64::from(line));
                wire::uint(&mut line_msg, 3, u64::from(column));
                wire::bytes(msg, 4, &line_msg);
            };
            if n == 0 {
                let class = res.class(loc.module.map_or(0, |m| m.0));
                let f = res
                    .fallback
                    .binary_search(&(class, loc.svma.0))
                    .unwrap_or(0);
                line(f as u64 + 1, 0, 0);
            } else {
                for l in &res.lines[first as usize..(first + n) as usize] {
                    line(nfallback + u64::from(l.function) + 1, l.line, l.column);
                }
            }
            wire::bytes(&mut self.out, 4, &self.msg);
            self.flush(false)?;
        }
        Ok(())
    }

    /// The fallback functions (named by the strings after the `nstrings` interned ones),
    /// then the named ones.
    fn functions(&mut self, res: &Resolved, nstrings: u64) -> std::io::Result<()> {
        let nfallback = res.fallback.len() as u64;
        for i in 0..nfallback {
            self.msg.clear();
            wire::uint(&mut self.msg, 1, i + 1);
            wire::uint(&mut self.msg, 2, nstrings + i);
            wire::uint(&mut self.msg, 3, nstrings + i);
            wire::bytes(&mut self.out, 5, &self.msg);
            self.flush(false)?;
        }
        for (i, f) in res.functions.iter().enumerate() {
            self.msg.clear();
            wire::uint(&mut self.msg, 1, nfallback + i as u64 + 1);
            for (field, &v) in (2..).zip(f) {
                wire::uint(&mut self.msg, field, v);
            }
            wire::bytes(&mut self.out, 5, &self.msg);
            self.flush(false)?;
        }
        Ok(())
    }

    /// The profile-wide fields after the string table, and the last bytes.
    fn tail(&mut self, p: &Profile, head: &Head) -> std::io::Result<()> {
        wire::int(&mut self.out, 10, p.duration_ns as i64);
        if let Some(t) = head.period_type {
            self.value_type(11, t);
        }
        let period = p.period.as_ref().map_or(0, |(_, n)| *n as i64);
        wire::int(&mut self.out, 12, period);
        let comment = std::iter::once(head.comment);
        wire::packed(&mut self.out, 13, comment, &mut self.scratch);
        wire::uint(&mut self.out, 14, head.default_sample_type);
        self.flush(true)
    }
}

/// The pprof message of `p`, decoded from what [`write_pprof`] writes (for tests and
/// callers that want the message; it holds the whole profile).
pub fn to_pprof(p: &Profile, r: &Resolver<'_>) -> Result<proto::Profile, ExportError> {
    let mut bytes = Vec::new();
    encode(&mut bytes, p, r)?;
    read_pprof(&bytes)
}

/// Writes `p` as a gzipped `profile.proto` (module docs), encoded as it goes.
pub fn write_pprof<W: Write>(w: W, p: &Profile, r: &Resolver<'_>) -> Result<(), ExportError> {
    let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::fast());
    encode(&mut gz, p, r)?;
    gz.finish()?.flush()?;
    Ok(())
}

/// Decodes a (gzipped or plain) `profile.proto`: for tests and tools that check an export.
pub fn read_pprof(bytes: &[u8]) -> Result<proto::Profile, ExportError> {
    let plain;
    let data = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut d = flate2::read::GzDecoder::new(bytes);
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut d, &mut v)?;
        plain = v;
        &plain[..]
    } else {
        bytes
    };
    proto::Profile::decode(data).map_err(|e| ExportError::Decode(e.to_string()))
}

/// The pprof messages (field names as in `profile.proto`).
pub mod messages {
    pub use super::proto::*;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Origin, Stack, ValueType};
    use crate::symbols::Symbols;
    use proftrust_binary::{Function, SourceFrame};
    use proftrust_model::{Module, ModuleTable};
    use smallvec::smallvec;
    use std::collections::BTreeMap;

    /// Knows one address: `/bin/a` 0x30 is `g` (line 5) inlined into `f` (line 9).
    struct OneInline;

    impl Symbols for OneInline {
        fn frames(&self, loc: Location) -> Vec<SourceFrame> {
            if loc != Location::new(ModuleIdx(0), 0x30) {
                return Vec::new();
            }
            let frame = |name: &str, line| SourceFrame {
                function: name.into(),
                linkage_name: format!("_Z1{name}v"),
                file: Some("a.c".into()),
                line: Some(line),
                column: None,
                discriminator: 0,
                duplication: 1,
                function_line: Some(line - 1),
            };
            vec![frame("g", 5), frame("f", 9)]
        }
        fn function(&self, _loc: Location) -> Option<Function> {
            None
        }
    }

    /// The streamed encoding, decoded by prost: every sample's frames by name (through
    /// location, line and function ids and the string table), the functions deduplicated,
    /// the addresses runtime ones (a caller's minus one).
    #[test]
    fn streamed_message_decodes_to_the_named_stacks() {
        let mut modules = ModuleTable::default();
        let mut a = Module::new("/bin/a");
        a.load_bias = 0x1000;
        modules.intern(a);
        modules.intern(Module::new("/x/lib.so"));
        modules.intern(Module::new("/y/lib.so"));
        let l = |m: u32, a: u64| Location::new(ModuleIdx(m), a);
        let unknown = Location {
            module: None,
            svma: Svma(0x99),
        };
        let stacks = [
            (vec![l(0, 0x10)], 5.0),
            (vec![l(0, 0x10), l(1, 0x20)], 3.0),
            (vec![l(2, 0x20)], 2.0),
            (vec![unknown], 1.0),
            (vec![l(0, 0x30), l(0, 0x10)], 4.0),
            (vec![l(1, 0x44)], 0.2),
        ];
        let p = Profile {
            modules: modules.clone(),
            title: "a".into(),
            origin: Origin::Exact,
            value_types: vec![ValueType::new("instructions", "count")],
            default_value: 0,
            column_events: vec![None],
            period: None,
            stacks: stacks
                .iter()
                .map(|(f, v)| Stack {
                    frames: f.iter().copied().collect(),
                    values: smallvec![*v],
                })
                .collect(),
            timeline: Vec::new(),
            has_callers: true,
            duration_ns: 0,
            thread_names: BTreeMap::new(),
        };
        let r = Resolver::new(&OneInline, &modules);
        let m = to_pprof(&p, &r).unwrap();
        let s = |i: i64| m.string_table[i as usize].as_str();
        let function = |id: u64| m.function.iter().find(|f| f.id == id).unwrap();
        let location = |id: u64| m.location.iter().find(|l| l.id == id).unwrap();
        let got: Vec<(Vec<String>, i64)> = m
            .sample
            .iter()
            .map(|x| {
                let names = x
                    .location_id
                    .iter()
                    .flat_map(|&id| location(id).line.iter())
                    .map(|ln| s(function(ln.function_id).name).to_string())
                    .collect();
                (names, x.value[0])
            })
            .collect();
        let want: Vec<(Vec<String>, i64)> = [
            (vec!["a+0x10"], 5),
            (vec!["a+0x10", "lib.so+0x20"], 3),
            (vec!["lib.so+0x20"], 2),
            (vec!["[unknown]"], 1),
            (vec!["g", "f", "a+0x10"], 4),
        ]
        .iter()
        .map(|(n, v)| (n.iter().map(|x| x.to_string()).collect(), *v))
        .collect();
        assert_eq!(got, want, "the 0.2 stack rounds to 0 and is left out");
        // a+0x10, lib.so+0x20 (both modules and the caller alike), [unknown], g, f.
        assert_eq!(m.function.len(), 5);
        let names: Vec<&str> = m.function.iter().map(|f| s(f.name)).collect();
        for n in ["a+0x10", "lib.so+0x20", "[unknown]", "g", "f"] {
            assert_eq!(names.iter().filter(|&&x| x == n).count(), 1, "{n}");
        }
        let g = m.function.iter().find(|f| s(f.name) == "g").unwrap();
        assert_eq!(
            (s(g.system_name), s(g.filename), g.start_line),
            ("_Z1gv", "a.c", 4)
        );
        // Six distinct (location, caller?) keys: a+0x10 as leaf and as caller differ.
        assert_eq!(m.location.len(), 6);
        let inl = location(m.sample[4].location_id[0]);
        assert_eq!(inl.address, 0x1030);
        assert_eq!(
            inl.line.iter().map(|l| l.line).collect::<Vec<_>>(),
            vec![5, 9]
        );
        let caller = location(m.sample[4].location_id[1]);
        assert_eq!(caller.address, 0x1010 - 1);
        assert_eq!(location(m.sample[0].location_id[0]).address, 0x1010);
        let main = &m.mapping[0];
        assert_eq!(s(main.filename), "/bin/a");
        assert!(main.has_functions && main.has_inline_frames && main.has_line_numbers);
        assert!(!m.mapping[1].has_functions);
        assert_eq!(s(m.sample_type[0].r#type), "instructions");
        assert_eq!(s(m.default_sample_type), "instructions");
    }
}
