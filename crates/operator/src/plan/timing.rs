//! When to look again, grace periods and repair backoff. Every delay is computed from
//! timestamps in the observed objects and `now`; the planner has no clock of its own.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

pub use crate::domain::settings::{NOT_READY_GRACE, RepairTiming};
use crate::etcd::EtcdErrorKind;

/// Right after a mutation: look again at once (the next pass observes its effect).
pub const AFTER_MUTATION: Duration = Duration::ZERO;
/// Polling a learner's catch-up or etcd's "unhealthy cluster" window: short, because the
/// bootstrap benchmark counts every idle millisecond between steps.
pub const FAST_POLL: Duration = Duration::from_millis(500);
/// Polling a learner whose Pod started within [`LEARNER_FAST_WINDOW`]: it usually catches up
/// within a second, and every poll saved is time the member is not yet a voter (the recovery
/// benchmark's memory-backed replacement waited up to 500 ms here).
pub const LEARNER_POLL: Duration = Duration::from_millis(100);
/// How long after its Pod started a learner is polled at [`LEARNER_POLL`]; after that (a large
/// database still streaming) at [`FAST_POLL`].
pub const LEARNER_FAST_WINDOW: Duration = Duration::from_secs(10);
/// Waiting for a Pod to start or a member to become healthy.
pub const MEMBER_POLL: Duration = Duration::from_secs(1);
/// Waiting out an outage or a condition only a human can fix.
pub const BLOCKED_POLL: Duration = Duration::from_secs(5);
/// Converged, or paused: a watch event wakes the reconciler sooner when something changes.
pub const IDLE_POLL: Duration = Duration::from_secs(30);

/// A member whose backend reached this share (percent) of its quota is close to etcd's NOSPACE
/// alarm: its cluster is looked at every [`NEAR_QUOTA_POLL`].
pub const NEAR_QUOTA_PERCENT: i64 = 80;
/// How often a cluster near its quota (or under NOSPACE) is looked at, whatever its step says:
/// etcd raises the alarm without any Kubernetes event, so this bounds the time to notice it.
/// A pass at rest writes nothing (the status changes only when the sizes do).
pub const NEAR_QUOTA_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// How long members just started may take to form quorum before it is reported lost.
pub const START_GRACE: Duration = Duration::from_secs(60);
/// How long a repaired member must stay Ready before its `recreateCount` starts over (so a
/// member that flaps still escalates to replacement).
pub const STABLE_AFTER: Duration = Duration::from_secs(600);
/// Failed recreations (level 1) after which a member is replaced (level 2).
pub const MAX_RECREATIONS: i32 = 3;
/// How long moving leadership away may be tried before the destructive step goes ahead anyway
/// (etcd then elects a new leader itself).
pub const LEADER_MOVE_TIMEOUT: Duration = Duration::from_secs(30);

/// The delay before repairing a member again after `recreations` recreations (defaults).
pub fn repair_backoff(recreations: i32) -> Duration {
    RepairTiming::default().backoff(recreations)
}

/// How long until `since + delay`, or `None` once it has passed.
pub fn remaining(since: Option<Timestamp>, delay: Duration, now: Timestamp) -> Option<Duration> {
    let since = since?;
    let elapsed = now.duration_since(since);
    let elapsed = Duration::try_from(elapsed).unwrap_or(Duration::ZERO);
    delay.checked_sub(elapsed).filter(|d| !d.is_zero())
}

/// Whether more than `grace` has passed since `since` (false when `since` is unknown).
pub fn elapsed_beyond(since: Option<Timestamp>, grace: Duration, now: Timestamp) -> bool {
    since.is_some() && remaining(since, grace, now).is_none()
}

/// When `act` should retry a step that etcd refused with `kind`: at once for the short
/// transient refusals (etcd's 5-second health window, a learner catching up, an election), a
/// little later for an unreachable cluster.
pub fn retry_after(kind: EtcdErrorKind) -> Duration {
    match kind {
        EtcdErrorKind::UnhealthyCluster
        | EtcdErrorKind::LearnerNotInSync
        | EtcdErrorKind::TooManyLearners
        | EtcdErrorKind::NoLeader
        | EtcdErrorKind::NotLeader
        | EtcdErrorKind::ServerTimeout => FAST_POLL,
        EtcdErrorKind::Timeout | EtcdErrorKind::Unreachable => MEMBER_POLL,
        _ => BLOCKED_POLL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::settings::MAX_BACKOFF;

    #[test]
    fn backoff_grows_and_is_bounded() {
        assert_eq!(repair_backoff(0), Duration::ZERO);
        assert_eq!(repair_backoff(1), Duration::from_secs(10));
        assert_eq!(repair_backoff(2), Duration::from_secs(20));
        assert_eq!(repair_backoff(3), Duration::from_secs(40));
        assert_eq!(repair_backoff(50), MAX_BACKOFF);
    }

    #[test]
    fn remaining_counts_down_from_a_timestamp() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let now: Timestamp = "2026-01-01T00:00:04Z".parse().unwrap();
        assert_eq!(
            remaining(Some(t0), Duration::from_secs(10), now),
            Some(Duration::from_secs(6))
        );
        assert_eq!(remaining(Some(t0), Duration::from_secs(3), now), None);
        assert_eq!(remaining(None, Duration::from_secs(3), now), None);
        assert!(elapsed_beyond(Some(t0), Duration::from_secs(3), now));
        assert!(!elapsed_beyond(None, Duration::from_secs(3), now));
    }

    #[test]
    fn transient_refusals_are_retried_fast() {
        assert_eq!(retry_after(EtcdErrorKind::UnhealthyCluster), FAST_POLL);
        assert_eq!(retry_after(EtcdErrorKind::LearnerNotInSync), FAST_POLL);
        assert_eq!(retry_after(EtcdErrorKind::Other), BLOCKED_POLL);
    }
}
