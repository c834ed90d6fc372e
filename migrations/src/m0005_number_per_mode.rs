use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Account numbers are unique per mode and bank, not per bank: test numbers come from the sandbox
/// and live ones from the bank, so the same digits can exist in both, and deposits are matched
/// per mode already. Per bank alone, such a pair could never settle.
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let db = manager.get_connection();
        db.execute_unprepared("DROP INDEX virtual_accounts_bank_number")
            .await?;
        db.execute_unprepared(
            "CREATE UNIQUE INDEX virtual_accounts_mode_bank_number ON virtual_accounts \
             (mode, bank, account_number) WHERE account_number IS NOT NULL",
        )
        .await?;
        Ok(())
    }
}
