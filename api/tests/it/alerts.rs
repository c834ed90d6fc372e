//! The operator's kit (docs/operations/health-and-metrics.md): the Prometheus rules and the Grafana
//! dashboard of `deploy/`.
//!
//! - `promtool` checks the rules and runs their unit tests, in which every alert fires on the
//!   series it is about and stays silent on healthy ones (skipped, saying so, without `promtool`;
//!   under `CI` its absence fails).
//! - Every metric a rule or a dashboard panel reads is one the real processes export after load.
//! - Under `CI=true` (it takes minutes): a Prometheus server of the test's own scrapes a running
//!   stack; the receiver failing, the sandbox bank stopped, the webhook worker stopped and the
//!   api killed each make their alert fire, and recovery clears it; every panel's query returns
//!   data. The rules it loads are the shipped ones with every duration 60 times shorter (minutes
//!   become seconds), see [`compressed_rules`].

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use regex::Regex;
use reqwest::Method;
use serde_json::{Value, json};
use test_support::clusters;
use test_support::http::free_port;
use test_support::metrics::series;
use test_support::process::{Process, clean_command, wait_healthy};
use test_support::stack::Stack;
use test_support::{Receiver, Reply, account_body, eventually, json_of, text_of};

const SANDBOX_KEY: &str = "alerts-sandbox-key";
const RULES: &str = "deploy/prometheus/vas.rules.yml";
const RULE_TESTS: &str = "deploy/prometheus/vas.rules.test.yml";
const DASHBOARD: &str = "deploy/grafana/vas-overview.json";
/// How long an alert may take to fire or clear: a failing endpoint is looked for every 15 s, and
/// once the receiver recovers its deliveries wait out their backoff (and circuit) first.
const ALERT_WITHIN: Duration = Duration::from_secs(180);

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// A Prometheus binary (`promtool`, `prometheus`, from Debian's `prometheus` package), or None
/// saying the test was skipped; under `CI` a missing one fails, as a missing database URL does.
fn installed(tool: &str) -> Option<&str> {
    if Command::new(tool).arg("--version").output().is_ok() {
        return Some(tool);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but {tool} is not installed (apt-get install prometheus)"
    );
    eprintln!("skipped: {tool} is not installed (apt-get install prometheus)");
    None
}

#[test]
fn the_rules_pass_promtool_check_and_their_unit_tests() {
    let Some(promtool) = installed("promtool") else {
        return;
    };
    for args in [["check", "rules", RULES], ["test", "rules", RULE_TESTS]] {
        let out = Command::new(promtool)
            .args(args)
            .current_dir(repo(""))
            .output()
            .expect("promtool runs");
        assert!(
            out.status.success(),
            "promtool {args:?}:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The alert names of the rules file.
fn alert_names() -> BTreeSet<String> {
    read(RULES)
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_alert_has_a_unit_test_where_it_fires_and_one_where_it_stays_silent() {
    let tests = read(RULE_TESTS);
    let lines: Vec<&str> = tests.lines().map(str::trim).collect();
    let (mut fires, mut silent) = (BTreeSet::new(), BTreeSet::new());
    for (i, line) in lines.iter().enumerate() {
        if let Some(name) = line.strip_prefix("alertname: ") {
            match lines.get(i + 1) {
                Some(&"exp_alerts: []") => silent.insert(name.to_owned()),
                Some(&"exp_alerts:") => fires.insert(name.to_owned()),
                other => panic!("{name}: exp_alerts expected after it, not {other:?}"),
            };
        }
    }
    let alerts = alert_names();
    assert!(alerts.len() >= 19, "{alerts:?}");
    assert_eq!(fires, alerts, "alerts with a unit test in which they fire");
    assert_eq!(
        silent, alerts,
        "alerts with a unit test in which they stay silent"
    );
    for alert in &alerts {
        let anchor = alert.to_lowercase().replace("fast", "").replace("slow", "");
        assert!(
            read(RULES).contains(&format!("runbook_url: docs/operations/runbook.md#{anchor}")),
            "{alert} links its runbook section"
        );
    }
}

/// Every PromQL expression of the rules file (`expr:` on one line, or a `|` block below it).
fn rule_expressions() -> Vec<String> {
    let text = read(RULES);
    let lines: Vec<&str> = text.lines().collect();
    let mut exprs = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(value) = line.trim().strip_prefix("expr: ") else {
            continue;
        };
        if value != "|" {
            exprs.push(value.to_owned());
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let block: Vec<&str> = lines[i + 1..]
            .iter()
            .take_while(|l| l.len() - l.trim_start().len() > indent)
            .map(|l| l.trim())
            .collect();
        exprs.push(block.join(" "));
    }
    let rules = text
        .lines()
        .filter(|l| l.trim().starts_with("- alert: ") || l.trim().starts_with("- record: "))
        .count();
    assert_eq!(exprs.len(), rules, "one expression per rule");
    exprs
}

/// Every panel query of the dashboard.
fn panel_queries() -> Vec<(String, String)> {
    let dashboard: Value = serde_json::from_str(&read(DASHBOARD)).expect("the dashboard is JSON");
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("a query").to_owned();
            queries.push((panel["title"].as_str().unwrap().to_owned(), expr));
        }
    }
    assert!(queries.len() >= 20, "{queries:?}");
    queries
}

/// The metric names a PromQL expression reads: not its functions, keywords, labels or values.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let not_metrics = [
        r#""(?:[^"\\]|\\.)*""#,
        r"\{[^}]*\}",
        r"\[[^\]]*\]",
        r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)",
    ];
    let mut rest = expr.to_owned();
    for pattern in not_metrics {
        rest = Regex::new(pattern)
            .unwrap()
            .replace_all(&rest, " ")
            .into_owned();
    }
    let keywords = ["and", "or", "unless", "bool", "offset"];
    Regex::new(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*(\()?")
        .unwrap()
        .captures_iter(&rest)
        .filter(|c| c.get(2).is_none())
        .map(|c| c[1].to_owned())
        .filter(|name| !keywords.contains(&name.as_str()))
        .collect()
}

#[test]
fn metric_names_are_read_from_queries() {
    let expr = r#"histogram_quantile(0.95, sum by (bank, le) (rate(provider_call_duration_seconds_bucket{le="1", x=~"a|b"}[5m]))) > 5 and max(deriv(outbox_backlog[15m])) > 0 unless on(job) up"#;
    assert_eq!(
        metric_names(expr),
        [
            "outbox_backlog",
            "provider_call_duration_seconds_bucket",
            "up"
        ]
        .map(str::to_owned)
        .into()
    );
}

/// What the rules and the panels read that a process must export: recording rules (named
/// `level:metric:operation`) and Prometheus's own `up` are made by Prometheus.
fn names_read() -> BTreeSet<String> {
    rule_expressions()
        .iter()
        .map(String::as_str)
        .chain(panel_queries().iter().map(|(_, q)| q.as_str()))
        .flat_map(metric_names)
        .filter(|name| !name.contains(':') && name != "up")
        .collect()
}

/// The stack's processes as Prometheus scrapes them, each under a job named after its binary.
struct Running {
    stack: Stack,
    receiver: Receiver,
    client: reqwest::Client,
    /// In start order.
    processes: Vec<Target>,
    _sandbox_state: tempfile::TempDir,
}

/// One process as Prometheus scrapes it.
struct Target {
    /// Its binary, and its job's name.
    job: &'static str,
    process: Process,
    /// Where its `/metrics` is (`host:port`).
    address: String,
    /// Its environment besides the stack's.
    env: Vec<(String, String)>,
}

impl Running {
    /// Every binary of the stack on PostgreSQL and RabbitMQ, its webhooks failing (the load
    /// recovers them); None when `TEST_DATABASE_URL` / `TEST_AMQP_URL` are unset. The database
    /// URL lists a second host that is down and the replica URL one that is down, so the
    /// processes show the primary they write to and reads falling back from the replica.
    async fn start() -> Option<Running> {
        let state = tempfile::tempdir().expect("a temporary folder");
        let state_file = state.path().join("sandbox.json");
        let extra = [
            ("VAS_SANDBOX__KEY", SANDBOX_KEY),
            ("VAS_SANDBOX__STATE_FILE", state_file.to_str().unwrap()),
            ("VAS_SANDBOX__ACTIVATION_DELAY_SECS", "1"),
            ("VAS_SANDBOX__TRANSFER_DELAY_SECS", "1"),
            ("VAS_PAYOUTS__INITIAL_POLL_SECS", "1"),
            ("VAS_PAYOUTS__MAX_POLL_SECS", "1"),
            ("VAS_PROVISIONING__MAX_POLL_SECS", "1"),
            (
                "VAS_WEBHOOKS__RETRY_SCHEDULE",
                "[2,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3]",
            ),
            ("VAS_LIMITS__ACCOUNTS_PER_HOUR", "100000"),
            ("VAS_DATABASE__MAX_CONNECTIONS", "5"),
        ];
        let mut stack = Stack::new(test_support::process::api_binary(), &extra).await?;
        let url = stack
            .env
            .iter()
            .find(|(k, _)| k == "VAS_DATABASE__URL")
            .map(|(_, v)| v.clone())
            .unwrap();
        let (user, rest) = url.split_once('@').expect("user@host");
        let (host, database) = rest.split_once('/').expect("host/database");
        let (down_a, down_b) = (free_port(), free_port());
        let multi = format!("{user}@{host},127.0.0.1:{down_a}/{database}");
        let replica = format!("{user}@127.0.0.1:{down_b}/{database}");
        stack.env.retain(|(k, _)| k != "VAS_DATABASE__URL");
        stack.env.push(("VAS_DATABASE__URL".into(), multi));
        stack.env.push(("VAS_DATABASE__READ_URL".into(), replica));

        let receiver = Receiver::start().await;
        receiver.set_default(Reply::status(500));
        stack.set_webhook_url(&receiver.url);
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let mut running = Running {
            stack,
            receiver,
            client,
            processes: Vec::new(),
            _sandbox_state: state,
        };
        let sandbox = running
            .stack
            .sandbox
            .trim_start_matches("http://")
            .to_owned();
        let api = running.stack.base.trim_start_matches("http://").to_owned();
        running.add("provider-sandbox", sandbox, Vec::new());
        running.add("api", api, Vec::new());
        for worker in [
            "worker-provisioning",
            "worker-webhooks",
            "worker-recheck",
            "worker-payouts",
        ] {
            let bind = format!("127.0.0.1:{}", free_port());
            running.add(worker, bind.clone(), vec![("VAS_OPS__BIND".into(), bind)]);
        }
        for job in [
            "provider-sandbox",
            "api",
            "worker-webhooks",
            "worker-payouts",
        ] {
            running.wait_ready(job).await;
        }
        Some(running)
    }

    fn add(&mut self, job: &'static str, address: String, env: Vec<(String, String)>) {
        let process = self.spawn(job, &env);
        self.processes.push(Target {
            job,
            process,
            address,
            env,
        });
    }

    fn spawn(&self, job: &str, env: &[(String, String)]) -> Process {
        let args: &[&str] = if job == "api" { &["serve"] } else { &[] };
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        self.stack.start_with(job, args, &env)
    }

    fn address(&self, job: &str) -> String {
        self.processes
            .iter()
            .find(|p| p.job == job)
            .map(|p| p.address.clone())
            .unwrap()
    }

    async fn wait_ready(&self, job: &str) {
        let path = if job == "provider-sandbox" {
            "healthz"
        } else {
            "readyz"
        };
        wait_healthy(
            &self.client,
            &format!("http://{}/{path}", self.address(job)),
        )
        .await;
    }

    /// SIGKILLs (`-KILL`) or stops (`-TERM`) one process.
    fn stop(&mut self, job: &str, signal: &str) {
        let entry = self.processes.iter_mut().find(|p| p.job == job).unwrap();
        entry.process.signal(signal);
        entry.process.wait(Duration::from_secs(30));
    }

    async fn restart(&mut self, job: &str) {
        let env = self
            .processes
            .iter()
            .find(|p| p.job == job)
            .unwrap()
            .env
            .clone();
        let process = self.spawn(job, &env);
        self.processes
            .iter_mut()
            .find(|p| p.job == job)
            .unwrap()
            .process = process;
        self.wait_ready(job).await;
    }

    async fn metrics(&self, job: &str) -> String {
        text_of(
            self.client
                .get(format!("http://{}/metrics", self.address(job))),
        )
        .await
    }

    async fn post(&self, path: &str, key: Option<&str>, body: Value) -> (u16, Value) {
        self.stack
            .send(&self.client, Method::POST, path, key, body)
            .await
    }

    /// A funded settlement account, accounts (one bank answering at once, one later), deposits
    /// whose webhooks fail until the receiver recovers, payouts, and lists: every kind of work.
    async fn load(&self) -> Vec<String> {
        let number = domain::nuban::account_number("058", 12_345_678).unwrap();
        let (status, body) = self
            .stack
            .send(
                &self.client,
                Method::PUT,
                "/v1/settlement-account",
                None,
                json!({"bankCode": "058", "accountNumber": number, "schedule": "manual"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let mut accounts = Vec::new();
        for n in 0..6u32 {
            let bank = if n % 2 == 0 {
                "test-bank"
            } else {
                "access-bank"
            };
            let (status, account) = self
                .post(
                    "/v1/virtual-accounts",
                    Some(&format!("alerts-account-{n}")),
                    account_body(n, bank),
                )
                .await;
            assert!(status == 201 || status == 202, "{status} {account}");
            if status == 201 {
                accounts.push(account["id"].as_str().unwrap().to_owned());
            }
        }
        for (n, account) in accounts.iter().enumerate() {
            let amount = 50_000_000 + i64::try_from(n).unwrap() * 100;
            let path = format!("/v1/virtual-accounts/{account}/simulate-deposit");
            let (status, body) = self.post(&path, None, json!({"amount": amount})).await;
            assert_eq!(status, 202, "{body}");
        }
        eventually(Duration::from_secs(60), async || {
            let balance = self.stack.get(&self.client, "/v1/balance").await;
            if balance["available"].as_i64().unwrap_or(0) >= 100_000_000 {
                Ok(())
            } else {
                Err(balance)
            }
        })
        .await;
        for n in 0..3i64 {
            let (status, payout) = self
                .post(
                    "/v1/payouts",
                    Some(&format!("alerts-payout-{n}")),
                    json!({"amount": 10_000 * (n + 1), "narration": "alerts"}),
                )
                .await;
            assert_eq!(status, 202, "{payout}");
        }
        for _ in 0..5 {
            self.stack
                .get(&self.client, "/v1/virtual-accounts?pageSize=10")
                .await;
        }
        // The failing webhooks are shown, then the receiver recovers and they are delivered.
        self.wait_for_metric("worker-webhooks", "webhook_endpoint_failing_seconds{")
            .await;
        self.receiver.set_default(Reply::ok());
        self.wait_for_metric("worker-webhooks", "deposit_webhook_latency_seconds_count")
            .await;
        self.wait_for_metric("worker-payouts", "payouts_sent_total{")
            .await;
        accounts
    }

    async fn wait_for_metric(&self, job: &str, prefix: &str) {
        eventually(Duration::from_secs(90), async || {
            let text = self.metrics(job).await;
            if text.lines().any(|l| l.starts_with(prefix)) {
                return Ok(());
            }
            // Where the work stands, so a run that gives up says why.
            let payouts = self.stack.get(&self.client, "/v1/payouts").await;
            Err(format!(
                "{job} does not export {prefix} yet; the payouts: {payouts}; {job}'s metrics:\n{text}"
            ))
        })
        .await;
    }

    /// The metric names every process exports now.
    async fn exported(&self) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for Target { job, .. } in &self.processes {
            for line in series(&self.metrics(job).await) {
                names.insert(line.split('{').next().unwrap().to_owned());
            }
        }
        names
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_metric_a_rule_or_panel_reads_is_exported_by_the_processes() {
    let read = names_read();
    for expected in [
        "process_ready",
        "outbox_oldest_job_age_seconds",
        "deposit_webhook_latency_seconds_bucket",
        "webhook_endpoint_failing_seconds",
        "payouts_processing_oldest_seconds",
    ] {
        assert!(read.contains(expected), "{expected} is read: {read:?}");
    }
    let Some(running) = Running::start().await else {
        return;
    };
    let deposits = running.load().await.len();
    // Each credited deposit's webhook is timed once, at its first 2xx, from the deposit's
    // receipt: through the receiver's failures (a retry 2 s later at least), not just the attempt.
    let (count, sum) = eventually(Duration::from_secs(60), async || {
        let text = running.metrics("worker-webhooks").await;
        let value = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        let count = value("deposit_webhook_latency_seconds_count");
        let sum = value("deposit_webhook_latency_seconds_sum");
        if count >= deposits as f64 {
            Ok((count, sum))
        } else {
            Err(format!("{count} deposit webhooks timed"))
        }
    })
    .await;
    assert_eq!(count, deposits as f64, "one per deposit, no other event");
    assert!(sum >= 2.0 * count, "{sum} s for {count} deposits");
    let exported = running.exported().await;
    let missing: Vec<&String> = read.difference(&exported).collect();
    assert!(
        missing.is_empty(),
        "read by a rule or panel but exported by no process: {missing:?}"
    );
}

/// The shipped rules with every duration 60 times shorter (`for: 5m` and `[5m]` become 5s, `1h`
/// 60s), and the few thresholds that are durations in seconds likewise: an alert that takes
/// minutes in production takes seconds here, by the same expressions.
fn compressed_rules() -> String {
    let shorter = |text: &str, pattern: &str| {
        Regex::new(pattern)
            .unwrap()
            .replace_all(text, |c: &regex::Captures| {
                let n: u64 = c[2].parse().unwrap();
                let seconds = if &c[3] == "h" { n * 60 } else { n };
                format!("{}{seconds}s{}", &c[1], &c[4])
            })
            .into_owned()
    };
    let mut rules = shorter(&read(RULES), r"(for: )(\d+)([mh])()");
    rules = shorter(&rules, r"(\[)(\d+)([mh])(\])");
    let threshold = "max by (business) (webhook_endpoint_failing_seconds) > 1800";
    assert_eq!(rules.matches(threshold).count(), 1, "{threshold}");
    rules.replace(
        threshold,
        "max by (business) (webhook_endpoint_failing_seconds) > 30",
    )
}

/// A Prometheus server of the test's own: a free port, a temporary folder, scraping every
/// process of `running` each second and evaluating [`compressed_rules`] each second.
struct Prometheus {
    base: String,
    _process: Process,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    async fn start(prometheus: &str, running: &Running) -> Prometheus {
        let dir = tempfile::tempdir().expect("a temporary folder");
        std::fs::write(dir.path().join("rules.yml"), compressed_rules()).unwrap();
        let mut config = String::from(
            "global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}\n\
             rule_files: [rules.yml]\nscrape_configs:\n",
        );
        for Target { job, address, .. } in &running.processes {
            config.push_str(&format!(
                "  - job_name: {job}\n    static_configs: [{{targets: [\"{address}\"]}}]\n"
            ));
        }
        let config_file = dir.path().join("prometheus.yml");
        std::fs::write(&config_file, config).unwrap();
        let port = free_port();
        let process = Process::quiet(
            clean_command(prometheus)
                .current_dir(dir.path())
                .arg(format!("--config.file={}", config_file.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path().join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}")),
        );
        let base = format!("http://127.0.0.1:{port}");
        wait_healthy(&running.client, &format!("{base}/-/ready")).await;
        Prometheus {
            base,
            _process: process,
            _dir: dir,
        }
    }

    async fn api(&self, client: &reqwest::Client, path: &str, query: &[(&str, &str)]) -> Value {
        let body = json_of(client.get(format!("{}{path}", self.base)).query(query)).await;
        assert_eq!(body["status"], "success", "{path} {query:?}: {body}");
        body["data"].clone()
    }

    /// The state (`pending`, `firing`) of the alert named `name` whose labels include `labels`.
    async fn alert_state(
        &self,
        client: &reqwest::Client,
        name: &str,
        labels: &[(&str, &str)],
    ) -> Option<String> {
        let data = self.api(client, "/api/v1/alerts", &[]).await;
        data["alerts"]
            .as_array()
            .expect("alerts")
            .iter()
            .find(|a| {
                a["labels"]["alertname"] == name
                    && labels.iter().all(|(k, v)| a["labels"][*k] == *v)
            })
            .map(|a| a["state"].as_str().unwrap().to_owned())
    }

    /// Waits until the alert fires (having been pending, as `for:` makes every alert that has it).
    async fn wait_firing(&self, client: &reqwest::Client, name: &str, labels: &[(&str, &str)]) {
        let started = Instant::now();
        eventually(ALERT_WITHIN, async || {
            match self.alert_state(client, name, labels).await.as_deref() {
                Some("firing") => Ok(()),
                other => Err(format!("{name} {labels:?}: {other:?}")),
            }
        })
        .await;
        eprintln!("{name} {labels:?} firing after {:?}", started.elapsed());
    }

    async fn wait_cleared(&self, client: &reqwest::Client, name: &str, labels: &[(&str, &str)]) {
        let started = Instant::now();
        eventually(ALERT_WITHIN, async || {
            match self.alert_state(client, name, labels).await {
                None => Ok(()),
                Some(state) => Err(format!("{name} {labels:?} still {state}")),
            }
        })
        .await;
        eprintln!("{name} {labels:?} cleared after {:?}", started.elapsed());
    }
}

/// Work that keeps coming while a fault lasts: a deposit and an account creation every 300 ms
/// (their answers do not matter; what the processes do with them does).
fn keep_busy(
    running: &Running,
    accounts: &[String],
    stop: Arc<AtomicBool>,
) -> impl Future<Output = ()> + use<> {
    let (stack_base, key, client) = (
        running.stack.base.clone(),
        running.stack.key.clone(),
        running.client.clone(),
    );
    let accounts = accounts.to_vec();
    async move {
        let mut n = 0u32;
        while !stop.load(Ordering::Relaxed) {
            let account = &accounts[n as usize % accounts.len()];
            let _ = client
                .post(format!(
                    "{stack_base}/v1/virtual-accounts/{account}/simulate-deposit"
                ))
                .bearer_auth(&key)
                .json(&json!({"amount": 100_000 + i64::from(n) * 100}))
                .send()
                .await;
            let _ = client
                .post(format!("{stack_base}/v1/virtual-accounts"))
                .bearer_auth(&key)
                .header("Idempotency-Key", format!("alerts-busy-{n}"))
                .json(&account_body(1_000 + n, "test-bank"))
                .send()
                .await;
            n += 1;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn alerts_fire_on_faults_and_clear_on_recovery_in_a_real_prometheus() {
    let Some(_turn) = clusters::turn("the real-Prometheus alert test").await else {
        return;
    };
    let Some(prometheus) = installed("prometheus") else {
        return;
    };
    clusters::bounded("the real-Prometheus alert test", async {
        let started = Instant::now();
        let mut running = Running::start()
            .await
            .expect("CI sets TEST_DATABASE_URL and TEST_AMQP_URL");
        let server = Prometheus::start(prometheus, &running).await;
        let client = running.client.clone();
        let accounts = running.load().await;

        // Each process stopped is down until it is back: the webhook worker first (its
        // gauges of failing endpoints come back with the failures below), the api last.
        let down = async |running: &mut Running, job: &str, signal: &str| {
            server
                .wait_cleared(&client, "ProcessDown", &[("job", job)])
                .await;
            running.stop(job, signal);
            server
                .wait_firing(&client, "ProcessDown", &[("job", job)])
                .await;
            running.restart(job).await;
            server
                .wait_cleared(&client, "ProcessDown", &[("job", job)])
                .await;
        };
        down(&mut running, "worker-webhooks", "-TERM").await;

        // The receiver fails: the business is named as failing, then cleared once it recovers.
        let business = running.stack.business_id().to_owned();
        let failing = [("business", business.as_str())];
        let stop = Arc::new(AtomicBool::new(false));
        let busy = tokio::spawn(keep_busy(&running, &accounts, stop.clone()));
        server
            .wait_cleared(&client, "WebhookEndpointFailing", &failing)
            .await;
        running.receiver.set_default(Reply::status(503));
        server
            .wait_firing(&client, "WebhookEndpointFailing", &failing)
            .await;
        running.receiver.set_default(Reply::ok());
        server
            .wait_cleared(&client, "WebhookEndpointFailing", &failing)
            .await;

        // The sandbox bank stops: calls to it fail, and it is down; both clear once it is back.
        let bank = [("bank", "test-bank")];
        let sandbox = [("job", "provider-sandbox")];
        server
            .wait_cleared(&client, "ProviderBankFailing", &bank)
            .await;
        running.stop("provider-sandbox", "-KILL");
        server
            .wait_firing(&client, "ProviderBankFailing", &bank)
            .await;
        server.wait_firing(&client, "ProcessDown", &sandbox).await;
        running.restart("provider-sandbox").await;
        server.wait_cleared(&client, "ProcessDown", &sandbox).await;
        server
            .wait_cleared(&client, "ProviderBankFailing", &bank)
            .await;
        stop.store(true, Ordering::Relaxed);
        busy.await.unwrap();

        // One deposit whose webhook first succeeds while Prometheus watches: the load's may all
        // have been timed before its first scrape of the worker, and the faults' may still be
        // waiting on a retry, which left the latency panel without an increase to show.
        let _ = client
            .post(format!(
                "{}/v1/virtual-accounts/{}/simulate-deposit",
                running.stack.base, accounts[0]
            ))
            .bearer_auth(&running.stack.key)
            .json(&json!({"amount": 100_000}))
            .send()
            .await;
        let timed = "sum(increase(deposit_webhook_latency_seconds_count[1h]))";
        test_support::eventually(Duration::from_secs(60), async || {
            let data = server
                .api(&client, "/api/v1/query", &[("query", timed)])
                .await;
            let increased = data["result"].as_array().unwrap().iter().any(|r| {
                r["value"][1]
                    .as_str()
                    .and_then(|v| v.parse::<f64>().ok())
                    .is_some_and(|v| v > 0.0)
            });
            if increased { Ok(()) } else { Err(data) }
        })
        .await;
        down(&mut running, "api", "-KILL").await;

        // Every panel of the dashboard shows data after all that load.
        for (title, query) in panel_queries() {
            let data = server
                .api(&client, "/api/v1/query", &[("query", &query)])
                .await;
            let finite = data["result"].as_array().unwrap().iter().any(|r| {
                r["value"][1]
                    .as_str()
                    .and_then(|v| v.parse::<f64>().ok())
                    .is_some_and(f64::is_finite)
            });
            assert!(finite, "panel {title:?} shows no data: {query} → {data}");
        }
        eprintln!(
            "the real-Prometheus alert test took {:?}",
            started.elapsed()
        );
    })
    .await;
}
