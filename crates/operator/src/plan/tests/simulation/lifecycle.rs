//! Bootstrap, a whole-cluster reboot, scaling out and in, a memory member lost, and the
//! operator-issued certificates through them, each run to Idle.

use super::*;

#[test]
fn bootstrap_of_three_members_converges_one_member_at_a_time() {
    let mut sim = Sim::new(Fx::empty(3));
    sim.fx.obs.headless_service = None;
    sim.fx.obs.client_service = None;
    sim.run(100, Crash::Never);
    sim.assert_converged(3);
    assert_eq!(
        kinds_count(&sim.steps, StepKind::AddLearner),
        2,
        "the seed is never added"
    );
    assert_eq!(kinds_count(&sim.steps, StepKind::PromoteLearner), 2);
    assert_eq!(kinds_count(&sim.steps, StepKind::CreatePod), 3);
    assert!(sim.fx.obs.pdb.is_some());
    // The order of one join.
    let join: Vec<StepKind> = sim
        .steps
        .iter()
        .copied()
        .skip_while(|k| *k != StepKind::AddLearner)
        .take(5)
        .collect();
    assert_eq!(
        join,
        [
            StepKind::AddLearner,
            StepKind::CreatePod,
            // Once it has started, its Pod may restart only on its own data; then it votes.
            StepKind::SetPodStart,
            StepKind::PromoteLearner,
            StepKind::LabelPod
        ]
    );
}

#[test]
fn bootstrap_survives_crashes_between_every_two_steps() {
    for n in [3, 4, 5] {
        let mut sim = Sim::new(Fx::empty(3));
        sim.run(400, Crash::Every(n));
        sim.assert_converged(3);
        assert_eq!(
            kinds_count(&sim.steps, StepKind::AddLearner),
            2,
            "never added twice (crash every {n})"
        );
    }
}

#[test]
fn whole_cluster_reboot_recovers_without_quorum() {
    let mut sim = Sim::new(Fx::healthy(3));
    for i in 0..3 {
        let m = name(i);
        sim.fx.pod_mut(&m).phase = PodPhase::Succeeded;
        sim.fx.answer(&m, Answer::Down);
    }
    sim.run(50, Crash::Never);
    sim.assert_converged(3);
    assert_eq!(kinds_count(&sim.steps, StepKind::DeletePod), 3);
    assert_eq!(
        kinds_count(&sim.steps, StepKind::RemoveEtcdMember),
        0,
        "same members, same data"
    );
}

#[test]
fn scale_out_then_in_then_to_zero_and_back() {
    let mut sim = Sim::new(Fx::healthy(3));
    let set_replicas = |sim: &mut Sim, n: i32| {
        sim.fx.obs.cluster.spec.replicas = Some(n);
    };
    set_replicas(&mut sim, 5);
    sim.run(100, Crash::Never);
    sim.assert_converged(5);

    set_replicas(&mut sim, 3);
    sim.run(100, Crash::Every(4));
    sim.assert_converged(3);
    let names: Vec<_> = sim
        .fx
        .obs
        .members
        .iter()
        .map(|m| m.member.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        ["etcd-0", "etcd-1", "etcd-2"],
        "highest ordinals left first"
    );

    set_replicas(&mut sim, 0);
    sim.run(100, Crash::Never);
    assert!(
        sim.fx
            .obs
            .members
            .iter()
            .all(|m| m.pod.is_none() && m.pvc.is_some())
    );
    assert_eq!(sim.fx.obs.members.len(), 3, "members and data are kept");

    // While stopped, etcd is not reachable; on resume every member comes back at once.
    sim.fx.obs.etcd.endpoints.clear();
    set_replicas(&mut sim, 3);
    let before = sim.steps.len();
    sim.run(100, Crash::Never);
    let resumed = &sim.steps[before..];
    assert_eq!(resumed[0], StepKind::SetDormant);
    assert_eq!(
        kinds_count(resumed, StepKind::AddLearner),
        0,
        "same identities"
    );
}

#[test]
fn memory_member_loss_is_replaced_by_a_fresh_learner() {
    let mut fx = Fx::healthy(3);
    fx.make_memory_backed();
    fx.without_pod("etcd-1");
    fx.answer("etcd-1", Answer::Down);
    let mut sim = Sim::new(fx);
    sim.run(60, Crash::Every(5));
    sim.assert_converged(3);
    let steps = &sim.steps;
    let removed = steps
        .iter()
        .position(|k| *k == StepKind::RemoveEtcdMember)
        .expect("removed");
    let added = steps
        .iter()
        .position(|k| *k == StepKind::AddLearner)
        .expect("re-added");
    assert!(removed < added, "{steps:?}");
}

/// Operator-issued certificates through bootstrap and a scale 3→5→3 with crashes between steps:
/// the CA, each member's certificate and the operator's are issued once each, always before the
/// Pod that mounts them (asserted at every `CreatePod`), and the cluster converges as without.
#[test]
fn operator_issued_certificates_come_before_every_pod_through_bootstrap_and_scaling() {
    for crash in [Crash::Never, Crash::Every(3), Crash::Every(4)] {
        let mut sim = Sim::new(Fx::empty(3));
        sim.issued = Some(IssuedWorld::default());
        sim.run(400, crash);
        sim.assert_converged(3);
        sim.fx.obs.cluster.spec.replicas = Some(5);
        sim.run(400, crash);
        sim.assert_converged(5);
        sim.fx.obs.cluster.spec.replicas = Some(3);
        sim.run(400, crash);
        sim.assert_converged(3);
        let world = sim.issued.as_ref().unwrap();
        let mut issued = world.issued.clone();
        issued.sort();
        assert_eq!(
            issued,
            [
                "etcd-0-tls",
                "etcd-1-tls",
                "etcd-2-tls",
                "etcd-3-tls",
                "etcd-4-tls",
                "etcd-ca",
                "etcd-operator-client-tls"
            ]
        );
        assert_eq!(kinds_count(&sim.steps, StepKind::IssueCertificate), 7);
    }
}

/// A CA rotation through crashes between steps: the new CA beside the old, every member's Secret
/// given the bundle and its Pod restarted to trust both (one at a time, the leader last), the
/// leaves issued again from the new CA, the old CA dropped and the Pods restarted again. At every
/// step every certificate in use is trusted by every running Pod (`assert_trusted`); at the end
/// everything is signed by the new CA and trusted alone, and no member was replaced.
#[test]
fn a_ca_rotation_keeps_every_certificate_trusted_at_every_step() {
    for crash in [Crash::Never, Crash::Every(3), Crash::Every(5)] {
        let mut sim = Sim::new(Fx::empty(3));
        sim.issued = Some(IssuedWorld::default());
        sim.run(400, crash);
        sim.assert_converged(3);
        let ids = |sim: &Sim| {
            let mut ids: Vec<_> = sim.fx.obs.etcd.member_list().iter().map(|m| m.id).collect();
            ids.sort();
            ids
        };
        let before = ids(&sim);
        sim.steps.clear();
        sim.issued.as_mut().unwrap().requested = Some("2026-12-02".into());
        sim.run(600, crash);
        sim.assert_converged(3);
        let world = sim.issued.as_ref().unwrap();
        assert_eq!(
            world.ca,
            Some((2, None)),
            "rotated once, the old CA dropped"
        );
        assert!(
            world.leaves.values().all(|(g, b)| *g == 2 && b == "2"),
            "{:?}",
            world.leaves
        );
        for m in &sim.fx.obs.members {
            assert_eq!(m.pod.as_ref().unwrap().trusted_ca.as_deref(), Some("2"));
        }
        assert_eq!(
            ids(&sim),
            before,
            "the same members: Pods restarted on their data, none replaced"
        );
        assert_eq!(
            kinds_count(&sim.steps, StepKind::DeletePod),
            6,
            "each Pod restarted twice (trust both, then trust the new CA alone)"
        );
        // Asked again with the same value: nothing more happens.
        sim.steps.clear();
        sim.run(50, Crash::Never);
        assert!(sim.steps.is_empty(), "{:?}", sim.steps);
    }
}
