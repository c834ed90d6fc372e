use sea_orm_migration::prelude::*;

use crate::columns::{text_null, ts_null};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Payouts (docs/api/settlement-and-payouts.md): `provider_bank`, the bank the transfer was sent
/// through (set before the first send; a `transfer.*` notification is applied only from it), and a
/// lease (`lease_token`, `lease_until`) that one worker run holds while it asks, sends and decides,
/// so two runs of one job never overlap at the bank. Rows sent before this migration keep a null
/// `provider_bank`: the configured payout bank stands for it.
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite alters one at a time.
        for column in [
            text_null("provider_bank"),
            text_null("lease_token"),
            ts_null("lease_until"),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table("payouts")
                        .add_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
