//! Sign-in hardening (docs/dashboard.md): the throttle counts attempts before they are checked (its
//! `failures` column becomes `attempts`), and failed sign-ins of an e-mail that belongs to no
//! one go into the audit log against no business (`audit_log.business_id` may be null).

use sea_orm_migration::prelude::*;
use sea_orm_migration::sea_orm::{ConnectionTrait, DbBackend, Statement};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table("sign_in_throttles")
                    .rename_column("failures", "attempts")
                    .to_owned(),
            )
            .await?;
        let db = manager.get_connection();
        match manager.get_database_backend() {
            DbBackend::Postgres => {
                db.execute_unprepared(
                    "ALTER TABLE audit_log ALTER COLUMN business_id DROP NOT NULL",
                )
                .await?;
            }
            _ => audit_business_nullable_on_sqlite(db).await?,
        }
        Ok(())
    }
}

/// SQLite cannot drop a NOT NULL: the table is rebuilt from its own definition (whatever columns
/// it has by now) with that one constraint left out, as SQLite's documentation describes.
async fn audit_business_nullable_on_sqlite(db: &SchemaManagerConnection<'_>) -> Result<(), DbErr> {
    let read = |sql: &str| Statement::from_string(DbBackend::Sqlite, sql.to_owned());
    let table_sql: String = db
        .query_one_raw(read(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'audit_log'",
        ))
        .await?
        .ok_or_else(|| DbErr::Migration("audit_log is missing".into()))?
        .try_get("", "sql")?;
    let index_sqls: Vec<String> = db
        .query_all_raw(read(
            "SELECT sql FROM sqlite_master \
             WHERE type = 'index' AND tbl_name = 'audit_log' AND sql IS NOT NULL",
        ))
        .await?
        .iter()
        .map(|row| row.try_get("", "sql"))
        .collect::<Result<_, _>>()?;
    let column = "\"business_id\" varchar NOT NULL";
    if !table_sql.contains(column) {
        return Err(DbErr::Migration(format!(
            "audit_log's business_id is not as expected: {table_sql}"
        )));
    }
    let rebuilt = table_sql
        .replacen("\"audit_log\"", "\"audit_log_rebuilt\"", 1)
        .replacen(column, "\"business_id\" varchar NULL", 1);
    db.execute_unprepared(&rebuilt).await?;
    db.execute_unprepared("INSERT INTO audit_log_rebuilt SELECT * FROM audit_log")
        .await?;
    db.execute_unprepared("DROP TABLE audit_log").await?;
    db.execute_unprepared("ALTER TABLE audit_log_rebuilt RENAME TO audit_log")
        .await?;
    for sql in index_sqls {
        db.execute_unprepared(&sql).await?;
    }
    Ok(())
}
