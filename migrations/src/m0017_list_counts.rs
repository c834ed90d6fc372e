//! Maintained totals of the deposits, events, payouts and ledger lists: what those
//! lists answer as `total` without counting their rows on every request.
//!
//! `list_counts` holds, per business and mode, how many rows each list has in each `bucket` (the
//! value its filter takes: an account's deposits, a deposit status, an event type, a payout
//! status, `''` for the ledger). A count is the sum of its `shard` rows: PostgreSQL spreads each
//! over 16 (by a hash of the counted row's id) so that concurrent writers of one business rarely
//! wait on the same row; SQLite has one writer at a time and uses shard 0.
//!
//! Database triggers keep them, not the service's code: no write path (the service, an admin
//! command, a test's or benchmark's raw INSERT, a purge) can forget them, and a write costs no
//! extra round trip. On PostgreSQL they are constraint triggers deferred to commit: a count row
//! is locked only from the commit's upsert to the end of the commit (not for the rest of the
//! writer's transaction), and after every other lock the transaction takes, so counting adds no
//! lock cycle with the rest of a transaction. An UPDATE moves a row between buckets old first,
//! new second: a payout's steps only go forward (pending, processing, succeeded, reversed; or to
//! failed), so every transaction takes the status rows of a shard in one order.
//!
//! A bulk load counts as it inserts, but a transaction updates its count rows once per row and
//! each update leaves a version the next steps over: keep loads to ~10,000 rows per transaction.
//! `GET /v1/payouts?status=` gets its keyset index here too.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

use crate::columns::id;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// How many rows each count is spread over on PostgreSQL (a power of two: the shard is the
/// hash's low bits).
const SHARDS: u32 = 16;

/// A counted table: its lists, each as (list name, the column that is its bucket, None for a
/// list without a filter: bucket `''`).
struct Counted {
    table: &'static str,
    lists: &'static [(&'static str, Option<&'static str>)],
}

/// Every counted list. The names are `store::list_counts::List`'s.
const COUNTED: [Counted; 4] = [
    Counted {
        table: "deposits",
        lists: &[
            ("deposits", Some("account_id")),
            ("deposit_statuses", Some("status")),
        ],
    },
    Counted {
        table: "events",
        lists: &[("events", Some("type"))],
    },
    Counted {
        table: "payouts",
        lists: &[("payouts", Some("status"))],
    },
    Counted {
        table: "ledger_entries",
        lists: &[("ledger", None)],
    },
];

impl Counted {
    /// The VALUES rows of one counted row (`r` is NEW or OLD) with `delta`.
    fn values(&self, r: &str, shard: &str, delta: i32) -> String {
        self.lists
            .iter()
            .map(|(list, bucket)| {
                let bucket = bucket.map_or("''".to_owned(), |c| format!("{r}.{c}"));
                let shard = shard.replace("{r}", r);
                format!("({r}.business_id, {r}.mode, '{list}', {bucket}, {shard}, {delta})")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn upsert(&self, r: &str, shard: &str, delta: i32) -> String {
        format!(
            "INSERT INTO list_counts (business_id, mode, list, bucket, shard, n) VALUES {} \
             ON CONFLICT (business_id, mode, list, bucket, shard) \
             DO UPDATE SET n = list_counts.n + excluded.n",
            self.values(r, shard, delta)
        )
    }

    /// The columns an UPDATE must change to move a row to other counts.
    fn watched_columns(&self) -> Vec<&'static str> {
        let mut columns = vec!["business_id", "mode"];
        columns.extend(self.lists.iter().filter_map(|(_, bucket)| *bucket));
        columns
    }

    /// True in a trigger's WHEN when an UPDATE moved the row to other counts.
    fn moved(&self, distinct: &str) -> String {
        self.watched_columns()
            .iter()
            .map(|c| format!("OLD.{c} {distinct} NEW.{c}"))
            .collect::<Vec<_>>()
            .join(" OR ")
    }

    fn postgres(&self) -> Vec<String> {
        let table = self.table;
        let shard = format!("hashtext({{r}}.id) & {}", SHARDS - 1);
        let function = format!("{table}_list_counts");
        let columns = self.watched_columns().join(", ");
        let moved = self.moved("IS DISTINCT FROM");
        let lists = self
            .lists
            .iter()
            .map(|(l, _)| format!("'{l}'"))
            .collect::<Vec<_>>()
            .join(", ");
        vec![
            format!(
                "CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ \
                 BEGIN \
                   IF TG_OP IN ('UPDATE', 'DELETE') THEN {}; END IF; \
                   IF TG_OP IN ('UPDATE', 'INSERT') THEN {}; END IF; \
                   RETURN NULL; \
                 END $$",
                self.upsert("OLD", &shard, -1),
                self.upsert("NEW", &shard, 1),
            ),
            format!(
                "CREATE CONSTRAINT TRIGGER {table}_counted_write AFTER INSERT OR DELETE ON {table} \
                 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {function}()"
            ),
            format!(
                "CREATE CONSTRAINT TRIGGER {table}_counted_move AFTER UPDATE OF {columns} ON {table} \
                 DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN ({moved}) \
                 EXECUTE FUNCTION {function}()"
            ),
            // TRUNCATE fires no row trigger: it empties the counts with the rows.
            format!(
                "CREATE FUNCTION {table}_list_counts_truncated() RETURNS trigger LANGUAGE plpgsql \
                 AS $$ BEGIN DELETE FROM list_counts WHERE list IN ({lists}); RETURN NULL; END $$"
            ),
            format!(
                "CREATE TRIGGER {table}_counted_truncate AFTER TRUNCATE ON {table} \
                 FOR EACH STATEMENT EXECUTE FUNCTION {table}_list_counts_truncated()"
            ),
        ]
    }

    fn sqlite(&self) -> Vec<String> {
        let table = self.table;
        let columns = self.watched_columns().join(", ");
        let moved = self.moved("IS NOT");
        let old = self.upsert("OLD", "0", -1);
        let new = self.upsert("NEW", "0", 1);
        vec![
            format!(
                "CREATE TRIGGER {table}_counted_insert AFTER INSERT ON {table} BEGIN {new}; END"
            ),
            format!(
                "CREATE TRIGGER {table}_counted_delete AFTER DELETE ON {table} BEGIN {old}; END"
            ),
            format!(
                "CREATE TRIGGER {table}_counted_move AFTER UPDATE OF {columns} ON {table} \
                 WHEN {moved} BEGIN {old}; {new}; END"
            ),
        ]
    }

    /// Counts the rows already there (shard 0).
    fn initial(&self) -> Vec<String> {
        self.lists
            .iter()
            .map(|(list, bucket)| {
                let (value, grouped) = match bucket {
                    Some(column) => (*column, format!(", {column}")),
                    None => ("''", String::new()),
                };
                format!(
                    "INSERT INTO list_counts (business_id, mode, list, bucket, shard, n) \
                     SELECT business_id, mode, '{list}', {value}, 0, count(*) FROM {} \
                     GROUP BY business_id, mode{grouped}",
                    self.table
                )
            })
            .collect()
    }
}

/// The tables counted here, each with its trigger function (`{table}_list_counts`).
pub(crate) fn counted_tables() -> impl Iterator<Item = &'static str> {
    COUNTED.iter().map(|c| c.table)
}

/// What the insert triggers count for the rows whose ids `ids(table)` gives, every row in shard
/// `shard` (an SQL expression), one row per counted row and list: for a transaction that counts
/// its own inserts (`m0032_counted_by_caller`), by the same rule as the triggers.
pub(crate) fn inserted_counts(ids: impl Fn(&str) -> String, shard: &str) -> String {
    let tables = COUNTED.iter().map(|c| (c.table, c.values("r", shard, 1)));
    crate::counted_rows(tables, "business_id, mode, list, bucket, shard, n", ids)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    /// One transaction on SQLite too (PostgreSQL's is the default): the counts start from the
    /// rows as the triggers start counting, with no write in between.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table("list_counts")
                    .col(id("business_id"))
                    .col(id("mode"))
                    .col(id("list"))
                    .col(id("bucket"))
                    .col(ColumnDef::new("shard").integer().not_null())
                    .col(ColumnDef::new("n").big_integer().not_null())
                    .primary_key(
                        Index::create()
                            .col("business_id")
                            .col("mode")
                            .col("list")
                            .col("bucket")
                            .col("shard"),
                    )
                    .to_owned(),
            )
            .await?;
        // `GET /v1/payouts?status=` walks this (the unfiltered list has
        // payouts_business_mode_created): a rare status is not found by filtering the newest.
        let mut index = Index::create();
        index
            .name("payouts_business_mode_status_created_id")
            .table("payouts");
        for col in ["business_id", "mode", "status", "created_at", "id"] {
            index.col(col);
        }
        manager.create_index(index.to_owned()).await?;
        let db = manager.get_connection();
        let postgres = db.get_database_backend() == DbBackend::Postgres;
        for counted in &COUNTED {
            // On PostgreSQL CREATE TRIGGER locks out the table's writers until this transaction
            // commits, so the initial count below sees every row written before the triggers.
            let statements = if postgres {
                counted.postgres()
            } else {
                counted.sqlite()
            };
            for sql in statements.iter().chain(&counted.initial()) {
                db.execute_unprepared(sql).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payout_move_takes_the_old_status_row_first() {
        let payouts = &COUNTED[2];
        let sql = payouts.postgres().join("\n");
        let old = sql
            .find("(OLD.business_id, OLD.mode, 'payouts', OLD.status, hashtext(OLD.id) & 15, -1)");
        let new = sql
            .find("(NEW.business_id, NEW.mode, 'payouts', NEW.status, hashtext(NEW.id) & 15, 1)");
        assert!(old.is_some() && new.is_some() && old < new, "{sql}");
        assert!(sql.contains("AFTER UPDATE OF business_id, mode, status ON payouts"));
        assert!(sql.contains(
            "WHEN (OLD.business_id IS DISTINCT FROM NEW.business_id OR OLD.mode IS DISTINCT FROM \
             NEW.mode OR OLD.status IS DISTINCT FROM NEW.status)"
        ));
    }

    #[test]
    fn existing_rows_are_counted_by_bucket() {
        assert_eq!(
            COUNTED[0].initial()[0],
            "INSERT INTO list_counts (business_id, mode, list, bucket, shard, n) \
             SELECT business_id, mode, 'deposits', account_id, 0, count(*) FROM deposits \
             GROUP BY business_id, mode, account_id"
        );
        assert!(COUNTED[3].initial()[0].contains("'ledger', '', 0, count(*) FROM ledger_entries"));
    }
}
