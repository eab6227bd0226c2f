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

/// How full one member's backend is: what it uses (its file or the data in use, whichever is
/// larger) against the quota it runs with, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackendFill {
    pub used: i64,
    pub quota: i64,
}

impl BackendFill {
    /// The share of the quota used, 1.0 at the quota.
    pub fn share(&self) -> f64 {
        self.used as f64 / self.quota.max(1) as f64
    }

    /// The bytes at which the backend is near its quota: [`NEAR_QUOTA_PERCENT`] of it.
    pub fn near_mark(&self) -> i64 {
        self.quota / 100 * NEAR_QUOTA_PERCENT
    }

    /// At or past [`BackendFill::near_mark`].
    pub fn is_near(&self) -> bool {
        self.used >= self.near_mark()
    }
}

/// The fastest rate at which the alarm probe assumes etcd's backend can grow: a burst of large
/// puts at etcd's request size limit (1.5 MiB) on a fast disk. The benchmark's burst of 64 KiB
/// puts into a 3-member cluster on this machine's loopback grows it at 20 to 30 MB/s.
pub const BURST_WRITE_RATE: i64 = 128 << 20;

/// How often to look at a cluster's alarms between passes: the time a burst at
/// [`BURST_WRITE_RATE`] needs to bring its fullest backend to [`NEAR_QUOTA_PERCENT`] of the
/// quota, never more often than [`NEAR_QUOTA_POLL`]. From there the plan itself looks every
/// [`NEAR_QUOTA_POLL`], so even a burst into a small quota has its alarm seen within that.
/// `None` when the passes suffice: already near the quota, or headroom a burst cannot fill
/// within the [`IDLE_POLL`] of a cluster at rest.
pub fn probe_period(fullest: BackendFill) -> Option<Duration> {
    let headroom = fullest.near_mark() - fullest.used;
    if headroom <= 0 {
        return None;
    }
    let period = Duration::from_secs_f64(headroom as f64 / BURST_WRITE_RATE as f64);
    (period < IDLE_POLL).then(|| period.max(NEAR_QUOTA_POLL))
}

/// How full a cluster's fullest backend was at one pass: the largest share of its quota
/// (`plan::rules::fullest_backend`), 1.0 at the quota.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FillSample {
    pub at: Timestamp,
    pub fill: f64,
}

/// When to look again at a cluster whose fullest backend went from `before` to `now`, if that
/// is sooner than the plan's own poll would be ([`IDLE_POLL`] at rest): at the rate it grew
/// between the two passes, half the time it needs to reach [`NEAR_QUOTA_PERCENT`], never
/// sooner than [`NEAR_QUOTA_POLL`]. From [`NEAR_QUOTA_PERCENT`] on the cluster is looked at
/// every [`NEAR_QUOTA_POLL`] anyway, so a cluster that fills in less than the idle poll still
/// has its alarm noticed within that, provided its rate does not double between two looks.
/// `None` without an earlier pass, when the backend did not grow, or already near its quota.
pub fn fill_look(before: Option<FillSample>, now: FillSample) -> Option<Duration> {
    let before = before?;
    let near = NEAR_QUOTA_PERCENT as f64 / 100.0;
    let grown = now.fill - before.fill;
    let elapsed = now.at.duration_since(before.at).as_secs_f64();
    if !(grown > 0.0 && elapsed > 0.0) || now.fill >= near {
        return None;
    }
    let until_near = (near - now.fill) / (grown / elapsed);
    let look = Duration::try_from_secs_f64(until_near / 2.0).ok()?;
    (look < IDLE_POLL).then(|| look.max(NEAR_QUOTA_POLL))
}

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

/// How soon to look again at a member whose etcd is starting (a seed forming the cluster, a
/// learner catching up): every [`LEARNER_POLL`] within [`LEARNER_FAST_WINDOW`] of its Pod's
/// start (or before it started), every [`FAST_POLL`] after.
pub fn starting_poll(started_at: Option<Timestamp>, now: Timestamp) -> Duration {
    if elapsed_beyond(started_at, LEARNER_FAST_WINDOW, now) {
        FAST_POLL
    } else {
        LEARNER_POLL
    }
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

    fn sample(seconds: f64, fill: f64) -> FillSample {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        FillSample {
            at: t0 + Duration::from_secs_f64(seconds),
            fill,
        }
    }

    #[test]
    fn a_starting_member_is_looked_at_often_for_its_first_seconds_only() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(starting_poll(None, t0), LEARNER_POLL, "not started yet");
        assert_eq!(starting_poll(Some(t0), t0), LEARNER_POLL);
        let late = t0 + LEARNER_FAST_WINDOW + Duration::from_millis(1);
        assert_eq!(starting_poll(Some(t0), late), FAST_POLL);
    }

    #[test]
    fn a_backend_that_grows_is_looked_at_before_it_nears_its_quota() {
        // 10 % to 40 % in 30 s: 1 %/s, 40 s to 80 %, looked at again in 20 s.
        assert_eq!(
            fill_look(Some(sample(0.0, 0.1)), sample(30.0, 0.4)),
            Some(Duration::from_secs(20))
        );
        // Fast: 10 % in one second from 70 %: 1 s to 80 %, looked at in half of it.
        assert_eq!(
            fill_look(Some(sample(0.0, 0.6)), sample(1.0, 0.7)),
            Some(Duration::from_millis(500))
        );
        // Never sooner than the near-quota poll.
        assert_eq!(
            fill_look(Some(sample(0.0, 0.1)), sample(1.0, 0.79)),
            Some(NEAR_QUOTA_POLL)
        );
    }

    #[test]
    fn no_sooner_look_without_growth_history_or_when_already_near() {
        assert_eq!(fill_look(None, sample(30.0, 0.5)), None);
        // Did not grow, or shrank (a compaction and defragmentation).
        assert_eq!(fill_look(Some(sample(0.0, 0.5)), sample(30.0, 0.5)), None);
        assert_eq!(fill_look(Some(sample(0.0, 0.5)), sample(30.0, 0.2)), None);
        // Slow growth: the idle poll comes first.
        assert_eq!(fill_look(Some(sample(0.0, 0.10)), sample(30.0, 0.11)), None);
        // Near the quota already: `nears_quota` polls it.
        assert_eq!(fill_look(Some(sample(0.0, 0.5)), sample(30.0, 0.85)), None);
        // The same instant twice.
        assert_eq!(fill_look(Some(sample(5.0, 0.1)), sample(5.0, 0.3)), None);
    }

    /// A cluster filling at a constant rate, looked at as the reconciler does: the idle poll at
    /// rest, [`fill_look`] when sooner, [`NEAR_QUOTA_POLL`] from [`NEAR_QUOTA_PERCENT`] on.
    /// Returns how long after the backend reached its quota a pass saw it.
    fn noticed_after(start: f64, rate_per_second: f64) -> f64 {
        let near = NEAR_QUOTA_PERCENT as f64 / 100.0;
        let fill_at = |t: f64| start + rate_per_second * t;
        let full_at = (1.0 - start) / rate_per_second;
        let (mut t, mut before) = (0.0, None);
        loop {
            let now = sample(t, fill_at(t).min(1.0));
            if t >= full_at {
                return t - full_at;
            }
            let next = if now.fill >= near {
                NEAR_QUOTA_POLL
            } else {
                fill_look(before, now).unwrap_or(IDLE_POLL)
            };
            before = Some(now);
            t += next.as_secs_f64();
        }
    }

    #[test]
    fn a_steady_fill_is_noticed_within_the_near_quota_poll_once_its_rate_is_known() {
        // Whatever the rate, once two passes have seen the backend grow below 80 % (the
        // second idle pass comes before 80 %), the quota is seen within one near-quota poll.
        for start in [0.0, 0.1, 0.3, 0.5] {
            for per_hour in [1.0, 10.0, 60.0, 100.0, 300.0] {
                let rate = per_hour / 100.0 / 3600.0;
                if start + rate * IDLE_POLL.as_secs_f64() >= 0.8 {
                    continue;
                }
                let late = noticed_after(start, rate);
                assert!(
                    late <= NEAR_QUOTA_POLL.as_secs_f64() + 1e-9,
                    "from {start} at {per_hour} %/h: noticed {late} s after the quota"
                );
            }
            // Fast fills: 1 % per second and more, as long as 80 % comes after the second pass.
            for per_second in [0.2, 0.5, 1.0, 1.5] {
                let rate = per_second / 100.0;
                if start + rate * IDLE_POLL.as_secs_f64() >= 0.8 {
                    continue;
                }
                let late = noticed_after(start, rate);
                assert!(
                    late <= NEAR_QUOTA_POLL.as_secs_f64() + 1e-9,
                    "from {start} at {per_second} %/s: noticed {late} s after the quota"
                );
            }
        }
    }

    #[test]
    fn without_the_sooner_look_a_fast_fill_waits_for_the_idle_poll() {
        // The same walk with the idle poll only below 80 %: at 2 %/s from 10 % the passes see
        // 10 % and 70 %, the quota comes 15 s later, between two idle passes, and waits for the
        // next one (the failure fill_look removes).
        let (start, rate) = (0.1, 0.02);
        let full_at = (1.0 - start) / rate;
        let mut t = 0.0;
        while t < full_at {
            let fill = start + rate * t;
            t += if fill >= 0.8 {
                NEAR_QUOTA_POLL
            } else {
                IDLE_POLL
            }
            .as_secs_f64();
        }
        assert!(t - full_at > 1.0, "noticed {} s late", t - full_at);
        assert!(noticed_after(start, rate) <= NEAR_QUOTA_POLL.as_secs_f64() + 1e-9);
    }

    #[test]
    fn the_alarm_probe_paces_itself_by_the_headroom_a_burst_must_fill() {
        const MIB: i64 = 1 << 20;
        let fill = |used, quota| BackendFill { used, quota };
        // The benchmark's 64 MiB quota, nearly empty: 51 MiB to 80 %, 0.4 s at the burst rate.
        let period = probe_period(fill(MIB / 2, 64 * MIB)).unwrap();
        assert!(
            period > Duration::from_millis(390) && period < Duration::from_millis(400),
            "{period:?}"
        );
        // Closer to 80 %: more often, never more often than the near-quota poll.
        assert_eq!(
            probe_period(fill(51 * MIB, 64 * MIB)),
            Some(NEAR_QUOTA_POLL)
        );
        // etcd's default 2 GiB quota, empty: 12.8 s, under the idle poll.
        let period = probe_period(fill(0, 2048 * MIB)).unwrap();
        assert!(
            period > Duration::from_secs(12) && period < Duration::from_secs(13),
            "{period:?}"
        );
        // An 8 GiB quota: a burst cannot reach 80 % within the idle poll; passes suffice.
        assert_eq!(probe_period(fill(0, 8192 * MIB)), None);
        // At or past 80 %: the plan's own near-quota poll.
        assert_eq!(probe_period(fill(52 * MIB, 64 * MIB)), None);
        assert_eq!(probe_period(fill(64 * MIB, 64 * MIB)), None);
    }

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
