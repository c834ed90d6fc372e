//! Test harness: the real app on 127.0.0.1:0 against a fresh database of its own — a temporary
//! SQLite file always, and a fresh PostgreSQL database when TEST_DATABASE_URL is set (CI sets it;
//! with CI set and no URL, PostgreSQL tests fail instead of skipping).

#![allow(dead_code)]

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

use api::AppState;
use domain::KybStatus;
use ops::config::Config;
use sea_orm::{ConnectionTrait, DatabaseConnection};
use serde_json::{Value, json};
use shared::crypto::Cipher;
use shared::db::businesses::{self, IssuedBusiness};
use shared::queue::{Broker, MemoryBroker, RabbitBroker};
use shared::relay::Relay;
use tokio_util::sync::CancellationToken;

#[derive(Clone, Debug)]
pub enum Backend {
    Sqlite,
    Postgres(String),
}

impl Backend {
    /// PostgreSQL when TEST_DATABASE_URL is set; a failure under CI when it is not.
    pub fn postgres() -> Option<Backend> {
        match std::env::var("TEST_DATABASE_URL") {
            Ok(url) if !url.is_empty() => Some(Backend::Postgres(url)),
            _ if std::env::var_os("CI").is_some() => {
                panic!("CI is set but TEST_DATABASE_URL is not: PostgreSQL tests must run in CI")
            }
            _ => {
                eprintln!("skipped: TEST_DATABASE_URL is not set, PostgreSQL variant not run");
                None
            }
        }
    }
}

/// Runs each named async test `fn name(backend: Backend)` on SQLite and on PostgreSQL.
#[macro_export]
macro_rules! on_both_databases {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn sqlite() {
                    super::$name($crate::common::Backend::Sqlite).await
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn postgres() {
                    if let Some(backend) = $crate::common::Backend::postgres() {
                        super::$name(backend).await
                    }
                }
            }
        )*
    };
}

/// A fresh database that is dropped again when the test ends.
pub struct TestDb {
    pub url: String,
    pub backend: Backend,
    _dir: Option<tempfile::TempDir>,
    pg_name: Option<(String, String)>,
}

impl TestDb {
    pub async fn new(backend: &Backend) -> TestDb {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("temp dir");
                let url = format!(
                    "sqlite://{}?mode=rwc",
                    dir.path().join("vas.sqlite").display()
                );
                TestDb {
                    url,
                    backend: backend.clone(),
                    _dir: Some(dir),
                    pg_name: None,
                }
            }
            Backend::Postgres(admin_url) => {
                let name = format!("vas_test_{}", ulid::Ulid::new().to_string().to_lowercase());
                let admin = sea_orm::Database::connect(admin_url.as_str())
                    .await
                    .expect("connect to TEST_DATABASE_URL");
                admin
                    .execute_unprepared(&format!("CREATE DATABASE {name}"))
                    .await
                    .expect("create test database");
                admin.close().await.ok();
                let mut url = url::Url::parse(admin_url).expect("TEST_DATABASE_URL is a URL");
                url.set_path(&format!("/{name}"));
                TestDb {
                    url: url.to_string(),
                    backend: backend.clone(),
                    _dir: None,
                    pg_name: Some((admin_url.clone(), name)),
                }
            }
        }
    }

    /// The SQLite file (and its WAL) or a `pg_dump` of the database: everything stored, as bytes.
    pub fn raw_contents(&self) -> Vec<u8> {
        match (&self.backend, &self._dir) {
            (Backend::Sqlite, Some(dir)) => {
                let mut bytes = Vec::new();
                for entry in std::fs::read_dir(dir.path()).expect("read temp dir") {
                    bytes.extend(std::fs::read(entry.expect("entry").path()).unwrap_or_default());
                }
                bytes
            }
            _ => {
                let out = std::process::Command::new("pg_dump")
                    .arg("--data-only")
                    .arg(&self.url)
                    .output()
                    .expect("pg_dump runs");
                assert!(
                    out.status.success(),
                    "pg_dump failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                out.stdout
            }
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some((admin_url, name)) = self.pg_name.take() {
            // Drop runs outside async: a short-lived runtime on its own thread drops the database.
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                rt.block_on(async {
                    if let Ok(admin) = sea_orm::Database::connect(admin_url.as_str()).await {
                        let _ = admin
                            .execute_unprepared(&format!(
                                "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
                            ))
                            .await;
                        admin.close().await.ok();
                    }
                });
            })
            .join();
        }
    }
}

pub struct TestApp {
    pub base: String,
    pub addr: SocketAddr,
    pub client: reqwest::Client,
    pub db: DatabaseConnection,
    pub config: Config,
    pub crypto_key: String,
    pub business: IssuedBusiness,
    pub broker: Arc<dyn Broker>,
    pub relay: Relay,
    pub sandbox_url: String,
    /// Cancelled when the app is dropped: stops the relay and any worker.
    pub shutdown: CancellationToken,
    /// The RabbitMQ URL and prefix to delete when the test ends.
    pub rabbit: Option<(String, String)>,
    pub test_db: Arc<TestDb>,
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.shutdown.cancel();
        if let Some((url, prefix)) = self.rabbit.take() {
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                rt.block_on(shared::queue::delete_topology(&url, &prefix));
            })
            .join();
        }
    }
}

pub fn test_config(url: &str, crypto_key: &str) -> Config {
    let mut config = Config::default();
    config.database.url = Some(url.to_owned());
    config.database.max_connections = 10;
    config.crypto.key = Some(crypto_key.to_owned());
    // Tests approve KYB and expect the next request to see it.
    config.http.auth_cache_secs = 0;
    config.http.bind = "127.0.0.1:0".parse().unwrap();
    config
}

pub async fn spawn_app(backend: Backend) -> TestApp {
    spawn_app_with(backend, |_| {}).await
}

pub async fn spawn_app_with(backend: Backend, tweak: impl FnOnce(&mut Config)) -> TestApp {
    capture_logs();
    let test_db = Arc::new(TestDb::new(&backend).await);
    let crypto_key = Cipher::generate_key();
    let mut config = test_config(&test_db.url, &crypto_key);
    config.sandbox.activation_delay_secs = 1;
    config.provisioning.initial_poll_secs = 1;
    config.provisioning.max_poll_secs = 2;
    tweak(&mut config);
    let db = shared::db::connect(&test_db.url, config.database.max_connections)
        .await
        .expect("connect");
    shared::bootstrap::migrate(&db).await.expect("migrate");
    let cipher = Cipher::new(&crypto_key, &[]).unwrap();
    let business = businesses::create(&db, &cipher, "Acme Ltd", KybStatus::Pending)
        .await
        .expect("business");

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let sandbox_url = match &config.sandbox.url {
        Some(url) => url.clone(),
        None => {
            let mut sandbox = config.sandbox.clone();
            sandbox.notify_url = Some(format!("http://{addr}"));
            let sandbox_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let timeouts = config.http.server_timeouts();
            let sandbox_addr = provider_sandbox::spawn(sandbox, sandbox_listener, timeouts)
                .await
                .unwrap();
            format!("http://{sandbox_addr}")
        }
    };
    config.sandbox.url = Some(sandbox_url.clone());

    let (broker, rabbit) = test_broker(&backend).await;
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

/// On PostgreSQL with TEST_AMQP_URL set: RabbitMQ under a prefix of its own (deleted when the
/// test ends). Otherwise the in-process broker.
async fn test_broker(backend: &Backend) -> (Arc<dyn Broker>, Option<(String, String)>) {
    if let Backend::Postgres(_) = backend {
        match std::env::var("TEST_AMQP_URL") {
            Ok(url) if !url.is_empty() => {
                let prefix = format!("t{}", ulid::Ulid::new().to_string().to_lowercase());
                let broker = RabbitBroker::connect(&url, &prefix)
                    .await
                    .expect("connect to TEST_AMQP_URL");
                broker.declare().await.expect("declare topology");
                return (Arc::new(broker), Some((url, prefix)));
            }
            _ if std::env::var_os("CI").is_some() => {
                panic!("CI is set but TEST_AMQP_URL is not: RabbitMQ tests must run in CI")
            }
            _ => eprintln!(
                "TEST_AMQP_URL is not set: the PostgreSQL variant uses the in-process queue"
            ),
        }
    }
    let broker = MemoryBroker::new();
    broker.declare().await.unwrap();
    (Arc::new(broker), None)
}

fn serve_on(
    listener: tokio::net::TcpListener,
    db: &DatabaseConnection,
    config: &Config,
    relay: Relay,
) {
    let cipher = Arc::new(Cipher::new(config.crypto.key.as_deref().unwrap(), &[]).unwrap());
    let state = AppState::new(db.clone(), cipher, config.clone(), relay);
    // The production server (its time limits, the peer address for handlers), never stopped.
    tokio::spawn(api::runtime::serve(
        state,
        listener,
        CancellationToken::new(),
    ));
}

/// Starts one more API instance on the same database (as another `api serve` process would be).
pub async fn start_instance(app: &TestApp) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    serve_on(listener, &app.db, &app.config, app.relay.clone());
    addr
}

/// Runs a worker-recheck consumer in this process until `stop`.
pub fn start_recheck_worker(app: &TestApp, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    let (config, db, broker, relay) = (
        app.config.clone(),
        app.db.clone(),
        app.broker.clone(),
        app.relay.clone(),
    );
    tokio::spawn(async move { worker_recheck::run_with(&config, db, broker, relay, stop).await })
}

/// Runs a worker-provisioning consumer in this process until the app is dropped (or `stop`).
pub fn start_provisioning_worker(
    app: &TestApp,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let cipher = Arc::new(Cipher::new(&app.crypto_key, &[]).unwrap());
    let (config, db, broker, relay) = (
        app.config.clone(),
        app.db.clone(),
        app.broker.clone(),
        app.relay.clone(),
    );
    tokio::spawn(async move {
        worker_provisioning::run_with(&config, db, cipher, broker, relay, stop).await
    })
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

    /// POST /v1/virtual-accounts with the test key.
    pub async fn create(
        &self,
        key: &str,
        idempotency_key: &str,
        body: &Value,
    ) -> reqwest::Response {
        self.create_at(&self.base, key, idempotency_key, body).await
    }

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

    pub async fn post(&self, key: &str, path: &str, body: Option<&Value>) -> reqwest::Response {
        let mut req = self.client.post(self.url(path)).bearer_auth(key);
        if let Some(body) = body {
            req = req.json(body);
        }
        req.send().await.expect("request sent")
    }

    pub async fn approve_kyb(&self) {
        businesses::set_kyb(&self.db, &self.business.id, KybStatus::Approved)
            .await
            .unwrap();
    }

    /// Runs a scalar SQL query (a COUNT) on the test database.
    pub async fn count(&self, sql: &str) -> i64 {
        let backend = self.db.get_database_backend();
        let row = self
            .db
            .query_one_raw(sea_orm::Statement::from_string(backend, sql.to_owned()))
            .await
            .unwrap()
            .unwrap();
        row.try_get_by_index::<i64>(0).unwrap()
    }
}

/// A valid create body; `n` makes the customer unique.
pub fn account_body(n: u32, bank: &str) -> Value {
    json!({
        "customerName": format!("Ada Obi {n}"),
        "customerEmail": format!("ada{n}@example.com"),
        "customerPhone": "08031234567",
        "customerBvn": format!("{:011}", 22_200_000_000u64 + u64::from(n)),
        "preferredBank": bank,
        "customerReference": format!("user-{n}"),
    })
}

/// Every log line of this test binary, for secrecy checks.
pub fn captured_logs() -> String {
    String::from_utf8_lossy(&LOGS.get_or_init(Default::default).lock().unwrap()).into_owned()
}

static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();

#[derive(Clone)]
struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture_logs() {
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| {
        let buffer = LogBuffer(LOGS.get_or_init(Default::default).clone());
        let _ = tracing_subscriber::fmt()
            .with_env_filter("debug")
            .with_ansi(false)
            .with_writer(move || buffer.clone())
            .try_init();
    });
}

/// Runs a worker-webhooks consumer in this process until the app is dropped (or `stop`).
pub fn start_webhooks_worker(
    app: &TestApp,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let cipher = Arc::new(Cipher::new(&app.crypto_key, &[]).unwrap());
    let (config, db, broker, relay) = (
        app.config.clone(),
        app.db.clone(),
        app.broker.clone(),
        app.relay.clone(),
    );
    tokio::spawn(async move {
        worker_webhooks::run_with(&config, db, cipher, broker, relay, stop).await
    })
}
