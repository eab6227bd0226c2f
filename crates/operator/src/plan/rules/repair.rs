//! Rule 7, per-member repair (and the Services members need to find each other), and rule 8,
//! lost quorum.
//!
//! The repair ladder: a dead Pod (missing, or Succeeded/Failed after a node shutdown) is
//! brought back on the member's own data, without any quorum gate, because after a
//! whole-cluster reboot every member is in that state at once. A live Pod that keeps failing
//! is recreated (level 1, counted in `recreateCount`, with a growing backoff); after
//! [`MAX_RECREATIONS`] it is replaced (level 2: MemberRemove, data deleted, added again as a
//! learner). A memory-backed member whose Pod is lost has lost its data: it is replaced, never
//! restarted empty under its old identity. Levels 1 and 2 run one member at a time, only
//! while the other voters have quorum.

use etcd_operator_api::MemberPhase;
use k8s_openapi::api::core::v1::Service;

use super::helpers::{create_pod, delete_pod, foreign_objects, has_run, leadership_first};
use crate::build::{client_service, headless_service, service_drift};
use crate::plan::context::{Context, Health, MemberView};
use crate::plan::decision::{Decision, MemberEdit};
use crate::plan::step::{Step, WaitReason};
use crate::plan::timing::{self, MAX_RECREATIONS, START_GRACE, elapsed_beyond, remaining};

/// Rule 7, per-member repair, in this order: the Services; dead Pods; repairs in progress
/// (one member in Replacing or Recreating); starting a new repair.
pub fn member_repair(ctx: &Context<'_>) -> Option<Decision> {
    member_repair_except(ctx, None)
}

/// Rule 7 with one member `held` out of the ladder: no dead-Pod restore and no new repair for
/// it (a repair it already started continues). A member whose upgrade failed is held: the
/// ladder would recreate and then replace it on the version that does not start, while the
/// repairs of the other members must still run (issue 12).
pub fn member_repair_except(ctx: &Context<'_>, held: Option<&str>) -> Option<Decision> {
    services(ctx)
        .or_else(|| restore_dead_pod_except(ctx, held))
        .or_else(|| continue_repairs(ctx))
        .or_else(|| start_repair(ctx, held))
}

/// The headless Service is how members resolve each other: without it quorum cannot come
/// back, so it is repaired here, ahead of the lost-quorum rule, and never waits for the gate.
fn services(ctx: &Context<'_>) -> Option<Decision> {
    let cluster = &ctx.observed.cluster;
    let observed = [&ctx.observed.headless_service, &ctx.observed.client_service];
    let desired = [headless_service(cluster), client_service(cluster)];
    for (observed, desired) in observed.into_iter().zip(desired) {
        let desired = match desired {
            Ok(svc) => svc,
            Err(e) => {
                return Some(Decision::wait(
                    WaitReason::InvalidObject,
                    format!("cannot build the cluster's Services: {e}"),
                    timing::BLOCKED_POLL,
                ));
            }
        };
        match observed {
            None => return Some(Decision::act(Step::CreateService(Box::new(desired)))),
            Some(svc) if owned_by_cluster(ctx, svc) => {
                if let Some(fixed) = service_drift(svc, &desired) {
                    return Some(Decision::act(Step::UpdateService(Box::new(fixed))));
                }
            }
            // Someone else's Service of that name: not ours to change.
            Some(_) => {}
        }
    }
    None
}

fn owned_by_cluster(ctx: &Context<'_>, svc: &Service) -> bool {
    let uid = ctx.observed.cluster.metadata.uid.as_deref();
    svc.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| Some(o.uid.as_str()) == uid)
}

/// Dead Pods, first member first: a terminal Pod is deleted (its status is written first, so
/// the member stops counting as ready before the Pod goes), a missing Pod of a PVC-backed
/// member is created again on the same PVC (same data, same member ID). Not quorum-gated:
/// neither step takes anything away that is still serving. A memory-backed member with a lost,
/// replaced or terminal Pod starts its replacement instead. Also used by the alarm branches.
pub fn restore_dead_pod(ctx: &Context<'_>) -> Option<Decision> {
    restore_dead_pod_except(ctx, None)
}

fn restore_dead_pod_except(ctx: &Context<'_>, held: Option<&str>) -> Option<Decision> {
    ctx.members
        .iter()
        .filter(|m| m.is_running() && m.phase != MemberPhase::Replacing)
        .filter(|m| Some(m.name) != held)
        .filter(|m| foreign_objects(m).is_none())
        .find_map(|m| {
            if m.memory {
                return memory_data_lost(m).map(|why| {
                    Decision::set_phase(m.name, MemberPhase::Replacing)
                        .with(MemberEdit::new(m.name).phase(MemberPhase::Replacing).not_ready("DataLost", why))
                });
            }
            match m.observed.pod.as_ref() {
                Some(pod) if pod.phase.is_terminal() && !pod.deleting && m.phase != MemberPhase::Pending => {
                    Some(Decision::act(delete_pod(m, pod)).with(MemberEdit::new(m.name).not_ready(
                        "PodTerminated",
                        format!(
                            "Pod {} ended in phase {:?} (a node shutdown?); it is deleted and created again on the same data",
                            pod.name, pod.phase
                        ),
                    )))
                }
                None if has_run(m) => match m.observed.pvc.as_ref() {
                    Some(pvc) if !pvc.deleting => Some(create_pod(ctx, m)),
                    // The data is gone with the PVC: a new Pod would start empty under the
                    // old identity, so the member is replaced.
                    _ => Some(
                        Decision::set_phase(m.name, MemberPhase::Replacing).with(
                            MemberEdit::new(m.name)
                                .phase(MemberPhase::Replacing)
                                .not_ready("VolumeLost", format!("PVC data-{} is gone; the member is replaced", m.name)),
                        ),
                    ),
                },
                _ => None,
            }
        })
}

/// Why a memory-backed member's data is gone, if it is: its recorded Pod is missing or was
/// replaced by another, its Pod reached a terminal phase, or etcd knows it as started while
/// it has no Pod. (tmpfs dies with the Pod.)
pub(super) fn memory_data_lost(m: &MemberView<'_>) -> Option<String> {
    let pod = m.observed.pod.as_ref();
    let recorded = m.recorded_pod_uid();
    match (pod, recorded) {
        (Some(p), _) if p.phase.is_terminal() && !p.deleting => Some(format!(
            "Pod {} ended in phase {:?}; its in-memory data is gone",
            p.name, p.phase
        )),
        (Some(p), Some(uid)) if p.uid != uid => Some(format!(
            "Pod {} was replaced (UID {uid} is gone); its in-memory data went with it",
            p.name
        )),
        (None, Some(uid)) => Some(format!(
            "Pod {uid} is gone; its in-memory data went with it"
        )),
        (None, None) if m.etcd.is_some_and(|e| e.has_started()) => Some(
            "etcd knows the member as started, but it has no Pod: its in-memory data is gone"
                .to_string(),
        ),
        _ => None,
    }
}

/// A repair in progress continues: a member in Replacing works through its sequence; a
/// member in Recreating has its old Pod deleted (a Pod started before the phase was written),
/// unless that Pod is Ready again: the kubelet sees it serve, and a member the operator merely
/// cannot reach is not recreated for that (`plan::reach`). (A repair started before a member
/// became isolated goes on: isolation only keeps new repairs from starting.)
fn continue_repairs(ctx: &Context<'_>) -> Option<Decision> {
    if let Some(m) = ctx
        .members
        .iter()
        .find(|m| m.is_running() && m.phase == MemberPhase::Replacing)
    {
        return Some(continue_replacement(ctx, m));
    }
    let m = ctx
        .members
        .iter()
        .find(|m| m.is_running() && m.phase == MemberPhase::Recreating)?;
    let pod = m.observed.pod.as_ref()?;
    let old = pod
        .started_at
        .zip(m.phase_since())
        .is_some_and(|(start, since)| start < since);
    if !old || pod.deleting || (m.health == Health::Healthy && m.is_voter()) || m.pod_ready() {
        return None;
    }
    leadership_first(ctx, m).or_else(|| Some(Decision::act(delete_pod(m, pod))))
}

/// Level 2, one step per pass. Replacing (written first) → MoveLeader if it leads →
/// MemberRemove (only if the cluster keeps quorum without it) → delete Pod → delete PVC →
/// Provisioning with its identity forgotten, from where it joins as a new learner. The data
/// goes only after etcd no longer lists the member, and the identity is forgotten only after
/// the data is gone, so a crash at any point resumes here without reusing either.
pub(super) fn continue_replacement(ctx: &Context<'_>, m: &MemberView<'_>) -> Decision {
    if ctx.observed.etcd.members.is_err() {
        return Decision::wait(
            WaitReason::EtcdUnreachable,
            format!(
                "replacing {}: etcd does not answer, so its removal cannot be confirmed",
                m.name
            ),
            timing::BLOCKED_POLL,
        );
    }
    if let Some(etcd) = m.etcd {
        if let Some(first) = leadership_first(ctx, m) {
            return first;
        }
        if !ctx.keeps_quorum_without(etcd.id, true) {
            let (healthy, voters, quorum) = ctx.quorum_numbers();
            return Decision::wait(
                WaitReason::QuorumAtRisk,
                format!(
                    "replacing {}: removing it from etcd would take the cluster below quorum ({healthy}/{voters} voters healthy, quorum {quorum}); bring the other members back, or restore from a snapshot",
                    m.name
                ),
                timing::BLOCKED_POLL,
            );
        }
        return Decision::act(Step::RemoveEtcdMember {
            member: Some(m.name.to_string()),
            id: etcd.id,
        });
    }
    if let Some(pod) = m.observed.pod.as_ref() {
        if pod.deleting {
            return Decision::wait(
                WaitReason::WaitingForMember,
                format!("replacing {}: waiting for its old Pod to go", m.name),
                timing::MEMBER_POLL,
            );
        }
        return Decision::act(delete_pod(m, pod));
    }
    if let Some(pvc) = m.observed.pvc.as_ref() {
        if pvc.deleting {
            return Decision::wait(
                WaitReason::WaitingForMember,
                format!("replacing {}: waiting for its old PVC to go", m.name),
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
            .reset_identity(),
    )
}

/// A live Pod that keeps failing: crash-looping, or not ready (and etcd not answering for it)
/// for longer than the grace period, counted from when its Ready condition turned False (a
/// member that ran for days and hangs gets the whole grace period too). A member isolated from
/// its peers (it answers, a majority serves without it: `plan::reach`) is not failing, however
/// long it lasts: its Pod is not ready because it has no leader, and neither a new Pod nor a
/// new member would reconnect it.
fn failing(ctx: &Context<'_>, m: &MemberView<'_>) -> bool {
    let Some(pod) = m.observed.pod.as_ref() else {
        return false;
    };
    if pod.deleting || pod.phase.is_terminal() {
        return false;
    }
    pod.is_crash_looping()
        || (!pod.ready
            && matches!(m.health, Health::Down | Health::NoQuorum | Health::Unknown)
            && !crate::plan::reach::isolated(ctx, m)
            && elapsed_beyond(
                pod.started_at.max(pod.ready_changed_at),
                ctx.observed.settings.repair.not_ready_grace,
                ctx.now,
            ))
}

/// A member that ran in the cluster but that etcd no longer lists (removed behind the
/// operator's back, e.g. with etcdctl): its data belongs to a removed member and can never
/// rejoin, so it is replaced at once instead of climbing the recreation ladder.
fn removed_from_etcd(ctx: &Context<'_>, m: &MemberView<'_>) -> bool {
    has_run(m)
        && m.etcd.is_none()
        && m.id.is_some()
        && ctx.observed.etcd.members.is_ok()
        && ctx.observed.etcd.is_healthy()
}

/// Starts level 1 or level 2 on the first failing member, if the other voters have quorum
/// (a cluster-wide outage is not repaired member by member) and no other repair runs.
fn start_repair(ctx: &Context<'_>, held: Option<&str>) -> Option<Decision> {
    let candidate = |m: &&MemberView<'_>| m.is_running() && Some(m.name) != held;
    let busy = |m: &MemberView<'_>| {
        ctx.members.iter().any(|o| {
            o.name != m.name && matches!(o.phase, MemberPhase::Recreating | MemberPhase::Replacing)
        })
    };
    if let Some(m) = ctx
        .members
        .iter()
        .filter(candidate)
        .find(|m| removed_from_etcd(ctx, m) && !busy(m))
    {
        return Some(
            Decision::set_phase(m.name, MemberPhase::Replacing).with(
                MemberEdit::new(m.name)
                    .phase(MemberPhase::Replacing)
                    .not_ready(
                        "RemovedFromEtcd",
                        "etcd no longer lists the member; it is replaced by a new one",
                    ),
            ),
        );
    }
    // etcd refused to start on an empty data directory where it may only resume: its data is
    // lost, and recreating the Pod on the same empty volume cannot help. Straight to level 2
    // (whose MemberRemove waits until the others have quorum without it).
    if let Some(m) = ctx.members.iter().filter(candidate).find(|m| {
        !m.memory
            && matches!(
                m.phase,
                MemberPhase::Ready | MemberPhase::Recreating | MemberPhase::Provisioning
            )
            && m.observed
                .pod
                .as_ref()
                .is_some_and(|p| !p.deleting && !p.ready && p.data_dir_lost(m.name))
            && !busy(m)
    }) {
        return Some(
            Decision::set_phase(m.name, MemberPhase::Replacing).with(
                MemberEdit::new(m.name)
                    .phase(MemberPhase::Replacing)
                    .not_ready(
                        "DataLost",
                        format!(
                            "etcd of {} found its data directory empty and refused to start (it may only resume on its own data); the member is replaced by a new one that joins from the others",
                            m.name
                        ),
                    ),
            ),
        );
    }
    let mut oom = None;
    for m in ctx.members.iter().filter(candidate) {
        let repairable = matches!(
            m.phase,
            MemberPhase::Ready | MemberPhase::Recreating | MemberPhase::Provisioning
        );
        if !repairable || !failing(ctx, m) {
            continue;
        }
        let pod = m.observed.pod.as_ref()?;
        if pod.was_oom_killed() {
            oom.get_or_insert(m.name);
            continue;
        }
        if busy(m) || !ctx.others_have_quorum(m.id) {
            continue;
        }
        let count = m.recreate_count();
        let backoff = ctx.observed.settings.repair.backoff(count);
        if let Some(wait) = remaining(m.phase_since(), backoff, ctx.now) {
            let message = format!(
                "{} keeps failing; repair attempt {} in {}s (backoff)",
                m.name,
                count + 1,
                wait.as_secs()
            );
            return Some(
                Decision::wait(WaitReason::RepairBackoff, message.clone(), wait)
                    .with(MemberEdit::new(m.name).not_ready("RepairBackoff", message)),
            );
        }
        if m.memory || count >= MAX_RECREATIONS {
            let why = if m.memory {
                "a memory-backed member cannot be recreated on its data".to_string()
            } else {
                format!("{count} recreations did not help")
            };
            return Some(
                Decision::set_phase(m.name, MemberPhase::Replacing).with(
                    MemberEdit::new(m.name)
                        .phase(MemberPhase::Replacing)
                        .not_ready(
                            "Replacing",
                            format!("{why}; the member is replaced by a new one"),
                        ),
                ),
            );
        }
        // Each attempt restarts the phase's clock, also when the member is already Recreating:
        // the Pod started before it is the one the attempt deletes.
        return Some(Decision::set_phase(m.name, MemberPhase::Recreating).with(
            MemberEdit::new(m.name)
                .phase(MemberPhase::Recreating)
                .restart_clock()
                .recreate_count(count + 1)
                .not_ready(
                    "Recreating",
                    format!("etcd keeps failing; its Pod is recreated on the same data (attempt {})", count + 1),
                ),
        ));
    }
    oom.map(|name| {
        Decision::wait(
            WaitReason::OutOfMemory,
            format!("{name} keeps being killed for memory; raise spec.resources.limits.memory (applies to members created afterwards) and delete its Pod"),
            timing::BLOCKED_POLL,
        )
    })
}

/// Rule 8, start lost-quorum recovery: automatic recovery (which discards member data) is not
/// implemented, so this reports that quorum is lost, which members are down, and what the user
/// can do. Members still starting get [`START_GRACE`] first.
pub fn lost_quorum(ctx: &Context<'_>) -> Option<Decision> {
    let running: Vec<&MemberView<'_>> = ctx.running().collect();
    if !ctx.formed || running.is_empty() || ctx.observed.etcd.is_healthy() {
        return None;
    }
    // Before the start grace: Pods that are Ready are not "still starting", whatever their age.
    if let Some((ready, voters)) = crate::plan::reach::operator_cut_off(ctx) {
        return Some(Decision::wait(
            WaitReason::EtcdUnreachable,
            crate::plan::reach::cut_off_message(ctx, ready, voters),
            timing::BLOCKED_POLL,
        ));
    }
    let starting: Vec<&str> = running
        .iter()
        .filter(|m| {
            m.observed
                .pod
                .as_ref()
                .is_none_or(|p| !elapsed_beyond(p.started_at, START_GRACE, ctx.now))
        })
        .map(|m| m.name)
        .collect();
    if !starting.is_empty() {
        return Some(Decision::wait(
            WaitReason::WaitingForQuorum,
            format!(
                "waiting for quorum while members start: {}",
                starting.join(", ")
            ),
            timing::MEMBER_POLL,
        ));
    }
    if ctx
        .observed
        .etcd
        .endpoints
        .iter()
        .all(|o| o.status.is_err())
    {
        return Some(Decision::wait(
            WaitReason::EtcdUnreachable,
            "no etcd member answers and fewer than a quorum of the voters' Pods are Ready: the members are down (see their Pods), or the operator is cut off from them",
            timing::BLOCKED_POLL,
        ));
    }
    let (healthy, voters, quorum) = ctx.quorum_numbers();
    let down: Vec<&str> = running
        .iter()
        .filter(|m| m.health != Health::Healthy)
        .map(|m| m.name)
        .collect();
    Some(Decision::wait(
        WaitReason::QuorumLost,
        format!(
            "quorum lost: {healthy}/{voters} voters healthy, quorum needs {quorum}; not serving: {}. Bring those members back (their Pods and PVCs); if their data is gone, recover from the survivor (annotation {}, kubectl etcdop recover-quorum, or spec.quorumRecovery.mode: Automatic), or restore the cluster from a snapshot",
            down.join(", "),
            etcd_operator_api::cluster::RECOVER_QUORUM_ANNOTATION
        ),
        timing::BLOCKED_POLL,
    ))
}
