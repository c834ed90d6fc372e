//! `bench create|replay`: see README.md beside Cargo.toml.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    bench::cli::main().await
}
