//! The dashboard's secrets: session tokens and their cookies, form tokens, TOTP codes and the QR
//! code of an enrolment (password hashes: `passwords`). Nothing here logs or stores a secret in
//! plain text: tokens are kept as SHA-256, TOTP secrets sealed.

use axum::http::HeaderMap;
use axum::http::header;
use base64::Engine;
use domain::keys::sha256_hex;
use rand::Rng;
use subtle::ConstantTimeEq;
use totp_rs::{Secret, Totp};

/// The session cookie: a 256-bit random token.
pub const SESSION_COOKIE: &str = "vas_session";
/// Before signing in there is no session: the sign-in form's token is bound to this cookie
/// instead (a login-CSRF guard).
pub const SIGN_IN_COOKIE: &str = "vas_signin";
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

/// The value of a cookie the browser sent.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
}

/// The token a POST's form token must be derived from: the session's, else the sign-in cookie's.
pub fn form_cookie(headers: &HeaderMap) -> Option<&str> {
    cookie(headers, SESSION_COOKIE).or_else(|| cookie(headers, SIGN_IN_COOKIE))
}

/// `Secure` unless the dashboard is reached over plain HTTP on a loopback address (`api dev`,
/// tests), where a browser would refuse to send it back. The scheme is plain HTTP unless a
/// proxy in front says `X-Forwarded-Proto: https`.
pub fn secure_cookies(headers: &HeaderMap) -> bool {
    let https = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"));
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    https || !is_loopback_host(host)
}

fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// `Set-Cookie` for a cookie under `/dashboard`; `max_age` None is a browser-session cookie.
pub fn set_cookie(name: &str, value: &str, max_age: Option<i64>, secure: bool) -> String {
    let mut cookie = format!("{name}={value}; HttpOnly; SameSite=Strict; Path=/dashboard");
    if let Some(age) = max_age {
        cookie.push_str(&format!("; Max-Age={age}"));
    }
    if secure {
        cookie.push_str("; Secure");
    }
    cookie
}

pub fn clear_cookie(name: &str, secure: bool) -> String {
    set_cookie(name, "", Some(0), secure)
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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn cookies_are_read_by_name() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; vas_session=abc; vas_signin="),
        );
        assert_eq!(cookie(&headers, SESSION_COOKIE), Some("abc"));
        assert_eq!(cookie(&headers, SIGN_IN_COOKIE), None);
        assert_eq!(form_cookie(&headers), Some("abc"));
    }

    #[test]
    fn secure_is_left_out_on_plain_loopback_only() {
        let with_host = |host: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(header::HOST, HeaderValue::from_static(host));
            h
        };
        assert!(!secure_cookies(&with_host("127.0.0.1:8080")));
        assert!(!secure_cookies(&with_host("localhost:8080")));
        assert!(!secure_cookies(&with_host("[::1]:8080")));
        assert!(secure_cookies(&with_host("dashboard.example.com")));
        assert!(secure_cookies(&with_host("10.0.0.5:8080")));
        let mut proxied = with_host("127.0.0.1:8080");
        proxied.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        assert!(secure_cookies(&proxied));
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
