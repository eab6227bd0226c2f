//! A corrupt member replaced, storage grown (in place and by replacement), a member deleted
//! by hand, and scale-in's PVCs.

use super::*;

/// CORRUPT against a follower, then against the leader, with crashes between steps: each is
/// moved off leadership if it leads, removed, the alarm disarmed only after the removal, and a
/// fresh learner joins and is promoted; never two members out at once.
#[test]
fn corrupt_member_is_replaced_then_the_alarm_disarmed() {
    for (victim, crash) in [
        ("etcd-1", Crash::Never),
        ("etcd-0", Crash::Never),
        ("etcd-2", Crash::Every(4)),
        ("etcd-0", Crash::Every(3)),
    ] {
        let mut fx = Fx::healthy(3);
        fx.alarm(victim, crate::etcd::AlarmKind::Corrupt);
        let mut sim = Sim::new(fx);
        sim.run(80, crash);
        sim.assert_converged(3);
        assert_eq!(sim.fx.obs.etcd.alarms.as_deref(), Ok(&[][..]), "{victim}");
        let steps = &sim.steps;
        let at = |kind: StepKind| {
            steps
                .iter()
                .position(|k| *k == kind)
                .unwrap_or_else(|| panic!("no {kind:?} for {victim}: {steps:?}"))
        };
        let removed = at(StepKind::RemoveEtcdMember);
        assert!(removed < at(StepKind::DisarmAlarm), "{steps:?}");
        assert!(
            at(StepKind::DisarmAlarm) < at(StepKind::AddLearner),
            "{steps:?}"
        );
        assert_eq!(
            kinds_count(steps, StepKind::RemoveEtcdMember),
            1,
            "{steps:?}"
        );
        assert_eq!(kinds_count(steps, StepKind::DisarmAlarm), 1, "{steps:?}");
        if victim == "etcd-0" {
            assert!(at(StepKind::MoveLeader) < removed, "{steps:?}");
        }
    }
}

/// Storage growth of PVC-backed members through crashes: each member's spec then its PVC,
/// one member at a time (the resize controller takes a few passes to grow a volume, and no
/// other PVC is asked to grow meanwhile), no Pod deleted, every PVC at the new size.
#[test]
fn pvc_storage_grows_one_member_at_a_time_without_a_restart() {
    for crash_every in [None, Some(3), Some(4)] {
        let mut fx = cluster_on(3, "3.5.1", "3.5.1", false);
        fx.status_mut().observed.as_mut().unwrap().storage.size = Some(Quantity("3Gi".into()));
        for m in &mut fx.obs.members {
            m.pvc.as_mut().unwrap().expansion = crate::plan::ClassExpansion::Allowed;
        }
        let mut sim = Sim::new(fx);
        // PVC → passes left until its capacity reaches its request.
        let mut growing: Vec<(String, u32)> = Vec::new();
        let mut resized = Vec::new();
        let mut idle = false;
        for pass in 0..400u32 {
            for (member, left) in &mut growing {
                *left -= 1;
                if *left == 0 {
                    let pvc = sim.fx.observed_member(member).pvc.as_mut().unwrap();
                    pvc.capacity = pvc.requested.clone();
                }
            }
            growing.retain(|(_, left)| *left > 0);
            let plan = plan_next_step(&sim.fx.obs, at(sim.t));
            sim.t += 1;
            if plan.step == Step::Idle {
                sim.fx.write_statuses(&plan);
                idle = true;
                break;
            }
            if let Some(n) = crash_every
                && pass % n == 0
            {
                continue;
            }
            sim.fx.write_statuses(&plan);
            assert!(
                !matches!(plan.step, Step::DeletePod { .. }),
                "a PVC expansion restarted a Pod: {:?}",
                plan.step
            );
            if let Step::ResizePvc { member, size, .. } = &plan.step {
                assert!(
                    growing.iter().all(|(m, _)| m == member),
                    "{member}'s PVC asked to grow while {growing:?} still grows"
                );
                let pvc = sim.fx.observed_member(member).pvc.as_mut().unwrap();
                pvc.requested = Some(size.clone());
                if !growing.iter().any(|(m, _)| m == member) {
                    growing.push((member.clone(), 3));
                    resized.push(member.clone());
                }
                sim.steps.push(plan.step.kind());
                continue;
            }
            sim.steps.push(plan.step.kind());
            sim.apply(plan.step);
        }
        assert!(idle, "no convergence ({crash_every:?}): {:?}", sim.steps);
        sim.assert_converged(3);
        assert_eq!(resized, vec![name(0), name(1), name(2)], "{crash_every:?}");
        for m in &sim.fx.obs.members {
            assert_eq!(m.member.spec.storage.size_or_default().0, "3Gi");
            let pvc = m.pvc.as_ref().unwrap();
            assert_eq!(pvc.requested.as_deref(), Some("3Gi"));
            assert_eq!(pvc.capacity.as_deref(), Some("3Gi"));
        }
    }
}

/// Memory-backed members roll to the larger tmpfs by replacement, followers first and the
/// leader last, through crashes; every new Pod has the new size limit.
#[test]
fn memory_backed_storage_grows_by_replacement_leader_last() {
    for crash_every in [None, Some(4)] {
        let mut fx = cluster_on(3, "3.5.1", "3.5.1", true);
        for i in 0..3 {
            fx.pod_mut(&name(i)).tmpfs_size = Some("1Gi".into());
        }
        fx.status_mut().observed.as_mut().unwrap().storage.size = Some(Quantity("2Gi".into()));
        let mut sim = Sim::new(fx);
        let deleted = run_upgrade(&mut sim, 600, crash_every);
        sim.assert_converged(3);
        assert_eq!(deleted, vec![name(1), name(2), name(0)], "{crash_every:?}");
        assert_eq!(kinds_count(&sim.steps, StepKind::AddLearner), 3);
        for m in &sim.fx.obs.members {
            assert_eq!(m.member.spec.storage.size_or_default().0, "2Gi");
            assert_eq!(m.pod.as_ref().unwrap().tmpfs_size.as_deref(), Some("2Gi"));
        }
    }
}

#[test]
fn a_member_deleted_by_hand_keeps_its_pvc_and_the_cluster_heals_on_a_new_ordinal() {
    let mut sim = Sim::new(Fx::healthy(3));
    sim.fx.member_mut("etcd-1").metadata.deletion_timestamp = Some(Time(at(sim.t)));
    sim.run(150, Crash::Every(3));
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
        ["etcd-0", "etcd-2", "etcd-3"],
        "ordinal 1 is not reused"
    );
    let retained: Vec<_> = sim
        .fx
        .obs
        .retained_pvcs
        .iter()
        .map(|p| (p.name.as_str(), p.owner_uid.as_deref()))
        .collect();
    assert_eq!(retained, [("data-etcd-1", Some("uid-etcd"))]);
    assert_eq!(kinds_count(&sim.steps, StepKind::DeletePvc), 0);
}

#[test]
fn scale_in_deletes_pvcs_by_default_and_keeps_them_under_when_scaled_retain() {
    use etcd_operator_api::cluster::{PvcRetention, PvcRetentionPolicy};
    for (when_scaled, kept) in [(None, 0), (Some(PvcRetention::Retain), 2)] {
        let mut sim = Sim::new(Fx::healthy(5));
        sim.fx
            .obs
            .cluster
            .spec
            .persistent_volume_claim_retention_policy = Some(PvcRetentionPolicy {
            when_deleted: None,
            when_scaled,
        });
        sim.fx.obs.cluster.spec.replicas = Some(3);
        sim.run(150, Crash::Every(4));
        sim.assert_converged(3);
        assert_eq!(sim.fx.obs.retained_pvcs.len(), kept, "{when_scaled:?}");
        // Scaling out again never lands on a retained ordinal.
        sim.fx.obs.cluster.spec.replicas = Some(5);
        sim.run(150, Crash::Never);
        sim.assert_converged(5);
        let names: Vec<_> = sim
            .fx
            .obs
            .members
            .iter()
            .map(|m| m.member.metadata.name.clone().unwrap())
            .collect();
        let expected: &[&str] = if kept == 0 {
            &["etcd-0", "etcd-1", "etcd-2", "etcd-3", "etcd-4"]
        } else {
            &["etcd-0", "etcd-1", "etcd-2", "etcd-5", "etcd-6"]
        };
        assert_eq!(names, expected, "{when_scaled:?}");
    }
}
