//! A transaction that can be no deposit (docs/api/deposits-and-rechecks.md: above
//! `VAS_LIMITS__MAX_DEPOSIT`) is kept as `invalid` for operators whichever way it arrives, and a
//! simulated deposit is held to the same rule.

use std::time::Duration;

use outbound::providers::{Providers, SimulatedDeposit};
use reqwest::StatusCode;
use serde_json::{Value, json};
use test_support::store;
use test_support::{Backend, TestApp, eventually, id_of, json, spawn_app, start_recheck_worker};

test_support::on_both_databases!(
    a_recheck_keeps_a_transaction_above_the_maximum_as_invalid_once,
    a_simulated_deposit_above_the_maximum_is_refused,
);

/// Money the bank received for the account without telling the service (its notification
/// lost), as a bank's transaction list will show it: the provider's reference.
async fn paid_without_notice(app: &TestApp, account: &Value, amount: i64) -> String {
    let deposit = SimulatedDeposit {
        bank: account["preferredBank"].as_str().unwrap().to_owned(),
        account_number: account["accountNumber"].as_str().unwrap().to_owned(),
        amount,
        sender_name: Some("Bola Ade".into()),
        narration: None,
        notify: false,
        handover: false,
    };
    Providers::from_config(&app.config)
        .simulate_deposit(&deposit)
        .await
        .expect("the sandbox takes the transfer")
        .provider_reference
}

async fn recheck_to_the_end(app: &TestApp, id: &str) -> Value {
    let resp = app
        .post(
            app.test_key(),
            &format!("/v1/virtual-accounts/{id}/recheck"),
            None,
        )
        .await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let rid = json(resp).await["id"].as_str().unwrap().to_owned();
    eventually(Duration::from_secs(30), async || {
        let recheck = app
            .get_json(
                app.test_key(),
                &format!("/v1/virtual-accounts/{id}/rechecks/{rid}"),
            )
            .await;
        match recheck["status"].as_str() {
            Some("completed" | "failed") => Ok(recheck),
            _ => Err(recheck),
        }
    })
    .await
}

async fn a_recheck_keeps_a_transaction_above_the_maximum_as_invalid_once(backend: Backend) {
    let app = spawn_app(backend).await;
    let _worker = start_recheck_worker(&app, app.shutdown.clone());
    let max = app.config.limits.max_deposit;
    let account = app.active_account(app.test_key(), 1).await;
    let id = id_of(&account);
    let huge = paid_without_notice(&app, &account, max + 1).await;
    let lost = paid_without_notice(&app, &account, 5_000).await;

    let done = recheck_to_the_end(&app, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["depositsFound"], 1, "only the usable one is a deposit");
    let list = app
        .get_json(
            app.test_key(),
            &format!("/v1/virtual-accounts/{id}/deposits"),
        )
        .await;
    assert_eq!(list["total"], 1, "{list}");
    assert_eq!(list["data"][0]["providerReference"], lost.as_str());
    assert_eq!(
        store::count_notifications_for_reference(&app.db, "invalid", &huge).await,
        1,
        "kept as invalid for operators, beside invalid notifications"
    );
    let metrics = app.metrics().await;
    assert!(
        metrics.contains("provider_invalid_transactions_total{bank="),
        "operators see it on /metrics:\n{metrics}"
    );
    assert_eq!(app.balance(app.test_key()).await["available"], 5_000);
    assert_eq!(
        store::count_events_of_type(&app.db, "deposit.received").await,
        1,
        "no deposit.received for the invalid one"
    );
    assert!(store::ledger_verifies(&app.db).await.ok);

    // Found again by the next recheck: still kept once.
    let again = recheck_to_the_end(&app, &id).await;
    assert_eq!(again["status"], "completed", "{again}");
    assert_eq!(again["depositsFound"], 0);
    assert_eq!(
        store::count_notifications_with_outcome(&app.db, "invalid").await,
        1
    );
    assert_eq!(app.balance(app.test_key()).await["available"], 5_000);
}

async fn a_simulated_deposit_above_the_maximum_is_refused(backend: Backend) {
    let app = spawn_app(backend).await;
    let max = app.config.limits.max_deposit;
    let id = id_of(&app.active_account(app.test_key(), 1).await);
    let simulate = async |amount: i64| {
        app.post(
            app.test_key(),
            &format!("/v1/virtual-accounts/{id}/simulate-deposit"),
            Some(&json!({"amount": amount})),
        )
        .await
    };
    let resp = simulate(max + 1).await;
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let problem = json(resp).await;
    assert_eq!(problem["code"], "validation_failed");
    assert_eq!(problem["errors"][0]["field"], "amount", "{problem}");
    assert_eq!(problem["errors"][0]["code"], "out_of_range", "{problem}");
    assert!(
        problem["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains(&max.to_string()),
        "{problem}"
    );
    assert_eq!(simulate(max).await.status(), StatusCode::ACCEPTED);
    assert_eq!(
        store::count_notifications_with_outcome(&app.db, "invalid").await,
        0
    );
}
