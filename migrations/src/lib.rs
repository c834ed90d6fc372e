//! Schema migrations. Written with sea-query's builders so one definition runs on PostgreSQL and
//! SQLite; partial indexes are plain SQL that both accept.

pub use sea_orm_migration::prelude::*;

mod columns;
mod m0001_accounts;
mod m0002_webhooks;
mod m0003_deposits;
mod m0004_job_request_ids;
mod m0005_number_per_mode;
mod m0006_api_keys;
mod m0007_outbox_lease;
mod m0008_webhook_attempt_url;
mod m0009_deposit_hardening;
mod m0010_payouts;
mod m0011_dashboard_users;
mod m0013_list_indexes;
mod m0014_audit_log;
mod m0015_account_counts;
mod m0016_deposit_list_indexes;
mod m0017_list_counts;
mod m0018_sign_in_audit;
mod m0019_audit_key_actor;
mod m0020_payout_provider_lease;
mod m0021_one_statement_refusal;
mod m0022_hot_activation;
mod m0023_audit_repeats;
mod m0024_audit_operator;
mod m0025_account_creator_key;
mod m0027_home_indexes;
mod m0028_day_counts;
mod m0029_delivery_moves_apart;
mod m0030_processing_payouts;
mod m0031_hot_path_foreign_keys;
mod m0032_counted_by_caller;
mod m0033_counted_by_key;
mod m0034_delivery_moves_in_one_shard;

pub use m0031_hot_path_foreign_keys::UNCHECKED_PARENTS;
/// A transaction that counts its own inserts (`m0032_counted_by_caller`).
pub mod counted_by_caller {
    pub use crate::m0032_counted_by_caller::{COUNT_INSERTED, mark};
}

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m0001_accounts::Migration),
            Box::new(m0002_webhooks::Migration),
            Box::new(m0003_deposits::Migration),
            Box::new(m0004_job_request_ids::Migration),
            Box::new(m0005_number_per_mode::Migration),
            Box::new(m0006_api_keys::Migration),
            Box::new(m0007_outbox_lease::Migration),
            Box::new(m0008_webhook_attempt_url::Migration),
            Box::new(m0009_deposit_hardening::Migration),
            Box::new(m0010_payouts::Migration),
            Box::new(m0011_dashboard_users::Migration),
            Box::new(m0013_list_indexes::Migration),
            Box::new(m0014_audit_log::Migration),
            Box::new(m0015_account_counts::Migration),
            Box::new(m0016_deposit_list_indexes::Migration),
            Box::new(m0017_list_counts::Migration),
            Box::new(m0018_sign_in_audit::Migration),
            Box::new(m0019_audit_key_actor::Migration),
            Box::new(m0020_payout_provider_lease::Migration),
            Box::new(m0021_one_statement_refusal::Migration),
            Box::new(m0022_hot_activation::Migration),
            Box::new(m0023_audit_repeats::Migration),
            Box::new(m0024_audit_operator::Migration),
            Box::new(m0025_account_creator_key::Migration),
            Box::new(m0027_home_indexes::Migration),
            Box::new(m0028_day_counts::Migration),
            Box::new(m0029_delivery_moves_apart::Migration),
            Box::new(m0030_processing_payouts::Migration),
            Box::new(m0031_hot_path_foreign_keys::Migration),
            Box::new(m0032_counted_by_caller::Migration),
            Box::new(m0033_counted_by_key::Migration),
            Box::new(m0034_delivery_moves_in_one_shard::Migration),
        ]
    }
}

/// The counted rows whose ids `ids(table)` gives (an SQL `text[]` expression), each as its
/// counts: per table, `values`, VALUES rows over the row `r`, named `columns`; one `SELECT` per
/// table, joined by UNION ALL (`m0032_counted_by_caller`).
fn counted_rows<'a>(
    tables: impl Iterator<Item = (&'a str, String)>,
    columns: &str,
    ids: impl Fn(&str) -> String,
) -> String {
    tables
        .map(|(table, values)| {
            format!(
                "SELECT c.* FROM {table} AS r CROSS JOIN LATERAL (VALUES {values}) \
                 AS c ({columns}) WHERE r.id = ANY({})",
                ids(table)
            )
        })
        .collect::<Vec<_>>()
        .join(" UNION ALL ")
}

/// Runs `statements` in order on PostgreSQL; on SQLite, nothing: for what only PostgreSQL has
/// (plpgsql functions, constraints SQLite cannot drop without rebuilding a table).
async fn on_postgres(
    manager: &SchemaManager<'_>,
    statements: impl IntoIterator<Item = String>,
) -> Result<(), DbErr> {
    use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend};
    let db = manager.get_connection();
    if db.get_database_backend() != DbBackend::Postgres {
        return Ok(());
    }
    for sql in statements {
        db.execute_unprepared(&sql).await?;
    }
    Ok(())
}
