//! The audit log records changes made through the API (docs/dashboard.md): their actor is the
//! secret key that made them, by its id (never the key), beside a user or an operator.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table("audit_log")
                    // An `api_keys` id; no foreign key, as for users.
                    .add_column(ColumnDef::new("actor_key_id").string().null())
                    .to_owned(),
            )
            .await
    }
}
