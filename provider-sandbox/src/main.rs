//! `provider-sandbox`: serves the sandbox banks where `VAS_SANDBOX__BIND` says, until SIGTERM or
//! Ctrl-C. Configuration as for every process: defaults, `--config FILE` (or `VAS_CONFIG`), `VAS_…`.

use ops::config::Config;
use tokio_util::sync::CancellationToken;
use tracing::info;

ops::config_main! {
    /// Simulates the provider banks (wema-bank, access-bank, titan-trust-bank, test-bank) over HTTP.
    "provider-sandbox" => run
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
