//! The store's tables: their Arrow schemas (written as Parquet), the partition layout, and
//! the schema version every file carries in its key-value metadata (docs/fleet.md).
//!
//! ```text
//! DIR/samples/host=NAME/REC.parquet     one row per sample, or per aggregated location
//! DIR/recordings/host=NAME/REC.parquet  one row per (recording, event)
//! DIR/labels/host=NAME/REC.parquet      one row per (recording, label)
//! DIR/symbols/REC.parquet               one row per (binary, address) first seen by REC
//! DIR/files/host=NAME/REC.parquet       one row per file REC wrote: table, path, rows, size, CRC-32
//! ```
//!
//! An ingest only ever adds files (each written to a hidden temporary and renamed), so
//! ingesting more hosts never rewrites what is there. A recording is complete when its
//! `recordings` file exists: that file is written last, just after the recording's `files`
//! rows, and the queries read only the files complete recordings listed, as they were
//! written ([`crate::manifest`]).

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Version of the store's schema, written as the `schema_version` key of every Parquet
/// file's metadata. Readers refuse files of another version.
pub const SCHEMA_VERSION: u32 = 3;

/// The metadata key holding [`SCHEMA_VERSION`].
pub const SCHEMA_VERSION_KEY: &str = "schema_version";

/// The tables of a store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// Samples (or aggregated locations with a count).
    Samples,
    /// Recordings: one row per (recording, event).
    Recordings,
    /// Labels: one row per (recording, `key`, `value`).
    Labels,
    /// Symbols: one row per (binary, address).
    Symbols,
    /// Files: one row per file a recording wrote (the store's integrity, [`crate::manifest`]).
    Files,
}

impl Table {
    /// Every table.
    pub const ALL: [Table; 5] = [
        Table::Samples,
        Table::Recordings,
        Table::Labels,
        Table::Symbols,
        Table::Files,
    ];

    /// The table's name (its directory under the store, and its SQL name).
    pub fn name(self) -> &'static str {
        match self {
            Table::Samples => "samples",
            Table::Recordings => "recordings",
            Table::Labels => "labels",
            Table::Symbols => "symbols",
            Table::Files => "files",
        }
    }

    /// The table's directory in `store`.
    pub fn dir(self, store: &Path) -> PathBuf {
        store.join(self.name())
    }

    /// The table's Arrow schema.
    pub fn schema(self) -> SchemaRef {
        match self {
            Table::Samples => samples_schema(),
            Table::Recordings => recordings_schema(),
            Table::Labels => labels_schema(),
            Table::Symbols => symbols_schema(),
            Table::Files => files_schema(),
        }
    }

    /// Whether the table is partitioned by host (`host=NAME/` directories).
    pub fn by_host(self) -> bool {
        !matches!(self, Table::Symbols)
    }
}

fn utf8(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::Utf8, nullable)
}

fn u64f(name: &str, nullable: bool) -> Field {
    Field::new(name, DataType::UInt64, nullable)
}

/// `samples`: `recording_id`, `host`, `time_ns` (null in aggregated rows), `event`,
/// `weight` (sum of the periods), `count` (samples), `build_id` (hex, null when the
/// recording has none), `module` (path as recorded), `binary_key` (the build-id, else the
/// module path: the key of `symbols`), `address` (module-relative SVMA, as `objdump -d`
/// prints it; the raw address for unmapped samples, whose module is `[unknown]`).
pub fn samples_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        utf8("recording_id", false),
        utf8("host", false),
        u64f("time_ns", true),
        utf8("event", false),
        u64f("weight", false),
        u64f("count", false),
        utf8("build_id", true),
        utf8("module", false),
        utf8("binary_key", false),
        u64f("address", false),
    ]))
}

/// `recordings`: `recording_id`, `host`, `labels` (`k=v` sorted, comma-separated), `source`
/// (the ingested file), `format`, `event`, `ingest_time_ns` (Unix time), `samples` (of the
/// event), `weight`, `lost` (samples the recording lost), `rows` (`aggregated` or `sample`),
/// `ending` (how the recorded program ended when that was not a normal exit: `interrupted
/// (proftrust received SIGINT)`, `killed by SIGKILL`, `exited with status 3`...; null for a normal exit or when
/// the file does not say; schema version 3).
pub fn recordings_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        utf8("recording_id", false),
        utf8("host", false),
        utf8("labels", false),
        utf8("source", false),
        utf8("format", false),
        utf8("event", false),
        u64f("ingest_time_ns", false),
        u64f("samples", false),
        u64f("weight", false),
        u64f("lost", false),
        utf8("rows", false),
        utf8("ending", true),
    ]))
}

/// `labels`: `recording_id`, `host`, `key`, `value` (one row per label of a recording;
/// `fleet diff --a k=v` selects the recordings with a row `key = k AND value = v`).
pub fn labels_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        utf8("recording_id", false),
        utf8("host", false),
        utf8("key", false),
        utf8("value", false),
    ]))
}

/// `symbols`: `binary_key`, `address`, `module` (file name), `function` (outermost
/// function, or `module+0xADDR` when unresolved), `inline_function` (innermost inline
/// frame's function, else `function`), `inline_chain` (innermost first, `;`-separated),
/// `file` and `line` (innermost frame's, null when unknown), `source_line` (`file:line`,
/// else `function`).
pub fn symbols_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        utf8("binary_key", false),
        u64f("address", false),
        utf8("module", false),
        utf8("function", false),
        utf8("inline_function", false),
        utf8("inline_chain", false),
        utf8("file", true),
        Field::new("line", DataType::UInt32, true),
        utf8("source_line", false),
    ]))
}

/// `files`: `recording_id`, `host`, `table` (`samples`, `labels` or `symbols`), `path`
/// (relative to the store), `rows`, `bytes`, `crc32` (of the whole file): what each
/// recording wrote, checked before every query ([`crate::manifest::verify`]).
pub fn files_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        utf8("recording_id", false),
        utf8("host", false),
        utf8("table", false),
        utf8("path", false),
        u64f("rows", false),
        u64f("bytes", false),
        u64f("crc32", false),
    ]))
}

/// Whether `name` is usable as a host name (a directory name): 1 to 128 of
/// `A-Z a-z 0-9 . _ -`, not starting with `.`.
pub fn valid_host(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Parses one `k=v` label: the key is 1 to 64 of `A-Z a-z 0-9 . _ -`, the value any
/// text without `,` (may be empty).
pub fn parse_label(s: &str) -> Option<(String, String)> {
    let (k, v) = s.split_once('=')?;
    let key_ok = !k.is_empty()
        && k.len() <= 64
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !key_ok || v.contains(',') || v.chars().any(char::is_control) {
        return None;
    }
    Some((k.to_string(), v.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_and_labels() {
        assert!(valid_host("web-01.dc2"));
        assert!(!valid_host(""));
        assert!(!valid_host(".hidden"));
        assert!(!valid_host("a/b"));
        assert!(!valid_host("a b"));
        assert_eq!(
            parse_label("build=A"),
            Some(("build".to_string(), "A".to_string()))
        );
        assert_eq!(
            parse_label("week=2026-47"),
            Some(("week".to_string(), "2026-47".to_string()))
        );
        assert_eq!(parse_label("k="), Some(("k".to_string(), String::new())));
        assert_eq!(parse_label("build"), None);
        assert_eq!(parse_label("=A"), None);
        assert_eq!(parse_label("a b=c"), None);
    }

    #[test]
    fn tables() {
        assert_eq!(Table::Samples.schema().fields().len(), 10);
        assert!(Table::Samples.by_host());
        assert!(!Table::Symbols.by_host());
        assert_eq!(
            Table::Labels.dir(Path::new("/s")),
            PathBuf::from("/s/labels")
        );
    }
}
