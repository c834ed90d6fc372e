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
    Backend, TestApp, eventually, id_of, json, spawn_app_with, start_payouts_worker,
};
use tokio_util::sync::CancellationToken;

test_support::on_both_databases!(
    every_transfer_outcome_reaches_its_payout_with_one_transfer_each,
    two_workers_make_one_daily_payout,
    a_worker_after_a_crash_asks_before_sending_again,
    two_runs_of_one_payout_never_send_it_and_refund_it,
    live_daily_payouts_wait_for_kyb_and_a_working_live_key,
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
    app.get_json(app.test_key(), &format!("/v1/payouts/{id}"))
        .await
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
    app.funded_account(1_000_000).await;
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
    let b = app.balance(app.test_key()).await;
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
    app.funded_account(750_000).await;

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

    let list = app.get_json(app.test_key(), "/v1/payouts").await;
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
    assert_eq!(app.balance(app.test_key()).await["available"], 0);
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
    app.funded_account(1_000_000).await;

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

// ---- Two runs of one payout job at once ---------------------------------------------------------

/// A payout bank that refuses the first transfer request and accepts the second, and makes two
/// overlapping runs interleave at their worst: its first status query is answered only once a
/// second has arrived (or after 2 s), and its second transfer request only once a third status
/// query has been answered (or after 2 s). Each request is counted and answered under one lock.
#[derive(Default)]
struct FlakyBank {
    state: std::sync::Mutex<Counts>,
}

#[derive(Default, Debug, Clone, Copy)]
struct Counts {
    queries: usize,
    requests: usize,
    accepted: bool,
}

impl FlakyBank {
    fn counts(&self) -> Counts {
        *self.state.lock().unwrap()
    }

    /// Waits until `queries` status queries have arrived (at most 2 s).
    async fn queries_reach(&self, queries: usize) {
        for _ in 0..200 {
            if self.counts().queries >= queries {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn flaky_bank() -> (Arc<FlakyBank>, String) {
    use axum::extract::{Path, State};
    use axum::response::IntoResponse;
    use axum::routing::{get, post};
    let bank = Arc::new(FlakyBank::default());
    let router = axum::Router::new()
        .route(
            "/{bank}/transfers/{reference}",
            get(
                async |State(bank): State<Arc<FlakyBank>>,
                       Path((_, reference)): Path<(String, String)>| {
                    let (n, accepted) = {
                        let mut s = bank.state.lock().unwrap();
                        s.queries += 1;
                        (s.queries, s.accepted)
                    };
                    if n == 1 {
                        bank.queries_reach(2).await;
                    }
                    match accepted {
                        true => (
                            axum::http::StatusCode::OK,
                            axum::Json(json!({"reference": reference, "status": "processing"})),
                        ),
                        false => (
                            axum::http::StatusCode::NOT_FOUND,
                            axum::Json(json!({"code": "not_found", "message": "no such transfer"})),
                        ),
                    }
                    .into_response()
                },
            ),
        )
        .route(
            "/{bank}/transfers",
            post(
                async |State(bank): State<Arc<FlakyBank>>, axum::Json(body): axum::Json<Value>| {
                    let n = {
                        let mut s = bank.state.lock().unwrap();
                        s.requests += 1;
                        s.requests
                    };
                    if n == 1 {
                        return (
                            axum::http::StatusCode::BAD_REQUEST,
                            axum::Json(
                                json!({"code": "try_later", "message": "refused this time"}),
                            ),
                        )
                            .into_response();
                    }
                    bank.queries_reach(3).await;
                    bank.state.lock().unwrap().accepted = true;
                    (
                        axum::http::StatusCode::ACCEPTED,
                        axum::Json(json!({"reference": body["reference"], "status": "processing"})),
                    )
                        .into_response()
                },
            ),
        )
        .with_state(bank.clone());
    let addr = test_support::http::serve(router).await;
    (bank, format!("http://{addr}"))
}

/// Two runs of one payout's job at once (a redelivered message, two workers) against a bank
/// that refuses the first ask and accepts the second: the payout ends in one consistent state.
/// Either the bank made the transfer and the payout is not failed and its money not returned,
/// or the bank holds none and the payout failed with its money returned once; never a transfer
/// made and refunded.
async fn two_runs_of_one_payout_never_send_it_and_refund_it(backend: Backend) {
    use jobs::{PayoutJob, QueueJob};
    use queue::worker::JobHandler;
    let app = app(backend, false, 1).await;
    set_settlement(&app, "manual").await;
    app.funded_account(1_000_000).await;
    let (bank, url) = flaky_bank().await;
    let id = pay(&app, 100_000).await;
    let mut config = app.config.clone();
    config.sandbox.url = Some(url);
    let payer = worker_payouts::Payer {
        db: app.db.clone(),
        providers: outbound::providers::Providers::from_config(&config),
        config: config.payouts.clone(),
    };
    let rows = store::open_job_rows(&app.db, PayoutJob::QUEUE).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let job = PayoutJob::SendPayout {
        payout_id: domain::ids::PayoutId::unchecked(id.clone()),
    };
    let (first, second) = tokio::join!(
        payer.handle(&rows[0], job.clone()),
        payer.handle(&rows[0], job.clone()),
    );
    let (first, second) = (first.unwrap().outcome, second.unwrap().outcome);

    let p = payout(&app, &id).await;
    let counts = bank.counts();
    let entries = store::count_ledger_entries_for(&app.db, &id).await;
    if counts.accepted {
        assert_ne!(p["status"], "failed", "sent and failed: {p} {counts:?}");
        assert_eq!(entries, 1, "sent and refunded: {p} {counts:?}");
    } else {
        assert_eq!(p["status"], "failed", "{p} {counts:?} {first:?} {second:?}");
        assert_eq!(entries, 2, "debited and returned once: {p}");
        assert_eq!(app.balance(app.test_key()).await["available"], 1_000_000);
    }
    // One run did the work; the other found the payout held and comes back later.
    assert!(
        matches!(first, ::store::outbox::JobOutcome::Retry { .. })
            || matches!(second, ::store::outbox::JobOutcome::Retry { .. }),
        "{first:?} {second:?}"
    );
    assert!(store::ledger_verifies(&app.db).await.ok);
}

// ---- The daily payout and the business's live mode ----------------------------------------------

/// The daily automatic payout moves live money only for a business whose live mode works: KYB
/// approved, and a working live key (every one revoked: live mode is stopped, the money waits).
async fn live_daily_payouts_wait_for_kyb_and_a_working_live_key(backend: Backend) {
    use ::store::payouts::VerifiedAccount;
    use domain::Mode;
    use domain::payout::{EntryType, Schedule};
    let app = app(backend, true, 1).await;
    let business = app.business.id.clone();
    let number = domain::nuban::account_number("058", 12_345_678).unwrap();
    let bank = domain::settlement_banks::check_settlement_account("058", &number).unwrap();
    // A live settlement account set two days ago (past its 24-hour hold), paid out daily, and
    // live money in the balance.
    ::store::payouts::set_settlement_account(
        &app.db,
        &::store::audit::Actor::operator(),
        &business,
        Mode::Live,
        &VerifiedAccount {
            bank,
            account_number: &number,
            account_name: "ACME LTD",
            schedule: Schedule::Daily,
        },
        Utc::now() - chrono::Duration::days(2),
    )
    .await
    .unwrap();
    ::store::ledger::credit(
        &app.db,
        ::store::ledger::Movement {
            business_id: &business,
            mode: Mode::Live,
            entry_type: EntryType::Deposit,
            amount: 750_000,
            source_id: "dep_live",
        },
    )
    .await
    .unwrap();
    let mut schedule =
        worker_payouts::DailySchedule::from_config(&app.config, app.db.clone(), app.relay.clone())
            .unwrap();
    schedule.daily_at = NaiveTime::MIN;

    // KYB pending (the test business's): no live payout.
    assert_eq!(schedule.pay_due().await.unwrap(), 0);
    assert_eq!(store::count_payouts(&app.db).await, 0);

    // Approved, but every live key revoked: still none.
    ::store::businesses::set_kyb(&app.db, &business, domain::KybStatus::Approved)
        .await
        .unwrap();
    store::revoke_key(&app.db, &business, "live").await;
    assert_eq!(schedule.pay_due().await.unwrap(), 0);
    assert_eq!(store::count_payouts(&app.db).await, 0);

    // A live key works again: the day's payout is made, the whole balance.
    ::store::keys::change(
        &app.db,
        &business,
        Mode::Live,
        ::store::keys::KeyAction::Roll(domain::keys::KeyGrace::from_secs(0).unwrap()),
        domain::time::now(),
    )
    .await
    .unwrap();
    assert_eq!(schedule.pay_due().await.unwrap(), 1);
    assert_eq!(store::count_payouts(&app.db).await, 1);
    assert_eq!(
        ::store::ledger::find(&app.db, &business, Mode::Live)
            .await
            .unwrap()
            .unwrap()
            .available,
        0
    );
}
