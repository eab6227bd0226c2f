//! The pure decisions of an EtcdDefragPolicy: parsing its schedule (five-field cron in UTC,
//! `CRON_TZ=<zone>` honoured), finding the tick that is due, and what a pass does about it
//! (stamp a run, skip it and why, delete history beyond `historyLimit`), with the status that
//! results. The clock is a parameter, so the tests run schedules over days in microseconds.

use std::time::Duration;

use croner::Cron;
use croner::parser::{CronParser, Seconds};
use etcd_operator_api::defrag::DefragPhase;
use etcd_operator_api::defrag_policy::{
    ConcurrencyPolicy, EtcdDefragPolicySpec, EtcdDefragPolicyStatus,
};
use k8s_openapi::api::core::v1::LocalObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::tz::TimeZone;

/// The label on every EtcdDefrag a policy stamps: the policy's name.
pub const POLICY_LABEL: &str = "etcd-operator.cozystack.io/defrag-policy";

/// The condition of a policy: True `Scheduled`, False `Suspended` or `InvalidSchedule`.
pub const CONDITION: &str = "Active";

/// Passes are at most this far apart, even with a far-off next tick (a clock step, a changed
/// schedule are noticed).
const MAX_REQUEUE: Duration = Duration::from_secs(600);

/// A parsed schedule: the cron pattern and the zone it is read in.
#[derive(Clone, Debug)]
pub struct Schedule {
    cron: Cron,
    zone: TimeZone,
}

/// Parses `schedule`: an optional `CRON_TZ=<IANA zone>` (or `TZ=`) prefix, then five fields
/// (minute hour day-of-month month day-of-week) or a nickname such as `@daily`.
pub fn parse_schedule(schedule: &str) -> Result<Schedule, String> {
    let text = schedule.trim();
    let (zone, pattern) = match text
        .strip_prefix("CRON_TZ=")
        .or_else(|| text.strip_prefix("TZ="))
    {
        Some(rest) => {
            let (name, pattern) = rest
                .split_once(char::is_whitespace)
                .ok_or_else(|| format!("{schedule:?} has a time zone but no cron fields"))?;
            let zone = TimeZone::get(name)
                .map_err(|e| format!("unknown time zone {name:?} in CRON_TZ: {e}"))?;
            (zone, pattern.trim())
        }
        None => (TimeZone::UTC, text),
    };
    if !pattern.starts_with('@') && pattern.split_whitespace().count() != 5 {
        return Err(format!(
            "{pattern:?} is not a five-field cron expression (minute hour day-of-month month day-of-week)"
        ));
    }
    let cron = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .build()
        .parse(pattern)
        .map_err(|e| format!("cannot parse {pattern:?}: {e}"))?;
    Ok(Schedule { cron, zone })
}

impl Schedule {
    /// The first tick strictly after `t`.
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        let zoned = t.to_zoned(self.zone.clone());
        self.cron
            .find_next_occurrence(&zoned, false)
            .ok()
            .map(|z| z.timestamp())
    }

    /// The latest tick at or before `t`.
    pub fn latest_at_or_before(&self, t: Timestamp) -> Option<Timestamp> {
        let zoned = t.to_zoned(self.zone.clone());
        self.cron
            .find_previous_occurrence(&zoned, true)
            .ok()
            .map(|z| z.timestamp())
    }

    /// The time between the two ticks that follow `t`, in seconds: what "on schedule" means
    /// for an alert on a schedule that has not succeeded.
    pub fn interval_after(&self, t: Timestamp) -> Option<i64> {
        let first = self.next_after(t)?;
        let second = self.next_after(first)?;
        Some(second.as_second() - first.as_second())
    }

    /// The tick due at `now` (the latest one after `earliest`, at or before `now`: missed
    /// earlier ones are not caught up), and the next one after `now`.
    pub fn due(
        &self,
        earliest: Timestamp,
        now: Timestamp,
    ) -> (Option<Timestamp>, Option<Timestamp>) {
        let due = self
            .latest_at_or_before(now)
            .filter(|tick| *tick > earliest);
        (due, self.next_after(now))
    }
}

/// One EtcdDefrag stamped by the policy, as the decisions read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunFacts {
    pub name: String,
    pub phase: Option<DefragPhase>,
    pub created: Option<Timestamp>,
    pub completed: Option<Timestamp>,
}

impl RunFacts {
    fn finished(&self) -> bool {
        matches!(
            self.phase,
            Some(DefragPhase::Complete | DefragPhase::Failed)
        )
    }
}

/// An Event a pass records about the policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyEvent {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

/// What one pass over a policy does.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyDecision {
    /// The status to write.
    pub status: EtcdDefragPolicyStatus,
    /// Stamp a run for this tick (named by [`run_name`]).
    pub stamp: Option<Timestamp>,
    /// Finished runs beyond `historyLimit`, oldest first.
    pub delete: Vec<String>,
    pub event: Option<PolicyEvent>,
    /// When to look again; `None` waits for a change.
    pub requeue: Option<Duration>,
}

/// The name of the run stamped for `tick`: `<policy>-<unix seconds>`, so a tick is stamped at
/// most once even if the status write after the create is lost.
pub fn run_name(policy: &str, tick: Timestamp) -> String {
    format!("{policy}-{}", tick.as_second())
}

/// What a policy is, for [`decide`]: its spec, status, name, creation and generation.
#[derive(Clone, Copy, Debug)]
pub struct PolicyFacts<'a> {
    pub spec: &'a EtcdDefragPolicySpec,
    pub status: Option<&'a EtcdDefragPolicyStatus>,
    pub name: &'a str,
    pub created: Timestamp,
    pub generation: Option<i64>,
}

/// One pass over a policy whose stamped runs are `runs`, at `now`.
pub fn decide(policy: PolicyFacts<'_>, runs: &[RunFacts], now: Timestamp) -> PolicyDecision {
    let spec = policy.spec;
    let generation = policy.generation;
    let mut status = policy.status.cloned().unwrap_or_default();
    let mut active: Vec<String> = runs
        .iter()
        .filter(|r| !r.finished())
        .map(|r| r.name.clone())
        .collect();
    active.sort();
    let latest_success = runs
        .iter()
        .filter(|r| r.phase == Some(DefragPhase::Complete))
        .filter_map(|r| r.completed)
        .max();
    if let Some(t) = latest_success
        && status
            .last_successful_time
            .as_ref()
            .is_none_or(|old| old.0 < t)
    {
        status.last_successful_time = Some(Time(t));
    }
    let mut decision = PolicyDecision {
        status,
        stamp: None,
        delete: history_beyond(runs, spec.history_limit),
        event: None,
        requeue: None,
    };
    let anchor = decision
        .status
        .last_schedule_time
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(policy.created);
    let pass = schedule_pass(
        ScheduleInput {
            schedule: &spec.schedule,
            suspend: spec.suspend == Some(true),
            concurrency: spec.concurrency_policy.unwrap_or_default(),
            starting_deadline_seconds: spec.starting_deadline_seconds,
            anchor,
            now,
            kind: "EtcdDefrag",
            name: policy.name,
        },
        &mut active,
    );
    let status = &mut decision.status;
    (decision.stamp, decision.event, decision.requeue) = pass.apply(
        &mut status.conditions,
        &mut status.last_schedule_time,
        generation,
        now,
    );
    decision.status.active = refs(&active);
    decision
}

/// A schedule as [`schedule_pass`] reads it: the kind-independent part of a policy's spec and
/// status.
#[derive(Clone, Copy, Debug)]
pub struct ScheduleInput<'a> {
    pub schedule: &'a str,
    pub suspend: bool,
    pub concurrency: ConcurrencyPolicy,
    pub starting_deadline_seconds: Option<i64>,
    /// The latest tick acted on, else the object's creation: the next tick is after it.
    pub anchor: Timestamp,
    pub now: Timestamp,
    /// The kind stamped (`EtcdDefrag`, `EtcdSnapshot`), for the messages.
    pub kind: &'static str,
    /// The policy's (or schedule's) name, for [`run_name`].
    pub name: &'a str,
}

/// The condition a schedule pass sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleCondition {
    pub ok: bool,
    pub reason: &'static str,
    pub message: String,
}

/// What one pass over a schedule does, whatever it stamps.
#[derive(Clone, Debug, PartialEq)]
pub struct SchedulePass {
    pub condition: ScheduleCondition,
    /// The new `lastScheduleTime`, when a tick was acted on (stamped or skipped on purpose).
    pub last_schedule_time: Option<Timestamp>,
    /// Stamp an object for this tick (named by [`run_name`]).
    pub stamp: Option<Timestamp>,
    /// An `InvalidSchedule` Event is meant for when the condition changes only.
    pub event: Option<PolicyEvent>,
    pub requeue: Option<Duration>,
}

impl SchedulePass {
    /// Sets a schedule's condition and `lastScheduleTime` from this pass; returns the tick to
    /// stamp, the Event to record (an `InvalidSchedule` one only when the condition changed)
    /// and the requeue.
    pub fn apply(
        self,
        conditions: &mut Option<Vec<Condition>>,
        last_schedule_time: &mut Option<Time>,
        generation: Option<i64>,
        now: Timestamp,
    ) -> (Option<Timestamp>, Option<PolicyEvent>, Option<Duration>) {
        let changed = super::decide::upsert_condition(
            conditions.get_or_insert_with(Vec::new),
            CONDITION,
            self.condition.ok,
            self.condition.reason,
            &self.condition.message,
            generation,
            now,
        );
        if let Some(tick) = self.last_schedule_time {
            *last_schedule_time = Some(Time(tick));
        }
        let event = self
            .event
            .filter(|e| changed || e.reason != "InvalidSchedule");
        (self.stamp, event, self.requeue)
    }
}

/// The tick due at `input.now` and what to do about it: stamp, skip (past the starting
/// deadline, or `Forbid` with `active` runs), or nothing (suspended, invalid, not due). The
/// name of a stamped object is added to `active`.
pub fn schedule_pass(input: ScheduleInput<'_>, active: &mut Vec<String>) -> SchedulePass {
    let now = input.now;
    let kind = input.kind;
    let schedule = match parse_schedule(input.schedule) {
        Ok(schedule) => schedule,
        Err(e) => {
            let message = format!("spec.schedule: {e}; fix the schedule");
            return SchedulePass {
                condition: ScheduleCondition {
                    ok: false,
                    reason: "InvalidSchedule",
                    message: message.clone(),
                },
                last_schedule_time: None,
                stamp: None,
                event: Some(PolicyEvent {
                    warning: true,
                    reason: "InvalidSchedule",
                    message,
                }),
                requeue: None,
            };
        }
    };
    let (due, next) = schedule.due(input.anchor, now);
    let requeue = Some(
        next.map(|n| Duration::from_secs((n.as_second() - now.as_second()).max(1) as u64))
            .unwrap_or(MAX_REQUEUE)
            .min(MAX_REQUEUE),
    );
    if input.suspend {
        // A tick passing while suspended is skipped on purpose, so resuming does not stamp it.
        return SchedulePass {
            condition: ScheduleCondition {
                ok: false,
                reason: "Suspended",
                message: format!(
                    "spec.suspend is set: no {kind}s are stamped; those in flight continue"
                ),
            },
            last_schedule_time: due,
            stamp: None,
            event: None,
            requeue,
        };
    }
    let mut pass = SchedulePass {
        condition: ScheduleCondition {
            ok: true,
            reason: "Scheduled",
            message: format!("stamping {kind}s on {:?}", input.schedule),
        },
        last_schedule_time: due,
        stamp: None,
        event: None,
        requeue,
    };
    let Some(tick) = due else {
        return pass;
    };
    let late = now.as_second() - tick.as_second();
    if let Some(deadline) = input.starting_deadline_seconds
        && late > deadline
    {
        pass.event = Some(PolicyEvent {
            warning: true,
            reason: "MissedSchedule",
            message: format!(
                "skipped the run due at {tick}: {late}s late, past startingDeadlineSeconds {deadline}"
            ),
        });
    } else if input.concurrency == ConcurrencyPolicy::Forbid && !active.is_empty() {
        pass.event = Some(PolicyEvent {
            warning: false,
            reason: "ConcurrencyForbidden",
            message: format!(
                "skipped the run due at {tick}: {} is still running (concurrencyPolicy Forbid)",
                active.join(", ")
            ),
        });
    } else {
        let name = run_name(input.name, tick);
        pass.event = Some(PolicyEvent {
            warning: false,
            reason: "RunCreated",
            message: format!("created {kind} {name} for the run due at {tick}"),
        });
        if !active.contains(&name) {
            active.push(name);
            active.sort();
        }
        pass.stamp = Some(tick);
    }
    pass
}

fn refs(names: &[String]) -> Option<Vec<LocalObjectReference>> {
    (!names.is_empty()).then(|| {
        names
            .iter()
            .map(|n| LocalObjectReference { name: n.clone() })
            .collect()
    })
}

/// Finished runs beyond `limit`, oldest (by completion, else creation) first.
fn history_beyond(runs: &[RunFacts], limit: Option<i32>) -> Vec<String> {
    let Some(limit) = limit else {
        return Vec::new();
    };
    let mut finished: Vec<&RunFacts> = runs.iter().filter(|r| r.finished()).collect();
    finished.sort_by(|a, b| {
        (a.completed.or(a.created), &a.name).cmp(&(b.completed.or(b.created), &b.name))
    });
    let excess = finished.len().saturating_sub(limit.max(0) as usize);
    finished[..excess].iter().map(|r| r.name.clone()).collect()
}
