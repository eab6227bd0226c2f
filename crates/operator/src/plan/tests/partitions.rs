//! Partitions and an operator cut off (issue 13, item 6): a member isolated from its peers is
//! reported, never recreated or replaced for it; a hung member keeps the repair ladder; the
//! operator cut off from some or all members changes nothing and says what it cannot see.
//! Tables, then properties over generated states.

use etcd_operator_api::MemberPhase;
use etcd_operator_api::cluster::{QuorumRecoveryMode, QuorumRecoverySpec};
use etcd_operator_api::labels::quorum;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use proptest::prelude::*;

use super::fixtures::*;
use crate::plan::{Plan, Step, StepKind, WaitReason, plan_next_step};

/// Long past any grace period (the default 180 s, and the backoffs).
const LONG: i64 = 100_000 - 3_600;

/// `member` cut off from its peers: etcd answers Status, knows no leader, its raft index stuck
/// at `index` while the leader's is at 5000; its Pod not ready since long ago.
fn isolate(fx: &mut Fx, member: &str, index: u64) {
    fx.answer(member, Answer::NoQuorum);
    set_raft_index(fx, member, index);
    let pod = fx.pod_mut(member);
    pod.ready = false;
    pod.ready_changed_at = Some(at(LONG));
}

fn set_raft_index(fx: &mut Fx, member: &str, index: u64) {
    for o in &mut fx.obs.etcd.endpoints {
        if o.endpoint == client(member)
            && let Ok(s) = o.status.as_mut()
        {
            s.raft_index = index;
        }
    }
}

/// `member` hung (SIGSTOP): no answer, its Pod not ready since long ago.
fn hang(fx: &mut Fx, member: &str) {
    fx.answer(member, Answer::Down);
    let pod = fx.pod_mut(member);
    pod.ready = false;
    pod.ready_changed_at = Some(at(LONG));
}

/// The operator cannot reach `member`, whose Pod stays Ready.
fn hide(fx: &mut Fx, member: &str) {
    fx.answer(member, Answer::Down);
}

fn healthy_leading_at(n: u32, leader_index: u64) -> Fx {
    let mut fx = Fx::healthy(n);
    for i in 0..n {
        set_raft_index(&mut fx, &name(i), leader_index);
    }
    fx
}

fn condition(fx: &Fx, plan: &Plan, type_: &str) -> (String, String, String) {
    let status = plan
        .cluster_status
        .clone()
        .or_else(|| fx.obs.cluster.status.clone())
        .unwrap_or_default();
    let c = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition"));
    (c.status, c.reason, c.message)
}

fn member_ready(fx: &Fx, plan: &Plan, member: &str) -> (String, String) {
    let status = planned_member_status(fx, plan, member);
    let c = status
        .conditions
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    (c.reason, c.message)
}

/// A step that takes something of `member` away, or starts to.
fn touches(step: &Step, member: &str) -> bool {
    let named = step.member() == Some(member)
        || matches!(step, Step::RemoveEtcdMember { member: Some(m), .. } if m == member);
    named
        && (step.is_destructive()
            || matches!(
                step,
                Step::SetPhase {
                    phase: MemberPhase::Recreating | MemberPhase::Replacing,
                    ..
                }
            ))
}

/// Plans and applies the status writes, `passes` times, one second apart; every step.
fn passes(fx: &mut Fx, passes: i64) -> Vec<Step> {
    (0..passes)
        .map(|i| {
            let plan = plan_next_step(&fx.obs, at(100_000 + i));
            fx.write_statuses(&plan);
            plan.step
        })
        .collect()
}

#[test]
fn an_isolated_follower_is_reported_and_never_recreated() {
    let mut fx = healthy_leading_at(3, 5000);
    isolate(&mut fx, "etcd-2", 4200);
    let plan = fx.plan();
    assert!(!touches(&plan.step, "etcd-2"), "{:?}", plan.step);
    let (reason, message) = member_ready(&fx, &plan, "etcd-2");
    assert_eq!(reason, "Isolated", "{message}");
    assert!(message.contains("knows no leader"), "{message}");
    let (status, reason, message) = condition(&fx, &plan, "Degraded");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "MemberIsolated")
    );
    assert!(
        message.contains("isolated from its peers") && message.contains("etcd-2"),
        "{message}"
    );
    assert!(!message.contains("not serving"), "{message}");
    assert_eq!(
        plan.isolated,
        vec!["etcd-2 (raft index 4200, 800 entries behind the leader)".to_string()]
    );
    let event = plan.isolation_event(&fx.obs, now()).unwrap().unwrap();
    assert_eq!(event.reason.as_deref(), Some("MemberIsolated"));
    assert!(event.message.unwrap().contains("800 entries behind"));
    // However long it lasts: an hour of passes, no repair of it.
    for step in passes(&mut fx, 3600) {
        assert!(!touches(&step, "etcd-2"), "{step:?}");
    }
    // The Event once, not at every pass.
    assert!(fx.plan().isolation_event(&fx.obs, now()).is_none());
}

#[test]
fn a_hung_follower_keeps_the_repair_ladder() {
    let mut fx = healthy_leading_at(3, 5000);
    hang(&mut fx, "etcd-2");
    assert_eq!(
        fx.step(),
        Step::SetPhase {
            member: "etcd-2".into(),
            phase: MemberPhase::Recreating
        }
    );
    let plan = fx.plan();
    assert!(plan.isolated.is_empty());
    assert!(plan.isolation_event(&fx.obs, now()).is_none());
}

#[test]
fn an_isolated_member_within_the_grace_period_is_not_repaired_either() {
    // Before and after the grace: the same, nothing.
    for since in [100_000 - 5, LONG] {
        let mut fx = healthy_leading_at(3, 5000);
        isolate(&mut fx, "etcd-1", 4999);
        fx.pod_mut("etcd-1").ready_changed_at = Some(at(since));
        let step = fx.step();
        assert!(!touches(&step, "etcd-1"), "{since}: {step:?}");
    }
}

#[test]
fn a_leader_cut_off_from_its_followers_is_left_alone_once_they_elected_another() {
    let mut fx = healthy_leading_at(3, 5000);
    // The followers elected etcd-1; etcd-0 (the old leader) is cut off, still naming itself.
    fx.set_leader("etcd-1");
    fx.answer("etcd-0", Answer::NoQuorum);
    for o in &mut fx.obs.etcd.endpoints {
        if o.endpoint == client("etcd-0")
            && let Ok(s) = o.status.as_mut()
        {
            s.leader = id_of("etcd-0");
            s.raft_term = 1;
            s.raft_index = 4990;
        }
    }
    let pod = fx.pod_mut("etcd-0");
    pod.ready = false;
    pod.ready_changed_at = Some(at(LONG));
    let plan = fx.plan();
    assert!(!touches(&plan.step, "etcd-0"), "{:?}", plan.step);
    let (reason, message) = member_ready(&fx, &plan, "etcd-0");
    assert_eq!(reason, "Isolated");
    assert!(
        message.contains("serves no read") && message.contains("lags"),
        "{message}"
    );
    for step in passes(&mut fx, 600) {
        assert!(!touches(&step, "etcd-0"), "{step:?}");
    }
}

#[test]
fn other_members_repairs_still_run_beside_an_isolated_one() {
    let mut fx = healthy_leading_at(5, 5000);
    isolate(&mut fx, "etcd-1", 4000);
    hang(&mut fx, "etcd-3");
    let steps = passes(&mut fx, 4);
    assert_eq!(
        steps[0],
        Step::SetPhase {
            member: "etcd-3".into(),
            phase: MemberPhase::Recreating
        }
    );
    assert_eq!(steps[1].kind(), StepKind::DeletePod);
    assert_eq!(steps[1].member(), Some("etcd-3"));
    assert!(steps.iter().all(|s| !touches(s, "etcd-1")), "{steps:?}");
}

#[test]
fn the_operator_cut_off_from_every_member_changes_nothing_and_says_so() {
    let mut fx = healthy_leading_at(3, 5000);
    for i in 0..3 {
        hide(&mut fx, &name(i));
    }
    fx.obs.etcd.members = Err(crate::etcd::EtcdError {
        call: "MemberList",
        endpoints: "all".into(),
        kind: crate::etcd::EtcdErrorKind::Timeout,
        detail: "deadline exceeded".into(),
    });
    // Automatic recovery due long ago: still nothing.
    fx.obs.cluster.spec.quorum_recovery = Some(QuorumRecoverySpec {
        mode: Some(QuorumRecoveryMode::Automatic),
        after: Some("1s".into()),
    });
    let plan = fx.plan();
    match &plan.step {
        Step::Wait { reason, message } => {
            assert_eq!(*reason, WaitReason::EtcdUnreachable);
            assert!(message.contains("3/3 voters' Pods are Ready"), "{message}");
            assert!(message.contains("cut off"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let (status, reason, message) = condition(&fx, &plan, "Available");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("Unknown", "EtcdUnreachable"),
        "{message}"
    );
    assert!(message.contains("etcd-0, etcd-1, etcd-2"), "{message}");
    let (status, reason, _) = condition(&fx, &plan, "Degraded");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("Unknown", "EtcdUnreachable")
    );
    let (reason, message) = member_ready(&fx, &plan, "etcd-1");
    assert_eq!(reason, "Unreachable");
    assert!(message.contains("Pod is Ready"), "{message}");
    assert!(
        plan.event(&fx.obs, now()).is_some(),
        "a Warning when it turns"
    );
    // An hour of passes (its Pods staying Ready): nothing destructive, no recovery.
    for (i, step) in passes(&mut fx, 3600).into_iter().enumerate() {
        assert!(
            !step.is_destructive() && !step.mutates(),
            "pass {i}: {step:?}"
        );
    }
    let status = fx.obs.cluster.status.clone().unwrap();
    assert!(status.quorum_recovery.is_none());
    // The status is not rewritten at every pass.
    assert!(fx.plan().cluster_status.is_none());
}

/// Found by the end-to-end test: a cut right after the members started was reported as
/// "waiting for quorum while members start" for a minute.
#[test]
fn a_cut_right_after_the_members_started_is_reported_at_once() {
    let mut fx = healthy_leading_at(3, 5000);
    for i in 0..3 {
        hide(&mut fx, &name(i));
        fx.pod_mut(&name(i)).started_at = Some(at(100_000 - 10));
    }
    match fx.step() {
        Step::Wait { reason, .. } => assert_eq!(reason, WaitReason::EtcdUnreachable),
        other => panic!("{other:?}"),
    }
}

#[test]
fn no_member_answering_with_pods_not_ready_is_an_outage_not_a_cut() {
    let mut fx = healthy_leading_at(3, 5000);
    for i in 0..3 {
        hang(&mut fx, &name(i));
    }
    let plan = fx.plan();
    let (status, reason, _) = condition(&fx, &plan, "Available");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ClusterUnreachable")
    );
    match &plan.step {
        Step::Wait { reason, message } => {
            assert_eq!(*reason, WaitReason::EtcdUnreachable);
            assert!(message.contains("fewer than a quorum"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_operator_cut_off_from_some_members_repairs_none_of_them() {
    let mut fx = healthy_leading_at(3, 5000);
    hide(&mut fx, "etcd-1");
    hide(&mut fx, "etcd-2");
    let plan = fx.plan();
    let (status, reason, message) = condition(&fx, &plan, "Degraded");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "MembersUnhealthy")
    );
    assert!(
        message.contains("not answering the operator while their Pods are Ready")
            && message.contains("etcd-1, etcd-2"),
        "{message}"
    );
    for step in passes(&mut fx, 600) {
        assert!(
            !touches(&step, "etcd-1") && !touches(&step, "etcd-2"),
            "{step:?}"
        );
    }
}

// Properties.

#[derive(Clone, Copy, Debug)]
enum Seen {
    Serving,
    /// Answers Status without a leader; its Pod ready or not.
    Isolated(bool),
    /// No answer, its Pod Ready.
    Hidden,
    /// No answer, its Pod not ready.
    Hung,
    /// Its data directory wiped: etcd refuses to start (positive evidence of loss).
    Wiped,
}

fn seen() -> impl Strategy<Value = Seen> {
    prop_oneof![
        4 => Just(Seen::Serving),
        2 => any::<bool>().prop_map(Seen::Isolated),
        2 => Just(Seen::Hidden),
        1 => Just(Seen::Hung),
        2 => Just(Seen::Wiped),
    ]
}

fn build(members: &[Seen], since: i64, automatic: bool, repairing: Option<usize>) -> Fx {
    let mut fx = healthy_leading_at(members.len() as u32, 5000);
    for (i, s) in members.iter().enumerate() {
        let m = name(i as u32);
        match s {
            Seen::Serving => {}
            Seen::Isolated(ready) => {
                isolate(&mut fx, &m, 4000);
                fx.pod_mut(&m).ready = *ready;
                fx.pod_mut(&m).ready_changed_at = Some(at(since));
            }
            Seen::Hidden => hide(&mut fx, &m),
            Seen::Hung => {
                hang(&mut fx, &m);
                fx.pod_mut(&m).ready_changed_at = Some(at(since));
            }
            Seen::Wiped => {
                hang(&mut fx, &m);
                let pod = fx.pod_mut(&m);
                pod.restart_count = 4;
                pod.waiting_reason = Some("CrashLoopBackOff".into());
                pod.termination_message =
                    Some(format!("... {}: ...", crate::build::DISCOVERY_FAILED));
            }
        }
    }
    // Without a serving majority nobody serves (and isolation is not a thing).
    let serving = members
        .iter()
        .filter(|s| matches!(s, Seen::Serving))
        .count() as u32;
    if serving < quorum(members.len() as u32) {
        for (i, s) in members.iter().enumerate() {
            if matches!(s, Seen::Serving) {
                fx.answer(&name(i as u32), Answer::NoQuorum);
            }
        }
    }
    if members
        .iter()
        .all(|s| matches!(s, Seen::Hidden | Seen::Hung | Seen::Wiped))
    {
        fx.obs.etcd.members = Err(crate::etcd::EtcdError {
            call: "MemberList",
            endpoints: "all".into(),
            kind: crate::etcd::EtcdErrorKind::Timeout,
            detail: "deadline exceeded".into(),
        });
    }
    if automatic {
        fx.obs.cluster.spec.quorum_recovery = Some(QuorumRecoverySpec {
            mode: Some(QuorumRecoveryMode::Automatic),
            after: Some("1s".into()),
        });
        fx.status_mut().conditions = Some(vec![Condition {
            type_: "Available".into(),
            status: "False".into(),
            reason: "QuorumLost".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(at(0)),
        }]);
    }
    if let Some(i) = repairing {
        let m = name((i % members.len()) as u32);
        fx.set_phase(&m, MemberPhase::Recreating, at(100_000 - 1));
    }
    fx
}

fn in_repair(fx: &Fx) -> usize {
    fx.obs
        .members
        .iter()
        .filter(|m| {
            matches!(
                m.member.status.as_ref().and_then(|s| s.phase),
                Some(MemberPhase::Recreating | MemberPhase::Replacing)
            )
        })
        .count()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Over many passes: a member the operator sees isolated (answering, a majority serving
    /// without it) or cannot reach while its Pod is Ready is never the subject of a
    /// destructive step or a repair; never two members in repair at once; never a quorum
    /// recovery while a majority serves or while a quorum of the voters' Pods is Ready.
    #[test]
    fn nothing_destructive_for_what_only_the_operator_sees(
        members in prop_oneof![
            proptest::collection::vec(seen(), 3),
            proptest::collection::vec(seen(), 5),
        ],
        since in prop_oneof![Just(100_000 - 5), Just(LONG), Just(0i64)],
        automatic in any::<bool>(),
        repairing in proptest::option::weighted(0.2, 0usize..5),
    ) {
        let mut fx = build(&members, since, automatic, repairing);
        let n = members.len() as u32;
        let serving = members.iter().filter(|s| matches!(s, Seen::Serving)).count() as u32;
        let pods_ready = members
            .iter()
            .filter(|s| matches!(s, Seen::Serving | Seen::Hidden | Seen::Isolated(true)))
            .count() as u32;
        for pass in 0..30 {
            let before = in_repair(&fx);
            let plan = plan_next_step(&fx.obs, at(100_000 + pass));
            fx.write_statuses(&plan);
            for (i, s) in members.iter().enumerate() {
                let m = name(i as u32);
                // A repair already under way (written before the fault) goes on.
                if repairing.is_some_and(|r| r % members.len() == i) {
                    continue;
                }
                let spared = match s {
                    Seen::Hidden => true,
                    Seen::Isolated(_) => serving >= quorum(n),
                    _ => false,
                };
                if spared {
                    prop_assert!(!touches(&plan.step, &m), "{members:?}: pass {pass} {:?}", plan.step);
                }
            }
            // (A lost-quorum recovery recreates its survivor while the lost members are
            // being replaced: that is one operation, rule 3's.)
            let recovering = fx
                .obs
                .cluster
                .status
                .as_ref()
                .is_some_and(|s| s.quorum_recovery.is_some());
            if !recovering {
                prop_assert!(in_repair(&fx) <= before.max(1), "{members:?}: two repairs at once after {:?}", plan.step);
            }
            if serving >= quorum(n) || pods_ready >= quorum(n) {
                let started = plan
                    .cluster_status
                    .as_ref()
                    .and_then(|s| s.quorum_recovery.as_ref())
                    .is_some();
                prop_assert!(!started, "{members:?}: a recovery with a majority reachable");
            }
        }
    }
}
