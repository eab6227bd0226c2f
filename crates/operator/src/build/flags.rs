//! The etcd command line, built for the member's version: every flag the operator can pass is
//! listed here with the minors whose `etcd --help` lists it, and a command line asking a
//! version for a flag it does not know is not built (etcd would refuse to start; 3.7 refuses
//! every `--experimental-*` flag, 3.6 renamed most of them or moved them behind
//! `--feature-gates`). The operator passes no `--experimental-*` flag and no feature gate:
//! nothing the API can set needs one on any supported minor. `tests/etcd_versions.rs` checks
//! the table and a member with every option against each built binary's `etcd --help`, and
//! starts a 3.7 member with them.

use crate::domain::versions::EtcdVersion;

/// A flag and the minors that accept it (inclusive; `None`: still accepted by the newest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EtcdFlag {
    pub name: &'static str,
    pub since: (u64, u64),
    pub until: Option<(u64, u64)>,
}

const fn always(name: &'static str) -> EtcdFlag {
    EtcdFlag {
        name,
        since: (3, 4),
        until: None,
    }
}

/// Every flag the operator passes to `etcd`, on any member.
pub const ETCD_FLAGS: &[EtcdFlag] = &[
    always("name"),
    always("data-dir"),
    always("listen-peer-urls"),
    always("listen-client-urls"),
    always("advertise-client-urls"),
    always("initial-advertise-peer-urls"),
    always("initial-cluster"),
    always("initial-cluster-state"),
    always("initial-cluster-token"),
    always("listen-metrics-urls"),
    always("quota-backend-bytes"),
    always("auto-compaction-mode"),
    always("auto-compaction-retention"),
    always("snapshot-count"),
    always("cert-file"),
    always("key-file"),
    always("client-cert-auth"),
    always("trusted-ca-file"),
    always("peer-cert-file"),
    always("peer-key-file"),
    always("peer-trusted-ca-file"),
    always("peer-client-cert-auth"),
    always("peer-auto-tls"),
];

/// Every flag the operator passes to `etcdutl snapshot restore` (3.5+) and `etcdctl snapshot
/// restore` (3.4).
pub const RESTORE_FLAGS: &[&str] = &[
    "data-dir",
    "name",
    "initial-cluster",
    "initial-cluster-token",
    "initial-advertise-peer-urls",
];

/// The flag's name in a `--name=value` or `--name` argument.
pub fn flag_name(argument: &str) -> Option<&str> {
    let flag = argument.strip_prefix("--")?;
    Some(flag.split_once('=').map_or(flag, |(name, _)| name))
}

/// Whether `version` accepts `flag` (a name from [`ETCD_FLAGS`]; unknown names are refused).
pub fn accepts(version: EtcdVersion, flag: &str) -> bool {
    ETCD_FLAGS
        .iter()
        .find(|f| f.name == flag)
        .is_some_and(|f| version.minor() >= f.since && f.until.is_none_or(|u| version.minor() <= u))
}

/// The arguments of `command` (after the program) that `version` does not accept.
pub fn refused_flags(version: EtcdVersion, command: &[String]) -> Vec<String> {
    command
        .iter()
        .skip(1)
        .filter_map(|a| flag_name(a))
        .filter(|f| !accepts(version, f))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_checked_per_version() {
        let v37 = EtcdVersion::new(3, 7, 4);
        assert!(accepts(v37, "quota-backend-bytes"));
        assert!(!accepts(v37, "experimental-initial-corrupt-check"));
        assert_eq!(flag_name("--peer-auto-tls"), Some("peer-auto-tls"));
        assert_eq!(flag_name("--name=etcd-0"), Some("name"));
        assert_eq!(flag_name("etcd"), None);
        let command = vec![
            "etcd".to_string(),
            "--name=a".to_string(),
            "--experimental-compact-hash-check-enabled=true".to_string(),
        ];
        assert_eq!(
            refused_flags(v37, &command),
            vec!["experimental-compact-hash-check-enabled".to_string()]
        );
        // A flag retired after a minor is refused above it.
        let retired = EtcdFlag {
            name: "x",
            since: (3, 4),
            until: Some((3, 6)),
        };
        assert!(retired.until.is_some_and(|u| v37.minor() > u));
    }
}
