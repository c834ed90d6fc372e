//! Who the client is behind reverse proxies (docs/operations/processes-and-configuration.md):
//! `VAS_HTTP__TRUSTED_PROXIES` lists the addresses and ranges whose `X-Forwarded-For` is believed;
//! the client is the right-most address of the chain that is not one of them. Pure: no I/O, so
//! every rule is tested here.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// The trusted proxies: addresses (`10.0.0.7`, `::1`) or CIDR ranges (`10.0.0.0/8`). Empty (the
/// default): no proxy is trusted and the client is the TCP peer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, addr: IpAddr) -> bool {
        let addr = canonical(addr);
        self.0.iter().any(|net| net.contains(&addr))
    }

    /// The client's address: `peer` itself unless it is trusted; then, walking the
    /// `X-Forwarded-For` values (in the order the headers came) from the right, the first
    /// address that is not trusted. Entries left of it were written by the client and prove
    /// nothing. A malformed entry ends the walk at the trusted hop that passed it on (nothing
    /// beyond it can be believed); a chain of trusted hops only gives its left-most address.
    pub fn client<'a>(&self, peer: IpAddr, forwarded_for: impl Iterator<Item = &'a str>) -> IpAddr {
        let mut client = canonical(peer);
        if !self.contains(client) {
            return client;
        }
        let entries: Vec<&str> = forwarded_for.flat_map(|v| v.split(',')).collect();
        for entry in entries.into_iter().rev() {
            let Some(hop) = parse_hop(entry) else {
                return client;
            };
            client = hop;
            if !self.contains(hop) {
                return hop;
            }
        }
        client
    }
}

/// One `X-Forwarded-For` entry: an address, possibly with a port (`192.0.2.1:4711`,
/// `[2001:db8::1]:4711`), as some proxies write it.
fn parse_hop(entry: &str) -> Option<IpAddr> {
    let entry = entry.trim();
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return Some(canonical(ip));
    }
    if let Some(rest) = entry.strip_prefix('[') {
        let (ip, _port) = rest.split_once(']')?;
        return ip.parse::<IpAddr>().ok().map(canonical);
    }
    let (ip, port) = entry.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    ip.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

/// An IPv4 client seen through a dual-stack socket (`::ffff:192.0.2.1`) is that IPv4 address, so
/// `192.0.2.0/24` matches it and the audit log shows it as people write it.
fn canonical(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
        v4 => v4,
    }
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not an IP address or CIDR range (e.g. 10.0.0.7, 10.0.0.0/8, fd00::/8)")]
pub struct InvalidProxy(String);

impl FromStr for TrustedProxies {
    type Err = InvalidProxy;

    /// A comma-separated list, as one environment variable holds it.
    fn from_str(list: &str) -> Result<Self, InvalidProxy> {
        list.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(parse_range)
            .collect::<Result<Vec<_>, _>>()
            .map(TrustedProxies)
    }
}

fn parse_range(text: &str) -> Result<IpNet, InvalidProxy> {
    let text = text.trim();
    if let Ok(net) = text.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    text.parse::<IpAddr>()
        .map(|ip| IpNet::from(canonical(ip)))
        .map_err(|_| InvalidProxy(text.to_owned()))
}

impl fmt::Display for TrustedProxies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let texts: Vec<String> = self.0.iter().map(IpNet::to_string).collect();
        f.write_str(&texts.join(","))
    }
}

impl Serialize for TrustedProxies {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(IpNet::to_string))
    }
}

/// A TOML list (`["10.0.0.0/8", "::1"]`, also `VAS_HTTP__TRUSTED_PROXIES=[…]`) or one string of
/// comma-separated entries (`VAS_HTTP__TRUSTED_PROXIES=10.0.0.0/8,::1`).
impl<'de> Deserialize<'de> for TrustedProxies {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ListOrString;

        impl<'de> Visitor<'de> for ListOrString {
            type Value = TrustedProxies;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of IP addresses or CIDR ranges")
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<TrustedProxies, E> {
                v.parse().map_err(E::custom)
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TrustedProxies, A::Error> {
                let mut nets = Vec::new();
                while let Some(text) = seq.next_element::<String>()? {
                    nets.push(parse_range(&text).map_err(de::Error::custom)?);
                }
                Ok(TrustedProxies(nets))
            }
        }

        deserializer.deserialize_any(ListOrString)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn trusted(list: &str) -> TrustedProxies {
        list.parse().unwrap()
    }

    #[test]
    fn without_trusted_proxies_the_peer_is_the_client() {
        let none = TrustedProxies::default();
        assert_eq!(
            none.client(ip("10.0.0.1"), ["203.0.113.9"].into_iter()),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn an_untrusted_peer_cannot_name_another_client() {
        let proxies = trusted("10.0.0.0/8");
        assert_eq!(
            proxies.client(ip("198.51.100.4"), ["203.0.113.9"].into_iter()),
            ip("198.51.100.4")
        );
    }

    #[test]
    fn the_right_most_untrusted_entry_wins_and_spoofed_left_ones_are_ignored() {
        let proxies = trusted("10.0.0.0/8, 192.168.1.1");
        // The client wrote "1.1.1.1, 2.2.2.2" itself; the edge proxy appended its real address.
        let chain = ["1.1.1.1, 2.2.2.2", "203.0.113.9, 192.168.1.1"];
        assert_eq!(
            proxies.client(ip("10.0.0.2"), chain.into_iter()),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn a_chain_of_trusted_hops_gives_its_left_most_address() {
        let proxies = trusted("10.0.0.0/8");
        assert_eq!(
            proxies.client(ip("10.0.0.2"), ["10.1.2.3, 10.0.0.9"].into_iter()),
            ip("10.1.2.3")
        );
        // No header at all: the trusted peer is all there is.
        assert_eq!(
            proxies.client(ip("10.0.0.2"), std::iter::empty()),
            ip("10.0.0.2")
        );
    }

    #[test]
    fn a_malformed_entry_stops_at_the_trusted_hop_that_passed_it() {
        let proxies = trusted("10.0.0.0/8");
        for junk in ["unknown", "", "1.2.3", "not an ip, 10.0.0.5"] {
            let expected = if junk.ends_with("10.0.0.5") {
                ip("10.0.0.5")
            } else {
                ip("10.0.0.2")
            };
            assert_eq!(
                proxies.client(ip("10.0.0.2"), [junk].into_iter()),
                expected,
                "{junk:?}"
            );
        }
        // Junk written by the client, left of a real address, changes nothing.
        assert_eq!(
            proxies.client(ip("10.0.0.2"), ["<script>, 203.0.113.9"].into_iter()),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn ipv6_ports_and_mapped_ipv4_are_understood() {
        let proxies = trusted("fd00::/8, 127.0.0.1");
        assert_eq!(
            proxies.client(ip("fd00::1"), ["2001:db8::7"].into_iter()),
            ip("2001:db8::7")
        );
        assert_eq!(
            proxies.client(ip("fd00::1"), ["[2001:db8::7]:4711"].into_iter()),
            ip("2001:db8::7")
        );
        assert_eq!(
            proxies.client(ip("fd00::1"), ["203.0.113.9:4711"].into_iter()),
            ip("203.0.113.9")
        );
        // A dual-stack socket's peer ::ffff:127.0.0.1 is the trusted 127.0.0.1.
        assert_eq!(
            proxies.client(ip("::ffff:127.0.0.1"), ["::ffff:203.0.113.9"].into_iter()),
            ip("203.0.113.9")
        );
    }

    #[test]
    fn lists_parse_from_text_and_refuse_what_is_not_an_address() {
        assert_eq!(trusted("10.0.0.7").to_string(), "10.0.0.7/32");
        assert_eq!(trusted("10.1.2.3/8, ::1").to_string(), "10.0.0.0/8,::1/128");
        assert!(trusted("").is_empty());
        let err = "10.0.0.0/8, proxy.internal"
            .parse::<TrustedProxies>()
            .unwrap_err();
        assert!(err.to_string().contains("proxy.internal"), "{err}");
        assert!("10.0.0.0/33".parse::<TrustedProxies>().is_err());
    }
}
