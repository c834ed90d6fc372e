use sea_orm::entity::prelude::*;

/// Failed sign-ins of one e-mail (by hash), known or not.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "sign_in_throttles")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub email_hash: String,
    pub failures: i32,
    pub window_started_at: DateTimeUtc,
    pub locked_until: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
