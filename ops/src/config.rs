//! One typed configuration for every process: the defaults (`config.default.toml` at the
//! workspace root, embedded), then a TOML file (`--config` or `VAS_CONFIG`), then `VAS_`
//! environment variables with `__` between levels.
//!
//! Every key, its default and what it does are written once, in that file; the structs here only
//! give the keys their types. A section's `Default` is the file's.

use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroU64};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use figment::value::{Dict, Value};
use serde::{Deserialize, Serialize};

use crate::http::Timeouts;
use crate::proxies::TrustedProxies;

/// Unknown keys are refused inside each section (a typo fails loudly), but not at the top level:
/// platforms set variables such as `VAS_PORT` of their own accord.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Config {
    pub database: DatabaseConfig,
    pub amqp: AmqpConfig,
    pub http: HttpConfig,
    pub ops: OpsConfig,
    pub crypto: CryptoConfig,
    pub limits: LimitsConfig,
    pub webhooks: WebhooksConfig,
    pub provisioning: ProvisioningConfig,
    pub recheck: RecheckConfig,
    pub payouts: PayoutsConfig,
    pub sandbox: SandboxConfig,
    pub providers: ProvidersConfig,
    pub log: LogConfig,
    pub dev: DevConfig,
    pub dashboard: DashboardConfig,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseConfig {
    /// `postgres://…` (one host, or libpq's multi-host form with
    /// `target_session_attrs=read-write`) or `sqlite://PATH?mode=rwc`.
    pub url: Option<String>,
    pub max_connections: u32,
    /// A replica for the reads that may be a moment old (lists, search, dashboard lists, the
    /// CSV export); unset: everything reads the primary.
    pub read_url: Option<String>,
    /// Past this replay lag (or with the replica down) those reads go to the primary.
    pub read_max_lag_ms: u64,
    /// A PEM file of CA certificates that PostgreSQL's server certificates are checked against
    /// (libpq's `sslrootcert`), for every URL above that names none of its own.
    pub ca_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AmqpConfig {
    /// Unset means the in-process queue, which only `api dev` accepts.
    pub url: Option<String>,
    /// Prefix for exchange and queue names, so that tests and tenants can share a broker.
    pub prefix: String,
    /// With `amqps://`: a PEM file of CA certificates to trust besides the public roots.
    pub ca_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    pub bind: SocketAddr,
    /// Seconds an authenticated key stays cached before it is looked up again.
    pub auth_cache_secs: u64,
    /// How long the API waits for a provider bank before answering 202 and leaving it to the worker.
    pub provider_timeout_ms: u64,
    /// Every listener (api, provider-sandbox, the workers' ops ports): seconds a client may take
    /// to send a request's head, counted from its first byte (see `ops::http`).
    pub header_read_timeout_secs: NonZeroU64,
    /// Seconds a client may take to send a request's body once its head has arrived.
    pub body_read_timeout_secs: NonZeroU64,
    /// Seconds a kept-alive connection may wait for the next request before it is closed.
    pub idle_timeout_secs: NonZeroU64,
    /// Reverse proxies whose `X-Forwarded-For` names the client (rate limits, audit): addresses
    /// or CIDR ranges. Empty: the client is the TCP peer.
    pub trusted_proxies: TrustedProxies,
}

impl HttpConfig {
    pub fn server_timeouts(&self) -> Timeouts {
        Timeouts {
            header_read: Duration::from_secs(self.header_read_timeout_secs.get()),
            body_read: Duration::from_secs(self.body_read_timeout_secs.get()),
            idle: Duration::from_secs(self.idle_timeout_secs.get()),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpsConfig {
    pub bind: SocketAddr,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CryptoConfig {
    /// Base64 of 32 random bytes: encrypts BVN/NIN and webhook secrets.
    pub key: Option<String>,
    /// Keys that still decrypt after a rotation.
    pub previous_keys: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    pub accounts_per_hour: u32,
    /// Failed authentications one client address may make in a minute before its requests are
    /// answered 429 without a database lookup (0: no limit).
    pub auth_failures_per_minute: u32,
    /// Resends one business may ask for in any rolling minute, through the API and the dashboard
    /// together (docs/api/events-and-webhooks.md); past it, 429 `rate_limited` with `Retry-After`.
    pub resends_per_minute: NonZeroU32,
    /// Up to this many matches a searched list's `total` is exact; beyond it, an estimate
    /// (docs/api/paging-and-search.md says 10,000; smaller only to test the estimate).
    pub list_exact_total: u64,
    /// The largest single deposit a bank may report, kobo (docs/api/deposits-and-rechecks.md): one
    /// above it is kept as `invalid` for operators and never credited.
    pub max_deposit: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhooksConfig {
    /// Delays in seconds before each retry; a delivery is tried once plus once per entry.
    pub retry_schedule: Vec<u64>,
    /// Deliveries one worker runs at once (its prefetch). A delivery in flight holds no database
    /// connection (its reads and records share rounds), so many are cheap; more in flight make
    /// bigger rounds and fewer round trips per delivery.
    pub concurrency: u16,
    /// A delivery succeeds on a 2xx within this many seconds.
    pub timeout_secs: u64,
    /// The longest `Retry-After` from a receiver that is honoured, in seconds.
    pub max_retry_after_secs: u64,
    /// Deliveries one worker sends to one endpoint (webhook URL) at once until its attempts are
    /// known to be quick; the others of that endpoint are rescheduled a little later, without
    /// spending an attempt, so a slow endpoint holds this many of the `concurrency` slots at
    /// most. The businesses using one endpoint share its slots fairly.
    pub max_in_flight_per_endpoint: u16,
    /// The same for an endpoint whose attempts average 250 ms or less
    /// (docs/operations/configuration.md): it frees its slots quickly, so more of them cost the
    /// worker little. Never below `max_in_flight_per_endpoint`.
    pub max_in_flight_per_quick_endpoint: u16,
    /// Consecutive failed attempts of one business and mode at one endpoint that open its
    /// circuit there: its deliveries then wait (spending no attempts) until a single probe
    /// succeeds; other businesses' deliveries to the endpoint go on
    /// (docs/operations/dead-letters-and-replay.md).
    pub circuit_failure_threshold: u32,
    /// How long an open circuit waits before its first probe, in seconds; doubled after each
    /// failed probe up to `circuit_max_cooldown_secs`.
    pub circuit_cooldown_secs: u64,
    pub circuit_max_cooldown_secs: u64,
    /// Lets webhook URLs point at loopback and private addresses (this machine, 10/8, 172.16/12,
    /// 192.168/16, fc00::/7), when set and at delivery; `api dev` turns it on. Link-local
    /// (cloud metadata), CGNAT and other non-public addresses stay refused. Never in production.
    pub allow_private_addresses: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvisioningConfig {
    /// First delay between polls of a pending account, doubling up to `max_poll_secs`.
    pub initial_poll_secs: u64,
    pub max_poll_secs: u64,
    /// A pending account is given up as `failed` after this long.
    pub give_up_after_secs: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecheckConfig {
    /// Provider errors are retried with backoff this many times before the recheck fails.
    pub max_attempts: u32,
    /// First delay between retries, doubling up to `max_retry_secs`.
    pub initial_retry_secs: u64,
    pub max_retry_secs: u64,
}

/// Payouts (docs/api/settlement-and-payouts.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PayoutsConfig {
    /// The payout provider (a bank slug, e.g. `wema-bank`); test mode reaches it at the sandbox.
    pub bank: String,
    /// The largest payout, kobo.
    pub max_amount: i64,
    /// When `daily` settlement accounts are paid out, `HH:MM` Africa/Lagos.
    pub daily_at: String,
    /// worker-payouts: how often the daily schedule looks for accounts due a payout.
    pub schedule_check_secs: u64,
    /// worker-payouts: first delay between status queries of a transfer with no outcome yet,
    /// doubling up to `max_poll_secs`.
    pub initial_poll_secs: u64,
    pub max_poll_secs: u64,
    /// worker-payouts: seconds one run holds a payout while it asks the provider, sends and
    /// decides; another run waits for it, or takes over once it has passed (a killed worker).
    /// At least 30 (twice the provider calls' 15 s timeout): a shorter value is raised to it.
    pub lease_secs: u64,
    /// For end-to-end tests only (`VAS_PAYOUTS__TEST_KILL_AT`): worker-payouts sends itself
    /// SIGKILL when a test-mode payout reaches this step, so a test can kill it at an exact
    /// point of a payout. Unset by default and in every deployment; live-mode payouts never stop
    /// at it, and the worker warns at start when it is set.
    pub test_kill_at: Option<KillPoint>,
}

/// A step of a payout at which [`PayoutsConfig::test_kill_at`] kills worker-payouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KillPoint {
    /// The provider said it never received the transfer; it is about to be sent.
    BeforeSend,
    /// The provider accepted the transfer; its answer is not recorded yet.
    AfterSend,
    /// A status query of a `processing` payout was answered; the answer is not recorded yet.
    WhilePolling,
}

impl KillPoint {
    pub fn as_str(self) -> &'static str {
        match self {
            KillPoint::BeforeSend => "before_send",
            KillPoint::AfterSend => "after_send",
            KillPoint::WhilePolling => "while_polling",
        }
    }
}

impl PayoutsConfig {
    /// The lease a run holds a payout for (see [`PayoutsConfig::lease_secs`]).
    pub fn lease(&self) -> Duration {
        Duration::from_secs(self.lease_secs.max(30))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxConfig {
    /// Where the service reaches the sandbox for test-mode banks (`api dev`: the in-process one).
    pub url: Option<String>,
    /// Where `provider-sandbox` listens.
    pub bind: SocketAddr,
    /// The api's base URL, where the sandbox sends deposit notifications.
    pub notify_url: Option<String>,
    /// Signs deposit notifications; the api verifies test-mode notifications with it.
    pub secret: String,
    /// Bearer key the service presents to the sandbox.
    pub key: String,
    pub activation_delay_secs: u64,
    /// How long a transfer (payout) stays `processing` before its outcome.
    pub transfer_delay_secs: u64,
    /// How long a notification handed over to the api waits for the api's confirmation that it
    /// stored it before the sandbox sends it as a bank would.
    pub handover_grace_secs: u64,
    pub latency_ms: u64,
    /// Share of calls (0.0–1.0) that fail with a 503, to exercise retries.
    pub failure_rate: f64,
    /// Where the sandbox keeps its banks' state across restarts (none: in memory only).
    pub state_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub url: Option<String>,
    pub key: Option<String>,
    pub secret: Option<String>,
}

/// Live-mode banks; test mode always uses the sandbox.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvidersConfig {
    pub wema_bank: ProviderConfig,
    pub access_bank: ProviderConfig,
    pub titan_trust_bank: ProviderConfig,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogConfig {
    /// `text` or `json`.
    pub format: String,
    /// An `EnvFilter` directive; `RUST_LOG` wins when set.
    pub level: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DevConfig {
    /// The data folder of `api dev` and of the operator commands when no database is configured.
    pub data_dir: PathBuf,
}

/// The dashboard served by the api at `/dashboard/` (docs/dashboard.md).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DashboardConfig {
    /// A session ends after this many seconds without a request…
    pub idle_timeout_secs: u64,
    /// …and this many seconds after signing in, however busy.
    pub absolute_timeout_secs: u64,
    /// The service's public address (the dashboard's and the API's), e.g.
    /// `https://vas.example.com`: https makes the dashboard's cookies `Secure` and `__Host-`
    /// named; it is also the API address of the dashboard's curl example (unset: the scheme and
    /// host the dashboard was reached at). Unset, cookies are `Secure` too, except under
    /// `api dev` listening on loopback.
    pub public_url: Option<String>,
    /// Argon2id password hashes (19 MiB each) computed at once, for sign-ins and every form that
    /// checks or sets a password: what bounds the memory a flood of sign-ins can take.
    pub concurrent_password_hashes: usize,
    /// How long a sign-in waits for one of those before it is answered 429, in milliseconds.
    pub password_hash_wait_ms: u64,
    /// Sign-in attempts (passwords and TOTP codes) one client address may make in a minute; past
    /// it the address gets 429 until its minute ends (0: no limit).
    pub sign_ins_per_minute: u32,
}

/// Every key with its default and a comment saying what it does and who reads it: the file a
/// person reads, embedded so that no process needs it on disk (`api dev` starts anywhere).
pub const DEFAULTS_TOML: &str = include_str!("../../config.default.toml");

/// The embedded defaults, read once. The file is checked by this module's tests, so a process
/// never meets a broken one.
static DEFAULTS: LazyLock<Config> = LazyLock::new(|| {
    Figment::from(Toml::string(DEFAULTS_TOML))
        .extract()
        .unwrap_or_else(|e| {
            panic!("config.default.toml must hold every key of ops::config::Config: {e}")
        })
});

impl Default for Config {
    fn default() -> Self {
        DEFAULTS.clone()
    }
}

/// Each section's `Default` is its part of the file, never a second copy of the numbers.
macro_rules! section_defaults {
    ($($section:ty => $field:ident),* $(,)?) => {$(
        impl Default for $section {
            fn default() -> Self {
                DEFAULTS.$field.clone()
            }
        }
    )*};
}

section_defaults!(
    DatabaseConfig => database,
    AmqpConfig => amqp,
    HttpConfig => http,
    OpsConfig => ops,
    CryptoConfig => crypto,
    LimitsConfig => limits,
    WebhooksConfig => webhooks,
    ProvisioningConfig => provisioning,
    RecheckConfig => recheck,
    PayoutsConfig => payouts,
    SandboxConfig => sandbox,
    ProvidersConfig => providers,
    LogConfig => log,
    DevConfig => dev,
    DashboardConfig => dashboard,
);

/// The limits of every listener when nothing is configured: the file's `[http]` timeouts.
impl Default for Timeouts {
    fn default() -> Self {
        DEFAULTS.http.server_timeouts()
    }
}

/// The defaults file with each key that has no default (`# key = example`) written in, so that
/// its example is read as well: what tells a text key from the others.
fn defaults_with_examples() -> String {
    DEFAULTS_TOML
        .lines()
        .map(|line| match commented_key(line) {
            Some(key_line) => key_line,
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `# url = "…"` → `url = "…"`: a line of the defaults file that shows a key with no default.
fn commented_key(line: &str) -> Option<&str> {
    let rest = line.strip_prefix('#')?.trim_start();
    let (name, _) = rest.split_once('=')?;
    let name = name.trim_end();
    let is_key = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    is_key.then_some(rest)
}

/// The keys whose values are text (secrets, keys, URLs, names, paths): those written in quotes in
/// the defaults file, as a default or as the example of a key with no default. Set from the
/// environment verbatim rather than parsed.
static VERBATIM_KEYS: LazyLock<Vec<String>> = LazyLock::new(|| {
    let keys: Dict = Figment::from(Toml::string(&defaults_with_examples()))
        .extract()
        .unwrap_or_else(|e| panic!("config.default.toml's examples do not parse: {e}"));
    let mut text = Vec::new();
    text_keys("", &keys, &mut text);
    text
});

fn text_keys(prefix: &str, dict: &Dict, text: &mut Vec<String>) {
    for (name, value) in dict {
        let key = format!("{prefix}{name}");
        match value {
            Value::String(..) => text.push(key),
            Value::Dict(_, inner) => text_keys(&format!("{key}."), inner, text),
            _ => {}
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration is invalid: {0}")]
    Invalid(#[from] Box<figment::Error>),
    #[error("{0} is not set: {1}")]
    Missing(&'static str, &'static str),
}

impl Config {
    /// The embedded defaults, then the TOML file (explicit path, else `VAS_CONFIG`), then `VAS_…`
    /// variables.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        let mut figment = Figment::from(Toml::string(DEFAULTS_TOML));
        let from_env = std::env::var_os("VAS_CONFIG").map(PathBuf::from);
        if let Some(path) = file.map(Path::to_path_buf).or(from_env) {
            figment = figment.merge(Toml::file_exact(path));
        }
        figment = figment.merge(Env::prefixed("VAS_").ignore(&["CONFIG"]).split("__"));
        // `Env` reads `123` as a number, `true` as a bool and `"x"` without its quotes; a secret
        // or URL must be taken exactly as written.
        for (name, value) in std::env::vars_os() {
            if let (Some(name), Some(value)) = (name.to_str(), value.to_str())
                && let Some(key) = verbatim_key(name)
            {
                figment = figment.merge(Serialized::default(key, value));
            }
        }
        figment
            .extract()
            .map_err(|e| ConfigError::Invalid(Box::new(e)))
    }

    /// What a production process (`api serve`, the workers) cannot start without.
    pub fn require_production(&self) -> Result<(), ConfigError> {
        if self.database.url.is_none() {
            return Err(ConfigError::Missing(
                "VAS_DATABASE__URL",
                "set it to postgres://… (or sqlite://PATH?mode=rwc)",
            ));
        }
        if self.amqp.url.is_none() {
            return Err(ConfigError::Missing(
                "VAS_AMQP__URL",
                "set it to amqp://…; the in-process queue is only for `api dev`",
            ));
        }
        if self.crypto.key.is_none() {
            return Err(ConfigError::Missing(
                "VAS_CRYPTO__KEY",
                "set it to base64 of 32 random bytes",
            ));
        }
        Ok(())
    }

    pub fn dev_database_url(&self) -> String {
        format!(
            "sqlite://{}?mode=rwc",
            self.dev.data_dir.join("vas.sqlite").display()
        )
    }
}

/// `VAS_SANDBOX__SECRET` → `sandbox.secret`, when that key is one of [`VERBATIM_KEYS`].
fn verbatim_key(variable: &str) -> Option<&'static str> {
    let key = variable
        .strip_prefix("VAS_")?
        .to_ascii_lowercase()
        .replace("__", ".");
    VERBATIM_KEYS.iter().map(String::as_str).find(|k| *k == key)
}

#[cfg(test)]
// figment's Jail returns its large error type by design.
#[allow(clippy::result_large_err)]
mod tests;
