//! How every process starts and is operated: configuration, logging, metrics, the HTTP server of
//! every listener, the shutdown signal and the `main` wrapper. No database or broker here: the
//! provider sandbox uses it too.

pub mod config;
pub mod http;
pub mod metrics;
pub mod proxies;
mod redact;
pub mod telemetry;

use tokio_util::sync::CancellationToken;

use crate::config::Config;
pub use crate::redact::redact_url;

/// Every process of the service allocates through mimalloc: under load glibc's malloc, free and
/// their consolidation took about a fifth of the api's CPU (a profile of a deposit,
/// docs/benchmarks.md). Built without its transparent huge pages (`no_thp`): each first touch
/// of one zeroed 2 MiB, a worker's first second went a fifth to that, and an idle process held
/// 15 MiB more (docs/benchmarks.md#an-allocator-without-huge-pages).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
            eprintln!("error: {}", error_chain(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

/// An error and its causes, as `{:#}` prints them but saying each once: a cause that its error's
/// message already ends with (sea-orm's `"Execution Error: {0}"` whose source is that `{0}`) is
/// not repeated.
pub fn error_chain(e: &anyhow::Error) -> String {
    let mut text = e.to_string();
    for cause in e.chain().skip(1) {
        let cause = cause.to_string();
        if !text.ends_with(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// The whole `main` of a process whose only option is `--config FILE` (each worker, the
/// sandbox): its name, what it does (the doc comment becomes `--help`'s text) and its `run`.
/// The caller's crate depends on `clap` and `tokio` (the derive and `#[tokio::main]` expand
/// there, so `--version` is the caller's own).
///
/// ```ignore
/// ops::config_main! {
///     /// Asks the provider banks again for deposits that were not recorded.
///     "worker-recheck" => worker_recheck::run
/// }
/// ```
#[macro_export]
macro_rules! config_main {
    ($(#[$about:meta])* $name:literal => $run:expr) => {
        $(#[$about])*
        #[derive(clap::Parser)]
        #[command(name = $name, version)]
        struct Cli {
            /// A TOML configuration file (else VAS_CONFIG; VAS_… variables override it).
            #[arg(long)]
            config: Option<std::path::PathBuf>,
        }

        #[tokio::main]
        async fn main() -> std::process::ExitCode {
            let cli = <Cli as clap::Parser>::parse();
            $crate::main_with(cli.config.as_deref(), $run).await
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("Execution Error: {0}")]
    struct Wraps(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("relation \"businesses\" does not exist")]
    struct Inner;

    #[test]
    fn an_error_chain_says_each_cause_once() {
        let e = anyhow::Error::new(Wraps(Inner)).context("approving KYB");
        assert_eq!(
            error_chain(&e),
            "approving KYB: Execution Error: relation \"businesses\" does not exist"
        );
        let e = anyhow::Error::new(Inner).context("reading");
        assert_eq!(
            error_chain(&e),
            "reading: relation \"businesses\" does not exist"
        );
    }
}
