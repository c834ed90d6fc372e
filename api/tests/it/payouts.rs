//! Payouts as a caller sees them: the settlement account (with name enquiry at the sandbox), the
//! balance and its ledger, payouts created exactly once and never past the balance, and
//! transfer notifications moving a payout to its outcome. The sending itself is
//! worker-payouts' (its own tests).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use test_support::store;
use test_support::{Backend, TestApp, account_body, eventually, id_of, json, spawn_app};

test_support::on_both_databases!(
    fifty_parallel_payouts_never_overdraw,
    deposits_and_payouts_at_once_keep_the_ledger_a_chain,
    a_payout_key_replays_and_refuses_another_body,
    a_repeated_reference_creates_nothing,
    live_payouts_wait_for_the_hold_and_test_keys_never_see_live_money,
    an_unknown_settlement_account_is_refused,
    credited_deposits_enter_the_ledger_once_and_flagged_ones_not,
    transfer_notifications_move_payouts_once,
    ledger_verify_exits_1_on_a_mismatch,
    ledger_verify_names_a_deleted_refund_even_when_the_chain_is_mended,
    ledger_verify_names_repeated_missing_and_sourceless_entries,
    a_transfer_outcome_applies_only_from_the_bank_the_payout_was_sent_through,
);

fn settlement_number(serial: u32) -> String {
    domain::nuban::account_number("058", serial).unwrap()
}

async fn set_settlement(app: &TestApp, key: &str) -> reqwest::Response {
    app.client
        .put(app.url("/v1/settlement-account"))
        .bearer_auth(key)
        .json(&json!({"bankCode": "058", "accountNumber": settlement_number(12_345_678)}))
        .send()
        .await
        .unwrap()
}

async fn pay(app: &TestApp, key: &str, idempotency_key: &str, body: &Value) -> reqwest::Response {
    app.client
        .post(app.url("/v1/payouts"))
        .bearer_auth(key)
        .header("Idempotency-Key", idempotency_key)
        .json(body)
        .send()
        .await
        .unwrap()
}

async fn fifty_parallel_payouts_never_overdraw(backend: Backend) {
    let app = spawn_app(backend).await;
    assert_eq!(
        set_settlement(&app, app.test_key()).await.status(),
        StatusCode::OK
    );
    app.funded_account(1_000_000).await;
    let attempts = (0..50).map(|n| {
        let app = &app;
        async move {
            let resp = pay(
                app,
                app.test_key(),
                &format!("p-{n}"),
                &json!({"amount": 100_000}),
            )
            .await;
            let status = resp.status();
            (status, json(resp).await)
        }
    });
    let results = futures::future::join_all(attempts).await;
    let created = results
        .iter()
        .filter(|(s, _)| *s == StatusCode::ACCEPTED)
        .count();
    let refused: Vec<_> = results
        .iter()
        .filter(|(s, _)| *s == StatusCode::UNPROCESSABLE_ENTITY)
        .collect();
    assert_eq!(created, 10, "{results:?}");
    assert_eq!(refused.len(), 40, "{results:?}");
    for (_, problem) in &refused {
        assert_eq!(problem["code"], "insufficient_balance");
        assert!(
            problem["detail"].as_str().unwrap().contains("0 kobo"),
            "{problem}"
        );
    }
    let b = app.balance(app.test_key()).await;
    assert_eq!(b["available"], 0);
    assert_eq!(b["inFlight"], 1_000_000);
    let verified = store::ledger_verifies(&app.db).await;
    assert!(verified.ok, "{verified:?}");
    // One deposit in, ten payouts out.
    assert_eq!(store::count_ledger_entries(&app.db).await, 11);
    let list = app
        .get_json(app.test_key(), "/v1/balance/transactions?pageSize=100")
        .await;
    assert_eq!(list["total"], 11);
    assert_eq!(list["data"][0]["type"], "payout");
    assert_eq!(list["data"][0]["amount"], -100_000);
    assert_eq!(list["data"][0]["balanceAfter"], 0);
    assert_eq!(list["data"][10]["type"], "deposit");
    let pending = app
        .get_json(app.test_key(), "/v1/payouts?status=pending&pageSize=100")
        .await;
    assert_eq!(pending["total"], 10);
}

/// Credits and debits of one balance racing each other: every entry's `balanceAfter` follows
/// from the one before it in the ledger's order (its `createdAt`), and the balance is the sum.
async fn deposits_and_payouts_at_once_keep_the_ledger_a_chain(backend: Backend) {
    let app = spawn_app(backend).await;
    assert_eq!(
        set_settlement(&app, app.test_key()).await.status(),
        StatusCode::OK
    );
    // Enough for all twenty payouts before any deposit lands: the deposits are credited when the
    // sandbox's notifications arrive, which may be after every payout.
    let funded = 20 * 50_000;
    let id = app.funded_account(funded).await;
    let deposits = (0..20).map(|n| {
        let app = &app;
        let id = &id;
        async move {
            let resp = app
                .post(
                    app.test_key(),
                    &format!("/v1/virtual-accounts/{id}/simulate-deposit"),
                    Some(&json!({"amount": 100_000 + n})),
                )
                .await;
            resp.status()
        }
    });
    let payouts = (0..20).map(|n| {
        let app = &app;
        async move {
            pay(
                app,
                app.test_key(),
                &format!("race-{n}"),
                &json!({"amount": 50_000}),
            )
            .await
            .status()
        }
    });
    let (deposited, paid) = futures::future::join(
        futures::future::join_all(deposits),
        futures::future::join_all(payouts),
    )
    .await;
    assert!(
        deposited.iter().all(|s| *s == StatusCode::ACCEPTED),
        "{deposited:?}"
    );
    // 1,000,000 at the start and 50,000 each: every payout fits whatever the order.
    assert!(paid.iter().all(|s| *s == StatusCode::ACCEPTED), "{paid:?}");
    let credited: i64 = (0..20).map(|n| 100_000 + n).sum();
    let expected = funded + credited - 20 * 50_000;
    eventually(Duration::from_secs(30), async || {
        let b = app.balance(app.test_key()).await;
        if b["available"] == expected {
            Ok(())
        } else {
            Err(b)
        }
    })
    .await;
    let verified = store::ledger_verifies(&app.db).await;
    assert!(verified.ok, "{verified:?}");
    let list = app
        .get_json(app.test_key(), "/v1/balance/transactions?pageSize=100")
        .await;
    assert_eq!(list["total"], 41);
    // Newest first: each entry's balance is the next older one's plus its amount.
    let entries = list["data"].as_array().unwrap();
    assert_eq!(entries[0]["balanceAfter"], expected);
    for pair in entries.windows(2) {
        assert_eq!(
            pair[0]["balanceAfter"].as_i64().unwrap(),
            pair[1]["balanceAfter"].as_i64().unwrap() + pair[0]["amount"].as_i64().unwrap(),
            "{pair:?}"
        );
    }
}

async fn a_payout_key_replays_and_refuses_another_body(backend: Backend) {
    let app = spawn_app(backend).await;
    set_settlement(&app, app.test_key()).await;
    app.funded_account(500_000).await;
    let body = json!({"amount": 100_000, "narration": "rent"});
    let first = pay(&app, app.test_key(), "k-1", &body).await;
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first = json(first).await;
    assert_eq!(first["status"], "pending");
    assert_eq!(first["destination"]["bankCode"], "058");
    assert_eq!(
        first["destination"]["accountNumber"],
        settlement_number(12_345_678)
    );
    let again = pay(&app, app.test_key(), "k-1", &body).await;
    assert_eq!(again.status(), StatusCode::ACCEPTED);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(json(again).await["id"], first["id"]);
    let other = pay(&app, app.test_key(), "k-1", &json!({"amount": 200_000})).await;
    assert_eq!(other.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(json(other).await["code"], "idempotency_key_reused");
    assert_eq!(store::count_payouts(&app.db).await, 1);
    assert_eq!(app.balance(app.test_key()).await["available"], 400_000);
    // The same key for an account is another request: the namespaces are apart.
    let account = app
        .create(app.test_key(), "k-1", &account_body(7, "test-bank"))
        .await;
    assert_eq!(account.status(), StatusCode::CREATED);
    let read = app
        .get_json(app.test_key(), &format!("/v1/payouts/{}", id_of(&first)))
        .await;
    assert_eq!(read["id"], first["id"]);
}

async fn a_repeated_reference_creates_nothing(backend: Backend) {
    let app = spawn_app(backend).await;
    set_settlement(&app, app.test_key()).await;
    app.funded_account(500_000).await;
    let first = pay(
        &app,
        app.test_key(),
        "a",
        &json!({"amount": 100_000, "reference": "inv-1"}),
    )
    .await;
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    let first = json(first).await;
    let again = pay(
        &app,
        app.test_key(),
        "b",
        &json!({"amount": 100_000, "reference": "inv-1"}),
    )
    .await;
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(json(again).await["id"], first["id"]);
    assert_eq!(store::count_payouts(&app.db).await, 1);
    assert_eq!(app.balance(app.test_key()).await["available"], 400_000);
}

async fn live_payouts_wait_for_the_hold_and_test_keys_never_see_live_money(backend: Backend) {
    let app = spawn_app(backend).await;
    app.approve_kyb().await;
    // No settlement account yet.
    let resp = pay(&app, app.live_key(), "l-0", &json!({"amount": 100_000})).await;
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    assert_eq!(json(resp).await["code"], "settlement_account_missing");
    // No live bank is configured here: its name enquiry cannot answer (503, nothing stored).
    let resp = set_settlement(&app, app.live_key()).await;
    assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(json(resp).await["code"], "provider_unavailable");
    // Stored as the route stores it once the live bank's name enquiry answered.
    let number = settlement_number(12_345_678);
    ::store::payouts::set_settlement_account(
        &app.db,
        &::store::audit::Actor::operator(),
        &app.business.id,
        domain::Mode::Live,
        &::store::payouts::VerifiedAccount {
            bank: domain::settlement_banks::check_settlement_account("058", &number).unwrap(),
            account_number: &number,
            account_name: "ACME LTD",
            schedule: domain::payout::Schedule::Manual,
        },
        domain::time::now(),
    )
    .await
    .unwrap();
    let live = app.get_json(app.live_key(), "/v1/settlement-account").await;
    assert_eq!(live["mode"], "live");
    assert_ne!(live["payoutsAvailableAt"], live["verifiedAt"]);
    let resp = pay(&app, app.live_key(), "l-1", &json!({"amount": 100_000})).await;
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    let retry_after: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((86_000..=86_400).contains(&retry_after), "{retry_after}");
    assert_eq!(json(resp).await["code"], "payouts_on_hold");
    assert_eq!(
        store::count_events_of_type(&app.db, "settlement_account.updated").await,
        1
    );

    // Test money is the test key's only.
    set_settlement(&app, app.test_key()).await;
    app.funded_account(300_000).await;
    let resp = pay(&app, app.test_key(), "t-1", &json!({"amount": 100_000})).await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let test_payout = id_of(&json(resp).await);
    let live_balance = app.balance(app.live_key()).await;
    assert_eq!(live_balance["available"], 0);
    assert_eq!(live_balance["mode"], "live");
    assert_eq!(
        app.get_json(app.live_key(), "/v1/payouts").await["total"],
        0
    );
    assert_eq!(
        app.get(app.live_key(), &format!("/v1/payouts/{test_payout}"))
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get_json(app.live_key(), "/v1/balance/transactions")
            .await["total"],
        0
    );
    assert_eq!(app.balance(app.test_key()).await["available"], 200_000);
    // The test account does not wait: payoutsAvailableAt is its change.
    let test = app.get_json(app.test_key(), "/v1/settlement-account").await;
    assert_eq!(test["payoutsAvailableAt"], test["verifiedAt"]);
}

async fn an_unknown_settlement_account_is_refused(backend: Backend) {
    let app = spawn_app(backend).await;
    assert_eq!(
        app.get(app.test_key(), "/v1/settlement-account")
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
    let unknown = settlement_number(1_234);
    assert!(unknown.starts_with("000"));
    let resp = app
        .client
        .put(app.url("/v1/settlement-account"))
        .bearer_auth(app.test_key())
        .json(&json!({"bankCode": "058", "accountNumber": unknown}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(json(resp).await["code"], "bank_account_not_found");
    let resp = app
        .client
        .put(app.url("/v1/settlement-account"))
        .bearer_auth(app.test_key())
        .json(&json!({"bankCode": "058", "accountNumber": "0123456789"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(json(resp).await["code"], "validation_failed");
    assert_eq!(
        app.get(app.test_key(), "/v1/settlement-account")
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
    let banks = app.get_json(app.test_key(), "/v1/banks").await;
    assert!(
        banks["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["code"] == "058" && b["name"] == "Guaranty Trust Bank")
    );
}

async fn credited_deposits_enter_the_ledger_once_and_flagged_ones_not(backend: Backend) {
    let app = spawn_app(backend).await;
    let id = app.funded_account(150_000).await;
    let deposits = app
        .get_json(
            app.test_key(),
            &format!("/v1/virtual-accounts/{id}/deposits"),
        )
        .await;
    let deposit_id = deposits["data"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        store::count_ledger_entries_for(&app.db, &deposit_id).await,
        1
    );
    let list = app
        .get_json(app.test_key(), "/v1/balance/transactions")
        .await;
    assert_eq!(list["data"][0]["sourceId"], deposit_id);
    assert_eq!(list["data"][0]["balanceAfter"], 150_000);
    // Money to a deactivated account is flagged: recorded, not credited.
    app.deactivate(app.test_key(), &id).await;
    app.post(
        app.test_key(),
        &format!("/v1/virtual-accounts/{id}/simulate-deposit"),
        Some(&json!({"amount": 5_000})),
    )
    .await;
    eventually(Duration::from_secs(15), async || {
        let n = store::count_deposits(&app.db).await;
        if n == 2 { Ok(()) } else { Err(n) }
    })
    .await;
    assert_eq!(store::count_ledger_entries(&app.db).await, 1);
    assert_eq!(app.balance(app.test_key()).await["available"], 150_000);
    assert!(store::ledger_verifies(&app.db).await.ok);
}

/// A `transfer.*` notification for `payout_id`, signed as the sandbox signs.
async fn notify(app: &TestApp, event: &str, data: Value) -> reqwest::Response {
    let body = json!({"event": event, "data": data}).to_string();
    let signature = provider_sandbox::sign(&app.config.sandbox.secret, body.as_bytes());
    app.client
        .post(app.url("/v1/providers/wema-bank/notifications"))
        .header("X-Provider-Signature", signature)
        .header("Content-Type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}

async fn transfer_notifications_move_payouts_once(backend: Backend) {
    let app = spawn_app(backend).await;
    set_settlement(&app, app.test_key()).await;
    app.funded_account(1_000_000).await;
    let mut ids = Vec::new();
    for n in 0..3 {
        let resp = pay(
            &app,
            app.test_key(),
            &format!("n-{n}"),
            &json!({"amount": 100_000}),
        )
        .await;
        ids.push(id_of(&json(resp).await));
    }
    assert_eq!(app.balance(app.test_key()).await["available"], 700_000);

    // Succeeded, with the bank's session id.
    let resp = notify(
        &app,
        "transfer.succeeded",
        json!({"reference": ids[0], "status": "succeeded", "sessionId": "S-1"}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(json(resp).await["outcome"], "recorded");
    let p = app
        .get_json(app.test_key(), &format!("/v1/payouts/{}", ids[0]))
        .await;
    assert_eq!(p["status"], "succeeded");
    assert_eq!(p["sessionId"], "S-1");
    assert!(p["completedAt"].is_string());

    // Failed: the money comes back once, however often the bank says so.
    let failed = json!({"reference": ids[1], "status": "failed", "failureReason": "beneficiary account is dormant"});
    notify(&app, "transfer.failed", failed.clone()).await;
    let repeat = notify(&app, "transfer.failed", failed.clone()).await;
    assert_eq!(repeat.status(), StatusCode::OK);
    let mut resent = failed.clone();
    resent["sessionId"] = json!(null);
    notify(&app, "transfer.failed", resent).await;
    let p = app
        .get_json(app.test_key(), &format!("/v1/payouts/{}", ids[1]))
        .await;
    assert_eq!(p["status"], "failed");
    assert_eq!(p["failureReason"], "beneficiary account is dormant");
    assert_eq!(store::count_ledger_entries_for(&app.db, &ids[1]).await, 2);
    assert_eq!(app.balance(app.test_key()).await["available"], 800_000);

    // Succeeded then reversed: returned once too.
    notify(
        &app,
        "transfer.succeeded",
        json!({"reference": ids[2], "status": "succeeded", "sessionId": "S-3"}),
    )
    .await;
    notify(
        &app,
        "transfer.reversed",
        json!({"reference": ids[2], "status": "reversed", "sessionId": "S-3"}),
    )
    .await;
    notify(
        &app,
        "transfer.reversed",
        json!({"reference": ids[2], "status": "reversed"}),
    )
    .await;
    let p = app
        .get_json(app.test_key(), &format!("/v1/payouts/{}", ids[2]))
        .await;
    assert_eq!(p["status"], "reversed");
    let b = app.balance(app.test_key()).await;
    assert_eq!(b["available"], 900_000);
    assert_eq!(b["inFlight"], 0);

    assert_eq!(
        store::count_events_of_type(&app.db, "payout.succeeded").await,
        2
    );
    assert_eq!(
        store::count_events_of_type(&app.db, "payout.failed").await,
        1
    );
    assert_eq!(
        store::count_events_of_type(&app.db, "payout.reversed").await,
        1
    );
    let data = store::event_data_of_type(&app.db, "payout.failed").await;
    assert_eq!(data[0]["id"], ids[1]);
    assert_eq!(data[0]["object"], "payout");
    assert!(store::ledger_verifies(&app.db).await.ok);

    // A transfer for no payout is kept as unmatched.
    let resp = notify(
        &app,
        "transfer.succeeded",
        json!({"reference": "po_unknown", "status": "succeeded"}),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(json(resp).await["outcome"], "unmatched");
}

fn ledger_verify(app: &TestApp) -> (bool, Value) {
    let dir = tempfile::tempdir().unwrap();
    let out = test_support::process::command_in(test_support::process::api_binary(), dir.path())
        .env("VAS_DATABASE__URL", &app.test_db.url)
        .args(["admin", "ledger", "verify"])
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.success(), report)
}

async fn ledger_verify_exits_1_on_a_mismatch(backend: Backend) {
    let app = spawn_app(backend).await;
    set_settlement(&app, app.test_key()).await;
    app.funded_account(300_000).await;
    pay(&app, app.test_key(), "v-1", &json!({"amount": 100_000})).await;
    let (ok, report) = ledger_verify(&app);
    assert!(ok, "{report}");
    assert_eq!(report["ok"], true);
    assert_eq!(report["entries"], 2);
    store::tamper_with_balance(&app.db, &app.business.id, "test", 1).await;
    let (ok, report) = ledger_verify(&app);
    assert!(!ok, "{report}");
    assert_eq!(
        report["mismatches"][0]["problem"],
        "balance_differs_from_sum"
    );
    assert_eq!(report["mismatches"][0]["expected"], 200_000);
    assert_eq!(report["mismatches"][0]["found"], 200_001);
}

// ---- The ledger against its sources; transfer outcomes by bank ----------------------------------

/// The account's deposit ids, oldest first.
async fn deposit_ids(app: &TestApp, account_id: &str) -> Vec<String> {
    let list = app
        .get_json(
            app.test_key(),
            &format!("/v1/virtual-accounts/{account_id}/deposits"),
        )
        .await;
    let mut ids: Vec<String> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .collect();
    ids.reverse();
    ids
}

fn mismatches_of(report: &Value, problem: &str) -> Vec<Value> {
    report["mismatches"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["problem"] == problem)
        .cloned()
        .collect()
}

/// The review's tamper: a failed payout's refund entry deleted, the later entries' balanceAfter
/// and the balance adjusted so that the ledger agrees with itself. Checked against its sources,
/// it names the payout whose return is missing.
async fn ledger_verify_names_a_deleted_refund_even_when_the_chain_is_mended(backend: Backend) {
    let app = spawn_app(backend).await;
    set_settlement(&app, app.test_key()).await;
    let account = app.funded_account(500_000).await;
    let resp = pay(&app, app.test_key(), "r-1", &json!({"amount": 100_000})).await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let payout = id_of(&json(resp).await);
    let resp = notify(
        &app,
        "transfer.failed",
        json!({"reference": payout, "status": "failed", "failureReason": "dormant"}),
    )
    .await;
    assert_eq!(json(resp).await["outcome"], "recorded");
    // Entries after the return, whose balanceAfter the tamper must adjust.
    app.deposit_credited(&account, 200_000).await;
    let (ok, report) = ledger_verify(&app);
    assert!(ok, "{report}");

    store::delete_ledger_entry(&app.db, "payout_return", &payout).await;
    store::mend_ledger_chain(&app.db).await;
    store::tamper_with_balance(&app.db, &app.business.id, "test", -100_000).await;

    let (ok, report) = ledger_verify(&app);
    assert!(!ok, "the tampered ledger passed: {report}");
    assert_eq!(report["ok"], false);
    // The ledger agrees with itself: only the source check sees it.
    let mismatches = report["mismatches"].as_array().unwrap();
    assert_eq!(mismatches.len(), 1, "{report}");
    let m = &mismatches[0];
    assert_eq!(m["problem"], "entry_missing", "{report}");
    assert_eq!(m["sourceId"], payout.as_str());
    assert_eq!(m["entryType"], "payout_return");
    assert_eq!(m["businessId"], app.business.id.as_str());
    assert_eq!(m["mode"], "test");
    assert_eq!(m["expected"], 100_000);
    assert_eq!(m["found"], 0);
}

/// A deposit credited twice (past the unique index, dropped as a careless fix might), a deposit
/// whose credit was deleted (chain and balance mended), and an entry with no source at all:
/// each is named with its ids and amounts.
async fn ledger_verify_names_repeated_missing_and_sourceless_entries(backend: Backend) {
    let app = spawn_app(backend).await;
    let account = app.funded_account(100_000).await;
    app.deposit_credited(&account, 200_000).await;
    app.deposit_credited(&account, 300_000).await;
    let deposits = deposit_ids(&app, &account).await;
    assert_eq!(deposits.len(), 3);
    let (ok, report) = ledger_verify(&app);
    assert!(ok, "{report}");

    // The first deposit's credit deleted, the ledger mended around it.
    store::delete_ledger_entry(&app.db, "deposit", &deposits[0]).await;
    store::mend_ledger_chain(&app.db).await;
    store::tamper_with_balance(&app.db, &app.business.id, "test", -100_000).await;
    // The second deposit credited again.
    store::drop_ledger_uniqueness(&app.db).await;
    let second = &deposits[1];
    store::forge_ledger_entry(&app.db, second, "btx_copy", "deposit", 200_000, second).await;
    // Money from nowhere.
    store::forge_ledger_entry(
        &app.db,
        &deposits[2],
        "btx_forged",
        "deposit",
        5_000,
        "dep_forged",
    )
    .await;
    store::mend_ledger_chain(&app.db).await;
    store::tamper_with_balance(&app.db, &app.business.id, "test", 200_000 + 5_000).await;

    let (ok, report) = ledger_verify(&app);
    assert!(!ok, "{report}");
    // Mended: the ledger agrees with itself, so every finding is against the sources.
    assert_eq!(
        report["mismatches"].as_array().unwrap().len(),
        3,
        "{report}"
    );
    let missing = mismatches_of(&report, "entry_missing");
    assert_eq!(missing.len(), 1, "{report}");
    assert_eq!(missing[0]["sourceId"], deposits[0].as_str());
    assert_eq!(missing[0]["entryType"], "deposit");
    assert_eq!(missing[0]["expected"], 100_000);
    assert_eq!(missing[0]["found"], 0);
    let repeated = mismatches_of(&report, "entry_repeated");
    assert_eq!(repeated.len(), 1, "{report}");
    assert_eq!(repeated[0]["sourceId"], deposits[1].as_str());
    assert_eq!(repeated[0]["entries"], 2);
    assert_eq!(repeated[0]["expected"], 200_000);
    assert_eq!(repeated[0]["found"], 400_000);
    let sourceless = mismatches_of(&report, "entry_without_source");
    assert_eq!(sourceless.len(), 1, "{report}");
    assert_eq!(sourceless[0]["entryId"], "btx_forged");
    assert_eq!(sourceless[0]["sourceId"], "dep_forged");
    assert_eq!(sourceless[0]["expected"], 0);
    assert_eq!(sourceless[0]["found"], 5_000);
}

async fn notify_from(app: &TestApp, bank: &str, event: &str, data: Value) -> Value {
    let body = json!({"event": event, "data": data}).to_string();
    let signature = provider_sandbox::sign(&app.config.sandbox.secret, body.as_bytes());
    let resp = app
        .client
        .post(app.url(&format!("/v1/providers/{bank}/notifications")))
        .header("X-Provider-Signature", signature)
        .header("Content-Type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    // Stored, whatever became of it: the bank gets 200.
    assert_eq!(resp.status(), StatusCode::OK);
    json(resp).await
}

/// A `transfer.*` notification moves a payout only when it comes from the bank the payout was
/// sent through: the recorded one, or (for a payout with none recorded) the configured payout
/// bank. From any other bank it is stored as `unmatched`, answered 200 and not applied: no
/// refund, no status change.
async fn a_transfer_outcome_applies_only_from_the_bank_the_payout_was_sent_through(
    backend: Backend,
) {
    let app = spawn_app(backend).await;
    set_settlement(&app, app.test_key()).await;
    app.funded_account(500_000).await;
    let mut ids = Vec::new();
    for n in 0..2 {
        let resp = pay(
            &app,
            app.test_key(),
            &format!("b-{n}"),
            &json!({"amount": 100_000}),
        )
        .await;
        assert_eq!(resp.status(), StatusCode::ACCEPTED);
        ids.push(id_of(&json(resp).await));
    }
    let status = async |id: &str| {
        app.get_json(app.test_key(), &format!("/v1/payouts/{id}"))
            .await["status"]
            .clone()
    };
    let failed = |id: &str| json!({"reference": id, "status": "failed", "failureReason": "x"});

    // No bank recorded yet (not sent): the configured payout bank (wema-bank) stands for it.
    let receipt = notify_from(&app, "access-bank", "transfer.failed", failed(&ids[0])).await;
    assert_eq!(receipt["outcome"], "unmatched", "{receipt}");
    assert_eq!(status(&ids[0]).await, "pending");
    assert_eq!(app.balance(app.test_key()).await["available"], 300_000);

    // Sent through titan-trust-bank (as a worker records before sending): wema-bank's word no
    // longer counts, titan-trust-bank's does.
    store::set_payout_provider_bank(&app.db, &ids[1], "titan-trust-bank").await;
    let receipt = notify_from(&app, "wema-bank", "transfer.failed", failed(&ids[1])).await;
    assert_eq!(receipt["outcome"], "unmatched", "{receipt}");
    assert_eq!(status(&ids[1]).await, "pending");
    assert_eq!(app.balance(app.test_key()).await["available"], 300_000);
    assert_eq!(
        store::count_notifications_with_outcome(&app.db, "unmatched").await,
        2,
        "both kept for operators"
    );
    assert_eq!(
        store::count_events_of_type(&app.db, "payout.failed").await,
        0
    );

    // From the bank each was sent through: applied, the money returned once.
    let receipt = notify_from(&app, "wema-bank", "transfer.failed", failed(&ids[0])).await;
    assert_eq!(receipt["outcome"], "recorded", "{receipt}");
    let receipt = notify_from(&app, "titan-trust-bank", "transfer.failed", failed(&ids[1])).await;
    assert_eq!(receipt["outcome"], "recorded", "{receipt}");
    for id in &ids {
        assert_eq!(status(id).await, "failed");
    }
    assert_eq!(app.balance(app.test_key()).await["available"], 500_000);
    assert!(store::ledger_verifies(&app.db).await.ok);
}
