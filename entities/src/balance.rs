use domain::Mode;
use domain::ids::BusinessId;
use sea_orm::entity::prelude::*;

/// One per business and mode: the sum of its ledger, kept with every entry.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "balances")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub business_id: BusinessId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub mode: Mode,
    /// Kobo; never negative (a CHECK, and the debit's own condition).
    pub available: i64,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
