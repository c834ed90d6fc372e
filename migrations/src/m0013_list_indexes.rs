use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};

#[derive(DeriveMigrationName)]
pub struct Migration;

/// What every list needs to stay fast at a million rows (docs/api/paging-and-search.md): keyset
/// indexes ending in (created_at, id), the order lists walk and cursors resume from (each replaces
/// the index that ended in created_at alone), and on PostgreSQL a trigram index serving `q`'s
/// case-insensitive substring search.
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let keysets: [(&str, &str, &[&str], Option<&str>); 5] = [
            (
                "virtual_accounts_business_mode_created_id",
                "virtual_accounts",
                &["business_id", "mode", "created_at", "id"],
                Some("virtual_accounts_business_mode_created"),
            ),
            (
                "virtual_accounts_business_mode_status_created_id",
                "virtual_accounts",
                &["business_id", "mode", "status", "created_at", "id"],
                None,
            ),
            (
                "deposits_account_created_id",
                "deposits",
                &["account_id", "created_at", "id"],
                Some("deposits_account_created"),
            ),
            (
                "events_business_mode_created_id",
                "events",
                &["business_id", "mode", "created_at", "id"],
                Some("events_business_mode_created"),
            ),
            (
                "events_business_mode_type_created_id",
                "events",
                &["business_id", "mode", "type", "created_at", "id"],
                Some("events_business_mode_type_created"),
            ),
        ];
        for (name, table, cols, replaces) in keysets {
            let mut index = Index::create();
            index.name(name).table(table);
            for col in cols {
                index.col(*col);
            }
            manager.create_index(index.to_owned()).await?;
            if let Some(old) = replaces {
                manager
                    .drop_index(Index::drop().name(old).table(table).to_owned())
                    .await?;
            }
        }
        let db = manager.get_connection();
        if db.get_database_backend() == DbBackend::Postgres {
            // The expression is `store::accounts::SEARCH_TEXT`, character for character:
            // the planner uses the index only for the very expression it indexes.
            db.execute_unprepared("CREATE EXTENSION IF NOT EXISTS pg_trgm")
                .await?;
            db.execute_unprepared(
                "CREATE INDEX virtual_accounts_search ON virtual_accounts USING gin \
                 ((lower(customer_name || chr(31) || customer_email || chr(31) || \
                 coalesce(customer_reference, '') || chr(31) || customer_phone || chr(31) || \
                 coalesce(account_number, ''))) gin_trgm_ops)",
            )
            .await?;
        }
        Ok(())
    }
}
