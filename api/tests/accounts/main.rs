//! The accounts API as a caller sees it, on SQLite and on PostgreSQL, one file per concern.

mod counts;
mod create;
mod deactivate;
mod http_conventions;
mod list;
mod paging;
mod secrets;
