//! The EtcdCluster's status: latches (token, target, cluster ID), counts, per-member summary,
//! leader, and the conditions Available, Progressing and Degraded.

use etcd_operator_api::cluster::{ClusterMemberStatus, EtcdClusterStatus, ObservedClusterSpec};
use etcd_operator_api::conditions::cluster as cond;
use etcd_operator_api::labels::cluster_selector;
use etcd_operator_api::{EtcdCluster, MemberPhase};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::SignedDuration;

use super::conditions::{self, Wanted};
use super::context::{Context, Health, MemberView};
use super::decision::Decision;
use super::step::{Step, WaitReason};
use crate::etcd::{AlarmKind, member_id_hex};

/// The target spec latched from `spec`.
pub fn target_of(cluster: &EtcdCluster) -> ObservedClusterSpec {
    let spec = &cluster.spec;
    ObservedClusterSpec {
        replicas: spec.replicas_or_default(),
        version: spec.version.clone(),
        storage: spec.storage_or_default(),
        resources: spec.resources.clone(),
        affinity: spec.affinity.clone(),
        topology_spread_constraints: spec.topology_spread_constraints.clone(),
        additional_metadata: spec.additional_metadata.clone(),
        options: spec.options.clone(),
        image_pull_secrets: spec.image_pull_secrets.clone(),
    }
}

/// The cluster token: namespace, name and UID, so same-named clusters never share one.
pub fn cluster_token(cluster: &EtcdCluster) -> String {
    let meta = &cluster.metadata;
    format!(
        "{}-{}-{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
        meta.uid.as_deref().unwrap_or_default()
    )
}

/// The running members match the target: the right count, every one ready, none leaving, none
/// still to roll to the target's version or config; at zero, every member dormant with its Pod
/// gone.
pub fn target_reached(ctx: &Context<'_>) -> bool {
    if ctx.members.iter().any(|m| m.deleting) {
        return false;
    }
    if ctx.desired == 0 {
        return ctx
            .members
            .iter()
            .all(|m| m.dormant && m.observed.pod.is_none());
    }
    let running: Vec<_> = ctx.running().collect();
    let nospace = ctx.nospace();
    ctx.formed
        && running.len() == ctx.desired as usize
        && running
            .iter()
            .all(|m| m.is_ready() || (nospace && m.is_ready_under_nospace()))
        && ctx.strays.is_empty()
        && super::rules::rollout::outdated_members(ctx).is_empty()
}

/// The cluster with this pass's latches: the token on the first pass; the target
/// (`status.observed`) on the first pass, then from the spec once the previous target is
/// reached or its progress deadline has passed (spec changes in between wait); the progress
/// deadline set with every new target and cleared when it is reached.
pub fn latched(ctx: &Context<'_>) -> EtcdCluster {
    let mut cluster = ctx.observed.cluster.clone();
    let now = ctx.now;
    let secs = cluster.spec.progress_deadline_seconds_or_default();
    let deadline = Time(
        now.saturating_add(SignedDuration::from_secs(i64::from(secs)))
            .unwrap_or(now),
    );
    let token = cluster_token(&cluster);
    let wanted = target_of(&cluster);
    let reached = target_reached(ctx);
    let status = cluster.status.get_or_insert_with(Default::default);
    if status.cluster_token.is_none() {
        status.cluster_token = Some(token);
    }
    match &status.observed {
        None => {
            status.observed = Some(wanted);
            status.progress_deadline = Some(deadline);
        }
        Some(current) if *current != wanted => {
            let expired = status
                .progress_deadline
                .as_ref()
                .is_some_and(|d| d.0 <= now);
            if reached || expired || super::rules::rollout::retarget_version(ctx, current, &wanted)
            {
                status.observed = Some(wanted);
                status.progress_deadline = Some(deadline);
            }
        }
        Some(_) if reached => status.progress_deadline = None,
        Some(_) => {}
    }
    cluster
}

/// The cluster status after this pass (starting from the latched one).
pub fn cluster_status(ctx: &Context<'_>, decision: &Decision) -> EtcdClusterStatus {
    let cluster = &ctx.cluster;
    let mut status = cluster.status.clone().unwrap_or_default();
    let now = ctx.now;
    status.selector = Some(cluster_selector(&ctx.cluster_name));
    let reached = target_reached(ctx);
    if status.cluster_id.is_none()
        && let Some(id) = ctx.observed.etcd.cluster_id
        && ctx.members.iter().any(|m| m.etcd.is_some())
    {
        status.cluster_id = Some(member_id_hex(id));
    }

    if status.restored_from.is_none()
        && let Some(restored) = restored_from(ctx)
    {
        status.restored_from = Some(restored);
    }

    if let Some(recovery) = &decision.recovery {
        // A recovery from a snapshot that brought its seed up: the new cluster's ID.
        if let Some(id) = recovery
            .snapshot
            .as_ref()
            .and_then(|s| s.cluster_id.clone())
            && !recovery.in_progress()
        {
            status.cluster_id = Some(id);
        }
        status.quorum_recovery = Some(recovery.clone());
    }

    status.no_space_remediation =
        super::rules::nospace_status(ctx, decision, status.no_space_remediation.as_ref());

    if ctx.observed.security.auth_found_enabled {
        status.auth_enabled = Some(true);
    }
    let ready = ctx.running().filter(|m| m.is_ready()).count() as i32;
    status.ready_members = Some(ready);
    status.broken_members = Some(
        ctx.running()
            .filter(|m| {
                matches!(m.phase, MemberPhase::Recreating | MemberPhase::Replacing)
                    || (m.phase == MemberPhase::Ready && !m.is_ready())
            })
            .count() as i32,
    );
    let leader = ctx.leader().map(|m| m.name.to_string());
    status.leader = leader.clone();
    status.members = Some(
        ctx.members
            .iter()
            .map(|m| {
                let etcd_status = m.id.and_then(|id| ctx.observed.etcd.status_of(id));
                ClusterMemberStatus {
                    name: m.name.to_string(),
                    member_id: m.id.map(member_id_hex),
                    is_learner: m.etcd.map(|e| e.is_learner),
                    is_leader: Some(leader.as_deref() == Some(m.name)),
                    healthy: Some(matches!(m.health, Health::Healthy | Health::Learner)),
                    version: etcd_status.map(|s| s.version.clone()),
                    db_size: etcd_status.map(|s| s.db_size),
                    db_size_in_use: etcd_status.map(|s| s.db_size_in_use),
                    alarms: m.id.and_then(|id| {
                        let raised: Vec<String> = ctx
                            .alarms()
                            .iter()
                            .filter(|a| a.member_id == id)
                            .map(|a| a.kind.to_string())
                            .collect();
                        (!raised.is_empty()).then_some(raised)
                    }),
                }
            })
            .collect(),
    );

    let generation = cluster.metadata.generation;
    let mut list = status.conditions.take().unwrap_or_default();
    for wanted in cluster_conditions(ctx, decision, ready, reached) {
        conditions::set(&mut list, wanted, generation, now);
    }
    if let Some(wanted) = certificates_condition(ctx) {
        conditions::set(&mut list, wanted, generation, now);
    }
    status.conditions = Some(list);
    status
}

/// Recorded once, the first time the restored seed answers: the source and etcd's revision.
fn restored_from(ctx: &Context<'_>) -> Option<etcd_operator_api::cluster::RestoredFrom> {
    let uri = super::rules::restore_source_uri(ctx)?;
    let seed = ctx
        .members
        .iter()
        .find(|m| m.observed.member.spec.restore.is_some())?;
    let status = ctx.observed.etcd.status_of(seed.id?)?;
    Some(etcd_operator_api::cluster::RestoredFrom {
        uri,
        revision: Some(status.revision),
        time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            ctx.now,
        )),
    })
}

/// `CertificatesValid`, with `spec.tls` and at least one usable certificate observed.
fn certificates_condition(ctx: &Context<'_>) -> Option<Wanted> {
    let validity = &ctx.observed.security.validity;
    if ctx.observed.cluster.spec.tls.is_none() || validity.is_empty() {
        return None;
    }
    let expiring = crate::security::expiring_certificates(validity, ctx.now);
    // cert-manager Certificates that are not Ready while their Secret still serves: renewal is
    // failing, and the certificate will run out unless someone acts.
    let not_ready: Vec<String> = ctx
        .observed
        .security
        .certificates
        .iter()
        .filter_map(|c| {
            let why = c.not_ready.as_ref()?;
            let usable = validity.iter().find(|v| v.secret == c.wanted.secret_name)?;
            Some(format!(
                "{why}; its Secret {} still holds a certificate valid until {}, but it will not be renewed until the Certificate is Ready again",
                usable.secret, usable.not_after
            ))
        })
        .collect();
    if expiring.is_empty() && !not_ready.is_empty() {
        return Some(Wanted::new(
            cond::CERTIFICATES_VALID,
            false,
            "CertificateNotReady",
            not_ready.join("; "),
        ));
    }
    Some(if expiring.is_empty() {
        let soonest = validity.iter().map(|c| c.not_after).min()?;
        Wanted::new(
            cond::CERTIFICATES_VALID,
            true,
            "NotExpiring",
            format!("every certificate is valid until at least {soonest}"),
        )
    } else {
        Wanted::new(
            cond::CERTIFICATES_VALID,
            false,
            "ExpiringSoon",
            expiring.join("; "),
        )
    })
}

fn cluster_conditions(
    ctx: &Context<'_>,
    decision: &Decision,
    ready: i32,
    reached: bool,
) -> [Wanted; 3] {
    let desired = ctx.desired;
    let healthy = ctx.observed.etcd.is_healthy();
    let running = ctx.running().count();
    let wait_reason = match &decision.step {
        Step::Wait { reason, .. } => Some(*reason),
        _ => None,
    };

    // Members joining (or being replaced) are progress, not degradation; the count to reach
    // is the target, or the running members while scaling in.
    let expected = (desired.max(0) as usize).max(running);
    let unhealthy: Vec<&MemberView<'_>> = ctx
        .running()
        .filter(|m| {
            !m.is_ready() && matches!(m.phase, MemberPhase::Ready | MemberPhase::Recreating)
        })
        .collect();
    let available = if desired == 0 && running == 0 {
        let message = if ctx.members.is_empty() {
            "the cluster is scaled to zero (spec.replicas=0); no data has been written".to_string()
        } else {
            "the cluster is scaled to zero (spec.replicas=0); members' data is kept on their PVCs"
                .to_string()
        };
        Wanted::new(cond::AVAILABLE, false, "Paused", message)
    } else if !ctx.formed && !healthy {
        Wanted::new(
            cond::AVAILABLE,
            false,
            "Bootstrapping",
            "the cluster has not formed yet",
        )
    } else if healthy && ready as usize >= expected && running > 0 {
        let note = if running.is_multiple_of(2) {
            " (an even member count tolerates no more failures than one member fewer)"
        } else {
            ""
        };
        Wanted::new(
            cond::AVAILABLE,
            true,
            "QuorumHealthy",
            format!("All members are ready{note}"),
        )
    } else if healthy {
        Wanted::new(
            cond::AVAILABLE,
            true,
            "QuorumAvailable",
            format!("{ready}/{expected} members ready"),
        )
    } else if let Some((ready_pods, voters)) = super::reach::operator_cut_off(ctx) {
        // The clients may well be served: the operator cannot tell.
        Wanted::unknown(
            cond::AVAILABLE,
            "EtcdUnreachable",
            super::reach::cut_off_message(ctx, ready_pods, voters),
        )
    } else if ctx
        .observed
        .etcd
        .endpoints
        .iter()
        .all(|o| o.status.is_err())
    {
        let detail = ctx
            .observed
            .etcd
            .health
            .as_ref()
            .err()
            .map(|e| e.detail.clone())
            .unwrap_or_default();
        Wanted::new(
            cond::AVAILABLE,
            false,
            "ClusterUnreachable",
            format!("no member answers: {detail}"),
        )
    } else {
        let (healthy_voters, voters, quorum) = ctx.quorum_numbers();
        Wanted::new(
            cond::AVAILABLE,
            false,
            "QuorumLost",
            format!("{healthy_voters}/{voters} voters healthy, quorum needs {quorum}"),
        )
    };

    let alarms = ctx.alarms();
    let degraded = if let Some(alarm) = alarms.iter().find(|a| a.kind == AlarmKind::Corrupt) {
        Wanted::new(
            cond::DEGRADED,
            true,
            "CorruptAlarm",
            format!(
                "{alarm}: the member's data diverged; the operator replaces it with a new member that joins empty (see the EtcdMember's status) and then disarms the alarm"
            ),
        )
    } else if let Some(alarm) = alarms.iter().find(|a| a.kind == AlarmKind::NoSpace) {
        Wanted::new(
            cond::DEGRADED,
            true,
            "NoSpaceAlarm",
            format!(
                "{alarm}: etcd refuses writes; the operator compacts the keyspace, defragments the members (followers first, the leader last) and disarms the alarm once every member is below 90 % of its quota (see the Progressing condition; if the live data itself is too big, raise spec.options.quotaBackendBytes)"
            ),
        )
    } else if available.unknown {
        Wanted::unknown(cond::DEGRADED, &available.reason, available.message.clone())
    } else if !available.status && available.reason == "QuorumLost" {
        Wanted::new(
            cond::DEGRADED,
            true,
            "QuorumLost",
            available.message.clone(),
        )
    } else if !unhealthy.is_empty() {
        degraded_members(ctx, &unhealthy, ready, expected)
    } else {
        let reason = if available.reason == "Paused" {
            "Paused"
        } else {
            "QuorumHealthy"
        };
        Wanted::new(cond::DEGRADED, false, reason, "")
    };

    let progressing = match (&decision.step, wait_reason) {
        (_, Some(WaitReason::Paused)) => Wanted::new(
            cond::PROGRESSING,
            false,
            "Paused",
            "spec.paused is true: the operator takes no action",
        ),
        (Step::Idle, _) if reached => Wanted::new(
            cond::PROGRESSING,
            false,
            "Reconciled",
            "actual state matches status.observed",
        ),
        (Step::Wait { reason, message }, _) if reason.needs_attention() => {
            Wanted::new(cond::PROGRESSING, false, reason.as_str(), message.clone())
        }
        (step, _)
            if deadline_passed(ctx)
                && !reached
                && !super::rules::rollout::outdated_members(ctx).is_empty() =>
        {
            Wanted::new(
                cond::PROGRESSING,
                false,
                "ProgressDeadlineExceeded",
                format!(
                    "the rollout did not finish within spec.progressDeadlineSeconds; still to roll: {} (spec changes are adopted now): {}",
                    super::rules::rollout::outdated_members(ctx)
                        .iter()
                        .map(|m| m.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                    step.message()
                ),
            )
        }
        (step, _) if deadline_passed(ctx) && !reached => Wanted::new(
            cond::PROGRESSING,
            true,
            "DeadlineExceeded",
            format!(
                "still working toward the target past its progress deadline (spec changes are adopted now): {}",
                step.message()
            ),
        ),
        (step, _) => Wanted::new(
            cond::PROGRESSING,
            true,
            progress_reason(ctx, step),
            step.message(),
        ),
    };
    [available, progressing, degraded]
}

/// Degraded when some members are not ready: which are isolated from their peers (answering
/// the operator, a majority serving without them: `MemberIsolated`), which the operator cannot
/// reach while their Pods are Ready, and which simply do not serve.
fn degraded_members(
    ctx: &Context<'_>,
    unhealthy: &[&MemberView<'_>],
    ready: i32,
    expected: usize,
) -> Wanted {
    use super::reach::{Sight, isolation_detail, sight};
    let mut isolated = Vec::new();
    let mut hidden = Vec::new();
    let mut other = Vec::new();
    for m in unhealthy {
        match sight(ctx, m) {
            s @ Sight::Isolated { .. } => {
                isolated.push(format!("{} ({})", m.name, isolation_detail(s)))
            }
            Sight::HiddenFromOperator => hidden.push(m.name),
            _ => other.push(m.name),
        }
    }
    let mut parts = vec![format!("{ready}/{expected} members ready")];
    if !isolated.is_empty() {
        parts.push(format!(
            "isolated from its peers while a majority serves: {}; not recreated or replaced for that (check the network between the members)",
            isolated.join(", ")
        ));
    }
    if !hidden.is_empty() {
        parts.push(format!(
            "not answering the operator while their Pods are Ready (the operator may be cut off from them; nothing is done about it): {}",
            hidden.join(", ")
        ));
    }
    if !other.is_empty() {
        parts.push(format!("not serving: {}", other.join(", ")));
    }
    let reason = if isolated.is_empty() {
        "MembersUnhealthy"
    } else {
        "MemberIsolated"
    };
    Wanted::new(cond::DEGRADED, true, reason, parts.join("; "))
}

fn deadline_passed(ctx: &Context<'_>) -> bool {
    ctx.cluster
        .status
        .as_ref()
        .and_then(|s| s.progress_deadline.as_ref())
        .is_some_and(|d| d.0 <= ctx.now)
}

/// What the cluster is doing, in the reference operator's terms where it has them.
fn progress_reason(ctx: &Context<'_>, step: &Step) -> &'static str {
    let running = ctx.running().count() as i32;
    match step {
        Step::Wait { reason, .. } => reason.as_str(),
        _ if !ctx.formed => "Bootstrapping",
        Step::SetDormant { dormant: true, .. } => "ScalingToZero",
        Step::SetDormant { dormant: false, .. } => "Resuming",
        Step::DeleteMember { .. } | Step::RemoveEtcdMember { .. } if running > ctx.desired => {
            "ScalingIn"
        }
        _ if running < ctx.desired => "ScalingOut",
        _ if running > ctx.desired => "ScalingIn",
        _ if !super::rules::rollout::outdated_members(ctx).is_empty() => "RollingUpdate",
        _ if ctx
            .members
            .iter()
            .any(|m| matches!(m.phase, MemberPhase::Recreating | MemberPhase::Replacing)) =>
        {
            "Repairing"
        }
        _ => "Reconciling",
    }
}
