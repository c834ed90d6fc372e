use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Sends payouts to the payout provider exactly once and learns their outcome; pays out daily
/// settlement accounts.
#[derive(Parser)]
#[command(name = "worker-payouts", version)]
struct Cli {
    /// A TOML configuration file (else VAS_CONFIG; VAS_… variables override it).
    #[arg(long)]
    config: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    ops::main_with(cli.config.as_deref(), worker_payouts::run).await
}
