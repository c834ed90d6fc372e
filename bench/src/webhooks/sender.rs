//! Sending events: how each target (this service, svix-server) is given its events.

use super::*;
use domain::ids::BusinessId;

/// How events are made, per target.
pub(super) struct Sender {
    pub(super) http: Client,
    pub(super) target: Target,
    /// Ours: the accounts that receive simulated deposits, in turn; svix: the application id.
    pub(super) into: Vec<Receiving>,
    /// Ours: the business, and the database for drain events.
    pub(super) business: Option<(BusinessId, DatabaseConnection)>,
}

impl Sender {
    pub(super) async fn prepare(
        settings: &WebhooksSettings,
        receiver: SocketAddr,
    ) -> anyhow::Result<Self> {
        let http = Client::builder()
            .timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(settings.concurrency.max(1))
            .tcp_nodelay(true)
            .build()?;
        let url = format!("http://{receiver}/hook");
        match &settings.target {
            Target::Ours {
                api,
                keys,
                database_url,
                ..
            } => {
                let db = Database::connect(database_url)
                    .await
                    .context("connecting to --database-url")?;
                ensure!(!keys.is_empty(), "no --key");
                let mut businesses = Vec::new();
                let mut by_business = Vec::new();
                for (n, key) in keys.iter().enumerate() {
                    let business = crate::lists::business_of(&db, key, None).await?;
                    // Each business its own endpoint, as businesses have: one URL shared by
                    // several would share its in-flight slots between them (the worker's
                    // fairness), which is not what a spread over businesses measures.
                    let set = store::businesses::set_webhook_url(
                        &db,
                        &business,
                        domain::Mode::Test,
                        &format!("{url}/{n}"),
                    )
                    .await?;
                    ensure!(set, "business {business} has no test settings");
                    let mut accounts = Vec::new();
                    for _ in 0..settings.accounts.max(1) {
                        accounts.push(create_account(&http, api, key).await?);
                    }
                    businesses.push(business);
                    by_business.push(accounts);
                }
                // In turn across the businesses: consecutive sends go to different ones.
                let mut accounts = Vec::new();
                for i in 0..settings.accounts.max(1) {
                    accounts.extend(by_business.iter().map(|a| a[i].clone()));
                }
                eprintln!(
                    "bench webhooks: businesses {}, {} accounts, endpoints {url}/0…",
                    businesses.join(", "),
                    accounts.len()
                );
                Ok(Self {
                    http,
                    target: settings.target.clone(),
                    into: accounts,
                    business: Some((businesses.swap_remove(0), db)),
                })
            }
            Target::Svix { url: svix, token } => {
                let app: Value = svix_post(
                    &http,
                    svix,
                    token,
                    "/api/v1/app/",
                    &json!({"name": "bench webhooks"}),
                )
                .await?;
                let app = app["id"]
                    .as_str()
                    .context("svix answered no app id")?
                    .to_owned();
                svix_post(
                    &http,
                    svix,
                    token,
                    &format!("/api/v1/app/{app}/endpoint/"),
                    &json!({"url": url, "version": 1, "description": "bench receiver"}),
                )
                .await?;
                eprintln!("bench webhooks: svix app {app}, endpoint {url}");
                Ok(Self {
                    http,
                    target: settings.target.clone(),
                    into: vec![Receiving {
                        id: app,
                        account: None,
                        key: String::new(),
                    }],
                    business: None,
                })
            }
        }
    }

    /// Sends one event through the front door; Err carries what went wrong.
    pub(super) async fn send(&self, seq: u64) -> Result<(), String> {
        let into = &self.into[seq as usize % self.into.len()];
        let (response, what) = match &self.target {
            Target::Ours {
                api,
                bank_secret: None,
                ..
            } => (
                self.http
                    .post(format!(
                        "{}/v1/virtual-accounts/{}/simulate-deposit",
                        api.trim_end_matches('/'),
                        into.id
                    ))
                    .bearer_auth(&into.key)
                    .json(&json!({"amount": 100_000, "narration": format!("{MARKER}{seq}")}))
                    .send()
                    .await,
                "simulate-deposit",
            ),
            // What the sandbox's bank sends once the money has arrived; the api answers it once
            // the deposit, its event and the job to deliver it are stored.
            Target::Ours {
                api,
                bank_secret: Some(secret),
                ..
            } => {
                let (bank, number) = into.account.as_ref().ok_or("no account number")?;
                let mut paid = provider_sandbox::Transaction::received(number, 100_000);
                paid.narration = format!("{MARKER}{seq}");
                let notification = provider_sandbox::signed_deposit(secret, *bank, &paid)
                    .map_err(|e| e.to_string())?;
                (
                    self.http
                        .post(format!(
                            "{}{}",
                            api.trim_end_matches('/'),
                            notification.path
                        ))
                        .header("Content-Type", "application/json")
                        .header("X-Provider-Signature", notification.signature)
                        .body(notification.body)
                        .send()
                        .await,
                    "bank notification",
                )
            }
            Target::Svix { url, token } => (
                self.http
                    .post(format!(
                        "{}/api/v1/app/{}/msg/",
                        url.trim_end_matches('/'),
                        into.id
                    ))
                    .bearer_auth(token)
                    .json(&json!({"eventType": "bench.event", "payload": {"message": format!("{MARKER}{seq}")}}))
                    .send()
                    .await,
                "POST msg",
            ),
        };
        match response {
            Ok(r) if r.status().is_success() => Ok(()),
            Ok(r) => Err(format!(
                "{what}: HTTP {} {}",
                r.status(),
                r.text().await.unwrap_or_default()
            )),
            Err(e) => Err(format!("{what}: {e}")),
        }
    }

    /// Writes the drain's events while no worker runs. Ours: in the database (`events::record`,
    /// as the api does; its relay queues them); svix: through its API (its queue holds them).
    pub(super) async fn write_backlog(
        &self,
        tracker: &Tracker,
        range: std::ops::Range<u64>,
        concurrency: usize,
    ) -> anyhow::Result<()> {
        if let Some((business, db)) = &self.business {
            let mut seq = range.start;
            while seq < range.end {
                let txn = db.begin().await?;
                let end = (seq + WRITE_BATCH).min(range.end);
                for s in seq..end {
                    tracker.mark_sent(s);
                    store::events::record(
                        &txn,
                        business,
                        domain::Mode::Test,
                        domain::EventType::WebhookTest,
                        &json!({"message": format!("{MARKER}{s}")}),
                        domain::time::now(),
                    )
                    .await?;
                }
                txn.commit().await?;
                seq = end;
            }
            return Ok(());
        }
        let errors = self.send_all(tracker, range, concurrency).await;
        ensure!(
            errors.is_empty(),
            "sending the backlog failed: {}",
            errors[0]
        );
        Ok(())
    }

    /// Sends every event of `range` with `concurrency` callers; returns the errors.
    pub(super) async fn send_all(
        &self,
        tracker: &Tracker,
        range: std::ops::Range<u64>,
        concurrency: usize,
    ) -> Vec<String> {
        let next = AtomicU64::new(range.start);
        let callers = (0..concurrency.max(1)).map(|_| async {
            let mut errors = Vec::new();
            loop {
                let seq = next.fetch_add(1, Ordering::Relaxed);
                if seq >= range.end {
                    return errors;
                }
                tracker.mark_sent(seq);
                if let Err(e) = self.send(seq).await {
                    errors.push(e);
                }
            }
        });
        futures::future::join_all(callers)
            .await
            .into_iter()
            .flatten()
            .collect()
    }
}

/// Ours: an account that receives deposits, with its bank and number and its business's key;
/// svix: the application.
#[derive(Clone)]
pub(super) struct Receiving {
    pub(super) id: String,
    pub(super) account: Option<(domain::Bank, String)>,
    pub(super) key: String,
}

pub(super) async fn create_account(
    http: &Client,
    api: &str,
    key: &str,
) -> anyhow::Result<Receiving> {
    let response = http
        .post(format!("{}/v1/virtual-accounts", api.trim_end_matches('/')))
        .bearer_auth(key)
        .header("Idempotency-Key", ulid::Ulid::new().to_string())
        .json(&crate::payload::unique_customer("test-bank"))
        .send()
        .await
        .context("creating the account that receives the deposits")?;
    let status = response.status();
    let body: Value = response.json().await.unwrap_or_default();
    ensure!(
        status.is_success(),
        "creating an account: HTTP {status} {body}"
    );
    let field = |name: &str| {
        body[name]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("the created account has no {name}: {body}"))
    };
    // An account of test-bank is active at once, at the bank it asked for.
    let bank = field("preferredBank")?;
    let bank = domain::Bank::parse(&bank).with_context(|| format!("unknown bank {bank}"))?;
    Ok(Receiving {
        id: field("id")?,
        account: Some((bank, field("accountNumber")?)),
        key: key.to_owned(),
    })
}

pub(super) async fn svix_post(
    http: &Client,
    base: &str,
    token: &str,
    path: &str,
    body: &Value,
) -> anyhow::Result<Value> {
    let response = http
        .post(format!("{}{path}", base.trim_end_matches('/')))
        .bearer_auth(token)
        .json(body)
        .send()
        .await
        .with_context(|| format!("svix {path}"))?;
    let status = response.status();
    let body: Value = response.json().await.unwrap_or_default();
    ensure!(status.is_success(), "svix {path}: HTTP {status} {body}");
    Ok(body)
}

/// Ours: waits until the relay has published every webhook job (the backlog is in the queue).
pub(super) async fn wait_until_queued(
    db: &DatabaseConnection,
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let row = db
            .query_one_raw(sea_orm::Statement::from_string(
                db.get_database_backend(),
                "SELECT count(*) AS n FROM outbox WHERE queue = 'webhooks' \
                 AND completed_at IS NULL AND dead_at IS NULL \
                 AND (published_at IS NULL OR publishing_until IS NOT NULL)",
            ))
            .await?
            .context("count returned no row")?;
        let n: i64 = row.try_get("", "n")?;
        if n == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{n} webhook jobs still unpublished after {timeout:?}: is the api (its relay) running?"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
