//! An account records the secret key that created it (its id, `key_…`, never the key). Changes
//! made through the API are audited (docs/dashboard.md); a creation, the hottest write, is recorded
//! on the account itself instead of as an audit row of its own.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table("virtual_accounts")
                    // An `api_keys` id, in no index (the activation stays a HOT update, m0022);
                    // no foreign key, as for the audit log's `actor_key_id`. Accounts created
                    // before this column have none.
                    .add_column(ColumnDef::new("created_by_key_id").string().null())
                    .to_owned(),
            )
            .await
    }
}
