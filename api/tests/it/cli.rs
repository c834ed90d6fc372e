//! The `api` binary as an operator runs it: admin commands, `serve`'s refusals, `api dev`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};
use test_support::{Backend, Receiver, Reply, TestDb, id_of};

/// The `api` binary with a clean environment, run in `dir`.
fn api(dir: &Path) -> Command {
    test_support::process::command_in(test_support::process::api_binary(), dir)
}

/// What `cmd` printed, once it succeeded.
fn run_ok(cmd: &mut Command) -> String {
    String::from_utf8(test_support::process::run_ok(cmd).stdout).unwrap()
}

/// The arguments of `api admin webhook set`.
fn webhook_set<'a>(business: &'a str, mode: &'a str, url: &'a str) -> [&'a str; 8] {
    [
        "admin", "webhook", "set", business, "--mode", mode, "--url", url,
    ]
}

#[test]
fn admin_commands_work_on_the_dev_data_folder() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_ok(api(dir.path()).args(["admin", "business", "create", "--name", "Acme Ltd"]));
    let issued: Value = serde_json::from_str(&out).expect("one JSON object");
    let id = issued["id"].as_str().unwrap();
    assert!(id.starts_with("biz_"));
    assert_eq!(issued["name"], "Acme Ltd");
    assert_eq!(issued["kybStatus"], "pending");
    for mode in ["test", "live"] {
        assert!(
            issued[mode]["secretKey"]
                .as_str()
                .unwrap()
                .starts_with(&format!("sk_{mode}_"))
        );
        assert!(
            issued[mode]["webhookSecret"]
                .as_str()
                .unwrap()
                .starts_with("whsec_")
        );
    }
    assert!(dir.path().join(".vas-dev/vas.sqlite").exists());
    assert!(dir.path().join(".vas-dev/crypto.key").exists());

    run_ok(api(dir.path()).args(["admin", "business", "approve-kyb", id]));
    // A receiver on this machine, as a developer running `api dev` points it: on the dev data
    // folder, `api dev`'s rule.
    run_ok(api(dir.path()).args(webhook_set(id, "test", "http://localhost:4000/hooks")));
    let rotated =
        run_ok(api(dir.path()).args(["admin", "webhook", "rotate-secret", id, "--mode", "test"]));
    assert!(rotated.trim().starts_with("whsec_"));
    assert_ne!(
        rotated.trim(),
        issued["test"]["webhookSecret"].as_str().unwrap()
    );

    let out = api(dir.path())
        .args(["admin", "business", "approve-kyb", "biz_nope"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no business biz_nope"));
    let out = api(dir.path())
        .args(webhook_set(id, "live", "http://x.example"))
        .output()
        .unwrap();
    assert!(!out.status.success(), "live URLs must be https");

    let approved = run_ok(api(dir.path()).args([
        "admin", "business", "create", "--name", "Beta", "--kyb", "approved",
    ]));
    assert_eq!(
        serde_json::from_str::<Value>(&approved).unwrap()["kybStatus"],
        "approved"
    );
}

#[test]
fn reencrypt_seals_everything_with_the_new_key_and_fails_on_what_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    run_ok(api(dir.path()).args(["admin", "business", "create", "--name", "Acme Ltd"]));
    let old_key = std::fs::read_to_string(dir.path().join(".vas-dev/crypto.key")).unwrap();
    let new_key = crypto::Cipher::generate_key();
    let previous = format!("[{}]", old_key.trim());
    let rotated = [
        ("VAS_CRYPTO__KEY", new_key.as_str()),
        ("VAS_CRYPTO__PREVIOUS_KEYS", previous.as_str()),
    ];
    let reencrypt = ["admin", "crypto", "reencrypt"];

    let dry: Value = serde_json::from_str(&run_ok(
        api(dir.path())
            .args(reencrypt)
            .arg("--dry-run")
            .envs(rotated),
    ))
    .unwrap();
    assert_eq!(dry["webhookSecrets"], 2, "{dry}");
    let done: Value =
        serde_json::from_str(&run_ok(api(dir.path()).args(reencrypt).envs(rotated))).unwrap();
    assert_eq!(done["webhookSecrets"], 2, "{done}");
    assert_eq!(done["identities"], 0);
    assert_eq!(done["unreadable"], json!([]));
    // Done: the new key alone needs nothing more.
    let again: Value = serde_json::from_str(&run_ok(
        api(dir.path())
            .args(reencrypt)
            .env("VAS_CRYPTO__KEY", &new_key),
    ))
    .unwrap();
    assert_eq!(again["webhookSecrets"], 0, "{again}");

    // The old key alone opens nothing any more: exit 1, and the report names the rows.
    let out = api(dir.path())
        .args(reencrypt)
        .env("VAS_CRYPTO__KEY", old_key.trim())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["unreadable"].as_array().unwrap().len(),
        2,
        "{report}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("VAS_CRYPTO__PREVIOUS_KEYS"), "{stderr}");
    assert!(!stderr.contains(old_key.trim()) && !stderr.contains(&new_key));
}

/// A configured database (not `api dev`'s) keeps the strict rule for webhook targets unless the
/// operator allows private addresses, and a refusal says why once.
#[test]
fn a_configured_database_refuses_a_loopback_webhook_url_saying_why_once() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut databases = vec![rt.block_on(TestDb::new(&Backend::Sqlite))];
    databases.extend(Backend::postgres().map(|pg| rt.block_on(TestDb::new(&pg))));
    let dir = tempfile::tempdir().unwrap();
    for test_db in &databases {
        let key = crypto::Cipher::generate_key();
        let env = [
            ("VAS_DATABASE__URL", test_db.url.as_str()),
            ("VAS_CRYPTO__KEY", key.as_str()),
        ];
        run_ok(api(dir.path()).arg("migrate").envs(env));
        let issued: Value = serde_json::from_str(&run_ok(
            api(dir.path())
                .args(["admin", "business", "create", "--name", "Acme Ltd"])
                .envs(env),
        ))
        .unwrap();
        let id = id_of(&issued);
        let set = webhook_set(&id, "test", "http://127.0.0.1:4000/hook");

        let out = api(dir.path()).args(set).envs(env).output().unwrap();
        assert!(!out.status.success(), "{}", test_db.url);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stderr.matches("127.0.0.1 is a loopback address").count(),
            1,
            "{stderr}"
        );
        run_ok(
            api(dir.path())
                .args(set)
                .envs(env)
                .env("VAS_WEBHOOKS__ALLOW_PRIVATE_ADDRESSES", "true"),
        );
    }
    assert!(!dir.path().join(".vas-dev").exists());
    drop(databases);
}

/// A database's error reaches the operator once, not once per layer that carries it.
#[test]
fn an_admin_command_on_an_unmigrated_database_says_why_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("empty.sqlite");
    let url = format!("sqlite://{}?mode=rwc", file.display());
    let out = api(dir.path())
        .args(["admin", "business", "approve-kyb", "biz_x"])
        .env("VAS_DATABASE__URL", &url)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("no such table: businesses").count(),
        1,
        "{stderr}"
    );
}

#[test]
fn serve_names_the_configuration_it_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let steps: [(&[(&str, &str)], &str); 3] = [
        (&[], "VAS_DATABASE__URL"),
        (
            &[("VAS_DATABASE__URL", "postgres://127.0.0.1/none")],
            "VAS_AMQP__URL",
        ),
        (
            &[
                ("VAS_DATABASE__URL", "postgres://127.0.0.1/none"),
                ("VAS_AMQP__URL", "amqp://127.0.0.1"),
            ],
            "VAS_CRYPTO__KEY",
        ),
    ];
    for (env, missing) in steps {
        let out = api(dir.path())
            .arg("serve")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(missing), "expected {missing} in: {stderr}");
    }
}

#[test]
fn migrate_and_admin_work_against_postgres() {
    let Some(backend) = Backend::postgres() else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let test_db = rt.block_on(TestDb::new(&backend));
    let dir = tempfile::tempdir().unwrap();
    let key = crypto::Cipher::generate_key();
    let env = [
        ("VAS_DATABASE__URL", test_db.url.as_str()),
        ("VAS_CRYPTO__KEY", key.as_str()),
    ];
    let out = run_ok(api(dir.path()).arg("migrate").envs(env));
    assert!(out.contains("migrations applied"));
    // Twice is fine: migrations are recorded.
    run_ok(api(dir.path()).arg("migrate").envs(env));
    let issued: Value = serde_json::from_str(&run_ok(
        api(dir.path())
            .args(["admin", "business", "create", "--name", "Pg Co"])
            .envs(env),
    ))
    .unwrap();
    assert!(issued["id"].as_str().unwrap().starts_with("biz_"));
    assert!(
        !dir.path().join(".vas-dev").exists(),
        "a configured database leaves the dev folder alone"
    );
    drop(test_db);
}

/// A running `api dev`, its stdout read line by line on a thread.
struct Dev {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Dev {
    fn start(dir: &Path) -> Dev {
        Dev::start_with(dir, &[], Stdio::null())
    }

    /// `api dev` on a free port with `env` besides, its stderr to `stderr`.
    fn start_with(dir: &Path, env: &[(&str, &str)], stderr: Stdio) -> Dev {
        let mut child = api(dir)
            .arg("dev")
            .env("VAS_HTTP__BIND", "127.0.0.1:0")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Dev { child, lines }
    }

    /// Lines up to and including the one containing `marker`.
    fn read_until(&self, marker: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .unwrap_or_else(|_| panic!("no {marker:?} in {seen:?}"));
            let done = line.contains(marker);
            seen.push(line);
            if done {
                return seen;
            }
        }
    }

    /// SIGKILL: no drain, no goodbye.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM, as an operator stops it: its exit status.
    fn terminate(self) -> std::process::ExitStatus {
        self.terminate_with_output().status
    }

    /// [`terminate`](Self::terminate), with what it wrote to a piped stderr.
    fn terminate_with_output(self) -> std::process::Output {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        self.child.wait_with_output().unwrap()
    }
}

/// A caller of a running `api dev`: its address and the demo business's test key, as its
/// banner printed them.
struct Caller {
    client: reqwest::Client,
    base: String,
    key: String,
}

impl Caller {
    fn of(banner: &[String]) -> Caller {
        Caller {
            client: reqwest::Client::new(),
            base: field_after(banner, "(dev) at "),
            key: field_after(banner, "test secret key:"),
        }
    }

    /// `method` on `path` (after the printed address) with the test key, an `Idempotency-Key`
    /// and a JSON body when given; asserts the answer's status.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        idempotency_key: Option<&str>,
        body: Option<Value>,
        status: u16,
    ) -> reqwest::Response {
        let mut request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.key);
        if let Some(key) = idempotency_key {
            request = request.header("Idempotency-Key", key);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let resp = request.send().await.unwrap();
        assert_eq!(resp.status(), status, "{path}");
        resp
    }

    /// `GET path` with the test key: the body as JSON.
    async fn get(&self, path: &str) -> Value {
        test_support::json_of(
            self.client
                .get(format!("{}{path}", self.base))
                .bearer_auth(&self.key),
        )
        .await
    }

    /// Ada Obi's test-bank account (with a BVN), created at `path`: the account (201).
    async fn create_account(&self, path: &str, idempotency_key: &str) -> Value {
        let body = json!({"customerName": "Ada Obi", "customerEmail": "ada@example.com", "customerPhone": "08031234567",
                          "customerBvn": "22212345678", "preferredBank": "test-bank"});
        let resp = self
            .call(Method::POST, path, Some(idempotency_key), Some(body), 201)
            .await;
        resp.json().await.unwrap()
    }
}

fn field_after(lines: &[String], label: &str) -> String {
    lines
        .iter()
        .find_map(|l| l.split_once(label).map(|(_, rest)| rest.trim().to_owned()))
        .unwrap_or_else(|| panic!("no {label} in {lines:?}"))
}

#[tokio::test]
async fn dev_prints_a_demo_key_and_keeps_data_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let dev = Dev::start(dir.path());
    let lines = dev.read_until("test webhook secret:");
    let caller = Caller::of(&lines);
    assert!(caller.key.starts_with("sk_test_"));
    assert!(field_after(&lines, "test webhook secret:").starts_with("whsec_"));

    let account = caller.create_account("/virtual-accounts", "first").await;
    assert!(dev.terminate().success(), "SIGTERM exits 0");

    let dev = Dev::start(dir.path());
    let lines = dev.read_until("business(es) exist");
    assert!(
        !lines.iter().any(|l| l.contains("sk_test_")),
        "keys are shown once only"
    );
    let caller = Caller {
        base: field_after(&lines, "(dev) at "),
        ..caller
    };
    let path = format!("/v1/virtual-accounts/{}", id_of(&account));
    let resp = caller.call(Method::GET, &path, None, None, 200).await;
    assert_eq!(
        resp.json::<Value>().await.unwrap()["accountNumber"],
        account["accountNumber"]
    );
    assert!(dev.terminate().success());
}

/// A newcomer's first hour: `api admin webhook set` beside `api dev`, with nothing configured,
/// takes a receiver on this machine as the dev dashboard does, and `api dev` delivers to it.
#[tokio::test]
async fn webhook_set_beside_api_dev_takes_a_receiver_on_this_machine() {
    let dir = tempfile::tempdir().unwrap();
    let dev = Dev::start(dir.path());
    let lines = dev.read_until("test webhook secret:");
    let caller = Caller::of(&lines);
    let business = field_after(&lines, "demo business ");
    let business = business.split_whitespace().next().unwrap();
    let receiver = Receiver::start().await;
    assert!(
        receiver.url.starts_with("http://127.0.0.1:"),
        "{}",
        receiver.url
    );

    let out = run_ok(api(dir.path()).args(webhook_set(business, "test", &receiver.url)));
    assert!(out.contains(&receiver.url), "{out}");
    let account = caller.create_account("/virtual-accounts", "hook").await;
    let path = format!("/virtual-accounts/{}/deactivate", id_of(&account));
    caller.call(Method::POST, &path, None, None, 200).await;
    let received = receiver.wait_for(1, Duration::from_secs(20)).await;
    assert!(received[0].json()["type"].is_string());
    assert!(dev.terminate().success());
}

#[tokio::test]
async fn dev_killed_mid_delivery_resumes_it_at_once_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let dev = Dev::start(dir.path());
    let lines = dev.read_until("test webhook secret:");
    let caller = Caller::of(&lines);
    let business = field_after(&lines, "demo business ");
    let business = business.split_whitespace().next().unwrap();
    // The first delivery hangs at the receiver until the process dies; the next is answered.
    let receiver = Receiver::start().await;
    receiver.script([Reply::ok().slow(Duration::from_secs(600))]);
    let hook = receiver.url.clone();
    run_ok(
        api(dir.path())
            .env("VAS_WEBHOOKS__ALLOW_PRIVATE_ADDRESSES", "true")
            .args(webhook_set(business, "test", &hook)),
    );

    let account = caller
        .create_account("/virtual-accounts", "mid-delivery")
        .await;
    let path = format!("/virtual-accounts/{}/deactivate", id_of(&account));
    caller.call(Method::POST, &path, None, None, 200).await;
    let first = receiver.wait_for(1, Duration::from_secs(20)).await;
    dev.kill();

    // Restarted, the delivery that was in flight goes out again within seconds (not after the
    // relay's 5-minute republish delay), with the same webhook-id.
    let dev = Dev::start(dir.path());
    dev.read_until("business(es) exist");
    let again = receiver.wait_for(2, Duration::from_secs(20)).await;
    assert_eq!(again[1].webhook_id(), first[0].webhook_id());
    assert_eq!(again[1].json()["type"], first[0].json()["type"]);
    assert!(dev.terminate().success());
}

#[tokio::test]
async fn json_logs_carry_request_ids_and_no_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let logs = [("VAS_LOG__FORMAT", "json"), ("VAS_LOG__LEVEL", "debug")];
    let dev = Dev::start_with(dir.path(), &logs, Stdio::piped());
    let banner = dev.read_until("test webhook secret:");
    let Caller { client, base, key } = Caller::of(&banner);
    let resp = client
        .post(format!("{base}/virtual-accounts"))
        .bearer_auth(&key)
        .header("Idempotency-Key", "json-logs")
        .header("X-Request-Id", "req-json-logs-1")
        .json(&json!({"customerName": "Ada Obi", "customerEmail": "ada@example.com", "customerPhone": "08031234567",
                      "customerNin": "31415926535", "preferredBank": "access-bank"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 202);
    tokio::time::sleep(Duration::from_secs(3)).await; // the in-process worker polls the sandbox
    let out = dev.terminate_with_output();
    assert!(out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    let records: Vec<Value> = stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}")))
        .collect();
    assert!(records.len() > 3);
    let carried = records
        .iter()
        .filter(|r| r.to_string().contains("req-json-logs-1"))
        .count();
    assert!(
        carried >= 2,
        "the request id is in the request's log lines and its job's"
    );
    assert!(
        records.iter().any(|r| r.to_string().contains("req-json-logs-1") && r.to_string().contains("\"job\"")),
        "the provisioning job logs under the request's id"
    );
    for secret in ["31415926535", key.as_str()] {
        assert!(!stderr.contains(secret), "a secret reached the logs");
    }
}

/// `api dev` runs worker-payouts in-process: a payout is sent to the sandbox's bank and ends
/// `succeeded`, announced by `payout.succeeded`.
#[tokio::test]
async fn dev_pays_out_through_its_in_process_worker() {
    let dir = tempfile::tempdir().unwrap();
    let dev = Dev::start(dir.path());
    let caller = Caller::of(&dev.read_until("test webhook secret:"));

    let number = domain::nuban::account_number("058", 12_345_678).unwrap();
    let settlement = json!({"bankCode": "058", "accountNumber": number});
    caller
        .call(
            Method::PUT,
            "/v1/settlement-account",
            None,
            Some(settlement),
            200,
        )
        .await;
    let account = caller.create_account("/v1/virtual-accounts", "first").await;
    let path = format!("/v1/virtual-accounts/{}/simulate-deposit", id_of(&account));
    let deposit = json!({"amount": 1_500_000});
    caller
        .call(Method::POST, &path, None, Some(deposit), 202)
        .await;
    test_support::eventually(Duration::from_secs(30), async || {
        let b = caller.get("/v1/balance").await;
        if b["available"] == 1_500_000 {
            Ok(())
        } else {
            Err(b)
        }
    })
    .await;

    let resp = caller
        .call(
            Method::POST,
            "/v1/payouts",
            Some("payout-1"),
            Some(json!({"amount": 500_000})),
            202,
        )
        .await;
    let payout: Value = resp.json().await.unwrap();
    let path = format!("/v1/payouts/{}", id_of(&payout));
    let done = test_support::eventually(Duration::from_secs(30), async || {
        let p = caller.get(&path).await;
        if p["status"] == "succeeded" {
            Ok(p)
        } else {
            Err(p)
        }
    })
    .await;
    assert!(done["sessionId"].is_string(), "{done}");
    let events = caller.get("/v1/events?type=payout.succeeded").await;
    assert_eq!(events["data"][0]["data"]["id"], payout["id"], "{events}");
    assert_eq!(caller.get("/v1/balance").await["available"], 1_000_000);
    assert!(dev.terminate().success());
}
