//! Webhook signatures as Standard Webhooks (standardwebhooks.com) defines them:
//! `v1,<base64 HMAC-SHA256(key, "{id}.{timestamp}.{body}")>`, where the key is the base64-decoded
//! part of a `whsec_…` secret. Several signatures (during a secret rotation) are space-separated.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::{Hmac, Mac};
use sha2::Sha256;

pub const HEADER_ID: &str = "webhook-id";
pub const HEADER_TIMESTAMP: &str = "webhook-timestamp";
pub const HEADER_SIGNATURE: &str = "webhook-signature";

const PREFIX: &str = "whsec_";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SigningError {
    #[error("a webhook secret is `whsec_` followed by base64")]
    BadSecret,
}

/// The raw key of a webhook secret. Its `Debug` never shows the key.
#[derive(Clone)]
pub struct SigningKey(Vec<u8>);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(<redacted>)")
    }
}

impl SigningKey {
    /// The key of a `whsec_…` secret (the prefix is optional, as in the reference libraries).
    pub fn from_secret(secret: &str) -> Result<Self, SigningError> {
        let encoded = secret.strip_prefix(PREFIX).unwrap_or(secret);
        let key = B64.decode(encoded).map_err(|_| SigningError::BadSecret)?;
        if key.is_empty() {
            return Err(SigningError::BadSecret);
        }
        Ok(Self(key))
    }

    /// `v1,<base64 signature>` of one message.
    pub fn sign(&self, msg_id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC takes keys of any length");
        mac.update(msg_id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", B64.encode(mac.finalize().into_bytes()))
    }
}

/// The `webhook-signature` value: one signature per key, space-separated, current key first.
pub fn signature_header(keys: &[SigningKey], msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    keys.iter()
        .map(|k| k.sign(msg_id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference vector of the Standard Webhooks libraries (e.g. the Rust, Swift and
    /// JavaScript reference implementations' `sign` tests).
    #[test]
    fn matches_the_standard_webhooks_test_vector() {
        let key = SigningKey::from_secret("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD").unwrap();
        assert_eq!(
            key.sign(
                "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
                1649367553,
                br#"{"email":"test@example.com","username":"test_user"}"#,
            ),
            "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw="
        );
    }

    #[test]
    fn any_change_to_id_timestamp_or_body_changes_the_signature() {
        let key = SigningKey::from_secret("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD").unwrap();
        let base = key.sign("msg_1", 1, b"{}");
        assert_ne!(base, key.sign("msg_2", 1, b"{}"));
        assert_ne!(base, key.sign("msg_1", 2, b"{}"));
        assert_ne!(base, key.sign("msg_1", 1, b"{ }"));
    }

    #[test]
    fn rotation_sends_both_signatures_space_separated() {
        let old = SigningKey::from_secret("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD").unwrap();
        let new = SigningKey::from_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let header = signature_header(&[new.clone(), old.clone()], "msg_1", 5, b"{}");
        let parts: Vec<&str> = header.split(' ').collect();
        assert_eq!(
            parts,
            vec![new.sign("msg_1", 5, b"{}"), old.sign("msg_1", 5, b"{}")]
        );
    }

    #[test]
    fn bad_secrets_are_refused_and_keys_never_print() {
        assert_eq!(
            SigningKey::from_secret("whsec_not base64!").unwrap_err(),
            SigningError::BadSecret
        );
        assert_eq!(
            SigningKey::from_secret("whsec_").unwrap_err(),
            SigningError::BadSecret
        );
        let key = SigningKey::from_secret("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD").unwrap();
        assert_eq!(format!("{key:?}"), "SigningKey(<redacted>)");
    }
}
