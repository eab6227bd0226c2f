//! Rules 3 and 8 of seed 000: continue a lost-quorum recovery, and start one.
//!
//! Classify first ([`classify`], pure): each voter is `Serving` (a linearizable read), `Answering`
//! (etcd answers Status, so its data exists, but there is no quorum), `DataLost` (positive
//! evidence: etcd refused to start on an empty data directory under `OwnData`, the PVC is gone,
//! the member was already sent to `Replacing` for lost data, or a memory-backed Pod is gone) or
//! `Unreachable` (no answer and no evidence of loss: a Pod restarting on its data, a partition,
//! the operator cut off from etcd). Quorum is lost *for good* only when the voters whose data
//! may still exist (`Serving` + `Answering` + `Unreachable`) are fewer than a quorum: nothing
//! that comes back could form a majority again. Anything else is waited for and reported.
//!
//! A recovery starts (rule 8) when a person asks for it with the annotation
//! [`RECOVER_QUORUM_ANNOTATION`] (a member's name, or `auto`) while no majority serves, or, with
//! `spec.quorumRecovery.mode: Automatic`, when quorum has been lost for good for longer than
//! `spec.quorumRecovery.after`. The survivor is the answering voter with the highest raft index
//! (or the one named). `status.quorumRecovery` is written in the same pass as, and before, the
//! first destructive step, and every later step is derived from it and from what is observed
//! (rule 3), so an operator that dies at any point resumes:
//!
//! 1. `ForcingNewCluster`: the survivor's Pod (the UID recorded) is deleted and created again
//!    with the annotation [`FORCE_NEW_CLUSTER_ANNOTATION`] `"true"`, which its etcd reads as
//!    `ETCD_FORCE_NEW_CLUSTER` through the downward API at each start. Before anything destructive,
//!    a majority that answers again aborts the recovery.
//! 2. Once etcd lists the survivor alone and it serves: `Rebuilding`, and the annotation goes to
//!    `"false"` first thing, so no later restart of that Pod forces a new cluster again (a forced
//!    restart after learners joined would drop them).
//! 3. Every other member goes through `Replacing` (MemberRemove if etcd still lists it, Pod, PVC,
//!    identity forgotten), one at a time; then `Completed`, and the usual learner joins (rule 9)
//!    bring the cluster back to full size. The annotation is removed.

use etcd_operator_api::MemberPhase;
use etcd_operator_api::cluster::{
    QuorumRecoveryMember, QuorumRecoveryMode, QuorumRecoveryPhase, QuorumRecoveryStatus,
    RECOVER_FROM_SNAPSHOT_PREFIX, RECOVER_QUORUM_ANNOTATION,
};
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

mod classify;

use classify::recorded;
pub use classify::{Classification, Verdict, VoterState, classify, requested};
pub(super) use classify::{remove_annotation, with_recovery};

use super::helpers::{create_pod, delete_pod};
use crate::build::ETCD_CONTAINER;
use crate::plan::context::{Context, Health, MemberView};
use crate::plan::decision::{Decision, MemberEdit};
use crate::plan::step::{Step, WaitReason};
use crate::plan::timing;

/// The Pod annotation the recovered survivor's etcd reads as `ETCD_FORCE_NEW_CLUSTER` at each
/// start: `"true"` only until it has come up alone, `"false"` from then on.
pub const FORCE_NEW_CLUSTER_ANNOTATION: &str = "etcd-operator.cozystack.io/force-new-cluster";

/// Rule 3: a recovery recorded as in progress continues, one step per pass.
pub fn in_progress(ctx: &Context<'_>) -> Option<Decision> {
    let r = recorded(ctx)?;
    if !r.in_progress() {
        return None;
    }
    let Some(survivor) = ctx.members.iter().find(|m| m.name == r.survivor) else {
        let mut done = r.clone();
        done.phase = Some(QuorumRecoveryPhase::Aborted);
        done.message = Some(format!(
            "the survivor {} has no EtcdMember any more",
            r.survivor
        ));
        return Some(with_recovery(
            Decision::wait(
                WaitReason::QuorumLost,
                format!(
                    "lost-quorum recovery aborted: the survivor {} is gone",
                    r.survivor
                ),
                timing::AFTER_MUTATION,
            ),
            done,
        ));
    };
    if r.snapshot.is_some() {
        return Some(super::snapshot_recovery::in_progress(ctx, r));
    }
    match r.phase {
        Some(QuorumRecoveryPhase::ForcingNewCluster) => Some(force(ctx, r, survivor)),
        _ => Some(rebuild(ctx, r, survivor)),
    }
}

/// `ForcingNewCluster`: the old Pod goes, the new one starts with `--force-new-cluster`, and the
/// phase moves on once etcd lists the survivor alone and it serves.
fn force(ctx: &Context<'_>, r: &QuorumRecoveryStatus, s: &MemberView<'_>) -> Decision {
    let pod = s.observed.pod.as_ref();
    let old_pod = pod.filter(|p| Some(&p.uid) == r.survivor_pod_uid.as_ref());
    if let Some(p) = old_pod {
        // Nothing destructive has happened yet: a majority that serves again ends it here.
        let c = classify(ctx);
        if c.verdict == Verdict::Healthy && !p.deleting {
            let mut done = r.clone();
            done.phase = Some(QuorumRecoveryPhase::Aborted);
            done.message =
                Some("a majority of the voters serves again; nothing was changed".to_string());
            return with_recovery(
                Decision::act(remove_annotation(
                    "the lost-quorum recovery was aborted: a majority serves again",
                )),
                done,
            );
        }
        if p.deleting {
            return Decision::wait(
                WaitReason::QuorumRecovery,
                format!(
                    "lost-quorum recovery from {}: waiting for its old Pod to go",
                    s.name
                ),
                timing::MEMBER_POLL,
            );
        }
        return Decision::act(delete_pod(s, p)).with(
            MemberEdit::new(s.name)
                .phase(MemberPhase::Recreating)
                .not_ready(
                    "QuorumRecovery",
                    "its Pod is recreated with --force-new-cluster (lost-quorum recovery)",
                ),
        );
    }
    let Some(pod) = pod else {
        return force_new_cluster_pod(ctx, s);
    };
    if pod.deleting {
        return Decision::wait(
            WaitReason::QuorumRecovery,
            format!(
                "lost-quorum recovery from {}: waiting for its old Pod to go",
                s.name
            ),
            timing::MEMBER_POLL,
        );
    }
    let alone = ctx
        .observed
        .etcd
        .members
        .as_ref()
        .is_ok_and(|l| l.len() == 1 && Some(l[0].id) == s.id);
    if alone && s.health == Health::Healthy {
        let mut next = r.clone();
        next.phase = Some(QuorumRecoveryPhase::Rebuilding);
        next.forced_time = Some(Time(ctx.now));
        return with_recovery(unforce(s, pod), next);
    }
    // A forced etcd serves alone within a second of its start: looked at as often as a seed.
    Decision::wait(
        WaitReason::QuorumRecovery,
        format!(
            "lost-quorum recovery: waiting for {} to come up alone with --force-new-cluster",
            s.name
        ),
        timing::starting_poll(pod.started_at, ctx.now),
    )
}

/// The annotation to `"false"`: later restarts of the Pod resume normally.
fn unforce(s: &MemberView<'_>, pod: &crate::plan::PodFacts) -> Decision {
    Decision::act(Step::PatchPodMetadata {
        member: s.name.to_string(),
        pod: pod.name.clone(),
        labels: Default::default(),
        annotations: [(
            FORCE_NEW_CLUSTER_ANNOTATION.to_string(),
            "false".to_string(),
        )]
        .into_iter()
        .collect(),
        remove_labels: Vec::new(),
        remove_annotations: Vec::new(),
    })
}

fn forcing(pod: &crate::plan::PodFacts) -> bool {
    pod.annotations
        .get(FORCE_NEW_CLUSTER_ANNOTATION)
        .is_some_and(|v| v == "true")
}

/// The survivor's Pod, as usual plus the force-new-cluster annotation read as an environment
/// variable at each start.
fn force_new_cluster_pod(ctx: &Context<'_>, s: &MemberView<'_>) -> Decision {
    let mut d = create_pod(ctx, s);
    if let Step::CreatePod(pod) = &mut d.step {
        pod.metadata
            .annotations
            .get_or_insert_default()
            .insert(FORCE_NEW_CLUSTER_ANNOTATION.to_string(), "true".to_string());
        if let Some(spec) = pod.spec.as_mut()
            && let Some(c) = spec
                .containers
                .iter_mut()
                .find(|c| c.name == ETCD_CONTAINER)
        {
            c.env.get_or_insert_default().push(EnvVar {
                name: "ETCD_FORCE_NEW_CLUSTER".to_string(),
                value: None,
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        api_version: None,
                        field_path: format!(
                            "metadata.annotations['{FORCE_NEW_CLUSTER_ANNOTATION}']"
                        ),
                    }),
                    ..Default::default()
                }),
            });
        }
    }
    d
}

/// Whether a removed member has been reset: etcd does not list it, its identity is forgotten,
/// and it is not in the middle of its replacement.
fn reset(m: &MemberView<'_>) -> bool {
    m.etcd.is_none() && m.id.is_none() && m.phase != MemberPhase::Replacing
}

/// `Rebuilding`: unforce the survivor's Pod first; then each other member is replaced, one at a
/// time; then `Completed`.
fn rebuild(ctx: &Context<'_>, r: &QuorumRecoveryStatus, s: &MemberView<'_>) -> Decision {
    if let Some(pod) = s
        .observed
        .pod
        .as_ref()
        .filter(|p| forcing(p) && !p.deleting)
    {
        return unforce(s, pod);
    }
    let pending = ctx
        .members
        .iter()
        .filter(|m| m.name != s.name && !m.deleting)
        .filter(|m| r.removed.iter().any(|n| n == m.name))
        .find(|m| !reset(m));
    if let Some(m) = pending {
        if m.phase != MemberPhase::Replacing {
            return Decision::set_phase(m.name, MemberPhase::Replacing).with(
                MemberEdit::new(m.name)
                    .phase(MemberPhase::Replacing)
                    .not_ready(
                        "QuorumRecovery",
                        format!(
                            "removed by the lost-quorum recovery from {}; it joins again as a new member",
                            s.name
                        ),
                    ),
            );
        }
        return super::repair::continue_replacement(ctx, m);
    }
    let mut done = r.clone();
    done.phase = Some(QuorumRecoveryPhase::Completed);
    done.completion_time = Some(Time(ctx.now));
    done.message = Some(format!(
        "{} serves alone; {} join again as learners",
        s.name,
        if r.removed.is_empty() {
            "no member".to_string()
        } else {
            r.removed.join(", ")
        }
    ));
    let d = if requested(ctx).is_some() {
        Decision::act(remove_annotation(
            "the lost-quorum recovery it asked for is done",
        ))
    } else {
        Decision::wait(
            WaitReason::QuorumRecovery,
            format!(
                "lost-quorum recovery from {} done; the other members join again as learners",
                s.name
            ),
            timing::AFTER_MUTATION,
        )
    };
    with_recovery(d, done)
}

/// How long quorum has been lost: since Available last turned False.
fn lost_for(ctx: &Context<'_>) -> Option<std::time::Duration> {
    let c = crate::plan::conditions::find(
        ctx.observed
            .cluster
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref()),
        etcd_operator_api::conditions::cluster::AVAILABLE,
    )?;
    if c.status != "False" {
        return None;
    }
    let since = c.last_transition_time.0;
    let secs = ctx.now.duration_since(since).as_secs();
    Some(std::time::Duration::from_secs(secs.max(0) as u64))
}

/// Rule 8: start a recovery when asked (the annotation) or, in automatic mode, when quorum has
/// been lost for good for long enough. `None` when neither applies (rule 8's report follows).
pub fn start(ctx: &Context<'_>) -> Option<Decision> {
    if !ctx.formed || recorded(ctx).is_some_and(|r| r.in_progress()) {
        return None;
    }
    let c = classify(ctx);
    let request = requested(ctx);
    if c.verdict == Verdict::Healthy {
        return request.map(|_| {
            Decision::act(remove_annotation(
                "a lost-quorum recovery was asked for, but a majority of the voters serves: nothing to recover",
            ))
        });
    }
    let spec = ctx
        .observed
        .cluster
        .spec
        .quorum_recovery
        .clone()
        .unwrap_or_default();
    let (trigger, named) = match request {
        Some(value) => (
            format!("Manual ({RECOVER_QUORUM_ANNOTATION}={value})"),
            (!value.is_empty() && value != "auto").then_some(value),
        ),
        None => {
            if spec.mode_or_default() != QuorumRecoveryMode::Automatic
                || !matches!(c.verdict, Verdict::LostForGood | Verdict::AllLost)
            {
                return None;
            }
            let after = spec.after_or_default();
            match lost_for(ctx) {
                Some(lost) if lost >= after => {}
                // `after: 0s` starts at once, without a pass to record Available=False first.
                _ if after.is_zero() => {}
                lost => {
                    let left = after.saturating_sub(lost.unwrap_or_default());
                    return Some(Decision::wait(
                        WaitReason::QuorumLost,
                        format!(
                            "quorum lost for good ({}); automatic recovery from {} in {}s (spec.quorumRecovery.after)",
                            c.summary(),
                            if c.verdict == Verdict::AllLost {
                                "the newest verified EtcdSnapshot of the cluster"
                            } else {
                                "the survivor with the highest raft index"
                            },
                            left.as_secs()
                        ),
                        left.min(timing::BLOCKED_POLL).max(timing::FAST_POLL),
                    ));
                }
            }
            ("Automatic".to_string(), None)
        }
    };
    let refuse = |why: String| {
        Some(Decision::wait(
            WaitReason::QuorumRecoveryRefused,
            format!("lost-quorum recovery ({trigger}) cannot start: {why}"),
            timing::BLOCKED_POLL,
        ))
    };
    let named_snapshot = named.and_then(|n| n.strip_prefix(RECOVER_FROM_SNAPSHOT_PREFIX));
    if c.verdict == Verdict::AllLost {
        if let Some(name) = named.filter(|_| named_snapshot.is_none()) {
            return refuse(format!(
                "{name} cannot be the survivor: no voter's data survives ({}); restore from a snapshot with the value auto or {RECOVER_FROM_SNAPSHOT_PREFIX}<EtcdSnapshot name>",
                c.summary()
            ));
        }
        return match super::snapshot_recovery::pick(ctx, named_snapshot) {
            Ok((snapshot, source)) => {
                super::snapshot_recovery::start(ctx, &c, trigger, snapshot, source)
            }
            Err(why) => refuse(format!(
                "no voter's data survives ({}), and {why}; {}",
                c.summary(),
                super::snapshot_recovery::no_snapshot_advice(ctx)
            )),
        };
    }
    if named_snapshot.is_some() {
        return refuse(format!(
            "a voter with data survives ({}): recover from it (the value auto, or the member's name) rather than from an older snapshot",
            c.summary()
        ));
    }
    let survivor = match named {
        Some(name) => match c.voters.iter().find(|v| v.member.name == name) {
            Some(v) if matches!(v.state, VoterState::Answering { .. }) => v,
            Some(v) => {
                return refuse(format!(
                    "{name} cannot be the survivor: {}",
                    v.state.label()
                ));
            }
            None => {
                return refuse(format!(
                    "{name} is not a voter of this cluster (voters: {})",
                    c.voters
                        .iter()
                        .map(|v| v.member.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        },
        None => match c.best_survivor() {
            Some(v) => v,
            None => {
                return refuse(format!(
                    "no voter with data answers the operator ({})",
                    c.summary()
                ));
            }
        },
    };
    let s = survivor.member;
    if s.memory {
        return refuse(format!(
            "{} is memory-backed: its data would go with its Pod; take a snapshot of it (kubectl etcdop snapshot) and bootstrap a new cluster from it",
            s.name
        ));
    }
    let Some(pod) = s.observed.pod.as_ref() else {
        return refuse(format!("{} has no Pod", s.name));
    };
    let VoterState::Answering {
        raft_index,
        revision,
    } = survivor.state
    else {
        return refuse(format!("{} does not answer", s.name));
    };
    let others_max = c
        .voters
        .iter()
        .filter_map(|v| match v.state {
            VoterState::Answering { raft_index, .. } => Some(raft_index),
            _ => None,
        })
        .max()
        .unwrap_or(raft_index);
    let lost_members: Vec<&str> = c
        .voters
        .iter()
        .filter(|v| !matches!(v.state, VoterState::Answering { .. }) && v.member.name != s.name)
        .map(|v| v.member.name)
        .collect();
    let mut may_have_lost = format!(
        "{} had raft index {raft_index} (revision {revision}); entries committed after it by a majority without it are lost",
        s.name
    );
    if others_max > raft_index {
        may_have_lost.push_str(&format!(
            "; another answering voter had raft index {others_max}: {} entries it has are dropped",
            others_max - raft_index
        ));
    }
    if !lost_members.is_empty() {
        may_have_lost.push_str(&format!(
            "; the raft index of {} is unknown (no answer), so anything only they had is lost",
            lost_members.join(", ")
        ));
    }
    let members = c
        .voters
        .iter()
        .map(|v| QuorumRecoveryMember {
            name: v.member.name.to_string(),
            raft_index: match v.state {
                VoterState::Answering { raft_index, .. } => Some(raft_index as i64),
                _ => None,
            },
            state: v.state.label(),
        })
        .collect();
    let removed = ctx
        .members
        .iter()
        .filter(|m| m.name != s.name && !m.deleting)
        .map(|m| m.name.to_string())
        .collect();
    let record = QuorumRecoveryStatus {
        phase: Some(QuorumRecoveryPhase::ForcingNewCluster),
        trigger,
        survivor: s.name.to_string(),
        survivor_raft_index: Some(raft_index as i64),
        survivor_revision: Some(revision),
        survivor_pod_uid: Some(pod.uid.clone()),
        members,
        removed,
        may_have_lost: Some(may_have_lost),
        start_time: Some(Time(ctx.now)),
        forced_time: None,
        completion_time: None,
        message: Some(c.summary()),
        snapshot: None,
    };
    // The record is written before the first destructive step, in the same pass: `act` writes
    // the cluster status first and performs the step only if that write succeeded.
    let first = if pod.deleting {
        Decision::wait(
            WaitReason::QuorumRecovery,
            format!("lost-quorum recovery from {}: recorded", s.name),
            timing::AFTER_MUTATION,
        )
    } else {
        Decision::act(delete_pod(s, pod)).with(
            MemberEdit::new(s.name)
                .phase(MemberPhase::Recreating)
                .not_ready(
                    "QuorumRecovery",
                    "its Pod is recreated with --force-new-cluster (lost-quorum recovery)",
                ),
        )
    };
    Some(with_recovery(first, record))
}
