//! What the api's tests share beyond `test_support` (which this re-exports whole, so files that
//! say `mod common;` and `common::…` keep working): the `api` binary as an operator runs it.

#![allow(dead_code, unused_imports, unused_macros)]

use std::path::Path;
use std::process::Command;

pub use test_support::*;

/// `test_support::on_both_databases!`, callable as `on_both_databases!` after `mod common;`.
#[macro_export]
macro_rules! on_both_databases {
    ($($tests:tt)*) => {
        test_support::on_both_databases!($($tests)*);
    };
}

/// The `api` binary with a clean environment, run in `dir`.
pub fn api(dir: &Path) -> Command {
    test_support::process::command_in(env!("CARGO_BIN_EXE_api"), dir)
}
