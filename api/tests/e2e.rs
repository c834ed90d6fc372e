//! End to end with the real binaries, as an operator runs them: `api migrate`, `api serve`, two
//! `worker-provisioning` processes and `provider-sandbox`, on PostgreSQL and RabbitMQ. One worker
//! is killed with SIGKILL while accounts wait for their numbers; nothing is lost.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A binary of the workspace, built beside this test's `api` binary (built on demand).
fn binary(name: &str) -> PathBuf {
    let api = PathBuf::from(env!("CARGO_BIN_EXE_api"));
    let path = api.with_file_name(name);
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", name])
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building {name}");
    }
    path
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

struct Process(Child);

impl Process {
    fn start(bin: &str, args: &[&str], env: &[(String, String)]) -> Process {
        let child = Command::new(binary(bin))
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("RUST_LOG", "warn")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {bin}: {e}"));
        Process(child)
    }

    fn signal(&self, signal: &str) {
        Command::new("kill").args([signal, &self.0.id().to_string()]).status().unwrap();
    }

    fn wait(&mut self, within: Duration) -> std::process::ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(started.elapsed() < within, "process did not exit within {within:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn wait_healthy(client: &reqwest::Client, url: &str) {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        if let Ok(resp) = client.get(url).send().await
            && resp.status().is_success()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{url} never became healthy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binaries_turn_202_into_active_through_a_worker_kill() {
    let Some(backend) = common::Backend::postgres() else { return };
    let Ok(amqp) = std::env::var("TEST_AMQP_URL") else {
        assert!(std::env::var_os("CI").is_none(), "CI is set but TEST_AMQP_URL is not");
        eprintln!("skipped: TEST_AMQP_URL is not set");
        return;
    };
    let db = common::TestDb::new(&backend).await;
    let prefix = format!("e{}", ulid::Ulid::new().to_string().to_lowercase());
    let (api_port, sandbox_port) = (free_port(), free_port());
    let env: Vec<(String, String)> = [
        ("VAS_DATABASE__URL", db.url.clone()),
        ("VAS_AMQP__URL", amqp.clone()),
        ("VAS_AMQP__PREFIX", prefix.clone()),
        ("VAS_CRYPTO__KEY", shared::crypto::Cipher::generate_key()),
        ("VAS_HTTP__BIND", format!("127.0.0.1:{api_port}")),
        ("VAS_OPS__BIND", "127.0.0.1:0".into()),
        ("VAS_SANDBOX__BIND", format!("127.0.0.1:{sandbox_port}")),
        ("VAS_SANDBOX__URL", format!("http://127.0.0.1:{sandbox_port}")),
        ("VAS_SANDBOX__NOTIFY_URL", format!("http://127.0.0.1:{api_port}")),
        ("VAS_SANDBOX__ACTIVATION_DELAY_SECS", "3".into()),
        ("VAS_PROVISIONING__INITIAL_POLL_SECS", "1".into()),
        ("VAS_PROVISIONING__MAX_POLL_SECS", "1".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();

    let migrate = Command::new(binary("api")).arg("migrate").env_clear().envs(env.iter().cloned()).output().unwrap();
    assert!(migrate.status.success(), "{}", String::from_utf8_lossy(&migrate.stderr));
    let created = Command::new(binary("api"))
        .args(["admin", "business", "create", "--name", "E2E Ltd"])
        .env_clear()
        .envs(env.iter().cloned())
        .output()
        .unwrap();
    assert!(created.status.success());
    let business: Value = serde_json::from_slice(&created.stdout).unwrap();
    let key = business["test"]["secretKey"].as_str().unwrap().to_owned();

    let _sandbox = Process::start("provider-sandbox", &[], &env);
    let mut api = Process::start("api", &["serve"], &env);
    let mut victim = Process::start("worker-provisioning", &[], &env);
    let mut survivor = Process::start("worker-provisioning", &[], &env);
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{api_port}");
    wait_healthy(&client, &format!("{base}/readyz")).await;
    wait_healthy(&client, &format!("http://127.0.0.1:{sandbox_port}/healthz")).await;

    let mut ids = Vec::new();
    for n in 0..6u32 {
        let resp = client
            .post(format!("{base}/v1/virtual-accounts"))
            .bearer_auth(&key)
            .header("Idempotency-Key", format!("e2e-{n}"))
            .json(&common::account_body(n, "access-bank"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 202);
        ids.push(resp.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned());
    }
    // Mid-poll: the workers are polling the bank about these accounts right now.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    victim.signal("-KILL");
    victim.wait(Duration::from_secs(5));

    let started = Instant::now();
    for id in &ids {
        loop {
            let account: Value = client
                .get(format!("{base}/v1/virtual-accounts/{id}"))
                .bearer_auth(&key)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if account["status"] == "active" {
                assert!(account["accountNumber"].is_string());
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(60), "{id} never became active");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    // SIGTERM: in-flight work drains and both processes exit 0.
    survivor.signal("-TERM");
    assert!(survivor.wait(Duration::from_secs(30)).success(), "worker exits 0 on SIGTERM");
    api.signal("-TERM");
    assert!(api.wait(Duration::from_secs(30)).success(), "api exits 0 on SIGTERM");
    shared::queue::delete_topology(&amqp, &prefix).await;
}
