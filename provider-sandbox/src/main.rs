//! `provider-sandbox`: serves the sandbox banks where `VAS_SANDBOX__BIND` says, until SIGTERM or
//! Ctrl-C. Configuration as for every process: defaults, `--config FILE` (or `VAS_CONFIG`), `VAS_…`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use ops::config::Config;
use provider_sandbox::{Sandbox, router};
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
    let bind = config.sandbox.bind;
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .with_context(|| format!("binding {bind}"))?;
    let addr = listener.local_addr()?;
    let sandbox = Sandbox::new(config.sandbox)?;
    sandbox.resume_transfers();
    let app = router(sandbox);
    info!(address = %addr, "provider sandbox listening");

    axum::serve(listener, app)
        .with_graceful_shutdown(ops::shutdown_signal())
        .await?;
    info!("provider sandbox stopped");
    Ok(())
}
