use etcd_operator_api::MemberPhase;

use super::*;
use crate::domain::etcd::DEFAULT_QUOTA_BACKEND_BYTES;
use crate::plan::Step;

#[test]
fn exposition_names_every_metric() {
    let metrics = Metrics::new();
    metrics.reconciled(0.01, None);
    metrics.reconciled(0.02, Some("conflict"));
    metrics.step_performed("CreatePod");
    metrics.count_kubernetes_write("Pod");
    metrics.count_kubernetes_write("EtcdCluster/status");
    metrics.set_leader(true);
    let text = metrics.encode();
    for name in [
        "etcd_operator_reconciles_total{result=\"ok\"} 1",
        "etcd_operator_reconciles_total{result=\"error\"} 1",
        "etcd_operator_reconcile_errors_total{kind=\"conflict\"} 1",
        "etcd_operator_reconcile_duration_seconds_count 2",
        "etcd_operator_steps_total{step=\"CreatePod\"} 1",
        "etcd_operator_leader 1",
    ] {
        assert!(text.contains(name), "{name} missing from:\n{text}");
    }
    assert_eq!(metrics.kubernetes_writes_total(), 2);
}

/// The dial counter follows the pool's count and never goes back, whichever pass reports last.
#[test]
fn the_pools_figures_are_exported() {
    let metrics = Metrics::new();
    metrics.etcd_connections(9, 12);
    metrics.etcd_connections(7, 10);
    let text = metrics.encode();
    for line in [
        "etcd_operator_etcd_connections_kept 7",
        "etcd_operator_etcd_dials_total 12",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
}

/// A schedule's two series follow it: set, moved when its cluster changes, gone when it is
/// deleted or suspended (`None`).
#[test]
fn a_schedule_has_its_freshness_series_until_it_goes() {
    let metrics = Metrics::new();
    metrics.snapshot_schedule("prod", "hourly", "etcd", Some((1_000, 3_600)));
    let text = metrics.encode();
    for line in [
        "etcd_operator_snapshot_schedule_last_success_timestamp_seconds{namespace=\"prod\",schedule=\"hourly\",cluster=\"etcd\"} 1000",
        "etcd_operator_snapshot_schedule_interval_seconds{namespace=\"prod\",schedule=\"hourly\",cluster=\"etcd\"} 3600",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
    metrics.snapshot_schedule("prod", "hourly", "other", Some((2_000, 3_600)));
    let text = metrics.encode();
    assert!(!text.contains("cluster=\"etcd\"}"), "{text}");
    assert!(text.contains("cluster=\"other\"} 2000"), "{text}");
    metrics.snapshot_schedule("prod", "hourly", "other", None);
    assert!(!metrics.encode().contains("schedule=\"hourly\""));
}

use crate::etcd::AlarmKind;
use crate::plan::tests::fixtures::{Answer, Fx, name, now};

fn figures(fx: &Fx) -> ClusterFigures {
    cluster_figures(&fx.obs, &fx.plan(), now())
}

fn member<'a>(figures: &'a ClusterFigures, member: &str) -> &'a MemberFigures {
    figures
        .member_figures
        .iter()
        .find(|m| m.member == member)
        .unwrap_or_else(|| panic!("no figures for {member}: {figures:?}"))
}

#[test]
fn members_not_on_the_target_version_count_as_outdated() {
    let mut fx = Fx::healthy(3);
    assert_eq!(figures(&fx).outdated, 0);
    fx.status_mut().observed.as_mut().unwrap().version = "3.5.2".into();
    assert_eq!(figures(&fx).outdated, 3);
    fx.member_mut(&name(1)).spec.version = "3.5.2".into();
    assert_eq!(figures(&fx).outdated, 2);
}

#[test]
fn a_healthy_cluster_counts_every_member_ready() {
    let mut fx = Fx::healthy(3);
    fx.member_mut(&name(2)).spec.options = Some(etcd_operator_api::shared::EtcdOptions {
        quota_backend_bytes: Some(8 << 30),
        ..Default::default()
    });
    let f = figures(&fx);
    assert_eq!((f.namespace.as_str(), f.cluster.as_str()), ("prod", "etcd"));
    assert_eq!((f.desired, f.members, f.ready), (3, 3, 3));
    assert_eq!((f.voters, f.learners), (3, 0));
    assert!(f.quorum);
    assert_eq!(
        f.leader,
        Some(crate::plan::tests::fixtures::id_of(&name(0)))
    );
    assert_eq!(
        f.alarms,
        Some(vec![(AlarmKind::NoSpace, 0), (AlarmKind::Corrupt, 0)])
    );
    assert_eq!(f.member_figures.len(), 3);
    let first = member(&f, &name(0));
    assert!(first.ready);
    assert_eq!(
        (first.db_size, first.db_size_in_use),
        (Some(1 << 20), Some(1 << 19))
    );
    assert_eq!(first.quota, DEFAULT_QUOTA_BACKEND_BYTES);
    assert_eq!(member(&f, &name(2)).quota, 8 << 30);
}

#[test]
fn a_member_down_is_not_ready_and_has_no_size() {
    let mut fx = Fx::healthy(3);
    fx.answer(&name(1), Answer::Down);
    fx.alarm(&name(0), AlarmKind::NoSpace);
    let f = figures(&fx);
    assert!(f.quorum);
    let down = member(&f, &name(1));
    assert!(!down.ready);
    assert_eq!((down.db_size, down.db_size_in_use), (None, None));
    assert!(member(&f, &name(0)).ready);
    assert_eq!(
        f.alarms,
        Some(vec![(AlarmKind::NoSpace, 1), (AlarmKind::Corrupt, 0)])
    );
}

#[test]
fn without_quorum_alarms_are_unknown() {
    let mut fx = Fx::healthy(3);
    for i in 0..3 {
        fx.answer(&name(i), Answer::NoQuorum);
    }
    let f = figures(&fx);
    assert!(!f.quorum);
    assert_eq!(f.leader, None);
    assert_eq!(f.alarms, None);
    assert!(f.member_figures.iter().all(|m| !m.ready));
}

#[test]
fn learners_and_voters_come_from_the_member_list() {
    let mut fx = Fx::healthy(3);
    fx.obs.cluster.spec.replicas = Some(4);
    fx.add_member(&name(3), etcd_operator_api::MemberPhase::Provisioning);
    fx.with_pod(
        &name(3),
        crate::plan::tests::fixtures::running_pod(&name(3)),
    );
    fx.etcd_add(&name(3), true, true);
    fx.answer(&name(3), Answer::Learner);
    let f = figures(&fx);
    assert_eq!((f.desired, f.members, f.voters, f.learners), (4, 4, 3, 1));
    assert!(!member(&f, &name(3)).ready);
}

#[test]
fn repairs_are_the_phases_announcing_them() {
    let set = |phase| Step::SetPhase {
        member: "etcd-1".into(),
        phase,
    };
    assert_eq!(
        repair_of(&set(MemberPhase::Recreating)),
        Some(Repair::Recreate)
    );
    assert_eq!(
        repair_of(&set(MemberPhase::Replacing)),
        Some(Repair::Replace)
    );
    assert_eq!(repair_of(&set(MemberPhase::Ready)), None);
    assert_eq!(repair_of(&Step::Idle), None);
}

#[test]
fn a_leader_change_is_a_different_leader_than_the_last_known() {
    assert!(!leader_changed(None, Some(1)), "the first leader seen");
    assert!(!leader_changed(Some(1), Some(1)));
    assert!(
        !leader_changed(Some(1), None),
        "no leader is not a change yet"
    );
    assert!(leader_changed(Some(1), Some(2)));
}

#[test]
fn a_rollout_is_timed_from_its_targets_adoption_to_every_member_on_it() {
    let metrics = Metrics::new();
    let mut fx = Fx::healthy(3);
    let secs = i64::from(fx.obs.cluster.spec.progress_deadline_seconds_or_default());
    let latched = now()
        .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(40))
        .unwrap();
    let deadline = latched
        .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(secs))
        .unwrap();
    fx.status_mut().progress_deadline = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        deadline,
    ));
    // Converged and never rolled: nothing observed.
    metrics.observed_cluster(&figures(&fx), &fx.obs);
    let count =
        "etcd_operator_cluster_rollout_duration_seconds_count{namespace=\"prod\",cluster=\"etcd\"}";
    assert!(
        metrics.encode().contains(&format!("{count} 0")),
        "{}",
        metrics.encode()
    );
    // A new version: members outdated.
    fx.status_mut().observed.as_mut().unwrap().version = "3.5.2".into();
    let f = figures(&fx);
    assert_eq!(f.outdated, 3);
    assert_eq!(f.target_latched_at, Some(latched));
    metrics.observed_cluster(&f, &fx.obs);
    assert!(metrics.encode().contains(&format!("{count} 0")));
    // Every member on it, but one not Ready yet: not done.
    for i in 0..3 {
        fx.member_mut(&name(i)).spec.version = "3.5.2".into();
    }
    fx.answer(&name(2), Answer::Down);
    let f = figures(&fx);
    assert_eq!(f.outdated, 0);
    assert!(!f.target_reached);
    metrics.observed_cluster(&f, &fx.obs);
    assert!(metrics.encode().contains(&format!("{count} 0")));
    // Ready: one rollout of 40 s.
    fx.answer(&name(2), Answer::Healthy);
    metrics.observed_cluster(&figures(&fx), &fx.obs);
    let text = metrics.encode();
    assert!(text.contains(&format!("{count} 1")), "{text}");
    assert!(
        text.contains("etcd_operator_cluster_rollout_duration_seconds_sum{namespace=\"prod\",cluster=\"etcd\"} 40"),
        "{text}"
    );
    // Later converged passes observe nothing more.
    metrics.observed_cluster(&figures(&fx), &fx.obs);
    assert!(metrics.encode().contains(&format!("{count} 1")));
}

fn lines_of(text: &str, cluster: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && l.contains(&format!("cluster=\"{cluster}\"")))
        .map(str::to_string)
        .collect()
}

#[test]
fn recorded_series_follow_members_leaders_and_deletion() {
    let metrics = Metrics::new();
    let mut fx = Fx::healthy(3);
    metrics.observed_cluster(&figures(&fx), &fx.obs);
    metrics.repair_started("prod", "etcd", Repair::Recreate);
    metrics.cluster_failed("prod", "etcd", "etcd_unreachable");
    let text = metrics.encode();
    for line in [
        "etcd_operator_cluster_desired_members{namespace=\"prod\",cluster=\"etcd\"} 3",
        "etcd_operator_cluster_voters{namespace=\"prod\",cluster=\"etcd\"} 3",
        "etcd_operator_cluster_ready_members{namespace=\"prod\",cluster=\"etcd\"} 3",
        "etcd_operator_cluster_has_quorum{namespace=\"prod\",cluster=\"etcd\"} 1",
        "etcd_operator_cluster_leader_changes_total{namespace=\"prod\",cluster=\"etcd\"} 0",
        "etcd_operator_cluster_alarms{namespace=\"prod\",cluster=\"etcd\",alarm=\"NOSPACE\"} 0",
        "etcd_operator_cluster_member_repairs_total{namespace=\"prod\",cluster=\"etcd\"} 1",
        "etcd_operator_cluster_member_replacements_total{namespace=\"prod\",cluster=\"etcd\"} 0",
        "etcd_operator_cluster_reconcile_errors_total{namespace=\"prod\",cluster=\"etcd\",kind=\"etcd_unreachable\"} 1",
        "etcd_operator_member_ready{namespace=\"prod\",cluster=\"etcd\",member=\"etcd-2\"} 1",
        "etcd_operator_member_db_size_bytes{namespace=\"prod\",cluster=\"etcd\",member=\"etcd-0\"} 1048576",
        "etcd_operator_member_db_size_in_use_bytes{namespace=\"prod\",cluster=\"etcd\",member=\"etcd-0\"} 524288",
        "etcd_operator_member_db_quota_bytes{namespace=\"prod\",cluster=\"etcd\",member=\"etcd-0\"} 2147483648",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }

    // Leadership moves to etcd-1 and etcd-2 leaves: one change, etcd-2's series go.
    fx.set_leader(&name(1));
    fx.obs
        .members
        .retain(|m| m.member.metadata.name.as_deref() != Some("etcd-2"));
    metrics.observed_cluster(&figures(&fx), &fx.obs);
    let text = metrics.encode();
    assert!(
        text.contains(
            "etcd_operator_cluster_leader_changes_total{namespace=\"prod\",cluster=\"etcd\"} 1"
        ),
        "{text}"
    );
    assert!(!text.contains("member=\"etcd-2\""), "{text}");
    assert!(text.contains("member=\"etcd-1\""), "{text}");

    metrics.forget_cluster("prod", "etcd");
    assert_eq!(lines_of(&metrics.encode(), "etcd"), Vec::<String>::new());

    // A late pass records the gone cluster again and counts its failure: the sweep over the
    // clusters still cached drops it, and keeps a cluster that is still there.
    metrics.observed_cluster(&figures(&fx), &fx.obs);
    metrics.cluster_failed("prod", "etcd", "not_found");
    metrics.cluster_failed("prod", "other", "etcd_unreachable");
    assert!(!lines_of(&metrics.encode(), "etcd").is_empty());
    let present = std::collections::HashSet::from([("prod".to_string(), "other".to_string())]);
    metrics.forget_clusters_except(&present);

    // Snapshot successes follow what is given, and go with it.
    let mut latest = std::collections::BTreeMap::new();
    latest.insert(("prod".to_string(), "other".to_string()), 1_767_225_600);
    metrics.snapshot_successes(&latest);
    assert!(metrics.encode().contains(
        "etcd_operator_snapshot_last_success_timestamp_seconds{namespace=\"prod\",cluster=\"other\"} 1767225600"
    ));
    metrics.snapshot_successes(&Default::default());
    assert!(
        !metrics
            .encode()
            .contains("snapshot_last_success_timestamp_seconds{")
    );
    assert_eq!(lines_of(&metrics.encode(), "etcd"), Vec::<String>::new());
    assert!(
        metrics
            .encode()
            .contains("cluster_reconcile_errors_total{namespace=\"prod\",cluster=\"other\",kind=\"etcd_unreachable\"} 1"),
        "the cluster still cached keeps its series"
    );
}
