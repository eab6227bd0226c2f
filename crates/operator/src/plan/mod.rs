//! The planner: one observed state in, exactly one next step out. No I/O, no clock.
//!
//! [`plan_next_step`] takes an [`Observed`] (the EtcdCluster, its EtcdMembers with their Pods
//! and PVCs, the Services, the PDB, and the [`EtcdView`](crate::etcd::EtcdView)) and the
//! current time, and returns a [`Plan`]: the statuses this pass computes, the one [`Step`] to
//! perform, and when to look again. The rules, in seed 000's priority order, live in `rules`;
//! each is a function with a doc comment naming it.
//!
//! How `act` executes a plan:
//! 1. write `cluster_status` (if `Some`) and each of `member_statuses`; if a write fails,
//!    stop and requeue: the step depends on those writes (a phase announced before the change
//!    it describes, a Ready=False before a Pod is deleted, a Pod UID recorded before the Pod
//!    goes);
//! 2. perform `step` (one API call, or one etcd call);
//! 3. requeue after `requeue_after` (zero after a mutation: observe again at once).

mod cluster_status;
mod conditions;
mod context;
mod decision;
mod member_status;
mod observed;
pub(crate) mod reach;
pub(crate) mod rules;
mod step;
mod timing;
mod wait;

#[cfg(test)]
pub(crate) mod tests;

use std::time::Duration;

use etcd_operator_api::{EtcdClusterStatus, EtcdMemberStatus};
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;

/// The facts one pass derives from its observation (members matched to etcd, health), for the
/// metrics.
pub(crate) use context::Context as PassFacts;

/// Running members not yet on the target version or config (the rollout metric).
pub(crate) fn outdated_members(ctx: &PassFacts<'_>) -> usize {
    rules::rollout::outdated_members(ctx).len()
}

/// Every member ready on the target (the rollout-duration metric).
pub(crate) fn target_reached(ctx: &PassFacts<'_>) -> bool {
    cluster_status::target_reached(ctx)
}
pub use context::Health;
pub use observed::{
    CertificateFacts, ClassExpansion, IssuedFacts, IssuedMember, IssuedState, Observed,
    ObservedMember, Password, PodFacts, PodPhase, PvcFacts, RotationRequest, SecurityFacts,
    SnapshotFacts,
};
pub use rules::NOSPACE_REMEDIATION_ANNOTATION;
pub use rules::SCALE_IN_ANNOTATION;
pub use rules::caught_up;
pub use rules::quorum::FORCE_NEW_CLUSTER_ANNOTATION;
pub use step::{IssuedCertificate, MetadataObject, Signer, Step, StepKind};
pub use timing::{
    AFTER_MUTATION, BLOCKED_POLL, BackendFill, FAST_POLL, FillSample, IDLE_POLL, LEARNER_POLL,
    MAX_RECREATIONS, MEMBER_POLL, NEAR_QUOTA_POLL, NOT_READY_GRACE, RepairTiming, START_GRACE,
    fill_look, probe_period, repair_backoff, retry_after,
};
pub use wait::WaitReason;

use crate::build::{BuildError, event};

/// A member status to write.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberStatusWrite {
    /// The EtcdMember's name.
    pub member: String,
    /// The whole status subresource, as it should be.
    pub status: EtcdMemberStatus,
}

/// The outcome of one planning pass.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The one thing to do after the status writes.
    pub step: Step,
    /// When to plan again (also after an error performing the step, unless
    /// [`retry_after`] says otherwise for an etcd refusal).
    pub requeue_after: Duration,
    /// The cluster's status, when it differs from the observed one.
    pub cluster_status: Option<EtcdClusterStatus>,
    /// Member statuses that differ from the observed ones, in member order.
    pub member_statuses: Vec<MemberStatusWrite>,
    /// Where to send the step's etcd call: the client URLs of the healthy voters, the leader
    /// first, never the member the step removes (it stops as it applies its own removal).
    /// Learners refuse most cluster calls, so they are left out. Empty when no voter is
    /// healthy (then the step is not an etcd call).
    pub etcd_endpoints: Vec<String>,
    /// The members isolated from their peers this pass (`plan::reach`), with their figures
    /// (raft index, how far behind the leader), for [`Plan::isolation_event`].
    pub isolated: Vec<String>,
    /// The backend that fills the largest share of its quota (`rules::fullest_backend`), for the
    /// reconciler to compare with the previous pass ([`timing::fill_look`]) and to pace its
    /// alarm probe ([`timing::probe_period`]).
    pub fullest_backend: Option<BackendFill>,
    /// A backend is at [`timing::NEAR_QUOTA_PERCENT`] of its quota or NOSPACE is raised: the
    /// plan already looks every [`timing::NEAR_QUOTA_POLL`] (`rules::nears_quota`).
    pub near_quota: bool,
    /// A rule needed the EtcdSnapshots of the namespace, which the observation did not read
    /// ([`Observed::snapshots`] is `None`): this plan is not to be acted on; read them and
    /// plan again.
    pub needs_snapshots: bool,
}

impl Plan {
    /// The Event to record for this plan, if any: every mutation, and a wait that needs
    /// attention when the conditions just changed (not on every pass it lasts).
    /// A Warning Event when `CertificatesValid` turns False (once per turn, not every pass).
    pub fn certificates_event(
        &self,
        observed: &Observed,
        now: Timestamp,
    ) -> Option<Result<Event, BuildError>> {
        use etcd_operator_api::conditions::cluster::CERTIFICATES_VALID;
        let new = self.cluster_status.as_ref()?.conditions.as_ref()?;
        let new = new.iter().find(|c| c.type_ == CERTIFICATES_VALID)?;
        let old = observed
            .cluster
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|l| l.iter().find(|c| c.type_ == CERTIFICATES_VALID));
        // Beside the step's own Event of the same pass, named from the time: 3 ns later.
        let later = now
            .checked_add(k8s_openapi::jiff::SignedDuration::from_nanos(3))
            .unwrap_or(now);
        (new.status == "False" && old.is_none_or(|o| o.status != "False")).then(|| {
            event(
                &observed.cluster,
                crate::build::EventType::Warning,
                if new.reason == "CertificateNotReady" {
                    "CertificateNotReady"
                } else {
                    "CertificateExpiring"
                },
                &new.message,
                later,
            )
        })
    }

    /// A Warning Event each time `status.quorumRecovery` changes phase: started (with the
    /// survivor and what may have been lost), forced, completed, aborted.
    pub fn recovery_event(
        &self,
        observed: &Observed,
        now: Timestamp,
    ) -> Option<Result<Event, BuildError>> {
        use etcd_operator_api::cluster::QuorumRecoveryPhase as P;
        let new = self.cluster_status.as_ref()?.quorum_recovery.as_ref()?;
        let old = observed
            .cluster
            .status
            .as_ref()
            .and_then(|s| s.quorum_recovery.as_ref());
        if old.is_some_and(|o| o.phase == new.phase && o.start_time == new.start_time) {
            return None;
        }
        let snapshot = new.snapshot.as_ref();
        let (reason, message) = match new.phase? {
            P::Resetting => (
                "QuorumRecoveryStarted",
                format!(
                    "lost-quorum recovery ({}) from EtcdSnapshot {}: no member's data survives; every member ({}) is reset, then {} is restored from the snapshot and the others join again. Lost: {}",
                    new.trigger,
                    snapshot.map(|s| s.name.as_str()).unwrap_or("?"),
                    new.removed.join(", "),
                    new.survivor,
                    new.may_have_lost.as_deref().unwrap_or("unknown")
                ),
            ),
            P::Restoring => (
                "QuorumRecoveryRestoring",
                format!(
                    "every member was reset; {} is restored from {} and starts alone as a new cluster",
                    new.survivor,
                    snapshot.map(|s| s.uri.as_str()).unwrap_or("the snapshot")
                ),
            ),
            P::ForcingNewCluster => (
                "QuorumRecoveryStarted",
                format!(
                    "lost-quorum recovery ({}) from {}: its Pod is recreated with --force-new-cluster, then {} are removed and join again. May have been lost: {}",
                    new.trigger,
                    new.survivor,
                    new.removed.join(", "),
                    new.may_have_lost.as_deref().unwrap_or("unknown")
                ),
            ),
            P::Rebuilding => (
                "QuorumRecoveryForced",
                format!(
                    "{} serves alone as a new one-member cluster; the other members are removed and join again as learners",
                    new.survivor
                ),
            ),
            P::Completed => (
                "QuorumRecoveryCompleted",
                new.message.clone().unwrap_or_default(),
            ),
            P::Aborted => (
                "QuorumRecoveryAborted",
                new.message.clone().unwrap_or_default(),
            ),
        };
        // Recorded beside the step's own Event of the same pass: the Event name is derived
        // from the time, so this one is a nanosecond later (the same name would be refused).
        let later = now
            .checked_add(k8s_openapi::jiff::SignedDuration::from_nanos(1))
            .unwrap_or(now);
        Some(event(
            &observed.cluster,
            crate::build::EventType::Warning,
            reason,
            &message,
            later,
        ))
    }

    /// A Warning Event `MemberIsolated` when the Degraded condition turns to it, or names
    /// other members than before: who is isolated from its peers, its raft figures, and that
    /// it is left alone.
    pub fn isolation_event(
        &self,
        observed: &Observed,
        now: Timestamp,
    ) -> Option<Result<Event, BuildError>> {
        use etcd_operator_api::conditions::cluster::DEGRADED;
        let new = self.cluster_status.as_ref()?.conditions.as_ref()?;
        let new = new.iter().find(|c| c.type_ == DEGRADED)?;
        if new.reason != "MemberIsolated" {
            return None;
        }
        let old = observed
            .cluster
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|l| l.iter().find(|c| c.type_ == DEGRADED));
        if old.is_some_and(|o| o.reason == new.reason && o.message == new.message) {
            return None;
        }
        let later = now
            .checked_add(k8s_openapi::jiff::SignedDuration::from_nanos(2))
            .unwrap_or(now);
        Some(event(
            &observed.cluster,
            crate::build::EventType::Warning,
            "MemberIsolated",
            &format!(
                "isolated from its peers: {}. It answers the operator but serves nothing while a majority serves without it; it is not recreated or replaced for that (check the network between the members). {}",
                self.isolated.join("; "),
                new.message
            ),
            later,
        ))
    }

    pub fn event(&self, observed: &Observed, now: Timestamp) -> Option<Result<Event, BuildError>> {
        let worth_it = match &self.step {
            Step::Idle => false,
            Step::Wait { reason, .. } => reason.needs_attention() && self.cluster_status.is_some(),
            _ => true,
        };
        worth_it.then(|| {
            event(
                &observed.cluster,
                self.step.event_type(),
                self.step.reason(),
                &self.step.message(),
                now,
            )
        })
    }
}

/// Plans the next step for `observed` at `now`.
pub fn plan_next_step(observed: &Observed, now: Timestamp) -> Plan {
    let ctx = context::Context::new(observed, now);
    let latched = cluster_status::latched(&ctx);
    let ctx = ctx.with_latched(latched);
    let decision = rules::decide(&ctx);

    let cluster_status = cluster_status::cluster_status(&ctx, &decision);
    let cluster_changed = observed.cluster.status.as_ref() != Some(&cluster_status);

    let member_statuses = ctx
        .members
        .iter()
        .filter_map(|m| {
            let edit = decision.edits.iter().find(|e| e.member == m.name);
            // A member of the reference operator not taken over yet is left as it is: its
            // first write is its adoption (a phase of ours would make it look like one of
            // this operator's members, which it is not until it has been checked).
            if edit.is_none() && rules::adopt::is_candidate(m) {
                return None;
            }
            let status = member_status::member_status(&ctx, m, edit);
            (m.observed.member.status.as_ref() != Some(&status)).then(|| MemberStatusWrite {
                member: m.name.to_string(),
                status,
            })
        })
        .collect();

    let removed = match &decision.step {
        Step::RemoveEtcdMember { member, .. } => member.clone(),
        _ => None,
    };
    let leader = observed.etcd.leader();
    let mut voters: Vec<&context::MemberView<'_>> = ctx
        .members
        .iter()
        .filter(|m| m.is_voter() && m.health == Health::Healthy)
        .filter(|m| Some(m.name) != removed.as_deref())
        .collect();
    voters.sort_by_key(|m| m.id != leader);
    let etcd_endpoints = voters
        .iter()
        .map(|m| crate::build::member_client_url(&m.observed.member))
        .collect();

    let isolated = ctx
        .running()
        .filter_map(|m| match reach::sight(&ctx, m) {
            s @ reach::Sight::Isolated { .. } => {
                Some(format!("{} ({})", m.name, reach::isolation_figures(s)))
            }
            _ => None,
        })
        .collect();

    let near_quota = rules::nears_quota(&ctx);
    let requeue_after = if near_quota {
        decision.requeue.min(timing::NEAR_QUOTA_POLL)
    } else {
        decision.requeue
    };
    Plan {
        step: decision.step,
        requeue_after,
        cluster_status: cluster_changed.then_some(cluster_status),
        member_statuses,
        etcd_endpoints,
        isolated,
        fullest_backend: rules::fullest_backend(&ctx),
        near_quota,
        needs_snapshots: ctx.snapshots_wanted.get(),
    }
}
