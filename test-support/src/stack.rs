//! The workspace's real binaries as an operator runs them, on PostgreSQL and RabbitMQ: `api
//! migrate`, a business from `api admin business create`, then any of `api serve`, the workers
//! and `provider-sandbox` started on demand with one shared environment. For end-to-end tests
//! that kill processes (`api/tests/e2e.rs`, `api/tests/e2e_payouts.rs`).

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

use crate::http::free_port;
use crate::process::{Process, clean_command, sibling_binary};
use crate::{Backend, RabbitPrefix, TestDb, amqp_url};

/// A fresh database and broker prefix, a business, and the environment every process of the
/// stack shares. Dropped, it removes the broker prefix and then the database.
pub struct Stack {
    /// Every `VAS_…` variable the processes get.
    pub env: Vec<(String, String)>,
    /// The api's base URL (`http://127.0.0.1:PORT`).
    pub base: String,
    /// The provider sandbox's base URL.
    pub sandbox: String,
    /// The business `api admin business create` printed (`id`, `test.secretKey`, …).
    pub business: Value,
    /// Its test secret key.
    pub key: String,
    /// The `api` binary (`process::api_binary`): the workers are found beside it.
    built: String,
    _rabbit: RabbitPrefix,
    _db: TestDb,
}

impl Stack {
    /// A migrated database with one business, on PostgreSQL and RabbitMQ; None (saying so)
    /// when `TEST_DATABASE_URL` or `TEST_AMQP_URL` is unset. `built` is the test's
    /// `process::api_binary()`; `extra` variables are added to (or override) the defaults.
    pub async fn new(built: &str, extra: &[(&str, &str)]) -> Option<Stack> {
        let backend = Backend::postgres()?;
        let amqp = amqp_url()?;
        let db = TestDb::new(&backend).await;
        let rabbit = RabbitPrefix::new(&amqp, 'e');
        let (api_port, sandbox_port) = (free_port(), free_port());
        let mut env: Vec<(String, String)> = [
            ("VAS_DATABASE__URL", db.url.clone()),
            ("VAS_AMQP__URL", amqp.clone()),
            ("VAS_AMQP__PREFIX", rabbit.prefix.clone()),
            ("VAS_CRYPTO__KEY", crypto::Cipher::generate_key()),
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
            // The tests' webhook receivers run on this machine.
            ("VAS_WEBHOOKS__ALLOW_PRIVATE_ADDRESSES", "true".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        for (k, v) in extra {
            env.retain(|(key, _)| key != k);
            env.push(((*k).to_owned(), (*v).to_owned()));
        }
        let mut stack = Stack {
            env,
            base: format!("http://127.0.0.1:{api_port}"),
            sandbox: format!("http://127.0.0.1:{sandbox_port}"),
            business: Value::Null,
            key: String::new(),
            built: built.to_owned(),
            _rabbit: rabbit,
            _db: db,
        };
        stack.run_ok("api", &["migrate"]);
        let created = stack.run_ok("api", &["admin", "business", "create", "--name", "E2E Ltd"]);
        stack.business = serde_json::from_slice(&created.stdout).expect("the business as JSON");
        stack.key = stack.business["test"]["secretKey"]
            .as_str()
            .expect("a test key")
            .to_owned();
        Some(stack)
    }

    /// A binary of the workspace, beside the test's `api` binary (built on demand).
    pub fn binary(&self, name: &str) -> PathBuf {
        sibling_binary(&self.built, name)
    }

    /// The business's id.
    pub fn business_id(&self) -> &str {
        self.business["id"].as_str().expect("an id")
    }

    /// Runs a binary of the stack to completion (an operator command) with its environment.
    pub fn run(&self, bin: &str, args: &[&str]) -> Output {
        self.command(bin, args)
            .output()
            .unwrap_or_else(|e| panic!("running {bin}: {e}"))
    }

    /// [`run`](Self::run), asserting that it succeeded (saying what it printed if not).
    pub fn run_ok(&self, bin: &str, args: &[&str]) -> Output {
        crate::process::run_ok(&mut self.command(bin, args))
    }

    fn command(&self, bin: &str, args: &[&str]) -> Command {
        let mut command = Command::new(self.binary(bin));
        command
            .args(args)
            .env_clear()
            .envs(self.env.iter().cloned());
        command
    }

    /// Sets the business's test-mode webhook URL as an operator does (`api admin webhook set`).
    pub fn set_webhook_url(&self, url: &str) {
        let business = self.business_id();
        let args = [
            "admin", "webhook", "set", business, "--mode", "test", "--url", url,
        ];
        self.run_ok("api", &args);
    }

    /// `api admin ledger verify`: every balance equals its ledger.
    pub fn assert_ledger_verifies(&self) {
        self.run_ok("api", &["admin", "ledger", "verify"]);
    }

    /// The transfers the provider sandbox holds under `reference` (a payout's id), as its
    /// control call (`sandbox_key`) lists them.
    pub async fn bank_transfers(
        &self,
        client: &reqwest::Client,
        sandbox_key: &str,
        reference: &str,
    ) -> Vec<Value> {
        let listed = crate::json::json_of(
            client
                .get(format!("{}/control/transfers", self.sandbox))
                .bearer_auth(sandbox_key),
        )
        .await;
        listed["data"]
            .as_array()
            .expect("a list of transfers")
            .iter()
            .filter(|t| t["reference"] == reference)
            .cloned()
            .collect()
    }

    /// Starts a binary of the stack with its environment (and `RUST_LOG=warn`, or
    /// `VAS_TEST_RUST_LOG` when set), output discarded unless `VAS_TEST_PROCESS_LOGS` is set.
    pub fn start(&self, bin: &str, args: &[&str]) -> Process {
        self.start_with(bin, args, &[])
    }

    /// [`start`](Self::start) with variables of its own besides the stack's.
    pub fn start_with(&self, bin: &str, args: &[&str], extra: &[(&str, &str)]) -> Process {
        Process::quiet(&mut self.process_command(bin, args, extra, "warn"))
    }

    /// [`start_with`](Self::start_with), its output written to `log`, at `RUST_LOG=log_level`
    /// (unless `VAS_TEST_RUST_LOG` is set): for tests that print what the processes said when
    /// they fail.
    pub fn start_logged(
        &self,
        bin: &str,
        args: &[&str],
        extra: &[(&str, &str)],
        log_level: &str,
        log: &std::path::Path,
    ) -> Process {
        Process::logged(&mut self.process_command(bin, args, extra, log_level), log)
    }

    /// A long-running process's command: a clean environment, the stack's and `extra`.
    fn process_command(
        &self,
        bin: &str,
        args: &[&str],
        extra: &[(&str, &str)],
        log_level: &str,
    ) -> Command {
        let mut cmd = clean_command(self.binary(bin));
        cmd.args(args)
            .env(
                "RUST_LOG",
                std::env::var("VAS_TEST_RUST_LOG").unwrap_or_else(|_| log_level.into()),
            )
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .envs(extra.iter().copied());
        cmd
    }

    /// `GET` with the business's test key; the body as JSON.
    pub async fn get(&self, client: &reqwest::Client, path: &str) -> Value {
        crate::json::json_of(
            client
                .get(format!("{}{path}", self.base))
                .bearer_auth(&self.key),
        )
        .await
    }

    /// `POST` with the business's test key; the status and the body as JSON (Null if none).
    pub async fn post(&self, client: &reqwest::Client, path: &str, body: Value) -> (u16, Value) {
        self.send(client, reqwest::Method::POST, path, None, body)
            .await
    }

    /// Any request with the business's test key, and an `Idempotency-Key` when given.
    pub async fn send(
        &self,
        client: &reqwest::Client,
        method: reqwest::Method,
        path: &str,
        idempotency_key: Option<&str>,
        body: Value,
    ) -> (u16, Value) {
        let mut request = client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.key)
            .json(&body);
        if let Some(key) = idempotency_key {
            request = request.header("Idempotency-Key", key);
        }
        let resp = request.send().await.unwrap();
        (
            resp.status().as_u16(),
            resp.json().await.unwrap_or(Value::Null),
        )
    }
}
