//! Deposits, Events and Balance & payouts in a real browser: headless Chromium over WebDriver,
//! JavaScript off, against the real api on port 0. Search deposits and download the CSV (the
//! browser saves it; the test parses the file), resend an event and see the new delivery, a
//! viewer seeing neither resend nor the settlement form, an owner changing the settlement
//! account. Without Chromium each test says it was skipped; under CI a missing Chromium fails.
//!
//! Screenshots of these pages at desktop and phone width:
//! `cargo test -p api --test it dashboard_pages_browser::screenshots -- --ignored` (into
//! `VAS_SCREENSHOTS`, else /tmp/vas-screens).

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::http::Method;
use domain::{Mode, Role};
use serde_json::{Value, json};
use test_support::browser::fantoccini::wd::WebDriverCompatibleCommand;
use test_support::browser::fantoccini::{Client, Locator};
use test_support::browser::{
    self, Browser, body_text, click, fill, shoot, signed_in, wait_for_url,
};
use test_support::dashboard::{add_user, parse_csv};
use test_support::{Backend, BankDeposit, Receiver, Reply, TestApp, spawn_app};

async fn rows(c: &Client, css: &str) -> usize {
    c.find_all(Locator::Css(css)).await.unwrap().len()
}

async fn account(app: &TestApp, n: u32) -> Value {
    app.active_account(app.test_key(), n).await
}

/// Chromium's downloads go to `dir` (a DevTools command through chromedriver: the session's
/// own setting, nothing of the shared browser set-up changes).
#[derive(Debug)]
struct AllowDownloads(PathBuf);

impl WebDriverCompatibleCommand for AllowDownloads {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!(
            "session/{}/goog/cdp/execute",
            session.unwrap_or("")
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (Method, Option<String>) {
        let body = json!({
            "cmd": "Browser.setDownloadBehavior",
            "params": {"behavior": "allow", "downloadPath": self.0.display().to_string()},
        });
        (Method::POST, Some(body.to_string()))
    }
}

/// The one finished file in `dir`, once Chromium has written it whole.
async fn downloaded(dir: &Path) -> (String, Vec<u8>) {
    for _ in 0..100 {
        let files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        if let [file] = files.as_slice()
            && file.extension().is_some_and(|e| e == "csv")
        {
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            return (name, std::fs::read(file).unwrap());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no download in {}", dir.display());
}

test_support::on_both_databases!(search_deposits_and_download_the_csv);

async fn search_deposits_and_download_the_csv(backend: Backend) {
    let Some(browser) = Browser::start("search_deposits_and_download_the_csv", false).await else {
        return;
    };
    let c = &browser.client;
    let app = spawn_app(backend).await;
    let first = account(&app, 1).await;
    let second = account(&app, 2).await;
    for i in 0..3 {
        app.bank_deposit(
            &first,
            BankDeposit::new(&format!("FIRST-{i}"), 150_000 + i).narration("rent"),
        )
        .await;
    }
    let fees = BankDeposit::new("SECOND-1", 2_500_050).narration("School fees, term \"2\"");
    app.bank_deposit(&second, fees).await;
    app.bank_deposit(
        &second,
        BankDeposit::new("SECOND-2", 99_900).narration("=1+1"),
    )
    .await;
    let (email, password) = add_user(&app, Role::Viewer).await;
    signed_in(c, &app, &email, &password).await;

    click(c, "nav.sidenav a[href='/dashboard/test/deposits']").await;
    wait_for_url(c, "the deposits page", |u| {
        u.path() == "/dashboard/test/deposits"
    })
    .await;
    assert!(body_text(c).await.contains("1–5 of 5 deposits"));
    assert_eq!(rows(c, "table.data tbody tr").await, 5);

    // Search by account number, as a person would.
    let number = second["accountNumber"].as_str().unwrap();
    fill(c, "#q", number).await;
    click(c, "form.filters button[type=submit]").await;
    wait_for_url(c, "the search", |u| {
        u.query().is_some_and(|q| q.contains(number))
    })
    .await;
    assert_eq!(rows(c, "table.data tbody tr").await, 2);
    let text = body_text(c).await;
    assert!(text.contains("SECOND-1") && text.contains("SECOND-2") && !text.contains("FIRST-0"));
    assert!(text.contains("₦25,000.50"));
    // And by provider reference.
    fill(c, "#q", "FIRST-1").await;
    click(c, "form.filters button[type=submit]").await;
    wait_for_url(c, "the search", |u| {
        u.query().is_some_and(|q| q.contains("FIRST-1"))
    })
    .await;
    assert_eq!(rows(c, "table.data tbody tr").await, 1);

    // Back to the account-number search, and download its CSV.
    fill(c, "#q", number).await;
    click(c, "form.filters button[type=submit]").await;
    wait_for_url(c, "the search", |u| {
        u.query().is_some_and(|q| q.contains(number))
    })
    .await;
    let downloads = tempfile::tempdir().unwrap();
    c.issue_cmd(AllowDownloads(downloads.path().to_owned()))
        .await
        .expect("downloads allowed");
    click(c, "a[href*='/deposits/export']").await;
    let (name, bytes) = downloaded(downloads.path()).await;
    assert!(
        name.starts_with("deposits-test-") && name.ends_with(".csv"),
        "{name}"
    );
    let text = String::from_utf8(bytes).expect("UTF-8");
    let text = text.strip_prefix('\u{feff}').expect("a byte-order mark");
    let records = parse_csv(text);
    assert_eq!(
        records.len(),
        3,
        "the header and the filtered set: {records:?}"
    );
    let col = |name: &str| records[0].iter().position(|h| h == name).unwrap();
    let references: Vec<&str> = records[1..]
        .iter()
        .map(|r| r[col("Provider reference")].as_str())
        .collect();
    assert_eq!(references, ["SECOND-2", "SECOND-1"], "newest first");
    assert_eq!(records[1][col("Narration")], "'=1+1", "a formula is text");
    assert_eq!(records[2][col("Narration")], "School fees, term \"2\"");
    assert_eq!(records[2][col("Amount (NGN)")], "25000.50");
    assert_eq!(records[2][col("Amount (kobo)")], "2500050");
    assert!(
        records[1..]
            .iter()
            .all(|r| r[col("Account number")] == number)
    );
    browser.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn resend_an_event_and_see_the_new_delivery() {
    let Some(browser) = Browser::start("resend_an_event_and_see_the_new_delivery", false).await
    else {
        return;
    };
    let c = &browser.client;
    let app = spawn_app(Backend::Sqlite).await;
    let receiver = Receiver::start().await;
    receiver.set_default(Reply::ok().body("thanks"));
    app.set_webhook_url(&app.business.id, Mode::Test, &receiver.url)
        .await;
    let _worker = test_support::start_webhooks_worker(&app, app.shutdown.clone());
    let a = account(&app, 1).await;
    app.bank_deposit(&a, BankDeposit::new("REF-1", 150_000).narration("rent"))
        .await;
    let first = receiver.wait_for(1, Duration::from_secs(20)).await;

    let (email, password) = add_user(&app, Role::Developer).await;
    signed_in(c, &app, &email, &password).await;
    c.goto(&app.url("/dashboard/test/events")).await.unwrap();
    assert!(body_text(c).await.contains("deposit.received"));
    click(c, "table.data tbody a").await;
    wait_for_url(c, "the event's page", |u| u.path().contains("/events/evt_")).await;
    let attempts = "section[aria-labelledby=deliveries] table.data tbody tr";
    // The first attempt is recorded just after the receiver answered.
    for _ in 0..100 {
        if rows(c, attempts).await == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        c.refresh().await.unwrap();
    }
    assert_eq!(rows(c, attempts).await, 1);
    assert!(body_text(c).await.contains(&receiver.url));

    click(c, "form[action$='/resend'] button").await;
    wait_for_url(c, "the event's page again", |u| {
        u.query() == Some("done=resent")
    })
    .await;
    assert!(body_text(c).await.contains("Sent again"));
    let both = receiver.wait_for(2, Duration::from_secs(20)).await;
    assert_eq!(
        both[1].webhook_id(),
        first[0].webhook_id(),
        "the same event"
    );
    for _ in 0..100 {
        if rows(c, attempts).await == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        c.refresh().await.unwrap();
    }
    assert_eq!(rows(c, attempts).await, 2, "the new attempt is listed");
    browser.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_viewer_sees_no_resend_or_settlement_change_and_an_owner_changes_it() {
    let Some(browser) = Browser::start(
        "a_viewer_sees_no_resend_or_settlement_change_and_an_owner_changes_it",
        false,
    )
    .await
    else {
        return;
    };
    let c = &browser.client;
    let app = spawn_app(Backend::Sqlite).await;
    let a = account(&app, 1).await;
    app.bank_deposit(&a, BankDeposit::new("REF-1", 150_000).narration("rent"))
        .await;

    let (viewer, viewer_password) = add_user(&app, Role::Viewer).await;
    signed_in(c, &app, &viewer, &viewer_password).await;
    c.goto(&app.url("/dashboard/test/events")).await.unwrap();
    click(c, "table.data tbody a").await;
    wait_for_url(c, "the event's page", |u| u.path().contains("/events/evt_")).await;
    assert_eq!(rows(c, "form[action$='/resend']").await, 0, "no resend");
    assert!(!body_text(c).await.contains("Send again"));
    c.goto(&app.url("/dashboard/test/balance")).await.unwrap();
    let text = body_text(c).await;
    assert!(text.contains("₦1,500.00"), "the balance");
    assert_eq!(rows(c, "form[action*='/settlement-account']").await, 0);
    assert!(text.contains("An owner of your business can set it here"));
    click(c, "form[action='/dashboard/sign-out'] button").await;
    wait_for_url(c, "signed out", |u| u.path() == "/dashboard/sign-in").await;

    let (owner, owner_password) = add_user(&app, Role::Owner).await;
    signed_in(c, &app, &owner, &owner_password).await;
    c.goto(&app.url("/dashboard/test/balance")).await.unwrap();
    let number = domain::nuban::account_number("058", 12_345_678).unwrap();
    c.find(Locator::Css("#bankCode"))
        .await
        .unwrap()
        .select_by_value("058")
        .await
        .unwrap();
    fill(c, "#accountNumber", &number).await;
    fill(c, "#password", "not the password").await;
    click(c, "form[action*='/settlement-account'] button[type=submit]").await;
    c.wait()
        .for_element(Locator::Css(".notice.error"))
        .await
        .unwrap();
    assert!(body_text(c).await.contains("Your password is not right"));
    // What was typed is kept; the password is typed again.
    fill(c, "#password", &owner_password).await;
    click(c, "form[action*='/settlement-account'] button[type=submit]").await;
    wait_for_url(c, "the saved account", |u| {
        u.query() == Some("done=settlement")
    })
    .await;
    let text = body_text(c).await;
    assert!(text.contains("Settlement account saved."));
    assert!(text.contains(&number));
    assert!(text.contains("Guaranty Trust Bank (058)"));
    let api = app.get_json(app.test_key(), "/v1/settlement-account").await;
    assert_eq!(api["accountNumber"], number.as_str());
    assert!(text.contains(api["accountName"].as_str().unwrap()));
    browser.finish().await;
}

/// Deposits, events and balance at desktop and phone width, for looking at (not asserting):
/// run with --ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "takes screenshots for people to look at; run on demand"]
async fn screenshots() {
    browser::screenshots(async |c, app, (email, password)| {
        signed_in(c, app, &email, &password).await;
        for (name, path) in [
            ("20-deposits-empty", "/dashboard/test/deposits"),
            ("21-events-empty", "/dashboard/test/events"),
            ("22-balance-empty", "/dashboard/test/balance"),
        ] {
            c.goto(&app.url(path)).await.unwrap();
            shoot(c, name).await;
        }

        let receiver = Receiver::start().await;
        receiver.script([Reply::status(500).body("{\"error\":\"temporarily unavailable\"}")]);
        receiver.set_default(Reply::ok().body("ok"));
        app.set_webhook_url(&app.business.id, Mode::Test, &receiver.url)
            .await;
        let _worker = test_support::start_webhooks_worker(app, app.shutdown.clone());
        let mut accounts = Vec::new();
        for n in 0..4 {
            accounts.push(account(app, n).await);
        }
        let narrations = [
            "Invoice 1042",
            "School fees, term 2",
            "Rent for March",
            "Order #5521",
        ];
        for i in 0..32 {
            let a = &accounts[i % 3];
            let reference = format!("WEMA{:012}", 880_000_000 + i);
            let amount = [150_000, 2_500_050, 75_000_000, 1_999][i % 4];
            let deposit = BankDeposit::new(&reference, amount).narration(narrations[i % 4]);
            app.bank_deposit(a, deposit).await;
        }
        let resp = app
            .deactivate(app.test_key(), accounts[3]["id"].as_str().unwrap())
            .await;
        assert_eq!(resp.status(), 200);
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let late = BankDeposit::new("WEMA000000000LATE", 500_000).narration("Late transfer");
        app.bank_deposit(&accounts[3], late).await;
        app.set_settlement_account("daily").await;
        for (i, amount) in [500_000i64, 1_000_001, 250_000].into_iter().enumerate() {
            let r = app
                .client
                .post(app.url("/v1/payouts"))
                .bearer_auth(app.test_key())
                .header("Idempotency-Key", format!("po-{i}"))
                .json(&json!({"amount": amount, "narration": "Weekly sweep", "reference": format!("sweep-{i}")}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 202);
        }
        receiver.wait_for(3, Duration::from_secs(20)).await;
        tokio::time::sleep(Duration::from_millis(500)).await;

        c.goto(&app.url("/dashboard/test/deposits")).await.unwrap();
        shoot(c, "23-deposits").await;
        c.goto(&app.url(&format!(
            "/dashboard/test/deposits?q={}",
            accounts[3]["accountNumber"].as_str().unwrap()
        )))
        .await
        .unwrap();
        shoot(c, "24-deposits-search-flagged").await;
        c.goto(&app.url("/dashboard/test/deposits?q=NOPE"))
            .await
            .unwrap();
        shoot(c, "25-deposits-no-match").await;
        c.goto(&app.url("/dashboard/test/events")).await.unwrap();
        shoot(c, "26-events").await;
        let events = app
            .get_json(
                app.test_key(),
                "/v1/events?type=deposit.received&pageSize=100",
            )
            .await;
        let oldest = events["data"].as_array().unwrap().last().unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        c.goto(&app.url(&format!("/dashboard/test/events/{oldest}")))
            .await
            .unwrap();
        shoot(c, "27-event").await;
        click(c, "form[action$='/resend'] button").await;
        wait_for_url(c, "resent", |u| u.query() == Some("done=resent")).await;
        tokio::time::sleep(Duration::from_millis(800)).await;
        c.refresh().await.unwrap();
        shoot(c, "28-event-resent").await;
        c.goto(&app.url("/dashboard/test/balance")).await.unwrap();
        shoot(c, "29-balance").await;
        click(c, "details.change summary").await;
        c.find(Locator::Css("#password"))
            .await
            .unwrap()
            .send_keys("wrong password here")
            .await
            .unwrap();
        click(c, "form[action*='/settlement-account'] button[type=submit]").await;
        c.wait()
            .for_element(Locator::Css(".notice.error"))
            .await
            .unwrap();
        shoot(c, "30-balance-wrong-password").await;
        c.goto(&app.url("/dashboard/test/events/evt_01J00000000000000000000000"))
            .await
            .unwrap();
        shoot(c, "31-event-not-found").await;
    })
    .await;
}
