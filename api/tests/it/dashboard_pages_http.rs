//! The Deposits, Events and Balance & payouts pages over plain HTTP: what they list, search and
//! page, the CSV export (BOM, CRLF, RFC 4180 quoting, formulas made text, the whole filtered set
//! however many batches), resending and changing the settlement account (roles, form tokens,
//! the password), tenancy by id guessing, and that no secret reaches any page or the CSV.

use chrono::{Duration, Utc};
use domain::provider::RemoteTransaction;
use domain::{Bank, KybStatus, Mode, Role};
use serde_json::{Value, json};
use store::deposits::{self, Recorded, Source};
use test_support::dashboard::{
    Answer, Http, SESSION_COOKIE, add_user, add_user_to, assert_no_secret_seen, parse_csv,
};
use test_support::{Backend, TestApp, account_body, spawn_app};

test_support::on_both_databases!(
    a_full_browse_of_deposits_events_and_balance_shows_no_secret,
    one_business_never_sees_another_businesses_deposits_events_or_payouts,
    posts_without_their_form_token_are_refused_and_change_nothing,
    roles_decide_who_resends_and_who_changes_the_settlement_account,
    the_settlement_account_changes_only_with_the_owners_password_and_the_apis_rules,
    wrong_passwords_on_a_form_lock_the_email_as_at_sign_in,
    deposits_are_searched_filtered_and_paged_by_cursor,
    the_csv_export_is_the_whole_filtered_set_as_a_spreadsheet_reads_it,
    events_are_listed_by_type_with_their_delivery_attempts,
);

/// An active test account (201), as the API returns it.
async fn account(app: &TestApp, n: u32) -> Value {
    app.active_account(app.test_key(), n).await
}

fn s<'a>(v: &'a Value, field: &str) -> &'a str {
    v[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} in {v}"))
}

/// A transaction reaching `account` as a bank's notification would record it.
struct Tx<'a> {
    account: &'a Value,
    reference: &'a str,
    amount: i64,
    sender: &'a str,
    narration: &'a str,
}

async fn record(app: &TestApp, tx: Tx<'_>) -> String {
    let now = Utc::now();
    let remote = RemoteTransaction {
        reference: tx.reference.to_owned(),
        account_number: s(tx.account, "accountNumber").to_owned(),
        amount: tx.amount,
        currency: "NGN".into(),
        sender_name: Some(tx.sender.to_owned()),
        sender_account_number: Some("0011223344".into()),
        sender_bank_name: Some("Zenith Bank".into()),
        narration: Some(tx.narration.to_owned()),
        paid_at: now + Duration::seconds(1),
    };
    match deposits::record(
        &app.db,
        Mode::Test,
        Bank::TestBank,
        &remote,
        Source::Notification,
        now,
    )
    .await
    .unwrap()
    {
        Recorded::New(d) => d.id.into(),
        other => panic!("not recorded: {other:?}"),
    }
}

/// A deposit (REF-1, 150,000 kobo) to a new account: the account.
async fn a_deposit(app: &TestApp) -> Value {
    let a = account(app, 1).await;
    record(
        app,
        Tx {
            account: &a,
            reference: "REF-1",
            amount: 150_000,
            sender: "Bola",
            narration: "x",
        },
    )
    .await;
    a
}

/// [`a_deposit`], and the id of the event announcing it.
async fn a_deposit_event(app: &TestApp) -> String {
    a_deposit(app).await;
    let events = app.get_json(app.test_key(), "/v1/events").await;
    s(&events["data"][0], "id").to_owned()
}

/// Sets the settlement account of `key`'s business to the NUBAN of bank 058 and `serial` (200):
/// the account as answered.
async fn set_settlement_account(app: &TestApp, key: &str, serial: u32) -> Value {
    let put = app
        .client
        .put(app.url("/v1/settlement-account"))
        .bearer_auth(key)
        .json(&json!({"bankCode": "058", "accountNumber": domain::nuban::account_number("058", serial).unwrap()}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    put.json().await.unwrap()
}

/// Asks for a payout of `body` with `key` (202): the payout as answered.
async fn pay_out(app: &TestApp, key: &str, idempotency_key: &str, body: Value) -> Value {
    let payout = app
        .client
        .post(app.url("/v1/payouts"))
        .bearer_auth(key)
        .header("Idempotency-Key", idempotency_key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(payout.status(), 202);
    payout.json().await.unwrap()
}

/// How many deliveries the API lists for an event.
async fn delivery_count(app: &TestApp, event: &str) -> usize {
    let e = app
        .get_json(app.test_key(), &format!("/v1/events/{event}"))
        .await;
    e["deliveries"].as_array().unwrap().len()
}

/// The settlement form of the balance page, filled.
fn settlement_form(token: &str, number: &str, password: &str) -> Vec<(String, String)> {
    [
        ("form_token", token),
        ("bankCode", "058"),
        ("accountNumber", number),
        ("schedule", "daily"),
        ("password", password),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .to_vec()
}

async fn post_settlement(http: &mut Http, fields: Vec<(String, String)>) -> Answer {
    let pairs: Vec<(&str, &str)> = fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    http.post("/dashboard/test/balance/settlement-account", &pairs)
        .await
}

async fn signed_in(app: &TestApp, role: Role) -> (Http, String) {
    let (email, password) = add_user(app, role).await;
    let mut http = Http::new(app);
    http.sign_in(&email, &password).await;
    (http, password)
}

/// The export's records, header first, after checking the download's headers and its BOM.
fn csv_records(answer: &Answer) -> Vec<Vec<String>> {
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.header("content-type"), "text/csv; charset=utf-8");
    let disposition = answer.header("content-disposition");
    assert!(
        disposition.starts_with("attachment; filename=\"deposits-test-")
            && disposition.ends_with(".csv\""),
        "{disposition}"
    );
    assert_eq!(answer.header("cache-control"), "no-store");
    let text = answer
        .body
        .strip_prefix('\u{feff}')
        .expect("UTF-8 with a byte-order mark");
    let records = parse_csv(text);
    assert_eq!(records[0][0], "Deposit ID");
    assert!(records.iter().all(|r| r.len() == records[0].len()));
    records
}

fn column(records: &[Vec<String>], name: &str) -> usize {
    records[0]
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name}"))
}

async fn a_full_browse_of_deposits_events_and_balance_shows_no_secret(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut bvns = Vec::new();
    let mut accounts = Vec::new();
    for n in 0..2 {
        bvns.push(
            account_body(n, "test-bank")["customerBvn"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        accounts.push(account(&app, n).await);
    }
    let mut nin_body = account_body(9, "test-bank");
    nin_body.as_object_mut().unwrap().remove("customerBvn");
    nin_body["customerNin"] = "33344455566".into();
    let resp = app.create(app.test_key(), "nin", &nin_body).await;
    assert_eq!(resp.status(), 201);
    accounts.push(resp.json().await.unwrap());
    bvns.push("33344455566".into());
    for (i, a) in accounts.iter().enumerate() {
        record(
            &app,
            Tx {
                account: a,
                reference: &format!("REF-{i}"),
                amount: 2_000_000,
                sender: "Bola Ade",
                narration: "rent",
            },
        )
        .await;
    }
    set_settlement_account(&app, app.test_key(), 12_345_678).await;
    pay_out(
        &app,
        app.test_key(),
        "po-1",
        json!({"amount": 500_000, "reference": "november"}),
    )
    .await;
    app.approve_kyb().await;

    let (mut http, password) = signed_in(&app, Role::Owner).await;
    let events = app
        .get_json(app.test_key(), "/v1/events?pageSize=100")
        .await;
    let mut paths = Vec::new();
    for mode in ["test", "live"] {
        for page in [
            "deposits",
            "deposits?status=flagged",
            "deposits?q=REF-1",
            "events",
            "events?type=deposit.received",
            "balance",
            "balance?payoutStatus=pending",
        ] {
            paths.push(format!("/dashboard/{mode}/{page}"));
        }
    }
    for e in events["data"].as_array().unwrap() {
        paths.push(format!("/dashboard/test/events/{}", s(e, "id")));
    }
    for path in &paths {
        let answer = http.get(path).await;
        assert_eq!(answer.status, 200, "{path}");
    }
    let csv = http.get("/dashboard/test/deposits/export").await;
    assert_eq!(csv_records(&csv).len(), 1 + 3);
    let balance = http.get("/dashboard/test/balance").await;
    assert!(
        balance.body.contains("₦55,000.00"),
        "available: 3 × 20,000 − 5,000"
    );
    assert!(balance.body.contains("₦5,000.00"), "the payout");
    assert!(balance.body.contains("november"));

    assert!(http.seen.len() > paths.len());
    assert_no_secret_seen(&http, &app, &password, &bvns);
    for body in &http.seen {
        assert!(!body.contains("identity_enc") && !body.contains("customerBvn"));
    }
}

async fn one_business_never_sees_another_businesses_deposits_events_or_payouts(backend: Backend) {
    let app = spawn_app(backend).await;
    let other = app.other_business("Other Co", KybStatus::Approved).await;
    let theirs = app.active_account(&other.test.secret_key, 1).await;
    let their_deposit = record(
        &app,
        Tx {
            account: &theirs,
            reference: "THEIR-REF-1",
            amount: 7_777_700,
            sender: "Their Payer",
            narration: "theirs",
        },
    )
    .await;
    let put = set_settlement_account(&app, &other.test.secret_key, 87_654_321).await;
    let their_number = s(&put, "accountNumber").to_owned();
    let payout = pay_out(
        &app,
        &other.test.secret_key,
        "theirs",
        json!({"amount": 100_000}),
    )
    .await;
    let their_payout = s(&payout, "id").to_owned();
    let their_events = app.get_json(&other.test.secret_key, "/v1/events").await;
    let their_event = s(&their_events["data"][0], "id").to_owned();

    let ours = account(&app, 2).await;
    record(
        &app,
        Tx {
            account: &ours,
            reference: "OUR-REF-1",
            amount: 150_000,
            sender: "Our Payer",
            narration: "ours",
        },
    )
    .await;
    app.approve_kyb().await;

    let (mut http, _) = signed_in(&app, Role::Owner).await;
    let never = [
        their_deposit.as_str(),
        "THEIR-REF-1",
        "₦77,777.00",
        "Their Payer",
        s(&theirs, "id"),
        s(&theirs, "accountNumber"),
        their_payout.as_str(),
        their_event.as_str(),
        their_number.as_str(),
    ];
    for mode in ["test", "live"] {
        for page in ["deposits", "events", "balance"] {
            let answer = http.get(&format!("/dashboard/{mode}/{page}")).await;
            assert_eq!(answer.status, 200);
        }
    }
    let list = http.get("/dashboard/test/deposits").await;
    assert!(list.body.contains("OUR-REF-1"), "ours is listed");
    let browsed = http.seen.len();
    // Searching for theirs by reference or by account number finds nothing.
    for q in ["THEIR-REF-1", s(&theirs, "accountNumber")] {
        let answer = http.get(&format!("/dashboard/test/deposits?q={q}")).await;
        assert!(answer.body.contains("No deposits match"), "{q}");
        let csv = http
            .get(&format!("/dashboard/test/deposits/export?q={q}"))
            .await;
        assert_eq!(csv_records(&csv).len(), 1, "only the header: {q}");
    }
    let csv = http.get("/dashboard/test/deposits/export").await;
    assert_eq!(csv_records(&csv).len(), 2, "the header and ours");
    // By id: exactly as an unknown id (404, not 403: no hint that it exists), in either mode,
    // and resending it is refused the same way.
    for path in [
        format!("/dashboard/test/events/{their_event}"),
        format!("/dashboard/live/events/{their_event}"),
        "/dashboard/test/events/evt_01J00000000000000000000000".to_owned(),
        "/dashboard/test/events/%00".to_owned(),
    ] {
        let answer = http.get(&path).await;
        assert_eq!(answer.status, 404, "{path}");
        assert!(answer.body.contains("Event not found"), "{path}");
    }
    let token = http.form_token_of("/dashboard/test/events").await;
    let resend = http
        .post_form(
            &format!("/dashboard/test/events/{their_event}/resend"),
            &token,
            &[],
        )
        .await;
    assert_eq!(resend.status, 404);
    assert!(resend.body.contains("Event not found"));
    // A search page shows what was searched for; nothing else of theirs.
    for (i, body) in http.seen.iter().enumerate() {
        for text in never {
            if i >= browsed && (text == "THEIR-REF-1" || text == s(&theirs, "accountNumber")) {
                continue;
            }
            assert!(!body.contains(text), "{text} of another business in a page");
        }
    }

    // Their user sees theirs and not ours.
    let (their_email, their_password) = add_user_to(&app, &other.id, Role::Viewer).await;
    let mut them = Http::new(&app);
    them.sign_in(&their_email, &their_password).await;
    let list = them.get("/dashboard/test/deposits").await;
    assert!(list.body.contains("THEIR-REF-1"));
    assert!(!list.body.contains("OUR-REF-1"));
    let balance = them.get("/dashboard/test/balance").await;
    assert!(balance.body.contains(&their_payout));
}

async fn posts_without_their_form_token_are_refused_and_change_nothing(backend: Backend) {
    let app = spawn_app(backend).await;
    let receiver = test_support::Receiver::start().await;
    app.set_webhook_url(&app.business.id, Mode::Test, &receiver.url)
        .await;
    let event = a_deposit_event(&app).await;
    let before = delivery_count(&app, &event).await;

    let (mut http, password) = signed_in(&app, Role::Owner).await;
    let number = domain::nuban::account_number("058", 12_345_678).unwrap();
    for token in [None, Some("not-the-token")] {
        let mut fields = vec![];
        if let Some(t) = token {
            fields.push(("form_token", t));
        }
        let resend = http
            .post(&format!("/dashboard/test/events/{event}/resend"), &fields)
            .await;
        assert_eq!(resend.status, 403);
        let mut fields = fields.clone();
        fields.extend([
            ("bankCode", "058"),
            ("accountNumber", number.as_str()),
            ("schedule", "manual"),
            ("password", password.as_str()),
        ]);
        let change = http
            .post("/dashboard/test/balance/settlement-account", &fields)
            .await;
        assert_eq!(change.status, 403);
        assert!(change.body.contains("This form has expired"));
    }
    assert_eq!(
        app.get(app.test_key(), "/v1/settlement-account")
            .await
            .status(),
        404,
        "nothing was stored"
    );
    assert_eq!(
        delivery_count(&app, &event).await,
        before,
        "nothing was resent"
    );
}

async fn roles_decide_who_resends_and_who_changes_the_settlement_account(backend: Backend) {
    let app = spawn_app(backend).await;
    let receiver = test_support::Receiver::start().await;
    app.set_webhook_url(&app.business.id, Mode::Test, &receiver.url)
        .await;
    let event = a_deposit_event(&app).await;
    let event_page = format!("/dashboard/test/events/{event}");
    let resend_path = format!("{event_page}/resend");
    let number = domain::nuban::account_number("058", 12_345_678).unwrap();

    // A viewer sees neither control, and is refused even with a valid form token.
    let (mut viewer, viewer_password) = signed_in(&app, Role::Viewer).await;
    let page = viewer.get(&event_page).await;
    assert_eq!(page.status, 200);
    assert!(!page.body.contains(&resend_path), "no resend for a viewer");
    let balance = viewer.get("/dashboard/test/balance").await;
    assert!(!balance.body.contains("settlement-account\""), "no form");
    assert!(!balance.body.contains("Save settlement account"));
    let token = page.form_token();
    let refused = viewer.post_form(&resend_path, &token, &[]).await;
    assert_eq!(refused.status, 403);
    assert!(refused.body.contains("Not available to your role"));
    let refused = post_settlement(
        &mut viewer,
        settlement_form(&token, &number, &viewer_password),
    )
    .await;
    assert_eq!(refused.status, 403);

    // A developer resends, but does not change the settlement account.
    let (mut developer, developer_password) = signed_in(&app, Role::Developer).await;
    let page = developer.get(&event_page).await;
    assert!(page.body.contains(&resend_path), "resend for a developer");
    assert!(
        !developer
            .get("/dashboard/test/balance")
            .await
            .body
            .contains("Save settlement account")
    );
    let token = page.form_token();
    let resent = developer.post_form(&resend_path, &token, &[]).await;
    assert_eq!(resent.status, 303);
    assert_eq!(resent.location(), format!("{event_page}?done=resent"));
    // The resend is in the audit log, under the developer, naming the event.
    let entries = test_support::store::audit_log(&app.db, &app.business.id).await;
    let resends: Vec<_> = entries
        .iter()
        .filter(|e| e.action == domain::AuditAction::EventResent)
        .collect();
    assert_eq!(resends.len(), 1, "one audit entry for one resend");
    assert!(event_page.ends_with(resends[0].target.as_deref().unwrap()));
    assert_ne!(resends[0].actor_user_id, None);
    let refused = post_settlement(
        &mut developer,
        settlement_form(&token, &number, &developer_password),
    )
    .await;
    assert_eq!(refused.status, 403);
    assert_eq!(
        app.get(app.test_key(), "/v1/settlement-account")
            .await
            .status(),
        404
    );

    // An owner does both.
    let (mut owner, owner_password) = signed_in(&app, Role::Owner).await;
    let page = owner.get("/dashboard/test/balance").await;
    assert!(page.body.contains("Save settlement account"));
    let changed = post_settlement(
        &mut owner,
        settlement_form(&page.form_token(), &number, &owner_password),
    )
    .await;
    assert_eq!(changed.status, 303, "{}", changed.body);
    let page = owner.get(&event_page).await;
    assert!(page.body.contains(&resend_path));
}

async fn the_settlement_account_changes_only_with_the_owners_password_and_the_apis_rules(
    backend: Backend,
) {
    let app = spawn_app(backend).await;
    let (mut http, password) = signed_in(&app, Role::Owner).await;
    let good = domain::nuban::account_number("058", 12_345_678).unwrap();
    let unknown = domain::nuban::account_number("058", 1_234).unwrap();
    let stored = async || {
        app.get(app.test_key(), "/v1/settlement-account")
            .await
            .status()
    };
    let mut post = async |number: &str, password: &str| {
        let token = http.form_token_of("/dashboard/test/balance").await;
        http.post_form(
            "/dashboard/test/balance/settlement-account",
            &token,
            &[
                ("bankCode", "058"),
                ("accountNumber", number),
                ("schedule", "manual"),
                ("password", password),
            ],
        )
        .await
    };
    let cases = [
        (
            good.as_str(),
            "not my password at all",
            422,
            "Your password is not right",
        ),
        (good.as_str(), "", 422, "Your password is not right"),
        (
            "0123456789",
            password.as_str(),
            422,
            "not an account number of that bank",
        ),
        (
            "12345",
            password.as_str(),
            422,
            "not an account number of that bank",
        ),
        (
            unknown.as_str(),
            password.as_str(),
            422,
            "The bank has no account with that number",
        ),
    ];
    for (number, pw, status, message) in cases {
        let answer = post(number, pw).await;
        assert_eq!(answer.status, status, "{number}");
        assert!(answer.body.contains(message), "{number}: {}", answer.body);
        // What was typed stays in the form, the password never.
        assert!(answer.body.contains(&format!("value=\"{number}\"")));
        assert!(pw.is_empty() || !answer.body.contains(pw));
        assert_eq!(stored().await, 404, "nothing stored: {number}");
    }
    let answer = post(&good, &password).await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    assert_eq!(answer.location(), "/dashboard/test/balance?done=settlement");
    // The API's own record of it, with the bank's name and the event.
    let api = app.get_json(app.test_key(), "/v1/settlement-account").await;
    assert_eq!(api["accountNumber"], good.as_str());
    assert_eq!(api["schedule"], "manual");
    let events = app
        .get_json(app.test_key(), "/v1/events?type=settlement_account.updated")
        .await;
    assert_eq!(events["data"].as_array().unwrap().len(), 1);
    let page = http.get("/dashboard/test/balance?done=settlement").await;
    assert!(page.body.contains("Settlement account saved."));
    assert!(page.body.contains(s(&api, "accountName")));
    assert!(page.body.contains(&good));
    assert!(page.body.contains("Guaranty Trust Bank (058)"));
    // Test payouts are never held.
    assert!(!page.body.contains("Payouts held until"));
}

/// A signed-in session cannot guess the password on a form that asks for it again: five wrong
/// ones lock the e-mail like five failed sign-ins, and then even the right one is refused there
/// and at the sign-in form.
async fn wrong_passwords_on_a_form_lock_the_email_as_at_sign_in(backend: Backend) {
    let app = spawn_app(backend).await;
    let (email, password) = add_user(&app, Role::Owner).await;
    let mut http = Http::new(&app);
    http.sign_in(&email, &password).await;
    let good = domain::nuban::account_number("058", 12_345_678).unwrap();
    for n in 0..5 {
        let token = http.form_token_of("/dashboard/test/balance").await;
        let answer = post_settlement(
            &mut http,
            settlement_form(&token, &good, &format!("guess number {n}")),
        )
        .await;
        assert_eq!(answer.status, 422, "guess {n}");
    }
    let token = http.form_token_of("/dashboard/test/balance").await;
    let answer = post_settlement(&mut http, settlement_form(&token, &good, &password)).await;
    assert_eq!(answer.status, 422, "the right password while locked");
    assert!(answer.body.contains("Your password is not right"));
    assert_eq!(
        app.get(app.test_key(), "/v1/settlement-account")
            .await
            .status(),
        404
    );
    let mut other = Http::new(&app);
    let refused = other.sign_in_answer(&email, &password).await;
    assert_eq!(refused.status, 429, "the e-mail is locked at sign-in too");
}

async fn deposits_are_searched_filtered_and_paged_by_cursor(backend: Backend) {
    let app = spawn_app(backend).await;
    let first = account(&app, 1).await;
    let second = account(&app, 2).await;
    let mut ids = Vec::new();
    for i in 0..30 {
        let a = if i % 3 == 0 { &second } else { &first };
        ids.push(
            record(
                &app,
                Tx {
                    account: a,
                    reference: &format!("TXN-{i:03}"),
                    amount: 100_000 + i,
                    sender: "Bola Ade",
                    narration: "fees",
                },
            )
            .await,
        );
    }
    // Two deposits reach the second account after it is deactivated: flagged.
    let resp = app.deactivate(app.test_key(), s(&second, "id")).await;
    assert_eq!(resp.status(), 200);
    for i in 30..32 {
        ids.push(
            record(
                &app,
                Tx {
                    account: &second,
                    reference: &format!("TXN-{i:03}"),
                    amount: 100_000 + i,
                    sender: "Late Payer",
                    narration: "late",
                },
            )
            .await,
        );
    }
    let (mut http, _) = signed_in(&app, Role::Viewer).await;
    let page1 = http.get("/dashboard/test/deposits").await;
    assert_eq!(page1.status, 200);
    assert!(page1.body.contains("1–25 of 32 deposits"), "{}", page1.body);
    assert!(page1.body.contains("Flagged"), "flagged ones are marked");
    assert!(page1.body.contains("class=\"flagged\""));
    assert!(page1.body.contains("recorded, never credited"));
    // Newest first: the two flagged ones lead.
    let at = |body: &str, id: &str| body.find(id).unwrap_or(usize::MAX);
    assert!(at(&page1.body, "TXN-031") < at(&page1.body, "TXN-030"));
    assert!(at(&page1.body, "TXN-030") < at(&page1.body, "TXN-029"));
    assert!(!page1.body.contains("TXN-006"), "on the next page");
    // The next page is a cursor of the shared paged list, as the API's nextCursor.
    let next = regex::Regex::new(r#"href="(/dashboard/test/deposits\?cursor=[^"]+)" rel="next"|rel="next" href="(/dashboard/test/deposits\?cursor=[^"]+)""#)
        .unwrap()
        .captures(&page1.body)
        .and_then(|c| c.get(1).or(c.get(2)))
        .expect("a next link by cursor")
        .as_str()
        .replace("&amp;", "&");
    let page2 = http.get(&next).await;
    assert!(
        page2.body.contains("26–32 of 32 deposits"),
        "{}",
        page2.body
    );
    for i in 0..7 {
        assert!(page2.body.contains(&format!("TXN-{i:03}")), "TXN-{i:03}");
    }
    assert!(!page2.body.contains("rel=\"next\" href"), "the last page");
    assert!(
        page2
            .body
            .contains("href=\"/dashboard/test/deposits\" rel=\"prev\"")
            || page2
                .body
                .contains("rel=\"prev\" href=\"/dashboard/test/deposits\"")
    );
    // A forged cursor reads as the first page.
    let forged = http.get("/dashboard/test/deposits?cursor=bm9wZQ").await;
    assert!(forged.body.contains("1–25 of 32 deposits"));

    // By provider reference: exactly that one.
    let one = http.get("/dashboard/test/deposits?q=TXN-007").await;
    assert!(one.body.contains("1–1 of 1 deposit"), "{}", one.body);
    assert!(one.body.contains("TXN-007"));
    let partial = http.get("/dashboard/test/deposits?q=TXN-00").await;
    assert!(partial.body.contains("No deposits match"));
    // By account number: that account's, flagged included; with a status, those only.
    let number = s(&second, "accountNumber");
    let by_number = http
        .get(&format!("/dashboard/test/deposits?q=%20{number}%20"))
        .await;
    assert!(
        by_number.body.contains("1–12 of 12 deposits"),
        "{}",
        by_number.body
    );
    assert!(!by_number.body.contains("TXN-001"));
    let flagged = http
        .get(&format!(
            "/dashboard/test/deposits?q={number}&status=flagged"
        ))
        .await;
    assert!(
        flagged.body.contains("1–2 of 2 deposits"),
        "{}",
        flagged.body
    );
    let flagged_all = http.get("/dashboard/test/deposits?status=flagged").await;
    assert!(flagged_all.body.contains("1–2 of 2 deposits"));
    assert!(flagged_all.body.contains("selected>Flagged"));
    // Bad search text: the reason, and the unfiltered list.
    let long = "x".repeat(201);
    let refused = http
        .get(&format!("/dashboard/test/deposits?q={long}"))
        .await;
    assert!(refused.body.contains("at most 200 characters"));
    assert!(refused.body.contains("1–25 of 32 deposits"));
    // Live mode has none (and is closed before KYB).
    assert_eq!(http.get("/dashboard/live/deposits").await.status, 403);
    app.approve_kyb().await;
    let live = http.get("/dashboard/live/deposits").await;
    assert!(live.body.contains("No live deposits yet"));
}

async fn the_csv_export_is_the_whole_filtered_set_as_a_spreadsheet_reads_it(backend: Backend) {
    let app = spawn_app(backend).await;
    let first = account(&app, 1).await;
    let second = account(&app, 2).await;
    // More than one batch of the stream (500 rows).
    let n = 1_103;
    for i in 0..n {
        let a = if i % 2 == 0 { &first } else { &second };
        record(
            &app,
            Tx {
                account: a,
                reference: &format!("BULK-{i:05}"),
                amount: 150_000 + i,
                sender: "Bola Ade",
                narration: "fees",
            },
        )
        .await;
    }
    let tricky = record(
        &app,
        Tx {
            account: &first,
            reference: "TRICKY-1",
            amount: 2_500_050,
            sender: "=HYPERLINK(\"http://evil.example\",\"Click\")",
            narration: "School fees, term 2 \"Ọmọ́\"\r\nsecond line",
        },
    )
    .await;
    let (mut http, _) = signed_in(&app, Role::Viewer).await;

    // The page links to the export of its own filter.
    let number = s(&first, "accountNumber");
    let page = http
        .get(&format!("/dashboard/test/deposits?q={number}"))
        .await;
    let href = format!("/dashboard/test/deposits/export?q={number}");
    assert!(
        page.body.contains(&format!("href=\"{href}\"")),
        "{}",
        page.body
    );

    let all = csv_records(&http.get("/dashboard/test/deposits/export").await);
    assert_eq!(all.len() as i64, 1 + n + 1, "every deposit, once");
    let ids: std::collections::HashSet<&String> = all[1..].iter().map(|r| &r[0]).collect();
    assert_eq!(ids.len() as i64, n + 1, "no row twice across batches");
    assert_eq!(all[1][0], tricky, "newest first");
    let reference = column(&all, "Provider reference");
    assert_eq!(all[2][reference], format!("BULK-{:05}", n - 1));
    assert_eq!(all[all.len() - 1][reference], "BULK-00000");

    let only = csv_records(&http.get(&href).await);
    assert_eq!(only.len() as i64, 1 + (n + 1) / 2 + 1, "the filtered set");
    let number_col = column(&only, "Account number");
    assert!(only[1..].iter().all(|r| r[number_col] == number));
    let one = csv_records(&http.get("/dashboard/test/deposits/export?q=TRICKY-1").await);
    assert_eq!(one.len(), 2);
    let row = &one[1];
    let cell = |name: &str| row[column(&one, name)].as_str();
    assert_eq!(cell("Deposit ID"), tricky);
    assert_eq!(cell("Amount (NGN)"), "25000.50");
    assert_eq!(cell("Amount (kobo)"), "2500050");
    assert_eq!(cell("Currency"), "NGN");
    assert_eq!(cell("Status"), "credited");
    assert_eq!(cell("Account number"), number);
    assert_eq!(cell("Account ID"), s(&first, "id"));
    assert_eq!(cell("Account name"), s(&first, "accountName"));
    // A formula is text (a leading '), quotes and line breaks survive quoting, UTF-8 intact.
    assert_eq!(
        cell("Sender name"),
        "'=HYPERLINK(\"http://evil.example\",\"Click\")"
    );
    assert_eq!(
        cell("Narration"),
        "School fees, term 2 \"Ọmọ́\"\r\nsecond line"
    );
    assert_eq!(cell("Source"), "notification");
    assert!(cell("Received at (UTC)").ends_with('Z'));
    // No row starts a cell with a formula character unescaped.
    for r in &all {
        for c in r {
            assert!(!c.starts_with(['=', '+', '@']), "{c}");
        }
    }
    let none = csv_records(&http.get("/dashboard/test/deposits/export?q=NOPE").await);
    assert_eq!(none.len(), 1, "only the header");
    let flagged = csv_records(
        &http
            .get("/dashboard/test/deposits/export?status=flagged")
            .await,
    );
    assert_eq!(flagged.len(), 1);
}

async fn events_are_listed_by_type_with_their_delivery_attempts(backend: Backend) {
    let app = spawn_app(backend).await;
    let receiver = test_support::Receiver::start().await;
    receiver.set_default(test_support::Reply::status(500).body("receiver down <b>now</b>"));
    app.set_webhook_url(&app.business.id, Mode::Test, &receiver.url)
        .await;
    let _worker = test_support::start_webhooks_worker(&app, app.shutdown.clone());
    let a = a_deposit(&app).await;
    app.relay.kick();
    receiver
        .wait_for(1, std::time::Duration::from_secs(20))
        .await;
    let events = app.get_json(app.test_key(), "/v1/events").await;
    let event = s(&events["data"][0], "id").to_owned();
    assert_eq!(events["data"][0]["type"], "deposit.received");
    // The attempt is recorded just after the receiver answers.
    test_support::wait_until(
        "the attempt recorded",
        std::time::Duration::from_secs(20),
        async || {
            let e = app
                .get_json(app.test_key(), &format!("/v1/events/{event}"))
                .await;
            !e["deliveries"][0]["attempts"]
                .as_array()
                .unwrap()
                .is_empty()
        },
    )
    .await;

    let (mut http, _) = signed_in(&app, Role::Viewer).await;
    let list = http.get("/dashboard/test/events").await;
    assert!(list.body.contains(&event));
    assert!(list.body.contains("deposit.received"));
    let filtered = http
        .get("/dashboard/test/events?type=virtualaccount.active")
        .await;
    assert!(!filtered.body.contains(&event));
    assert!(filtered.body.contains("No events of this type"));
    let by_type = http
        .get("/dashboard/test/events?type=deposit.received")
        .await;
    assert!(by_type.body.contains(&event));
    assert!(by_type.body.contains("1–1 of 1 event"));

    let page = http.get(&format!("/dashboard/test/events/{event}")).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains(&receiver.url), "where it went");
    assert!(
        page.body.contains(">500<"),
        "the status code of the attempt"
    );
    // The receiver's answer is shown as text, never as markup.
    assert!(page.body.contains("receiver down"));
    assert!(!page.body.contains("<b>now"), "escaped");
    assert!(page.body.contains("REF-1"), "the data sent");
    assert!(
        page.body
            .contains(&format!("/dashboard/test/accounts/{}", s(&a, "id")))
    );
}

/// Figures, not a check: the Deposits page and its export for a business with many deposits
/// (`VAS_SCALE_DEPOSITS`, default 1,000,000, over 1,000 accounts; one in a thousand flagged), on
/// the PostgreSQL of TEST_DATABASE_URL. `cargo test --release -p api --test it
/// dashboard_pages_http::deposits_page_at_scale -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a measurement: inserts a million deposits"]
async fn deposits_page_at_scale() {
    use sea_orm::ConnectionTrait;
    let Some(backend) = Backend::postgres() else {
        eprintln!("SKIPPED deposits_page_at_scale: TEST_DATABASE_URL is not set");
        return;
    };
    let n: u64 = std::env::var("VAS_SCALE_DEPOSITS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let app = spawn_app(backend).await;
    let business = &app.business.id;
    let started = std::time::Instant::now();
    for sql in [
        format!(
            "INSERT INTO virtual_accounts (id, business_id, mode, status, bank, account_number, \
             account_name, customer_name, customer_email, customer_phone, customer_reference, \
             identity_type, identity_enc, created_at, activated_at, updated_at) \
             SELECT 'va_' || lpad(g::text, 26, '0'), '{business}', 'test', 'active', 'test-bank', \
             lpad(g::text, 10, '0'), 'Acme Ltd/Customer ' || g, 'Customer ' || g, \
             'c' || g || '@example.com', '+2348030000000', 'ref-' || g, 'bvn', 'sealed', \
             now() - interval '400 days', now(), now() FROM generate_series(1, 1000) g"
        ),
        format!(
            "INSERT INTO deposits (id, account_id, business_id, mode, bank, status, amount, \
             currency, provider_reference, sender_name, sender_account_number, sender_bank_name, \
             narration, source, received_at, created_at) \
             SELECT 'dep_' || lpad(g::text, 26, '0'), 'va_' || lpad((g % 1000 + 1)::text, 26, '0'), \
             '{business}', 'test', 'test-bank', \
             CASE WHEN g % 1000 = 0 THEN 'flagged' ELSE 'credited' END, 10000 + g % 100000, 'NGN', \
             'TXN' || lpad(g::text, 12, '0'), 'Sender ' || g, '0011223344', 'Zenith Bank', \
             'payment ' || g, 'notification', now() - (g || ' seconds')::interval, \
             now() - (g || ' seconds')::interval FROM generate_series(1, {n}) g"
        ),
        "ANALYZE virtual_accounts".to_owned(),
        "ANALYZE deposits".to_owned(),
    ] {
        app.db.execute_unprepared(&sql).await.unwrap();
    }
    eprintln!("inserted {n} deposits in {:?}", started.elapsed());
    let (mut http, _) = signed_in(&app, Role::Viewer).await;
    let page1 = http.get("/dashboard/test/deposits").await;
    let next = regex::Regex::new(r#"rel="next" href="([^"]+)""#)
        .unwrap()
        .captures(&page1.body)
        .expect("a next link")[1]
        .replace("&amp;", "&");
    let probe = n / 2 + 7;
    let cases = [
        ("page 1", "/dashboard/test/deposits".to_owned()),
        ("the next page (cursor)", next),
        (
            "a reference matching one",
            format!("/dashboard/test/deposits?q=TXN{probe:012}"),
        ),
        (
            "an account number (1,000 deposits)",
            "/dashboard/test/deposits?q=0000000500".to_owned(),
        ),
        (
            "a search matching none",
            "/dashboard/test/deposits?q=NOPE".to_owned(),
        ),
        (
            "flagged only",
            "/dashboard/test/deposits?status=flagged".to_owned(),
        ),
        (
            "CSV of one account (1,000 rows)",
            "/dashboard/test/deposits/export?q=0000000500".to_owned(),
        ),
    ];
    for (what, path) in cases {
        let mut times = Vec::new();
        let mut size = 0;
        for _ in 0..30 {
            let t = std::time::Instant::now();
            let answer = http.get(&path).await;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(answer.status, 200, "{what}");
            size = answer.body.len();
        }
        http.seen.clear();
        times.sort_by(f64::total_cmp);
        eprintln!(
            "{what}: p50 {:.1} ms, p99 {:.1} ms (30 runs), {size} bytes",
            times[14], times[29]
        );
    }
    // The whole export, counted as it streams (not held in memory here either).
    let cookie = format!("{SESSION_COOKIE}={}", http.cookies[SESSION_COOKIE]);
    let t = std::time::Instant::now();
    let mut response = app
        .client
        .get(app.url("/dashboard/test/deposits/export"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    let first = t.elapsed();
    let (mut bytes, mut lines) = (0usize, 0usize);
    while let Some(chunk) = response.chunk().await.unwrap() {
        bytes += chunk.len();
        lines += chunk.iter().filter(|b| **b == b'\n').count();
    }
    eprintln!(
        "CSV of all {n}: headers after {:.1} ms, whole in {:.1} s, {lines} lines, {bytes} bytes",
        first.as_secs_f64() * 1000.0,
        t.elapsed().as_secs_f64(),
    );
    assert_eq!(lines as u64, n + 1);
}
