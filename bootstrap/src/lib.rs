//! Opening what a process works with, from the configuration: the database (the configured one,
//! else the dev data folder's), the key (likewise), the broker; and a worker's run (its ops port
//! with `/healthz`, `/readyz`, `/metrics`, the relay, the drain on SIGTERM). How a process is
//! served and stopped (HTTP, signals, `main`) is the `ops` crate's.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use sea_orm::DatabaseConnection;
use sea_orm_migration::MigratorTrait;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use ops::config::Config;
use ops::{cancel_on_signal, redact_url};

use crypto::Cipher;
use queue::broker::{Broker, RabbitBroker};

/// The database URL: the configured one, else the dev data folder's SQLite file (the folder is
/// created).
pub fn database_url_or_dev(config: &Config) -> anyhow::Result<String> {
    match &config.database.url {
        Some(url) => Ok(url.clone()),
        None => {
            std::fs::create_dir_all(&config.dev.data_dir).with_context(|| {
                format!(
                    "creating the dev data folder {}",
                    config.dev.data_dir.display()
                )
            })?;
            Ok(config.dev_database_url())
        }
    }
}

pub async fn connect_database(url: &str, config: &Config) -> anyhow::Result<DatabaseConnection> {
    let tls_url = with_database_ca(url, config)?;
    store::connect(&tls_url, config.database.max_connections)
        .await
        .map_err(|e| database_error("connecting to the database", url, &e))
}

/// A database error as one line: sea-orm's error repeats its cause as its source, which `{:#}`
/// would print twice.
fn database_error(doing: &str, url: &str, error: &sea_orm::DbErr) -> anyhow::Error {
    anyhow::anyhow!("{doing} ({}): {error}", redact_url(url))
}

/// `url` with `VAS_DATABASE__CA_FILE` applied ([`store::tls`]); a CA file that cannot be
/// read stops the process here, by its setting's name, rather than at each connection.
fn with_database_ca(url: &str, config: &Config) -> anyhow::Result<String> {
    let ca_file = config.database.ca_file.as_deref();
    if let Some(path) = ca_file {
        std::fs::File::open(path)
            .with_context(|| format!("reading VAS_DATABASE__CA_FILE {}", path.display()))?;
    }
    Ok(store::tls::libpq_url(url, ca_file))
}

/// The handles of the reads that may lag: the replica of `VAS_DATABASE__READ_URL` beside the
/// primary, or the primary alone.
pub async fn connect_reads(
    config: &Config,
    primary: &DatabaseConnection,
) -> anyhow::Result<store::read::Reads> {
    let Some(url) = &config.database.read_url else {
        return Ok(store::read::Reads::primary_only(primary.clone()));
    };
    let tls_url = with_database_ca(url, config)?;
    let replica = store::connect_replica(&tls_url, config.database.max_connections)
        .await
        .map_err(|e| database_error("opening the read replica", url, &e))?;
    Ok(store::read::Reads::with_replica(
        primary.clone(),
        replica,
        std::time::Duration::from_millis(config.database.read_max_lag_ms),
    ))
}

pub async fn migrate(db: &DatabaseConnection) -> anyhow::Result<()> {
    migrations::Migrator::up(db, None)
        .await
        .context("running migrations")
}

/// The database of the operator commands (`api admin`, `worker-webhooks dead|replay`): the
/// configured one, else the dev data folder's, migrated on the fly so the commands work before
/// the first `api dev`.
pub async fn open_database_or_dev(config: &Config) -> anyhow::Result<DatabaseConnection> {
    let url = database_url_or_dev(config)?;
    let db = connect_database(&url, config).await?;
    if config.database.url.is_none() {
        migrate(&db).await?;
    }
    Ok(db)
}

/// The configured key; a production process cannot start without it.
pub fn configured_cipher(config: &Config) -> anyhow::Result<Cipher> {
    let key = config
        .crypto
        .key
        .as_deref()
        .context("VAS_CRYPTO__KEY is not set")?;
    cipher(key, config)
}

/// The configured key, else the dev data folder's generated one (created on first use).
pub fn cipher_or_dev(config: &Config) -> anyhow::Result<Cipher> {
    let key = match &config.crypto.key {
        Some(key) => key.clone(),
        None => dev_key(&config.dev.data_dir)?,
    };
    cipher(&key, config)
}

fn cipher(key: &str, config: &Config) -> anyhow::Result<Cipher> {
    Cipher::new(key, &config.crypto.previous_keys).context("VAS_CRYPTO__KEY")
}

fn dev_key(dir: &Path) -> anyhow::Result<String> {
    let path = dir.join("crypto.key");
    if let Ok(key) = std::fs::read_to_string(&path) {
        return Ok(key.trim().to_owned());
    }
    std::fs::create_dir_all(dir)?;
    let key = Cipher::generate_key();
    write_private(&path, &key).with_context(|| format!("writing {}", path.display()))?;
    Ok(key)
}

fn write_private(path: &Path, contents: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()
}

/// `api migrate`'s part on RabbitMQ, when `VAS_AMQP__URL` is set: the topology declared and an
/// earlier version's dead-letter queues retired (one process does it, so no start collides). A
/// broker that cannot be reached is a warning, not a failed migration: every process declares the
/// topology at its start anyway, and the next `api migrate` retires the old queues.
pub async fn migrate_broker(config: &Config) {
    if config.amqp.url.is_none() {
        return;
    }
    let declared = async {
        let broker = rabbit_broker(config).await?;
        broker
            .declare()
            .await
            .context("declaring the RabbitMQ topology")?;
        anyhow::Ok(broker)
    };
    match declared.await {
        Ok(broker) => broker.retire_legacy_dead_queues().await,
        Err(error) => tracing::warn!(
            error = format!("{error:#}"),
            "RabbitMQ not reached: earlier versions' dead-letter queues are retired by the next api migrate"
        ),
    }
}

/// RabbitMQ from `VAS_AMQP__URL`, its topology declared.
pub async fn connect_broker(config: &Config) -> anyhow::Result<Arc<dyn Broker>> {
    let broker = rabbit_broker(config).await?;
    broker
        .declare()
        .await
        .context("declaring the RabbitMQ topology")?;
    Ok(Arc::new(broker))
}

async fn rabbit_broker(config: &Config) -> anyhow::Result<RabbitBroker> {
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
    RabbitBroker::connect_with_ca(url, &config.amqp.prefix, ca_pem)
        .await
        .with_context(|| format!("connecting to RabbitMQ ({})", redact_url(url)))
}

#[derive(Clone)]
struct OpsState {
    db: DatabaseConnection,
    broker: Arc<dyn Broker>,
}

/// Serves a worker's `/healthz`, `/readyz` and `/metrics` on `VAS_OPS__BIND` (with the
/// listeners' time limits) until `shutdown`; returns the bound address.
pub async fn serve_ops(
    config: &Config,
    db: DatabaseConnection,
    broker: Arc<dyn Broker>,
    shutdown: CancellationToken,
) -> anyhow::Result<SocketAddr> {
    ops::metrics::install();
    let listener = ops::http::bind(config.ops.bind)
        .await
        .context("the ops port")?;
    let address = listener.local_addr()?;
    let app = axum::Router::new()
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(OpsState { db, broker });
    tokio::spawn(ops::http::serve(
        listener,
        app,
        config.http.server_timeouts(),
        shutdown,
    ));
    Ok(address)
}

async fn readyz(State(state): State<OpsState>) -> (StatusCode, Json<Readiness>) {
    readiness(&state.db, state.broker.as_ref()).await
}

async fn metrics(State(state): State<OpsState>) -> impl axum::response::IntoResponse {
    metrics_with_readiness(&state.db, state.broker.as_ref()).await
}

/// How long a scrape waits for the readiness check: a database that hangs makes the process
/// not ready, not its scrape fail (which would read as the process being down).
const READINESS_IN_SCRAPE: std::time::Duration = std::time::Duration::from_secs(2);

/// `GET /metrics` of the api and of every worker: `process_ready` refreshed (what `/readyz`
/// would answer now, so an alert needs no probe of its own), then the exposition.
pub async fn metrics_with_readiness(
    db: &DatabaseConnection,
    broker: &dyn Broker,
) -> ([(axum::http::HeaderName, &'static str); 1], String) {
    if tokio::time::timeout(READINESS_IN_SCRAPE, readiness(db, broker))
        .await
        .is_err()
    {
        metrics::gauge!("process_ready").set(0.0);
    }
    ops::metrics::endpoint().await
}

/// Whether the process can serve: its database and its broker answer.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct Readiness {
    /// `ok` or `unavailable`.
    #[schema(example = "ok")]
    pub status: &'static str,
    /// `ok` or `unreachable`.
    #[schema(example = "ok")]
    pub database: &'static str,
    /// `ok` or `unreachable`.
    #[schema(example = "ok")]
    pub broker: &'static str,
}

/// `/readyz` of the api and of every worker: 200 when the database answers a ping and the broker
/// is connected, else 503 naming which one is `unreachable`.
pub async fn readiness(
    db: &DatabaseConnection,
    broker: &dyn Broker,
) -> (StatusCode, Json<Readiness>) {
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
    metrics::gauge!("process_ready").set(if ready { 1.0 } else { 0.0 });
    (
        if ready {
            StatusCode::OK
        } else {
            StatusCode::SERVICE_UNAVAILABLE
        },
        Json(Readiness {
            status: if ready { "ok" } else { "unavailable" },
            database: word(database),
            broker: word(broker),
        }),
    )
}

/// What a worker process's consumer runs with.
pub struct WorkerParts {
    pub db: DatabaseConnection,
    pub cipher: Arc<Cipher>,
    pub broker: Arc<dyn Broker>,
    pub relay: queue::relay::Relay,
    pub shutdown: CancellationToken,
}

/// A worker as `api dev`, the test app and its own binary all start it: its name and one entry
/// point taking the configuration and the parts opened for it.
#[derive(Clone, Copy)]
pub struct Worker {
    pub name: &'static str,
    pub run: fn(Config, WorkerParts) -> futures::future::BoxFuture<'static, anyhow::Result<()>>,
}

impl Worker {
    /// The worker as its own process: checks the production configuration, opens the database,
    /// key and broker, serves the ops port, runs the relay beside the worker, and returns once
    /// SIGTERM has drained it (or at once, with the error, when the worker cannot run).
    pub async fn run_process(self, config: Config) -> anyhow::Result<()> {
        config.require_production()?;
        let url = config.database.url.clone().expect("checked above");
        let cipher = Arc::new(configured_cipher(&config)?);
        // Neither waits for the other: a worker starts in the time of the slower. When both
        // fail, the database's error is the one reported, as when they were tried in turn.
        let (db, broker) = tokio::join!(connect_database(&url, &config), connect_broker(&config));
        let (db, broker) = (db?, broker?);
        let shutdown = CancellationToken::new();
        cancel_on_signal(shutdown.clone());
        // The ops port outlives the drain, so health and metrics stay readable while work
        // finishes.
        let ops_stop = CancellationToken::new();
        let ops = serve_ops(&config, db.clone(), broker.clone(), ops_stop.clone()).await?;
        tracing::info!(address = %ops, "{} ops listening", self.name);
        let relay = queue::relay::Relay::new(db.clone(), broker.clone());
        let relay_task = tokio::spawn(relay.clone().run(shutdown.clone()));
        let parts = WorkerParts {
            db,
            cipher,
            broker,
            relay,
            shutdown: shutdown.clone(),
        };
        let result = (self.run)(config, parts).await;
        // A worker that could not run stops the relay too, rather than waiting for a signal.
        shutdown.cancel();
        let _ = relay_task.await;
        ops_stop.cancel();
        tracing::info!("{} stopped", self.name);
        result
    }
}
