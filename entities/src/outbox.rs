//! The outbox, which is also the job table: written in the same transaction as the change that
//! causes the work; a relay publishes due rows; a consumer completes or reschedules them.

use domain::ids::JobId;
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "outbox")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: JobId,
    /// The queue the job goes to, e.g. `provisioning`.
    pub queue: String,
    /// JSON of the queue's job type (`jobs`): ids only, never personal data.
    pub payload: String,
    /// Not before this time: delays live here, not in the broker.
    pub run_at: DateTimeUtc,
    /// When a relay last handed it to the broker (None: not yet, or rescheduled since).
    pub published_at: Option<DateTimeUtc>,
    /// Set while the broker has not confirmed that publish: the claiming relay's lease. Past
    /// it, the publish counts as unconfirmed (the relay died) and any relay publishes it again.
    pub publishing_until: Option<DateTimeUtc>,
    /// When a consumer began the job (None: not since it was last published).
    pub started_at: Option<DateTimeUtc>,
    /// Runs so far that ended in a retry.
    pub attempts: i32,
    pub completed_at: Option<DateTimeUtc>,
    pub dead_at: Option<DateTimeUtc>,
    pub last_error: Option<String>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    /// The request that caused the job (its logs carry the same id).
    pub request_id: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
