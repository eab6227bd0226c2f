//! Unit tests of the placement decision, one file per rule; the cluster is built from JSON the
//! way it would come from the API server.

mod inter_pod;
mod node_selection;
mod placement;
mod spread;
mod taints;

use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use super::{Cluster, Unschedulable, schedule};

/// A Ready node in `zone` with the labels the sandbox gives its nodes, plus `extra` merged into
/// the object (for taints, more labels, conditions).
pub fn node(name: &str, zone: &str, extra: Value) -> Node {
    let mut object = json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    });
    merge(&mut object, extra);
    serde_json::from_value(object).expect("a Node")
}

/// node-1, node-2, node-3 in zone-a, zone-b, zone-c.
pub fn three_nodes() -> Vec<Node> {
    vec![
        node("node-1", "zone-a", json!({})),
        node("node-2", "zone-b", json!({})),
        node("node-3", "zone-c", json!({})),
    ]
}

/// A Pod in `default` with `labels` and `spec` (containers are added).
pub fn pod(name: &str, labels: Value, spec: Value) -> Pod {
    let mut object = json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    });
    merge(&mut object, json!({"spec": spec}));
    serde_json::from_value(object).expect("a Pod")
}

/// The Pod in namespace `namespace`.
pub fn in_namespace(mut pod: Pod, namespace: &str) -> Pod {
    pod.metadata.namespace = Some(namespace.to_string());
    pod
}

/// The Pod bound to `node`.
pub fn on(mut pod: Pod, node: &str) -> Pod {
    pod.spec.get_or_insert_with(Default::default).node_name = Some(node.to_string());
    pod
}

pub fn cluster(nodes: Vec<Node>, pods: Vec<Pod>) -> Cluster {
    let namespaces = [
        ("default", json!({"kubernetes.io/metadata.name": "default"})),
        ("team-a", json!({"team": "a"})),
        ("team-b", json!({"team": "b"})),
    ];
    Cluster {
        nodes,
        pods,
        namespaces: namespaces
            .into_iter()
            .map(|(n, l)| (n.to_string(), serde_json::from_value(l).unwrap()))
            .collect(),
    }
}

/// The chosen node, failing the test if there is none.
pub fn placed(pod: &Pod, cluster: &Cluster) -> String {
    schedule(pod, cluster).unwrap_or_else(|why| {
        panic!(
            "{} should be placed: {why}",
            pod.metadata.name.as_deref().unwrap_or_default()
        )
    })
}

/// The unschedulable message, failing the test if the Pod was placed.
pub fn refused(pod: &Pod, cluster: &Cluster) -> String {
    match schedule(pod, cluster) {
        Ok(node) => panic!(
            "{} should not be placed, went to {node}",
            pod.metadata.name.as_deref().unwrap_or_default()
        ),
        Err(Unschedulable { message, .. }) => message,
    }
}

fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                if value.is_null() {
                    target.remove(&key);
                } else {
                    merge(target.entry(key).or_insert(Value::Null), value);
                }
            }
        }
        (target, patch) => *target = patch,
    }
}
