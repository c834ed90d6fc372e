//! Each account's status beside the account (m0022, kept by a trigger on `virtual_accounts`):
//! what lists filtered by status walk, so that an account's activation changes no indexed column
//! of `virtual_accounts`. Read-only to the service.

use domain::ids::{AccountId, BusinessId};
use domain::{AccountStatus, Mode};
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "account_states")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub account_id: AccountId,
    pub business_id: BusinessId,
    pub mode: Mode,
    pub status: AccountStatus,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(
        belongs_to = "super::virtual_account::Entity",
        from = "Column::AccountId",
        to = "super::virtual_account::Column::Id"
    )]
    Account,
}

impl ActiveModelBehavior for ActiveModel {}
