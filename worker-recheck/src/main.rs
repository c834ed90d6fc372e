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
    let config = match shared::config::Config::load(cli.config.as_deref()) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    shared::telemetry::init(&config.log);
    match worker_recheck::run(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
