//! Taints and tolerations, unschedulable and NotReady nodes.

use serde_json::{Value, json};

use super::{cluster, node, on, placed, pod, refused, three_nodes};
use crate::scheduler::taints::{taint, tolerates};

fn tainted(name: &str, zone: &str, taints: Value) -> k8s_openapi::api::core::v1::Node {
    node(name, zone, json!({"spec": {"taints": taints}}))
}

fn tolerating(tolerations: Value) -> k8s_openapi::api::core::v1::Pod {
    pod("p", json!({}), json!({"tolerations": tolerations}))
}

fn toleration(value: Value) -> k8s_openapi::api::core::v1::Toleration {
    serde_json::from_value(value).unwrap()
}

#[test]
fn toleration_matching_rules() {
    let mut dedicated = taint("dedicated", "NoSchedule");
    dedicated.value = Some("infra".into());
    assert!(tolerates(
        &toleration(
            json!({"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"})
        ),
        &dedicated
    ));
    assert!(
        tolerates(
            &toleration(json!({"key": "dedicated", "value": "infra"})),
            &dedicated
        ),
        "Equal is the default, empty effect matches all"
    );
    assert!(!tolerates(
        &toleration(json!({"key": "dedicated", "value": "web"})),
        &dedicated
    ));
    assert!(tolerates(
        &toleration(json!({"key": "dedicated", "operator": "Exists"})),
        &dedicated
    ));
    assert!(!tolerates(
        &toleration(json!({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"})),
        &dedicated
    ));
    assert!(
        tolerates(&toleration(json!({"operator": "Exists"})), &dedicated),
        "empty key with Exists tolerates everything"
    );
    assert!(!tolerates(
        &toleration(json!({"key": "other", "operator": "Exists"})),
        &dedicated
    ));
    assert!(!tolerates(
        &toleration(json!({"key": "dedicated", "operator": "Bogus"})),
        &dedicated
    ));
}

#[test]
fn no_schedule_and_no_execute_taints_keep_pods_off() {
    let nodes = vec![
        tainted(
            "node-1",
            "zone-a",
            json!([{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]),
        ),
        tainted(
            "node-2",
            "zone-b",
            json!([{"key": "maintenance", "effect": "NoExecute"}]),
        ),
        tainted(
            "node-3",
            "zone-c",
            json!([{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
        ),
    ];
    let cluster = cluster(nodes, vec![]);
    let message = refused(&pod("p", json!({}), json!({})), &cluster);
    assert_eq!(
        message,
        "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: infra}, 1 node(s) had untolerated taint {gpu: true}, 1 node(s) had untolerated taint {maintenance: }."
    );
    assert_eq!(
        placed(
            &tolerating(
                json!([{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}])
            ),
            &cluster
        ),
        "node-2"
    );
    assert_eq!(
        placed(
            &tolerating(json!([{"key": "gpu", "operator": "Equal", "value": "true"}])),
            &cluster
        ),
        "node-3"
    );
    assert_eq!(
        placed(&tolerating(json!([{"operator": "Exists"}])), &cluster),
        "node-1"
    );
}

#[test]
fn prefer_no_schedule_only_steers() {
    let nodes = vec![
        tainted(
            "node-1",
            "zone-a",
            json!([{"key": "spot", "effect": "PreferNoSchedule"}]),
        ),
        tainted(
            "node-2",
            "zone-b",
            json!([{"key": "spot", "effect": "PreferNoSchedule"}, {"key": "old", "effect": "PreferNoSchedule"}]),
        ),
        node("node-3", "zone-c", json!({})),
    ];
    // node-3 is the busiest, and still the only one without taints to avoid.
    let busy = vec![
        on(pod("b1", json!({}), json!({})), "node-3"),
        on(pod("b2", json!({}), json!({})), "node-3"),
    ];
    let cluster = cluster(nodes.clone(), busy);
    assert_eq!(placed(&pod("p", json!({}), json!({})), &cluster), "node-3");
    let only_tainted = super::cluster(nodes[..2].to_vec(), vec![]);
    assert_eq!(
        placed(&pod("p", json!({}), json!({})), &only_tainted),
        "node-1",
        "fewer untolerated preferences win"
    );
    let tolerant = tolerating(
        json!([{"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}, {"key": "old", "operator": "Exists"}]),
    );
    assert_eq!(placed(&tolerant, &only_tainted), "node-1");
}

#[test]
fn unschedulable_nodes_are_skipped_unless_tolerated() {
    let mut nodes = three_nodes();
    for node in &mut nodes[..2] {
        node.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
    }
    let cluster = cluster(nodes, vec![on(pod("busy", json!({}), json!({})), "node-3")]);
    assert_eq!(placed(&pod("p", json!({}), json!({})), &cluster), "node-3");
    let pinned = pod(
        "p",
        json!({}),
        json!({"nodeSelector": {"kubernetes.io/hostname": "node-1"}}),
    );
    assert_eq!(
        refused(&pinned, &cluster),
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 2 node(s) were unschedulable."
    );
    let tolerant = pod(
        "p",
        json!({}),
        json!({"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]}),
    );
    assert_eq!(placed(&tolerant, &cluster), "node-1");
}

#[test]
fn not_ready_nodes_are_avoided_as_if_tainted() {
    let nodes = vec![
        node(
            "node-1",
            "zone-a",
            json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}),
        ),
        node(
            "node-2",
            "zone-b",
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
        ),
        tainted(
            "node-3",
            "zone-c",
            json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}, {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]),
        ),
    ];
    let cluster = cluster(nodes, vec![]);
    assert_eq!(
        refused(&pod("p", json!({}), json!({})), &cluster),
        "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 2 node(s) had untolerated taint {node.kubernetes.io/unreachable: }."
    );
    let daemon_like =
        tolerating(json!([{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}]));
    assert_eq!(placed(&daemon_like, &cluster), "node-2");
}
