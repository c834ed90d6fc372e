use sea_orm_migration::prelude::*;

use crate::columns::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Keys get a table of their own, so a business and mode can have two working keys (the new one
/// and one rolled away with a grace), each with its expiry and last use. Every key hash in
/// `business_modes` moves here unchanged (a revoked one stays revoked), so no caller's key stops
/// working; then the old columns go.
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table("api_keys")
                    .col(id("id").primary_key())
                    .col(id("business_id"))
                    .col(id("mode"))
                    .col(text("key_hash"))
                    .col(text_null("last_four"))
                    .col(ts("created_at"))
                    .col(ts_null("expires_at"))
                    .col(ts_null("revoked_at"))
                    .col(ts_null("last_used_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .from("api_keys", ("business_id", "mode"))
                            .to("business_modes", ("business_id", "mode")),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("api_keys_key_hash")
                    .table("api_keys")
                    .col("key_hash")
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("api_keys_business_mode")
                    .table("api_keys")
                    .col("business_id")
                    .col("mode")
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        // One current key (not rolled, not revoked) per business and mode, whatever races.
        db.execute_unprepared(
            "CREATE UNIQUE INDEX api_keys_current ON api_keys (business_id, mode) \
             WHERE expires_at IS NULL AND revoked_at IS NULL",
        )
        .await?;
        // The id is made from the business's time-ordered id, unique per business and mode.
        // The last four characters of these keys were never stored: the dashboard shows none.
        db.execute_unprepared(
            "INSERT INTO api_keys (id, business_id, mode, key_hash, last_four, created_at, \
             expires_at, revoked_at, last_used_at) \
             SELECT 'key_' || business_id || '_' || mode, business_id, mode, secret_key_hash, \
             NULL, created_at, NULL, key_revoked_at, NULL FROM business_modes",
        )
        .await?;
        db.execute_unprepared("DROP INDEX business_modes_secret_key_hash")
            .await?;
        db.execute_unprepared("ALTER TABLE business_modes DROP COLUMN secret_key_hash")
            .await?;
        db.execute_unprepared("ALTER TABLE business_modes DROP COLUMN key_revoked_at")
            .await?;
        Ok(())
    }
}
