use sea_orm_migration::prelude::*;

use crate::columns::{id, text, text_null, ts};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Notifications are deduplicated on (mode, bank, body digest): rows stored before have no
/// digest, and NULLs never collide, so no backfill is needed. Conflicting second reports of a
/// transaction get a table of their own.
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table("provider_notifications")
                    .add_column(text_null("body_digest"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("provider_notifications_mode_bank_digest")
                    .table("provider_notifications")
                    .col("mode")
                    .col("bank")
                    .col("body_digest")
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table("deposit_conflicts")
                    .col(id("id").primary_key())
                    .col(id("deposit_id"))
                    .col(id("mode"))
                    .col(id("bank"))
                    .col(text("provider_reference"))
                    .col(id("source"))
                    .col(text("reported"))
                    .col(ts("created_at"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("deposit_conflicts_deposit")
                    .table("deposit_conflicts")
                    .col("deposit_id")
                    .to_owned(),
            )
            .await
    }
}
