//! The load generator's tests, one binary (`cargo test -p bench --test it MODULE::`).

mod lists;
mod mock;
