//! Storage: entities and the queries the processes need, on PostgreSQL or SQLite.

pub mod accounts;
pub mod businesses;
pub mod deliveries;
pub mod deposits;
pub mod entities;
pub mod events;
pub mod outbox;
pub mod rechecks;
pub mod reencrypt;
pub mod users;

use std::time::Duration;

use sea_orm::{ConnectOptions, Database, DatabaseConnection, DbBackend, DbErr};

/// Opens a pool. SQLite gets one connection: its writers serialise anyway, and one connection
/// turns "database is locked" errors into an orderly queue.
pub async fn connect(url: &str, max_connections: u32) -> Result<DatabaseConnection, DbErr> {
    let sqlite = url.starts_with("sqlite:");
    let mut options = ConnectOptions::new(url.to_owned());
    options
        .max_connections(if sqlite { 1 } else { max_connections })
        .min_connections(if sqlite { 1 } else { 2 })
        .acquire_timeout(Duration::from_secs(10))
        .sqlx_logging(false);
    let db = Database::connect(options).await?;
    if db.get_database_backend() == DbBackend::Sqlite {
        use sea_orm::ConnectionTrait;
        db.execute_unprepared(
            "PRAGMA foreign_keys = ON; PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 5000;",
        )
        .await?;
    }
    Ok(db)
}

/// The time by the database's clock on PostgreSQL (the moment of the call, not the transaction's
/// start), so api instances whose clocks differ agree on creation stamps and the rolling-hour
/// limit; SQLite serves one process, whose clock it is.
pub async fn clock<C: sea_orm::ConnectionTrait>(
    db: &C,
) -> Result<chrono::DateTime<chrono::Utc>, DbErr> {
    use sea_orm::Statement;
    if db.get_database_backend() != DbBackend::Postgres {
        return Ok(domain::time::now());
    }
    let row = db
        .query_one_raw(Statement::from_string(
            DbBackend::Postgres,
            "SELECT clock_timestamp() AS now",
        ))
        .await?
        .ok_or_else(|| DbErr::Custom("clock_timestamp() returned no row".into()))?;
    row.try_get("", "now")
}

/// True when the error is a unique-constraint violation (a duplicate that the schema refused),
/// recognised by its SQLSTATE / SQLite code, so a server's message language does not matter.
pub fn is_unique_violation(err: &DbErr) -> bool {
    matches!(
        err.sql_err(),
        Some(sea_orm::SqlErr::UniqueConstraintViolation(_))
    )
}
