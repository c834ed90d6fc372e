//! Resending events (docs/api/events-and-webhooks.md): a configured number per business per minute,
//! through the API and the dashboard together, then 429 with `Retry-After`; every resend audited as
//! whoever asked for it. And a business that points its webhook URL at another business's receiver
//! and resends into it without pause does not delay that business's webhooks: only its own
//! deliveries are refused there (wrong signature), and only its own circuit opens.

use domain::ids::KeyId;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use domain::keys::hash_secret_key;
use domain::{AuditAction, KybStatus, Mode, Role};
use entities::api_key;
use reqwest::StatusCode;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::json;
use test_support::dashboard::{Http, add_user};
use test_support::{
    Backend, Receiver, TestApp, expect_problem, spawn_app_with, start_webhooks_worker,
};

test_support::on_both_databases!(
    resends_past_the_business_limit_get_429_and_each_resend_is_audited,
    a_business_resending_into_anothers_receiver_does_not_delay_its_webhooks,
);

/// A client whose requests come from `ip` (a loopback address of its own).
fn client_from(ip: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(ip.parse::<IpAddr>().unwrap())
        .build()
        .unwrap()
}

async fn resend_from(
    client: &reqwest::Client,
    app: &TestApp,
    key: &str,
    event: &str,
) -> reqwest::Response {
    client
        .post(app.url(&format!("/v1/events/{event}/resend")))
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
}

/// The id of the key `secret`, as the audit log names it.
async fn key_id(app: &TestApp, secret: &str) -> KeyId {
    api_key::Entity::find()
        .filter(api_key::Column::KeyHash.eq(hash_secret_key(secret)))
        .one(&app.db)
        .await
        .unwrap()
        .expect("the key's row")
        .id
}

async fn resends_past_the_business_limit_get_429_and_each_resend_is_audited(backend: Backend) {
    let app = spawn_app_with(backend, |c| {
        c.limits.resends_per_minute = NonZeroU32::new(3).unwrap();
    })
    .await;
    let receiver = Receiver::start().await;
    app.set_webhook_url(&app.business.id, Mode::Test, &receiver.url)
        .await;
    let event = app
        .record_event(&app.business.id, Mode::Test, &json!({"id": "va_1"}))
        .await;
    let client = client_from("127.0.0.7");

    // Two through the API and one from the dashboard: the business's three for the minute.
    for _ in 0..2 {
        let resp = resend_from(&client, &app, app.test_key(), &event).await;
        assert_eq!(resp.status(), StatusCode::ACCEPTED);
    }
    let (email, password) = add_user(&app, Role::Developer).await;
    let mut dashboard = Http::new(&app);
    dashboard.sign_in(&email, &password).await;
    let event_page = format!("/dashboard/test/events/{event}");
    let token = dashboard.form_token_of(&event_page).await;
    let resent = dashboard
        .post_form(&format!("{event_page}/resend"), &token, &[])
        .await;
    assert_eq!(resent.status, 303, "{}", resent.body);

    // The fourth, from either front end, is refused and sends nothing.
    let refused = resend_from(&client, &app, app.test_key(), &event).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry_after: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry_after), "Retry-After {retry_after}");
    expect_problem(refused, 429, "rate_limited").await;
    let token = dashboard.form_token_of(&event_page).await;
    let refused = dashboard
        .post_form(&format!("{event_page}/resend"), &token, &[])
        .await;
    assert_eq!(refused.status, 429);
    assert!(
        refused.body.contains("Too many resends"),
        "{}",
        refused.body
    );
    assert!(!refused.header("retry-after").is_empty());

    // Per business: another business's resends are its own.
    let other = app.other_business("Other Ltd", KybStatus::Approved).await;
    app.set_webhook_url(&other.id, Mode::Test, &receiver.url)
        .await;
    let theirs = app
        .record_event(&other.id, Mode::Test, &json!({"id": "va_2"}))
        .await;
    let resp = resend_from(&client, &app, &other.test.secret_key, &theirs).await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);

    // Each resend that went is in the business's audit log, as the key or the person who asked.
    let resends: Vec<_> = test_support::store::audit_log(&app.db, &app.business.id)
        .await
        .into_iter()
        .filter(|e| e.action == AuditAction::EventResent)
        .collect();
    assert_eq!(resends.len(), 3, "{resends:?}");
    let test_key_id = key_id(&app, app.test_key()).await;
    let by_key: Vec<_> = resends
        .iter()
        .filter(|e| e.actor_key_id.is_some())
        .collect();
    assert_eq!(by_key.len(), 2, "{resends:?}");
    for row in &by_key {
        assert_eq!(row.actor_key_id.as_deref(), Some(test_key_id.as_str()));
        assert_eq!((&row.actor_user_id, &row.actor_email), (&None, &None));
        assert_eq!(row.client_addr.as_deref(), Some("127.0.0.7"));
        assert_eq!(row.mode, Some(Mode::Test));
        assert_eq!(row.target.as_deref(), Some(event.as_str()));
        assert!(row.detail.as_deref().unwrap().starts_with("delivery whd_"));
    }
    let by_person: Vec<_> = resends
        .iter()
        .filter(|e| e.actor_email.as_deref() == Some(email.as_str()))
        .collect();
    assert_eq!(by_person.len(), 1, "{resends:?}");
    // The owner reads the API's resends on the Team page, as the key.
    let (owner, owner_password) = add_user(&app, Role::Owner).await;
    let mut team = Http::new(&app);
    team.sign_in(&owner, &owner_password).await;
    let page = team.get("/dashboard/test/team").await;
    assert_eq!(page.status, 200);
    assert!(
        page.body.contains(&format!("API key {test_key_id}")),
        "{}",
        page.body
    );
}

/// How soon a victim's deposit webhook must arrive while the other business floods the receiver.
const GOAL: Duration = Duration::from_secs(5);
const DEPOSITS: i64 = 3;

async fn a_business_resending_into_anothers_receiver_does_not_delay_its_webhooks(backend: Backend) {
    // The worker is what is tested here: the resend limit is raised far out of the way, so the
    // other business really resends all the time (about 50 a second: 3,000 a minute).
    let app = spawn_app_with(backend, |c| {
        c.limits.resends_per_minute = NonZeroU32::new(1_000_000).unwrap();
    })
    .await;
    let victim_secret = app.business.test.webhook_secret.clone();
    // The victim's receiver: anything not signed with the victim's secret gets 401.
    let receiver = Receiver::start().await;
    receiver.accept_only(&victim_secret);
    app.set_webhook_url(&app.business.id, Mode::Test, &receiver.url)
        .await;
    let account = app.active_account(app.test_key(), 1).await;
    let account_id = test_support::id_of(&account);
    let _worker = start_webhooks_worker(&app, app.shutdown.clone());

    let attacker = app
        .other_business("Mischief Ltd", KybStatus::Approved)
        .await;
    app.set_webhook_url(&attacker.id, Mode::Test, &receiver.url)
        .await;
    let mut theirs = Vec::new();
    for n in 0..10 {
        let data = json!({"id": format!("va_a{n}")});
        theirs.push(app.record_event(&attacker.id, Mode::Test, &data).await);
    }
    let accepted = Arc::new(AtomicU32::new(0));
    let flooding = tokio::spawn({
        let (client, url, key) = (
            app.client.clone(),
            app.base.clone(),
            attacker.test.secret_key,
        );
        let accepted = accepted.clone();
        async move {
            for event in theirs.iter().cycle() {
                let resp = client
                    .post(format!("{url}/v1/events/{event}/resend"))
                    .bearer_auth(&key)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(resp.status(), StatusCode::ACCEPTED);
                accepted.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });
    let foreign = |receiver: &Receiver| {
        receiver
            .requests()
            .iter()
            .filter(|r| !r.verifies(&victim_secret))
            .count()
    };
    // Enough failures to open a circuit (5 by default): on one breaker per URL, the victim's
    // deliveries would now wait out its 30 s cool-down, and longer each time a probe fails.
    let threshold = app.config.webhooks.circuit_failure_threshold as usize;
    test_support::wait_until(
        "the other business's deliveries refused enough to open a circuit",
        Duration::from_secs(20),
        async || foreign(&receiver) >= threshold,
    )
    .await;

    let mut late = Vec::new();
    for n in 1..=DEPOSITS {
        let amount = 100_000 + n;
        let asked = Instant::now();
        app.deposit_credited(&account_id, amount).await;
        let arrived = test_support::eventually(GOAL * 4, async || {
            receiver
                .requests()
                .into_iter()
                .find(|r| {
                    let body = r.json();
                    body["type"] == "deposit.received" && body["data"]["amount"] == amount
                })
                .map(|r| r.at)
                .ok_or("not arrived")
        })
        .await;
        late.push(arrived.saturating_duration_since(asked));
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    assert!(!flooding.is_finished(), "the flood went on throughout");
    flooding.abort();
    let refused = foreign(&receiver);
    println!(
        "\n{}: the victim's deposit webhooks arrived {late:.2?} after each deposit was asked \
         for, while another business resent {} times into the same receiver ({refused} of its \
         requests refused with 401; then its own circuit held the rest)",
        if app.rabbit.is_some() {
            "PostgreSQL + RabbitMQ"
        } else {
            "SQLite + in-process queue"
        },
        accepted.load(Ordering::Relaxed),
    );
    assert!(late.iter().all(|l| *l < GOAL), "{late:?}");
    let victims: Vec<_> = receiver
        .requests()
        .into_iter()
        .filter(|r| r.verifies(&victim_secret))
        .collect();
    assert!(
        victims
            .iter()
            .filter(|r| r.json()["type"] == "deposit.received")
            .count()
            >= DEPOSITS as usize
    );
    assert!(
        refused >= threshold,
        "the other business's requests were refused"
    );
}
