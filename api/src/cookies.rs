//! The dashboard's cookies: their names, how one is set and read, and how they are sent as
//! configured ([`CookiePolicy`]). Here, below `state`, because the state decides the policy once
//! at start; the dashboard's pages and its cookie layer use it.

use axum::http::HeaderMap;
use axum::http::header;

/// The session cookie: a 256-bit random token.
pub const SESSION_COOKIE: &str = "vas_session";
/// Before signing in there is no session: the sign-in form's token is bound to this cookie
/// instead (a login-CSRF guard).
pub const SIGN_IN_COOKIE: &str = "vas_signin";

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

/// How the dashboard's cookies are sent (docs/dashboard.md), decided once at start from
/// configuration, never from a request: behind a TLS proxy the api may see `Host: 127.0.0.1` over
/// plain HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CookiePolicy {
    /// `api dev` listening on loopback (and no https public URL): plain HTTP to this machine,
    /// where a browser would keep a `Secure` cookie only on `localhost`-like hosts. Names and
    /// paths as written (`vas_session`, `Path=/dashboard`).
    Plain,
    /// Everywhere else, `api serve` with no public URL included: `Secure`, and named
    /// `__Host-…`, so neither a sibling host nor a plain-HTTP attacker can plant one. Browsers
    /// keep a `__Host-` cookie only with `Path=/` and no `Domain`, so its path is `/`, not
    /// `/dashboard`: the prefix's guarantee matters more, and the API never reads cookies
    /// (docs/dashboard.md).
    HostPrefixed,
}

/// The names the dashboard sets, as the handlers know them.
const OUR_COOKIES: [&str; 2] = [SESSION_COOKIE, SIGN_IN_COOKIE];
const HOST_PREFIX: &str = "__Host-";

impl CookiePolicy {
    /// `dev_listener`: where `api dev` listens (None for `api serve`).
    pub fn new(public_url: Option<&str>, dev_listener: Option<std::net::SocketAddr>) -> Self {
        let https = public_url
            .and_then(|u| url::Url::parse(u).ok())
            .is_some_and(|u| u.scheme() == "https");
        match dev_listener {
            Some(addr) if !https && addr.ip().is_loopback() => CookiePolicy::Plain,
            _ => CookiePolicy::HostPrefixed,
        }
    }

    /// A `Set-Cookie` value of ours as this policy sends it; any other cookie unchanged.
    pub fn dress(self, set_cookie: &str) -> String {
        let mut parts = set_cookie.split(';').map(str::trim);
        let Some((name, value)) = parts.next().and_then(|p| p.split_once('=')) else {
            return set_cookie.to_owned();
        };
        if !OUR_COOKIES.contains(&name) {
            return set_cookie.to_owned();
        }
        let attributes = parts.filter(|a| {
            let key = a.split('=').next().unwrap_or("").trim();
            !key.eq_ignore_ascii_case("secure") && !key.eq_ignore_ascii_case("path")
        });
        let (name, path, secure) = match self {
            CookiePolicy::Plain => (name.to_owned(), "/dashboard", false),
            CookiePolicy::HostPrefixed => (format!("{HOST_PREFIX}{name}"), "/", true),
        };
        let mut out = format!("{name}={value}");
        for attribute in attributes {
            out.push_str("; ");
            out.push_str(attribute);
        }
        out.push_str(&format!("; Path={path}"));
        if secure {
            out.push_str("; Secure");
        }
        out
    }

    /// The `Cookie` header as the handlers read it: under `HostPrefixed`, `__Host-vas_session`
    /// becomes `vas_session`, and an unprefixed `vas_session` (which anyone able to set a cookie
    /// for this host over HTTP, or from a sibling host, could have planted) is dropped.
    pub fn undress(self, cookie_header: &str) -> String {
        if self == CookiePolicy::Plain {
            return cookie_header.to_owned();
        }
        cookie_header
            .split(';')
            .map(str::trim)
            .filter(|pair| !pair.is_empty())
            .filter_map(|pair| {
                let name = pair.split('=').next().unwrap_or("");
                if OUR_COOKIES.contains(&name) {
                    return None;
                }
                match pair.strip_prefix(HOST_PREFIX) {
                    Some(bare)
                        if OUR_COOKIES
                            .iter()
                            .any(|n| bare.split('=').next() == Some(n)) =>
                    {
                        Some(bare)
                    }
                    _ => Some(pair),
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// `Set-Cookie` for a cookie under `/dashboard`; `max_age` None is a browser-session cookie.
/// A cookie of ours in its plain form (no `Secure`, `Path=/dashboard`); the dashboard\'s cookie
/// layer dresses it as configured ([`CookiePolicy`]), whatever the request\'s `Host` says.
pub fn set_cookie(name: &str, value: &str, max_age: Option<i64>) -> String {
    let mut cookie = format!("{name}={value}; HttpOnly; SameSite=Strict; Path=/dashboard");
    if let Some(age) = max_age {
        cookie.push_str(&format!("; Max-Age={age}"));
    }
    cookie
}

pub fn clear_cookie(name: &str) -> String {
    set_cookie(name, "", Some(0))
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
    }

    #[test]
    fn only_api_dev_on_loopback_goes_without_secure() {
        let at = |s: &str| Some(s.parse::<std::net::SocketAddr>().unwrap());
        use CookiePolicy::*;
        assert_eq!(CookiePolicy::new(None, at("127.0.0.1:8080")), Plain);
        assert_eq!(CookiePolicy::new(None, at("[::1]:8080")), Plain);
        let local = Some("http://127.0.0.1:8080");
        assert_eq!(CookiePolicy::new(local, at("127.0.0.1:8080")), Plain);
        // An https public address wins, even for `api dev` (behind a TLS proxy).
        let public = Some("https://vas.example.com");
        assert_eq!(
            CookiePolicy::new(public, at("127.0.0.1:8080")),
            HostPrefixed
        );
        assert_eq!(CookiePolicy::new(public, None), HostPrefixed);
        // `api dev` reachable from other machines, and `api serve` however configured.
        assert_eq!(CookiePolicy::new(None, at("0.0.0.0:8080")), HostPrefixed);
        assert_eq!(CookiePolicy::new(None, None), HostPrefixed);
        assert_eq!(CookiePolicy::new(local, None), HostPrefixed);
    }

    #[test]
    fn cookies_are_dressed_as_the_policy_says() {
        use CookiePolicy::*;
        let plain = set_cookie(SESSION_COOKIE, "tok", None);
        let cleared = clear_cookie(SIGN_IN_COOKIE);
        let cases = [
            (
                HostPrefixed,
                plain.as_str(),
                "__Host-vas_session=tok; HttpOnly; SameSite=Strict; Path=/; Secure",
            ),
            (
                Plain,
                &plain,
                "vas_session=tok; HttpOnly; SameSite=Strict; Path=/dashboard",
            ),
            (
                Plain,
                &cleared,
                "vas_signin=; HttpOnly; SameSite=Strict; Max-Age=0; Path=/dashboard",
            ),
            (
                HostPrefixed,
                &cleared,
                "__Host-vas_signin=; HttpOnly; SameSite=Strict; Max-Age=0; Path=/; Secure",
            ),
            (HostPrefixed, "other=1; Path=/x", "other=1; Path=/x"),
        ];
        for (policy, sent, dressed) in cases {
            assert_eq!(policy.dress(sent), dressed, "{policy:?} {sent}");
        }
    }

    #[test]
    fn prefixed_cookies_are_read_and_unprefixed_ones_refused() {
        let sent = "a=1; vas_session=planted; __Host-vas_session=real; __Host-vas_signin=s; \
                    __Host-other=2";
        assert_eq!(
            CookiePolicy::HostPrefixed.undress(sent),
            "a=1; vas_session=real; vas_signin=s; __Host-other=2"
        );
        assert_eq!(CookiePolicy::Plain.undress(sent), sent);
    }
}
