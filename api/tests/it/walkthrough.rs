//! The README's walkthrough, run as a newcomer runs it: `api dev` started in an empty folder, the
//! README's shell block pasted into bash with the banner's values, and then what each step says
//! it shows checked through the API: the account, its credited deposit, the payout, and both
//! webhooks at the walkthrough's own receiver. `GET /` leads to the dashboard, and every metric
//! `api dev` exported meanwhile is in the operators' catalogue.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use test_support::process::command_in;
use test_support::{Backend, TestDb, json_of, on_both_databases};

/// Where the README marks the block to run.
const MARKER: &str = "<!-- walkthrough:";

/// The README's walkthrough block: the first ```sh block after [`MARKER`].
fn walkthrough_block(readme: &str) -> String {
    let after = readme
        .split_once(MARKER)
        .expect("the README marks its walkthrough")
        .1;
    let start = after.find("```sh\n").expect("a sh block after the marker") + "```sh\n".len();
    let len = after[start..].find("\n```").expect("the block ends");
    after[start..start + len].to_owned()
}

/// `api dev` in `dir`: the child, and its stdout lines as they come.
struct Dev {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Dev {
    fn start(dir: &Path, database_url: Option<&str>) -> Dev {
        let mut cmd = command_in(test_support::process::api_binary(), dir);
        cmd.arg("dev")
            .env("VAS_HTTP__BIND", "127.0.0.1:0")
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if let Some(url) = database_url {
            cmd.env("VAS_DATABASE__URL", url);
        }
        let mut child = cmd.spawn().expect("api dev starts");
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

    /// The banner, up to the dashboard user's line.
    fn banner(&self) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(120))
                .unwrap_or_else(|_| panic!("api dev printed no full banner: {seen:?}"));
            let done = line.contains("sign in as");
            seen.push(line);
            if done {
                return seen;
            }
        }
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The word after `label` on the banner line that has it.
fn after(banner: &[String], label: &str) -> String {
    banner
        .iter()
        .find_map(|l| l.split_once(label))
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no {label:?} in {banner:?}"))
        .to_owned()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

on_both_databases!(the_readme_walkthrough_does_what_it_says);

async fn the_readme_walkthrough_does_what_it_says(backend: Backend) {
    if !(have("python3") && have("curl")) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but python3 or curl is missing: the walkthrough needs both"
        );
        eprintln!("SKIPPED: the walkthrough needs python3 and curl");
        return;
    }
    let folder = tempfile::tempdir().unwrap();
    // SQLite: the dev data folder, exactly as a newcomer gets it; PostgreSQL: a fresh database
    // that `api dev` and the admin command are pointed at.
    let test_db = match backend {
        Backend::Sqlite => None,
        _ => Some(TestDb::new(&backend).await),
    };
    let database_url = test_db.as_ref().map(|db| db.url.clone());
    let dev = Dev::start(folder.path(), database_url.as_deref());
    let banner = dev.banner();
    let base = after(&banner, "(dev) at ");
    let address = base.trim_start_matches("http://").to_owned();
    let key = after(&banner, "test secret key:");
    let business = after(&banner, "demo business");
    let receiver_port = free_port().to_string();

    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let block = walkthrough_block(&readme);
    for placeholder in [
        "sk_test_…",
        "biz_…",
        "127.0.0.1:8080",
        "9000",
        "cargo run -q --bin api --",
    ] {
        assert!(
            block.contains(placeholder),
            "the walkthrough no longer has {placeholder:?}: update this test's substitutions"
        );
    }
    let script = block
        .replace("sk_test_…", &key)
        .replace("biz_…", &business)
        .replace("127.0.0.1:8080", &address)
        .replace("9000", &receiver_port)
        .replace(
            "cargo run -q --bin api --",
            test_support::process::api_binary(),
        );

    // The receiver it starts in the background shares the script's process group, so the whole
    // group is stopped at the end; its prints go to the same file as the script's.
    let stdout_path = folder.path().join("walkthrough.out");
    let stderr_path = folder.path().join("walkthrough.err");
    let mut bash = command_in("bash", folder.path());
    bash.args(["-e", "-o", "pipefail", "-c", &script])
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap());
    if let Some(url) = &database_url {
        // A configured database is not the dev data folder: `api admin` keeps the strict rule
        // for webhook URLs there unless told (docs/operations/configuration.md).
        bash.env("VAS_DATABASE__URL", url)
            .env("VAS_WEBHOOKS__ALLOW_PRIVATE_ADDRESSES", "true");
    }
    std::os::unix::process::CommandExt::process_group(&mut bash, 0);
    let mut shell = bash.spawn().expect("bash runs");
    let group = shell.id();
    let stop_group = GroupGuard(group);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = shell.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(180),
            "the walkthrough did not finish in 3 minutes"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let printed = || {
        format!(
            "stdout:\n{}\nstderr:\n{}",
            std::fs::read_to_string(&stdout_path).unwrap(),
            std::fs::read_to_string(&stderr_path).unwrap()
        )
    };
    assert!(status.success(), "the walkthrough failed: {}", printed());

    let client = reqwest::Client::new();
    let get = |path: &str| {
        json_of(
            client
                .get(format!("{base}/v1{path}"))
                .bearer_auth(&key)
                .header("Accept", "application/json"),
        )
    };

    // 3. One account, active, with its number.
    let accounts = get("/virtual-accounts").await;
    assert_eq!(accounts["total"], 1, "{accounts}");
    let account = &accounts["data"][0];
    assert_eq!(account["status"], "active", "{account}");
    assert!(account["accountNumber"].is_string(), "{account}");
    let account_id = account["id"].as_str().unwrap();

    // 4. Its deposit, credited.
    let deposits = get(&format!("/virtual-accounts/{account_id}/deposits")).await;
    assert_eq!(deposits["total"], 1, "{deposits}");
    assert_eq!(deposits["data"][0]["status"], "credited", "{deposits}");
    assert_eq!(deposits["data"][0]["amount"], 1_500_000, "{deposits}");

    // 6. The payout, succeeded (the bank confirms after its delay), the balance what is left.
    let payout_done = wait_for(|| async {
        let payouts = get("/payouts").await;
        (payouts["data"][0]["status"] == "succeeded").then_some(payouts)
    })
    .await
    .unwrap_or_else(|| panic!("the payout never succeeded: {}", printed()));
    assert_eq!(payout_done["total"], 1, "{payout_done}");
    assert_eq!(payout_done["data"][0]["amount"], 500_000, "{payout_done}");
    let balance = get("/balance").await;
    assert_eq!(balance["available"], 1_000_000, "{balance}");
    assert_eq!(balance["inFlight"], 0, "{balance}");

    // 1, 4, 6. The receiver printed both webhooks, each as its event.
    let received = |event_type: &str| {
        std::fs::read_to_string(&stdout_path)
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once("webhook received: "))
            .filter_map(|(_, body)| serde_json::from_str::<Value>(body).ok())
            .find(|event| event["type"] == event_type)
    };
    for event_type in ["deposit.received", "payout.succeeded"] {
        let event = wait_for(|| async { received(event_type) })
            .await
            .unwrap_or_else(|| panic!("no {event_type} webhook at the receiver: {}", printed()));
        // 7. The API shows the same event with its successful attempt (recorded just after the
        // receiver answered).
        let id = event["id"].as_str().unwrap();
        let answered = |shown: &Value| {
            shown["deliveries"].as_array().is_some_and(|deliveries| {
                deliveries.iter().any(|d| {
                    d["attempts"]
                        .as_array()
                        .is_some_and(|a| a.iter().any(|a| a["statusCode"] == 204))
                })
            })
        };
        let shown = wait_for(|| async {
            let shown = get(&format!("/events/{id}")).await;
            answered(&shown).then_some(shown)
        })
        .await
        .unwrap_or_else(|| panic!("{event_type}: no answered attempt at GET /events/{id}"));
        assert_eq!(shown["type"], event_type, "{shown}");
    }

    // "Open http://127.0.0.1:8080/ for the dashboard".
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let root = no_redirects.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(root.status(), 303, "GET /");
    assert_eq!(root.headers()["location"], "/dashboard/", "GET /");

    // Every metric `api dev` exported along the way is in the operators' catalogue.
    let exposition = client
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let catalogue = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/operations/health-and-metrics.md"
    ))
    .unwrap();
    let undocumented: Vec<_> = exposition
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| !catalogue.contains(&format!("| `{name}")))
        .collect();
    assert!(
        undocumented.is_empty(),
        "exported by api dev but not in docs/operations/health-and-metrics.md: {undocumented:?}"
    );
    drop(stop_group);
}

/// Polls `check` for up to a minute.
async fn wait_for<T, F, Fut>(mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        if let Some(found) = check().await {
            return Some(found);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    None
}

/// Stops the walkthrough's process group (its background receiver) however the test ends.
struct GroupGuard(u32);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", self.0)])
            .status();
    }
}
