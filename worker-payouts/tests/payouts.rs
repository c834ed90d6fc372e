//! worker-payouts in this process against the api and the provider sandbox: each sandbox
//! outcome reaches its payout (by notification, or by polling when the notification is lost),
//! with exactly one transfer per payout at the sandbox and the money returned exactly once; the
//! daily schedule makes one automatic payout a day however many workers run.

use std::sync::Arc;
use std::time::Duration;

use chrono::{NaiveTime, TimeZone, Utc};
use reqwest::StatusCode;
use serde_json::{Value, json};
use test_support::store;
use test_support::{
    Backend, TestApp, account_body, eventually, id_of, json, spawn_app_with, start_payouts_worker,
};
use tokio_util::sync::CancellationToken;

test_support::on_both_databases!(
    every_transfer_outcome_reaches_its_payout_with_one_transfer_each,
    two_workers_make_one_daily_payout,
    a_worker_after_a_crash_asks_before_sending_again,
);

async fn app(backend: Backend, daily: bool, transfer_delay_secs: u64) -> TestApp {
    spawn_app_with(backend, |config| {
        config.sandbox.transfer_delay_secs = transfer_delay_secs;
        config.payouts.initial_poll_secs = 1;
        config.payouts.max_poll_secs = 2;
        if daily {
            // Always due: Lagos time is past midnight all day.
            config.payouts.daily_at = "00:00".into();
            config.payouts.schedule_check_secs = 1;
        }
    })
    .await
}

async fn set_settlement(app: &TestApp, schedule: &str) {
    let number = domain::nuban::account_number("058", 12_345_678).unwrap();
    let resp = app
        .client
        .put(app.url("/v1/settlement-account"))
        .bearer_auth(app.test_key())
        .json(&json!({"bankCode": "058", "accountNumber": number, "schedule": schedule}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
}

async fn balance(app: &TestApp) -> Value {
    json(app.get(app.test_key(), "/v1/balance").await).await
}

/// `amount` kobo deposited through the sandbox and credited.
async fn fund(app: &TestApp, amount: i64) {
    let resp = app
        .create(app.test_key(), "acct-1", &account_body(1, "test-bank"))
        .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let id = id_of(&json(resp).await);
    let resp = app
        .post(
            app.test_key(),
            &format!("/v1/virtual-accounts/{id}/simulate-deposit"),
            Some(&json!({"amount": amount})),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    eventually(Duration::from_secs(15), async || {
        let b = balance(app).await;
        if b["available"] == amount {
            Ok(())
        } else {
            Err(b)
        }
    })
    .await;
}

async fn pay(app: &TestApp, amount: i64) -> String {
    let resp = app
        .client
        .post(app.url("/v1/payouts"))
        .bearer_auth(app.test_key())
        .header("Idempotency-Key", format!("pay-{amount}"))
        .json(&json!({"amount": amount}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    id_of(&json(resp).await)
}

async fn payout(app: &TestApp, id: &str) -> Value {
    json(app.get(app.test_key(), &format!("/v1/payouts/{id}")).await).await
}

/// The sandbox's transfers, each with how many times it was asked for (`requests`).
async fn sandbox_transfers(app: &TestApp) -> Vec<Value> {
    let resp = app
        .client
        .get(format!("{}/control/transfers", app.sandbox_url))
        .bearer_auth(&app.config.sandbox.key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    json(resp).await["data"].as_array().unwrap().clone()
}

async fn every_transfer_outcome_reaches_its_payout_with_one_transfer_each(backend: Backend) {
    let app = app(backend, false, 1).await;
    set_settlement(&app, "manual").await;
    fund(&app, 1_000_000).await;
    let stop = CancellationToken::new();
    let worker = start_payouts_worker(&app, stop.clone());

    // By the sandbox's rule on the last two digits of the amount.
    let succeeds = pay(&app, 100_000).await;
    let fails = pay(&app, 100_001).await;
    let reversed = pay(&app, 100_002).await;
    let lost = pay(&app, 100_003).await;
    let expected = [
        (&succeeds, "succeeded"),
        (&fails, "failed"),
        (&reversed, "reversed"),
        (&lost, "succeeded"),
    ];
    eventually(Duration::from_secs(40), async || {
        for (id, status) in expected {
            let p = payout(&app, id).await;
            if p["status"] != status {
                return Err(format!("{id}: {p}"));
            }
        }
        Ok(())
    })
    .await;

    let ok = payout(&app, &succeeds).await;
    assert!(ok["sessionId"].is_string(), "{ok}");
    assert!(ok["completedAt"].is_string(), "{ok}");
    let failed = payout(&app, &fails).await;
    assert_eq!(failed["failureReason"], "beneficiary account is dormant");
    // The lost notification was learned by asking: with the bank's session id too.
    assert!(payout(&app, &lost).await["sessionId"].is_string());

    // The money: debited once each, returned once for the failed and the reversed one.
    for id in [&succeeds, &lost] {
        assert_eq!(store::count_ledger_entries_for(&app.db, id).await, 1);
    }
    for id in [&fails, &reversed] {
        assert_eq!(store::count_ledger_entries_for(&app.db, id).await, 2);
    }
    let b = balance(&app).await;
    assert_eq!(b["available"], 1_000_000 - 100_000 - 100_003);
    assert_eq!(b["inFlight"], 0);
    assert!(store::ledger_verifies(&app.db).await.ok);

    // The events: succeeded for the three that succeeded (the reversed one first succeeded),
    // with the session id; one failed, one reversed.
    let succeeded = store::event_data_of_type(&app.db, "payout.succeeded").await;
    assert_eq!(succeeded.len(), 3, "{succeeded:?}");
    assert!(
        succeeded
            .iter()
            .any(|d| d["id"] == succeeds.as_str() && d["sessionId"].is_string())
    );
    let failed_events = store::event_data_of_type(&app.db, "payout.failed").await;
    assert_eq!(failed_events.len(), 1);
    assert_eq!(failed_events[0]["id"], fails.as_str());
    let reversed_events = store::event_data_of_type(&app.db, "payout.reversed").await;
    assert_eq!(reversed_events.len(), 1);
    assert_eq!(reversed_events[0]["id"], reversed.as_str());

    // One transfer per payout at the sandbox, asked for once.
    let transfers = sandbox_transfers(&app).await;
    assert_eq!(transfers.len(), 4, "{transfers:?}");
    for (id, _) in expected {
        let mine: Vec<&Value> = transfers
            .iter()
            .filter(|t| t["reference"] == id.as_str())
            .collect();
        assert_eq!(mine.len(), 1, "{transfers:?}");
        assert_eq!(mine[0]["requests"], 1, "{transfers:?}");
    }

    stop.cancel();
    worker.await.unwrap();
}

async fn two_workers_make_one_daily_payout(backend: Backend) {
    let app = app(backend, true, 1).await;
    set_settlement(&app, "daily").await;
    fund(&app, 750_000).await;

    // Before the day's time (08:59 in Lagos, 09:00 configured) nothing is due; at 09:00 it is.
    let at_nine = NaiveTime::from_hms_opt(9, 0, 0).unwrap();
    let mut early =
        worker_payouts::DailySchedule::from_config(&app.config, app.db.clone(), app.relay.clone())
            .unwrap();
    early.daily_at = at_nine;
    early.clock = Arc::new(|| Utc.with_ymd_and_hms(2026, 3, 2, 7, 59, 0).unwrap());
    assert_eq!(early.pay_due().await.unwrap(), 0);
    assert_eq!(store::count_payouts(&app.db).await, 0);

    let stop = CancellationToken::new();
    let workers = [
        start_payouts_worker(&app, stop.clone()),
        start_payouts_worker(&app, stop.clone()),
    ];
    eventually(
        Duration::from_secs(20),
        async || match store::count_payouts(&app.db).await {
            1 => Ok(()),
            n => Err(format!("{n} payouts")),
        },
    )
    .await;
    // Several more checks by both workers: still one.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(store::count_payouts(&app.db).await, 1);

    let list = json(app.get(app.test_key(), "/v1/payouts").await).await;
    let p = &list["data"][0];
    let today = domain::payout::daily_payout_day(Utc::now(), NaiveTime::MIN).unwrap();
    assert_eq!(p["reference"], domain::payout::daily_reference(today));
    assert_eq!(p["amount"], 750_000);
    // And it is sent: the whole balance reaches the settlement account.
    eventually(Duration::from_secs(30), async || {
        let p = payout(&app, p["id"].as_str().unwrap()).await;
        if p["status"] == "succeeded" {
            Ok(())
        } else {
            Err(p)
        }
    })
    .await;
    assert_eq!(balance(&app).await["available"], 0);
    assert_eq!(sandbox_transfers(&app).await.len(), 1);

    // A schedule at 09:00 the same day finds the day's payout made.
    early.clock = Arc::new(Utc::now);
    early.daily_at = NaiveTime::MIN;
    assert_eq!(early.pay_due().await.unwrap(), 0);

    stop.cancel();
    for worker in workers {
        worker.await.unwrap();
    }
}

/// The states a killed worker leaves behind, then a fresh worker: a transfer the sandbox holds
/// while the payout is still `pending` (sent, then killed before recording) is asked about and
/// recorded, never sent again; a payout whose worker stopped while polling (no notification
/// will come) is finished by the next worker by asking.
async fn a_worker_after_a_crash_asks_before_sending_again(backend: Backend) {
    // Long enough that the worker, not the notification, learns of the first transfer.
    let app = app(backend, false, 3).await;
    set_settlement(&app, "manual").await;
    fund(&app, 1_000_000).await;

    // Sent by a worker that died before recording it: the sandbox has it, the payout is pending.
    let sent = pay(&app, 100_000).await;
    let p = payout(&app, &sent).await;
    let resp = app
        .client
        .post(format!("{}/wema-bank/transfers", app.sandbox_url))
        .bearer_auth(&app.config.sandbox.key)
        .json(&json!({
            "reference": sent, "amount": 100_000, "currency": "NGN",
            "bankCode": p["destination"]["bankCode"],
            "accountNumber": p["destination"]["accountNumber"],
            "accountName": p["destination"]["accountName"],
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        StatusCode::ACCEPTED,
        "{}",
        resp.text().await.unwrap()
    );

    // A worker that stops while polling a transfer whose notification is lost.
    let polled = pay(&app, 100_003).await;
    let first = CancellationToken::new();
    let worker = start_payouts_worker(&app, first.clone());
    eventually(Duration::from_secs(20), async || {
        let p = payout(&app, &polled).await;
        if p["status"] == "processing" {
            Ok(())
        } else {
            Err(p)
        }
    })
    .await;
    first.cancel();
    worker.await.unwrap();

    let second = CancellationToken::new();
    let worker = start_payouts_worker(&app, second.clone());
    eventually(Duration::from_secs(40), async || {
        for id in [&sent, &polled] {
            let p = payout(&app, id).await;
            if p["status"] != "succeeded" {
                return Err(p);
            }
        }
        Ok(())
    })
    .await;
    let transfers = sandbox_transfers(&app).await;
    assert_eq!(transfers.len(), 2, "{transfers:?}");
    assert!(
        transfers.iter().all(|t| t["requests"] == 1),
        "each transfer asked for once: {transfers:?}"
    );
    assert_eq!(
        store::count_events_of_type(&app.db, "payout.succeeded").await,
        2
    );
    assert!(store::ledger_verifies(&app.db).await.ok);
    second.cancel();
    worker.await.unwrap();
}
