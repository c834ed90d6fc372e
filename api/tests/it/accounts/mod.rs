//! The accounts API as a caller sees it, on SQLite and on PostgreSQL, one file per concern.

mod counts;
mod create;
mod creator_key;
mod deactivate;
mod http_conventions;
mod list;
mod paging;
mod secrets;
