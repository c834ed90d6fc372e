//! Repeats folded into one audit row: attempts refused while an e-mail is locked are recorded
//! one row per e-mail, client address and minute, with how many there were, so a flood cannot
//! grow the audit log without bound.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::ConnectionTrait;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    /// In one transaction on SQLite too (sea-orm wraps only PostgreSQL's by default), so a
    /// process killed half-way leaves nothing half-added.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // A constant default: PostgreSQL adds it without rewriting the table.
        manager
            .alter_table(
                Table::alter()
                    .table("audit_log")
                    .add_column(ColumnDef::new("times").integer().not_null().default(1))
                    .to_owned(),
            )
            .await?;
        // What makes repeats one row; null for every other entry.
        manager
            .alter_table(
                Table::alter()
                    .table("audit_log")
                    .add_column(ColumnDef::new("fold_key").string().null())
                    .to_owned(),
            )
            .await?;
        // Partial: only folded rows are indexed (plain SQL that both databases accept).
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE UNIQUE INDEX audit_log_fold_key ON audit_log (fold_key) \
                 WHERE fold_key IS NOT NULL",
            )
            .await?;
        Ok(())
    }
}
