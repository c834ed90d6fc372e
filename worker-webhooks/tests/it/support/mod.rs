//! What the worker's tests share beyond `test_support` (which this re-exports whole, so files
//! that say `mod support;` and `support::…` keep working): the `worker-webhooks` binary.

#![allow(dead_code, unused_imports)]

pub mod receiver;

use std::path::Path;
use std::process::Command;

pub use test_support::*;

/// The `worker-webhooks` binary with a clean environment, run in `dir`.
pub fn binary(dir: &Path) -> Command {
    test_support::process::command_in(env!("CARGO_BIN_EXE_worker-webhooks"), dir)
}
