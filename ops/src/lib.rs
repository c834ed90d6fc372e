//! How every process starts and is operated: configuration, logging, metrics, the HTTP server of
//! every listener, the shutdown signal and the `main` wrapper. No database or broker here: the
//! provider sandbox uses it too.

pub mod config;
pub mod http;
pub mod metrics;
pub mod proxies;
pub mod telemetry;

use tokio_util::sync::CancellationToken;

use crate::config::Config;

/// A URL without its password, for messages and logs.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_owned(),
    }
}

/// Cancels `token` on SIGTERM or Ctrl-C.
pub fn cancel_on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        shutdown_signal().await;
        token.cancel();
    });
}

pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutdown requested: finishing in-flight work");
}

/// The `main` of every binary: the configuration (defaults, `config_file` or `VAS_CONFIG`, then
/// `VAS_…` variables), logging to stderr, then `run`. An error is printed to stderr (never a
/// secret: errors name settings, not their values) and the process exits 1.
pub async fn main_with<F, Fut>(
    config_file: Option<&std::path::Path>,
    run: F,
) -> std::process::ExitCode
where
    F: FnOnce(Config) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let config = match Config::load(config_file) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    crate::telemetry::init(&config.log);
    match run(config).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
