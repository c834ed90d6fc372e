//! The provider-bank protocol client (docs/operations/provider-banks.md) over reqwest: per bank and
//! mode base URL and bearer key, timeouts, and retries of transient errors. A provider is not
//! trusted with more than its answer: redirects are never followed (a 3xx would re-send the
//! identity number to wherever it points) and no body is read past [`PROVIDER_BODY_LIMIT`].

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use backoff::ExponentialBackoffBuilder;
use chrono::{DateTime, Utc};
use reqwest::StatusCode;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use domain::provider::{
    NewTransfer, NotADeposit, OpenAccount, ProviderAccountStatus, ProviderAnswer,
    RemoteTransaction, RemoteTransfer,
};
use domain::{Bank, Mode};
use ops::config::{Config, ProviderConfig, ProvidersConfig};

use crate::http::{PROVIDER_BODY_LIMIT, read_capped};

pub mod notification;

/// A bank that does not accept a connection in this long is down for this call.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// The longest one call to a bank may take, its answer included; a slower answer is a timeout
/// (a creation then answers 202 and the worker keeps asking).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// A transaction list can be long (a month of a busy account's deposits, with no paging in the
/// protocol): about 25,000 transactions fit.
const TRANSACTIONS_BODY_LIMIT: usize = 8 * PROVIDER_BODY_LIMIT;

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
    /// The bank answered something not to be used: a redirect, or a body over the size limit.
    /// Asking again at once would get the same, so it is not retried within a call.
    #[error("provider gave an unusable answer: {0}")]
    BadAnswer(String),
    #[error("no provider is configured for {0} in {1} mode")]
    NotConfigured(&'static str, Mode),
}

impl ProviderError {
    pub fn is_transient(&self) -> bool {
        matches!(self, ProviderError::Transient(_))
    }
}

/// An account as the provider reports it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteAccount {
    pub reference: String,
    pub status: ProviderAccountStatus,
    #[serde(default)]
    pub account_number: Option<String>,
    /// Scrubbed of identity numbers: it becomes the account's `failureReason`.
    #[serde(default, deserialize_with = "scrubbed")]
    pub failure_reason: Option<String>,
}

/// A call's result as the domain reads it ([`domain::provider::settlement`] decides what it makes
/// of the account): an identity rejection is the provider's answer; any other failure is no usable
/// answer at all. Callers log the error first.
pub fn answer(result: Result<RemoteAccount, ProviderError>) -> ProviderAnswer {
    match result {
        Ok(remote) => ProviderAnswer::Account {
            status: remote.status,
            account_number: remote.account_number,
            failure_reason: remote.failure_reason,
        },
        Err(ProviderError::Rejected(reason)) => ProviderAnswer::IdentityRejected { reason },
        Err(
            ProviderError::Transient(_)
            | ProviderError::Refused(_)
            | ProviderError::BadAnswer(_)
            | ProviderError::NotConfigured(..),
        ) => ProviderAnswer::Unusable,
    }
}

fn scrubbed<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.map(|t| scrub_identity_numbers(&t)))
}

/// A bank's free text with every run of 11 or more digits (a BVN or NIN is 11; account numbers
/// are 10) replaced: that text is stored, answered in `detail`, logged and sent in events, where
/// an identity number must never appear, whatever the bank chose to write.
pub fn scrub_identity_numbers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut digits = String::new();
    let flush = |digits: &mut String, out: &mut String| {
        if digits.len() >= 11 {
            out.push_str("[redacted]");
        } else {
            out.push_str(digits);
        }
        digits.clear();
    };
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
        } else {
            flush(&mut digits, &mut out);
            out.push(c);
        }
    }
    flush(&mut digits, &mut out);
    out
}

/// An item of a bank's transaction list, read as a notification's transaction is
/// ([`RemoteTransaction::read`]): one the bank got wrong does not hide the others.
#[derive(Debug)]
pub enum Listed {
    /// It can be a deposit.
    Usable(RemoteTransaction),
    /// It cannot: kept as `invalid` for operators, as a notification of it would be
    /// (docs/api/deposits-and-rechecks.md).
    Invalid(InvalidListed),
}

/// A listed item that can be no deposit.
#[derive(Debug)]
pub struct InvalidListed {
    /// The item as listed, as JSON text: the same item listed again is the same text.
    pub item: String,
    /// Its `reference`, when it has one as a string (at most 200 characters, no NUL).
    pub reference: Option<String>,
    pub why: NotADeposit,
}

/// Reads each item of a bank's list by the one rule. `max_deposit` is `VAS_LIMITS__MAX_DEPOSIT`.
pub fn read_listed(max_deposit: i64, items: Vec<serde_json::Value>) -> Vec<Listed> {
    items
        .into_iter()
        .map(|item| {
            let reference = item
                .get("reference")
                .and_then(serde_json::Value::as_str)
                .map(|r| r.chars().filter(|c| *c != '\0').take(200).collect());
            // Serialised before it is read: JSON text escapes what a database column cannot
            // hold (NUL), and the same item always gives the same text.
            let text = item.to_string();
            match RemoteTransaction::read(item, max_deposit) {
                Ok(tx) => Listed::Usable(tx),
                Err(why) => Listed::Invalid(InvalidListed {
                    item: text,
                    reference,
                    why,
                }),
            }
        })
        .collect()
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
    /// With `notify`: the sandbox hands the notification over in its answer rather than sending
    /// it (docs/operations/provider-banks.md#the-sandbox).
    pub handover: bool,
}

/// What the sandbox answered a simulated deposit.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Simulated {
    /// The transaction's reference at the bank.
    pub provider_reference: String,
    /// The notification, when it was handed over rather than sent.
    pub notification: Option<HandedOver>,
}

/// A notification the sandbox handed over instead of sending: its body and
/// `X-Provider-Signature`, as it would have sent them.
#[derive(Debug, Deserialize)]
pub struct HandedOver {
    pub body: String,
    pub signature: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NameEnquiry {
    account_name: String,
}

/// Items are read one by one: one the provider got wrong must not hide the others.
#[derive(Debug, Deserialize)]
struct TransactionList {
    data: Vec<serde_json::Value>,
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
    /// The payout provider (`VAS_PAYOUTS__BANK`); None when the setting names no bank.
    payout_bank: Option<Bank>,
    /// `VAS_LIMITS__MAX_DEPOSIT`: a listed transaction above it is no deposit (see [`Listed`]).
    max_deposit: i64,
    /// The references of handed-over notifications stored, on their way to the sandbox (see
    /// [`Providers::confirm_handed_over`]); the task that sends them starts on first use.
    confirmations: Arc<OnceLock<mpsc::Sender<String>>>,
}

/// Stored references waiting to be confirmed at most: a flood beyond it is not confirmed, and the
/// sandbox sends those after its grace, which costs a notification the service already has.
const CONFIRMATIONS_WAITING: usize = 10_000;

/// The one lookup of which live configuration belongs to which bank (`VAS_PROVIDERS__<BANK>__…`);
/// `test-bank` has none (test mode is the sandbox's, for every bank).
pub fn live_config(providers: &ProvidersConfig, bank: Bank) -> Option<&ProviderConfig> {
    match bank {
        Bank::WemaBank => Some(&providers.wema_bank),
        Bank::AccessBank => Some(&providers.access_bank),
        Bank::TitanTrustBank => Some(&providers.titan_trust_bank),
        Bank::TestBank => None,
    }
}

impl Providers {
    pub fn from_config(config: &Config) -> Self {
        let sandbox = config.sandbox.url.as_ref().map(|url| Endpoint {
            base: url.trim_end_matches('/').to_owned(),
            key: config.sandbox.key.clone(),
        });
        let mut live = HashMap::new();
        for bank in Bank::ALL {
            if let Some(ProviderConfig {
                url: Some(url),
                key: Some(key),
                ..
            }) = live_config(&config.providers, bank)
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
                .connect_timeout(CONNECT_TIMEOUT)
                .timeout(REQUEST_TIMEOUT)
                // A 3xx is the provider's error (see `classify`), never a place to re-send to.
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("a reqwest client builds"),
            sandbox,
            live,
            retry_for: Duration::from_secs(2),
            payout_bank: Bank::parse(&config.payouts.bank),
            max_deposit: config.limits.max_deposit,
            confirmations: Arc::default(),
        }
    }

    /// The payout provider, or NotConfigured when `VAS_PAYOUTS__BANK` names no bank.
    pub fn payout_bank(&self) -> Result<Bank, ProviderError> {
        self.payout_bank
            .ok_or(ProviderError::NotConfigured("payouts", Mode::Test))
    }

    /// Name enquiry at the payout provider: the account's name, or None when the bank has no
    /// such account (404 `account_not_found`).
    pub async fn name_enquiry(
        &self,
        mode: Mode,
        bank_code: &str,
        account_number: &str,
    ) -> Result<Option<String>, ProviderError> {
        let bank = self.payout_bank()?;
        let path = format!("/banks/{bank_code}/accounts/{account_number}");
        let found: Option<NameEnquiry> = self
            .call(
                bank,
                mode,
                "name_enquiry",
                Attempts::Retried,
                |http, base| http.get(format!("{base}{path}")),
                |response| read_if_found(response, "name enquiry"),
            )
            .await?;
        Ok(found.map(|f| f.account_name))
    }

    /// Sends a transfer at `bank`, the payout's provider (the same reference again is the same
    /// transfer and never moves money twice). One attempt: the caller asks `get_transfer` when
    /// the answer is lost, and only ever sends again under the same reference, at the same bank.
    pub async fn send_transfer(
        &self,
        bank: Bank,
        mode: Mode,
        transfer: &NewTransfer,
    ) -> Result<RemoteTransfer, ProviderError> {
        self.call(
            bank,
            mode,
            "send_transfer",
            Attempts::Once,
            |http, base| http.post(format!("{base}/transfers")).json(transfer),
            |response| read_success(response, "transfer", PROVIDER_BODY_LIMIT),
        )
        .await
    }

    /// A transfer as `bank` (the payout's provider) sees it; None when it never received the
    /// reference.
    pub async fn get_transfer(
        &self,
        bank: Bank,
        mode: Mode,
        reference: &str,
    ) -> Result<Option<RemoteTransfer>, ProviderError> {
        self.call(
            bank,
            mode,
            "get_transfer",
            Attempts::Retried,
            |http, base| http.get(format!("{base}/transfers/{reference}")),
            |response| read_if_found(response, "transfer"),
        )
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
        self.call(
            bank,
            mode,
            "open",
            Attempts::Once,
            |http, base| {
                http.post(format!("{base}/accounts"))
                    .timeout(timeout)
                    .json(request)
            },
            |response| read_success(response, "account", PROVIDER_BODY_LIMIT),
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
        self.call(
            bank,
            mode,
            "get",
            Attempts::Retried,
            |http, base| http.get(format!("{base}/accounts/{reference}")),
            |response| read_if_found(response, "account"),
        )
        .await
    }

    /// Closes the account at the provider; an account it never had is closed already.
    pub async fn close_account(
        &self,
        bank: Bank,
        mode: Mode,
        reference: &str,
    ) -> Result<(), ProviderError> {
        self.call(
            bank,
            mode,
            "close",
            Attempts::Retried,
            |http, base| http.post(format!("{base}/accounts/{reference}/close")),
            |response| async move {
                match response.status() {
                    s if s.is_success() || s == StatusCode::NOT_FOUND => Ok(()),
                    _ => Err(classify(response).await),
                }
            },
        )
        .await
    }

    /// Money received by the account in `[from, to]`, each item read by the one rule.
    pub async fn transactions(
        &self,
        bank: Bank,
        mode: Mode,
        reference: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Listed>, ProviderError> {
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
        self.call(
            bank,
            mode,
            "transactions",
            Attempts::Retried,
            |http, base| {
                http.get(format!("{base}/accounts/{reference}/transactions"))
                    .query(&range)
            },
            |response| async move {
                let list: TransactionList =
                    read_success(response, "transactions", TRANSACTIONS_BODY_LIMIT).await?;
                Ok(read_listed(self.max_deposit, list.data))
            },
        )
        .await
    }

    /// Every protocol call's one shape: the request `build` makes from the bank's base URL for
    /// `mode` (the bearer key is added here), sent once or, with [`Attempts::Retried`], again
    /// while the failure is transient; its response read by `read`; the whole call timed and
    /// counted under `operation`.
    async fn call<T, Read, Fut>(
        &self,
        bank: Bank,
        mode: Mode,
        operation: &'static str,
        attempts: Attempts,
        build: impl Fn(&reqwest::Client, &str) -> reqwest::RequestBuilder,
        read: Read,
    ) -> Result<T, ProviderError>
    where
        Read: Fn(reqwest::Response) -> Fut,
        Fut: std::future::Future<Output = Result<T, ProviderError>>,
    {
        observed(bank, operation, async {
            let (base, key) = self.endpoint(bank, mode)?;
            let attempt = || async {
                let response = build(&self.http, &base)
                    .bearer_auth(key)
                    .send()
                    .await
                    .map_err(transport)?;
                read(response).await
            };
            match attempts {
                Attempts::Once => attempt().await,
                Attempts::Retried => self.retrying(attempt).await,
            }
        })
        .await
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

    /// Test mode only: asks the sandbox to send money to an account number, notifying the service
    /// like a bank would (or losing the notification, so that a recheck can find it).
    pub async fn simulate_deposit(
        &self,
        request: &SimulatedDeposit,
    ) -> Result<Simulated, ProviderError> {
        self.control("/control/deposits", request).await
    }

    /// Test mode only: asks the sandbox to send, as a bank does (retrying), the notification of
    /// a deposit it handed over, answering once the first attempt has ended.
    pub async fn notify_simulated(
        &self,
        bank: Bank,
        account_number: &str,
        provider_reference: &str,
    ) -> Result<Simulated, ProviderError> {
        let body = serde_json::json!({
            "bank": bank.slug(),
            "accountNumber": account_number,
            "providerReference": provider_reference,
        });
        self.control("/control/deposits/notify", &body).await
    }

    /// Tells the sandbox, soon and together with others, that the notification it handed over
    /// for `provider_reference` is stored, so that it does not send it after its grace
    /// (docs/operations/provider-banks.md#the-sandbox). Never waits: the references stored while
    /// one confirmation is under way go in the next.
    pub fn confirm_handed_over(&self, provider_reference: String) {
        let Some(sandbox) = &self.sandbox else {
            return;
        };
        let waiting = self.confirmations.get_or_init(|| {
            let (waiting, references) = mpsc::channel(CONFIRMATIONS_WAITING);
            tokio::spawn(confirm(self.http.clone(), sandbox.clone(), references));
            waiting
        });
        if waiting.try_send(provider_reference).is_err() {
            tracing::warn!("too many handed-over notifications to confirm; the sandbox sends one");
        }
    }

    /// A call to the sandbox's control surface.
    async fn control<B: Serialize, T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T, ProviderError> {
        let sandbox = self
            .sandbox
            .as_ref()
            .ok_or(ProviderError::NotConfigured("sandbox", Mode::Test))?;
        let response = self
            .http
            .post(format!("{}{path}", sandbox.base))
            .bearer_auth(&sandbox.key)
            .json(body)
            .send()
            .await
            .map_err(transport)?;
        if !response.status().is_success() {
            return Err(classify(response).await);
        }
        read_json(response, "sandbox answer", PROVIDER_BODY_LIMIT).await
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

/// How often [`Providers::call`] sends its request.
#[derive(Debug, Clone, Copy)]
enum Attempts {
    /// Once: what a lost answer means is the caller's decision (opening an account, sending a
    /// transfer).
    Once,
    /// Again, with backoff for a short while, while the failure is transient (reads, and
    /// calls the provider dedupes).
    Retried,
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
        Err(ProviderError::BadAnswer(_)) => "bad_answer",
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

/// A successful answer's body as `T`; any other answer as [`classify`] reads it.
async fn read_success<T: serde::de::DeserializeOwned>(
    response: reqwest::Response,
    what: &str,
    limit: usize,
) -> Result<T, ProviderError> {
    if !response.status().is_success() {
        return Err(classify(response).await);
    }
    read_json(response, what, limit).await
}

/// As [`read_success`], with a 404 meaning the provider has no such thing: None.
async fn read_if_found<T: serde::de::DeserializeOwned>(
    response: reqwest::Response,
    what: &str,
) -> Result<Option<T>, ProviderError> {
    if response.status() == StatusCode::NOT_FOUND {
        return Ok(None);
    }
    read_success(response, what, PROVIDER_BODY_LIMIT)
        .await
        .map(Some)
}

/// Sends the stored references to the sandbox as they come, as many at a time as are waiting
/// (at most [`domain::provider::MOST_CONFIRMED_HANDOVERS`]), until every sender is gone.
async fn confirm(http: reqwest::Client, sandbox: Endpoint, mut references: mpsc::Receiver<String>) {
    let mut batch = Vec::new();
    while references
        .recv_many(&mut batch, domain::provider::MOST_CONFIRMED_HANDOVERS)
        .await
        > 0
    {
        let sent = http
            .post(format!("{}/control/deposits/confirm", sandbox.base))
            .bearer_auth(&sandbox.key)
            .json(&serde_json::json!({ "providerReferences": batch }))
            .send()
            .await;
        match sent {
            Ok(answer) if answer.status().is_success() => {}
            Ok(answer) => tracing::warn!(
                count = batch.len(),
                status = answer.status().as_u16(),
                "the sandbox refused a confirmation; it sends those notifications after its grace"
            ),
            Err(e) => tracing::warn!(
                count = batch.len(),
                error = %transport(e),
                "could not confirm handed-over notifications; the sandbox sends them after its grace"
            ),
        }
        batch.clear();
    }
}

/// A provider's body, read up to `limit` bytes, as `T`. A longer body is a bad answer (never
/// read to its end); an unreadable one is transient, as the provider may be mid-deploy.
async fn read_json<T: serde::de::DeserializeOwned>(
    mut response: reqwest::Response,
    what: &str,
    limit: usize,
) -> Result<T, ProviderError> {
    let body = read_capped(&mut response, limit).await.map_err(transport)?;
    if body.truncated {
        return Err(ProviderError::BadAnswer(format!(
            "{what} body over {limit} bytes"
        )));
    }
    serde_json::from_slice(&body.bytes)
        .map_err(|e| ProviderError::Transient(format!("unreadable {what}: {e}")))
}

async fn classify(response: reqwest::Response) -> ProviderError {
    let status = response.status();
    if status.is_redirection() {
        // Following it would send the request (an identity number, a bearer key) elsewhere.
        return ProviderError::BadAnswer(format!(
            "HTTP {} redirect, not followed",
            status.as_u16()
        ));
    }
    let problem: Option<ProviderProblem> = read_json(response, "problem", PROVIDER_BODY_LIMIT)
        .await
        .ok();
    let message = problem
        .as_ref()
        .and_then(|p| p.message.as_deref())
        .map(scrub_identity_numbers)
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn item(reference: &str, amount: i64) -> serde_json::Value {
        json!({"reference": reference, "accountNumber": "0123456789", "amount": amount,
            "currency": "NGN", "narration": "rent", "paidAt": "2026-11-25T10:00:00Z"})
    }

    #[test]
    fn identity_numbers_are_scrubbed_from_bank_text() {
        assert_eq!(
            scrub_identity_numbers("BVN 22212345678 not found for 0123456789"),
            "BVN [redacted] not found for 0123456789"
        );
        assert_eq!(
            scrub_identity_numbers("nin:123456789012."),
            "nin:[redacted]."
        );
        assert_eq!(scrub_identity_numbers("12345678901"), "[redacted]");
        assert_eq!(scrub_identity_numbers("no digits"), "no digits");
        let remote: RemoteAccount = serde_json::from_value(json!({"reference": "va_1",
            "status": "failed", "failureReason": "identity 22212345678 rejected"}))
        .unwrap();
        assert_eq!(
            remote.failure_reason.as_deref(),
            Some("identity [redacted] rejected")
        );
    }

    #[test]
    fn a_listed_transaction_that_cannot_be_a_deposit_is_kept_apart_from_the_others() {
        let mut nul = item("tx-nul", 300);
        nul["senderName"] = json!("Ada\u{0}Obi");
        let mut unreadable = item("tx-no-date\u{0}", 100);
        unreadable.as_object_mut().unwrap().remove("paidAt");
        let mut dollars = item("tx-usd", 100);
        dollars["currency"] = json!("USD");
        let too_large = item("tx-too-large", 10_000_000_001);
        let listed = read_listed(
            10_000_000_000,
            vec![
                item("tx-good", 150_000),
                item("tx-reversal", -150_000),
                // Above VAS_LIMITS__MAX_DEPOSIT: never a deposit, by the same rule as a
                // notification's.
                too_large.clone(),
                item("", 100),
                unreadable,
                dollars,
                nul,
            ],
        );
        let (mut usable, mut invalid) = (Vec::new(), Vec::new());
        for l in listed {
            match l {
                Listed::Usable(tx) => usable.push(tx),
                Listed::Invalid(i) => invalid.push(i),
            }
        }
        let references: Vec<_> = usable.iter().map(|t| t.reference.as_str()).collect();
        assert_eq!(references, ["tx-good", "tx-nul"]);
        assert_eq!(usable[1].sender_name.as_deref(), Some("AdaObi"));
        let references: Vec<_> = invalid.iter().map(|i| i.reference.as_deref()).collect();
        assert_eq!(
            references,
            [
                Some("tx-reversal"),
                Some("tx-too-large"),
                Some(""),
                Some("tx-no-date"),
                Some("tx-usd")
            ]
        );
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&invalid[1].item).unwrap(),
            too_large,
            "kept as listed"
        );
        assert!(matches!(&invalid[1].why, NotADeposit::Refused(e) if e[0].field == "amount"));
        assert!(matches!(invalid[3].why, NotADeposit::Unreadable(_)));
        assert!(!invalid[3].item.contains('\0'), "{}", invalid[3].item);
    }
}
