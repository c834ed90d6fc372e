//! `vas_count_inserted` (`m0032_counted_by_caller`) finds the rows it counts by primary key,
//! whatever the statistics say. PostgreSQL only.
//!
//! Why (docs/benchmarks.md, "A round's count by key"): the function's statements are planned
//! once per connection (a generic plan) and kept until the tables' statistics change. Planned
//! while `deposits` and `ledger_entries` were small, as on a new database, the plan read them
//! whole, and kept reading them whole as they grew between two analyses: in the benchmark a
//! round's count took 9.4 ms (up to 14,807 rows filtered per call) where its lookups by key
//! take 1.1–1.6 ms, while the round held its business's balance row. The function looks up at
//! most a round's ids, so a sequential scan is never its better plan beyond a table's first
//! page; the setting holds for its own statements only.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// The function, as `ALTER FUNCTION` names it.
const FUNCTION: &str = "vas_count_inserted(json)";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::on_postgres(
            manager,
            [format!(
                "ALTER FUNCTION {FUNCTION} SET enable_seqscan = off"
            )],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::on_postgres(
            manager,
            [format!("ALTER FUNCTION {FUNCTION} RESET enable_seqscan")],
        )
        .await
    }
}
