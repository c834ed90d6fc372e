//! What the worker's tests share: a fresh database (a temporary SQLite file, or a fresh
//! PostgreSQL database when TEST_DATABASE_URL is set), migrated, with one business; events
//! recorded as any state change records them; and the webhook receiver.

#![allow(dead_code)]

pub mod receiver;

use std::path::PathBuf;
use std::process::Command;

use domain::{KybStatus, Mode};
use sea_orm::{ConnectionTrait, DatabaseConnection, TransactionTrait};
use sea_orm_migration::MigratorTrait;
use shared::crypto::Cipher;
use shared::db::businesses::{self, IssuedBusiness};
use shared::db::events;

/// TEST_DATABASE_URL, or None (with a note) when it is unset; under CI it must be set.
pub fn postgres_url() -> Option<String> {
    match std::env::var("TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but TEST_DATABASE_URL is not: PostgreSQL tests must run in CI")
        }
        _ => {
            eprintln!("skipped: TEST_DATABASE_URL is not set, PostgreSQL variant not run");
            None
        }
    }
}

/// TEST_AMQP_URL, or None (with a note) when it is unset; under CI it must be set.
pub fn amqp_url() -> Option<String> {
    match std::env::var("TEST_AMQP_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but TEST_AMQP_URL is not: RabbitMQ tests must run in CI")
        }
        _ => {
            eprintln!("skipped: TEST_AMQP_URL is not set");
            None
        }
    }
}

/// A fresh database, dropped when the test ends.
pub struct TestDb {
    pub url: String,
    _dir: Option<tempfile::TempDir>,
    pg: Option<(String, String)>,
}

impl TestDb {
    /// SQLite at `path` (e.g. a dev data folder's `vas.sqlite`).
    pub fn sqlite_at(path: &std::path::Path) -> TestDb {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        TestDb {
            url: format!("sqlite://{}?mode=rwc", path.display()),
            _dir: None,
            pg: None,
        }
    }

    pub fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().unwrap();
        let mut db = Self::sqlite_at(&dir.path().join("vas.sqlite"));
        db._dir = Some(dir);
        db
    }

    pub async fn postgres(admin_url: &str) -> TestDb {
        let name = format!("vas_whk_{}", ulid::Ulid::new().to_string().to_lowercase());
        let admin = sea_orm::Database::connect(admin_url).await.unwrap();
        admin
            .execute_unprepared(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
        admin.close().await.ok();
        let mut url = url::Url::parse(admin_url).unwrap();
        url.set_path(&format!("/{name}"));
        TestDb {
            url: url.to_string(),
            _dir: None,
            pg: Some((admin_url.to_owned(), name)),
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some((admin_url, name)) = self.pg.take() {
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
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

/// A migrated database with one business.
pub struct Setup {
    pub db: DatabaseConnection,
    pub crypto_key: String,
    pub cipher: Cipher,
    pub business: IssuedBusiness,
}

pub async fn setup(url: &str, crypto_key: Option<String>) -> Setup {
    let db = shared::db::connect(url, 20).await.unwrap();
    migrations::Migrator::up(&db, None).await.unwrap();
    let crypto_key = crypto_key.unwrap_or_else(Cipher::generate_key);
    let cipher = Cipher::new(&crypto_key, &[]).unwrap();
    let business = businesses::create(&db, &cipher, "Acme Ltd", KybStatus::Approved)
        .await
        .unwrap();
    Setup {
        db,
        crypto_key,
        cipher,
        business,
    }
}

impl Setup {
    pub async fn set_url(&self, business_id: &str, url: &str) {
        assert!(
            businesses::set_webhook_url(&self.db, business_id, Mode::Test, url)
                .await
                .unwrap()
        );
    }

    pub async fn other_business(&self, name: &str) -> IssuedBusiness {
        businesses::create(&self.db, &self.cipher, name, KybStatus::Approved)
            .await
            .unwrap()
    }

    /// Records a test-mode event in its own transaction, as a state change does.
    pub async fn record(&self, business_id: &str, n: usize) -> String {
        let txn = self.db.begin().await.unwrap();
        let event = events::record(
            &txn,
            business_id,
            Mode::Test,
            domain::EventType::VirtualAccountDeactivated,
            &serde_json::json!({"id": format!("va_{n}"), "status": "deactivated"}),
            domain::time::now(),
        )
        .await
        .unwrap();
        txn.commit().await.unwrap();
        event.id
    }

    pub async fn count(&self, sql: &str) -> i64 {
        let backend = self.db.get_database_backend();
        self.db
            .query_one_raw(sea_orm::Statement::from_string(backend, sql.to_owned()))
            .await
            .unwrap()
            .unwrap()
            .try_get_by_index::<i64>(0)
            .unwrap()
    }
}

/// The `worker-webhooks` binary with a clean environment in `dir`.
pub fn binary(dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(PathBuf::from(env!("CARGO_BIN_EXE_worker-webhooks")));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .current_dir(dir);
    cmd
}
