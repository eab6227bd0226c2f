//! The StatefulSet plan on plain values.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::{Value, json};

use super::*;

fn set(replicas: i32, policy: &str) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": "etcd", "namespace": "ns", "uid": "set-uid", "generation": 2},
        "spec": {
            "replicas": replicas,
            "serviceName": "etcd-headless",
            "podManagementPolicy": policy,
            "selector": {"matchLabels": {"app": "etcd"}},
            "template": {
                "metadata": {"labels": {"app": "etcd"}},
                "spec": {
                    "containers": [{"name": "etcd", "image": "etcd"}],
                    "volumes": [{"name": "data", "emptyDir": {}}],
                },
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data", "labels": {"tier": "db"}},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            }],
        },
    }))
    .unwrap()
}

fn owner() -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "StatefulSet".into(),
        name: "etcd".into(),
        uid: "set-uid".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// A Pod of the set at `ordinal`, owned (or not), in `phase`, Ready or not, of `revision`.
fn pod(ordinal: i32, owned: bool, phase: &str, ready: bool, revision: &str) -> Pod {
    let owners: Value = if owned {
        json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "etcd", "uid": "set-uid", "controller": true}])
    } else {
        Value::Null
    };
    serde_json::from_value(json!({
        "metadata": {
            "name": format!("etcd-{ordinal}"), "namespace": "ns",
            "labels": {"app": "etcd", REVISION_LABEL: revision},
            "ownerReferences": owners,
        },
        "spec": {"containers": [{"name": "etcd", "image": "etcd"}]},
        "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
    }))
    .unwrap()
}

fn current(s: &StatefulSet) -> String {
    revision("etcd", &s.spec.as_ref().unwrap().template)
}

fn names(pods: &[Pod]) -> Vec<String> {
    pods.iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect()
}

#[test]
fn ordinals_and_claim_names_follow_kubernetes() {
    assert_eq!(ordinal_of("etcd", "etcd-0"), Some(0));
    assert_eq!(ordinal_of("etcd", "etcd-12"), Some(12));
    assert_eq!(ordinal_of("etcd", "etcd-01"), None);
    assert_eq!(ordinal_of("etcd", "etcd-x"), None);
    assert_eq!(ordinal_of("etcd", "etcd-headless-0"), None);
    assert_eq!(ordinal_of("etcd", "other-0"), None);
    assert_eq!(claim_name("data", "etcd", 2), "data-etcd-2");
}

#[test]
fn the_pod_has_its_identity_and_its_claims_volume() {
    let s = set(3, "Parallel");
    let pod = new_pod(&s, 1, "etcd-abc", owner());
    assert_eq!(pod.metadata.name.as_deref(), Some("etcd-1"));
    assert_eq!(pod.metadata.generate_name, None);
    let labels = pod.metadata.labels.clone().unwrap();
    assert_eq!(labels[POD_NAME_LABEL], "etcd-1");
    assert_eq!(labels[POD_INDEX_LABEL], "1");
    assert_eq!(labels[REVISION_LABEL], "etcd-abc");
    assert_eq!(labels["app"], "etcd");
    let spec = pod.spec.unwrap();
    assert_eq!(spec.hostname.as_deref(), Some("etcd-1"));
    assert_eq!(spec.subdomain.as_deref(), Some("etcd-headless"));
    // The template's volume of the claim template's name is replaced by the claim.
    let volumes = spec.volumes.unwrap();
    assert_eq!(volumes.len(), 1);
    assert_eq!(
        volumes[0]
            .persistent_volume_claim
            .as_ref()
            .unwrap()
            .claim_name,
        "data-etcd-1"
    );
    assert!(volumes[0].empty_dir.is_none());
    assert_eq!(pod.metadata.owner_references.unwrap()[0].uid, "set-uid");

    let claims = new_claims(&s, 1);
    assert_eq!(claims.len(), 1);
    let claim = &claims[0];
    assert_eq!(claim.metadata.name.as_deref(), Some("data-etcd-1"));
    let labels = claim.metadata.labels.clone().unwrap();
    assert_eq!(
        (labels["tier"].as_str(), labels["app"].as_str()),
        ("db", "etcd")
    );
    assert!(
        claim.metadata.owner_references.is_none(),
        "Retain: a claim outlives its set"
    );
}

#[test]
fn claims_are_owned_by_the_set_only_when_deleted_with_it() {
    let mut s = set(1, "Parallel");
    s.spec
        .as_mut()
        .unwrap()
        .persistent_volume_claim_retention_policy = Some(
        serde_json::from_value(json!({"whenDeleted": "Delete", "whenScaled": "Retain"})).unwrap(),
    );
    let claim = &new_claims(&s, 0)[0];
    assert_eq!(
        claim.metadata.owner_references.as_ref().unwrap()[0].uid,
        "set-uid"
    );
}

#[test]
fn parallel_creates_every_missing_pod_and_its_claims_at_once() {
    let s = set(3, "Parallel");
    let plan = plan_statefulset(&s, &[], &BTreeSet::new(), &owner());
    assert_eq!(names(&plan.create_pods), ["etcd-0", "etcd-1", "etcd-2"]);
    assert_eq!(plan.create_claims.len(), 3);
    // A claim that exists is not made again.
    let existing = BTreeSet::from(["data-etcd-1".to_string()]);
    let plan = plan_statefulset(&s, &[], &existing, &owner());
    let claims: Vec<_> = plan
        .create_claims
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(claims, ["data-etcd-0", "data-etcd-2"]);
}

#[test]
fn ordered_ready_waits_for_each_pod_before_the_next() {
    let s = set(3, "OrderedReady");
    let rev = current(&s);
    let plan = plan_statefulset(&s, &[], &BTreeSet::new(), &owner());
    assert_eq!(names(&plan.create_pods), ["etcd-0"]);
    let pods = [pod(0, true, "Running", false, &rev)];
    let plan = plan_statefulset(&s, &pods, &BTreeSet::new(), &owner());
    assert!(plan.create_pods.is_empty(), "etcd-0 is not Ready yet");
    let pods = [pod(0, true, "Running", true, &rev)];
    let plan = plan_statefulset(&s, &pods, &BTreeSet::new(), &owner());
    assert_eq!(names(&plan.create_pods), ["etcd-1"]);
    // A lost lower ordinal is made again first.
    let pods = [pod(1, true, "Running", true, &rev)];
    let plan = plan_statefulset(&s, &pods, &BTreeSet::new(), &owner());
    assert_eq!(names(&plan.create_pods), ["etcd-0"]);
}

#[test]
fn scale_down_removes_the_highest_ordinal_one_at_a_time_when_ordered() {
    let s = set(1, "OrderedReady");
    let rev = current(&s);
    let pods = [
        pod(0, true, "Running", true, &rev),
        pod(1, true, "Running", true, &rev),
        pod(2, true, "Running", true, &rev),
    ];
    let plan = plan_statefulset(&s, &pods, &BTreeSet::new(), &owner());
    assert_eq!(plan.delete_pods, ["etcd-2"]);
    let mut unhealthy = pods.clone();
    unhealthy[0] = pod(0, true, "Running", false, &rev);
    let plan = plan_statefulset(&s, &unhealthy, &BTreeSet::new(), &owner());
    assert!(
        plan.delete_pods.is_empty(),
        "no scale-down while a Pod is not Ready"
    );
    let parallel = set(1, "Parallel");
    let plan = plan_statefulset(&parallel, &pods, &BTreeSet::new(), &owner());
    assert_eq!(plan.delete_pods, ["etcd-2", "etcd-1"]);
}

#[test]
fn failed_pods_are_deleted_to_be_made_again() {
    let s = set(2, "Parallel");
    let rev = current(&s);
    let pods = [
        pod(0, true, "Failed", false, &rev),
        pod(1, true, "Running", true, &rev),
    ];
    let plan = plan_statefulset(&s, &pods, &BTreeSet::new(), &owner());
    assert_eq!(plan.delete_pods, ["etcd-0"]);
    assert!(plan.create_pods.is_empty());
}

#[test]
fn orphans_named_after_the_set_are_adopted_and_strays_released() {
    let s = set(2, "Parallel");
    let rev = current(&s);
    let mut stray = pod(1, true, "Running", true, &rev);
    stray.metadata.labels = Some([("app".to_string(), "other".to_string())].into());
    let mut foreign = pod(5, false, "Running", true, &rev);
    foreign.metadata.name = Some("web-0".into());
    let pods = [pod(0, false, "Running", true, &rev), stray, foreign];
    let plan = plan_statefulset(&s, &pods, &BTreeSet::new(), &owner());
    assert_eq!(plan.adopt, ["etcd-0"]);
    assert_eq!(plan.release, ["etcd-1"]);
    // The released Pod no longer counts: ordinal 1 is made again; the adopted one is kept.
    assert_eq!(names(&plan.create_pods), ["etcd-1"]);
    assert_eq!(plan.status.replicas, 1);
}

#[test]
fn a_set_being_deleted_does_nothing() {
    let mut s = set(3, "Parallel");
    s.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-01-01T00:00:00Z".parse().unwrap(),
    ));
    let rev = current(&s);
    let pods = [pod(0, false, "Running", true, &rev)];
    let plan = plan_statefulset(&s, &pods, &BTreeSet::new(), &owner());
    assert!(plan.adopt.is_empty() && plan.create_pods.is_empty() && plan.delete_pods.is_empty());
}

#[test]
fn rolling_update_replaces_the_highest_stale_pod_once_all_are_ready() {
    let s = set(3, "Parallel");
    let rev = current(&s);
    let pods = [
        pod(0, true, "Running", true, "etcd-old"),
        pod(1, true, "Running", true, "etcd-old"),
        pod(2, true, "Running", true, &rev),
    ];
    let plan = plan_statefulset(&s, &pods, &BTreeSet::new(), &owner());
    assert_eq!(plan.delete_pods, ["etcd-1"]);
    assert_eq!(plan.status.updated_replicas, Some(1));
    assert_eq!(plan.status.update_revision.as_deref(), Some(rev.as_str()));
    let mut waiting = pods.clone();
    waiting[2] = pod(2, true, "Running", false, &rev);
    let plan = plan_statefulset(&s, &waiting, &BTreeSet::new(), &owner());
    assert!(plan.delete_pods.is_empty(), "one Pod at a time");
    // OnDelete leaves the stale Pods alone.
    let mut on_delete = s.clone();
    on_delete.spec.as_mut().unwrap().update_strategy =
        Some(serde_json::from_value(json!({"type": "OnDelete"})).unwrap());
    let plan = plan_statefulset(&on_delete, &pods, &BTreeSet::new(), &owner());
    assert!(plan.delete_pods.is_empty());
    // A partition protects the ordinals below it.
    let mut partitioned = s.clone();
    partitioned.spec.as_mut().unwrap().update_strategy = Some(
        serde_json::from_value(json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}))
            .unwrap(),
    );
    let plan = plan_statefulset(&partitioned, &pods, &BTreeSet::new(), &owner());
    assert!(plan.delete_pods.is_empty());
}

#[test]
fn status_counts_ready_current_and_updated_pods() {
    let s = set(3, "Parallel");
    let rev = current(&s);
    let pods = [
        pod(0, true, "Running", true, &rev),
        pod(1, true, "Running", false, &rev),
    ];
    let plan = plan_statefulset(&s, &pods, &BTreeSet::new(), &owner());
    let status = plan.status;
    assert_eq!(status.replicas, 2);
    assert_eq!(status.ready_replicas, Some(1));
    assert_eq!(status.updated_replicas, Some(2));
    assert_eq!(status.current_replicas, Some(2));
    assert_eq!(status.observed_generation, Some(2));
}
