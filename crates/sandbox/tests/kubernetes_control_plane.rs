//! Nodes that join a real control plane (needs root and `scripts/install-deps.sh`): etcd,
//! kube-apiserver, kube-controller-manager and kube-scheduler of the pinned release start inside
//! the cluster network; the node agents register their Nodes, kube-scheduler binds a Pod, a node
//! agent runs it, and `kubectl exec`, `port-forward` and `logs` reach it through the real API
//! server and the node's kubelet endpoint.

mod kubelet_support;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ServiceAccount,
};
use kube::Api;
use kube::api::PostParams;
use kube_sandbox::ControlPlane;
use kube_sandbox::kubernetes::{KUBERNETES_VERSION, KubernetesOptions};
use kubelet_support::{ClusterOptions, Forward, KUBECTL_133, http_get, kubectl, pod_manifest};
use serde_json::json;
use tokio::io::AsyncReadExt;

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
    let web = cluster.run_web("default", LIMIT).await;
    assert!(web.spec.unwrap().node_name.is_some());

    // kubectl exec, v1.32 and v1.33, through the API server and the node's kubelet endpoint.
    let kubeconfig = cluster.kubeconfig();
    for binary in ["kubectl", KUBECTL_133] {
        let output = kubectl(
            binary,
            &kubeconfig,
            &[
                "exec",
                "web",
                "--",
                "sh",
                "-c",
                "echo out $HOSTNAME; echo err >&2; exit 4",
            ],
            None,
        )
        .await;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            "out web\n",
            "{binary}: {stderr}"
        );
        assert!(stderr.starts_with("err\n"), "{binary}: {stderr}");
        assert_eq!(output.status.code(), Some(4), "{binary}: {stderr}");
        let output = kubectl(
            binary,
            &kubeconfig,
            &["exec", "-i", "web", "--", "wc", "-l"],
            Some("one\ntwo\n"),
        )
        .await;
        assert_eq!(
            String::from_utf8_lossy(&output.stdout).trim(),
            "2",
            "{binary}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    // kubectl port-forward: SPDY tunnelled in a WebSocket (v1.32, v1.33) and by plain upgrade.
    let cases: [kubelet_support::ForwardCase; 3] = [
        ("kubectl", &[], 18091),
        (KUBECTL_133, &[], 18092),
        (
            KUBECTL_133,
            &[("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false")],
            18093,
        ),
    ];
    for (binary, env, port) in cases {
        let forward = Forward::start(binary, &kubeconfig, &format!("{port}:8080"), env).await;
        for _ in 0..5 {
            let response = http_get(port).await;
            assert!(
                response.starts_with("HTTP/1.0 200") && response.ends_with("\r\n\r\nweb"),
                "{binary} {env:?}: {response:?}"
            );
        }
        let stderr = forward.stop().await;
        assert!(!stderr.contains("error"), "{binary} {env:?}: {stderr}");
    }

    // kubectl logs and logs -f.
    cluster
        .create::<Pod>(
            "default",
            pod_manifest(
                "talker",
                json!({"app": "talker"}),
                None,
                json!([{"name": "talker", "image": kubelet_support::TOOLS_IMAGE,
                        "command": ["sh", "-c", "echo first; sleep 2; echo second; sleep 3600"]}]),
            ),
        )
        .await;
    cluster.wait_ready("default", "talker", LIMIT).await;
    let mut follow = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["logs", "-f", "talker"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut followed = String::new();
    let mut stdout = follow.stdout.take().unwrap();
    tokio::time::timeout(LIMIT, async {
        let mut buffer = [0u8; 256];
        while !followed.contains("second") {
            let n = stdout.read(&mut buffer).await.unwrap();
            assert!(n > 0, "kubectl logs -f ended early: {followed:?}");
            followed.push_str(&String::from_utf8_lossy(&buffer[..n]));
        }
    })
    .await
    .expect("kubectl logs -f shows the line written after it started");
    assert!(followed.starts_with("first\nsecond"), "{followed:?}");
    let _ = follow.kill().await;
    let output = kubectl(
        "kubectl",
        &kubeconfig,
        &["logs", "talker", "--tail=1"],
        None,
    )
    .await;
    assert_eq!(String::from_utf8_lossy(&output.stdout), "second\n");

    // A claim of the default StorageClass gets a volume from the sandbox's provisioner, which
    // kube-controller-manager binds; deleted, the volume goes too.
    let claim = cluster
        .create::<PersistentVolumeClaim>(
            "default",
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
                   "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        )
        .await;
    let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), "default");
    let volume = format!("pvc-{}", claim.metadata.uid.unwrap());
    let deadline = Instant::now() + LIMIT;
    loop {
        let claim = claims.get("data").await.unwrap();
        let bound = claim.status.and_then(|s| s.phase).as_deref() == Some("Bound");
        if bound && claim.spec.and_then(|s| s.volume_name).as_deref() == Some(volume.as_str()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the claim was not bound to {volume}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    claims.delete("data", &Default::default()).await.unwrap();
    let volumes = Api::<PersistentVolume>::all(client.clone());
    let deadline = Instant::now() + LIMIT;
    while volumes.get_opt(&volume).await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "{volume} outlived its claim");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A deleted Pod is stopped and removed by its node (the final delete with a UID
    // precondition).
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    pods.delete("web", &Default::default()).await.unwrap();
    let deadline = Instant::now() + LIMIT;
    while pods.get_opt("web").await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "the deleted Pod stayed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
