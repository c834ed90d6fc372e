//! A statement's moves of deliveries between outcomes are counted in one shard of the moves'
//! range (16 to 31), drawn once per statement, rather than in each delivery's own shard by its
//! id's hash. PostgreSQL only (SQLite keeps shard 0).
//!
//! Why (docs/benchmarks.md, "A worker round's moves in one shard"): the webhook worker records a
//! round of deliveries in one statement, and its moves trigger upserted about 28 count rows for
//! a round of ten (a delivery moves out of one figure and into another, by day and over all
//! days, in the shard of its own id). A figure is the sum of its shards, so any one shard is as
//! correct: in one shard the same round is four count rows per business. Two rounds that draw
//! the same shard take its rows in key order, so they wait for each other and never deadlock;
//! the deposit rounds' new deliveries stay in shards 0 to 15 (`m0029_delivery_moves_apart`).

use sea_orm_migration::prelude::*;

use crate::m0028_day_counts::{MovesShard, delivery_moves_function};
use crate::m0029_delivery_moves_apart::MOVES_SHARD_BASE;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::on_postgres(
            manager,
            [delivery_moves_function(
                "CREATE OR REPLACE FUNCTION",
                MOVES_SHARD_BASE,
                MovesShard::PerStatement,
            )],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::on_postgres(
            manager,
            [delivery_moves_function(
                "CREATE OR REPLACE FUNCTION",
                MOVES_SHARD_BASE,
                MovesShard::PerRow,
            )],
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statements_moves_go_into_one_shard_drawn_from_16_to_31() {
        let moves = delivery_moves_function(
            "CREATE OR REPLACE FUNCTION",
            MOVES_SHARD_BASE,
            MovesShard::PerStatement,
        );
        assert!(
            moves
                .contains("DECLARE statement_shard integer := 16 + floor(random() * 16)::integer;"),
            "{moves}"
        );
        assert!(moves.contains("statement_shard AS shard"), "{moves}");
        assert!(!moves.contains("hashtext"), "{moves}");
    }
}
