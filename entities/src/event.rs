use domain::ids::{AccountId, BusinessId, EventId};
use domain::{EventType, Mode};
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "events")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: EventId,
    pub business_id: BusinessId,
    pub mode: Mode,
    /// e.g. `virtualaccount.active`: see `EventType`.
    #[sea_orm(column_name = "type")]
    pub event_type: EventType,
    /// JSON of the event's `data`.
    pub data: String,
    /// The account the event is about (account and deposit events), for an account's page.
    pub account_id: Option<AccountId>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
