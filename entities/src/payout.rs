use domain::ids::{BusinessId, PayoutId};
use domain::payout::PayoutStatus;
use domain::{Bank, Mode};
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "payouts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: PayoutId,
    pub business_id: BusinessId,
    pub mode: Mode,
    pub status: PayoutStatus,
    /// Kobo.
    pub amount: i64,
    pub currency: String,
    /// The caller's own id, unique per business and mode.
    pub reference: Option<String>,
    pub narration: Option<String>,
    /// The destination, copied from the settlement account at creation.
    pub bank_code: String,
    pub bank_name: String,
    pub account_number: String,
    pub account_name: String,
    pub session_id: Option<String>,
    pub failure_reason: Option<String>,
    /// When the worker first sent the transfer.
    pub sent_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub completed_at: Option<DateTimeUtc>,
    pub updated_at: DateTimeUtc,
    /// The bank the transfer was sent through, recorded before the first send (null before
    /// then, and on payouts sent before it was recorded: the configured payout bank).
    pub provider_bank: Option<Bank>,
    /// The worker run that holds the payout (see `store::payouts::take_lease`), and until when.
    pub lease_token: Option<String>,
    pub lease_until: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
