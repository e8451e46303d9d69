//! Ingest: one loaded recording (a `SampleSet` with its `Symbolizer`) into the store as
//! Parquet files (layout in [`crate::schema`]).
//!
//! Reading the profile file is the caller's (the pipeline's one loader), so every format
//! proftrust reads can be ingested, with module-relative addresses already. Symbols are
//! resolved here once per distinct (binary, address) that the store does not hold yet.

use crate::error::{Error, Result};
use crate::manifest;
use crate::schema::{self, Table, SCHEMA_VERSION, SCHEMA_VERSION_KEY};
use datafusion::arrow::array::{
    ArrayBuilder, ArrayRef, AsArray, StringBuilder, UInt32Builder, UInt64Builder,
};
use datafusion::arrow::datatypes::{SchemaRef, UInt64Type};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::parquet::arrow::{ArrowWriter, ProjectionMask};
use datafusion::parquet::basic::Compression;
use datafusion::parquet::file::metadata::KeyValue;
use datafusion::parquet::file::properties::WriterProperties;
use proftrust_binary::Symbolizer;
use proftrust_model::{Location, SampleSet};
use rustc_hash::{FxHashMap, FxHashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What a samples table row stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Rows {
    /// One row per (recording, event, binary, address) with its `count` and `weight`
    /// (`time_ns` null): the default, and what the reports need.
    #[default]
    Aggregated,
    /// One row per sample with its time (`count` 1).
    Sample,
}

impl Rows {
    /// `aggregated` or `sample`.
    pub fn name(self) -> &'static str {
        match self {
            Rows::Aggregated => "aggregated",
            Rows::Sample => "sample",
        }
    }
}

/// Who and what is being ingested.
#[derive(Debug, Clone, Default)]
pub struct IngestSpec {
    /// Host name ([`schema::valid_host`]).
    pub host: String,
    /// Labels `(key, value)` of every recording of this ingest.
    pub labels: Vec<(String, String)>,
    /// Row granularity.
    pub rows: Rows,
}

/// What one recording added to the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ingested {
    /// Its id (the file name of its Parquet files).
    pub recording_id: String,
    /// How the recorded program ended when not normally (the `ending` column).
    pub ending: Option<String>,
    /// Samples, over all events.
    pub samples: u64,
    /// Rows written to `samples`.
    pub rows: u64,
    /// New (binary, address) symbol rows written.
    pub new_symbols: u64,
    /// Files written, in order.
    pub files: Vec<PathBuf>,
}

/// The (binary key, address) pairs the store already holds symbols for.
#[derive(Debug, Default)]
pub struct KnownSymbols {
    keys: FxHashMap<String, FxHashSet<u64>>,
}

impl KnownSymbols {
    /// Reads the keys of every file under `DIR/symbols` (only the two key columns).
    pub fn load(store: &Path) -> Result<KnownSymbols> {
        let mut known = KnownSymbols::default();
        for path in parquet_files(&Table::Symbols.dir(store))? {
            let file = std::fs::File::open(&path).map_err(|e| Error::io(&path, e))?;
            let builder = ParquetRecordBatchReaderBuilder::try_new(file)
                .map_err(|e| Error::corrupt(&path, e))?;
            check_version(
                &path,
                builder.metadata().file_metadata().key_value_metadata(),
            )?;
            let mask = ProjectionMask::roots(builder.parquet_schema(), [0, 1]);
            let reader = builder
                .with_projection(mask)
                .build()
                .map_err(|e| Error::corrupt(&path, e))?;
            for batch in reader {
                let batch = batch.map_err(|e| Error::corrupt(&path, e))?;
                let keys = batch.column(0).as_string_opt::<i32>();
                let addrs = batch.column(1).as_primitive_opt::<UInt64Type>();
                let (Some(keys), Some(addrs)) = (keys, addrs) else {
                    return Err(Error::Corrupt {
                        path: path.clone(),
                        problem: "its columns are not (binary_key, address)".to_string(),
                    });
                };
                for i in 0..batch.num_rows() {
                    known.insert(keys.value(i), addrs.value(i));
                }
            }
        }
        Ok(known)
    }

    fn contains(&self, key: &str, addr: u64) -> bool {
        self.keys.get(key).is_some_and(|s| s.contains(&addr))
    }

    fn insert(&mut self, key: &str, addr: u64) {
        if let Some(s) = self.keys.get_mut(key) {
            s.insert(addr);
        } else {
            let mut s = FxHashSet::default();
            s.insert(addr);
            self.keys.insert(key.to_string(), s);
        }
    }

    /// Number of (binary, address) pairs known.
    pub fn len(&self) -> usize {
        self.keys.values().map(|s| s.len()).sum()
    }

    /// Whether no pair is known.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The `.parquet` files under `dir` (recursively, sorted; hidden files and temporaries
/// skipped). A missing directory has none.
pub fn parquet_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = match std::fs::read_dir(&d) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&d, e)),
        };
        for entry in rd {
            let entry = entry.map_err(|e| Error::io(&d, e))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') {
                continue;
            }
            let p = entry.path();
            let ft = entry.file_type().map_err(|e| Error::io(&p, e))?;
            if ft.is_dir() {
                stack.push(p);
            } else if name.ends_with(".parquet") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Refuses a file whose `schema_version` is missing or not [`SCHEMA_VERSION`].
pub fn check_version(path: &Path, kv: Option<&Vec<KeyValue>>) -> Result<()> {
    let v = kv.and_then(|kv| {
        kv.iter()
            .find(|k| k.key == SCHEMA_VERSION_KEY)
            .and_then(|k| k.value.clone())
    });
    match v {
        Some(v) if v == SCHEMA_VERSION.to_string() => Ok(()),
        Some(v) => Err(Error::Corrupt {
            path: path.to_path_buf(),
            problem: format!(
                "schema version {v}, this proftrust reads version {SCHEMA_VERSION} \
                 (ingest the profiles again with this proftrust)"
            ),
        }),
        None => Err(Error::Corrupt {
            path: path.to_path_buf(),
            problem: format!(
                "no `{SCHEMA_VERSION_KEY}` in its metadata: not a proftrust fleet file"
            ),
        }),
    }
}

/// A fresh recording id: Unix time in nanoseconds, process id and the file's index in this
/// ingest, hex (unique per host directory unless two ingests share a process and a
/// nanosecond).
pub fn new_recording_id(now_ns: u64, index: usize) -> String {
    format!("{now_ns:016x}-{:x}-{index}", std::process::id())
}

/// Now, Unix time in nanoseconds.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// The symbols table's key of a module: its build-id (hex), else its path.
fn binary_key(set: &SampleSet, loc: Location) -> (String, Option<String>, String) {
    match loc.module.and_then(|m| set.modules.get(m)) {
        Some(m) => {
            let bid = m.build_id.as_ref().map(|b| b.to_hex());
            let key = bid.clone().unwrap_or_else(|| m.path.clone());
            (key, bid, m.path.clone())
        }
        None => ("[unknown]".to_string(), None, "[unknown]".to_string()),
    }
}

/// One loaded recording.
pub struct Source<'a> {
    /// The file it was read from (as the user named it).
    pub path: &'a str,
    /// Its format's name (`perf.data`, `perf script`, `proftrust samples`...).
    pub format: &'a str,
    /// Its samples.
    pub set: &'a SampleSet,
    /// Names for its locations.
    pub symbolizer: &'a Symbolizer,
}

/// Writes one recording: its new symbols, its samples, its labels, and last its
/// `recordings` rows (which make it visible to queries). `known` is updated with the
/// symbols written.
pub fn ingest(
    store: &Path,
    spec: &IngestSpec,
    src: &Source<'_>,
    recording_id: &str,
    ingest_time_ns: u64,
    known: &mut KnownSymbols,
) -> Result<Ingested> {
    if !schema::valid_host(&spec.host) {
        return Err(Error::Invalid(format!(
            "host name `{}` is not usable: give 1 to 128 of A-Z a-z 0-9 . _ - (not starting with .)",
            spec.host
        )));
    }
    let mut keys = ModuleKeys::new(src.set);
    let samples = sample_rows(spec, src.set, recording_id, &mut keys)?;
    let new_locs = new_locations(&samples.locations, &mut keys, known);

    let mut files = Vec::new();
    // What this recording writes, for its `files` rows (crate::manifest).
    let mut listed = Vec::new();
    let new_symbols = new_locs.len() as u64;
    if new_symbols > 0 {
        let batch = symbol_rows(&new_locs, &mut keys, src.symbolizer)?;
        let p = Table::Symbols
            .dir(store)
            .join(format!("{recording_id}.parquet"));
        let w = write_parquet(&p, &batch)?;
        listed.push(manifest::entry(store, Table::Symbols, &p, new_symbols, w));
        files.push(p);
    }
    let host_dir = format!("host={}", spec.host);
    let in_host = |t: Table| {
        t.dir(store)
            .join(&host_dir)
            .join(format!("{recording_id}.parquet"))
    };
    let p = in_host(Table::Samples);
    let w = write_parquet(&p, &samples.batch)?;
    listed.push(manifest::entry(store, Table::Samples, &p, samples.rows, w));
    files.push(p);

    let mut labels = spec.labels.clone();
    labels.sort();
    labels.dedup();
    if !labels.is_empty() {
        let n = labels.len();
        let cols: Vec<ArrayRef> = vec![
            str_col(std::iter::repeat_n(recording_id, n)),
            str_col(std::iter::repeat_n(spec.host.as_str(), n)),
            str_col(labels.iter().map(|(k, _)| k.as_str())),
            str_col(labels.iter().map(|(_, v)| v.as_str())),
        ];
        let batch = RecordBatch::try_new(Table::Labels.schema(), cols)
            .map_err(|e| Error::Internal(e.to_string()))?;
        let p = in_host(Table::Labels);
        let w = write_parquet(&p, &batch)?;
        listed.push(manifest::entry(store, Table::Labels, &p, n as u64, w));
        files.push(p);
    }
    files.push(manifest::write(store, &spec.host, recording_id, &listed)?);

    // How the program ended, when not normally (an interrupted or killed recording holds
    // part of the run; fleet report names it).
    let ending = src
        .set
        .outcome
        .as_ref()
        .filter(|o| !o.ended_normally())
        .map(ToString::to_string);
    let label_text = labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let recording = RecordingRow {
        id: recording_id,
        host: &spec.host,
        labels: &label_text,
        ingest_time_ns,
        ending: ending.as_deref(),
        rows: spec.rows.name(),
    };
    let p = in_host(Table::Recordings);
    write_parquet(&p, &recording_rows(&recording, src, samples.per_event)?)?;
    files.push(p);

    for &(m, a) in &new_locs {
        known.insert(&keys.key(location(m, a)).0, a);
    }
    Ok(Ingested {
        recording_id: recording_id.to_string(),
        ending,
        samples: src.set.samples.len() as u64,
        rows: samples.rows,
        new_symbols,
        files,
    })
}

/// A location from its stored parts (module index, SVMA).
fn location(m: Option<u32>, a: u64) -> Location {
    Location {
        module: m.map(proftrust_model::ModuleIdx),
        svma: proftrust_model::Svma(a),
    }
}

/// Each module's (binary key, build-id, path) ([`binary_key`]), worked out once per module.
struct ModuleKeys<'a> {
    set: &'a SampleSet,
    keys: FxHashMap<Option<u32>, (String, Option<String>, String)>,
}

impl<'a> ModuleKeys<'a> {
    fn new(set: &'a SampleSet) -> Self {
        ModuleKeys {
            set,
            keys: FxHashMap::default(),
        }
    }

    fn key(&mut self, loc: Location) -> (String, Option<String>, String) {
        let set = self.set;
        self.keys
            .entry(loc.module.map(|m| m.0))
            .or_insert_with(|| binary_key(set, loc))
            .clone()
    }
}

/// The name of event `e` of `set` (`eventN` when the file lists none).
fn event_name(set: &SampleSet, e: u16) -> String {
    set.events
        .get(e as usize)
        .map(|d| d.name.clone())
        .unwrap_or_else(|| format!("event{e}"))
}

/// A recording's `samples` rows and what the other tables need of them.
struct SampleRows {
    batch: RecordBatch,
    rows: u64,
    /// Per event: samples and weight (the `recordings` rows).
    per_event: FxHashMap<u16, (u64, u64)>,
    /// The distinct locations (module index, SVMA), for the `symbols` rows.
    locations: FxHashSet<(Option<u32>, u64)>,
}

/// The `samples` rows of `set`: one per (event, location) with [`Rows::Aggregated`], one
/// per sample with [`Rows::Sample`].
fn sample_rows(
    spec: &IngestSpec,
    set: &SampleSet,
    recording_id: &str,
    keys: &mut ModuleKeys<'_>,
) -> Result<SampleRows> {
    let mut b = SampleColumns::default();
    let mut per_event: FxHashMap<u16, (u64, u64)> = FxHashMap::default();
    let mut locations: FxHashSet<(Option<u32>, u64)> = FxHashSet::default();
    match spec.rows {
        Rows::Aggregated => {
            let mut agg: FxHashMap<(u16, Option<u32>, u64), (u64, u64)> = FxHashMap::default();
            for s in &set.samples {
                let e = agg
                    .entry((s.event, s.ip.module.map(|m| m.0), s.ip.svma.0))
                    .or_default();
                e.0 += 1;
                e.1 += s.period;
            }
            let mut rows: Vec<_> = agg.into_iter().collect();
            rows.sort_unstable_by_key(|(k, _)| *k);
            for ((ev, m, a), (count, weight)) in rows {
                let (key, bid, module) = keys.key(location(m, a));
                let pe = per_event.entry(ev).or_default();
                pe.0 += count;
                pe.1 += weight;
                locations.insert((m, a));
                b.push(
                    recording_id,
                    &spec.host,
                    None,
                    &event_name(set, ev),
                    weight,
                    count,
                    bid.as_deref(),
                    &module,
                    &key,
                    a,
                );
            }
        }
        Rows::Sample => {
            let names: Vec<String> = (0..set.events.len().max(1))
                .map(|e| event_name(set, e as u16))
                .collect();
            for s in &set.samples {
                let (key, bid, module) = keys.key(s.ip);
                let pe = per_event.entry(s.event).or_default();
                pe.0 += 1;
                pe.1 += s.period;
                locations.insert((s.ip.module.map(|m| m.0), s.ip.svma.0));
                let ev = names
                    .get(s.event as usize)
                    .cloned()
                    .unwrap_or_else(|| event_name(set, s.event));
                b.push(
                    recording_id,
                    &spec.host,
                    Some(s.time),
                    &ev,
                    s.period,
                    1,
                    bid.as_deref(),
                    &module,
                    &key,
                    s.ip.svma.0,
                );
            }
        }
    }
    let rows = b.len() as u64;
    Ok(SampleRows {
        batch: b.finish(&Table::Samples.schema())?,
        rows,
        per_event,
        locations,
    })
}

/// The locations whose symbols the store does not hold yet, sorted.
fn new_locations(
    locations: &FxHashSet<(Option<u32>, u64)>,
    keys: &mut ModuleKeys<'_>,
    known: &KnownSymbols,
) -> Vec<(Option<u32>, u64)> {
    let mut new_locs: Vec<(Option<u32>, u64)> = locations
        .iter()
        .copied()
        .filter(|&(m, a)| !known.contains(&keys.key(location(m, a)).0, a))
        .collect();
    new_locs.sort_unstable();
    new_locs
}

/// The `symbols` rows of `locs`: module file, function and inline frames of each.
fn symbol_rows(
    locs: &[(Option<u32>, u64)],
    keys: &mut ModuleKeys<'_>,
    symbolizer: &Symbolizer,
) -> Result<RecordBatch> {
    let mut sym = SymbolColumns::default();
    for &(m, a) in locs {
        let loc = location(m, a);
        let (key, _, module) = keys.key(loc);
        let module_file = module.rsplit('/').next().unwrap_or(&module).to_string();
        let function = symbolizer.function_name(loc);
        let frames = symbolizer.frames(loc);
        sym.push(&key, a, &module_file, &function, &frames);
    }
    sym.finish()
}

/// The fields of a recording's `recordings` rows that are the same on every row.
struct RecordingRow<'a> {
    id: &'a str,
    host: &'a str,
    labels: &'a str,
    ingest_time_ns: u64,
    ending: Option<&'a str>,
    rows: &'a str,
}

/// The `recordings` rows: one per event, with its samples and weight (every event of the
/// file when it has no samples: a recording without samples is still a recording of its
/// events).
fn recording_rows(
    r: &RecordingRow<'_>,
    src: &Source<'_>,
    per_event: FxHashMap<u16, (u64, u64)>,
) -> Result<RecordBatch> {
    let set = src.set;
    let mut events: Vec<(u16, (u64, u64))> = per_event.into_iter().collect();
    events.sort_unstable();
    if events.is_empty() {
        events = (0..set.events.len()).map(|e| (e as u16, (0, 0))).collect();
    }
    let n = events.len();
    let mut samples_col = UInt64Builder::new();
    let mut weight_col = UInt64Builder::new();
    for (_, (c, w)) in &events {
        samples_col.append_value(*c);
        weight_col.append_value(*w);
    }
    let ev_names: Vec<String> = events.iter().map(|(e, _)| event_name(set, *e)).collect();
    let cols: Vec<ArrayRef> = vec![
        str_col(std::iter::repeat_n(r.id, n)),
        str_col(std::iter::repeat_n(r.host, n)),
        str_col(std::iter::repeat_n(r.labels, n)),
        str_col(std::iter::repeat_n(src.path, n)),
        str_col(std::iter::repeat_n(src.format, n)),
        str_col(ev_names.iter().map(String::as_str)),
        u64_col(std::iter::repeat_n(r.ingest_time_ns, n)),
        Arc::new(samples_col.finish()),
        Arc::new(weight_col.finish()),
        u64_col(std::iter::repeat_n(set.lost, n)),
        str_col(std::iter::repeat_n(r.rows, n)),
        opt_str_col(std::iter::repeat_n(r.ending, n)),
    ];
    RecordBatch::try_new(Table::Recordings.schema(), cols)
        .map_err(|e| Error::Internal(e.to_string()))
}

pub(crate) fn str_col<'a>(it: impl Iterator<Item = &'a str>) -> ArrayRef {
    let mut b = StringBuilder::new();
    for s in it {
        b.append_value(s);
    }
    Arc::new(b.finish())
}

/// A nullable string column.
pub(crate) fn opt_str_col<'a>(it: impl Iterator<Item = Option<&'a str>>) -> ArrayRef {
    let mut b = StringBuilder::new();
    for s in it {
        b.append_option(s);
    }
    Arc::new(b.finish())
}

pub(crate) fn u64_col(it: impl Iterator<Item = u64>) -> ArrayRef {
    let mut b = UInt64Builder::new();
    for v in it {
        b.append_value(v);
    }
    Arc::new(b.finish())
}

#[derive(Default)]
struct SampleColumns {
    recording_id: StringBuilder,
    host: StringBuilder,
    time_ns: UInt64Builder,
    event: StringBuilder,
    weight: UInt64Builder,
    count: UInt64Builder,
    build_id: StringBuilder,
    module: StringBuilder,
    binary_key: StringBuilder,
    address: UInt64Builder,
}

impl SampleColumns {
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        rec: &str,
        host: &str,
        time: Option<u64>,
        event: &str,
        weight: u64,
        count: u64,
        build_id: Option<&str>,
        module: &str,
        key: &str,
        address: u64,
    ) {
        self.recording_id.append_value(rec);
        self.host.append_value(host);
        self.time_ns.append_option(time);
        self.event.append_value(event);
        self.weight.append_value(weight);
        self.count.append_value(count);
        self.build_id.append_option(build_id);
        self.module.append_value(module);
        self.binary_key.append_value(key);
        self.address.append_value(address);
    }

    fn len(&self) -> usize {
        self.address.len()
    }

    fn finish(mut self, schema: &SchemaRef) -> Result<RecordBatch> {
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.recording_id.finish()),
            Arc::new(self.host.finish()),
            Arc::new(self.time_ns.finish()),
            Arc::new(self.event.finish()),
            Arc::new(self.weight.finish()),
            Arc::new(self.count.finish()),
            Arc::new(self.build_id.finish()),
            Arc::new(self.module.finish()),
            Arc::new(self.binary_key.finish()),
            Arc::new(self.address.finish()),
        ];
        RecordBatch::try_new(schema.clone(), cols).map_err(|e| Error::Internal(e.to_string()))
    }
}

#[derive(Default)]
struct SymbolColumns {
    binary_key: StringBuilder,
    address: UInt64Builder,
    module: StringBuilder,
    function: StringBuilder,
    inline_function: StringBuilder,
    inline_chain: StringBuilder,
    file: StringBuilder,
    line: UInt32Builder,
    source_line: StringBuilder,
}

impl SymbolColumns {
    fn push(
        &mut self,
        key: &str,
        address: u64,
        module: &str,
        function: &str,
        frames: &[proftrust_binary::Frame],
    ) {
        self.binary_key.append_value(key);
        self.address.append_value(address);
        self.module.append_value(module);
        self.function.append_value(function);
        let inner = frames.first();
        self.inline_function
            .append_value(inner.map(|f| f.function.as_str()).unwrap_or(function));
        let chain = if frames.is_empty() {
            function.to_string()
        } else {
            frames
                .iter()
                .map(|f| f.function.as_str())
                .collect::<Vec<_>>()
                .join(";")
        };
        self.inline_chain.append_value(chain);
        let file = inner.and_then(|f| f.file.clone());
        let line = inner.and_then(|f| f.line);
        self.file.append_option(file.as_deref());
        self.line.append_option(line);
        match (&file, line) {
            (Some(f), Some(l)) => self.source_line.append_value(format!("{f}:{l}")),
            _ => self.source_line.append_value(function),
        }
    }

    fn finish(mut self) -> Result<RecordBatch> {
        let cols: Vec<ArrayRef> = vec![
            Arc::new(self.binary_key.finish()),
            Arc::new(self.address.finish()),
            Arc::new(self.module.finish()),
            Arc::new(self.function.finish()),
            Arc::new(self.inline_function.finish()),
            Arc::new(self.inline_chain.finish()),
            Arc::new(self.file.finish()),
            Arc::new(self.line.finish()),
            Arc::new(self.source_line.finish()),
        ];
        RecordBatch::try_new(Table::Symbols.schema(), cols)
            .map_err(|e| Error::Internal(e.to_string()))
    }
}

/// Writes `batch` to `path` atomically: a hidden temporary in the same directory, synced,
/// then renamed (an error or an interrupt leaves no half-written `.parquet` file; the
/// queries skip hidden files). An existing `path` is an error: the store is append-only.
/// Returns the file's size and CRC-32, counted as it was written.
pub fn write_parquet(path: &Path, batch: &RecordBatch) -> Result<Written> {
    let dir = path
        .parent()
        .ok_or_else(|| Error::Invalid(format!("{} has no directory", path.display())))?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    if path.exists() {
        return Err(Error::Invalid(format!(
            "{} exists already: the store is append-only (a recording id was reused)",
            path.display()
        )));
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| -> Result<Written> {
        let file = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        // The bytes are counted and checksummed on their way out: the manifest's entry of
        // the file needs no second read of it.
        let file = Checksummed {
            inner: file,
            bytes: 0,
            crc: crc32fast::Hasher::new(),
        };
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_key_value_metadata(Some(vec![KeyValue::new(
                SCHEMA_VERSION_KEY.to_string(),
                SCHEMA_VERSION.to_string(),
            )]))
            .build();
        let mut w =
            ArrowWriter::try_new(std::io::BufWriter::new(file), batch.schema(), Some(props))
                .map_err(|e| Error::Internal(format!("cannot write {}: {e}", tmp.display())))?;
        w.write(batch)
            .map_err(|e| Error::Internal(format!("cannot write {}: {e}", tmp.display())))?;
        let mut inner = w
            .into_inner()
            .map_err(|e| Error::Internal(format!("cannot write {}: {e}", tmp.display())))?;
        inner.flush().map_err(|e| Error::io(&tmp, e))?;
        let file = inner
            .into_inner()
            .map_err(|e| Error::io(&tmp, e.into_error()))?;
        file.inner.sync_all().map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
        Ok(Written {
            bytes: file.bytes,
            crc32: file.crc.finalize(),
        })
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// What [`write_parquet`] wrote: the file's size and CRC-32 (as [`crate::manifest`] lists it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// Size in bytes.
    pub bytes: u64,
    /// CRC-32 (ISO-HDLC) of the whole file.
    pub crc32: u32,
}

/// A writer that counts and checksums what passes through it.
struct Checksummed<W> {
    inner: W,
    bytes: u64,
    crc: crc32fast::Hasher,
}

impl<W: Write> Write for Checksummed<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
