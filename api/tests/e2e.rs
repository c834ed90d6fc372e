//! End to end with the real binaries, as an operator runs them: `api migrate`, `api serve`, two
//! `worker-provisioning` processes and `provider-sandbox`, on PostgreSQL and RabbitMQ. One worker
//! is killed with SIGKILL while accounts wait for their numbers; nothing is lost.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use test_support::http::free_port;
use test_support::process::{Process, clean_command, sibling_binary, wait_healthy};
use test_support::{Backend, RabbitPrefix, TestDb, account_body, amqp_url};

/// A binary of the workspace, beside this test's `api` binary (built on demand).
fn binary(name: &str) -> PathBuf {
    sibling_binary(env!("CARGO_BIN_EXE_api"), name)
}

/// A fresh database and broker prefix, and the environment every process of the stack shares.
/// Dropped, it removes the broker prefix and then the database.
struct Stack {
    env: Vec<(String, String)>,
    base: String,
    sandbox: String,
    key: String,
    _rabbit: RabbitPrefix,
    _db: TestDb,
}

impl Stack {
    async fn new(extra: &[(&str, &str)]) -> Option<Stack> {
        let backend = Backend::postgres()?;
        let amqp = amqp_url()?;
        let db = TestDb::new(&backend).await;
        let rabbit = RabbitPrefix::new(&amqp, 'e');
        let (api_port, sandbox_port) = (free_port(), free_port());
        let mut env: Vec<(String, String)> = [
            ("VAS_DATABASE__URL", db.url.clone()),
            ("VAS_AMQP__URL", amqp.clone()),
            ("VAS_AMQP__PREFIX", rabbit.prefix.clone()),
            ("VAS_CRYPTO__KEY", shared::crypto::Cipher::generate_key()),
            ("VAS_HTTP__BIND", format!("127.0.0.1:{api_port}")),
            ("VAS_OPS__BIND", "127.0.0.1:0".into()),
            ("VAS_SANDBOX__BIND", format!("127.0.0.1:{sandbox_port}")),
            (
                "VAS_SANDBOX__URL",
                format!("http://127.0.0.1:{sandbox_port}"),
            ),
            (
                "VAS_SANDBOX__NOTIFY_URL",
                format!("http://127.0.0.1:{api_port}"),
            ),
            ("VAS_SANDBOX__ACTIVATION_DELAY_SECS", "3".into()),
            ("VAS_PROVISIONING__INITIAL_POLL_SECS", "1".into()),
            ("VAS_PROVISIONING__MAX_POLL_SECS", "1".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        env.extend(
            extra
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        let migrate = Command::new(binary("api"))
            .arg("migrate")
            .env_clear()
            .envs(env.iter().cloned())
            .output()
            .unwrap();
        assert!(
            migrate.status.success(),
            "{}",
            String::from_utf8_lossy(&migrate.stderr)
        );
        let created = Command::new(binary("api"))
            .args(["admin", "business", "create", "--name", "E2E Ltd"])
            .env_clear()
            .envs(env.iter().cloned())
            .output()
            .unwrap();
        assert!(created.status.success());
        let business: Value = serde_json::from_slice(&created.stdout).unwrap();
        Some(Stack {
            key: business["test"]["secretKey"].as_str().unwrap().to_owned(),
            base: format!("http://127.0.0.1:{api_port}"),
            sandbox: format!("http://127.0.0.1:{sandbox_port}"),
            env,
            _rabbit: rabbit,
            _db: db,
        })
    }

    /// Starts a binary of the stack with its environment (and `RUST_LOG=warn`), output discarded.
    fn start(&self, bin: &str, args: &[&str]) -> Process {
        Process::quiet(
            clean_command(binary(bin))
                .args(args)
                .env("RUST_LOG", "warn")
                .envs(self.env.iter().map(|(k, v)| (k, v))),
        )
    }

    async fn get(&self, client: &reqwest::Client, path: &str) -> Value {
        client
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    async fn post(&self, client: &reqwest::Client, path: &str, body: Value) -> (u16, Value) {
        let resp = client
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.key)
            .json(&body)
            .send()
            .await
            .unwrap();
        (
            resp.status().as_u16(),
            resp.json().await.unwrap_or(Value::Null),
        )
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binaries_turn_202_into_active_through_a_worker_kill() {
    let Some(stack) = Stack::new(&[]).await else {
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
    let Some(stack) = Stack::new(&[
        ("VAS_SANDBOX__LATENCY_MS", "1500"),
        ("VAS_HTTP__PROVIDER_TIMEOUT_MS", "5000"),
    ])
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
