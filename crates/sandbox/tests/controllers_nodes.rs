//! Node lifecycle against a real sandbox API server: the test plays the node agents (Lease
//! renewals, Ready posts) and stops one to see its node go NotReady, tainted, its Pods evicted
//! after the (scaled) eviction timeout, and come back.

mod controllers_support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use kube_sandbox::controllers::ControlPlaneOptions;
use serde_json::{Value, json};

use controllers_support::{
    Heartbeats, condition, eventually, fast, finish_terminating, node_of, pod_from, post_ready,
    set_phase, start,
};

const UNREACHABLE: &str = "node.kubernetes.io/unreachable";

/// A Pod pinned to `node` with `tolerations`.
fn pinned(name: &str, node: &str, tolerations: Value) -> Pod {
    pod_from(json!({
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "main", "image": "busybox"}],
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": tolerations,
        },
    }))
}

fn taints(node: &Node) -> Vec<(String, String)> {
    let mut taints: Vec<(String, String)> = node
        .spec
        .iter()
        .flat_map(|s| s.taints.iter().flatten())
        .map(|t| (t.key.clone(), t.effect.clone()))
        .collect();
    taints.sort();
    taints
}

fn ready_status(node: &Node) -> Option<(String, String)> {
    let condition = node
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?;
    Some((
        condition.status.clone(),
        condition.reason.clone().unwrap_or_default(),
    ))
}

#[tokio::test]
async fn controllers_silent_node_goes_not_ready_its_pods_are_evicted_and_it_comes_back() {
    // A 150s grace → 1.5s (room for slow heartbeats on a loaded machine), the default 300s
    // eviction timeout → 3s.
    let options = ControlPlaneOptions::default()
        .time_scale(fast())
        .node_monitor_grace_period(Duration::from_secs(150));
    let cluster = start(options).await;
    let client = cluster.client();
    let heartbeats = Heartbeats::start(client.clone(), &["node-1", "node-2", "node-3"]).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let pods = cluster.pods();
    let unreachable_for = |seconds: Option<i64>| json!([{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}]);
    for pod in [
        pinned("plain", "node-2", json!([])),
        pinned("quick", "node-2", unreachable_for(Some(50))),
        pinned("patient", "node-2", unreachable_for(None)),
    ] {
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    for name in ["plain", "quick", "patient"] {
        eventually(&format!("{name} bound"), 20, || async {
            node_of(&pods.get(name).await.unwrap())
        })
        .await;
        set_phase(&pods, name, "Running", true).await;
    }
    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert_eq!(
        ready_status(&nodes.get("node-2").await.unwrap()).unwrap().0,
        "True",
        "heartbeats keep the node Ready past the grace period"
    );

    // node-2's agent dies.
    heartbeats.stop("node-2");
    let silent = eventually("node-2 Unknown and tainted", 20, || async {
        let node = nodes.get("node-2").await.unwrap();
        let tainted = taints(&node)
            == [
                (UNREACHABLE.to_string(), "NoExecute".to_string()),
                (UNREACHABLE.to_string(), "NoSchedule".to_string()),
            ];
        (tainted
            && ready_status(&node)? == ("Unknown".to_string(), "NodeStatusUnknown".to_string()))
            .then_some(node)
    })
    .await;
    let tainted_at = tokio::time::Instant::now();
    let no_execute = silent
        .spec
        .unwrap()
        .taints
        .unwrap()
        .into_iter()
        .find(|t| t.effect == "NoExecute")
        .unwrap();
    assert!(no_execute.time_added.is_some());
    for healthy in ["node-1", "node-3"] {
        assert_eq!(
            ready_status(&nodes.get(healthy).await.unwrap()).unwrap().0,
            "True"
        );
    }
    eventually("Pods on node-2 marked not Ready", 20, || async {
        let all_not_ready =
            futures::future::join_all(["plain", "quick", "patient"].map(|n| pods.get(n)))
                .await
                .into_iter()
                .all(|p| {
                    let pod = p.unwrap();
                    condition(&pod, "Ready").is_some_and(|c| c.0 == "False")
                        && pod.status.unwrap().phase.as_deref() == Some("Running")
                });
        all_not_ready.then_some(())
    })
    .await;

    // Its own 50 cluster seconds (0.5s) run out first; the default 300 (3s) later; never for the patient one.
    eventually("quick evicted", 20, || async {
        pods.get("quick")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .map(|_| ())
    })
    .await;
    let evicted = pods.get("quick").await.unwrap();
    assert_eq!(
        condition(&evicted, "DisruptionTarget").map(|c| c.1),
        Some("DeletionByTaintManager".into())
    );
    assert!(
        pods.get("plain")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none(),
        "plain still has time"
    );
    eventually("plain evicted", 20, || async {
        pods.get("plain")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .map(|_| ())
    })
    .await;
    // 3s after the taint's timeAdded, which the API keeps in whole seconds (up to 1s early).
    assert!(
        tainted_at.elapsed() >= Duration::from_millis(1500),
        "the eviction timeout was honoured ({:?})",
        tainted_at.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        pods.get("patient")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none(),
        "a toleration without seconds tolerates for ever"
    );

    // Nothing new goes to the unreachable node.
    pods.create(
        &PostParams::default(),
        &pinned("newcomer", "node-2", json!([])),
    )
    .await
    .unwrap();
    let message = eventually("newcomer Pending with the reason", 20, || async {
        condition(&pods.get("newcomer").await.unwrap(), "PodScheduled")
            .filter(|c| c.0 == "False")
            .map(|c| c.2)
    })
    .await;
    assert_eq!(
        message,
        "0/3 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 2 node(s) didn't match Pod's node affinity/selector."
    );

    // The agent comes back: heartbeats and Ready=True. The taints go and node-2 takes Pods again.
    heartbeats.resume("node-2");
    post_ready(&client, "node-2").await;
    eventually("node-2 Ready and untainted", 20, || async {
        let node = nodes.get("node-2").await.unwrap();
        (taints(&node).is_empty() && ready_status(&node)?.0 == "True").then_some(())
    })
    .await;
    let node = eventually("newcomer scheduled", 20, || async {
        node_of(&pods.get("newcomer").await.unwrap())
    })
    .await;
    assert_eq!(node, "node-2");
    // The returning agent finishes the evicted Pods.
    finish_terminating(&pods).await;
    eventually("evicted Pods gone", 20, || async {
        let names: Vec<String> = pods
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|p| p.name_any())
            .collect();
        (!names.contains(&"plain".to_string()) && !names.contains(&"quick".to_string()))
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1800)).await;
    assert_eq!(
        ready_status(&nodes.get("node-2").await.unwrap()).unwrap().0,
        "True",
        "renewed Leases keep it Ready"
    );
}

#[tokio::test]
async fn controllers_pods_of_a_deleted_node_are_collected() {
    let cluster = start(ControlPlaneOptions::default().time_scale(fast())).await;
    let client = cluster.client();
    let _heartbeats = Heartbeats::start(client.clone(), &["node-1", "node-2", "node-3"]).await;
    let pods = cluster.pods();
    pods.create(
        &PostParams::default(),
        &pinned("stranded", "node-3", json!([])),
    )
    .await
    .unwrap();
    eventually("stranded bound", 20, || async {
        node_of(&pods.get("stranded").await.unwrap())
    })
    .await;
    let nodes: Api<Node> = Api::all(client);
    nodes
        .delete("node-3", &DeleteParams::default())
        .await
        .unwrap();
    eventually("the Pod of the deleted node removed", 20, || async {
        pods.get_opt("stranded")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
}
