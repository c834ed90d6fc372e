//! Lists a person can scan (docs/dashboard.md), over plain HTTP on both databases: account names without
//! the business's own name in its lists, a failed account's real state, times with their zone,
//! events with their amount and customer, the deposits page's total for the filter shown, and
//! payouts whose one destination is said once and whose reference falls back to the narration.

use domain::Role;
use serde_json::json;
use test_support::dashboard::{Http, add_user};
use test_support::{Backend, BankDeposit, TestApp, account_body, spawn_app};

test_support::on_both_databases!(
    account_lists_drop_the_business_name_and_say_a_failed_account_has_no_number,
    events_and_deposits_say_amount_customer_zone_and_the_filters_total,
    payouts_name_their_one_destination_once_and_fall_back_to_the_narration,
);

async fn signed_in(app: &TestApp) -> Http {
    let (email, password) = add_user(app, Role::Owner).await;
    let mut http = Http::new(app);
    http.sign_in(&email, &password).await;
    http
}

/// The page's text between two markers (a section of it).
fn between<'a>(body: &'a str, from: &str, to: &str) -> &'a str {
    let start = body
        .find(from)
        .unwrap_or_else(|| panic!("no {from:?} in {body}"));
    let rest = &body[start..];
    &rest[..rest.find(to).unwrap_or(rest.len())]
}

async fn account_lists_drop_the_business_name_and_say_a_failed_account_has_no_number(
    backend: Backend,
) {
    let app = spawn_app(backend).await;
    let active = app.active_account(app.test_key(), 1).await;
    assert_eq!(active["accountName"], "Acme Ltd/Ada Obi 1");
    let mut rejected = account_body(2, "test-bank");
    rejected["customerBvn"] = json!("99999000002");
    let resp = app.create(app.test_key(), "acct-failed", &rejected).await;
    assert_eq!(resp.status(), 422);
    let failed = app
        .get_json(app.test_key(), "/v1/virtual-accounts?status=failed")
        .await;
    let failed_id = failed["data"][0]["id"].as_str().unwrap().to_owned();
    let mut http = signed_in(&app).await;

    let list = http.get("/dashboard/test/accounts").await;
    assert_eq!(list.status, 200);
    assert!(list.body.contains(">Ada Obi 1</a>"), "{}", list.body);
    assert!(!list.body.contains("Acme Ltd/"), "{}", list.body);
    assert!(
        list.body
            .contains("Failed: the bank did not issue a number")
    );
    assert!(!list.body.contains("Not yet"));
    assert!(list.body.contains(" WAT</time>"));

    let page = http
        .get(&format!("/dashboard/test/accounts/{failed_id}"))
        .await;
    assert_eq!(page.status, 200);
    assert!(
        page.body
            .contains("Failed: the bank did not issue a number")
    );
    assert!(!page.body.contains("Not yet"));
    assert!(page.body.contains("<h1>Ada Obi 2</h1>"));
    // The name the bank shows is still there, in full, among the account's details.
    assert!(page.body.contains("<dd>Acme Ltd/Ada Obi 2</dd>"));

    let deposits_page = {
        app.bank_deposit(&active, BankDeposit::new("REF-NAME-1", 150_000))
            .await;
        http.get("/dashboard/test/deposits").await
    };
    let row = between(&deposits_page.body, "<tbody>", "</tbody>");
    assert!(
        row.contains("Ada Obi 1") && !row.contains("Acme Ltd/"),
        "{row}"
    );
}

async fn events_and_deposits_say_amount_customer_zone_and_the_filters_total(backend: Backend) {
    let app = spawn_app(backend).await;
    let first = app.active_account(app.test_key(), 1).await;
    let second = app.active_account(app.test_key(), 2).await;
    app.bank_deposit(&first, BankDeposit::new("REF-A", 150_000))
        .await;
    app.bank_deposit(&first, BankDeposit::new("REF-B", 2_500_050))
        .await;
    app.bank_deposit(&second, BankDeposit::new("REF-C", 75_000))
        .await;
    let resp = app
        .deactivate(app.test_key(), second["id"].as_str().unwrap())
        .await;
    assert_eq!(resp.status(), 200);
    app.bank_deposit(&second, BankDeposit::new("REF-LATE", 10_000))
        .await;
    let mut http = signed_in(&app).await;

    let events = http
        .get("/dashboard/test/events?type=deposit.received")
        .await;
    assert_eq!(events.status, 200);
    let rows = between(&events.body, "<tbody>", "</tbody>");
    for (amount, customer) in [
        ("₦1,500.00", "Ada Obi 1"),
        ("₦25,000.50", "Ada Obi 1"),
        ("₦750.00", "Ada Obi 2"),
    ] {
        let cells = format!(
            "<td data-label=\"Amount\" class=\"num\">{amount}</td>\n    <td data-label=\"Customer\" class=\"wrap\">{customer}</td>"
        );
        assert!(rows.contains(&cells), "{cells} in {rows}");
    }
    assert!(rows.contains(" WAT</time>"));

    // Every deposit: 1,500 + 25,000.50 + 750 + 100 (flagged).
    let all = http.get("/dashboard/test/deposits").await;
    assert!(
        all.body
            .contains("₦27,350.50 in all, ₦100.00 of it flagged (never credited)"),
        "{}",
        all.body
    );
    let one_account = http
        .get(&format!(
            "/dashboard/test/deposits?q={}",
            first["accountNumber"].as_str().unwrap()
        ))
        .await;
    assert!(one_account.body.contains("₦26,500.50 in all<"));
    let flagged = http.get("/dashboard/test/deposits?status=flagged").await;
    assert!(
        flagged
            .body
            .contains("₦100.00 in all, ₦100.00 of it flagged (never credited)")
    );
}

async fn payouts_name_their_one_destination_once_and_fall_back_to_the_narration(backend: Backend) {
    let app = spawn_app(backend).await;
    app.funded_account(5_000_000).await;
    let settlement = app.set_settlement_account("manual").await;
    let name = settlement["accountName"].as_str().unwrap().to_owned();
    for (i, reference) in [Some("sweep-1"), None, Some("sweep-3")]
        .into_iter()
        .enumerate()
    {
        let mut body =
            json!({"amount": 100_000 + i as i64, "narration": format!("Weekly sweep {i}")});
        if let Some(r) = reference {
            body["reference"] = json!(r);
        }
        let r = app
            .client
            .post(app.url("/v1/payouts"))
            .bearer_auth(app.test_key())
            .header("Idempotency-Key", format!("po-{i}"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 202);
    }
    let mut http = signed_in(&app).await;
    let page = http.get("/dashboard/test/balance").await;
    assert_eq!(page.status, 200);
    let payouts = between(&page.body, "id=\"payouts\"", "id=\"ledger\"");
    // Said once, above the table, not on each of the three rows.
    assert_eq!(payouts.matches(name.as_str()).count(), 1, "{payouts}");
    assert!(payouts.contains(&format!("3 payouts, all to <strong>{name}</strong>")));
    assert!(!payouts.contains(">To<"));
    // No reference: the narration stands in it, with no dash.
    assert!(payouts.contains("<span>Weekly sweep 1</span>"), "{payouts}");
    assert!(payouts.contains("sweep-3<span class=\"sub\">Weekly sweep 2</span>"));
    assert!(!payouts.contains("<span class=\"muted\">–</span>"));
}
