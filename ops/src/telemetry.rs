//! Logging: human-readable by default, JSON with `VAS_LOG__FORMAT=json`.

use tracing_subscriber::EnvFilter;

use crate::config::LogConfig;

pub fn init(config: &LogConfig) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("{},sqlx=warn,sea_orm=warn", config.level)));
    // stderr: stdout carries command output (the JSON of `api admin …`).
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    // try_init: a second call (tests, `api dev` re-entry) keeps the first subscriber.
    let _ = if config.format == "json" {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
}

tokio::task_local! {
    static REQUEST_ID: String;
}

/// The id of the request (or of the request that caused the job) being served, if any.
pub fn request_id() -> Option<String> {
    REQUEST_ID.try_with(Clone::clone).ok()
}

/// Runs `f` with `id` as the current request id: error bodies, log spans and the jobs it
/// enqueues carry it.
pub async fn with_request_id<F: std::future::Future>(id: String, f: F) -> F::Output {
    REQUEST_ID.scope(id, f).await
}
