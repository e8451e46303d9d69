//! The query plans (SQL on the engine's `SessionContext`): per (host, function) sums of the
//! samples joined to the symbols, per host totals, and from them per function Σy, Σy²,
//! Σy·n and the hosts with samples, and the fleet's Σn, Σn² and number of hosts. Only
//! per-function and per-host results are collected; the samples stay in the engine.
//!
//! Notation (docs/fleet-statistics.md): a host h is a cluster; n_h its weight of the event
//! (the periods of its samples summed, in the event's unit: nanoseconds of cpu-clock,
//! cycles, ...), y_h its weight in one function; shares are of weight, so hosts recorded at
//! different rates count by the time (or events) they measured. A stored row without a
//! period (weight 0) weighs its sample count. Sample counts ride along for the binomial
//! floor and the tables.

use crate::error::{Error, Result};
use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type, UInt64Type};
use datafusion::prelude::SessionContext;

/// Aggregation level of the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Level {
    /// The outermost function of each address.
    #[default]
    Function,
    /// The innermost inline frame's function.
    Inline,
    /// The source line (`file:line`) of the innermost frame.
    Line,
}

impl Level {
    /// `function`, `inline` or `line`.
    pub fn name(self) -> &'static str {
        match self {
            Level::Function => "function",
            Level::Inline => "inline",
            Level::Line => "line",
        }
    }

    /// Parses [`Level::name`].
    pub fn parse(s: &str) -> Option<Level> {
        match s {
            "function" => Some(Level::Function),
            "inline" => Some(Level::Inline),
            "line" => Some(Level::Line),
            _ => None,
        }
    }

    fn column(self) -> &'static str {
        match self {
            Level::Function => "function",
            Level::Inline => "inline_function",
            Level::Line => "source_line",
        }
    }
}

/// A label selector `key=value` (a recording matches when it carries the label).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// Label key.
    pub key: String,
    /// Label value.
    pub value: String,
}

impl Selector {
    /// Parses `k=v` (as [`crate::schema::parse_label`]).
    pub fn parse(s: &str) -> Result<Selector> {
        let (key, value) = crate::schema::parse_label(s).ok_or_else(|| {
            Error::Invalid(format!(
                "label selector `{s}` is not KEY=VALUE (e.g. build=A); keys are A-Z a-z 0-9 . _ -"
            ))
        })?;
        Ok(Selector { key, value })
    }

    /// `key=value`.
    pub fn text(&self) -> String {
        format!("{}={}", self.key, self.value)
    }
}

/// SQL string literal.
fn lit(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// One function's sums over the hosts.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionSums {
    /// Name at the level.
    pub name: String,
    /// Module file name.
    pub module: String,
    /// Its samples (count).
    pub samples: u64,
    /// Σ y_h: its weight.
    pub y: u64,
    /// Σ y_h².
    pub y_sq: f64,
    /// Σ y_h n_h.
    pub y_n: f64,
    /// Hosts with y_h > 0.
    pub hosts: u64,
}

/// The fleet's (or one side's) totals.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Totals {
    /// Hosts (clusters) with samples of the event.
    pub clusters: u64,
    /// N = Σ n_h (weight).
    pub total: u64,
    /// Σ n_h².
    pub total_sq: f64,
    /// Σ over stored rows of weight²/samples (for the effective number of samples).
    pub sq_per_sample: f64,
    /// Samples of the event (count).
    pub samples: u64,
    /// Recordings with samples of the event.
    pub recordings: u64,
}

/// A host's samples.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTotal {
    /// Host.
    pub host: String,
    /// Its samples (count).
    pub samples: u64,
    /// n_h, its weight.
    pub weight: u64,
    /// Σ over its stored rows of weight²/samples.
    pub sq_per_sample: f64,
    /// Its recordings (of the event).
    pub recordings: u64,
}

/// One host's samples in one function (the per-host rows of the top functions).
#[derive(Debug, Clone, PartialEq)]
pub struct HostFunction {
    /// Host.
    pub host: String,
    /// Function name at the level.
    pub name: String,
    /// Module.
    pub module: String,
    /// y_h, the weight.
    pub y: u64,
    /// Its samples (count).
    pub samples: u64,
}

/// The events of the store, most samples first: `(event, samples)`.
pub async fn events(ctx: &SessionContext) -> Result<Vec<(String, u64)>> {
    let b = run(
        ctx,
        "listing the events",
        "SELECT \"event\", CAST(SUM(samples) AS BIGINT) AS s FROM recordings \
         GROUP BY \"event\" ORDER BY s DESC, \"event\"",
    )
    .await?;
    let mut out = Vec::new();
    for batch in &b {
        let ev = strings(batch, 0)?;
        let s = ints(batch, 1)?;
        for i in 0..batch.num_rows() {
            out.push((ev[i].clone(), s[i]));
        }
    }
    Ok(out)
}

/// The label keys of the store, sorted.
pub async fn label_keys(ctx: &SessionContext) -> Result<Vec<String>> {
    let b = run(
        ctx,
        "listing the labels",
        "SELECT DISTINCT \"key\" FROM labels ORDER BY \"key\"",
    )
    .await?;
    let mut out = Vec::new();
    for batch in &b {
        out.extend(strings(batch, 0)?);
    }
    Ok(out)
}

/// The distinct values of label `key`, sorted.
pub async fn label_values(ctx: &SessionContext, key: &str) -> Result<Vec<String>> {
    let b = run(
        ctx,
        "listing the labels",
        &format!(
            "SELECT DISTINCT \"value\" FROM labels WHERE \"key\" = {} ORDER BY \"value\"",
            lit(key)
        ),
    )
    .await?;
    let mut out = Vec::new();
    for batch in &b {
        out.extend(strings(batch, 0)?);
    }
    Ok(out)
}

/// The queries of one side: the event, the level, and optionally a label selector.
#[derive(Debug, Clone)]
pub struct Scope {
    /// Event name.
    pub event: String,
    /// Level.
    pub level: Level,
    /// Only recordings with this label.
    pub selector: Option<Selector>,
}

impl Scope {
    /// The common table expressions: `rec` (complete recordings of the event in scope),
    /// `s` (samples per host and address), `sym` (symbols, deduplicated; the unnamed
    /// addresses of a pseudo-module such as `[kernel.kallsyms]` grouped into one row
    /// `[kernel.kallsyms] (unnamed)`, so that a kernel without symbols is one function, not
    /// one per address), `hf` (per host and function), `ht` (per host).
    fn with(&self) -> String {
        let ev = lit(&self.event);
        let label = match &self.selector {
            Some(sel) => format!(
                " AND recording_id IN (SELECT recording_id FROM labels WHERE \"key\" = {} AND \"value\" = {})",
                lit(&sel.key),
                lit(&sel.value)
            ),
            None => String::new(),
        };
        let col = self.level.column();
        // A row's weight: its periods summed, or its sample count where it has none.
        let w = "CASE WHEN weight > 0 THEN weight ELSE \"count\" END";
        format!(
            "WITH rec AS (SELECT DISTINCT recording_id, host FROM recordings WHERE \"event\" = {ev}{label}), \
             s AS (SELECT host, binary_key, address, SUM({w}) AS c, SUM(\"count\") AS k, \
                   SUM(CAST({w} AS DOUBLE) * CAST({w} AS DOUBLE) / CAST(\"count\" AS DOUBLE)) AS q \
                   FROM samples \
                   WHERE \"event\" = {ev} AND \"count\" > 0 \
                   AND recording_id IN (SELECT recording_id FROM rec) \
                   GROUP BY host, binary_key, address), \
             sym AS (SELECT binary_key, address, MIN(module) AS module, \
                     MIN(CASE WHEN module LIKE '[%' AND {col} LIKE '%+0x%' \
                         THEN module || ' (unnamed)' ELSE {col} END) AS name \
                     FROM symbols GROUP BY binary_key, address), \
             hf AS (SELECT s.host AS host, sym.name AS name, sym.module AS module, SUM(s.c) AS y, \
                    SUM(s.k) AS yk \
                    FROM s JOIN sym ON s.binary_key = sym.binary_key AND s.address = sym.address \
                    GROUP BY s.host, sym.name, sym.module), \
             ht AS (SELECT host, SUM(c) AS n, SUM(k) AS nk, SUM(q) AS nq FROM s GROUP BY host) "
        )
    }
}

/// The fleet's totals in `scope`.
pub async fn totals(ctx: &SessionContext, scope: &Scope) -> Result<Totals> {
    let sql = format!(
        "{} SELECT a.c, a.t, a.tsq, b.r, a.tk, a.tq FROM \
         (SELECT CAST(COUNT(*) AS BIGINT) AS c, CAST(COALESCE(SUM(n), 0) AS BIGINT) AS t, \
          CAST(COALESCE(SUM(CAST(n AS DOUBLE) * CAST(n AS DOUBLE)), 0) AS DOUBLE) AS tsq, \
          CAST(COALESCE(SUM(nk), 0) AS BIGINT) AS tk, \
          CAST(COALESCE(SUM(nq), 0) AS DOUBLE) AS tq \
          FROM ht) a \
         CROSS JOIN (SELECT CAST(COUNT(*) AS BIGINT) AS r FROM rec) b",
        scope.with()
    );
    let b = run(ctx, "computing the fleet totals", &sql).await?;
    let batch = b
        .iter()
        .find(|b| b.num_rows() > 0)
        .ok_or_else(|| Error::Internal("no totals row".to_string()))?;
    Ok(Totals {
        clusters: ints(batch, 0)?[0],
        total: ints(batch, 1)?[0],
        total_sq: floats(batch, 2)?[0],
        recordings: ints(batch, 3)?[0],
        samples: ints(batch, 4)?[0],
        sq_per_sample: floats(batch, 5)?[0],
    })
}

/// Per function Σy, Σy², Σy·n and hosts, most samples first (ties by name, module).
pub async fn functions(ctx: &SessionContext, scope: &Scope) -> Result<Vec<FunctionSums>> {
    let sql = format!(
        "{} SELECT hf.name, hf.module, CAST(SUM(hf.y) AS BIGINT) AS y, \
         CAST(SUM(CAST(hf.y AS DOUBLE) * CAST(hf.y AS DOUBLE)) AS DOUBLE), \
         CAST(SUM(CAST(hf.y AS DOUBLE) * CAST(ht.n AS DOUBLE)) AS DOUBLE), \
         CAST(COUNT(*) AS BIGINT), CAST(SUM(hf.yk) AS BIGINT) \
         FROM hf JOIN ht ON hf.host = ht.host \
         GROUP BY hf.name, hf.module ORDER BY y DESC, hf.name, hf.module",
        scope.with()
    );
    let b = run(ctx, "computing the per-function sums", &sql).await?;
    let mut out = Vec::new();
    for batch in &b {
        let (n, m, y, ysq, yn, h, k) = (
            strings(batch, 0)?,
            strings(batch, 1)?,
            ints(batch, 2)?,
            floats(batch, 3)?,
            floats(batch, 4)?,
            ints(batch, 5)?,
            ints(batch, 6)?,
        );
        for i in 0..batch.num_rows() {
            out.push(FunctionSums {
                name: n[i].clone(),
                module: m[i].clone(),
                samples: k[i],
                y: y[i],
                y_sq: ysq[i],
                y_n: yn[i],
                hosts: h[i],
            });
        }
    }
    Ok(out)
}

/// Per host n_h and recordings, by host name.
pub async fn hosts(ctx: &SessionContext, scope: &Scope) -> Result<Vec<HostTotal>> {
    let sql = format!(
        "{} SELECT ht.host, CAST(ht.n AS BIGINT), CAST(COALESCE(rc.r, 0) AS BIGINT), \
         CAST(ht.nk AS BIGINT), CAST(ht.nq AS DOUBLE) \
         FROM ht LEFT JOIN (SELECT host, COUNT(*) AS r FROM rec GROUP BY host) rc \
         ON rc.host = ht.host ORDER BY ht.host",
        scope.with()
    );
    let b = run(ctx, "computing the per-host totals", &sql).await?;
    let mut out = Vec::new();
    for batch in &b {
        let (h, n, r, k, q) = (
            strings(batch, 0)?,
            ints(batch, 1)?,
            ints(batch, 2)?,
            ints(batch, 3)?,
            floats(batch, 4)?,
        );
        for i in 0..batch.num_rows() {
            out.push(HostTotal {
                host: h[i].clone(),
                samples: k[i],
                weight: n[i],
                sq_per_sample: q[i],
                recordings: r[i],
            });
        }
    }
    Ok(out)
}

/// The labels of each host (union over its recordings), `k=v` sorted.
pub async fn host_labels(ctx: &SessionContext) -> Result<Vec<(String, String)>> {
    let b = run(
        ctx,
        "listing the hosts' labels",
        "SELECT DISTINCT host, \"key\" || '=' || \"value\" AS l FROM labels ORDER BY host, l",
    )
    .await?;
    let mut out = Vec::new();
    for batch in &b {
        let (h, l) = (strings(batch, 0)?, strings(batch, 1)?);
        for i in 0..batch.num_rows() {
            out.push((h[i].clone(), l[i].clone()));
        }
    }
    Ok(out)
}

/// The per-host rows y_h of the functions `names` (hosts without samples in a function
/// have no row).
pub async fn host_functions(
    ctx: &SessionContext,
    scope: &Scope,
    names: &[String],
) -> Result<Vec<HostFunction>> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let list = names.iter().map(|n| lit(n)).collect::<Vec<_>>().join(", ");
    let sql = format!(
        "{} SELECT host, name, module, CAST(y AS BIGINT), CAST(yk AS BIGINT) FROM hf \
         WHERE name IN ({list}) \
         ORDER BY host, name, module",
        scope.with()
    );
    let b = run(
        ctx,
        "computing the per-host rows of the top functions",
        &sql,
    )
    .await?;
    let mut out = Vec::new();
    for batch in &b {
        let (h, n, m, y, k) = (
            strings(batch, 0)?,
            strings(batch, 1)?,
            strings(batch, 2)?,
            ints(batch, 3)?,
            ints(batch, 4)?,
        );
        for i in 0..batch.num_rows() {
            out.push(HostFunction {
                host: h[i].clone(),
                name: n[i].clone(),
                module: m[i].clone(),
                y: y[i],
                samples: k[i],
            });
        }
    }
    Ok(out)
}

async fn run(ctx: &SessionContext, what: &str, sql: &str) -> Result<Vec<RecordBatch>> {
    let df = ctx.sql(sql).await.map_err(|e| Error::engine(what, e))?;
    df.collect().await.map_err(|e| Error::engine(what, e))
}

/// Column `i` as text (null: empty).
pub(crate) fn strings(b: &RecordBatch, i: usize) -> Result<Vec<String>> {
    let c = b.column(i);
    let c = datafusion::arrow::compute::cast(c, &DataType::Utf8)
        .map_err(|e| Error::Internal(e.to_string()))?;
    let s = c
        .as_string_opt::<i32>()
        .ok_or_else(|| Error::Internal(format!("column {i} is not text")))?;
    Ok((0..s.len())
        .map(|j| {
            if s.is_null(j) {
                String::new()
            } else {
                s.value(j).to_string()
            }
        })
        .collect())
}

/// Column `i` as unsigned integers (Int64 or UInt64; null and negative: 0).
pub(crate) fn ints(b: &RecordBatch, i: usize) -> Result<Vec<u64>> {
    let c = b.column(i);
    if let Some(a) = c.as_primitive_opt::<Int64Type>() {
        return Ok((0..a.len())
            .map(|j| {
                if a.is_null(j) {
                    0
                } else {
                    a.value(j).max(0) as u64
                }
            })
            .collect());
    }
    if let Some(a) = c.as_primitive_opt::<UInt64Type>() {
        return Ok((0..a.len())
            .map(|j| if a.is_null(j) { 0 } else { a.value(j) })
            .collect());
    }
    Err(Error::Internal(format!(
        "column {i} is {} not an integer",
        c.data_type()
    )))
}

fn floats(b: &RecordBatch, i: usize) -> Result<Vec<f64>> {
    let c = b.column(i);
    let a = c
        .as_primitive_opt::<Float64Type>()
        .ok_or_else(|| Error::Internal(format!("column {i} is {} not a float", c.data_type())))?;
    Ok((0..a.len())
        .map(|j| if a.is_null(j) { 0.0 } else { a.value(j) })
        .collect())
}

/// Hosts that recorded events other than `event` and none of it, with those events
/// (`(host, events)`, by host): they are not in `event`'s shares.
pub async fn hosts_without(ctx: &SessionContext, event: &str) -> Result<Vec<(String, String)>> {
    let ev = lit(event);
    let b = run(
        ctx,
        "listing the hosts of other events",
        &format!(
            "SELECT host, \"event\" FROM recordings WHERE host NOT IN \
             (SELECT host FROM recordings WHERE \"event\" = {ev}) \
             GROUP BY host, \"event\" ORDER BY host, \"event\""
        ),
    )
    .await?;
    let mut out: Vec<(String, String)> = Vec::new();
    for batch in &b {
        let (h, e) = (strings(batch, 0)?, strings(batch, 1)?);
        for i in 0..batch.num_rows() {
            match out.last_mut() {
                Some((last, evs)) if *last == h[i] => {
                    evs.push_str(", ");
                    evs.push_str(&e[i]);
                }
                _ => out.push((h[i].clone(), e[i].clone())),
            }
        }
    }
    Ok(out)
}

/// Recordings in `scope` whose program did not end normally: `(host, recording_id,
/// ending)`, by host and recording.
pub async fn recordings_ended_early(
    ctx: &SessionContext,
    scope: &Scope,
) -> Result<Vec<(String, String, String)>> {
    let sql = format!(
        "{} SELECT DISTINCT r.host, r.recording_id, r.ending FROM recordings r \
         WHERE r.ending IS NOT NULL AND r.recording_id IN (SELECT recording_id FROM rec) \
         ORDER BY r.host, r.recording_id",
        scope.with()
    );
    let b = run(ctx, "listing the recordings that ended early", &sql).await?;
    let mut out = Vec::new();
    for batch in &b {
        let (h, r, e) = (strings(batch, 0)?, strings(batch, 1)?, strings(batch, 2)?);
        for i in 0..batch.num_rows() {
            out.push((h[i].clone(), r[i].clone(), e[i].clone()));
        }
    }
    Ok(out)
}

/// Per recording of `event` in `scope`: `(host, samples, weight)`; a recording whose
/// weight equals its samples carried no periods (every sample weighs 1).
pub async fn recording_weights(
    ctx: &SessionContext,
    scope: &Scope,
) -> Result<Vec<(String, u64, u64)>> {
    let sql = format!(
        "{} SELECT r.host, CAST(r.samples AS BIGINT), CAST(r.weight AS BIGINT) FROM recordings r \
         WHERE r.\"event\" = {} AND r.recording_id IN (SELECT recording_id FROM rec) \
         ORDER BY r.host, r.recording_id",
        scope.with(),
        lit(&scope.event)
    );
    let b = run(ctx, "listing the recordings' weights", &sql).await?;
    let mut out = Vec::new();
    for batch in &b {
        let (h, n, w) = (strings(batch, 0)?, ints(batch, 1)?, ints(batch, 2)?);
        for i in 0..batch.num_rows() {
            out.push((h[i].clone(), n[i], w[i]));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_selectors() {
        assert_eq!(lit("a'b"), "'a''b'");
        let s = Selector::parse("build=A").unwrap();
        assert_eq!(s.text(), "build=A");
        assert!(Selector::parse("build").is_err());
        assert_eq!(Level::parse("inline"), Some(Level::Inline));
        assert_eq!(Level::parse("loop"), None);
    }
}
