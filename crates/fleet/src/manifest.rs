//! The store's integrity: every recording lists the files it wrote (table, path, rows, size
//! and CRC-32) in the `files` table, written just before its `recordings` file (the commit).
//! Before any query, [`verify`] checks the store against those lists and decides what is
//! read: only the files a complete recording listed, each as it was written. A missing,
//! changed or foreign file leaves its recording out of every table, an extra file (a copy, a
//! file from elsewhere) is not read, and each is named in a warning of the report, so a
//! damaged store can never be counted wrong in silence.
//!
//! Reading chosen: the CRC is over the whole file (CRC-32/ISO-HDLC, `crc32fast`), checked on
//! every report; a store is read in full by the queries anyway, so the check adds one more
//! read of data that is then in the page cache.

use crate::error::{Error, Result};
use crate::ingest::{check_version, parquet_files, str_col, u64_col, write_parquet, Written};
use crate::query::{ints, strings};
use crate::schema::Table;
use datafusion::arrow::array::RecordBatch;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One file a recording wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// The table (`samples`, `labels`, `symbols`).
    pub table: String,
    /// Path relative to the store (`samples/host=web-01/ID.parquet`).
    pub path: String,
    /// Rows in the file.
    pub rows: u64,
    /// Size in bytes.
    pub bytes: u64,
    /// CRC-32 of the whole file.
    pub crc32: u32,
}

/// CRC-32 and size of `path`.
fn checksum(path: &Path) -> Result<(u64, u32)> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut h = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf).map_err(|e| Error::io(path, e))?;
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        n += k as u64;
    }
    Ok((n, h.finalize()))
}

/// The entry of a file just written at `path` (under `store`) with `rows` rows, as
/// [`write_parquet`] wrote it.
pub fn entry(store: &Path, table: Table, path: &Path, rows: u64, written: Written) -> FileEntry {
    FileEntry {
        table: table.name().to_string(),
        path: rel(store, path),
        rows,
        bytes: written.bytes,
        crc32: written.crc32,
    }
}

/// Writes the `files` rows of recording `id` of `host` (before its `recordings` file).
pub fn write(store: &Path, host: &str, id: &str, files: &[FileEntry]) -> Result<PathBuf> {
    let n = files.len();
    let cols = vec![
        str_col(std::iter::repeat_n(id, n)),
        str_col(std::iter::repeat_n(host, n)),
        str_col(files.iter().map(|f| f.table.as_str())),
        str_col(files.iter().map(|f| f.path.as_str())),
        u64_col(files.iter().map(|f| f.rows)),
        u64_col(files.iter().map(|f| f.bytes)),
        u64_col(files.iter().map(|f| u64::from(f.crc32))),
    ];
    let batch = RecordBatch::try_new(Table::Files.schema(), cols)
        .map_err(|e| Error::Internal(e.to_string()))?;
    let p = Table::Files
        .dir(store)
        .join(format!("host={host}"))
        .join(format!("{id}.parquet"));
    write_parquet(&p, &batch)?;
    Ok(p)
}

/// What [`verify`] decided.
#[derive(Debug, Clone, Default)]
pub struct Verified {
    /// Per table, the files to read (absolute, sorted).
    pub files: BTreeMap<&'static str, Vec<PathBuf>>,
    /// Recordings read.
    pub recordings: u64,
    /// Every problem found, in plain language (the report's warnings).
    pub warnings: Vec<String>,
}

impl Verified {
    /// The files of `t` to read.
    pub fn of(&self, t: Table) -> &[PathBuf] {
        self.files.get(t.name()).map_or(&[], Vec::as_slice)
    }
}

/// The batches of a store file (after its version check).
fn read_batches(p: &Path) -> Result<Vec<RecordBatch>> {
    let f = std::fs::File::open(p).map_err(|e| Error::io(p, e))?;
    let b = ParquetRecordBatchReaderBuilder::try_new(f).map_err(|e| Error::corrupt(p, e))?;
    check_version(p, b.metadata().file_metadata().key_value_metadata())?;
    let r = b.build().map_err(|e| Error::corrupt(p, e))?;
    r.collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::corrupt(p, e))
}

/// The rows of a Parquet file as its footer states them.
fn footer_rows(p: &Path) -> Result<u64> {
    use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
    let f = std::fs::File::open(p).map_err(|e| Error::io(p, e))?;
    let r = SerializedFileReader::new(f).map_err(|e| Error::corrupt(p, e))?;
    Ok(r.metadata().file_metadata().num_rows().max(0) as u64)
}

fn rel(store: &Path, p: &Path) -> String {
    p.strip_prefix(store).unwrap_or(p).display().to_string()
}

/// Checks `store` against its recordings' file lists (see the module doc) and returns the
/// files to read. Errors only where nothing can be read (a recordings file that is not a
/// fleet file of this version is named as such); every other problem is a warning and the
/// damaged recording is left out.
pub fn verify(store: &Path) -> Result<Verified> {
    let mut v = Verified::default();
    let (recs, mut extra) = recordings(store)?;
    let lists = file_lists(store)?;
    let state = file_states(store, &lists);
    let mut read: BTreeMap<&'static str, BTreeSet<PathBuf>> = BTreeMap::new();
    let mut left_out = Vec::new();
    for (id, (host, rec_file)) in &recs {
        match intact_files(id, host, lists.get(id), &state) {
            Err(why) => left_out.push(why),
            Ok(files) => {
                v.recordings += 1;
                read.entry(Table::Recordings.name())
                    .or_default()
                    .insert(rec_file.clone());
                for e in files {
                    if let Some(t) = Table::ALL.iter().find(|t| t.name() == e.table) {
                        read.entry(t.name())
                            .or_default()
                            .insert(store.join(&e.path));
                    }
                }
            }
        }
    }
    // Symbols are shared (each (binary, address) is written once, by the first recording
    // that saw it): every intact symbols file is read, whoever's recording it is.
    for e in lists.values().flatten() {
        if e.table == Table::Symbols.name() {
            match &state[&e.path] {
                Ok(()) => {
                    read.entry(Table::Symbols.name())
                        .or_default()
                        .insert(store.join(&e.path));
                }
                Err(why) => left_out.push(format!(
                    "{}: {why}: its symbols are not read (their addresses show as module+0xADDR)",
                    e.path
                )),
            }
        }
    }
    v.files = read
        .into_iter()
        .map(|(t, s)| (t, s.into_iter().collect()))
        .collect();
    extra.extend(unlisted_files(store, &lists)?);
    damage_warnings(&mut v, left_out, &extra);
    Ok(v)
}

/// Recording id -> (host, its recordings file).
type RecordingFiles = BTreeMap<String, (String, PathBuf)>;

/// The recordings of `store`, each with the file at its canonical place; and the
/// recordings files found elsewhere (copies, files moved: a recording is read once, from its
/// own file).
fn recordings(store: &Path) -> Result<(RecordingFiles, BTreeSet<String>)> {
    let mut recs = RecordingFiles::new();
    let mut extra: BTreeSet<String> = BTreeSet::new();
    for p in parquet_files(&Table::Recordings.dir(store))? {
        let batches = read_batches(&p)?;
        let mut ids = BTreeSet::new();
        for b in &batches {
            let (id, host) = (strings(b, 0)?, strings(b, 1)?);
            for (i, h) in id.into_iter().zip(host) {
                ids.insert((i, h));
            }
        }
        for (id, host) in ids {
            let canonical = Table::Recordings
                .dir(store)
                .join(format!("host={host}"))
                .join(format!("{id}.parquet"));
            if p != canonical {
                extra.insert(rel(store, &p));
                continue;
            }
            recs.insert(id, (host, p.clone()));
        }
    }
    Ok((recs, extra))
}

/// Each recording's file list, by recording id.
fn file_lists(store: &Path) -> Result<BTreeMap<String, Vec<FileEntry>>> {
    let mut lists: BTreeMap<String, Vec<FileEntry>> = BTreeMap::new();
    for p in parquet_files(&Table::Files.dir(store))? {
        for b in read_batches(&p)? {
            let (id, table, path) = (strings(&b, 0)?, strings(&b, 2)?, strings(&b, 3)?);
            let (rows, bytes, crc) = (ints(&b, 4)?, ints(&b, 5)?, ints(&b, 6)?);
            for i in 0..b.num_rows() {
                lists.entry(id[i].clone()).or_default().push(FileEntry {
                    table: table[i].clone(),
                    path: path[i].clone(),
                    rows: rows[i],
                    bytes: bytes[i],
                    crc32: crc[i] as u32,
                });
            }
        }
    }
    Ok(lists)
}

/// Each listed file as it is now: `Ok(())`, or what is wrong with it (missing, unreadable,
/// another size or CRC, another number of rows).
fn file_states(
    store: &Path,
    lists: &BTreeMap<String, Vec<FileEntry>>,
) -> BTreeMap<String, std::result::Result<(), String>> {
    let mut state = BTreeMap::new();
    for e in lists.values().flatten() {
        let p = store.join(&e.path);
        let s = match checksum(&p) {
            Err(_) if !p.exists() => Err("missing".to_string()),
            Err(err) => Err(format!("unreadable ({err})")),
            Ok((bytes, crc)) if (bytes, crc) != (e.bytes, e.crc32) => Err(format!(
                "not the file the ingest wrote ({bytes} bytes, CRC {crc:08x}; written: {} bytes, CRC {:08x})",
                e.bytes, e.crc32
            )),
            Ok(_) => match footer_rows(&p) {
                Ok(r) if r == e.rows => Ok(()),
                Ok(r) => Err(format!("{r} rows where the ingest wrote {}", e.rows)),
                Err(err) => Err(format!("unreadable ({err})")),
            },
        };
        state.insert(e.path.clone(), s);
    }
    state
}

/// The files of recording `id` other than symbols, when every one is intact; else the
/// warning that leaves the recording out.
fn intact_files<'a>(
    id: &str,
    host: &str,
    files: Option<&'a Vec<FileEntry>>,
    state: &BTreeMap<String, std::result::Result<(), String>>,
) -> std::result::Result<Vec<&'a FileEntry>, String> {
    let Some(files) = files else {
        return Err(format!(
            "recording {id} (host {host}) lists no files (no files/host={host}/{id}.parquet): left out"
        ));
    };
    let own: Vec<&FileEntry> = files
        .iter()
        .filter(|e| e.table != Table::Symbols.name())
        .collect();
    let bad: Vec<String> = own
        .iter()
        .filter_map(|e| match &state[&e.path] {
            Ok(()) => None,
            Err(why) => Some(format!("{}: {why}", e.path)),
        })
        .collect();
    if !bad.is_empty() {
        return Err(format!(
            "recording {id} (host {host}) left out of every table: {}",
            bad.join("; ")
        ));
    }
    Ok(own)
}

/// Files of the data tables nobody listed: copies, files from elsewhere.
fn unlisted_files(
    store: &Path,
    lists: &BTreeMap<String, Vec<FileEntry>>,
) -> Result<BTreeSet<String>> {
    let listed: BTreeSet<&str> = lists.values().flatten().map(|e| e.path.as_str()).collect();
    let mut extra = BTreeSet::new();
    for t in [Table::Samples, Table::Labels, Table::Symbols, Table::Files] {
        for p in parquet_files(&t.dir(store))? {
            let r = rel(store, &p);
            if t != Table::Files && !listed.contains(r.as_str()) {
                extra.insert(r);
            }
        }
    }
    Ok(extra)
}

/// The warnings of a damaged store: the recordings left out, the files no recording wrote,
/// and that the numbers are of the intact recordings only.
fn damage_warnings(v: &mut Verified, left_out: Vec<String>, extra: &BTreeSet<String>) {
    let n_left = left_out.len();
    v.warnings.extend(left_out);
    if !extra.is_empty() {
        let list: Vec<&String> = extra.iter().take(8).collect();
        v.warnings.push(format!(
            "{} file(s) in the store that no recording wrote are not read (a copy, or a file \
             from elsewhere): {}{}",
            extra.len(),
            list.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            if extra.len() > 8 { ", ..." } else { "" }
        ));
    }
    if n_left > 0 || !extra.is_empty() {
        v.warnings.push(format!(
            "the store is damaged: these numbers are of the {} intact recording(s); re-ingest \
             the recordings left out (their sources are in the recordings table) into a new store",
            v.recordings
        ));
    }
}

/// Removes the hidden temporaries (`.NAME.tmp-PID`) that ingests which are no longer running
/// left in `store` (an ingest killed between writing and renaming a file). A temporary of a
/// live process is left alone. Returns how many were removed.
pub fn sweep_temporaries(store: &Path) -> usize {
    let mut removed = 0;
    let mut stack = vec![store.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in rd.flatten() {
            let p = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(p);
                continue;
            }
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let Some(pid) = name
                .strip_prefix('.')
                .and_then(|n| n.rsplit_once(".tmp-"))
                .and_then(|(_, pid)| pid.parse::<u32>().ok())
            else {
                continue;
            };
            if !Path::new(&format!("/proc/{pid}")).exists() && std::fs::remove_file(&p).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}
