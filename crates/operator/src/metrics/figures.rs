//! What a pass says about a cluster, pure: the figures computed from the pass's `Observed` and
//! `Plan` ([`cluster_figures`], [`repair_of`], [`leader_changed`], [`rollout_done`],
//! [`recovery_outcome`]), which [`Metrics`](super::Metrics) only records.

use etcd_operator_api::MemberPhase;
use k8s_openapi::jiff::Timestamp;

use crate::domain::etcd::DEFAULT_QUOTA_BACKEND_BYTES;
use crate::etcd::AlarmKind;
use crate::plan::{Observed, PassFacts, Plan, Step};

/// What one pass says about a cluster: computed from the observation and the plan, recorded by
/// [`Metrics::observed_cluster`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterFigures {
    pub namespace: String,
    pub cluster: String,
    /// `spec.replicas` (0 for a dormant cluster).
    pub desired: i64,
    /// EtcdMembers of the cluster.
    pub members: i64,
    /// Members that are Ready healthy voters (the status's `readyMembers`).
    pub ready: i64,
    /// Learners and voters in etcd's member list.
    pub learners: i64,
    /// Running members that do not run the target version or config yet (a rollout).
    pub outdated: i64,
    pub voters: i64,
    /// A voter served a linearizable read.
    pub quorum: bool,
    /// The leader's member ID, when etcd reported one.
    pub leader: Option<u64>,
    /// Active alarms per type (every type in [`AlarmKind::ALL`]); `None` when etcd could not
    /// list them (listing goes through raft: no quorum, no list).
    pub alarms: Option<Vec<(AlarmKind, i64)>>,
    /// Per running member (not leaving, not dormant).
    pub member_figures: Vec<MemberFigures>,
    /// When the current target was latched (`status.progressDeadline` less
    /// `spec.progressDeadlineSeconds`); `None` once it is reached.
    pub target_latched_at: Option<Timestamp>,
    /// The target is reached (every member ready on it).
    pub target_reached: bool,
    /// The time of the pass.
    pub now: Timestamp,
}

/// What one pass says about one running member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberFigures {
    pub member: String,
    /// Phase Ready and a healthy voter.
    pub ready: bool,
    /// `dbSize` and `dbSizeInUse` from the member's Status; `None` when it did not answer.
    pub db_size: Option<i64>,
    pub db_size_in_use: Option<i64>,
    /// The member's `--quota-backend-bytes` (its spec, else etcd's default of 2 GiB).
    pub quota: i64,
}

/// The repairs a step starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Repair {
    /// Level 1: the member's Pod is created again on its data.
    Recreate,
    /// Level 2: the member is removed from etcd, its data deleted, and added again.
    Replace,
}

/// The figures of one pass over a cluster.
pub fn cluster_figures(observed: &Observed, plan: &Plan, now: Timestamp) -> ClusterFigures {
    let meta = &observed.cluster.metadata;
    let facts = PassFacts::new(observed, now);
    let list = observed.etcd.member_list();
    let learners = list.iter().filter(|m| m.is_learner).count() as i64;
    let ready = plan
        .cluster_status
        .as_ref()
        .or(observed.cluster.status.as_ref())
        .and_then(|s| s.ready_members)
        .unwrap_or(0);
    let alarms = observed.etcd.alarms.as_ref().ok().map(|active| {
        AlarmKind::ALL
            .iter()
            .map(|kind| {
                (
                    *kind,
                    active.iter().filter(|a| a.kind == *kind).count() as i64,
                )
            })
            .collect()
    });
    let member_figures = facts
        .running()
        .map(|m| {
            let status = m.id.and_then(|id| observed.etcd.status_of(id));
            let quota = m
                .observed
                .member
                .spec
                .options
                .as_ref()
                .and_then(|o| o.quota_backend_bytes)
                .filter(|bytes| *bytes > 0)
                .unwrap_or(DEFAULT_QUOTA_BACKEND_BYTES);
            MemberFigures {
                member: m.name.to_string(),
                ready: m.is_ready(),
                db_size: status.map(|s| s.db_size),
                db_size_in_use: status.map(|s| s.db_size_in_use),
                quota,
            }
        })
        .collect();
    let secs = i64::from(observed.cluster.spec.progress_deadline_seconds_or_default());
    let deadline = |s: Option<&etcd_operator_api::EtcdClusterStatus>| {
        s.and_then(|s| s.progress_deadline.as_ref()).map(|t| t.0)
    };
    // This pass's deadline when it set one (a new target), else the one it started from (the
    // pass that reaches the target clears it).
    let target_latched_at = deadline(plan.cluster_status.as_ref())
        .or_else(|| deadline(observed.cluster.status.as_ref()))
        .and_then(|d| {
            d.checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(secs))
                .ok()
        });
    ClusterFigures {
        target_latched_at,
        target_reached: crate::plan::target_reached(&facts),
        now,
        namespace: meta.namespace.clone().unwrap_or_default(),
        cluster: meta.name.clone().unwrap_or_default(),
        desired: i64::from(observed.cluster.spec.replicas_or_default()),
        members: observed.members.len() as i64,
        ready: i64::from(ready),
        learners,
        outdated: crate::plan::outdated_members(&facts) as i64,
        voters: list.len() as i64 - learners,
        quorum: observed.etcd.is_healthy(),
        leader: observed.etcd.leader(),
        alarms,
        member_figures,
    }
}

/// The repair `step` starts, if it starts one: the operator announces each repair by writing
/// the member's phase first (`SetPhase` to Recreating or Replacing).
pub fn repair_of(step: &Step) -> Option<Repair> {
    match step {
        Step::SetPhase {
            phase: MemberPhase::Recreating,
            ..
        } => Some(Repair::Recreate),
        Step::SetPhase {
            phase: MemberPhase::Replacing,
            ..
        }
        | Step::RebuildMember { .. } => Some(Repair::Replace),
        _ => None,
    }
}

/// Follows a cluster's rollout across passes: a pass with members outdated records when its
/// target was latched (`since`); the first pass after with none outdated and the target
/// reached ends it and returns its duration in seconds. A rollout first seen by this process
/// after an operator restart is still timed from its target's adoption (read from the status).
pub fn rollout_done(since: &mut Option<Timestamp>, figures: &ClusterFigures) -> Option<f64> {
    if figures.outdated > 0 {
        if let Some(latched) = figures.target_latched_at {
            *since = Some(latched);
        }
        return None;
    }
    if !figures.target_reached {
        return None;
    }
    let started = since.take()?;
    let took = figures.now.duration_since(started);
    Some(took.as_secs_f64().max(0.0))
}

/// Whether etcd's leader changed: a leader is reported that differs from the last one known
/// (a pass without a leader in between does not count as a change by itself; the first
/// leader seen is not a change).
pub fn leader_changed(last_known: Option<u64>, now: Option<u64>) -> bool {
    matches!((last_known, now), (Some(last), Some(now)) if last != now)
}

/// What a pass did to a lost-quorum recovery, for `quorum_recoveries_total`: the source
/// (`survivor` or `snapshot`) and the outcome (`started`, `completed`, `aborted`) when its
/// record reached a new phase.
pub fn recovery_outcome(observed: &Observed, plan: &Plan) -> Option<(&'static str, &'static str)> {
    use etcd_operator_api::cluster::QuorumRecoveryPhase as P;
    let new = plan.cluster_status.as_ref()?.quorum_recovery.as_ref()?;
    let old = observed
        .cluster
        .status
        .as_ref()
        .and_then(|s| s.quorum_recovery.as_ref());
    if old.is_some_and(|o| o.phase == new.phase && o.start_time == new.start_time) {
        return None;
    }
    let source = if new.snapshot.is_some() {
        "snapshot"
    } else {
        "survivor"
    };
    let outcome = match new.phase? {
        P::ForcingNewCluster | P::Resetting => "started",
        P::Completed => "completed",
        P::Aborted => "aborted",
        P::Rebuilding | P::Restoring => return None,
    };
    Some((source, outcome))
}
