//! Rule 10, cluster operations behind the readiness gate: bootstrap, strays, scale out, scale
//! in, scale to zero and back, the PodDisruptionBudget and the voter labels, the CA trust
//! rollout, and version rollouts (`rollout.rs`).

use etcd_operator_api::shared::StorageMedium;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;

use super::helpers::{delete_pod, leadership_first};
use crate::build::{member_name, member_ordinal, new_member, voter_pdb};
use crate::plan::context::Context;
use crate::plan::decision::{Decision, MemberEdit};
use crate::plan::step::{Step, WaitReason};
use crate::plan::timing;

/// Rule 10.
pub fn cluster_operations(ctx: &Context<'_>) -> Option<Decision> {
    unsupported_spec(ctx)
        .or_else(|| dormancy_in_progress(ctx))
        .or_else(|| readiness_gate(ctx))
        .or_else(|| remove_stray(ctx))
        .or_else(|| scale(ctx))
        .or_else(|| disruption_budget(ctx))
        .or_else(|| voter_labels(ctx))
        .or_else(|| enable_auth(ctx))
        .or_else(|| trust_rollout(ctx))
        .or_else(|| super::rollout::version_rollout(ctx))
        .or_else(|| super::rollout::metadata_rollout(ctx))
        .or_else(|| super::rollout::storage_rollout(ctx))
}

/// The CAs a member's Secrets hold changed since its Pod was created (a CA rotation): etcd
/// reads its trusted CAs only at start-up, so its Pod is deleted and created again on its own
/// data, one member at a time behind the readiness gate (every member Ready before the next),
/// followers first and the leader last, its leadership moved away first. A Pod made before
/// the operator recorded what it trusts is left alone.
fn trust_rollout(ctx: &Context<'_>) -> Option<Decision> {
    let trust = &ctx.observed.security.trust;
    let leader = ctx.observed.etcd.leader();
    let outdated = ctx
        .members
        .iter()
        .filter(|m| m.is_running())
        .filter_map(|m| {
            let pod = m.observed.pod.as_ref().filter(|p| !p.deleting)?;
            let had = pod.trusted_ca.as_ref()?;
            let wanted = trust.get(m.name)?;
            (had != wanted).then_some((m, pod))
        })
        .min_by_key(|(m, _)| m.id.is_some() && m.id == leader);
    let (m, pod) = outdated?;
    // A memory-backed member's data dies with its Pod: its restart is a replacement, which
    // needs the others to keep quorum without it. Never delete the Pod when they cannot.
    if m.memory && !ctx.others_have_quorum(m.id) {
        return Some(Decision::wait(
            WaitReason::QuorumAtRisk,
            format!(
                "the CA certificates of {}'s Secrets changed, so its etcd must restart to trust them; it is memory-backed, so a restart replaces it, and the others cannot keep quorum without it. Scale the cluster out first (3 members or more), or recreate it",
                m.name
            ),
            timing::BLOCKED_POLL,
        ));
    }
    leadership_first(ctx, m).or_else(|| {
        Some(
            Decision::act(delete_pod(m, pod)).with(MemberEdit::new(m.name).not_ready(
                "TrustChanged",
                format!(
                    "the CA certificates of {}'s Secrets changed; its Pod is created again on its data so that etcd trusts them",
                    m.name
                ),
            )),
        )
    })
}

/// `spec.auth.enabled`: once every member is Ready (behind the gate), authentication is turned
/// on, once; `status.authEnabled` records it.
fn enable_auth(ctx: &Context<'_>) -> Option<Decision> {
    let wanted = ctx
        .observed
        .cluster
        .spec
        .auth
        .as_ref()
        .is_some_and(etcd_operator_api::cluster::AuthSpec::is_enabled);
    let latched = ctx.cluster.status.as_ref().and_then(|s| s.auth_enabled) == Some(true)
        || ctx.observed.security.auth_found_enabled;
    (wanted && !latched && ctx.observed.security.root_password.is_some() && ctx.formed)
        .then(|| Decision::act(Step::EnableAuth))
}

/// What the spec asks for that this version cannot do yet, reported instead of done wrong:
/// bootstrap from a snapshot on a PVC, and a memory-backed cluster scaled to zero (its data would not
/// survive). TLS from cert-manager is reported with the TLS Secrets' problems.
fn unsupported_spec(ctx: &Context<'_>) -> Option<Decision> {
    if let Some(why) = super::rollout::target_unsupported(ctx) {
        return Some(Decision::wait(
            WaitReason::UnsupportedVersion,
            why,
            timing::BLOCKED_POLL,
        ));
    }
    let spec = &ctx.observed.cluster.spec;
    let what = if spec
        .bootstrap
        .as_ref()
        .and_then(|b| b.restore.as_ref())
        .is_some_and(|r| r.source.store().is_none() || r.source.local.is_some())
    {
        "spec.bootstrap.restore.source naming no single store, or a local store (a directory of the operator's Pod, which the restoring Pod cannot read)"
    } else if spec.bootstrap.as_ref().is_some_and(|b| b.restore.is_some())
        && spec.storage_or_default().medium_or_default() == StorageMedium::Memory
    {
        "spec.bootstrap.restore with spec.storage.medium=Memory"
    } else if ctx.desired == 0
        && spec.storage_or_default().medium_or_default() == StorageMedium::Memory
    {
        "spec.replicas=0 with spec.storage.medium=Memory (the data would not survive the pause)"
    } else {
        return None;
    };
    Some(Decision::wait(
        WaitReason::UnsupportedSpec,
        format!(
            "the cluster asks for {what}; the operator leaves it as it is. Remove the field, or recreate the cluster without it"
        ),
        timing::BLOCKED_POLL,
    ))
}

/// Finishing a stop or a resume started earlier, ahead of the gate (a half-stopped cluster
/// has members that are not ready, which would otherwise hold it half-stopped forever). A
/// resume wakes every dormant member at once: quorum needs them together, on their own data.
fn dormancy_in_progress(ctx: &Context<'_>) -> Option<Decision> {
    let dormant: Vec<String> = ctx
        .members
        .iter()
        .filter(|m| m.dormant && !m.deleting)
        .map(|m| m.name.to_string())
        .collect();
    if dormant.is_empty() {
        return None;
    }
    if ctx.desired > 0 {
        return Some(Decision::act(Step::SetDormant {
            members: dormant,
            dormant: false,
        }));
    }
    let running: Vec<String> = ctx.running().map(|m| m.name.to_string()).collect();
    if !running.is_empty() {
        return Some(Decision::act(Step::SetDormant {
            members: running,
            dormant: true,
        }));
    }
    ctx.members.iter().filter(|m| m.dormant).find_map(|m| {
        let pod = m.observed.pod.as_ref().filter(|p| !p.deleting)?;
        Some(Decision::act(delete_pod(m, pod)))
    })
}

/// The readiness gate: scaling, configuration and upgrades only when every running member is
/// Ready (a healthy voter), none is leaving, no alarm is active and etcd reports the cluster
/// healthy. With no running member (nothing bootstrapped yet, or all dormant) there is nothing
/// to wait for.
pub fn readiness_gate(ctx: &Context<'_>) -> Option<Decision> {
    let blocker = readiness_blocker(ctx, true)?;
    if growing_only(ctx) && readiness_blocker_by(ctx, true, Readiness::EtcdWord).is_none() {
        // Scaling out needs etcd healthy, which this pass saw member by member; a Pod whose
        // readiness probe has not turned yet (up to its 1 s period, every new member) serves
        // no client but holds up nothing a new learner needs. etcd refuses a MemberAdd that
        // would endanger quorum itself.
        return None;
    }
    Some(Decision::wait(
        WaitReason::WaitingForMember,
        format!("cluster operations wait until every member is Ready: {blocker}"),
        timing::MEMBER_POLL,
    ))
}

/// What keeps the readiness gate shut, if anything; `alarms` false leaves the active alarms
/// out (the NOSPACE remedy rolls a raised quota under its own alarm), and then, under NOSPACE,
/// a member counts as Ready by etcd's word with its Pod running
/// ([`crate::plan::context::MemberView::is_ready_under_nospace`]).
pub fn readiness_blocker(ctx: &Context<'_>, alarms: bool) -> Option<String> {
    readiness_blocker_by(ctx, alarms, Readiness::Pod)
}

/// What a running member's readiness means to the gate.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Readiness {
    /// Its Pod is Ready too (the kubelet's probe): before anything that disrupts a member.
    Pod,
    /// etcd's word alone (a healthy voter, its Pod running): enough to add a member.
    EtcdWord,
}

/// The only cluster operation pending is scaling out: fewer running members than desired, no
/// stray to remove, none dormant (a resume comes first).
fn growing_only(ctx: &Context<'_>) -> bool {
    ctx.strays.is_empty()
        && !ctx.members.iter().any(|m| m.dormant)
        && ctx.running().count() < ctx.desired.max(0) as usize
}

fn readiness_blocker_by(ctx: &Context<'_>, alarms: bool, readiness: Readiness) -> Option<String> {
    let running: Vec<_> = ctx.running().collect();
    if let Some(m) = ctx.members.iter().find(|m| m.deleting) {
        Some(format!("{} is leaving the cluster", m.name))
    } else if let Some(alarm) = ctx.alarms().first().filter(|_| alarms) {
        Some(format!("the {} alarm is active", alarm.kind))
    } else if running.is_empty() {
        None
    } else if let Some(m) = running.iter().find(|m| {
        let by_etcd = readiness == Readiness::EtcdWord || (!alarms && ctx.nospace());
        !(m.is_ready() || (by_etcd && m.is_ready_under_nospace()))
    }) {
        Some(format!(
            "{} is not Ready (phase {}, etcd {:?})",
            m.name, m.phase, m.health
        ))
    } else if !ctx.observed.etcd.is_healthy() {
        Some("etcd does not report the cluster healthy".to_string())
    } else {
        None
    }
}

/// An etcd member no EtcdMember claims (added by hand, or left behind by a deleted
/// EtcdMember) is removed when safe: behind the gate, one at a time, leadership moved away
/// first, and only if the cluster keeps quorum without it.
fn remove_stray(ctx: &Context<'_>) -> Option<Decision> {
    let stray = ctx.strays.first()?;
    if ctx.observed.etcd.leader() == Some(stray.id)
        && let Some(successor) = ctx.successor_for("")
    {
        return Some(Decision::act(Step::MoveLeader {
            from: None,
            to: successor.name.to_string(),
            to_id: successor.id?,
        }));
    }
    if !ctx.keeps_quorum_without(stray.id, true) {
        return Some(Decision::wait(
            WaitReason::QuorumAtRisk,
            format!(
                "stray etcd member {:x} (no EtcdMember claims it) is kept: removing it would break quorum",
                stray.id
            ),
            timing::BLOCKED_POLL,
        ));
    }
    Some(Decision::act(Step::RemoveEtcdMember {
        member: None,
        id: stray.id,
    }))
}

/// Bootstrap, scale to zero, scale out, scale in.
fn scale(ctx: &Context<'_>) -> Option<Decision> {
    let running: Vec<_> = ctx.running().collect();
    let desired = ctx.desired.max(0) as usize;
    if desired == 0 {
        if running.is_empty() {
            return None;
        }
        return Some(Decision::act(Step::SetDormant {
            members: running.iter().map(|m| m.name.to_string()).collect(),
            dormant: true,
        }));
    }
    if ctx.members.is_empty() && ctx.formed {
        return Some(Decision::wait(
            WaitReason::ClusterLost,
            "the cluster formed once but all its EtcdMembers are gone, and with them its data; the operator does not start a new cluster under the old one's ID. Delete and recreate the EtcdCluster (restoring from a snapshot if you have one)",
            timing::BLOCKED_POLL,
        ));
    }
    let victim = (running.len() > desired).then(|| running.last()).flatten();
    if let Some(unmark) = super::retention::stale_scale_in_mark(ctx, victim.map(|v| v.name)) {
        return Some(unmark);
    }
    if running.len() < desired {
        let seed = ctx.members.is_empty();
        let name = member_name(&ctx.cluster_name, lowest_free_ordinal(ctx));
        return Some(match new_member(&ctx.cluster, &name, seed) {
            Ok(member) => Decision::act(Step::CreateMember(Box::new(member))),
            Err(e) => Decision::wait(
                WaitReason::InvalidObject,
                format!("cannot create member {name}: {e}"),
                timing::MEMBER_POLL,
            ),
        });
    }
    if running.len() > desired {
        // Highest ordinal first (members named otherwise sort last, so they go first).
        let victim = running.last()?;
        if let Some(first) = leadership_first(ctx, victim) {
            return Some(first);
        }
        if let Some(id) = victim.id
            && !ctx.keeps_quorum_without(id, true)
        {
            return Some(Decision::wait(
                WaitReason::QuorumAtRisk,
                format!("scaling in: removing {} would break quorum", victim.name),
                timing::BLOCKED_POLL,
            ));
        }
        if let Some(mark) = super::retention::mark_before_scale_in(ctx, victim) {
            return Some(mark);
        }
        return Some(Decision::act(Step::DeleteMember {
            member: victim.name.to_string(),
        }));
    }
    None
}

/// The lowest ordinal no EtcdMember (running, dormant or leaving) and no retained PVC uses.
fn lowest_free_ordinal(ctx: &Context<'_>) -> u32 {
    let mut used: std::collections::BTreeSet<u32> = ctx
        .members
        .iter()
        .filter_map(|m| member_ordinal(&ctx.cluster_name, m.name))
        .collect();
    used.extend(super::retention::retained_ordinals(ctx));
    (0..).find(|n| !used.contains(n)).unwrap_or(0)
}

/// The PodDisruptionBudget: `minAvailable` = quorum of the voters; deleted when there are none.
fn disruption_budget(ctx: &Context<'_>) -> Option<Decision> {
    let voters = ctx.running().filter(|m| m.is_voter()).count() as u32;
    let observed = ctx.observed.pdb.as_ref();
    if voters == 0 {
        return observed.map(|pdb| {
            Decision::act(Step::DeletePdb {
                name: pdb.metadata.name.clone().unwrap_or_default(),
            })
        });
    }
    let desired = match voter_pdb(&ctx.cluster, voters) {
        Ok(pdb) => pdb,
        Err(e) => {
            return Some(Decision::wait(
                WaitReason::InvalidObject,
                format!("cannot build the PodDisruptionBudget: {e}"),
                timing::BLOCKED_POLL,
            ));
        }
    };
    match observed {
        None => Some(Decision::act(Step::CreatePdb(Box::new(desired)))),
        Some(current) if pdb_differs(current, &desired) => {
            let mut updated = current.clone();
            updated.spec = desired.spec;
            Some(Decision::act(Step::UpdatePdb(Box::new(updated))))
        }
        Some(_) => None,
    }
}

fn pdb_differs(current: &PodDisruptionBudget, desired: &PodDisruptionBudget) -> bool {
    let (Some(have), Some(want)) = (current.spec.as_ref(), desired.spec.as_ref()) else {
        return true;
    };
    have.min_available != want.min_available
        || have.max_unavailable.is_some()
        || have.selector != want.selector
}

/// A voter's Pod carries the voter label, a learner's does not (the PDB protects voters).
fn voter_labels(ctx: &Context<'_>) -> Option<Decision> {
    ctx.running().find_map(|m| {
        let pod = m.observed.pod.as_ref().filter(|p| !p.deleting)?;
        m.etcd?;
        (pod.voter_label != m.is_voter()).then(|| {
            Decision::act(Step::LabelPod {
                member: m.name.to_string(),
                pod: pod.name.clone(),
                voter: m.is_voter(),
            })
        })
    })
}
