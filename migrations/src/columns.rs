//! Column shorthands shared by the migrations.

use sea_orm_migration::prelude::*;

/// A non-null short string (ids, enumerations).
pub fn id(name: &'static str) -> ColumnDef {
    ColumnDef::new(name).string().not_null().to_owned()
}

pub fn text(name: &'static str) -> ColumnDef {
    ColumnDef::new(name).text().not_null().to_owned()
}

pub fn text_null(name: &'static str) -> ColumnDef {
    ColumnDef::new(name).text().null().to_owned()
}

pub fn ts(name: &'static str) -> ColumnDef {
    ColumnDef::new(name)
        .timestamp_with_time_zone()
        .not_null()
        .to_owned()
}

pub fn ts_null(name: &'static str) -> ColumnDef {
    ColumnDef::new(name)
        .timestamp_with_time_zone()
        .null()
        .to_owned()
}
