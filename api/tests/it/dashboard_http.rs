//! The dashboard over plain HTTP: its protections (form tokens, headers, cookies, the lockout,
//! sessions), tenancy, roles, and that no secret reaches a page. The browser tests
//! (dashboard_browser.rs) drive the same pages in Chromium.

use domain::ids::BusinessId;
use std::time::Duration;

use ::store::businesses;
use crypto::Cipher;
use domain::keys::sha256_hex;
use domain::{KybStatus, Role};
use sea_orm::{ConnectionTrait, Statement};
use serde_json::Value;
use test_support::dashboard::{
    Http, SESSION_COOKIE, add_user, add_user_to, assert_no_secret_seen, sign_in_status, stored_user,
};
use test_support::{Backend, account_body, id_of, json, spawn_app, spawn_app_with, store};

test_support::on_both_databases!(
    a_post_without_its_form_token_is_refused,
    the_json_api_never_takes_the_session_cookie,
    the_session_cookie_is_a_hashed_256_bit_token_with_strict_attributes,
    every_dashboard_response_carries_the_security_headers,
    five_failures_lock_an_email_with_the_same_answer_whether_or_not_it_exists,
    a_full_browse_shows_no_identity_number_or_secret,
    one_business_never_sees_another_businesses_accounts,
    sessions_end_when_idle_and_at_sign_out,
    changing_the_password_ends_the_other_sessions,
    roles_gate_pages_and_navigation,
    live_mode_appears_once_kyb_is_approved,
    totp_secrets_are_sealed_and_codes_work_once,
    accounts_list_searches_filters_and_pages_like_the_api,
    the_migration_gives_existing_events_their_account,
    failed_and_locked_sign_ins_are_audited_with_the_address,
    sign_ins_are_limited_per_client_address,
    sign_in_attempts_that_are_over_are_purged,
    the_sign_in_migration_keeps_audit_rows_and_counts,
);

async fn a_post_without_its_form_token_is_refused(backend: Backend) {
    let app = spawn_app(backend).await;
    let (email, password) = add_user(&app, Role::Owner).await;

    // Before signing in: the sign-in form itself needs its token.
    let mut anon = Http::new(&app);
    anon.get("/dashboard/sign-in").await;
    let refused = anon
        .post(
            "/dashboard/sign-in",
            &[("email", &email), ("password", &password)],
        )
        .await;
    assert_eq!(refused.status, 403);
    assert!(!anon.cookies.contains_key(SESSION_COOKIE), "not signed in");

    let mut http = Http::new(&app);
    http.sign_in(&email, &password).await;
    let page = http.get("/dashboard/test/accounts").await;
    assert_eq!(page.status, 200);
    let token = page.form_token();

    for fields in [
        vec![],
        vec![("form_token", "")],
        vec![("form_token", "0000")],
        // Another session's token is not this one's.
        vec![("form_token", token.as_str())],
    ] {
        let mut other = Http::new(&app);
        other.sign_in(&email, &password).await;
        let answer = other.post("/dashboard/sign-out", &fields).await;
        if fields.is_empty() || fields[0].1 != token {
            assert_eq!(answer.status, 403, "{fields:?}");
        } else {
            assert_eq!(answer.status, 403, "another session's token");
        }
        assert!(answer.body.contains("This form has expired"));
        // Nothing happened: that session is still signed in.
        assert_eq!(other.get("/dashboard/test/accounts").await.status, 200);
    }
    for path in [
        "/dashboard/profile/password",
        "/dashboard/profile/totp/start",
        "/dashboard/profile/totp/remove",
    ] {
        let answer = http.post(path, &[("mode", "test")]).await;
        assert_eq!(answer.status, 403, "{path}");
    }
    // With its token, the same POST works.
    let out = http.post_form("/dashboard/sign-out", &token, &[]).await;
    assert_eq!(out.status, 303);
    assert_eq!(
        http.get("/dashboard/test/accounts").await.status,
        303,
        "signed out"
    );
}

async fn the_json_api_never_takes_the_session_cookie(backend: Backend) {
    let app = spawn_app(backend).await;
    let (email, password) = add_user(&app, Role::Owner).await;
    let mut http = Http::new(&app);
    http.sign_in(&email, &password).await;
    let cookie = format!("{SESSION_COOKIE}={}", http.cookies[SESSION_COOKIE]);

    for path in ["/v1/virtual-accounts", "/virtual-accounts", "/v1/events"] {
        let resp = app
            .client
            .get(app.url(path))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 401, "{path}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["code"], "unauthorized");
    }
    // A browser request (Origin) is refused by the API even with the cookie and a real key...
    let resp = app
        .client
        .get(app.url("/v1/virtual-accounts"))
        .header("cookie", &cookie)
        .header("origin", &app.base)
        .bearer_auth(app.test_key())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["code"], "browser_request_refused");
    // ...while the dashboard takes browsers' requests: its form posts carry an Origin.
    let page = http.get("/dashboard/test/accounts").await;
    let answer = http
        .post_form(
            "/dashboard/profile/totp/start",
            &page.form_token(),
            &[("mode", "test")],
        )
        .await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    // And the dashboard never takes a secret key.
    let resp = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(app.url("/dashboard/test/accounts"))
        .bearer_auth(app.test_key())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 303);
    assert!(
        resp.headers()["location"]
            .to_str()
            .unwrap()
            .starts_with("/dashboard/sign-in")
    );
}

async fn the_session_cookie_is_a_hashed_256_bit_token_with_strict_attributes(backend: Backend) {
    let app = spawn_app(backend).await;
    let (email, password) = add_user(&app, Role::Viewer).await;
    let mut http = Http::new(&app);
    let answer = http.sign_in_answer(&email, &password).await;
    assert_eq!(answer.status, 303);
    let cookie = answer
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("vas_session="))
        .expect("a session cookie");
    let attributes: Vec<&str> = cookie.split("; ").collect();
    assert!(attributes.contains(&"HttpOnly"), "{cookie}");
    assert!(attributes.contains(&"SameSite=Strict"), "{cookie}");
    assert!(attributes.contains(&"Path=/dashboard"), "{cookie}");
    assert!(
        !attributes.contains(&"Secure"),
        "plain HTTP on a loopback address: {cookie}"
    );
    let token = http.cookies[SESSION_COOKIE].clone();
    assert_eq!(token.len(), 43, "256 bits, base64url");

    // Stored only as its SHA-256.
    let stored = app
        .db
        .query_one_raw(Statement::from_string(
            app.db.get_database_backend(),
            "SELECT token_hash FROM dashboard_sessions",
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get::<String>("", "token_hash")
        .unwrap();
    assert_eq!(stored, sha256_hex(&token));
    let raw = app.test_db.raw_contents();
    assert!(
        !String::from_utf8_lossy(&raw).contains(&token),
        "the token is not stored"
    );
    assert!(!String::from_utf8_lossy(&raw).contains(&password));

    // What the request says about itself decides nothing: configuration does
    // (dashboard_deploy_http.rs covers an https public URL), so neither a public `Host` nor
    // `X-Forwarded-Proto` changes the cookie of this app, which runs as `api dev` on loopback.
    let page = app
        .client
        .get(app.url("/dashboard/sign-in"))
        .header("host", "dashboard.example.com")
        .header("x-forwarded-proto", "https")
        .send()
        .await
        .unwrap();
    let signin_cookie = page.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(signin_cookie.starts_with("vas_signin="), "{signin_cookie}");
    assert!(!signin_cookie.contains("Secure"), "{signin_cookie}");
}

async fn every_dashboard_response_carries_the_security_headers(backend: Backend) {
    let app = spawn_app(backend).await;
    let (email, password) = add_user(&app, Role::Viewer).await;
    let mut http = Http::new(&app);
    let mut answers = vec![
        ("sign-in page", http.get("/dashboard/sign-in").await),
        (
            "redirect to sign-in",
            http.get("/dashboard/test/accounts").await,
        ),
        ("refused form", http.post("/dashboard/sign-out", &[]).await),
        (
            "stylesheet",
            http.get("/dashboard/assets/dashboard.css").await,
        ),
        ("unknown page", http.get("/dashboard/nothing/here").await),
        ("bare /dashboard", http.get("/dashboard").await),
        ("wrong method", http.post("/dashboard/profile", &[]).await),
    ];
    let signed_in = http.sign_in_answer(&email, &password).await;
    answers.push(("sign-in redirect", signed_in));
    answers.push(("accounts", http.get("/dashboard/test/accounts").await));
    answers.push((
        "account 404",
        http.get("/dashboard/test/accounts/va_nope").await,
    ));
    answers.push((
        "live before KYB",
        http.get("/dashboard/live/accounts").await,
    ));
    answers.push(("role refusal", http.get("/dashboard/test/developers").await));
    answers.push(("profile", http.get("/dashboard/profile").await));
    for (what, answer) in &answers {
        assert_eq!(
            answer.header("content-security-policy"),
            "default-src 'self'; frame-ancestors 'none'",
            "{what}"
        );
        assert_eq!(answer.header("x-content-type-options"), "nosniff", "{what}");
        assert_eq!(answer.header("referrer-policy"), "same-origin", "{what}");
        assert_eq!(answer.header("cache-control"), "no-store", "{what}");
        assert!(
            answer.header("access-control-allow-origin").is_empty(),
            "{what}: no CORS"
        );
    }
    let put = app
        .client
        .put(app.url("/dashboard/sign-in"))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 405);
    assert_eq!(put.headers()["cache-control"], "no-store");
    assert_eq!(
        put.headers()["content-security-policy"],
        "default-src 'self'; frame-ancestors 'none'"
    );
    let statuses: Vec<u16> = answers.iter().map(|(_, a)| a.status).collect();
    assert_eq!(
        statuses,
        vec![
            200, 303, 403, 200, 404, 303, 405, 303, 200, 404, 403, 403, 200
        ]
    );
    assert!(answers[3].1.header("content-type").starts_with("text/css"));
    // Pages are HTML that works without scripts: no script anywhere, no inline style.
    for (what, answer) in &answers {
        assert!(!answer.body.contains("<script"), "{what}");
        assert!(
            !answer.body.contains("style=\""),
            "{what}: the CSP refuses inline style"
        );
    }
}

/// The sign-in page's answer without what differs per request (the form token, the e-mail typed).
fn comparable(body: &str, email: &str) -> String {
    let token = test_support::dashboard::form_token(body).unwrap_or_default();
    body.replace(&token, "TOKEN").replace(email, "EMAIL")
}

async fn five_failures_lock_an_email_with_the_same_answer_whether_or_not_it_exists(
    backend: Backend,
) {
    let app = spawn_app(backend).await;
    let (email, password) = add_user(&app, Role::Owner).await;
    let unknown = "nobody-here@example.com";
    let mut known_http = Http::new(&app);
    let mut unknown_http = Http::new(&app);
    for attempt in 1..=5 {
        let k = known_http
            .sign_in_answer(&email, "wrong password here")
            .await;
        let u = unknown_http
            .sign_in_answer(unknown, "wrong password here")
            .await;
        assert_eq!(k.status, u.status, "attempt {attempt}");
        assert_eq!(
            comparable(&k.body, &email),
            comparable(&u.body, unknown),
            "attempt {attempt}: the same answer"
        );
        let expected = if attempt < 5 { 401 } else { 429 };
        assert_eq!(k.status, expected, "attempt {attempt}");
    }
    // Locked: even the right password is refused, with the same page as for the unknown e-mail.
    let k = known_http.sign_in_answer(&email, &password).await;
    let u = unknown_http.sign_in_answer(unknown, &password).await;
    assert_eq!((k.status, u.status), (429, 429));
    assert!(k.body.contains("Too many failed attempts"));
    assert_eq!(comparable(&k.body, &email), comparable(&u.body, unknown));
    assert!(!known_http.cookies.contains_key(SESSION_COOKIE));
    // The lock is per e-mail, typed in any case.
    let shouted = known_http
        .sign_in_answer(&email.to_uppercase(), &password)
        .await;
    assert_eq!(shouted.status, 429);
    let (other, other_password) = add_user(&app, Role::Viewer).await;
    Http::new(&app).sign_in(&other, &other_password).await;

    // Fifteen minutes later it opens again (moved back in the database rather than waited for).
    store::end_sign_in_lockouts(&app.db).await;
    known_http.sign_in(&email, &password).await;
}

async fn a_full_browse_shows_no_identity_number_or_secret(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut bvns = Vec::new();
    let mut ids = Vec::new();
    for n in 0..3 {
        let body = account_body(n, "test-bank");
        bvns.push(body["customerBvn"].as_str().unwrap().to_owned());
        ids.push(id_of(&app.active_account(app.test_key(), n).await));
    }
    let mut nin_body = account_body(9, "test-bank");
    nin_body.as_object_mut().unwrap().remove("customerBvn");
    nin_body["customerNin"] = "33344455566".into();
    let resp = app.create(app.test_key(), "nin", &nin_body).await;
    assert_eq!(resp.status(), 201);
    ids.push(id_of(&json(resp).await));
    bvns.push("33344455566".into());
    // A deposit and a recheck, so the account page has every section filled.
    let deposit = app
        .post(
            app.test_key(),
            &format!("/v1/virtual-accounts/{}/simulate-deposit", ids[0]),
            Some(&serde_json::json!({"amount": 150000, "senderName": "Bola Ade", "narration": "rent"})),
        )
        .await;
    assert_eq!(deposit.status(), 202);
    let recheck = app
        .post(
            app.test_key(),
            &format!("/v1/virtual-accounts/{}/recheck", ids[0]),
            None,
        )
        .await;
    assert_eq!(recheck.status(), 202);
    tokio::time::sleep(Duration::from_millis(500)).await;
    app.approve_kyb().await;

    let (email, password) = add_user(&app, Role::Owner).await;
    let mut http = Http::new(&app);
    http.sign_in(&email, &password).await;
    // Enrol TOTP half-way, so the profile page shows what it shows then too.
    let page = http.get("/dashboard/profile").await;
    http.post_form(
        "/dashboard/profile/totp/start",
        &page.form_token(),
        &[("mode", "test")],
    )
    .await;
    let mut paths = vec!["/dashboard/".to_owned(), "/dashboard/profile".to_owned()];
    for mode in ["test", "live"] {
        for section in [
            "accounts",
            "deposits",
            "events",
            "balance",
            "developers",
            "team",
        ] {
            paths.push(format!("/dashboard/{mode}/{section}"));
        }
        paths.push(format!("/dashboard/{mode}/accounts?q=ada"));
        paths.push(format!("/dashboard/{mode}/accounts?status=active"));
    }
    for id in &ids {
        paths.push(format!("/dashboard/test/accounts/{id}"));
    }
    for path in &paths {
        let answer = http.get(path).await;
        let answer = http.follow(answer).await;
        assert_eq!(answer.status, 200, "{path}");
    }
    let account_page = http
        .get(&format!("/dashboard/test/accounts/{}", ids[0]))
        .await;
    assert!(
        account_page.body.contains("₦1,500.00"),
        "the deposit is listed"
    );
    assert!(account_page.body.contains("deposit.received"));
    assert!(account_page.body.contains("BVN on file"));

    let session_token = http.cookies[SESSION_COOKIE].clone();
    assert_no_secret_seen(&http, &app, &password, &bvns);
    for body in &http.seen {
        assert!(!body.contains("sk_test_") || body.contains("sk_test_…"));
        assert!(!body.contains("sk_live_") || body.contains("sk_live_…"));
    }
    let logs = test_support::captured_logs();
    assert!(!logs.contains(&password));
    assert!(!logs.contains(&session_token));
}

async fn one_business_never_sees_another_businesses_accounts(backend: Backend) {
    let app = spawn_app(backend).await;
    let cipher = Cipher::new(&app.crypto_key, &[]).unwrap();
    let other = businesses::create(&app.db, &cipher, "Other Co", KybStatus::Approved)
        .await
        .unwrap();
    let theirs = app
        .create(
            &other.test.secret_key,
            "theirs",
            &account_body(1, "test-bank"),
        )
        .await;
    assert_eq!(theirs.status(), 201);
    let theirs: Value = theirs.json().await.unwrap();
    let ours = app
        .create(app.test_key(), "ours", &account_body(2, "test-bank"))
        .await;
    let ours: Value = ours.json().await.unwrap();
    app.approve_kyb().await;

    let (email, password) = add_user(&app, Role::Owner).await;
    let mut http = Http::new(&app);
    http.sign_in(&email, &password).await;
    let list = http.get("/dashboard/test/accounts").await;
    assert!(list.body.contains(ours["id"].as_str().unwrap()));
    assert!(!list.body.contains(theirs["id"].as_str().unwrap()));
    assert!(
        !list
            .body
            .contains(theirs["customerEmail"].as_str().unwrap())
    );
    // Their customer's reference is searched for in vain.
    let search = http.get("/dashboard/test/accounts?q=user-1").await;
    assert!(search.body.contains("No accounts match"));
    // By id: exactly as an unknown id, in either mode.
    for path in [
        format!(
            "/dashboard/test/accounts/{}",
            theirs["id"].as_str().unwrap()
        ),
        format!(
            "/dashboard/live/accounts/{}",
            theirs["id"].as_str().unwrap()
        ),
        format!("/dashboard/live/accounts/{}", ours["id"].as_str().unwrap()),
        "/dashboard/test/accounts/va_01J00000000000000000000000".to_owned(),
        "/dashboard/test/accounts/%00".to_owned(),
    ] {
        let answer = http.get(&path).await;
        assert_eq!(answer.status, 404, "{path}");
        assert!(answer.body.contains("Account not found"), "{path}");
        assert!(
            !answer
                .body
                .contains(theirs["customerName"].as_str().unwrap())
        );
    }
    // Their user sees theirs and not ours.
    let (their_email, their_password) = add_user_to(&app, &other.id, Role::Viewer).await;
    let mut them = Http::new(&app);
    them.sign_in(&their_email, &their_password).await;
    let list = them.get("/dashboard/test/accounts").await;
    assert!(list.body.contains(theirs["id"].as_str().unwrap()));
    assert!(!list.body.contains(ours["id"].as_str().unwrap()));
    assert!(list.body.contains("Other Co"));
}

async fn sessions_end_when_idle_and_at_sign_out(backend: Backend) {
    let app = spawn_app_with(backend, |c| {
        c.dashboard.idle_timeout_secs = 2;
        c.dashboard.absolute_timeout_secs = 5;
    })
    .await;
    let (email, password) = add_user(&app, Role::Viewer).await;
    let mut http = Http::new(&app);
    http.sign_in(&email, &password).await;
    assert_eq!(http.get("/dashboard/test/accounts").await.status, 200);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let ended = http.get("/dashboard/test/accounts?q=x").await;
    assert_eq!(ended.status, 303);
    assert_eq!(
        ended.location(),
        "/dashboard/sign-in?next=%2Fdashboard%2Ftest%2Faccounts%3Fq%3Dx&ended=1"
    );
    assert!(!http.cookies.contains_key(SESSION_COOKIE), "cookie cleared");
    let page = http.follow(ended).await;
    assert!(page.body.contains("Your session ended"));

    // Busy, it still ends at the absolute limit.
    http.sign_in(&email, &password).await;
    for _ in 0..7 {
        tokio::time::sleep(Duration::from_millis(800)).await;
        let answer = http.get("/dashboard/test/accounts").await;
        if answer.status == 303 {
            assert!(answer.location().contains("ended=1"));
            break;
        }
    }
    assert_eq!(http.get("/dashboard/test/accounts").await.status, 303);
    assert_eq!(
        test_support::store::count_dashboard_sessions(&app.db).await,
        0,
        "ended sessions are deleted"
    );
}

async fn change_password(
    http: &mut Http,
    token: &str,
    current: &str,
    new: &str,
    confirm: &str,
) -> test_support::dashboard::Answer {
    http.post_form(
        "/dashboard/profile/password",
        token,
        &[
            ("mode", "test"),
            ("current", current),
            ("new", new),
            ("confirm", confirm),
        ],
    )
    .await
}

async fn changing_the_password_ends_the_other_sessions(backend: Backend) {
    let app = spawn_app(backend).await;
    let (email, password) = add_user(&app, Role::Developer).await;
    let mut here = Http::new(&app);
    let mut elsewhere = Http::new(&app);
    here.sign_in(&email, &password).await;
    elsewhere.sign_in(&email, &password).await;
    let token = here.form_token_of("/dashboard/profile").await;
    let new = "a brand new password";

    let short = change_password(&mut here, &token, &password, "short one", "short one").await;
    assert_eq!(short.status, 422);
    assert!(short.body.contains("too short"));
    let wrong = change_password(&mut here, &token, "not my password", new, new).await;
    assert_eq!(wrong.status, 422);
    assert!(wrong.body.contains("current password is not right"));
    let mismatch = change_password(&mut here, &token, &password, new, "something else!!").await;
    assert!(mismatch.body.contains("not the same"));
    assert_eq!(
        elsewhere.get("/dashboard/test/accounts").await.status,
        200,
        "refused changes end nothing"
    );

    let done = change_password(&mut here, &token, &password, new, new).await;
    here.assert_done(done, "Password changed").await;
    assert_eq!(here.get("/dashboard/test/accounts").await.status, 200);
    let ended = elsewhere.get("/dashboard/test/accounts").await;
    assert_eq!(ended.status, 303, "the other session ended");
    assert_eq!(sign_in_status(&app, &email, &password).await, 401);
    Http::new(&app).sign_in(&email, new).await;
}

async fn roles_gate_pages_and_navigation(backend: Backend) {
    let app = spawn_app(backend).await;
    let cases = [
        (Role::Viewer, 403, 403, false, false),
        (Role::Developer, 200, 403, true, false),
        (Role::Owner, 200, 200, true, true),
    ];
    for (role, developers, team, sees_developers, sees_team) in cases {
        let (email, password) = add_user(&app, role).await;
        let mut http = Http::new(&app);
        http.sign_in(&email, &password).await;
        let accounts = http.get("/dashboard/test/accounts").await;
        assert_eq!(accounts.status, 200, "{role}");
        assert_eq!(
            accounts.body.contains("/dashboard/test/developers"),
            sees_developers,
            "{role}"
        );
        assert_eq!(
            accounts.body.contains("/dashboard/test/team"),
            sees_team,
            "{role}"
        );
        assert!(accounts.body.contains(role.label()), "{role}");
        assert_eq!(
            http.get("/dashboard/test/developers").await.status,
            developers,
            "{role}"
        );
        let team_page = http.get("/dashboard/test/team").await;
        assert_eq!(team_page.status, team, "{role}");
        if team == 403 {
            assert!(team_page.body.contains("cannot open this page"));
        }
    }
}

async fn live_mode_appears_once_kyb_is_approved(backend: Backend) {
    let app = spawn_app(backend).await;
    let (email, password) = add_user(&app, Role::Owner).await;
    let mut http = Http::new(&app);
    http.sign_in(&email, &password).await;
    let test = http.get("/dashboard/test/accounts").await;
    assert!(
        !test.body.contains("/dashboard/live/"),
        "no live link before KYB"
    );
    assert!(test.body.contains("Live mode appears here once"));
    let live = http.get("/dashboard/live/accounts").await;
    assert_eq!(live.status, 403);
    assert!(live.body.contains("Live mode is not open yet"));

    app.approve_kyb().await;
    let test = http.get("/dashboard/test/accounts").await;
    assert!(test.body.contains("href=\"/dashboard/live/accounts\""));
    let live = http.get("/dashboard/live/accounts").await;
    assert_eq!(live.status, 200);
    assert!(live.body.contains("No live accounts yet"));
    assert!(
        live.body.contains("wema-bank"),
        "live curl example uses a live bank"
    );
    assert!(
        !live.body.contains("Test mode."),
        "no test banner in live mode"
    );
    assert_eq!(http.get("/dashboard/prod/accounts").await.status, 404);
}

async fn totp_secrets_are_sealed_and_codes_work_once(backend: Backend) {
    let app = spawn_app(backend).await;
    let (email, password) = add_user(&app, Role::Owner).await;
    let mut http = Http::new(&app);
    http.sign_in(&email, &password).await;
    let token = http.form_token_of("/dashboard/profile").await;
    let started = http
        .post_form("/dashboard/profile/totp/start", &token, &[("mode", "test")])
        .await;
    let page = http.follow(started).await;
    assert!(page.body.contains("<svg"), "the QR code is drawn inline");
    assert!(page.body.contains("otpauth://totp/"));
    let secret = secret_on(&page.body);
    assert!(
        !String::from_utf8_lossy(&app.test_db.raw_contents()).contains(&secret),
        "the TOTP secret is sealed at rest"
    );
    let totp = api::dashboard::auth::totp(&secret, &email).unwrap();
    let now = chrono::Utc::now().timestamp() as u64;
    let wrong = http
        .post_form(
            "/dashboard/profile/totp/confirm",
            &token,
            &[
                ("mode", "test"),
                ("code", "000000"),
                ("password", &password),
            ],
        )
        .await;
    assert_eq!(wrong.status, 422);
    let code = totp.generate(now).to_string();
    // Turning it on takes the password too: without it, or with a wrong one, it stays off.
    for typed in ["", "not my password at all"] {
        let refused = http
            .post_form(
                "/dashboard/profile/totp/confirm",
                &token,
                &[("mode", "test"), ("code", &code), ("password", typed)],
            )
            .await;
        assert_eq!(refused.status, 422, "password {typed:?}");
        assert!(refused.body.contains("Your password is not right"));
        let user = stored_user(&app, &email).await;
        assert!(!user.has_totp(), "password {typed:?}: still off");
    }
    let confirmed = http
        .post_form(
            "/dashboard/profile/totp/confirm",
            &token,
            &[("mode", "test"), ("code", &code), ("password", &password)],
        )
        .await;
    http.assert_done(confirmed, "Two-step verification is on")
        .await;

    // Signing in now takes the password, then a code; the code just used is refused.
    let mut next = Http::new(&app);
    let answer = next.sign_in_answer(&email, &password).await;
    assert_eq!(answer.status, 303);
    assert!(answer.location().starts_with("/dashboard/sign-in/code"));
    assert_eq!(
        next.get("/dashboard/test/accounts").await.status,
        303,
        "not signed in before the code"
    );
    let form_token = next.form_token_of("/dashboard/sign-in/code").await;
    let reused = next
        .post_form("/dashboard/sign-in/code", &form_token, &[("code", &code)])
        .await;
    assert_eq!(reused.status, 401, "a code is accepted once");
    let fresh = totp.generate(now + 30).to_string();
    let accepted = next
        .post_form("/dashboard/sign-in/code", &form_token, &[("code", &fresh)])
        .await;
    assert_eq!(accepted.status, 303, "{}", accepted.body);
    assert_eq!(next.get("/dashboard/test/accounts").await.status, 200);

    // Removing it takes the password.
    let token = next.form_token_of("/dashboard/profile").await;
    let refused = next
        .post_form(
            "/dashboard/profile/totp/remove",
            &token,
            &[("mode", "test"), ("password", "nope nope nope")],
        )
        .await;
    assert_eq!(refused.status, 422);
    let removed = next
        .post_form(
            "/dashboard/profile/totp/remove",
            &token,
            &[("mode", "test"), ("password", &password)],
        )
        .await;
    assert_eq!(removed.status, 303);
    Http::new(&app).sign_in(&email, &password).await;
}

/// The set-up key shown while enrolling, without its spaces.
fn secret_on(body: &str) -> String {
    let start = body.find(r#"<code class="secret">"#).unwrap() + r#"<code class="secret">"#.len();
    let end = body[start..].find("</code>").unwrap();
    body[start..start + end].replace(' ', "")
}

async fn accounts_list_searches_filters_and_pages_like_the_api(backend: Backend) {
    let app = spawn_app(backend).await;
    let (email, password) = add_user(&app, Role::Viewer).await;
    let mut http = Http::new(&app);
    http.sign_in(&email, &password).await;
    let empty = http.get("/dashboard/test/accounts").await;
    assert!(empty.body.contains("No test accounts yet"));
    assert!(
        empty
            .body
            .contains(&format!("curl {}/v1/virtual-accounts", app.base)),
        "the curl example names this API's address"
    );
    assert!(
        !empty
            .body
            .contains("<form method=\"post\" action=\"/dashboard/test/accounts")
    );

    for n in 0..30 {
        app.active_account(app.test_key(), n).await;
    }
    let deactivated = app
        .get(app.test_key(), "/v1/virtual-accounts?q=user-7")
        .await
        .json::<Value>()
        .await
        .unwrap()["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.deactivate(app.test_key(), &deactivated).await;

    let first = http.get("/dashboard/test/accounts").await;
    assert!(first.body.contains("1–25 of 30 accounts"), "{}", first.body);
    assert!(first.body.contains("Page 1 of 2"));
    assert!(first.body.contains(">Ada Obi 29</a>"), "newest first");
    let second = http.get("/dashboard/test/accounts?page=2").await;
    assert!(second.body.contains("26–30 of 30 accounts"));
    assert!(second.body.contains(">Ada Obi 0</a>"));
    // The same search as the API's q (case-insensitive, any of the searched fields).
    let api = app
        .get_json(app.test_key(), "/v1/virtual-accounts?q=ADA1&pageSize=100")
        .await;
    let search = http.get("/dashboard/test/accounts?q=ADA1").await;
    assert!(
        search
            .body
            .contains(&format!("of {} account", api["total"]))
    );
    for row in api["data"].as_array().unwrap() {
        assert!(search.body.contains(row["id"].as_str().unwrap()));
    }
    let filtered = http
        .get("/dashboard/test/accounts?status=deactivated")
        .await;
    assert!(filtered.body.contains("1–1 of 1 account"));
    assert!(filtered.body.contains(&deactivated));
    // Bad paging or search is not an error page.
    let odd = http
        .get("/dashboard/test/accounts?page=abc&pageSize=0&status=nope")
        .await;
    assert_eq!(odd.status, 200);
    let long = http
        .get(&format!("/dashboard/test/accounts?q={}", "x".repeat(201)))
        .await;
    assert_eq!(long.status, 200);
    assert!(long.body.contains("at most 200 characters"));
}

async fn the_migration_gives_existing_events_their_account(backend: Backend) {
    use sea_orm_migration::MigratorTrait;
    let test_db = test_support::TestDb::new(&backend).await;
    // Every migration before m0011 (the one under test), then rows as they were stored until then.
    let db = test_db.migrated_up_to("m0011").await;
    let now = "2026-01-02T03:04:05Z";
    db.execute_unprepared(&format!(
        "INSERT INTO businesses (id, name, kyb_status, created_at, updated_at) \
         VALUES ('biz_1', 'Acme', 'approved', '{now}', '{now}')"
    ))
    .await
    .unwrap();
    for (id, event_type, data) in [
        (
            "evt_1",
            "virtualaccount.active",
            r#"{"id":"va_1","object":"virtual_account"}"#,
        ),
        (
            "evt_2",
            "deposit.received",
            r#"{"id":"dep_1","object":"deposit","accountId":"va_2","account":{"id":"va_2"}}"#,
        ),
        ("evt_3", "webhook.test", r#"{"message":"hello"}"#),
    ] {
        db.execute_unprepared(&format!(
            "INSERT INTO events (id, business_id, mode, type, data, created_at) \
             VALUES ('{id}', 'biz_1', 'test', '{event_type}', '{data}', '{now}')"
        ))
        .await
        .unwrap();
    }
    migrations::Migrator::up(&db, None).await.unwrap();
    let backend_kind = db.get_database_backend();
    let rows = db
        .query_all_raw(Statement::from_string(
            backend_kind,
            "SELECT id, account_id FROM events ORDER BY id",
        ))
        .await
        .unwrap();
    let found: Vec<(String, Option<String>)> = rows
        .iter()
        .map(|r| {
            (
                r.try_get::<String>("", "id").unwrap(),
                r.try_get::<Option<String>>("", "account_id").unwrap(),
            )
        })
        .collect();
    assert_eq!(
        found,
        vec![
            ("evt_1".into(), Some("va_1".into())),
            ("evt_2".into(), Some("va_2".into())),
            ("evt_3".into(), None),
        ]
    );
    // New events get theirs when recorded.
    let event = ::store::events::record(
        &db,
        &BusinessId::unchecked("biz_1"),
        domain::Mode::Test,
        domain::EventType::DepositFlagged,
        &serde_json::json!({"id": "dep_9", "accountId": "va_9"}),
        chrono::Utc::now(),
    )
    .await
    .unwrap();
    assert_eq!(event.account_id.as_deref(), Some("va_9"));
    let listed = ::store::events::for_account(
        &db,
        &BusinessId::unchecked("biz_1"),
        domain::Mode::Test,
        &domain::ids::AccountId::unchecked("va_9"),
        10,
    )
    .await
    .unwrap();
    assert_eq!(listed.len(), 1);
    assert!(
        ::store::events::for_account(
            &db,
            &BusinessId::unchecked("biz_2"),
            domain::Mode::Test,
            &domain::ids::AccountId::unchecked("va_9"),
            10
        )
        .await
        .unwrap()
        .is_empty(),
        "another business's events are not listed"
    );
}

// Operator commands: `api admin user create`, and the demo user of `api dev`.

fn api_command(dir: &std::path::Path) -> std::process::Command {
    let mut cmd = std::process::Command::new(test_support::process::api_binary());
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .current_dir(dir);
    cmd
}

#[tokio::test]
async fn admin_user_create_prints_a_password_once_that_signs_in() {
    let dir = tempfile::tempdir().unwrap();
    let out = test_support::process::run_ok(
        api_command(dir.path()).args(["admin", "business", "create", "--name", "Acme Ltd"]),
    );
    let business: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = business["id"].as_str().unwrap();
    let out = test_support::process::run_ok(api_command(dir.path()).args([
        "admin",
        "user",
        "create",
        "--business",
        id,
        "--email",
        "Ada@Example.com",
        "--role",
        "developer",
    ]));
    let user: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert!(user["id"].as_str().unwrap().starts_with("usr_"));
    assert_eq!(user["businessId"], id);
    assert_eq!(user["email"], "ada@example.com");
    assert_eq!(user["role"], "developer");
    let password = user["password"].as_str().unwrap();
    assert!(password.chars().count() >= 12);
    let db = std::fs::read(dir.path().join(".vas-dev/vas.sqlite")).unwrap();
    assert!(!String::from_utf8_lossy(&db).contains(password));

    for (args, error) in [
        (
            vec!["--business", id, "--email", "ada@example.com"],
            "already exists",
        ),
        (
            vec!["--business", "biz_nope", "--email", "bo@example.com"],
            "no business",
        ),
        (
            vec!["--business", id, "--email", "not-an-address"],
            "not a valid address",
        ),
    ] {
        let out = api_command(dir.path())
            .args(["admin", "user", "create"])
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(error), "{stderr}");
    }
}

#[tokio::test]
async fn api_dev_prints_the_demo_user_and_the_dashboard_address() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let mut child = api_command(dir.path())
        .arg("dev")
        .env("VAS_HTTP__BIND", "127.0.0.1:0")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Read on a thread to the end, so the process never writes to a closed pipe.
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no demo user in {lines:?}"));
        let done = line.contains("api admin user create");
        lines.push(line);
        if done {
            break;
        }
    }
    let after = |label: &str| {
        lines
            .iter()
            .find_map(|l| l.split_once(label).map(|(_, rest)| rest.trim().to_owned()))
            .unwrap_or_else(|| panic!("no {label} in {lines:?}"))
    };
    let dashboard = after("dashboard:");
    assert!(dashboard.starts_with("http://127.0.0.1:") && dashboard.ends_with("/dashboard/"));
    let sign_in = after("sign in as");
    let (email, password) = sign_in.split_once(" with password ").unwrap();
    assert_eq!(email, "demo@example.com");
    let base = dashboard.trim_end_matches("/dashboard/");
    let mut http = Http::at(base);
    http.sign_in(email, password).await;
    let page = http.get("/dashboard/test/accounts").await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("Demo Business"));
    assert!(page.body.contains("Owner"));
    let _ = std::process::Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    assert!(child.wait().unwrap().success());
}

/// Figures, not a check: how long the Accounts page takes for a business with many accounts
/// (`VAS_SCALE_ACCOUNTS`, default 1,000,000), on PostgreSQL when TEST_DATABASE_URL is set, else
/// SQLite. `cargo test --release -p api --test it dashboard_http::accounts_page_at_scale -- --ignored
/// --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a measurement: inserts a million accounts"]
async fn accounts_page_at_scale() {
    let n: u64 = std::env::var("VAS_SCALE_ACCOUNTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let backend = match std::env::var("TEST_DATABASE_URL") {
        Ok(url) if !url.is_empty() => Backend::Postgres(url),
        _ => Backend::Sqlite,
    };
    let app = spawn_app(backend.clone()).await;
    let started = std::time::Instant::now();
    insert_accounts(&app, n).await;
    eprintln!(
        "{backend:?}: inserted {n} accounts in {:?}",
        started.elapsed()
    );
    let (email, password) = add_user(&app, Role::Viewer).await;
    let mut http = Http::new(&app);
    http.sign_in(&email, &password).await;
    let probe = n / 2 + 7;
    for (what, path) in [
        ("page 1", "/dashboard/test/accounts".to_owned()),
        (
            "a search matching one account",
            format!("/dashboard/test/accounts?q=c{probe}%40example.com"),
        ),
        (
            "a search matching none",
            "/dashboard/test/accounts?q=nobody-here".to_owned(),
        ),
        (
            "page 20,000",
            "/dashboard/test/accounts?page=20000".to_owned(),
        ),
    ] {
        let mut times = Vec::new();
        let mut size = 0;
        for _ in 0..3 {
            let t = std::time::Instant::now();
            let answer = http.get(&path).await;
            times.push(t.elapsed());
            assert_eq!(answer.status, 200);
            size = answer.body.len();
        }
        times.sort();
        eprintln!(
            "{what}: median {:?} (min {:?}, max {:?}), {size} bytes",
            times[1], times[0], times[2]
        );
    }
}

/// `n` active test-mode accounts of the app's business, written straight into the database.
async fn insert_accounts(app: &test_support::TestApp, n: u64) {
    let business = app.business.id.clone();
    if let Backend::Postgres(_) = app.test_db.backend {
        app.db
            .execute_unprepared(&format!(
                "INSERT INTO virtual_accounts (id, business_id, mode, status, bank, account_number, \
                 account_name, customer_name, customer_email, customer_phone, customer_reference, \
                 identity_type, identity_enc, created_at, activated_at, updated_at) \
                 SELECT 'va_' || lpad(g::text, 26, '0'), '{business}', 'test', 'active', 'test-bank', \
                 lpad(g::text, 10, '0'), 'Acme Ltd/Customer ' || g, 'Customer ' || g, \
                 'c' || g || '@example.com', '+234803' || lpad((g % 10000000)::text, 7, '0'), \
                 'ref-' || g, 'bvn', 'sealed', now() - (g || ' seconds')::interval, now(), now() \
                 FROM generate_series(1, {n}) g"
            ))
            .await
            .unwrap();
        app.db
            .execute_unprepared("ANALYZE virtual_accounts")
            .await
            .unwrap();
    } else {
        insert_accounts_one_by_one(app, n).await;
    }
    // Written around the service: its tallies (list totals, the hourly limit) are rebuilt.
    ::store::tallies::recount(&app.db, &business, domain::Mode::Test)
        .await
        .unwrap();
}

async fn insert_accounts_one_by_one(app: &test_support::TestApp, n: u64) {
    use entities::virtual_account;
    use sea_orm::{ActiveValue::Set, EntityTrait};
    let business = app.business.id.clone();
    let now = chrono::Utc::now();
    let mut g = 1;
    while g <= n {
        let batch: Vec<virtual_account::ActiveModel> = (g..(g + 1000).min(n + 1))
            .map(|i| virtual_account::ActiveModel {
                id: Set(domain::ids::AccountId::unchecked(format!("va_{i:026}"))),
                business_id: Set(business.clone()),
                mode: Set(domain::Mode::Test),
                status: Set(domain::AccountStatus::Active),
                bank: Set(domain::Bank::TestBank),
                account_number: Set(Some(format!("{i:010}"))),
                account_name: Set(format!("Acme Ltd/Customer {i}")),
                customer_name: Set(format!("Customer {i}")),
                customer_email: Set(format!("c{i}@example.com")),
                customer_phone: Set(format!("+234803{:07}", i % 10_000_000)),
                customer_reference: Set(Some(format!("ref-{i}"))),
                identity_type: Set(domain::IdentityType::Bvn),
                identity_enc: Set("sealed".into()),
                failure_reason: Set(None),
                deactivation_reason: Set(None),
                created_at: Set(now - chrono::Duration::seconds(i as i64)),
                activated_at: Set(Some(now)),
                deactivated_at: Set(None),
                updated_at: Set(now),
                created_by_key_id: Set(None),
            })
            .collect();
        virtual_account::Entity::insert_many(batch)
            .exec_without_returning(&app.db)
            .await
            .unwrap();
        g += 1000;
    }
}

/// docs/dashboard.md: every failed or locked sign-in is in the audit log with the client address;
/// an unknown e-mail's against no user and no business, without the e-mail or password as typed.
async fn failed_and_locked_sign_ins_are_audited_with_the_address(backend: Backend) {
    use entities::audit_entry;
    use sea_orm::EntityTrait;
    let app = spawn_app(backend).await;
    let (email, password) = add_user(&app, Role::Owner).await;
    let user = stored_user(&app, &email).await;
    let unknown = "Nobody-Here@Example.com";
    let typed = "the typed wrong password";
    let rows = || async {
        audit_entry::Entity::find()
            .all(&app.db)
            .await
            .unwrap()
            .into_iter()
            .filter(|r| r.action != domain::AuditAction::UserAdded)
            .collect::<Vec<_>>()
    };

    assert_eq!(sign_in_status(&app, &email, typed).await, 401);
    assert_eq!(sign_in_status(&app, unknown, typed).await, 401);
    let found = rows().await;
    assert_eq!(found.len(), 2, "{found:?}");
    let known = found.iter().find(|r| r.actor_user_id.is_some()).unwrap();
    assert_eq!(known.action, domain::AuditAction::SignInFailed);
    assert_eq!(known.business_id.as_deref(), Some(app.business.id.as_str()));
    assert_eq!(known.actor_user_id.as_deref(), Some(user.id.as_str()));
    assert_eq!(known.client_addr.as_deref(), Some("127.0.0.1"));
    let nobody = found.iter().find(|r| r.actor_user_id.is_none()).unwrap();
    assert_eq!(nobody.action, domain::AuditAction::SignInFailed);
    assert_eq!(
        (nobody.business_id.as_deref(), nobody.actor_email.as_deref()),
        (None, None)
    );
    assert_eq!(nobody.client_addr.as_deref(), Some("127.0.0.1"));
    for row in &found {
        let text = format!("{row:?}").to_lowercase();
        assert!(!text.contains("nobody-here"), "no typed e-mail: {text}");
        assert!(!text.contains(typed), "no password: {text}");
    }

    // Four more: the fifth locks, and the lock is recorded once, with the address.
    for _ in 0..4 {
        Http::new(&app).sign_in_answer(&email, typed).await;
    }
    assert_eq!(sign_in_status(&app, &email, &password).await, 429);
    let found = rows().await;
    let of = |action| found.iter().filter(move |r| r.action == action);
    let locks: Vec<_> = of(domain::AuditAction::SignInLocked).collect();
    assert_eq!(locks.len(), 1, "{found:?}");
    assert_eq!(locks[0].actor_user_id.as_deref(), Some(user.id.as_str()));
    assert_eq!(locks[0].client_addr.as_deref(), Some("127.0.0.1"));
    assert_eq!(
        of(domain::AuditAction::SignInFailed)
            .filter(|r| r.actor_user_id.is_some())
            .count(),
        5,
        "the right password while locked was not checked, nor recorded as a failure"
    );
    // An unknown e-mail's lock too, against no one.
    for _ in 0..4 {
        Http::new(&app).sign_in_answer(unknown, typed).await;
    }
    let found = rows().await;
    let lock = found
        .iter()
        .find(|r| r.action == domain::AuditAction::SignInLocked && r.actor_user_id.is_none())
        .expect("the unknown e-mail's lock");
    assert_eq!(
        (lock.business_id.as_deref(), lock.client_addr.as_deref()),
        (None, Some("127.0.0.1"))
    );
    assert_eq!(lock.target, nobody.target, "the same e-mail, by its hash");

    // The business's owner reads them on the Team page (once the lock is over).
    app.db
        .execute_unprepared("DELETE FROM sign_in_throttles")
        .await
        .unwrap();
    let mut owner = Http::new(&app);
    owner.sign_in(&email, &password).await;
    let team = owner.get("/dashboard/test/team").await;
    assert!(team.body.contains("Failed to sign in"));
    assert!(team.body.contains("Sign-in locked for 15 minutes"));
    assert!(!team.body.contains("nobody-here"));
}

async fn sign_ins_are_limited_per_client_address(backend: Backend) {
    let app = spawn_app_with(backend, |c| c.dashboard.sign_ins_per_minute = 3).await;
    let (email, password) = add_user(&app, Role::Viewer).await;
    let mut http = Http::new(&app);
    for i in 0..3 {
        let email = format!("guess{i}@example.com");
        assert_eq!(
            http.sign_in_answer(&email, "a wrong password").await.status,
            401
        );
    }
    // The fourth attempt from this address in the minute: refused whatever the e-mail, right
    // password included, with when to come back.
    let refused = http.sign_in_answer(&email, &password).await;
    assert_eq!(refused.status, 429);
    assert!(
        refused
            .body
            .contains("Too many sign-in attempts from your network")
    );
    let retry: u64 = refused.header("retry-after").parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert!(!http.cookies.contains_key(SESSION_COOKIE));
    // Not an e-mail lock: the e-mail's own count is untouched.
    assert!(
        ::store::users::throttle(&app.db, &sha256_hex(&format!("sign-in:{email}")))
            .await
            .unwrap()
            .is_none()
    );
    // The JSON API is not the sign-in form's to limit.
    let api = app
        .client
        .get(format!("{}/v1/virtual-accounts", app.base))
        .bearer_auth(&app.business.test.secret_key)
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), 200);
}

/// The api's housekeeping forgets sign-in attempts whose window is over (and not locked), as it
/// forgets ended sessions.
async fn sign_in_attempts_that_are_over_are_purged(backend: Backend) {
    use entities::sign_in_throttle;
    use sea_orm::{ActiveModelTrait, ActiveValue::Set};
    let app = spawn_app(backend).await;
    let now = domain::time::now();
    let rows = [
        ("over", now - chrono::Duration::minutes(16), None),
        (
            "lock-over",
            now - chrono::Duration::minutes(40),
            Some(now - chrono::Duration::minutes(10)),
        ),
        ("counting", now - chrono::Duration::minutes(5), None),
        (
            "locked",
            now - chrono::Duration::minutes(20),
            Some(now + chrono::Duration::minutes(5)),
        ),
    ];
    for (key, started, locked_until) in rows {
        sign_in_throttle::ActiveModel {
            email_hash: Set(key.to_owned()),
            attempts: Set(5),
            window_started_at: Set(started),
            locked_until: Set(locked_until),
        }
        .insert(&app.db)
        .await
        .unwrap();
    }
    // Another api process starts: its housekeeping runs at once.
    test_support::start_instance(&app).await;
    let left = || async {
        let mut keys: Vec<String> = <sign_in_throttle::Entity as sea_orm::EntityTrait>::find()
            .all(&app.db)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.email_hash)
            .collect();
        keys.sort();
        keys
    };
    test_support::wait_until("the purge", Duration::from_secs(20), async || {
        left().await.len() == 2
    })
    .await;
    assert_eq!(left().await, ["counting", "locked"]);
}

/// m0018 renames the throttle's count and lets an audit row have no business (SQLite rebuilds
/// the table for that): rows recorded before it are all still there, indexes included.
async fn the_sign_in_migration_keeps_audit_rows_and_counts(backend: Backend) {
    use sea_orm_migration::MigratorTrait;
    let test_db = test_support::TestDb::new(&backend).await;
    // Every migration before m0018 (the one under test), then rows as they were stored until then.
    let db = test_db.migrated_up_to("m0018").await;
    let now = "2026-01-02T03:04:05Z";
    for sql in [
        format!(
            "INSERT INTO businesses (id, name, kyb_status, created_at, updated_at) \
             VALUES ('biz_1', 'Acme', 'approved', '{now}', '{now}')"
        ),
        format!(
            "INSERT INTO audit_log (id, business_id, actor_user_id, actor_email, action, \
             mode, target, detail, client_addr, created_at) VALUES ('aud_1', 'biz_1', \
             'usr_1', 'ada@example.com', 'session.signed_in', NULL, NULL, NULL, '192.0.2.1', \
             '{now}')"
        ),
        format!(
            "INSERT INTO sign_in_throttles (email_hash, failures, window_started_at, \
             locked_until) VALUES ('abc', 3, '{now}', NULL)"
        ),
    ] {
        db.execute_unprepared(&sql).await.unwrap();
    }
    migrations::Migrator::up(&db, None).await.unwrap();

    let (rows, _) = ::store::audit::list(
        &db,
        &BusinessId::unchecked("biz_1"),
        &::store::paging::PageRequest {
            page_size: 10,
            position: ::store::paging::Position::Page(1),
        },
    )
    .await
    .unwrap();
    assert_eq!(rows.rows.len(), 1);
    assert_eq!(rows.rows[0].client_addr.as_deref(), Some("192.0.2.1"));
    let throttle = ::store::users::throttle(&db, "abc").await.unwrap().unwrap();
    assert_eq!(throttle.attempts, 3);
    // A row of no business is accepted now.
    let entry = ::store::audit::Entry::without_business(domain::AuditAction::SignInFailed);
    ::store::audit::record(
        &db,
        &::store::audit::Actor::anonymous(Some("192.0.2.2".into())),
        entry,
        chrono::Utc::now(),
    )
    .await
    .unwrap();
    if !backend.is_postgres() {
        let indexes = db
            .query_all_raw(Statement::from_string(
                db.get_database_backend(),
                "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'audit_log' \
                 AND name = 'audit_log_business_created_id'",
            ))
            .await
            .unwrap();
        assert_eq!(indexes.len(), 1, "the business/created index is back");
    }
}
