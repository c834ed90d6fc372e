use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Gets numbers for pending accounts from the provider banks, and closes deactivated ones.
#[derive(Parser)]
#[command(name = "worker-provisioning", version)]
struct Cli {
    /// A TOML configuration file (else VAS_CONFIG; VAS_… variables override it).
    #[arg(long)]
    config: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    ops::main_with(cli.config.as_deref(), worker_provisioning::run).await
}
