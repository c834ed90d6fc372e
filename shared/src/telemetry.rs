//! Logging: human-readable by default, JSON with `VAS_LOG__FORMAT=json`.

use tracing_subscriber::EnvFilter;

use crate::config::LogConfig;

pub fn init(config: &LogConfig) {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("{},sqlx=warn,sea_orm=warn", config.level)));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    // try_init: a second call (tests, `api dev` re-entry) keeps the first subscriber.
    let _ = if config.format == "json" {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
}
