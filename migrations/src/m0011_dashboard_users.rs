//! The dashboard (docs/dashboard.md): its users, their sessions (stored as token hashes), the
//! per-e-mail sign-in throttle, and the account an event is about, so an account's page finds its
//! events by index instead of searching event bodies (and its rechecks by index too).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::DbBackend;

use crate::columns::{id, text, text_null, ts, ts_null};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table("users")
                    .col(id("id").primary_key())
                    .col(id("business_id"))
                    // Lower-cased; one user per address across all businesses, since signing in
                    // names no business.
                    .col(text("email"))
                    // owner | developer | viewer
                    .col(id("role"))
                    // Argon2id, PHC string (parameters and salt included).
                    .col(text("password_hash"))
                    // The TOTP secret, encrypted with the service's key; set once confirmed.
                    .col(text_null("totp_secret_enc"))
                    // A secret being enrolled, not yet confirmed by a code.
                    .col(text_null("totp_pending_enc"))
                    // The last TOTP time step accepted: a code is accepted once (RFC 6238 §5.2).
                    .col(ColumnDef::new("totp_last_step").big_integer().null())
                    .col(ts("created_at"))
                    .col(ts("updated_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .from("users", "business_id")
                            .to("businesses", "id"),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("users_email")
                    .table("users")
                    .col("email")
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("users_business")
                    .table("users")
                    .col("business_id")
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table("dashboard_sessions")
                    .col(id("id").primary_key())
                    // SHA-256 of the 256-bit cookie token; the token itself is never stored.
                    .col(text("token_hash"))
                    .col(id("user_id"))
                    // True between a correct password and the TOTP code: not signed in yet.
                    .col(ColumnDef::new("awaiting_totp").boolean().not_null())
                    .col(ts("created_at"))
                    .col(ts("last_seen_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .from("dashboard_sessions", "user_id")
                            .to("users", "id")
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("dashboard_sessions_token")
                    .table("dashboard_sessions")
                    .col("token_hash")
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("dashboard_sessions_user")
                    .table("dashboard_sessions")
                    .col("user_id")
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table("sign_in_throttles")
                    // SHA-256 of the lower-cased e-mail as typed: unknown addresses are counted
                    // alike, without keeping what people typed (sometimes a password).
                    .col(id("email_hash").primary_key())
                    .col(ColumnDef::new("failures").integer().not_null())
                    .col(ts("window_started_at"))
                    .col(ts_null("locked_until"))
                    .to_owned(),
            )
            .await?;

        manager
            .alter_table(
                Table::alter()
                    .table("events")
                    .add_column(ColumnDef::new("account_id").string().null())
                    .to_owned(),
            )
            .await?;
        // Events recorded before: account events carry the account as `data`, deposit events
        // name it in `data.accountId`.
        let backfill = match manager.get_database_backend() {
            DbBackend::Postgres => {
                "UPDATE events SET account_id = CASE \
                   WHEN type LIKE 'virtualaccount.%' THEN data::jsonb ->> 'id' \
                   WHEN type LIKE 'deposit.%' THEN data::jsonb ->> 'accountId' END \
                 WHERE type LIKE 'virtualaccount.%' OR type LIKE 'deposit.%'"
            }
            _ => {
                "UPDATE events SET account_id = CASE \
                   WHEN type LIKE 'virtualaccount.%' THEN json_extract(data, '$.id') \
                   WHEN type LIKE 'deposit.%' THEN json_extract(data, '$.accountId') END \
                 WHERE type LIKE 'virtualaccount.%' OR type LIKE 'deposit.%'"
            }
        };
        manager
            .get_connection()
            .execute_unprepared(backfill)
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("events_account_created")
                    .table("events")
                    .col("account_id")
                    .col("created_at")
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("rechecks_account_created")
                    .table("rechecks")
                    .col("account_id")
                    .col("created_at")
                    .to_owned(),
            )
            .await?;
        Ok(())
    }
}
