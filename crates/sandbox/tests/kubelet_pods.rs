//! Pods through the API, run by the node agents: etcd Ready through its httpGet probe, two
//! Pods on the same port side by side, and the status a kubelet writes (needs root).

mod kubelet_support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kubelet_support::{ETCD_35, container_status, etcd_pod, phase, pod_ip, require_binary};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_pods_become_ready_through_their_health_probe_side_by_side_on_one_port() {
    require_binary(ETCD_35);
    let cluster = kubelet_support::start().await;
    let pods = cluster.pods("default");
    for name in ["etcd-a", "etcd-b"] {
        let pod: Pod = serde_json::from_value(etcd_pod(name, json!({"emptyDir": {}}))).unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let a = cluster
        .wait_ready("default", "etcd-a", Duration::from_secs(60))
        .await;
    let b = cluster
        .wait_ready("default", "etcd-b", Duration::from_secs(60))
        .await;
    assert_eq!(phase(&a), "Running");
    assert_ne!(pod_ip(&a), pod_ip(&b), "each Pod has its own address");
    let node = a.spec.as_ref().unwrap().node_name.clone().unwrap();
    let host_ip = a.status.as_ref().unwrap().host_ip.clone().unwrap();
    assert_eq!(
        Some(host_ip.parse().unwrap()),
        cluster.kubelet().node_address(&node)
    );
    assert_eq!(
        a.status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()
            .len(),
        1
    );
    let status = container_status(&a, "etcd").unwrap();
    assert!(status.ready && status.started == Some(true));
    assert!(status.state.as_ref().unwrap().running.is_some());
    for pod in [&a, &b] {
        let health = cluster
            .http_get(&pod_ip(pod), 2379, "/health")
            .await
            .unwrap_or_default();
        assert!(health.contains("\"health\":\"true\""), "{health}");
    }
    // A command inside the Pod's container, as `kubectl exec` runs it: the image's etcdctl,
    // the container's network (127.0.0.1 is etcd's own) and hostname.
    let output = cluster
        .kubelet()
        .exec_in_container(
            "default",
            "etcd-a",
            None,
            &["etcdctl".into(), "endpoint".into(), "health".into()],
        )
        .unwrap()
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && text.contains("127.0.0.1:2379 is healthy"),
        "{text}"
    );
    let hostname = cluster.kubelet().exec_in_container(
        "default",
        "etcd-b",
        Some("etcd"),
        &["cat".into(), "/etc/hostname".into()],
    );
    assert_eq!(hostname.unwrap().output().unwrap().stdout, b"etcd-b\n");
    assert!(
        cluster
            .kubelet()
            .exec_in_container("default", "etcd-b", Some("nope"), &["true".into()])
            .is_err()
    );
    for condition in [
        "PodScheduled",
        "Initialized",
        "ContainersReady",
        "Ready",
        "PodReadyToStartContainers",
    ] {
        assert_eq!(
            kubelet_support::condition(&a, condition),
            Some("True"),
            "{condition}"
        );
    }
}
