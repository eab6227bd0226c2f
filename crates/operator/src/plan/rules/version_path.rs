//! Whether a version change may go ahead: the path from the versions running (etcd's cluster
//! version, the lowest member) to the target, against etcd's supported range, its upgrade
//! floors and its one-minor downgrade procedure (split out of `rollout`).

use crate::domain::versions::{
    DOWNGRADE_FROM, EtcdVersion, downgrade_allowed, is_supported, supported_range, upgrade_floor,
};

/// `MAJOR.MINOR.PATCH`.
pub fn parse_version(v: &str) -> Option<(u64, u64, u64)> {
    let mut parts = v.trim().trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let patch = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((major, minor, patch))
}

/// How a version change moves etcd's cluster version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VersionPath {
    /// Within the cluster's minor (up or down): members are rolled, nothing else.
    Patch,
    /// One minor up: members are rolled; etcd raises its cluster version once all run it.
    Upgrade,
    /// One minor down, from 3.6 or later: etcd's downgrade procedure (validate, enable, the
    /// storage migrated), then members rolled; etcd ends the downgrade once all run it.
    Downgrade,
}

/// What the path check reads: etcd's cluster version, the lowest version a member runs (and
/// which member), and whether authentication is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathFacts {
    pub cluster: (u64, u64),
    pub lowest: Option<(EtcdVersion, String)>,
    pub auth: bool,
}

/// Whether going to `target` is a path etcd supports, and which. From etcd's cluster version
/// `C`: a patch of `C`; `C+1` once every member runs the patch etcd's upgrade guide names
/// for it ([`crate::domain::versions::UPGRADE_FLOORS`]); `C-1` from 3.6 on (etcd's
/// downgrade). Refused, with why and what is allowed: a version outside the supported range,
/// a skipped minor either way, a downgrade below 3.6's reach, and 3.4 → 3.5 with
/// authentication on (etcd's 3.5 upgrade guide: "If your cluster enables auth, rolling upgrade
/// from 3.4 or older version isn't supported because 3.5 changes a format of WAL entries
/// related to auth").
pub fn check_path(facts: &PathFacts, target: &str) -> Result<VersionPath, String> {
    let (cm, cn) = facts.cluster;
    let floor = upgrade_floor((cm, cn))
        .map(|f| format!(" once every member runs {} or later", f.minimum))
        .unwrap_or_default();
    let down = if downgrade_allowed((cm, cn), (cm, cn.saturating_sub(1))) {
        format!(", or {cm}.{}.x (a downgrade)", cn - 1)
    } else {
        String::new()
    };
    let allowed = format!(
        "allowed from etcd's cluster version {cm}.{cn}: a {cm}.{cn}.x patch version, {cm}.{}.x{floor}{down}",
        cn + 1
    );
    let Some(parsed) = EtcdVersion::parse(target).filter(|_| parse_version(target).is_some())
    else {
        return Err(format!(
            "spec.version {target} is not a MAJOR.MINOR.PATCH etcd version; {allowed}"
        ));
    };
    let (tm, tn) = parsed.minor();
    if !is_supported(parsed) {
        return Err(format!(
            "spec.version {target} is not a version this operator runs (it runs etcd {}); {allowed} within those",
            supported_range()
        ));
    }
    if tm != cm {
        return Err(format!(
            "spec.version {target} changes etcd's major version; {allowed}"
        ));
    }
    if tn == cn {
        return Ok(VersionPath::Patch);
    }
    if tn > cn + 1 {
        return Err(format!(
            "spec.version {target} skips a minor version (etcd upgrades one minor at a time); {allowed}"
        ));
    }
    if tn == cn + 1 {
        if facts.auth && (cm, cn) == (3, 4) {
            return Err(format!(
                "spec.version {target}: authentication is enabled, and etcd's 3.5 upgrade guide rules out a rolling upgrade from 3.4 with auth enabled (3.5 changes the format of the WAL entries related to auth). Keep 3.4.x, or move the data to a new 3.5 cluster (snapshot and restore)"
            ));
        }
        if let Some(floor) = upgrade_floor((cm, cn)) {
            match &facts.lowest {
                Some((lowest, _)) if *lowest >= floor.minimum => {}
                Some((lowest, member)) => {
                    return Err(format!(
                        "spec.version {target}: etcd's {cm}.{cn} → {tm}.{tn} upgrade needs every member on {} or later first ({}), and {member} runs {lowest}. Set spec.version to {} or a later {cm}.{cn} patch first, let it roll, then set {target}",
                        floor.minimum, floor.source, floor.minimum
                    ));
                }
                None => {
                    return Err(format!(
                        "spec.version {target}: etcd's {cm}.{cn} → {tm}.{tn} upgrade needs every member on {} or later first ({}), and not every member has reported its version yet",
                        floor.minimum, floor.source
                    ));
                }
            }
        }
        return Ok(VersionPath::Upgrade);
    }
    // Below the cluster's minor.
    if tn + 1 < cn {
        return Err(format!(
            "spec.version {target} is a downgrade of more than one minor below etcd's cluster version {cm}.{cn} (etcd downgrades one minor at a time: set spec.version to {cm}.{}.x first, let it roll, then {target}); {allowed}",
            cn - 1
        ));
    }
    if !downgrade_allowed((cm, cn), (tm, tn)) {
        return Err(format!(
            "spec.version {target} is a downgrade below etcd's cluster version {cm}.{cn} (every member has run {cm}.{cn}, and etcd downgrades in place only from {}.{} on: its storage schema has no version below 3.5); {allowed}",
            DOWNGRADE_FROM.0, DOWNGRADE_FROM.1
        ));
    }
    Ok(VersionPath::Downgrade)
}
