//! Node health and taint eviction on plain values.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::{Node, Pod, Taint};
use serde_json::{Value, json};

use super::{Eviction, eviction_time, reconciled_taints, unknown_conditions};
use crate::controllers::TimeScale;

fn now() -> Timestamp {
    "2025-01-01T12:00:00Z".parse().unwrap()
}

fn node(conditions: Value, taints: Value, unschedulable: bool) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": "node-1"},
        "spec": {"taints": taints, "unschedulable": unschedulable},
        "status": {"conditions": conditions},
    }))
    .unwrap()
}

fn keys(taints: &[Taint]) -> Vec<String> {
    let mut keys: Vec<String> = taints
        .iter()
        .map(|t| format!("{}:{}", t.key, t.effect))
        .collect();
    keys.sort();
    keys
}

#[test]
fn a_silent_node_turns_unknown() {
    let ready = node(
        json!([{"type": "Ready", "status": "True", "lastHeartbeatTime": "2025-01-01T11:00:00Z"}, {"type": "MemoryPressure", "status": "False"}]),
        json!([]),
        false,
    );
    let conditions = unknown_conditions(&ready, now()).unwrap();
    let by_type = |type_: &str| conditions.iter().find(|c| c.type_ == type_).unwrap();
    assert_eq!(by_type("Ready").status, "Unknown");
    assert_eq!(
        by_type("Ready").reason.as_deref(),
        Some("NodeStatusUnknown")
    );
    assert_eq!(
        by_type("Ready").message.as_deref(),
        Some("Kubelet stopped posting node status.")
    );
    assert_eq!(
        by_type("Ready").last_transition_time.as_ref().map(|t| t.0),
        Some(now())
    );
    assert_eq!(by_type("MemoryPressure").status, "Unknown");
    assert_eq!(
        by_type("DiskPressure").reason.as_deref(),
        Some("NodeStatusNeverUpdated")
    );
    let already = node(
        json!([{"type": "Ready", "status": "Unknown"}, {"type": "MemoryPressure", "status": "Unknown"}, {"type": "DiskPressure", "status": "Unknown"}, {"type": "PIDPressure", "status": "Unknown"}]),
        json!([]),
        false,
    );
    assert_eq!(unknown_conditions(&already, now()), None);
}

#[test]
fn taints_follow_the_ready_condition() {
    let unknown = node(
        json!([{"type": "Ready", "status": "Unknown"}]),
        json!([{"key": "dedicated", "value": "etcd", "effect": "NoSchedule"}]),
        false,
    );
    let taints = reconciled_taints(&unknown, now()).unwrap();
    assert_eq!(
        keys(&taints),
        [
            "dedicated:NoSchedule",
            "node.kubernetes.io/unreachable:NoExecute",
            "node.kubernetes.io/unreachable:NoSchedule"
        ]
    );
    let no_execute = taints.iter().find(|t| t.effect == "NoExecute").unwrap();
    assert_eq!(no_execute.time_added.as_ref().map(|t| t.0), Some(now()));
    // Reconciling again changes nothing (the time stays).
    let tainted = node(
        json!([{"type": "Ready", "status": "Unknown"}]),
        serde_json::to_value(&taints).unwrap(),
        false,
    );
    assert_eq!(
        reconciled_taints(&tainted, now() + SignedDuration::from_secs(60)),
        None
    );
    // Ready False swaps unreachable for not-ready.
    let not_ready = node(
        json!([{"type": "Ready", "status": "False"}]),
        serde_json::to_value(&taints).unwrap(),
        false,
    );
    let swapped = reconciled_taints(&not_ready, now()).unwrap();
    assert_eq!(
        keys(&swapped),
        [
            "dedicated:NoSchedule",
            "node.kubernetes.io/not-ready:NoExecute",
            "node.kubernetes.io/not-ready:NoSchedule"
        ]
    );
    // Ready again: only the administrator's taint is left.
    let back = node(
        json!([{"type": "Ready", "status": "True"}]),
        serde_json::to_value(&swapped).unwrap(),
        false,
    );
    assert_eq!(
        keys(&reconciled_taints(&back, now()).unwrap()),
        ["dedicated:NoSchedule"]
    );
}

#[test]
fn pressure_and_cordon_add_no_schedule_taints() {
    let pressed = node(
        json!([{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "True"}]),
        json!([]),
        true,
    );
    let taints = reconciled_taints(&pressed, now()).unwrap();
    assert_eq!(
        keys(&taints),
        [
            "node.kubernetes.io/disk-pressure:NoSchedule",
            "node.kubernetes.io/unschedulable:NoSchedule"
        ]
    );
    assert!(taints.iter().all(|t| t.time_added.is_none()));
    let healthy = node(
        json!([{"type": "Ready", "status": "True"}]),
        json!([]),
        false,
    );
    assert_eq!(reconciled_taints(&healthy, now()), None);
}

fn pod_tolerating(tolerations: Value) -> Pod {
    serde_json::from_value(
        json!({"metadata": {"name": "p"}, "spec": {"containers": [], "tolerations": tolerations}}),
    )
    .unwrap()
}

fn unreachable_since(seconds_ago: i64) -> Vec<Taint> {
    serde_json::from_value(json!([
        {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": (now() - SignedDuration::from_secs(seconds_ago)).to_string()},
    ]))
    .unwrap()
}

#[test]
fn pods_without_tolerations_go_after_the_eviction_timeout() {
    let timeout = Duration::from_secs(300);
    let pod = pod_tolerating(json!([]));
    let at = eviction_time(
        &pod,
        &unreachable_since(100),
        timeout,
        TimeScale::REAL,
        now(),
    );
    assert_eq!(at, Eviction::At(now() + SignedDuration::from_secs(200)));
    // Scaled: 300 cluster seconds at 0.01 are 3 real seconds, long past.
    let fast = eviction_time(
        &pod,
        &unreachable_since(100),
        timeout,
        TimeScale::new(0.01).unwrap(),
        now(),
    );
    assert_eq!(fast, Eviction::At(now() - SignedDuration::from_secs(97)));
    assert_eq!(
        eviction_time(
            &pod,
            &unreachable_since(0)[..1],
            timeout,
            TimeScale::REAL,
            now()
        ),
        Eviction::Never,
        "NoSchedule alone evicts nothing"
    );
}

#[test]
fn the_pods_own_tolerations_decide() {
    let timeout = Duration::from_secs(300);
    let short = pod_tolerating(
        json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}]),
    );
    assert_eq!(
        eviction_time(
            &short,
            &unreachable_since(0),
            timeout,
            TimeScale::REAL,
            now()
        ),
        Eviction::At(now() + SignedDuration::from_secs(10))
    );
    let forever = pod_tolerating(json!([{"operator": "Exists"}]));
    assert_eq!(
        eviction_time(
            &forever,
            &unreachable_since(1000),
            timeout,
            TimeScale::REAL,
            now()
        ),
        Eviction::Never
    );
    let custom: Vec<Taint> = serde_json::from_value(
        json!([{"key": "maintenance", "effect": "NoExecute", "timeAdded": now().to_string()}]),
    )
    .unwrap();
    assert_eq!(
        eviction_time(
            &pod_tolerating(json!([])),
            &custom,
            timeout,
            TimeScale::REAL,
            now()
        ),
        Eviction::At(now()),
        "an untolerated NoExecute taint evicts at once"
    );
    let negative = pod_tolerating(
        json!([{"key": "maintenance", "operator": "Exists", "tolerationSeconds": -5}]),
    );
    assert_eq!(
        eviction_time(&negative, &custom, timeout, TimeScale::REAL, now()),
        Eviction::At(now())
    );
}
