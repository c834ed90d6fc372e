//! An operator's command names who ran it: the host account (`actor_operator`) and the command
//! (`actor_via`, e.g. `api admin`), so the audit log tells one operator from another
//! (docs/dashboard.md).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    /// Both columns or neither, on SQLite too.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite alters a table one change at a time.
        for column in ["actor_operator", "actor_via"] {
            manager
                .alter_table(
                    Table::alter()
                        .table("audit_log")
                        .add_column(ColumnDef::new(column).string().null())
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
