//! Field encryption at rest: AES-256-GCM with a random nonce, the key's id in the ciphertext (so
//! keys can rotate) and the owning row bound as associated data (so a value cannot be moved).
//! Beside it, the digests of requests kept for idempotency and the check of a bank's notification
//! signature. Storage and start-up both use it, so it stands below both.

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use rand::Rng;
use sha2::{Digest, Sha256};

const VERSION: &str = "v1";
const DIGEST_VERSION: &str = "d1";

fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; 32] {
    use hmac::{Hmac, Mac};
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

fn keyed_digest(key: &Key, purpose: &str, data: &[u8]) -> String {
    let purpose_key = hmac_sha256(&key.digest_key, purpose.as_bytes());
    format!(
        "{DIGEST_VERSION}:{}:{}",
        key.id,
        hex::encode(hmac_sha256(&purpose_key, data))
    )
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CryptoError {
    #[error("an encryption key must be base64 of exactly 32 bytes")]
    BadKey,
    #[error("the ciphertext is malformed")]
    Malformed,
    #[error("no configured key has id {0}")]
    UnknownKey(String),
    #[error("the ciphertext does not decrypt with its key and context")]
    Tampered,
}

struct Key {
    id: String,
    cipher: Aes256Gcm,
    /// Derived from the key for keyed digests, so the encryption key itself never signs anything.
    digest_key: [u8; 32],
}

impl Key {
    fn from_base64(b64: &str) -> Result<Self, CryptoError> {
        let bytes = B64.decode(b64.trim()).map_err(|_| CryptoError::BadKey)?;
        if bytes.len() != 32 {
            return Err(CryptoError::BadKey);
        }
        // The id names the key without revealing it: 8 hex characters of its hash.
        let id = hex::encode(&Sha256::digest(&bytes)[..4]);
        let cipher = Aes256Gcm::new_from_slice(&bytes).map_err(|_| CryptoError::BadKey)?;
        let digest_key = hmac_sha256(&bytes, b"vas/keyed-digest/v1");
        Ok(Self {
            id,
            cipher,
            digest_key,
        })
    }
}

/// Encrypts with the current key; decrypts with the current or any previous key.
pub struct Cipher {
    current: Key,
    previous: Vec<Key>,
}

impl std::fmt::Debug for Cipher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cipher")
            .field("key_id", &self.current.id)
            .finish_non_exhaustive()
    }
}

impl Cipher {
    pub fn new(current: &str, previous: &[String]) -> Result<Self, CryptoError> {
        Ok(Self {
            current: Key::from_base64(current)?,
            previous: previous
                .iter()
                .map(|k| Key::from_base64(k))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Base64 of 32 fresh random bytes, for a new key.
    pub fn generate_key() -> String {
        let mut bytes = [0u8; 32];
        rand::rng().fill(&mut bytes[..]);
        B64.encode(bytes)
    }

    pub fn key_id(&self) -> &str {
        &self.current.id
    }

    /// `v1:<key id>:<base64(nonce ‖ ciphertext)>`; `context` (e.g. `"va_…:identity"`) must be
    /// given again to decrypt.
    pub fn encrypt(&self, plaintext: &str, context: &str) -> String {
        let mut nonce = [0u8; 12];
        rand::rng().fill(&mut nonce[..]);
        let sealed = self
            .current
            .cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plaintext.as_bytes(),
                    aad: context.as_bytes(),
                },
            )
            .expect("AES-GCM encryption of an in-memory buffer cannot fail");
        let mut blob = nonce.to_vec();
        blob.extend_from_slice(&sealed);
        format!("{VERSION}:{}:{}", self.current.id, B64.encode(blob))
    }

    pub fn decrypt(&self, stored: &str, context: &str) -> Result<String, CryptoError> {
        let mut parts = stored.splitn(3, ':');
        let (Some(VERSION), Some(key_id), Some(data)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(CryptoError::Malformed);
        };
        let key = std::iter::once(&self.current)
            .chain(&self.previous)
            .find(|k| k.id == key_id)
            .ok_or_else(|| CryptoError::UnknownKey(key_id.to_owned()))?;
        let blob = B64.decode(data).map_err(|_| CryptoError::Malformed)?;
        if blob.len() < 12 + 16 {
            return Err(CryptoError::Malformed);
        }
        let (nonce, sealed) = blob.split_at(12);
        let plain = key
            .cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: sealed,
                    aad: context.as_bytes(),
                },
            )
            .map_err(|_| CryptoError::Tampered)?;
        String::from_utf8(plain).map_err(|_| CryptoError::Tampered)
    }

    /// A keyed digest of `data` (HMAC-SHA256 under a key derived from the encryption key, bound
    /// to `purpose`): `d1:<key id>:<hex>`. Unlike a plain hash it cannot be brute-forced from a
    /// database copy, even when `data` holds only a few unknown digits (a BVN).
    pub fn digest(&self, purpose: &str, data: &[u8]) -> String {
        keyed_digest(&self.current, purpose, data)
    }

    /// The digests of `data` under the current and every previous key: a value stored before a
    /// key rotation still matches one of them.
    pub fn digests(&self, purpose: &str, data: &[u8]) -> Vec<String> {
        std::iter::once(&self.current)
            .chain(&self.previous)
            .map(|key| keyed_digest(key, purpose, data))
            .collect()
    }

    /// True when `stored` was sealed with a key other than the current one (worth re-encrypting).
    pub fn is_stale(&self, stored: &str) -> bool {
        !stored.starts_with(&self.current_prefix())
    }

    /// How every value sealed with the current key begins (`v1:<key id>:`).
    pub fn current_prefix(&self) -> String {
        format!("{VERSION}:{}:", self.current.id)
    }

    /// `stored` sealed again with the current key, or None when it already is.
    pub fn reseal(&self, stored: &str, context: &str) -> Result<Option<String>, CryptoError> {
        if !self.is_stale(stored) {
            return Ok(None);
        }
        let plain = self.decrypt(stored, context)?;
        Ok(Some(self.encrypt(&plain, context)))
    }
}

/// Checks a provider's `X-Provider-Signature`: lowercase hex of HMAC-SHA512(secret, raw body),
/// compared in constant time.
pub fn verify_provider_signature(secret: &str, body: &[u8], signature_hex: &str) -> bool {
    use hmac::{Hmac, Mac};
    let Ok(expected) = hex::decode(signature_hex.trim()) else {
        return false;
    };
    let Ok(mut mac) = <Hmac<sha2::Sha512> as Mac>::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    mac.update(body);
    mac.verify_slice(&expected).is_ok()
}

/// The digest an idempotency key keeps of its request body, and every form an earlier request
/// with the same body may have stored: the digest under a previous encryption key, or the plain
/// SHA-256 that rows written before keyed digests hold (a key lives 48 hours, so those rows are
/// purged within two days of the upgrade; none is written any more).
pub struct RequestDigest {
    stored: String,
    accepted: Vec<String>,
}

impl RequestDigest {
    const PURPOSE: &str = "idempotency-request";

    /// `canonical_body` must already be canonical (the same fields in any order give one text).
    pub fn new(cipher: &Cipher, canonical_body: &str) -> Self {
        let mut accepted = cipher.digests(Self::PURPOSE, canonical_body.as_bytes());
        let stored = accepted[0].clone();
        accepted.push(hex::encode(Sha256::digest(canonical_body.as_bytes())));
        Self { stored, accepted }
    }

    /// What a new key stores.
    pub fn stored(&self) -> &str {
        &self.stored
    }

    /// True when a key's stored digest was made from this same body.
    pub fn matches(&self, stored: &str) -> bool {
        self.accepted.iter().any(|a| a == stored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_digests_depend_on_the_key_and_purpose_and_survive_rotation() {
        let old = Cipher::generate_key();
        let new = Cipher::generate_key();
        let before = Cipher::new(&old, &[]).unwrap();
        let after = Cipher::new(&new, std::slice::from_ref(&old)).unwrap();
        let body = br#"{"customerBvn":"22212345678"}"#;
        let stored = before.digest("idempotency", body);
        assert!(stored.starts_with("d1:"));
        assert!(
            !stored.contains(&hex::encode(Sha256::digest(body))),
            "not a plain hash"
        );
        assert_ne!(stored, before.digest("other", body), "bound to its purpose");
        assert_ne!(
            stored,
            after.digest("idempotency", body),
            "bound to its key"
        );
        assert!(after.digests("idempotency", body).contains(&stored));
        assert_eq!(before.digest("idempotency", body), stored, "deterministic");
    }

    #[test]
    fn round_trips_and_never_repeats_a_ciphertext() {
        let cipher = Cipher::new(&Cipher::generate_key(), &[]).unwrap();
        let a = cipher.encrypt("22212345678", "va_1:identity");
        let b = cipher.encrypt("22212345678", "va_1:identity");
        assert_ne!(a, b, "random nonces");
        assert!(!a.contains("22212345678"));
        assert_eq!(cipher.decrypt(&a, "va_1:identity").unwrap(), "22212345678");
    }

    #[test]
    fn a_value_moved_to_another_row_does_not_decrypt() {
        let cipher = Cipher::new(&Cipher::generate_key(), &[]).unwrap();
        let sealed = cipher.encrypt("22212345678", "va_1:identity");
        assert_eq!(
            cipher.decrypt(&sealed, "va_2:identity"),
            Err(CryptoError::Tampered)
        );
    }

    #[test]
    fn rotation_keeps_old_values_readable() {
        let old = Cipher::generate_key();
        let new = Cipher::generate_key();
        let before = Cipher::new(&old, &[]).unwrap();
        let sealed = before.encrypt("secret", "ctx");
        let after = Cipher::new(&new, std::slice::from_ref(&old)).unwrap();
        assert_eq!(after.decrypt(&sealed, "ctx").unwrap(), "secret");
        assert!(after.is_stale(&sealed));
        assert!(!after.is_stale(&after.encrypt("secret", "ctx")));
        let resealed = after.reseal(&sealed, "ctx").unwrap().expect("stale");
        assert!(!after.is_stale(&resealed));
        assert_eq!(after.decrypt(&resealed, "ctx").unwrap(), "secret");
        assert_eq!(after.reseal(&resealed, "ctx").unwrap(), None);
        assert_eq!(
            after.reseal(&sealed, "other"),
            Err(CryptoError::Tampered),
            "the context still binds"
        );
        let forgotten = Cipher::new(&new, &[]).unwrap();
        assert!(matches!(
            forgotten.decrypt(&sealed, "ctx"),
            Err(CryptoError::UnknownKey(_))
        ));
    }

    #[test]
    fn provider_signatures_verify_only_with_the_right_secret_and_body() {
        use hmac::{Hmac, Mac};
        let body = br#"{"event":"transfer.received"}"#;
        let mut mac = <Hmac<sha2::Sha512> as Mac>::new_from_slice(b"s3cret").unwrap();
        mac.update(body);
        let signature = hex::encode(mac.finalize().into_bytes());
        assert!(verify_provider_signature("s3cret", body, &signature));
        assert!(!verify_provider_signature("other", body, &signature));
        assert!(!verify_provider_signature("s3cret", b"{}", &signature));
        assert!(!verify_provider_signature("s3cret", body, "zz"));
        assert!(!verify_provider_signature("s3cret", body, ""));
    }

    #[test]
    fn bad_keys_and_garbage_are_refused() {
        assert_eq!(Cipher::new("short", &[]).unwrap_err(), CryptoError::BadKey);
        let cipher = Cipher::new(&Cipher::generate_key(), &[]).unwrap();
        assert_eq!(cipher.decrypt("nonsense", "c"), Err(CryptoError::Malformed));
        let sealed = cipher.encrypt("x", "c");
        let mut tampered = sealed.clone();
        tampered.pop();
        tampered.push(if sealed.ends_with('A') { 'B' } else { 'A' });
        assert!(cipher.decrypt(&tampered, "c").is_err());
    }
}
