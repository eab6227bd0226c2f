//! etcd's versions as the operator reasons about them: which minors it runs, the patch each
//! minor upgrade needs first (etcd's own floors), which minors etcd can downgrade from, and
//! which tool restores a snapshot. Every figure here comes from etcd's upgrade and downgrade
//! guides or its code; `docs/upgrades.md` cites each.

use std::fmt;

/// An etcd release, `MAJOR.MINOR.PATCH`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EtcdVersion {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
}

impl EtcdVersion {
    pub const fn new(major: u64, minor: u64, patch: u64) -> EtcdVersion {
        EtcdVersion {
            major,
            minor,
            patch,
        }
    }

    /// `MAJOR.MINOR.PATCH`, with or without a leading `v`; a pre-release or build suffix
    /// (`3.6.0-alpha.0`, as etcd's own development builds report) is dropped.
    pub fn parse(text: &str) -> Option<EtcdVersion> {
        let text = text.trim().trim_start_matches('v');
        let text = text.split(['-', '+']).next()?;
        let mut parts = text.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        let patch = parts.next()?.parse().ok()?;
        parts
            .next()
            .is_none()
            .then_some(EtcdVersion::new(major, minor, patch))
    }

    /// `(MAJOR, MINOR)`.
    pub fn minor(self) -> (u64, u64) {
        (self.major, self.minor)
    }
}

impl fmt::Display for EtcdVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The minors this operator runs: their command line, probes, restore tool and membership
/// calls are checked against each (`tests/etcd_versions.rs` runs every flag the operator can
/// pass against each built binary's `etcd --help`, and starts a member of each).
pub const SUPPORTED_MINORS: &[(u64, u64)] = &[(3, 4), (3, 5), (3, 6), (3, 7)];

/// `3.4.x to 3.7.x`: the supported range in words, for refusals.
pub fn supported_range() -> String {
    let first = SUPPORTED_MINORS.first().copied().unwrap_or_default();
    let last = SUPPORTED_MINORS.last().copied().unwrap_or_default();
    format!("{}.{}.x to {}.{}.x", first.0, first.1, last.0, last.1)
}

/// Whether the operator runs this minor.
pub fn is_supported(version: EtcdVersion) -> bool {
    SUPPORTED_MINORS.contains(&version.minor())
}

/// The patch every member must run before its minor may be upgraded to the next one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpgradeFloor {
    /// The minor upgraded from.
    pub from: (u64, u64),
    /// The lowest patch of `from` etcd documents as able to upgrade.
    pub minimum: EtcdVersion,
    /// Where etcd says so.
    pub source: &'static str,
}

/// etcd's floors, per minor upgrade:
/// - 3.5 → 3.6: "Before upgrading to 3.6, make sure that all of your 3.5 members are updated
///   to 3.5.32 or later" (etcd's 3.6 upgrade guide; 3.5.20 fixed the learner-promotion
///   inconsistency between v2store and v3store of etcd-io/etcd#19557, and 3.5.24 to 3.5.32 the
///   v2store checks that could stop a 3.6 member from starting).
/// - 3.6 → 3.7: "make sure that all of your 3.6 members are updated to 3.6.11 or later.
///   Earlier 3.6 patch releases may not be compatible with a rolling upgrade to 3.7" (etcd's
///   3.7 upgrade guide).
///
/// 3.4 → 3.5 has none (its guide names no patch; it rules out auth, see the planner).
pub const UPGRADE_FLOORS: &[UpgradeFloor] = &[
    UpgradeFloor {
        from: (3, 5),
        minimum: EtcdVersion::new(3, 5, 32),
        source: "https://etcd.io/docs/v3.6/upgrades/upgrade_3_6/",
    },
    UpgradeFloor {
        from: (3, 6),
        minimum: EtcdVersion::new(3, 6, 11),
        source: "https://etcd.io/docs/v3.7/upgrades/upgrade_3_7/",
    },
];

/// The floor of an upgrade out of `from`, if etcd documents one.
pub fn upgrade_floor(from: (u64, u64)) -> Option<&'static UpgradeFloor> {
    UPGRADE_FLOORS.iter().find(|f| f.from == from)
}

/// Whether data a member's etcd created on `created_with` can go to 3.6 as it is. etcd
/// 3.5.1-3.5.19 kept a learner's promotion out of the v3store (etcd-io/etcd#19557), which 3.6
/// reads membership from: a member promoted then is a learner again to 3.6, which refuses to
/// start ("too many learner members in cluster"). Rolling to a later 3.5 patch does not
/// repair data that already has it (3.5.36 syncs the v3store only when it applies a
/// snapshot), so data is trusted when a 3.5 patch at or above the 3.5 → 3.6 floor created it;
/// anything else (an older patch, 3.4, or not known) is rebuilt first.
pub fn membership_store_trusted(created_with: Option<&str>) -> bool {
    let Some(floor) = upgrade_floor((3, 5)) else {
        return true;
    };
    created_with
        .and_then(EtcdVersion::parse)
        .is_some_and(|v| v.minor() == (3, 5) && v >= floor.minimum || v.minor() > (3, 5))
}

/// The lowest minor etcd downgrades *from*: the downgrade API (`etcdctl downgrade validate`,
/// `enable`, the storage-version migration and the leader's automatic cancel once every
/// member runs the target) is complete from 3.6 on; etcd's storage schema knows no version
/// below 3.5, so 3.5 → 3.4 is not a downgrade etcd can do in place.
pub const DOWNGRADE_FROM: (u64, u64) = (3, 6);

/// Whether etcd can downgrade a cluster whose cluster version is `from` to `to`: exactly one
/// minor down (etcd's `allowedDowngradeVersion`), from 3.6 or later.
pub fn downgrade_allowed(from: (u64, u64), to: (u64, u64)) -> bool {
    from >= DOWNGRADE_FROM && from.0 == to.0 && to.1 + 1 == from.1
}

/// Whether `etcdutl` (3.5 and later) or `etcdctl` (3.4, `ETCDCTL_API=3`) restores a
/// snapshot: 3.5 moved `snapshot restore` to etcdutl, 3.6 removed it from etcdctl.
pub fn restores_with_etcdutl(version: &str) -> bool {
    EtcdVersion::parse(version).is_none_or(|v| v.minor() >= (3, 5))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_is_trusted_for_3_6_from_the_3_5_floor_on() {
        for (created, trusted) in [
            (None, false),
            (Some("3.4.23"), false),
            (Some("3.5.1"), false),
            (Some("3.5.19"), false),
            (Some("3.5.31"), false),
            (Some("3.5.32"), true),
            (Some("3.5.36"), true),
            (Some("3.6.0"), true),
            (Some("3.7.4"), true),
            (Some("not a version"), false),
        ] {
            assert_eq!(membership_store_trusted(created), trusted, "{created:?}");
        }
    }

    #[test]
    fn versions_parse_with_or_without_v_and_suffixes() {
        assert_eq!(
            EtcdVersion::parse("3.6.17"),
            Some(EtcdVersion::new(3, 6, 17))
        );
        assert_eq!(
            EtcdVersion::parse("v3.5.1"),
            Some(EtcdVersion::new(3, 5, 1))
        );
        assert_eq!(
            EtcdVersion::parse("3.6.0-alpha.0"),
            Some(EtcdVersion::new(3, 6, 0))
        );
        for bad in ["3.5", "3.5.1.2", "x.5.1", "", "3.5.-1"] {
            assert_eq!(EtcdVersion::parse(bad), None, "{bad}");
        }
        assert!(EtcdVersion::new(3, 5, 32) > EtcdVersion::new(3, 5, 4));
        assert_eq!(EtcdVersion::new(3, 7, 4).to_string(), "3.7.4");
    }

    #[test]
    fn the_supported_range_and_floors_are_etcds() {
        assert_eq!(supported_range(), "3.4.x to 3.7.x");
        assert!(is_supported(EtcdVersion::new(3, 7, 0)));
        assert!(!is_supported(EtcdVersion::new(3, 8, 0)));
        assert!(!is_supported(EtcdVersion::new(3, 3, 27)));
        assert_eq!(
            upgrade_floor((3, 5)).map(|f| f.minimum),
            Some(EtcdVersion::new(3, 5, 32))
        );
        assert_eq!(
            upgrade_floor((3, 6)).map(|f| f.minimum),
            Some(EtcdVersion::new(3, 6, 11))
        );
        assert_eq!(upgrade_floor((3, 4)), None);
        assert!(downgrade_allowed((3, 7), (3, 6)));
        assert!(downgrade_allowed((3, 6), (3, 5)));
        assert!(!downgrade_allowed((3, 7), (3, 5)));
        assert!(!downgrade_allowed((3, 5), (3, 4)));
        assert!(restores_with_etcdutl("3.6.17") && !restores_with_etcdutl("3.4.23"));
    }
}
