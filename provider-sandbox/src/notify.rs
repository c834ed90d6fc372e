//! Deposit notifications to the service, signed as a provider bank signs them.

use std::time::Duration;

use domain::Bank;
use domain::provider::ProviderEvent;
use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::Sha512;
use tokio::sync::oneshot;

use crate::state::Transaction;

/// Pauses before each retry: 8 tries over about a minute, long enough to ride out an api
/// restart, short enough that a test or demo sees the outcome.
const RETRY_DELAYS_SECS: [u64; 7] = [1, 2, 4, 8, 15, 15, 15];

/// How long one attempt may take before it counts as failed.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest a simulated deposit's answer waits for its notification's first attempt: well
/// under the api's 15 s for a call to a bank, so a slow service costs the caller a slow 202, not
/// an error for money the sandbox did move.
pub const FIRST_ATTEMPT_WAIT: Duration = Duration::from_secs(5);

/// Lowercase hex HMAC-SHA512 of `body` under `secret`: the `X-Provider-Signature` header.
pub fn sign(secret: &str, body: &[u8]) -> String {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = Hmac::<Sha512>::new_from_slice(secret.as_bytes())
        .expect("HMAC-SHA512 accepts keys of any length");
    mac.update(body);
    hex::encode(mac.finalize().into_bytes())
}

#[derive(Serialize)]
struct Notification<'a, T> {
    event: ProviderEvent,
    data: &'a T,
}

/// A notification as a bank sends it.
pub struct Signed {
    /// Where it goes, under the service's base URL: `/providers/{bank}/notifications`.
    pub path: String,
    pub body: Vec<u8>,
    /// The `X-Provider-Signature` header.
    pub signature: String,
}

/// `{"event", "data"}` signed under `secret`, for `bank`'s notification path.
pub fn signed<T: Serialize>(
    secret: &str,
    bank: Bank,
    event: ProviderEvent,
    data: &T,
) -> serde_json::Result<Signed> {
    let body = serde_json::to_vec(&Notification { event, data })?;
    Ok(Signed {
        path: format!("/providers/{}/notifications", bank.slug()),
        signature: sign(secret, &body),
        body,
    })
}

/// A deposit's notification as the sandbox's banks send it (what `bench webhooks --bank-secret`
/// sends in their place).
pub fn signed_deposit(
    secret: &str,
    bank: Bank,
    transaction: &Transaction,
) -> serde_json::Result<Signed> {
    signed(secret, bank, ProviderEvent::TransferReceived, transaction)
}

/// Builds the client notifications go out with.
pub fn client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .timeout(ATTEMPT_TIMEOUT)
        .build()?)
}

/// The end of a notification's first attempt (answered, refused, failed or timed out); the
/// attempts after it go on in the background either way.
pub struct FirstAttempt(Option<oneshot::Receiver<()>>);

impl FirstAttempt {
    /// Waits until the first attempt has ended, or `at_most`.
    pub async fn wait(self, at_most: Duration) {
        if let Some(ended) = self.0 {
            // A dropped sender (the task ended) is an end too.
            let _ = tokio::time::timeout(at_most, ended).await;
        }
    }
}

/// Sends a deposit notification in the background, retrying until a 2xx or the tries run out.
/// The deposit is already recorded, so a lost notification is exactly what a recheck must find.
pub fn spawn_delivery(
    client: reqwest::Client,
    notify_url: Option<&str>,
    secret: &str,
    bank: Bank,
    transaction: &Transaction,
) -> FirstAttempt {
    spawn_event(
        client,
        notify_url,
        secret,
        bank,
        ProviderEvent::TransferReceived,
        &transaction.reference,
        transaction,
    )
}

/// Sends `{"event", "data"}` to the service in the background, signed, retrying like a bank.
pub fn spawn_event<T: Serialize>(
    client: reqwest::Client,
    notify_url: Option<&str>,
    secret: &str,
    bank: Bank,
    event: ProviderEvent,
    reference: &str,
    data: &T,
) -> FirstAttempt {
    let Some(base) = notify_url else {
        tracing::warn!(
            provider_reference = %reference,
            event = event.as_str(),
            "no notify_url configured; notification skipped"
        );
        return FirstAttempt(None);
    };
    let Signed {
        path,
        body,
        signature,
    } = match signed(secret, bank, event, data) {
        Ok(signed) => signed,
        Err(e) => {
            tracing::error!(error = %e, event = event.as_str(), "could not encode a notification");
            return FirstAttempt(None);
        }
    };
    let url = format!("{}{path}", base.trim_end_matches('/'));
    let reference = reference.to_owned();
    let (first_ended, first) = oneshot::channel();
    tokio::spawn(async move {
        deliver(&client, &url, body, &signature, &reference, first_ended).await;
    });
    FirstAttempt(Some(first))
}

async fn deliver(
    client: &reqwest::Client,
    url: &str,
    body: Vec<u8>,
    signature: &str,
    reference: &str,
    first_ended: oneshot::Sender<()>,
) {
    let mut first_ended = Some(first_ended);
    let attempts = RETRY_DELAYS_SECS.len() + 1;
    for attempt in 1..=attempts {
        let outcome = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("X-Provider-Signature", signature)
            .body(body.clone())
            .send()
            .await;
        if let Some(ended) = first_ended.take() {
            // Nobody waiting any more is fine: the answer went without it.
            let _ = ended.send(());
        }
        match outcome {
            Ok(response) if response.status().is_success() => {
                tracing::info!(provider_reference = %reference, attempt, "notification delivered");
                return;
            }
            Ok(response) => tracing::warn!(
                provider_reference = %reference, attempt, status = response.status().as_u16(),
                "notification refused"
            ),
            Err(e) => tracing::warn!(
                provider_reference = %reference, attempt, error = %e,
                "notification failed"
            ),
        }
        if let Some(delay) = RETRY_DELAYS_SECS.get(attempt - 1) {
            tokio::time::sleep(Duration::from_secs(*delay)).await;
        }
    }
    tracing::error!(provider_reference = %reference, attempts, "notification given up");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_is_lowercase_hex_hmac_sha512() {
        // RFC 4231 test case 2.
        let sig = sign("Jefe", b"what do ya want for nothing?");
        assert_eq!(
            sig,
            "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"
        );
    }
}
