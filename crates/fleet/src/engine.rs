//! The query engine: Apache DataFusion embedded in the process (the default), or an Apache
//! Ballista cluster (`ballista://HOST:PORT`, cargo feature `ballista`). Both give a
//! DataFusion `SessionContext` with the store's tables registered; the queries of
//! [`crate::query`] run unchanged on either.

use crate::error::{Error, Result};
use crate::ingest::parquet_files;
use crate::schema::Table;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::prelude::{SessionConfig, SessionContext};
use std::path::Path;
use std::sync::Arc;

/// Where the queries run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Engine {
    /// DataFusion in this process.
    #[default]
    Embedded,
    /// A Ballista scheduler at `HOST:PORT`.
    Ballista {
        /// `HOST`.
        host: String,
        /// `PORT`.
        port: u16,
    },
}

impl Engine {
    /// Parses `embedded` or `ballista://HOST:PORT`.
    pub fn parse(s: &str) -> Result<Engine> {
        if s == "embedded" {
            return Ok(Engine::Embedded);
        }
        let bad = || {
            Error::Invalid(format!(
                "--engine `{s}` is not `embedded` or `ballista://HOST:PORT` \
                 (e.g. ballista://127.0.0.1:50050)"
            ))
        };
        let rest = s.strip_prefix("ballista://").ok_or_else(bad)?;
        let (host, port) = rest.rsplit_once(':').ok_or_else(bad)?;
        let port: u16 = port.parse().map_err(|_| bad())?;
        if host.is_empty() || port == 0 || host.contains('/') {
            return Err(bad());
        }
        Ok(Engine::Ballista {
            host: host.to_string(),
            port,
        })
    }

    /// `embedded` or `ballista://HOST:PORT` (as reports name it).
    pub fn name(&self) -> String {
        match self {
            Engine::Embedded => "embedded".to_string(),
            Engine::Ballista { host, port } => format!("ballista://{host}:{port}"),
        }
    }
}

/// How the store's tables are read (the same for both engines): every `.parquet` file
/// under the table's directory, `host=NAME` subdirectories included.
fn listing_options() -> ListingOptions {
    ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet")
}

fn config() -> SessionConfig {
    let mut c = SessionConfig::new().with_target_partitions(2);
    // Read the files of the `host=NAME/` directories without declaring `host` as a
    // partition column: `host` is a column of the files themselves.
    c.options_mut().execution.listing_table_ignore_subdirectory = false;
    c
}

/// Checks that `store` is a fleet store holding at least one recording, verifies it
/// ([`crate::manifest::verify`]), and returns a session of `engine` whose tables are the
/// files of the intact recordings, with the warnings the check raised (damage, extra files).
pub async fn session(engine: &Engine, store: &Path) -> Result<(SessionContext, Vec<String>)> {
    check_store(store)?;
    let root = std::fs::canonicalize(store).map_err(|e| Error::io(store, e))?;
    let verified = crate::manifest::verify(&root)?;
    if verified.recordings == 0 {
        return Err(Error::Invalid(format!(
            "fleet store {} holds no intact recording: {}",
            store.display(),
            verified.warnings.join("; ")
        )));
    }
    let ctx = match engine {
        Engine::Embedded => SessionContext::new_with_config(config()),
        Engine::Ballista { host, port } => remote(host, *port).await?,
    };
    for t in Table::ALL {
        let what = || format!("cannot open table {}", t.name());
        let files = verified.of(t);
        if files.is_empty() {
            // No file of this table (e.g. no recording has labels): an empty table.
            let empty = datafusion::datasource::MemTable::try_new(t.schema(), vec![vec![]])
                .map_err(|e| Error::engine(&what(), e))?;
            ctx.register_table(t.name(), Arc::new(empty))
                .map_err(|e| Error::engine(&what(), e))?;
            continue;
        }
        // Exactly the verified files, never a directory listing: a file that no intact
        // recording wrote is not read.
        let urls = files
            .iter()
            .map(|p| ListingTableUrl::parse(p.display().to_string()))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| Error::engine(&what(), e))?;
        let cfg = ListingTableConfig::new_with_multi_paths(urls)
            .with_listing_options(listing_options())
            .with_schema(t.schema());
        let table = ListingTable::try_new(cfg).map_err(|e| Error::engine(&what(), e))?;
        ctx.register_table(t.name(), Arc::new(table))
            .map_err(|e| Error::engine(&what(), e))?;
    }
    Ok((ctx, verified.warnings))
}

/// Refuses a missing store, a directory that is no store, and a store without recordings.
pub fn check_store(store: &Path) -> Result<()> {
    if !store.is_dir() {
        return Err(Error::Invalid(format!(
            "fleet store {} does not exist or is not a directory: create it with \
             `proftrust fleet ingest --host NAME --out {} PROFILE...`",
            store.display(),
            store.display()
        )));
    }
    let recs = parquet_files(&Table::Recordings.dir(store))?;
    if recs.is_empty() {
        return Err(Error::Invalid(format!(
            "fleet store {} holds no recordings (no {}/recordings/host=*/*.parquet): ingest \
             profiles with `proftrust fleet ingest --host NAME --out {} PROFILE...`",
            store.display(),
            store.display(),
            store.display()
        )));
    }
    Ok(())
}

/// How long [`check_listening`] waits for a scheduler to accept a connection.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Fails, saying how to start a cluster, unless something accepts TCP connections at
/// `host:port` within [`CONNECT_TIMEOUT`].
pub fn check_listening(host: &str, port: u16) -> Result<()> {
    use std::net::ToSocketAddrs;
    let how = format!(
        "start a cluster first: `proftrust fleet scheduler --bind {host}:{port}` and one or more \
         `proftrust fleet executor --scheduler {host}:{port}` (docs/fleet.md), or use --engine embedded"
    );
    let addrs: Vec<_> = (host, port)
        .to_socket_addrs()
        .map_err(|e| {
            Error::Invalid(format!(
                "--engine ballista://{host}:{port}: cannot resolve {host}: {e}; {how}"
            ))
        })?
        .collect();
    for a in &addrs {
        if std::net::TcpStream::connect_timeout(a, CONNECT_TIMEOUT).is_ok() {
            return Ok(());
        }
    }
    Err(Error::Invalid(format!(
        "--engine ballista://{host}:{port}: no Ballista scheduler is listening there \
         (waited {} s); {how}",
        CONNECT_TIMEOUT.as_secs()
    )))
}

#[cfg(not(feature = "ballista"))]
async fn remote(host: &str, port: u16) -> Result<SessionContext> {
    Err(Error::Invalid(format!(
        "--engine ballista://{host}:{port}: this proftrust-fleet was built without Ballista; \
         build it with `cargo build --release -p proftrust-fleet-cli --features ballista` \
         (docs/fleet.md), or use --engine embedded"
    )))
}

#[cfg(feature = "ballista")]
async fn remote(host: &str, port: u16) -> Result<SessionContext> {
    crate::ballista::connect(host, port, config()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines() {
        assert_eq!(Engine::parse("embedded").unwrap(), Engine::Embedded);
        assert_eq!(
            Engine::parse("ballista://127.0.0.1:50050").unwrap(),
            Engine::Ballista {
                host: "127.0.0.1".to_string(),
                port: 50050
            }
        );
        assert_eq!(
            Engine::parse("ballista://h:1").unwrap().name(),
            "ballista://h:1"
        );
        for bad in [
            "",
            "ballista",
            "ballista://h",
            "ballista://h:0",
            "ballista://:1",
            "spark://h:1",
            "ballista://h:99999",
        ] {
            assert!(Engine::parse(bad).is_err(), "{bad}");
        }
    }
}
