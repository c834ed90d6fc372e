use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

use crate::columns::{id, text, ts};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// An account's activation (pending → active with its number) changes no indexed
/// column of `virtual_accounts`, so PostgreSQL writes it as a HOT update (no new entry in any of
/// the table's indexes, the trigram one included) instead of a new entry in six.
///
/// What indexed the status and the number moves beside the account:
/// - `live_reference`, a generated column (the customerReference while the account is pending or
///   active): the one-live-account-per-reference unique index is on it, and activation leaves
///   its value as it was;
/// - `account_states` (the account's status, for lists filtered by status) and `account_numbers`
///   (mode, bank and number → account: deposits are matched on it, and it keeps a number to one
///   account), both kept by a trigger on `virtual_accounts`, so that no writer can forget them;
/// - the trigram search index no longer holds the number (a search for digits also reads
///   `account_numbers`, which has a trigram index of its own on PostgreSQL).
///
/// `virtual_accounts` stays what every read of an account reads. On PostgreSQL, adding the
/// stored column rewrites the table once (seconds at a million accounts).
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    /// In one transaction on SQLite too (sea-orm wraps only PostgreSQL's by default): `api dev`
    /// killed half-way through would otherwise leave the column added and the rest undone, and
    /// the migration could never run again.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        let postgres = db.get_database_backend() == DbBackend::Postgres;
        // SQLite can add only a virtual generated column; it has no HOT updates to keep.
        let stored = if postgres { "STORED" } else { "VIRTUAL" };
        db.execute_unprepared(&format!(
            "ALTER TABLE virtual_accounts ADD COLUMN live_reference text GENERATED ALWAYS AS \
             (CASE WHEN status IN ('pending', 'active') THEN customer_reference END) {stored}"
        ))
        .await?;
        db.execute_unprepared(
            "CREATE UNIQUE INDEX virtual_accounts_live_reference_key ON virtual_accounts \
             (business_id, mode, live_reference) WHERE live_reference IS NOT NULL",
        )
        .await?;

        manager
            .create_table(
                Table::create()
                    .table("account_states")
                    .col(id("account_id").primary_key())
                    .col(id("business_id"))
                    .col(id("mode"))
                    .col(id("status"))
                    .col(ts("created_at"))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table("account_numbers")
                    .col(id("mode"))
                    .col(id("bank"))
                    .col(text("account_number"))
                    .col(id("account_id"))
                    .col(id("business_id"))
                    .primary_key(
                        Index::create()
                            .col("mode")
                            .col("bank")
                            .col("account_number"),
                    )
                    .to_owned(),
            )
            .await?;
        // Filled before their other indexes and the trigger exist (one pass each).
        db.execute_unprepared(
            "INSERT INTO account_states (account_id, business_id, mode, status, created_at) \
             SELECT id, business_id, mode, status, created_at FROM virtual_accounts",
        )
        .await?;
        db.execute_unprepared(
            "INSERT INTO account_numbers (mode, bank, account_number, account_id, business_id) \
             SELECT mode, bank, account_number, id, business_id FROM virtual_accounts \
             WHERE account_number IS NOT NULL",
        )
        .await?;
        db.execute_unprepared(
            "CREATE INDEX account_states_list ON account_states \
             (business_id, mode, status, created_at, account_id)",
        )
        .await?;
        if postgres {
            self.postgres_triggers(manager).await?;
        } else {
            self.sqlite_triggers(manager).await?;
        }

        for old in [
            "virtual_accounts_live_reference",
            "virtual_accounts_business_mode_status_created_id",
            "virtual_accounts_mode_bank_number",
        ] {
            db.execute_unprepared(&format!("DROP INDEX {old}")).await?;
        }
        if postgres {
            // The expression is `store::accounts::SEARCH_TEXT`, character for character.
            db.execute_unprepared("DROP INDEX virtual_accounts_search")
                .await?;
            db.execute_unprepared(
                "CREATE INDEX virtual_accounts_search ON virtual_accounts USING gin \
                 ((lower(customer_name || chr(31) || customer_email || chr(31) || \
                 coalesce(customer_reference, '') || chr(31) || customer_phone)) gin_trgm_ops)",
            )
            .await?;
            db.execute_unprepared(
                "CREATE INDEX account_numbers_search ON account_numbers USING gin \
                 (account_number gin_trgm_ops)",
            )
            .await?;
            // Statistics now, not when autovacuum comes: until then the planner takes the new
            // tables for empty (a search by number read all of `account_numbers`).
            db.execute_unprepared("ANALYZE account_states, account_numbers")
                .await?;
        }
        Ok(())
    }
}

impl Migration {
    /// One row trigger keeps both tables: a new account's state (and number, if it has one), a
    /// changed status (or creation stamp, which only tests move), a number written once. A
    /// number is never changed or taken away: that is refused here, whoever tries.
    async fn postgres_triggers(&self, manager: &SchemaManager<'_>) -> Result<(), DbErr> {
        let db = manager.get_connection();
        db.execute_unprepared(
            "CREATE FUNCTION vas_account_side_rows() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
               IF TG_OP = 'INSERT' THEN
                 INSERT INTO account_states (account_id, business_id, mode, status, created_at)
                   VALUES (NEW.id, NEW.business_id, NEW.mode, NEW.status, NEW.created_at);
               ELSE
                 IF OLD.account_number IS NOT NULL
                     AND NEW.account_number IS DISTINCT FROM OLD.account_number THEN
                   RAISE EXCEPTION 'an account''s number is never changed once written';
                 END IF;
                 IF NEW.status IS DISTINCT FROM OLD.status
                     OR NEW.created_at IS DISTINCT FROM OLD.created_at THEN
                   UPDATE account_states SET status = NEW.status, created_at = NEW.created_at
                     WHERE account_id = NEW.id;
                 END IF;
               END IF;
               IF NEW.account_number IS NOT NULL
                   AND (TG_OP = 'INSERT' OR OLD.account_number IS NULL) THEN
                 INSERT INTO account_numbers (mode, bank, account_number, account_id, business_id)
                   VALUES (NEW.mode, NEW.bank, NEW.account_number, NEW.id, NEW.business_id);
               END IF;
               RETURN NULL;
             END $$",
        )
        .await?;
        db.execute_unprepared(
            "CREATE TRIGGER virtual_accounts_side_rows AFTER INSERT OR UPDATE OF status, \
             created_at, account_number ON virtual_accounts FOR EACH ROW \
             EXECUTE FUNCTION vas_account_side_rows()",
        )
        .await?;
        Ok(())
    }

    /// [`Self::postgres_triggers`]'s rules in SQLite's trigger language.
    async fn sqlite_triggers(&self, manager: &SchemaManager<'_>) -> Result<(), DbErr> {
        let db = manager.get_connection();
        for trigger in [
            "CREATE TRIGGER virtual_accounts_state_new AFTER INSERT ON virtual_accounts BEGIN \
               INSERT INTO account_states (account_id, business_id, mode, status, created_at) \
                 VALUES (NEW.id, NEW.business_id, NEW.mode, NEW.status, NEW.created_at); END",
            "CREATE TRIGGER virtual_accounts_number_kept BEFORE UPDATE OF account_number \
               ON virtual_accounts WHEN OLD.account_number IS NOT NULL \
                 AND NEW.account_number IS NOT OLD.account_number BEGIN \
               SELECT RAISE(ABORT, 'an account''s number is never changed once written'); END",
            "CREATE TRIGGER virtual_accounts_state_changed AFTER UPDATE OF status, created_at \
               ON virtual_accounts WHEN NEW.status IS NOT OLD.status \
                 OR NEW.created_at IS NOT OLD.created_at BEGIN \
               UPDATE account_states SET status = NEW.status, created_at = NEW.created_at \
                 WHERE account_id = NEW.id; END",
            "CREATE TRIGGER virtual_accounts_number_new AFTER INSERT ON virtual_accounts \
               WHEN NEW.account_number IS NOT NULL BEGIN \
               INSERT INTO account_numbers (mode, bank, account_number, account_id, business_id) \
                 VALUES (NEW.mode, NEW.bank, NEW.account_number, NEW.id, NEW.business_id); END",
            "CREATE TRIGGER virtual_accounts_number_written AFTER UPDATE OF account_number \
               ON virtual_accounts WHEN OLD.account_number IS NULL \
                 AND NEW.account_number IS NOT NULL BEGIN \
               INSERT INTO account_numbers (mode, bank, account_number, account_id, business_id) \
                 VALUES (NEW.mode, NEW.bank, NEW.account_number, NEW.id, NEW.business_id); END",
        ] {
            db.execute_unprepared(trigger).await?;
        }
        Ok(())
    }
}
