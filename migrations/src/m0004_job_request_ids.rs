use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Jobs remember the request that caused them, so their logs can be joined to it.
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table("outbox")
                    .add_column(ColumnDef::new("request_id").text().null())
                    .to_owned(),
            )
            .await
    }
}
