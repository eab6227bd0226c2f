//! The status of each EtcdMember as this pass sees it: identity from etcd, the Pod, and the
//! conditions Joined, Ready and VersionDrifted; plus the changes the decision writes first.

use etcd_operator_api::conditions::member as cond;
use etcd_operator_api::labels::member_selector;
use etcd_operator_api::{EtcdMemberStatus, MemberPhase};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::conditions::{self, Wanted};
use super::context::{Context, Health, MemberView};
use super::decision::MemberEdit;
use super::reach;
use super::timing::{STABLE_AFTER, elapsed_beyond};
use crate::build::pvc_name;
use crate::etcd::{member_id_hex, parse_member_id};

/// The status `m` should have after this pass, with `edit` applied.
pub fn member_status(
    ctx: &Context<'_>,
    m: &MemberView<'_>,
    edit: Option<&MemberEdit>,
) -> EtcdMemberStatus {
    let mut status = m.status();
    let pod = m.observed.pod.as_ref();
    let member_uid = m.observed.member.metadata.uid.as_deref();
    let own_pod = pod.filter(|p| p.owner_uid.as_deref() == member_uid || p.owner_uid.is_none());

    // The recorded text is kept when it names the same ID (the reference operator writes it
    // zero-padded to 16 digits, this one without padding): a takeover changes no member ID.
    if let Some(id) = m.id
        && status.member_id.as_deref().and_then(parse_member_id) != Some(id)
    {
        status.member_id = Some(member_id_hex(id));
    }
    if let Some(etcd) = m.etcd {
        status.is_voter = Some(!etcd.is_learner);
    }
    status.pod_name = own_pod.map(|p| p.name.clone());
    if let Some(pod) = own_pod {
        // Kept after the Pod is gone: a memory-backed member compares it with the next Pod.
        status.pod_uid = Some(pod.uid.clone());
    }
    status.replicas = Some(i32::from(own_pod.is_some()));
    status.selector = Some(member_selector(&ctx.cluster_name, m.name));
    status.pvc_name = (!m.memory).then(|| pvc_name(m.name));
    if let Some(version) =
        m.id.and_then(|id| ctx.observed.etcd.status_of(id))
            .map(|s| s.version.clone())
    {
        status.version = Some(version);
    }
    if status.phase.is_none() {
        status.phase = Some(MemberPhase::Pending);
    }

    if let Some(edit) = edit {
        if let Some(phase) = edit
            .phase
            .filter(|p| status.phase != Some(*p) || edit.restart_clock)
        {
            status.phase = Some(phase);
            status.last_phase_transition_time = Some(Time(ctx.now));
        }
        if let Some(count) = edit.recreate_count {
            status.recreate_count = Some(count);
        }
        if edit.reset_identity {
            status.member_id = None;
            status.is_voter = Some(false);
            status.pod_uid = None;
            // The version stays: the last one this member ran, which a rollout compares with
            // its spec (a memory-backed member replaced on a new version that does not start
            // must still count as a failed upgrade, not as a new member).
        }
    }

    let stable = status.phase == Some(MemberPhase::Ready)
        && m.health == Health::Healthy
        && elapsed_beyond(
            status.last_phase_transition_time.as_ref().map(|t| t.0),
            STABLE_AFTER,
            ctx.now,
        );
    if stable && status.recreate_count.is_some_and(|c| c > 0) {
        status.recreate_count = Some(0);
    }

    let generation = m.observed.member.metadata.generation;
    let mut list = status.conditions.take().unwrap_or_default();
    if let Some(joined) = joined(ctx, m, edit) {
        conditions::set(&mut list, joined, generation, ctx.now);
    }
    conditions::set(&mut list, ready(ctx, m, edit), generation, ctx.now);
    if let Some(version) = status.version.as_deref() {
        let intended = &m.observed.member.spec.version;
        let drifted = version != intended;
        let wanted = if drifted {
            Wanted::new(
                cond::VERSION_DRIFTED,
                true,
                "VersionMismatch",
                format!("etcd runs {version}, spec.version is {intended}"),
            )
        } else {
            Wanted::new(
                cond::VERSION_DRIFTED,
                false,
                "VersionMatched",
                format!("etcd runs {version}"),
            )
        };
        conditions::set(&mut list, wanted, generation, ctx.now);
    }
    status.conditions = Some(list);
    status
}

/// Joined follows etcd's member list; unknown (kept as it was) while the list is unavailable.
fn joined(ctx: &Context<'_>, m: &MemberView<'_>, edit: Option<&MemberEdit>) -> Option<Wanted> {
    if edit.is_some_and(|e| e.reset_identity) {
        return Some(Wanted::new(
            cond::JOINED,
            false,
            "Replacing",
            "removed from etcd; it joins again as a new member",
        ));
    }
    match (m.etcd, ctx.observed.etcd.members.is_ok()) {
        (Some(e), _) => Some(Wanted::new(
            cond::JOINED,
            true,
            "MemberAdded",
            format!(
                "etcd member {} ({})",
                member_id_hex(e.id),
                if e.is_learner { "learner" } else { "voter" }
            ),
        )),
        (None, true) => Some(Wanted::new(
            cond::JOINED,
            false,
            "NotJoined",
            "not in etcd's member list",
        )),
        (None, false) => None,
    }
}

/// Ready: a healthy voter in phase Ready; otherwise why not, in the first matching terms.
fn ready(ctx: &Context<'_>, m: &MemberView<'_>, edit: Option<&MemberEdit>) -> Wanted {
    let no = |reason: &str, message: String| Wanted::new(cond::READY, false, reason, message);
    if let Some((reason, message)) = edit.and_then(|e| e.not_ready.clone()) {
        return no(reason, message);
    }
    let phase = edit.and_then(|e| e.phase).unwrap_or(m.phase);
    let pod = m.observed.pod.as_ref();
    if m.deleting {
        return no("Terminating", "the member is leaving the cluster".into());
    }
    if m.dormant {
        return no(
            "Dormant",
            "the cluster is scaled to zero; the member's data is kept".into(),
        );
    }
    match pod {
        None => return no("PodMissing", "the member has no Pod".into()),
        Some(p) if p.phase.is_terminal() => {
            return no(
                "PodTerminated",
                format!(
                    "Pod {} ended in phase {:?}; it is replaced",
                    p.name, p.phase
                ),
            );
        }
        Some(p) if p.is_crash_looping() => {
            return no(
                "CrashLoopBackOff",
                format!("etcd keeps failing ({} restarts)", p.restart_count),
            );
        }
        Some(_) => {}
    }
    if phase == MemberPhase::Ready && m.health == Health::Healthy && m.is_voter() && !m.pod_ready()
    {
        return no(
            "PodNotReady",
            "etcd reports the member healthy, but its Pod is not Ready yet (clients reach it through the client Service only once it is)".into(),
        );
    }
    if phase == MemberPhase::Ready && m.health == Health::Healthy && m.is_voter() {
        return Wanted::new(
            cond::READY,
            true,
            "MemberHealthy",
            "etcd member is a healthy voter",
        );
    }
    match (phase, m.health) {
        (MemberPhase::Pending | MemberPhase::Provisioning, _) if !m.is_voter() => no(
            "Provisioning",
            match m.etcd {
                Some(e) if e.is_learner => {
                    "joined as a learner, catching up with the leader".into()
                }
                Some(_) => "added to etcd, starting".into(),
                None => "being added to etcd".into(),
            },
        ),
        (MemberPhase::Recreating, _) => no(
            "Recreating",
            "its Pod was recreated on the same data".into(),
        ),
        (MemberPhase::Replacing, _) => no("Replacing", "being replaced by a new member".into()),
        (_, Health::Down) if m.pod_ready() => no(
            "Unreachable",
            "etcd does not answer the operator, but its Pod is Ready (the kubelet's checks of etcd's /health pass): the operator may be cut off from it; nothing is done about it".into(),
        ),
        (_, Health::Down) => no("Unreachable", "etcd does not answer".into()),
        (_, Health::NoQuorum) => match reach::sight(ctx, m) {
            s @ reach::Sight::Isolated { .. } => no(
                "Isolated",
                format!(
                    "isolated from its peers: {} while a majority of the voters serves without it; it is not recreated or replaced for being isolated (check the network between the members)",
                    reach::isolation_detail(s)
                ),
            ),
            _ => no("NoQuorum", "etcd answers but cannot reach quorum".into()),
        },
        (_, Health::Learner) => no("Learner", "still a learner".into()),
        (_, Health::Unknown) => no("PodNotReady", "etcd was not asked yet".into()),
        (_, Health::Healthy) => no("Promoting", "a healthy voter, becoming Ready".into()),
    }
}
