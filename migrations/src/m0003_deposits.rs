use sea_orm_migration::prelude::*;

use crate::columns::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        manager
            .create_table(
                Table::create()
                    .table("deposits")
                    .col(id("id").primary_key())
                    .col(id("account_id"))
                    .col(id("business_id"))
                    .col(id("mode"))
                    .col(id("bank"))
                    .col(id("status"))
                    .col(ColumnDef::new("amount").big_integer().not_null())
                    .col(id("currency"))
                    .col(text("provider_reference"))
                    .col(text_null("sender_name"))
                    .col(text_null("sender_account_number"))
                    .col(text_null("sender_bank_name"))
                    .col(text_null("narration"))
                    .col(id("source"))
                    .col(text_null("recheck_id"))
                    .col(ts("received_at"))
                    .col(ts("created_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .from("deposits", "account_id")
                            .to("virtual_accounts", "id"),
                    )
                    .to_owned(),
            )
            .await?;
        // One provider transaction is one deposit, whichever path brings it and however often.
        manager
            .create_index(
                Index::create()
                    .name("deposits_provider_reference")
                    .table("deposits")
                    .col("mode")
                    .col("bank")
                    .col("provider_reference")
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("deposits_account_created")
                    .table("deposits")
                    .col("account_id")
                    .col("created_at")
                    .to_owned(),
            )
            .await?;

        // Every notification as it arrived (after its signature checked), with what became of it;
        // the unmatched ones are the operators' to look at.
        manager
            .create_table(
                Table::create()
                    .table("provider_notifications")
                    .col(id("id").primary_key())
                    .col(id("bank"))
                    .col(id("mode"))
                    .col(text("body"))
                    .col(text_null("provider_reference"))
                    .col(id("outcome"))
                    .col(text_null("deposit_id"))
                    .col(ts("received_at"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("provider_notifications_outcome")
                    .table("provider_notifications")
                    .col("outcome")
                    .col("received_at")
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table("rechecks")
                    .col(id("id").primary_key())
                    .col(id("account_id"))
                    .col(id("business_id"))
                    .col(id("mode"))
                    .col(id("status"))
                    .col(ts("window_from"))
                    .col(ts("window_to"))
                    .col(ColumnDef::new("deposits_found").integer().null())
                    .col(text_null("failure_reason"))
                    .col(ts("created_at"))
                    .col(ts_null("completed_at"))
                    .col(ts("updated_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .from("rechecks", "account_id")
                            .to("virtual_accounts", "id"),
                    )
                    .to_owned(),
            )
            .await?;
        // At most one open recheck per account: a second request is given the open one.
        db.execute_unprepared(
            "CREATE UNIQUE INDEX rechecks_one_open ON rechecks (account_id) \
             WHERE status IN ('queued', 'running')",
        )
        .await?;
        Ok(())
    }
}
