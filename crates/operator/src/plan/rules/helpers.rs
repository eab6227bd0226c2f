//! Steps more than one rule takes: creating and deleting a member's Pod, moving leadership
//! away first, refusing objects that belong to someone else.

use etcd_operator_api::MemberPhase;

use crate::build::{InitialClusterState, PodStart, member_pod, member_pvc};
use crate::plan::context::{Context, MemberView};
use crate::plan::decision::Decision;
use crate::plan::observed::PodFacts;
use crate::plan::step::{Step, WaitReason};
use crate::plan::timing;

/// How `m`'s etcd starts if its Pod is created now (see `crate::build::StartKind`).
///
/// - `StartKind::Bootstrap`: only the bootstrap seed, before the cluster has formed and
///   before etcd has listed it (with itself as the initial cluster).
/// - `StartKind::Join`: a member etcd lists but that never started (MemberAdd registered
///   it): `existing` with etcd's own member list (the only list etcd accepts: it checks the
///   initial cluster against its membership), else the list recorded in the member's spec.
/// - `StartKind::OwnData` for everyone else: a member that has started once has data, and
///   one whose state cannot be seen (etcd not answering) gets the instruction that is safe
///   either way: resume on its data, and refuse to start on an empty data directory.
pub fn pod_start(ctx: &Context<'_>, m: &MemberView<'_>) -> PodStart {
    let spec = &m.observed.member.spec;
    if m.is_bootstrap_seed() && !ctx.formed && m.id.is_none() && !spec.initial_cluster.is_empty() {
        return PodStart {
            initial_cluster: spec.initial_cluster.clone(),
            state: InitialClusterState::New,
        };
    }
    if m.etcd.is_some_and(|e| !e.has_started()) {
        let initial_cluster = ctx
            .initial_cluster_from_etcd(m)
            .or_else(|| (!spec.initial_cluster.is_empty()).then(|| spec.initial_cluster.clone()));
        if let Some(initial_cluster) = initial_cluster {
            return PodStart {
                initial_cluster,
                state: InitialClusterState::Existing,
            };
        }
    }
    PodStart::own_data(m.name, &m.peer_url)
}

/// Creates `m`'s Pod as [`pod_start`] says.
pub fn create_pod(ctx: &Context<'_>, m: &MemberView<'_>) -> Decision {
    let start = pod_start(ctx, m);
    match member_pod(&m.observed.member, &start, &ctx.observed.settings) {
        Ok(mut pod) => {
            stamp_pod(ctx, m, &mut pod);
            Decision::act(Step::CreatePod(Box::new(pod)))
        }
        Err(e) => Decision::wait(
            WaitReason::InvalidObject,
            format!("cannot build the Pod of {}: {e}", m.name),
            timing::BLOCKED_POLL,
        ),
    }
}

/// The annotations every new Pod of `m` carries: what it was configured with (a later config
/// rollout compares it) and what its etcd will trust (a later change of the CAs restarts it).
pub fn stamp_pod(ctx: &Context<'_>, m: &MemberView<'_>, pod: &mut k8s_openapi::api::core::v1::Pod) {
    pod.metadata.annotations.get_or_insert_default().insert(
        crate::build::CONFIG_DIGEST_ANNOTATION.to_string(),
        crate::build::MemberConfig::of_member(&m.observed.member.spec).digest(),
    );
    if let Some(trust) = ctx.observed.security.trust.get(m.name) {
        pod.metadata.annotations.get_or_insert_default().insert(
            crate::build::TRUSTED_CA_ANNOTATION.to_string(),
            trust.clone(),
        );
    }
}

/// Creates `m`'s PVC (PVC-backed members only).
pub fn create_pvc(m: &MemberView<'_>) -> Option<Decision> {
    match member_pvc(&m.observed.member) {
        Ok(Some(pvc)) => Some(Decision::act(Step::CreatePvc(Box::new(pvc)))),
        Ok(None) => None,
        Err(e) => Some(Decision::wait(
            WaitReason::InvalidObject,
            format!("cannot build the PVC of {}: {e}", m.name),
            timing::BLOCKED_POLL,
        )),
    }
}

/// Deletes the Pod `pod` of `m`, exactly that one (by UID).
pub fn delete_pod(m: &MemberView<'_>, pod: &PodFacts) -> Step {
    Step::DeletePod {
        member: m.name.to_string(),
        pod: pod.name.clone(),
        uid: pod.uid.clone(),
    }
}

/// Before `m`'s Pod is deleted, recreated or replaced, or `m` leaves etcd: if it leads, move
/// leadership to the ready voter with the lowest ordinal. `None` when it does not lead, when no
/// other voter is ready, or when a repair or leave has been trying for longer than
/// [`LEADER_MOVE_TIMEOUT`] (best effort: the step then goes ahead and etcd elects a new leader
/// itself).
pub fn leadership_first(ctx: &Context<'_>, m: &MemberView<'_>) -> Option<Decision> {
    let leader = ctx.leader()?;
    if leader.name != m.name {
        return None;
    }
    let disrupting = matches!(
        m.phase,
        MemberPhase::Recreating | MemberPhase::Replacing | MemberPhase::Terminating
    );
    if disrupting && timing::elapsed_beyond(m.phase_since(), timing::LEADER_MOVE_TIMEOUT, ctx.now) {
        return None;
    }
    let successor = ctx.successor_for(m.name)?;
    Some(Decision::act(Step::MoveLeader {
        from: Some(m.name.to_string()),
        to: successor.name.to_string(),
        to_id: successor.id?,
    }))
}

/// A Pod or PVC with the member's name but another owner is not ours: wait for it to go
/// (garbage collection of an older member of the same name) rather than use its data.
pub fn foreign_objects(m: &MemberView<'_>) -> Option<Decision> {
    let uid = m.observed.member.metadata.uid.as_deref();
    let foreign = |owner: Option<&str>| owner.is_some() && owner != uid;
    let what = if m
        .observed
        .pod
        .as_ref()
        .is_some_and(|p| foreign(p.owner_uid.as_deref()))
    {
        format!("Pod {}", m.name)
    } else if m
        .observed
        .pvc
        .as_ref()
        .is_some_and(|p| foreign(p.owner_uid.as_deref()))
    {
        format!("PVC data-{}", m.name)
    } else {
        return None;
    };
    Some(Decision::wait(
        WaitReason::ForeignObject,
        format!(
            "{what} belongs to another object (an older member of the same name?); waiting for it to be deleted"
        ),
        timing::BLOCKED_POLL,
    ))
}

/// Phases in which a member has (or had) a Pod of its own running etcd on its data.
pub fn has_run(m: &MemberView<'_>) -> bool {
    matches!(m.phase, MemberPhase::Ready | MemberPhase::Recreating)
}
