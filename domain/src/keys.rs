//! Secret API keys and webhook secrets: their shape and how they are generated and recognised.

use base64::Engine;
use chrono::{DateTime, DurationRound, Utc};
use rand::Rng;
use rand::distr::Alphanumeric;
use sha2::{Digest, Sha256};

use super::Mode;

/// 43 base62 characters carry 256 bits, the same as 32 random bytes.
const SECRET_KEY_CHARS: usize = 43;
const WEBHOOK_SECRET_BYTES: usize = 32;

/// A freshly issued secret key, shown once and then stored only as its hash.
pub fn generate_secret_key(mode: Mode) -> String {
    let body: String = rand::rng()
        .sample_iter(Alphanumeric)
        .take(SECRET_KEY_CHARS)
        .map(char::from)
        .collect();
    format!("sk_{mode}_{body}")
}

/// The mode a presented key claims, if it has the shape of one of ours.
pub fn secret_key_mode(key: &str) -> Option<Mode> {
    let (mode, body) = if let Some(body) = key.strip_prefix("sk_test_") {
        (Mode::Test, body)
    } else if let Some(body) = key.strip_prefix("sk_live_") {
        (Mode::Live, body)
    } else {
        return None;
    };
    (body.len() == SECRET_KEY_CHARS && body.bytes().all(|b| b.is_ascii_alphanumeric()))
        .then_some(mode)
}

/// What is stored and looked up instead of the key. Keys are 256-bit random, so a plain SHA-256
/// cannot be brute-forced and keeps the lookup a single indexed equality.
pub fn hash_secret_key(key: &str) -> String {
    sha256_hex(key)
}

/// Lowercase hex of the SHA-256 of `text`.
pub fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The end of a key the dashboard may show beside its mode's prefix: never more of it.
pub fn key_last_four(key: &str) -> String {
    let start = key.len().saturating_sub(4);
    key.get(start..).unwrap_or_default().to_owned()
}

/// When a key was last used is kept to the minute (docs/api/authentication-and-modes.md): the
/// stored stamp only changes, and the database is only written, when the minute does.
pub fn last_used_minute(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(chrono::TimeDelta::minutes(1))
        .expect("a minute divides any timestamp")
}

/// How long a rolled key keeps working beside its successor: none (it stops at once) up to
/// 7 days (docs/operations/keys-and-secret-rotation.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeyGrace(u32);

impl KeyGrace {
    pub const MAX_SECS: u64 = 7 * 24 * 3600;

    pub fn from_secs(secs: u64) -> Result<Self, KeyGraceTooLong> {
        if secs > Self::MAX_SECS {
            return Err(KeyGraceTooLong(secs));
        }
        Ok(KeyGrace(u32::try_from(secs).expect("7 days fit in u32")))
    }

    pub fn as_duration(self) -> chrono::TimeDelta {
        chrono::TimeDelta::seconds(i64::from(self.0))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyGraceTooLong(pub u64);

impl std::fmt::Display for KeyGraceTooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a grace of {} seconds is too long: a rolled key keeps working at most 7 days \
             ({} seconds)",
            self.0,
            KeyGrace::MAX_SECS
        )
    }
}

impl std::error::Error for KeyGraceTooLong {}

/// `whsec_` + base64 of 32 random bytes, as Standard Webhooks libraries expect.
pub fn generate_webhook_secret() -> String {
    let mut bytes = [0u8; WEBHOOK_SECRET_BYTES];
    rand::rng().fill(&mut bytes[..]);
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_their_mode_and_enough_entropy() {
        let test = generate_secret_key(Mode::Test);
        let live = generate_secret_key(Mode::Live);
        assert!(test.starts_with("sk_test_"));
        assert_eq!(secret_key_mode(&test), Some(Mode::Test));
        assert_eq!(secret_key_mode(&live), Some(Mode::Live));
        assert_ne!(test, generate_secret_key(Mode::Test));
        assert_eq!(secret_key_mode("sk_test_short"), None);
        assert_eq!(secret_key_mode("pk_test_abc"), None);
        assert_eq!(hash_secret_key(&test).len(), 64);
        assert_ne!(hash_secret_key(&test), test);
    }

    #[test]
    fn grace_is_at_most_seven_days() {
        assert_eq!(
            KeyGrace::from_secs(0).unwrap().as_duration().num_seconds(),
            0
        );
        assert_eq!(
            KeyGrace::from_secs(604_800)
                .unwrap()
                .as_duration()
                .num_seconds(),
            604_800
        );
        let err = KeyGrace::from_secs(604_801).unwrap_err();
        assert!(err.to_string().contains("at most 7 days"), "{err}");
        assert!(KeyGrace::from_secs(u64::MAX).is_err());
    }

    #[test]
    fn last_used_is_kept_to_the_minute_and_last_four_is_the_tail() {
        let t = DateTime::parse_from_rfc3339("2024-05-01T10:42:59.123456Z")
            .unwrap()
            .to_utc();
        assert_eq!(
            last_used_minute(t).to_rfc3339(),
            "2024-05-01T10:42:00+00:00"
        );
        let key = generate_secret_key(Mode::Live);
        assert_eq!(key_last_four(&key), key[key.len() - 4..]);
    }

    #[test]
    fn webhook_secrets_decode_to_32_bytes() {
        let secret = generate_webhook_secret();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(secret.strip_prefix("whsec_").unwrap())
            .unwrap();
        assert_eq!(raw.len(), 32);
    }
}
