use sea_orm_migration::prelude::*;

use crate::columns::text_null;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Each attempt keeps the URL it went to: every attempt goes to the mode's webhook URL of its
/// moment, so a delivery's attempts may go to different endpoints. Attempts recorded before keep
/// NULL (unknown: a replay may have moved their delivery since), as do attempts made while the
/// mode had no URL.
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table("delivery_attempts")
                    .add_column(text_null("url"))
                    .to_owned(),
            )
            .await
    }
}
