use sea_orm_migration::prelude::*;

use crate::columns::ts_null;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Leases on outbox rows, so the relay publishes outside any transaction and republishes only
/// what may be lost: `publishing_until` (a relay claimed the row and is publishing it; another
/// relay leaves it alone until then) and `started_at` (a consumer began the job). A replayed
/// dead job is found by `outbox_dead`, so a stale copy in a dead-letter queue can be dropped.
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite alters one at a time.
        for column in ["publishing_until", "started_at"] {
            manager
                .alter_table(
                    Table::alter()
                        .table("outbox")
                        .add_column(ts_null(column))
                        .to_owned(),
                )
                .await?;
        }
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE INDEX outbox_dead ON outbox (queue, completed_at) WHERE dead_at IS NOT NULL",
            )
            .await?;
        Ok(())
    }
}
