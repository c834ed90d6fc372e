use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

/// `vas_refuse(reason)` (PostgreSQL only): raises SQLSTATE `VAS01` with `reason`. A statement
/// that does a whole unit of work in autocommit (docs/decisions/one-statement-paths.md) calls it
/// for a case that is not its own, so that it fails and leaves nothing written; the service then
/// answers that case with its transaction path. SQLite has no such statements.
#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let function = "CREATE OR REPLACE FUNCTION vas_refuse(reason text) RETURNS boolean
               LANGUAGE plpgsql VOLATILE AS $$
             BEGIN
               RAISE EXCEPTION USING ERRCODE = 'VAS01', MESSAGE = reason;
             END $$";
        crate::on_postgres(manager, [function.to_owned()]).await
    }
}
