//! `provider-sandbox`: serves the sandbox banks where `VAS_SANDBOX__BIND` says, until SIGTERM or
//! Ctrl-C. Configuration as for every process: defaults, `--config FILE` (or `VAS_CONFIG`), `VAS_…`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ops::config::Config;
use tokio_util::sync::CancellationToken;
use tracing::info;

/// Simulates the provider banks (wema-bank, access-bank, titan-trust-bank, test-bank) over HTTP.
#[derive(Parser)]
#[command(name = "provider-sandbox", version)]
struct Cli {
    /// A TOML configuration file (else VAS_CONFIG; VAS_… variables override it).
    #[arg(long)]
    config: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    ops::main_with(cli.config.as_deref(), run).await
}

async fn run(config: Config) -> anyhow::Result<()> {
    let listener = ops::http::bind(config.sandbox.bind).await?;
    info!(address = %listener.local_addr()?, "provider sandbox listening");
    let shutdown = CancellationToken::new();
    ops::cancel_on_signal(shutdown.clone());
    let timeouts = config.http.server_timeouts();
    provider_sandbox::serve(config.sandbox, listener, timeouts, shutdown).await?;
    info!("provider sandbox stopped");
    Ok(())
}
