use domain::ids::{AccountId, BusinessId, DepositId, RecheckId};
use domain::{Bank, DepositSource, DepositStatus, Mode};
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "deposits")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: DepositId,
    pub account_id: AccountId,
    pub business_id: BusinessId,
    pub mode: Mode,
    pub bank: Bank,
    pub status: DepositStatus,
    /// Kobo.
    pub amount: i64,
    pub currency: String,
    pub provider_reference: String,
    pub sender_name: Option<String>,
    pub sender_account_number: Option<String>,
    pub sender_bank_name: Option<String>,
    pub narration: Option<String>,
    pub source: DepositSource,
    /// The recheck that found it, when a recheck did.
    pub recheck_id: Option<RecheckId>,
    /// When the bank says the money was paid.
    pub received_at: DateTimeUtc,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
