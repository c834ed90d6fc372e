//! The sandbox as a caller sees it: started on 127.0.0.1:0 and driven over HTTP.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use domain::nuban;
use ops::config::SandboxConfig;
use provider_sandbox::{Transaction, sign, signed_deposit, spawn};
use serde_json::{Value, json};
use test_support::eventually;

const KEY: &str = "test-sandbox-key";
const SECRET: &str = "test-notification-secret";

fn config() -> SandboxConfig {
    SandboxConfig {
        key: KEY.into(),
        secret: SECRET.into(),
        activation_delay_secs: 1,
        ..SandboxConfig::default()
    }
}

/// A running sandbox and a client that presents the key.
struct Bank {
    base: String,
    http: reqwest::Client,
}

impl Bank {
    async fn start(config: SandboxConfig) -> Bank {
        let (listener, _) = test_support::http::listener().await;
        let address = spawn(config, listener, ops::http::Timeouts::default())
            .await
            .expect("sandbox starts");
        Bank {
            base: format!("http://{address}"),
            http: reqwest::Client::new(),
        }
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> (StatusCode, Value) {
        let response = request.send().await.expect("sandbox answers");
        let status = StatusCode::from_u16(response.status().as_u16()).expect("status");
        let body = response.json().await.unwrap_or(Value::Null);
        (status, body)
    }

    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let url = format!("{}{path}", self.base);
        self.send(self.http.post(url).bearer_auth(KEY).json(&body))
            .await
    }

    /// `GET /readyz`, which needs no key.
    async fn ready(&self) -> (StatusCode, Value) {
        self.send(self.http.get(format!("{}/readyz", self.base)))
            .await
    }

    async fn get(&self, path: &str) -> (StatusCode, Value) {
        let url = format!("{}{path}", self.base);
        self.send(self.http.get(url).bearer_auth(KEY)).await
    }

    async fn open(&self, bank: &str, reference: &str) -> (StatusCode, Value) {
        self.post(
            &format!("/{bank}/accounts"),
            account_body(reference, "22212345678"),
        )
        .await
    }

    async fn deposit(
        &self,
        bank: &str,
        number: &str,
        amount: i64,
        notify: bool,
    ) -> (StatusCode, Value) {
        let body = json!({"bank": bank, "accountNumber": number, "amount": amount,
            "senderName": "Ada Obi", "narration": "rent", "notify": notify});
        self.post("/control/deposits", body).await
    }
}

fn account_body(reference: &str, bvn: &str) -> Value {
    json!({"reference": reference, "accountName": "Acme Ltd/Ada Obi", "customerName": "Ada Obi",
        "customerEmail": "ada@example.com", "customerPhone": "+2348031234567", "bvn": bvn})
}

fn unique(prefix: &str) -> String {
    domain::ids::new_id(prefix)
}

#[tokio::test]
async fn wema_bank_answers_201_with_a_valid_number_and_repeats_it() {
    let bank = Bank::start(config()).await;
    let (status, body) = bank.open("wema-bank", "va_1").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["reference"], "va_1");
    assert_eq!(body["status"], "active");
    let number = body["accountNumber"].as_str().expect("a number").to_owned();
    assert!(nuban::is_valid("035", &number), "{number}");

    let (status, again) = bank.open("wema-bank", "va_1").await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(again["accountNumber"], number.as_str());

    let (status, read) = bank.get("/wema-bank/accounts/va_1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        read,
        json!({"reference": "va_1", "status": "active", "accountNumber": number, "failureReason": null})
    );

    let (status, test_bank) = bank.open("test-bank", "va_2").await;
    assert_eq!(status, StatusCode::CREATED);
    let test_number = test_bank["accountNumber"].as_str().expect("a number");
    assert!(nuban::is_valid("999", test_number), "{test_number}");
}

#[tokio::test]
async fn access_bank_answers_202_then_activates_after_the_delay() {
    let bank = Bank::start(config()).await;
    let started = Instant::now();
    let (status, body) = bank.open("access-bank", "va_a").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    assert_eq!(body, json!({"reference": "va_a", "status": "pending"}));

    let (status, read) = bank.get("/access-bank/accounts/va_a").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(read["status"], "pending");
    assert_eq!(read["accountNumber"], Value::Null);
    let (status, _) = bank.open("access-bank", "va_a").await;
    assert_eq!(
        status,
        StatusCode::ACCEPTED,
        "a repeat while pending is still 202"
    );

    let active = eventually(Duration::from_secs(3), async || {
        let (_, read) = bank.get("/access-bank/accounts/va_a").await;
        if read["status"] == "active" {
            Ok(read)
        } else {
            Err(format!("not active within the delay: {read}"))
        }
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "not before the delay"
    );
    let number = active["accountNumber"].as_str().expect("a number");
    assert!(nuban::is_valid("044", number), "{number}");

    let (status, again) = bank.open("access-bank", "va_a").await;
    assert_eq!(status, StatusCode::CREATED, "a repeat once active is 201");
    assert_eq!(again["accountNumber"], number);
}

#[tokio::test]
async fn zero_delay_still_answers_202_but_is_active_on_the_next_read() {
    let bank = Bank::start(SandboxConfig {
        activation_delay_secs: 0,
        ..config()
    })
    .await;
    let (status, _) = bank.open("titan-trust-bank", "va_t").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (_, read) = bank.get("/titan-trust-bank/accounts/va_t").await;
    assert_eq!(read["status"], "active");
    let number = read["accountNumber"].as_str().expect("a number");
    assert!(nuban::is_valid("102", number), "{number}");
}

#[tokio::test]
async fn identity_starting_99999_is_rejected_and_kept_failed() {
    let bank = Bank::start(config()).await;
    let body = account_body("va_r", "99999012345");
    let (status, answer) = bank.post("/wema-bank/accounts", body.clone()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(answer["code"], "identity_rejected");
    assert!(answer["message"].as_str().is_some_and(|m| !m.is_empty()));

    let (status, again) = bank.post("/wema-bank/accounts", body).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(again["code"], "identity_rejected");

    let (_, read) = bank.get("/wema-bank/accounts/va_r").await;
    assert_eq!(read["status"], "failed");
    assert_eq!(read["accountNumber"], Value::Null);
    assert_eq!(read["failureReason"], answer["message"]);

    let nin = json!({"reference": "va_n", "accountName": "A/B", "customerName": "B",
        "customerEmail": "b@example.com", "customerPhone": "+2348031234567", "nin": "99999000000"});
    let (status, _) = bank.post("/access-bank/accounts", nin).await;
    assert_eq!(
        status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "a NIN is checked too"
    );
}

#[tokio::test]
async fn every_bank_call_needs_the_key_but_healthz_does_not() {
    let bank = Bank::start(config()).await;
    let url = format!("{}/wema-bank/accounts", bank.base);
    let body = account_body("va_k", "22212345678");
    let (status, answer) = bank.send(bank.http.post(&url).json(&body)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(answer["code"], "unauthorized");
    let (status, _) = bank
        .send(bank.http.post(&url).bearer_auth("wrong").json(&body))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let control = format!("{}/control/deposits", bank.base);
    let (status, _) = bank.send(bank.http.post(control).json(&json!({}))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = bank.get("/wema-bank/accounts/va_k").await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "the refused call created nothing"
    );

    let (status, health) = bank
        .send(bank.http.get(format!("{}/healthz", bank.base)))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(health, json!({"status": "ok"}));
    let (status, ready) = bank.ready().await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ready, json!({"status": "ok", "stateFile": "none"}));
}

#[tokio::test]
async fn metrics_count_requests_by_route_template_and_status() {
    let bank = Bank::start(config()).await;
    let (status, _) = bank.open("wema-bank", "va_metrics").await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = bank.get("/wema-bank/accounts/va_metrics_missing").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Public, like /healthz: a Prometheus scraper holds no bank key.
    let response = bank
        .http
        .get(format!("{}/metrics", bank.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = response.text().await.unwrap();
    // One recorder per test process: other tests' requests are counted too, so shapes, not totals.
    for needle in [
        r#"sandbox_requests_total{method="POST",route="/{bank}/accounts",status="201"}"#,
        r#"sandbox_requests_total{method="GET",route="/{bank}/accounts/{reference}",status="404"}"#,
        r#"sandbox_request_duration_seconds_bucket{method="POST",route="/{bank}/accounts""#,
    ] {
        assert!(text.contains(needle), "{needle} missing from /metrics");
    }
    assert!(!text.contains("va_metrics"), "ids never become labels");
}

#[tokio::test]
async fn bad_requests_and_unknown_things_are_refused() {
    let bank = Bank::start(config()).await;
    let (status, answer) = bank.open("gtbank", "va_x").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(answer["code"], "not_found");
    let (status, _) = bank.get("/wema-bank/accounts/va_missing").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = bank
        .post("/wema-bank/accounts/va_missing/close", json!({}))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = bank
        .get("/wema-bank/accounts/va_missing/transactions")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let raw = bank
        .http
        .post(format!("{}/wema-bank/accounts", bank.base))
        .bearer_auth(KEY)
        .header("content-type", "application/json")
        .body("{not json");
    let (status, _) = bank.send(raw).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = bank
        .post("/wema-bank/accounts", json!({"reference": "va_m"}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "missing fields");
    let mut both = account_body("va_b", "22212345678");
    both["nin"] = json!("12345678901");
    let (status, _) = bank.post("/wema-bank/accounts", both).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "bvn and nin together");
}

#[tokio::test]
async fn closing_is_idempotent_and_keeps_the_number() {
    let bank = Bank::start(config()).await;
    let (_, opened) = bank.open("wema-bank", "va_c").await;
    let number = opened["accountNumber"].clone();
    for _ in 0..2 {
        let (status, closed) = bank.post("/wema-bank/accounts/va_c/close", json!({})).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(closed["status"], "closed");
        assert_eq!(closed["accountNumber"], number);
    }
    let (_, read) = bank.get("/wema-bank/accounts/va_c").await;
    assert_eq!(read["status"], "closed");
}

/// A stand-in for the service's notification endpoint: records what arrives, after refusing the
/// first `refuse` attempts with a 500.
#[derive(Clone, Default)]
struct Inbox(Arc<Mutex<InboxState>>);

#[derive(Default)]
struct InboxState {
    refuse: usize,
    attempts: usize,
    received: Vec<(String, HeaderMap, Bytes)>,
}

impl Inbox {
    async fn start(refuse: usize) -> (String, Inbox) {
        let inbox = Inbox::default();
        inbox.0.lock().expect("inbox").refuse = refuse;
        let app = Router::new()
            .route("/providers/{bank}/notifications", post(receive))
            .with_state(inbox.clone());
        let address = test_support::http::serve(app).await;
        (format!("http://{address}"), inbox)
    }

    fn received(&self) -> Vec<(String, HeaderMap, Bytes)> {
        self.0.lock().expect("inbox").received.clone()
    }

    fn attempts(&self) -> usize {
        self.0.lock().expect("inbox").attempts
    }
}

async fn receive(
    State(inbox): State<Inbox>,
    Path(bank): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let mut inbox = inbox.0.lock().expect("inbox");
    inbox.attempts += 1;
    if inbox.attempts <= inbox.refuse {
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    inbox.received.push((bank, headers, body));
    StatusCode::OK
}

#[tokio::test]
async fn deposits_are_listed_and_notified_only_when_asked() {
    let (notify_url, inbox) = Inbox::start(0).await;
    let bank = Bank::start(SandboxConfig {
        notify_url: Some(format!("{notify_url}/")),
        ..config()
    })
    .await;
    let (_, opened) = bank.open("test-bank", "va_d").await;
    let number = opened["accountNumber"].as_str().expect("a number");

    let (status, silent) = bank.deposit("test-bank", number, 5000, false).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{silent}");
    let silent_ref = silent["providerReference"].as_str().expect("reference");
    let (status, loud) = bank.deposit("test-bank", number, 150_000, true).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let loud_ref = loud["providerReference"].as_str().expect("reference");
    assert_ne!(silent_ref, loud_ref);

    // The 202 comes once the notification's first attempt has ended: it has arrived already.
    let received = inbox.received();
    assert_eq!(received.len(), 1, "notified before the answer");
    // Give a wrongly sent silent notification the chance to land before counting.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(inbox.received().len(), 1, "notify: false sends nothing");

    let (path_bank, headers, body) = &received[0];
    assert_eq!(path_bank, "test-bank");
    assert_eq!(headers["content-type"], "application/json");
    let signature = headers["x-provider-signature"].to_str().expect("ascii");
    assert_eq!(signature, sign(SECRET, body));
    assert_ne!(signature, sign("another secret", body));
    let notification: Value = serde_json::from_slice(body).expect("json");
    assert_eq!(notification["event"], "transfer.received");
    let data = &notification["data"];
    assert_eq!(data["reference"], loud_ref);
    assert_eq!(data["accountNumber"], number);
    assert_eq!(data["amount"], 150_000);
    assert_eq!(data["currency"], "NGN");
    assert_eq!(data["senderName"], "Ada Obi");
    assert_eq!(data["narration"], "rent");
    for field in ["senderAccountNumber", "senderBankName", "paidAt"] {
        assert!(data[field].is_string(), "{field} in {data}");
    }
    // What `bench webhooks --bank-secret` sends in the bank's place is this very notification.
    let paid: Transaction = serde_json::from_value(data.clone()).expect("a transaction");
    let same = signed_deposit(SECRET, domain::Bank::TestBank, &paid).expect("encodes");
    assert_eq!(same.path, "/providers/test-bank/notifications");
    assert_eq!(&same.body[..], &body[..]);
    assert_eq!(same.signature, signature);

    let (status, listed) = bank.get("/test-bank/accounts/va_d/transactions").await;
    assert_eq!(status, StatusCode::OK);
    let listed = listed["data"].as_array().expect("data").clone();
    let refs: Vec<_> = listed.iter().map(|t| t["reference"].clone()).collect();
    assert_eq!(refs, vec![json!(silent_ref), json!(loud_ref)]);
    assert_eq!(&listed[1], data, "the listing shows what was notified");

    // The window is inclusive at both ends and may be open on either side.
    let paid_at = data["paidAt"].as_str().expect("paidAt");
    let window = format!("/test-bank/accounts/va_d/transactions?from={paid_at}&to={paid_at}");
    let (_, exact) = bank.get(&window).await;
    assert!(
        exact["data"]
            .as_array()
            .expect("data")
            .iter()
            .any(|t| t["reference"] == loud_ref)
    );
    let (_, future) = bank
        .get("/test-bank/accounts/va_d/transactions?from=2999-01-01T00:00:00Z")
        .await;
    assert_eq!(future["data"], json!([]));
    let (_, past) = bank
        .get("/test-bank/accounts/va_d/transactions?to=2000-01-01T00:00:00Z")
        .await;
    assert_eq!(past["data"], json!([]));
    let (status, _) = bank
        .get("/test-bank/accounts/va_d/transactions?from=yesterday")
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

/// `handover`: the notification comes back in the answer, signed, and is not sent. The service
/// confirms what it stored; what it does not confirm within the grace is sent as a bank sends it,
/// and what it asks for is sent at once: each the very body handed over, once.
#[tokio::test]
async fn a_handed_over_notification_is_sent_only_when_asked_or_left_unconfirmed() {
    let (notify_url, inbox) = Inbox::start(0).await;
    let bank = Bank::start(SandboxConfig {
        notify_url: Some(notify_url),
        handover_grace_secs: 1,
        ..config()
    })
    .await;
    let (_, opened) = bank.open("wema-bank", "va_hand").await;
    let number = opened["accountNumber"].as_str().expect("a number");
    let hand_over = async |amount: i64| {
        let body = json!({"bank": "wema-bank", "accountNumber": number, "amount": amount,
            "notify": true, "handover": true});
        let (status, answer) = bank.post("/control/deposits", body).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{answer}");
        let reference = answer["providerReference"].as_str().expect("reference");
        let text = answer["notification"]["body"].as_str().expect("body");
        let signature = answer["notification"]["signature"]
            .as_str()
            .expect("signature");
        assert_eq!(signature, sign(SECRET, text.as_bytes()));
        (reference.to_owned(), text.to_owned())
    };

    let (first, text) = hand_over(9100).await;
    let notification: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(notification["event"], "transfer.received");
    assert_eq!(notification["data"]["reference"], first.as_str());
    assert_eq!(notification["data"]["amount"], 9100);
    let (_, listed) = bank.get("/wema-bank/accounts/va_hand/transactions").await;
    assert_eq!(listed["data"][0], notification["data"], "the money moved");
    assert_eq!(inbox.attempts(), 0, "handed over, not sent");

    // Asked for: sent before the answer, signed the same.
    let ask = json!({"bank": "wema-bank", "accountNumber": number, "providerReference": first});
    let (status, sent) = bank.post("/control/deposits/notify", ask).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{sent}");
    assert_eq!(sent["providerReference"], first.as_str());
    let received = inbox.received();
    assert_eq!(received.len(), 1, "sent before the answer");
    let (path_bank, headers, sent_body) = &received[0];
    assert_eq!(path_bank, "wema-bank");
    assert_eq!(&sent_body[..], text.as_bytes());
    assert_eq!(
        headers["x-provider-signature"],
        sign(SECRET, text.as_bytes()).as_str()
    );

    // Confirmed: never sent. Left unconfirmed: sent after the grace.
    let (second, _) = hand_over(9200).await;
    let confirm = json!({"providerReferences": [second, "txn_none"]});
    let (status, confirmed) = bank.post("/control/deposits/confirm", confirm).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(confirmed["confirmed"], 1, "only the one waiting");
    let (third, third_text) = hand_over(9300).await;
    let received = eventually(Duration::from_secs(5), async || match inbox.received() {
        got if got.len() >= 2 => Ok(got),
        got => Err(got.len()),
    })
    .await;
    assert_eq!(&received[1].2[..], third_text.as_bytes(), "{third}");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        inbox.attempts(),
        2,
        "the one asked for and the one left unconfirmed, each once; never the confirmed one"
    );

    // Only a transaction the bank holds, into that number; at most 1,000 confirmed at once.
    for (number, reference) in [(number, "txn_none"), ("0000000000", first.as_str())] {
        let ask = json!({"bank": "wema-bank", "accountNumber": number,
            "providerReference": reference});
        let (status, _) = bank.post("/control/deposits/notify", ask).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{number} {reference}");
    }
    let many: Vec<String> = (0..=domain::provider::MOST_CONFIRMED_HANDOVERS)
        .map(|n| format!("txn_{n}"))
        .collect();
    let (status, _) = bank
        .post(
            "/control/deposits/confirm",
            json!({"providerReferences": many}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_refused_notification_is_retried_with_the_same_body() {
    let (notify_url, inbox) = Inbox::start(1).await;
    let bank = Bank::start(SandboxConfig {
        notify_url: Some(notify_url),
        ..config()
    })
    .await;
    let (_, opened) = bank.open("wema-bank", "va_retry").await;
    let number = opened["accountNumber"].as_str().expect("a number");
    let (status, sent) = bank.deposit("wema-bank", number, 700, true).await;
    assert_eq!(
        status,
        StatusCode::ACCEPTED,
        "a refused notification does not fail the deposit"
    );
    assert_eq!(inbox.attempts(), 1, "answered after the first attempt");
    assert!(inbox.received().is_empty());

    let received = eventually(Duration::from_secs(4), async || {
        let got = inbox.received();
        if got.is_empty() {
            Err("not delivered on a retry")
        } else {
            Ok(got)
        }
    })
    .await;
    assert_eq!(
        inbox.attempts(),
        2,
        "one refusal, then success, then nothing more"
    );
    let (_, headers, body) = &received[0];
    assert_eq!(headers["x-provider-signature"], sign(SECRET, body).as_str());
    let notification: Value = serde_json::from_slice(body).expect("json");
    assert_eq!(notification["data"]["reference"], sent["providerReference"]);
}

#[tokio::test]
async fn a_service_that_never_answers_costs_a_slow_202_not_an_error() {
    // A notification endpoint that takes the request and never answers.
    let hanging = Router::new().route(
        "/providers/{bank}/notifications",
        post(async || {
            tokio::time::sleep(Duration::from_secs(60)).await;
            StatusCode::OK
        }),
    );
    let address = test_support::http::serve(hanging).await;
    let bank = Bank::start(SandboxConfig {
        notify_url: Some(format!("http://{address}")),
        ..config()
    })
    .await;
    let (_, opened) = bank.open("wema-bank", "va_hang").await;
    let number = opened["accountNumber"].as_str().expect("a number");
    let asked = Instant::now();
    let (status, sent) = bank.deposit("wema-bank", number, 900, true).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{sent}");
    assert!(
        asked.elapsed() >= provider_sandbox::FIRST_ATTEMPT_WAIT,
        "waited for the first attempt as long as it may"
    );
    let (_, listed) = bank.get("/wema-bank/accounts/va_hang/transactions").await;
    assert_eq!(
        listed["data"][0]["reference"], sent["providerReference"],
        "the money moved"
    );
}

#[tokio::test]
async fn deposits_need_a_known_number_and_a_positive_integer_amount() {
    let bank = Bank::start(config()).await;
    let (_, opened) = bank.open("wema-bank", "va_v").await;
    let number = opened["accountNumber"].as_str().expect("a number");
    for amount in [json!(0), json!(-5), json!(1.5), json!("100")] {
        let body = json!({"bank": "wema-bank", "accountNumber": number, "amount": amount});
        let (status, answer) = bank.post("/control/deposits", body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "amount {amount}");
        assert_eq!(answer["code"], "invalid_amount");
    }
    let (status, _) = bank.deposit("access-bank", number, 100, false).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "another bank's number");
    let (status, _) = bank.deposit("wema-bank", "0000000000", 100, false).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn configured_failures_answer_503_on_bank_calls() {
    let bank = Bank::start(SandboxConfig {
        failure_rate: 1.0,
        ..config()
    })
    .await;
    let (status, answer) = bank.open("wema-bank", "va_f").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer["code"], "unavailable");
    let (status, _) = bank.get("/wema-bank/accounts/va_f").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn state_survives_a_restart_with_a_state_file() {
    let dir = std::env::temp_dir().join(unique("vas-sandbox-test"));
    let state_file = dir.join("state").join("sandbox.json");
    let config = SandboxConfig {
        state_file: Some(state_file.clone()),
        activation_delay_secs: 3600,
        ..config()
    };

    let first = Bank::start(config.clone()).await;
    let (_, opened) = first.open("wema-bank", "va_s").await;
    let number = opened["accountNumber"]
        .as_str()
        .expect("a number")
        .to_owned();
    let (_, deposit) = first.deposit("wema-bank", &number, 2500, false).await;
    let (status, _) = first.open("access-bank", "va_p").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(state_file.exists(), "written as it changes");

    let second = Bank::start(config).await;
    let (status, again) = second.open("wema-bank", "va_s").await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        again["accountNumber"],
        number.as_str(),
        "same account, not a new one"
    );
    let (_, listed) = second.get("/wema-bank/accounts/va_s/transactions").await;
    assert_eq!(listed["data"][0]["reference"], deposit["providerReference"]);
    assert_eq!(listed["data"][0]["amount"], 2500);
    let (_, pending) = second.get("/access-bank/accounts/va_p").await;
    assert_eq!(pending["status"], "pending");
    let (status, _) = second.deposit("wema-bank", &number, 100, false).await;
    assert_eq!(status, StatusCode::ACCEPTED, "the number index is rebuilt");
    let (status, ready) = second.ready().await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(ready["stateFile"], "ok");

    // The state file's folder disappears: the change is refused, and the sandbox is not ready
    // until a write succeeds again.
    std::fs::remove_dir_all(&dir).unwrap();
    let (status, _) = second.open("wema-bank", "va_lost").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    let (status, ready) = second.ready().await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        ready,
        json!({"status": "unavailable", "stateFile": "failing"})
    );
    std::fs::create_dir_all(state_file.parent().unwrap()).unwrap();
    let (status, _) = second.open("wema-bank", "va_back").await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = second.ready().await;
    assert_eq!(status, StatusCode::OK);

    let _ = std::fs::remove_dir_all(dir);
}
