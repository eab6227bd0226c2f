//! Nodes that join a real control plane (needs root and `scripts/install-deps.sh`): etcd,
//! kube-apiserver, kube-controller-manager and kube-scheduler of the pinned release start inside
//! the cluster network; the node agents register their Nodes, kube-scheduler binds a Pod, a node
//! agent runs it, and `kubectl exec`, `port-forward` and `logs` reach it through the real API
//! server and the node's kubelet endpoint.

mod kubelet_support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, ServiceAccount};
use kube::Api;
use kube::api::PostParams;
use kube_sandbox::ControlPlane;
use kube_sandbox::kubernetes::{KUBERNETES_VERSION, KubernetesOptions};
use kubelet_support::{ClusterOptions, pod_manifest, web_container};
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_join_a_real_control_plane() {
    let started = Instant::now();
    let cluster = kubelet_support::start_with(ClusterOptions {
        nodes: 2,
        control_plane: ControlPlane::Kubernetes(KubernetesOptions::default()),
        ..Default::default()
    })
    .await;
    eprintln!(
        "control plane healthy in {:?}, nodes Ready after {:?}",
        cluster.sandbox.control_plane_started_in(),
        started.elapsed()
    );
    let client = cluster.client();
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.git_version, format!("v{KUBERNETES_VERSION}"));
    let nodes = Api::<Node>::all(client.clone())
        .list(&Default::default())
        .await
        .unwrap();
    assert_eq!(nodes.items.len(), 2);

    // The controller-manager's controllers run: a new namespace gets its ServiceAccount and CA.
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "probe"}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    let deadline = Instant::now() + LIMIT;
    loop {
        let account = Api::<ServiceAccount>::namespaced(client.clone(), "probe")
            .get_opt("default")
            .await
            .unwrap();
        let ca = Api::<ConfigMap>::namespaced(client.clone(), "probe")
            .get_opt("kube-root-ca.crt")
            .await
            .unwrap();
        if account.is_some() && ca.is_some() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the controller-manager's controllers did not run"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // kube-scheduler binds a Pod, a node agent runs it.
    cluster
        .create::<Pod>(
            "probe",
            pod_manifest(
                "web",
                json!({"app": "web"}),
                None,
                json!([web_container(8080)]),
            ),
        )
        .await;
    cluster.wait_ready("probe", "web", LIMIT).await;
}
