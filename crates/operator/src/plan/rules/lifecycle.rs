//! Rules 1 to 6: deletion, pause, recovery in progress, leaving members, alarms.

use etcd_operator_api::MemberPhase;
use etcd_operator_api::cluster::{NoSpaceMemberSizes, NoSpacePhase, NoSpaceRemediationStatus};

use super::helpers::{delete_pod, leadership_first};
use super::repair::{continue_replacement, restore_dead_pod};
use crate::etcd::{AlarmKind, member_id_hex};
use crate::plan::context::{Context, Health, MemberView};
use crate::plan::decision::{Decision, MemberEdit};
use crate::plan::step::{Step, WaitReason};
use crate::plan::timing;

/// Rule 1, cluster deletion: finish member cleanup and nothing else. The whole cluster goes,
/// so members do not leave etcd one by one (that would only lose quorum on the way); their
/// finalizers are removed and garbage collection takes their Pods and PVCs (under
/// `whenDeleted: Retain` every PVC is released first, so it stays).
pub fn cluster_deletion(ctx: &Context<'_>) -> Option<Decision> {
    ctx.observed.cluster.metadata.deletion_timestamp.as_ref()?;
    if let Some(release) = super::retention::release_for_cluster_deletion(ctx) {
        return Some(release);
    }
    if let Some(m) = ctx.members.iter().find(|m| m.deleting && m.has_finalizer) {
        return Some(Decision::act(Step::RemoveFinalizer {
            member: m.name.to_string(),
        }));
    }
    if let Some(m) = ctx.members.iter().find(|m| !m.deleting) {
        return Some(Decision::act(Step::DeleteMember {
            member: m.name.to_string(),
        }));
    }
    Some(Decision::wait(
        WaitReason::Deleting,
        "the cluster is being deleted; waiting for garbage collection",
        timing::IDLE_POLL,
    ))
}

/// Rule 2, `spec.paused`: no action at all; the status is still computed and written.
pub fn paused(ctx: &Context<'_>) -> Option<Decision> {
    ctx.observed.cluster.spec.is_paused().then(|| {
        Decision::wait(
            WaitReason::Paused,
            "spec.paused is true: the operator takes no action",
            timing::IDLE_POLL,
        )
    })
}

/// Safety stop between rules 2 and 3: etcd answers with a cluster ID other than the latched
/// one, so the endpoints reach another cluster (a member re-bootstrapped on empty data).
/// Acting on it would mix two clusters; a human decides.
pub fn foreign_cluster_id(ctx: &Context<'_>) -> Option<Decision> {
    let latched = ctx
        .observed
        .cluster
        .status
        .as_ref()?
        .cluster_id
        .as_deref()?;
    let seen = ctx.observed.etcd.cluster_id?;
    // A recovery from a snapshot brings up a new cluster (new IDs) before it latches its ID.
    if ctx
        .observed
        .cluster
        .status
        .as_ref()
        .and_then(|s| s.quorum_recovery.as_ref())
        .is_some_and(|r| r.restoring_from_snapshot())
    {
        return None;
    }
    (crate::etcd::parse_member_id(latched) != Some(seen)).then(|| {
        Decision::wait(
            WaitReason::ClusterIdMismatch,
            format!(
                "etcd answers with cluster ID {} but this cluster formed as {latched}; a member may have started a new cluster on empty data. The operator takes no action: inspect the members, or recreate the EtcdCluster",
                member_id_hex(seen)
            ),
            timing::BLOCKED_POLL,
        )
    })
}

/// Rule 4, members with a deletionTimestamp: continue the leave sequence of the first one,
/// one step per pass.
///
/// Terminating (written first) → MoveLeader if it leads → MemberRemove → delete Pod → the
/// PVC: deleted for a member scaled in under `whenScaled: Delete`, else handed to the
/// EtcdCluster (retained, see `retention`) → remove the finalizer. Each step is re-derived from what is observed, so a crash
/// between two of them resumes at the first one not yet done: a member still in etcd is
/// removed, a Pod still there is deleted, and only when etcd no longer lists it does its
/// data go (the finalizer's guarantee).
pub fn terminating_members(ctx: &Context<'_>) -> Option<Decision> {
    let m = ctx.members.iter().find(|m| m.deleting && m.has_finalizer)?;
    if m.phase != MemberPhase::Terminating {
        return Some(Decision::set_phase(m.name, MemberPhase::Terminating));
    }
    if ctx.observed.etcd.members.is_err() && (m.id.is_some() || m.observed.pod.is_some()) {
        return Some(Decision::wait(
            WaitReason::EtcdUnreachable,
            format!(
                "cannot confirm that {} has left etcd: etcd does not answer",
                m.name
            ),
            timing::BLOCKED_POLL,
        ));
    }
    if m.etcd.is_some() && ctx.observed.etcd.member_list().len() == 1 {
        // Scale-in never gets here (it keeps at least one member); only a hand-deleted
        // EtcdMember does. Its data is the whole cluster's.
        return Some(Decision::wait(
            WaitReason::QuorumAtRisk,
            format!(
                "{} is the last member of the cluster: deleting it would destroy the cluster's data. Delete the EtcdCluster instead (or remove the member's finalizer by hand to force it)",
                m.name
            ),
            timing::BLOCKED_POLL,
        ));
    }
    if let Some(etcd) = m.etcd {
        if let Some(first) = leadership_first(ctx, m) {
            return Some(first);
        }
        if !ctx.keeps_quorum_without(etcd.id, true) {
            let (healthy, voters, quorum) = ctx.quorum_numbers();
            return Some(Decision::wait(
                WaitReason::QuorumAtRisk,
                format!(
                    "removing {} from etcd now would take the cluster below quorum ({healthy}/{voters} voters healthy, quorum {quorum}); waiting for the other members to recover",
                    m.name
                ),
                timing::BLOCKED_POLL,
            ));
        }
        return Some(Decision::act(Step::RemoveEtcdMember {
            member: Some(m.name.to_string()),
            id: etcd.id,
        }));
    }
    if let Some(pod) = m.observed.pod.as_ref().filter(|p| !p.deleting) {
        return Some(Decision::act(delete_pod(m, pod)));
    }
    if let Some(pvc) = m.observed.pvc.as_ref().filter(|p| !p.deleting)
        && let Some(step) = super::retention::leaving_member_pvc(ctx, m, pvc)
    {
        return Some(step);
    }
    Some(Decision::act(Step::RemoveFinalizer {
        member: m.name.to_string(),
    }))
}

/// Rule 5, CORRUPT alarm: the member the alarm names has data that diverged from the
/// others. It goes straight to `Replacing` (written first, with the reason on the member), is
/// moved off leadership if it leads, and removed from etcd, all only while the other voters
/// have quorum without it and no other repair runs. Once etcd no longer lists it the alarm is
/// disarmed at once (its data can no longer reach the cluster: etcd refuses a removed
/// member), which lets the cluster take writes again; the replacement then continues under
/// rule 7 (its Pod and PVC deleted, a new member joining empty as a learner from the healthy
/// majority and promoted once caught up). Dead Pods are still brought back on their own data
/// first, which can only add healthy capacity.
pub fn corrupt_alarm(ctx: &Context<'_>) -> Option<Decision> {
    let alarm = *ctx.alarms().iter().find(|a| a.kind == AlarmKind::Corrupt)?;
    if let Some(restore) = restore_dead_pod(ctx) {
        return Some(restore);
    }
    let listed = ctx
        .observed
        .etcd
        .members
        .as_ref()
        .ok()
        .map(|list| list.iter().any(|m| m.id == alarm.member_id));
    let named = ctx.members.iter().find(|m| m.id == Some(alarm.member_id));
    match listed {
        Some(false) => {
            return Some(Decision::act(Step::DisarmAlarm {
                member: named.map(|m| m.name.to_string()),
                alarm,
            }));
        }
        Some(true) => {}
        None => {
            return Some(Decision::wait(
                WaitReason::CorruptAlarm,
                format!(
                    "{alarm}: etcd's member list did not answer, so the replacement waits (nothing is removed on a partial view)"
                ),
                timing::MEMBER_POLL,
            ));
        }
    }
    let Some(m) = named.filter(|m| m.is_running() && !m.deleting) else {
        return Some(Decision::wait(
            WaitReason::CorruptAlarm,
            format!(
                "{alarm}: no running EtcdMember of this cluster has that ID, so the operator replaces nothing; remove that member with etcdctl member remove once the cluster has quorum without it, then disarm the alarm"
            ),
            timing::BLOCKED_POLL,
        ));
    };
    if m.phase == MemberPhase::Replacing {
        return Some(continue_replacement(ctx, m));
    }
    if let Some(other) = ctx.members.iter().find(|o| {
        o.name != m.name
            && o.is_running()
            && matches!(o.phase, MemberPhase::Recreating | MemberPhase::Replacing)
    }) {
        return Some(Decision::wait(
            WaitReason::CorruptAlarm,
            format!(
                "{alarm}: {} will be replaced once the repair of {} is done (one repair at a time)",
                m.name, other.name
            ),
            timing::MEMBER_POLL,
        ));
    }
    if !ctx.others_have_quorum(m.id) {
        let (healthy, voters, quorum) = ctx.quorum_numbers();
        return Some(Decision::wait(
            WaitReason::CorruptAlarm,
            format!(
                "{alarm}: {} is not replaced while the other voters lack quorum without it ({healthy}/{voters} voters healthy, quorum {quorum}); bring the other members back, or restore from a snapshot",
                m.name
            ),
            timing::BLOCKED_POLL,
        ));
    }
    Some(
        Decision::set_phase(m.name, MemberPhase::Replacing).with(
            MemberEdit::new(m.name)
                .phase(MemberPhase::Replacing)
                .not_ready(
                    "CorruptAlarm",
                    format!(
                        "etcd raised CORRUPT against {}: its data diverged from the others; it is removed and replaced by a new member that joins empty from the healthy majority",
                        m.name
                    ),
                ),
        ),
    )
}

/// Rule 6, NOSPACE alarm: etcd refuses writes because a member's backend reached its quota.
/// Remedied one step per pass, each derived from what is observed, so a crash resumes it:
///
/// 1. wait until every member etcd lists answers Status and every voter is healthy (nothing
///    is compacted or defragmented on a partial view);
/// 2. every member's backend below 90 % of the quota it runs with (its EtcdMember's
///    `quotaBackendBytes`, else etcd's 2 GiB): disarm the alarm;
/// 3. the keyspace not compacted up to the current revision: compact (physically);
/// 4. a member over 90 % with reclaimable pages (more than 1 % of its quota): defragment it,
///    followers first, the leader last, one member per pass;
/// 5. otherwise the live data itself is over 90 % of the quota: report it (raise
///    `spec.options.quotaBackendBytes`) instead of looping.
///
/// Dead Pods are brought back on their own data first, as under CORRUPT.
pub fn nospace_alarm(ctx: &Context<'_>) -> Option<Decision> {
    let alarm = *ctx.alarms().iter().find(|a| a.kind == AlarmKind::NoSpace)?;
    if let Some(restore) = restore_dead_pod(ctx) {
        return Some(restore);
    }
    let manual = ctx
        .observed
        .cluster
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NOSPACE_REMEDIATION_ANNOTATION))
        .is_some_and(|v| v == "manual");
    if manual {
        return Some(Decision::wait(
            WaitReason::NoSpaceAlarm,
            format!(
                "{alarm}: etcd refuses writes, and the cluster's {NOSPACE_REMEDIATION_ANNOTATION} annotation is \"manual\": compact the keyspace, then create an EtcdDefrag (it defragments every member, the leader last, and disarms the alarm); if the live data itself exceeds the quota, raise spec.options.quotaBackendBytes"
            ),
            timing::BLOCKED_POLL,
        ));
    }
    let etcd = &ctx.observed.etcd;
    let wait = |message: String, requeue| {
        Some(Decision::wait(
            WaitReason::NoSpaceAlarm,
            format!("{alarm}: etcd refuses writes. {message}"),
            requeue,
        ))
    };
    let listed = etcd.member_list();
    let mut sizes = Vec::new();
    let mut silent = Vec::new();
    for info in listed {
        let member = ctx.members.iter().find(|m| m.id == Some(info.id));
        let label = member
            .map(|m| m.name.to_string())
            .unwrap_or_else(|| member_id_hex(info.id));
        match (member, etcd.status_of(info.id)) {
            (Some(m), Some(status)) if info.is_learner || m.health == Health::Healthy => {
                sizes.push((m, status, nospace_quota(m)));
            }
            _ => silent.push(label),
        }
    }
    if listed.is_empty() || !silent.is_empty() {
        return wait(
            format!(
                "The remediation (compact, defragment, disarm) waits until every member answers and the voters are healthy; not answering: {}",
                if silent.is_empty() {
                    "etcd's member list".to_string()
                } else {
                    silent.join(", ")
                }
            ),
            timing::MEMBER_POLL,
        );
    }
    let limit = |quota: i64| quota / 10 * 9;
    let over: Vec<_> = sizes
        .iter()
        .filter(|(_, s, quota)| s.db_size >= limit(*quota))
        .collect();
    if over.is_empty() {
        return Some(Decision::act(Step::DisarmAlarm {
            member: ctx
                .members
                .iter()
                .find(|m| m.id == Some(alarm.member_id))
                .map(|m| m.name.to_string()),
            alarm,
        }));
    }
    match etcd.compaction {
        None => {
            return wait(
                "Cannot tell whether the keyspace is compacted (etcd did not answer); the remediation waits".to_string(),
                timing::MEMBER_POLL,
            );
        }
        Some(c) if !c.compacted => {
            return Some(Decision::act(Step::Compact {
                revision: c.revision,
            }));
        }
        Some(_) => {}
    }
    let leader = etcd.leader();
    // etcd recomputes a member's in-use size only when it commits a write, and NOSPACE refuses
    // writes: after a compaction the pages it freed can still count as in use. So a member over
    // the limit that this remediation has not defragmented at the current (compacted) revision
    // is defragmented whatever its in-use size says; only one defragmented at this revision and
    // still over is live data.
    let revision = etcd.compaction.map(|c| c.revision);
    let record = ctx
        .cluster
        .status
        .as_ref()
        .and_then(|s| s.no_space_remediation.as_ref())
        .filter(|r| r.phase != NoSpacePhase::Remedied);
    let defragmented_now = |name: &str| {
        record.is_some_and(|r| {
            r.members
                .iter()
                .any(|e| e.name == name && e.defragmented_at_revision == revision)
        })
    };
    let mut reclaimable: Vec<_> = over
        .iter()
        .filter(|(m, s, quota)| {
            s.db_size - s.db_size_in_use > quota / 100 || !defragmented_now(m.name)
        })
        .collect();
    reclaimable.sort_by_key(|(m, _, _)| (m.id == leader, m.name));
    if let Some((m, s, _)) = reclaimable.first() {
        return Some(Decision::act(Step::Defragment {
            member: m.name.to_string(),
            endpoint: crate::build::member_client_url(&m.observed.member),
            db_size: s.db_size,
            leader: m.id == leader,
        }));
    }
    // The quota is being raised: the config rollout gives the members the new quota one at
    // a time (its own rule sits behind the readiness gate, which an active alarm keeps shut,
    // so it is driven from here, behind the same gate but for the alarm), and once they run
    // with it the alarm is disarmed (step 2).
    let target_quota = ctx
        .cluster
        .status
        .as_ref()
        .and_then(|s| s.observed.as_ref())
        .and_then(|o| o.options.as_ref())
        .and_then(|o| o.quota_backend_bytes)
        .filter(|bytes| *bytes > 0)
        .unwrap_or(crate::domain::etcd::DEFAULT_QUOTA_BACKEND_BYTES);
    if over.iter().any(|(_, _, quota)| target_quota > *quota)
        && !super::rollout::outdated_members(ctx).is_empty()
    {
        let rolling = |why: String| {
            wait(
                format!(
                    "The quota is raised to {target_quota} bytes: the members restart with it one at a time, and the alarm is disarmed once every member runs below 90 % of its quota; {why}"
                ),
                timing::MEMBER_POLL,
            )
        };
        if let Some(blocker) = super::operations::readiness_blocker(ctx, false) {
            return rolling(format!(
                "the next waits until every member is Ready: {blocker}"
            ));
        }
        return super::rollout::version_rollout(ctx)
            .or_else(|| rolling("waiting for the rollout".to_string()));
    }
    let detail = over
        .iter()
        .map(|(m, s, quota)| {
            format!(
                "{} holds {} bytes of live data, quota {quota}",
                m.name, s.db_size_in_use
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    wait(
        format!(
            "The keyspace is compacted and defragmented, but the live data itself is over 90 % of the quota ({detail}): raise spec.options.quotaBackendBytes, or delete keys; the alarm is disarmed once every member runs below 90 % of its quota"
        ),
        timing::BLOCKED_POLL,
    )
}

/// `status.noSpaceRemediation` after this pass: begun when the alarm is first seen (each
/// member's backend size then), its phase from the step this pass takes (written before the
/// step runs), the sizes as they are now, and `Remedied` with its time once etcd's alarm list
/// no longer has NOSPACE. Unknown alarms (etcd did not answer) change nothing; a finished
/// remediation stays as the record of the last one until the next alarm.
pub fn nospace_status(
    ctx: &Context<'_>,
    decision: &Decision,
    previous: Option<&NoSpaceRemediationStatus>,
) -> Option<NoSpaceRemediationStatus> {
    let Ok(alarms) = ctx.observed.etcd.alarms.as_ref() else {
        return previous.cloned();
    };
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(ctx.now);
    let active = previous.filter(|p| p.phase != NoSpacePhase::Remedied);
    let sizes = |record: &mut NoSpaceRemediationStatus| {
        for m in ctx.members.iter() {
            let Some(status) = m.id.and_then(|id| ctx.observed.etcd.status_of(id)) else {
                continue;
            };
            let entry = match record.members.iter_mut().position(|e| e.name == m.name) {
                Some(i) => &mut record.members[i],
                None => {
                    record.members.push(NoSpaceMemberSizes {
                        name: m.name.to_string(),
                        db_size_before: Some(status.db_size),
                        ..Default::default()
                    });
                    record.members.last_mut().expect("just pushed")
                }
            };
            entry.quota_bytes = Some(nospace_quota(m));
            entry.db_size_after = Some(status.db_size);
            entry.db_size_in_use = Some(status.db_size_in_use);
        }
        record.members.sort_by(|a, b| a.name.cmp(&b.name));
    };
    if !alarms.iter().any(|a| a.kind == AlarmKind::NoSpace) {
        let Some(active) = active else {
            return previous.cloned();
        };
        let mut done = active.clone();
        sizes(&mut done);
        done.phase = NoSpacePhase::Remedied;
        done.completed_at = Some(now);
        done.message = Some("etcd's NOSPACE alarm is gone; writes are accepted again".into());
        return Some(done);
    }
    let mut record = active.cloned().unwrap_or(NoSpaceRemediationStatus {
        phase: NoSpacePhase::Waiting,
        started_at: Some(now),
        completed_at: None,
        message: None,
        compacted_revision: None,
        members: Vec::new(),
    });
    sizes(&mut record);
    match &decision.step {
        Step::Compact { revision } => {
            record.phase = NoSpacePhase::Compacting;
            record.compacted_revision = Some(*revision);
            record.message = Some(format!("compacting the keyspace to revision {revision}"));
        }
        Step::Defragment { member, leader, .. } => {
            record.phase = NoSpacePhase::Defragmenting;
            let revision = ctx.observed.etcd.compaction.map(|c| c.revision);
            if let Some(entry) = record.members.iter_mut().find(|e| &e.name == member) {
                entry.defragmented_at_revision = revision;
            }
            record.message = Some(format!(
                "defragmenting {member}{}",
                if *leader {
                    " (the leader, last)"
                } else {
                    " (followers first, the leader last)"
                }
            ));
        }
        Step::DisarmAlarm { alarm, .. } if alarm.kind == AlarmKind::NoSpace => {
            record.phase = NoSpacePhase::Disarming;
            record.message =
                Some("every member is below 90 % of its quota: disarming the alarm".into());
        }
        Step::Wait {
            reason: WaitReason::NoSpaceAlarm,
            message,
        } => {
            record.phase = if message.contains(NOSPACE_REMEDIATION_ANNOTATION) {
                NoSpacePhase::Manual
            } else if message.contains("raise spec.options.quotaBackendBytes") {
                NoSpacePhase::QuotaExceeded
            } else {
                NoSpacePhase::Waiting
            };
            record.message = Some(message.clone());
        }
        // Another rule acts first (a dead Pod brought back, a CORRUPT member, the rollout of
        // a raised quota): the remediation waits for it.
        other => {
            record.phase = NoSpacePhase::Waiting;
            record.message = Some(format!("waiting for: {}", other.message()));
        }
    }
    Some(record)
}

/// The EtcdCluster annotation that turns the automatic NOSPACE remediation off (`manual`): the
/// alarm is then only reported, and an EtcdDefrag a person creates remedies it.
pub const NOSPACE_REMEDIATION_ANNOTATION: &str = "etcd-operator.cozystack.io/nospace-remediation";

/// A member's backend has reached [`timing::NEAR_QUOTA_PERCENT`] of the quota it runs with,
/// or etcd already reports NOSPACE: the cluster is looked at every
/// [`timing::NEAR_QUOTA_POLL`] whatever the step, so the alarm is noticed within that
/// instead of on the next pass a watch event or the idle poll brings (etcd has no way to
/// tell us: an alarm changes no Kubernetes object, and the readiness probe excludes NOSPACE).
pub fn nears_quota(ctx: &Context<'_>) -> bool {
    if ctx.alarms().iter().any(|a| a.kind == AlarmKind::NoSpace) {
        return true;
    }
    ctx.members
        .iter()
        .filter_map(|m| backend_fill(ctx, m))
        .any(|fill| fill.is_near())
}

/// The member whose backend fills the largest share of its quota (its physical size or what is
/// in use, whichever is larger), from the members etcd answered for; `None` when none did.
/// [`timing::fill_look`] compares its share across passes to look sooner at a cluster filling
/// fast, and the reconciler's alarm probe ([`timing::probe_period`]) looks at etcd between passes
/// as often as its headroom asks.
pub fn fullest_backend(ctx: &Context<'_>) -> Option<timing::BackendFill> {
    ctx.members
        .iter()
        .filter_map(|m| backend_fill(ctx, m))
        .max_by(|a, b| a.share().total_cmp(&b.share()))
}

/// How full member `m`'s backend is, when etcd answered for it.
fn backend_fill(ctx: &Context<'_>, m: &MemberView<'_>) -> Option<timing::BackendFill> {
    let status = ctx.observed.etcd.status_of(m.id?)?;
    Some(timing::BackendFill {
        used: status.db_size.max(status.db_size_in_use),
        quota: nospace_quota(m),
    })
}

/// The backend quota member `m` runs with: its EtcdMember's `quotaBackendBytes`, else etcd's
/// default (2 GiB).
fn nospace_quota(m: &MemberView<'_>) -> i64 {
    m.observed
        .member
        .spec
        .options
        .as_ref()
        .and_then(|o| o.quota_backend_bytes)
        .filter(|bytes| *bytes > 0)
        .unwrap_or(crate::domain::etcd::DEFAULT_QUOTA_BACKEND_BYTES)
}

/// The Secrets of `spec.tls` cannot be used (missing, wrong type or keys, a key that does not
/// match, not signed by the CA, expired, names not covered): nothing is started or changed on
/// a broken configuration, and what runs keeps running on what it has.
/// The cert-manager Certificates `spec.tls` asks for: the first one missing is created, the
/// first one that differs from what the operator sets is patched back. Before the Secret
/// problems, which wait for what these Certificates produce.
pub fn certificates(ctx: &Context<'_>) -> Option<Decision> {
    let cluster = &ctx.observed.cluster;
    ctx.observed.security.certificates.iter().find_map(|c| {
        if !c.exists {
            return match crate::security::certmanager::certificate_object(cluster, &c.wanted) {
                Ok(object) => Some(Decision::act(Step::ApplyCertificate {
                    name: c.wanted.name.clone(),
                    object: Some(Box::new(object)),
                    patch: None,
                })),
                Err(e) => Some(Decision::wait(
                    WaitReason::InvalidSecret,
                    format!("Certificate {} cannot be built: {e}", c.wanted.name),
                    timing::BLOCKED_POLL,
                )),
            };
        }
        c.patch.as_ref().map(|patch| {
            Decision::act(Step::ApplyCertificate {
                name: c.wanted.name.clone(),
                object: None,
                patch: Some(Box::new(patch.clone())),
            })
        })
    })
}

/// Operator-issued certificates (`spec.tls.*.operatorIssued`): the CA first when it is
/// missing, then each member's certificate that is missing or due (in member order), then the
/// operator's client certificate. Before the Secret problems and everything else: a member's
/// Pod mounts its certificate, so it exists before the Pod is created, and a renewal is never
/// held back by a step that waits.
///
/// A CA rotation (asked for with the `rotate-ca` annotation, or the CA in its last third) runs
/// through the same rule, each phase derived from what is observed, so a crash resumes it:
/// 1. the new CA goes into the CA Secret beside the old one, and the bundle of both into every
///    member's Secret (leaves still signed by the old CA, which every member trusts); the
///    members' Pods are then restarted one at a time to trust both (`trust_rollout`, behind
///    the readiness gate, the leader last);
/// 2. once every member's Pod trusts both, each leaf is issued again from the new CA (no
///    restart: etcd reads leaves at each handshake);
/// 3. once no leaf is signed by the old CA, the old CA leaves the CA Secret and the bundle; the
///    Pods are restarted once more, one at a time, to stop trusting it.
pub fn issued_certificates(ctx: &Context<'_>) -> Option<Decision> {
    use crate::plan::{IssuedCertificate, IssuedState, Signer};
    use crate::security::issuer;
    let issued = ctx.observed.security.issued.as_ref()?;
    let cluster = ctx
        .observed
        .cluster
        .metadata
        .name
        .as_deref()
        .unwrap_or_default();
    let issue = |secret: String, what: IssuedCertificate, why: &str| {
        Some(Decision::act(Step::IssueCertificate {
            secret,
            what,
            why: why.to_string(),
        }))
    };
    let ca_secret = issuer::ca_secret_name(cluster);
    match &issued.ca {
        IssuedState::Missing => {
            return issue(
                ca_secret,
                IssuedCertificate::Ca,
                "the cluster has no CA yet",
            );
        }
        IssuedState::Current => {}
        // A CA that cannot sign is among the security problems (rule below).
        IssuedState::Due(_) | IssuedState::Blocked => return None,
    }
    if let Some(request) = issued.rotation_wanted.as_ref().filter(|_| !issued.rotating) {
        return issue(
            ca_secret,
            IssuedCertificate::RotateCa {
                token: request.token.clone(),
            },
            &request.why,
        );
    }
    let all_trust = !issued.rotating || every_pod_trusts_the_bundle(ctx, issued);
    let signer = if all_trust {
        Signer::Current
    } else {
        Signer::Previous
    };
    for m in &issued.members {
        let why = match &m.state {
            IssuedState::Missing => "the member has no certificate yet",
            IssuedState::Due(why) => why.as_str(),
            IssuedState::Current | IssuedState::Blocked => continue,
        };
        return issue(
            issuer::member_secret_name(&m.member),
            IssuedCertificate::Member {
                member: m.member.clone(),
                uid: m.uid.clone(),
                signer,
            },
            why,
        );
    }
    let operator = issuer::operator_client_secret_name(cluster);
    match issued.operator_client.as_ref() {
        Some(IssuedState::Missing) => {
            return issue(
                operator,
                IssuedCertificate::OperatorClient { signer },
                "the operator has no client certificate yet",
            );
        }
        Some(IssuedState::Due(why)) => {
            return issue(operator, IssuedCertificate::OperatorClient { signer }, why);
        }
        _ => {}
    }
    if !issued.rotating || !all_trust {
        return None;
    }
    let switched = "the CA is being rotated and every member trusts the new CA";
    if let Some(m) = issued.members.iter().find(|m| m.by_previous) {
        return issue(
            issuer::member_secret_name(&m.member),
            IssuedCertificate::Member {
                member: m.member.clone(),
                uid: m.uid.clone(),
                signer: Signer::Current,
            },
            switched,
        );
    }
    if issued.operator_client_by_previous {
        return issue(
            operator,
            IssuedCertificate::OperatorClient {
                signer: Signer::Current,
            },
            switched,
        );
    }
    issue(
        ca_secret,
        IssuedCertificate::DropPreviousCa,
        "every certificate is signed by the new CA",
    )
}

/// Every member that runs has the CA bundle in its Secret and a Pod created to trust it.
fn every_pod_trusts_the_bundle(ctx: &Context<'_>, issued: &crate::plan::IssuedFacts) -> bool {
    let trust = &ctx.observed.security.trust;
    ctx.members.iter().filter(|m| m.is_running()).all(|m| {
        let has_bundle = issued
            .members
            .iter()
            .any(|i| i.member == m.name && i.has_bundle);
        match (m.observed.pod.as_ref(), trust.get(m.name)) {
            (Some(pod), Some(wanted)) => {
                has_bundle && !pod.deleting && pod.trusted_ca.as_ref() == Some(wanted)
            }
            _ => false,
        }
    })
}

/// The root password in its Secret changed and etcd still has the earlier one: change it, so
/// the operator (and every client given the new one) authenticates again. Right after the
/// Secret problems: every later etcd step needs working credentials.
pub fn root_password_change(ctx: &Context<'_>) -> Option<Decision> {
    let security = &ctx.observed.security;
    (security.root_password_outdated && security.root_password.is_some())
        .then(|| Decision::act(Step::ChangeRootPassword))
}

pub fn security_problems(ctx: &Context<'_>) -> Option<Decision> {
    let problems = &ctx.observed.security.problems;
    if problems.is_empty() {
        return None;
    }
    Some(Decision::wait(
        WaitReason::InvalidSecret,
        format!(
            "{}. Nothing is started or changed until this is fixed; running members keep what they have",
            problems.join("; ")
        ),
        timing::BLOCKED_POLL,
    ))
}
