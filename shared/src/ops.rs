//! What every process shares to be run: opening the database, the key and the broker from the
//! configuration, the shutdown signal, and a worker's ops endpoints (`/healthz`, `/readyz`).

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use sea_orm::DatabaseConnection;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::crypto::Cipher;
use crate::queue::{Broker, RabbitBroker};

pub async fn connect_database(url: &str, config: &Config) -> anyhow::Result<DatabaseConnection> {
    crate::db::connect(url, config.database.max_connections)
        .await
        .with_context(|| format!("connecting to the database ({})", redact_url(url)))
}

pub fn configured_cipher(config: &Config) -> anyhow::Result<Cipher> {
    let key = config
        .crypto
        .key
        .as_deref()
        .context("VAS_CRYPTO__KEY is not set")?;
    Cipher::new(key, &config.crypto.previous_keys).context("VAS_CRYPTO__KEY")
}

/// RabbitMQ from `VAS_AMQP__URL`, its topology declared.
pub async fn connect_broker(config: &Config) -> anyhow::Result<Arc<dyn Broker>> {
    let url = config
        .amqp
        .url
        .as_deref()
        .context("VAS_AMQP__URL is not set")?;
    let ca_pem = match &config.amqp.ca_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading VAS_AMQP__CA_FILE {}", path.display()))?,
        ),
        None => None,
    };
    let broker = RabbitBroker::connect_with_ca(url, &config.amqp.prefix, ca_pem)
        .await
        .with_context(|| format!("connecting to RabbitMQ ({})", redact_url(url)))?;
    broker
        .declare()
        .await
        .context("declaring the RabbitMQ topology")?;
    Ok(Arc::new(broker))
}

/// A URL without its password, for messages and logs.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_owned(),
    }
}

/// Cancels `token` on SIGTERM or Ctrl-C.
pub fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        shutdown_signal().await;
        token.cancel();
    });
}

pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutdown requested: finishing in-flight work");
}

#[derive(Clone)]
struct OpsState {
    db: DatabaseConnection,
    broker: Arc<dyn Broker>,
}

/// Serves a worker's `/healthz` and `/readyz` until `shutdown`; returns the bound address.
pub async fn serve_ops(
    bind: SocketAddr,
    db: DatabaseConnection,
    broker: Arc<dyn Broker>,
    shutdown: CancellationToken,
) -> anyhow::Result<SocketAddr> {
    crate::metrics::install();
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .with_context(|| format!("binding the ops port {bind}"))?;
    let address = listener.local_addr()?;
    let app = axum::Router::new()
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(crate::metrics::endpoint))
        .with_state(OpsState { db, broker });
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
    });
    Ok(address)
}

async fn readyz(State(state): State<OpsState>) -> (StatusCode, Json<Value>) {
    readiness(&state.db, state.broker.as_ref()).await
}

/// `/readyz` of the api and of every worker: 200 when the database answers a ping and the broker
/// is connected, else 503 naming which one is `unreachable`.
pub async fn readiness(db: &DatabaseConnection, broker: &dyn Broker) -> (StatusCode, Json<Value>) {
    let database = match db.ping().await {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "database not reachable");
            false
        }
    };
    let broker = broker.is_ready().await;
    let word = |ok: bool| if ok { "ok" } else { "unreachable" };
    let ready = database && broker;
    (
        if ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        },
        Json(json!({
            "status": if ready { "ok" } else { "unavailable" },
            "database": word(database),
            "broker": word(broker),
        })),
    )
}

/// The `main` of every binary: the configuration (defaults, `config_file` or `VAS_CONFIG`, then
/// `VAS_…` variables), logging to stderr, then `run`. An error is printed to stderr (never a
/// secret: errors name settings, not their values) and the process exits 1.
pub async fn main_with<F, Fut>(
    config_file: Option<&std::path::Path>,
    run: F,
) -> std::process::ExitCode
where
    F: FnOnce(Config) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let config = match Config::load(config_file) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    crate::telemetry::init(&config.log);
    match run(config).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// What a worker process's consumer runs with.
pub struct WorkerParts {
    pub db: DatabaseConnection,
    pub cipher: Arc<Cipher>,
    pub broker: Arc<dyn Broker>,
    pub relay: crate::relay::Relay,
    pub shutdown: CancellationToken,
}

/// A worker process: checks the production configuration, opens the database, key and broker,
/// serves the ops port, runs the relay beside `consume`, and returns once SIGTERM has drained it.
pub async fn run_worker<F, Fut>(name: &str, config: &Config, consume: F) -> anyhow::Result<()>
where
    F: FnOnce(WorkerParts) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    config.require_production()?;
    let url = config.database.url.clone().expect("checked above");
    let db = connect_database(&url, config).await?;
    let cipher = Arc::new(configured_cipher(config)?);
    let broker = connect_broker(config).await?;
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone());
    // The ops port outlives the drain, so health and metrics stay readable while work finishes.
    let ops_stop = CancellationToken::new();
    let ops = serve_ops(
        config.ops.bind,
        db.clone(),
        broker.clone(),
        ops_stop.clone(),
    )
    .await?;
    tracing::info!(address = %ops, "{name} ops listening");
    let relay = crate::relay::Relay::new(db.clone(), broker.clone());
    let relay_task = tokio::spawn(relay.clone().run(shutdown.clone()));
    consume(WorkerParts {
        db,
        cipher,
        broker,
        relay,
        shutdown,
    })
    .await;
    let _ = relay_task.await;
    ops_stop.cancel();
    tracing::info!("{name} stopped");
    Ok(())
}
