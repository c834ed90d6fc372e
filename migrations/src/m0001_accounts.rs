use sea_orm_migration::prelude::*;

use crate::columns::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table("businesses")
                    .col(id("id").primary_key())
                    .col(text("name"))
                    .col(text("kyb_status"))
                    .col(ts("created_at"))
                    .col(ts("updated_at"))
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table("business_modes")
                    .col(id("business_id"))
                    .col(id("mode"))
                    .col(text("secret_key_hash"))
                    .col(ts_null("key_revoked_at"))
                    .col(text_null("webhook_url"))
                    .col(text("webhook_secret_enc"))
                    .col(text_null("previous_webhook_secret_enc"))
                    .col(ts_null("previous_secret_expires_at"))
                    .col(ts("created_at"))
                    .col(ts("updated_at"))
                    .primary_key(Index::create().col("business_id").col("mode"))
                    .foreign_key(
                        ForeignKey::create()
                            .from("business_modes", "business_id")
                            .to("businesses", "id"),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("business_modes_secret_key_hash")
                    .table("business_modes")
                    .col("secret_key_hash")
                    .unique()
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table("virtual_accounts")
                    .col(id("id").primary_key())
                    .col(id("business_id"))
                    .col(id("mode"))
                    .col(id("status"))
                    .col(id("bank"))
                    .col(text_null("account_number"))
                    .col(text("account_name"))
                    .col(text("customer_name"))
                    .col(text("customer_email"))
                    .col(text("customer_phone"))
                    .col(text_null("customer_reference"))
                    .col(id("identity_type"))
                    .col(text("identity_enc"))
                    .col(text_null("failure_reason"))
                    .col(text_null("deactivation_reason"))
                    .col(ts("created_at"))
                    .col(ts_null("activated_at"))
                    .col(ts_null("deactivated_at"))
                    .col(ts("updated_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .from("virtual_accounts", "business_id")
                            .to("businesses", "id"),
                    )
                    .to_owned(),
            )
            .await?;
        // Listing (newest first) and the rolling-hour count both walk this index.
        manager
            .create_index(
                Index::create()
                    .name("virtual_accounts_business_mode_created")
                    .table("virtual_accounts")
                    .col("business_id")
                    .col("mode")
                    .col("created_at")
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        // One live account per customerReference; a deactivated or failed one frees it.
        db.execute_unprepared(
            "CREATE UNIQUE INDEX virtual_accounts_live_reference ON virtual_accounts \
             (business_id, mode, customer_reference) \
             WHERE customer_reference IS NOT NULL AND status IN ('pending', 'active')",
        )
        .await?;
        // A bank never gives one number to two accounts: deposits are matched on it.
        db.execute_unprepared(
            "CREATE UNIQUE INDEX virtual_accounts_bank_number ON virtual_accounts \
             (bank, account_number) WHERE account_number IS NOT NULL",
        )
        .await?;

        manager
            .create_table(
                Table::create()
                    .table("idempotency_keys")
                    .col(id("business_id"))
                    .col(id("mode"))
                    .col(text("key"))
                    .col(text("request_hash"))
                    .col(id("state"))
                    .col(ColumnDef::new("response_status").integer().null())
                    .col(text_null("account_id"))
                    .col(ts("created_at"))
                    .col(ts("updated_at"))
                    .primary_key(Index::create().col("business_id").col("mode").col("key"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idempotency_keys_created")
                    .table("idempotency_keys")
                    .col("created_at")
                    .to_owned(),
            )
            .await?;

        // The outbox is also the job table: a row is a unit of work with a due time. A relay
        // publishes due rows (the queue carries the id); a consumer completes or reschedules it.
        manager
            .create_table(
                Table::create()
                    .table("outbox")
                    .col(id("id").primary_key())
                    .col(id("queue"))
                    .col(text("payload"))
                    .col(ts("run_at"))
                    .col(ts_null("published_at"))
                    .col(ColumnDef::new("attempts").integer().not_null().default(0))
                    .col(ts_null("completed_at"))
                    .col(ts_null("dead_at"))
                    .col(text_null("last_error"))
                    .col(ts("created_at"))
                    .col(ts("updated_at"))
                    .to_owned(),
            )
            .await?;
        db.execute_unprepared(
            "CREATE INDEX outbox_due ON outbox (run_at) \
             WHERE completed_at IS NULL AND dead_at IS NULL",
        )
        .await?;

        manager
            .create_table(
                Table::create()
                    .table("events")
                    .col(id("id").primary_key())
                    .col(id("business_id"))
                    .col(id("mode"))
                    .col(id("type"))
                    .col(text("data"))
                    .col(ts("created_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .from("events", "business_id")
                            .to("businesses", "id"),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("events_business_mode_created")
                    .table("events")
                    .col("business_id")
                    .col("mode")
                    .col("created_at")
                    .to_owned(),
            )
            .await?;
        Ok(())
    }
}
