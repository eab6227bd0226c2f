//! Rule 10 and the readiness gate: bootstrap, scale out and in, scale to zero and back, strays,
//! the PDB, voter labels, upgrades and unsupported specs.

// The security rules' tables (TLS and auth Secrets, the root password) are in `security.rs`.

use etcd_operator_api::MemberPhase;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::fixtures::*;
use crate::plan::{Step, StepKind, WaitReason};

fn mark_scale_in(fx: &mut Fx, member: &str) {
    fx.member_mut(member)
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(crate::plan::SCALE_IN_ANNOTATION.into(), "true".into());
}

#[test]
fn rule10_converged_cluster_is_idle() {
    let fx = Fx::healthy(3);
    let plan = fx.plan();
    assert_eq!(plan.step, Step::Idle);
    assert_eq!(plan.requeue_after, crate::plan::IDLE_POLL);
}

#[test]
fn rule10_bootstrap_creates_the_seed_at_ordinal_zero() {
    let fx = Fx::empty(3);
    match fx.step() {
        Step::CreateMember(m) => {
            assert_eq!(m.metadata.name.as_deref(), Some("etcd-0"));
            assert_eq!(m.spec.bootstrap, Some(true));
            assert_eq!(m.spec.initial_cluster, format!("etcd-0={}", peer("etcd-0")));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn rule10_scale_out_adds_the_lowest_free_ordinal() {
    let mut fx = Fx::healthy(3);
    target(&mut fx, 5);
    // etcd-1 is gone (scaled in earlier); the next member takes its ordinal.
    fx.obs
        .members
        .retain(|m| m.member.metadata.name.as_deref() != Some("etcd-1"));
    fx.etcd_remove("etcd-1");
    match fx.step() {
        Step::CreateMember(m) => {
            assert_eq!(m.metadata.name.as_deref(), Some("etcd-1"));
            assert_eq!(m.spec.bootstrap, None);
            assert_eq!(m.spec.initial_cluster, "");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn gate_blocks_scale_out_while_a_member_is_not_ready() {
    let mut fx = Fx::healthy(3);
    target(&mut fx, 5);
    fx.set_phase("etcd-2", MemberPhase::Recreating, at(99_999));
    fx.pod_mut("etcd-2").started_at = Some(at(100_000));
    fx.answer("etcd-2", Answer::Down);
    fx.pod_mut("etcd-2").ready = false;
    let step = fx.step();
    assert_eq!(wait_reason(&step), WaitReason::WaitingForMember, "{step:?}");
}

#[test]
fn scale_out_goes_on_once_etcd_says_the_new_member_is_ready_before_its_pod_does() {
    // The member joined and serves (etcd healthy through it); the kubelet's readiness probe
    // has not turned yet. Adding the next member waits for etcd, not for the probe.
    let mut fx = Fx::healthy(3);
    target(&mut fx, 5);
    fx.pod_mut("etcd-2").ready = false;
    assert!(
        matches!(fx.step(), Step::CreateMember(_)),
        "{:?}",
        fx.step()
    );

    // Anything else behind the gate still waits for the Pod: a version change...
    let mut fx = Fx::healthy(3);
    fx.pod_mut("etcd-2").ready = false;
    fx.obs.cluster.spec.version = "3.6.17".into();
    for m in fx.obs.members.iter_mut() {
        m.member.spec.version = "3.6.17".into();
    }
    assert_eq!(wait_reason(&fx.step()), WaitReason::WaitingForMember);
    // ... and a scale-in.
    let mut fx = Fx::healthy(5);
    target(&mut fx, 3);
    fx.pod_mut("etcd-1").ready = false;
    assert_eq!(wait_reason(&fx.step()), WaitReason::WaitingForMember);
}

#[test]
fn gate_blocks_scale_out_while_etcd_is_unhealthy() {
    let mut fx = Fx::healthy(3);
    target(&mut fx, 5);
    fx.answer("etcd-2", Answer::NoQuorum);
    let step = fx.step();
    assert!(!matches!(step, Step::CreateMember(_)), "{step:?}");
}

#[test]
fn gate_blocks_scaling_while_a_member_leaves() {
    let mut fx = Fx::healthy(3);
    target(&mut fx, 5);
    fx.member_mut("etcd-2").metadata.finalizers = None;
    fx.member_mut("etcd-2").metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(1)));
    assert_eq!(wait_reason(&fx.step()), WaitReason::WaitingForMember);
}

#[test]
fn rule10_scale_in_removes_the_highest_ordinal() {
    let mut fx = Fx::healthy(5);
    target(&mut fx, 3);
    assert_eq!(
        fx.step(),
        Step::MarkScaleIn {
            member: "etcd-4".into(),
            marked: true
        },
        "marked first, so its PVC follows whenScaled"
    );
    mark_scale_in(&mut fx, "etcd-4");
    assert_eq!(
        fx.step(),
        Step::DeleteMember {
            member: "etcd-4".into()
        }
    );
}

#[test]
fn rule10_scale_in_moves_leadership_away_first() {
    let mut fx = Fx::healthy(3);
    target(&mut fx, 2);
    fx.set_leader("etcd-2");
    assert_eq!(
        fx.step(),
        Step::MoveLeader {
            from: Some("etcd-2".into()),
            to: "etcd-0".into(),
            to_id: id_of("etcd-0")
        }
    );
}

#[test]
fn rule10_scale_to_zero_stops_every_member_and_keeps_them() {
    let mut fx = Fx::healthy(3);
    target(&mut fx, 0);
    assert_eq!(
        fx.step(),
        Step::SetDormant {
            members: vec!["etcd-0".into(), "etcd-1".into(), "etcd-2".into()],
            dormant: true
        }
    );
    for i in 0..3 {
        fx.member_mut(&name(i)).spec.dormant = Some(true);
    }
    assert_eq!(
        fx.step().kind(),
        StepKind::DeletePod,
        "then their Pods go, PVCs stay"
    );
    for i in 0..3 {
        fx.without_pod(&name(i));
        fx.etcd_remove(&name(i));
    }
    fx.obs.etcd = crate::etcd::EtcdView::not_observed("all dormant");
    let plan = fx.plan();
    assert_eq!(plan.step.kind(), StepKind::DeletePdb);
    assert_eq!(
        cluster_condition(&fx, &plan, "Available"),
        ("False".into(), "Paused".into())
    );
}

#[test]
fn rule10_resume_wakes_every_dormant_member_at_once() {
    let mut fx = Fx::healthy(3);
    for i in 0..3 {
        let m = name(i);
        fx.member_mut(&m).spec.dormant = Some(true);
        fx.without_pod(&m);
    }
    fx.obs.etcd = crate::etcd::EtcdView::not_observed("all dormant");
    target(&mut fx, 1);
    assert_eq!(
        fx.step(),
        Step::SetDormant {
            members: vec!["etcd-0".into(), "etcd-1".into(), "etcd-2".into()],
            dormant: false
        }
    );
    // Woken, their Pods come back on their own data (rule 7), without waiting for quorum.
    for i in 0..3 {
        fx.member_mut(&name(i)).spec.dormant = None;
    }
    assert_eq!(fx.step().kind(), StepKind::CreatePod);
}

#[test]
fn rule10_even_sizes_are_allowed_and_reported() {
    let mut fx = Fx::healthy(3);
    target(&mut fx, 4);
    assert_eq!(fx.step().kind(), StepKind::CreateMember);
    let fx = Fx::healthy(4);
    let plan = fx.plan();
    assert_eq!(plan.step, Step::Idle);
    let status = plan.cluster_status.unwrap();
    let available = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Available")
        .unwrap();
    assert!(available.message.contains("even"), "{}", available.message);
}

#[test]
fn rule10_pdb_is_created_and_follows_the_voters() {
    let mut fx = Fx::healthy(3);
    fx.obs.pdb = None;
    match fx.step() {
        Step::CreatePdb(pdb) => {
            assert_eq!(pdb.spec.unwrap().min_available, Some(IntOrString::Int(2)));
        }
        other => panic!("{other:?}"),
    }
    let mut fx = Fx::healthy(5);
    fx.obs.pdb = Some(crate::build::voter_pdb(&fx.obs.cluster, 3).unwrap());
    match fx.step() {
        Step::UpdatePdb(pdb) => {
            assert_eq!(pdb.spec.unwrap().min_available, Some(IntOrString::Int(3)))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn rule10_voter_label_follows_the_role() {
    let mut fx = Fx::healthy(3);
    fx.pod_mut("etcd-1").voter_label = false;
    assert_eq!(
        fx.step(),
        Step::LabelPod {
            member: "etcd-1".into(),
            pod: "etcd-1".into(),
            voter: true
        }
    );
}

#[test]
fn rule10_stray_etcd_member_is_removed_when_safe() {
    let mut fx = Fx::healthy(3);
    fx.obs
        .etcd
        .members
        .as_mut()
        .unwrap()
        .push(crate::etcd::MemberInfo {
            id: 0x5555,
            name: "manual".into(),
            peer_urls: vec!["http://10.0.0.9:2380".into()],
            client_urls: vec![],
            is_learner: false,
        });
    // 3 healthy of 4 voters: removing the stray (down) leaves 3 of 3.
    assert_eq!(
        fx.step(),
        Step::RemoveEtcdMember {
            member: None,
            id: 0x5555
        }
    );
}

#[test]
fn rule10_members_named_by_another_operator_are_handled() {
    let mut fx = Fx::healthy(2);
    for foreign in ["etcd-abcde", "etcd-xyz12"] {
        fx.add_member(foreign, MemberPhase::Ready);
        fx.with_pod(foreign, running_pod(foreign));
        fx.etcd_add(foreign, false, true);
        fx.answer(foreign, Answer::Healthy);
    }
    target(&mut fx, 4);
    fx.obs.pdb = Some(crate::build::voter_pdb(&fx.obs.cluster, 4).unwrap());
    assert_eq!(fx.step(), Step::Idle, "adopted, not strays");
    target(&mut fx, 3);
    mark_scale_in(&mut fx, "etcd-xyz12");
    assert_eq!(
        fx.step(),
        Step::DeleteMember {
            member: "etcd-xyz12".into()
        },
        "scale in takes members named otherwise first"
    );
}

#[test]
fn rule10_version_change_rolls_a_follower_first() {
    let mut fx = Fx::healthy(3);
    fx.obs.cluster.spec.version = "3.5.2".into();
    fx.status_mut().observed.as_mut().unwrap().version = "3.5.2".into();
    let plan = fx.plan();
    assert_eq!(
        plan.step,
        Step::SetMemberVersion {
            member: "etcd-1".into(),
            version: "3.5.2".into()
        }
    );
    assert_eq!(
        cluster_condition(&fx, &plan, "Progressing"),
        ("True".into(), "RollingUpdate".into())
    );
}

#[test]
fn rule10_unsupported_spec_is_reported_before_bootstrap() {
    let mut fx = Fx::empty(3);
    fx.obs.cluster.spec.bootstrap = Some(etcd_operator_api::cluster::BootstrapSpec {
        restore: Some(Default::default()),
    });
    assert_eq!(wait_reason(&fx.step()), WaitReason::UnsupportedSpec);
}

/// `spec.auth.enabled`: turned on once, behind the readiness gate, with the password known;
/// never again once latched (or found on in etcd).
#[test]
fn rule10_auth_is_enabled_once_the_cluster_is_ready() {
    let auth = |fx: &mut Fx| {
        fx.obs.cluster.spec.auth = Some(etcd_operator_api::cluster::AuthSpec {
            enabled: Some(true),
            root_credentials_secret_ref: Some(Default::default()),
        });
        fx.obs.security.root_password = Some(crate::plan::Password("pw".into()));
    };
    let mut fx = Fx::healthy(3);
    auth(&mut fx);
    assert_eq!(fx.step(), Step::EnableAuth);
    assert!(
        !format!("{:?}", fx.plan()).contains("\"pw\""),
        "the password is in no plan"
    );

    // Not while a member is not Ready.
    let mut busy = Fx::healthy(3);
    auth(&mut busy);
    busy.answer("etcd-2", Answer::Down);
    assert_ne!(busy.step(), Step::EnableAuth);

    // Not without the password, and not again.
    let mut fx = Fx::healthy(3);
    auth(&mut fx);
    fx.obs.security.root_password = None;
    assert_ne!(fx.step(), Step::EnableAuth);
    let mut fx = Fx::healthy(3);
    auth(&mut fx);
    fx.status_mut().auth_enabled = Some(true);
    assert_eq!(fx.step().kind(), StepKind::Idle);
    let mut fx = Fx::healthy(3);
    auth(&mut fx);
    fx.obs.security.auth_found_enabled = true;
    let plan = fx.plan();
    assert_ne!(plan.step, Step::EnableAuth);
    assert_eq!(
        plan.cluster_status.and_then(|s| s.auth_enabled),
        Some(true),
        "found on in etcd: latched"
    );
}
