//! One event on its way to one endpoint: the schedule of attempts and how it ended.

use domain::ids::{BusinessId, DeliveryId, EventId, JobId};
use domain::{DeliveryStatus, Mode};
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "deliveries")]
pub struct Model {
    /// `whd_…`.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: DeliveryId,
    pub event_id: EventId,
    pub business_id: BusinessId,
    pub mode: Mode,
    /// The endpoint of its latest attempt (or, before any, the one it was made for). Every
    /// attempt goes to the mode's webhook URL of its moment; each attempt records its own.
    pub url: String,
    pub status: DeliveryStatus,
    /// Attempts made in the current schedule (a replay or resend starts again at 0).
    pub attempts: i32,
    pub next_attempt_at: Option<DateTimeUtc>,
    pub last_status_code: Option<i32>,
    pub last_error: Option<String>,
    /// The outbox job that drives the current schedule. Any other job for this delivery was
    /// superseded (by a replay or a resend) and does nothing.
    pub job_id: Option<JobId>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    /// When it succeeded or was dead-lettered.
    pub completed_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
