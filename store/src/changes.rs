//! Word of a change to a business's keys or KYB, for every api process: such a
//! change is honoured by every api at once, not when an api's authentication cache expires
//! (docs/decisions/auth-cache.md).
//!
//! On PostgreSQL the change's own transaction sends a `NOTIFY` ([`announce`]), which the server
//! delivers on commit only (never for a change rolled back). Each api listens on a connection of
//! its own ([`follow`]) to the host its pool writes to, so it follows a multi-host URL's primary
//! (`failover`). A notification sent while nobody listened is lost: a listener that (re)starts
//! says so ([`Heard::Anything`]), and what was cached before is forgotten.
//!
//! SQLite serves one process (`api dev`), but `api admin` beside it writes from another: there
//! [`follow`] reads the pool's one connection's `PRAGMA data_version` every [`SQLITE_EVERY`],
//! which moves whenever another connection committed anything (a local read, nearly free).

use domain::ids::BusinessId;
use std::time::Duration;

use sea_orm::sqlx::postgres::{PgListener, PgPool, PgPoolOptions};
use sea_orm::sqlx::{self, ConnectOptions as _};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, DbErr, Statement};
use tokio_util::sync::CancellationToken;

/// The channel changes are announced on.
pub const CHANNEL: &str = "vas_auth_changes";

/// The listener's connection names itself so in `pg_stat_activity`, for operators.
pub const APPLICATION_NAME: &str = "vas-api-changes";

/// How often the listener makes sure its host is still the primary (a demoted primary that kept
/// its connections would hear nothing), and how long it waits before listening again.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// How often SQLite's `data_version` is read: well within the second docs/decisions/auth-cache.md
/// allows.
pub const SQLITE_EVERY: Duration = Duration::from_millis(250);

/// How long the listener's host may take to answer that check.
const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// What a follower hears.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    /// The keys or KYB of this business changed (committed).
    Business(String),
    /// Listening (again), or another process wrote to SQLite: anything may have changed.
    Anything,
    /// Listening stopped: changes go unheard until the next [`Heard::Anything`].
    Deaf,
}

/// Announces, within `db`'s transaction, that `business_id`'s keys or KYB changed; PostgreSQL
/// delivers it on commit. Nothing on SQLite (see the module's note).
pub(crate) async fn announce<C: ConnectionTrait>(
    db: &C,
    business_id: &BusinessId,
) -> Result<(), DbErr> {
    if db.get_database_backend() != DbBackend::Postgres {
        return Ok(());
    }
    db.execute_raw(Statement::from_sql_and_values(
        DbBackend::Postgres,
        "SELECT pg_notify($1, $2)",
        [CHANNEL.into(), business_id.into()],
    ))
    .await?;
    Ok(())
}

/// Tells `hear` what changed, as long as `shutdown` is not cancelled.
pub async fn follow(
    db: DatabaseConnection,
    shutdown: CancellationToken,
    hear: impl Fn(Heard) + Send + 'static,
) {
    match db.get_database_backend() {
        DbBackend::Postgres => {
            let pool = db.get_postgres_connection_pool().clone();
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = listen_forever(&pool, &hear) => {}
            }
        }
        _ => {
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = watch_sqlite(&db, &hear) => {}
            }
        }
    }
}

async fn listen_forever(pool: &PgPool, hear: &impl Fn(Heard)) {
    loop {
        match listen(pool).await {
            Ok(mut listener) => {
                hear(Heard::Anything);
                let why = hear_until_lost(&mut listener, hear).await;
                hear(Heard::Deaf);
                tracing::warn!(reason = %why, "stopped hearing key and KYB changes; listening again");
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for key and KYB changes; trying again");
            }
        }
        tokio::time::sleep(CHECK_EVERY).await;
    }
}

/// A listener on a connection of its own to the host `pool` writes to now (the primary, after a
/// failover too), once that host says it is the primary.
async fn listen(pool: &PgPool) -> Result<PgListener, sqlx::Error> {
    let options = (*pool.connect_options())
        .clone()
        .application_name(APPLICATION_NAME)
        .disable_statement_logging();
    let own = PgPoolOptions::new()
        .max_connections(1)
        .max_lifetime(None)
        .idle_timeout(None)
        .connect_with(options)
        .await?;
    let mut listener = PgListener::connect_with(&own).await?;
    // A lost connection ends this listener; the next one starts with [`Heard::Anything`].
    listener.eager_reconnect(false);
    if !is_primary(&mut listener).await? {
        return Err(sqlx::Error::Protocol("the host is a standby".into()));
    }
    listener.listen(CHANNEL).await?;
    Ok(listener)
}

async fn is_primary(listener: &mut PgListener) -> Result<bool, sqlx::Error> {
    let in_recovery: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
        .fetch_one(listener)
        .await?;
    Ok(!in_recovery)
}

/// Passes on what the listener hears until its connection is lost or its host stops being the
/// primary; why it stopped.
async fn hear_until_lost(listener: &mut PgListener, hear: &impl Fn(Heard)) -> String {
    loop {
        match tokio::time::timeout(CHECK_EVERY, listener.try_recv()).await {
            Ok(Ok(Some(notification))) => hear(Heard::Business(notification.payload().to_owned())),
            Ok(Ok(None)) => return "the connection was lost".to_owned(),
            Ok(Err(e)) => return e.to_string(),
            // Quiet for a second: is the host still the primary?
            Err(_) => match tokio::time::timeout(CHECK_TIMEOUT, is_primary(listener)).await {
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => return "the host is a standby now".to_owned(),
                Ok(Err(e)) => return e.to_string(),
                Err(_) => return format!("no answer within {CHECK_TIMEOUT:?}"),
            },
        }
    }
}

/// Reads SQLite's `data_version` every [`SQLITE_EVERY`]: [`Heard::Anything`] when it moved.
async fn watch_sqlite(db: &DatabaseConnection, hear: &impl Fn(Heard)) {
    let mut seen = None;
    loop {
        tokio::time::sleep(SQLITE_EVERY).await;
        let version = match data_version(db).await {
            Ok(version) => version,
            Err(e) => {
                tracing::warn!(error = %e, "reading SQLite's data version failed");
                continue;
            }
        };
        // The first reading, or a new connection's, tells nothing about what came before.
        if seen != Some(version) {
            hear(Heard::Anything);
        }
        seen = Some(version);
    }
}

async fn data_version(db: &DatabaseConnection) -> Result<i64, DbErr> {
    let row = db
        .query_one_raw(Statement::from_string(
            DbBackend::Sqlite,
            "PRAGMA data_version",
        ))
        .await?
        .ok_or_else(|| DbErr::Custom("PRAGMA data_version returned no row".into()))?;
    row.try_get_by_index(0)
}
