//! Taking over members the reference operator made (rule `adopt`), and the order of members
//! whose names carry no ordinal.

use etcd_operator_api::MemberPhase;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::fixtures::*;
use crate::build::voter_pdb;
use crate::plan::context::Context;
use crate::plan::rules::adopt::{Assessment, assess, is_candidate};
use crate::plan::{PodFacts, Step, WaitReason};

/// The reference operator's names (`generateName`), in creation order: sorted by name they
/// would be in another order.
const REFERENCE: [&str; 3] = ["etcd-zq4mx", "etcd-b7k2p", "etcd-m9d3w"];

/// A Pod as the reference operator builds it: the start settings in its command line (no
/// annotations of ours), owned by its EtcdMember, the voter label, its PVC mounted.
fn reference_pod(member: &str) -> PodFacts {
    let mut pod = running_pod(member);
    pod.start = None;
    pod.etcd_flags = [
        ("name", member.to_string()),
        ("initial-advertise-peer-urls", peer(member)),
        ("data-dir", "/var/lib/etcd".to_string()),
        ("initial-cluster-state", "existing".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    pod
}

/// A formed cluster of the reference operator's three members, as it leaves them: no phase,
/// `status.memberID` zero-padded, created one after another, the first leading.
fn reference_cluster() -> Fx {
    let mut fx = Fx::empty(3);
    fx.status_mut().cluster_id = Some(format!("{CLUSTER_ID:016x}"));
    fx.obs.etcd.members = Ok(Vec::new());
    for (i, m) in REFERENCE.iter().enumerate() {
        fx.add_member(m, MemberPhase::Ready);
        let member = fx.member_mut(m);
        member.metadata.creation_timestamp = Some(Time(at(10 + i as i64)));
        member.spec.bootstrap = (i == 0).then_some(true);
        let status = member.status.as_mut().unwrap();
        status.phase = None;
        status.last_phase_transition_time = None;
        status.member_id = Some(format!("{:016x}", id_of(m)));
        fx.with_pod(m, reference_pod(m));
        fx.etcd_add(m, false, true);
        fx.answer(m, Answer::Healthy);
    }
    fx.set_leader(REFERENCE[0]);
    fx.obs.pdb = Some(voter_pdb(&fx.obs.cluster, 3).unwrap());
    fx
}

fn adopted(fx: &mut Fx, member: &str) {
    fx.set_phase(member, MemberPhase::Ready, at(50));
}

fn not_adoptable(fx: &Fx) -> String {
    match fx.step() {
        Step::Wait {
            reason: WaitReason::NotAdoptable,
            message,
        } => message,
        other => panic!("expected NotAdoptable, got {other:?}"),
    }
}

#[test]
fn reference_members_are_adopted_one_per_pass_in_creation_order_as_they_are() {
    let mut fx = reference_cluster();
    for m in REFERENCE {
        let plan = fx.plan();
        assert_eq!(
            plan.step,
            Step::AdoptMember {
                member: m.to_string(),
                phase: MemberPhase::Ready,
                id: id_of(m),
                pod: m.to_string(),
            }
        );
        assert!(!plan.step.mutates(), "a status write only");
        assert_eq!(
            plan.member_statuses
                .iter()
                .map(|w| w.member.as_str())
                .filter(|w| REFERENCE.contains(w)
                    && !fx
                        .obs
                        .members
                        .iter()
                        .any(|o| o.member.metadata.name.as_deref() == Some(*w)
                            && o.member.status.as_ref().and_then(|s| s.phase).is_some()))
                .collect::<Vec<_>>(),
            [m],
            "members not taken over yet get no status write"
        );
        let written = plan
            .member_statuses
            .iter()
            .find(|w| w.member == m)
            .expect("the adopted member's status");
        assert_eq!(written.status.phase, Some(MemberPhase::Ready));
        assert_eq!(
            written.status.member_id,
            Some(format!("{:016x}", id_of(m))),
            "the reference's zero-padded ID is kept as written"
        );
        adopted(&mut fx, m);
    }
    // Adopted: the rest of the planner takes over, and nothing touches a Pod.
    let step = fx.step();
    assert!(
        !matches!(step, Step::AdoptMember { .. } | Step::Wait { .. }),
        "{step:?}"
    );
    assert!(!step.is_destructive(), "{step:?}");
    assert!(
        !matches!(step, Step::CreatePod(_) | Step::SetPodStart { .. }),
        "{step:?}"
    );
}

#[test]
fn a_crash_after_the_status_write_leaves_nothing_to_redo() {
    let mut fx = reference_cluster();
    adopted(&mut fx, REFERENCE[0]);
    // The next pass (another process) goes on with the second, never the first again.
    assert!(matches!(
        fx.step(),
        Step::AdoptMember { member, .. } if member == REFERENCE[1]
    ));
}

#[test]
fn a_learner_is_adopted_as_provisioning_and_promoted_by_rule_nine() {
    let mut fx = reference_cluster();
    let learner = REFERENCE[2];
    fx.etcd_add(learner, true, true);
    fx.answer(learner, Answer::Learner);
    fx.pod_mut(learner).voter_label = false;
    adopted(&mut fx, REFERENCE[0]);
    adopted(&mut fx, REFERENCE[1]);
    assert_eq!(
        fx.step(),
        Step::AdoptMember {
            member: learner.to_string(),
            phase: MemberPhase::Provisioning,
            id: id_of(learner),
            pod: learner.to_string(),
        }
    );
    fx.set_phase(learner, MemberPhase::Provisioning, at(50));
    assert!(matches!(fx.step(), Step::PromoteLearner { member, .. } if member == learner));
}

#[test]
fn a_voter_without_the_role_label_is_labelled_first() {
    let mut fx = reference_cluster();
    fx.pod_mut(REFERENCE[0]).voter_label = false;
    assert_eq!(
        fx.step(),
        Step::LabelPod {
            member: REFERENCE[0].to_string(),
            pod: REFERENCE[0].to_string(),
            voter: true,
        }
    );
}

#[test]
fn objects_that_cannot_be_adopted_are_reported_and_nothing_else_acts() {
    type Break = fn(&mut Fx, &str);
    let cases: [(&str, Break, &str); 9] = [
        (
            "Pod owned by another object",
            |fx, m| fx.pod_mut(m).owner_uid = Some("someone-else".into()),
            "is controlled by the object with uid someone-else",
        ),
        (
            "Pod owned by nothing",
            |fx, m| fx.pod_mut(m).owner_uid = None,
            "is controlled by nothing",
        ),
        (
            "PVC owned by another object",
            |fx, m| fx.observed_member(m).pvc.as_mut().unwrap().owner_uid = Some("x".into()),
            "PVC data-",
        ),
        (
            "PVC missing",
            |fx, m| fx.observed_member(m).pvc = None,
            "does not exist while its Pod",
        ),
        (
            "another claim mounted",
            |fx, m| fx.pod_mut(m).data_claim = Some("elsewhere".into()),
            "mounts PVC elsewhere as its data volume",
        ),
        (
            "another peer URL (a legacy Service)",
            |fx, m| {
                fx.pod_mut(m).etcd_flags.insert(
                    "initial-advertise-peer-urls".into(),
                    "http://x.legacy.prod.svc:2380".into(),
                );
            },
            "--initial-advertise-peer-urls=http://x.legacy.prod.svc:2380",
        ),
        (
            "another data directory",
            |fx, m| {
                fx.pod_mut(m)
                    .etcd_flags
                    .insert("data-dir".into(), "/var/lib/etcd/default.etcd".into());
            },
            "--data-dir=/var/lib/etcd/default.etcd",
        ),
        (
            "another member ID recorded",
            |fx, m| {
                fx.member_mut(m).status.as_mut().unwrap().member_id =
                    Some("00000000000000aa".into())
            },
            "records status.memberID 00000000000000aa",
        ),
        (
            "not in etcd's member list",
            |fx, m| fx.etcd_remove(m),
            "etcd lists no member at its peer URL",
        ),
    ];
    for (what, break_it, expected) in cases {
        let mut fx = reference_cluster();
        let victim = REFERENCE[1];
        break_it(&mut fx, victim);
        adopted(&mut fx, REFERENCE[0]);
        adopted(&mut fx, REFERENCE[2]);
        // Even with a scale-out asked for, nothing happens while it is unresolved.
        fx.status_mut().observed.as_mut().unwrap().replicas = 5;
        fx.obs.cluster.spec.replicas = Some(5);
        let message = not_adoptable(&fx);
        assert!(message.contains(expected), "{what}: {message}");
        assert!(
            message.contains(victim),
            "{what} names the object: {message}"
        );
        let plan = fx.plan();
        assert!(
            plan.member_statuses.iter().all(|w| w.member != victim),
            "{what}: the refused member's status is not written"
        );
        let condition = plan
            .cluster_status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Progressing"))
            .cloned()
            .expect("a Progressing condition");
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_str()),
            ("False", "NotAdoptable"),
            "{what}"
        );
        assert_eq!(
            plan.step.event_type(),
            crate::build::EventType::Warning,
            "{what}"
        );
    }
}

#[test]
fn adoptable_members_are_taken_over_before_the_refusal_is_reported() {
    let mut fx = reference_cluster();
    fx.pod_mut(REFERENCE[0]).owner_uid = None;
    assert!(matches!(
        fx.step(),
        Step::AdoptMember { member, .. } if member == REFERENCE[1]
    ));
}

#[test]
fn an_unreadable_member_list_waits_without_acting() {
    let mut fx = reference_cluster();
    fx.obs.etcd.members = Err(crate::etcd::EtcdError {
        call: "MemberList",
        endpoints: "all".into(),
        kind: crate::etcd::EtcdErrorKind::Unreachable,
        detail: "connection refused".into(),
    });
    match fx.step() {
        Step::Wait {
            reason: WaitReason::WaitingForMember,
            message,
        } => assert!(message.contains("adoption waits"), "{message}"),
        other => panic!("expected a wait, got {other:?}"),
    }
}

#[test]
fn members_of_this_operator_are_never_candidates() {
    let fx = Fx::healthy(3);
    let ctx = Context::new(&fx.obs, now());
    assert!(ctx.members.iter().all(|m| !is_candidate(m)));
    // Not even a Pending one with a Pod: this operator's Pods carry their start annotations.
    let mut fx = Fx::healthy(3);
    fx.member_mut(&name(2)).status.as_mut().unwrap().phase = None;
    let ctx = Context::new(&fx.obs, now());
    assert!(ctx.members.iter().all(|m| !is_candidate(m)));
    // A reference member being deleted is left to the leave sequence.
    let mut fx = reference_cluster();
    fx.member_mut(REFERENCE[0]).metadata.deletion_timestamp = Some(Time(at(60)));
    let ctx = Context::new(&fx.obs, now());
    assert!(!is_candidate(&ctx.members[0]) || ctx.members[0].name != REFERENCE[0]);
    assert!(
        ctx.members
            .iter()
            .any(|m| m.name == REFERENCE[0] && !is_candidate(m))
    );
}

#[test]
fn assess_checks_the_pod_against_what_this_operator_would_build() {
    let fx = reference_cluster();
    let ctx = Context::new(&fx.obs, now());
    for m in &ctx.members {
        assert_eq!(
            assess(&ctx, m),
            Assessment::Adopt {
                phase: MemberPhase::Ready,
                id: id_of(m.name)
            }
        );
    }
}

#[test]
fn names_without_ordinals_sort_after_ordinals_in_creation_order() {
    let mut fx = reference_cluster();
    for m in REFERENCE {
        adopted(&mut fx, m);
    }
    fx.add_member(&name(1), MemberPhase::Ready);
    fx.add_member(&name(0), MemberPhase::Ready);
    let ctx = Context::new(&fx.obs, now());
    let order: Vec<&str> = ctx.members.iter().map(|m| m.name).collect();
    assert_eq!(
        order,
        ["etcd-0", "etcd-1", REFERENCE[0], REFERENCE[1], REFERENCE[2]]
    );
}

#[test]
fn scale_in_takes_the_newest_adopted_member_and_leadership_goes_to_the_oldest() {
    let mut fx = reference_cluster();
    for m in REFERENCE {
        adopted(&mut fx, m);
    }
    fx.status_mut().observed.as_mut().unwrap().replicas = 2;
    fx.obs.cluster.spec.replicas = Some(2);
    let step = fx.step();
    assert!(
        matches!(&step, Step::DeleteMember { member } if member == REFERENCE[2])
            || matches!(&step, Step::MarkScaleIn { member, .. } if member == REFERENCE[2]),
        "{step:?}"
    );
    // When the newest leads, leadership moves to the oldest ready voter first.
    fx.set_leader(REFERENCE[2]);
    assert_eq!(
        fx.step(),
        Step::MoveLeader {
            from: Some(REFERENCE[2].to_string()),
            to: REFERENCE[0].to_string(),
            to_id: id_of(REFERENCE[0]),
        },
    );
}

/// A member `kubectl etcdop migrate` made from a legacy `etcd.aenix.io/v1alpha1` StatefulSet
/// Pod: the legacy headless Service and data subdirectory as annotations, peer auto-TLS, and
/// the Pod's own layout (the volume at /var/run/etcd, the data in `default.etcd` below it).
fn migrated_cluster() -> Fx {
    let mut fx = reference_cluster();
    for m in REFERENCE {
        let member = fx.member_mut(m);
        member.metadata.annotations = Some(
            [
                (
                    crate::build::HEADLESS_SERVICE_ANNOTATION.to_string(),
                    format!("{CLUSTER}-headless"),
                ),
                (
                    crate::build::DATA_DIR_SUBPATH_ANNOTATION.to_string(),
                    "default.etcd".to_string(),
                ),
            ]
            .into(),
        );
        member.spec.tls = Some(etcd_operator_api::member::EtcdMemberTls {
            peer_auto_tls: Some(true),
            ..Default::default()
        });
        let legacy_peer = format!("https://{m}.{CLUSTER}-headless.prod.svc:2380");
        let pod = fx.pod_mut(m);
        pod.data_mount = Some("/var/run/etcd".into());
        pod.etcd_flags
            .insert("data-dir".into(), "/var/run/etcd/default.etcd".into());
        pod.etcd_flags
            .insert("initial-advertise-peer-urls".into(), legacy_peer.clone());
        if let Ok(list) = fx.obs.etcd.members.as_mut() {
            for info in list.iter_mut().filter(|i| i.id == id_of(m)) {
                info.peer_urls = vec![legacy_peer.clone()];
            }
        }
    }
    fx
}

#[test]
fn a_member_migrated_from_v1alpha1_is_adopted_on_its_data_below_another_mount() {
    let mut fx = migrated_cluster();
    assert!(matches!(
        fx.step(),
        Step::AdoptMember { member, phase: MemberPhase::Ready, .. } if member == REFERENCE[0]
    ));
    // The same place on the volume is what counts, not the path in the container.
    for (mount, dir, adoptable) in [
        ("/var/run/etcd", "/var/run/etcd/default.etcd", true),
        ("/var/run/etcd/", "/var/run/etcd/default.etcd", true),
        ("/var/run/etcd", "/var/run/etcd", false),
        ("/var/run/etcd", "/var/run/etcd/other.etcd", false),
        ("/var/run/etcd", "/var/run/etcdx/default.etcd", false),
        ("/data", "/var/run/etcd/default.etcd", false),
    ] {
        let pod = fx.pod_mut(REFERENCE[0]);
        pod.data_mount = Some(mount.into());
        pod.etcd_flags.insert("data-dir".into(), dir.into());
        let ctx = Context::new(&fx.obs, now());
        let m = ctx.members.iter().find(|m| m.name == REFERENCE[0]).unwrap();
        let verdict = assess(&ctx, m);
        if adoptable {
            assert!(
                matches!(verdict, Assessment::Adopt { .. }),
                "{mount} {dir}: {verdict:?}"
            );
        } else {
            assert!(
                matches!(&verdict, Assessment::Refuse(why) if why.contains("--data-dir")),
                "{mount} {dir}: {verdict:?}"
            );
        }
    }
}

#[test]
fn a_migrated_member_advertising_the_plain_scheme_is_refused() {
    let mut fx = migrated_cluster();
    let m = REFERENCE[0];
    fx.pod_mut(m).etcd_flags.insert(
        "initial-advertise-peer-urls".into(),
        format!("http://{m}.{CLUSTER}-headless.prod.svc:2380"),
    );
    let ctx = Context::new(&fx.obs, now());
    let view = ctx.members.iter().find(|v| v.name == m).unwrap();
    let verdict = assess(&ctx, view);
    assert!(
        matches!(&verdict, Assessment::Refuse(why) if why.contains("--initial-advertise-peer-urls")),
        "{verdict:?}"
    );
}
