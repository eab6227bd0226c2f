//! Version upgrades (followers first, the leader last, through crashes), config and
//! metadata changes rolled member by member.

use super::*;

#[test]
fn a_version_upgrade_rolls_followers_first_and_the_leader_last() {
    for n in [3, 5] {
        let mut sim = Sim::new(cluster_on(n, "3.4.23", "3.5.1", false));
        let deleted = run_upgrade(&mut sim, 400, None);
        sim.assert_converged(n as usize);
        assert_all_on(&sim, "3.5.1");
        // Followers by ordinal, then etcd-0 (the leader at the start), each exactly once.
        let mut expected: Vec<String> = (1..n).map(name).collect();
        expected.push(name(0));
        assert_eq!(deleted, expected, "{n} members");
        assert_eq!(
            kinds_count(&sim.steps, StepKind::SetMemberVersion),
            n as usize
        );
        assert_eq!(kinds_count(&sim.steps, StepKind::MoveLeader), 1);
        assert_eq!(
            kinds_count(&sim.steps, StepKind::AddLearner),
            0,
            "same identities"
        );
        // etcd-0 handed leadership to the lowest-ordinal other Ready voter before it went.
        assert_eq!(sim.fx.obs.etcd.leader(), Some(id_of(&name(1))));
    }
}

#[test]
fn a_version_upgrade_resumes_after_crashes_between_every_two_steps() {
    for every in [3, 4, 7] {
        let mut sim = Sim::new(cluster_on(3, "3.4.23", "3.5.1", false));
        let deleted = run_upgrade(&mut sim, 600, Some(every));
        sim.assert_converged(3);
        assert_all_on(&sim, "3.5.1");
        assert_eq!(
            deleted,
            vec![name(1), name(2), name(0)],
            "crash every {every}"
        );
    }
}

#[test]
fn a_memory_backed_upgrade_replaces_one_member_at_a_time() {
    let mut sim = Sim::new(cluster_on(3, "3.4.23", "3.5.1", true));
    let deleted = run_upgrade(&mut sim, 600, Some(4));
    sim.assert_converged(3);
    assert_all_on(&sim, "3.5.1");
    assert_eq!(deleted, vec![name(1), name(2), name(0)]);
    assert_eq!(
        kinds_count(&sim.steps, StepKind::AddLearner),
        3,
        "each replaced"
    );
}

#[test]
fn a_patch_change_and_the_way_back_before_the_cluster_version_moved_are_rolled() {
    let mut sim = Sim::new(cluster_on(3, "3.5.1", "3.5.2", false));
    run_upgrade(&mut sim, 400, None);
    assert_all_on(&sim, "3.5.2");
    sim.fx.obs.cluster.spec.version = "3.5.1".into();
    sim.fx.status_mut().observed.as_mut().unwrap().version = "3.5.1".into();
    run_upgrade(&mut sim, 400, None);
    assert_all_on(&sim, "3.5.1");
}

#[test]
fn a_downgrade_enables_etcds_downgrade_first_then_rolls_the_leader_last() {
    for (from, to, memory) in [
        ("3.7.4", "3.6.17", false),
        ("3.6.17", "3.5.36", false),
        ("3.7.4", "3.6.17", true),
    ] {
        for crash in [None, Some(3), Some(5)] {
            let mut sim = Sim::new(cluster_on(3, from, to, memory));
            let deleted = run_upgrade(&mut sim, 800, crash);
            sim.assert_converged(3);
            assert_all_on(&sim, to);
            assert_eq!(deleted, vec![name(1), name(2), name(0)], "{from} → {to}");
            let enable = sim
                .steps
                .iter()
                .position(|k| *k == StepKind::EnableDowngrade)
                .expect("etcd's downgrade enabled");
            let first_delete = sim
                .steps
                .iter()
                .position(|k| *k == StepKind::DeletePod)
                .unwrap();
            assert!(enable < first_delete, "enabled before any member restarts");
            assert_eq!(
                kinds_count(&sim.steps, StepKind::CancelDowngrade),
                0,
                "{from} → {to}: etcd's leader ends it, not the operator"
            );
            // Every 3.6+ member reports the downgrade ended.
            assert!(
                sim.fx
                    .obs
                    .etcd
                    .statuses()
                    .all(|s| s.downgrade.as_ref().is_none_or(|d| !d.enabled))
            );
        }
    }
}

#[test]
fn going_back_up_during_a_downgrade_cancels_it_first() {
    let mut fx = cluster_on(3, "3.7.4", "3.6.17", false);
    for i in 0..3 {
        answer_version(&mut fx, &name(i), "3.7.4");
    }
    let mut sim = Sim::new(fx);
    // Enabled, then the spec goes back to 3.7 before any member moved.
    let plan = plan_next_step(&sim.fx.obs, at(sim.t));
    assert_eq!(plan.step.kind(), StepKind::EnableDowngrade);
    sim.apply(plan.step);
    sim.fx.obs.cluster.spec.version = "3.7.4".into();
    sim.fx.status_mut().observed.as_mut().unwrap().version = "3.7.4".into();
    let plan = plan_next_step(&sim.fx.obs, at(sim.t));
    assert_eq!(
        plan.step,
        Step::CancelDowngrade {
            target: "3.7.4".into()
        }
    );
    sim.apply(plan.step);
    assert_eq!(plan_next_step(&sim.fx.obs, at(sim.t)).step, Step::Idle);
}

#[test]
fn a_config_change_rolls_every_member_leader_last_and_none_twice() {
    use etcd_operator_api::shared::EtcdOptions;
    // Pods created by this operator carry the digest of their member's config.
    let mut fx = cluster_on(3, "3.5.1", "3.5.1", false);
    for i in 0..3 {
        let m = name(i);
        let digest = crate::build::MemberConfig::of_member(&fx.member_mut(&m).spec).digest();
        fx.pod_mut(&m).config_digest = Some(digest);
    }
    let options = EtcdOptions {
        quota_backend_bytes: Some(1 << 30),
        auto_compaction_retention: Some("5m".into()),
        ..Default::default()
    };
    fx.obs.cluster.spec.options = Some(options.clone());
    fx.status_mut().observed.as_mut().unwrap().options = Some(options.clone());
    let mut sim = Sim::new(fx);
    let deleted = run_upgrade(&mut sim, 400, Some(4));
    sim.assert_converged(3);
    assert_eq!(deleted, vec![name(1), name(2), name(0)]);
    assert_eq!(kinds_count(&sim.steps, StepKind::SetMemberConfig), 3);
    for m in &sim.fx.obs.members {
        assert_eq!(m.member.spec.options.as_ref(), Some(&options));
        let digest = crate::build::MemberConfig::of_member(&m.member.spec).digest();
        assert_eq!(
            m.pod.as_ref().unwrap().config_digest.as_ref(),
            Some(&digest)
        );
    }
    // Converged: another pass restarts nothing.
    assert_eq!(run_upgrade(&mut sim, 10, None), Vec::<String>::new());
}

#[test]
fn additional_metadata_is_patched_onto_running_pods_without_a_restart() {
    use etcd_operator_api::shared::AdditionalMetadata;
    let mut fx = cluster_on(3, "3.5.1", "3.5.1", false);
    let metadata = AdditionalMetadata {
        labels: Some([("team".to_string(), "storage".to_string())].into()),
        annotations: Some([("owner".to_string(), "ops".to_string())].into()),
    };
    fx.obs.cluster.spec.additional_metadata = Some(metadata.clone());
    fx.status_mut()
        .observed
        .as_mut()
        .unwrap()
        .additional_metadata = Some(metadata.clone());
    // The Services come from the fixture without the record (as an older operator made them);
    // the PodDisruptionBudget is made by this one with it.
    fx.obs.pdb = Some(crate::build::voter_pdb(&fx.obs.cluster, 3).unwrap());
    let mut sim = Sim::new(fx);
    let deleted = run_upgrade(&mut sim, 200, Some(4));
    assert!(deleted.is_empty(), "no restart: {deleted:?}");
    assert_eq!(kinds_count(&sim.steps, StepKind::SetMemberMetadata), 3);
    assert_eq!(kinds_count(&sim.steps, StepKind::PatchPodMetadata), 3);
    // Each PVC and EtcdMember once, both Services once; the PodDisruptionBudget was built with
    // the target already.
    assert_eq!(kinds_count(&sim.steps, StepKind::PatchMetadata), 8);
    // Every object the operator made carries the user's keys, next to the operator's own.
    let has = |labels: &BTreeMap<String, String>, annotations: &BTreeMap<String, String>| {
        labels.get("team").map(String::as_str) == Some("storage")
            && annotations.get("owner").map(String::as_str) == Some("ops")
    };
    let meta_has = |meta: &ObjectMeta| {
        has(
            &meta.labels.clone().unwrap_or_default(),
            &meta.annotations.clone().unwrap_or_default(),
        )
    };
    let record = crate::build::metadata_record(Some(&metadata)).unwrap();
    for meta in [
        &sim.fx.obs.headless_service.as_ref().unwrap().metadata,
        &sim.fx.obs.client_service.as_ref().unwrap().metadata,
        &sim.fx.obs.pdb.as_ref().unwrap().metadata,
    ] {
        assert!(meta_has(meta), "{meta:?}");
        // The operator's own labels stay.
        assert!(
            meta.labels
                .as_ref()
                .unwrap()
                .contains_key(etcd_operator_api::labels::CLUSTER),
            "{meta:?}"
        );
        assert_eq!(
            meta.annotations
                .as_ref()
                .unwrap()
                .get(crate::build::ADDITIONAL_METADATA_RECORD),
            Some(&record)
        );
    }
    for m in &sim.fx.obs.members {
        assert_eq!(m.member.spec.additional_metadata.as_ref(), Some(&metadata));
        let pod = m.pod.as_ref().unwrap();
        assert!(has(&pod.labels, &pod.annotations), "{pod:?}");
        let pvc = m.pvc.as_ref().unwrap();
        assert!(has(&pvc.labels, &pvc.annotations), "{pvc:?}");
        assert!(meta_has(&m.member.metadata), "{:?}", m.member.metadata);
    }

    // A key taken out (and another changed) is removed from the running Pods, still without
    // a restart, through crashes; the operator's own labels stay.
    let smaller = AdditionalMetadata {
        labels: Some([("team".to_string(), "db".to_string())].into()),
        annotations: None,
    };
    sim.fx.obs.cluster.spec.additional_metadata = Some(smaller.clone());
    sim.fx
        .status_mut()
        .observed
        .as_mut()
        .unwrap()
        .additional_metadata = Some(smaller.clone());
    let deleted = run_upgrade(&mut sim, 200, Some(3));
    assert!(deleted.is_empty(), "no restart: {deleted:?}");
    let changed = |labels: &BTreeMap<String, String>, annotations: &BTreeMap<String, String>| {
        labels.get("team").map(String::as_str) == Some("db") && !annotations.contains_key("owner")
    };
    for meta in [
        &sim.fx.obs.headless_service.as_ref().unwrap().metadata,
        &sim.fx.obs.client_service.as_ref().unwrap().metadata,
        &sim.fx.obs.pdb.as_ref().unwrap().metadata,
    ] {
        let annotations = meta.annotations.clone().unwrap_or_default();
        assert!(
            changed(&meta.labels.clone().unwrap_or_default(), &annotations),
            "{meta:?}"
        );
        assert_eq!(
            annotations.get(crate::build::ADDITIONAL_METADATA_RECORD),
            crate::build::metadata_record(Some(&smaller)).as_ref()
        );
    }
    for m in &sim.fx.obs.members {
        assert_eq!(m.member.spec.additional_metadata.as_ref(), Some(&smaller));
        let pod = m.pod.as_ref().unwrap();
        assert!(changed(&pod.labels, &pod.annotations), "{pod:?}");
        let pvc = m.pvc.as_ref().unwrap();
        assert!(changed(&pvc.labels, &pvc.annotations), "{pvc:?}");
        let meta = &m.member.metadata;
        assert!(
            changed(
                &meta.labels.clone().unwrap_or_default(),
                &meta.annotations.clone().unwrap_or_default()
            ),
            "{meta:?}"
        );
    }

    // All of it taken out: every key and every record goes.
    sim.fx.obs.cluster.spec.additional_metadata = None;
    sim.fx
        .status_mut()
        .observed
        .as_mut()
        .unwrap()
        .additional_metadata = None;
    let deleted = run_upgrade(&mut sim, 200, Some(5));
    assert!(deleted.is_empty(), "no restart: {deleted:?}");
    for meta in [
        &sim.fx.obs.headless_service.as_ref().unwrap().metadata,
        &sim.fx.obs.client_service.as_ref().unwrap().metadata,
        &sim.fx.obs.pdb.as_ref().unwrap().metadata,
    ] {
        let labels = meta.labels.clone().unwrap_or_default();
        let annotations = meta.annotations.clone().unwrap_or_default();
        assert!(!labels.contains_key("team"), "{meta:?}");
        assert!(
            !annotations.contains_key(crate::build::ADDITIONAL_METADATA_RECORD),
            "{meta:?}"
        );
    }
    for m in &sim.fx.obs.members {
        assert!(!m.pod.as_ref().unwrap().labels.contains_key("team"));
        assert!(!m.pvc.as_ref().unwrap().labels.contains_key("team"));
        assert!(
            !m.member
                .metadata
                .labels
                .clone()
                .unwrap_or_default()
                .contains_key("team")
        );
    }
}
