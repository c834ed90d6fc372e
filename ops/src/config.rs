//! One typed configuration for every process: defaults, then a TOML file (`--config` or
//! `VAS_CONFIG`), then `VAS_` environment variables with `__` between levels.

use std::net::SocketAddr;
use std::num::NonZeroU64;
use std::path::{Path, PathBuf};
use std::time::Duration;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

use crate::http::Timeouts;
use crate::proxies::TrustedProxies;

/// Unknown keys are refused inside each section (a typo fails loudly), but not at the top level:
/// platforms set variables such as `VAS_PORT` of their own accord.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
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
#[serde(default, deny_unknown_fields)]
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
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AmqpConfig {
    /// Unset means the in-process queue, which only `api dev` accepts.
    pub url: Option<String>,
    /// Prefix for exchange and queue names, so that tests and tenants can share a broker.
    pub prefix: String,
    /// With `amqps://`: a PEM file of CA certificates to trust besides the public roots.
    pub ca_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
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

/// A default limit in whole seconds (the defaults are never zero).
fn whole_secs(limit: Duration) -> NonZeroU64 {
    NonZeroU64::new(limit.as_secs()).expect("default limits are at least a second")
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
#[serde(default, deny_unknown_fields)]
pub struct OpsConfig {
    pub bind: SocketAddr,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CryptoConfig {
    /// Base64 of 32 random bytes: encrypts BVN/NIN and webhook secrets.
    pub key: Option<String>,
    /// Keys that still decrypt after a rotation.
    pub previous_keys: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    pub accounts_per_hour: u32,
    /// Failed authentications one client address may make in a minute before its requests are
    /// answered 429 without a database lookup (0: no limit).
    pub auth_failures_per_minute: u32,
    /// Up to this many matches a searched list's `total` is exact; beyond it, an estimate
    /// (SPEC §3 says 10,000; smaller only to test the estimate).
    pub list_exact_total: u64,
    /// The largest single deposit a bank may report, kobo (SPEC §7): one above it is kept as
    /// `invalid` for operators and never credited.
    pub max_deposit: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
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
    /// Deliveries one worker sends to one endpoint (webhook URL) at once; the others of that
    /// endpoint are rescheduled a little later, without spending an attempt, so a slow endpoint
    /// holds this many of the `concurrency` slots at most.
    pub max_in_flight_per_endpoint: u16,
    /// Consecutive failed attempts at one endpoint that open its circuit: its deliveries then
    /// wait (spending no attempts) until a single probe succeeds.
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
#[serde(default, deny_unknown_fields)]
pub struct ProvisioningConfig {
    /// First delay between polls of a pending account, doubling up to `max_poll_secs`.
    pub initial_poll_secs: u64,
    pub max_poll_secs: u64,
    /// A pending account is given up as `failed` after this long.
    pub give_up_after_secs: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RecheckConfig {
    /// Provider errors are retried with backoff this many times before the recheck fails.
    pub max_attempts: u32,
    /// First delay between retries, doubling up to `max_retry_secs`.
    pub initial_retry_secs: u64,
    pub max_retry_secs: u64,
}

impl Default for RecheckConfig {
    fn default() -> Self {
        Self {
            max_attempts: 5,
            initial_retry_secs: 2,
            max_retry_secs: 600,
        }
    }
}

/// Payouts (SPEC §7).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
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

impl Default for PayoutsConfig {
    fn default() -> Self {
        Self {
            bank: "wema-bank".into(),
            max_amount: 500_000_000,
            daily_at: "09:00".into(),
            schedule_check_secs: 30,
            initial_poll_secs: 2,
            max_poll_secs: 60,
            lease_secs: 60,
            test_kill_at: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
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
    pub latency_ms: u64,
    /// Share of calls (0.0–1.0) that fail with a 503, to exercise retries.
    pub failure_rate: f64,
    /// Where the sandbox keeps its banks' state across restarts (none: in memory only).
    pub state_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderConfig {
    pub url: Option<String>,
    pub key: Option<String>,
    pub secret: Option<String>,
}

/// Live-mode banks; test mode always uses the sandbox.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProvidersConfig {
    pub wema_bank: ProviderConfig,
    pub access_bank: ProviderConfig,
    pub titan_trust_bank: ProviderConfig,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// `text` or `json`.
    pub format: String,
    /// An `EnvFilter` directive; `RUST_LOG` wins when set.
    pub level: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DevConfig {
    /// The data folder of `api dev` and of the operator commands when no database is configured.
    pub data_dir: PathBuf,
}

/// The dashboard served by the api at `/dashboard/` (SPEC §8).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
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

impl Default for DashboardConfig {
    fn default() -> Self {
        Self {
            idle_timeout_secs: 3600,
            absolute_timeout_secs: 12 * 3600,
            public_url: None,
            concurrent_password_hashes: 2,
            password_hash_wait_ms: 2000,
            sign_ins_per_minute: 20,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            database: DatabaseConfig::default(),
            amqp: AmqpConfig {
                url: None,
                prefix: "vas".into(),
                ca_file: None,
            },
            http: HttpConfig::default(),
            ops: OpsConfig::default(),
            crypto: CryptoConfig::default(),
            limits: LimitsConfig::default(),
            webhooks: WebhooksConfig::default(),
            provisioning: ProvisioningConfig::default(),
            recheck: RecheckConfig::default(),
            payouts: PayoutsConfig::default(),
            sandbox: SandboxConfig::default(),
            providers: ProvidersConfig::default(),
            log: LogConfig::default(),
            dev: DevConfig::default(),
            dashboard: DashboardConfig::default(),
        }
    }
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self {
            url: None,
            max_connections: 20,
            read_url: None,
            read_max_lag_ms: 5_000,
        }
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            bind: ([127, 0, 0, 1], 8080).into(),
            auth_cache_secs: 5,
            provider_timeout_ms: 3000,
            header_read_timeout_secs: whole_secs(Timeouts::DEFAULT.header_read),
            body_read_timeout_secs: whole_secs(Timeouts::DEFAULT.body_read),
            idle_timeout_secs: whole_secs(Timeouts::DEFAULT.idle),
            trusted_proxies: TrustedProxies::default(),
        }
    }
}

impl Default for OpsConfig {
    fn default() -> Self {
        Self {
            bind: ([127, 0, 0, 1], 0).into(),
        }
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            accounts_per_hour: 500,
            auth_failures_per_minute: 20,
            list_exact_total: 10_000,
            max_deposit: 10_000_000_000,
        }
    }
}

impl Default for WebhooksConfig {
    fn default() -> Self {
        Self {
            retry_schedule: vec![5, 300, 1800, 7200, 18000, 36000, 36000],
            concurrency: 256,
            timeout_secs: 10,
            max_retry_after_secs: 36000,
            max_in_flight_per_endpoint: 4,
            circuit_failure_threshold: 5,
            circuit_cooldown_secs: 30,
            circuit_max_cooldown_secs: 600,
            allow_private_addresses: false,
        }
    }
}

impl Default for ProvisioningConfig {
    fn default() -> Self {
        Self {
            initial_poll_secs: 2,
            max_poll_secs: 600,
            give_up_after_secs: 24 * 3600,
        }
    }
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            url: None,
            bind: ([127, 0, 0, 1], 8090).into(),
            notify_url: None,
            secret: "sandbox-notification-secret".into(),
            key: "sandbox-key".into(),
            activation_delay_secs: 3,
            transfer_delay_secs: 2,
            latency_ms: 0,
            failure_rate: 0.0,
            state_file: None,
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            format: "text".into(),
            level: "info".into(),
        }
    }
}

impl Default for DevConfig {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from(".vas-dev"),
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
    /// Defaults, then the TOML file (explicit path, else `VAS_CONFIG`), then `VAS_…` variables.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
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

/// The keys whose values are text (secrets, keys, URLs, names), set from the environment
/// verbatim rather than parsed.
const VERBATIM_KEYS: &[&str] = &[
    "database.url",
    "amqp.url",
    "amqp.prefix",
    "crypto.key",
    "sandbox.url",
    "sandbox.notify_url",
    "sandbox.secret",
    "sandbox.key",
    "providers.wema_bank.url",
    "providers.wema_bank.key",
    "providers.wema_bank.secret",
    "providers.access_bank.url",
    "providers.access_bank.key",
    "providers.access_bank.secret",
    "providers.titan_trust_bank.url",
    "providers.titan_trust_bank.key",
    "providers.titan_trust_bank.secret",
    "log.format",
    "log.level",
    "dashboard.public_url",
];

/// `VAS_SANDBOX__SECRET` → `sandbox.secret`, when that key is one of [`VERBATIM_KEYS`].
fn verbatim_key(variable: &str) -> Option<&'static str> {
    let key = variable
        .strip_prefix("VAS_")?
        .to_ascii_lowercase()
        .replace("__", ".");
    VERBATIM_KEYS.iter().copied().find(|k| *k == key)
}

#[cfg(test)]
// figment's Jail returns its large error type by design.
#[allow(clippy::result_large_err)]
mod tests {
    use super::*;

    #[test]
    fn environment_overrides_defaults_with_nested_keys() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("VAS_LIMITS__ACCOUNTS_PER_HOUR", "7");
            jail.set_env("VAS_WEBHOOKS__RETRY_SCHEDULE", "[1,2,3]");
            jail.set_env("VAS_DATABASE__URL", "postgres://x/y");
            let config = Config::load(None).expect("loads");
            assert_eq!(config.limits.accounts_per_hour, 7);
            assert_eq!(config.webhooks.retry_schedule, vec![1, 2, 3]);
            assert_eq!(config.database.url.as_deref(), Some("postgres://x/y"));
            Ok(())
        });
    }

    #[test]
    fn text_values_are_taken_verbatim_from_the_environment() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("VAS_SANDBOX__SECRET", "0012345");
            jail.set_env("VAS_SANDBOX__KEY", "true");
            jail.set_env("VAS_PROVIDERS__WEMA_BANK__SECRET", "\"quoted\"");
            jail.set_env("VAS_PROVIDERS__ACCESS_BANK__KEY", "1.50");
            jail.set_env("VAS_SANDBOX__LATENCY_MS", "15");
            let config = Config::load(None).expect("loads");
            assert_eq!(config.sandbox.secret, "0012345");
            assert_eq!(config.sandbox.key, "true");
            assert_eq!(
                config.providers.wema_bank.secret.as_deref(),
                Some("\"quoted\"")
            );
            assert_eq!(config.providers.access_bank.key.as_deref(), Some("1.50"));
            assert_eq!(config.sandbox.latency_ms, 15, "numbers are still numbers");
            Ok(())
        });
    }

    #[test]
    fn every_verbatim_key_is_a_text_setting() {
        // Each key, set to a number-like text, must load as that text: a key listed by mistake
        // (a number setting) or misspelt (unknown) fails here.
        for key in VERBATIM_KEYS {
            let variable = format!("VAS_{}", key.to_ascii_uppercase().replace('.', "__"));
            assert_eq!(verbatim_key(&variable), Some(*key));
            figment::Jail::expect_with(|jail| {
                jail.set_env(&variable, "42");
                let config = Config::load(None).expect("loads");
                let value = serde_json::to_value(&config).unwrap();
                let pointer = format!("/{}", key.replace('.', "/"));
                assert_eq!(
                    value.pointer(&pointer),
                    Some(&serde_json::json!("42")),
                    "{key}"
                );
                Ok(())
            });
        }
        assert_eq!(verbatim_key("VAS_LIMITS__ACCOUNTS_PER_HOUR"), None);
        assert_eq!(verbatim_key("SANDBOX__SECRET"), None);
    }

    #[test]
    fn toml_file_sits_between_defaults_and_environment() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "vas.toml",
                "[limits]\naccounts_per_hour = 9\n[http]\nbind = \"0.0.0.0:9000\"\n",
            )?;
            jail.set_env("VAS_HTTP__BIND", "127.0.0.1:9001");
            let config = Config::load(Some(Path::new("vas.toml"))).expect("loads");
            assert_eq!(config.limits.accounts_per_hour, 9);
            assert_eq!(config.http.bind.port(), 9001);
            Ok(())
        });
    }

    #[test]
    fn production_requirements_name_what_is_missing() {
        let mut config = Config::default();
        let err = config.require_production().unwrap_err().to_string();
        assert!(err.contains("VAS_DATABASE__URL"), "{err}");
        config.database.url = Some("postgres://x".into());
        let err = config.require_production().unwrap_err().to_string();
        assert!(err.contains("VAS_AMQP__URL"), "{err}");
        config.amqp.url = Some("amqp://x".into());
        let err = config.require_production().unwrap_err().to_string();
        assert!(err.contains("VAS_CRYPTO__KEY"), "{err}");
        config.crypto.key = Some("k".into());
        assert!(config.require_production().is_ok());
    }

    #[test]
    fn server_timeouts_are_read_from_the_environment_and_never_zero() {
        figment::Jail::expect_with(|jail| {
            assert_eq!(
                Config::load(None).expect("loads").http.server_timeouts(),
                crate::http::Timeouts {
                    header_read: Duration::from_secs(10),
                    body_read: Duration::from_secs(30),
                    idle: Duration::from_secs(60),
                }
            );
            jail.set_env("VAS_HTTP__HEADER_READ_TIMEOUT_SECS", "2");
            jail.set_env("VAS_HTTP__BODY_READ_TIMEOUT_SECS", "3");
            jail.set_env("VAS_HTTP__IDLE_TIMEOUT_SECS", "4");
            let timeouts = Config::load(None).expect("loads").http.server_timeouts();
            assert_eq!(timeouts.header_read, Duration::from_secs(2));
            assert_eq!(timeouts.body_read, Duration::from_secs(3));
            assert_eq!(timeouts.idle, Duration::from_secs(4));
            // Zero would close every connection at once: refused, naming the setting.
            jail.set_env("VAS_HTTP__IDLE_TIMEOUT_SECS", "0");
            let err = Config::load(None).unwrap_err().to_string();
            assert!(err.contains("HTTP.IDLE_TIMEOUT_SECS"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn the_test_kill_point_is_off_unless_named_exactly() {
        figment::Jail::expect_with(|jail| {
            assert_eq!(
                Config::load(None).expect("loads").payouts.test_kill_at,
                None
            );
            jail.set_env("VAS_PAYOUTS__TEST_KILL_AT", "while_polling");
            assert_eq!(
                Config::load(None).expect("loads").payouts.test_kill_at,
                Some(KillPoint::WhilePolling)
            );
            for wrong in ["true", "1", "polling", "WHILE_POLLING"] {
                jail.set_env("VAS_PAYOUTS__TEST_KILL_AT", wrong);
                assert!(Config::load(None).is_err(), "{wrong}");
            }
            Ok(())
        });
    }

    #[test]
    fn trusted_proxies_are_read_as_a_list_or_comma_separated() {
        figment::Jail::expect_with(|jail| {
            assert!(
                Config::load(None)
                    .expect("loads")
                    .http
                    .trusted_proxies
                    .is_empty()
            );
            jail.set_env("VAS_HTTP__TRUSTED_PROXIES", "10.0.0.0/8, ::1");
            let proxies = Config::load(None).expect("loads").http.trusted_proxies;
            assert!(proxies.contains("10.2.3.4".parse().unwrap()));
            assert!(proxies.contains("::1".parse().unwrap()));
            assert!(!proxies.contains("192.0.2.1".parse().unwrap()));
            jail.set_env("VAS_HTTP__TRUSTED_PROXIES", "[\"127.0.0.1\", \"fd00::/8\"]");
            let proxies = Config::load(None).expect("loads").http.trusted_proxies;
            assert!(proxies.contains("fd12::1".parse().unwrap()));
            jail.set_env("VAS_HTTP__TRUSTED_PROXIES", "10.0.0.0/8,nginx");
            let err = Config::load(None).unwrap_err().to_string();
            assert!(err.contains("nginx"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn unknown_keys_are_refused_inside_sections_only() {
        figment::Jail::expect_with(|jail| {
            jail.set_env("VAS_PORT", "tcp://10.0.0.1:8080");
            assert!(
                Config::load(None).is_ok(),
                "a platform's own variable is ignored"
            );
            jail.set_env("VAS_LIMITS__ACCOUNTS_PER_DAY", "1");
            assert!(Config::load(None).is_err());
            Ok(())
        });
    }
}
