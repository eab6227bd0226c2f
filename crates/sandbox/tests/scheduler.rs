//! The scheduler against a real sandbox API server: binding through `pods/binding`,
//! `PodScheduled=False` with the real message for Pods it cannot place, and retries when the
//! cluster changes.

mod controllers_support;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube_sandbox::controllers::ControlPlaneOptions;
use serde_json::json;

use controllers_support::{ControlPlane, condition, eventually, list, node_of, pod_from, start};

fn scheduler_only() -> ControlPlaneOptions {
    ControlPlaneOptions::default()
        .without_workloads()
        .without_node_lifecycle()
}

async fn scheduler_sandbox() -> ControlPlane {
    start(scheduler_only()).await
}

fn etcd_pod(name: &str) -> Pod {
    pod_from(json!({
        "metadata": {"name": name, "labels": {"app": "etcd"}},
        "spec": {
            "containers": [{"name": "etcd", "image": "quay.io/coreos/etcd:v3.5.1"}],
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "etcd"}}, "topologyKey": "kubernetes.io/hostname"},
            ]}},
        },
    }))
}

#[tokio::test]
async fn scheduler_spreads_anti_affine_pods_and_leaves_the_fourth_pending_with_the_reason() {
    let cluster = scheduler_sandbox().await;
    let pods = cluster.pods();
    for name in ["etcd-0", "etcd-1", "etcd-2", "etcd-3"] {
        pods.create(&PostParams::default(), &etcd_pod(name))
            .await
            .unwrap();
    }
    let message = eventually("etcd-3 marked unschedulable", 20, || async {
        let pod = pods.get("etcd-3").await.unwrap();
        condition(&pod, "PodScheduled")
            .filter(|c| c.0 == "False")
            .map(|c| (c.1, c.2))
    })
    .await;
    assert_eq!(message.0, "Unschedulable");
    assert_eq!(
        message.1,
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
    );
    let placed: BTreeMap<String, String> = list(&pods, "app=etcd")
        .await
        .iter()
        .filter_map(|p| Some((node_of(p)?, p.name_any())))
        .collect();
    assert_eq!(
        placed.keys().collect::<Vec<_>>(),
        ["node-1", "node-2", "node-3"],
        "one per node: {placed:?}"
    );
    let bound = pods.get("etcd-0").await.unwrap();
    assert_eq!(
        condition(&bound, "PodScheduled").map(|c| c.0),
        Some("True".to_string()),
        "binding sets PodScheduled=True"
    );

    // A member leaves (its node agent finishes it): the Pending one takes its place.
    let freed = node_of(&bound).unwrap();
    pods.delete("etcd-0", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let node = eventually("etcd-3 scheduled", 20, || async {
        node_of(&pods.get("etcd-3").await.unwrap())
    })
    .await;
    assert_eq!(node, freed);

    // The scheduler records what it did, as the real one does.
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::default_namespaced(cluster.client());
    let reasons = eventually("scheduler events", 10, || async {
        let reasons: Vec<String> = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|e| e.reason)
            .collect();
        (reasons.iter().any(|r| r == "FailedScheduling")
            && reasons.iter().filter(|r| *r == "Scheduled").count() >= 4)
            .then_some(reasons)
    })
    .await;
    assert!(reasons.contains(&"Scheduled".to_string()));
}

#[tokio::test]
async fn scheduler_spreads_over_zones_with_topology_constraints() {
    let cluster = scheduler_sandbox().await;
    let pods = cluster.pods();
    for index in 0..6 {
        let pod = pod_from(json!({
            "metadata": {"name": format!("web-{index}"), "labels": {"app": "web"}},
            "spec": {
                "containers": [{"name": "web", "image": "nginx"}],
                "topologySpreadConstraints": [{
                    "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                }],
            },
        }));
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let placed = eventually("six web Pods bound", 20, || async {
        let pods = list(&pods, "app=web").await;
        pods.iter().map(node_of).collect::<Option<Vec<String>>>()
    })
    .await;
    let mut per_node: BTreeMap<String, usize> = BTreeMap::new();
    for node in placed {
        *per_node.entry(node).or_default() += 1;
    }
    assert_eq!(
        per_node,
        BTreeMap::from([
            ("node-1".into(), 2),
            ("node-2".into(), 2),
            ("node-3".into(), 2)
        ]),
        "two per zone"
    );
}

#[tokio::test]
async fn scheduler_honours_taints_and_retries_when_a_node_changes() {
    let cluster = scheduler_sandbox().await;
    let nodes: Api<Node> = Api::all(cluster.client());
    let taint = |key: &str| json!({"spec": {"taints": [{"key": key, "value": "true", "effect": "NoSchedule"}]}});
    for node in ["node-1", "node-2", "node-3"] {
        nodes
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(taint("dedicated")),
            )
            .await
            .unwrap();
    }
    let pods = cluster.pods();
    let plain = pod_from(
        json!({"metadata": {"name": "plain"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
    );
    pods.create(&PostParams::default(), &plain).await.unwrap();
    let tolerant = pod_from(json!({
        "metadata": {"name": "tolerant"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], "tolerations": [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]},
    }));
    pods.create(&PostParams::default(), &tolerant)
        .await
        .unwrap();
    eventually("the tolerant Pod bound", 20, || async {
        node_of(&pods.get("tolerant").await.unwrap())
    })
    .await;
    let message = eventually("the plain Pod marked unschedulable", 20, || async {
        condition(&pods.get("plain").await.unwrap(), "PodScheduled")
            .filter(|c| c.0 == "False")
            .map(|c| c.2)
    })
    .await;
    assert_eq!(
        message,
        "0/3 nodes are available: 3 node(s) had untolerated taint {dedicated: true}."
    );

    // Untainting node-2 lets the scheduler place the Pending Pod there.
    nodes
        .patch(
            "node-2",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": null}})),
        )
        .await
        .unwrap();
    let node = eventually("the plain Pod bound", 20, || async {
        node_of(&pods.get("plain").await.unwrap())
    })
    .await;
    assert_eq!(node, "node-2");
    let scheduled = condition(&pods.get("plain").await.unwrap(), "PodScheduled").unwrap();
    assert_eq!(scheduled.0, "True");
}

#[tokio::test]
async fn scheduler_leaves_other_schedulers_pods_alone() {
    let cluster = scheduler_sandbox().await;
    let pods = cluster.pods();
    let other = pod_from(
        json!({"metadata": {"name": "other"}, "spec": {"schedulerName": "my-scheduler", "containers": [{"name": "c", "image": "busybox"}]}}),
    );
    pods.create(&PostParams::default(), &other).await.unwrap();
    let mine = pod_from(
        json!({"metadata": {"name": "mine"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}),
    );
    pods.create(&PostParams::default(), &mine).await.unwrap();
    eventually("the default-scheduler Pod bound", 20, || async {
        node_of(&pods.get("mine").await.unwrap())
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let other = pods.get("other").await.unwrap();
    assert_eq!(node_of(&other), None);
    assert_eq!(condition(&other, "PodScheduled"), None);
}
