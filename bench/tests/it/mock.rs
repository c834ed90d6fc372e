//! The load runner against a small in-process stand-in for the service.

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use bench::load::{self, Settings, Stop, Workload};
use bench::stats::Report;
use serde_json::{Value, json};

#[derive(Default)]
struct Mock {
    keys: HashSet<String>,
    references: HashSet<String>,
    created: u64,
    limit: u64,
}

async fn create(
    State(mock): State<Arc<Mutex<Mock>>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some("Bearer sk_test_mock") {
        return (StatusCode::UNAUTHORIZED, "{\"code\":\"unauthorized\"}").into_response();
    }
    let Some(key) = headers.get("idempotency-key").and_then(|v| v.to_str().ok()) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    for field in [
        "customerName",
        "customerEmail",
        "customerPhone",
        "customerBvn",
        "preferredBank",
    ] {
        if !body[field].is_string() {
            return StatusCode::UNPROCESSABLE_ENTITY.into_response();
        }
    }
    let mut mock = mock.lock().unwrap();
    if mock.keys.contains(key) {
        return (
            StatusCode::CREATED,
            [("idempotent-replayed", "true")],
            Json(json!({"id": "va_x"})),
        )
            .into_response();
    }
    if mock.created >= mock.limit {
        return (StatusCode::TOO_MANY_REQUESTS, "{\"code\":\"rate_limited\"}").into_response();
    }
    let reference = body["customerReference"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        mock.references.insert(reference),
        "a customerReference was sent twice"
    );
    mock.keys.insert(key.to_owned());
    mock.created += 1;
    (StatusCode::CREATED, Json(json!({"id": "va_x"}))).into_response()
}

async fn serve(limit: u64) -> (String, Arc<Mutex<Mock>>) {
    let mock = Arc::new(Mutex::new(Mock {
        limit,
        ..Mock::default()
    }));
    let app = Router::new()
        .route("/v1/virtual-accounts", post(create))
        .with_state(mock.clone());
    let address = test_support::http::serve(app).await;
    (format!("http://{address}/"), mock)
}

fn settings(base: String, stop: Stop) -> Settings {
    Settings {
        base,
        api_keys: vec!["sk_test_mock".into()],
        concurrency: 4,
        stop,
        warmup: Duration::ZERO,
        timeout: Duration::from_secs(5),
    }
}

/// The create workload at test-bank, run to its stop.
async fn creating(settings: Settings) -> Report {
    let client = load::client(&settings).unwrap();
    let workload = Workload::Create {
        bank: "test-bank".into(),
    };
    load::run(client, settings, workload, Arc::new(AtomicBool::new(false)))
        .await
        .unwrap()
}

#[tokio::test]
async fn create_counts_every_request_and_sees_the_limit() {
    let (base, mock) = serve(30).await;
    let settings = settings(base, Stop::Requests(50));
    let report = creating(settings).await;
    assert_eq!(report.requests(), 50);
    assert_eq!(report.successes(), 30);
    assert_eq!(report.errors(), 20);
    assert_eq!(report.rate_limited(), 20);
    assert_eq!(report.stats.transport_errors, 0);
    assert_eq!(report.stats.replayed, 0);
    assert_eq!(mock.lock().unwrap().created, 30);
    let text = report.to_text();
    assert!(text.contains("warning: 20 response(s) were 429"), "{text}");
    let json = report.to_json();
    assert_eq!(json["successesByStatus"]["201"], 30);
    assert_eq!(json["errorsByStatus"]["429"], 20);
    let p = &json["latencyMs"];
    assert!(p["p50"].as_f64() <= p["p90"].as_f64());
    assert!(p["p90"].as_f64() <= p["p99"].as_f64());
    assert!(p["p99"].as_f64() <= p["max"].as_f64());
}

#[tokio::test]
async fn replay_hammers_one_key_for_a_duration() {
    let (base, mock) = serve(1000).await;
    let settings = settings(base, Stop::After(Duration::from_millis(300)));
    let client = load::client(&settings).unwrap();
    let (key, body) = load::prepare_replay(&client, &settings, "test-bank")
        .await
        .unwrap();
    let report = load::run(
        client,
        settings,
        Workload::Replay { key, body },
        Arc::new(AtomicBool::new(false)),
    )
    .await
    .unwrap();
    assert!(report.requests() > 0);
    assert_eq!(report.successes(), report.requests());
    assert_eq!(report.stats.replayed, report.requests());
    assert!(report.warnings().is_empty(), "{:?}", report.warnings());
    assert!(report.elapsed >= Duration::from_millis(300));
    assert_eq!(mock.lock().unwrap().created, 1);
}

#[tokio::test]
async fn a_wrong_key_is_reported_not_fatal() {
    let (base, _mock) = serve(10).await;
    let mut settings = settings(base, Stop::Requests(8));
    settings.api_keys = vec!["sk_test_wrong".into()];
    let report = creating(settings).await;
    assert_eq!(report.errors(), 8);
    assert_eq!(report.successes(), 0);
    assert!(report.to_text().contains("first 401:"));
}

#[tokio::test]
async fn nothing_listening_is_a_transport_error() {
    let base = format!("http://127.0.0.1:{}", test_support::http::free_port());
    let settings = settings(base, Stop::Requests(4));
    let report = creating(settings).await;
    assert_eq!(report.requests(), 4);
    assert_eq!(report.stats.transport_errors, 4);
    assert!(report.latency_ok().is_none());
}
