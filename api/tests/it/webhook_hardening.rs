//! Webhook hardening: an unusable previous secret does not stop deliveries the current
//! one can sign, and every attempt goes to the mode's webhook URL of its moment, each
//! attempt showing where it went.

use std::time::{Duration, Instant};

use crypto::Cipher;
use domain::Mode;
use entities::business_mode;
use reqwest::StatusCode;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, TransactionTrait};
use serde_json::{Value, json};
use store::businesses::{self, webhook_secret_context};
use store::events;
use test_support::{
    Backend, Received, Receiver, Reply, TestApp, captured_logs, spawn_app, spawn_app_with,
    start_webhooks_worker,
};

test_support::on_both_databases!(
    an_undecryptable_previous_secret_does_not_stop_deliveries,
    a_retry_goes_to_the_url_the_business_moved_to,
    a_first_attempt_goes_to_the_url_of_its_moment,
);

/// Shorter than the 30 s a delivery that cannot be signed waits before it is tried again.
const WITHIN: Duration = Duration::from_secs(15);

async fn set_url(app: &TestApp, url: &str) {
    assert!(
        businesses::set_webhook_url(&app.db, &app.business.id, Mode::Test, url)
            .await
            .unwrap()
    );
}

/// Records a test-mode event as any state change does, in its own transaction.
async fn record_event(app: &TestApp, n: u32) -> String {
    let txn = app.db.begin().await.unwrap();
    let event = events::record(
        &txn,
        &app.business.id,
        Mode::Test,
        domain::EventType::VirtualAccountDeactivated,
        &json!({"id": format!("va_{n}"), "status": "deactivated"}),
        domain::time::now(),
    )
    .await
    .unwrap();
    txn.commit().await.unwrap();
    app.relay.kick();
    event.id.into()
}

/// Verified by the `standardwebhooks` crate, not by our code.
fn verifies(secret: &str, request: &Received) -> bool {
    request.verifies(secret)
}

/// `GET /v1/events/{id}`'s first delivery, once `done` says it is what the test waits for.
async fn delivery_when(app: &TestApp, event_id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let resp = app
            .get(app.test_key(), &format!("/v1/events/{event_id}"))
            .await;
        assert_eq!(resp.status(), StatusCode::OK);
        let event: Value = resp.json().await.unwrap();
        let delivery = event["deliveries"][0].clone();
        if done(&delivery) {
            return delivery;
        }
        assert!(started.elapsed() < WITHIN, "delivery stuck: {delivery}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn attempts(delivery: &Value) -> Vec<(Option<String>, i64)> {
    delivery["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["url"].as_str().map(str::to_owned),
                a["statusCode"].as_i64().unwrap(),
            )
        })
        .collect()
}

// --- item 14 ---------------------------------------------------------------------------------

async fn an_undecryptable_previous_secret_does_not_stop_deliveries(backend: Backend) {
    let app = spawn_app(backend).await;
    let receiver = Receiver::start().await;
    set_url(&app, &receiver.url).await;
    // A previous secret in its overlap, sealed under a key this deployment does not have (a
    // key retired too early, a row restored from another environment).
    let foreign = Cipher::new(&Cipher::generate_key(), &[]).unwrap();
    let stranger = domain::keys::generate_webhook_secret();
    let sealed = foreign.encrypt(
        &stranger,
        &webhook_secret_context(&app.business.id, Mode::Test),
    );
    business_mode::Entity::update_many()
        .col_expr(
            business_mode::Column::PreviousWebhookSecretEnc,
            Some(sealed).into(),
        )
        .col_expr(
            business_mode::Column::PreviousSecretExpiresAt,
            Some(domain::time::now() + chrono::Duration::hours(24)).into(),
        )
        .filter(business_mode::Column::BusinessId.eq(app.business.id.as_str()))
        .filter(business_mode::Column::Mode.eq("test"))
        .exec(&app.db)
        .await
        .unwrap();
    let _worker = start_webhooks_worker(&app, app.shutdown.clone());

    let event_id = record_event(&app, 1).await;
    let received = receiver.wait_for(1, WITHIN).await.remove(0);
    assert_eq!(received.webhook_id(), event_id);
    let current = &app.business.test.webhook_secret;
    assert!(
        verifies(current, &received),
        "signed with the current secret"
    );
    assert_eq!(
        received.header("webhook-signature").split(' ').count(),
        1,
        "only the usable secret signs"
    );
    let delivery = delivery_when(&app, &event_id, |d| d["status"] == "succeeded").await;
    assert_eq!(attempts(&delivery), [(Some(receiver.url.clone()), 200)]);

    // Operators are told, without the secret.
    let logs = captured_logs();
    let line = logs
        .lines()
        .find(|l| {
            l.contains("a webhook secret is unusable") && l.contains(app.business.id.as_str())
        })
        .unwrap_or_else(|| panic!("no log line about the unusable secret"));
    assert!(line.contains("previous"), "{line}");
    for secret in [current.as_str(), stranger.as_str()] {
        let body = secret.trim_start_matches("whsec_");
        assert!(!logs.contains(body), "a webhook secret reached the logs");
    }
}

// --- item 15 ---------------------------------------------------------------------------------

async fn a_retry_goes_to_the_url_the_business_moved_to(backend: Backend) {
    // Long enough to move the endpoint between the first attempt and the retry.
    let app = spawn_app_with(backend, |c| c.webhooks.retry_schedule = vec![2]).await;
    let old = Receiver::start().await;
    old.set_default(Reply::status(500));
    let new = Receiver::start().await;
    set_url(&app, &old.url).await;
    let _worker = start_webhooks_worker(&app, app.shutdown.clone());

    let event_id = record_event(&app, 1).await;
    let first = delivery_when(&app, &event_id, |d| {
        d["attempts"].as_array().is_some_and(|a| a.len() == 1)
    })
    .await;
    assert_eq!(attempts(&first), [(Some(old.url.clone()), 500)]);
    // The business lost the old domain and moves.
    set_url(&app, &new.url).await;

    let retried = new.wait_for(1, WITHIN).await.remove(0);
    assert_eq!(retried.webhook_id(), event_id);
    assert!(verifies(&app.business.test.webhook_secret, &retried));
    let delivery = delivery_when(&app, &event_id, |d| d["status"] == "succeeded").await;
    assert_eq!(
        attempts(&delivery),
        [(Some(old.url.clone()), 500), (Some(new.url.clone()), 200)],
        "each attempt keeps the URL it went to"
    );
    assert_eq!(delivery["url"], new.url.as_str());
    assert_eq!(old.count(), 1, "nothing more went to the old endpoint");
}

async fn a_first_attempt_goes_to_the_url_of_its_moment(backend: Backend) {
    let app = spawn_app(backend).await;
    let old = Receiver::start().await;
    let new = Receiver::start().await;
    set_url(&app, &old.url).await;
    // Made while the old URL was set, attempted (no worker was running) after the move.
    let event_id = record_event(&app, 1).await;
    set_url(&app, &new.url).await;
    let _worker = start_webhooks_worker(&app, app.shutdown.clone());

    let received = new.wait_for(1, WITHIN).await.remove(0);
    assert_eq!(received.webhook_id(), event_id);
    let delivery = delivery_when(&app, &event_id, |d| d["status"] == "succeeded").await;
    assert_eq!(attempts(&delivery), [(Some(new.url.clone()), 200)]);
    assert_eq!(delivery["url"], new.url.as_str());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(old.count(), 0);
}
