//! `api dev`: the whole service in one process on SQLite under the dev data folder, with the
//! in-process queue, the provider sandbox and the workers running beside the API. It lives here,
//! not in the api crate, so that the api depends on no worker (docs/architecture.md).

use std::sync::Arc;

use anyhow::Context;
use bootstrap::{self, WorkerParts};
use domain::KybStatus;
use entities::business;
use ops::config::Config;
use queue::broker::{Broker, MemoryBroker};
use queue::relay::Relay;
use sea_orm::{EntityTrait, PaginatorTrait, QueryOrder};
use store::audit::Actor;
use store::businesses;
use tokio_util::sync::CancellationToken;

use api::AppState;

pub async fn run(mut config: Config) -> anyhow::Result<()> {
    anyhow::ensure!(
        config.amqp.url.is_none(),
        "api dev runs its own in-process queue: unset VAS_AMQP__URL"
    );
    // Development delivers to receivers on this machine: webhook URLs may be loopback or
    // private (said at start, like any process that allows them).
    config.webhooks.allow_private_addresses = true;
    outbound::ssrf::TargetPolicy::from_config(&config.webhooks).warn_at_start("api dev");
    let url = bootstrap::database_url_or_dev(&config)?;
    let db = bootstrap::connect_database(&url, &config).await?;
    bootstrap::migrate(&db).await?;
    let cipher = Arc::new(bootstrap::cipher_or_dev(&config)?);

    let listener = ops::http::bind(config.http.bind).await?;
    let address = listener.local_addr().context("reading the bound address")?;

    // The sandbox serves every test-mode bank, keeps its state beside the database, and sends
    // deposit notifications back to this process.
    if config.sandbox.url.is_none() {
        let mut sandbox = config.sandbox.clone();
        sandbox
            .state_file
            .get_or_insert_with(|| config.dev.data_dir.join("sandbox.json"));
        sandbox
            .notify_url
            .get_or_insert_with(|| format!("http://{address}"));
        let sandbox_listener = ops::http::bind(([127, 0, 0, 1], 0).into()).await?;
        let sandbox_address =
            provider_sandbox::spawn(sandbox, sandbox_listener, config.http.server_timeouts())
                .await?;
        config.sandbox.url = Some(format!("http://{sandbox_address}"));
    }

    let shutdown = CancellationToken::new();
    ops::cancel_on_signal(shutdown.clone());
    let broker: Arc<dyn Broker> = Arc::new(MemoryBroker::new());
    broker.declare().await?;
    // The previous run's in-process queue died with it: work it held resumes now, not after the
    // relay's republish delay.
    let resumed = store::outbox::forget_publications(&db).await?;
    if resumed > 0 {
        tracing::info!(jobs = resumed, "resuming work that was in flight");
    }
    let relay = Relay::new(db.clone(), broker.clone());
    let mut background = vec![tokio::spawn(relay.clone().run(shutdown.clone()))];
    // Checked here so a bad VAS_PAYOUTS__DAILY_AT stops `api dev` at start.
    worker_payouts::parse_daily_at(&config.payouts.daily_at)?;
    for worker in [
        worker_provisioning::WORKER,
        worker_recheck::WORKER,
        worker_webhooks::WORKER,
        worker_payouts::WORKER,
    ] {
        let parts = WorkerParts {
            db: db.clone(),
            cipher: cipher.clone(),
            broker: broker.clone(),
            relay: relay.clone(),
            shutdown: shutdown.clone(),
        };
        let run = (worker.run)(config.clone(), parts);
        background.push(tokio::spawn(async move {
            if let Err(e) = run.await {
                tracing::error!(worker = worker.name, error = %e, "worker stopped");
            }
        }));
    }

    tracing::info!(address = %address, "api listening");
    print_banner(&db, &cipher, &url, address).await?;
    let state = AppState::new(db, cipher, config, relay).in_dev_on(address);
    api::runtime::serve(state, listener, shutdown).await;
    for task in background {
        let _ = task.await;
    }
    Ok(())
}

async fn print_banner(
    db: &sea_orm::DatabaseConnection,
    cipher: &crypto::Cipher,
    url: &str,
    address: std::net::SocketAddr,
) -> anyhow::Result<()> {
    let existing = business::Entity::find().count(db).await?;
    // The demo's business and user are recorded as made by whoever started `api dev`.
    let operator = Actor::operator_via("api dev");
    println!();
    println!("  Virtual Account Service (dev) at http://{address}");
    println!("  data: {}", ops::redact_url(url));
    if existing == 0 {
        let demo =
            businesses::create_by(db, cipher, &operator, "Demo Business", KybStatus::Pending)
                .await?;
        println!(
            "  demo business {} created; these are shown only now:",
            demo.id
        );
        println!("    test secret key:     {}", demo.test.secret_key);
        println!("    test webhook secret: {}", demo.test.webhook_secret);
    } else {
        println!(
            "  {existing} business(es) exist; keys were printed when they were created \
             (`api admin business create --name N` issues new ones)"
        );
    }
    println!("  dashboard: http://{address}/dashboard/");
    // The first start (or the first since the dashboard came) gets a dashboard user too.
    if store::users::count(db).await? == 0
        && let Some(demo) = business::Entity::find()
            .order_by_asc(business::Column::CreatedAt)
            .one(db)
            .await?
    {
        let user = api::actions::users::create_user_by(
            db,
            &api::passwords::Hashing::single(),
            &operator,
            &demo.id,
            "demo@example.com",
            domain::Role::Owner,
        )
        .await?;
        println!(
            "    sign in as {} with password {}",
            user.email, user.password
        );
        println!("    (that password is printed this once; `api admin user create` adds users)");
    }
    println!();
    Ok(())
}
