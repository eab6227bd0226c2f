//! The pure decisions of an EtcdSnapshotSchedule: the tick that is due (the same schedule
//! rules as an EtcdDefragPolicy: [`crate::defrag::policy::schedule_pass`]), and retention:
//! which of the schedule's snapshots are kept, which are deleted with their stored objects.
//! The clock is a parameter, so the tests run schedules over weeks in microseconds.

use std::collections::BTreeSet;
use std::time::Duration;

use etcd_operator_api::snapshot::SnapshotPhase;
use etcd_operator_api::snapshot_schedule::{
    EtcdSnapshotScheduleSpec, EtcdSnapshotScheduleStatus, FirstSnapshot, SnapshotRetention,
};
use k8s_openapi::api::core::v1::LocalObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::defrag::policy::{PolicyEvent, ScheduleInput, parse_schedule, run_name, schedule_pass};

/// The condition of a schedule: the one an EtcdDefragPolicy has (`Active`).
pub use crate::defrag::policy::CONDITION;

/// The label on every EtcdSnapshot a schedule stamps: the schedule's name.
pub const SCHEDULE_LABEL: &str = "etcd-operator.cozystack.io/snapshot-schedule";

/// Complete snapshots kept when `retention` is unset (or sets no rule).
pub const DEFAULT_KEEP_LAST: i32 = 7;

/// Failed snapshots kept when `failedHistoryLimit` is unset.
pub const DEFAULT_FAILED_HISTORY: i32 = 3;

/// One EtcdSnapshot of the schedule, as the decisions read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotFacts {
    pub name: String,
    pub phase: Option<SnapshotPhase>,
    /// The stored object was read back and matched (`status.verified`).
    pub verified: Option<bool>,
    pub created: Option<Timestamp>,
    pub completed: Option<Timestamp>,
}

impl SnapshotFacts {
    fn finished(&self) -> bool {
        matches!(
            self.phase,
            Some(SnapshotPhase::Complete | SnapshotPhase::Failed)
        )
    }

    fn good(&self) -> bool {
        self.phase == Some(SnapshotPhase::Complete) && self.verified == Some(true)
    }

    /// When it was taken: completion, else creation.
    fn time(&self) -> Option<Timestamp> {
        self.completed.or(self.created)
    }
}

/// What retention keeps and deletes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Retained {
    /// The Complete snapshots kept.
    pub keep: BTreeSet<String>,
    /// Snapshots to delete (Complete ones no rule keeps, Failed ones beyond the history),
    /// oldest first.
    pub delete: Vec<String>,
    /// The newest Complete, verified snapshot (always kept).
    pub newest_verified: Option<String>,
}

/// Newest first (by time, then name).
fn newest_first(mut snapshots: Vec<&SnapshotFacts>) -> Vec<&SnapshotFacts> {
    snapshots.sort_by(|a, b| (b.time(), &b.name).cmp(&(a.time(), &a.name)));
    snapshots
}

/// The newest snapshot of each of the last `periods` periods (of `seconds`, offset by
/// `offset` seconds) that have one.
fn newest_per_period(
    complete: &[&SnapshotFacts],
    periods: i32,
    seconds: i64,
    offset: i64,
    keep: &mut BTreeSet<String>,
) {
    let mut seen = BTreeSet::new();
    for snapshot in complete {
        if seen.len() >= periods.max(0) as usize {
            break;
        }
        let Some(time) = snapshot.time() else {
            continue;
        };
        if seen.insert((time.as_second() + offset).div_euclid(seconds)) {
            keep.insert(snapshot.name.clone());
        }
    }
}

/// Which snapshots `retention` keeps. Snapshots not finished are never touched; the newest
/// Complete and verified one is always kept, whatever the rules say; Failed ones are kept up to
/// `failed_history`.
pub fn retain(
    snapshots: &[SnapshotFacts],
    retention: Option<&SnapshotRetention>,
    failed_history: Option<i32>,
) -> Retained {
    let complete = newest_first(
        snapshots
            .iter()
            .filter(|s| s.phase == Some(SnapshotPhase::Complete))
            .collect(),
    );
    let failed = newest_first(
        snapshots
            .iter()
            .filter(|s| s.phase == Some(SnapshotPhase::Failed))
            .collect(),
    );
    let rules = retention.cloned().unwrap_or_default();
    let no_rule = rules.keep_last.is_none()
        && rules.keep_hourly.is_none()
        && rules.keep_daily.is_none()
        && rules.keep_weekly.is_none();
    let keep_last = if no_rule {
        DEFAULT_KEEP_LAST
    } else {
        rules.keep_last.unwrap_or(0)
    };
    let mut keep: BTreeSet<String> = complete
        .iter()
        .take(keep_last.max(0) as usize)
        .map(|s| s.name.clone())
        .collect();
    const HOUR: i64 = 3600;
    const DAY: i64 = 24 * HOUR;
    if let Some(n) = rules.keep_hourly {
        newest_per_period(&complete, n, HOUR, 0, &mut keep);
    }
    if let Some(n) = rules.keep_daily {
        newest_per_period(&complete, n, DAY, 0, &mut keep);
    }
    if let Some(n) = rules.keep_weekly {
        // 1970-01-01 was a Thursday: three days on, weeks start on Mondays (ISO weeks).
        newest_per_period(&complete, n, 7 * DAY, 3 * DAY, &mut keep);
    }
    let newest_verified = complete.iter().find(|s| s.good()).map(|s| s.name.clone());
    if let Some(name) = &newest_verified {
        keep.insert(name.clone());
    }
    let mut delete: Vec<&SnapshotFacts> = complete
        .iter()
        .filter(|s| !keep.contains(&s.name))
        .copied()
        .chain(
            failed
                .iter()
                .skip(failed_history.unwrap_or(DEFAULT_FAILED_HISTORY).max(0) as usize)
                .copied(),
        )
        .collect();
    delete.sort_by(|a, b| (a.time(), &a.name).cmp(&(b.time(), &b.name)));
    Retained {
        keep,
        delete: delete.into_iter().map(|s| s.name.clone()).collect(),
        newest_verified,
    }
}

/// What a schedule is, for [`decide`]: its spec, status, name, creation and generation.
#[derive(Clone, Copy, Debug)]
pub struct ScheduleFacts<'a> {
    pub spec: &'a EtcdSnapshotScheduleSpec,
    pub status: Option<&'a EtcdSnapshotScheduleStatus>,
    pub name: &'a str,
    pub created: Timestamp,
    pub generation: Option<i64>,
}

/// What one pass over a schedule does.
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduleDecision {
    /// The status to write.
    pub status: EtcdSnapshotScheduleStatus,
    /// Stamp a snapshot for this tick (named by [`crate::defrag::policy::run_name`]).
    pub stamp: Option<Timestamp>,
    /// Snapshots retention no longer keeps, oldest first: deleted with their stored objects.
    pub delete: Vec<String>,
    pub event: Option<PolicyEvent>,
    /// When to look again; `None` waits for a change.
    pub requeue: Option<Duration>,
    /// What the schedule's staleness series say; `None` (no series) while it is suspended or
    /// its cron expression is invalid.
    pub freshness: Option<Freshness>,
}

/// How fresh a schedule's backups are, for the `EtcdBackupStale` alert on a schedule: it fires
/// when `last_success` is more than an interval (and a grace) old. A schedule that never
/// succeeded counts from its creation, so one that never worked alerts too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Freshness {
    /// The newest verified success (Unix seconds), else the schedule's creation.
    pub last_success: i64,
    /// The time between two ticks of the schedule, in seconds.
    pub interval: i64,
}

/// One pass over a schedule whose stamped snapshots are `snapshots`, at `now`.
pub fn decide(
    schedule: ScheduleFacts<'_>,
    snapshots: &[SnapshotFacts],
    now: Timestamp,
) -> ScheduleDecision {
    let spec = schedule.spec;
    let mut status = schedule.status.cloned().unwrap_or_default();
    let mut active: Vec<String> = snapshots
        .iter()
        .filter(|s| !s.finished())
        .map(|s| s.name.clone())
        .collect();
    active.sort();
    let retained = retain(
        snapshots,
        spec.retention.as_ref(),
        spec.failed_history_limit,
    );
    let latest_success = snapshots
        .iter()
        .filter(|s| s.good())
        .filter_map(|s| s.completed)
        .max();
    if let Some(t) = latest_success
        && status
            .last_successful_time
            .as_ref()
            .is_none_or(|old| old.0 < t)
    {
        status.last_successful_time = Some(Time(t));
    }
    status.newest_verified = retained.newest_verified.clone();
    status.kept = Some(retained.keep.len() as i32);
    let anchor = status
        .last_schedule_time
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(schedule.created);
    let mut pass = schedule_pass(
        ScheduleInput {
            schedule: &spec.schedule,
            suspend: spec.suspend == Some(true),
            concurrency: spec.concurrency_policy.unwrap_or_default(),
            starting_deadline_seconds: spec.starting_deadline_seconds,
            anchor,
            now,
            kind: "EtcdSnapshot",
            name: schedule.name,
        },
        &mut active,
    );
    // A new schedule backs its cluster up at once (unless `firstSnapshot: AtFirstTick`), named
    // by its creation time so that a pass repeated before the status is written stamps the
    // same snapshot; `lastScheduleTime` then anchors the ticks, as after any run.
    if spec.first_snapshot.unwrap_or_default() == FirstSnapshot::Immediately
        && status.last_schedule_time.is_none()
        && snapshots.is_empty()
        && pass.condition.ok
        && pass.stamp.is_none()
        && pass.event.is_none()
    {
        let name = run_name(schedule.name, schedule.created);
        pass.stamp = Some(schedule.created);
        pass.last_schedule_time = Some(schedule.created);
        pass.event = Some(PolicyEvent {
            warning: false,
            reason: "RunCreated",
            message: format!(
                "created EtcdSnapshot {name}, the schedule's first, at once (spec.firstSnapshot: AtFirstTick waits for the first tick)"
            ),
        });
        active.push(name);
        active.sort();
    }
    let freshness = (spec.suspend != Some(true))
        .then(|| parse_schedule(&spec.schedule).ok())
        .flatten()
        .and_then(|cron| cron.interval_after(now))
        .map(|interval| Freshness {
            last_success: status
                .last_successful_time
                .as_ref()
                .map(|t| t.0)
                .unwrap_or(schedule.created)
                .as_second(),
            interval,
        });
    let (stamp, event, requeue) = pass.apply(
        &mut status.conditions,
        &mut status.last_schedule_time,
        schedule.generation,
        now,
    );
    status.active = (!active.is_empty()).then(|| {
        active
            .iter()
            .map(|n| LocalObjectReference { name: n.clone() })
            .collect()
    });
    ScheduleDecision {
        status,
        stamp,
        delete: retained.delete,
        event,
        requeue,
        freshness,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etcd_operator_api::shared::{S3SnapshotLocation, SnapshotLocation};
    use etcd_operator_api::snapshot_schedule::SnapshotTemplate;
    use proptest::prelude::*;

    fn ts(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn spec(schedule: &str, retention: Option<SnapshotRetention>) -> EtcdSnapshotScheduleSpec {
        EtcdSnapshotScheduleSpec {
            cluster_ref: LocalObjectReference {
                name: "etcd".into(),
            },
            schedule: schedule.into(),
            template: SnapshotTemplate {
                destination: SnapshotLocation {
                    s3: Some(S3SnapshotLocation {
                        endpoint: "http://s3".into(),
                        bucket: "backups".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            },
            retention,
            ..Default::default()
        }
    }

    fn facts<'a>(
        spec: &'a EtcdSnapshotScheduleSpec,
        status: Option<&'a EtcdSnapshotScheduleStatus>,
    ) -> ScheduleFacts<'a> {
        ScheduleFacts {
            spec,
            status,
            name: "hourly",
            created: ts("2026-01-01T00:00:00Z"),
            generation: Some(1),
        }
    }

    fn snap(name: &str, phase: Option<SnapshotPhase>, at: &str) -> SnapshotFacts {
        SnapshotFacts {
            name: name.into(),
            phase,
            verified: (phase == Some(SnapshotPhase::Complete)).then_some(true),
            created: Some(ts(at)),
            completed: phase
                .is_some_and(|p| p != SnapshotPhase::Started)
                .then(|| ts(at)),
        }
    }

    fn complete(name: &str, at: &str) -> SnapshotFacts {
        snap(name, Some(SnapshotPhase::Complete), at)
    }

    fn keep_last(n: i32) -> Option<SnapshotRetention> {
        Some(SnapshotRetention {
            keep_last: Some(n),
            ..Default::default()
        })
    }

    #[test]
    fn keep_last_deletes_the_oldest_complete_and_leaves_running_ones() {
        let snapshots = [
            complete("a", "2026-01-01T00:00:00Z"),
            complete("b", "2026-01-01T01:00:00Z"),
            complete("c", "2026-01-01T02:00:00Z"),
            snap("d", Some(SnapshotPhase::Started), "2026-01-01T03:00:00Z"),
            snap("e", None, "2026-01-01T04:00:00Z"),
        ];
        let r = retain(&snapshots, keep_last(2).as_ref(), None);
        assert_eq!(r.delete, ["a"]);
        assert_eq!(r.keep, BTreeSet::from(["b".into(), "c".into()]));
        assert_eq!(r.newest_verified.as_deref(), Some("c"));
    }

    #[test]
    fn without_retention_the_last_seven_are_kept() {
        let snapshots: Vec<_> = (0..10)
            .map(|i| complete(&format!("s{i}"), &format!("2026-01-01T0{i}:00:00Z")))
            .collect();
        for retention in [None, Some(SnapshotRetention::default())] {
            let r = retain(&snapshots, retention.as_ref(), None);
            assert_eq!(r.delete, ["s0", "s1", "s2"]);
            assert_eq!(r.keep.len(), DEFAULT_KEEP_LAST as usize);
        }
    }

    #[test]
    fn the_newest_verified_snapshot_is_kept_whatever_the_rules_say() {
        // The two newest are complete but not verified (verification pending or failed).
        let mut snapshots = vec![
            complete("old", "2026-01-01T00:00:00Z"),
            complete("newer", "2026-01-01T01:00:00Z"),
            complete("newest", "2026-01-01T02:00:00Z"),
        ];
        snapshots[1].verified = Some(false);
        snapshots[2].verified = None;
        let r = retain(&snapshots, keep_last(1).as_ref(), None);
        assert_eq!(r.newest_verified.as_deref(), Some("old"));
        assert!(r.keep.contains("old") && r.keep.contains("newest"));
        assert_eq!(r.delete, ["newer"]);
    }

    #[test]
    fn failed_snapshots_are_kept_up_to_the_history_limit() {
        let snapshots: Vec<_> = (0..5)
            .map(|i| {
                snap(
                    &format!("f{i}"),
                    Some(SnapshotPhase::Failed),
                    &format!("2026-01-01T0{i}:00:00Z"),
                )
            })
            .collect();
        assert_eq!(retain(&snapshots, None, None).delete, ["f0", "f1"]);
        assert_eq!(retain(&snapshots, None, Some(0)).delete.len(), 5);
        assert!(retain(&snapshots, None, Some(9)).delete.is_empty());
    }

    #[test]
    fn one_per_hour_day_and_week_keeps_the_newest_of_each_period() {
        // Every 20 minutes for 15 days, from Monday 2026-01-05.
        let start = ts("2026-01-05T00:00:00Z").as_second();
        let snapshots: Vec<SnapshotFacts> = (0..(15 * 72))
            .map(|i| {
                let at = Timestamp::from_second(start + i * 1200).unwrap();
                SnapshotFacts {
                    name: format!("s{i:04}"),
                    phase: Some(SnapshotPhase::Complete),
                    verified: Some(true),
                    created: Some(at),
                    completed: Some(at),
                }
            })
            .collect();
        let newest = snapshots.last().unwrap().name.clone();
        let hourly = retain(
            &snapshots,
            Some(&SnapshotRetention {
                keep_hourly: Some(24),
                ..Default::default()
            }),
            None,
        );
        assert_eq!(hourly.keep.len(), 24);
        // The newest of each hour is its :40 snapshot, the third of the hour.
        assert!(hourly.keep.iter().all(|n| {
            let i: i64 = n[1..].parse().unwrap();
            i % 3 == 2
        }));
        assert!(hourly.keep.contains(&newest));
        let daily = retain(
            &snapshots,
            Some(&SnapshotRetention {
                keep_daily: Some(7),
                ..Default::default()
            }),
            None,
        );
        assert_eq!(daily.keep.len(), 7);
        // The newest of each day is its 23:40 snapshot.
        assert!(daily.keep.iter().all(|n| {
            let i: i64 = n[1..].parse().unwrap();
            i % 72 == 71
        }));
        let weekly = retain(
            &snapshots,
            Some(&SnapshotRetention {
                keep_weekly: Some(4),
                ..Default::default()
            }),
            None,
        );
        // 15 days from a Monday touch three ISO weeks: each one's newest (Sunday 23:40 twice,
        // and the newest overall) is kept.
        assert_eq!(
            weekly.keep,
            BTreeSet::from([
                format!("s{:04}", 7 * 72 - 1),
                format!("s{:04}", 14 * 72 - 1),
                newest.clone()
            ])
        );
        // Rules add up.
        let both = retain(
            &snapshots,
            Some(&SnapshotRetention {
                keep_last: Some(2),
                keep_daily: Some(3),
                ..Default::default()
            }),
            None,
        );
        assert_eq!(both.keep.len(), 2 + 3 - 1, "the newest is in both");
        assert_eq!(both.keep.len() + both.delete.len(), snapshots.len());
    }

    /// A schedule every minute with keep-last 3, run for ten ticks, each stamped snapshot
    /// completing before the next tick: after each pass exactly the three newest remain.
    #[test]
    fn ten_runs_of_a_minutely_schedule_keep_exactly_what_retention_says() {
        let s = spec("* * * * *", keep_last(3));
        let mut status: Option<EtcdSnapshotScheduleStatus> = None;
        let mut existing: Vec<SnapshotFacts> = Vec::new();
        let mut stamped = Vec::new();
        for minute in 1..=10 {
            let now = ts("2026-01-01T00:00:05Z")
                .checked_add(k8s_openapi::jiff::SignedDuration::from_mins(minute))
                .unwrap();
            let d = decide(facts(&s, status.as_ref()), &existing, now);
            let tick = d.stamp.expect("a tick each minute");
            let name = run_name("hourly", tick);
            assert_eq!(d.event.as_ref().unwrap().reason, "RunCreated");
            existing.retain(|e| !d.delete.contains(&e.name));
            existing.push(SnapshotFacts {
                name: name.clone(),
                phase: Some(SnapshotPhase::Complete),
                verified: Some(true),
                created: Some(tick),
                completed: Some(now),
            });
            stamped.push(name);
            status = Some(d.status);
            // The pass the completion triggers applies retention.
            let d = decide(facts(&s, status.as_ref()), &existing, now);
            assert_eq!(d.stamp, None);
            existing.retain(|e| !d.delete.contains(&e.name));
            let mut names: Vec<_> = existing.iter().map(|e| e.name.clone()).collect();
            names.sort();
            let expected: Vec<_> = stamped.iter().rev().take(3).rev().cloned().collect();
            assert_eq!(names, expected, "after run {minute}");
            assert_eq!(d.status.kept, Some(expected.len() as i32));
            assert_eq!(d.status.newest_verified.as_ref(), stamped.last());
            assert_eq!(d.status.last_successful_time, Some(Time(now)));
            status = Some(d.status);
        }
    }

    #[test]
    fn suspend_forbid_and_an_invalid_schedule_stamp_nothing_but_retention_still_applies() {
        let snapshots = [
            complete("a", "2026-01-01T00:00:00Z"),
            complete("b", "2026-01-01T00:01:00Z"),
            snap("c", Some(SnapshotPhase::Started), "2026-01-01T00:02:00Z"),
        ];
        let now = ts("2026-01-01T00:03:01Z");
        let mut s = spec("* * * * *", keep_last(1));
        let d = decide(facts(&s, None), &snapshots, now);
        assert_eq!(d.stamp, None, "Forbid while c runs");
        assert_eq!(d.event.as_ref().unwrap().reason, "ConcurrencyForbidden");
        assert_eq!(d.delete, ["a"]);
        assert_eq!(d.status.active.as_ref().unwrap()[0].name, "c");

        s.suspend = Some(true);
        let d = decide(facts(&s, None), &snapshots, now);
        assert_eq!(d.stamp, None);
        assert_eq!(d.status.conditions.as_ref().unwrap()[0].reason, "Suspended");
        assert_eq!(d.delete, ["a"]);

        let s = spec("every minute", keep_last(1));
        let d = decide(facts(&s, None), &snapshots, now);
        assert_eq!(d.stamp, None);
        let condition = &d.status.conditions.as_ref().unwrap()[0];
        assert_eq!(condition.reason, "InvalidSchedule");
        assert!(
            condition.message.contains("five-field"),
            "{}",
            condition.message
        );
        assert_eq!(d.event.as_ref().unwrap().reason, "InvalidSchedule");
        // Said once: the next pass with the condition already set records no Event again.
        let again = decide(facts(&s, Some(&d.status)), &snapshots, now);
        assert_eq!(again.event, None);
        assert_eq!(d.delete, ["a"]);
    }

    /// Minutes after 2026-01-01T00:00:00Z, the test schedules' creation.
    fn at(minutes: i64, seconds: i64) -> Timestamp {
        ts("2026-01-01T00:00:00Z")
            .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(
                minutes * 60 + seconds,
            ))
            .unwrap()
    }

    #[test]
    fn a_new_schedule_takes_its_first_snapshot_at_once_and_then_keeps_to_its_ticks() {
        let s = spec("0 * * * *", None);
        let first = decide(facts(&s, None), &[], at(0, 10));
        assert_eq!(first.stamp, Some(at(0, 0)), "the first one at once");
        assert_eq!(first.event.as_ref().unwrap().reason, "RunCreated");
        assert_eq!(first.status.last_schedule_time, Some(Time(at(0, 0))));
        // A pass before the status was written (the operator stopped in between) names the
        // same snapshot: one first snapshot, not two.
        let repeated = decide(facts(&s, None), &[], at(0, 20));
        assert_eq!(repeated.stamp, first.stamp);
        let taken = [complete(
            &run_name("hourly", at(0, 0)),
            "2026-01-01T00:01:00Z",
        )];
        let status = Some(first.status);
        let quiet = decide(facts(&s, status.as_ref()), &taken, at(30, 0));
        assert_eq!(quiet.stamp, None, "nothing more before the first tick");
        let tick = decide(facts(&s, status.as_ref()), &taken, at(60, 5));
        assert_eq!(tick.stamp, Some(at(60, 0)));
        // Even with its status lost, a schedule that has snapshots does not start over.
        let lost = decide(facts(&s, None), &taken, at(30, 0));
        assert_eq!(lost.stamp, None);

        let mut waits = spec("0 * * * *", None);
        waits.first_snapshot = Some(FirstSnapshot::AtFirstTick);
        let d = decide(facts(&waits, None), &[], at(0, 10));
        assert_eq!(d.stamp, None, "AtFirstTick waits");
        assert_eq!(d.event, None);
        assert_eq!(
            decide(facts(&waits, None), &[], at(60, 5)).stamp,
            Some(at(60, 0))
        );

        let mut suspended = spec("0 * * * *", None);
        suspended.suspend = Some(true);
        assert_eq!(decide(facts(&suspended, None), &[], at(0, 10)).stamp, None);
    }

    /// The operator's memory of a schedule is its status: an operator that restarts reads
    /// `lastScheduleTime` back and neither repeats a tick nor misses one it was down for.
    #[test]
    fn an_operator_restart_neither_repeats_nor_misses_a_tick() {
        let mut s = spec("0 * * * *", None);
        s.first_snapshot = Some(FirstSnapshot::AtFirstTick);
        let one = decide(facts(&s, None), &[], at(60, 1));
        assert_eq!(one.stamp, Some(at(60, 0)));
        let stamped = [complete(
            &run_name("hourly", at(60, 0)),
            "2026-01-01T01:02:00Z",
        )];
        // The restarted operator reads the status the first one wrote.
        let status = Some(one.status);
        let again = decide(facts(&s, status.as_ref()), &stamped, at(60, 30));
        assert_eq!(again.stamp, None, "no doubled run");
        // Down from 01:30 to 02:10: the 02:00 tick is taken when it comes back.
        let late = decide(facts(&s, status.as_ref()), &stamped, at(130, 0));
        assert_eq!(late.stamp, Some(at(120, 0)), "no missed run");
        assert_eq!(late.status.last_schedule_time, Some(Time(at(120, 0))));
    }

    #[test]
    fn freshness_counts_from_the_last_success_or_from_creation() {
        let s = spec("*/15 * * * *", None);
        let never = decide(facts(&s, None), &[], at(0, 10));
        assert_eq!(
            never.freshness,
            Some(Freshness {
                last_success: at(0, 0).as_second(),
                interval: 15 * 60,
            }),
            "a schedule that never succeeded counts from its creation"
        );
        let taken = [complete("hourly-1", "2026-01-01T00:05:00Z")];
        let d = decide(facts(&s, Some(&never.status)), &taken, at(6, 0));
        assert_eq!(
            d.freshness.map(|f| f.last_success),
            Some(ts("2026-01-01T00:05:00Z").as_second())
        );
        let mut suspended = s.clone();
        suspended.suspend = Some(true);
        assert_eq!(
            decide(facts(&suspended, None), &[], at(0, 10)).freshness,
            None
        );
        let invalid = spec("every minute", None);
        assert_eq!(
            decide(facts(&invalid, None), &[], at(0, 10)).freshness,
            None
        );
    }

    fn phase() -> impl Strategy<Value = Option<SnapshotPhase>> {
        prop_oneof![
            Just(None),
            Just(Some(SnapshotPhase::Pending)),
            Just(Some(SnapshotPhase::Started)),
            Just(Some(SnapshotPhase::Complete)),
            Just(Some(SnapshotPhase::Failed)),
        ]
    }

    proptest! {
        /// Whatever the snapshots and rules: nothing unfinished is deleted, the newest verified
        /// one is kept, keep and delete never overlap, and every Complete snapshot is in one.
        #[test]
        fn retention_never_deletes_what_it_must_keep(
            raw in proptest::collection::vec((phase(), proptest::option::of(any::<bool>()), 0i64..(30 * 86400)), 0..40),
            keep_last in proptest::option::of(1i32..6),
            hourly in proptest::option::of(0i32..6),
            daily in proptest::option::of(0i32..6),
            weekly in proptest::option::of(0i32..4),
            failed_history in proptest::option::of(0i32..4),
        ) {
            let base = ts("2026-01-01T00:00:00Z").as_second();
            let snapshots: Vec<SnapshotFacts> = raw.iter().enumerate().map(|(i, (phase, verified, at))| {
                let at = Timestamp::from_second(base + at).unwrap();
                SnapshotFacts { name: format!("s{i}"), phase: *phase, verified: *verified, created: Some(at), completed: Some(at) }
            }).collect();
            let rules = SnapshotRetention { keep_last, keep_hourly: hourly, keep_daily: daily, keep_weekly: weekly };
            let r = retain(&snapshots, Some(&rules), failed_history);
            for s in &snapshots {
                let deleted = r.delete.contains(&s.name);
                if !s.finished() {
                    prop_assert!(!deleted, "{} is not finished", s.name);
                }
                if s.phase == Some(SnapshotPhase::Complete) {
                    prop_assert!(deleted != r.keep.contains(&s.name), "{} in both or neither", s.name);
                }
            }
            let newest_good = snapshots.iter().filter(|s| s.good()).max_by(|a, b| (a.time(), &a.name).cmp(&(b.time(), &b.name)));
            prop_assert_eq!(r.newest_verified.as_deref(), newest_good.map(|s| s.name.as_str()));
            if let Some(good) = newest_good {
                prop_assert!(!r.delete.contains(&good.name));
            }
            let failed = snapshots.iter().filter(|s| s.phase == Some(SnapshotPhase::Failed)).count();
            let failed_deleted = r.delete.iter().filter(|n| snapshots.iter().any(|s| &s.name == *n && s.phase == Some(SnapshotPhase::Failed))).count();
            prop_assert_eq!(failed_deleted, failed.saturating_sub(failed_history.unwrap_or(DEFAULT_FAILED_HISTORY) as usize));
        }
    }
}
