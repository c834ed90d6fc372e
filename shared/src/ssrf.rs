//! Server-side request forgery guard for live-mode webhook targets: a URL whose host is, or
//! resolves to, a private, loopback, link-local, unspecified, multicast, shared (CGNAT),
//! unique-local or otherwise non-public address is refused, when it is set and again at every
//! delivery. At delivery the check lives in the HTTP client's resolver ([`PublicOnlyResolver`]):
//! the addresses it checked are the only ones the client may connect to, so a DNS answer that
//! changes between a check and the connection (rebinding) cannot slip through.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum SsrfError {
    #[error("the URL must be http or https")]
    Scheme,
    #[error("the URL has no host")]
    NoHost,
    #[error("{host} is a {kind} address; live webhooks go to public addresses only")]
    Private { host: String, kind: &'static str },
    #[error(
        "{host} resolves to {addr}, a {kind} address; live webhooks go to public addresses only"
    )]
    ResolvesPrivate {
        host: String,
        addr: IpAddr,
        kind: &'static str,
    },
    #[error("{host} does not resolve: {reason}")]
    Unresolvable { host: String, reason: String },
}

/// None when `ip` is a public unicast address; otherwise what kind of address it is.
pub fn non_public_kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_kind(v4),
        IpAddr::V6(v6) => v6_kind(v6),
    }
}

pub fn is_public(ip: IpAddr) -> bool {
    non_public_kind(ip).is_none()
}

fn v4_kind(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    let kind = match (a, b, c) {
        (0, _, _) => "unspecified",
        (10, _, _) => "private",
        (100, 64..=127, _) => "shared (CGNAT)",
        (127, _, _) => "loopback",
        (169, 254, _) => "link-local",
        (172, 16..=31, _) => "private",
        (192, 0, 0) => "reserved",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        (192, 88, 99) => "reserved",
        (192, 168, _) => "private",
        (198, 18..=19, _) => "benchmarking",
        (224..=239, _, _) => "multicast",
        (240..=255, _, _) => "reserved",
        _ => return None,
    };
    Some(kind)
}

fn v6_kind(ip: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_kind(v4);
    }
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    match s[0] {
        0xff00..=0xffff => return Some("multicast"),
        0xfe80..=0xfebf => return Some("link-local"),
        0xfec0..=0xfeff => return Some("site-local"),
        0xfc00..=0xfdff => return Some("unique-local"),
        _ => {}
    }
    // 6to4 carries an IPv4 address: judge that one.
    if s[0] == 0x2002 {
        let v4 = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
        return v4_kind(v4);
    }
    // NAT64 (64:ff9b::/96) likewise.
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        let v4 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
        return v4_kind(v4);
    }
    if s[0] == 0x2001 && s[1] == 0x0db8 {
        return Some("documentation");
    }
    if s[0] == 0x2001 && s[1] == 0 {
        return Some("Teredo");
    }
    // Everything public lives in global unicast, 2000::/3.
    if s[0] & 0xe000 != 0x2000 {
        return Some("reserved");
    }
    None
}

/// What can be said about a URL without asking DNS: its scheme, and its host when that is an
/// address.
pub fn check_url_static(url: &url::Url) -> Result<(), SsrfError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(SsrfError::Scheme);
    }
    match url.host() {
        None => Err(SsrfError::NoHost),
        Some(url::Host::Ipv4(ip)) => check_ip(&ip.to_string(), IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => check_ip(&ip.to_string(), IpAddr::V6(ip)),
        // Names are judged by what they resolve to, `localhost` included.
        Some(url::Host::Domain(_)) => Ok(()),
    }
}

fn check_ip(host: &str, ip: IpAddr) -> Result<(), SsrfError> {
    match non_public_kind(ip) {
        Some(kind) => Err(SsrfError::Private {
            host: host.to_owned(),
            kind,
        }),
        None => Ok(()),
    }
}

/// The full check for setting a live URL: the static one, then every address its name resolves
/// to must be public.
pub async fn check_url(url: &url::Url) -> Result<(), SsrfError> {
    check_url_static(url)?;
    if let Some(url::Host::Domain(name)) = url.host() {
        resolve_public(name).await?;
    }
    Ok(())
}

/// Resolves `host` and returns its addresses if every one is public.
pub async fn resolve_public(host: &str) -> Result<Vec<SocketAddr>, SsrfError> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, 0))
        .await
        .map_err(|e| SsrfError::Unresolvable {
            host: host.to_owned(),
            reason: e.to_string(),
        })?
        .collect();
    if addrs.is_empty() {
        return Err(SsrfError::Unresolvable {
            host: host.to_owned(),
            reason: "no addresses".into(),
        });
    }
    for addr in &addrs {
        if let Some(kind) = non_public_kind(addr.ip()) {
            return Err(SsrfError::ResolvesPrivate {
                host: host.to_owned(),
                addr: addr.ip(),
                kind,
            });
        }
    }
    Ok(addrs)
}

/// A resolver for reqwest that answers only with public addresses, and fails the whole lookup
/// when any address is not public. The client connects to exactly what it returned.
#[derive(Debug, Clone, Default)]
pub struct PublicOnlyResolver;

impl reqwest::dns::Resolve for PublicOnlyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let addrs = resolve_public(&host)
                .await
                .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn non_public_addresses_are_recognised() {
        for (addr, kind) in [
            ("127.0.0.1", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("172.31.255.255", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "link-local"),
            ("0.0.0.0", "unspecified"),
            ("100.64.0.1", "shared (CGNAT)"),
            ("100.127.255.254", "shared (CGNAT)"),
            ("224.0.0.1", "multicast"),
            ("255.255.255.255", "reserved"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fe80::1", "link-local"),
            ("fd12:3456::1", "unique-local"),
            ("fc00::1", "unique-local"),
            ("ff02::1", "multicast"),
            ("::ffff:127.0.0.1", "loopback"),
            ("::ffff:10.0.0.1", "private"),
            ("2002:7f00:1::", "loopback"),
            ("64:ff9b::a9fe:a9fe", "link-local"),
            ("2001:db8::1", "documentation"),
        ] {
            assert_eq!(non_public_kind(ip(addr)), Some(kind), "{addr}");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for addr in [
            "93.184.216.34",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::6810:85e5",
            "::ffff:8.8.8.8",
            "2002:0808:0808::",
        ] {
            assert!(is_public(ip(addr)), "{addr}");
        }
    }

    #[test]
    fn urls_are_judged_before_dns_where_they_can_be() {
        let check = |u: &str| check_url_static(&url::Url::parse(u).unwrap());
        assert!(check("https://93.184.216.34/hook").is_ok());
        assert!(check("https://example.com/hook").is_ok());
        assert!(matches!(
            check("https://127.0.0.1/hook"),
            Err(SsrfError::Private {
                kind: "loopback",
                ..
            })
        ));
        assert!(check("https://[::1]:8443/").is_err());
        assert!(check("https://[fd00::5]/").is_err());
        assert!(check("https://localhost/").is_ok(), "names wait for DNS");
        assert!(check("http://169.254.169.254/latest/meta-data").is_err());
        assert_eq!(check("ftp://example.com/"), Err(SsrfError::Scheme));
        // Decimal and short forms are normalised by the URL parser, then refused.
        assert!(check("http://2130706433/").is_err());
        assert!(check("http://127.1/").is_err());
    }

    #[tokio::test]
    async fn names_that_resolve_to_private_addresses_are_refused() {
        let err = check_url(&url::Url::parse("https://localhost/").unwrap())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("loopback"), "{err}");
        let err = resolve_public("localhost").await.unwrap_err();
        assert!(
            matches!(err, SsrfError::ResolvesPrivate { .. }),
            "localhost resolves to loopback: {err:?}"
        );
    }
}
