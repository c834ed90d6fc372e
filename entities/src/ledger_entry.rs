use domain::Mode;
use domain::ids::{BusinessId, LedgerEntryId};
use domain::payout::EntryType;
use sea_orm::entity::prelude::*;

/// An append-only ledger entry; one per (type, source).
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "ledger_entries")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: LedgerEntryId,
    pub business_id: BusinessId,
    pub mode: Mode,
    #[sea_orm(column_name = "type")]
    pub entry_type: EntryType,
    /// Kobo, signed: a deposit or a return adds, a payout takes away.
    pub amount: i64,
    pub balance_after: i64,
    /// The deposit or payout that moved the money.
    pub source_id: String,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
