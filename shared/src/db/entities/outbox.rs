//! Jobs written in the same transaction as the change that causes them; a relay publishes them.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "outbox")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    /// The queue the job goes to, e.g. `provisioning`.
    pub queue: String,
    /// JSON: ids only, never personal data.
    pub payload: String,
    /// Not before this time (delays live in the database).
    pub run_at: DateTimeUtc,
    pub published_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
