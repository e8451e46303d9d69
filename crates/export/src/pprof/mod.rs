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

mod proto;

use crate::folded::check_value;
use crate::profile::{Origin, Profile};
use crate::symbols::Resolver;
use crate::ExportError;
use proftrust_model::{Location, ModuleIdx};
use prost::Message;
use std::collections::HashMap;
use std::io::Write;

pub use proto::Profile as PprofProfile;

#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        let mut s = Strings::default();
        s.id("");
        s
    }
    fn id(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// Builds the pprof message of `p` (public for tests and callers that encode it
/// themselves; [`write_pprof`] gzips it).
pub fn to_pprof(p: &Profile, r: &Resolver<'_>) -> Result<proto::Profile, ExportError> {
    check_value(p, p.default_value)?;
    let mut st = Strings::new();
    let sample_type: Vec<proto::ValueType> = p
        .value_types
        .iter()
        .map(|v| proto::ValueType {
            r#type: st.id(&v.kind),
            unit: st.id(&v.unit),
        })
        .collect();
    let default_sample_type = st.id(&p.value_types[p.default_value].kind);

    // Runtime addresses per module, for the mapping ranges.
    let runtime = |loc: Location, ret: bool| -> u64 {
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
    };
    let mut span: HashMap<ModuleIdx, (u64, u64)> = HashMap::new();
    for s in &p.stacks {
        for (i, &loc) in s.frames.iter().enumerate() {
            if let Some(m) = loc.module {
                let a = runtime(loc, i > 0);
                let e = span.entry(m).or_insert((a, a));
                e.0 = e.0.min(a);
                e.1 = e.1.max(a);
            }
        }
    }
    // pprof takes the first mapping for the main binary: the profiled program (the first
    // word of the command) when it is among the modules, then the rest by index.
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
            filename: st.id(&module.path),
            build_id: st.id(&build_id),
            has_functions: false,
            has_filenames: false,
            has_line_numbers: false,
            has_inline_frames: false,
        });
    }

    let mut functions: Vec<proto::Function> = Vec::new();
    let mut function_id: HashMap<(String, String, String, u32), u64> = HashMap::new();
    let mut locations: Vec<proto::Location> = Vec::new();
    let mut location_id: HashMap<(Location, bool), u64> = HashMap::new();
    let mut samples = Vec::with_capacity(p.stacks.len());
    for s in &p.stacks {
        let values: Vec<i64> = s.values.iter().map(|v| v.round() as i64).collect();
        if values.iter().all(|&v| v == 0) {
            continue;
        }
        let mut ids = Vec::with_capacity(s.frames.len());
        for (i, &loc) in s.frames.iter().enumerate() {
            let ret = i > 0;
            if let Some(&id) = location_id.get(&(loc, ret)) {
                ids.push(id);
                continue;
            }
            let frames = r.frames(loc, ret);
            let mut lines = Vec::with_capacity(frames.len());
            for f in frames.iter() {
                let file = f.file.clone().unwrap_or_default();
                let key = (
                    f.name.clone(),
                    f.linkage_name.clone(),
                    file,
                    f.function_line,
                );
                let fid = match function_id.get(&key) {
                    Some(&id) => id,
                    None => {
                        let id = functions.len() as u64 + 1;
                        functions.push(proto::Function {
                            id,
                            name: st.id(&key.0),
                            system_name: st.id(&key.1),
                            filename: st.id(&key.2),
                            start_line: key.3 as i64,
                        });
                        function_id.insert(key, id);
                        id
                    }
                };
                lines.push(proto::Line {
                    function_id: fid,
                    line: f.line as i64,
                    column: f.column as i64,
                });
            }
            let mid = loc
                .module
                .and_then(|m| mapping_id.get(&m).copied())
                .unwrap_or(0);
            if let Some(mp) = mappings.iter_mut().find(|x| x.id == mid) {
                if frames.iter().any(|f| f.symbolized) {
                    mp.has_functions = true;
                }
                if frames.iter().any(|f| f.file.is_some()) {
                    mp.has_filenames = true;
                }
                if frames.iter().any(|f| f.line > 0) {
                    mp.has_line_numbers = true;
                }
                if frames.len() > 1 {
                    mp.has_inline_frames = true;
                }
            }
            let id = locations.len() as u64 + 1;
            locations.push(proto::Location {
                id,
                mapping_id: mid,
                address: runtime(loc, ret),
                line: lines,
                is_folded: false,
            });
            location_id.insert((loc, ret), id);
            ids.push(id);
        }
        samples.push(proto::Sample {
            location_id: ids,
            value: values,
            label: Vec::new(),
        });
    }
    let period_type = p.period.as_ref().map(|(v, _)| proto::ValueType {
        r#type: st.id(&v.kind),
        unit: st.id(&v.unit),
    });
    let comment = vec![st.id(&format!(
        "proftrust {} export ({}): {}",
        env!("CARGO_PKG_VERSION"),
        match p.origin {
            Origin::Sampled => "sampled",
            Origin::Exact => "exact counts",
            Origin::Estimated => "estimated",
        },
        p.title
    ))];
    Ok(proto::Profile {
        sample_type,
        sample: samples,
        mapping: mappings,
        location: locations,
        function: functions,
        string_table: st.table,
        drop_frames: 0,
        keep_frames: 0,
        time_nanos: 0,
        duration_nanos: p.duration_ns as i64,
        period_type,
        period: p.period.as_ref().map_or(0, |(_, n)| *n as i64),
        comment,
        default_sample_type,
    })
}

/// Writes `p` as a gzipped `profile.proto` (module docs).
pub fn write_pprof<W: Write>(w: W, p: &Profile, r: &Resolver<'_>) -> Result<(), ExportError> {
    let msg = to_pprof(p, r)?;
    let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::default());
    gz.write_all(&msg.encode_to_vec())?;
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
