use sea_orm_migration::prelude::*;

use crate::columns::ts_null;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Leases on outbox rows, so the relay publishes outside any transaction and publishes again
/// only what may be lost: `publishing_until` (set while the broker has not confirmed a relay's
/// publish; past it, any relay publishes the row again) and `started_at` (a consumer began the
/// job). `outbox_dead` finds replayed dead jobs, whose dead-letter copies are then dropped.
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
