//! # proftrust-fleet
//!
//! Fleet scale (docs/fleet.md): the profiles of many hosts stored as Apache Parquet files
//! (an append-only, partitioned store: [`schema`]), ingested from any profile proftrust
//! reads ([`ingest`]), and the fleet statistics run as query plans on Apache DataFusion,
//! embedded or on an Apache Ballista cluster ([`engine`], [`query`]); the sums the engine
//! returns become the reports of `fleet report` and `fleet diff` ([`report`]) through
//! `proftrust_metrics::fleet`.
//!
//! Integrity: every recording lists what it wrote, and only intact recordings are read
//! ([`manifest`]). The API is async (DataFusion's); the `proftrust-fleet` binary's jobs
//! (`crates/fleet-cli`) wrap it in a runtime.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "ballista")]
pub mod ballista;
pub mod engine;
mod error;
pub mod ingest;
pub mod manifest;
pub mod query;
pub mod report;
pub mod schema;

pub use datafusion;
pub use engine::Engine;
pub use error::{Error, Result};
pub use query::{Level, Selector};
