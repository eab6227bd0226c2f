//! Pods on the cluster network: DNS names under a headless Service, a ClusterIP Service in
//! front of ready Pods only, the cluster network from the machine (what `kube-sandbox exec`
//! uses), Service environment variables (needs root).

mod kubelet_support;

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use kube::api::Api;
use kubelet_support::{pod_manifest, shell_container, web_container};
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_under_a_headless_service_reach_each_other_by_name_and_from_the_machine() {
    let cluster = kubelet_support::start().await;
    cluster
        .create::<Service>("default", json!({
            "metadata": {"name": "peers"},
            "spec": {"clusterIP": "None", "selector": {"app": "peer"}, "ports": [{"name": "http", "port": 8080}]},
        }))
        .await;
    for (me, other) in [("peer-0", "peer-1"), ("peer-1", "peer-0")] {
        let script = format!(
            "while true; do wget -qO- -T 2 http://{other}.peers.default.svc.cluster.local:8080/ && echo; sleep 0.5; done"
        );
        let containers = json!([web_container(8080), shell_container("client", &script)]);
        cluster
            .create::<Pod>(
                "default",
                pod_manifest(me, json!({"app": "peer"}), Some("peers"), containers),
            )
            .await;
    }
    for name in ["peer-0", "peer-1"] {
        cluster.wait_ready("default", name, LIMIT).await;
    }
    for (me, other) in [("peer-0", "peer-1"), ("peer-1", "peer-0")] {
        cluster
            .eventually(&format!("{me} reaching {other} by name"), LIMIT, || async {
                cluster
                    .logs("default", me, "client")
                    .await
                    .lines()
                    .any(|line| line == other)
            })
            .await;
    }
    // `kube-sandbox exec` runs a command in the cluster network with the cluster DNS.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_kube-sandbox"))
        .args(["exec", "--dir", cluster.dir.path().to_str().unwrap(), "--"])
        .args([
            "wget",
            "-qO-",
            "-T",
            "5",
            "http://peer-0.peers.default.svc.cluster.local:8080/",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "peer-0",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The library's way to the same: a short name with the search path of `default`.
    let output = cluster
        .sandbox
        .command("wget")
        .unwrap()
        .args(["-qO-", "-T", "5", "http://peer-1.peers:8080/"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "peer-1",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Rust code inside the cluster network: a name resolved by the cluster DNS, then a plain
    // tokio connection to the Pod.
    let ip = cluster.network().lookup("peer-1.peers").await.unwrap()[0];
    let answer = cluster
        .sandbox
        .run_in_cluster_network(move || async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut stream = tokio::net::TcpStream::connect((ip, 8080)).await?;
            stream.write_all(b"GET / HTTP/1.0\r\n\r\n").await?;
            let mut response = String::new();
            stream.read_to_string(&mut response).await?;
            Ok::<_, std::io::Error>(response)
        })
        .await
        .unwrap()
        .unwrap();
    assert!(answer.ends_with("\r\n\r\npeer-1"), "{answer}");
    let endpoints: Endpoints = Api::namespaced(cluster.client(), "default")
        .get("peers")
        .await
        .unwrap();
    let subset = &endpoints.subsets.unwrap()[0];
    let hostnames: HashSet<String> = subset
        .addresses
        .iter()
        .flatten()
        .filter_map(|a| a.hostname.clone())
        .collect();
    assert_eq!(
        hostnames,
        HashSet::from(["peer-0".to_string(), "peer-1".to_string()])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_ip_service_reaches_ready_pods_only_and_is_in_their_environment() {
    let cluster = kubelet_support::start().await;
    let service: Service = cluster
        .create("default", json!({
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
        }))
        .await;
    let cluster_ip = service.spec.unwrap().cluster_ip.unwrap();
    for name in ["web-a", "web-b"] {
        let mut web = web_container(8080);
        if name == "web-b" {
            web["readinessProbe"] = json!({"tcpSocket": {"port": "http"}, "periodSeconds": 1});
        }
        let labels = json!({"app": "web"});
        cluster
            .create::<Pod>("default", pod_manifest(name, labels, None, json!([web])))
            .await;
    }
    // Selected, but never ready: it must not get traffic.
    let mut unready = web_container(8080);
    unready["readinessProbe"] = json!({"exec": {"command": ["false"]}, "periodSeconds": 1});
    cluster
        .create::<Pod>(
            "default",
            pod_manifest("web-unready", json!({"app": "web"}), None, json!([unready])),
        )
        .await;
    for name in ["web-a", "web-b"] {
        cluster.wait_ready("default", name, LIMIT).await;
    }
    cluster
        .wait_pod("default", "web-unready", LIMIT, |pod| {
            kubelet_support::phase(pod) == "Running"
        })
        .await;
    let mut seen = HashSet::new();
    let started = std::time::Instant::now();
    while seen.len() < 2 {
        assert!(
            started.elapsed() < LIMIT,
            "both ready Pods did not answer through the Service: {seen:?}"
        );
        if let Some(body) = cluster
            .http_get("web.default.svc.cluster.local", 80, "/")
            .await
        {
            seen.insert(body);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for _ in 0..20 {
        let body = cluster
            .http_get(&cluster_ip, 80, "/")
            .await
            .expect("the Service answers");
        assert_ne!(body, "web-unready");
        seen.insert(body);
    }
    assert_eq!(
        seen,
        HashSet::from(["web-a".to_string(), "web-b".to_string()])
    );
    // A Pod started after the Service sees it in its environment, with the API server's.
    let script = "echo host=$WEB_SERVICE_HOST port=$WEB_SERVICE_PORT api=$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT; sleep 3600";
    cluster
        .create::<Pod>(
            "default",
            pod_manifest(
                "env",
                json!({}),
                None,
                json!([shell_container("main", script)]),
            ),
        )
        .await;
    let expected = format!("host={cluster_ip} port=80 api=10.96.0.1:443");
    cluster
        .eventually("the Service variables", LIMIT, || async {
            cluster
                .logs("default", "env", "main")
                .await
                .contains(&expected)
        })
        .await;
}
