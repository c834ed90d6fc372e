//! The home page per mode (docs/dashboard.md) over plain HTTP, on both databases: signing in lands on it,
//! and its figures and its charts' tables are those of the data the test made (deposits today
//! and eight days ago, a flagged one, accounts active and pending, payouts pending, webhooks
//! delivered), scoped to the business and mode; another business's data never shows.

use std::time::Duration;

use chrono::{DateTime, Utc};
use domain::money::naira;
use domain::{Mode, Role};
use serde_json::json;
use test_support::dashboard::{Http, add_user};
use test_support::{Backend, BankDeposit, Receiver, Reply, account_body, spawn_app};

test_support::on_both_databases!(the_home_page_shows_the_figures_of_the_data_made);

/// A chart table's row: the day as Lagos names it, then its cells.
fn row(day: DateTime<Utc>, cells: &[&str]) -> String {
    let label = (day + chrono::Duration::hours(1)).format("%-d %b");
    let cells: String = cells
        .iter()
        .map(|c| format!("<td class=\"num\">{c}</td>"))
        .collect();
    format!("<th scope=\"row\">{label}</th>{cells}")
}

async fn the_home_page_shows_the_figures_of_the_data_made(backend: Backend) {
    let app = spawn_app(backend).await;
    let receiver = Receiver::start().await;
    receiver.set_default(Reply::ok().body("ok"));
    app.set_webhook_url(&app.business.id, Mode::Test, &receiver.url)
        .await;
    let _worker = test_support::start_webhooks_worker(&app, app.shutdown.clone());
    let first = app.active_account(app.test_key(), 1).await;
    let second = app.active_account(app.test_key(), 2).await;
    let pending = app
        .create(
            app.test_key(),
            "acct-pending",
            &account_body(3, "access-bank"),
        )
        .await;
    assert_eq!(pending.status(), 202);
    let now = Utc::now();
    let eight_days_ago = now - chrono::Duration::days(8);
    app.bank_deposit(
        &first,
        BankDeposit::new("OLD-1", 500_000).at(eight_days_ago),
    )
    .await;
    app.bank_deposit(&first, BankDeposit::new("TODAY-1", 15_000_000).at(now))
        .await;
    app.bank_deposit(&second, BankDeposit::new("TODAY-2", 250_050).at(now))
        .await;
    let resp = app
        .deactivate(app.test_key(), second["id"].as_str().unwrap())
        .await;
    assert_eq!(resp.status(), 200);
    // After the deactivation: flagged.
    app.bank_deposit(&second, BankDeposit::new("TODAY-FLAGGED", 10_000))
        .await;
    app.set_settlement_account("manual").await;
    for i in 0..2 {
        let r = app
            .client
            .post(app.url("/v1/payouts"))
            .bearer_auth(app.test_key())
            .header("Idempotency-Key", format!("po-{i}"))
            .json(&json!({"amount": 1_000_000, "narration": "Sweep"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
    }
    let (email, password) = add_user(&app, Role::Viewer).await;
    let mut http = Http::new(&app);
    let signed = http.sign_in_answer(&email, &password).await;
    assert_eq!(signed.status, 303);
    assert_eq!(
        signed.location(),
        "/dashboard/test/",
        "signing in lands on the home page"
    );

    // Every event's webhook reaches the receiver: none waits, the day's rate is 100 %.
    let page = test_support::eventually(Duration::from_secs(20), async || {
        let page = http.get("/dashboard/test/").await;
        let done = [
            "<span class=\"badge quiet\">Not tried yet</span></dt><dd>0</dd>",
            "<span class=\"badge wait\">Retrying</span></dt><dd>0</dd>",
            "<td class=\"num\">100%</td></tr>",
        ];
        match done.iter().find(|d| !page.body.contains(**d)) {
            None => Ok(page),
            Some(missing) => {
                let at = page.body.find("id=\"webhooks\"").unwrap_or(0);
                Err(format!("no {missing} in {}", &page.body[at..at + 600]))
            }
        }
    })
    .await;
    let delivered = receiver.count();
    assert!(delivered >= 4, "{delivered} webhooks");
    assert_eq!(page.status, 200);
    let body = &page.body;
    let balance = app.balance(app.test_key()).await;
    let available = naira(balance["available"].as_i64().unwrap());
    // Today's three (one flagged) and, since Monday, the same: the old one is eight days back.
    for figure in [
        "<h2 id=\"today\">Today</h2>\n    <p class=\"stat-value\">₦152,600.50</p>\n    <p class=\"fine\">3 deposits</p>".to_owned(),
        "<p class=\"fine\">3 deposits since Monday</p>".to_owned(),
        format!("<h2 id=\"available\">Available</h2>\n    <p class=\"stat-value\">{available}</p>"),
        "<h2 id=\"in-flight\">On its way out</h2>\n    <p class=\"stat-value\">₦20,000.00</p>".to_owned(),
        "<span class=\"badge wait\">Pending</span></dt><dd>2</dd>".to_owned(),
        format!("<span class=\"badge good\">Succeeded</span></dt><dd>{delivered}</dd>"),
        "<dt>Created</dt><dd>3</dd>".to_owned(),
        "<dt>Still pending</dt><dd>1</dd>".to_owned(),
        "1 flagged deposit: money that reached a deactivated account".to_owned(),
        "/dashboard/test/deposits?status=flagged".to_owned(),
        // The charts' tables: deposits per day, the balance at each day's end.
        row(now, &["3", "₦152,600.50"]),
        row(eight_days_ago, &["1", "₦5,000.00"]),
        // Every credit's entry is today's, when it was credited: the day before ends at zero.
        row(now - chrono::Duration::days(1), &["₦0.00"]),
        row(now, &[available.as_str()]),
    ] {
        assert!(body.contains(&figure), "{figure} in {body}");
    }
    assert_eq!(available, "₦137,500.50", "credited less the payouts");
    assert!(body.contains("<svg viewBox=\"0 0 600 160\""));
    assert!(!body.contains("style="), "the CSP allows no inline style");

    // Live mode has had nothing: its home says so, none of test mode's figures.
    app.approve_kyb().await;
    let live = http.get("/dashboard/live/").await;
    assert_eq!(live.status, 200);
    assert!(
        live.body
            .contains("<p class=\"stat-value\">₦0.00</p>\n    <p class=\"fine\">0 deposits</p>")
    );
    assert!(!live.body.contains("₦152,600.50"));
}
