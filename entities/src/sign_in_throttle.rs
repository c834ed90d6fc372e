use sea_orm::entity::prelude::*;

/// The sign-in attempts of one e-mail (by hash), known or not: `domain::user::Throttle`.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "sign_in_throttles")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub email_hash: String,
    pub attempts: i32,
    pub window_started_at: DateTimeUtc,
    pub locked_until: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
