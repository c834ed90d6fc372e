//! The command line: `bench create …`, `bench replay …`, `bench lists …`, `bench payouts …` and
//! `bench webhooks …`.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::lists::ListsSettings;
use crate::load::{self, Settings, Stop, Workload};

#[derive(Debug, Parser)]
#[command(
    name = "bench",
    version,
    about = "Load generator for POST /v1/virtual-accounts: throughput and latency percentiles"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create accounts: a fresh Idempotency-Key and a fresh customer on every request.
    Create(Common),
    /// Replay one creation: the same Idempotency-Key and body on every request.
    Replay(Common),
    /// Bulk-load accounts for the key's business into PostgreSQL, then time list and search
    /// requests (page 1, q matching one, parts of an e-mail, q matching none, cursor hops, a deep
    /// page) and explain the service's statements.
    Lists(ListsArgs),
    /// Against api serve, worker-payouts, worker-webhooks and provider-sandbox: payouts created
    /// per second (concurrent POST /v1/payouts), then, at a steady rate, each payout's time
    /// from its 202 to its payout.succeeded webhook at a receiver this bench runs.
    Payouts(PayoutsArgs),
    /// Webhook delivery: drain, saturation and steady-rate runs against this
    /// project or svix-server, with a local receiver; deliveries/s, send → received p50/p99 and
    /// CPU time per delivery.
    Webhooks(Box<WebhooksArgs>),
}

#[derive(Debug, Args)]
pub struct PayoutsArgs {
    // The business that pays out (its key a test key, sk_test_…); its test webhook URL is
    // pointed at this bench's receiver in the database.
    #[command(flatten)]
    pub service: ServiceArgs,
    /// Where the webhook receiver listens (worker-webhooks must reach it).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub receiver: std::net::SocketAddr,
    /// Part 1: requests in flight at once…
    #[arg(long, short = 'c', default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub concurrency: u64,
    /// …and payouts created (after a 1 s warm-up).
    #[arg(long, short = 'n', default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: u64,
    /// Part 2: payouts per second…
    #[arg(long, default_value_t = 20.0)]
    pub rate: f64,
    /// …for this long.
    #[arg(long, value_parser = parse_duration, default_value = "20s")]
    pub duration: Duration,
    /// How long to wait for part 1's payouts to settle and part 2's webhooks to arrive.
    #[arg(long, value_parser = parse_duration, default_value = "120s")]
    pub settle: Duration,
    /// Per-request timeout.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub timeout: Duration,
}

#[derive(Debug, Args)]
pub struct WebhooksArgs {
    /// Measure svix-server at this base URL (an api-only instance) instead of this project.
    #[arg(long, requires = "svix_token")]
    pub svix: Option<String>,
    /// A svix API token (`svix-server jwt generate`).
    #[arg(long, env = "BENCH_SVIX_TOKEN", hide_env_values = true)]
    pub svix_token: Option<String>,
    /// Ours: the service's base URL (without /v1).
    #[arg(long, default_value = "http://127.0.0.1:8080", env = "BENCH_BASE")]
    pub api: String,
    /// Ours: test secret keys of the businesses whose endpoints receive the events,
    /// comma-separated: each gets `--accounts` accounts and the deposits go to them in turn (the
    /// drain's events are the first business's).
    #[arg(
        long,
        env = "BENCH_KEY",
        hide_env_values = true,
        value_delimiter = ',',
        required_unless_present = "svix"
    )]
    pub key: Vec<String>,
    /// Ours: the database `api serve` uses.
    #[arg(
        long,
        env = "BENCH_DATABASE_URL",
        hide_env_values = true,
        required_unless_present = "svix"
    )]
    pub database_url: Option<String>,
    /// The command line that starts one delivery worker (run with `sh -c 'exec …'`), e.g.
    /// `/tmp/vas-target/release/worker-webhooks`.
    #[arg(long)]
    pub worker: String,
    /// Where the worker's output goes.
    #[arg(long, default_value = "bench-webhooks-worker.log")]
    pub worker_log: String,
    /// Scenarios, in order.
    #[arg(long, value_delimiter = ',', default_value = "drain,saturate,steady")]
    pub scenarios: Vec<crate::webhooks::Scenario>,
    /// Events per drain and per saturation run.
    #[arg(long, default_value_t = 5_000)]
    pub events: u64,
    /// Callers in flight during saturation.
    #[arg(long, short = 'c', default_value_t = 32)]
    pub concurrency: usize,
    /// Ours: accounts of each business the simulated deposits are spread over (one account's
    /// deposits are recorded one at a time).
    #[arg(long, default_value_t = 32)]
    pub accounts: usize,
    /// Ours: send each deposit as its bank does, the signed notification straight to the api,
    /// instead of through `simulate-deposit` (which adds a request to the api, a read of the
    /// account and the sandbox's own work); the secret the api checks test-mode banks'
    /// signatures with (`VAS_SANDBOX__SECRET`).
    #[arg(long, conflicts_with = "svix")]
    pub bank_secret: Option<String>,
    /// Sends a second in the steady run.
    #[arg(long, default_value_t = 100)]
    pub rate: u64,
    /// How long the steady run sends.
    #[arg(long, value_parser = parse_duration, default_value = "20s")]
    pub steady_for: Duration,
    /// Where the receiver listens.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub receiver: std::net::SocketAddr,
    /// Another process whose CPU time counts, as LABEL=PID (e.g. api=1234); repeatable.
    #[arg(long = "pid", value_parser = parse_labelled_pid)]
    pub pids: Vec<(String, u32)>,
    /// Count the PostgreSQL backends of this database (and the server's own processes).
    #[arg(long)]
    pub pg_database: Option<String>,
    /// Count every process of this name (e.g. beam.smp, redis-server); repeatable.
    #[arg(long = "proc")]
    pub procs: Vec<String>,
    /// The longest wait for a scenario's last delivery.
    #[arg(long, value_parser = parse_duration, default_value = "120s")]
    pub timeout: Duration,
}

/// `LABEL=PID`.
fn parse_labelled_pid(text: &str) -> Result<(String, u32), String> {
    let (label, pid) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not LABEL=PID"))?;
    let pid = pid
        .parse()
        .map_err(|_| format!("`{pid}` is not a process id"))?;
    Ok((label.to_owned(), pid))
}

#[derive(Debug, Args)]
pub struct ListsArgs {
    // The business whose accounts are listed (its key's mode is the one loaded).
    #[command(flatten)]
    pub service: ServiceArgs,
    /// Accounts the business must have in the key's mode: loaded up to this many (a rerun loads
    /// none).
    #[arg(long, default_value_t = 1_000_000)]
    pub accounts: u64,
    /// Rows each of the deposits (of the oldest account), events, payouts and ledger lists must
    /// have: loaded up to this many (0: accounts only).
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: u64,
    /// Measured requests per case (one at a time).
    #[arg(long, short = 'n', default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: u64,
    /// Requests per case sent first and not counted.
    #[arg(long, default_value_t = 20)]
    pub warmup: u64,
    /// The deep page number measured, and where the cursor walk starts.
    #[arg(long, default_value_t = 40_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub deep_page: u64,
    /// The api's process id: its resident memory (VmRSS) is reported.
    #[arg(long)]
    pub api_pid: Option<u32>,
    /// Per-request timeout.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub timeout: Duration,
}

/// The service under test and the business it is driven as, with the database `api serve` uses
/// (`bench lists` and `bench payouts` write rows there).
#[derive(Debug, Args)]
pub struct ServiceArgs {
    /// The PostgreSQL database `api serve` uses (`api migrate` made its schema).
    #[arg(long, env = "BENCH_DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// The service's base URL (without /v1).
    #[arg(long, default_value = "http://127.0.0.1:8080", env = "BENCH_BASE")]
    pub api: String,
    /// A secret key of the business.
    #[arg(long, env = "BENCH_KEY", hide_env_values = true)]
    pub key: String,
    /// The business's id, when the key is not in this database's api_keys.
    #[arg(long)]
    pub business: Option<String>,
}

#[derive(Debug, Args)]
pub struct Common {
    /// The service's base URL (without /v1).
    #[arg(long, default_value = "http://127.0.0.1:8080", env = "BENCH_BASE")]
    pub base: String,
    /// Secret keys (sk_test_… for the test banks), comma-separated: worker `i` sends key
    /// `i % n`, so load can be spread over several businesses.
    #[arg(
        long,
        env = "BENCH_KEY",
        hide_env_values = true,
        value_delimiter = ',',
        required = true
    )]
    pub key: Vec<String>,
    /// How many requests are in flight at once (one task each).
    #[arg(long, short = 'c', default_value_t = 32)]
    pub concurrency: usize,
    /// How long to measure, after the warm-up: 20s, 500ms, 2m (a bare number is seconds).
    #[arg(long, short = 'd', value_parser = parse_duration, conflicts_with = "requests")]
    pub duration: Option<Duration>,
    /// Measure this many requests instead of a duration.
    #[arg(long, short = 'n', value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// preferredBank of the accounts created.
    #[arg(long, default_value = "test-bank")]
    pub bank: String,
    /// Load sent before measuring, not counted (it does create accounts in `create`).
    #[arg(long, value_parser = parse_duration, default_value = "2s")]
    pub warmup: Duration,
    /// Per-request timeout; a request that takes longer counts as a transport error.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub timeout: Duration,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// `20s`, `500ms`, `2m`, `1h`, `1.5s`, or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (e.g. 20s, 500ms, 2m)"))?;
    let seconds = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => return Err(format!("unknown unit `{other}` (use ms, s, m or h)")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| e.to_string())
}

pub async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let (replay, args) = match cli.command {
        Command::Create(args) => (false, args),
        Command::Replay(args) => (true, args),
        Command::Lists(args) => return lists(args).await,
        Command::Payouts(args) => return payouts(args).await,
        Command::Webhooks(args) => return webhooks(*args).await,
    };
    anyhow::ensure!(args.concurrency >= 1, "--concurrency must be at least 1");
    let stop = match (args.duration, args.requests) {
        (_, Some(n)) => Stop::Requests(n),
        (Some(d), None) => Stop::After(d),
        (None, None) => Stop::After(Duration::from_secs(20)),
    };
    let settings = Settings {
        base: args.base,
        api_keys: args.key,
        concurrency: args.concurrency,
        stop,
        warmup: args.warmup,
        timeout: args.timeout,
    };
    let client = load::client(&settings)?;
    let workload = if replay {
        let (key, body) = load::prepare_replay(&client, &settings, &args.bank).await?;
        Workload::Replay { key, body }
    } else {
        Workload::Create { bank: args.bank }
    };

    let cancelled = Arc::new(AtomicBool::new(false));
    {
        let cancelled = cancelled.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("stopping after the requests in flight…");
                cancelled.store(true, Ordering::Relaxed);
            }
        });
    }
    let what = match stop {
        Stop::After(d) => format!("{:.1} s", d.as_secs_f64()),
        Stop::Requests(n) => format!("{n} requests"),
    };
    eprintln!(
        "bench {}: {} workers against {}; warm-up {:.1} s, then measuring {what}…",
        if replay { "replay" } else { "create" },
        settings.concurrency,
        settings.endpoint(),
        settings.warmup.as_secs_f64()
    );

    let report = load::run(client, settings, workload, cancelled).await?;
    if args.json {
        println!("{}", report.to_json());
        for warning in report.warnings() {
            eprintln!("warning: {warning}");
        }
    } else {
        print!("{}", report.to_text());
    }
    // A run with no successful response at all (wrong key, service down) is a failure for scripts.
    Ok(if report.successes() > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn lists(args: ListsArgs) -> anyhow::Result<ExitCode> {
    let settings = ListsSettings {
        database_url: args.service.database_url,
        api: args.service.api,
        key: args.service.key,
        business: args.service.business,
        accounts: args.accounts,
        rows: args.rows,
        requests: args.requests,
        warmup: args.warmup,
        page_size: 20,
        deep_page: args.deep_page,
        api_pid: args.api_pid,
        timeout: args.timeout,
    };
    let report = crate::lists::run(&settings).await?;
    print!("{}", report.to_text());
    Ok(ExitCode::SUCCESS)
}

async fn payouts(args: PayoutsArgs) -> anyhow::Result<ExitCode> {
    let settings = crate::payouts::PayoutsSettings {
        database_url: args.service.database_url,
        api: args.service.api,
        key: args.service.key,
        business: args.service.business,
        receiver: args.receiver,
        concurrency: usize::try_from(args.concurrency)?,
        requests: args.requests,
        rate: args.rate,
        duration: args.duration,
        settle: args.settle,
        timeout: args.timeout,
    };
    let report = crate::payouts::run(&settings).await?;
    print!("{}", report.to_text());
    Ok(if report.received > 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn webhooks(args: WebhooksArgs) -> anyhow::Result<ExitCode> {
    use crate::webhooks::{Target, WebhooksSettings};
    let target = match (args.svix, args.svix_token) {
        (Some(url), Some(token)) => Target::Svix { url, token },
        _ => Target::Ours {
            api: args.api,
            keys: args.key,
            database_url: args.database_url.unwrap_or_default(),
            bank_secret: args.bank_secret,
        },
    };
    let settings = WebhooksSettings {
        target,
        scenarios: args.scenarios,
        events: args.events,
        concurrency: args.concurrency,
        accounts: args.accounts,
        rate: args.rate,
        steady_for: args.steady_for,
        receiver: args.receiver,
        worker: args.worker,
        worker_log: args.worker_log,
        pids: args.pids,
        pg_database: args.pg_database,
        proc_names: args.procs,
        timeout: args.timeout,
    };
    let outcomes = crate::webhooks::run(&settings).await?;
    print!("{}", crate::webhooks::report(&outcomes));
    Ok(if outcomes.iter().all(|o| o.missing == 0) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("20s"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_duration("20"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("3 weeks").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn command_line() {
        let cli = Cli::try_parse_from([
            "bench",
            "create",
            "--key",
            "sk_test_x",
            "-c",
            "8",
            "--duration",
            "5s",
        ])
        .unwrap();
        let Command::Create(args) = cli.command else {
            panic!("not create")
        };
        assert_eq!(args.concurrency, 8);
        assert_eq!(args.duration, Some(Duration::from_secs(5)));
        assert_eq!(args.bank, "test-bank");
        assert_eq!(args.warmup, Duration::from_secs(2));
        assert!(
            Cli::try_parse_from([
                "bench",
                "replay",
                "--key",
                "k",
                "--duration",
                "5s",
                "--requests",
                "10"
            ])
            .is_err()
        );
        assert!(Cli::try_parse_from(["bench", "create", "--key", "k", "--requests", "0"]).is_err());
    }

    #[test]
    fn payouts_command_line() {
        let cli = Cli::try_parse_from([
            "bench",
            "payouts",
            "--database-url",
            "postgres://postgres@127.0.0.1/x",
            "--key",
            "sk_test_x",
            "--rate",
            "50",
        ])
        .unwrap();
        let Command::Payouts(args) = cli.command else {
            panic!("not payouts")
        };
        assert_eq!((args.concurrency, args.requests), (32, 2000));
        assert_eq!(args.rate, 50.0);
        assert_eq!(args.duration, Duration::from_secs(20));
        assert_eq!(args.receiver.port(), 0);
        assert!(
            Cli::try_parse_from([
                "bench",
                "payouts",
                "--database-url",
                "x",
                "--key",
                "k",
                "-c",
                "0"
            ])
            .is_err()
        );
    }

    #[test]
    fn lists_command_line() {
        let cli = Cli::try_parse_from([
            "bench",
            "lists",
            "--database-url",
            "postgres://postgres@127.0.0.1/x",
            "--api",
            "http://127.0.0.1:9000",
            "--key",
            "sk_test_x",
        ])
        .unwrap();
        let Command::Lists(args) = cli.command else {
            panic!("not lists")
        };
        assert_eq!((args.accounts, args.rows), (1_000_000, 1_000_000));
        assert_eq!(
            (args.requests, args.warmup, args.deep_page),
            (200, 20, 40_000)
        );
        assert_eq!(args.service.api, "http://127.0.0.1:9000");
        assert!(
            Cli::try_parse_from([
                "bench",
                "lists",
                "--key",
                "k",
                "--database-url",
                "x",
                "-n",
                "0"
            ])
            .is_err()
        );
    }
}
