//! Rule 7 (repair ladder, Services) and rule 8 (lost quorum).

use etcd_operator_api::MemberPhase;

use super::fixtures::*;
use crate::plan::{PodPhase, Step, StepKind, WaitReason};

fn crash_loop(fx: &mut Fx, member: &str) {
    let pod = fx.pod_mut(member);
    pod.ready = false;
    pod.restart_count = 6;
    pod.waiting_reason = Some("CrashLoopBackOff".into());
    fx.answer(member, Answer::Down);
}

#[test]
fn rule7_missing_headless_service_is_created_before_anything_else() {
    let mut fx = Fx::healthy(3);
    fx.obs.headless_service = None;
    fx.without_pod("etcd-1");
    match fx.step() {
        Step::CreateService(svc) => assert_eq!(svc.metadata.name.as_deref(), Some("etcd")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn rule7_service_drift_is_repaired() {
    let mut fx = Fx::healthy(3);
    let svc = fx.obs.client_service.as_mut().unwrap();
    svc.spec.as_mut().unwrap().selector = None;
    assert_eq!(fx.step().kind(), StepKind::UpdateService);
}

#[test]
fn rule7_terminal_pvc_pod_is_deleted_with_its_status_written_first() {
    let mut fx = Fx::healthy(3);
    fx.pod_mut("etcd-1").phase = PodPhase::Succeeded;
    fx.answer("etcd-1", Answer::Down);
    let plan = fx.plan();
    assert_eq!(
        plan.step,
        Step::DeletePod {
            member: "etcd-1".into(),
            pod: "etcd-1".into(),
            uid: "pod-etcd-1".into()
        }
    );
    let status = planned_member_status(&fx, &plan, "etcd-1");
    let ready = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "PodTerminated")
    );
    assert_eq!(status.pod_uid.as_deref(), Some("pod-etcd-1"));
    assert_eq!(
        status.phase,
        Some(MemberPhase::Ready),
        "data and identity are kept"
    );
}

#[test]
fn rule7_terminal_pods_are_recovered_without_quorum_after_a_whole_cluster_reboot() {
    let mut fx = Fx::healthy(3);
    for i in 0..3 {
        let m = name(i);
        fx.pod_mut(&m).phase = if i == 1 {
            PodPhase::Failed
        } else {
            PodPhase::Succeeded
        };
        fx.answer(&m, Answer::Down);
    }
    assert!(!fx.obs.etcd.is_healthy());
    assert_eq!(fx.step().kind(), StepKind::DeletePod);
    // Pods already gone are created again, still without quorum.
    fx.without_pod("etcd-0");
    match fx.step() {
        Step::CreatePod(pod) => {
            assert_eq!(pod.metadata.name.as_deref(), Some("etcd-0"));
            let spec = pod.spec.unwrap();
            let claim = spec.volumes.unwrap()[0]
                .persistent_volume_claim
                .clone()
                .unwrap();
            assert_eq!(claim.claim_name, "data-etcd-0", "same data");
            let start = crate::build::PodStart::from_annotations(pod.metadata.annotations.as_ref());
            assert_eq!(
                start.map(|s| s.kind("etcd-0")),
                Some(crate::build::StartKind::OwnData),
                "a member that ran restarts only on its own data"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn rule7_missing_pvc_pod_is_recreated_on_the_same_data() {
    let mut fx = Fx::healthy(3);
    fx.without_pod("etcd-2");
    fx.answer("etcd-2", Answer::Down);
    let step = fx.step();
    assert_eq!(step.kind(), StepKind::CreatePod);
    assert_eq!(step.member(), Some("etcd-2"));
}

#[test]
fn rule7_pod_already_terminating_is_left_alone() {
    let mut fx = Fx::healthy(3);
    let pod = fx.pod_mut("etcd-1");
    pod.phase = PodPhase::Succeeded;
    pod.deleting = true;
    fx.answer("etcd-1", Answer::Down);
    assert_ne!(fx.step().kind(), StepKind::DeletePod);
}

#[test]
fn rule7_lost_pvc_means_replacement_not_an_empty_restart() {
    let mut fx = Fx::healthy(3);
    fx.without_pod("etcd-1");
    fx.observed_member("etcd-1").pvc = None;
    fx.answer("etcd-1", Answer::Down);
    assert_eq!(
        fx.step(),
        Step::SetPhase {
            member: "etcd-1".into(),
            phase: MemberPhase::Replacing
        }
    );
}

#[test]
fn rule7_memory_member_whose_pod_is_lost_is_replaced_not_restarted() {
    let mut fx = Fx::healthy(3);
    fx.make_memory_backed();
    fx.without_pod("etcd-1");
    fx.answer("etcd-1", Answer::Down);
    let plan = fx.plan();
    assert_eq!(
        plan.step,
        Step::SetPhase {
            member: "etcd-1".into(),
            phase: MemberPhase::Replacing
        }
    );
    let status = planned_member_status(&fx, &plan, "etcd-1");
    assert_eq!(
        status.pod_uid.as_deref(),
        Some("pod-etcd-1"),
        "the lost Pod's UID is kept"
    );
}

#[test]
fn rule7_memory_member_with_a_replaced_or_terminal_pod_is_replaced() {
    for terminal in [false, true] {
        let mut fx = Fx::healthy(3);
        fx.make_memory_backed();
        if terminal {
            fx.pod_mut("etcd-2").phase = PodPhase::Failed;
        } else {
            fx.pod_mut("etcd-2").uid = "someone-elses".into();
        }
        fx.answer("etcd-2", Answer::Down);
        assert_eq!(
            fx.step(),
            Step::SetPhase {
                member: "etcd-2".into(),
                phase: MemberPhase::Replacing
            },
            "terminal: {terminal}"
        );
    }
}

#[test]
fn rule7_memory_replacement_removes_then_deletes_then_joins_fresh() {
    let mut fx = Fx::healthy(3);
    fx.make_memory_backed();
    fx.pod_mut("etcd-2").phase = PodPhase::Failed;
    fx.answer("etcd-2", Answer::Down);
    fx.set_phase("etcd-2", MemberPhase::Replacing, at(90_000));
    assert_eq!(
        fx.step(),
        Step::RemoveEtcdMember {
            member: Some("etcd-2".into()),
            id: id_of("etcd-2")
        }
    );
    fx.etcd_remove("etcd-2");
    assert_eq!(fx.step().kind(), StepKind::DeletePod);
    fx.without_pod("etcd-2");
    let plan = fx.plan();
    assert_eq!(
        plan.step,
        Step::SetPhase {
            member: "etcd-2".into(),
            phase: MemberPhase::Provisioning
        }
    );
    let status = planned_member_status(&fx, &plan, "etcd-2");
    assert_eq!(status.member_id, None, "the old identity is forgotten");
    assert_eq!(status.pod_uid, None);
    assert_eq!(status.recreate_count, Some(0));
}

#[test]
fn rule7_replacement_never_breaks_quorum() {
    let mut fx = Fx::healthy(3);
    fx.make_memory_backed();
    for m in ["etcd-1", "etcd-2"] {
        fx.without_pod(m);
        fx.answer(m, Answer::Down);
        fx.set_phase(m, MemberPhase::Replacing, at(90_000));
    }
    fx.answer("etcd-0", Answer::NoQuorum);
    assert_eq!(wait_reason(&fx.step()), WaitReason::QuorumAtRisk);
}

#[test]
fn rule7_crash_looping_member_is_recreated_level1_and_counted() {
    let mut fx = Fx::healthy(3);
    crash_loop(&mut fx, "etcd-1");
    let plan = fx.plan();
    assert_eq!(
        plan.step,
        Step::SetPhase {
            member: "etcd-1".into(),
            phase: MemberPhase::Recreating
        }
    );
    let status = planned_member_status(&fx, &plan, "etcd-1");
    assert_eq!(status.recreate_count, Some(1));
    assert_eq!(status.last_phase_transition_time.map(|t| t.0), Some(now()));

    // Next pass: the old Pod (started before the phase was written) is deleted.
    fx.write_statuses(&plan);
    assert_eq!(fx.step().kind(), StepKind::DeletePod);
    // Then created again on the same data.
    fx.without_pod("etcd-1");
    assert_eq!(fx.step().kind(), StepKind::CreatePod);
}

#[test]
fn rule7_repairs_back_off_with_a_growing_delay() {
    let mut fx = Fx::healthy(3);
    crash_loop(&mut fx, "etcd-1");
    fx.set_phase("etcd-1", MemberPhase::Recreating, at(100_000 - 5));
    fx.member_mut("etcd-1")
        .status
        .as_mut()
        .unwrap()
        .recreate_count = Some(2);
    fx.pod_mut("etcd-1").started_at = Some(at(100_000 - 4));
    let plan = fx.plan();
    assert_eq!(wait_reason(&plan.step), WaitReason::RepairBackoff);
    assert_eq!(
        plan.requeue_after,
        std::time::Duration::from_secs(15),
        "20s backoff after 2, 5s gone"
    );
    let status = planned_member_status(&fx, &plan, "etcd-1");
    let ready = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(ready.reason, "RepairBackoff", "the status says so");
}

#[test]
fn rule7_after_three_recreations_the_member_is_replaced() {
    let mut fx = Fx::healthy(3);
    crash_loop(&mut fx, "etcd-1");
    fx.set_phase("etcd-1", MemberPhase::Recreating, at(0));
    fx.member_mut("etcd-1")
        .status
        .as_mut()
        .unwrap()
        .recreate_count = Some(3);
    fx.pod_mut("etcd-1").started_at = Some(at(10));
    assert_eq!(
        fx.step(),
        Step::SetPhase {
            member: "etcd-1".into(),
            phase: MemberPhase::Replacing
        }
    );
}

#[test]
fn rule7_not_ready_past_grace_is_recreated_but_not_before() {
    let mut fx = Fx::healthy(3);
    fx.pod_mut("etcd-2").ready = false;
    fx.answer("etcd-2", Answer::Down);
    fx.pod_mut("etcd-2").started_at = Some(at(100_000 - 60));
    assert_ne!(
        fx.step().kind(),
        StepKind::SetPhase,
        "within the grace period"
    );
    fx.pod_mut("etcd-2").started_at = Some(at(100_000 - 600));
    assert_eq!(
        fx.step(),
        Step::SetPhase {
            member: "etcd-2".into(),
            phase: MemberPhase::Recreating
        }
    );
}

#[test]
fn rule7_no_member_repair_during_a_cluster_wide_outage() {
    let mut fx = Fx::healthy(3);
    crash_loop(&mut fx, "etcd-1");
    crash_loop(&mut fx, "etcd-2");
    fx.answer("etcd-0", Answer::NoQuorum);
    let step = fx.step();
    assert!(
        matches!(wait_reason(&step), WaitReason::QuorumLost),
        "reported, not repaired: {step:?}"
    );
}

#[test]
fn rule7_one_repair_at_a_time() {
    let mut fx = Fx::healthy(5);
    crash_loop(&mut fx, "etcd-1");
    crash_loop(&mut fx, "etcd-3");
    fx.set_phase("etcd-1", MemberPhase::Recreating, at(100_000 - 1));
    fx.member_mut("etcd-1")
        .status
        .as_mut()
        .unwrap()
        .recreate_count = Some(1);
    fx.pod_mut("etcd-1").started_at = Some(at(100_000));
    let step = fx.step();
    assert_ne!(
        step.member(),
        Some("etcd-3"),
        "etcd-3 waits for etcd-1's repair: {step:?}"
    );
}

#[test]
fn rule7_leader_pod_is_recreated_only_after_leadership_moves() {
    let mut fx = Fx::healthy(3);
    fx.set_phase("etcd-0", MemberPhase::Recreating, at(100_000 - 1));
    fx.member_mut("etcd-0")
        .status
        .as_mut()
        .unwrap()
        .recreate_count = Some(1);
    fx.pod_mut("etcd-0").ready = false;
    fx.answer("etcd-0", Answer::NoQuorum);
    fx.set_leader("etcd-0");
    // etcd-0 still leads in the others' view.
    assert_eq!(
        fx.step(),
        Step::MoveLeader {
            from: Some("etcd-0".into()),
            to: "etcd-1".into(),
            to_id: id_of("etcd-1")
        }
    );
}

#[test]
fn rule7_oom_killed_member_is_reported_not_recreated() {
    let mut fx = Fx::healthy(3);
    crash_loop(&mut fx, "etcd-1");
    fx.pod_mut("etcd-1").last_termination_reason = Some("OOMKilled".into());
    assert_eq!(wait_reason(&fx.step()), WaitReason::OutOfMemory);
}

#[test]
fn rule8_lost_quorum_is_reported_with_the_members_down() {
    let mut fx = Fx::healthy(3);
    fx.answer("etcd-1", Answer::Down);
    fx.answer("etcd-2", Answer::Down);
    fx.answer("etcd-0", Answer::NoQuorum);
    let plan = fx.plan();
    assert_eq!(wait_reason(&plan.step), WaitReason::QuorumLost);
    let message = plan.step.message();
    assert!(
        message.contains("etcd-1") && message.contains("etcd-2"),
        "{message}"
    );
    assert!(message.contains("snapshot"), "{message}");
    assert_eq!(
        cluster_condition(&fx, &plan, "Available"),
        ("False".into(), "QuorumLost".into())
    );
}

#[test]
fn rule8_members_just_started_get_a_grace_period() {
    let mut fx = Fx::healthy(3);
    for i in 0..3 {
        let m = name(i);
        fx.pod_mut(&m).started_at = Some(at(100_000 - 5));
        fx.answer(&m, Answer::NoQuorum);
    }
    assert_eq!(wait_reason(&fx.step()), WaitReason::WaitingForQuorum);
}

#[test]
fn rule8_no_member_answering_is_reported_as_unreachable() {
    let mut fx = Fx::healthy(3);
    for i in 0..3 {
        fx.answer(&name(i), Answer::Down);
        // Their Pods not Ready either: an outage (Ready Pods would mean the operator is cut
        // off, see tests/partitions.rs).
        fx.pod_mut(&name(i)).ready = false;
    }
    let plan = fx.plan();
    assert_eq!(wait_reason(&plan.step), WaitReason::EtcdUnreachable);
    assert_eq!(
        cluster_condition(&fx, &plan, "Available"),
        ("False".into(), "ClusterUnreachable".into())
    );
}

#[test]
fn rule7_member_removed_from_etcd_behind_our_back_is_replaced() {
    let mut fx = Fx::healthy(3);
    fx.etcd_remove("etcd-2");
    assert_eq!(
        fx.step(),
        Step::SetPhase {
            member: "etcd-2".into(),
            phase: MemberPhase::Replacing
        }
    );
}
