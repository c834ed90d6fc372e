//! Payouts at the sandbox as the service sees them: name enquiry, transfers with deterministic
//! outcomes, signed `transfer.*` notifications, and one transfer per reference however often it
//! is asked for.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use domain::nuban;
use ops::config::SandboxConfig;
use provider_sandbox::{sign, spawn};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::net::TcpListener;

const KEY: &str = "test-sandbox-key";
const SECRET: &str = "test-notification-secret";

type Seen = Arc<Mutex<Vec<Value>>>;

/// A local receiver standing in for the service: keeps every correctly signed notification.
async fn receiver() -> (String, Seen) {
    let seen: Seen = Arc::default();
    async fn receive(State(seen): State<Seen>, headers: HeaderMap, body: Bytes) -> StatusCode {
        let signature = headers
            .get("x-provider-signature")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        assert_eq!(signature, sign(SECRET, &body), "signed with the secret");
        seen.lock()
            .unwrap()
            .push(serde_json::from_slice(&body).unwrap());
        StatusCode::OK
    }
    let app = Router::new()
        .route("/providers/{bank}/notifications", post(receive))
        .with_state(seen.clone());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}"), seen)
}

async fn start(notify_url: &str) -> String {
    let config = SandboxConfig {
        key: KEY.into(),
        secret: SECRET.into(),
        notify_url: Some(notify_url.to_owned()),
        transfer_delay_secs: 1,
        ..SandboxConfig::default()
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = spawn(config, listener, ops::http::Timeouts::default())
        .await
        .unwrap();
    format!("http://{address}")
}

async fn call(request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let response = request.bearer_auth(KEY).send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

fn transfer(reference: &str, amount: i64) -> Value {
    json!({"reference": reference, "amount": amount, "currency": "NGN", "bankCode": "058",
           "accountNumber": nuban::account_number("058", 123_456_789).unwrap(),
           "accountName": "ACME LTD", "narration": "payout"})
}

fn events_for(seen: &Seen, reference: &str) -> Vec<String> {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|n| n["data"]["reference"] == reference)
        .map(|n| n["event"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn name_enquiry_answers_a_stable_name_or_404() {
    let (notify, _) = receiver().await;
    let base = start(&notify).await;
    let http = reqwest::Client::new();
    let number = nuban::account_number("058", 123_456_789).unwrap();
    let url = format!("{base}/wema-bank/banks/058/accounts/{number}");
    let (status, first) = call(http.get(&url)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(first["accountNumber"], number.as_str());
    assert!(!first["accountName"].as_str().unwrap().is_empty());
    assert_eq!(call(http.get(&url)).await.1, first, "deterministic");

    let unknown = nuban::account_number("058", 1_234).unwrap();
    let (status, body) =
        call(http.get(format!("{base}/wema-bank/banks/058/accounts/{unknown}"))).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["code"], "account_not_found");
    let (status, _) = call(http.get(format!("{base}/wema-bank/banks/057/accounts/{number}"))).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "another bank's check digit");
}

#[tokio::test]
async fn transfers_end_by_their_amount_and_are_notified() {
    let (notify, seen) = receiver().await;
    let base = start(&notify).await;
    let http = reqwest::Client::new();
    for (reference, amount) in [
        ("po_ok", 100_000),
        ("po_fail", 100_001),
        ("po_rev", 100_002),
        ("po_lost", 100_003),
    ] {
        let (status, body) = call(
            http.post(format!("{base}/wema-bank/transfers"))
                .json(&transfer(reference, amount)),
        )
        .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        assert_eq!(body["status"], "processing");
    }
    let started = Instant::now();
    while events_for(&seen, "po_rev").len() < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{:?}",
            seen.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(events_for(&seen, "po_ok"), ["transfer.succeeded"]);
    assert_eq!(events_for(&seen, "po_fail"), ["transfer.failed"]);
    assert_eq!(
        events_for(&seen, "po_rev"),
        ["transfer.succeeded", "transfer.reversed"]
    );
    assert!(
        events_for(&seen, "po_lost").is_empty(),
        "the 03 notification is lost"
    );

    let get = |reference: &str| call(http.get(format!("{base}/wema-bank/transfers/{reference}")));
    let (_, ok) = get("po_ok").await;
    assert_eq!(ok["status"], "succeeded");
    assert_eq!(ok["sessionId"].as_str().map(str::len), Some(30));
    let (_, failed) = get("po_fail").await;
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["failureReason"], "beneficiary account is dormant");
    assert_eq!(get("po_rev").await.1["status"], "reversed");
    assert_eq!(
        get("po_lost").await.1["status"],
        "succeeded",
        "a status query learns it"
    );
    let (status, _) = get("po_never").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "never received");
}

#[tokio::test]
async fn a_reference_is_one_transfer_however_often_it_is_sent() {
    let (notify, _) = receiver().await;
    let base = start(&notify).await;
    let http = reqwest::Client::new();
    for amount in [250_000, 999_999, 250_000] {
        let (status, _) = call(
            http.post(format!("{base}/wema-bank/transfers"))
                .json(&transfer("po_once", amount)),
        )
        .await;
        assert_eq!(status, StatusCode::ACCEPTED);
    }
    let (_, listed) = call(http.get(format!("{base}/control/transfers"))).await;
    let mine: Vec<&Value> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["reference"] == "po_once")
        .collect();
    assert_eq!(mine.len(), 1, "{listed}");
    assert_eq!(mine[0]["requests"], 3);
    assert_eq!(mine[0]["amount"], 250_000, "the first request stands");

    let mut bad = transfer("po_bad", 1000);
    bad["accountNumber"] = json!("0123456789");
    let (status, body) = call(http.post(format!("{base}/wema-bank/transfers")).json(&bad)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["code"], "invalid_transfer");
}
