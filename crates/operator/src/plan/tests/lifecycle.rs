//! Rules 1 to 6 and the cluster-ID safety stop.

use etcd_operator_api::MemberPhase;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::fixtures::*;
use crate::etcd::AlarmKind;
use crate::plan::{QUORUM_RECOVERY_CONDITION, Step, StepKind, WaitReason};

fn deleting(fx: &mut Fx, member: &str) {
    fx.member_mut(member).metadata.deletion_timestamp = Some(Time(at(50)));
}

fn wait_reason(step: &Step) -> WaitReason {
    match step {
        Step::Wait { reason, .. } => *reason,
        other => panic!("expected a wait, got {other:?}"),
    }
}

#[test]
fn rule1_cluster_deletion_drops_finalizers_without_leaving_etcd() {
    let mut fx = Fx::healthy(3);
    fx.obs.cluster.metadata.deletion_timestamp = Some(Time(at(50)));
    deleting(&mut fx, "etcd-1");
    assert_eq!(
        fx.step(),
        Step::RemoveFinalizer {
            member: "etcd-1".into()
        }
    );
}

#[test]
fn rule1_cluster_deletion_deletes_the_remaining_members() {
    let mut fx = Fx::healthy(3);
    fx.obs.cluster.metadata.deletion_timestamp = Some(Time(at(50)));
    assert_eq!(
        fx.step(),
        Step::DeleteMember {
            member: "etcd-0".into()
        }
    );
}

#[test]
fn rule1_cluster_deletion_outranks_pause() {
    let mut fx = Fx::healthy(1);
    fx.obs.cluster.metadata.deletion_timestamp = Some(Time(at(50)));
    fx.obs.cluster.spec.paused = Some(true);
    assert_eq!(fx.step().kind(), StepKind::DeleteMember);
}

#[test]
fn rule2_paused_takes_no_action_but_still_reports_status() {
    let mut fx = Fx::healthy(3);
    fx.obs.cluster.spec.paused = Some(true);
    fx.pod_mut("etcd-1").phase = crate::plan::PodPhase::Succeeded;
    let plan = fx.plan();
    assert_eq!(wait_reason(&plan.step), WaitReason::Paused);
    assert!(!plan.step.mutates());
    assert_eq!(
        cluster_condition(&fx, &plan, "Progressing"),
        ("False".into(), "Paused".into())
    );
    let status = planned_member_status(&fx, &plan, "etcd-1");
    let ready = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(
        ready.reason, "PodTerminated",
        "status is still observed while paused"
    );
}

#[test]
fn cluster_id_mismatch_stops_all_action() {
    let mut fx = Fx::healthy(3);
    fx.obs.etcd.cluster_id = Some(0xdead);
    fx.without_pod("etcd-2");
    assert_eq!(wait_reason(&fx.step()), WaitReason::ClusterIdMismatch);
}

#[test]
fn rule3_quorum_recovery_in_progress_is_reported_not_continued() {
    let mut fx = Fx::healthy(3);
    fx.status_mut().conditions = Some(vec![Condition {
        type_: QUORUM_RECOVERY_CONDITION.into(),
        status: "True".into(),
        reason: "Started".into(),
        message: String::new(),
        observed_generation: None,
        last_transition_time: Time(at(1)),
    }]);
    deleting(&mut fx, "etcd-2");
    assert_eq!(
        wait_reason(&fx.step()),
        WaitReason::QuorumRecoveryNotImplemented
    );
}

#[test]
fn rule4_leaving_member_is_marked_terminating_first() {
    let mut fx = Fx::healthy(3);
    deleting(&mut fx, "etcd-2");
    let plan = fx.plan();
    assert_eq!(
        plan.step,
        Step::SetPhase {
            member: "etcd-2".into(),
            phase: MemberPhase::Terminating
        }
    );
    assert_eq!(
        planned_member_status(&fx, &plan, "etcd-2").phase,
        Some(MemberPhase::Terminating)
    );
}

#[test]
fn rule4_leaving_leader_hands_leadership_to_the_lowest_ready_voter() {
    let mut fx = Fx::healthy(3);
    deleting(&mut fx, "etcd-0");
    // Just started leaving: moving leadership is tried for LEADER_MOVE_TIMEOUT.
    fx.set_phase("etcd-0", MemberPhase::Terminating, at(100_000 - 1));
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
fn rule4_leave_sequence_removes_from_etcd_then_pod_then_pvc_then_finalizer() {
    let mut fx = Fx::healthy(3);
    deleting(&mut fx, "etcd-2");
    fx.set_phase("etcd-2", MemberPhase::Terminating, at(60));
    assert_eq!(
        fx.step(),
        Step::RemoveEtcdMember {
            member: Some("etcd-2".into()),
            id: id_of("etcd-2")
        }
    );

    fx.etcd_remove("etcd-2");
    assert_eq!(fx.step().kind(), StepKind::DeletePod);

    fx.pod_mut("etcd-2").deleting = true;
    assert_eq!(
        fx.step(),
        Step::DeletePvc {
            member: "etcd-2".into(),
            pvc: "data-etcd-2".into()
        }
    );

    fx.observed_member("etcd-2").pvc.as_mut().unwrap().deleting = true;
    assert_eq!(
        fx.step(),
        Step::RemoveFinalizer {
            member: "etcd-2".into()
        }
    );
}

#[test]
fn rule4_removal_waits_when_it_would_break_quorum() {
    let mut fx = Fx::healthy(3);
    fx.answer("etcd-1", Answer::Down);
    deleting(&mut fx, "etcd-2");
    fx.set_phase("etcd-2", MemberPhase::Terminating, at(60));
    assert_eq!(wait_reason(&fx.step()), WaitReason::QuorumAtRisk);
}

#[test]
fn rule4_removal_waits_for_etcd_to_confirm() {
    let mut fx = Fx::healthy(3);
    deleting(&mut fx, "etcd-2");
    fx.set_phase("etcd-2", MemberPhase::Terminating, at(60));
    fx.obs.etcd = crate::etcd::EtcdView::not_observed("down");
    assert_eq!(wait_reason(&fx.step()), WaitReason::EtcdUnreachable);
}

#[test]
fn rule4_outranks_repairs() {
    let mut fx = Fx::healthy(3);
    fx.pod_mut("etcd-0").phase = crate::plan::PodPhase::Failed;
    deleting(&mut fx, "etcd-2");
    assert_eq!(fx.step().member(), Some("etcd-2"));
}

#[test]
fn rule5_corrupt_alarm_is_reported_and_holds_scaling() {
    let mut fx = Fx::healthy(3);
    fx.obs.cluster.spec.replicas = Some(5);
    fx.status_mut().observed.as_mut().unwrap().replicas = 5;
    fx.alarm("etcd-1", AlarmKind::Corrupt);
    let plan = fx.plan();
    assert_eq!(wait_reason(&plan.step), WaitReason::CorruptAlarm);
    assert!(plan.step.message().contains("etcd-1"));
    assert_eq!(
        cluster_condition(&fx, &plan, "Degraded"),
        ("True".into(), "CorruptAlarm".into())
    );
}

#[test]
fn rule5_corrupt_alarm_still_restores_dead_pods() {
    let mut fx = Fx::healthy(3);
    fx.alarm("etcd-1", AlarmKind::Corrupt);
    fx.without_pod("etcd-2");
    fx.answer("etcd-2", Answer::Down);
    assert_eq!(fx.step().kind(), StepKind::CreatePod);
}

#[test]
fn rule6_nospace_alarm_is_reported_with_what_to_do() {
    let mut fx = Fx::healthy(3);
    fx.alarm("etcd-0", AlarmKind::NoSpace);
    let plan = fx.plan();
    assert_eq!(wait_reason(&plan.step), WaitReason::NoSpaceAlarm);
    assert!(plan.step.message().contains("defragment"));
    assert_eq!(
        cluster_condition(&fx, &plan, "Degraded"),
        ("True".into(), "NoSpaceAlarm".into())
    );
}

#[test]
fn rule5_corrupt_outranks_rule6_nospace() {
    let mut fx = Fx::healthy(3);
    fx.obs.etcd.alarms = Ok(vec![
        crate::etcd::Alarm {
            member_id: id_of("etcd-0"),
            kind: AlarmKind::NoSpace,
        },
        crate::etcd::Alarm {
            member_id: id_of("etcd-1"),
            kind: AlarmKind::Corrupt,
        },
    ]);
    assert_eq!(wait_reason(&fx.step()), WaitReason::CorruptAlarm);
}

#[test]
fn rule4_last_member_is_never_deleted_with_the_cluster_data() {
    let mut fx = Fx::healthy(1);
    deleting(&mut fx, "etcd-0");
    fx.set_phase("etcd-0", MemberPhase::Terminating, at(60));
    let step = fx.step();
    assert_eq!(wait_reason(&step), WaitReason::QuorumAtRisk);
    assert!(step.message().contains("last member"));
}
