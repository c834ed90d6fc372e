//! Events and webhooks as a caller and a receiver see them: signed deliveries that verify with
//! an independent Standard Webhooks implementation, retries honouring `Retry-After`, timeouts,
//! dead letters and replays, resends, secret rotation, SSRF refusals in both modes, slow endpoints
//! that delay nobody else, a worker killed mid-delivery, and the `/events` API.

use domain::ids::{BusinessId, EventId};
use std::time::Duration;

use ::store::businesses::IssuedBusiness;
use ::store::deliveries;
use domain::{KybStatus, Mode};
use entities::delivery_attempt;
use reqwest::StatusCode;
use sea_orm::EntityTrait;
use sea_orm::sea_query::Expr;
use serde_json::{Value, json};
use test_support::store;
use test_support::{
    Backend, Received, Receiver, Reply, TestApp, account_body, captured_logs, eventually, json,
    spawn_app, spawn_app_with, start_webhooks_worker, wait_until,
};
use tokio_util::sync::CancellationToken;
use worker_webhooks::operator::{self, ReplayTarget};

test_support::on_both_databases!(
    events_are_delivered_signed_and_verifiable,
    events_are_listed_paged_filtered_and_kept_to_their_owner,
    failures_are_retried_on_schedule_honouring_retry_after,
    a_timeout_is_a_failed_attempt_with_status_0,
    an_exhausted_delivery_is_dead_lettered_and_one_replay_delivers_it,
    resend_delivers_again_with_the_same_webhook_id,
    a_resend_supersedes_an_attempt_in_flight,
    during_a_rotation_both_secrets_sign,
    private_targets_are_refused_at_delivery_in_both_modes,
    only_the_first_256_bytes_of_a_non_2xx_reply_are_kept,
    a_slow_endpoint_delays_no_other,
    a_worker_killed_mid_delivery_loses_nothing,
);

const WITHIN: Duration = Duration::from_secs(20);

async fn set_url(app: &TestApp, business_id: &BusinessId, mode: Mode, url: &str) {
    app.set_webhook_url(business_id, mode, url).await;
}

/// Asks for event `id` to be delivered again (`POST /v1/events/{id}/resend`).
async fn resend(app: &TestApp, key: &str, id: &str) -> reqwest::Response {
    app.post(key, &format!("/v1/events/{id}/resend"), None)
        .await
}

/// An account created (active at once) and deactivated: one `virtualaccount.deactivated` event.
async fn deactivated_account(app: &TestApp, key: &str, n: u32) -> String {
    let resp = app
        .create(key, &format!("k{n}"), &account_body(n, "test-bank"))
        .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let id = json(resp).await["id"].as_str().unwrap().to_owned();
    let resp = app.deactivate(key, &id).await;
    assert_eq!(resp.status(), StatusCode::OK);
    id
}

/// A creation the bank rejects: one `virtualaccount.failed` event.
async fn rejected_account(app: &TestApp, key: &str, n: u32) {
    let mut body = account_body(n, "test-bank");
    body["customerBvn"] = json!(format!("99999{:06}", n));
    let resp = app.create(key, &format!("r{n}"), &body).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

/// Records an event directly (as any state change does), in its own transaction.
async fn record_event(app: &TestApp, business_id: &BusinessId, mode: Mode, data: Value) -> EventId {
    app.record_event(business_id, mode, &data).await
}

async fn other_business(app: &TestApp, name: &str) -> IssuedBusiness {
    app.other_business(name, KybStatus::Pending).await
}

/// Verified by the `standardwebhooks` crate, not by our code.
fn verifies(secret: &str, request: &Received) -> bool {
    request.verifies(secret)
}

async fn read_event(app: &TestApp, key: &str, id: &str) -> Value {
    let resp = app.get(key, &format!("/v1/events/{id}")).await;
    assert_eq!(resp.status(), StatusCode::OK);
    json(resp).await
}

/// Polls the event until its first delivery has `status` (and `attempts` attempts, if given).
async fn wait_for_delivery(
    app: &TestApp,
    key: &str,
    event_id: &str,
    status: &str,
    attempts: Option<usize>,
) -> Value {
    eventually(WITHIN, async || {
        let event = read_event(app, key, event_id).await;
        let delivery = &event["deliveries"][0];
        let count = delivery["attempts"].as_array().map_or(0, Vec::len);
        if delivery["status"] == status && attempts.is_none_or(|n| n == count) {
            Ok(event)
        } else {
            Err(format!(
                "delivery of {event_id} is {} with {count} attempts, expected {status}",
                delivery["status"]
            ))
        }
    })
    .await
}

fn status_codes(delivery: &Value) -> Vec<i64> {
    delivery["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["statusCode"].as_i64().unwrap())
        .collect()
}

async fn events_are_delivered_signed_and_verifiable(backend: Backend) {
    let app = spawn_app(backend).await;
    let receiver = Receiver::start().await;
    receiver.set_default(Reply::ok().body("thanks"));
    set_url(&app, &app.business.id, Mode::Test, &receiver.url).await;
    let _worker = start_webhooks_worker(&app, app.shutdown.clone());

    rejected_account(&app, app.test_key(), 1).await;
    let account = deactivated_account(&app, app.test_key(), 2).await;

    let requests = receiver.wait_for(2, WITHIN).await;
    let secret = &app.business.test.webhook_secret;
    let mut types = Vec::new();
    for r in &requests {
        assert!(
            verifies(secret, r),
            "the standardwebhooks crate verifies it"
        );
        assert!(!verifies(&app.business.live.webhook_secret, r));
        let body = r.json();
        assert_eq!(r.webhook_id(), body["id"].as_str().unwrap());
        assert!(r.webhook_id().starts_with("evt_"));
        let mut keys: Vec<&str> = body
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, ["createdAt", "data", "id", "mode", "type"]);
        assert_eq!(body["mode"], "test");
        assert_eq!(r.header("content-type"), "application/json");
        let timestamp: i64 = r.header("webhook-timestamp").parse().unwrap();
        assert!((chrono::Utc::now().timestamp() - timestamp).abs() < 60);
        assert!(r.header("webhook-signature").starts_with("v1,"));
        assert!(
            !String::from_utf8_lossy(&r.body).contains("99999000001"),
            "no BVN"
        );
        types.push(body["type"].as_str().unwrap().to_owned());
    }
    types.sort();
    assert_eq!(
        types,
        ["virtualaccount.deactivated", "virtualaccount.failed"]
    );

    // The delivered body is the event as the API shows it, and the attempt is on record.
    let sent = requests
        .iter()
        .find(|r| r.json()["type"] == "virtualaccount.deactivated")
        .unwrap();
    let body = sent.json();
    assert_eq!(body["data"]["id"], account.as_str());
    assert_eq!(body["data"]["status"], "deactivated");
    let event = wait_for_delivery(
        &app,
        app.test_key(),
        &sent.webhook_id(),
        "succeeded",
        Some(1),
    )
    .await;
    assert_eq!(event["object"], "event");
    for field in ["id", "type", "mode", "createdAt", "data"] {
        assert_eq!(event[field], body[field], "{field}");
    }
    let deliveries = event["deliveries"].as_array().unwrap();
    assert_eq!(deliveries.len(), 1, "one delivery per event and endpoint");
    let delivery = &deliveries[0];
    assert!(delivery["id"].as_str().unwrap().starts_with("whd_"));
    assert_eq!(delivery["url"], receiver.url.as_str());
    let attempt = &delivery["attempts"][0];
    assert_eq!(attempt["statusCode"], 200);
    assert!(attempt["responseBody"].is_null(), "a 2xx body is not kept");
    assert!(attempt["durationMs"].as_i64().unwrap() >= 0);
    assert!(attempt["at"].is_string());

    // Exactly one request per event.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(receiver.count(), 2);

    // Neither the secret, the signature nor the body reaches the logs.
    let logs = captured_logs();
    assert!(!logs.contains(secret.trim_start_matches("whsec_")));
    let signature = sent.header("webhook-signature");
    assert!(!logs.contains(signature.trim_start_matches("v1,")));
    assert!(!logs.contains(String::from_utf8_lossy(&sent.body).as_ref()));
}

async fn events_are_listed_paged_filtered_and_kept_to_their_owner(backend: Backend) {
    // No webhook URL: events are recorded all the same, and nothing is delivered.
    let app = spawn_app(backend).await;
    let _worker = start_webhooks_worker(&app, app.shutdown.clone());
    rejected_account(&app, app.test_key(), 1).await;
    deactivated_account(&app, app.test_key(), 2).await;
    deactivated_account(&app, app.test_key(), 3).await;

    let all = app.get_json(app.test_key(), "/events?pageSize=100").await;
    assert_eq!(all["total"], 3);
    let data = all["data"].as_array().unwrap();
    let created: Vec<&str> = data
        .iter()
        .map(|e| e["createdAt"].as_str().unwrap())
        .collect();
    let mut newest_first = created.clone();
    newest_first.sort_by(|a, b| b.cmp(a));
    assert_eq!(created, newest_first);
    assert_eq!(data[2]["type"], "virtualaccount.failed", "the oldest last");
    assert!(
        data.iter()
            .all(|e| e["object"] == "event" && e["mode"] == "test")
    );

    let page = app.get_json(app.test_key(), "/v1/events?pageSize=2").await;
    assert_eq!(
        (
            &page["page"],
            &page["pageSize"],
            &page["total"],
            &page["totalPages"]
        ),
        (&json!(1), &json!(2), &json!(3), &json!(2))
    );
    assert_eq!(page["data"].as_array().unwrap().len(), 2);
    let second = app
        .get_json(app.test_key(), "/v1/events?pageSize=2&page=2")
        .await;
    assert_eq!(second["data"].as_array().unwrap().len(), 1);
    assert_eq!(second["data"][0]["id"], data[2]["id"]);

    let failed = app
        .get_json(app.test_key(), "/v1/events?type=virtualaccount.failed")
        .await;
    assert_eq!(failed["total"], 1);
    assert_eq!(failed["data"][0]["type"], "virtualaccount.failed");
    let none = app
        .get_json(app.test_key(), "/v1/events?type=deposit.received")
        .await;
    assert_eq!(none["total"], 0);

    for (query, field) in [
        ("type=account.created", "type"),
        ("page=0", "page"),
        ("pageSize=101", "pageSize"),
        ("pageSize=ten", "pageSize"),
    ] {
        let resp = app
            .get(app.test_key(), &format!("/v1/events?{query}"))
            .await;
        assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY, "{query}");
        let problem = json(resp).await;
        assert_eq!(problem["code"], "validation_failed");
        assert_eq!(problem["errors"][0]["field"], field, "{query}");
    }

    let id = data[0]["id"].as_str().unwrap();
    let event = read_event(&app, app.test_key(), id).await;
    assert_eq!(event["deliveries"], json!([]), "no URL, no delivery");
    assert_eq!(store::count_deliveries(&app.db).await, 0);
    assert_eq!(store::count_events(&app.db).await, 3);

    // Resending needs a URL.
    let resp = resend(&app, app.test_key(), id).await;
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    assert_eq!(json(resp).await["code"], "invalid_state");

    // Another mode or business: nothing to see, and 404 rather than 403.
    app.approve_kyb().await;
    let live = app.get_json(app.live_key(), "/v1/events").await;
    assert_eq!(live["total"], 0);
    let other = other_business(&app, "Other Ltd").await;
    let other_list = app.get_json(&other.test.secret_key, "/v1/events").await;
    assert_eq!(other_list["total"], 0);
    for key in [app.live_key(), other.test.secret_key.as_str()] {
        let resp = app.get(key, &format!("/v1/events/{id}")).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
        assert_eq!(json(resp).await["code"], "not_found");
        let resp = resend(&app, key, id).await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    }
    let resp = app.get(app.test_key(), "/v1/events/evt_nope").await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let resp = app.get("sk_test_nope", "/v1/events").await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
}

async fn failures_are_retried_on_schedule_honouring_retry_after(backend: Backend) {
    let app = spawn_app_with(backend, |c| {
        c.webhooks.retry_schedule = vec![1, 1, 1, 1];
        c.webhooks.max_retry_after_secs = 3;
    })
    .await;
    let receiver = Receiver::start().await;
    receiver.script([
        Reply::status(500).body("boom"),
        // Later than the schedule's 1 s: honoured.
        Reply::status(503).retry_after("3"),
        // Later than the configured maximum: clamped to 3 s.
        Reply::status(429).retry_after("3600"),
        // Sooner than the schedule: the schedule stands, so a receiver cannot burn the attempts.
        Reply::status(503).retry_after("0"),
        Reply::ok(),
    ]);
    set_url(&app, &app.business.id, Mode::Test, &receiver.url).await;
    let _worker = start_webhooks_worker(&app, app.shutdown.clone());
    deactivated_account(&app, app.test_key(), 1).await;

    let requests = receiver.wait_for(5, WITHIN).await;
    let gaps: Vec<f64> = requests
        .windows(2)
        .map(|w| (w[1].at - w[0].at).as_secs_f64())
        .collect();
    assert!(
        (0.75..6.0).contains(&gaps[0]),
        "schedule's 1 s ± 20 %: {gaps:?}"
    );
    assert!(
        (2.9..8.0).contains(&gaps[1]),
        "Retry-After: 3 honoured: {gaps:?}"
    );
    assert!(
        (2.9..8.0).contains(&gaps[2]),
        "Retry-After clamped to 3 s: {gaps:?}"
    );
    assert!(
        (0.75..6.0).contains(&gaps[3]),
        "Retry-After: 0 waits for the schedule's 1 s: {gaps:?}"
    );
    // Each attempt is signed with its own time: a later attempt never carries an earlier one's.
    let stamps: Vec<i64> = requests
        .iter()
        .map(|r| r.header("webhook-timestamp").parse().unwrap())
        .collect();
    assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{stamps:?}");
    assert!(stamps[4] - stamps[0] >= 7, "{stamps:?}");
    // Same id and same bytes on every attempt; each freshly signed.
    let first = &requests[0];
    for r in &requests {
        assert_eq!(r.webhook_id(), first.webhook_id());
        assert_eq!(r.body, first.body);
        assert!(verifies(&app.business.test.webhook_secret, r));
    }

    let event = wait_for_delivery(
        &app,
        app.test_key(),
        &first.webhook_id(),
        "succeeded",
        Some(5),
    )
    .await;
    let delivery = &event["deliveries"][0];
    assert_eq!(status_codes(delivery), [500, 503, 429, 503, 200]);
    assert_eq!(delivery["attempts"][0]["responseBody"], "boom");
    assert!(delivery["completedAt"].is_string());
    assert!(delivery["nextAttemptAt"].is_null());
}

async fn a_timeout_is_a_failed_attempt_with_status_0(backend: Backend) {
    let app = spawn_app_with(backend, |c| {
        c.webhooks.retry_schedule = vec![0];
        c.webhooks.timeout_secs = 1;
    })
    .await;
    let receiver = Receiver::start().await;
    receiver.set_default(Reply::ok().slow(Duration::from_secs(3)));
    set_url(&app, &app.business.id, Mode::Test, &receiver.url).await;
    let _worker = start_webhooks_worker(&app, app.shutdown.clone());
    deactivated_account(&app, app.test_key(), 1).await;
    let requests = receiver.wait_for(1, WITHIN).await;

    let event = wait_for_delivery(
        &app,
        app.test_key(),
        &requests[0].webhook_id(),
        "dead",
        Some(2),
    )
    .await;
    let delivery = &event["deliveries"][0];
    assert_eq!(status_codes(delivery), [0, 0], "a late 200 is no success");
    for attempt in delivery["attempts"].as_array().unwrap() {
        let ms = attempt["durationMs"].as_i64().unwrap();
        assert!((900..2900).contains(&ms), "cut at the 1 s timeout: {ms}");
        assert!(attempt["responseBody"].is_null());
    }
}

async fn an_exhausted_delivery_is_dead_lettered_and_one_replay_delivers_it(backend: Backend) {
    let app = spawn_app_with(backend, |c| c.webhooks.retry_schedule = vec![0, 0]).await;
    let receiver = Receiver::start().await;
    receiver.set_default(Reply::status(500));
    set_url(&app, &app.business.id, Mode::Test, &receiver.url).await;
    let _worker = start_webhooks_worker(&app, app.shutdown.clone());
    deactivated_account(&app, app.test_key(), 1).await;

    let requests = receiver.wait_for(3, WITHIN).await;
    let event_id = requests[0].webhook_id();
    let event = wait_for_delivery(&app, app.test_key(), &event_id, "dead", Some(3)).await;
    let delivery_id = event["deliveries"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(status_codes(&event["deliveries"][0]), [500, 500, 500]);
    // Tried once plus once per schedule entry, and no more.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(receiver.count(), 3);
    // The job is dead, and its message sits in the queue's dead-letter queue.
    assert_eq!(store::dead_jobs(&app.db).await, 1);
    wait_until("one message in webhooks.dead", WITHIN, async || {
        app.broker.depth("webhooks", true).await.unwrap() == 1
    })
    .await;

    // Operators see it: in the metrics (one recorder per test process, so shapes, not totals)…
    assert_eq!(deliveries::count_dead(&app.db).await.unwrap(), 1);
    let metrics = app.metrics().await;
    for needle in [
        r#"webhook_deliveries_total{outcome="retrying"}"#,
        r#"webhook_deliveries_total{outcome="dead"}"#,
        "webhook_delivery_duration_seconds_bucket",
        "webhook_dead_letters ",
    ] {
        assert!(metrics.contains(needle), "{needle} missing from /metrics");
    }
    // …and in the dead-letter list…
    let mut out = Vec::new();
    let n = operator::dead_list(&app.db, Some(&app.business.id), &mut out)
        .await
        .unwrap();
    assert_eq!(n, 1);
    let line: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(line["id"], delivery_id.as_str());
    assert_eq!(line["eventId"], event_id.as_str());
    assert_eq!(line["eventType"], "virtualaccount.deactivated");
    assert_eq!(line["attempts"], 3);
    assert_eq!(line["lastStatusCode"], 500);
    assert!(line["deadAt"].is_string());
    let mut other = Vec::new();
    assert_eq!(
        operator::dead_list(
            &app.db,
            Some(&BusinessId::unchecked("biz_other")),
            &mut other
        )
        .await
        .unwrap(),
        0
    );

    // …and replay it once the business has a working endpoint (at a new URL): same event id, a
    // fresh schedule, to the URL the mode has now.
    let moved = Receiver::start().await;
    set_url(&app, &app.business.id, Mode::Test, &moved.url).await;
    let in_the_future = domain::time::now() + chrono::Duration::hours(1);
    let target = |since| ReplayTarget::AllDead {
        business_id: Some(app.business.id.clone()),
        since: Some(since),
    };
    let mut out = Vec::new();
    assert_eq!(
        operator::replay(&app.db, &target(in_the_future), &mut out)
            .await
            .unwrap(),
        0,
        "none died after --since"
    );
    let an_hour_ago = domain::time::now() - chrono::Duration::hours(1);
    assert_eq!(
        operator::replay(&app.db, &target(an_hour_ago), &mut out)
            .await
            .unwrap(),
        1
    );
    let replayed = moved.wait_for(1, WITHIN).await;
    assert_eq!(replayed[0].webhook_id(), event_id);
    assert_eq!(replayed[0].body, requests[0].body);
    assert!(verifies(&app.business.test.webhook_secret, &replayed[0]));
    let event = wait_for_delivery(&app, app.test_key(), &event_id, "succeeded", Some(4)).await;
    assert_eq!(event["deliveries"][0]["id"], delivery_id.as_str());
    assert_eq!(event["deliveries"][0]["url"], moved.url.as_str());
    assert_eq!(receiver.count(), 3, "nothing more went to the old URL");
    assert_eq!(status_codes(&event["deliveries"][0]), [500, 500, 500, 200]);
    assert_eq!(deliveries::count_dead(&app.db).await.unwrap(), 0);
    let mut out = Vec::new();
    assert_eq!(
        operator::dead_list(&app.db, None, &mut out).await.unwrap(),
        0
    );
    let err = operator::replay(
        &app.db,
        &ReplayTarget::Ids(vec!["whd_nope".into()]),
        &mut out,
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains("no such delivery: whd_nope"),
        "{err}"
    );
}

async fn resend_delivers_again_with_the_same_webhook_id(backend: Backend) {
    let app = spawn_app(backend).await;
    let receiver = Receiver::start().await;
    set_url(&app, &app.business.id, Mode::Test, &receiver.url).await;
    let _worker = start_webhooks_worker(&app, app.shutdown.clone());
    deactivated_account(&app, app.test_key(), 1).await;
    let first = receiver.wait_for(1, WITHIN).await.remove(0);
    let event_id = first.webhook_id();
    wait_for_delivery(&app, app.test_key(), &event_id, "succeeded", Some(1)).await;

    let resp = app
        .post(app.test_key(), &format!("/events/{event_id}/resend"), None)
        .await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let accepted = json(resp).await;
    assert_eq!(accepted["id"], event_id.as_str());
    assert_eq!(accepted["deliveries"].as_array().unwrap().len(), 1);
    let again = receiver.wait_for(2, WITHIN).await.remove(1);
    assert_eq!(again.webhook_id(), event_id);
    assert_eq!(again.body, first.body);
    assert!(verifies(&app.business.test.webhook_secret, &again));
    let event = wait_for_delivery(&app, app.test_key(), &event_id, "succeeded", Some(2)).await;
    assert_eq!(status_codes(&event["deliveries"][0]), [200, 200]);

    // To the current URL: a new endpoint gets a delivery of its own.
    let moved = Receiver::start().await;
    set_url(&app, &app.business.id, Mode::Test, &moved.url).await;
    let resp = resend(&app, app.test_key(), &event_id).await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let there = moved.wait_for(1, WITHIN).await.remove(0);
    assert_eq!(there.webhook_id(), event_id);
    assert_eq!(there.body, first.body);
    let event = read_event(&app, app.test_key(), &event_id).await;
    let urls: Vec<&str> = event["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["url"].as_str().unwrap())
        .collect();
    assert_eq!(urls, [receiver.url.as_str(), moved.url.as_str()]);
    assert_eq!(receiver.count(), 2, "the old endpoint got nothing more");
}

async fn a_resend_supersedes_an_attempt_in_flight(backend: Backend) {
    // Without the resend, the slow 500 would be retried at once (schedule [0]).
    let app = spawn_app_with(backend, |c| c.webhooks.retry_schedule = vec![0]).await;
    let receiver = Receiver::start().await;
    receiver.script([Reply::status(500).slow(Duration::from_secs(3))]);
    set_url(&app, &app.business.id, Mode::Test, &receiver.url).await;
    let _worker = start_webhooks_worker(&app, app.shutdown.clone());
    deactivated_account(&app, app.test_key(), 1).await;
    let held = receiver.wait_for(1, WITHIN).await.remove(0);
    let event_id = held.webhook_id();

    let resp = resend(&app, app.test_key(), &event_id).await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let fresh = receiver.wait_for(2, WITHIN).await.remove(1);
    assert_eq!(fresh.webhook_id(), event_id);
    assert!(
        fresh.at < held.at + Duration::from_secs(3),
        "not queued behind the slow one"
    );

    // The old attempt's 500 lands after the fresh success: on record, but it changes nothing.
    let event = eventually(WITHIN, async || {
        let event = read_event(&app, app.test_key(), &event_id).await;
        if event["deliveries"][0]["attempts"].as_array().unwrap().len() == 2 {
            Ok(event)
        } else {
            Err("the old attempt was never recorded")
        }
    })
    .await;
    let delivery = &event["deliveries"][0];
    assert_eq!(delivery["status"], "succeeded");
    let mut codes = status_codes(delivery);
    codes.sort_unstable();
    assert_eq!(codes, [200, 500]);
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(receiver.count(), 2, "the superseded schedule did not retry");
    assert_eq!(
        read_event(&app, app.test_key(), &event_id).await["deliveries"][0]["status"],
        "succeeded"
    );
}

async fn during_a_rotation_both_secrets_sign(backend: Backend) {
    let app = spawn_app(backend).await;
    let receiver = Receiver::start().await;
    set_url(&app, &app.business.id, Mode::Test, &receiver.url).await;
    let _worker = start_webhooks_worker(&app, app.shutdown.clone());
    let old = app.business.test.webhook_secret.clone();
    let new = app.rotate_test_webhook_secret().await;
    let stranger = domain::keys::generate_webhook_secret();

    deactivated_account(&app, app.test_key(), 1).await;
    let during = receiver.wait_for(1, WITHIN).await.remove(0);
    let signatures: Vec<String> = during
        .header("webhook-signature")
        .split(' ')
        .map(str::to_owned)
        .collect();
    assert_eq!(signatures.len(), 2, "{signatures:?}");
    assert!(signatures.iter().all(|s| s.starts_with("v1,")));
    assert!(verifies(&new, &during), "the new secret verifies");
    assert!(verifies(&old, &during), "the old secret still verifies");
    assert!(!verifies(&stranger, &during));
    // Each signature is one secret's: the first the new one's, the second the old one's.
    let only = |i: usize| {
        let mut r = during.clone();
        r.headers
            .insert("webhook-signature", signatures[i].parse().unwrap());
        r
    };
    assert!(verifies(&new, &only(0)) && !verifies(&old, &only(0)));
    assert!(verifies(&old, &only(1)) && !verifies(&new, &only(1)));

    // Once the overlap is over, the old secret signs no more.
    store::expire_previous_webhook_secrets(&app.db).await;
    deactivated_account(&app, app.test_key(), 2).await;
    let after = receiver.wait_for(2, WITHIN).await.remove(1);
    assert_eq!(after.header("webhook-signature").split(' ').count(), 1);
    assert!(verifies(&new, &after));
    assert!(!verifies(&old, &after));
}

async fn private_targets_are_refused_at_delivery_in_both_modes(backend: Backend) {
    // As in production: no private addresses allowed.
    let app = spawn_app_with(backend, |c| {
        c.webhooks.retry_schedule = vec![0];
        c.webhooks.timeout_secs = 2;
        c.webhooks.allow_private_addresses = false;
    })
    .await;
    app.approve_kyb().await;
    let receiver = Receiver::start().await;
    let _worker = start_webhooks_worker(&app, app.shutdown.clone());
    // Written past the save-time check (as if set before the rule, or by hand): delivery still
    // refuses. A name that resolves to loopback (refused after DNS, before connecting), and
    // addresses.
    let biz = app.business.id.clone();
    let mut urls = vec![
        (Mode::Live, receiver.localhost_url()),
        (Mode::Live, receiver.url.clone()),
        (Mode::Test, receiver.localhost_url()),
        (Mode::Test, receiver.url.clone()),
    ];
    for url in [
        "http://[::1]:9/hook",
        "http://10.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::ffff:127.0.0.1]:9/hook",
    ] {
        urls.push((Mode::Test, url.to_owned()));
    }
    for (n, (mode, url)) in urls.iter().enumerate() {
        set_url(&app, &biz, *mode, url).await;
        let id = record_event(&app, &biz, *mode, json!({"id": format!("va_{n}")})).await;
        let key = match mode {
            Mode::Live => app.live_key(),
            Mode::Test => app.test_key(),
        };
        // Each attempt goes to the URL of its moment: wait before the next URL is set.
        let event = wait_for_delivery(&app, key, &id, "dead", Some(2)).await;
        let delivery = &event["deliveries"][0];
        assert_eq!(status_codes(delivery), [0, 0], "{mode} {url}");
        for attempt in delivery["attempts"].as_array().unwrap() {
            assert!(attempt["responseBody"].is_null());
        }
    }
    assert_eq!(receiver.count(), 0, "nothing reached the private target");
    let refusals = (urls.len() * 2) as u64;
    assert_eq!(
        store::count_attempts_whose_error_mentions(&app.db, &["public addresses only"]).await,
        refusals,
        "every attempt says why"
    );
    assert_eq!(
        store::count_attempts_whose_error_mentions(
            &app.db,
            // 127.0.0.1 or ::1, whichever the resolver lists first.
            &["localhost resolves to", "a loopback address"]
        )
        .await,
        4,
        "a name is judged by what it resolves to"
    );
}

async fn only_the_first_256_bytes_of_a_non_2xx_reply_are_kept(backend: Backend) {
    let app = spawn_app_with(backend, |c| c.webhooks.retry_schedule = vec![0]).await;
    let receiver = Receiver::start().await;
    let long = "e".repeat(1000);
    receiver.script([Reply::status(500).body(&long)]);
    receiver.set_default(Reply::ok().body(&long));
    set_url(&app, &app.business.id, Mode::Test, &receiver.url).await;
    let _worker = start_webhooks_worker(&app, app.shutdown.clone());
    let id = record_event(&app, &app.business.id, Mode::Test, json!({"id": "va_1"})).await;
    let event = wait_for_delivery(&app, app.test_key(), &id, "succeeded", Some(2)).await;
    let attempts = |event: &Value| event["deliveries"][0]["attempts"].clone();
    assert_eq!(status_codes(&event["deliveries"][0]), [500, 200]);
    assert_eq!(attempts(&event)[0]["responseBody"], "e".repeat(256));
    assert!(
        attempts(&event)[1]["responseBody"].is_null(),
        "a 2xx body is not kept"
    );
    let mut stored: Vec<(i32, Option<String>)> = delivery_attempt::Entity::find()
        .all(&app.db)
        .await
        .unwrap()
        .into_iter()
        .map(|a| (a.status_code, a.response_excerpt))
        .collect();
    stored.sort();
    assert_eq!(stored, [(200, None), (500, Some("e".repeat(256)))]);

    // Attempts recorded under an older rule (a kibibyte, of any answer) show no more than this
    // one allows.
    delivery_attempt::Entity::update_many()
        .col_expr(
            delivery_attempt::Column::ResponseExcerpt,
            Expr::value("o".repeat(1024)),
        )
        .exec(&app.db)
        .await
        .unwrap();
    let event = read_event(&app, app.test_key(), &id).await;
    assert_eq!(attempts(&event)[0]["responseBody"], "o".repeat(256));
    assert!(attempts(&event)[1]["responseBody"].is_null());
}

async fn a_slow_endpoint_delays_no_other(backend: Backend) {
    let app = spawn_app(backend).await;
    let slow = Receiver::start().await;
    slow.set_default(Reply::ok().slow(Duration::from_secs(4)));
    let fast = Receiver::start().await;
    let other = other_business(&app, "Quick Ltd").await;
    set_url(&app, &app.business.id, Mode::Test, &slow.url).await;
    set_url(&app, &other.id, Mode::Test, &fast.localhost_url()).await;
    let _worker = start_webhooks_worker(&app, app.shutdown.clone());

    deactivated_account(&app, app.test_key(), 1).await;
    let held = slow.wait_for(1, WITHIN).await.remove(0);
    for n in 2..5 {
        deactivated_account(&app, &other.test.secret_key, n).await;
    }
    let delivered = fast.wait_for(3, Duration::from_secs(4)).await;
    let slow_answers_at = held.at + Duration::from_secs(4);
    for r in &delivered {
        assert!(
            r.at < slow_answers_at,
            "a fast delivery waited for the slow endpoint"
        );
        assert!(verifies(&other.test.webhook_secret, r));
    }
    let event = wait_for_delivery(
        &app,
        app.test_key(),
        &held.webhook_id(),
        "succeeded",
        Some(1),
    )
    .await;
    let ms = event["deliveries"][0]["attempts"][0]["durationMs"]
        .as_i64()
        .unwrap();
    assert!(ms >= 3900, "{ms}");
}

async fn a_worker_killed_mid_delivery_loses_nothing(backend: Backend) {
    let app = spawn_app(backend).await;
    let receiver = Receiver::start().await;
    // The first request is held until long after the worker is gone.
    receiver.script([Reply::ok().slow(Duration::from_secs(60))]);
    set_url(&app, &app.business.id, Mode::Test, &receiver.url).await;
    let doomed = start_webhooks_worker(&app, CancellationToken::new());
    deactivated_account(&app, app.test_key(), 1).await;
    let first = receiver.wait_for(1, WITHIN).await.remove(0);

    // Killed mid-delivery: nothing finishes, nothing is acknowledged.
    doomed.abort();
    assert!(doomed.await.unwrap_err().is_cancelled());
    let _worker = start_webhooks_worker(&app, app.shutdown.clone());
    let second = receiver.wait_for(2, WITHIN).await.remove(1);
    assert_eq!(
        second.webhook_id(),
        first.webhook_id(),
        "a duplicate, same id"
    );
    assert_eq!(second.body, first.body);
    let event = wait_for_delivery(
        &app,
        app.test_key(),
        &first.webhook_id(),
        "succeeded",
        Some(1),
    )
    .await;
    assert_eq!(status_codes(&event["deliveries"][0]), [200]);
}

// ---------------------------------------------------------------------------------------------
// `api admin webhook set`: the SSRF check when the URL is set, in both modes.

#[test]
fn setting_a_private_url_is_refused_in_both_modes_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    // A configured database, as a deployment has: on `api dev`'s own data folder the command
    // follows dev's rule instead (tests/cli.rs).
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("vas.sqlite").display()
    );
    let key = crypto::Cipher::generate_key();
    let env = [
        ("VAS_DATABASE__URL", url.as_str()),
        ("VAS_CRYPTO__KEY", key.as_str()),
    ];
    let api = || {
        let mut cmd =
            test_support::process::command_in(test_support::process::api_binary(), dir.path());
        cmd.envs(env);
        cmd
    };
    test_support::process::run_ok(api().arg("migrate"));
    let out = test_support::process::run_ok(
        api().args(["admin", "business", "create", "--name", "Acme Ltd"]),
    );
    let issued: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = issued["id"].as_str().unwrap();
    let set_with = |allow: &str, mode: &str, url: &str| {
        api()
            .env("VAS_WEBHOOKS__ALLOW_PRIVATE_ADDRESSES", allow)
            .args(["admin", "webhook", "set", id, "--mode", mode, "--url", url])
            .output()
            .unwrap()
    };
    let set = |mode: &str, url: &str| set_with("false", mode, url);
    for mode in ["live", "test"] {
        for (url, kind) in [
            ("https://127.0.0.1/hook", "loopback"),
            ("https://10.0.0.1/hook", "private"),
            ("https://192.168.0.10/hook", "private"),
            ("https://169.254.169.254/latest", "link-local"),
            ("https://100.64.1.1/hook", "CGNAT"),
            ("https://[::1]/hook", "loopback"),
            ("https://[::ffff:127.0.0.1]/hook", "loopback"),
            ("https://[fd00::1]/hook", "unique-local"),
            ("https://[fe80::1]/hook", "link-local"),
            ("https://0.0.0.0/hook", "unspecified"),
            ("https://localhost/hook", "loopback"),
        ] {
            let out = set(mode, url);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{mode}: {url} was accepted");
            assert!(
                stderr.contains("refused")
                    && stderr.contains(kind)
                    && stderr.contains("public addresses only"),
                "{mode} {url}: {stderr}"
            );
        }
    }
    // Public addresses are fine in either mode.
    assert!(set("live", "https://93.184.216.34/hook").status.success());
    assert!(set("test", "http://93.184.216.34/hook").status.success());
    // An operator may allow this machine and private networks, never link-local (metadata).
    assert!(
        set_with("true", "test", "http://localhost:8999/hook")
            .status
            .success()
    );
    assert!(
        set_with("true", "test", "http://127.0.0.1:8999/hook")
            .status
            .success()
    );
    assert!(
        set_with("true", "test", "http://10.0.0.1/hook")
            .status
            .success()
    );
    let out = set_with("true", "test", "http://169.254.169.254/latest");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("link-local"));
    // Said at start, as every process that allows them says it.
    let out = set_with("true", "test", "http://127.0.0.1:8999/hook");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("WARN") && stderr.contains("ALLOW_PRIVATE_ADDRESSES"),
        "{stderr}"
    );
}
