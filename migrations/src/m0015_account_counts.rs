//! Maintained account tallies: what lists answer as `total` without a search, and what
//! the hourly creation limit counts, kept in the transaction of every creation and status change
//! instead of counted over the rows on every request.
//!
//! - `business_modes.accounts_created`: every account ever written in the business and mode (the
//!   unfiltered total; accounts are never deleted).
//! - `business_modes.accounts_expired` / `accounts_expired_until`: how many of those were created
//!   at or before that time. The rolling hour holds `accounts_created - accounts_expired` once the
//!   mark is moved up to an hour ago, which counts only the creations that left the window since.
//! - `business_modes.last_account_at`: the newest creation stamp, so stamps never go backwards
//!   within a business and mode (the window's arithmetic relies on it).
//! - `account_counts`: accounts per status, for `active`, `failed` and `deactivated`; `pending`
//!   is the created total less the others, so a creation writes no second row. Each count is
//!   spread over a few rows (`shard`, chosen by the account's id; the count is their sum), so
//!   the status changes of one business (every creation's settlement) do not queue on one row
//!   lock.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

use crate::columns::{id, ts_null};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite adds one at a time.
        for column in [
            ColumnDef::new("accounts_created")
                .big_integer()
                .not_null()
                .default(0)
                .to_owned(),
            ColumnDef::new("accounts_expired")
                .big_integer()
                .not_null()
                .default(0)
                .to_owned(),
            ts_null("accounts_expired_until"),
            ts_null("last_account_at"),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table("business_modes")
                        .add_column(column)
                        .to_owned(),
                )
                .await?;
        }
        manager
            .create_table(
                Table::create()
                    .table("account_counts")
                    .col(id("business_id"))
                    .col(id("mode"))
                    .col(id("status"))
                    .col(ColumnDef::new("shard").integer().not_null())
                    .col(ColumnDef::new("n").big_integer().not_null())
                    .primary_key(
                        Index::create()
                            .col("business_id")
                            .col("mode")
                            .col("status")
                            .col("shard"),
                    )
                    .to_owned(),
            )
            .await?;

        // Initialised from the rows already there (the expiry mark starts unset: the first
        // creation of each business and mode counts what left the window, once).
        let db = manager.get_connection();
        db.execute_unprepared(
            "INSERT INTO account_counts (business_id, mode, status, shard, n) \
             SELECT business_id, mode, status, 0, count(*) FROM virtual_accounts \
             WHERE status <> 'pending' GROUP BY business_id, mode, status",
        )
        .await?;
        db.execute_unprepared(
            "UPDATE business_modes SET \
               accounts_created = (SELECT count(*) FROM virtual_accounts v \
                 WHERE v.business_id = business_modes.business_id AND v.mode = business_modes.mode), \
               last_account_at = (SELECT max(created_at) FROM virtual_accounts v \
                 WHERE v.business_id = business_modes.business_id AND v.mode = business_modes.mode)",
        )
        .await?;
        if db.get_database_backend() == DbBackend::Postgres {
            // A big business's first creation would otherwise count its whole history once.
            db.execute_unprepared(
                "UPDATE business_modes SET accounts_expired_until = now() - interval '1 hour', \
                   accounts_expired = (SELECT count(*) FROM virtual_accounts v \
                     WHERE v.business_id = business_modes.business_id \
                       AND v.mode = business_modes.mode \
                       AND v.created_at <= now() - interval '1 hour')",
            )
            .await?;
        }
        Ok(())
    }
}
