//! Opening what a command needs (database, key, broker) and serving HTTP until shutdown.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use ops::config::Config;
use ops::redact_url;
use sea_orm::DatabaseConnection;
use sea_orm_migration::MigratorTrait;
use shared::crypto::Cipher;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::AppState;

pub mod dev;

/// The database URL: the configured one, else the dev data folder's SQLite file.
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

/// The configured key, else the dev data folder's generated one (created on first use).
pub fn cipher_or_dev(config: &Config) -> anyhow::Result<Cipher> {
    let key = match &config.crypto.key {
        Some(key) => key.clone(),
        None => dev_key(&config.dev.data_dir)?,
    };
    Cipher::new(&key, &config.crypto.previous_keys).context("VAS_CRYPTO__KEY")
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
    shared::bootstrap::connect_database(url, config).await
}

pub async fn migrate(db: &DatabaseConnection) -> anyhow::Result<()> {
    migrations::Migrator::up(db, None)
        .await
        .context("running migrations")
}

/// `api serve`: PostgreSQL, RabbitMQ, the relay, and HTTP until SIGTERM.
pub async fn serve_production(config: Config) -> anyhow::Result<()> {
    config.require_production()?;
    if config.sandbox.secret == ops::config::SandboxConfig::default().secret {
        // Not refused (SPEC §6 names the three settings a production start needs), but anyone
        // who reads this repository could sign test-mode notifications with it.
        tracing::warn!(
            "VAS_SANDBOX__SECRET is the published default: anyone can sign test-mode deposit \
             notifications; set your own, the same on the api and provider-sandbox"
        );
    }
    let url = config.database.url.clone().expect("checked above");
    let db = connect(&url, &config).await?;
    let cipher = Arc::new(shared::bootstrap::configured_cipher(&config)?);
    let broker = shared::bootstrap::connect_broker(&config).await?;
    let shutdown = CancellationToken::new();
    ops::cancel_on_signal(shutdown.clone());
    let relay = shared::relay::Relay::new(db.clone(), broker);
    let relay_task = tokio::spawn(relay.clone().run(shutdown.clone()));
    let listener = bind(config.http.bind).await?;
    tracing::info!(address = %listener.local_addr()?, "api listening");
    serve(AppState::new(db, cipher, config, relay), listener, shutdown).await?;
    let _ = relay_task.await;
    Ok(())
}

/// Serves the API until `shutdown`, letting in-flight requests finish.
pub async fn serve(
    state: AppState,
    listener: TcpListener,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let maintenance = tokio::spawn(maintenance(state.clone(), shutdown.clone()));
    axum::serve(listener, crate::router(state))
        .with_graceful_shutdown(shutdown.clone().cancelled_owned())
        .await
        .context("serving HTTP")?;
    shutdown.cancel();
    let _ = maintenance.await;
    Ok(())
}

/// Forgets idempotency keys after 48 hours (the contract promises at least 24), finished jobs
/// after 7 days, and dashboard sessions that ended by time.
async fn maintenance(state: AppState, shutdown: CancellationToken) {
    let db = state.db.clone();
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(600));
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let now = domain::time::now();
        if let Err(e) =
            shared::db::accounts::purge_idempotency_keys(&db, now - chrono::Duration::hours(48))
                .await
        {
            tracing::warn!(error = %e, "purging old idempotency keys failed");
        }
        if let Err(e) =
            shared::db::outbox::purge_finished(&db, now - chrono::Duration::days(7)).await
        {
            tracing::warn!(error = %e, "purging finished jobs failed");
        }
        let limits = crate::dashboard::session::limits(&state);
        if let Err(e) =
            shared::db::users::purge_sessions(&db, now - limits.absolute, now - limits.idle).await
        {
            tracing::warn!(error = %e, "purging ended dashboard sessions failed");
        }
    }
}

pub async fn bind(addr: std::net::SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))
}

pub fn redact(url: &str) -> String {
    redact_url(url)
}
