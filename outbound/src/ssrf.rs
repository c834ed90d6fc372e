//! Server-side request forgery guard for webhook targets, in both modes: a URL whose host is, or
//! resolves to, a private, loopback, link-local, unspecified, multicast, shared (CGNAT),
//! unique-local or otherwise non-public address is refused, when it is set and again at every
//! delivery. At delivery the check lives in the HTTP client's resolver ([`GuardedResolver`]):
//! the addresses it checked are the only ones the client may connect to, so a DNS answer that
//! changes between a check and the connection (rebinding) cannot slip through.
//!
//! [`TargetPolicy`] is the one rule. Loopback and private addresses (this machine and its
//! network) pass only when the operator allows them (`webhooks.allow_private_addresses`, which
//! `api dev` sets); link-local (cloud metadata), CGNAT, multicast and the rest never do.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use ops::config::WebhooksConfig;

/// What a non-public address is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressKind {
    Unspecified,
    Loopback,
    Private,
    UniqueLocal,
    SharedCgnat,
    LinkLocal,
    SiteLocal,
    Reserved,
    Documentation,
    Benchmarking,
    Multicast,
    Broadcast,
    Teredo,
}

impl AddressKind {
    pub fn label(self) -> &'static str {
        match self {
            Self::Unspecified => "unspecified",
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::UniqueLocal => "unique-local",
            Self::SharedCgnat => "shared (CGNAT)",
            Self::LinkLocal => "link-local",
            Self::SiteLocal => "site-local",
            Self::Reserved => "reserved",
            Self::Documentation => "documentation",
            Self::Benchmarking => "benchmarking",
            Self::Multicast => "multicast",
            Self::Broadcast => "broadcast",
            Self::Teredo => "Teredo",
        }
    }

    /// This machine, or a network of its own: what an operator may allow for development.
    /// Link-local stays refused: it is where cloud metadata services answer.
    fn is_local_network(self) -> bool {
        matches!(self, Self::Loopback | Self::Private | Self::UniqueLocal)
    }
}

impl fmt::Display for AddressKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum SsrfError {
    #[error("the URL must be http or https")]
    Scheme,
    #[error("the URL has no host")]
    NoHost,
    #[error("{host} is a {kind} address; webhooks go to public addresses only")]
    Private { host: String, kind: AddressKind },
    #[error("{host} resolves to {addr}, a {kind} address; webhooks go to public addresses only")]
    ResolvesPrivate {
        host: String,
        addr: IpAddr,
        kind: AddressKind,
    },
    #[error("{host} does not resolve: {reason}")]
    Unresolvable { host: String, reason: String },
}

/// None when `ip` is a public unicast address; otherwise what kind of address it is.
pub fn non_public_kind(ip: IpAddr) -> Option<AddressKind> {
    match ip {
        IpAddr::V4(v4) => v4_kind(v4),
        IpAddr::V6(v6) => v6_kind(v6),
    }
}

pub fn is_public(ip: IpAddr) -> bool {
    non_public_kind(ip).is_none()
}

fn v4_kind(ip: Ipv4Addr) -> Option<AddressKind> {
    use AddressKind::*;
    let [a, b, c, _] = ip.octets();
    if ip == Ipv4Addr::BROADCAST {
        return Some(Broadcast);
    }
    let kind = match (a, b, c) {
        (0, _, _) => Unspecified,
        (10, _, _) => Private,
        (100, 64..=127, _) => SharedCgnat,
        (127, _, _) => Loopback,
        (169, 254, _) => LinkLocal,
        (172, 16..=31, _) => Private,
        (192, 0, 0) => Reserved,
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Documentation,
        (192, 88, 99) => Reserved,
        (192, 168, _) => Private,
        (198, 18..=19, _) => Benchmarking,
        (224..=239, _, _) => Multicast,
        (240..=255, _, _) => Reserved,
        _ => return None,
    };
    Some(kind)
}

fn v6_kind(ip: Ipv6Addr) -> Option<AddressKind> {
    use AddressKind::*;
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_kind(v4);
    }
    let s = ip.segments();
    if ip.is_unspecified() {
        return Some(Unspecified);
    }
    if ip.is_loopback() {
        return Some(Loopback);
    }
    match s[0] {
        0xff00..=0xffff => return Some(Multicast),
        0xfe80..=0xfebf => return Some(LinkLocal),
        0xfec0..=0xfeff => return Some(SiteLocal),
        0xfc00..=0xfdff => return Some(UniqueLocal),
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
        return Some(Documentation);
    }
    if s[0] == 0x2001 && s[1] == 0 {
        return Some(Teredo);
    }
    // Everything public lives in global unicast, 2000::/3.
    if s[0] & 0xe000 != 0x2000 {
        return Some(Reserved);
    }
    None
}

/// Which targets webhooks may go to: public addresses only, or (an operator's explicit choice,
/// and `api dev`'s) also this machine and private networks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TargetPolicy {
    allow_private: bool,
}

impl TargetPolicy {
    pub const PUBLIC_ONLY: Self = Self {
        allow_private: false,
    };
    pub const ALLOW_PRIVATE: Self = Self {
        allow_private: true,
    };

    pub fn from_config(config: &WebhooksConfig) -> Self {
        Self {
            allow_private: config.allow_private_addresses,
        }
    }

    pub fn allows_private(self) -> bool {
        self.allow_private
    }

    /// Says so in the log of a process that validates or delivers webhook URLs, at its start.
    pub fn warn_at_start(self, process: &str) {
        if self.allow_private {
            tracing::warn!(
                process,
                "VAS_WEBHOOKS__ALLOW_PRIVATE_ADDRESSES is on: webhooks may be set to and sent \
                 to loopback and private addresses (this machine and its networks); never in \
                 production"
            );
        }
    }

    /// None when webhooks may go to `ip`; otherwise what kind of address refuses it.
    pub fn refuses(self, ip: IpAddr) -> Option<AddressKind> {
        non_public_kind(ip).filter(|kind| !(self.allow_private && kind.is_local_network()))
    }

    fn check_ip(self, host: &str, ip: IpAddr) -> Result<(), SsrfError> {
        match self.refuses(ip) {
            Some(kind) => Err(SsrfError::Private {
                host: host.to_owned(),
                kind,
            }),
            None => Ok(()),
        }
    }

    /// What can be said about a URL without asking DNS: its scheme, and its host when that is
    /// an address.
    pub fn check_url_static(self, url: &url::Url) -> Result<(), SsrfError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(SsrfError::Scheme);
        }
        match url.host() {
            None => Err(SsrfError::NoHost),
            Some(url::Host::Ipv4(ip)) => self.check_ip(&ip.to_string(), IpAddr::V4(ip)),
            Some(url::Host::Ipv6(ip)) => self.check_ip(&ip.to_string(), IpAddr::V6(ip)),
            // Names are judged by what they resolve to, `localhost` included.
            Some(url::Host::Domain(_)) => Ok(()),
        }
    }

    /// The full check for setting a URL: the static one, then every address its name resolves
    /// to must be allowed.
    pub async fn check_url(self, url: &url::Url) -> Result<(), SsrfError> {
        self.check_url_static(url)?;
        if let Some(url::Host::Domain(name)) = url.host() {
            self.resolve(name).await?;
        }
        Ok(())
    }

    /// Resolves `host` and returns its addresses if every one is allowed.
    pub async fn resolve(self, host: &str) -> Result<Vec<SocketAddr>, SsrfError> {
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
            if let Some(kind) = self.refuses(addr.ip()) {
                return Err(SsrfError::ResolvesPrivate {
                    host: host.to_owned(),
                    addr: addr.ip(),
                    kind,
                });
            }
        }
        Ok(addrs)
    }
}

/// A resolver for reqwest that answers only with addresses its policy allows, and fails the
/// whole lookup when any address is refused. The client connects to exactly what it returned.
#[derive(Debug, Clone, Default)]
pub struct GuardedResolver(pub TargetPolicy);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        let policy = self.0;
        Box::pin(async move {
            let addrs = policy
                .resolve(&host)
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
            ("255.255.255.255", "broadcast"),
            ("240.0.0.1", "reserved"),
            ("192.0.2.7", "documentation"),
            ("::ffff:169.254.169.254", "link-local"),
            ("::7f00:1", "reserved"),
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
            assert_eq!(
                non_public_kind(ip(addr)).map(AddressKind::label),
                Some(kind),
                "{addr}"
            );
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
        let check =
            |u: &str| TargetPolicy::PUBLIC_ONLY.check_url_static(&url::Url::parse(u).unwrap());
        assert!(check("https://93.184.216.34/hook").is_ok());
        assert!(check("https://example.com/hook").is_ok());
        assert!(matches!(
            check("https://127.0.0.1/hook"),
            Err(SsrfError::Private {
                kind: AddressKind::Loopback,
                ..
            })
        ));
        assert!(check("https://[::1]:8443/").is_err());
        assert!(check("https://[fd00::5]/").is_err());
        assert!(check("https://[::ffff:127.0.0.1]/").is_err());
        assert!(check("https://localhost/").is_ok(), "names wait for DNS");
        assert!(check("http://169.254.169.254/latest/meta-data").is_err());
        assert_eq!(check("ftp://example.com/"), Err(SsrfError::Scheme));
        // Decimal and short forms are normalised by the URL parser, then refused.
        assert!(check("http://2130706433/").is_err());
        assert!(check("http://127.1/").is_err());
    }

    #[test]
    fn allowing_private_addresses_allows_this_machine_and_private_networks_only() {
        let allowed = |a: &str| TargetPolicy::ALLOW_PRIVATE.refuses(ip(a)).is_none();
        for a in [
            "127.0.0.1",
            "::1",
            "10.0.0.1",
            "172.16.0.1",
            "192.168.1.1",
            "fd00::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(allowed(a), "{a}");
            assert!(TargetPolicy::PUBLIC_ONLY.refuses(ip(a)).is_some(), "{a}");
        }
        for a in [
            "169.254.169.254",
            "fe80::1",
            "100.64.0.1",
            "0.0.0.0",
            "::",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.1",
        ] {
            assert!(!allowed(a), "{a} stays refused");
        }
    }

    #[tokio::test]
    async fn names_that_resolve_to_private_addresses_are_refused() {
        let err = TargetPolicy::PUBLIC_ONLY
            .check_url(&url::Url::parse("https://localhost/").unwrap())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("loopback"), "{err}");
        let err = TargetPolicy::PUBLIC_ONLY
            .resolve("localhost")
            .await
            .unwrap_err();
        assert!(
            matches!(err, SsrfError::ResolvesPrivate { .. }),
            "localhost resolves to loopback: {err:?}"
        );
        assert!(
            TargetPolicy::ALLOW_PRIVATE
                .resolve("localhost")
                .await
                .is_ok()
        );
    }
}
