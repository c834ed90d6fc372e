//! The provider-bank protocol client (SPEC §5) over reqwest: per bank and mode base URL and
//! bearer key, timeouts, and retries of transient errors.

use std::collections::HashMap;
use std::time::Duration;

use backoff::ExponentialBackoffBuilder;
use chrono::{DateTime, Utc};
use reqwest::StatusCode;
use serde::{Deserialize, Serialize};

use crate::config::{Config, ProviderConfig};
use crate::domain::{Bank, IdentityType, Mode};

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The bank refused the customer's identity.
    #[error("identity rejected: {0}")]
    Rejected(String),
    /// Worth trying again: timeout, connection error, 5xx, 429.
    #[error("provider unavailable: {0}")]
    Transient(String),
    /// The bank refused the request itself (4xx other than the above).
    #[error("provider refused the request: {0}")]
    Refused(String),
    #[error("no provider is configured for {0} in {1} mode")]
    NotConfigured(&'static str, Mode),
}

impl ProviderError {
    pub fn is_transient(&self) -> bool {
        matches!(self, ProviderError::Transient(_))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RemoteStatus {
    Pending,
    Active,
    Failed,
    Closed,
}

/// An account as the provider reports it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteAccount {
    pub reference: String,
    pub status: RemoteStatus,
    #[serde(default)]
    pub account_number: Option<String>,
    #[serde(default)]
    pub failure_reason: Option<String>,
}

/// What the service sends to open an account. `Debug` leaves the identity number out.
#[derive(Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenAccount {
    pub reference: String,
    pub account_name: String,
    pub customer_name: String,
    pub customer_email: String,
    pub customer_phone: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bvn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nin: Option<String>,
}

impl OpenAccount {
    pub fn identity(mut self, kind: IdentityType, number: String) -> Self {
        match kind {
            IdentityType::Bvn => self.bvn = Some(number),
            IdentityType::Nin => self.nin = Some(number),
        }
        self
    }
}

impl std::fmt::Debug for OpenAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAccount")
            .field("reference", &self.reference)
            .finish_non_exhaustive()
    }
}

/// A transaction as the provider reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteTransaction {
    pub reference: String,
    pub account_number: String,
    pub amount: i64,
    pub currency: String,
    #[serde(default)]
    pub sender_name: Option<String>,
    #[serde(default)]
    pub sender_account_number: Option<String>,
    #[serde(default)]
    pub sender_bank_name: Option<String>,
    #[serde(default)]
    pub narration: Option<String>,
    pub paid_at: DateTime<Utc>,
}

/// The sandbox's control call that sends money to an account.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimulatedDeposit {
    pub bank: String,
    pub account_number: String,
    pub amount: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sender_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub narration: Option<String>,
    pub notify: bool,
}

#[derive(Debug, Deserialize)]
struct TransactionList {
    data: Vec<RemoteTransaction>,
}

#[derive(Debug, Deserialize)]
struct ProviderProblem {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Debug, Clone)]
struct Endpoint {
    base: String,
    key: String,
}

/// One client for every bank and mode.
#[derive(Debug, Clone)]
pub struct Providers {
    http: reqwest::Client,
    sandbox: Option<Endpoint>,
    live: HashMap<Bank, Endpoint>,
    /// How long a transient failure is retried within one call.
    retry_for: Duration,
}

impl Providers {
    pub fn from_config(config: &Config) -> Self {
        let sandbox = config.sandbox.url.as_ref().map(|url| Endpoint {
            base: url.trim_end_matches('/').to_owned(),
            key: config.sandbox.key.clone(),
        });
        let mut live = HashMap::new();
        let p = &config.providers;
        for (bank, cfg) in [
            (Bank::WemaBank, &p.wema_bank),
            (Bank::AccessBank, &p.access_bank),
            (Bank::TitanTrustBank, &p.titan_trust_bank),
        ] {
            if let ProviderConfig {
                url: Some(url),
                key: Some(key),
                ..
            } = cfg
            {
                live.insert(
                    bank,
                    Endpoint {
                        base: url.trim_end_matches('/').to_owned(),
                        key: key.clone(),
                    },
                );
            }
        }
        Self {
            http: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(3))
                .timeout(Duration::from_secs(15))
                .build()
                .expect("a reqwest client builds"),
            sandbox,
            live,
            retry_for: Duration::from_secs(2),
        }
    }

    /// Test mode: the sandbox at `{sandbox}/{bank}`; live mode: the bank's configured URL.
    fn endpoint(&self, bank: Bank, mode: Mode) -> Result<(String, &str), ProviderError> {
        let found = match mode {
            Mode::Test => self
                .sandbox
                .as_ref()
                .map(|e| (format!("{}/{}", e.base, bank.slug()), e.key.as_str())),
            Mode::Live => self
                .live
                .get(&bank)
                .map(|e| (e.base.clone(), e.key.as_str())),
        };
        found.ok_or(ProviderError::NotConfigured(bank.slug(), mode))
    }

    /// Opens an account (the same reference again returns the same account). One attempt,
    /// bounded by `timeout`: the caller decides what a timeout means.
    async fn open_account_call(
        &self,
        bank: Bank,
        mode: Mode,
        request: &OpenAccount,
        timeout: Duration,
    ) -> Result<RemoteAccount, ProviderError> {
        let (base, key) = self.endpoint(bank, mode)?;
        let response = self
            .http
            .post(format!("{base}/accounts"))
            .bearer_auth(key)
            .timeout(timeout)
            .json(request)
            .send()
            .await
            .map_err(transport)?;
        read_account(response).await
    }

    /// The account as the provider sees it now; None when it never heard of the reference.
    async fn account_call(
        &self,
        bank: Bank,
        mode: Mode,
        reference: &str,
    ) -> Result<Option<RemoteAccount>, ProviderError> {
        let (base, key) = self.endpoint(bank, mode)?;
        let url = format!("{base}/accounts/{reference}");
        self.retrying(|| async {
            let response = self
                .http
                .get(&url)
                .bearer_auth(key)
                .send()
                .await
                .map_err(transport)?;
            if response.status() == StatusCode::NOT_FOUND {
                return Ok(None);
            }
            read_account(response).await.map(Some)
        })
        .await
    }

    /// Closes the account at the provider; an account it never had is closed already.
    async fn close_account_call(
        &self,
        bank: Bank,
        mode: Mode,
        reference: &str,
    ) -> Result<(), ProviderError> {
        let (base, key) = self.endpoint(bank, mode)?;
        let url = format!("{base}/accounts/{reference}/close");
        self.retrying(|| async {
            let response = self
                .http
                .post(&url)
                .bearer_auth(key)
                .send()
                .await
                .map_err(transport)?;
            match response.status() {
                s if s.is_success() || s == StatusCode::NOT_FOUND => Ok(()),
                _ => Err(classify(response).await),
            }
        })
        .await
    }

    /// Money received by the account in `[from, to]`.
    async fn transactions_call(
        &self,
        bank: Bank,
        mode: Mode,
        reference: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<RemoteTransaction>, ProviderError> {
        let (base, key) = self.endpoint(bank, mode)?;
        let url = format!("{base}/accounts/{reference}/transactions");
        let range = [
            (
                "from",
                from.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            ),
            (
                "to",
                to.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            ),
        ];
        self.retrying(|| async {
            let response = self
                .http
                .get(&url)
                .bearer_auth(key)
                .query(&range)
                .send()
                .await
                .map_err(transport)?;
            if !response.status().is_success() {
                return Err(classify(response).await);
            }
            let list: TransactionList = response
                .json()
                .await
                .map_err(|e| ProviderError::Transient(format!("unreadable transactions: {e}")))?;
            Ok(list.data)
        })
        .await
    }

    /// Opens an account (the same reference again returns the same account). One attempt,
    /// bounded by `timeout`: the caller decides what a timeout means.
    pub async fn open_account(
        &self,
        bank: Bank,
        mode: Mode,
        request: &OpenAccount,
        timeout: Duration,
    ) -> Result<RemoteAccount, ProviderError> {
        observed(
            bank,
            "open",
            self.open_account_call(bank, mode, request, timeout),
        )
        .await
    }

    /// The account as the provider sees it now; None when it never heard of the reference.
    pub async fn account(
        &self,
        bank: Bank,
        mode: Mode,
        reference: &str,
    ) -> Result<Option<RemoteAccount>, ProviderError> {
        observed(bank, "get", self.account_call(bank, mode, reference)).await
    }

    /// Closes the account at the provider; an account it never had is closed already.
    pub async fn close_account(
        &self,
        bank: Bank,
        mode: Mode,
        reference: &str,
    ) -> Result<(), ProviderError> {
        observed(
            bank,
            "close",
            self.close_account_call(bank, mode, reference),
        )
        .await
    }

    /// Money received by the account in `[from, to]`.
    pub async fn transactions(
        &self,
        bank: Bank,
        mode: Mode,
        reference: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<RemoteTransaction>, ProviderError> {
        observed(
            bank,
            "transactions",
            self.transactions_call(bank, mode, reference, from, to),
        )
        .await
    }

    /// Test mode only: asks the sandbox to send money to an account number, notifying the service
    /// like a bank would (or losing the notification, so that a recheck can find it).
    pub async fn simulate_deposit(
        &self,
        request: &SimulatedDeposit,
    ) -> Result<String, ProviderError> {
        let sandbox = self
            .sandbox
            .as_ref()
            .ok_or(ProviderError::NotConfigured("sandbox", Mode::Test))?;
        let response = self
            .http
            .post(format!("{}/control/deposits", sandbox.base))
            .bearer_auth(&sandbox.key)
            .json(request)
            .send()
            .await
            .map_err(transport)?;
        if !response.status().is_success() {
            return Err(classify(response).await);
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Accepted {
            provider_reference: String,
        }
        let accepted: Accepted = response
            .json()
            .await
            .map_err(|e| ProviderError::Transient(format!("unreadable sandbox answer: {e}")))?;
        Ok(accepted.provider_reference)
    }

    /// Retries transient failures with exponential backoff for a short while; others at once.
    async fn retrying<T, F, Fut>(&self, op: F) -> Result<T, ProviderError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, ProviderError>>,
    {
        let policy = ExponentialBackoffBuilder::new()
            .with_initial_interval(Duration::from_millis(100))
            .with_max_elapsed_time(Some(self.retry_for))
            .build();
        backoff::future::retry(policy, || async {
            op().await.map_err(|e| {
                if e.is_transient() {
                    backoff::Error::transient(e)
                } else {
                    backoff::Error::permanent(e)
                }
            })
        })
        .await
    }
}

/// Times a provider call and counts its outcome.
async fn observed<T>(
    bank: Bank,
    operation: &'static str,
    call: impl std::future::Future<Output = Result<T, ProviderError>>,
) -> Result<T, ProviderError> {
    let started = std::time::Instant::now();
    let result = call.await;
    let outcome = match &result {
        Ok(_) => "ok",
        Err(ProviderError::Rejected(_)) => "rejected",
        Err(ProviderError::Transient(_)) => "unavailable",
        Err(ProviderError::Refused(_)) => "refused",
        Err(ProviderError::NotConfigured(..)) => "not_configured",
    };
    metrics::counter!("provider_calls_total", "bank" => bank.slug(), "operation" => operation, "outcome" => outcome)
        .increment(1);
    metrics::histogram!("provider_call_duration_seconds", "bank" => bank.slug(), "operation" => operation)
        .record(started.elapsed().as_secs_f64());
    result
}

fn transport(e: reqwest::Error) -> ProviderError {
    // Only the kind of failure: reqwest's message can carry the URL, never a body.
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else {
        "request failed"
    };
    ProviderError::Transient(kind.to_owned())
}

async fn read_account(response: reqwest::Response) -> Result<RemoteAccount, ProviderError> {
    if !response.status().is_success() {
        return Err(classify(response).await);
    }
    response
        .json()
        .await
        .map_err(|e| ProviderError::Transient(format!("unreadable account: {e}")))
}

async fn classify(response: reqwest::Response) -> ProviderError {
    let status = response.status();
    let problem: Option<ProviderProblem> = response.json().await.ok();
    let message = problem
        .as_ref()
        .and_then(|p| p.message.clone())
        .unwrap_or_else(|| format!("HTTP {}", status.as_u16()));
    match status {
        s if s.is_server_error()
            || s == StatusCode::TOO_MANY_REQUESTS
            || s == StatusCode::REQUEST_TIMEOUT =>
        {
            ProviderError::Transient(message)
        }
        StatusCode::UNPROCESSABLE_ENTITY
            if problem.as_ref().and_then(|p| p.code.as_deref()) == Some("identity_rejected") =>
        {
            ProviderError::Rejected(message)
        }
        _ => ProviderError::Refused(message),
    }
}
