//! Property tests of the safety invariants over generated observed states.
//!
//! - never two membership changes in flight: no MemberAdd while a learner is unpromoted, a
//!   member is added but not started, or a member is on its way out of etcd;
//! - never a step that takes a healthy voter away (Pod deletion, MemberRemove, EtcdMember
//!   deletion) unless the healthy voters left are at least a quorum of the voter set left;
//! - one step per pass, and a stop of several members only when the target is zero;
//! - paused means no mutation;
//! - a memory-backed member is never started on empty data under its old identity;
//! - a terminal PVC-backed Pod is always recovered, even without quorum;
//! - a CORRUPT member is replaced only while the others have quorum and nothing else is being
//!   repaired, and its alarm is disarmed only once etcd no longer lists it.

use etcd_operator_api::MemberPhase;
use etcd_operator_api::labels::quorum;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use proptest::prelude::*;

use super::fixtures::*;
use crate::plan::{Plan, PodPhase, Step, plan_next_step};

/// A member as the generator describes it.
#[derive(Clone, Debug)]
struct MemberModel {
    phase: MemberPhase,
    memory: bool,
    deleting: bool,
    dormant: bool,
    pod: Option<PodModel>,
    pvc: bool,
    /// In etcd: (learner, started).
    etcd: Option<(bool, bool)>,
    answer: Answer,
    recreate_count: i32,
    recorded_uid: bool,
    phase_age: i64,
}

#[derive(Clone, Debug)]
struct PodModel {
    phase: PodPhase,
    ready: bool,
    deleting: bool,
    crash_loop: bool,
    age: i64,
}

#[derive(Clone, Debug)]
struct ClusterModel {
    replicas: i32,
    paused: bool,
    formed: bool,
    members: Vec<MemberModel>,
    leader: usize,
    etcd_list_ok: bool,
    stray: Option<(bool, bool)>,
    /// An active alarm against member (ordinal): CORRUPT when true, else NOSPACE.
    alarm: Option<(usize, bool)>,
}

fn phase() -> impl Strategy<Value = MemberPhase> {
    prop_oneof![
        1 => Just(MemberPhase::Pending),
        1 => Just(MemberPhase::Provisioning),
        3 => Just(MemberPhase::Ready),
        1 => Just(MemberPhase::Recreating),
        1 => Just(MemberPhase::Replacing),
        1 => Just(MemberPhase::Terminating),
    ]
}

fn answer() -> impl Strategy<Value = Answer> {
    prop_oneof![
        3 => Just(Answer::Healthy),
        1 => Just(Answer::Learner),
        1 => Just(Answer::NoQuorum),
        2 => Just(Answer::Down),
    ]
}

fn pod() -> impl Strategy<Value = PodModel> {
    (
        prop_oneof![
            4 => Just(PodPhase::Running),
            1 => Just(PodPhase::Pending),
            1 => Just(PodPhase::Succeeded),
            1 => Just(PodPhase::Failed),
        ],
        any::<bool>(),
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.2),
        prop_oneof![Just(5i64), Just(100), Just(10_000)],
    )
        .prop_map(|(phase, ready, deleting, crash_loop, age)| PodModel {
            phase,
            ready,
            deleting,
            crash_loop,
            age,
        })
}

fn member() -> impl Strategy<Value = MemberModel> {
    (
        phase(),
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.15),
        prop::bool::weighted(0.1),
        prop::option::weighted(0.8, pod()),
        prop::bool::weighted(0.9),
        prop::option::weighted(0.85, (prop::bool::weighted(0.2), prop::bool::weighted(0.9))),
        answer(),
        0..5i32,
        any::<bool>(),
        prop_oneof![Just(1i64), Just(30), Just(100_000)],
    )
        .prop_map(
            |(
                phase,
                memory,
                deleting,
                dormant,
                pod,
                pvc,
                etcd,
                answer,
                recreate_count,
                recorded_uid,
                phase_age,
            )| {
                MemberModel {
                    phase,
                    memory,
                    deleting,
                    dormant,
                    pod,
                    pvc,
                    etcd,
                    answer,
                    recreate_count,
                    recorded_uid,
                    phase_age,
                }
            },
        )
}

fn cluster() -> impl Strategy<Value = ClusterModel> {
    (
        0..6i32,
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.85),
        prop::collection::vec(member(), 0..6),
        0..6usize,
        prop::bool::weighted(0.9),
        prop::option::weighted(0.1, (any::<bool>(), any::<bool>())),
        prop::option::weighted(0.2, (0..6usize, any::<bool>())),
    )
        .prop_map(
            |(replicas, paused, formed, members, leader, etcd_list_ok, stray, alarm)| {
                ClusterModel {
                    replicas,
                    paused,
                    formed,
                    members,
                    leader,
                    etcd_list_ok,
                    stray,
                    alarm,
                }
            },
        )
}

fn build(model: &ClusterModel) -> Fx {
    let mut fx = Fx::empty(model.replicas);
    fx.obs.cluster.spec.paused = Some(model.paused);
    if model.formed {
        fx.status_mut().cluster_id = Some("c1".into());
    }
    fx.obs.etcd.members = Ok(Vec::new());
    for (i, m) in model.members.iter().enumerate() {
        let member_name = name(i as u32);
        fx.add_member(&member_name, m.phase);
        let om = fx.observed_member(&member_name);
        if m.memory {
            om.member.spec.storage.medium = Some(etcd_operator_api::shared::StorageMedium::Memory);
        }
        if !m.pvc || m.memory {
            om.pvc = None;
        }
        om.member.spec.dormant = m.dormant.then_some(true);
        if m.deleting {
            om.member.metadata.deletion_timestamp = Some(Time(at(1)));
        }
        let status = om.member.status.get_or_insert_with(Default::default);
        status.recreate_count = Some(m.recreate_count);
        status.last_phase_transition_time = Some(Time(at(100_000 - m.phase_age)));
        status.pod_uid = m.recorded_uid.then(|| format!("pod-{member_name}"));
        if let Some(p) = &m.pod {
            let mut facts = running_pod(&member_name);
            facts.phase = p.phase;
            facts.ready = p.ready;
            facts.deleting = p.deleting;
            facts.started_at = Some(at(100_000 - p.age));
            if p.crash_loop {
                facts.ready = false;
                facts.restart_count = 5;
                facts.waiting_reason = Some("CrashLoopBackOff".into());
            }
            fx.with_pod(&member_name, facts);
        }
        if let Some((learner, started)) = m.etcd {
            fx.etcd_add(&member_name, learner, started);
            // Only a running Pod can answer.
            let serving = m.pod.as_ref().is_some_and(|p| p.phase == PodPhase::Running) && started;
            let answer = match m.answer {
                _ if !serving => Answer::Down,
                Answer::Healthy if learner => Answer::Learner,
                other => other,
            };
            fx.answer(&member_name, answer);
        }
    }
    if let Some((learner, started)) = model.stray {
        fx.obs
            .etcd
            .members
            .as_mut()
            .unwrap()
            .push(crate::etcd::MemberInfo {
                id: 0xdead,
                name: if started {
                    "stray".into()
                } else {
                    String::new()
                },
                peer_urls: vec!["http://stray:2380".into()],
                client_urls: vec![],
                is_learner: learner,
            });
    }
    if !model.members.is_empty() {
        fx.set_leader(&name((model.leader % model.members.len()) as u32));
    }
    if let Some((ordinal, corrupt)) = model.alarm {
        let kind = if corrupt {
            crate::etcd::AlarmKind::Corrupt
        } else {
            crate::etcd::AlarmKind::NoSpace
        };
        fx.alarm(&name(ordinal as u32), kind);
    }
    if !model.etcd_list_ok {
        fx.obs.etcd.members = Err(crate::etcd::EtcdError {
            call: "MemberList",
            endpoints: "all".into(),
            kind: crate::etcd::EtcdErrorKind::Unreachable,
            detail: "down".into(),
        });
    }
    fx
}

/// The voter set and its healthy part, computed from the view independently of the planner.
fn quorum_after_losing(fx: &Fx, id: u64, removed: bool) -> bool {
    let list = fx.obs.etcd.member_list();
    let voters: Vec<u64> = list
        .iter()
        .filter(|m| !m.is_learner)
        .map(|m| m.id)
        .collect();
    if !voters.contains(&id) {
        return true;
    }
    let healthy =
        |v: &u64| {
            fx.obs.etcd.endpoints.iter().any(|o| {
                o.status.as_ref().is_ok_and(|s| s.member_id == *v) && o.health == Some(Ok(()))
            })
        };
    let target_healthy = healthy(&id);
    let healthy_count = voters.iter().filter(|v| healthy(v)).count() as u32;
    let after = healthy_count - u32::from(target_healthy);
    let set_after = voters.len() as u32 - u32::from(removed);
    !target_healthy || set_after == 0 || after >= quorum(set_after)
}

/// The healthy voters other than `id` are a quorum of the voter set (computed from the view).
fn others_have_quorum(fx: &Fx, id: u64) -> bool {
    let list = fx.obs.etcd.member_list();
    let voters: Vec<u64> = list
        .iter()
        .filter(|m| !m.is_learner)
        .map(|m| m.id)
        .collect();
    let healthy = voters
        .iter()
        .filter(|v| **v != id)
        .filter(|v| {
            fx.obs.etcd.endpoints.iter().any(|o| {
                o.status.as_ref().is_ok_and(|s| s.member_id == **v) && o.health == Some(Ok(()))
            })
        })
        .count() as u32;
    !voters.is_empty() && healthy >= quorum(voters.len() as u32)
}

fn member_model<'a>(model: &'a ClusterModel, member: &str) -> Option<&'a MemberModel> {
    let ordinal: usize = member.strip_prefix("etcd-")?.parse().ok()?;
    model.members.get(ordinal)
}

fn check(model: &ClusterModel, fx: &Fx, plan: &Plan) -> Result<(), TestCaseError> {
    let step = &plan.step;
    let deleting_cluster = fx.obs.cluster.metadata.deletion_timestamp.is_some();

    if model.paused {
        prop_assert!(!step.mutates(), "paused but {step:?}");
    }

    if let Step::AddLearner { .. } = step {
        let list = fx.obs.etcd.member_list();
        prop_assert!(
            !list.iter().any(|m| m.is_learner),
            "MemberAdd with a learner in etcd"
        );
        prop_assert!(
            list.iter().all(|m| m.has_started()),
            "MemberAdd with a half-added member"
        );
        for (i, m) in model.members.iter().enumerate() {
            let half_removed = m.etcd.is_some()
                && (m.deleting
                    || matches!(m.phase, MemberPhase::Replacing | MemberPhase::Terminating));
            prop_assert!(!half_removed, "MemberAdd while etcd-{i} is leaving");
        }
    }

    if !deleting_cluster {
        match step {
            Step::RemoveEtcdMember { id, .. } => {
                prop_assert!(
                    quorum_after_losing(fx, *id, true),
                    "MemberRemove breaks quorum: {step:?}"
                );
            }
            Step::DeletePod { member, .. } | Step::DeleteMember { member } => {
                let dormant_stop =
                    model.replicas == 0 && member_model(model, member).is_some_and(|m| m.dormant);
                if !dormant_stop {
                    let removed = matches!(step, Step::DeleteMember { .. });
                    prop_assert!(
                        quorum_after_losing(fx, id_of(member), removed),
                        "{step:?} takes a healthy voter below quorum"
                    );
                }
            }
            Step::SetDormant { dormant: true, .. } => {
                prop_assert_eq!(
                    model.replicas,
                    0,
                    "members stopped while the target is not zero"
                );
            }
            _ => {}
        }
    }

    if let Step::CreatePod(pod) = step {
        let member = pod.metadata.name.clone().unwrap_or_default();
        let m = member_model(model, &member).expect("a Pod for a generated member");
        if m.memory {
            let started = m.etcd.is_some_and(|(_, started)| started);
            prop_assert!(
                !started && !m.recorded_uid,
                "memory member {member} started on empty data under its old identity"
            );
        }
    }

    // CORRUPT: the named member is replaced only while the other voters have quorum without
    // it and no other member is being repaired; the alarm is disarmed only once etcd no
    // longer lists that member.
    if let Some((ordinal, true)) = model.alarm {
        let named = name(ordinal as u32);
        if let Step::DisarmAlarm { alarm, .. } = step {
            prop_assert!(
                fx.obs
                    .etcd
                    .members
                    .as_ref()
                    .is_ok_and(|l| l.iter().all(|m| m.id != alarm.member_id)),
                "{alarm} disarmed while etcd still lists the member"
            );
        }
        if let Step::SetPhase {
            member,
            phase: MemberPhase::Replacing,
        } = step
            && *member == named
            && member_model(model, member).is_some_and(|m| m.phase != MemberPhase::Replacing)
            && planned_member_status(fx, plan, member)
                .conditions
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Ready" && c.reason == "CorruptAlarm")
        {
            let other_repair = model.members.iter().enumerate().any(|(i, m)| {
                i != ordinal
                    && !m.deleting
                    && !m.dormant
                    && matches!(m.phase, MemberPhase::Recreating | MemberPhase::Replacing)
            });
            prop_assert!(!other_repair, "{named} replaced while another repair runs");
            prop_assert!(
                others_have_quorum(fx, id_of(&named)),
                "{named} replaced for CORRUPT while the others lack quorum"
            );
        }
    }

    // A terminal PVC-backed Pod is recovered first, quorum or not, unless a rule above repair
    // (deletion, pause, leaving members, a foreign cluster ID) holds everything.
    let held = model.paused || model.members.iter().any(|m| m.deleting);
    let terminal = model.members.iter().any(|m| {
        !m.memory
            && !m.deleting
            && !m.dormant
            && !matches!(m.phase, MemberPhase::Pending | MemberPhase::Replacing)
            && m.pod
                .as_ref()
                .is_some_and(|p| p.phase.is_terminal() && !p.deleting)
    });
    if terminal && !held {
        // Dead Pods are handled in member order: this one, or an earlier dead one.
        let recovers = matches!(step, Step::DeletePod { member, .. }
            if member_model(model, member).and_then(|m| m.pod.as_ref()).is_some_and(|p| p.phase.is_terminal()));
        let earlier = matches!(
            step,
            Step::CreatePod(_)
                | Step::SetPhase {
                    phase: MemberPhase::Replacing,
                    ..
                }
        );
        prop_assert!(recovers || earlier, "a terminal Pod waits behind {step:?}");
    }
    Ok(())
}

proptest! {
    // Failing seeds are kept beside this file (properties.proptest-regressions) and replayed.
    #![proptest_config(ProptestConfig {
        cases: 2000,
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::WithSource("proptest-regressions"),
        )),
        ..ProptestConfig::default()
    })]

    #[test]
    fn safety_invariants_hold(model in cluster()) {
        let fx = build(&model);
        let plan = plan_next_step(&fx.obs, now());
        check(&model, &fx, &plan)?;
    }

    #[test]
    fn planning_is_deterministic(model in cluster()) {
        let fx = build(&model);
        prop_assert_eq!(plan_next_step(&fx.obs, now()), plan_next_step(&fx.obs, now()));
    }
}
