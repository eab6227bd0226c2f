//! Rule 9: advancing members through Pending → Provisioning → Ready, learners first.

use etcd_operator_api::MemberPhase;

use super::fixtures::*;
use crate::plan::{Step, StepKind, WaitReason, caught_up};

/// A healthy 2-member cluster with `etcd-2` joining in `phase`.
fn joining(phase: MemberPhase) -> Fx {
    let mut fx = Fx::healthy(2);
    fx.obs.cluster.spec.replicas = Some(3);
    fx.status_mut().observed.as_mut().unwrap().replicas = 3;
    fx.add_member("etcd-2", phase);
    fx
}

fn command(step: &Step) -> Vec<String> {
    match step {
        Step::CreatePod(pod) => crate::build::tests_support::effective_command(pod),
        other => panic!("expected CreatePod, got {other:?}"),
    }
}

#[test]
fn rule9_pending_member_is_written_provisioning_before_anything_else() {
    let fx = joining(MemberPhase::Pending);
    let plan = fx.plan();
    assert_eq!(
        plan.step,
        Step::SetPhase {
            member: "etcd-2".into(),
            phase: MemberPhase::Provisioning
        }
    );
    assert_eq!(
        planned_member_status(&fx, &plan, "etcd-2").phase,
        Some(MemberPhase::Provisioning)
    );
}

#[test]
fn rule9_pvc_is_created_before_member_add() {
    let mut fx = joining(MemberPhase::Provisioning);
    fx.observed_member("etcd-2").pvc = None;
    match fx.step() {
        Step::CreatePvc(pvc) => assert_eq!(pvc.metadata.name.as_deref(), Some("data-etcd-2")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn rule9_member_is_added_as_a_learner_by_its_peer_url() {
    let fx = joining(MemberPhase::Provisioning);
    assert_eq!(
        fx.step(),
        Step::AddLearner {
            member: "etcd-2".into(),
            peer_url: peer("etcd-2")
        }
    );
}

#[test]
fn rule9_member_add_waits_while_another_change_is_in_flight() {
    let mut fx = joining(MemberPhase::Provisioning);
    // A learner nobody promoted yet (a stray here) holds the next MemberAdd back.
    fx.obs
        .etcd
        .members
        .as_mut()
        .unwrap()
        .push(crate::etcd::MemberInfo {
            id: 0x777,
            name: String::new(),
            peer_urls: vec!["http://x.etcd.prod.svc:2380".into()],
            client_urls: vec![],
            is_learner: true,
        });
    assert_eq!(wait_reason(&fx.step()), WaitReason::WaitingForMember);
}

#[test]
fn rule9_member_add_waits_for_a_healthy_cluster() {
    let mut fx = joining(MemberPhase::Provisioning);
    fx.answer("etcd-1", Answer::Down);
    fx.answer("etcd-0", Answer::NoQuorum);
    assert_ne!(fx.step().kind(), StepKind::AddLearner);
}

#[test]
fn rule9_unrecorded_member_add_is_adopted_not_repeated() {
    let mut fx = joining(MemberPhase::Provisioning);
    // MemberAdd happened; the operator died before recording the ID.
    fx.etcd_add("etcd-2", true, false);
    let plan = fx.plan();
    let cmd = command(&plan.step);
    assert!(cmd.contains(&"--initial-cluster-state=existing".to_string()));
    let expected = format!(
        "--initial-cluster=etcd-0={},etcd-1={},etcd-2={}",
        peer("etcd-0"),
        peer("etcd-1"),
        peer("etcd-2")
    );
    assert!(cmd.contains(&expected), "{cmd:?}");
    let status = planned_member_status(&fx, &plan, "etcd-2");
    assert_eq!(
        status.member_id.as_deref(),
        Some("102"),
        "the learner is adopted"
    );
    assert_eq!(status.is_voter, Some(false));
}

#[test]
fn rule9_learner_waits_until_caught_up_then_is_promoted() {
    let mut fx = joining(MemberPhase::Provisioning);
    fx.etcd_add("etcd-2", true, true);
    fx.with_pod("etcd-2", running_pod("etcd-2"));
    fx.pod_mut("etcd-2").voter_label = false;
    fx.answer("etcd-2", Answer::Learner);
    fx.applied_index("etcd-2", 100);
    let plan = fx.plan();
    assert_eq!(wait_reason(&plan.step), WaitReason::WaitingForLearner);
    assert_eq!(plan.requeue_after, crate::plan::FAST_POLL);

    fx.applied_index("etcd-2", 995);
    assert_eq!(
        fx.step(),
        Step::PromoteLearner {
            member: "etcd-2".into(),
            id: id_of("etcd-2")
        }
    );
}

#[test]
fn rule9_a_learner_silent_on_status_is_promoted_once_its_pod_is_ready() {
    // etcd 3.6: a learner whose first publish was dropped answers no client call for ~7 s,
    // while it follows the leader in sync (its Pod's /health is Ready).
    let mut fx = joining(MemberPhase::Provisioning);
    fx.etcd_add("etcd-2", true, true);
    fx.with_pod("etcd-2", running_pod("etcd-2"));
    fx.pod_mut("etcd-2").voter_label = false;
    fx.answer("etcd-2", Answer::Down);
    fx.pod_mut("etcd-2").ready = false;
    fx.pod_mut("etcd-2").started_at = Some(now()); // just started: not a repair yet
    let plan = fx.plan();
    assert_eq!(
        wait_reason(&plan.step),
        WaitReason::WaitingForLearner,
        "neither Status nor a Ready Pod: wait"
    );

    fx.pod_mut("etcd-2").ready = true;
    assert_eq!(
        fx.step(),
        Step::PromoteLearner {
            member: "etcd-2".into(),
            id: id_of("etcd-2")
        }
    );

    // When it does answer, its own applied index decides, whatever the Pod says.
    fx.answer("etcd-2", Answer::Learner);
    fx.applied_index("etcd-2", 100);
    assert_eq!(wait_reason(&fx.plan().step), WaitReason::WaitingForLearner);
}

#[test]
fn rule9_learners_are_promoted_before_other_members_advance() {
    let mut fx = joining(MemberPhase::Provisioning);
    fx.etcd_add("etcd-2", true, true);
    fx.with_pod("etcd-2", running_pod("etcd-2"));
    fx.answer("etcd-2", Answer::Learner);
    fx.add_member("etcd-3", MemberPhase::Pending);
    assert_eq!(fx.step().kind(), StepKind::PromoteLearner);
}

#[test]
fn rule9_promoted_member_is_labelled_voter_then_ready() {
    let mut fx = joining(MemberPhase::Provisioning);
    fx.etcd_add("etcd-2", false, true);
    fx.with_pod("etcd-2", running_pod("etcd-2"));
    fx.pod_mut("etcd-2").voter_label = false;
    fx.answer("etcd-2", Answer::Healthy);
    assert_eq!(
        fx.step(),
        Step::LabelPod {
            member: "etcd-2".into(),
            pod: "etcd-2".into(),
            voter: true
        }
    );
    fx.pod_mut("etcd-2").voter_label = true;
    assert_eq!(
        fx.step(),
        Step::SetPhase {
            member: "etcd-2".into(),
            phase: MemberPhase::Ready
        }
    );
}

#[test]
fn rule9_one_member_provisions_at_a_time() {
    let mut fx = joining(MemberPhase::Provisioning);
    fx.etcd_add("etcd-2", true, false);
    fx.with_pod("etcd-2", running_pod("etcd-2"));
    fx.answer("etcd-2", Answer::Learner);
    fx.applied_index("etcd-2", 1);
    fx.add_member("etcd-3", MemberPhase::Pending);
    let step = fx.step();
    assert_ne!(step.member(), Some("etcd-3"), "{step:?}");
}

#[test]
fn rule9_seed_starts_a_new_cluster_of_itself() {
    let mut fx = Fx::empty(3);
    let cluster = fx.obs.cluster.clone();
    let seed = crate::build::new_member(&cluster, "etcd-0", true).unwrap();
    fx.add_member("etcd-0", MemberPhase::Provisioning);
    let m = fx.member_mut("etcd-0");
    m.spec.bootstrap = seed.spec.bootstrap;
    m.spec.initial_cluster = seed.spec.initial_cluster.clone();
    let cmd = command(&fx.step());
    assert!(cmd.contains(&"--initial-cluster-state=new".to_string()));
    assert!(cmd.contains(&format!("--initial-cluster=etcd-0={}", peer("etcd-0"))));
}

#[test]
fn rule9_memory_member_known_as_started_is_never_restarted_empty() {
    let mut fx = joining(MemberPhase::Provisioning);
    fx.make_memory_backed();
    fx.etcd_add("etcd-2", true, true);
    assert_eq!(
        fx.step(),
        Step::SetPhase {
            member: "etcd-2".into(),
            phase: MemberPhase::Replacing
        }
    );
}

#[test]
fn rule9_pod_without_an_etcd_member_is_deleted_before_joining() {
    let mut fx = joining(MemberPhase::Provisioning);
    fx.with_pod("etcd-2", running_pod("etcd-2"));
    assert_eq!(fx.step().kind(), StepKind::DeletePod);
}

#[test]
fn rule9_foreign_pvc_is_not_used() {
    let mut fx = joining(MemberPhase::Provisioning);
    fx.observed_member("etcd-2").pvc.as_mut().unwrap().owner_uid =
        Some("uid-of-an-older-member".into());
    assert_eq!(wait_reason(&fx.step()), WaitReason::ForeignObject);
}

#[test]
fn catch_up_is_within_ten_percent_of_the_leader() {
    assert!(caught_up(900, 1000));
    assert!(!caught_up(899, 1000));
    assert!(caught_up(0, 0));
    assert!(caught_up(u64::MAX, u64::MAX));
}
