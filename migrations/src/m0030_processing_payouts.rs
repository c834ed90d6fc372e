use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// `worker-payouts` looks every 15 seconds for each payout bank's oldest payout still
/// `processing` (`payouts_processing_oldest_seconds`, docs/operations/health-and-metrics.md):
/// with this index that is the few rows in `processing`, not every payout ever made. Not a
/// partial index: the status is a bound parameter, which a generic plan cannot match to one.
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                Index::create()
                    .name("payouts_status_bank_sent")
                    .table("payouts")
                    .col("status")
                    .col("provider_bank")
                    .col("sent_at")
                    .to_owned(),
            )
            .await
    }
}
