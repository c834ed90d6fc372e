//! End to end with the real binaries, as an operator runs them: `api migrate`, `api serve`, two
//! `worker-provisioning` processes and `provider-sandbox`, on PostgreSQL and RabbitMQ. One worker
//! is killed with SIGKILL while accounts wait for their numbers; nothing is lost.

use std::time::{Duration, Instant};

use serde_json::Value;
use test_support::account_body;
use test_support::process::wait_healthy;
use test_support::stack::Stack;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binaries_turn_202_into_active_through_a_worker_kill() {
    let Some(stack) = Stack::new(test_support::process::api_binary(), &[]).await else {
        return;
    };
    let _sandbox = stack.start("provider-sandbox", &[]);
    let mut api = stack.start("api", &["serve"]);
    let mut victim = stack.start("worker-provisioning", &[]);
    let mut survivor = stack.start("worker-provisioning", &[]);
    let client = reqwest::Client::new();
    let base = stack.base.clone();
    wait_healthy(&client, &format!("{base}/readyz")).await;
    wait_healthy(&client, &format!("{}/healthz", stack.sandbox)).await;

    let mut ids = Vec::new();
    for n in 0..6u32 {
        let resp = client
            .post(format!("{base}/v1/virtual-accounts"))
            .bearer_auth(&stack.key)
            .header("Idempotency-Key", format!("e2e-{n}"))
            .json(&account_body(n, "access-bank"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 202);
        ids.push(
            resp.json::<Value>().await.unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    // Mid-poll: the workers are polling the bank about these accounts right now.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    victim.signal("-KILL");
    victim.wait(Duration::from_secs(5));

    let started = Instant::now();
    let mut lags = Vec::new();
    for id in &ids {
        loop {
            let account = stack
                .get(&client, &format!("/v1/virtual-accounts/{id}"))
                .await;
            if account["status"] == "active" {
                assert!(account["accountNumber"].is_string());
                // The bank numbers the account 3 s after creation; how long until we knew?
                let at = |k: &str| {
                    chrono::DateTime::parse_from_rfc3339(account[k].as_str().unwrap()).unwrap()
                };
                lags.push(
                    (at("activatedAt") - at("createdAt") - chrono::Duration::seconds(3))
                        .num_milliseconds(),
                );
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{id} never became active"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    lags.sort_unstable();
    eprintln!("provider number → account active (ms), 1 s poll cap, one worker killed: {lags:?}");

    // SIGTERM: in-flight work drains and both processes exit 0.
    survivor.signal("-TERM");
    assert!(
        survivor.wait(Duration::from_secs(30)).success(),
        "worker exits 0 on SIGTERM"
    );
    api.signal("-TERM");
    assert!(
        api.wait(Duration::from_secs(30)).success(),
        "api exits 0 on SIGTERM"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binaries_finish_a_recheck_whose_worker_was_killed() {
    // The bank answers slowly, so the first worker is mid-call when it is killed.
    let Some(stack) = Stack::new(
        test_support::process::api_binary(),
        &[
            ("VAS_SANDBOX__LATENCY_MS", "1500"),
            ("VAS_HTTP__PROVIDER_TIMEOUT_MS", "5000"),
        ],
    )
    .await
    else {
        return;
    };
    let _sandbox = stack.start("provider-sandbox", &[]);
    let _api = stack.start("api", &["serve"]);
    let client = reqwest::Client::new();
    wait_healthy(&client, &format!("{}/readyz", stack.base)).await;
    wait_healthy(&client, &format!("{}/healthz", stack.sandbox)).await;

    let mut accounts = Vec::new();
    for n in 0..3u32 {
        let resp = client
            .post(format!("{}/v1/virtual-accounts", stack.base))
            .bearer_auth(&stack.key)
            .header("Idempotency-Key", format!("rk-{n}"))
            .json(&account_body(n, "test-bank"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201);
        let id = resp.json::<Value>().await.unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        // Two lost notifications per account: only a recheck can find them.
        for amount in [1000, 2000] {
            let (status, _) = stack
                .post(
                    &client,
                    &format!("/v1/virtual-accounts/{id}/simulate-deposit"),
                    serde_json::json!({"amount": amount, "notify": false}),
                )
                .await;
            assert_eq!(status, 202);
        }
        accounts.push(id);
    }

    let mut victim = stack.start("worker-recheck", &[]);
    let (status, first) = stack
        .post(
            &client,
            &format!("/v1/virtual-accounts/{}/recheck", accounts[0]),
            serde_json::json!({}),
        )
        .await;
    assert_eq!(status, 202);
    tokio::time::sleep(Duration::from_millis(2500)).await; // started, waiting on the slow bank
    victim.signal("-KILL");
    victim.wait(Duration::from_secs(5));

    // Two workers share what is left; every recheck completes and nothing is recorded twice.
    let _a = stack.start("worker-recheck", &[]);
    let _b = stack.start("worker-recheck", &[]);
    let mut rechecks = vec![(
        accounts[0].clone(),
        first["id"].as_str().unwrap().to_owned(),
    )];
    for id in &accounts[1..] {
        let (_, r) = stack
            .post(
                &client,
                &format!("/v1/virtual-accounts/{id}/recheck"),
                serde_json::json!({}),
            )
            .await;
        rechecks.push((id.clone(), r["id"].as_str().unwrap().to_owned()));
    }
    let started = Instant::now();
    for (account, recheck) in &rechecks {
        loop {
            let r = stack
                .get(
                    &client,
                    &format!("/v1/virtual-accounts/{account}/rechecks/{recheck}"),
                )
                .await;
            if r["status"] == "completed" {
                assert_eq!(r["depositsFound"], 2, "{r}");
                break;
            }
            assert_ne!(r["status"], "failed", "{r}");
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{recheck} never completed: {r}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let deposits = stack
            .get(&client, &format!("/v1/virtual-accounts/{account}/deposits"))
            .await;
        assert_eq!(
            deposits["total"], 2,
            "each lost deposit recorded exactly once"
        );
    }
}

/// A bank's notifications of one business's deposits, 32 at a time (so that they share rounds),
/// through a SIGKILL of the api and its restart, each sent again until answered 2xx as a bank
/// does: every deposit is recorded once and credited once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binaries_record_one_businesss_deposits_once_through_an_api_kill() {
    use futures::StreamExt;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const SECRET: &str = "e2e-notification-secret";
    const DEPOSITS: usize = 400;
    let Some(stack) = Stack::new(
        test_support::process::api_binary(),
        &[("VAS_SANDBOX__SECRET", SECRET)],
    )
    .await
    else {
        return;
    };
    let _sandbox = stack.start("provider-sandbox", &[]);
    let mut api = stack.start("api", &["serve"]);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    wait_healthy(&client, &format!("{}/readyz", stack.base)).await;
    wait_healthy(&client, &format!("{}/healthz", stack.sandbox)).await;

    let (mut ids, mut numbers) = (Vec::new(), Vec::new());
    for n in 0..4u32 {
        let (status, account) = stack
            .send(
                &client,
                reqwest::Method::POST,
                "/v1/virtual-accounts",
                Some(&format!("dk-{n}")),
                account_body(n, "test-bank"),
            )
            .await;
        assert_eq!(status, 201, "{account}");
        ids.push(account["id"].as_str().unwrap().to_owned());
        numbers.push(account["accountNumber"].as_str().unwrap().to_owned());
    }
    let notifications: Vec<_> = (0..DEPOSITS)
        .map(|n| {
            let paid = provider_sandbox::Transaction::received(&numbers[n % 4], 1_000 + n as i64);
            provider_sandbox::signed_deposit(SECRET, domain::Bank::TestBank, &paid).unwrap()
        })
        .collect();
    let total: i64 = (0..DEPOSITS).map(|n| 1_000 + n as i64).sum();

    let answered = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(AtomicUsize::new(0));
    let resent = Arc::new(AtomicUsize::new(0));
    let sending = tokio::spawn({
        let (client, base) = (client.clone(), stack.base.clone());
        let (answered, errors, resent) = (answered.clone(), errors.clone(), resent.clone());
        async move {
            futures::stream::iter(notifications)
                .for_each_concurrent(32, |notification| {
                    let (client, answered, errors, resent) = (&client, &answered, &errors, &resent);
                    let url = format!("{base}{}", notification.path);
                    async move {
                        loop {
                            let sent = client
                                .post(&url)
                                .header("Content-Type", "application/json")
                                .header("X-Provider-Signature", &notification.signature)
                                .body(notification.body.clone())
                                .send()
                                .await;
                            match sent {
                                Ok(r) if r.status().is_success() => break,
                                Ok(r) if r.status() == 500 => {
                                    errors.fetch_add(1, Ordering::Relaxed);
                                }
                                _ => {}
                            }
                            resent.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        answered.fetch_add(1, Ordering::Relaxed);
                    }
                })
                .await;
        }
    });
    // Killed while the business's rounds are under way.
    let started = Instant::now();
    while answered.load(Ordering::Relaxed) < DEPOSITS / 4 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no deposits answered"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    api.kill_9();
    let at_kill = answered.load(Ordering::Relaxed);
    let _api = stack.start("api", &["serve"]);
    wait_healthy(&client, &format!("{}/readyz", stack.base)).await;
    tokio::time::timeout(Duration::from_secs(120), sending)
        .await
        .expect("every notification answered within two minutes")
        .unwrap();
    assert!(at_kill < DEPOSITS, "the kill came before the last answer");
    let resent = resent.load(Ordering::Relaxed);
    eprintln!("{at_kill} of {DEPOSITS} answered at the kill; {resent} sends again");
    assert!(resent > 0, "the kill cut notifications short");
    assert_eq!(
        errors.load(Ordering::Relaxed),
        0,
        "no notification answered 500"
    );

    for id in &ids {
        let path = format!("/v1/virtual-accounts/{id}/deposits?pageSize=1");
        let deposits = stack.get(&client, &path).await;
        assert_eq!(
            deposits["total"],
            DEPOSITS / 4,
            "each deposit recorded once: {deposits}"
        );
    }
    let balance = stack.get(&client, "/v1/balance").await;
    assert_eq!(
        balance["available"], total,
        "each deposit credited once: {balance}"
    );
    stack.assert_ledger_verifies();
}
