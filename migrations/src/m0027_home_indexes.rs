use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// The dashboard's home page (docs/dashboard.md) reads one business and mode's last 30 days of
/// deposits by when they were received and of webhook deliveries by when they were made, and
/// counts its deliveries by outcome: one index range each, however many rows the business has
/// outside them. (The balance's days read `ledger_entries_business_mode_created`, m0010.)
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let indexes: [(&str, &str, &[&str]); 3] = [
            (
                "deposits_business_mode_received",
                "deposits",
                &["business_id", "mode", "received_at"],
            ),
            (
                "deliveries_business_mode_created",
                "deliveries",
                &["business_id", "mode", "created_at"],
            ),
            (
                "deliveries_business_mode_status_attempts",
                "deliveries",
                &["business_id", "mode", "status", "attempts"],
            ),
        ];
        for (name, table, cols) in indexes {
            let mut index = Index::create();
            index.name(name).table(table);
            for col in cols {
                index.col(*col);
            }
            manager.create_index(index.to_owned()).await?;
        }
        Ok(())
    }
}
