//! Which account holds a number, per mode and bank (m0022, kept by a trigger on
//! `virtual_accounts`): what deposits are matched on, and what keeps a number to one account (its
//! primary key). Read-only to the service.

use domain::ids::{AccountId, BusinessId};
use domain::{Bank, Mode};
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "account_numbers")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub mode: Mode,
    #[sea_orm(primary_key, auto_increment = false)]
    pub bank: Bank,
    #[sea_orm(primary_key, auto_increment = false)]
    pub account_number: String,
    pub account_id: AccountId,
    pub business_id: BusinessId,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
