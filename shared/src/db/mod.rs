//! Storage: entities and the queries the processes need, on PostgreSQL or SQLite.

pub mod accounts;
pub mod businesses;
pub mod deliveries;
pub mod deposits;
pub mod entities;
pub mod events;
pub mod keys;
pub mod outbox;
pub mod rechecks;
pub mod reencrypt;

use std::time::Duration;

use sea_orm::{ConnectOptions, Database, DatabaseConnection, DbBackend, DbErr, RuntimeErr};

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

/// True when the error is a unique-constraint violation (a duplicate that the schema refused).
pub fn is_unique_violation(err: &DbErr) -> bool {
    let text = match err {
        DbErr::Exec(RuntimeErr::SqlxError(e)) | DbErr::Query(RuntimeErr::SqlxError(e)) => {
            e.to_string()
        }
        other => other.to_string(),
    };
    text.contains("duplicate key value") || text.contains("UNIQUE constraint failed")
}
