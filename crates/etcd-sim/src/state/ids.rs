//! etcd's member and cluster IDs, derived the way etcd derives them
//! (server/etcdserver/api/membership: `computeMemberId`, `genID`), and its check of peer URLs
//! (`types.NewURLs`).

use ring::digest::{SHA1_FOR_LEGACY_USE_ONLY, digest};

/// The first 8 bytes of the SHA-1 of `bytes`, big-endian: how etcd turns a hash into an ID.
fn sha1_id(bytes: &[u8]) -> u64 {
    let hash = digest(&SHA1_FOR_LEGACY_USE_ONLY, bytes);
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash.as_ref()[..8]);
    u64::from_be_bytes(first)
}

/// A member's ID: SHA-1 of its sorted peer URLs joined without separator, then the cluster
/// token (`--initial-cluster-token` for an initial member; empty for one added by MemberAdd),
/// then, for MemberAdd only, the time of the call in whole seconds since the epoch.
pub fn member_id(peer_urls: &[String], token: &str, unix_secs: Option<u64>) -> u64 {
    let mut sorted: Vec<&str> = peer_urls.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    let mut bytes = sorted.concat().into_bytes();
    bytes.extend_from_slice(token.as_bytes());
    if let Some(secs) = unix_secs {
        bytes.extend_from_slice(secs.to_string().as_bytes());
    }
    sha1_id(&bytes)
}

/// A cluster's ID: SHA-1 of its initial members' IDs, sorted, each as 8 big-endian bytes.
pub fn cluster_id(member_ids: &[u64]) -> u64 {
    let mut sorted = member_ids.to_vec();
    sorted.sort_unstable();
    let bytes: Vec<u8> = sorted.iter().flat_map(|id| id.to_be_bytes()).collect();
    sha1_id(&bytes)
}

/// Whether etcd's `types.NewURLs` accepts `url`: scheme http, https, unix or unixs, a host
/// with a port, and no path, query or fragment.
pub fn valid_peer_url(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    if !matches!(scheme, "http" | "https" | "unix" | "unixs") {
        return false;
    }
    if rest.contains(['/', '?', '#']) {
        return false;
    }
    let Some((host, port)) = rest.rsplit_once(':') else {
        return false;
    };
    let host_ok = if let Some(inner) = host.strip_prefix('[') {
        inner.ends_with(']') && inner.len() > 1
    } else {
        !host.contains(':')
    };
    host_ok && port.chars().all(|c| c.is_ascii_digit())
}

/// Parses a 16-digit (or shorter) hexadecimal member ID, as etcd prints them.
pub fn parse_hex_id(text: &str) -> Option<u64> {
    u64::from_str_radix(text.trim(), 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(list: &[&str]) -> Vec<String> {
        list.iter().map(|u| u.to_string()).collect()
    }

    #[test]
    fn member_ids_ignore_the_order_of_peer_urls() {
        let a = member_id(&urls(&["http://a:2380", "http://b:2380"]), "tok", None);
        let b = member_id(&urls(&["http://b:2380", "http://a:2380"]), "tok", None);
        assert_eq!(a, b);
    }

    #[test]
    fn member_ids_depend_on_token_and_second() {
        let peer = urls(&["http://a:2380"]);
        let base = member_id(&peer, "tok", None);
        assert_ne!(base, member_id(&peer, "other", None));
        assert_ne!(base, member_id(&peer, "tok", Some(1)));
        assert_eq!(
            member_id(&peer, "", Some(1_700_000_000)),
            member_id(&peer, "", Some(1_700_000_000))
        );
        assert_ne!(
            member_id(&peer, "", Some(1_700_000_000)),
            member_id(&peer, "", Some(1_700_000_001))
        );
    }

    #[test]
    fn cluster_ids_ignore_member_order() {
        assert_eq!(cluster_id(&[1, 2, 3]), cluster_id(&[3, 1, 2]));
        assert_ne!(cluster_id(&[1, 2, 3]), cluster_id(&[1, 2]));
    }

    #[test]
    fn etcds_default_member_and_cluster_ids() {
        // A bare `etcd` (peer URL http://localhost:2380, token etcd-cluster) is member
        // 8e9e05c52164694d of cluster cdf818194e3a8c32, as its log says.
        let id = member_id(&urls(&["http://localhost:2380"]), "etcd-cluster", None);
        assert_eq!(format!("{id:x}"), "8e9e05c52164694d");
        assert_eq!(format!("{:x}", cluster_id(&[id])), "cdf818194e3a8c32");
    }

    #[test]
    fn sha1_prefix_is_big_endian() {
        // SHA-1("") = da39a3ee5e6b4b0d 3255bfef95601890afd80709
        assert_eq!(sha1_id(b""), 0xda39_a3ee_5e6b_4b0d);
    }

    #[test]
    fn peer_urls_are_checked_like_etcd() {
        for good in [
            "http://127.0.0.1:2380",
            "https://m-0.c.ns.svc:2380",
            "http://[::1]:2380",
            "unix://sock:1",
        ] {
            assert!(valid_peer_url(good), "{good}");
        }
        for bad in [
            "127.0.0.1:2380",
            "ftp://a:1",
            "http://a",
            "http://a:2380/path",
            "http://a:port",
            "http://::1:2380",
            "",
        ] {
            assert!(!valid_peer_url(bad), "{bad}");
        }
    }

    #[test]
    fn hex_ids_parse() {
        assert_eq!(parse_hex_id("8e9e05c52164694d"), Some(0x8e9e05c52164694d));
        assert_eq!(parse_hex_id("zz"), None);
    }
}
