//! The start instruction of member Pods (issue: a seed whose data is lost must never form a
//! new cluster; no member may restart from an empty data directory under its old ID).

use etcd_operator_api::MemberPhase;

use super::fixtures::*;
use crate::build::{DISCOVERY_FAILED, InitialClusterState, PodStart, StartKind};
use crate::plan::{Step, StepKind};

fn bootstrap_start(member: &str) -> PodStart {
    PodStart {
        initial_cluster: format!("{member}={}", peer(member)),
        state: InitialClusterState::New,
    }
}

fn join_start(members: &[&str]) -> PodStart {
    PodStart {
        initial_cluster: members
            .iter()
            .map(|m| format!("{m}={}", peer(m)))
            .collect::<Vec<_>>()
            .join(","),
        state: InitialClusterState::Existing,
    }
}

fn pod_start_of(step: &Step) -> PodStart {
    match step {
        Step::CreatePod(pod) => PodStart::from_annotations(pod.metadata.annotations.as_ref())
            .expect("the Pod carries its start instruction"),
        other => panic!("expected CreatePod, got {other:?}"),
    }
}

#[test]
fn start_kinds_are_read_from_the_instruction() {
    assert_eq!(
        bootstrap_start("etcd-0").kind("etcd-0"),
        StartKind::Bootstrap
    );
    assert_eq!(
        join_start(&["etcd-0", "etcd-1"]).kind("etcd-1"),
        StartKind::Join
    );
    assert_eq!(
        PodStart::own_data("etcd-1", &peer("etcd-1")).kind("etcd-1"),
        StartKind::OwnData
    );
    // The member's own name in the list, with two peer URLs, is still only itself.
    let two_urls = PodStart {
        initial_cluster: format!("etcd-1={},etcd-1=http://10.0.0.1:2380", peer("etcd-1")),
        state: InitialClusterState::Existing,
    };
    assert_eq!(two_urls.kind("etcd-1"), StartKind::OwnData);
    let round_trip = PodStart::from_annotations(Some(&join_start(&["a", "b"]).annotations()));
    assert_eq!(round_trip, Some(join_start(&["a", "b"])));
    assert_eq!(PodStart::from_annotations(None), None);
}

/// The seed formed the cluster with `new`: the first thing the operator does once etcd lists
/// it as started is to make its Pod restart only on its own data, before the seed is even
/// marked Ready and before any other member joins.
#[test]
fn the_seed_restarts_only_on_its_own_data_once_etcd_lists_it() {
    let mut fx = Fx::healthy(1);
    fx.obs.cluster.spec.replicas = Some(3);
    fx.status_mut().observed.as_mut().unwrap().replicas = 3;
    fx.set_phase("etcd-0", MemberPhase::Provisioning, at(0));
    fx.pod_mut("etcd-0").start = Some(bootstrap_start("etcd-0"));
    match fx.step() {
        Step::SetPodStart { member, pod, start } => {
            assert_eq!((member.as_str(), pod.as_str()), ("etcd-0", "etcd-0"));
            assert_eq!(start, PodStart::own_data("etcd-0", &peer("etcd-0")));
        }
        other => panic!("expected SetPodStart first, got {other:?}"),
    }
    // Done: the rule is quiet, and the others proceed.
    fx.pod_mut("etcd-0").start = Some(PodStart::own_data("etcd-0", &peer("etcd-0")));
    assert_ne!(fx.step().kind(), StepKind::SetPodStart);
}

/// Before etcd has listed the seed (it has not started yet), its instruction stays: it must
/// be able to form the cluster.
#[test]
fn a_seed_not_yet_listed_keeps_its_bootstrap() {
    let mut fx = Fx::empty(3);
    let cluster = fx.obs.cluster.clone();
    let seed = crate::build::new_member(&cluster, "etcd-0", true).unwrap();
    fx.status_mut().cluster_id = None;
    fx.add_member("etcd-0", MemberPhase::Provisioning);
    let m = fx.member_mut("etcd-0");
    m.spec.bootstrap = seed.spec.bootstrap;
    m.spec.initial_cluster = seed.spec.initial_cluster.clone();
    fx.observed_member("etcd-0").pvc = Some(bound_pvc("etcd-0"));
    let start = pod_start_of(&fx.step());
    assert_eq!(start.kind("etcd-0"), StartKind::Bootstrap);
    let mut pod = running_pod("etcd-0");
    pod.start = Some(start);
    pod.ready = false;
    fx.with_pod("etcd-0", pod);
    assert_ne!(fx.step().kind(), StepKind::SetPodStart);
}

/// A learner joins with etcd's member list while it has never started; once it has, its Pod
/// restarts only on its own data, and only then is it promoted to a voter.
#[test]
fn a_learner_joins_with_the_list_and_votes_only_after_its_instruction_is_own_data() {
    let mut fx = Fx::healthy(2);
    fx.obs.cluster.spec.replicas = Some(3);
    fx.status_mut().observed.as_mut().unwrap().replicas = 3;
    fx.add_member("etcd-2", MemberPhase::Provisioning);
    fx.observed_member("etcd-2").pvc = Some(bound_pvc("etcd-2"));
    fx.etcd_add("etcd-2", true, false);
    let start = pod_start_of(&fx.step());
    assert_eq!(start, join_start(&["etcd-0", "etcd-1", "etcd-2"]));

    let mut pod = running_pod("etcd-2");
    pod.start = Some(start);
    pod.voter_label = false;
    fx.with_pod("etcd-2", pod);
    // Not started yet: nothing to change, the learner is waited for.
    assert_ne!(fx.step().kind(), StepKind::SetPodStart);

    // Started and caught up: the instruction comes first, the promotion after.
    fx.etcd_add("etcd-2", true, true);
    fx.answer("etcd-2", Answer::Learner);
    fx.applied_index("etcd-2", 1_000_000);
    assert_eq!(fx.step().kind(), StepKind::SetPodStart);
    fx.pod_mut("etcd-2").start = Some(PodStart::own_data("etcd-2", &peer("etcd-2")));
    assert_eq!(fx.step().kind(), StepKind::PromoteLearner);
}

/// Without positive evidence (etcd does not answer), nothing moves; and a Pod created while
/// etcd cannot be asked gets the instruction that is safe either way.
#[test]
fn with_etcd_silent_instructions_stay_and_new_pods_resume_on_their_data_only() {
    let mut fx = Fx::healthy(3);
    fx.pod_mut("etcd-1").start = Some(join_start(&["etcd-0", "etcd-1"]));
    fx.obs.etcd = crate::etcd::EtcdView::not_observed("no answer");
    fx.refresh();
    assert_ne!(fx.step().kind(), StepKind::SetPodStart);

    let mut fx = Fx::healthy(3);
    fx.without_pod("etcd-2");
    fx.obs.etcd = crate::etcd::EtcdView::not_observed("no answer");
    fx.refresh();
    let step = fx.step();
    assert_eq!(step.kind(), StepKind::CreatePod, "{step:?}");
    assert_eq!(pod_start_of(&step).kind("etcd-2"), StartKind::OwnData);
}

/// Pods of an older operator (flags in the command line, no annotations) are left as they
/// are: no instruction to change, and their learners are still promoted.
#[test]
fn pods_without_an_instruction_are_left_alone() {
    let mut fx = Fx::healthy(3);
    for m in ["etcd-0", "etcd-1", "etcd-2"] {
        fx.pod_mut(m).start = None;
    }
    assert_eq!(fx.step().kind(), StepKind::Idle);
}

/// etcd refused to start on an empty data directory where it may only resume: the member's
/// data is lost. It goes straight to level 2 (no recreation on the same empty volume), with
/// the reason in its status; the same words from a joiner (whose peers did not answer) mean
/// nothing of the kind.
#[test]
fn an_empty_data_directory_under_own_data_goes_straight_to_replacement() {
    let lost = |fx: &mut Fx, member: &str| {
        let pod = fx.pod_mut(member);
        pod.ready = false;
        pod.restart_count = 1;
        pod.termination_message = Some(format!(
            "{{\"level\":\"fatal\",\"msg\":\"discovery failed\",\"error\":\"{DISCOVERY_FAILED}: could not retrieve cluster information from the given URLs\"}}\n"
        ));
        fx.answer(member, Answer::Down);
    };
    let mut fx = Fx::healthy(3);
    lost(&mut fx, "etcd-0");
    let plan = fx.plan();
    assert_eq!(
        plan.step,
        Step::SetPhase {
            member: "etcd-0".into(),
            phase: MemberPhase::Replacing
        }
    );
    let status = planned_member_status(&fx, &plan, "etcd-0");
    let ready = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "DataLost")
    );

    // A joiner saying the same: its peers did not answer; no conclusion about its data.
    let mut fx = Fx::healthy(3);
    lost(&mut fx, "etcd-2");
    fx.pod_mut("etcd-2").start = Some(join_start(&["etcd-0", "etcd-1", "etcd-2"]));
    assert_ne!(
        fx.step(),
        Step::SetPhase {
            member: "etcd-2".into(),
            phase: MemberPhase::Replacing
        }
    );
}
