//! Maintained figures of the dashboard's home page (docs/dashboard.md) and of the balance's
//! "in flight": deposits per day (how many, and their amount), webhook deliveries per day and
//! over every day by outcome, and payouts over every day by status with their amounts, so that
//! a reader reads a few hundred rows however many rows a business has.
//!
//! `day_counts` holds, per business and mode, `kind` (`deposits`, `deliveries`, `payouts`), the
//! Lagos day (`YYYY-MM-DD`, West Africa Time: UTC+1, no daylight saving) of the row's moment (a
//! deposit's `received_at`, a delivery's `created_at`), or `''` for the figure over every day,
//! and `bucket` (`''` for deposits; a delivery's outcome: `waiting`, `retrying`, `succeeded`,
//! `dead`; a payout's status), the row count `n` and the amount in kobo. As in
//! `m0017_list_counts`, a figure is the sum of its shard rows (16 on PostgreSQL, by a hash of the
//! counted row's id; SQLite has one writer and uses shard 0), and triggers keep them, not the
//! service's code, so every write path counts.
//!
//! On PostgreSQL, inserts, deletes and a deposit's or payout's moves count in deferred constraint
//! row triggers: the count rows are locked only at commit, after every other lock of the
//! transaction (the balance's, for a payout), as m0017's are. A delivery's outcome changes in the
//! webhook worker's round statement, which updates many deliveries at once, as its own
//! transaction; counting those row by row would lock count rows in the rows' order, and two
//! rounds could wait on each other. A delivery's UPDATE is counted instead by one
//! statement-level trigger over the statement's old and new rows: one upsert of the summed
//! moves, in key order, so concurrent rounds take count rows in one order.
//!
//! `deliveries_business_mode_status_updated` replaces m0027's status-and-attempts index: the
//! counts are kept here now, and the last failure is the newest of a status.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

use crate::columns::id;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// How many rows each figure is spread over on PostgreSQL (a power of two).
const SHARDS: u32 = 16;

/// `day_counts`' columns.
const COLUMNS: [&str; 8] = [
    "business_id",
    "mode",
    "kind",
    "day",
    "bucket",
    "shard",
    "n",
    "amount",
];

/// A counted table.
struct Counted {
    table: &'static str,
    /// `kind` in `day_counts`; the names `store::day_counts::Kind` reads.
    kind: &'static str,
    /// The column whose Lagos day is the row's day.
    moment: &'static str,
    /// The row's bucket as an SQL expression over `{r}` (NEW, OLD or a transition table).
    bucket: &'static str,
    /// The row's amount as an SQL expression over `{r}`.
    amount: &'static str,
    /// The columns an UPDATE must change to move the row to another figure.
    watched: &'static [&'static str],
    /// Counted by day.
    by_day: bool,
    /// Counted under the day `''`: the figure over every day, read as a few rows.
    all_time: bool,
    /// On PostgreSQL, an UPDATE's moves are counted once per statement, at once (the webhook
    /// worker's rounds update many rows in one statement that is its own transaction); else per
    /// row at commit, like inserts (a payout moves inside transactions that lock the balance).
    moves_per_statement: bool,
}

const COUNTED: [Counted; 3] = [
    Counted {
        table: "deposits",
        kind: "deposits",
        moment: "received_at",
        bucket: "''",
        amount: "{r}.amount",
        watched: &["business_id", "mode", "received_at", "amount"],
        by_day: true,
        all_time: false,
        moves_per_statement: false,
    },
    Counted {
        table: "deliveries",
        kind: "deliveries",
        moment: "created_at",
        bucket: "CASE WHEN {r}.status <> 'pending' THEN {r}.status \
                 WHEN {r}.attempts > 0 THEN 'retrying' ELSE 'waiting' END",
        amount: "0",
        watched: &["business_id", "mode", "created_at", "status", "attempts"],
        by_day: true,
        all_time: true,
        moves_per_statement: true,
    },
    // The balance's "in flight" (pending and processing payouts' amounts), read by the API and
    // the home page alike.
    Counted {
        table: "payouts",
        kind: "payouts",
        moment: "created_at",
        bucket: "{r}.status",
        amount: "{r}.amount",
        watched: &["business_id", "mode", "status", "amount"],
        by_day: false,
        all_time: true,
        moves_per_statement: false,
    },
];

/// Which shard of its range a statement's moves go into.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum MovesShard {
    /// Each row's own, by its id's hash: a statement's moves spread over the whole range.
    PerRow,
    /// One for the whole statement, drawn at random (`m0034_delivery_moves_in_one_shard`).
    PerStatement,
}

/// The name of the plpgsql variable holding a statement's one shard ([`MovesShard::PerStatement`]).
const STATEMENT_SHARD: &str = "statement_shard";

/// The deliveries' moves function, created or replaced as `create` says, counting in the shards
/// from `shard_base` on (`m0029_delivery_moves_apart`) as `per` says.
pub(crate) fn delivery_moves_function(create: &str, shard_base: u32, per: MovesShard) -> String {
    let deliveries = COUNTED
        .iter()
        .find(|c| c.table == "deliveries")
        .expect("deliveries are counted");
    deliveries.moves_function(create, shard_base, per)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Backend {
    Postgres,
    Sqlite,
}

impl Counted {
    /// The row's Lagos day.
    fn day(&self, r: &str, backend: Backend) -> String {
        let at = format!("{r}.{}", self.moment);
        match backend {
            Backend::Postgres => {
                format!("to_char(({at} AT TIME ZONE 'UTC') + interval '1 hour', 'YYYY-MM-DD')")
            }
            // sqlx stores an RFC 3339 text with its offset, which date() reads.
            Backend::Sqlite => format!("date({at}, '+1 hour')"),
        }
    }

    /// The row's shard: one of [`SHARDS`] from `base` on (0, or a later migration's own range).
    fn shard(&self, r: &str, backend: Backend, base: u32) -> String {
        match backend {
            Backend::Postgres if base == 0 => format!("hashtext({r}.id) & {}", SHARDS - 1),
            Backend::Postgres => format!("{base} + (hashtext({r}.id) & {})", SHARDS - 1),
            Backend::Sqlite => "0".into(),
        }
    }

    /// The figures' values of row `r` with `sign` (1 or -1), in [`COLUMNS`]' order: its day's,
    /// then, for an all-time kind, its all-time figure's (day `''`).
    fn rows(&self, r: &str, sign: i32, backend: Backend) -> Vec<[String; 8]> {
        self.rows_in(r, sign, backend, 0)
    }

    /// [`Self::rows`] in the shards from `base` on.
    fn rows_in(&self, r: &str, sign: i32, backend: Backend, base: u32) -> Vec<[String; 8]> {
        self.rows_with(r, sign, backend, self.shard(r, backend, base))
    }

    /// [`Self::rows`] in shard `shard` (an SQL expression).
    fn rows_with(&self, r: &str, sign: i32, backend: Backend, shard: String) -> Vec<[String; 8]> {
        let mut days = Vec::new();
        if self.by_day {
            days.push(self.day(r, backend));
        }
        if self.all_time {
            days.push("''".to_owned());
        }
        days.into_iter()
            .map(|day| {
                [
                    format!("{r}.business_id"),
                    format!("{r}.mode"),
                    format!("'{}'", self.kind),
                    day,
                    self.bucket.replace("{r}", r),
                    shard.clone(),
                    sign.to_string(),
                    format!("{sign} * ({})", self.amount.replace("{r}", r)),
                ]
            })
            .collect()
    }

    /// [`Self::rows`] as one `SELECT … FROM {table} AS r` per figure, each value named by its
    /// column, joined by UNION ALL.
    fn select(&self, table: &str, r: &str, sign: i32, backend: Backend, base: u32) -> String {
        self.select_rows(table, r, &self.rows_in(r, sign, backend, base))
    }

    /// `rows` as one `SELECT … FROM {table} AS r` each, joined by UNION ALL.
    fn select_rows(&self, table: &str, r: &str, rows: &[[String; 8]]) -> String {
        rows.iter()
            .map(|row| {
                let named = row
                    .iter()
                    .zip(COLUMNS)
                    .map(|(v, c)| format!("{v} AS {c}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                format!("SELECT {named} FROM {table} AS {r}")
            })
            .collect::<Vec<_>>()
            .join(" UNION ALL ")
    }

    fn upsert(&self, r: &str, sign: i32, backend: Backend) -> String {
        let values = self
            .rows(r, sign, backend)
            .iter()
            .map(|row| format!("({})", row.join(", ")))
            .collect::<Vec<_>>()
            .join(", ");
        format!(
            "INSERT INTO day_counts (business_id, mode, kind, day, bucket, shard, n, amount) \
             VALUES {values} ON CONFLICT (business_id, mode, kind, day, bucket, shard) \
             DO UPDATE SET n = day_counts.n + excluded.n, \
             amount = day_counts.amount + excluded.amount"
        )
    }

    /// True when an UPDATE moved the row to another figure.
    fn moved(&self, distinct: &str) -> String {
        let mut moved: Vec<String> = self
            .watched
            .iter()
            .map(|c| format!("OLD.{c} {distinct} NEW.{c}"))
            .collect();
        if self.bucket != "''" {
            // Only a change of the bucket moves the row, not every attempt.
            moved.retain(|m| !m.contains("status") && !m.contains("attempts"));
            moved.push(format!(
                "({}) {distinct} ({})",
                self.bucket.replace("{r}", "OLD"),
                self.bucket.replace("{r}", "NEW")
            ));
        }
        moved.join(" OR ")
    }

    /// The function a statement's UPDATE moves are counted by (`{table}_day_counts_moved`), in
    /// the shards from `shard_base` on, as `per` says. Transition tables take no column list:
    /// the statement's moves are summed and the unmoved rows cancel out (HAVING).
    fn moves_function(&self, create: &str, shard_base: u32, per: MovesShard) -> String {
        let pg = Backend::Postgres;
        let (declare, from, to) = match per {
            MovesShard::PerRow => (
                String::new(),
                self.select("moved_from", "o", -1, pg, shard_base),
                self.select("moved_to", "n", 1, pg, shard_base),
            ),
            MovesShard::PerStatement => (
                format!(
                    "DECLARE {STATEMENT_SHARD} integer := \
                     {shard_base} + floor(random() * {SHARDS})::integer; "
                ),
                self.select_rows(
                    "moved_from",
                    "o",
                    &self.rows_with("o", -1, pg, STATEMENT_SHARD.into()),
                ),
                self.select_rows(
                    "moved_to",
                    "n",
                    &self.rows_with("n", 1, pg, STATEMENT_SHARD.into()),
                ),
            ),
        };
        format!(
            "{create} {}_day_counts_moved() RETURNS trigger LANGUAGE plpgsql AS $$ \
             {declare}BEGIN \
               INSERT INTO day_counts (business_id, mode, kind, day, bucket, shard, n, amount) \
               SELECT business_id, mode, kind, day, bucket, shard, sum(n), sum(amount) \
               FROM ({from} UNION ALL {to}) AS m GROUP BY business_id, mode, kind, day, bucket, shard \
               HAVING sum(n) <> 0 OR sum(amount) <> 0 \
               ORDER BY business_id, mode, kind, day, bucket, shard \
               ON CONFLICT (business_id, mode, kind, day, bucket, shard) \
               DO UPDATE SET n = day_counts.n + excluded.n, \
               amount = day_counts.amount + excluded.amount; \
               RETURN NULL; \
             END $$",
            self.table,
        )
    }

    fn postgres(&self) -> Vec<String> {
        let pg = Backend::Postgres;
        let table = self.table;
        let function = format!("{table}_day_counts");
        let mut statements = vec![
            format!(
                "CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ \
                 BEGIN \
                   IF TG_OP IN ('UPDATE', 'DELETE') THEN {}; END IF; \
                   IF TG_OP IN ('UPDATE', 'INSERT') THEN {}; END IF; \
                   RETURN NULL; \
                 END $$",
                self.upsert("OLD", -1, pg),
                self.upsert("NEW", 1, pg),
            ),
            format!(
                "CREATE CONSTRAINT TRIGGER {table}_day_counted_write AFTER INSERT OR DELETE \
                 ON {table} DEFERRABLE INITIALLY DEFERRED FOR EACH ROW \
                 EXECUTE FUNCTION {function}()"
            ),
        ];
        if self.moves_per_statement {
            statements.push(self.moves_function("CREATE FUNCTION", 0, MovesShard::PerRow));
            statements.push(format!(
                "CREATE TRIGGER {table}_day_counted_move AFTER UPDATE ON {table} \
                 REFERENCING OLD TABLE AS moved_from NEW TABLE AS moved_to \
                 FOR EACH STATEMENT EXECUTE FUNCTION {function}_moved()"
            ));
        } else {
            // At commit, like inserts: old figure first, new second.
            statements.push(format!(
                "CREATE CONSTRAINT TRIGGER {table}_day_counted_move AFTER UPDATE OF {} \
                 ON {table} DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN ({}) \
                 EXECUTE FUNCTION {function}()",
                self.watched.join(", "),
                self.moved("IS DISTINCT FROM"),
            ));
        }
        // TRUNCATE fires no row trigger: it empties the figures with the rows.
        statements.push(format!(
            "CREATE FUNCTION {function}_truncated() RETURNS trigger LANGUAGE plpgsql AS $$ \
             BEGIN DELETE FROM day_counts WHERE kind = '{}'; RETURN NULL; END $$",
            self.kind
        ));
        statements.push(format!(
            "CREATE TRIGGER {table}_day_counted_truncate AFTER TRUNCATE ON {table} \
             FOR EACH STATEMENT EXECUTE FUNCTION {function}_truncated()"
        ));
        statements
    }

    fn sqlite(&self) -> Vec<String> {
        let lite = Backend::Sqlite;
        let table = self.table;
        let columns = self.watched.join(", ");
        let old = self.upsert("OLD", -1, lite);
        let new = self.upsert("NEW", 1, lite);
        vec![
            format!(
                "CREATE TRIGGER {table}_day_counted_insert AFTER INSERT ON {table} \
                 BEGIN {new}; END"
            ),
            format!(
                "CREATE TRIGGER {table}_day_counted_delete AFTER DELETE ON {table} \
                 BEGIN {old}; END"
            ),
            format!(
                "CREATE TRIGGER {table}_day_counted_move AFTER UPDATE OF {columns} ON {table} \
                 WHEN {} BEGIN {old}; {new}; END",
                self.moved("IS NOT")
            ),
        ]
    }

    /// Counts the rows already there (shard 0).
    fn initial(&self, backend: Backend) -> String {
        format!(
            "INSERT INTO day_counts (business_id, mode, kind, day, bucket, shard, n, amount) \
             SELECT business_id, mode, kind, day, bucket, 0, count(*), sum(amount) \
             FROM ({}) AS m GROUP BY business_id, mode, kind, day, bucket",
            self.select(self.table, "t", 1, backend, 0),
        )
    }
}

/// The tables counted here, each with its trigger function (`{table}_day_counts`).
pub(crate) fn counted_tables() -> impl Iterator<Item = &'static str> {
    COUNTED.iter().map(|c| c.table)
}

/// What the insert triggers count for the rows whose ids `ids(table)` gives, every row in shard
/// `shard` (an SQL expression), one row of [`COLUMNS`] per counted row and figure: for a
/// transaction that counts its own inserts (`m0032_counted_by_caller`), by the same rule as the
/// triggers. PostgreSQL only.
pub(crate) fn inserted_counts(ids: impl Fn(&str) -> String, shard: &str) -> String {
    let tables = COUNTED.iter().map(|c| {
        let rows = c.rows_with("r", 1, Backend::Postgres, shard.to_owned());
        let values: Vec<String> = rows
            .iter()
            .map(|row| format!("({})", row.join(", ")))
            .collect();
        (c.table, values.join(", "))
    });
    crate::counted_rows(tables, &COLUMNS.join(", "), ids)
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    /// One transaction on SQLite too: the figures start from the rows as the triggers start
    /// counting.
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table("day_counts")
                    .col(id("business_id"))
                    .col(id("mode"))
                    .col(id("kind"))
                    .col(id("day"))
                    .col(id("bucket"))
                    .col(ColumnDef::new("shard").integer().not_null())
                    .col(ColumnDef::new("n").big_integer().not_null())
                    .col(ColumnDef::new("amount").big_integer().not_null())
                    .primary_key(
                        Index::create()
                            .col("business_id")
                            .col("mode")
                            .col("kind")
                            .col("day")
                            .col("bucket")
                            .col("shard"),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .drop_index(
                Index::drop()
                    .name("deliveries_business_mode_status_attempts")
                    .table("deliveries")
                    .to_owned(),
            )
            .await?;
        let mut index = Index::create();
        index
            .name("deliveries_business_mode_status_updated")
            .table("deliveries");
        for col in ["business_id", "mode", "status", "updated_at"] {
            index.col(col);
        }
        manager.create_index(index.to_owned()).await?;
        let db = manager.get_connection();
        let backend = match db.get_database_backend() {
            DbBackend::Postgres => Backend::Postgres,
            _ => Backend::Sqlite,
        };
        for counted in &COUNTED {
            // On PostgreSQL CREATE TRIGGER locks out the table's writers until this transaction
            // commits, so the initial count sees every row written before the triggers.
            let statements = match backend {
                Backend::Postgres => counted.postgres(),
                Backend::Sqlite => counted.sqlite(),
            };
            for sql in statements.iter().chain([&counted.initial(backend)]) {
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
    fn an_attempt_that_keeps_the_outcome_moves_nothing_on_sqlite() {
        let sql = COUNTED[1].sqlite().join("\n");
        assert!(sql.contains(
            "WHEN OLD.business_id IS NOT NEW.business_id OR OLD.mode IS NOT NEW.mode OR \
             OLD.created_at IS NOT NEW.created_at OR (CASE WHEN OLD.status <> 'pending'"
        ));
        assert!(!sql.contains("OLD.attempts IS NOT NEW.attempts"), "{sql}");
    }

    #[test]
    fn postgres_days_are_lagos_days() {
        let rows = COUNTED[0].rows("NEW", 1, Backend::Postgres);
        assert_eq!(rows.len(), 1, "deposits are counted by day only");
        let values = rows[0].join(", ");
        assert!(values.contains(
            "to_char((NEW.received_at AT TIME ZONE 'UTC') + interval '1 hour', 'YYYY-MM-DD')"
        ));
        assert!(values.ends_with("hashtext(NEW.id) & 15, 1, 1 * (NEW.amount)"));
        // Deliveries: by day, then over every day (day '').
        let rows = COUNTED[1].rows("NEW", 1, Backend::Postgres);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1][3], "''");
    }
}
