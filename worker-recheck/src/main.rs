use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Asks the provider banks again for deposits that were not recorded.
#[derive(Parser)]
#[command(name = "worker-recheck", version)]
struct Cli {
    /// A TOML configuration file (else VAS_CONFIG; VAS_… variables override it).
    #[arg(long)]
    config: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    ops::main_with(cli.config.as_deref(), worker_recheck::run).await
}
