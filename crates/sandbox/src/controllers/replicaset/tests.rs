//! The ReplicaSet plan on plain values.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::plan_replicaset;
use crate::controllers::TimeScale;

fn now() -> Timestamp {
    "2025-01-01T12:00:00Z".parse().unwrap()
}

fn ago(seconds: i64) -> String {
    (now() - SignedDuration::from_secs(seconds)).to_string()
}

fn replica_set(replicas: i32, min_ready_seconds: i32) -> ReplicaSet {
    serde_json::from_value(json!({
        "metadata": {"name": "web-abc", "namespace": "default", "uid": "rs-uid", "generation": 3},
        "spec": {
            "replicas": replicas,
            "minReadySeconds": min_ready_seconds,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}},
        },
    }))
    .unwrap()
}

/// A Pod `created` seconds ago, in `phase`, Ready since `ready_for` seconds if given.
fn web_pod(
    name: &str,
    created: i64,
    phase: &str,
    node: Option<&str>,
    ready_for: Option<i64>,
) -> Pod {
    let conditions = match ready_for {
        Some(seconds) => {
            json!([{"type": "Ready", "status": "True", "lastTransitionTime": ago(seconds)}])
        }
        None => json!([{"type": "Ready", "status": "False"}]),
    };
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "web"}, "creationTimestamp": ago(created)},
        "spec": {"containers": [{"name": "web", "image": "nginx"}], "nodeName": node},
        "status": {"phase": phase, "conditions": conditions},
    }))
    .unwrap()
}

#[test]
fn creates_the_missing_replicas_and_ignores_finished_pods() {
    let pods = [
        web_pod("a", 50, "Running", Some("node-1"), Some(40)),
        web_pod("done", 60, "Failed", Some("node-1"), None),
    ];
    let plan = plan_replicaset(&replica_set(3, 0), &pods, now(), TimeScale::REAL);
    assert_eq!(plan.create, 2);
    assert!(plan.delete.is_empty());
    assert_eq!(
        (
            plan.status.replicas,
            plan.status.ready_replicas,
            plan.status.available_replicas
        ),
        (1, Some(1), Some(1))
    );
    assert_eq!(plan.status.observed_generation, Some(3));
}

#[test]
fn surplus_goes_least_valuable_first() {
    let pods = [
        web_pod("old-ready", 300, "Running", Some("node-1"), Some(200)),
        web_pod("new-ready", 100, "Running", Some("node-2"), Some(50)),
        web_pod("not-ready", 200, "Running", Some("node-3"), None),
        web_pod("pending", 10, "Pending", Some("node-1"), None),
        web_pod("unscheduled", 5, "Pending", None, None),
    ];
    let plan = plan_replicaset(&replica_set(1, 0), &pods, now(), TimeScale::REAL);
    assert_eq!(
        plan.delete,
        ["unscheduled", "pending", "not-ready", "new-ready"]
    );
    assert_eq!(plan.create, 0);
}

#[test]
fn min_ready_seconds_delays_availability() {
    let pods = [
        web_pod("a", 50, "Running", Some("node-1"), Some(4)),
        web_pod("b", 50, "Running", Some("node-2"), Some(30)),
    ];
    let plan = plan_replicaset(&replica_set(2, 10), &pods, now(), TimeScale::REAL);
    assert_eq!(
        (plan.status.ready_replicas, plan.status.available_replicas),
        (Some(2), Some(1))
    );
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(6)));
    let fast = plan_replicaset(
        &replica_set(2, 10),
        &pods,
        now(),
        TimeScale::new(0.1).unwrap(),
    );
    assert_eq!(fast.status.available_replicas, Some(2));
}

#[test]
fn deleting_pods_do_not_count_and_are_replaced() {
    let mut leaving = web_pod("leaving", 50, "Running", Some("node-1"), Some(40));
    leaving.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    let plan = plan_replicaset(&replica_set(1, 0), &[leaving], now(), TimeScale::REAL);
    assert_eq!((plan.create, plan.status.replicas), (1, 0));
}
