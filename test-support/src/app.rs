//! The api in this process on 127.0.0.1:0, against a fresh database of its own, with its outbox
//! relay and the provider sandbox; each worker on demand.

use domain::ids::{BusinessId, EventId};
use std::net::SocketAddr;
use std::sync::Arc;

use api::AppState;
use crypto::Cipher;
use domain::{KybStatus, Mode};
use ops::config::Config;
use queue::broker::Broker;
use queue::relay::Relay;
use sea_orm::DatabaseConnection;
use serde_json::{Value, json};
use store::businesses::{self, IssuedBusiness};
use tokio_util::sync::CancellationToken;

use crate::{Backend, RabbitPrefix, TestBroker, TestDb, account_body};

pub struct TestApp {
    /// `http://127.0.0.1:PORT`
    pub base: String,
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    pub db: DatabaseConnection,
    pub config: Config,
    pub crypto_key: String,
    /// A business with KYB pending: its test key works, its live key waits for approval.
    pub business: IssuedBusiness,
    pub broker: Arc<dyn Broker>,
    pub relay: Relay,
    pub sandbox_url: String,
    /// Cancelled when the app is dropped: stops the relay and any worker.
    pub shutdown: CancellationToken,
    /// The RabbitMQ prefix, deleted when the test ends.
    pub rabbit: Option<RabbitPrefix>,
    pub test_db: Arc<TestDb>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        // Then the fields: the broker prefix, then the database, are removed.
        self.shutdown.cancel();
    }
}

/// The configuration the test app starts from: this database and key, port 0, no auth cache.
pub fn test_config(url: &str, crypto_key: &str) -> Config {
    let mut config = Config::default();
    config.database.url = Some(url.to_owned());
    config.database.max_connections = 10;
    config.crypto.key = Some(crypto_key.to_owned());
    // Tests approve KYB and expect the next request to see it.
    config.http.auth_cache_secs = 0;
    config.http.bind = "127.0.0.1:0".parse().unwrap();
    // The tests' webhook receivers run on this machine: allowed as an operator would allow them
    // (a test of the refusal turns this off).
    config.webhooks.allow_private_addresses = true;
    config
}

pub async fn spawn_app(backend: Backend) -> TestApp {
    spawn_app_with(backend, |_| {}).await
}

/// [`spawn_app`] with the configuration changed by `tweak` first (a sandbox of its own is
/// started unless `tweak` sets `sandbox.url`).
pub async fn spawn_app_with(backend: Backend, tweak: impl FnOnce(&mut Config)) -> TestApp {
    crate::logs::capture_logs();
    let test_db = Arc::new(TestDb::new(&backend).await);
    let crypto_key = Cipher::generate_key();
    let mut config = test_config(&test_db.url, &crypto_key);
    config.sandbox.activation_delay_secs = 1;
    config.provisioning.initial_poll_secs = 1;
    config.provisioning.max_poll_secs = 2;
    tweak(&mut config);
    let db = store::connect(&test_db.url, config.database.max_connections)
        .await
        .expect("connect");
    bootstrap::migrate(&db).await.expect("migrate");
    let cipher = Cipher::new(&crypto_key, &[]).unwrap();
    let business = businesses::create(&db, &cipher, "Acme Ltd", KybStatus::Pending)
        .await
        .expect("business");

    let (listener, addr) = crate::http::listener().await;
    let sandbox_url = match &config.sandbox.url {
        Some(url) => url.clone(),
        None => {
            let mut sandbox = config.sandbox.clone();
            sandbox.notify_url = Some(format!("http://{addr}"));
            let (sandbox_listener, _) = crate::http::listener().await;
            let timeouts = config.http.server_timeouts();
            let sandbox_addr = provider_sandbox::spawn(sandbox, sandbox_listener, timeouts)
                .await
                .unwrap();
            format!("http://{sandbox_addr}")
        }
    };
    config.sandbox.url = Some(sandbox_url.clone());

    let TestBroker { broker, rabbit } = TestBroker::for_backend(&backend).await;
    let shutdown = CancellationToken::new();
    let relay = Relay::new(db.clone(), broker.clone());
    tokio::spawn(relay.clone().run(shutdown.clone()));
    serve_on(listener, &db, &config, relay.clone());
    TestApp {
        base: format!("http://{addr}"),
        addr,
        client: reqwest::Client::new(),
        db,
        config,
        crypto_key,
        business,
        broker,
        relay,
        sandbox_url,
        shutdown,
        rabbit,
        test_db,
    }
}

fn serve_on(
    listener: tokio::net::TcpListener,
    db: &DatabaseConnection,
    config: &Config,
    relay: Relay,
) {
    let cipher = Arc::new(Cipher::new(config.crypto.key.as_deref().unwrap(), &[]).unwrap());
    // On loopback like `api dev`: the dashboard's cookies follow its rule (plain unless the
    // public URL is https), which the dashboard tests' cookie jar expects.
    let at = listener.local_addr().expect("bound");
    let state = AppState::new(db.clone(), cipher, config.clone(), relay).in_dev_on(at);
    // The production server (its time limits, the peer address for handlers), never stopped.
    tokio::spawn(api::runtime::serve(
        state,
        listener,
        CancellationToken::new(),
    ));
}

/// Starts one more API instance on the same database (as another `api serve` process would be).
pub async fn start_instance(app: &TestApp) -> SocketAddr {
    let (listener, addr) = crate::http::listener().await;
    serve_on(listener, &app.db, &app.config, app.relay.clone());
    addr
}

/// Runs `worker` in this process until `stop`, as `api dev` runs it.
pub fn start_worker(
    app: &TestApp,
    worker: bootstrap::Worker,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let parts = crate::worker_parts(&app.db, &app.crypto_key, &app.broker, &app.relay, &stop);
    let run = (worker.run)(app.config.clone(), parts);
    tokio::spawn(async move {
        run.await
            .unwrap_or_else(|e| panic!("{} runs: {e}", worker.name))
    })
}

/// Runs a worker-recheck consumer in this process until `stop`.
pub fn start_recheck_worker(app: &TestApp, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    start_worker(app, worker_recheck::WORKER, stop)
}

/// Runs a worker-provisioning consumer in this process until `stop`.
pub fn start_provisioning_worker(
    app: &TestApp,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    start_worker(app, worker_provisioning::WORKER, stop)
}

/// Runs a worker-payouts consumer and daily schedule in this process until `stop`.
pub fn start_payouts_worker(app: &TestApp, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    start_worker(app, worker_payouts::WORKER, stop)
}

/// Runs a worker-webhooks consumer in this process until `stop`.
pub fn start_webhooks_worker(
    app: &TestApp,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    start_worker(app, worker_webhooks::WORKER, stop)
}

impl TestApp {
    pub fn test_key(&self) -> &str {
        &self.business.test.secret_key
    }

    pub fn live_key(&self) -> &str {
        &self.business.live.secret_key
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// The app's cipher (its current key, no previous ones).
    pub fn cipher(&self) -> Cipher {
        Cipher::new(&self.crypto_key, &[]).unwrap()
    }

    /// POST /v1/virtual-accounts with `key` and an idempotency key.
    pub async fn create(
        &self,
        key: &str,
        idempotency_key: &str,
        body: &Value,
    ) -> reqwest::Response {
        self.create_at(&self.base, key, idempotency_key, body).await
    }

    /// [`TestApp::create`] on another instance (`base`).
    pub async fn create_at(
        &self,
        base: &str,
        key: &str,
        idempotency_key: &str,
        body: &Value,
    ) -> reqwest::Response {
        self.client
            .post(format!("{base}/v1/virtual-accounts"))
            .bearer_auth(key)
            .header("Idempotency-Key", idempotency_key)
            .json(body)
            .send()
            .await
            .expect("request sent")
    }

    pub async fn get(&self, key: &str, path: &str) -> reqwest::Response {
        self.client
            .get(self.url(path))
            .bearer_auth(key)
            .send()
            .await
            .expect("request sent")
    }

    /// Deactivates account `id` with `key` (`POST …/deactivate`).
    pub async fn deactivate(&self, key: &str, id: &str) -> reqwest::Response {
        self.post(key, &format!("/v1/virtual-accounts/{id}/deactivate"), None)
            .await
    }

    /// [`get`](Self::get), the body read as JSON.
    pub async fn get_json(&self, key: &str, path: &str) -> Value {
        crate::json(self.get(key, path).await).await
    }

    pub async fn post(&self, key: &str, path: &str, body: Option<&Value>) -> reqwest::Response {
        let mut req = self.client.post(self.url(path)).bearer_auth(key);
        if let Some(body) = body {
            req = req.json(body);
        }
        req.send().await.expect("request sent")
    }

    /// The balance `key`'s mode shows (`GET /v1/balance`).
    pub async fn balance(&self, key: &str) -> Value {
        self.get_json(key, "/v1/balance").await
    }

    /// `amount` kobo into the test account `id` through the sandbox (`simulate-deposit`, 202),
    /// returning once the test balance shows it credited.
    pub async fn deposit_credited(&self, id: &str, amount: i64) {
        let before = self.balance(self.test_key()).await["available"]
            .as_i64()
            .expect("an available balance");
        let resp = self
            .post(
                self.test_key(),
                &format!("/v1/virtual-accounts/{id}/simulate-deposit"),
                Some(&json!({"amount": amount})),
            )
            .await;
        assert_eq!(resp.status().as_u16(), 202, "simulate-deposit");
        crate::eventually(std::time::Duration::from_secs(15), async || {
            let b = self.balance(self.test_key()).await;
            if b["available"] == before + amount {
                Ok(())
            } else {
                Err(b)
            }
        })
        .await;
    }

    /// Customer `n`'s test-bank account, created with `key` under the Idempotency-Key `acct-{n}`:
    /// active at once (201), as the API shows it.
    pub async fn active_account(&self, key: &str, n: u32) -> Value {
        let resp = self
            .create(key, &format!("acct-{n}"), &account_body(n, "test-bank"))
            .await;
        assert_eq!(resp.status().as_u16(), 201, "the account is created");
        crate::json(resp).await
    }

    /// An active test account ([`active_account`](Self::active_account) 1) with `amount` kobo
    /// deposited and credited: its id.
    pub async fn funded_account(&self, amount: i64) -> String {
        let account = self.active_account(self.test_key(), 1).await;
        let id = crate::id_of(&account);
        self.deposit_credited(&id, amount).await;
        id
    }

    /// The api's `/metrics` exposition.
    pub async fn metrics(&self) -> String {
        crate::text_of(self.client.get(self.url("/metrics"))).await
    }

    pub async fn approve_kyb(&self) {
        businesses::set_kyb(&self.db, &self.business.id, KybStatus::Approved)
            .await
            .unwrap();
    }

    /// Another business on the same database.
    pub async fn other_business(&self, name: &str, kyb: KybStatus) -> IssuedBusiness {
        businesses::create(&self.db, &self.cipher(), name, kyb)
            .await
            .expect("business")
    }

    /// Rotates the business's test-mode webhook secret with a day's overlap, as the CLI does:
    /// the new secret (the old one still signs for that day).
    pub async fn rotate_test_webhook_secret(&self) -> String {
        businesses::rotate_webhook_secret(
            &self.db,
            &self.cipher(),
            &self.business.id,
            Mode::Test,
            chrono::Duration::hours(24),
        )
        .await
        .expect("rotate the webhook secret")
        .expect("the business has a test mode")
    }

    /// Sets a business's webhook URL for `mode` (past the CLI's checks, as if set by hand).
    pub async fn set_webhook_url(&self, business_id: &BusinessId, mode: Mode, url: &str) {
        crate::set_webhook_url(&self.db, business_id, mode, url).await;
    }

    /// Records a `virtualaccount.deactivated` event with `data` as a state change does, and wakes
    /// the relay as the API does after such a commit; returns the event's id.
    pub async fn record_event(
        &self,
        business_id: &BusinessId,
        mode: Mode,
        data: &Value,
    ) -> EventId {
        let id = crate::record_event(&self.db, business_id, mode, data).await;
        self.relay.kick();
        id
    }
}

/// A deposit as its bank's notification reports it (for [`TestApp::bank_deposit`]): the
/// reference and amount, when it was paid, who sent it from which bank, and its narration.
#[derive(Debug, Clone)]
pub struct BankDeposit<'a> {
    pub reference: &'a str,
    pub amount: i64,
    pub at: chrono::DateTime<chrono::Utc>,
    pub sender: &'a str,
    pub bank: &'a str,
    pub narration: &'a str,
}

impl<'a> BankDeposit<'a> {
    /// Paid now by Bola Ade from Zenith Bank, "Invoice".
    pub fn new(reference: &'a str, amount: i64) -> Self {
        BankDeposit {
            reference,
            amount,
            at: chrono::Utc::now(),
            sender: "Bola Ade",
            bank: "Zenith Bank",
            narration: "Invoice",
        }
    }

    pub fn at(self, at: chrono::DateTime<chrono::Utc>) -> Self {
        BankDeposit { at, ..self }
    }

    pub fn from(self, sender: &'a str, bank: &'a str) -> Self {
        BankDeposit {
            sender,
            bank,
            ..self
        }
    }

    pub fn narration(self, narration: &'a str) -> Self {
        BankDeposit { narration, ..self }
    }
}

impl TestApp {
    /// Sets the test mode's settlement account (GTBank, the same valid NUBAN every time) with
    /// payout `schedule` (`manual` or `daily`), as a business does through the API; returns the
    /// account as answered.
    pub async fn set_settlement_account(&self, schedule: &str) -> Value {
        let number = domain::nuban::account_number("058", 12_345_678).expect("a valid NUBAN");
        let resp = self
            .client
            .put(self.url("/v1/settlement-account"))
            .bearer_auth(self.test_key())
            .json(&json!({"bankCode": "058", "accountNumber": number, "schedule": schedule}))
            .send()
            .await
            .expect("the api answers");
        assert_eq!(resp.status().as_u16(), 200, "the settlement account is set");
        resp.json().await.expect("JSON")
    }

    /// Records `deposit` into `account` (as the API shows it) as the test bank's notification
    /// is recorded, asserting it is new, and wakes the relay so its webhook goes out.
    pub async fn bank_deposit(&self, account: &Value, deposit: BankDeposit<'_>) {
        use store::deposits::{self, Recorded, Source};
        let tx = domain::provider::RemoteTransaction {
            reference: deposit.reference.to_owned(),
            account_number: account["accountNumber"]
                .as_str()
                .expect("an account as the API shows it")
                .to_owned(),
            amount: deposit.amount,
            currency: "NGN".into(),
            sender_name: Some(deposit.sender.to_owned()),
            sender_account_number: None,
            sender_bank_name: Some(deposit.bank.to_owned()),
            narration: Some(deposit.narration.to_owned()),
            paid_at: deposit.at,
        };
        let recorded = deposits::record(
            &self.db,
            Mode::Test,
            domain::Bank::TestBank,
            &tx,
            Source::Notification,
            deposit.at,
        )
        .await
        .expect("the deposit is recorded");
        assert!(matches!(recorded, Recorded::New(_)), "{recorded:?}");
        self.relay.kick();
    }
}
