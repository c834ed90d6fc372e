//! Backups that restore (`docs/operations/backup-and-restore.md`): a PostgreSQL of the
//! test's own archives its WAL and is backed up with `pg_basebackup`; the real binaries work on
//! it; it is lost, and restored to a moment in the middle (`recovery_target_time`); the service
//! then runs on the restored database. Everything acknowledged before that moment is there, the
//! ledger verifies, the jobs that were due are done once (a payout the bank already received is
//! not sent again: the worker asks the bank first), and a webhook not yet delivered is delivered.
//!
//! It starts a PostgreSQL of its own and takes a minute or two: under `CI=true` only
//! (`test_support::clusters`).

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use test_support::clusters::{self, Archived};
use test_support::process::{Process, wait_healthy};
use test_support::stack::Stack;
use test_support::{Receiver, account_body, eventually, id_of};

const SANDBOX_KEY: &str = "restore-sandbox-key";

/// The service's processes on the stack's current environment.
fn start_all(stack: &Stack, ports: &[(&'static str, String)]) -> Vec<Process> {
    let mut processes = vec![stack.start("api", &["serve"])];
    for (worker, bind) in ports {
        processes.push(stack.start_with(worker, &[], &[("VAS_OPS__BIND", bind)]));
    }
    processes
}

async fn wait_ready(client: &reqwest::Client, stack: &Stack, ports: &[(&'static str, String)]) {
    wait_healthy(client, &format!("{}/readyz", stack.base)).await;
    for (_, bind) in ports {
        wait_healthy(client, &format!("http://{bind}/readyz")).await;
    }
}

async fn status_of(stack: &Stack, client: &reqwest::Client, path: &str) -> u16 {
    client
        .get(format!("{}{path}", stack.base))
        .bearer_auth(&stack.key)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn wait_status(stack: &Stack, client: &reqwest::Client, path: &str, wanted: &str) -> Value {
    eventually(Duration::from_secs(90), async || {
        let found = stack.get(client, path).await;
        if found["status"] == wanted {
            Ok(found)
        } else {
            Err(format!("{path}: {found}"))
        }
    })
    .await
}

async fn events(stack: &Stack, client: &reqwest::Client) -> Vec<Value> {
    stack.get(client, "/v1/events?pageSize=100").await["data"]
        .as_array()
        .expect("events")
        .clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_point_in_time_restore_keeps_what_was_acknowledged_and_finishes_what_was_due() {
    let Some(_turn) = clusters::turn("the restore test").await else {
        return;
    };
    clusters::bounded("the restore test", async {
        let pg = Archived::start("vas", 1);
        let state = tempfile::tempdir().unwrap();
        let state_file = state.path().join("sandbox.json");
        let url = pg.url("vas");
        let mut stack = Stack::new(
            test_support::process::api_binary(),
            &[
                ("VAS_DATABASE__URL", &url),
                ("VAS_SANDBOX__KEY", SANDBOX_KEY),
                ("VAS_SANDBOX__STATE_FILE", state_file.to_str().unwrap()),
                ("VAS_SANDBOX__ACTIVATION_DELAY_SECS", "1"),
                ("VAS_SANDBOX__TRANSFER_DELAY_SECS", "1"),
                ("VAS_PAYOUTS__INITIAL_POLL_SECS", "1"),
                ("VAS_PAYOUTS__MAX_POLL_SECS", "1"),
                ("VAS_DATABASE__MAX_CONNECTIONS", "5"),
            ],
        )
        .await
        .expect("CI sets TEST_DATABASE_URL and TEST_AMQP_URL");
        // Last night's base backup; the archive carries every commit since.
        pg.base_backup();
        let receiver = Receiver::start().await;
        stack.set_webhook_url(&receiver.url);
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let _sandbox = stack.start("provider-sandbox", &[]);
        wait_healthy(&client, &format!("{}/healthz", stack.sandbox)).await;
        let ports: Vec<(&'static str, String)> =
            ["worker-provisioning", "worker-webhooks", "worker-payouts"]
                .into_iter()
                .map(|w| (w, format!("127.0.0.1:{}", test_support::http::free_port())))
                .collect();
        let mut processes = start_all(&stack, &ports);
        wait_ready(&client, &stack, &ports).await;

        // Before the target: accounts, deposits (delivered as webhooks), a settlement account.
        let number = domain::nuban::account_number("058", 12_345_678).unwrap();
        let (status, body) = stack
            .send(
                &client,
                Method::PUT,
                "/v1/settlement-account",
                None,
                json!({"bankCode": "058", "accountNumber": number, "schedule": "manual"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let mut accounts = Vec::new();
        for n in 0..3u32 {
            let (status, account) = stack
                .send(
                    &client,
                    Method::POST,
                    "/v1/virtual-accounts",
                    Some(&format!("restore-{n}")),
                    account_body(n, "test-bank"),
                )
                .await;
            assert_eq!(status, 201, "{account}");
            accounts.push(id_of(&account));
        }
        let mut deposited = Vec::new();
        for (n, account) in accounts.iter().enumerate() {
            let amount = 1_000_000 + i64::try_from(n).unwrap() * 100;
            let path = format!("/v1/virtual-accounts/{account}/simulate-deposit");
            assert_eq!(
                stack
                    .post(&client, &path, json!({"amount": amount}))
                    .await
                    .0,
                202
            );
            deposited.push((account.clone(), amount));
        }
        eventually(Duration::from_secs(60), async || {
            let balance = stack.get(&client, "/v1/balance").await;
            if balance["available"] == 3_000_300 {
                Ok(())
            } else {
                Err(balance)
            }
        })
        .await;
        receiver.wait_for(3, Duration::from_secs(60)).await;

        // Work acknowledged just before the target whose jobs are not done by then: the workers
        // are stopped while a payout, an account the bank opens later and a deposit come in.
        for process in &mut processes[1..] {
            process.signal("-TERM");
            process.wait(Duration::from_secs(30));
        }
        let (status, payout) = stack
            .send(
                &client,
                Method::POST,
                "/v1/payouts",
                Some("restore-payout"),
                json!({"amount": 10_000, "narration": "before the target"}),
            )
            .await;
        assert_eq!(status, 202, "{payout}");
        let payout = id_of(&payout);
        let (status, late) = stack
            .send(
                &client,
                Method::POST,
                "/v1/virtual-accounts",
                Some("restore-late"),
                account_body(10, "access-bank"),
            )
            .await;
        assert_eq!(status, 202, "{late}");
        let late = id_of(&late);
        let path = format!("/v1/virtual-accounts/{}/simulate-deposit", accounts[1]);
        assert_eq!(
            stack
                .post(&client, &path, json!({"amount": 700_000}))
                .await
                .0,
            202
        );
        let undelivered = eventually(Duration::from_secs(60), async || {
            let found = events(&stack, &client).await;
            found
                .iter()
                .find(|e| e["type"] == "deposit.received" && e["data"]["amount"] == 700_000)
                .map(|e| e["id"].as_str().unwrap().to_owned())
                .ok_or("the deposit's event")
        })
        .await;

        let target = pg.now();
        tokio::time::sleep(Duration::from_millis(1_500)).await;

        // After the target: the payout goes to the bank and succeeds, the late account opens,
        // and a new account is created. The webhook worker stays stopped: nothing more arrives.
        for (i, (worker, bind)) in ports.iter().enumerate() {
            if *worker != "worker-webhooks" {
                processes[i + 1] = stack.start_with(worker, &[], &[("VAS_OPS__BIND", bind)]);
            }
        }
        wait_status(
            &stack,
            &client,
            &format!("/v1/payouts/{payout}"),
            "succeeded",
        )
        .await;
        wait_status(
            &stack,
            &client,
            &format!("/v1/virtual-accounts/{late}"),
            "active",
        )
        .await;
        let (status, after) = stack
            .send(
                &client,
                Method::POST,
                "/v1/virtual-accounts",
                Some("restore-after"),
                account_body(20, "test-bank"),
            )
            .await;
        assert_eq!(status, 201, "{after}");
        let after = id_of(&after);
        assert_eq!(
            stack
                .bank_transfers(&client, SANDBOX_KEY, &payout)
                .await
                .len(),
            1
        );

        // The database is lost; it is restored to the target from the backup and the archive.
        pg.archive_now();
        drop(processes);
        pg.lose();
        let port = pg.restore(&target);
        let restored = format!("postgres://postgres@127.0.0.1:{port}/vas");
        stack.env.retain(|(k, _)| k != "VAS_DATABASE__URL");
        stack.env.push(("VAS_DATABASE__URL".into(), restored));
        let republished = stack.run_ok("api", &["admin", "outbox", "republish"]);
        let republished: Value = serde_json::from_slice(&republished.stdout).unwrap();
        assert!(
            republished["republished"].as_u64().unwrap() >= 3,
            "{republished}"
        );
        let _processes = start_all(&stack, &ports);
        wait_ready(&client, &stack, &ports).await;

        // Everything acknowledged before the target is there; what came after is not.
        for (account, amount) in &deposited {
            let deposits = stack
                .get(&client, &format!("/v1/virtual-accounts/{account}/deposits"))
                .await;
            assert!(
                deposits["data"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|d| d["amount"] == *amount),
                "{account}: {deposits}"
            );
        }
        let path = format!("/v1/virtual-accounts/{after}");
        assert_eq!(
            status_of(&stack, &client, &path).await,
            404,
            "created after the target"
        );

        // The jobs that were due are done, once: the payout the bank already holds is not sent
        // again, the late account opens with one event.
        wait_status(
            &stack,
            &client,
            &format!("/v1/payouts/{payout}"),
            "succeeded",
        )
        .await;
        assert_eq!(
            stack
                .bank_transfers(&client, SANDBOX_KEY, &payout)
                .await
                .len(),
            1,
            "the bank received the payout once"
        );
        wait_status(
            &stack,
            &client,
            &format!("/v1/virtual-accounts/{late}"),
            "active",
        )
        .await;
        let all = events(&stack, &client).await;
        let about = |kind: &str, id: &str| {
            all.iter()
                .filter(|e| e["type"] == kind && e["data"]["id"] == id)
                .count()
        };
        assert_eq!(about("virtualaccount.active", &late), 1, "{all:?}");
        assert_eq!(about("payout.succeeded", &payout), 1, "{all:?}");

        // The webhook that was not delivered before the loss is delivered now.
        eventually(Duration::from_secs(60), async || {
            let delivered = receiver
                .requests()
                .iter()
                .any(|r| r.webhook_id() == undelivered);
            if delivered {
                Ok(())
            } else {
                Err("the deposit's webhook")
            }
        })
        .await;
        stack.assert_ledger_verifies();
    })
    .await;
}
