//! What a provider's answer makes of an account, through the api's create and the provisioning
//! worker alike, against a scripted provider: a number another account already holds, and an
//! account the provider closed before it was ever active.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use test_support::{
    Backend, TestApp, account_body, captured_logs, spawn_app_with, start_provisioning_worker, store,
};

test_support::on_both_databases!(
    a_number_already_held_is_the_providers_error_never_a_500,
    a_closed_answer_fails_the_account_in_the_create_and_in_the_worker,
    one_number_given_to_many_creations_at_once_goes_to_one_account,
);

/// What the scripted provider answers: to `POST /accounts` and to `GET /accounts/{reference}`,
/// a status code and a body (its `reference` filled in).
#[derive(Clone)]
struct Script {
    open: (StatusCode, Value),
    get: (StatusCode, Value),
}

#[derive(Clone)]
struct Provider {
    script: Arc<Mutex<Script>>,
    gets: Arc<AtomicUsize>,
    closes: Arc<AtomicUsize>,
}

impl Provider {
    /// Serves every test-mode bank on 127.0.0.1:0; returns its base URL.
    async fn start(script: Script) -> (Provider, String) {
        let provider = Provider {
            script: Arc::new(Mutex::new(script)),
            gets: Arc::default(),
            closes: Arc::default(),
        };
        let router = Router::new()
            .route("/{bank}/accounts", post(open))
            .route("/{bank}/accounts/{reference}", get(status))
            .route("/{bank}/accounts/{reference}/close", post(close))
            .with_state(provider.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        (provider, format!("http://{addr}"))
    }

    fn set(&self, script: Script) {
        *self.script.lock().unwrap() = script;
    }
}

fn with_reference(
    (status, body): (StatusCode, Value),
    reference: &str,
) -> (StatusCode, Json<Value>) {
    let mut body = body;
    body["reference"] = json!(reference);
    (status, Json(body))
}

async fn open(State(p): State<Provider>, Json(body): Json<Value>) -> (StatusCode, Json<Value>) {
    let answer = p.script.lock().unwrap().open.clone();
    with_reference(answer, body["reference"].as_str().unwrap_or_default())
}

async fn status(
    State(p): State<Provider>,
    Path((_bank, reference)): Path<(String, String)>,
) -> (StatusCode, Json<Value>) {
    p.gets.fetch_add(1, Ordering::SeqCst);
    let answer = p.script.lock().unwrap().get.clone();
    with_reference(answer, &reference)
}

async fn close(State(p): State<Provider>) -> StatusCode {
    p.closes.fetch_add(1, Ordering::SeqCst);
    StatusCode::OK
}

fn answer(status: u16, body: Value) -> (StatusCode, Value) {
    (StatusCode::from_u16(status).unwrap(), body)
}

async fn json(resp: reqwest::Response) -> Value {
    resp.json().await.expect("JSON body")
}

async fn account(app: &TestApp, id: &str) -> Value {
    app.get_json(app.test_key(), &format!("/v1/virtual-accounts/{id}"))
        .await
}

/// Polls until `check` holds, or panics with `what` after `within`.
async fn eventually<F, Fut>(within: Duration, what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < within, "{what} not within {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Jobs about this account that are not finished (to run, running or waiting to retry).
async fn unfinished_jobs_of(app: &TestApp, account_id: &str) -> u64 {
    store::open_provisioning_jobs_for(&app.db, account_id).await
}

/// Events of this type about this account.
async fn account_events(app: &TestApp, event_type: &str, account_id: &str) -> u64 {
    store::count_events_about(&app.db, event_type, account_id).await
}

async fn a_number_already_held_is_the_providers_error_never_a_500(backend: Backend) {
    let held = json!({"status": "active", "accountNumber": "0123456789"});
    let (provider, url) = Provider::start(Script {
        open: answer(201, held.clone()),
        get: answer(200, held),
    })
    .await;
    let app = spawn_app_with(backend, |c| {
        c.sandbox.url = Some(url);
        c.provisioning.give_up_after_secs = 3;
    })
    .await;

    let first = app
        .create(app.test_key(), "k1", &account_body(1, "test-bank"))
        .await;
    assert_eq!(first.status(), StatusCode::CREATED);
    let first = json(first).await;
    assert_eq!(first["accountNumber"], "0123456789");

    // The provider hands the same number to the next account: its error, not the caller's.
    let second = app
        .create(app.test_key(), "k2", &account_body(2, "test-bank"))
        .await;
    assert_eq!(second.status(), StatusCode::ACCEPTED);
    let second = json(second).await;
    assert_eq!(second["status"], "pending");
    assert!(second["accountNumber"].is_null());
    let id = second["id"].as_str().unwrap().to_owned();
    let replay = app
        .create(app.test_key(), "k2", &account_body(2, "test-bank"))
        .await;
    assert_eq!(replay.status(), StatusCode::ACCEPTED);

    // The worker keeps getting the held number, and ends the wait by the give-up rule.
    let _worker = start_provisioning_worker(&app, app.shutdown.clone());
    eventually(Duration::from_secs(30), "the account failed", || async {
        account(&app, &id).await["status"] == "failed"
    })
    .await;
    let failed = account(&app, &id).await;
    assert!(failed["accountNumber"].is_null());
    assert!(
        failed["failureReason"]
            .as_str()
            .unwrap()
            .contains("no account number"),
        "{failed}"
    );
    assert_eq!(account_events(&app, "virtualaccount.failed", &id).await, 1);
    // The account that holds the number keeps it.
    let holder = account(&app, first["id"].as_str().unwrap()).await;
    assert_eq!(holder["status"], "active");
    assert_eq!(holder["accountNumber"], "0123456789");

    // Its jobs end (the given-up account is closed at the bank), and the provider is left alone.
    eventually(
        Duration::from_secs(20),
        "the account's jobs finished",
        || async { unfinished_jobs_of(&app, &id).await == 0 },
    )
    .await;
    assert!(
        provider.closes.load(Ordering::SeqCst) >= 1,
        "closed at the bank"
    );
    let polls = provider.gets.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(provider.gets.load(Ordering::SeqCst), polls, "still polling");

    // Operators see it: a log line that names the account and bank but no identity, and a metric.
    let logs = captured_logs();
    let line = logs
        .lines()
        .find(|l| l.contains("another account already holds") && l.contains(id.as_str()))
        .expect("a log line about the held number");
    assert!(line.contains("test-bank"), "{line}");
    assert!(
        !logs.contains(
            account_body(2, "test-bank")["customerBvn"]
                .as_str()
                .unwrap()
        )
    );
    let metrics = app.metrics().await;
    assert!(
        metrics.contains(r#"provider_duplicate_numbers_total{bank="test-bank"}"#),
        "{metrics}"
    );
}

async fn a_closed_answer_fails_the_account_in_the_create_and_in_the_worker(backend: Backend) {
    let closed = json!({"status": "closed"});
    let (provider, url) = Provider::start(Script {
        open: answer(201, closed.clone()),
        get: answer(200, closed.clone()),
    })
    .await;
    let app = spawn_app_with(backend, |c| c.sandbox.url = Some(url)).await;

    // Answered at once in the create: the account fails there, as a `failed` answer would.
    let resp = app
        .create(app.test_key(), "k1", &account_body(1, "test-bank"))
        .await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let problem = json(resp).await;
    assert_eq!(problem["code"], "identity_rejected");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("closed the account"),
        "{problem}"
    );
    let list = app
        .get_json(app.test_key(), "/v1/virtual-accounts?status=failed")
        .await;
    assert_eq!(list["total"], 1);
    let first = list["data"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        account_events(&app, "virtualaccount.failed", &first).await,
        1
    );

    // Learnt later by the worker: the same outcome.
    provider.set(Script {
        open: answer(202, json!({"status": "pending"})),
        get: answer(200, closed),
    });
    let resp = app
        .create(app.test_key(), "k2", &account_body(2, "test-bank"))
        .await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let id = json(resp).await["id"].as_str().unwrap().to_owned();
    let _worker = start_provisioning_worker(&app, app.shutdown.clone());
    eventually(Duration::from_secs(20), "the account failed", || async {
        account(&app, &id).await["status"] == "failed"
    })
    .await;
    let failed = account(&app, &id).await;
    assert!(
        failed["failureReason"]
            .as_str()
            .unwrap()
            .contains("closed the account"),
        "{failed}"
    );
    assert_eq!(account_events(&app, "virtualaccount.failed", &id).await, 1);
}

/// A provider that hands one number to many accounts at the same instant: their settling
/// transactions meet on the unique index; exactly one account takes the number (201), every
/// other waits (202), and nobody sees a 500.
async fn one_number_given_to_many_creations_at_once_goes_to_one_account(backend: Backend) {
    let held = json!({"status": "active", "accountNumber": "0123456789"});
    let (_provider, url) = Provider::start(Script {
        open: answer(201, held.clone()),
        get: answer(200, held),
    })
    .await;
    let app = spawn_app_with(backend, |c| c.sandbox.url = Some(url)).await;
    let app = &app;
    let answers = futures::future::join_all((0..12u32).map(|n| async move {
        let resp = app
            .create(
                app.test_key(),
                &format!("same-{n}"),
                &account_body(n, "test-bank"),
            )
            .await;
        (resp.status(), json(resp).await)
    }))
    .await;
    let created: Vec<&Value> = answers
        .iter()
        .filter(|(status, _)| *status == StatusCode::CREATED)
        .map(|(_, body)| body)
        .collect();
    for (status, body) in &answers {
        assert!(
            matches!(*status, StatusCode::CREATED | StatusCode::ACCEPTED),
            "{status}: {body}"
        );
    }
    assert_eq!(created.len(), 1, "{answers:?}");
    assert_eq!(created[0]["accountNumber"], "0123456789");
    for (_, body) in answers.iter().filter(|(s, _)| *s == StatusCode::ACCEPTED) {
        assert_eq!(body["status"], "pending");
        assert!(body["accountNumber"].is_null());
    }
}
