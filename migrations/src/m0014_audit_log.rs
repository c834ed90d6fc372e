//! The audit log (docs/dashboard.md): who did what to a business, when and from which address. Rows
//! are only ever added; the actor's e-mail is kept as it was, so removing a user keeps their
//! history. Nothing secret is stored: keys by id and last four, users by e-mail.

use sea_orm_migration::prelude::*;

use crate::columns::{id, text_null, ts};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table("audit_log")
                    .col(id("id").primary_key())
                    .col(id("business_id"))
                    // Null for an operator's `api admin` command; no foreign key, so a removed
                    // user's rows stay.
                    .col(ColumnDef::new("actor_user_id").string().null())
                    // The actor's e-mail at the time.
                    .col(text_null("actor_email"))
                    // domain::AuditAction's text.
                    .col(id("action"))
                    // test | live, for what belongs to one mode.
                    .col(ColumnDef::new("mode").string().null())
                    // What it was done to: a key's id and last four, a user's e-mail, a URL, an
                    // event id.
                    .col(text_null("target"))
                    .col(text_null("detail"))
                    // The client's address as the api saw it (the TCP peer).
                    .col(ColumnDef::new("client_addr").string().null())
                    .col(ts("created_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .from("audit_log", "business_id")
                            .to("businesses", "id"),
                    )
                    .to_owned(),
            )
            .await?;
        // The Team page walks a business's rows newest first.
        manager
            .create_index(
                Index::create()
                    .name("audit_log_business_created_id")
                    .table("audit_log")
                    .col("business_id")
                    .col("created_at")
                    .col("id")
                    .to_owned(),
            )
            .await
    }
}
