//! Lost-quorum recovery from a snapshot: no member's data survives (verdict `AllLost`, for
//! example a memory-backed cluster that lost every Pod), so the cluster is rebuilt from the
//! newest Complete and verified EtcdSnapshot of *this* cluster (or the one a person names with
//! the annotation value `snapshot:<name>`). Same opt-in as the recovery from a survivor.
//!
//! `status.quorumRecovery` (with `snapshot`) is written in the same pass as, and before, the
//! first destructive step; every later step is derived from it and from what is observed, one
//! step per pass, so an operator that dies anywhere resumes:
//!
//! 1. `Resetting`: every member in turn goes to `Replacing`, its Pod and PVC are deleted and
//!    its identity forgotten (`Provisioning`). Nothing is removed from etcd: no member of the
//!    old cluster has data, and the restored cluster never lists them. Should any etcd answer
//!    meanwhile, the recovery stops (`Aborted`) before deleting anything more.
//! 2. `Restoring`: the seed (the lowest ordinal) gets a new PVC (PVC-backed) and a Pod whose
//!    init containers fetch, verify and restore the snapshot (`build::restore_containers`,
//!    with a new cluster token, so the new cluster has new member and cluster IDs) and which
//!    starts `new` with itself alone. Only this Pod restores: its start instruction moves to
//!    `OwnData` as soon as etcd lists it (rule `start`), and no later Pod of any member
//!    carries the restore containers, so a later loss of the seed is a replacement from the
//!    live cluster (or, with every member gone again, a new recovery), never a second restore
//!    over a cluster that took writes.
//! 3. Once etcd lists the seed alone and it serves: `Completed`, the new cluster ID latched
//!    into `status.clusterID`; the other members join as learners by the usual joins (rule 9).

use etcd_operator_api::MemberPhase;
use etcd_operator_api::cluster::{
    QuorumRecoveryMember, QuorumRecoveryPhase, QuorumRecoverySnapshot, QuorumRecoveryStatus,
};
use etcd_operator_api::shared::{RestoreSpec, SnapshotLocation, StoreKind};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::helpers::{create_pvc, delete_pod};
use super::quorum::Classification;
use crate::build::{InitialClusterState, PodStart, member_pod, restore_containers};
use crate::etcd::member_id_hex;
use crate::plan::context::{Context, Health, MemberView};
use crate::plan::decision::{Decision, MemberEdit};
use crate::plan::observed::SnapshotFacts;
use crate::plan::step::{Step, WaitReason};
use crate::plan::timing;

/// A snapshot a recovery may restore from: Complete, verified, of this cluster, in an object
/// store (S3, GCS, Azure), with an artifact where it was written to, not being deleted.
pub fn usable(ctx: &Context<'_>, s: &SnapshotFacts) -> Result<SnapshotLocation, String> {
    if s.cluster != ctx.cluster_name {
        return Err(format!(
            "EtcdSnapshot {} is a snapshot of cluster {}, not of {}",
            s.name, s.cluster, ctx.cluster_name
        ));
    }
    if !s.complete {
        return Err(format!("EtcdSnapshot {} is not Complete", s.name));
    }
    if !s.verified {
        return Err(format!(
            "EtcdSnapshot {} is not verified (status.verified is not true)",
            s.name
        ));
    }
    if s.deleting {
        return Err(format!("EtcdSnapshot {} is being deleted", s.name));
    }
    if s.encrypted && s.identity.is_none() {
        return Err(format!(
            "EtcdSnapshot {} is encrypted and names no identity to decrypt it (spec.encryption.age.identitySecretRef)",
            s.name
        ));
    }
    match s.destination.store() {
        Some(StoreKind::S3 | StoreKind::Gcs | StoreKind::Azure) => {}
        Some(StoreKind::Local) => {
            return Err(format!(
                "EtcdSnapshot {} is in a local store: {}",
                s.name,
                etcd_operator_api::shared::LOCAL_NOT_A_RESTORE_SOURCE
            ));
        }
        _ => {
            return Err(format!(
                "EtcdSnapshot {} is not in an object store (a recovery restores from S3, GCS or Azure only)",
                s.name
            ));
        }
    }
    let uri = s.uri.as_deref().unwrap_or_default();
    s.destination
        .restore_source(uri)
        .map_err(|why| format!("EtcdSnapshot {}: {why}", s.name))
}

/// The snapshot to restore from: the one named, or the newest usable one (by completion time,
/// then revision).
pub fn pick<'a>(
    ctx: &Context<'a>,
    named: Option<&str>,
) -> Result<(&'a SnapshotFacts, SnapshotLocation), String> {
    let Some(listed) = &ctx.observed.snapshots else {
        ctx.snapshots_wanted.set(true);
        return Err("the EtcdSnapshots of the namespace are not read yet".to_string());
    };
    let all = listed.as_ref().map_err(|e| e.clone())?;
    if let Some(name) = named {
        let s = all
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| format!("there is no EtcdSnapshot {name} in this namespace"))?;
        return usable(ctx, s).map(|loc| (s, loc));
    }
    all.iter()
        .filter_map(|s| usable(ctx, s).ok().map(|loc| (s, loc)))
        .max_by_key(|(s, _)| (s.completed_at, s.revision, s.name.clone()))
        .ok_or_else(|| {
            format!(
                "there is no Complete and verified EtcdSnapshot of cluster {} in an object store (S3, GCS, Azure)",
                ctx.cluster_name
            )
        })
}

/// What a person can do when no snapshot can be used.
pub fn no_snapshot_advice(ctx: &Context<'_>) -> String {
    format!(
        "nothing was deleted. If a verified snapshot of {0} exists, name it with the annotation {1}=snapshot:<EtcdSnapshot name> (kubectl etcdop recover-quorum --snapshot <name>); otherwise delete the EtcdCluster and create it again (with spec.bootstrap.restore from a snapshot object, if you have one)",
        ctx.cluster_name,
        etcd_operator_api::cluster::RECOVER_QUORUM_ANNOTATION
    )
}

/// Records a recovery from `snapshot` and takes its first step, in the same pass.
pub fn start(
    ctx: &Context<'_>,
    c: &Classification<'_, '_>,
    trigger: String,
    snapshot: &SnapshotFacts,
    source: SnapshotLocation,
) -> Option<Decision> {
    let seed = ctx.running().next()?;
    let removed: Vec<String> = ctx
        .members
        .iter()
        .filter(|m| !m.deleting)
        .map(|m| m.name.to_string())
        .collect();
    let status = ctx.observed.cluster.status.clone().unwrap_or_default();
    let token = status
        .cluster_token
        .clone()
        .unwrap_or_else(|| ctx.cluster_name.clone());
    let uri = snapshot.uri.clone().unwrap_or_default();
    let revision = snapshot.revision;
    let record = QuorumRecoveryStatus {
        phase: Some(QuorumRecoveryPhase::Resetting),
        trigger,
        survivor: seed.name.to_string(),
        survivor_raft_index: None,
        survivor_revision: revision,
        survivor_pod_uid: None,
        members: c
            .voters
            .iter()
            .map(|v| QuorumRecoveryMember {
                name: v.member.name.to_string(),
                raft_index: None,
                state: v.state.label(),
            })
            .collect(),
        removed,
        may_have_lost: Some(format!(
            "no member's data survived; the cluster is restored from EtcdSnapshot {} ({uri}, revision {}): every write acknowledged after revision {} is lost",
            snapshot.name,
            revision
                .map(|r| r.to_string())
                .unwrap_or_else(|| "unknown".into()),
            revision
                .map(|r| r.to_string())
                .unwrap_or_else(|| "unknown".into()),
        )),
        start_time: Some(Time(ctx.now)),
        forced_time: None,
        completion_time: None,
        message: Some(c.summary()),
        snapshot: Some(QuorumRecoverySnapshot {
            name: snapshot.name.clone(),
            uri,
            revision,
            completion_time: snapshot.completed_at.map(|t| t.to_string()),
            cluster_token: format!("{token}-restored-{}", ctx.now.as_second()),
            previous_cluster_id: status.cluster_id.clone(),
            cluster_id: None,
            source: None,
            gcs: None,
            azure: None,
            age_identity_secret_ref: snapshot.identity.clone(),
        }),
    };
    let mut record = record;
    if let Some(snapshot) = record.snapshot.as_mut() {
        snapshot.record_location(&source);
    }
    let first = in_progress(ctx, &record);
    Some(with_recovery_kept(first, record))
}

/// The decision carries `r` unless it already carries a newer record.
fn with_recovery_kept(mut d: Decision, r: QuorumRecoveryStatus) -> Decision {
    if d.recovery.is_none() {
        d.recovery = Some(r);
    }
    d
}

/// A recovery from a snapshot in progress: one step.
pub fn in_progress(ctx: &Context<'_>, r: &QuorumRecoveryStatus) -> Decision {
    match r.phase {
        Some(QuorumRecoveryPhase::Restoring) => restoring(ctx, r),
        _ => resetting(ctx, r),
    }
}

/// Reset: no Pod, no PVC, no identity, waiting to join (or to be restored).
fn is_reset(m: &MemberView<'_>) -> bool {
    matches!(m.phase, MemberPhase::Provisioning | MemberPhase::Pending)
        && m.observed.pod.is_none()
        && m.observed.pvc.is_none()
        && m.observed
            .member
            .status
            .as_ref()
            .and_then(|s| s.member_id.as_ref())
            .is_none()
}

fn snapshot_name(r: &QuorumRecoveryStatus) -> &str {
    r.snapshot.as_ref().map(|s| s.name.as_str()).unwrap_or("?")
}

fn resetting(ctx: &Context<'_>, r: &QuorumRecoveryStatus) -> Decision {
    if ctx.observed.etcd.endpoints.iter().any(|o| o.status.is_ok()) {
        let mut done = r.clone();
        done.phase = Some(QuorumRecoveryPhase::Aborted);
        let reset: Vec<&str> = ctx
            .members
            .iter()
            .filter(|m| r.removed.iter().any(|n| n == m.name) && is_reset(m))
            .map(|m| m.name)
            .collect();
        done.message = Some(format!(
            "an etcd member answers again, so the restore from EtcdSnapshot {} stopped; already reset (they join again as new members): {}",
            snapshot_name(r),
            if reset.is_empty() {
                "none".to_string()
            } else {
                reset.join(", ")
            }
        ));
        let d = Decision::wait(
            WaitReason::QuorumRecovery,
            "the lost-quorum recovery from a snapshot was aborted: an etcd member answers",
            timing::AFTER_MUTATION,
        );
        return super::quorum::with_recovery(d, done);
    }
    let pending = ctx
        .members
        .iter()
        .filter(|m| !m.deleting && r.removed.iter().any(|n| n == m.name))
        .find(|m| !is_reset(m));
    let Some(m) = pending else {
        let mut next = r.clone();
        next.phase = Some(QuorumRecoveryPhase::Restoring);
        let d = restoring(ctx, &next);
        return with_recovery_kept(d, next);
    };
    let why = format!(
        "no member's data survived; the cluster is restored from EtcdSnapshot {} and {} joins again as a new member",
        snapshot_name(r),
        m.name
    );
    if m.phase != MemberPhase::Replacing {
        return Decision::set_phase(m.name, MemberPhase::Replacing).with(
            MemberEdit::new(m.name)
                .phase(MemberPhase::Replacing)
                .not_ready("QuorumRecovery", why),
        );
    }
    if let Some(pod) = m.observed.pod.as_ref() {
        if pod.deleting {
            return Decision::wait(
                WaitReason::QuorumRecovery,
                format!(
                    "restore from a snapshot: waiting for {}'s Pod to go",
                    m.name
                ),
                timing::MEMBER_POLL,
            );
        }
        return Decision::act(delete_pod(m, pod));
    }
    if let Some(pvc) = m.observed.pvc.as_ref() {
        if pvc.deleting {
            return Decision::wait(
                WaitReason::QuorumRecovery,
                format!(
                    "restore from a snapshot: waiting for {}'s PVC to go",
                    m.name
                ),
                timing::MEMBER_POLL,
            );
        }
        return Decision::act(Step::DeletePvc {
            member: m.name.to_string(),
            pvc: pvc.name.clone(),
        });
    }
    Decision::set_phase(m.name, MemberPhase::Provisioning).with(
        MemberEdit::new(m.name)
            .phase(MemberPhase::Provisioning)
            .recreate_count(0)
            .reset_identity()
            .not_ready("QuorumRecovery", why),
    )
}

fn restoring(ctx: &Context<'_>, r: &QuorumRecoveryStatus) -> Decision {
    let Some(s) = ctx.members.iter().find(|m| m.name == r.survivor) else {
        return Decision::wait(
            WaitReason::QuorumRecovery,
            format!("restore from a snapshot: the seed {} is gone", r.survivor),
            timing::BLOCKED_POLL,
        );
    };
    if !s.memory {
        match s.observed.pvc.as_ref() {
            None => {
                if let Some(d) = create_pvc(s) {
                    return d;
                }
            }
            Some(pvc) if pvc.deleting => {
                return Decision::wait(
                    WaitReason::QuorumRecovery,
                    format!(
                        "restore from a snapshot: waiting for {}'s old PVC to go",
                        s.name
                    ),
                    timing::MEMBER_POLL,
                );
            }
            Some(_) => {}
        }
    }
    let Some(pod) = s.observed.pod.as_ref() else {
        return restore_pod(ctx, s, r);
    };
    if pod.deleting {
        return Decision::wait(
            WaitReason::QuorumRecovery,
            format!(
                "restore from a snapshot: waiting for {}'s old Pod to go",
                s.name
            ),
            timing::MEMBER_POLL,
        );
    }
    if pod.phase.is_terminal() {
        // It ended before it served as the new cluster: nothing took writes on it.
        return Decision::act(delete_pod(s, pod));
    }
    let alone = ctx
        .observed
        .etcd
        .members
        .as_ref()
        .is_ok_and(|l| l.len() == 1 && s.etcd.is_some_and(|e| e.id == l[0].id));
    if alone && s.health == Health::Healthy {
        let mut done = r.clone();
        done.phase = Some(QuorumRecoveryPhase::Completed);
        done.forced_time = Some(Time(ctx.now));
        done.completion_time = Some(Time(ctx.now));
        if let Some(snap) = done.snapshot.as_mut() {
            snap.cluster_id = ctx.observed.etcd.cluster_id.map(member_id_hex);
        }
        let others: Vec<&str> = r
            .removed
            .iter()
            .map(String::as_str)
            .filter(|n| *n != s.name)
            .collect();
        done.message = Some(format!(
            "{} was restored from EtcdSnapshot {} and serves alone as a new cluster{}; {} join again as learners",
            s.name,
            snapshot_name(r),
            done.snapshot
                .as_ref()
                .and_then(|x| x.cluster_id.as_ref())
                .map(|id| format!(" (cluster ID {id})"))
                .unwrap_or_default(),
            if others.is_empty() {
                "no member".to_string()
            } else {
                others.join(", ")
            }
        ));
        let d = if super::quorum::requested(ctx).is_some() {
            Decision::act(super::quorum::remove_annotation(
                "the lost-quorum recovery it asked for is done",
            ))
        } else {
            Decision::wait(
                WaitReason::QuorumRecovery,
                format!(
                    "{} restored from a snapshot; the other members join again as learners",
                    s.name
                ),
                timing::AFTER_MUTATION,
            )
        };
        return super::quorum::with_recovery(d, done);
    }
    Decision::wait(
        WaitReason::QuorumRecovery,
        format!(
            "restore from a snapshot: waiting for {} to come up alone from EtcdSnapshot {}",
            s.name,
            snapshot_name(r)
        ),
        timing::MEMBER_POLL,
    )
}

/// The seed's Pod: `new` with itself alone, and the restore init containers from the recorded
/// source, with the recovery's cluster token.
fn restore_pod(ctx: &Context<'_>, s: &MemberView<'_>, r: &QuorumRecoveryStatus) -> Decision {
    let Some((snap, source)) = r
        .snapshot
        .as_ref()
        .and_then(|snap| snap.restore_location().map(|src| (snap, src)))
    else {
        return Decision::wait(
            WaitReason::QuorumRecoveryRefused,
            "restore from a snapshot: status.quorumRecovery.snapshot.source is missing",
            timing::BLOCKED_POLL,
        );
    };
    let mut member = s.observed.member.clone();
    member.spec.cluster_token = snap.cluster_token.clone();
    let location = source;
    member.spec.restore = Some(RestoreSpec {
        source: location.clone(),
        age_identity_secret_ref: snap.age_identity_secret_ref.clone(),
    });
    let start = PodStart {
        initial_cluster: format!("{}={}", s.name, s.peer_url),
        state: InitialClusterState::New,
    };
    match member_pod(&member, &start, &ctx.observed.settings) {
        Ok(mut pod) => {
            if let Some(spec) = pod.spec.as_mut() {
                spec.init_containers = Some(restore_containers(
                    &member,
                    &location,
                    &ctx.observed.settings,
                ));
            }
            super::helpers::stamp_pod(ctx, s, &mut pod);
            Decision::act(Step::CreatePod(Box::new(pod)))
        }
        Err(e) => Decision::wait(
            WaitReason::InvalidObject,
            format!("cannot build the Pod of {}: {e}", s.name),
            timing::BLOCKED_POLL,
        ),
    }
}
