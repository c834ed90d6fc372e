//! Opening what a command needs: configuration, database, encryption key, and serving HTTP
//! until SIGTERM.

use std::path::Path;

use anyhow::Context;
use sea_orm::DatabaseConnection;
use sea_orm_migration::MigratorTrait;
use shared::config::Config;
use shared::crypto::Cipher;
use tokio::net::TcpListener;

use crate::AppState;

pub mod dev;

/// The database URL: the configured one, else the dev data folder's SQLite file.
pub fn database_url_or_dev(config: &Config) -> anyhow::Result<String> {
    match &config.database.url {
        Some(url) => Ok(url.clone()),
        None => {
            std::fs::create_dir_all(&config.dev.data_dir).with_context(|| {
                format!("creating the dev data folder {}", config.dev.data_dir.display())
            })?;
            Ok(config.dev_database_url())
        }
    }
}

/// The configured key, else the dev data folder's generated one (created on first use).
pub fn cipher_or_dev(config: &Config) -> anyhow::Result<Cipher> {
    let key = match &config.crypto.key {
        Some(key) => key.clone(),
        None => dev_key(&config.dev.data_dir)?,
    };
    Cipher::new(&key, &config.crypto.previous_keys).context("VAS_CRYPTO__KEY")
}

pub fn configured_cipher(config: &Config) -> anyhow::Result<Cipher> {
    let key = config
        .crypto
        .key
        .as_deref()
        .context("VAS_CRYPTO__KEY is not set")?;
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

pub async fn connect(url: &str, config: &Config) -> anyhow::Result<DatabaseConnection> {
    shared::db::connect(url, config.database.max_connections)
        .await
        .with_context(|| format!("connecting to the database ({})", redact_url(url)))
}

pub async fn migrate(db: &DatabaseConnection) -> anyhow::Result<()> {
    migrations::Migrator::up(db, None)
        .await
        .context("running migrations")
}

/// A database URL without its password, for messages.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_owned(),
    }
}

/// Serves the API until SIGTERM or Ctrl-C, letting in-flight requests finish.
pub async fn serve(state: AppState, listener: TcpListener) -> anyhow::Result<()> {
    let purge = tokio::spawn(purge_idempotency_keys(state.db.clone()));
    axum::serve(listener, crate::router(state))
        .with_graceful_shutdown(shutdown_signal())
        .await
        .context("serving HTTP")?;
    purge.abort();
    Ok(())
}

/// Idempotency keys are kept 48 hours (the contract promises at least 24).
async fn purge_idempotency_keys(db: DatabaseConnection) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(600));
    loop {
        tick.tick().await;
        let cutoff = shared::time::now() - chrono::Duration::hours(48);
        if let Err(e) = shared::db::accounts::purge_idempotency_keys(&db, cutoff).await {
            tracing::warn!(error = %e, "purging old idempotency keys failed");
        }
    }
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
    tracing::info!("shutting down: finishing in-flight requests");
}

pub async fn bind(addr: std::net::SocketAddr) -> anyhow::Result<TcpListener> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    Ok(listener)
}
