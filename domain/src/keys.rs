//! Secret API keys and webhook secrets: their shape and how they are generated and recognised.

use base64::Engine;
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
    fn webhook_secrets_decode_to_32_bytes() {
        let secret = generate_webhook_secret();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(secret.strip_prefix("whsec_").unwrap())
            .unwrap();
        assert_eq!(raw.len(), 32);
    }
}
