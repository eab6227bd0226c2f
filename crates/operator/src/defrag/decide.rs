//! The pure decisions of an EtcdDefrag run: where it stands in its cluster's queue, whether
//! the cluster may be touched, which member goes next, whether the rule wants it, and the
//! status each outcome writes. No I/O: the controller gathers [`ClusterFacts`] and performs
//! what these functions decide.

use std::time::Duration;

use etcd_operator_api::EtcdDefrag;
use etcd_operator_api::defrag::{
    DEFAULT_FREE_SPACE_ABOVE, DEFAULT_MIN_RECLAIM, DefragOutcome, DefragPhase, DefragRule,
    EtcdDefragStatus, MemberDefragStatus, MemberRole,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use crate::domain::etcd::DEFAULT_QUOTA_BACKEND_BYTES;
use crate::domain::quantity::quantity_bytes;
use crate::etcd::{Alarm, AlarmKind};

/// A run that has not finished this long after it started (or, never started, after it was
/// created) fails: it would otherwise hold its cluster's queue forever.
pub const ACTIVE_DEADLINE: Duration = Duration::from_secs(30 * 60);

/// The condition every run carries: True while it makes progress or once Complete, False
/// with the reason while it waits or after it failed.
pub const CONDITION: &str = "DefragChecked";

/// What the controller knows of one member of the cluster, from the EtcdMember and etcd.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberFacts {
    /// The EtcdMember's name.
    pub name: String,
    /// etcd's member ID, once recorded.
    pub id: Option<u64>,
    /// The client URL the operator dials.
    pub endpoint: String,
    /// Whether the member answered Status, and what it said.
    pub status: Option<MemberStatusFacts>,
    /// A linearizable read through this member alone succeeded.
    pub healthy: bool,
    /// Why it is not healthy, when it is not (etcd's error text).
    pub problem: Option<String>,
}

/// The parts of a member's Status the decisions read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberStatusFacts {
    pub db_size: i64,
    pub db_size_in_use: i64,
    /// The leader as this member sees it; 0 for none.
    pub leader: u64,
    pub is_learner: bool,
    /// Errors the member reports about itself (active alarms among them).
    pub errors: Vec<String>,
}

/// What the controller knows of the cluster a run targets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterFacts {
    /// `spec.paused`.
    pub paused: bool,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `spec.replicas`.
    pub replicas: i32,
    /// Every EtcdMember that is not dormant, in name order.
    pub members: Vec<MemberFacts>,
    /// The backend quota in bytes (the spec's `quotaBackendBytes`, else etcd's default).
    pub quota_bytes: i64,
    /// Active alarms (empty when they could not be listed).
    pub alarms: Vec<Alarm>,
}

impl ClusterFacts {
    /// The leader's EtcdMember name, when every answering member that knows a leader agrees.
    pub fn leader_name(&self) -> Option<&str> {
        let leader = self.agreed_leader()?;
        self.members
            .iter()
            .find(|m| m.id == Some(leader))
            .map(|m| m.name.as_str())
    }

    fn agreed_leader(&self) -> Option<u64> {
        let mut leaders = self
            .members
            .iter()
            .filter_map(|m| m.status.as_ref())
            .map(|s| s.leader)
            .filter(|l| *l != 0);
        let first = leaders.next()?;
        leaders.all(|l| l == first).then_some(first)
    }
}

/// The quota a run measures `quotaUsageAbove` against.
pub fn effective_quota(quota_backend_bytes: Option<i64>) -> i64 {
    quota_backend_bytes
        .filter(|q| *q > 0)
        .unwrap_or(DEFAULT_QUOTA_BACKEND_BYTES)
}

/// Whether a phase is terminal (Complete or Failed: a run never runs again).
pub fn is_finished(defrag: &EtcdDefrag) -> bool {
    matches!(
        phase(defrag),
        Some(DefragPhase::Complete | DefragPhase::Failed)
    )
}

fn phase(defrag: &EtcdDefrag) -> Option<DefragPhase> {
    defrag.status.as_ref().and_then(|s| s.phase)
}

fn created(defrag: &EtcdDefrag) -> Option<Timestamp> {
    defrag.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// What to do with a finished run: delete it once `ttlSecondsAfterFinished` has passed since
/// `completedAt`, else look again then; `None` keeps it for good.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    Delete,
    After(Duration),
    Keep,
}

pub fn expiry(defrag: &EtcdDefrag, now: Timestamp) -> Expiry {
    let Some(ttl) = defrag.spec.ttl_seconds_after_finished else {
        return Expiry::Keep;
    };
    let Some(completed) = defrag.status.as_ref().and_then(|s| s.completed_at.as_ref()) else {
        return Expiry::Keep;
    };
    let due = completed.0.as_second() + i64::from(ttl.max(0));
    let left = due - now.as_second();
    if left <= 0 {
        Expiry::Delete
    } else {
        Expiry::After(Duration::from_secs(left as u64))
    }
}

/// The run's deadline passed: the message to fail with.
pub fn deadline_passed(defrag: &EtcdDefrag, now: Timestamp) -> Option<String> {
    let started = defrag.status.as_ref().and_then(|s| s.started_at.as_ref());
    let (since, what) = match started {
        Some(t) => (t.0, "did not complete"),
        None => (created(defrag)?, "could not start"),
    };
    let elapsed = now.as_second() - since.as_second();
    (elapsed > ACTIVE_DEADLINE.as_secs() as i64).then(|| {
        format!(
            "the defragmentation {what} within {} minutes; create a new EtcdDefrag to try again",
            ACTIVE_DEADLINE.as_secs() / 60
        )
    })
}

/// The run ahead of `defrag` in its cluster's queue: the oldest unfinished EtcdDefrag of the
/// same cluster (by creation time, then name), when that is another one. Runs of other
/// clusters and finished runs do not count.
pub fn ahead_in_queue<'a>(defrag: &EtcdDefrag, all: &'a [EtcdDefrag]) -> Option<&'a str> {
    let cluster = &defrag.spec.cluster_ref.name;
    let namespace = &defrag.metadata.namespace;
    let oldest = all
        .iter()
        .filter(|d| &d.spec.cluster_ref.name == cluster && &d.metadata.namespace == namespace)
        .filter(|d| !is_finished(d) && d.metadata.deletion_timestamp.is_none())
        .min_by(|a, b| (created(a), &a.metadata.name).cmp(&(created(b), &b.metadata.name)))?;
    let name = oldest.metadata.name.as_deref()?;
    (Some(name) != defrag.metadata.name.as_deref()).then_some(name)
}

/// Why the cluster may not be touched now, if it may not: every member must be a voter that
/// answers Status, serves a linearizable read, agrees on one leader and reports no error but
/// NOSPACE (which a defragmentation is there to cure); and the cluster must run at its
/// declared size.
pub fn health_gate(facts: &ClusterFacts) -> Result<(), String> {
    if facts.deleting {
        return Err("the EtcdCluster is being deleted".into());
    }
    if facts.members.is_empty() {
        return Err("the cluster has no running members".into());
    }
    if facts.members.len() != facts.replicas.max(0) as usize {
        return Err(format!(
            "the cluster runs {} members and wants {}; waiting until it has converged",
            facts.members.len(),
            facts.replicas
        ));
    }
    for member in &facts.members {
        let name = &member.name;
        let Some(status) = &member.status else {
            return Err(format!(
                "member {name} does not answer: {}",
                member.problem.as_deref().unwrap_or("no Status")
            ));
        };
        if status.is_learner {
            return Err(format!("member {name} is still a learner"));
        }
        if let Some(error) = status
            .errors
            .iter()
            .find(|e| !e.contains(&format!("alarm:{}", AlarmKind::NoSpace)))
        {
            return Err(format!("member {name} reports: {error}"));
        }
        if !member.healthy {
            return Err(format!(
                "member {name} is not healthy: {}",
                member
                    .problem
                    .as_deref()
                    .unwrap_or("the health read failed")
            ));
        }
        if status.leader == 0 {
            return Err(format!("member {name} knows no leader"));
        }
    }
    if facts.agreed_leader().is_none() {
        return Err("the members disagree on the leader".into());
    }
    if facts.alarms.iter().any(|a| a.kind == AlarmKind::Corrupt) {
        return Err("a CORRUPT alarm is active".into());
    }
    Ok(())
}

/// The members of a run as it starts: every member Pending, followers first, the leader last.
pub fn plan_members(facts: &ClusterFacts) -> Vec<MemberDefragStatus> {
    let leader = facts.leader_name();
    let row = |m: &MemberFacts| MemberDefragStatus {
        name: m.name.clone(),
        role: Some(role_of(leader, &m.name)),
        outcome: Some(DefragOutcome::Pending),
        ..Default::default()
    };
    let mut rows: Vec<MemberDefragStatus> = facts
        .members
        .iter()
        .filter(|m| Some(m.name.as_str()) != leader)
        .map(row)
        .collect();
    rows.extend(
        facts
            .members
            .iter()
            .filter(|m| Some(m.name.as_str()) == leader)
            .map(row),
    );
    rows
}

fn role_of(leader: Option<&str>, name: &str) -> MemberRole {
    if leader == Some(name) {
        MemberRole::Leader
    } else {
        MemberRole::Follower
    }
}

/// The member to process next: the first Pending one that does not lead now, and the leader
/// only when it is the last one left (leadership may have moved since the run was planned).
pub fn next_member<'a>(members: &'a [MemberDefragStatus], leader: Option<&str>) -> Option<&'a str> {
    let mut pending = members
        .iter()
        .filter(|m| m.outcome == Some(DefragOutcome::Pending) || m.outcome.is_none());
    let first = pending.clone().next()?;
    pending
        .find(|m| Some(m.name.as_str()) != leader)
        .or(Some(first))
        .map(|m| m.name.as_str())
}

/// What the rule says of a member with `db_size` bytes of backend, `in_use` of them live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Defragment,
    /// Skipped, with the reason for its status (`BelowThreshold`).
    Skip(&'static str),
}

/// The reference's rule: `all` defragments unconditionally; otherwise a member is
/// defragmented when its reclaimable space (`db_size - in_use`) exceeds `freeSpaceAbove`
/// (200Mi unless set), or, with `quotaUsageAbove`, when `db_size` exceeds that share of the
/// quota and the reclaimable space is at least `minReclaim` (32Mi unless set).
pub fn rule_verdict(rule: Option<&DefragRule>, db_size: i64, in_use: i64, quota: i64) -> Verdict {
    let default = DefragRule::default();
    let rule = rule.unwrap_or(&default);
    if rule.all == Some(true) {
        return Verdict::Defragment;
    }
    let free_above = rule
        .free_space_above
        .as_ref()
        .and_then(|q| quantity_bytes(&q.0))
        .unwrap_or_else(|| quantity_bytes(DEFAULT_FREE_SPACE_ABOVE).expect("a valid default"));
    let min_reclaim = rule
        .min_reclaim
        .as_ref()
        .and_then(|q| quantity_bytes(&q.0))
        .unwrap_or_else(|| quantity_bytes(DEFAULT_MIN_RECLAIM).expect("a valid default"));
    let reclaimable = (db_size - in_use).max(0);
    if reclaimable > free_above {
        return Verdict::Defragment;
    }
    if let Some(percent) = rule.quota_usage_above.as_deref().and_then(parse_percent)
        && quota > 0
        && i128::from(db_size) * 100 > i128::from(quota) * i128::from(percent)
        && reclaimable >= min_reclaim
    {
        return Verdict::Defragment;
    }
    Verdict::Skip("BelowThreshold")
}

/// `"80%"` → 80; anything but an integer from 1 to 100 with a `%` → `None`.
pub fn parse_percent(text: &str) -> Option<i64> {
    let n: i64 = text.strip_suffix('%')?.parse().ok()?;
    (1..=100).contains(&n).then_some(n)
}

/// Records the outcome of member `name` (its role now, the sizes known) in `status`.
#[allow(clippy::too_many_arguments)]
pub fn mark_member(
    status: &mut EtcdDefragStatus,
    name: &str,
    role: MemberRole,
    outcome: DefragOutcome,
    reason: Option<&str>,
    before: Option<i64>,
    after: Option<i64>,
    now: Timestamp,
) {
    let Some(row) = status
        .members
        .get_or_insert_with(Vec::new)
        .iter_mut()
        .find(|m| m.name == name)
    else {
        return;
    };
    row.role = Some(role);
    row.outcome = Some(outcome);
    row.reason = reason.map(str::to_string);
    row.db_size_before = before;
    row.db_size_after = after;
    row.reclaimed_bytes = match (outcome, before, after) {
        (DefragOutcome::Defragmented, Some(b), Some(a)) => Some((b - a).max(0)),
        _ => None,
    };
    row.finished_at = Some(Time(now));
    if outcome == DefragOutcome::Defragmented {
        status.defragmented = Some(status.defragmented.unwrap_or(0) + 1);
    }
}

/// The role member `name` has in `facts` now.
pub fn current_role(facts: &ClusterFacts, name: &str) -> MemberRole {
    role_of(facts.leader_name(), name)
}

/// How a sweep that processed every member ends: Failed if any member failed, else Complete;
/// with the condition's reason and message.
pub fn sweep_result(members: &[MemberDefragStatus]) -> (DefragPhase, &'static str, String) {
    let count = |o: DefragOutcome| members.iter().filter(|m| m.outcome == Some(o)).count();
    let (done, skipped, failed) = (
        count(DefragOutcome::Defragmented),
        count(DefragOutcome::Skipped),
        count(DefragOutcome::Failed),
    );
    let message = format!(
        "{done} of {} members defragmented, {skipped} skipped, {failed} failed",
        members.len()
    );
    if failed > 0 {
        (DefragPhase::Failed, "MemberFailed", message)
    } else {
        (DefragPhase::Complete, "Complete", message)
    }
}

/// The NOSPACE alarms to disarm after a sweep: only when it defragmented a member, and only
/// those of members whose backend is now below the quota (anything else etcd raises again at
/// the next write).
pub fn alarms_to_disarm(
    alarms: &[Alarm],
    members: &[MemberDefragStatus],
    ids: &[(String, u64)],
    quota: i64,
) -> Vec<Alarm> {
    if !members
        .iter()
        .any(|m| m.outcome == Some(DefragOutcome::Defragmented))
    {
        return Vec::new();
    }
    alarms
        .iter()
        .filter(|a| a.kind == AlarmKind::NoSpace)
        .filter(|a| {
            let Some((name, _)) = ids.iter().find(|(_, id)| *id == a.member_id) else {
                return false;
            };
            members
                .iter()
                .find(|m| &m.name == name)
                .and_then(|m| m.db_size_after.or(m.db_size_before))
                .is_some_and(|size| size < quota)
        })
        .copied()
        .collect()
}

/// Sets the run's condition; returns whether it changed (an Event is worth recording then).
pub fn set_condition(
    status: &mut EtcdDefragStatus,
    ok: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) -> bool {
    upsert_condition(
        status.conditions.get_or_insert_with(Vec::new),
        CONDITION,
        ok,
        reason,
        message,
        generation,
        now,
    )
}

/// Sets condition `type_` in `conditions` (the transition time moves only when the status
/// does); returns whether anything changed.
pub(crate) fn upsert_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    ok: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) -> bool {
    let wanted = if ok { "True" } else { "False" };
    if let Some(existing) = conditions.iter_mut().find(|c| c.type_ == type_) {
        if existing.status == wanted && existing.reason == reason && existing.message == message {
            return false;
        }
        if existing.status != wanted {
            existing.last_transition_time = Time(now);
        }
        existing.status = wanted.into();
        existing.reason = reason.into();
        existing.message = message.into();
        existing.observed_generation = generation;
        return true;
    }
    conditions.push(Condition {
        type_: type_.into(),
        status: wanted.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: Time(now),
    });
    true
}
