use domain::ids::{ConflictId, DepositId};
use domain::{Bank, DepositSource, Mode};
use sea_orm::entity::prelude::*;

/// A transaction reported again under a recorded reference with other content: the first report
/// (the deposit) stands; this keeps the second for operators.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "deposit_conflicts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: ConflictId,
    /// The deposit the first report made.
    pub deposit_id: DepositId,
    pub mode: Mode,
    pub bank: Bank,
    pub provider_reference: String,
    /// `notification` or `recheck`: how the conflicting report arrived.
    pub source: DepositSource,
    /// The conflicting report, as the provider's transaction JSON.
    pub reported: String,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
