use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// The foreign keys checked on every creation, deposit and webhook attempt, dropped on
/// PostgreSQL (docs/decisions/hot-path-foreign-keys.md). Each of those inserts takes its parent
/// from a row it has just read or written, and no parent is ever deleted, so the check could not
/// fail; it cost a constraint trigger, a nested query and a `FOR KEY SHARE` lock on the parent
/// for every row (and one business's rows all lock its one `businesses` row). SQLite keeps its
/// constraints: it cannot drop one without rebuilding the table, and `api dev` is not where the
/// rate matters.
const DROPPED: [(&str, &str, &str); 6] = [
    (
        "virtual_accounts",
        "virtual_accounts_business_id_fkey",
        "FOREIGN KEY (business_id) REFERENCES businesses(id)",
    ),
    (
        "deposits",
        "deposits_account_id_fkey",
        "FOREIGN KEY (account_id) REFERENCES virtual_accounts(id)",
    ),
    (
        "events",
        "events_business_id_fkey",
        "FOREIGN KEY (business_id) REFERENCES businesses(id)",
    ),
    (
        "deliveries",
        "deliveries_event_id_fkey",
        "FOREIGN KEY (event_id) REFERENCES events(id)",
    ),
    (
        "deliveries",
        "deliveries_business_id_fkey",
        "FOREIGN KEY (business_id) REFERENCES businesses(id)",
    ),
    (
        "delivery_attempts",
        "delivery_attempts_delivery_id_fkey",
        "FOREIGN KEY (delivery_id) REFERENCES deliveries(id)",
    ),
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        if db.get_database_backend() != DbBackend::Postgres {
            return Ok(());
        }
        for (table, name, _) in DROPPED {
            db.execute_unprepared(&format!(
                "ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {name}"
            ))
            .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        if db.get_database_backend() != DbBackend::Postgres {
            return Ok(());
        }
        // NOT VALID: no scan of every row under lock here; `ALTER TABLE … VALIDATE CONSTRAINT`
        // checks the rows written meanwhile when the operator chooses.
        for (table, name, definition) in DROPPED {
            db.execute_unprepared(&format!(
                "ALTER TABLE {table} ADD CONSTRAINT {name} {definition} NOT VALID"
            ))
            .await?;
        }
        Ok(())
    }
}
