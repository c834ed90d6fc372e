//! The dashboard in a real browser: headless Chromium driven over WebDriver (chromedriver), with
//! JavaScript off, against the real api on port 0. Without Chromium on the machine each test
//! says plainly that it was skipped; under CI (CI set) a missing Chromium fails instead.
//!
//! Screenshots of every page, at desktop and phone width:
//! `cargo test -p api --test it dashboard_browser::screenshots -- --ignored` (into
//! `VAS_SCREENSHOTS`, else /tmp/vas-screens).

use std::time::Duration;

use domain::Role;
use serde_json::Value;
use test_support::browser::fantoccini::Locator;
use test_support::browser::{
    self, Browser, body_text, click, fill, shoot, sign_in, sign_out, wait_for_url,
};
use test_support::dashboard::add_user;
use test_support::{Backend, TestApp, account_body, spawn_app, spawn_app_with};

/// A test's browser with JavaScript off: the dashboard must work without it.
async fn browser(test: &str) -> Option<Browser> {
    Browser::start(test, false).await
}

async fn create_accounts(app: &TestApp, n: u32) -> Vec<Value> {
    let mut out = Vec::new();
    for i in 0..n {
        let resp = app
            .create(
                app.test_key(),
                &format!("k{i}"),
                &account_body(i, "test-bank"),
            )
            .await;
        assert_eq!(resp.status(), 201);
        out.push(resp.json().await.unwrap());
    }
    out
}

test_support::on_both_databases!(sign_in_search_open_an_account_and_sign_out);

async fn sign_in_search_open_an_account_and_sign_out(backend: Backend) {
    let Some(browser) = browser("sign_in_search_open_an_account_and_sign_out").await else {
        return;
    };
    let c = &browser.client;
    let app = spawn_app(backend).await;
    let accounts = create_accounts(&app, 12).await;
    let (email, password) = add_user(&app, Role::Viewer).await;

    // A page that needs signing in sends the browser to sign in, then back.
    c.goto(&app.url("/dashboard/test/accounts?status=active"))
        .await
        .unwrap();
    wait_for_url(c, "the sign-in page", |u| u.path() == "/dashboard/sign-in").await;
    fill(c, "#email", &email).await;
    fill(c, "#password", &password).await;
    click(c, "form button[type=submit]").await;
    let url = wait_for_url(c, "the accounts page", |u| {
        u.path() == "/dashboard/test/accounts"
    })
    .await;
    assert_eq!(
        url.query(),
        Some("status=active"),
        "back where it was going"
    );
    let text = body_text(c).await;
    assert!(text.contains("1–12 of 12 accounts"), "{text}");
    assert!(text.contains("Acme Ltd"), "the business is named");
    assert!(text.contains(&email), "the signed-in user is named");

    // Search as a person would: type, press the button.
    let wanted = &accounts[7];
    fill(c, "#q", wanted["customerReference"].as_str().unwrap()).await;
    click(c, "form.filters button[type=submit]").await;
    wait_for_url(c, "the search", |u| {
        u.query().is_some_and(|q| q.contains("q=user-7"))
    })
    .await;
    let rows = c
        .find_all(Locator::Css("table.data tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    let text = body_text(c).await;
    assert!(text.contains(wanted["accountNumber"].as_str().unwrap()));

    // Open it.
    click(c, "table.data tbody a").await;
    wait_for_url(c, "the account's page", |u| {
        u.path().ends_with(wanted["id"].as_str().unwrap())
    })
    .await;
    let heading = c
        .find(Locator::Css("h1"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // The business's own name is left off its accounts' names.
    assert_eq!(heading, wanted["customerName"].as_str().unwrap());
    let text = body_text(c).await;
    for field in ["accountNumber", "customerEmail", "customerPhone", "id"] {
        assert!(
            text.contains(wanted[field].as_str().unwrap()),
            "{field} shown"
        );
    }
    assert!(text.contains("BVN on file"));
    let source = c.source().await.unwrap();
    let bvn = account_body(7, "test-bank")["customerBvn"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!source.contains(&bvn), "never the BVN");
    for section in ["Deposits", "Rechecks", "Events"] {
        assert!(text.contains(section), "the {section} section");
    }

    // Back to the list by the breadcrumb, then sign out.
    click(c, "nav.crumbs a").await;
    wait_for_url(c, "the list", |u| u.path() == "/dashboard/test/accounts").await;
    sign_out(c).await;
    assert!(body_text(c).await.contains("You have signed out"));
    c.goto(&app.url("/dashboard/test/accounts")).await.unwrap();
    wait_for_url(c, "the sign-in page", |u| u.path() == "/dashboard/sign-in").await;
    browser.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sign_in_with_totp_enrolled_on_the_profile_page() {
    let Some(browser) = browser("sign_in_with_totp_enrolled_on_the_profile_page").await else {
        return;
    };
    let c = &browser.client;
    let app = spawn_app(Backend::Sqlite).await;
    let (email, password) = add_user(&app, Role::Owner).await;
    sign_in(c, &app, &email, &password).await;
    wait_for_url(c, "the home page", |u| u.path() == "/dashboard/test/").await;

    // Enrol: the profile page shows a QR code and the set-up key; confirm with a code.
    click(c, "a.who-name").await;
    wait_for_url(c, "the profile", |u| u.path() == "/dashboard/profile").await;
    click(c, "form[action='/dashboard/profile/totp/start'] button").await;
    let qr = c.wait().for_element(Locator::Css("svg.qr")).await.unwrap();
    assert!(qr.is_displayed().await.unwrap(), "the QR code shows");
    click(c, "main details summary").await;
    let secret = c
        .find(Locator::Css("code.secret"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
        .replace(' ', "");
    let totp = api::dashboard::auth::totp(&secret, &email).unwrap();
    let now = chrono::Utc::now().timestamp() as u64;
    fill(c, "#code", "123456").await;
    // Turning it on takes the password too.
    fill(c, "#confirm-password", &password).await;
    click(c, "form[action='/dashboard/profile/totp/confirm'] button").await;
    c.wait()
        .for_element(Locator::Css(".notice.error"))
        .await
        .unwrap();
    fill(c, "#code", &totp.generate(now).to_string()).await;
    fill(c, "#confirm-password", &password).await;
    click(c, "form[action='/dashboard/profile/totp/confirm'] button").await;
    wait_for_url(c, "the confirmation", |u| {
        u.query().is_some_and(|q| q.contains("done=totp_on"))
    })
    .await;
    assert!(body_text(c).await.contains("Two-step verification is on"));
    sign_out(c).await;

    // Signing in now asks for a code after the password.
    sign_in(c, &app, &email, &password).await;
    wait_for_url(c, "the code page", |u| {
        u.path() == "/dashboard/sign-in/code"
    })
    .await;
    fill(c, "#code", "000000").await;
    click(c, "form button[type=submit]").await;
    c.wait()
        .for_element(Locator::Css(".notice.error"))
        .await
        .unwrap();
    assert!(body_text(c).await.contains("That code is not right"));
    // The next step's code (the current one was used to confirm: a code works once).
    fill(c, "#code", &totp.generate(now + 30).to_string()).await;
    click(c, "form button[type=submit]").await;
    wait_for_url(c, "the home page", |u| u.path() == "/dashboard/test/").await;
    assert!(body_text(c).await.contains(&email));
    browser.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn five_failed_sign_ins_lock_the_email() {
    let Some(browser) = browser("five_failed_sign_ins_lock_the_email").await else {
        return;
    };
    let c = &browser.client;
    let app = spawn_app(Backend::Sqlite).await;
    let (email, password) = add_user(&app, Role::Developer).await;
    for attempt in 1..=5 {
        sign_in(c, &app, &email, "not the password at all").await;
        let error = c
            .wait()
            .for_element(Locator::Css(".notice.error"))
            .await
            .unwrap();
        let text = error.text().await.unwrap();
        if attempt < 5 {
            assert!(text.contains("do not match"), "attempt {attempt}: {text}");
        } else {
            assert!(text.contains("Too many failed attempts"), "{text}");
        }
    }
    // The right password is refused now.
    sign_in(c, &app, &email, &password).await;
    let error = c
        .wait()
        .for_element(Locator::Css(".notice.error"))
        .await
        .unwrap();
    assert!(
        error
            .text()
            .await
            .unwrap()
            .contains("Too many failed attempts")
    );
    assert_eq!(
        c.current_url().await.unwrap().path(),
        "/dashboard/sign-in",
        "not signed in"
    );
    browser.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_expired_session_goes_back_to_sign_in() {
    let Some(browser) = browser("an_expired_session_goes_back_to_sign_in").await else {
        return;
    };
    let c = &browser.client;
    // The idle limit is configuration: two seconds here instead of an hour.
    let app = spawn_app_with(Backend::Sqlite, |config| {
        config.dashboard.idle_timeout_secs = 2;
    })
    .await;
    create_accounts(&app, 1).await;
    let (email, password) = add_user(&app, Role::Viewer).await;
    sign_in(c, &app, &email, &password).await;
    wait_for_url(c, "the home page", |u| u.path() == "/dashboard/test/").await;
    c.goto(&app.url("/dashboard/test/accounts")).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    click(c, "table.data tbody a").await;
    wait_for_url(c, "the sign-in page", |u| u.path() == "/dashboard/sign-in").await;
    assert!(body_text(c).await.contains("Your session ended"));
    // Signing in again goes on to the page that was asked for.
    fill(c, "#email", &email).await;
    fill(c, "#password", &password).await;
    click(c, "form button[type=submit]").await;
    wait_for_url(c, "the account", |u| u.path().contains("/accounts/va_")).await;
    browser.finish().await;
}

/// Every page at desktop and phone width, for looking at (not asserting): run with --ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "takes screenshots for people to look at; run on demand"]
async fn screenshots() {
    browser::screenshots(async |c, app, (email, password)| {
        c.goto(&app.url("/dashboard/sign-in")).await.unwrap();
        shoot(c, "01-sign-in").await;
        sign_in(c, app, &email, "a wrong password!").await;
        c.wait()
            .for_element(Locator::Css(".notice.error"))
            .await
            .unwrap();
        shoot(c, "02-sign-in-error").await;
        sign_in(c, app, &email, &password).await;
        wait_for_url(c, "the home page", |u| u.path() == "/dashboard/test/").await;
        c.goto(&app.url("/dashboard/test/accounts")).await.unwrap();
        shoot(c, "03-accounts-empty").await;

        let accounts = create_accounts(app, 28).await;
        let first = accounts[0]["id"].as_str().unwrap();
        // A pending one, a deactivated one, deposits (one flagged) and a recheck, for every badge.
        let pending = app
            .create(app.test_key(), "pending", &account_body(90, "access-bank"))
            .await;
        assert_eq!(pending.status(), 202);
        app.deactivate(app.test_key(), accounts[1]["id"].as_str().unwrap())
            .await;
        for (amount, narration) in [
            (150_000, "Invoice 1042"),
            (2_500_050, "School fees, term 2"),
        ] {
            let r = app
                .post(
                    app.test_key(),
                    &format!("/v1/virtual-accounts/{first}/simulate-deposit"),
                    Some(&serde_json::json!({"amount": amount, "senderName": "Bola Ade", "narration": narration})),
                )
                .await;
            assert_eq!(r.status(), 202);
        }
        app.post(
            app.test_key(),
            &format!("/v1/virtual-accounts/{first}/recheck"),
            None,
        )
        .await;
        tokio::time::sleep(Duration::from_millis(800)).await;

        c.goto(&app.url("/dashboard/test/accounts")).await.unwrap();
        shoot(c, "04-accounts").await;
        c.goto(&app.url("/dashboard/test/accounts?q=user-1"))
            .await
            .unwrap();
        shoot(c, "05-accounts-search").await;
        c.goto(&app.url("/dashboard/test/accounts?q=nobody"))
            .await
            .unwrap();
        shoot(c, "06-accounts-no-match").await;
        c.goto(&app.url(&format!("/dashboard/test/accounts/{first}")))
            .await
            .unwrap();
        shoot(c, "07-account").await;
        c.goto(&app.url("/dashboard/test/deposits")).await.unwrap();
        shoot(c, "08-deposits").await;
        c.goto(&app.url("/dashboard/profile")).await.unwrap();
        shoot(c, "09-profile").await;
        click(c, "form[action='/dashboard/profile/totp/start'] button").await;
        c.wait().for_element(Locator::Css("svg.qr")).await.unwrap();
        shoot(c, "10-profile-enrolling").await;
        c.goto(&app.url("/dashboard/live/accounts")).await.unwrap();
        shoot(c, "11-live-closed").await;
        app.approve_kyb().await;
        c.goto(&app.url("/dashboard/live/accounts")).await.unwrap();
        shoot(c, "12-live-empty").await;
        c.goto(&app.url("/dashboard/test/accounts/va_01J00000000000000000000000"))
            .await
            .unwrap();
        shoot(c, "13-account-not-found").await;
        c.goto(&app.url("/dashboard/test/accounts")).await.unwrap();
        sign_out(c).await;
        shoot(c, "14-signed-out").await;
    })
    .await;
}
