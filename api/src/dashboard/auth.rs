//! Who a person is: session tokens (their cookies: `crate::cookies`), form tokens, TOTP codes and the QR code of
//! an enrolment, and the counted password and code checks of signing in and of re-entering a
//! password (password hashes: `crate::passwords`). Nothing here logs or stores a secret in plain
//! text: tokens are kept as SHA-256, TOTP secrets sealed.

use axum::http::HeaderMap;
use base64::Engine;
use crypto::Cipher;
use domain::AuditAction;
use domain::keys::sha256_hex;
use rand::Rng;
use sea_orm::{DatabaseConnection, TransactionTrait};
use std::future::Future;
use store::audit::{self, Actor, Entry};
use store::users::{self, User};
use subtle::ConstantTimeEq;
use totp_rs::{Secret, Totp};

use crate::cookies::{SESSION_COOKIE, SIGN_IN_COOKIE, cookie};
use crate::passwords::Hashing;

/// How long a correct password waits for its TOTP code.
pub const TOTP_STEP_SECS: i64 = 300;
/// The name authenticator apps show for the service.
pub const TOTP_ISSUER: &str = "Virtual Account Service";

/// 32 random bytes, base64url: a session token or a sign-in cookie.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// What the database keeps instead of a session token.
pub fn token_hash(token: &str) -> String {
    sha256_hex(token)
}

/// The form token of a cookie's token: bound to it, and telling nothing about it (nor about its
/// stored hash).
pub fn form_token(cookie_token: &str) -> String {
    sha256_hex(&format!("dashboard-form:{cookie_token}"))
}

pub fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// The token a POST's form token must be derived from: the session's, else the sign-in cookie's.
pub fn form_cookie(headers: &HeaderMap) -> Option<&str> {
    cookie(headers, SESSION_COOKIE).or_else(|| cookie(headers, SIGN_IN_COOKIE))
}

/// A fresh TOTP secret (160 bits, RFC 4226's recommendation), as base32 for sealing.
pub fn new_totp_secret() -> String {
    let mut bytes = [0u8; 20];
    rand::rng().fill(&mut bytes);
    Secret::from(bytes).to_base32()
}

/// RFC 6238 with the usual parameters every authenticator app supports: SHA-1, 6 digits, 30 s,
/// one step of clock skew either way.
pub fn totp(secret_base32: &str, email: &str) -> Option<Totp> {
    let secret = Secret::try_from_base32(secret_base32).ok()?;
    totp_rs::Builder::new()
        .with_secret(secret)
        .with_account_name(email.replace(':', "_"))
        .with_issuer(Some(TOTP_ISSUER))
        .build()
        .ok()
}

/// A user's sealed TOTP secret (`sealed`: the enrolled one or the pending one), opened: the
/// base32 secret and its generator.
pub fn unseal_totp(cipher: &Cipher, user: &User, sealed: &str) -> anyhow::Result<(String, Totp)> {
    let secret = cipher
        .decrypt(sealed, &users::totp_context(&user.id))
        .map_err(|e| anyhow::anyhow!("a TOTP secret does not decrypt: {e}"))?;
    let totp =
        totp(&secret, &user.email).ok_or_else(|| anyhow::anyhow!("a TOTP secret is not valid"))?;
    Ok((secret, totp))
}

/// The time step a code belongs to, when it is right at `unix_secs`.
pub fn check_code(totp: &Totp, code: &str, unix_secs: u64) -> Option<u64> {
    let code: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    if code.len() != 6 || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    totp.check(&code, unix_secs)
}

/// The otpauth URI of an enrolment as an inline SVG QR code: drawn here, so nothing is fetched
/// and the page's CSP needs no exception.
pub fn qr_svg(text: &str) -> Option<String> {
    use qrcodegen::{QrCode, QrCodeEcc};
    let qr = QrCode::encode_text(text, QrCodeEcc::Medium).ok()?;
    let border = 4;
    let size = qr.size() + 2 * border;
    let mut path = String::new();
    for y in 0..qr.size() {
        for x in 0..qr.size() {
            if qr.get_module(x, y) {
                path.push_str(&format!("M{},{}h1v1h-1z", x + border, y + border));
            }
        }
    }
    Some(format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {size} {size}" class="qr" role="img" aria-label="QR code of the set-up key" shape-rendering="crispEdges"><rect width="100%" height="100%" fill="#ffffff"/><path d="{path}" fill="#000000"/></svg>"##
    ))
}

// Signing in and re-entering a password: the attempts counted per e-mail (docs/dashboard.md).

/// The throttle's key: the e-mail as typed, lower-cased, hashed (unknown ones count alike).
pub fn throttle_key(typed_email: &str) -> String {
    sha256_hex(&format!("sign-in:{}", typed_email.trim().to_lowercase()))
}

/// What one counted check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checked {
    Right,
    /// Wrong; `locked` when this attempt was the fifth, which locked the e-mail.
    Wrong {
        locked: bool,
    },
    /// The e-mail is locked: nothing was checked.
    Locked,
}

/// One password or TOTP code for the e-mail of `key`, counted BEFORE it is checked, in one
/// atomic step with the decision to check it (`users::admit_sign_in_attempt`), so that
/// attempts sent in parallel count the same as one after the other and at most five are ever
/// checked per window (docs/dashboard.md). `check` runs only when the attempt is admitted; a right
/// one gives its count back, and so does one that could not be checked (busy, or our failure).
pub async fn counted_check<F, Fut>(
    db: &DatabaseConnection,
    key: &str,
    check: F,
) -> anyhow::Result<Checked>
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = anyhow::Result<bool>>,
{
    let now = domain::time::now();
    let Some(admitted) = users::admit_sign_in_attempt(db, key, now).await? else {
        return Ok(Checked::Locked);
    };
    match check().await {
        Ok(false) => Ok(Checked::Wrong {
            locked: admitted.is_locked(now),
        }),
        right_or_unchecked => {
            users::refund_sign_in_attempt(db, key, &admitted).await?;
            right_or_unchecked.map(|_| Checked::Right)
        }
    }
}

/// The audit log's record of a wrong password or code (`failed`: what was wrong; None for a
/// re-entered password, which is no sign-in) and of the lock it caused: against the user when
/// the e-mail is theirs, else against no one and no business (named by the throttle's hash of
/// what was typed, never the text).
pub async fn record_failure(
    db: &DatabaseConnection,
    user: Option<&User>,
    key: &str,
    addr: Option<String>,
    failed: Option<&str>,
    locked: bool,
) -> anyhow::Result<()> {
    let now = domain::time::now();
    let (actor, entry) = attempt_of(user, key, addr);
    let txn = db.begin().await?;
    if let Some(detail) = failed {
        let failed = entry(AuditAction::SignInFailed).detail(detail);
        audit::record(&txn, &actor, failed, now).await?;
    }
    if locked {
        let lock = entry(AuditAction::SignInLocked).detail("five attempts within 15 minutes");
        audit::record(&txn, &actor, lock, now).await?;
    }
    txn.commit().await?;
    Ok(())
}

/// The audit log's record of a sign-in refused unchecked because the e-mail is locked (whatever
/// was typed, the right password too), folded into one row per e-mail, address and minute: a
/// flood of them adds a count, not rows.
pub async fn record_refusal(
    db: &DatabaseConnection,
    user: Option<&User>,
    key: &str,
    addr: Option<String>,
) -> anyhow::Result<()> {
    let (actor, entry) = attempt_of(user, key, addr);
    let entry = entry(AuditAction::SignInRefused).detail("not checked: the e-mail is locked");
    audit::record_folded(db, &actor, entry, key, domain::time::now()).await?;
    Ok(())
}

/// Who made a sign-in attempt, and its entry: the user's, against their business, when the
/// e-mail is theirs; else no one's and no business's, named by the throttle's hash of what was
/// typed, never the text.
fn attempt_of<'a>(
    user: Option<&'a User>,
    key: &str,
    addr: Option<String>,
) -> (Actor, impl Fn(AuditAction) -> Entry<'a>) {
    let actor = match user {
        Some(user) => Actor::user(&user.id, &user.email, addr),
        None => Actor::anonymous(addr),
    };
    let target = format!("e-mail {key}");
    let entry = move |action| match user {
        Some(user) => Entry::new(&user.business_id, action),
        None => Entry::without_business(action).target(target.clone()),
    };
    (actor, entry)
}

/// A signed-in user re-entering their password (a password change, turning TOTP on or off, a
/// live key or webhook change, the settlement account, the team): false when it is wrong or the
/// e-mail is locked. Each counts in the sign-in throttle like a sign-in ([`counted_check`]); pages call it as `Signed::password_reentered`, so
/// a taken-over session cannot guess the password any faster than the sign-in form allows.
pub async fn password_reentered(
    db: &DatabaseConnection,
    hashing: &Hashing,
    user: &User,
    client_addr: Option<String>,
    typed: &str,
) -> anyhow::Result<bool> {
    let key = throttle_key(&user.email);
    let (typed, hash) = (typed.to_owned(), user.password_hash.clone());
    let checked = counted_check(db, &key, || async {
        Ok(hashing.verify(typed, Some(hash)).await?)
    })
    .await?;
    if let Checked::Wrong { locked } = checked {
        tracing::info!(user_id = %user.id, locked, "dashboard password re-entry failed");
        if locked {
            record_failure(db, Some(user), &key, client_addr, None, true).await?;
        }
    }
    Ok(checked == Checked::Right)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderValue, header};

    #[test]
    fn a_form_token_comes_from_the_session_cookie_first() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; vas_session=abc; vas_signin="),
        );
        assert_eq!(form_cookie(&headers), Some("abc"));
    }

    #[test]
    fn totp_codes_follow_rfc_6238() {
        let secret = new_totp_secret();
        let totp = totp(&secret, "ada@example.com").unwrap();
        let now = 1_700_000_000;
        let code = totp.generate(now).to_string();
        assert_eq!(check_code(&totp, &code, now), Some(now / 30));
        assert_eq!(check_code(&totp, &code, now + 3600), None);
        assert_eq!(check_code(&totp, "12345", now), None);
        let url = totp.to_url().unwrap();
        assert!(url.starts_with("otpauth://totp/"), "{url}");
        let svg = qr_svg(&url).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("<path"));
    }
}
