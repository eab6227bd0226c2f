//! Rules 3 and 8: lost-quorum classification and recovery, tables, a whole recovery applied
//! step by step (with a crash before every step), and properties over generated states.

use etcd_operator_api::MemberPhase;
use etcd_operator_api::cluster::{
    QuorumRecoveryMode, QuorumRecoveryPhase, QuorumRecoverySpec, RECOVER_QUORUM_ANNOTATION,
};
use etcd_operator_api::labels::quorum;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use proptest::prelude::*;

use super::fixtures::*;
use crate::build::DISCOVERY_FAILED;
use crate::plan::rules::quorum::{Verdict, classify};
use crate::plan::{FORCE_NEW_CLUSTER_ANNOTATION, Plan, PodPhase, Step, WaitReason, plan_next_step};

/// The member's PVC was wiped under its running Pod: etcd restarts on an empty data directory
/// and refuses to start (`OwnData`), crash-looping.
fn wipe(fx: &mut Fx, member: &str) {
    let pod = fx.pod_mut(member);
    pod.ready = false;
    pod.restart_count = 4;
    pod.waiting_reason = Some("CrashLoopBackOff".into());
    pod.termination_message = Some(format!("... {DISCOVERY_FAILED}: ...")); // etcd's last words
    fx.answer(member, Answer::Down);
}

/// The survivor answers Status without quorum, at `index`.
fn no_quorum(fx: &mut Fx, member: &str, index: u64) {
    fx.pod_mut(member).ready = false;
    fx.answer(member, Answer::NoQuorum);
    for o in &mut fx.obs.etcd.endpoints {
        if o.endpoint == client(member)
            && let Ok(s) = o.status.as_mut()
        {
            s.raft_index = index;
            s.leader = 0;
        }
    }
}

pub(super) fn available_false_since(fx: &mut Fx, since: i64) {
    fx.status_mut().conditions = Some(vec![Condition {
        type_: "Available".into(),
        status: "False".into(),
        reason: "QuorumLost".into(),
        message: String::new(),
        observed_generation: None,
        last_transition_time: Time(at(since)),
    }]);
}

pub(super) fn automatic(fx: &mut Fx, after: &str) {
    fx.obs.cluster.spec.quorum_recovery = Some(QuorumRecoverySpec {
        mode: Some(QuorumRecoveryMode::Automatic),
        after: Some(after.into()),
    });
}

pub(super) fn request(fx: &mut Fx, value: &str) {
    fx.obs
        .cluster
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(RECOVER_QUORUM_ANNOTATION.into(), value.into());
}

/// 3 members, etcd-1 and etcd-2 wiped, etcd-0 answering at index 1000; rule 7 has already
/// sent the first wiped member to Replacing (DataLost), as it does first thing.
pub(super) fn two_of_three_wiped() -> Fx {
    let mut fx = Fx::healthy(3);
    wipe(&mut fx, "etcd-1");
    wipe(&mut fx, "etcd-2");
    no_quorum(&mut fx, "etcd-0", 1000);
    settle(&mut fx);
    fx
}

/// Applies the phase-only passes (rule 7 marking wiped members) until a pass does more.
fn settle(fx: &mut Fx) {
    for _ in 0..5 {
        let plan = fx.plan();
        if !matches!(plan.step, Step::SetPhase { .. }) {
            return;
        }
        fx.write_statuses(&plan);
    }
}

fn recovery(plan: &Plan) -> Option<etcd_operator_api::cluster::QuorumRecoveryStatus> {
    plan.cluster_status.as_ref()?.quorum_recovery.clone()
}

#[test]
fn classify_healthy_transient_partition_cut_off_lost_and_all_lost() {
    let fx = Fx::healthy(3);
    assert_eq!(classify(&ctx(&fx)).verdict, Verdict::Healthy);

    // Two Pods restarting on their data (not running, PVCs bound): an outage.
    let mut fx = Fx::healthy(3);
    for m in ["etcd-1", "etcd-2"] {
        fx.without_pod(m);
        fx.answer(m, Answer::Down);
    }
    no_quorum(&mut fx, "etcd-0", 10);
    assert_eq!(classify(&ctx(&fx)).verdict, Verdict::Transient);

    // Two Pods running but not answering: a partition.
    let mut fx = Fx::healthy(3);
    fx.answer("etcd-1", Answer::Down);
    fx.answer("etcd-2", Answer::Down);
    no_quorum(&mut fx, "etcd-0", 10);
    assert_eq!(classify(&ctx(&fx)).verdict, Verdict::Transient);

    // The operator cut off: nobody answers, every Pod runs.
    let mut fx = Fx::healthy(3);
    for i in 0..3 {
        fx.answer(&name(i), Answer::Down);
    }
    assert_eq!(classify(&ctx(&fx)).verdict, Verdict::Transient);

    let fx = two_of_three_wiped();
    assert_eq!(classify(&ctx(&fx)).verdict, Verdict::LostForGood);

    // The survivor does not answer either: nothing to recover from, for now.
    let mut fx = two_of_three_wiped();
    fx.answer("etcd-0", Answer::Down);
    assert_eq!(classify(&ctx(&fx)).verdict, Verdict::SurvivorUnreachable);

    let mut fx = two_of_three_wiped();
    wipe(&mut fx, "etcd-0");
    assert_eq!(classify(&ctx(&fx)).verdict, Verdict::AllLost);

    // A PVC gone counts as data lost; one wiped of three is not lost quorum.
    let mut fx = Fx::healthy(3);
    wipe(&mut fx, "etcd-1");
    fx.observed_member("etcd-2").pvc = None;
    fx.answer("etcd-2", Answer::Down);
    no_quorum(&mut fx, "etcd-0", 10);
    assert_eq!(classify(&ctx(&fx)).verdict, Verdict::LostForGood);
    let mut fx = Fx::healthy(3);
    wipe(&mut fx, "etcd-1");
    fx.answer("etcd-2", Answer::Down);
    no_quorum(&mut fx, "etcd-0", 10);
    assert_eq!(classify(&ctx(&fx)).verdict, Verdict::Transient);
}

fn ctx(fx: &Fx) -> crate::plan::PassFacts<'_> {
    crate::plan::PassFacts::new(&fx.obs, now())
}

#[test]
fn manual_mode_reports_and_waits_without_the_annotation() {
    let fx = two_of_three_wiped();
    let plan = fx.plan();
    assert_eq!(wait_reason(&plan.step), WaitReason::QuorumLost);
    assert!(recovery(&plan).is_none());
    assert!(
        plan.step.message().contains(RECOVER_QUORUM_ANNOTATION),
        "{}",
        plan.step.message()
    );
}

#[test]
fn the_annotation_starts_it_with_the_record_written_before_the_survivors_pod_goes() {
    let mut fx = two_of_three_wiped();
    request(&mut fx, "auto");
    let plan = fx.plan();
    assert_eq!(
        plan.step,
        Step::DeletePod {
            member: "etcd-0".into(),
            pod: "etcd-0".into(),
            uid: "pod-etcd-0".into()
        }
    );
    let r = recovery(&plan).expect("recorded in the same pass, before the step");
    assert_eq!(r.phase, Some(QuorumRecoveryPhase::ForcingNewCluster));
    assert_eq!(r.survivor, "etcd-0");
    assert_eq!(r.survivor_raft_index, Some(1000));
    assert_eq!(r.survivor_pod_uid.as_deref(), Some("pod-etcd-0"));
    assert_eq!(r.removed, vec!["etcd-1".to_string(), "etcd-2".to_string()]);
    assert!(r.trigger.starts_with("Manual"), "{}", r.trigger);
    assert!(r.may_have_lost.as_deref().unwrap().contains("1000"));
    assert_eq!(
        planned_member_status(&fx, &plan, "etcd-0").phase,
        Some(MemberPhase::Recreating),
        "the survivor's phase is written before its Pod goes"
    );
    let event = plan.recovery_event(&fx.obs, now()).unwrap().unwrap();
    assert_eq!(event.reason.as_deref(), Some("QuorumRecoveryStarted"));
}

#[test]
fn automatic_mode_waits_for_after_then_starts() {
    let mut fx = two_of_three_wiped();
    automatic(&mut fx, "5m");
    available_false_since(&mut fx, 100_000 - 60);
    let plan = fx.plan();
    assert_eq!(wait_reason(&plan.step), WaitReason::QuorumLost);
    assert!(
        plan.step.message().contains("240s"),
        "{}",
        plan.step.message()
    );
    assert!(recovery(&plan).is_none());
    available_false_since(&mut fx, 100_000 - 301);
    let plan = fx.plan();
    assert_eq!(plan.step.kind(), crate::plan::StepKind::DeletePod);
    assert_eq!(recovery(&plan).unwrap().trigger, "Automatic");
}

#[test]
fn automatic_mode_with_after_zero_starts_on_the_first_pass_that_sees_the_loss() {
    // Available still True from before the loss: no pass has recorded it yet.
    let mut fx = two_of_three_wiped();
    automatic(&mut fx, "0s");
    let plan = fx.plan();
    assert_eq!(plan.step.kind(), crate::plan::StepKind::DeletePod);
    assert_eq!(recovery(&plan).unwrap().trigger, "Automatic");
    // Any other `after` counts from the recorded loss.
    let mut fx = two_of_three_wiped();
    automatic(&mut fx, "1s");
    let plan = fx.plan();
    assert_eq!(wait_reason(&plan.step), WaitReason::QuorumLost);
    assert!(recovery(&plan).is_none());
}

#[test]
fn automatic_mode_never_starts_on_an_outage_or_a_partition() {
    for partition in [false, true] {
        let mut fx = Fx::healthy(3);
        for m in ["etcd-1", "etcd-2"] {
            if !partition {
                fx.without_pod(m);
            }
            fx.answer(m, Answer::Down);
        }
        no_quorum(&mut fx, "etcd-0", 10);
        automatic(&mut fx, "1s");
        available_false_since(&mut fx, 0);
        settle(&mut fx);
        let plan = fx.plan();
        assert!(
            recovery(&plan).is_none(),
            "partition={partition}: {:?}",
            plan.step
        );
        assert!(
            !matches!(plan.step, Step::DeletePod { ref member, .. } if member == "etcd-0"),
            "{:?}",
            plan.step
        );
    }
}

#[test]
fn a_request_on_a_healthy_cluster_is_removed_with_a_warning() {
    let mut fx = Fx::healthy(3);
    request(&mut fx, "etcd-1");
    let plan = fx.plan();
    match &plan.step {
        Step::RemoveClusterAnnotation { annotation, why } => {
            assert_eq!(annotation, RECOVER_QUORUM_ANNOTATION);
            assert!(why.contains("nothing to recover"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(plan.step.event_type(), crate::build::EventType::Warning);
    assert!(recovery(&plan).is_none());
}

#[test]
fn a_named_survivor_must_answer_with_data() {
    let mut fx = two_of_three_wiped();
    request(&mut fx, "etcd-1");
    let plan = fx.plan();
    assert_eq!(wait_reason(&plan.step), WaitReason::QuorumRecoveryRefused);
    assert!(
        plan.step.message().contains("DataLost"),
        "{}",
        plan.step.message()
    );
    let mut fx = two_of_three_wiped();
    request(&mut fx, "etcd-9");
    assert_eq!(wait_reason(&fx.step()), WaitReason::QuorumRecoveryRefused);
}

#[test]
fn all_lost_is_refused_pointing_at_a_snapshot() {
    let mut fx = two_of_three_wiped();
    wipe(&mut fx, "etcd-0");
    request(&mut fx, "auto");
    settle(&mut fx);
    let plan = fx.plan();
    assert_eq!(wait_reason(&plan.step), WaitReason::QuorumRecoveryRefused);
    assert!(
        plan.step.message().contains("EtcdSnapshot"),
        "{}",
        plan.step.message()
    );
}

#[test]
fn the_survivor_is_the_answering_voter_with_the_highest_raft_index() {
    let mut fx = Fx::healthy(5);
    for m in ["etcd-0", "etcd-2", "etcd-4"] {
        wipe(&mut fx, m);
    }
    no_quorum(&mut fx, "etcd-1", 500);
    no_quorum(&mut fx, "etcd-3", 700);
    request(&mut fx, "auto");
    settle(&mut fx);
    let plan = fx.plan();
    let r = recovery(&plan).unwrap();
    assert_eq!(r.survivor, "etcd-3");
    assert!(
        r.removed.contains(&"etcd-1".to_string()),
        "a lower-index member with data is rebuilt too"
    );
    // Named, the lower one is taken, and the loss is reported.
    let mut fx2 = Fx::healthy(5);
    for m in ["etcd-0", "etcd-2", "etcd-4"] {
        wipe(&mut fx2, m);
    }
    no_quorum(&mut fx2, "etcd-1", 500);
    no_quorum(&mut fx2, "etcd-3", 700);
    request(&mut fx2, "etcd-1");
    settle(&mut fx2);
    let r = recovery(&fx2.plan()).unwrap();
    assert_eq!(r.survivor, "etcd-1");
    assert!(r.may_have_lost.unwrap().contains("200 entries"));
}

/// Applies `step` to the world as the API server and etcd would.
pub(super) fn apply(fx: &mut Fx, step: &Step, counter: &mut u32) {
    match step {
        Step::DeletePod { member, .. } => fx.without_pod(member),
        Step::CreatePod(pod) => {
            *counter += 1;
            let member = pod.metadata.name.clone().unwrap();
            let mut facts = running_pod(&member);
            facts.uid = format!("pod-{member}-{counter}");
            facts.annotations = pod.metadata.annotations.clone().unwrap_or_default();
            facts.ready = false;
            let forced = facts
                .annotations
                .get(FORCE_NEW_CLUSTER_ANNOTATION)
                .is_some_and(|v| v == "true");
            let env_reads_it = pod.spec.as_ref().unwrap().containers[0]
                .env
                .iter()
                .flatten()
                .any(|e| e.name == "ETCD_FORCE_NEW_CLUSTER");
            fx.with_pod(&member, facts);
            if forced && env_reads_it {
                // etcd starts alone with its data, a cluster of one.
                let list = fx.obs.etcd.members.as_mut().unwrap();
                list.retain(|m| m.name == member);
                fx.obs
                    .etcd
                    .endpoints
                    .retain(|o| o.endpoint == client(&member));
                fx.answer(&member, Answer::Healthy);
                fx.set_leader(&member);
                fx.pod_mut(&member).ready = true;
            }
        }
        Step::PatchPodMetadata {
            member,
            annotations,
            ..
        } => {
            let pod = fx.pod_mut(member);
            pod.annotations.extend(annotations.clone());
        }
        Step::DeletePvc { member, .. } => fx.observed_member(member).pvc = None,
        Step::RemoveEtcdMember { member, .. } => fx.etcd_remove(member.as_deref().unwrap()),
        Step::RemoveClusterAnnotation { annotation, .. } => {
            if let Some(a) = fx.obs.cluster.metadata.annotations.as_mut() {
                a.remove(annotation);
            }
        }
        Step::Wait { .. } | Step::SetPhase { .. } | Step::Idle => {}
        other => panic!("unexpected step in the recovery: {other:?}"),
    }
}

/// Runs the recovery from `fx` until it is Completed, crashing once before every step when
/// `crash` (the statuses written, the step not performed: the next pass must resume).
fn run_recovery(mut fx: Fx, crash: bool) -> Fx {
    let mut counter = 0;
    let mut destructive_in_flight = 0;
    for pass in 0..60 {
        let plan = plan_next_step(&fx.obs, at(100_000 + pass));
        fx.write_statuses(&plan);
        if crash && plan.step.mutates() {
            // The operator dies before the step; the next process plans again.
            let again = plan_next_step(&fx.obs, at(100_000 + pass));
            assert_eq!(
                again.step.kind(),
                plan.step.kind(),
                "a resumed pass does the same step"
            );
        }
        if plan.step.is_destructive() {
            destructive_in_flight += 1;
        }
        assert!(destructive_in_flight <= pass as usize + 1);
        apply(&mut fx, &plan.step, &mut counter);
        let r = fx
            .obs
            .cluster
            .status
            .as_ref()
            .and_then(|s| s.quorum_recovery.clone());
        if r.as_ref().and_then(|r| r.phase) == Some(QuorumRecoveryPhase::Completed)
            && fx
                .obs
                .cluster
                .metadata
                .annotations
                .as_ref()
                .is_none_or(|a| !a.contains_key(RECOVER_QUORUM_ANNOTATION))
        {
            return fx;
        }
    }
    panic!(
        "the recovery did not complete: {:?}",
        fx.obs
            .cluster
            .status
            .as_ref()
            .and_then(|s| s.quorum_recovery.clone())
    );
}

#[test]
fn a_whole_recovery_forces_once_unforces_and_resets_every_other_member() {
    for crash in [false, true] {
        let mut fx = two_of_three_wiped();
        request(&mut fx, "auto");
        let fx = run_recovery(fx, crash);
        let pod = fx.obs.members[0].pod.as_ref().unwrap();
        assert_eq!(
            pod.annotations
                .get(FORCE_NEW_CLUSTER_ANNOTATION)
                .map(String::as_str),
            Some("false"),
            "the flag does not persist into later restarts"
        );
        assert_eq!(
            pod.uid, "pod-etcd-0-1",
            "the survivor's Pod was recreated exactly once"
        );
        for m in ["etcd-1", "etcd-2"] {
            let om = fx
                .obs
                .members
                .iter()
                .find(|o| o.member.metadata.name.as_deref() == Some(m))
                .unwrap();
            let status = om.member.status.as_ref().unwrap();
            assert_eq!(status.phase, Some(MemberPhase::Provisioning), "{m}");
            assert_eq!(status.member_id, None, "{m} forgot its identity");
            assert!(
                om.pod.is_none() && om.pvc.is_none(),
                "{m}'s Pod and data are gone"
            );
        }
        let r = fx
            .obs
            .cluster
            .status
            .as_ref()
            .unwrap()
            .quorum_recovery
            .clone()
            .unwrap();
        assert!(r.forced_time.is_some() && r.completion_time.is_some());
        // Then the usual joins: the next step works on a removed member or idles, never forces.
        let next = fx.step();
        assert!(
            !matches!(next, Step::DeletePod { ref member, .. } if member == "etcd-0"),
            "{next:?}"
        );
    }
}

#[test]
fn a_majority_back_before_the_survivors_pod_goes_aborts() {
    let mut fx = two_of_three_wiped();
    request(&mut fx, "auto");
    let plan = fx.plan();
    fx.write_statuses(&plan);
    // The step did not run (crash); meanwhile the others came back.
    for m in ["etcd-0", "etcd-1", "etcd-2"] {
        fx.answer(m, Answer::Healthy);
    }
    fx.set_leader("etcd-1");
    let plan = fx.plan();
    assert_eq!(
        recovery(&plan).unwrap().phase,
        Some(QuorumRecoveryPhase::Aborted)
    );
    assert!(!plan.step.is_destructive(), "{:?}", plan.step);
}

#[test]
fn a_forced_pod_is_unforced_before_any_member_is_touched() {
    let mut fx = two_of_three_wiped();
    request(&mut fx, "auto");
    let mut counter = 0;
    for _ in 0..2 {
        let plan = fx.plan();
        fx.write_statuses(&plan);
        apply(&mut fx, &plan.step, &mut counter);
    }
    // The forced Pod runs alone: the next step unforces it.
    let plan = fx.plan();
    match &plan.step {
        Step::PatchPodMetadata { annotations, .. } => assert_eq!(
            annotations
                .get(FORCE_NEW_CLUSTER_ANNOTATION)
                .map(String::as_str),
            Some("false")
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        recovery(&plan).unwrap().phase,
        Some(QuorumRecoveryPhase::Rebuilding)
    );
}

/// A generated member for the properties.
#[derive(Clone, Debug)]
enum Gen {
    Serving,
    NoQuorum(u64),
    Wiped,
    PvcGone,
    DownPodRunning,
    DownNoPod,
}

fn gen_member() -> impl Strategy<Value = Gen> {
    prop_oneof![
        3 => Just(Gen::Serving),
        2 => (1u64..2000).prop_map(Gen::NoQuorum),
        2 => Just(Gen::Wiped),
        1 => Just(Gen::PvcGone),
        2 => Just(Gen::DownPodRunning),
        1 => Just(Gen::DownNoPod),
    ]
}

fn build(members: &[Gen], automatic_mode: bool, annotation: Option<u8>) -> Fx {
    let mut fx = Fx::healthy(members.len() as u32);
    for (i, g) in members.iter().enumerate() {
        let m = name(i as u32);
        match g {
            Gen::Serving => {}
            Gen::NoQuorum(index) => no_quorum(&mut fx, &m, *index),
            Gen::Wiped => wipe(&mut fx, &m),
            Gen::PvcGone => {
                fx.observed_member(&m).pvc = None;
                fx.without_pod(&m);
                fx.answer(&m, Answer::Down);
            }
            Gen::DownPodRunning => {
                fx.pod_mut(&m).ready = false;
                fx.answer(&m, Answer::Down);
            }
            Gen::DownNoPod => {
                fx.without_pod(&m);
                fx.answer(&m, Answer::Down);
            }
        }
    }
    // Serving members without a quorum of them do not serve.
    let serving = members.iter().filter(|g| matches!(g, Gen::Serving)).count() as u32;
    if serving < quorum(members.len() as u32) {
        for (i, g) in members.iter().enumerate() {
            if matches!(g, Gen::Serving) {
                no_quorum(&mut fx, &name(i as u32), 900);
            }
        }
    }
    if automatic_mode {
        automatic(&mut fx, "1s");
    }
    available_false_since(&mut fx, 0);
    match annotation {
        Some(0) => request(&mut fx, "auto"),
        Some(n) => request(&mut fx, &name(u32::from(n) % members.len() as u32)),
        None => {}
    }
    settle(&mut fx);
    fx
}

fn starts_recovery(plan: &Plan) -> bool {
    recovery(plan).is_some_and(|r| r.phase == Some(QuorumRecoveryPhase::ForcingNewCluster))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Never a recovery while a majority answers linearizably; never automatic recovery
    /// without evidence that a majority's data is gone; at most one step per pass, and a
    /// start deletes only the survivor's Pod, a member that answers with data.
    #[test]
    fn recovery_only_when_a_majority_is_lost(
        members in prop_oneof![
            proptest::collection::vec(gen_member(), 3),
            proptest::collection::vec(gen_member(), 5),
        ],
        automatic_mode in any::<bool>(),
        annotation in proptest::option::of(0u8..6),
    ) {
        let fx = build(&members, automatic_mode, annotation);
        let plan = fx.plan();
        let n = members.len() as u32;
        let serving = members.iter().filter(|g| matches!(g, Gen::Serving)).count() as u32;
        let may_have_data = members
            .iter()
            .filter(|g| !matches!(g, Gen::Wiped | Gen::PvcGone))
            .count() as u32;
        if serving >= quorum(n) {
            prop_assert!(!starts_recovery(&plan), "a majority serves: {:?}", plan.step);
        }
        if annotation.is_none() && may_have_data >= quorum(n) {
            prop_assert!(!starts_recovery(&plan), "no evidence of a lost majority: {:?}", plan.step);
        }
        if starts_recovery(&plan) {
            let r = recovery(&plan).unwrap();
            let i: usize = r.survivor.strip_prefix("etcd-").unwrap().parse().unwrap();
            let survivor_answers = matches!(members[i], Gen::NoQuorum(_))
                || (matches!(members[i], Gen::Serving) && serving < quorum(n));
            prop_assert!(survivor_answers, "{:?} {:?}", members, r);
            match &plan.step {
                Step::DeletePod { member, .. } => prop_assert_eq!(member, &r.survivor),
                other => prop_assert!(false, "the first step deletes the survivor's Pod: {:?}", other),
            }
            if annotation.is_none() || annotation == Some(0) {
                // auto: the highest raft index among the answering.
                let best = members.iter().enumerate().filter_map(|(j, g)| match g {
                    Gen::NoQuorum(x) => Some((j, *x)),
                    Gen::Serving => Some((j, 900)),
                    _ => None,
                }).map(|(_, x)| x).max().unwrap();
                let mine = match members[i] { Gen::NoQuorum(x) => x, _ => 900 };
                prop_assert_eq!(mine, best);
            }
        }
    }

    /// From any recorded recovery state, a pass never takes more than one destructive step
    /// and never creates a forced Pod for anyone but the survivor.
    #[test]
    fn a_running_recovery_forces_only_the_survivor(
        wiped in proptest::collection::vec(any::<bool>(), 3),
        steps in 0usize..12,
    ) {
        let mut fx = Fx::healthy(3);
        for (i, w) in wiped.iter().enumerate() {
            if *w { wipe(&mut fx, &name(i as u32)); }
        }
        no_quorum(&mut fx, "etcd-0", 1000);
        request(&mut fx, "etcd-0");
        settle(&mut fx);
        let mut counter = 0;
        for pass in 0..steps {
            let plan = plan_next_step(&fx.obs, at(100_000 + pass as i64));
            fx.write_statuses(&plan);
            if let Step::CreatePod(pod) = &plan.step
                && pod.metadata.annotations.as_ref().and_then(|a| a.get(FORCE_NEW_CLUSTER_ANNOTATION)).is_some()
            {
                prop_assert_eq!(pod.metadata.name.as_deref(), Some("etcd-0"));
            }
            if matches!(plan.step, Step::Wait { .. } | Step::Idle | Step::SetPhase { .. } | Step::DeletePod { .. } | Step::CreatePod(_) | Step::PatchPodMetadata { .. } | Step::DeletePvc { .. } | Step::RemoveEtcdMember { .. } | Step::RemoveClusterAnnotation { .. }) {
                apply(&mut fx, &plan.step, &mut counter);
            } else {
                break;
            }
        }
        let _ = PodPhase::Running;
    }
}
