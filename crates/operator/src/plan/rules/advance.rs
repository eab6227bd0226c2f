//! Rule 9, advance non-Ready members: learners are promoted first, then each member moves
//! Pending → Provisioning → Ready one step per pass.
//!
//! A joining member: Provisioning (written first) → PVC → MemberAdd as a learner → Pod with
//! `existing` and etcd's member list → caught up → MemberPromote → voter label → Ready. Every
//! step is chosen from what is observed, never from memory of the last pass, so a crash
//! between any two resumes correctly: a PVC or Pod that exists is not created again; a learner
//! added but never recorded is found by its peer URL and adopted (its ID is written into the
//! status), never added twice; a promotion that happened is seen in etcd's member list.

use etcd_operator_api::MemberPhase;

use super::helpers::{create_pod, create_pvc, delete_pod, foreign_objects};
use crate::plan::context::{Context, Health, MemberView};
use crate::plan::decision::{Decision, MemberEdit};
use crate::plan::step::{Step, WaitReason};
use crate::plan::timing;

/// A learner is caught up when its applied index is within 10% of the leader's (etcd refuses
/// the promotion otherwise; this avoids asking too early).
pub fn caught_up(learner_applied: u64, leader_applied: u64) -> bool {
    u128::from(learner_applied) * 10 >= u128::from(leader_applied) * 9
}

/// Rule 9.
pub fn advance_members(ctx: &Context<'_>) -> Option<Decision> {
    promote_learner(ctx).or_else(|| {
        ctx.members
            .iter()
            .filter(|m| m.is_running() && !(m.phase == MemberPhase::Ready))
            .find_map(|m| advance(ctx, m))
    })
}

/// Learners first: promote a started learner once it has caught up (by its own Status), or once
/// its Pod is Ready while it does not answer Status yet (etcd checks that it is in sync).
fn promote_learner(ctx: &Context<'_>) -> Option<Decision> {
    let leader_applied = ctx.observed.etcd.leader_applied_index()?;
    ctx.members
        .iter()
        .filter(|m| m.is_running() && m.is_learner())
        // A voter must never restart from an empty data directory under its ID.
        .filter(|m| super::start::restarts_on_own_data_only(m))
        .find_map(|m| {
            let id = m.id?;
            let ready = match ctx.observed.etcd.status_of(id) {
                Some(status) => caught_up(status.raft_applied_index, leader_applied),
                // A learner may follow the leader in sync long before it answers Status: etcd
                // serves a new member's clients only once it has published itself through
                // raft, and on 3.6 a member joining by snapshot sometimes loses that first
                // publish (the snapshot restarts its peer streams) and retries only after
                // etcd's request timeout, about 7 s (docs/testing.md item 15). Its Pod's
                // readiness (etcd's /health) shows it runs and follows a leader; etcd's own
                // check refuses a learner that is behind (`LearnerNotInSync`, retried
                // promptly), as the floor's `member promote` loop relies on.
                None => m.pod_ready(),
            };
            ready.then(|| {
                Decision::act(Step::PromoteLearner {
                    member: m.name.to_string(),
                    id,
                })
            })
        })
}

fn advance(ctx: &Context<'_>, m: &MemberView<'_>) -> Option<Decision> {
    if let Some(foreign) = foreign_objects(m) {
        return Some(foreign);
    }
    match m.phase {
        MemberPhase::Pending => start_provisioning(ctx, m),
        MemberPhase::Provisioning => provision(ctx, m),
        MemberPhase::Recreating => finish_when_ready(m),
        // Replacing and Terminating are driven by rules 7 and 4; Ready needs nothing here.
        _ => None,
    }
}

/// Pending → Provisioning, one member at a time (two joins never overlap).
fn start_provisioning(ctx: &Context<'_>, m: &MemberView<'_>) -> Option<Decision> {
    let other_joining = ctx.members.iter().any(|o| {
        o.name != m.name && matches!(o.phase, MemberPhase::Provisioning | MemberPhase::Replacing)
    });
    if other_joining {
        return None;
    }
    Some(Decision::set_phase(m.name, MemberPhase::Provisioning))
}

fn provision(ctx: &Context<'_>, m: &MemberView<'_>) -> Option<Decision> {
    if !m.memory {
        match m.observed.pvc.as_ref() {
            None => return create_pvc(m),
            Some(pvc) if pvc.deleting => {
                return Some(Decision::wait(
                    WaitReason::WaitingForMember,
                    format!("{}: an old PVC is still being deleted", m.name),
                    timing::MEMBER_POLL,
                ));
            }
            Some(_) => {}
        }
    }
    if m.is_bootstrap_seed() && !ctx.formed {
        return bootstrap_seed(ctx, m);
    }
    match m.etcd {
        None => join(ctx, m),
        Some(etcd) => {
            let Some(pod) = m.observed.pod.as_ref() else {
                if m.memory && etcd.has_started() {
                    // Its data died with a Pod nobody recorded: replace, never restart empty.
                    return Some(Decision::set_phase(m.name, MemberPhase::Replacing).with(
                        MemberEdit::new(m.name).phase(MemberPhase::Replacing).not_ready(
                            "DataLost",
                            "etcd knows the member as started, but its in-memory data is gone",
                        ),
                    ));
                }
                return Some(create_pod(ctx, m));
            };
            if etcd.is_learner {
                return Some(Decision::wait(
                    WaitReason::WaitingForLearner,
                    format!(
                        "learner {} is catching up with the leader (Pod {:?})",
                        m.name, pod.phase
                    ),
                    timing::starting_poll(pod.started_at, ctx.now),
                ));
            }
            finish_when_ready(m)
        }
    }
}

/// The seed forms the cluster alone: its Pod starts `new`; once etcd answers as a healthy
/// voter the cluster ID is latched (by the status) and the seed is Ready.
fn bootstrap_seed(ctx: &Context<'_>, m: &MemberView<'_>) -> Option<Decision> {
    let Some(pod) = m.observed.pod.as_ref() else {
        return Some(create_pod(ctx, m));
    };
    if m.is_voter() && m.health == Health::Healthy {
        return finish_when_ready(m);
    }
    // A new etcd forms a one-member cluster within a second of its start: look as often as
    // at a learner, so the cluster's first second is not a poll's half-second.
    Some(Decision::wait(
        WaitReason::WaitingForMember,
        format!("waiting for the seed {} to form the cluster", m.name),
        timing::starting_poll(pod.started_at, ctx.now),
    ))
}

/// MemberAdd as a learner: only with etcd healthy and no other membership change in flight.
fn join(ctx: &Context<'_>, m: &MemberView<'_>) -> Option<Decision> {
    if ctx.observed.etcd.members.is_err() || !ctx.observed.etcd.is_healthy() {
        return Some(Decision::wait(
            WaitReason::WaitingForQuorum,
            format!("{} waits for a healthy cluster to join", m.name),
            timing::MEMBER_POLL,
        ));
    }
    if let Some(pod) = m.observed.pod.as_ref() {
        // A Pod without an etcd member: left from before the member was removed (it cannot
        // rejoin under a removed ID). It goes first; the member is not a voter.
        if pod.deleting {
            return Some(Decision::wait(
                WaitReason::WaitingForMember,
                format!("{}: waiting for its old Pod to go", m.name),
                timing::MEMBER_POLL,
            ));
        }
        return Some(Decision::act(delete_pod(m, pod)));
    }
    if let Some(why) = ctx.membership_change_in_flight() {
        return Some(Decision::wait(
            WaitReason::WaitingForMember,
            format!(
                "{} joins once the previous membership change completes: {why}",
                m.name
            ),
            timing::FAST_POLL,
        ));
    }
    Some(Decision::act(Step::AddLearner {
        member: m.name.to_string(),
        peer_url: m.peer_url.clone(),
    }))
}

/// A healthy voter becomes Ready: its Pod gets the voter label first (the PDB selects on it).
fn finish_when_ready(m: &MemberView<'_>) -> Option<Decision> {
    let pod = m.observed.pod.as_ref()?;
    if !(m.is_voter() && m.health == Health::Healthy) {
        return Some(Decision::wait(
            WaitReason::WaitingForMember,
            format!("waiting for {} to become a healthy voter", m.name),
            timing::FAST_POLL,
        ));
    }
    if !pod.voter_label && !pod.deleting {
        return Some(Decision::act(Step::LabelPod {
            member: m.name.to_string(),
            pod: pod.name.clone(),
            voter: true,
        }));
    }
    Some(Decision::set_phase(m.name, MemberPhase::Ready))
}
