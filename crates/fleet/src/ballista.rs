//! Apache Ballista (cargo feature `ballista`): a client session on a running cluster, and
//! the scheduler and executor processes of a local cluster (`proftrust fleet scheduler`,
//! `proftrust fleet executor`), built on the `ballista-scheduler` and `ballista-executor`
//! library crates. The queries are the embedded engine's, unchanged.

use crate::error::{Error, Result};
use ballista::extension::SessionContextExt;
use datafusion::execution::session_state::SessionStateBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use std::net::SocketAddr;
use std::sync::Arc;

/// A session whose queries run on the scheduler at `host:port` (checked to be listening
/// first, with a timeout, so a missing cluster is an error and not a hang).
pub async fn connect(host: &str, port: u16, config: SessionConfig) -> Result<SessionContext> {
    crate::engine::check_listening(host, port)?;
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_default_features()
        .build();
    SessionContext::remote_with_state(&format!("df://{host}:{port}"), state)
        .await
        .map_err(|e| Error::engine(&format!("cannot connect to ballista://{host}:{port}"), e))
}

/// Runs a Ballista scheduler listening on `bind` until the process ends.
pub async fn run_scheduler(bind: SocketAddr) -> Result<()> {
    use ballista_scheduler::cluster::BallistaCluster;
    use ballista_scheduler::config::SchedulerConfig;
    let config = SchedulerConfig {
        bind_host: bind.ip().to_string(),
        bind_port: bind.port(),
        external_host: bind.ip().to_string(),
        ..SchedulerConfig::default()
    };
    let cluster = BallistaCluster::new_from_config(&config)
        .await
        .map_err(|e| Error::engine("cannot start the Ballista scheduler", e))?;
    ballista_scheduler::scheduler_process::start_server(cluster, bind, Arc::new(config))
        .await
        .map_err(|e| Error::engine(&format!("Ballista scheduler on {bind}"), e))
}

/// Runs a Ballista executor registered with the scheduler at `scheduler`, serving Arrow
/// Flight on `bind` and gRPC on `grpc_port`, with `concurrency` task slots, until the
/// process ends.
pub async fn run_executor(
    scheduler: SocketAddr,
    bind: SocketAddr,
    grpc_port: u16,
    concurrency: usize,
) -> Result<()> {
    use ballista_executor::executor_process::{start_executor_process, ExecutorProcessConfig};
    let config = ExecutorProcessConfig {
        bind_host: bind.ip().to_string(),
        external_host: Some(bind.ip().to_string()),
        port: bind.port(),
        grpc_port,
        scheduler_host: scheduler.ip().to_string(),
        scheduler_port: scheduler.port(),
        scheduler_connect_timeout_seconds: 10,
        vcores: concurrency.max(1),
        ..ExecutorProcessConfig::default()
    };
    start_executor_process(Arc::new(config))
        .await
        .map_err(|e| Error::engine(&format!("Ballista executor on {bind}"), e))
}
