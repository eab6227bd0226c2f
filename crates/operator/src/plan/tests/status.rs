//! The statuses the planner computes: latches, counts, conditions, and no rewrite when nothing
//! changed.

use etcd_operator_api::MemberPhase;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::fixtures::*;
use crate::build::tests_support::cluster;
use crate::plan::{Step, plan_next_step};

#[test]
fn first_pass_latches_token_target_and_deadline() {
    let mut fx = Fx::empty(3);
    fx.obs.cluster = cluster(CLUSTER, 3);
    let plan = fx.plan();
    let status = plan.cluster_status.expect("first status");
    assert_eq!(status.cluster_token.as_deref(), Some("prod-etcd-uid-etcd"));
    assert_eq!(status.observed.as_ref().unwrap().replicas, 3);
    assert_eq!(status.observed.as_ref().unwrap().version, "3.5.1");
    let deadline = status.progress_deadline.unwrap().0;
    assert_eq!(
        deadline,
        now()
            .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(600))
            .unwrap()
    );
    assert_eq!(
        status.selector.as_deref(),
        Some("etcd-operator.cozystack.io/cluster=etcd")
    );
}

#[test]
fn cluster_id_is_latched_once_etcd_answers() {
    let mut fx = Fx::healthy(1);
    fx.status_mut().cluster_id = None;
    let plan = fx.plan();
    assert_eq!(
        plan.cluster_status.unwrap().cluster_id.as_deref(),
        Some("c1")
    );
}

#[test]
fn healthy_cluster_reports_quorum_healthy_and_reconciled() {
    let fx = Fx::healthy(3);
    let plan = fx.plan();
    assert_eq!(
        cluster_condition(&fx, &plan, "Available"),
        ("True".into(), "QuorumHealthy".into())
    );
    assert_eq!(
        cluster_condition(&fx, &plan, "Degraded"),
        ("False".into(), "QuorumHealthy".into())
    );
    assert_eq!(
        cluster_condition(&fx, &plan, "Progressing"),
        ("False".into(), "Reconciled".into())
    );
    let status = plan.cluster_status.unwrap();
    assert_eq!(status.ready_members, Some(3));
    assert_eq!(status.leader.as_deref(), Some("etcd-0"));
    let members = status.members.unwrap();
    assert_eq!(members.len(), 3);
    assert_eq!(members[0].member_id.as_deref(), Some("100"));
    assert_eq!(members[0].is_leader, Some(true));
    assert_eq!(members[1].version.as_deref(), Some("3.5.1"));
    assert_eq!(
        status.progress_deadline, None,
        "cleared once the target is reached"
    );
}

#[test]
fn one_member_down_is_available_but_degraded() {
    let mut fx = Fx::healthy(3);
    fx.answer("etcd-2", Answer::Down);
    let plan = fx.plan();
    assert_eq!(
        cluster_condition(&fx, &plan, "Available"),
        ("True".into(), "QuorumAvailable".into())
    );
    assert_eq!(
        cluster_condition(&fx, &plan, "Degraded"),
        ("True".into(), "MembersUnhealthy".into())
    );
    assert_eq!(plan.cluster_status.unwrap().ready_members, Some(2));
}

#[test]
fn statuses_are_not_rewritten_when_nothing_changed() {
    let mut fx = Fx::healthy(3);
    let first = fx.plan();
    fx.write_statuses(&first);
    let second = plan_next_step(&fx.obs, now());
    assert_eq!(second.cluster_status, None);
    assert!(
        second.member_statuses.is_empty(),
        "{:?}",
        second.member_statuses
    );
    // Even later: nothing time-dependent moves in a converged cluster.
    let later = plan_next_step(&fx.obs, at(200_000));
    assert_eq!(later.cluster_status, None);
    assert!(later.member_statuses.is_empty());
}

#[test]
fn member_status_records_identity_pod_and_conditions() {
    let mut fx = Fx::healthy(3);
    fx.member_mut("etcd-1").status = None;
    let plan = fx.plan();
    let status = planned_member_status(&fx, &plan, "etcd-1");
    assert_eq!(status.member_id.as_deref(), Some("101"));
    assert_eq!(status.is_voter, Some(true));
    assert_eq!(status.pod_name.as_deref(), Some("etcd-1"));
    assert_eq!(status.pod_uid.as_deref(), Some("pod-etcd-1"));
    assert_eq!(status.pvc_name.as_deref(), Some("data-etcd-1"));
    assert_eq!(status.replicas, Some(1));
    assert_eq!(status.version.as_deref(), Some("3.5.1"));
    assert_eq!(
        status.selector.as_deref(),
        Some("etcd-operator.cozystack.io/cluster=etcd,app.kubernetes.io/component=etcd-1")
    );
    // A member without a recorded phase is Pending; it re-enters through Provisioning, which
    // finds it a healthy voter already and marks it Ready.
    assert_eq!(status.phase, Some(MemberPhase::Provisioning));
    let types: Vec<_> = status
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| (c.type_, c.status))
        .collect();
    assert!(types.contains(&("Joined".into(), "True".into())));
    assert!(types.contains(&("VersionDrifted".into(), "False".into())));
}

#[test]
fn recreate_count_decays_after_a_stable_period() {
    let mut fx = Fx::healthy(3);
    fx.member_mut("etcd-1")
        .status
        .as_mut()
        .unwrap()
        .recreate_count = Some(2);
    fx.set_phase("etcd-1", MemberPhase::Ready, at(100_000 - 30));
    let plan = fx.plan();
    assert_eq!(
        planned_member_status(&fx, &plan, "etcd-1").recreate_count,
        Some(2),
        "recently repaired"
    );
    fx.set_phase("etcd-1", MemberPhase::Ready, at(0));
    let plan = fx.plan();
    assert_eq!(
        planned_member_status(&fx, &plan, "etcd-1").recreate_count,
        Some(0)
    );
}

#[test]
fn deadline_expiry_adopts_a_changed_spec() {
    let mut fx = Fx::healthy(3);
    fx.obs.cluster.spec.replicas = Some(5);
    fx.answer("etcd-2", Answer::Down);
    // Not reached (a member is down), deadline not expired: the target stays.
    fx.status_mut().progress_deadline = Some(Time(at(200_000)));
    let plan = fx.plan();
    assert_eq!(plan.cluster_status.unwrap().observed.unwrap().replicas, 3);
    fx.status_mut().progress_deadline = Some(Time(at(1)));
    let plan = fx.plan();
    assert_eq!(plan.cluster_status.unwrap().observed.unwrap().replicas, 5);
}

#[test]
fn events_accompany_mutations_and_new_blockers_only() {
    let fx = Fx::healthy(3);
    let plan = fx.plan();
    assert!(plan.event(&fx.obs, now()).is_none(), "idle: no event");

    let mut fx = Fx::healthy(3);
    fx.without_pod("etcd-1");
    let plan = fx.plan();
    let event = plan.event(&fx.obs, now()).unwrap().unwrap();
    assert_eq!(event.reason.as_deref(), Some("PodCreated"));
    assert!(matches!(plan.step, Step::CreatePod(_)));
}

#[test]
fn progress_past_the_deadline_is_reported() {
    let mut fx = Fx::healthy(3);
    fx.without_pod("etcd-2");
    fx.answer("etcd-2", Answer::Down);
    fx.status_mut().progress_deadline = Some(Time(at(1)));
    let plan = fx.plan();
    assert_eq!(
        cluster_condition(&fx, &plan, "Progressing"),
        ("True".into(), "DeadlineExceeded".into())
    );
}

#[test]
fn etcd_calls_go_to_healthy_voters_leader_first_never_the_removed_member() {
    let mut fx = Fx::healthy(3);
    fx.set_leader("etcd-1");
    fx.answer("etcd-0", Answer::Down);
    let plan = fx.plan();
    assert_eq!(
        plan.etcd_endpoints,
        vec![client("etcd-1"), client("etcd-2")]
    );

    let mut fx = Fx::healthy(3);
    fx.member_mut("etcd-2").metadata.deletion_timestamp = Some(Time(at(1)));
    fx.set_phase("etcd-2", MemberPhase::Terminating, at(2));
    let plan = fx.plan();
    assert!(matches!(plan.step, Step::RemoveEtcdMember { .. }));
    assert_eq!(
        plan.etcd_endpoints,
        vec![client("etcd-0"), client("etcd-1")]
    );
}
