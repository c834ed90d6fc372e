use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// The dashboard's Deposits page lists every deposit of a business and mode (optionally of one
/// status), newest first, walking by cursor: the keyset indexes that list needs at a million
/// deposits, ending in (created_at, id) like those of m0013. A search by provider reference uses
/// the unique (mode, bank, provider_reference) index; one by account number, the accounts' own.
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let keysets: [(&str, &[&str]); 2] = [
            (
                "deposits_business_mode_created_id",
                &["business_id", "mode", "created_at", "id"],
            ),
            (
                "deposits_business_mode_status_created_id",
                &["business_id", "mode", "status", "created_at", "id"],
            ),
        ];
        for (name, cols) in keysets {
            let mut index = Index::create();
            index.name(name).table("deposits");
            for col in cols {
                index.col(*col);
            }
            manager.create_index(index.to_owned()).await?;
        }
        Ok(())
    }
}
