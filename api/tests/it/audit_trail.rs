//! The audit log's reach (docs/dashboard.md): changes made through the API carry the secret key's
//! id and the client's address (a payout once, however often its request is replayed), and sign-ins
//! refused while an e-mail is locked are recorded, a flood folded into one row with its count.
//! Each as the business's owner reads it on the Team page.

use domain::ids::KeyId;
use std::net::IpAddr;
use std::time::Duration;

use chrono::Timelike;
use domain::keys::hash_secret_key;
use domain::{AuditAction, Mode, Role};
use entities::{api_key, audit_entry};
use reqwest::StatusCode;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::{Value, json};
use store::audit::AuditEntry;
use test_support::dashboard::{Http, add_user, sign_in_status, stored_user};
use test_support::{Backend, TestApp, id_of, spawn_app, spawn_app_with};

test_support::on_both_databases!(
    deactivations_and_payouts_through_the_api_are_audited_as_the_key,
    a_replayed_payout_is_audited_once,
    sign_ins_refused_while_locked_are_recorded_with_a_count,
    a_code_refused_while_locked_is_recorded,
);

/// A client whose requests come from `ip` (a loopback address of its own).
fn client_from(ip: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(ip.parse::<IpAddr>().unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn rows_of(app: &TestApp, action: AuditAction) -> Vec<AuditEntry> {
    audit_entry::Entity::find()
        .filter(audit_entry::Column::Action.eq(action))
        .all(&app.db)
        .await
        .unwrap()
}

/// The id of the test key, as the audit log names it.
async fn test_key_id(app: &TestApp) -> KeyId {
    api_key::Entity::find()
        .filter(api_key::Column::KeyHash.eq(hash_secret_key(app.test_key())))
        .one(&app.db)
        .await
        .unwrap()
        .expect("the test key's row")
        .id
}

/// A funded test balance and a settlement account to pay it out to: the settlement account's
/// number.
async fn ready_to_pay(app: &TestApp) -> String {
    app.funded_account(1_000_000).await;
    let number = domain::nuban::account_number("058", 12_345_678).unwrap();
    let put = app
        .client
        .put(app.url("/v1/settlement-account"))
        .bearer_auth(app.test_key())
        .json(&json!({"bankCode": "058", "accountNumber": number}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::OK);
    number
}

async fn pay_from(
    app: &TestApp,
    client: &reqwest::Client,
    idempotency_key: &str,
    body: &Value,
) -> reqwest::Response {
    client
        .post(app.url("/v1/payouts"))
        .bearer_auth(app.test_key())
        .header("Idempotency-Key", idempotency_key)
        .json(body)
        .send()
        .await
        .unwrap()
}

/// The Team page as a (second) owner reads it.
async fn team_page(app: &TestApp) -> String {
    let (email, password) = add_user(app, Role::Owner).await;
    let mut owner = Http::new(app);
    owner.sign_in(&email, &password).await;
    let team = owner.get("/dashboard/test/team").await;
    assert_eq!(team.status, 200);
    team.body
}

async fn deactivations_and_payouts_through_the_api_are_audited_as_the_key(backend: Backend) {
    let app = spawn_app(backend).await;
    let settlement_number = ready_to_pay(&app).await;
    let key_id = test_key_id(&app).await;

    let payout = pay_from(
        &app,
        &client_from("127.0.0.9"),
        "po-1",
        &json!({"amount": 500_000}),
    )
    .await;
    assert_eq!(payout.status(), StatusCode::ACCEPTED);
    let payout_id = id_of(&test_support::json(payout).await);

    let account = app.active_account(app.test_key(), 2).await;
    let account_id = id_of(&account);
    let deactivate = |reason: &'static str| {
        client_from("127.0.0.10")
            .post(app.url(&format!("/v1/virtual-accounts/{account_id}/deactivate")))
            .bearer_auth(app.test_key())
            .json(&json!({"reason": reason}))
            .send()
    };
    assert_eq!(
        deactivate("customer left").await.unwrap().status(),
        StatusCode::OK
    );
    // Deactivating it again changes nothing, and records nothing.
    assert_eq!(deactivate("again").await.unwrap().status(), StatusCode::OK);

    let payouts = rows_of(&app, AuditAction::PayoutCreated).await;
    assert_eq!(payouts.len(), 1, "{payouts:?}");
    let row = &payouts[0];
    assert_eq!(row.business_id.as_deref(), Some(app.business.id.as_str()));
    assert_eq!(row.actor_key_id.as_deref(), Some(key_id.as_str()));
    assert_eq!((&row.actor_user_id, &row.actor_email), (&None, &None));
    assert_eq!(row.client_addr.as_deref(), Some("127.0.0.9"));
    assert_eq!(row.mode, Some(Mode::Test));
    assert_eq!(row.target.as_deref(), Some(payout_id.as_str()));
    assert_eq!(
        row.detail.as_deref(),
        Some(
            format!(
                "₦5,000.00 to Guaranty Trust Bank …{}",
                &settlement_number[6..]
            )
            .as_str()
        )
    );

    let deactivations = rows_of(&app, AuditAction::AccountDeactivated).await;
    assert_eq!(deactivations.len(), 1, "{deactivations:?}");
    let row = &deactivations[0];
    assert_eq!(row.business_id.as_deref(), Some(app.business.id.as_str()));
    assert_eq!(row.actor_key_id.as_deref(), Some(key_id.as_str()));
    assert_eq!(row.client_addr.as_deref(), Some("127.0.0.10"));
    assert_eq!(row.mode, Some(Mode::Test));
    let number = account["accountNumber"].as_str().unwrap();
    assert_eq!(
        row.target.as_deref(),
        Some(format!("{account_id} ({number})").as_str())
    );
    assert_eq!(row.detail.as_deref(), Some("customer left"));

    let team = team_page(&app).await;
    for shown in [
        "Requested a payout",
        "₦5,000.00 to Guaranty Trust Bank",
        "Deactivated a virtual account",
        "customer left",
        "127.0.0.9",
        "127.0.0.10",
    ] {
        assert!(team.contains(shown), "no {shown:?} on the Team page");
    }
    assert!(
        team.matches(&format!("API key {key_id}")).count() >= 3,
        "the payout, the deactivation and the settlement account, as the key's"
    );
}

/// docs/api/idempotency.md's exactly-once rules hold for the audit log too: a replay (the same key,
/// after or at the same time) and a repeated reference create nothing, and record nothing.
async fn a_replayed_payout_is_audited_once(backend: Backend) {
    let app = spawn_app(backend).await;
    ready_to_pay(&app).await;
    let client = client_from("127.0.0.9");
    let body = json!({"amount": 100_000, "reference": "inv-7"});
    let first = pay_from(&app, &client, "po-1", &body).await;
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    let replays = (0..5).map(|_| pay_from(&app, &client, "po-1", &body));
    for replay in futures::future::join_all(replays).await {
        assert_eq!(replay.status(), StatusCode::ACCEPTED);
        assert_eq!(replay.headers()["idempotent-replayed"], "true");
    }
    let same_reference = pay_from(&app, &client, "po-2", &body).await;
    assert_eq!(same_reference.status(), StatusCode::OK);
    assert_eq!(
        app.balance(app.test_key()).await["available"],
        900_000,
        "one payout"
    );
    let rows = rows_of(&app, AuditAction::PayoutCreated).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].times, 1);
}

/// Waits, if need be, for a minute with at least `secs` seconds left: refusals are folded per
/// minute, and the attempts below must all fall in one.
async fn with_seconds_left_in_the_minute(secs: u32) {
    let second = chrono::Utc::now().second();
    if second + secs >= 60 {
        tokio::time::sleep(Duration::from_secs(u64::from(61 - second))).await;
    }
}

/// docs/dashboard.md: every locked sign-in is recorded, those refused after the lock too (the right
/// password's included: it is not even checked), a flood from one address as one row a minute
/// with its count, which the Team page shows.
async fn sign_ins_refused_while_locked_are_recorded_with_a_count(backend: Backend) {
    const FLOOD: usize = 30;
    let app = spawn_app_with(backend, |c| c.dashboard.sign_ins_per_minute = 200).await;
    let (email, password) = add_user(&app, Role::Developer).await;
    let user = stored_user(&app, &email).await;
    with_seconds_left_in_the_minute(40).await;
    for _ in 0..4 {
        assert_eq!(sign_in_status(&app, &email, "not the password").await, 401);
    }
    assert_eq!(sign_in_status(&app, &email, "not the password").await, 429);
    assert!(rows_of(&app, AuditAction::SignInRefused).await.is_empty());

    // The right password first, then a flood at once: all refused, all counted in one row.
    assert_eq!(sign_in_status(&app, &email, &password).await, 429);
    let flood = (1..FLOOD).map(|n| {
        let (app, email) = (&app, &email);
        async move { sign_in_status(app, email, &format!("guess {n}")).await }
    });
    for status in futures::future::join_all(flood).await {
        assert_eq!(status, 429);
    }
    let refused = rows_of(&app, AuditAction::SignInRefused).await;
    assert_eq!(refused.len(), 1, "{refused:?}");
    let row = &refused[0];
    assert_eq!(row.times, FLOOD as i32);
    assert_eq!(row.business_id.as_deref(), Some(app.business.id.as_str()));
    assert_eq!(row.actor_user_id.as_deref(), Some(user.id.as_str()));
    assert_eq!(row.client_addr.as_deref(), Some("127.0.0.1"));
    assert_eq!(rows_of(&app, AuditAction::SignInLocked).await.len(), 1);
    let text = format!("{row:?}");
    assert!(
        !text.contains(&password) && !text.contains("guess"),
        "{text}"
    );

    let team = team_page(&app).await;
    assert!(team.contains("Sign-in refused while locked"), "{team}");
    assert!(team.contains(&format!("{FLOOD} times")), "{team}");
}

/// The code form's refusals too: a second browser half-way through signing in (password given,
/// code to come) when the first locks the e-mail with wrong codes.
async fn a_code_refused_while_locked_is_recorded(backend: Backend) {
    let app = spawn_app(backend).await;
    let (email, password) = add_user(&app, Role::Owner).await;
    let user = stored_user(&app, &email).await;
    let mut owner = Http::new(&app);
    owner.sign_in(&email, &password).await;
    let started = owner
        .submit(
            "/dashboard/profile",
            "/dashboard/profile/totp/start",
            &[("mode", "test")],
        )
        .await;
    let page = owner.follow(started).await;
    let start = page.body.find(r#"<code class="secret">"#).unwrap() + 21;
    let end = page.body[start..].find("</code>").unwrap();
    let secret = page.body[start..start + end].replace(' ', "");
    let totp = api::dashboard::auth::totp(&secret, &email).unwrap();
    let now = chrono::Utc::now().timestamp() as u64;
    let code = totp.generate(now).to_string();
    let confirmed = owner
        .submit(
            "/dashboard/profile",
            "/dashboard/profile/totp/confirm",
            &[("mode", "test"), ("code", &code), ("password", &password)],
        )
        .await;
    owner
        .assert_done(confirmed, "Two-step verification is on")
        .await;

    let (mut first, mut second) = (Http::new(&app), Http::new(&app));
    for browser in [&mut first, &mut second] {
        let answer = browser.sign_in_answer(&email, &password).await;
        assert!(answer.location().starts_with("/dashboard/sign-in/code"));
    }
    let second_token = second.form_token_of("/dashboard/sign-in/code").await;
    let first_token = first.form_token_of("/dashboard/sign-in/code").await;
    let wrong = (0..1_000_000)
        .map(|n| format!("{n:06}"))
        .find(|c| (0..3).all(|k| *c != totp.generate(now + 30 * k).to_string()))
        .unwrap();
    for _ in 0..4 {
        let refused = first
            .post_form("/dashboard/sign-in/code", &first_token, &[("code", &wrong)])
            .await;
        assert_eq!(refused.status, 401);
    }
    let locked = first
        .post_form("/dashboard/sign-in/code", &first_token, &[("code", &wrong)])
        .await;
    assert_eq!(locked.location(), "/dashboard/sign-in?locked=1");
    assert!(rows_of(&app, AuditAction::SignInRefused).await.is_empty());

    let fresh = totp.generate(now + 30).to_string();
    let refused = second
        .post_form(
            "/dashboard/sign-in/code",
            &second_token,
            &[("code", &fresh)],
        )
        .await;
    assert_eq!(refused.location(), "/dashboard/sign-in?locked=1");
    let rows = rows_of(&app, AuditAction::SignInRefused).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].times, 1);
    assert_eq!(rows[0].actor_user_id.as_deref(), Some(user.id.as_str()));
    assert_eq!(
        rows[0].business_id.as_deref(),
        Some(app.business.id.as_str())
    );
    assert_eq!(rows[0].client_addr.as_deref(), Some("127.0.0.1"));
}
