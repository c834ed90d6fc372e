use domain::KybStatus;
use domain::ids::BusinessId;
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "businesses")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: BusinessId,
    pub name: String,
    pub kyb_status: KybStatus,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
