//! Regressions found by the end-to-end healing scenarios, one test per bug, plus the repair
//! settings an operator flag shortens.

use std::time::Duration;

use etcd_operator_api::MemberPhase;

use super::fixtures::*;
use crate::plan::{Step, StepKind, WaitReason, plan_next_step};

fn crash_loop(fx: &mut Fx, member: &str) {
    let pod = fx.pod_mut(member);
    pod.ready = false;
    pod.restart_count = 6;
    pod.waiting_reason = Some("CrashLoopBackOff".into());
    fx.answer(member, Answer::Down);
}

/// Plans at `t`, applies the status writes, and returns the step.
fn pass(fx: &mut Fx, t: i64) -> Step {
    let plan = plan_next_step(&fx.obs, at(t));
    fx.write_statuses(&plan);
    plan.step
}

/// Found by the corrupted-data scenario: the second and third recreations only counted up.
/// The phase was already Recreating, so its transition time stayed at the first recreation,
/// the new Pod looked younger than the repair and was never deleted, and the member reached
/// "3 recreations" with one real recreation behind it.
#[test]
fn every_level1_recreation_deletes_the_pod_again() {
    let mut fx = Fx::healthy(3);
    crash_loop(&mut fx, "etcd-1");
    let mut t = 100_000;
    for attempt in 1..=3 {
        let step = pass(&mut fx, t);
        assert_eq!(
            step,
            Step::SetPhase {
                member: "etcd-1".into(),
                phase: MemberPhase::Recreating
            },
            "attempt {attempt} starts"
        );
        let status = fx.member_mut("etcd-1").status.clone().unwrap();
        assert_eq!(status.recreate_count, Some(attempt));
        assert_eq!(
            status.last_phase_transition_time.map(|time| time.0),
            Some(at(t)),
            "attempt {attempt} restarts the repair clock"
        );
        t += 1;
        assert_eq!(
            pass(&mut fx, t).kind(),
            StepKind::DeletePod,
            "attempt {attempt}"
        );
        fx.without_pod("etcd-1");
        t += 1;
        match pass(&mut fx, t) {
            Step::CreatePod(pod) => assert_eq!(pod.metadata.name.as_deref(), Some("etcd-1")),
            other => panic!("attempt {attempt}: {other:?}"),
        }
        // The new Pod crash-loops too, once the backoff of this attempt has passed.
        t += 1;
        let mut pod = running_pod("etcd-1");
        pod.uid = format!("pod-etcd-1-{attempt}");
        pod.started_at = Some(at(t));
        fx.with_pod("etcd-1", pod);
        crash_loop(&mut fx, "etcd-1");
        t += 400;
    }
    assert_eq!(
        pass(&mut fx, t),
        Step::SetPhase {
            member: "etcd-1".into(),
            phase: MemberPhase::Replacing
        },
        "after three real recreations, level 2"
    );
}

/// Found by the hang-and-continue scenario: the grace period was counted from the Pod's start,
/// so a member running for longer than the grace period was recreated the moment it turned not
/// ready. It counts from when the Pod's Ready condition turned False.
#[test]
fn not_ready_grace_counts_from_when_the_pod_turned_not_ready() {
    let mut fx = Fx::healthy(3);
    let pod = fx.pod_mut("etcd-2");
    pod.ready = false;
    pod.started_at = Some(at(0));
    pod.ready_changed_at = Some(at(100_000 - 30));
    fx.answer("etcd-2", Answer::Down);
    assert_ne!(
        fx.step().kind(),
        StepKind::SetPhase,
        "not ready for 30 s of the 180 s grace"
    );
    fx.pod_mut("etcd-2").ready_changed_at = Some(at(100_000 - 200));
    assert_eq!(
        fx.step(),
        Step::SetPhase {
            member: "etcd-2".into(),
            phase: MemberPhase::Recreating
        }
    );
}

/// The repair settings come from the operator's flags (tests shorten them).
#[test]
fn repair_grace_and_backoff_follow_the_settings() {
    let mut fx = Fx::healthy(3);
    fx.obs.settings.repair.not_ready_grace = Duration::from_secs(20);
    fx.obs.settings.repair.backoff_base = Duration::from_secs(2);
    let pod = fx.pod_mut("etcd-2");
    pod.ready = false;
    pod.ready_changed_at = Some(at(100_000 - 30));
    fx.answer("etcd-2", Answer::Down);
    assert_eq!(fx.step().kind(), StepKind::SetPhase, "past a 20 s grace");

    let mut fx = Fx::healthy(3);
    fx.obs.settings.repair.backoff_base = Duration::from_secs(2);
    crash_loop(&mut fx, "etcd-1");
    fx.set_phase("etcd-1", MemberPhase::Recreating, at(100_000 - 3));
    fx.member_mut("etcd-1")
        .status
        .as_mut()
        .unwrap()
        .recreate_count = Some(2);
    fx.pod_mut("etcd-1").started_at = Some(at(100_000 - 2));
    let plan = fx.plan();
    match &plan.step {
        Step::Wait { reason, .. } => assert_eq!(*reason, WaitReason::RepairBackoff),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        plan.requeue_after,
        Duration::from_secs(1),
        "4 s after two recreations with a 2 s base, 3 s gone"
    );
}

/// Moving leadership first is best effort: a repair that has waited for it longer than the
/// timeout goes ahead, and etcd elects a leader itself.
#[test]
fn leadership_move_gives_up_after_its_timeout() {
    let mut fx = Fx::healthy(3);
    fx.member_mut("etcd-0")
        .status
        .as_mut()
        .unwrap()
        .recreate_count = Some(1);
    fx.pod_mut("etcd-0").ready = false;
    fx.answer("etcd-0", Answer::NoQuorum);
    fx.set_leader("etcd-0");
    fx.set_phase("etcd-0", MemberPhase::Recreating, at(100_000 - 5));
    assert_eq!(fx.step().kind(), StepKind::MoveLeader, "within the timeout");
    fx.set_phase("etcd-0", MemberPhase::Recreating, at(100_000 - 60));
    assert_eq!(fx.step().kind(), StepKind::DeletePod, "past the timeout");
}

/// Found by the recovery benchmark: a memory-backed member's replacement waited up to 500 ms
/// between its learner catching up and its promotion. A learner whose Pod just started is
/// polled every 100 ms; one still catching up after 10 s (a large database) every 500 ms.
#[test]
fn a_learner_just_started_is_polled_fast() {
    let mut fx = Fx::healthy(3);
    fx.set_phase("etcd-2", MemberPhase::Provisioning, at(100_000 - 2));
    fx.etcd_add("etcd-2", true, true);
    fx.answer("etcd-2", Answer::Learner);
    fx.applied_index("etcd-2", 10);
    fx.pod_mut("etcd-2").voter_label = false;
    fx.pod_mut("etcd-2").started_at = Some(at(100_000 - 1));
    let plan = fx.plan();
    match &plan.step {
        Step::Wait { reason, .. } => assert_eq!(*reason, WaitReason::WaitingForLearner),
        other => panic!("{other:?}"),
    }
    assert_eq!(plan.requeue_after, crate::plan::LEARNER_POLL);
    fx.pod_mut("etcd-2").started_at = Some(at(100_000 - 60));
    assert_eq!(fx.plan().requeue_after, crate::plan::FAST_POLL);
}
