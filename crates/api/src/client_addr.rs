//! The client address of a request (SPEC §9): the TCP peer, or — when the peer is a proxy
//! the operator trusts (`--trusted-proxy CIDR`) — the address its `X-Forwarded-For` names.
//!
//! Invariant: a forwarded address is believed only from a trusted peer, and only as far
//! back as the chain of trusted proxies goes: the list is read from the right (the hop
//! nearest the server), each trusted hop passing to the one before it, and the first
//! untrusted address is the client. Anyone can write an `X-Forwarded-For`; only the part
//! our own proxies appended is theirs, so a client cannot pick the address it is limited
//! as.

use std::net::IpAddr;

use axum::http::HeaderMap;
pub use ipnet::IpNet;

/// The proxies whose `X-Forwarded-For` is believed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Proxies in these networks.
    pub fn new(networks: Vec<IpNet>) -> Self {
        Self(networks)
    }

    /// Whether `ip` is one of them.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|n| n.contains(&ip))
    }

    /// The client of a request from `peer` with `headers`: `peer` itself unless it is a
    /// trusted proxy; else, walking `X-Forwarded-For` from its last entry, the first
    /// address that is not a trusted proxy (an entry that is no address ends the walk at
    /// the hop that forwarded it; all trusted, the first entry).
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut client = peer;
        if !self.contains(client) {
            return client;
        }
        // Several headers are one list, in order (RFC 9110 §5.3).
        let entries: Vec<&str> = headers
            .get_all("x-forwarded-for")
            .iter()
            .flat_map(|v| v.to_str().unwrap_or("").split(','))
            .map(str::trim)
            .collect();
        for entry in entries.iter().rev() {
            let Some(ip) = parse_hop(entry) else { return client };
            client = ip;
            if !self.contains(ip) {
                break;
            }
        }
        client
    }
}

/// One `X-Forwarded-For` entry: an address, possibly `[v6]` or with a port (some proxies
/// write `1.2.3.4:5678`).
fn parse_hop(entry: &str) -> Option<IpAddr> {
    if let Ok(ip) = entry.parse() {
        return Some(ip);
    }
    if let Ok(sa) = entry.parse::<std::net::SocketAddr>() {
        return Some(sa.ip());
    }
    entry.strip_prefix('[')?.strip_suffix(']')?.parse().ok()
}

/// Parses `--trusted-proxy`: a network `ADDRESS/BITS`, or one address.
pub fn parse_trusted_proxy(s: &str) -> Result<IpNet, String> {
    let s = s.trim();
    if let Ok(net) = s.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    s.parse::<IpAddr>().map(IpNet::from).map_err(|_| {
        format!("{s:?} is neither an address nor a network ADDRESS/BITS (e.g. 10.0.0.0/8)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxies(nets: &[&str]) -> TrustedProxies {
        TrustedProxies::new(nets.iter().map(|n| parse_trusted_proxy(n).unwrap()).collect())
    }

    fn xff(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append("x-forwarded-for", v.parse().unwrap());
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        let t = proxies(&["10.0.0.0/8"]);
        assert_eq!(t.client(ip("203.0.113.9"), &xff(&["198.51.100.1"])), ip("203.0.113.9"));
        assert_eq!(
            TrustedProxies::default().client(ip("10.0.0.1"), &xff(&["1.2.3.4"])),
            ip("10.0.0.1")
        );
    }

    #[test]
    fn a_trusted_chain_is_walked_from_the_right_to_the_first_untrusted_hop() {
        let t = proxies(&["10.0.0.0/8", "::1"]);
        // The client wrote a spoofed first entry; our proxies appended the rest.
        let h = xff(&["6.6.6.6, 198.51.100.7", "10.1.2.3"]);
        assert_eq!(t.client(ip("10.0.0.1"), &h), ip("198.51.100.7"));
        assert_eq!(t.client(ip("::1"), &xff(&["[2001:db8::1]:443"])), ip("2001:db8::1"));
        assert_eq!(t.client(ip("10.0.0.1"), &xff(&["198.51.100.7:5000"])), ip("198.51.100.7"));
        // Every hop trusted: the first.
        assert_eq!(t.client(ip("10.0.0.1"), &xff(&["10.9.9.9"])), ip("10.9.9.9"));
        // No header: the proxy itself.
        assert_eq!(t.client(ip("10.0.0.1"), &HeaderMap::new()), ip("10.0.0.1"));
        // An entry that is no address stops at the hop that forwarded it.
        assert_eq!(t.client(ip("10.0.0.1"), &xff(&["198.51.100.7, unknown"])), ip("10.0.0.1"));
        assert_eq!(t.client(ip("10.0.0.1"), &xff(&["junk, 10.2.2.2"])), ip("10.2.2.2"));
    }

    #[test]
    fn a_bad_flag_names_what_it_wants() {
        assert_eq!(parse_trusted_proxy("10.1.2.3/8").unwrap().to_string(), "10.0.0.0/8");
        assert_eq!(parse_trusted_proxy("::1").unwrap().to_string(), "::1/128");
        let e = parse_trusted_proxy("10.0.0.0/33").unwrap_err();
        assert!(e.contains("ADDRESS/BITS"), "{e}");
    }
}
