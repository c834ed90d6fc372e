use domain::ids::{AccountId, BusinessId, RecheckId};
use domain::{Mode, RecheckStatus};
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "rechecks")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: RecheckId,
    pub account_id: AccountId,
    pub business_id: BusinessId,
    pub mode: Mode,
    pub status: RecheckStatus,
    pub window_from: DateTimeUtc,
    pub window_to: DateTimeUtc,
    pub deposits_found: Option<i32>,
    pub failure_reason: Option<String>,
    pub created_at: DateTimeUtc,
    pub completed_at: Option<DateTimeUtc>,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
