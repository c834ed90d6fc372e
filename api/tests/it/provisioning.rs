//! Provisioning as a caller sees it: 202 becomes active through the worker, rejections, outages,
//! deactivation while pending, giving up, lost messages and competing workers.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use test_support::store::{self, count_events_about};
use test_support::{
    Backend, TestApp, account_body, eventually, json, spawn_app, spawn_app_with,
    start_provisioning_worker, wait_until,
};
use tokio_util::sync::CancellationToken;

test_support::on_both_databases!(
    pending_accounts_become_active_through_the_worker,
    identity_rejection_is_a_422_and_a_failed_account,
    a_provider_outage_never_fails_a_creation,
    a_deactivated_pending_account_is_closed_and_never_revived,
    a_number_that_comes_after_deactivation_is_closed_at_the_bank,
    a_pending_account_is_given_up_after_the_configured_wait,
    a_lost_message_is_published_again,
    a_job_this_version_cannot_read_is_dead_lettered_once,
    competing_workers_do_each_job_once,
    metrics_count_requests_jobs_and_provider_calls,
);

/// Polls the account until `status`, or panics after `within`.
async fn wait_for_status(app: &TestApp, id: &str, status: &str, within: Duration) -> Value {
    eventually(within, async || {
        let account = app
            .get_json(app.test_key(), &format!("/v1/virtual-accounts/{id}"))
            .await;
        if account["status"] == status {
            Ok(account)
        } else {
            Err(format!("{id} still {}", account["status"]))
        }
    })
    .await
}

/// Events of this type about the account.
async fn events_of(app: &TestApp, event_type: &str, account_id: &str) -> u64 {
    count_events_about(&app.db, event_type, account_id).await
}

async fn sandbox_account(app: &TestApp, bank: &str, reference: &str) -> Value {
    let resp = app
        .client
        .get(format!("{}/{bank}/accounts/{reference}", app.sandbox_url))
        .bearer_auth(&app.config.sandbox.key)
        .send()
        .await
        .unwrap();
    json(resp).await
}

async fn pending_accounts_become_active_through_the_worker(backend: Backend) {
    let app = spawn_app(backend).await;
    let _worker = start_provisioning_worker(&app, app.shutdown.clone());
    let resp = app
        .create(app.test_key(), "k", &account_body(1, "access-bank"))
        .await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let id = json(resp).await["id"].as_str().unwrap().to_owned();
    let account = wait_for_status(&app, &id, "active", Duration::from_secs(15)).await;
    let number = account["accountNumber"].as_str().unwrap();
    assert!(domain::nuban::is_valid("044", number), "{number}");
    assert!(account["activatedAt"].is_string());
    assert_eq!(events_of(&app, "virtualaccount.active", &id).await, 1);
    // The number is the one the bank holds.
    assert_eq!(
        sandbox_account(&app, "access-bank", &id).await["accountNumber"],
        number
    );
    // A replay shows the account as it is now, with the first status.
    let replay = app
        .create(app.test_key(), "k", &account_body(1, "access-bank"))
        .await;
    assert_eq!(replay.status(), StatusCode::ACCEPTED);
    assert_eq!(json(replay).await["status"], "active");
}

async fn identity_rejection_is_a_422_and_a_failed_account(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut body = account_body(1, "wema-bank");
    body["customerBvn"] = json!("99999123456");
    let resp = app.create(app.test_key(), "k", &body).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let problem = json(resp).await;
    assert_eq!(problem["code"], "identity_rejected");
    assert!(!problem["detail"].as_str().unwrap().is_empty());
    assert!(!problem.to_string().contains("99999123456"));

    let list = app
        .get_json(app.test_key(), "/v1/virtual-accounts?status=failed")
        .await;
    assert_eq!(list["total"], 1, "kept as failed for the record");
    let account = &list["data"][0];
    assert!(account["failureReason"].is_string());
    let id = account["id"].as_str().unwrap();
    assert_eq!(events_of(&app, "virtualaccount.failed", id).await, 1);

    let replay = app.create(app.test_key(), "k", &body).await;
    assert_eq!(replay.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    // A failed account frees its reference.
    let mut fresh = account_body(1, "wema-bank");
    fresh["customerReference"] = account["customerReference"].clone();
    assert_eq!(
        app.create(app.test_key(), "k2", &fresh).await.status(),
        StatusCode::CREATED
    );
}

async fn a_provider_outage_never_fails_a_creation(backend: Backend) {
    // The sandbox answers slower than the API waits: creation answers 202 and the worker, which
    // waits longer, gets the number.
    let app = spawn_app_with(backend, |c| {
        c.sandbox.latency_ms = 700;
        c.http.provider_timeout_ms = 200;
    })
    .await;
    // test-bank numbers at once: a 202 shows the API stopped waiting for the slow bank.
    let resp = app
        .create(app.test_key(), "k", &account_body(1, "test-bank"))
        .await;
    assert_eq!(
        resp.status(),
        StatusCode::ACCEPTED,
        "a timeout is not a failure"
    );
    let id = json(resp).await["id"].as_str().unwrap().to_owned();
    let _worker = start_provisioning_worker(&app, app.shutdown.clone());
    wait_for_status(&app, &id, "active", Duration::from_secs(20)).await;

    // No bank at all (connection refused): still 202.
    let app = spawn_app_with(Backend::Sqlite, |c| {
        c.sandbox.url = Some("http://127.0.0.1:9".into())
    })
    .await;
    let resp = app
        .create(app.test_key(), "k", &account_body(2, "test-bank"))
        .await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
}

async fn a_deactivated_pending_account_is_closed_and_never_revived(backend: Backend) {
    let app = spawn_app_with(backend, |c| c.sandbox.activation_delay_secs = 2).await;
    let resp = app
        .create(app.test_key(), "k", &account_body(1, "titan-trust-bank"))
        .await;
    let id = json(resp).await["id"].as_str().unwrap().to_owned();
    let resp = app.deactivate(app.test_key(), &id).await;
    assert_eq!(json(resp).await["status"], "deactivated");
    let _worker = start_provisioning_worker(&app, app.shutdown.clone());
    wait_until("closed at the bank", Duration::from_secs(15), async || {
        sandbox_account(&app, "titan-trust-bank", &id).await["status"] == "closed"
    })
    .await;
    // Past the bank's activation delay, the account stays deactivated and was never announced.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let account = app
        .get_json(app.test_key(), &format!("/v1/virtual-accounts/{id}"))
        .await;
    assert_eq!(account["status"], "deactivated");
    assert!(account["accountNumber"].is_null());
    assert_eq!(events_of(&app, "virtualaccount.active", &id).await, 0);
    assert_eq!(events_of(&app, "virtualaccount.deactivated", &id).await, 1);
}

async fn a_number_that_comes_after_deactivation_is_closed_at_the_bank(backend: Backend) {
    let app = spawn_app_with(backend, |c| c.sandbox.activation_delay_secs = 1).await;
    let resp = app
        .create(app.test_key(), "k", &account_body(1, "titan-trust-bank"))
        .await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let id = json(resp).await["id"].as_str().unwrap().to_owned();
    // The close sent at deactivation reached the bank before the open did (the bank answered
    // "no such account"), so nothing closed it: deactivated here, open and numbered there.
    store::set_account_status(&app.db, &id, "deactivated").await;
    let number = eventually(Duration::from_secs(10), async || {
        let remote = sandbox_account(&app, "titan-trust-bank", &id).await;
        if remote["status"] == "active" {
            Ok(remote["accountNumber"].as_str().unwrap().to_owned())
        } else {
            Err(remote)
        }
    })
    .await;

    // The account's provisioning job finds it deactivated without a number, asks the bank, and
    // closes what the bank opened.
    let _worker = start_provisioning_worker(&app, app.shutdown.clone());
    wait_until("closed at the bank", Duration::from_secs(20), async || {
        sandbox_account(&app, "titan-trust-bank", &id).await["status"] == "closed"
    })
    .await;
    let account = app
        .get_json(app.test_key(), &format!("/v1/virtual-accounts/{id}"))
        .await;
    assert_eq!(account["status"], "deactivated");
    assert_eq!(
        account["accountNumber"],
        number.as_str(),
        "kept for the record"
    );
    assert_eq!(events_of(&app, "virtualaccount.active", &id).await, 0);
}

async fn a_pending_account_is_given_up_after_the_configured_wait(backend: Backend) {
    let app = spawn_app_with(backend, |c| {
        c.sandbox.activation_delay_secs = 3600;
        c.provisioning.give_up_after_secs = 2;
    })
    .await;
    let _worker = start_provisioning_worker(&app, app.shutdown.clone());
    let resp = app
        .create(app.test_key(), "k", &account_body(1, "access-bank"))
        .await;
    let id = json(resp).await["id"].as_str().unwrap().to_owned();
    let account = wait_for_status(&app, &id, "failed", Duration::from_secs(20)).await;
    assert!(
        account["failureReason"]
            .as_str()
            .unwrap()
            .contains("no account number")
    );
    assert_eq!(events_of(&app, "virtualaccount.failed", &id).await, 1);
}

async fn a_lost_message_is_published_again(backend: Backend) {
    let app = spawn_app(backend).await;
    let resp = app
        .create(app.test_key(), "k", &account_body(1, "access-bank"))
        .await;
    let id = json(resp).await["id"].as_str().unwrap().to_owned();
    // A worker takes the message and dies holding it (never acks, never returns it).
    let mut stream = app.broker.consume("provisioning", 1).await.unwrap();
    let held = tokio::time::timeout(
        Duration::from_secs(10),
        futures::StreamExt::next(&mut stream),
    )
    .await
    .expect("the job was published")
    .unwrap()
    .unwrap();
    std::mem::forget(held);
    // The job row still says unfinished: a relay republishes it once it is overdue.
    store::make_published_jobs_overdue(&app.db).await;
    let _worker = start_provisioning_worker(&app, app.shutdown.clone());
    wait_for_status(&app, &id, "active", Duration::from_secs(20)).await;
    assert_eq!(events_of(&app, "virtualaccount.active", &id).await, 1);
}

async fn a_job_this_version_cannot_read_is_dead_lettered_once(backend: Backend) {
    let app = spawn_app(backend).await;
    let now = domain::time::now();
    let job = jobs::ProvisioningJob::Close {
        account_id: domain::ids::AccountId::unchecked("va_unknown"),
    };
    let job_id = ::store::outbox::enqueue(&app.db, &job, now, now)
        .await
        .unwrap();
    // As a newer version might write it: a kind of job this one does not know.
    store::overwrite_job_payload(&app.db, &job_id, r#"{"kind":"from_the_future"}"#).await;
    app.relay.kick();
    let _worker = start_provisioning_worker(&app, app.shutdown.clone());
    wait_until("given up", Duration::from_secs(15), async || {
        store::job(&app.db, &job_id).await.dead
    })
    .await;
    // In the dead-letter queue once, and not tried again.
    wait_until("dead-lettered", Duration::from_secs(10), async || {
        app.broker.depth("provisioning", true).await.unwrap() == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(app.broker.depth("provisioning", true).await.unwrap(), 1);
    let job = store::job(&app.db, &job_id).await;
    assert!(
        job.attempts == 0
            && job
                .last_error
                .as_deref()
                .is_some_and(|e| e.contains("cannot read")),
        "given up on its first reading: {job:?}"
    );
}

async fn competing_workers_do_each_job_once(backend: Backend) {
    let app = spawn_app(backend).await;
    let stops: Vec<CancellationToken> = (0..3).map(|_| app.shutdown.child_token()).collect();
    for stop in &stops {
        start_provisioning_worker(&app, stop.clone());
    }
    let mut ids = Vec::new();
    for n in 0..15 {
        let bank = if n % 2 == 0 {
            "access-bank"
        } else {
            "titan-trust-bank"
        };
        let resp = app
            .create(app.test_key(), &format!("k{n}"), &account_body(n, bank))
            .await;
        assert_eq!(resp.status(), StatusCode::ACCEPTED);
        ids.push(json(resp).await["id"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        wait_for_status(&app, id, "active", Duration::from_secs(30)).await;
    }
    assert_eq!(
        store::count_events_of_type(&app.db, "virtualaccount.active").await,
        15
    );
    assert_eq!(store::outbox_backlog(&app.db).await, 0);
}

async fn metrics_count_requests_jobs_and_provider_calls(backend: Backend) {
    let app = spawn_app(backend).await;
    let _worker = start_provisioning_worker(&app, app.shutdown.clone());
    let resp = app
        .create(app.test_key(), "k", &account_body(1, "access-bank"))
        .await;
    let id = json(resp).await["id"].as_str().unwrap().to_owned();
    wait_for_status(&app, &id, "active", Duration::from_secs(15)).await;
    let resp = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let text = resp.text().await.unwrap();
    // One recorder per process: other tests' figures are here too, so look for shapes, not totals.
    for needle in [
        r#"http_requests_total{method="POST",route="/v1/virtual-accounts",status="202"}"#,
        r#"http_request_duration_seconds_bucket{method="POST",route="/v1/virtual-accounts""#,
        r#"provider_calls_total{bank="access-bank",operation="open",outcome="ok"}"#,
        r#"provider_calls_total{bank="access-bank",operation="get",outcome="ok"}"#,
        r#"jobs_published_total{queue="provisioning"}"#,
        r#"jobs_consumed_total{queue="provisioning",outcome="done"}"#,
        "job_duration_seconds_bucket",
    ] {
        assert!(text.contains(needle), "{needle} missing from /metrics");
    }
    // The job that activated the account carries the id of the request that created it.
    let with_request = store::jobs_carrying_a_request_id_for(&app.db, &id).await;
    assert_eq!(with_request, 1);
}
