use domain::Mode;
use domain::ids::BusinessId;
use domain::payout::Schedule;
use sea_orm::entity::prelude::*;

/// One per business and mode: where payouts go.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "settlement_accounts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub business_id: BusinessId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub mode: Mode,
    /// The 3-digit CBN code.
    pub bank_code: String,
    pub bank_name: String,
    pub account_number: String,
    /// As the bank's name enquiry gave it.
    pub account_name: String,
    pub schedule: Schedule,
    pub verified_at: DateTimeUtc,
    /// Live payouts wait until then after a change.
    pub payouts_available_at: DateTimeUtc,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
