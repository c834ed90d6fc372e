//! Findings of the security review about secrets and money:
//! idempotency digests that cannot be brute-forced, deposits credited by the account's state
//! when the money was paid, conflicting second reports kept for operators, notifications stored
//! once, and creation stamps by the database's clock.

use std::time::Duration;

use chrono::{DateTime, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use test_support::{Backend, TestApp, account_body, captured_logs, json, spawn_app, store};

test_support::on_both_databases!(
    idempotency_rows_hold_no_brute_forceable_hash,
    a_deposit_follows_the_account_state_when_it_was_paid,
    a_transaction_reported_again_with_other_content_is_kept_as_a_conflict,
    a_repeated_notification_body_is_stored_once,
    creation_stamps_follow_the_database_clock,
    a_deposit_above_the_maximum_is_kept_as_invalid_and_never_credited,
    a_credit_past_the_64_bit_limit_is_refused_and_the_balance_stays_an_integer,
);

fn signed_notification(
    app: &TestApp,
    account_number: &str,
    reference: &str,
    amount: i64,
    paid_at: &str,
) -> (String, String) {
    let body = json!({"event": "transfer.received", "data": {
        "reference": reference, "accountNumber": account_number, "amount": amount,
        "currency": "NGN", "senderName": "Bola Ade", "senderAccountNumber": "0011223344",
        "senderBankName": "GTBank", "narration": "invoice 7", "paidAt": paid_at}})
    .to_string();
    let signature = provider_sandbox::sign(&app.config.sandbox.secret, body.as_bytes());
    (body, signature)
}

async fn notify(app: &TestApp, body: &str, signature: &str) -> Value {
    let resp = app
        .client
        .post(app.url("/providers/test-bank/notifications"))
        .header("content-type", "application/json")
        .header("X-Provider-Signature", signature)
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    json(resp).await
}

async fn deposits_of(app: &TestApp, account_id: &str) -> Vec<Value> {
    let list = json(
        app.get(
            app.test_key(),
            &format!("/v1/virtual-accounts/{account_id}/deposits"),
        )
        .await,
    )
    .await;
    list["data"].as_array().unwrap().clone()
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The stored digest of a create body is keyed: a database copy plus the account's other fields
/// does not give the BVN back by trying the 11-digit numbers. A row stored before the upgrade
/// (a plain SHA-256) still replays until it expires.
async fn idempotency_rows_hold_no_brute_forceable_hash(backend: Backend) {
    let app = spawn_app(backend).await;
    let body = account_body(1, "test-bank");
    let first = app.create(app.test_key(), "key-1", &body).await;
    assert_eq!(first.status(), StatusCode::CREATED);
    let stored = store::idempotency_request_hash(&app.db, "key-1").await;
    // What an attacker would compute for the right guess of the identity number.
    let plain = hex::encode(Sha256::digest(body.to_string().as_bytes()));
    assert_ne!(
        stored, plain,
        "a plain SHA-256 of the body is brute-forceable"
    );
    assert!(stored.starts_with("d1:"), "{stored}");
    assert!(!stored.contains(body["customerBvn"].as_str().unwrap()));

    // The replay still matches, and another body is still refused.
    let replay = app.create(app.test_key(), "key-1", &body).await;
    assert_eq!(replay.status(), StatusCode::CREATED);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let other = app
        .create(app.test_key(), "key-1", &account_body(2, "test-bank"))
        .await;
    assert_eq!(other.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(json(other).await["code"], "idempotency_key_reused");

    // A key written before keyed digests (plain SHA-256) replays until it is purged.
    store::set_idempotency_request_hash(&app.db, "key-1", &plain).await;
    let legacy = app.create(app.test_key(), "key-1", &body).await;
    assert_eq!(legacy.status(), StatusCode::CREATED);
    assert_eq!(legacy.headers()["idempotent-replayed"], "true");
}

/// Money paid while the account was active is credited even when it is recorded after the
/// deactivation (a recheck, a bank's late retry); money paid after it is flagged.
async fn a_deposit_follows_the_account_state_when_it_was_paid(backend: Backend) {
    let app = spawn_app(backend).await;
    let account = app.active_account(app.test_key(), 1).await;
    let id = account["id"].as_str().unwrap();
    let number = account["accountNumber"].as_str().unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let deactivated = json(app.deactivate(app.test_key(), id).await).await;
    let at: DateTime<Utc> = deactivated["deactivatedAt"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();

    let (before, signed) = signed_notification(
        &app,
        number,
        "txn-before",
        4200,
        &rfc3339(at - chrono::Duration::milliseconds(500)),
    );
    assert_eq!(notify(&app, &before, &signed).await["outcome"], "recorded");
    let (after, signed) = signed_notification(
        &app,
        number,
        "txn-after",
        4300,
        &rfc3339(at + chrono::Duration::seconds(1)),
    );
    assert_eq!(notify(&app, &after, &signed).await["outcome"], "recorded");

    let listed = deposits_of(&app, id).await;
    let status_of = |reference: &str| {
        listed
            .iter()
            .find(|d| d["providerReference"] == reference)
            .unwrap_or_else(|| panic!("{reference} in {listed:?}"))["status"]
            .clone()
    };
    assert_eq!(status_of("txn-before"), "credited", "paid while active");
    assert_eq!(status_of("txn-after"), "flagged", "paid after deactivation");
    assert_eq!(store::count_deposit_events(&app.db).await, (1, 1));
}

/// The same provider reference with another amount: the first report stands, the second is
/// kept for operators, counted in a metric and logged as an error without personal data.
async fn a_transaction_reported_again_with_other_content_is_kept_as_a_conflict(backend: Backend) {
    let app = spawn_app(backend).await;
    let account = app.active_account(app.test_key(), 1).await;
    let id = account["id"].as_str().unwrap();
    let number = account["accountNumber"].as_str().unwrap();
    let paid = rfc3339(Utc::now());
    let (first, signed) = signed_notification(&app, number, "txn-twice", 2500, &paid);
    assert_eq!(notify(&app, &first, &signed).await["outcome"], "recorded");
    let (second, signed) = signed_notification(&app, number, "txn-twice", 990_000, &paid);
    assert_eq!(notify(&app, &second, &signed).await["outcome"], "duplicate");
    // An identical report under the same reference (another body: other narration) is no conflict.
    let (same, _) = signed_notification(&app, number, "txn-twice", 2500, &paid);
    let same = same.replace("invoice 7", "invoice 7 (retry)");
    let signed = provider_sandbox::sign(&app.config.sandbox.secret, same.as_bytes());
    assert_eq!(notify(&app, &same, &signed).await["outcome"], "duplicate");

    let listed = deposits_of(&app, id).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["amount"], 2500, "the first report stands");
    assert_eq!(
        store::count_deposit_conflicts(&app.db, "txn-twice", "990000").await,
        1
    );
    let metrics = app.metrics().await;
    assert!(
        metrics.contains("deposit_conflicts_total{bank=\"test-bank\"}"),
        "{metrics}"
    );
    let logs = captured_logs();
    let line = logs
        .lines()
        .find(|l| l.contains("reported again with other content") && l.contains("txn-twice"))
        .unwrap_or_else(|| panic!("no error line in the logs"));
    assert!(line.contains("ERROR"), "{line}");
    assert!(
        !line.contains("Bola Ade") && !line.contains(number),
        "{line}"
    );
}

/// A bank's retry of the same body is stored once, whatever it held.
async fn a_repeated_notification_body_is_stored_once(backend: Backend) {
    let app = spawn_app(backend).await;
    let account = app.active_account(app.test_key(), 1).await;
    let number = account["accountNumber"].as_str().unwrap();
    let (body, signed) = signed_notification(&app, number, "txn-retry", 700, &rfc3339(Utc::now()));
    let first = notify(&app, &body, &signed).await;
    assert_eq!(first["outcome"], "recorded");
    for _ in 0..3 {
        let again = notify(&app, &body, &signed).await;
        assert_eq!(again["id"], first["id"], "the first stored notification");
        assert_eq!(again["outcome"], "recorded");
    }
    assert_eq!(store::count_notifications(&app.db).await, 1);
    // Another bank (or mode) with the same body is another notification.
    let other = app
        .client
        .post(app.url("/providers/wema-bank/notifications"))
        .header("content-type", "application/json")
        .header("X-Provider-Signature", &signed)
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), StatusCode::OK);
    assert_eq!(store::count_notifications(&app.db).await, 2);
}

/// On PostgreSQL the creation stamp (and so the rolling-hour count) is the database's time,
/// whatever the api's clock says: here the database's clock is made to run two hours ahead
/// (a function shadowing `clock_timestamp()` for new sessions) and an api instance opened after
/// that stamps by it.
async fn creation_stamps_follow_the_database_clock(backend: Backend) {
    if !matches!(backend, Backend::Postgres(_)) {
        // SQLite serves one process: its clock is the database's. Nothing to compare.
        return;
    }
    let app = spawn_app(backend).await;
    let name = app.test_db.url.rsplit('/').next().unwrap().to_owned();
    store::shift_database_clock(&app.db, &name, 2).await;
    let db = ::store::connect(&app.test_db.url, 2).await.unwrap();
    let cipher = std::sync::Arc::new(crypto::Cipher::new(&app.crypto_key, &[]).unwrap());
    let state = api::AppState::new(db, cipher, app.config.clone(), app.relay.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, api::router(state)).await });

    let resp = app
        .client
        .post(format!("http://{addr}/v1/virtual-accounts"))
        .bearer_auth(app.test_key())
        .header("Idempotency-Key", "clock-1")
        .json(&account_body(1, "test-bank"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let created = json(resp).await;
    let stamp: DateTime<Utc> = created["createdAt"].as_str().unwrap().parse().unwrap();
    let ahead = stamp - Utc::now();
    assert!(
        ahead > chrono::Duration::minutes(110) && ahead < chrono::Duration::minutes(130),
        "createdAt {stamp} should follow the database's clock, two hours ahead"
    );
}

async fn available(app: &TestApp) -> Value {
    let resp = app.get(app.test_key(), "/v1/balance").await;
    assert_eq!(resp.status(), StatusCode::OK);
    json(resp).await["available"].clone()
}

/// A bank reporting a single deposit above `VAS_LIMITS__MAX_DEPOSIT` gets 200
/// (the notification is stored), and the deposit is kept as `invalid` for operators: no
/// deposit, no event, no credit. The largest accepted amount is credited as usual.
async fn a_deposit_above_the_maximum_is_kept_as_invalid_and_never_credited(backend: Backend) {
    let app = spawn_app(backend).await;
    let max = app.config.limits.max_deposit;
    assert_eq!(max, 10_000_000_000, "the default: NGN 100,000,000");
    let account = app.active_account(app.test_key(), 1).await;
    let id = account["id"].as_str().unwrap();
    let number = account["accountNumber"].as_str().unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;

    let (body, signature) =
        signed_notification(&app, number, "tx-huge", max + 1, &rfc3339(Utc::now()));
    let receipt = notify(&app, &body, &signature).await;
    assert_eq!(receipt["outcome"], "invalid", "{receipt}");
    assert!(deposits_of(&app, id).await.is_empty());
    assert_eq!(available(&app).await, 0);
    assert_eq!(
        store::count_notifications_with_outcome(&app.db, "invalid").await,
        1,
        "kept for operators"
    );
    assert_eq!(
        store::count_events_of_type(&app.db, "deposit.received").await,
        0
    );
    assert!(store::ledger_verifies(&app.db).await.ok);

    let (body, signature) = signed_notification(&app, number, "tx-max", max, &rfc3339(Utc::now()));
    let receipt = notify(&app, &body, &signature).await;
    assert_eq!(receipt["outcome"], "recorded", "{receipt}");
    assert_eq!(available(&app).await, max);
}

/// Sums are 64-bit integers with a checked add on both databases: a credit that would take a
/// balance past i64::MAX is refused whole (kept as `invalid`, answered 200), and the balance
/// stays the exact integer it was (SQLite would otherwise store a float).
async fn a_credit_past_the_64_bit_limit_is_refused_and_the_balance_stays_an_integer(
    backend: Backend,
) {
    let app = spawn_app(backend).await;
    let account = app.active_account(app.test_key(), 1).await;
    let id = account["id"].as_str().unwrap();
    let number = account["accountNumber"].as_str().unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (body, signature) = signed_notification(&app, number, "tx-1", 1_000, &rfc3339(Utc::now()));
    assert_eq!(notify(&app, &body, &signature).await["outcome"], "recorded");
    // A balance near the limit (reached in no other way within a test).
    let near = i64::MAX - 807;
    store::set_balance(&app.db, &app.business.id, "test", near).await;

    let (body, signature) = signed_notification(&app, number, "tx-2", 1_000, &rfc3339(Utc::now()));
    let receipt = notify(&app, &body, &signature).await;
    assert_eq!(receipt["outcome"], "invalid", "{receipt}");
    assert_eq!(available(&app).await.as_i64(), Some(near));
    assert_eq!(
        deposits_of(&app, id).await.len(),
        1,
        "nothing of it was recorded"
    );
    assert_eq!(
        store::count_notifications_with_outcome(&app.db, "invalid").await,
        1
    );
}
