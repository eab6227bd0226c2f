//! Faults on nodes and Pods: graceful node shutdown leaves terminal Pods (seed 003), a node
//! crash leaves its Pods to the node lifecycle and a restart brings them back, a frozen
//! container turns unready, partitions and claim faults (needs root).

mod kubelet_support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams};
use kube_sandbox::kubelet::{NODE_SHUTDOWN_MESSAGE, NodeState};
use kubelet_support::{
    ClusterOptions, ETCD_35, etcd_pod, is_ready, phase, pod_ip, pod_manifest, restart_count,
    shell_container, web_container,
};
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(60);

fn on_node(mut pod: serde_json::Value, node: &str) -> serde_json::Value {
    pod["spec"]["nodeName"] = json!(node);
    pod
}

async fn node_ready(cluster: &kubelet_support::Cluster, node: &str) -> Option<String> {
    let node: Node = Api::all(cluster.client()).get(node).await.ok()?;
    node.status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_node_shutdown_leaves_terminal_pods_that_are_never_restarted() {
    kubelet_support::require_binary(ETCD_35);
    let cluster = kubelet_support::start().await;
    cluster
        .create::<Pod>(
            "default",
            on_node(etcd_pod("etcd-0", json!({"emptyDir": {}})), "node-1"),
        )
        .await;
    let sleeper = pod_manifest(
        "sleeper",
        json!({}),
        None,
        json!([shell_container("main", "exec sleep 3600")]),
    );
    cluster
        .create::<Pod>("default", on_node(sleeper, "node-1"))
        .await;
    cluster.wait_ready("default", "etcd-0", LIMIT).await;
    cluster.wait_ready("default", "sleeper", LIMIT).await;

    cluster.kubelet().shutdown_node("node-1").await.unwrap();
    assert_eq!(
        cluster.kubelet().node_state("node-1").await,
        Some(NodeState::ShutDown)
    );
    assert_eq!(
        node_ready(&cluster, "node-1").await.as_deref(),
        Some("False")
    );
    // etcd exits 0 on SIGTERM (as PID 1): Succeeded; sleep ignores it and is killed: Failed.
    for (name, expected) in [("etcd-0", "Succeeded"), ("sleeper", "Failed")] {
        let pod = cluster.pods("default").get(name).await.unwrap();
        let status = pod.status.clone().unwrap();
        assert_eq!(phase(&pod), expected, "{name}");
        assert_eq!(status.reason.as_deref(), Some("Terminated"));
        assert_eq!(status.message.as_deref(), Some(NODE_SHUTDOWN_MESSAGE));
        assert_eq!(
            kubelet_support::condition(&pod, "DisruptionTarget"),
            Some("True")
        );
        assert_eq!(kubelet_support::condition(&pod, "Ready"), Some("False"));
    }
    // The node comes back; the Pods stay as they are until someone deletes them.
    cluster.kubelet().start_node("node-1").await.unwrap();
    cluster
        .eventually("node-1 Ready again", LIMIT, || async {
            node_ready(&cluster, "node-1").await.as_deref() == Some("True")
        })
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    for name in ["etcd-0", "sleeper"] {
        let pod = cluster.pods("default").get(name).await.unwrap();
        assert!(
            matches!(phase(&pod), "Succeeded" | "Failed"),
            "{name} stays terminal"
        );
        assert_eq!(
            restart_count(&pod, if name == "sleeper" { "main" } else { "etcd" }),
            0,
            "{name} is not restarted"
        );
    }
    assert!(
        cluster
            .kubectl(&["logs", "etcd-0"])
            .await
            .contains("received signal; shutting down"),
        "logs survive the shutdown"
    );
    cluster
        .pods("default")
        .delete("etcd-0", &DeleteParams::default())
        .await
        .unwrap();
    cluster
        .wait_gone("default", "etcd-0", Duration::from_secs(5))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_node_loses_its_processes_and_its_pods_are_evicted_or_restarted_when_it_returns()
{
    let cluster = kubelet_support::start_with(ClusterOptions {
        pod_eviction_timeout: Duration::from_secs(20),
        ..ClusterOptions::default()
    })
    .await;
    cluster
        .create::<Pod>(
            "default",
            on_node(
                pod_manifest("evicted", json!({}), None, json!([web_container(8080)])),
                "node-2",
            ),
        )
        .await;
    let mut tolerant = on_node(
        pod_manifest("tolerant", json!({}), None, json!([web_container(8080)])),
        "node-2",
    );
    tolerant["spec"]["tolerations"] = json!([
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    ]);
    cluster.create::<Pod>("default", tolerant).await;
    let before = cluster.wait_ready("default", "tolerant", LIMIT).await;
    cluster.wait_ready("default", "evicted", LIMIT).await;
    assert_eq!(
        cluster
            .http_get(&pod_ip(&before), 8080, "/")
            .await
            .as_deref(),
        Some("tolerant")
    );

    cluster.kubelet().crash_node("node-2").await.unwrap();
    assert_eq!(
        cluster.http_get(&pod_ip(&before), 8080, "/").await,
        None,
        "its processes are gone"
    );
    let right_after = cluster.pods("default").get("tolerant").await.unwrap();
    assert_eq!(
        phase(&right_after),
        "Running",
        "the objects stay as they were"
    );
    cluster
        .eventually("node-2 no longer Ready", LIMIT, || async {
            node_ready(&cluster, "node-2").await.as_deref() != Some("True")
        })
        .await;
    cluster
        .wait_pod("default", "evicted", LIMIT, |pod| {
            pod.metadata.deletion_timestamp.is_some()
        })
        .await;
    cluster
        .wait_pod("default", "tolerant", LIMIT, |pod| !is_ready(pod))
        .await;

    cluster.kubelet().start_node("node-2").await.unwrap();
    cluster.wait_gone("default", "evicted", LIMIT).await;
    let back = cluster
        .wait_pod("default", "tolerant", LIMIT, |pod| {
            is_ready(pod) && restart_count(pod, "web") == 1
        })
        .await;
    assert_eq!(
        cluster.http_get(&pod_ip(&back), 8080, "/").await.as_deref(),
        Some("tolerant")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_containers_turn_unready_and_partitions_cut_pods_apart() {
    let cluster = kubelet_support::start().await;
    let mut frozen = web_container(8080);
    frozen["readinessProbe"]["failureThreshold"] = json!(1);
    cluster
        .create::<Pod>(
            "default",
            pod_manifest("a", json!({}), None, json!([frozen])),
        )
        .await;
    cluster
        .create::<Pod>(
            "default",
            pod_manifest("b", json!({}), None, json!([web_container(8080)])),
        )
        .await;
    let a = cluster.wait_ready("default", "a", LIMIT).await;
    let b = cluster.wait_ready("default", "b", LIMIT).await;

    cluster
        .kubelet()
        .freeze_container("default", "a", None)
        .unwrap();
    cluster
        .wait_pod("default", "a", LIMIT, |pod| !is_ready(pod))
        .await;
    cluster
        .kubelet()
        .thaw_container("default", "a", None)
        .unwrap();
    cluster.wait_ready("default", "a", LIMIT).await;

    cluster
        .kubelet()
        .set_pod_connected("default", "b", false)
        .await
        .unwrap();
    assert_eq!(cluster.http_get(&pod_ip(&b), 8080, "/").await, None);
    cluster
        .kubelet()
        .set_pod_connected("default", "b", true)
        .await
        .unwrap();
    assert_eq!(
        cluster.http_get(&pod_ip(&b), 8080, "/").await.as_deref(),
        Some("b")
    );

    // Delay through netem where the kernel has it; a clear refusal where it does not.
    let impairment = kube_sandbox::network::Impairment {
        delay: Duration::from_millis(300),
        ..Default::default()
    };
    match cluster
        .kubelet()
        .impair_pod("default", "b", Some(impairment))
        .await
    {
        Ok(()) => {
            let started = std::time::Instant::now();
            assert_eq!(
                cluster.http_get(&pod_ip(&b), 8080, "/").await.as_deref(),
                Some("b")
            );
            assert!(
                started.elapsed() >= Duration::from_millis(300),
                "the delay applies"
            );
            cluster
                .kubelet()
                .impair_pod("default", "b", None)
                .await
                .unwrap();
        }
        Err(kube_sandbox::kubelet::FaultError::Network(
            kube_sandbox::network::NetworkError::Unsupported(reason),
        )) => {
            assert!(reason.contains("netem"), "{reason}");
        }
        Err(other) => panic!("impairing a Pod failed: {other}"),
    }
    // A partition between a and b: each still reaches the rest of the cluster.
    let script = format!(
        "while true; do wget -qO- -T 1 http://{}:8080/ >/dev/null 2>&1 && echo reached || echo cut; sleep 0.3; done",
        pod_ip(&b)
    );
    let mut probe = pod_manifest(
        "client",
        json!({}),
        None,
        json!([shell_container("main", &script)]),
    );
    probe["spec"]["nodeName"] = json!(a.spec.as_ref().unwrap().node_name.clone().unwrap());
    cluster.create::<Pod>("default", probe).await;
    cluster
        .eventually("the client reaching b", LIMIT, || async {
            cluster
                .logs("default", "client", "main")
                .await
                .contains("reached")
        })
        .await;
    cluster
        .kubelet()
        .set_pods_partitioned("default", "client", "b", true)
        .await
        .unwrap();
    assert_eq!(
        cluster.http_get(&pod_ip(&b), 8080, "/").await.as_deref(),
        Some("b"),
        "b still reaches the others"
    );
    cluster
        .eventually("the client cut from b", LIMIT, || async {
            cluster
                .logs("default", "client", "main")
                .await
                .ends_with("cut\ncut\n")
        })
        .await;
    cluster
        .kubelet()
        .set_pods_partitioned("default", "client", "b", false)
        .await
        .unwrap();
    cluster
        .eventually("the partition healed", LIMIT, || async {
            cluster
                .logs("default", "client", "main")
                .await
                .ends_with("reached\n")
        })
        .await;
    assert!(
        cluster
            .kubelet()
            .signal_container("default", "nobody", None, nix::sys::signal::Signal::SIGKILL)
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_can_be_wiped_and_corrupted_under_a_pod() {
    let cluster = kubelet_support::start().await;
    cluster
        .create::<PersistentVolumeClaim>("default", json!({
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        }))
        .await;
    let mut pod = pod_manifest(
        "holder",
        json!({}),
        None,
        json!([shell_container(
            "main",
            "printf 'precious data' > /data/file; exec sleep 3600"
        )]),
    );
    pod["spec"]["containers"][0]["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}]);
    pod["spec"]["volumes"] =
        json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]);
    cluster.create::<Pod>("default", pod).await;
    cluster.wait_ready("default", "holder", LIMIT).await;
    let file = cluster
        .runtime()
        .persistent_volumes()
        .claim_path("default", "data")
        .unwrap()
        .join("file");
    cluster
        .eventually("the file written", LIMIT, || async { file.exists() })
        .await;
    assert_eq!(
        cluster.kubelet().corrupt_claim("default", "data").unwrap(),
        1
    );
    assert_ne!(std::fs::read(&file).unwrap(), b"precious data");
    cluster.kubelet().wipe_claim("default", "data").unwrap();
    assert!(!file.exists());
}

/// A client container that asks each `(label, ip)` every 0.3 s and prints `label-reached` or
/// `label-cut` (within 2 s: a dropped SYN would keep wget waiting for minutes).
fn prober(targets: &[(&str, String)]) -> serde_json::Value {
    let checks: Vec<String> = targets
        .iter()
        .map(|(label, ip)| {
            format!(
                "timeout 2 wget -qO- -T 1 http://{ip}:8080/ >/dev/null 2>&1 && echo {label}-reached || echo {label}-cut"
            )
        })
        .collect();
    shell_container(
        "probe",
        &format!("while true; do {}; sleep 0.3; done", checks.join("; ")),
    )
}

/// The last verdict of `label` in a prober's log.
fn last(log: &str, label: &str) -> Option<bool> {
    log.lines()
        .rev()
        .find_map(|l| l.strip_prefix(&format!("{label}-")))
        .map(|v| v == "reached")
}

/// `isolate`: a Pod cut off from every Pod of another namespace, both ways and including Pods
/// created there later, while it still reaches the rest; `rejoin` heals it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_cut_off_from_a_namespace_reaches_everyone_else_and_rejoins() {
    use k8s_openapi::api::core::v1::Namespace;
    let cluster = kubelet_support::start().await;
    for ns in ["ops", "prod"] {
        Api::<Namespace>::all(cluster.client())
            .create(
                &Default::default(),
                &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
            )
            .await
            .unwrap();
    }
    cluster
        .create::<Pod>(
            "prod",
            pod_manifest("b", json!({}), None, json!([web_container(8080)])),
        )
        .await;
    cluster
        .create::<Pod>(
            "default",
            pod_manifest("d", json!({}), None, json!([web_container(8080)])),
        )
        .await;
    let b = cluster.wait_ready("prod", "b", LIMIT).await;
    let d = cluster.wait_ready("default", "d", LIMIT).await;
    cluster
        .create::<Pod>(
            "ops",
            pod_manifest(
                "a",
                json!({}),
                None,
                json!([
                    web_container(8080),
                    prober(&[("b", pod_ip(&b)), ("d", pod_ip(&d))])
                ]),
            ),
        )
        .await;
    let a = cluster.wait_ready("ops", "a", LIMIT).await;
    let a_log = || cluster.logs("ops", "a", "probe");
    cluster
        .eventually("a reaching b and d", LIMIT, || async {
            let log = a_log().await;
            last(&log, "b") == Some(true) && last(&log, "d") == Some(true)
        })
        .await;

    let now = cluster
        .kubelet()
        .cut_pod_off("ops", "a", kube_sandbox::kubelet::Peers::namespace("prod"))
        .await
        .unwrap();
    assert_eq!(now, 1, "b is the only Pod of prod");
    cluster
        .eventually("a cut from b, still reaching d", LIMIT, || async {
            let log = a_log().await;
            log.ends_with("b-cut\nd-reached\n")
        })
        .await;
    // The rest of the cluster still reaches both.
    assert!(cluster.http_get(&pod_ip(&a), 8080, "/").await.is_some());
    assert!(cluster.http_get(&pod_ip(&b), 8080, "/").await.is_some());
    // A Pod created in prod while the cut stands is cut off too, the other way round.
    cluster
        .create::<Pod>(
            "prod",
            pod_manifest("p", json!({}), None, json!([prober(&[("a", pod_ip(&a))])])),
        )
        .await;
    cluster
        .eventually("p (created later) cut from a", LIMIT, || async {
            cluster
                .logs("prod", "p", "probe")
                .await
                .ends_with("a-cut\na-cut\n")
        })
        .await;
    assert!(
        !cluster
            .logs("prod", "p", "probe")
            .await
            .contains("a-reached"),
        "p reached a before its cut"
    );

    assert!(cluster.kubelet().heal_pod_cut("ops", "a").await.unwrap());
    cluster
        .eventually("a reaching b again", LIMIT, || async {
            last(&a_log().await, "b") == Some(true)
        })
        .await;
    cluster
        .eventually("p reaching a", LIMIT, || async {
            last(&cluster.logs("prod", "p", "probe").await, "a") == Some(true)
        })
        .await;
    assert!(
        !cluster.kubelet().heal_pod_cut("ops", "a").await.unwrap(),
        "nothing left to heal"
    );
}

/// `impair` without netem in the kernel: delay from the userspace queue, loss from a random
/// drop; a total loss cuts the Pod off, clearing it heals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impaired_pod_answers_late_or_not_at_all_and_recovers() {
    let cluster = kubelet_support::start().await;
    cluster
        .create::<Pod>(
            "default",
            pod_manifest("w", json!({}), None, json!([web_container(8080)])),
        )
        .await;
    let w = cluster.wait_ready("default", "w", LIMIT).await;
    let ip = pod_ip(&w);
    let timed = || async {
        let started = std::time::Instant::now();
        let answer = cluster.http_get(&ip, 8080, "/").await;
        (answer, started.elapsed())
    };
    let (answer, quick) = timed().await;
    assert_eq!(answer.as_deref(), Some("w"));
    let impair = |delay: u64, jitter: u64, loss: f64| kube_sandbox::network::Impairment {
        delay: Duration::from_millis(delay),
        jitter: Duration::from_millis(jitter),
        loss_percent: loss,
    };
    cluster
        .kubelet()
        .impair_pod("default", "w", Some(impair(300, 50, 0.0)))
        .await
        .expect("impairing (netem, or iptables and nfnetlink_queue)");
    // Every packet the Pod sends waits at least 250 ms: the SYN-ACK and the answer.
    let (answer, slow) = timed().await;
    assert_eq!(answer.as_deref(), Some("w"));
    assert!(
        slow >= Duration::from_millis(500),
        "the delay applies: {slow:?} (unimpaired {quick:?})"
    );
    // Changed in place: a total loss.
    cluster
        .kubelet()
        .impair_pod("default", "w", Some(impair(0, 0, 100.0)))
        .await
        .unwrap();
    assert_eq!(
        cluster.http_get(&ip, 8080, "/").await,
        None,
        "every packet dropped"
    );
    cluster
        .kubelet()
        .impair_pod("default", "w", None)
        .await
        .unwrap();
    let (answer, healed) = timed().await;
    assert_eq!(answer.as_deref(), Some("w"));
    assert!(
        healed < Duration::from_millis(500),
        "no delay left: {healed:?}"
    );
}
