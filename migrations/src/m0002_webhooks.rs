//! Webhook deliveries: one row per event and endpoint (its schedule and outcome), and one row per
//! HTTP attempt (what the receiver answered), so callers and operators can see every try.

use sea_orm_migration::prelude::*;

use crate::columns::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table("deliveries")
                    .col(id("id").primary_key())
                    .col(id("event_id"))
                    .col(id("business_id"))
                    .col(id("mode"))
                    .col(text("url"))
                    // pending | succeeded | dead
                    .col(id("status"))
                    // Attempts in the current schedule (a replay or resend starts again at 0).
                    .col(ColumnDef::new("attempts").integer().not_null().default(0))
                    .col(ts_null("next_attempt_at"))
                    .col(ColumnDef::new("last_status_code").integer().null())
                    .col(text_null("last_error"))
                    // The outbox job that drives the current schedule; a job that is not this
                    // one (superseded by a replay or resend) does nothing.
                    .col(text_null("job_id"))
                    .col(ts("created_at"))
                    .col(ts("updated_at"))
                    .col(ts_null("completed_at"))
                    .foreign_key(
                        ForeignKey::create()
                            .from("deliveries", "event_id")
                            .to("events", "id"),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from("deliveries", "business_id")
                            .to("businesses", "id"),
                    )
                    .to_owned(),
            )
            .await?;
        // One delivery per event and endpoint: a resend to the same URL restarts it.
        manager
            .create_index(
                Index::create()
                    .name("deliveries_event_url")
                    .table("deliveries")
                    .col("event_id")
                    .col("url")
                    .unique()
                    .to_owned(),
            )
            .await?;
        // `dead list` and `replay --all-dead`, per business.
        manager
            .create_index(
                Index::create()
                    .name("deliveries_status_business")
                    .table("deliveries")
                    .col("status")
                    .col("business_id")
                    .col("completed_at")
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table("delivery_attempts")
                    .col(id("id").primary_key())
                    .col(id("delivery_id"))
                    .col(ts("attempted_at"))
                    // The HTTP status, or 0 when no response came (network error, timeout,
                    // refused target).
                    .col(ColumnDef::new("status_code").integer().not_null())
                    .col(ColumnDef::new("duration_ms").big_integer().not_null())
                    // The first 1 KiB of the response body.
                    .col(text_null("response_excerpt"))
                    // Why no response came, for operators.
                    .col(text_null("error"))
                    .foreign_key(
                        ForeignKey::create()
                            .from("delivery_attempts", "delivery_id")
                            .to("deliveries", "id"),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("delivery_attempts_delivery")
                    .table("delivery_attempts")
                    .col("delivery_id")
                    .col("attempted_at")
                    .to_owned(),
            )
            .await?;
        // Events by type, for `GET /events?type=`.
        manager
            .create_index(
                Index::create()
                    .name("events_business_mode_type_created")
                    .table("events")
                    .col("business_id")
                    .col("mode")
                    .col("type")
                    .col("created_at")
                    .to_owned(),
            )
            .await?;
        Ok(())
    }
}
