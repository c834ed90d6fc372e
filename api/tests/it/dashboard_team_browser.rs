//! The Developers and Team pages in a real browser (docs/dashboard.md): headless Chromium over
//! WebDriver, JavaScript off, against the real api on port 0. Without Chromium each test says it
//! was skipped; under CI a missing Chromium fails instead.
//!
//! Screenshots of these pages at desktop and phone width:
//! `cargo test -p api --test it dashboard_team_browser::screenshots -- --ignored` (into
//! `VAS_SCREENSHOTS`, else /tmp/vas-screens).

use std::time::Duration;

use domain::{AuditAction, Role};
use reqwest::StatusCode;
use test_support::browser::fantoccini::{Client, Locator};
use test_support::browser::{
    self, Browser, body_text, click, fill, find, screenshot_both_widths, signed_in, wait_for_url,
};
use test_support::dashboard::{Http, add_user};
use test_support::{
    Backend, Receiver, Reply, TestApp, account_body, spawn_app, start_webhooks_worker,
};

test_support::on_both_databases!(
    a_developer_rolls_the_test_key_and_uses_the_new_one,
    a_test_event_reaches_a_local_receiver_signed,
    removing_a_user_ends_their_session_and_the_last_owner_stays,
);

const WITHIN: Duration = Duration::from_secs(20);

async fn status_with(app: &TestApp, key: &str) -> StatusCode {
    app.get(key, "/v1/virtual-accounts").await.status()
}

async fn audited(app: &TestApp, action: AuditAction) -> usize {
    test_support::store::audit_log(&app.db, &app.business.id)
        .await
        .iter()
        .filter(|r| r.action == action)
        .count()
}

/// Rolls from the Developers page, choosing when the old key stops; returns the new key as the
/// page shows it.
async fn roll(c: &Client, app: &TestApp, expire: &str) -> String {
    c.goto(&app.url("/dashboard/test/developers"))
        .await
        .unwrap();
    find(c, "#expire")
        .await
        .select_by_value(expire)
        .await
        .unwrap();
    click(c, "form.roll-form button[type=submit]").await;
    let shown = c
        .wait()
        .at_most(WITHIN)
        .for_element(Locator::Css("#new-key"))
        .await
        .expect("the new key is shown");
    shown.text().await.unwrap().trim().to_owned()
}

async fn a_developer_rolls_the_test_key_and_uses_the_new_one(backend: Backend) {
    let Some(browser) = Browser::start("a_developer_rolls_the_test_key", false).await else {
        return;
    };
    let c = &browser.client;
    let app = spawn_app(backend).await;
    let (email, password) = add_user(&app, Role::Developer).await;
    signed_in(c, &app, &email, &password).await;
    click(c, "nav.sidenav a[href='/dashboard/test/developers']").await;
    wait_for_url(c, "the Developers page", |u| {
        u.path() == "/dashboard/test/developers"
    })
    .await;
    let old = app.test_key().to_owned();
    assert!(
        body_text(c)
            .await
            .contains(&format!("sk_test_…{}", &old[old.len() - 4..]))
    );

    // "Expire now": the copied key creates an account, the old key is refused at once.
    let new = roll(c, &app, "now").await;
    assert!(new.starts_with("sk_test_"), "{new}");
    let created = app
        .create(&new, "from-the-browser", &account_body(1, "test-bank"))
        .await;
    assert_eq!(created.status(), StatusCode::CREATED);
    assert_eq!(status_with(&app, &old).await, StatusCode::UNAUTHORIZED);

    // Reloading sends the form again: nothing is rolled, the key is not shown.
    c.refresh().await.unwrap();
    let source = c.source().await.unwrap();
    assert!(
        body_text(c).await.contains("This form was sent before"),
        "the reload re-sent the spent form"
    );
    assert!(
        !source.contains(&new),
        "a reload does not show the key again"
    );
    assert!(
        status_with(&app, &new).await.is_success(),
        "nor roll it away"
    );
    // Going elsewhere and back does not show it either.
    c.goto(&app.url("/dashboard/test/accounts")).await.unwrap();
    c.back().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // (Chromium shows its "Confirm Form Resubmission" page: a no-store POST answer is not kept.)
    assert!(
        !c.source().await.unwrap().contains(&new),
        "going back does not show it"
    );
    assert_eq!(audited(&app, AuditAction::KeyRolled).await, 1);

    // With a grace, the previous key works on beside the new one.
    let newer = roll(c, &app, "24h").await;
    assert!(
        body_text(c)
            .await
            .contains("The previous key keeps working until")
    );
    assert!(
        status_with(&app, &new).await.is_success(),
        "within its grace"
    );
    assert!(status_with(&app, &newer).await.is_success());
    assert_eq!(audited(&app, AuditAction::KeyRolled).await, 2);
    browser.finish().await;
}

async fn a_test_event_reaches_a_local_receiver_signed(backend: Backend) {
    let Some(browser) = Browser::start("a_test_event_reaches_a_local_receiver", false).await else {
        return;
    };
    let c = &browser.client;
    let app = spawn_app(backend).await;
    let receiver = Receiver::start().await;
    receiver.set_default(Reply::ok().body("received, thanks"));
    let _worker = start_webhooks_worker(&app, app.shutdown.clone());
    let (email, password) = add_user(&app, Role::Developer).await;
    signed_in(c, &app, &email, &password).await;
    c.goto(&app.url("/dashboard/test/developers"))
        .await
        .unwrap();
    fill(c, "#url", &receiver.url).await;
    click(c, "form[action$='/developers/webhook'] button[type=submit]").await;
    wait_for_url(c, "the saved page", |u| {
        u.query().is_some_and(|q| q.contains("done=url"))
    })
    .await;
    assert!(body_text(c).await.contains(&receiver.url));
    click(c, "form[action$='/webhook/test'] button[type=submit]").await;
    wait_for_url(c, "the sent page", |u| {
        u.query().is_some_and(|q| q.contains("done=test"))
    })
    .await;
    let requests = receiver.wait_for(1, WITHIN).await;
    let event = requests[0].json();
    assert_eq!(event["type"], "webhook.test");
    assert!(
        requests[0].verifies(&app.business.test.webhook_secret),
        "the standardwebhooks crate verifies it"
    );
    // Its delivery attempt appears on the page.
    let id = event["id"].as_str().unwrap().to_owned();
    for _ in 0..100 {
        c.refresh().await.unwrap();
        let text = body_text(c).await;
        if text.contains(&id) && text.contains("Succeeded") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let text = body_text(c).await;
    assert!(text.contains(&id) && text.contains("200"), "{text}");
    // A 2xx reply's body is not kept (docs/api/events-and-webhooks.md: only a non-2xx's first 256
    // bytes).
    assert!(!text.contains("received, thanks"), "{text}");
    assert_eq!(audited(&app, AuditAction::WebhookUrlSet).await, 1);
    assert_eq!(audited(&app, AuditAction::WebhookTestSent).await, 1);
    browser.finish().await;
}

async fn removing_a_user_ends_their_session_and_the_last_owner_stays(backend: Backend) {
    let Some(browser) = Browser::start("removing_a_user_ends_their_session", false).await else {
        return;
    };
    let c = &browser.client;
    let app = spawn_app(backend).await;
    let (owner_email, owner_password) = add_user(&app, Role::Owner).await;
    let (dev_email, dev_password) = add_user(&app, Role::Developer).await;
    let mut dev = Http::new(&app);
    dev.sign_in(&dev_email, &dev_password).await;
    assert_eq!(dev.get("/dashboard/test/developers").await.status, 200);

    signed_in(c, &app, &owner_email, &owner_password).await;
    c.goto(&app.url("/dashboard/test/team")).await.unwrap();
    let rows = c
        .find_all(Locator::Css("table.members tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    // The owner's own row: removing the last owner is refused.
    remove_member(c, &owner_email, &owner_password).await;
    c.wait()
        .at_most(WITHIN)
        .for_element(Locator::Css(".notice.error"))
        .await
        .unwrap();
    assert!(body_text(c).await.contains("A business needs an owner"));

    remove_member(c, &dev_email, &owner_password).await;
    wait_for_url(c, "the Team page after removing", |u| {
        u.query().is_some_and(|q| q.contains("done=removed"))
    })
    .await;
    let text = body_text(c).await;
    assert!(text.contains("User removed"));
    assert!(
        !find(c, "table.members")
            .await
            .text()
            .await
            .unwrap()
            .contains(&dev_email)
    );
    // The audit log on the page names the removal and who did it.
    let audit = find(c, "table.audit").await.text().await.unwrap();
    assert!(
        audit.contains("Removed a user") && audit.contains(&dev_email),
        "{audit}"
    );
    assert!(audit.contains(&owner_email));

    let after = dev.get("/dashboard/test/accounts").await;
    assert_eq!(after.status, 303, "their session ended at once");
    assert!(after.location().starts_with("/dashboard/sign-in"));
    assert_eq!(audited(&app, AuditAction::UserRemoved).await, 1);
    browser.finish().await;
}

/// Removes the member `email` from the Team page, confirming with `password` (removing a user
/// takes the owner's password again).
async fn remove_member(c: &Client, email: &str, password: &str) {
    let rows = c
        .find_all(Locator::Css("table.members tbody tr"))
        .await
        .unwrap();
    for row in &rows {
        if row.text().await.unwrap().contains(email) {
            row.find(Locator::Css("details.confirm summary"))
                .await
                .unwrap()
                .click()
                .await
                .unwrap();
            row.find(Locator::Css("details.confirm input[type=password]"))
                .await
                .unwrap()
                .send_keys(password)
                .await
                .unwrap();
            row.find(Locator::Css("details.confirm button"))
                .await
                .unwrap()
                .click()
                .await
                .unwrap();
            return;
        }
    }
}

/// The Developers and Team pages at desktop and phone width, for looking at (not asserting):
/// run with --ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "takes screenshots for people to look at; run on demand"]
async fn screenshots() {
    browser::screenshots(async |c, app, (email, password)| {
        let receiver = Receiver::start().await;
        receiver.script([Reply::status(500).body("{\"error\":\"not ready\"}")]);
        receiver.set_default(Reply::ok().body("{\"received\":true}"));
        let _worker = start_webhooks_worker(app, app.shutdown.clone());
        add_user(app, Role::Developer).await;
        add_user(app, Role::Viewer).await;

        let shoot = |name: &'static str| async move {
            screenshot_both_widths(c, &format!("team-{name}"), 4).await;
        };

        signed_in(c, app, &email, &password).await;
        c.goto(&app.url("/dashboard/test/developers"))
            .await
            .unwrap();
        shoot("01-developers").await;
        roll(c, app, "24h").await;
        shoot("02-key-rolled").await;
        c.goto(&app.url("/dashboard/test/developers"))
            .await
            .unwrap();
        fill(c, "#url", "ftp://example.com/hooks").await;
        click(c, "form[action$='/developers/webhook'] button[type=submit]").await;
        c.wait()
            .for_element(Locator::Css(".notice.error"))
            .await
            .unwrap();
        shoot("03-webhook-refused").await;
        fill(c, "#url", &receiver.url).await;
        click(c, "form[action$='/developers/webhook'] button[type=submit]").await;
        wait_for_url(c, "saved", |u| {
            u.query().is_some_and(|q| q.contains("done=url"))
        })
        .await;
        click(c, "form[action$='/webhook/test'] button[type=submit]").await;
        wait_for_url(c, "sent", |u| {
            u.query().is_some_and(|q| q.contains("done=test"))
        })
        .await;
        receiver.wait_for(1, WITHIN).await;
        click(c, "form[action$='/webhook/test'] button[type=submit]").await;
        receiver.wait_for(2, WITHIN).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        c.goto(&app.url("/dashboard/test/developers"))
            .await
            .unwrap();
        shoot("04-test-events").await;
        click(c, "form[action$='/webhook/rotate'] button[type=submit]").await;
        c.wait()
            .for_element(Locator::Css("#new-secret"))
            .await
            .unwrap();
        shoot("05-secret-rotated").await;
        c.goto(&app.url("/dashboard/test/team")).await.unwrap();
        shoot("06-team").await;
        fill(c, "#new-email", "funmi@example.com").await;
        fill(c, "#add-password", &password).await;
        find(c, "#new-role")
            .await
            .select_by_value("developer")
            .await
            .unwrap();
        click(c, "form[action$='/team/users'] button[type=submit]").await;
        c.wait()
            .for_element(Locator::Css("#new-password"))
            .await
            .unwrap();
        shoot("07-user-added").await;
        app.approve_kyb().await;
        c.goto(&app.url("/dashboard/live/developers"))
            .await
            .unwrap();
        shoot("08-live-developers").await;
    })
    .await;
}
