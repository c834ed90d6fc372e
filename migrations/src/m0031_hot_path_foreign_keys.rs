use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// (table, column, parent table): the foreign keys checked on every creation, deposit and
/// webhook attempt, dropped on PostgreSQL (docs/decisions/hot-path-foreign-keys.md). Each of
/// those inserts takes its parent from a row it has just read or written, and no parent is ever
/// deleted, so the check could not fail; it cost a constraint trigger, a nested query and a
/// `FOR KEY SHARE` lock on the parent for every row (and one business's rows all lock its one
/// `businesses` row). SQLite keeps its constraints: it cannot drop one without rebuilding the
/// table, and `api dev` is not where the rate matters.
pub const UNCHECKED_PARENTS: [(&str, &str, &str); 6] = [
    ("virtual_accounts", "business_id", "businesses"),
    ("deposits", "account_id", "virtual_accounts"),
    ("events", "business_id", "businesses"),
    ("deliveries", "event_id", "events"),
    ("deliveries", "business_id", "businesses"),
    ("delivery_attempts", "delivery_id", "deliveries"),
];

/// A dropped constraint's name, as PostgreSQL named it when the table was made.
fn constraint(table: &str, column: &str) -> String {
    format!("{table}_{column}_fkey")
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let drops: Vec<String> = UNCHECKED_PARENTS
            .iter()
            .map(|(table, column, _)| {
                let name = constraint(table, column);
                format!("ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {name}")
            })
            .collect();
        crate::on_postgres(manager, drops).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // NOT VALID: no scan of every row under lock here; `ALTER TABLE … VALIDATE CONSTRAINT`
        // checks the rows written meanwhile when the operator chooses.
        let adds: Vec<String> = UNCHECKED_PARENTS
            .iter()
            .map(|(table, column, parent)| {
                let name = constraint(table, column);
                format!(
                    "ALTER TABLE {table} ADD CONSTRAINT {name} \
                 FOREIGN KEY ({column}) REFERENCES {parent}(id) NOT VALID"
                )
            })
            .collect();
        crate::on_postgres(manager, adds).await
    }
}
