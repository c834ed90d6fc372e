//! End to end with the real binaries, as an operator runs them (`api serve`, `worker-payouts`,
//! `worker-webhooks` and `provider-sandbox` on PostgreSQL and RabbitMQ): worker-payouts is
//! killed with SIGKILL at each step of a payout — before sending, after sending but before
//! recording the bank's answer, and while polling — and a fresh one takes over. The bank saw
//! exactly one transfer for each payout, asked for once; each payout ends in its true status
//! with its one event and webhook; the failed one's money came back once; and
//! `api admin ledger verify` finds every balance equal to its ledger.
//!
//! Hitting each step: a kill from outside lands wherever the worker happens to be, so instead the
//! worker is started with its test-only failpoint `VAS_PAYOUTS__TEST_KILL_AT=<step>` (off by
//! default; test-mode payouts only), which makes it send itself SIGKILL exactly at that step.
//! The test sees it die of signal 9, checks what the bank holds at that moment, then starts a
//! worker without the failpoint.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};
use test_support::process::{Process, wait_healthy};
use test_support::stack::Stack;
use test_support::{Receiver, account_body, eventually};

const SANDBOX_KEY: &str = "e2e-sandbox-key";
const FUNDS: i64 = 5_000_000;

/// One kill: where, the amount (its last two digits choose the bank's outcome), what the bank
/// holds when the worker dies, and how the payout ends.
struct Case {
    step: &'static str,
    amount: i64,
    sent_before_the_kill: bool,
    status: &'static str,
    event: &'static str,
}

static CASES: [Case; 3] = [
    // …01: the bank fails it ("beneficiary account is dormant"); the money comes back.
    Case {
        step: "before_send",
        amount: 500_001,
        sent_before_the_kill: false,
        status: "failed",
        event: "payout.failed",
    },
    Case {
        step: "after_send",
        amount: 500_000,
        sent_before_the_kill: true,
        status: "succeeded",
        event: "payout.succeeded",
    },
    // …03: succeeds with its notification lost, so only the restarted worker's polling learns it.
    Case {
        step: "while_polling",
        amount: 500_003,
        sent_before_the_kill: true,
        status: "succeeded",
        event: "payout.succeeded",
    },
];

/// The process's exit status once it has exited (a hang guard, not a speed check).
async fn exit_of(process: &mut Process) -> ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = process.0.try_wait().expect("try_wait") {
            return status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the worker never reached its kill point"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payout_survives_worker_kills_at_each_step_with_one_transfer() {
    let Some(stack) = Stack::new(
        test_support::process::api_binary(),
        &[
            ("VAS_SANDBOX__KEY", SANDBOX_KEY),
            ("VAS_SANDBOX__TRANSFER_DELAY_SECS", "2"),
            ("VAS_PAYOUTS__INITIAL_POLL_SECS", "1"),
            ("VAS_PAYOUTS__MAX_POLL_SECS", "1"),
            // The killed worker held its payout's lease: the survivor takes the payout once the
            // lease has passed (30 s, the least allowed; 60 s by default).
            ("VAS_PAYOUTS__LEASE_SECS", "30"),
            ("VAS_WEBHOOKS__RETRY_SCHEDULE", "[1,1,1]"),
        ],
    )
    .await
    else {
        return;
    };
    let receiver = Receiver::start().await;
    stack.set_webhook_url(&receiver.url);
    let _sandbox = stack.start("provider-sandbox", &[]);
    let _api = stack.start("api", &["serve"]);
    let _webhooks = stack.start("worker-webhooks", &[]);
    let client = reqwest::Client::new();
    wait_healthy(&client, &format!("{}/readyz", stack.base)).await;
    wait_healthy(&client, &format!("{}/healthz", stack.sandbox)).await;

    // A settlement account, and money in through the bank.
    let number = domain::nuban::account_number("058", 12_345_678).unwrap();
    let (status, settlement) = stack
        .send(
            &client,
            Method::PUT,
            "/v1/settlement-account",
            None,
            json!({"bankCode": "058", "accountNumber": number, "schedule": "manual"}),
        )
        .await;
    assert_eq!(status, 200, "{settlement}");
    let (status, account) = stack
        .send(
            &client,
            Method::POST,
            "/v1/virtual-accounts",
            Some("e2e-account"),
            account_body(1, "test-bank"),
        )
        .await;
    assert_eq!(status, 201, "{account}");
    let (status, _) = stack
        .post(
            &client,
            &format!(
                "/v1/virtual-accounts/{}/simulate-deposit",
                account["id"].as_str().unwrap()
            ),
            json!({"amount": FUNDS}),
        )
        .await;
    assert_eq!(status, 202);
    eventually(Duration::from_secs(60), async || {
        let balance = stack.get(&client, "/v1/balance").await;
        if balance["available"] == FUNDS {
            Ok(())
        } else {
            Err(balance)
        }
    })
    .await;

    let mut payouts = Vec::new();
    for case in &CASES {
        let mut victim = stack.start_with(
            "worker-payouts",
            &[],
            &[("VAS_PAYOUTS__TEST_KILL_AT", case.step)],
        );
        let (status, payout) = stack
            .send(
                &client,
                Method::POST,
                "/v1/payouts",
                Some(&format!("e2e-{}", case.step)),
                json!({"amount": case.amount, "narration": case.step}),
            )
            .await;
        assert_eq!(status, 202, "{payout}");
        let id = payout["id"].as_str().unwrap().to_owned();

        let died = exit_of(&mut victim).await;
        assert_eq!(died.signal(), Some(9), "{}: {died:?}", case.step);
        let at_the_kill = stack.bank_transfers(&client, SANDBOX_KEY, &id).await;
        assert_eq!(
            at_the_kill.len(),
            usize::from(case.sent_before_the_kill),
            "{}: the bank holds {at_the_kill:?}",
            case.step
        );

        // A worker without the failpoint finishes the payout.
        let mut survivor = stack.start("worker-payouts", &[]);
        let settled = eventually(Duration::from_secs(60), async || {
            let payout = stack.get(&client, &format!("/v1/payouts/{id}")).await;
            match payout["status"].as_str() {
                Some("pending" | "processing") => Err(payout),
                _ => Ok(payout),
            }
        })
        .await;
        assert_eq!(settled["status"], case.status, "{}: {settled}", case.step);
        let sent = stack.bank_transfers(&client, SANDBOX_KEY, &id).await;
        assert_eq!(sent.len(), 1, "{}: one transfer: {sent:?}", case.step);
        assert_eq!(
            sent[0]["requests"], 1,
            "{}: asked for once: {sent:?}",
            case.step
        );
        assert_eq!(sent[0]["amount"], case.amount);
        if case.status == "succeeded" {
            assert!(settled["sessionId"].is_string(), "{settled}");
        } else {
            assert_eq!(settled["failureReason"], "beneficiary account is dormant");
        }
        // SIGTERM: the survivor drains and exits 0, so the next victim gets the next payout.
        survivor.signal("-TERM");
        let drained = exit_of(&mut survivor).await;
        assert!(drained.success(), "{}: {drained:?}", case.step);
        payouts.push((id, case));
    }

    // Each payout's one event, delivered as a webhook (deduplicated on webhook-id, as receivers
    // do: delivery is at least once).
    for (id, case) in &payouts {
        let events = stack
            .get(
                &client,
                &format!("/v1/events?type={}&pageSize=100", case.event),
            )
            .await;
        let mine: Vec<&Value> = events["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["data"]["id"] == id.as_str())
            .collect();
        assert_eq!(mine.len(), 1, "{}: {events}", case.step);
        let event_id = mine[0]["id"].as_str().unwrap().to_owned();
        let delivered = eventually(Duration::from_secs(60), async || {
            let ids: std::collections::BTreeSet<String> = receiver
                .requests()
                .iter()
                .filter(|r| r.json()["data"]["id"] == id.as_str())
                .map(|r| r.webhook_id())
                .collect();
            if ids.is_empty() {
                Err("none yet")
            } else {
                Ok(ids)
            }
        })
        .await;
        assert_eq!(
            delivered.into_iter().collect::<Vec<_>>(),
            [event_id],
            "{}",
            case.step
        );
    }

    // The money: each payout taken once, the failed one returned once.
    let ledger = stack
        .get(&client, "/v1/balance/transactions?pageSize=100")
        .await;
    for (id, case) in &payouts {
        let entries: Vec<&str> = ledger["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["sourceId"] == id.as_str())
            .map(|e| e["type"].as_str().unwrap())
            .collect();
        let expected: &[&str] = match case.status {
            "failed" => &["payout_return", "payout"],
            _ => &["payout"],
        };
        assert_eq!(entries, expected, "{}: {ledger}", case.step);
    }
    let balance = stack.get(&client, "/v1/balance").await;
    assert_eq!(balance["available"], FUNDS - 500_000 - 500_003, "{balance}");
    assert_eq!(balance["inFlight"], 0, "{balance}");
    stack.assert_ledger_verifies();
}
