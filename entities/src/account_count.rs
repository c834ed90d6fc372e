//! How many accounts a business has in one mode and status (`active`, `failed`, `deactivated`;
//! `pending` is what the created total leaves), kept with every status change: the sum of the
//! status's rows (shards, so that concurrent changes rarely wait on one row).

use domain::ids::BusinessId;
use domain::{AccountStatus, Mode};
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "account_counts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub business_id: BusinessId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub mode: Mode,
    #[sea_orm(primary_key, auto_increment = false)]
    pub status: AccountStatus,
    #[sea_orm(primary_key, auto_increment = false)]
    pub shard: i32,
    pub n: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
