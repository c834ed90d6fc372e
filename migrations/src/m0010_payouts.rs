use sea_orm_migration::prelude::*;

use crate::columns::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Settlement accounts, the balance ledger and payouts (docs/api/settlement-and-payouts.md).
/// Deposits credited before the ledger existed are entered into it here, so every balance starts
/// equal to what was credited.
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        manager
            .create_table(
                Table::create()
                    .table("settlement_accounts")
                    .col(id("business_id"))
                    .col(id("mode"))
                    .col(id("bank_code"))
                    .col(text("bank_name"))
                    .col(id("account_number"))
                    .col(text("account_name"))
                    .col(id("schedule"))
                    .col(ts("verified_at"))
                    .col(ts("payouts_available_at"))
                    .col(ts("created_at"))
                    .col(ts("updated_at"))
                    .primary_key(Index::create().col("business_id").col("mode"))
                    .to_owned(),
            )
            .await?;

        // One row per business and mode: the sum of its ledger, kept in the same transaction as
        // every entry, so a debit can be checked and made in one statement.
        manager
            .create_table(
                Table::create()
                    .table("balances")
                    .col(id("business_id"))
                    .col(id("mode"))
                    .col(ColumnDef::new("available").big_integer().not_null())
                    .col(ts("updated_at"))
                    .primary_key(Index::create().col("business_id").col("mode"))
                    .check(Expr::col("available").gte(0))
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table("ledger_entries")
                    .col(id("id").primary_key())
                    .col(id("business_id"))
                    .col(id("mode"))
                    .col(id("type"))
                    .col(ColumnDef::new("amount").big_integer().not_null())
                    .col(ColumnDef::new("balance_after").big_integer().not_null())
                    .col(id("source_id"))
                    .col(ts("created_at"))
                    .to_owned(),
            )
            .await?;
        // A fact moves money once: one entry per (type, source).
        manager
            .create_index(
                Index::create()
                    .name("ledger_entries_type_source")
                    .table("ledger_entries")
                    .col("type")
                    .col("source_id")
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("ledger_entries_business_mode_created")
                    .table("ledger_entries")
                    .col("business_id")
                    .col("mode")
                    .col("created_at")
                    .col("id")
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table("payouts")
                    .col(id("id").primary_key())
                    .col(id("business_id"))
                    .col(id("mode"))
                    .col(id("status"))
                    .col(ColumnDef::new("amount").big_integer().not_null())
                    .col(id("currency"))
                    .col(text_null("reference"))
                    .col(text_null("narration"))
                    .col(id("bank_code"))
                    .col(text("bank_name"))
                    .col(id("account_number"))
                    .col(text("account_name"))
                    .col(text_null("session_id"))
                    .col(text_null("failure_reason"))
                    .col(ts_null("sent_at"))
                    .col(ts("created_at"))
                    .col(ts_null("completed_at"))
                    .col(ts("updated_at"))
                    .to_owned(),
            )
            .await?;
        db.execute_unprepared(
            "CREATE UNIQUE INDEX payouts_reference ON payouts (business_id, mode, reference) \
             WHERE reference IS NOT NULL",
        )
        .await?;
        manager
            .create_index(
                Index::create()
                    .name("payouts_business_mode_created")
                    .table("payouts")
                    .col("business_id")
                    .col("mode")
                    .col("created_at")
                    .col("id")
                    .to_owned(),
            )
            .await?;

        // The ledger of what was credited so far: one entry per credited deposit, in the order
        // they were recorded, with the running balance; then the balances themselves. The entry
        // id reuses the deposit's ULID, so it is unique and ordered like the deposits.
        db.execute_unprepared(
            "INSERT INTO ledger_entries (id, business_id, mode, type, amount, balance_after, source_id, created_at) \
             SELECT 'btx_' || substr(id, 5), business_id, mode, 'deposit', amount, \
                    SUM(amount) OVER (PARTITION BY business_id, mode ORDER BY created_at, id \
                                      ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW), \
                    id, created_at \
             FROM deposits WHERE status = 'credited'",
        )
        .await?;
        db.execute_unprepared(
            "INSERT INTO balances (business_id, mode, available, updated_at) \
             SELECT business_id, mode, SUM(amount), MAX(created_at) FROM ledger_entries \
             GROUP BY business_id, mode",
        )
        .await?;
        Ok(())
    }
}
