//! `provider-sandbox`: serves the sandbox banks where `VAS_SANDBOX__BIND` says, until SIGTERM or
//! Ctrl-C. Configuration as for every process: defaults, `--config FILE` (or `VAS_CONFIG`), `VAS_…`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use provider_sandbox::{Sandbox, router};
use shared::config::Config;
use tracing::info;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    let config_file = config_file_arg()?;
    let config = Config::load(config_file.as_deref())?;
    shared::telemetry::init(&config.log);

    let bind = config.sandbox.bind;
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .with_context(|| format!("binding {bind}"))?;
    let addr = listener.local_addr()?;
    let app = router(Sandbox::new(config.sandbox)?);
    info!(address = %addr, "provider sandbox listening");

    axum::serve(listener, app)
        .with_graceful_shutdown(shared::ops::shutdown_signal())
        .await?;
    info!("provider sandbox stopped");
    Ok(())
}

/// The only argument: `--config FILE` (or `--config=FILE`).
fn config_file_arg() -> anyhow::Result<Option<PathBuf>> {
    let mut args = std::env::args().skip(1);
    let Some(arg) = args.next() else {
        return Ok(None);
    };
    let path = match arg.strip_prefix("--config=") {
        Some(path) => path.to_owned(),
        None if arg == "--config" => args.next().context("--config needs a file")?,
        None => bail!("unexpected argument '{arg}'; usage: provider-sandbox [--config FILE]"),
    };
    if let Some(extra) = args.next() {
        bail!("unexpected argument '{extra}'; usage: provider-sandbox [--config FILE]");
    }
    Ok(Some(PathBuf::from(path)))
}
