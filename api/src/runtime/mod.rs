//! What is the api's own in running: `api serve` (the app, its relay and its maintenance on
//! PostgreSQL and RabbitMQ), and [`serve`], which `api dev` (the `api-bin` crate) serves with too. Opening the database, key and broker is
//! `bootstrap`'s; the HTTP server and the signals are `ops`'s.

use std::sync::Arc;

use bootstrap;
use ops::config::Config;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::AppState;

/// `api serve`: PostgreSQL, RabbitMQ, the relay, and HTTP until SIGTERM.
pub async fn serve_production(config: Config) -> anyhow::Result<()> {
    config.require_production()?;
    if config.sandbox.secret == ops::config::SandboxConfig::default().secret {
        // Not refused (docs/operations/processes-and-configuration.md names the three settings a
        // production start needs), but anyone who reads this repository could sign test-mode
        // notifications with it.
        tracing::warn!(
            "VAS_SANDBOX__SECRET is the published default: anyone can sign test-mode deposit \
             notifications; set your own, the same on the api and provider-sandbox"
        );
    }
    if let Some(public) = &config.dashboard.public_url
        && !public.starts_with("https://")
    {
        // Not refused: a dashboard on localhost works (browsers keep Secure cookies there).
        tracing::warn!(
            public_url = %public,
            "VAS_DASHBOARD__PUBLIC_URL is not https: the dashboard's cookies are Secure anyway \
             (only `api dev` on loopback goes without), so browsers sign in only over https or \
             on localhost"
        );
    }
    // The Developers page validates webhook URLs.
    outbound::ssrf::TargetPolicy::from_config(&config.webhooks).warn_at_start("api");
    let url = config.database.url.clone().expect("checked above");
    let db = bootstrap::connect_database(&url, &config).await?;
    let cipher = Arc::new(bootstrap::configured_cipher(&config)?);
    let broker = bootstrap::connect_broker(&config).await?;
    let shutdown = CancellationToken::new();
    ops::cancel_on_signal(shutdown.clone());
    let relay = queue::relay::Relay::new(db.clone(), broker);
    let relay_task = tokio::spawn(relay.clone().run(shutdown.clone()));
    let listener = ops::http::bind(config.http.bind).await?;
    tracing::info!(address = %listener.local_addr()?, "api listening");
    let reads = bootstrap::connect_reads(&config, &db).await?;
    let state = AppState::new(db, cipher, config, relay).with_reads(reads);
    serve(state, listener, shutdown).await;
    let _ = relay_task.await;
    Ok(())
}

/// Serves the API (with the listeners' time limits of `VAS_HTTP__…`) until `shutdown`, letting
/// in-flight requests finish.
pub async fn serve(state: AppState, listener: TcpListener, shutdown: CancellationToken) {
    let maintenance = tokio::spawn(maintenance(state.clone(), shutdown.clone()));
    let changes = tokio::spawn(
        state
            .auth_cache
            .follow_changes(state.db.clone(), shutdown.clone()),
    );
    let timeouts = state.config.http.server_timeouts();
    ops::http::serve(listener, crate::router(state), timeouts, shutdown).await;
    let _ = maintenance.await;
    let _ = changes.await;
}

/// Forgets idempotency keys after 48 hours (the contract promises at least 24), finished jobs
/// after 7 days, dashboard sessions that ended by time, and sign-in attempts whose window is over.
async fn maintenance(state: AppState, shutdown: CancellationToken) {
    let db = state.db.clone();
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(600));
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let now = domain::time::now();
        if let Err(e) =
            store::accounts::purge_idempotency_keys(&db, now - chrono::Duration::hours(48)).await
        {
            tracing::warn!(error = %e, "purging old idempotency keys failed");
        }
        if let Err(e) = store::outbox::purge_finished(&db, now - chrono::Duration::days(7)).await {
            tracing::warn!(error = %e, "purging finished jobs failed");
        }
        let limits = state.session_limits();
        if let Err(e) =
            store::users::purge_sessions(&db, now - limits.absolute, now - limits.idle).await
        {
            tracing::warn!(error = %e, "purging ended dashboard sessions failed");
        }
        if let Err(e) = store::users::purge_sign_in_throttles(&db, now).await {
            tracing::warn!(error = %e, "purging old sign-in attempts failed");
        }
    }
}
