//! Rules 1 to 6 and the cluster-ID safety stop.

use etcd_operator_api::MemberPhase;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::fixtures::*;
use crate::etcd::AlarmKind;
use crate::plan::{Step, StepKind, WaitReason};

fn deleting(fx: &mut Fx, member: &str) {
    fx.member_mut(member).metadata.deletion_timestamp = Some(Time(at(50)));
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
    // Scaled in by the operator (whenScaled: Delete by default): the PVC goes too.
    fx.member_mut("etcd-2")
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(crate::plan::SCALE_IN_ANNOTATION.into(), "true".into());
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

fn ready_reason(fx: &Fx, plan: &crate::plan::Plan, member: &str) -> Option<String> {
    planned_member_status(fx, plan, member)
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.reason)
}

#[test]
fn rule5_corrupt_member_goes_straight_to_replacing_before_scaling() {
    let mut fx = Fx::healthy(3);
    fx.obs.cluster.spec.replicas = Some(5);
    fx.status_mut().observed.as_mut().unwrap().replicas = 5;
    fx.alarm("etcd-1", AlarmKind::Corrupt);
    let plan = fx.plan();
    assert_eq!(
        plan.step,
        Step::SetPhase {
            member: "etcd-1".into(),
            phase: MemberPhase::Replacing
        }
    );
    assert_eq!(
        ready_reason(&fx, &plan, "etcd-1").as_deref(),
        Some("CorruptAlarm")
    );
    assert_eq!(
        cluster_condition(&fx, &plan, "Degraded"),
        ("True".into(), "CorruptAlarm".into())
    );
}

#[test]
fn rule5_corrupt_follower_in_replacing_is_removed_from_etcd() {
    let mut fx = Fx::healthy(3);
    fx.alarm("etcd-1", AlarmKind::Corrupt);
    fx.set_phase("etcd-1", MemberPhase::Replacing, at(90_000));
    assert_eq!(
        fx.step(),
        Step::RemoveEtcdMember {
            member: Some("etcd-1".into()),
            id: id_of("etcd-1")
        }
    );
}

#[test]
fn rule5_corrupt_leader_hands_leadership_over_before_removal() {
    let mut fx = Fx::healthy(3);
    fx.alarm("etcd-0", AlarmKind::Corrupt);
    fx.set_phase("etcd-0", MemberPhase::Replacing, at(99_990));
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
fn rule5_corrupt_alarm_is_disarmed_once_etcd_no_longer_lists_the_member() {
    let mut fx = Fx::healthy(3);
    fx.alarm("etcd-1", AlarmKind::Corrupt);
    fx.set_phase("etcd-1", MemberPhase::Replacing, at(90_000));
    fx.etcd_remove("etcd-1");
    let step = fx.step();
    assert_eq!(
        step,
        Step::DisarmAlarm {
            member: Some("etcd-1".into()),
            alarm: crate::etcd::Alarm {
                member_id: id_of("etcd-1"),
                kind: AlarmKind::Corrupt
            }
        }
    );
    assert!(!step.is_destructive());
    // Disarmed: the replacement continues under rule 7 (its old Pod goes next).
    fx.obs.etcd.alarms = Ok(vec![]);
    assert_eq!(
        fx.step(),
        Step::DeletePod {
            member: "etcd-1".into(),
            pod: "etcd-1".into(),
            uid: "pod-etcd-1".into(),
        }
    );
}

#[test]
fn rule5_corrupt_member_is_not_replaced_when_the_others_lack_quorum() {
    let mut fx = Fx::healthy(3);
    fx.alarm("etcd-1", AlarmKind::Corrupt);
    fx.answer("etcd-2", Answer::NoQuorum);
    let step = fx.step();
    assert_eq!(wait_reason(&step), WaitReason::CorruptAlarm);
    assert!(step.message().contains("lack quorum"), "{step:?}");
    // Nor is a replacement already started pushed on: MemberRemove would lose quorum.
    fx.set_phase("etcd-1", MemberPhase::Replacing, at(90_000));
    let step = fx.step();
    assert_eq!(wait_reason(&step), WaitReason::QuorumAtRisk, "{step:?}");
}

#[test]
fn rule5_corrupt_member_waits_for_another_repair() {
    let mut fx = Fx::healthy(5);
    fx.alarm("etcd-1", AlarmKind::Corrupt);
    fx.set_phase("etcd-3", MemberPhase::Recreating, at(90_000));
    let step = fx.step();
    assert_eq!(wait_reason(&step), WaitReason::CorruptAlarm);
    assert!(step.message().contains("etcd-3"), "{step:?}");
}

#[test]
fn rule5_corrupt_alarm_without_a_member_is_reported_or_disarmed() {
    // An ID no EtcdMember claims but etcd lists: not ours to replace.
    let mut fx = Fx::healthy(3);
    fx.obs.etcd.alarms = Ok(vec![crate::etcd::Alarm {
        member_id: 0xdead,
        kind: AlarmKind::Corrupt,
    }]);
    fx.obs
        .etcd
        .members
        .as_mut()
        .unwrap()
        .push(crate::etcd::MemberInfo {
            id: 0xdead,
            name: "stray".into(),
            peer_urls: vec!["http://stray:2380".into()],
            client_urls: vec![],
            is_learner: false,
        });
    let step = fx.step();
    assert_eq!(wait_reason(&step), WaitReason::CorruptAlarm);
    assert!(step.message().contains("etcdctl member remove"), "{step:?}");
    // An ID etcd does not list: nothing of it is in the cluster, the alarm goes.
    fx.obs
        .etcd
        .members
        .as_mut()
        .unwrap()
        .retain(|m| m.id != 0xdead);
    assert_eq!(fx.step().kind(), StepKind::DisarmAlarm);
    // etcd's member list did not answer: nothing is decided on a partial view.
    fx.alarm("etcd-1", AlarmKind::Corrupt);
    fx.obs.etcd.members = Err(crate::etcd::EtcdError {
        call: "MemberList",
        endpoints: "all".into(),
        kind: crate::etcd::EtcdErrorKind::Unreachable,
        detail: "down".into(),
    });
    assert!(!fx.step().mutates());
}

#[test]
fn rule5_corrupt_alarm_still_restores_dead_pods() {
    let mut fx = Fx::healthy(3);
    fx.alarm("etcd-1", AlarmKind::Corrupt);
    fx.without_pod("etcd-2");
    fx.answer("etcd-2", Answer::Down);
    assert_eq!(fx.step().kind(), StepKind::CreatePod);
}

const QUOTA: i64 = 8 << 20;

/// Three members with an 8 MiB quota whose backends are `size` bytes, `in_use` of them live,
/// NOSPACE raised by etcd-0 (the leader), the keyspace compacted or not.
fn nospace(size: i64, in_use: i64, compacted: bool) -> Fx {
    let mut fx = Fx::healthy(3);
    for i in 0..3 {
        fx.member_mut(&name(i)).spec.options = Some(etcd_operator_api::shared::EtcdOptions {
            quota_backend_bytes: Some(QUOTA),
            ..Default::default()
        });
        sizes(&mut fx, &name(i), size, in_use);
    }
    // The cluster asks for the same quota its members run with.
    let options = Some(etcd_operator_api::shared::EtcdOptions {
        quota_backend_bytes: Some(QUOTA),
        ..Default::default()
    });
    fx.obs.cluster.spec.options = options.clone();
    fx.status_mut().observed.as_mut().unwrap().options = options;
    fx.alarm("etcd-0", AlarmKind::NoSpace);
    fx.obs.etcd.compaction = Some(crate::etcd::Compaction {
        revision: 500,
        compacted,
    });
    fx
}

/// `nospace` compacted at revision 500, with every member already defragmented by this
/// remediation at that revision: what is still in use is live data.
fn nospace_defragmented(size: i64, in_use: i64) -> Fx {
    let mut fx = nospace(size, in_use, true);
    let members = (0..3)
        .map(|i| etcd_operator_api::cluster::NoSpaceMemberSizes {
            name: name(i),
            defragmented_at_revision: Some(500),
            ..Default::default()
        })
        .collect();
    fx.status_mut().no_space_remediation =
        Some(etcd_operator_api::cluster::NoSpaceRemediationStatus {
            phase: etcd_operator_api::cluster::NoSpacePhase::Defragmenting,
            started_at: None,
            completed_at: None,
            message: None,
            compacted_revision: Some(500),
            members,
        });
    fx
}

fn sizes(fx: &mut Fx, member: &str, size: i64, in_use: i64) {
    for o in &mut fx.obs.etcd.endpoints {
        if o.endpoint == client(member)
            && let Ok(s) = o.status.as_mut()
        {
            s.db_size = size;
            s.db_size_in_use = in_use;
        }
    }
}

#[test]
fn rule6_nospace_compacts_first() {
    let fx = nospace(QUOTA, QUOTA - 1000, false);
    let plan = fx.plan();
    assert_eq!(plan.step, Step::Compact { revision: 500 });
    assert_eq!(
        cluster_condition(&fx, &plan, "Degraded"),
        ("True".into(), "NoSpaceAlarm".into())
    );
}

#[test]
fn rule6_nospace_defragments_followers_first_the_leader_last() {
    let mut fx = nospace(QUOTA, QUOTA / 4, true);
    let mut order = Vec::new();
    for _ in 0..3 {
        let step = fx.step();
        let Step::Defragment { member, leader, .. } = &step else {
            panic!("expected a defragmentation, got {step:?}");
        };
        order.push((member.clone(), *leader));
        assert!(!step.is_destructive());
        // Defragmented: the file shrinks to its live data.
        sizes(&mut fx, member, QUOTA / 4 + 4096, QUOTA / 4);
    }
    assert_eq!(
        order,
        [
            ("etcd-1".to_string(), false),
            ("etcd-2".to_string(), false),
            ("etcd-0".to_string(), true)
        ]
    );
    // Every member below 90 %: the alarm goes.
    assert_eq!(
        fx.step(),
        Step::DisarmAlarm {
            member: Some("etcd-0".into()),
            alarm: crate::etcd::Alarm {
                member_id: id_of("etcd-0"),
                kind: AlarmKind::NoSpace
            }
        }
    );
}

/// The remediation as `status.noSpaceRemediation` records it after each pass, fed back as
/// the observed status of the next.
fn nospace_record(fx: &mut Fx) -> etcd_operator_api::cluster::NoSpaceRemediationStatus {
    let plan = fx.plan();
    if let Some(status) = plan.cluster_status {
        fx.obs.cluster.status = Some(status);
    }
    fx.obs
        .cluster
        .status
        .as_ref()
        .and_then(|s| s.no_space_remediation.clone())
        .expect("status.noSpaceRemediation")
}

#[test]
fn rule6_nospace_remediation_is_recorded_step_by_step_with_sizes_before_and_after() {
    use etcd_operator_api::cluster::NoSpacePhase;
    let mut fx = nospace(QUOTA, QUOTA / 4, false);
    let r = nospace_record(&mut fx);
    assert_eq!(r.phase, NoSpacePhase::Compacting);
    // status.members names the member that raised the alarm.
    let alarms: Vec<_> = fx
        .obs
        .cluster
        .status
        .as_ref()
        .unwrap()
        .members
        .as_ref()
        .unwrap()
        .iter()
        .map(|m| (m.name.clone(), m.alarms.clone()))
        .collect();
    assert_eq!(
        alarms,
        [
            ("etcd-0".to_string(), Some(vec!["NOSPACE".to_string()])),
            ("etcd-1".to_string(), None),
            ("etcd-2".to_string(), None)
        ]
    );
    assert_eq!(r.compacted_revision, Some(500));
    let started = r.started_at.clone().expect("a start time");
    assert_eq!(r.members.len(), 3);
    assert!(
        r.members
            .iter()
            .all(|m| m.db_size_before == Some(QUOTA) && m.quota_bytes == Some(QUOTA))
    );
    fx.obs.etcd.compaction = Some(crate::etcd::Compaction {
        revision: 500,
        compacted: true,
    });
    for member in ["etcd-1", "etcd-2", "etcd-0"] {
        let r = nospace_record(&mut fx);
        assert_eq!(r.phase, NoSpacePhase::Defragmenting, "{r:?}");
        assert!(r.message.as_deref().unwrap().contains(member), "{r:?}");
        assert_eq!(r.started_at.as_ref(), Some(&started));
        sizes(&mut fx, member, QUOTA / 4 + 4096, QUOTA / 4);
    }
    let r = nospace_record(&mut fx);
    assert_eq!(r.phase, NoSpacePhase::Disarming);
    fx.obs.etcd.alarms = Ok(Vec::new());
    let done = nospace_record(&mut fx);
    assert_eq!(done.phase, NoSpacePhase::Remedied);
    assert!(done.completed_at.is_some());
    for m in &done.members {
        assert_eq!(m.db_size_before, Some(QUOTA), "{m:?}");
        assert_eq!(m.db_size_after, Some(QUOTA / 4 + 4096), "{m:?}");
        assert_eq!(m.db_size_in_use, Some(QUOTA / 4), "{m:?}");
    }
    // At rest the record stays as it is (no write), and etcd not answering changes nothing.
    assert_eq!(nospace_record(&mut fx), done);
    fx.obs.etcd.alarms = Err(crate::etcd::EtcdError {
        call: "AlarmList",
        endpoints: "all".into(),
        kind: crate::etcd::EtcdErrorKind::Unreachable,
        detail: "connection refused".into(),
    });
    assert_eq!(nospace_record(&mut fx), done);
    // The next alarm begins a new record.
    fx.alarm("etcd-0", AlarmKind::NoSpace);
    let next = nospace_record(&mut fx);
    assert_ne!(next.phase, NoSpacePhase::Remedied);
    assert!(next.completed_at.is_none());
    assert_eq!(next.members[0].db_size_before, Some(QUOTA / 4 + 4096));
}

#[test]
fn rule6_nospace_record_says_when_the_quota_is_too_small_or_a_person_decides() {
    use etcd_operator_api::cluster::NoSpacePhase;
    let mut fx = nospace_defragmented(QUOTA, QUOTA - 1000);
    let r = nospace_record(&mut fx);
    assert_eq!(r.phase, NoSpacePhase::QuotaExceeded);
    assert!(r.message.unwrap().contains("quotaBackendBytes"));
    let mut fx = nospace(QUOTA, QUOTA / 4, false);
    fx.obs.cluster.metadata.annotations = Some(
        [(
            crate::plan::NOSPACE_REMEDIATION_ANNOTATION.to_string(),
            "manual".to_string(),
        )]
        .into(),
    );
    assert_eq!(nospace_record(&mut fx).phase, NoSpacePhase::Manual);
    // Without an alarm, no record at all.
    let mut fx = Fx::healthy(3);
    let plan = fx.plan();
    assert!(
        plan.cluster_status
            .or(fx.obs.cluster.status.take())
            .and_then(|s| s.no_space_remediation)
            .is_none()
    );
}

#[test]
fn rule6_nospace_from_live_data_is_reported_not_looped() {
    let fx = nospace_defragmented(QUOTA, QUOTA - 1000);
    let step = fx.step();
    assert_eq!(wait_reason(&step), WaitReason::NoSpaceAlarm);
    assert!(
        step.message()
            .contains("raise spec.options.quotaBackendBytes"),
        "{step:?}"
    );
    assert_eq!(step.event_type(), crate::build::EventType::Warning);
    // The quota raised (the members run with it): below 90 % of it, disarmed.
    let mut fx = fx;
    for i in 0..3 {
        fx.member_mut(&name(i))
            .spec
            .options
            .as_mut()
            .unwrap()
            .quota_backend_bytes = Some(4 * QUOTA);
    }
    assert_eq!(fx.step().kind(), StepKind::DisarmAlarm);
}

#[test]
fn rule6_nospace_lets_the_rollout_of_a_raised_quota_through() {
    let mut fx = nospace_defragmented(QUOTA, QUOTA - 1000);
    let raised = Some(etcd_operator_api::shared::EtcdOptions {
        quota_backend_bytes: Some(4 * QUOTA),
        ..Default::default()
    });
    fx.obs.cluster.spec.options = raised.clone();
    fx.status_mut().observed.as_mut().unwrap().options = raised;
    let step = fx.step();
    assert!(
        matches!(&step, Step::SetMemberConfig { member, .. } if member == "etcd-1"),
        "the rollout goes on under NOSPACE, a follower first: {step:?}"
    );
    let r = nospace_record(&mut fx);
    assert_eq!(
        r.phase,
        etcd_operator_api::cluster::NoSpacePhase::Waiting,
        "{r:?}"
    );
    // A member not Ready: the next one waits, and the record says why.
    fx.answer("etcd-2", Answer::Down);
    let step = fx.step();
    assert_eq!(wait_reason(&step), WaitReason::NoSpaceAlarm, "{step:?}");
    // A lower target is no reason to roll under the alarm: reported as before.
    let mut fx = nospace_defragmented(QUOTA, QUOTA - 1000);
    let lower = Some(etcd_operator_api::shared::EtcdOptions {
        quota_backend_bytes: Some(QUOTA / 2),
        ..Default::default()
    });
    fx.obs.cluster.spec.options = lower.clone();
    fx.status_mut().observed.as_mut().unwrap().options = lower;
    assert_eq!(wait_reason(&fx.step()), WaitReason::NoSpaceAlarm);
}

#[test]
fn rule6_nospace_waits_for_every_member_and_for_the_compaction_state() {
    let mut fx = nospace(QUOTA, QUOTA / 4, false);
    fx.answer("etcd-2", Answer::NoQuorum);
    let step = fx.step();
    assert_eq!(wait_reason(&step), WaitReason::NoSpaceAlarm);
    assert!(step.message().contains("etcd-2"), "{step:?}");
    let mut fx = nospace(QUOTA, QUOTA / 4, false);
    fx.obs.etcd.compaction = None;
    assert!(!fx.step().mutates());
}

#[test]
fn rule6_nospace_remediation_can_be_left_to_a_person() {
    let mut fx = nospace(QUOTA, QUOTA / 4, false);
    fx.obs.cluster.metadata.annotations = Some(
        [(
            crate::plan::NOSPACE_REMEDIATION_ANNOTATION.to_string(),
            "manual".to_string(),
        )]
        .into(),
    );
    let step = fx.step();
    assert_eq!(wait_reason(&step), WaitReason::NoSpaceAlarm);
    assert!(step.message().contains("EtcdDefrag"), "{step:?}");
}

#[test]
fn rule6_nospace_below_the_quota_is_disarmed_at_once() {
    let fx = nospace(QUOTA / 2, QUOTA / 4, false);
    assert_eq!(fx.step().kind(), StepKind::DisarmAlarm);
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
    assert_eq!(fx.step().member(), Some("etcd-1"));
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

/// etcd recomputes the in-use size only when it next commits a write, which NOSPACE refuses:
/// right after a compaction every member may still report its freed pages in use (seen on
/// etcd 3.4.23 after deleting the live keys under NOSPACE: in use stayed at the file's size and
/// the remediation reported live data for good). Every member over the limit is defragmented
/// once at the compacted revision, followers first; only then is what is left live data. A
/// delete moves the revision on: compacted again, defragmented again.
#[test]
fn rule6_nospace_defragments_once_per_compacted_revision_whatever_in_use_says() {
    let mut fx = nospace(QUOTA, QUOTA - 1000, true);
    let mut defragmented = Vec::new();
    for _ in 0..3 {
        let step = fx.step();
        let Step::Defragment { member, .. } = &step else {
            panic!("a stale in-use size still gets a defragmentation: {step:?}");
        };
        defragmented.push(member.clone());
        let record = nospace_record(&mut fx);
        let entry = record.members.iter().find(|e| &e.name == member).unwrap();
        assert_eq!(entry.defragmented_at_revision, Some(500), "{record:?}");
    }
    assert_eq!(
        defragmented.last().map(String::as_str),
        Some("etcd-0"),
        "the leader last: {defragmented:?}"
    );
    let mut unique = defragmented.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 3, "each member once: {defragmented:?}");
    // Still over after one defragmentation each at this revision: live data, reported.
    let step = fx.step();
    assert!(
        step.message()
            .contains("raise spec.options.quotaBackendBytes"),
        "{step:?}"
    );
    assert_eq!(
        nospace_record(&mut fx).phase,
        etcd_operator_api::cluster::NoSpacePhase::QuotaExceeded
    );
    // A person deletes keys: a new revision, compacted first, then every member again.
    fx.obs.etcd.compaction = Some(crate::etcd::Compaction {
        revision: 501,
        compacted: false,
    });
    assert_eq!(fx.step(), Step::Compact { revision: 501 });
    fx.obs.etcd.compaction = Some(crate::etcd::Compaction {
        revision: 501,
        compacted: true,
    });
    assert!(
        matches!(fx.step(), Step::Defragment { .. }),
        "defragmented again at the new revision"
    );
}

/// etcd 3.5.1 excludes only the first alarm of a kind from `/health?exclude=NOSPACE` (the
/// readiness probe; etcd-io/etcd#13467), so with every member's NOSPACE alarm raised no Pod is
/// Ready. Under NOSPACE a member counts as Ready by etcd's word with its Pod running, so a quota
/// raised in the spec is still latched and rolled out (seen in e2e_recovery: otherwise the
/// target never latched and the alarm stayed for good).
#[test]
fn rule6_nospace_a_raised_quota_is_latched_and_rolled_while_every_probe_fails() {
    let mut fx = nospace_defragmented(QUOTA, QUOTA - 1000);
    for i in 0..3 {
        fx.alarm(&name(i), AlarmKind::NoSpace);
        fx.pod_mut(&name(i)).ready = false;
    }
    // Only the spec: the target is latched by the pass.
    fx.obs.cluster.spec.options = Some(etcd_operator_api::shared::EtcdOptions {
        quota_backend_bytes: Some(4 * QUOTA),
        ..Default::default()
    });
    let mut rolled = None;
    for _ in 0..2 {
        let plan = fx.plan();
        if let Some(status) = plan.cluster_status.clone() {
            fx.obs.cluster.status = Some(status);
        }
        if let Step::SetMemberConfig { member, .. } = &plan.step {
            rolled = Some(member.clone());
            break;
        }
    }
    assert_eq!(
        fx.obs
            .cluster
            .status
            .as_ref()
            .and_then(|s| s.observed.as_ref())
            .and_then(|o| o.options.as_ref())
            .and_then(|o| o.quota_backend_bytes),
        Some(4 * QUOTA),
        "the raised quota is latched"
    );
    assert_eq!(rolled.as_deref(), Some("etcd-1"), "a follower first");
    // Without the alarm, a Pod that is not Ready still holds the gate.
    let mut fx = Fx::healthy(3);
    fx.pod_mut("etcd-1").ready = false;
    fx.obs.cluster.spec.replicas = Some(5);
    assert!(
        !matches!(fx.step(), Step::CreateMember(_)),
        "a Pod not Ready keeps the gate shut"
    );
}

#[test]
fn a_cluster_near_its_quota_is_looked_at_often() {
    use crate::plan::timing::{IDLE_POLL, NEAR_QUOTA_POLL};
    // The members of `nospace`, without the alarm, after the pass that records its end.
    let mut fx = nospace(QUOTA / 2, QUOTA / 2, true);
    fx.obs.etcd.alarms = Ok(vec![]);
    if let Some(status) = fx.plan().cluster_status {
        fx.obs.cluster.status = Some(status);
    }
    // Half the quota: converged, the idle poll.
    let plan = fx.plan();
    assert_eq!(plan.step, Step::Idle);
    assert_eq!(plan.requeue_after, IDLE_POLL);
    // One member at 80 % of the quota (its file, or the data in use): the short poll.
    sizes(&mut fx, "etcd-2", QUOTA / 100 * 80, QUOTA / 2);
    let plan = fx.plan();
    assert_eq!(plan.step, Step::Idle);
    assert_eq!(plan.requeue_after, NEAR_QUOTA_POLL);
    // The fill the reconciler compares across passes: the fullest member's share.
    let fill = plan.fullest_backend.expect("members answered").share();
    assert!((fill - 0.8).abs() < 0.001, "{fill}");
    sizes(&mut fx, "etcd-2", QUOTA / 2, QUOTA / 100 * 80);
    assert_eq!(fx.plan().requeue_after, NEAR_QUOTA_POLL);
    // Just under 80 %: the idle poll again.
    sizes(&mut fx, "etcd-2", QUOTA / 100 * 79, QUOTA / 100 * 79);
    assert_eq!(fx.plan().requeue_after, IDLE_POLL);
    // Under NOSPACE, a wait (here: a member does not answer) is looked at as often.
    let mut fx = nospace(QUOTA, QUOTA / 4, true);
    fx.answer("etcd-2", Answer::Down);
    let plan = fx.plan();
    assert!(matches!(plan.step, Step::Wait { .. }), "{:?}", plan.step);
    assert_eq!(plan.requeue_after, NEAR_QUOTA_POLL);
}
