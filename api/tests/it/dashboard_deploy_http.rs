//! The dashboard as deployed: cookies `Secure` and `__Host-` named from the configured
//! public URL (never from `Host`), client addresses through trusted proxies in the audit log, a
//! section typed without its mode redirected to test mode, and settlement-account changes in
//! the audit log from the dashboard and the API. Over plain HTTP; dashboard_deploy_browser.rs
//! checks the cookies and the redirect in Chromium.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use crypto::Cipher;
use domain::keys::hash_secret_key;
use domain::{AuditAction, Mode, Role};
use entities::{api_key, audit_entry};
use reqwest::StatusCode;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use serde_json::json;
use store::audit::AuditEntry;
use test_support::dashboard::{Answer, Http, add_user, form_token};
use test_support::{Backend, TestApp, spawn_app, spawn_app_with};

test_support::on_both_databases!(
    an_https_public_url_makes_every_cookie_secure_and_host_prefixed,
    api_serve_without_a_public_url_sends_secure_cookies,
    api_dev_on_loopback_sends_plain_cookies,
    a_section_without_its_mode_redirects_to_test_mode,
    audit_rows_record_the_forwarded_client_only_through_a_trusted_proxy,
    settlement_changes_are_audited_from_the_dashboard_and_the_api,
);

const PUBLIC_URL: &str = "https://vas.example.com";

/// The attributes of a `Set-Cookie` value, lower-cased names; the first is `name=value`.
fn attributes(set_cookie: &str) -> Vec<String> {
    set_cookie
        .split(';')
        .skip(1)
        .map(|a| a.trim().to_ascii_lowercase())
        .collect()
}

/// The one `Set-Cookie` of an answer for cookie `name`.
fn set_cookie_of(answer: &Answer, name: &str) -> String {
    let all = answer.set_cookies();
    let found: Vec<&String> = all
        .iter()
        .filter(|c| c.starts_with(&format!("{name}=")))
        .collect();
    assert_eq!(found.len(), 1, "one {name} in {all:?}");
    found[0].clone()
}

fn assert_host_prefixed(set_cookie: &str) {
    let attrs = attributes(set_cookie);
    assert!(set_cookie.starts_with("__Host-"), "{set_cookie}");
    assert!(attrs.contains(&"secure".into()), "Secure: {set_cookie}");
    assert!(attrs.contains(&"path=/".into()), "Path=/: {set_cookie}");
    assert!(attrs.contains(&"httponly".into()), "{set_cookie}");
    assert!(attrs.contains(&"samesite=strict".into()), "{set_cookie}");
    assert!(
        !attrs.iter().any(|a| a.starts_with("domain")),
        "no Domain: {set_cookie}"
    );
}

fn assert_plain(set_cookie: &str) {
    let attrs = attributes(set_cookie);
    assert!(set_cookie.starts_with("vas_"), "{set_cookie}");
    assert!(!attrs.contains(&"secure".into()), "{set_cookie}");
    assert!(attrs.contains(&"path=/dashboard".into()), "{set_cookie}");
    assert!(attrs.contains(&"httponly".into()), "{set_cookie}");
}

/// The sign-in form then its POST, with the `Http` cookie jar (whatever the cookies are named).
async fn sign_in(http: &mut Http, email: &str, password: &str) -> (Answer, Answer) {
    let form = http.get("/dashboard/sign-in").await;
    assert_eq!(form.status, 200);
    let token = form.form_token();
    let posted = http
        .post_form(
            "/dashboard/sign-in",
            &token,
            &[("email", email), ("password", password), ("next", "")],
        )
        .await;
    (form, posted)
}

/// Behind a TLS proxy forwarding `Host: 127.0.0.1` over plain HTTP (nginx's default), which is
/// exactly what this test's requests look like: the configured https address decides.
async fn an_https_public_url_makes_every_cookie_secure_and_host_prefixed(backend: Backend) {
    let app = spawn_app_with(backend, |c| {
        c.dashboard.public_url = Some(PUBLIC_URL.into())
    })
    .await;
    let (email, password) = add_user(&app, Role::Owner).await;
    let mut http = Http::new(&app);
    let (form, signed_in) = sign_in(&mut http, &email, &password).await;
    assert_host_prefixed(&set_cookie_of(&form, "__Host-vas_signin"));
    assert_eq!(signed_in.status, 303, "{}", signed_in.body);
    let session = set_cookie_of(&signed_in, "__Host-vas_session");
    assert_host_prefixed(&session);
    assert_host_prefixed(&set_cookie_of(&signed_in, "__Host-vas_signin"));
    assert!(!http.cookies.contains_key("__Host-vas_signin"), "cleared");
    let token = http.cookies["__Host-vas_session"].clone();

    let page = http.get("/dashboard/test/accounts").await;
    assert_eq!(page.status, 200, "the prefixed cookie signs in");

    // The same token under the unprefixed name (as a sibling host or a plain-HTTP attacker
    // could plant it) is not a session.
    let planted = client_from("127.0.0.1")
        .get(app.url("/dashboard/test/accounts"))
        .header("cookie", format!("vas_session={token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(planted.status(), StatusCode::SEE_OTHER);
    assert!(
        planted.headers()["location"]
            .to_str()
            .unwrap()
            .starts_with("/dashboard/sign-in")
    );

    // Signing out clears the prefixed cookie, as sent.
    let page = http.get("/dashboard/test/accounts").await;
    let out = http
        .post_form("/dashboard/sign-out", &page.form_token(), &[])
        .await;
    let cleared = set_cookie_of(&out, "__Host-vas_session");
    assert_host_prefixed(&cleared);
    assert!(attributes(&cleared).contains(&"max-age=0".into()));
    assert!(!http.cookies.contains_key("__Host-vas_session"));
}

/// `api serve` (no `api dev` loopback exception) with no public URL: secure by default, even
/// when reached as `http://127.0.0.1`.
async fn api_serve_without_a_public_url_sends_secure_cookies(backend: Backend) {
    let app = spawn_app(backend).await;
    assert!(app.config.dashboard.public_url.is_none());
    let cipher = Arc::new(Cipher::new(&app.crypto_key, &[]).unwrap());
    let state = api::AppState::new(
        app.db.clone(),
        cipher,
        app.config.clone(),
        app.relay.clone(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = api::router(state).into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, service).await.unwrap() });
    let mut http = Http::at(&format!("http://{addr}"));
    let form = http.get("/dashboard/sign-in").await;
    assert_host_prefixed(&set_cookie_of(&form, "__Host-vas_signin"));
}

/// The test app runs as `api dev` does, on loopback: plain cookies (a browser on this machine
/// would keep `Secure` ones, but `api dev` is the documented exception).
async fn api_dev_on_loopback_sends_plain_cookies(backend: Backend) {
    let app = spawn_app(backend).await;
    let (email, password) = add_user(&app, Role::Viewer).await;
    let mut http = Http::new(&app);
    let (form, signed_in) = sign_in(&mut http, &email, &password).await;
    assert_plain(&set_cookie_of(&form, "vas_signin"));
    assert_eq!(signed_in.status, 303);
    assert_plain(&set_cookie_of(&signed_in, "vas_session"));
    assert_plain(&set_cookie_of(&signed_in, "vas_signin"));
    assert!(
        signed_in
            .set_cookies()
            .iter()
            .all(|c| !c.contains("__Host-"))
    );
}

async fn a_section_without_its_mode_redirects_to_test_mode(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut anonymous = Http::new(&app);
    for (path, to) in [
        ("/dashboard/accounts", "/dashboard/test/accounts"),
        (
            "/dashboard/accounts?q=ada&status=active",
            "/dashboard/test/accounts?q=ada&status=active",
        ),
        (
            "/dashboard/accounts/va_01ABC",
            "/dashboard/test/accounts/va_01ABC",
        ),
        (
            "/dashboard/deposits?q=REF-1",
            "/dashboard/test/deposits?q=REF-1",
        ),
        (
            "/dashboard/deposits/export",
            "/dashboard/test/deposits/export",
        ),
        ("/dashboard/events", "/dashboard/test/events"),
        ("/dashboard/balance", "/dashboard/test/balance"),
        ("/dashboard/developers", "/dashboard/test/developers"),
        ("/dashboard/team?page=2", "/dashboard/test/team?page=2"),
        ("/dashboard/test", "/dashboard/test/"),
        ("/dashboard/live", "/dashboard/live/"),
    ] {
        let answer = anonymous.get(path).await;
        assert_eq!(answer.status, 303, "{path}");
        assert_eq!(answer.location(), to, "{path}");
        assert_eq!(answer.header("x-content-type-options"), "nosniff", "{path}");
    }
    // Not a section: still "Page not found"; nor is anything but a GET redirected.
    let unknown = anonymous.get("/dashboard/nonsense").await;
    assert_eq!(unknown.status, 404);
    assert!(unknown.body.contains("Page not found"));
    let posted = client_from("127.0.0.1")
        .post(app.url("/dashboard/accounts"))
        .send()
        .await
        .unwrap();
    assert_ne!(posted.status(), StatusCode::SEE_OTHER);

    // Signed in, the redirect lands on the page.
    let (email, password) = add_user(&app, Role::Owner).await;
    let mut http = Http::new(&app);
    http.sign_in(&email, &password).await;
    let first = http.get("/dashboard/deposits?q=REF-1").await;
    let landed = http.follow(first).await;
    assert_eq!(landed.status, 200);
    assert!(landed.body.contains("Deposits"), "{}", landed.body);
}

/// A client whose connections come from `ip` (any address of 127.0.0.0/8 is this machine),
/// keeping no cookies and following no redirects.
fn client_from(ip: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(ip.parse::<IpAddr>().unwrap())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Signs in from `client`, every request carrying `X-Forwarded-For: forwarded`.
async fn sign_in_forwarded(
    app: &TestApp,
    client: &reqwest::Client,
    forwarded: &str,
    email: &str,
    password: &str,
) {
    let form = client
        .get(app.url("/dashboard/sign-in"))
        .header("x-forwarded-for", forwarded)
        .send()
        .await
        .unwrap();
    let cookie = form.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let token = form_token(&form.text().await.unwrap()).expect("a form token");
    let posted = client
        .post(app.url("/dashboard/sign-in"))
        .header("x-forwarded-for", forwarded)
        .header("cookie", cookie)
        .form(&[
            ("form_token", token.as_str()),
            ("email", email),
            ("password", password),
            ("next", ""),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), StatusCode::SEE_OTHER);
}

async fn rows_of(app: &TestApp, action: AuditAction) -> Vec<AuditEntry> {
    audit_entry::Entity::find()
        .filter(audit_entry::Column::BusinessId.eq(&app.business.id))
        .filter(audit_entry::Column::Action.eq(action))
        .all(&app.db)
        .await
        .unwrap()
}

/// docs/operations/processes-and-configuration.md: only a configured proxy's `X-Forwarded-For` is
/// believed, and then its right-most untrusted entry (the left ones are the client's own words).
async fn audit_rows_record_the_forwarded_client_only_through_a_trusted_proxy(backend: Backend) {
    let app = spawn_app_with(backend, |c| {
        c.http.trusted_proxies = "127.0.0.7, 10.0.0.0/8".parse().unwrap();
    })
    .await;
    let (email, password) = add_user(&app, Role::Viewer).await;
    let proxy = client_from("127.0.0.7");
    sign_in_forwarded(
        &app,
        &proxy,
        "198.51.100.66, 203.0.113.7, 10.1.1.1",
        &email,
        &password,
    )
    .await;
    let untrusted = client_from("127.0.0.8");
    sign_in_forwarded(&app, &untrusted, "203.0.113.8", &email, &password).await;
    let mut addrs: Vec<Option<String>> = rows_of(&app, AuditAction::SignedIn)
        .await
        .into_iter()
        .map(|r| r.client_addr)
        .collect();
    addrs.sort();
    assert_eq!(
        addrs,
        vec![Some("127.0.0.8".to_owned()), Some("203.0.113.7".to_owned())]
    );
}

/// The settlement form of the balance page, filled.
async fn change_settlement_in_dashboard(http: &mut Http, number: &str, password: &str) -> Answer {
    let page = http.get("/dashboard/test/balance").await;
    assert_eq!(page.status, 200);
    let token = page.form_token();
    http.post_form(
        "/dashboard/test/balance/settlement-account",
        token.as_str(),
        &[
            ("bankCode", "058"),
            ("accountNumber", number),
            ("schedule", "daily"),
            ("password", password),
        ],
    )
    .await
}

async fn settlement_changes_are_audited_from_the_dashboard_and_the_api(backend: Backend) {
    let app = spawn_app(backend).await;
    let (email, password) = add_user(&app, Role::Owner).await;
    let mut http = Http::new(&app);
    http.sign_in(&email, &password).await;
    let first = domain::nuban::account_number("058", 12_345_678).unwrap();
    let changed = change_settlement_in_dashboard(&mut http, &first, &password).await;
    assert_eq!(changed.status, 303, "{}", changed.body);
    // A wrong password changes nothing, and records no change.
    let refused = change_settlement_in_dashboard(&mut http, &first, "not the password").await;
    assert_eq!(refused.status, 422);

    let second = domain::nuban::account_number("058", 87_654_321).unwrap();
    let put = client_from("127.0.0.9")
        .put(app.url("/v1/settlement-account"))
        .bearer_auth(app.test_key())
        .json(&json!({"bankCode": "058", "accountNumber": second, "schedule": "manual"}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), StatusCode::OK);

    let mut rows = rows_of(&app, AuditAction::SettlementAccountChanged).await;
    rows.sort_by_key(|r| r.created_at);
    assert_eq!(rows.len(), 2, "{rows:?}");
    let (dashboard, api_row) = (&rows[0], &rows[1]);
    assert_eq!(dashboard.actor_email.as_deref(), Some(email.as_str()));
    assert_eq!(dashboard.actor_key_id, None);
    assert_eq!(dashboard.mode, Some(Mode::Test));
    assert_eq!(dashboard.client_addr.as_deref(), Some("127.0.0.1"));
    assert_eq!(
        dashboard.target.as_deref(),
        Some(format!("Guaranty Trust Bank …{}", &first[6..]).as_str())
    );
    assert_eq!(dashboard.detail.as_deref(), Some("daily payouts"));

    let key = api_key::Entity::find()
        .filter(api_key::Column::KeyHash.eq(hash_secret_key(app.test_key())))
        .one(&app.db)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(api_row.actor_key_id.as_deref(), Some(key.id.as_str()));
    assert_eq!(api_row.actor_email, None);
    assert_eq!(api_row.actor_user_id, None);
    assert_eq!(api_row.client_addr.as_deref(), Some("127.0.0.9"));
    assert_eq!(
        api_row.target.as_deref(),
        Some(format!("Guaranty Trust Bank …{}", &second[6..]).as_str())
    );
    // Never the whole number (nor the account's name) in the log.
    for row in &rows {
        let text = format!("{:?} {:?}", row.target, row.detail);
        assert!(!text.contains(&first) && !text.contains(&second), "{text}");
        assert!(!text.to_lowercase().contains("acme"), "{text}");
    }
    // The owner reads both on the Team page, the API's as its key.
    let team = http.get("/dashboard/test/team").await;
    assert_eq!(team.status, 200);
    assert_eq!(
        team.body.matches("Changed the settlement account").count(),
        2
    );
    assert!(
        team.body.contains(&format!("API key {}", key.id)),
        "{}",
        team.body
    );
}
