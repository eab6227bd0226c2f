//! A Pod with a cert-manager Secret mounted sees the renewed certificate without a restart,
//! as the kubelet swaps a secret volume's `..data` link (needs root: a sandbox with nodes).

mod kubelet_support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, PostParams};
use kube_sandbox::certmanager::{Certificate, ClusterIssuer};
use kube_sandbox::controllers::TimeScale;
use kube_sandbox::{Sandbox, SandboxOptions};
use kubelet_support::{Cluster, pod_manifest, restart_count, shell_container, test_images};
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(60);

async fn cluster_with_cert_manager() -> Cluster {
    let dir = tempfile::tempdir().expect("temporary directory");
    let options = SandboxOptions::cluster(dir.path())
        .nodes(1)
        .images(test_images())
        .time_scale(TimeScale::new(0.1).unwrap())
        .cert_manager();
    let sandbox = Sandbox::start(options)
        .await
        .expect("the sandbox starts (the node tests run as root)");
    Cluster { sandbox, dir }
}

/// The second line of a PEM file: the start of its base64, different for every certificate.
fn second_line(pem: &[u8]) -> String {
    String::from_utf8_lossy(pem)
        .lines()
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_sees_its_renewed_certificate_without_a_restart() {
    let cluster = cluster_with_cert_manager().await;
    let client = cluster.client();
    let issuer: ClusterIssuer = serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "ClusterIssuer",
        "metadata": {"name": "selfsigned"}, "spec": {"selfSigned": {}},
    }))
    .unwrap();
    Api::<ClusterIssuer>::all(client.clone())
        .create(&PostParams::default(), &issuer)
        .await
        .unwrap();
    let certificate: Certificate = serde_json::from_value(json!({
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": "web"},
        "spec": {"secretName": "web-tls", "dnsNames": ["web.default.svc"],
                 "duration": "20s", "renewBefore": "12s",
                 "issuerRef": {"name": "selfsigned", "kind": "ClusterIssuer"}},
    }))
    .unwrap();
    let certificates: Api<Certificate> = Api::namespaced(client.clone(), "default");
    certificates
        .create(&PostParams::default(), &certificate)
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    cluster
        .eventually("the Secret issued", LIMIT, || async {
            matches!(secrets.get_opt("web-tls").await, Ok(Some(_)))
        })
        .await;

    // The certificate is read through the directory the link named, so each line is one
    // consistent view: reading `/tls/tls.crt` after `readlink` can straddle the swap.
    let script = "while true; do d=$(readlink /tls/..data); echo \"data=$d line=$(sed -n 2p /tls/$d/tls.crt)\"; sleep 0.3; done";
    let mut pod = pod_manifest(
        "web",
        json!({}),
        None,
        json!([shell_container("main", script)]),
    );
    pod["spec"]["containers"][0]["volumeMounts"] =
        json!([{"name": "tls", "mountPath": "/tls", "readOnly": true}]);
    pod["spec"]["volumes"] = json!([{"name": "tls", "secret": {"secretName": "web-tls"}}]);
    cluster.create::<Pod>("default", pod).await;

    let first = secrets.get("web-tls").await.unwrap();
    let first_line = second_line(&first.data.as_ref().unwrap()["tls.crt"].0);
    cluster
        .eventually("the first certificate in the Pod", LIMIT, || async {
            cluster
                .logs("default", "web", "main")
                .await
                .contains(&format!("line={first_line}"))
        })
        .await;
    let log = cluster.logs("default", "web", "main").await;
    let first_data = log
        .lines()
        .last()
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_default()
        .to_string();

    // Renewed 8 s after issuance; the kubelet rewrites the files within a second or two.
    cluster
        .eventually("the renewal", Duration::from_secs(20), || async {
            certificates
                .get("web")
                .await
                .ok()
                .and_then(|c| c.status)
                .and_then(|s| s.revision)
                == Some(2)
        })
        .await;
    let renewed = secrets.get("web-tls").await.unwrap();
    let renewed_line = second_line(&renewed.data.as_ref().unwrap()["tls.crt"].0);
    assert_ne!(renewed_line, first_line);
    let seen = std::time::Instant::now();
    cluster
        .eventually(
            "the renewed certificate in the Pod",
            Duration::from_secs(5),
            || async {
                cluster
                    .logs("default", "web", "main")
                    .await
                    .contains(&format!("line={renewed_line}"))
            },
        )
        .await;
    assert!(
        seen.elapsed() < Duration::from_secs(5),
        "took {:?}",
        seen.elapsed()
    );
    let log = cluster.logs("default", "web", "main").await;
    let renewed_seen = log
        .lines()
        .find(|l| l.contains(&format!("line={renewed_line}")))
        .unwrap_or_default();
    assert!(
        !renewed_seen.starts_with(&first_data),
        "the renewed certificate came through a swapped ..data link: {renewed_seen} after {first_data}"
    );
    let pod = cluster.pods("default").get("web").await.unwrap();
    assert_eq!(
        restart_count(&pod, "main"),
        0,
        "the same container saw both"
    );
}
