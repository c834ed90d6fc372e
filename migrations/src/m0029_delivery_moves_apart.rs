//! A delivery's moves between outcomes are counted in shards of their own (16 to 31), apart from
//! the shards its insert and delete are counted in (0 to 15): the figures are sums over every
//! shard, so any shard may take a move.
//!
//! Why (docs/decisions/grouped-deposit-rounds.md): a round of one business's deposits commits its
//! new deliveries' counts at its COMMIT, row by row in the order it wrote them, while the webhook
//! worker's round statement counts its moves in key order; both took the same `waiting` rows, in
//! two orders, and PostgreSQL broke the cycles as deadlocks (the worker's round failed and its
//! webhooks were sent again later; the deposit round was sent again deposit by deposit). Apart,
//! the two never lock the same count row: neither waits on the other, and each still takes its
//! own rows in one order. SQLite has one writer and keeps shard 0.

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

use crate::m0028_day_counts::{MovesShard, delivery_moves_function};

/// The first shard of the moves' range.
pub(crate) const MOVES_SHARD_BASE: u32 = 16;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        if db.get_database_backend() == DbBackend::Postgres {
            db.execute_unprepared(&delivery_moves_function(
                "CREATE OR REPLACE FUNCTION",
                MOVES_SHARD_BASE,
                MovesShard::PerRow,
            ))
            .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_are_counted_from_shard_16_and_inserts_below() {
        let moves = delivery_moves_function(
            "CREATE OR REPLACE FUNCTION",
            MOVES_SHARD_BASE,
            MovesShard::PerRow,
        );
        assert!(moves.starts_with("CREATE OR REPLACE FUNCTION deliveries_day_counts_moved()"));
        assert!(
            moves.contains("16 + (hashtext(o.id) & 15) AS shard"),
            "{moves}"
        );
        assert!(
            moves.contains("16 + (hashtext(n.id) & 15) AS shard"),
            "{moves}"
        );
        assert!(!moves.contains(" hashtext(o.id) & 15 AS shard"), "{moves}");
    }
}
