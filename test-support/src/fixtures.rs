//! A migrated database with a business, and the state changes tests set up directly.

use domain::ids::{BusinessId, EventId};
use std::sync::Arc;

use bootstrap::WorkerParts;
use crypto::Cipher;
use domain::{KybStatus, Mode};
use queue::broker::Broker;
use queue::relay::Relay;
use sea_orm::{DatabaseConnection, TransactionTrait};
use sea_orm_migration::MigratorTrait;
use serde_json::Value;
use store::businesses::{self, IssuedBusiness};
use store::events;
use tokio_util::sync::CancellationToken;

/// A migrated database with one business (KYB approved), for tests that run no API.
pub struct Setup {
    pub db: DatabaseConnection,
    pub crypto_key: String,
    pub cipher: Cipher,
    pub business: IssuedBusiness,
}

/// Connects to `url`, migrates, and creates a business; `crypto_key` or a fresh one.
pub async fn setup(url: &str, crypto_key: Option<String>) -> Setup {
    let db = store::connect(url, 20).await.expect("connect");
    migrations::Migrator::up(&db, None).await.expect("migrate");
    let crypto_key = crypto_key.unwrap_or_else(Cipher::generate_key);
    let cipher = Cipher::new(&crypto_key, &[]).expect("cipher");
    let business = businesses::create(&db, &cipher, "Acme Ltd", KybStatus::Approved)
        .await
        .expect("business");
    Setup {
        db,
        crypto_key,
        cipher,
        business,
    }
}

impl Setup {
    /// Sets a business's test-mode webhook URL.
    pub async fn set_url(&self, business_id: &BusinessId, url: &str) {
        set_webhook_url(&self.db, business_id, Mode::Test, url).await;
    }

    /// What a worker runs on over this database: `broker`, `relay`, until `shutdown`.
    pub fn worker_parts(
        &self,
        broker: &Arc<dyn Broker>,
        relay: &Relay,
        shutdown: &CancellationToken,
    ) -> WorkerParts {
        worker_parts(&self.db, &self.crypto_key, broker, relay, shutdown)
    }

    /// Another business, KYB approved.
    pub async fn other_business(&self, name: &str) -> IssuedBusiness {
        businesses::create(&self.db, &self.cipher, name, KybStatus::Approved)
            .await
            .expect("business")
    }

    /// Records a test-mode `virtualaccount.deactivated` event for account `va_{n}`.
    pub async fn record(&self, business_id: &BusinessId, n: usize) -> EventId {
        let data = serde_json::json!({"id": format!("va_{n}"), "status": "deactivated"});
        record_event(&self.db, business_id, Mode::Test, &data).await
    }
}

/// What a worker runs on, as its process opens it: `db`, a cipher of `crypto_key`, `broker` and
/// `relay`, until `shutdown`.
pub fn worker_parts(
    db: &DatabaseConnection,
    crypto_key: &str,
    broker: &Arc<dyn Broker>,
    relay: &Relay,
    shutdown: &CancellationToken,
) -> WorkerParts {
    WorkerParts {
        db: db.clone(),
        cipher: Arc::new(Cipher::new(crypto_key, &[]).expect("cipher")),
        broker: broker.clone(),
        relay: relay.clone(),
        shutdown: shutdown.clone(),
    }
}

/// Sets a business's webhook URL for `mode` (past the CLI's checks, as if set by hand).
pub async fn set_webhook_url(
    db: &DatabaseConnection,
    business_id: &BusinessId,
    mode: Mode,
    url: &str,
) {
    assert!(
        businesses::set_webhook_url(db, business_id, mode, url)
            .await
            .expect("set webhook URL"),
        "no business {business_id}"
    );
}

/// Records a `virtualaccount.deactivated` event with `data`, in its own transaction, as a
/// state change does; returns the event's id.
pub async fn record_event(
    db: &DatabaseConnection,
    business_id: &BusinessId,
    mode: Mode,
    data: &Value,
) -> EventId {
    let txn = db.begin().await.expect("begin");
    let event = events::record(
        &txn,
        business_id,
        mode,
        domain::EventType::VirtualAccountDeactivated,
        data,
        domain::time::now(),
    )
    .await
    .expect("record event");
    txn.commit().await.expect("commit");
    event.id
}
