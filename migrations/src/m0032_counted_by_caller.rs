//! A transaction may count its own inserts, in one statement, rather than leave them to the
//! counts' row triggers (`m0017_list_counts`, `m0028_day_counts`). PostgreSQL only.
//!
//! Why (docs/benchmarks.md, "A round counts its own rows"): a round of one business's deposits
//! inserts four counted rows per deposit (the deposit, its event, its delivery, its ledger
//! entry), and the triggers ran five plpgsql calls (seven count rows) per deposit at the round's
//! COMMIT, while the round held the business's balance row. A round now sets
//! `vas.counted_by = 'caller'` for its transaction (`set_config(…, true)`), which the insert
//! triggers' `WHEN` reads as the row is written (a constraint trigger's `WHEN` is not deferred):
//! none is queued. The round then calls `vas_count_inserted` with the ids it inserted, which
//! upserts the same figures summed, every row of the call in one shard, in key order.
//!
//! The figures' rules stay in m0017 and m0028: the function's statements are built from their
//! definitions. Deletes and moves are counted by the triggers as before, whoever writes. A
//! transaction that sets the mark and inserts a counted row it does not name to the function
//! leaves that row uncounted: only `store::deposits`' rounds set it, and their test recounts
//! every figure. The function refuses to run without the mark, so a transaction whose rows the
//! triggers did count cannot count them twice.

use sea_orm_migration::prelude::*;

use crate::{m0017_list_counts as lists, m0028_day_counts as days};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// The setting a transaction marks itself with; its value `caller`.
const MARK: &str = "vas.counted_by";

/// The SQL expression that marks the transaction it runs in as counting its own inserts, until
/// its end.
pub fn mark() -> String {
    format!("set_config('{MARK}', 'caller', true)")
}

/// The statement that counts the rows a marked transaction inserted; its one parameter
/// `inserted` is JSON, per table the ids of the rows (`{"deposits": ["dep_…", …], …}`).
pub const COUNT_INSERTED: &str = "SELECT vas_count_inserted($1::json)";

/// True in an insert trigger's `WHEN` unless the transaction counts its own inserts.
fn unmarked() -> String {
    format!("(current_setting('{MARK}', true) IS DISTINCT FROM 'caller')")
}

/// Each counted table, its triggers' name part and their function.
fn counted() -> impl Iterator<Item = (&'static str, &'static str, String)> {
    lists::counted_tables()
        .map(|t| (t, "counted", format!("{t}_list_counts")))
        .chain(days::counted_tables().map(|t| (t, "day_counted", format!("{t}_day_counts"))))
}

/// Each counted table's insert-and-delete trigger split in two: the insert's under
/// [`unmarked`], the delete's as before.
fn triggers() -> Vec<String> {
    let when = unmarked();
    counted()
        .flat_map(|(table, name, function)| {
            [
                format!("DROP TRIGGER {table}_{name}_write ON {table}"),
                format!(
                    "CREATE CONSTRAINT TRIGGER {table}_{name}_insert AFTER INSERT ON {table} \
                     DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN {when} \
                     EXECUTE FUNCTION {function}()"
                ),
                format!(
                    "CREATE CONSTRAINT TRIGGER {table}_{name}_delete AFTER DELETE ON {table} \
                     DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {function}()"
                ),
            ]
        })
        .collect()
}

/// `vas_count_inserted(inserted json)`: `inserted` names, per table, the ids of the rows the
/// transaction inserted (`{"deposits": ["dep_…", …], …}`; a table left out inserted none).
///
/// Planned generically from its first call on a connection: its plans are the same whatever the
/// ids, and PostgreSQL's first five custom plans of its two statements cost about 3 ms a call
/// where a call on a plan cost 0.3–0.6 ms (docs/benchmarks.md, "A round counts its own rows").
/// A generic plan is made with the statistics of its first call: `m0033_counted_by_key` keeps it
/// on the tables' keys however small they were then.
fn function() -> String {
    let ids =
        |table: &str| format!("ARRAY(SELECT json_array_elements_text(inserted -> '{table}'))");
    let list_key = "business_id, mode, list, bucket, shard";
    let day_key = "business_id, mode, kind, day, bucket, shard";
    format!(
        "CREATE FUNCTION vas_count_inserted(inserted json) RETURNS void LANGUAGE plpgsql \
         SET plan_cache_mode = force_generic_plan AS $$ \
         DECLARE round_shard integer := floor(random() * 16)::integer; \
         BEGIN \
           IF {unmarked} THEN \
             RAISE EXCEPTION 'vas_count_inserted: the transaction did not set {MARK}'; \
           END IF; \
           INSERT INTO list_counts ({list_key}, n) \
           SELECT {list_key}, sum(n) FROM ({lists}) AS counted \
           GROUP BY {list_key} ORDER BY {list_key} \
           ON CONFLICT ({list_key}) DO UPDATE SET n = list_counts.n + excluded.n; \
           INSERT INTO day_counts ({day_key}, n, amount) \
           SELECT {day_key}, sum(n), sum(amount) FROM ({days}) AS counted \
           GROUP BY {day_key} ORDER BY {day_key} \
           ON CONFLICT ({day_key}) DO UPDATE SET n = day_counts.n + excluded.n, \
           amount = day_counts.amount + excluded.amount; \
         END $$",
        unmarked = unmarked(),
        lists = lists::inserted_counts(ids, "round_shard"),
        days = days::inserted_counts(ids, "round_shard"),
    )
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::on_postgres(manager, triggers().into_iter().chain([function()])).await
    }

    /// m0017's and m0028's triggers as they were; the function gone.
    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::on_postgres(manager, undone()).await
    }
}

/// [`Migration::down`]'s statements.
fn undone() -> Vec<String> {
    let mut statements: Vec<String> = counted()
        .flat_map(|(table, name, function)| {
            [
                format!("DROP TRIGGER {table}_{name}_insert ON {table}"),
                format!("DROP TRIGGER {table}_{name}_delete ON {table}"),
                format!(
                    "CREATE CONSTRAINT TRIGGER {table}_{name}_write AFTER INSERT OR DELETE \
                     ON {table} DEFERRABLE INITIALLY DEFERRED FOR EACH ROW \
                     EXECUTE FUNCTION {function}()"
                ),
            ]
        })
        .collect();
    statements.push("DROP FUNCTION vas_count_inserted(json)".to_owned());
    statements
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_insert_trigger_skips_a_marked_transaction_and_no_delete_trigger_does() {
        let sql = triggers();
        let inserts: Vec<_> = sql.iter().filter(|s| s.contains("AFTER INSERT")).collect();
        let deletes: Vec<_> = sql.iter().filter(|s| s.contains("AFTER DELETE")).collect();
        // deposits, events, payouts, ledger entries; deposits, deliveries, payouts.
        assert_eq!((inserts.len(), deletes.len()), (7, 7), "{sql:#?}");
        assert!(inserts.iter().all(|s| s.contains(&unmarked())));
        assert!(deletes.iter().all(|s| !s.contains("WHEN")));
    }

    #[test]
    fn the_function_counts_every_counted_table_by_its_ids() {
        let sql = function();
        for table in [
            "deposits",
            "events",
            "payouts",
            "ledger_entries",
            "deliveries",
        ] {
            assert!(
                sql.contains(&format!("FROM {table} AS r CROSS JOIN LATERAL")),
                "{table}: {sql}"
            );
            assert!(sql.contains(&format!("inserted -> '{table}'")), "{table}");
        }
        assert!(
            sql.contains("'deposit_statuses', r.status, round_shard, 1"),
            "{sql}"
        );
        assert!(sql.contains("SET plan_cache_mode = force_generic_plan AS $$"));
    }
}
