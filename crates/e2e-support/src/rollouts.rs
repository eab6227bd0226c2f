//! What the version-change tests share: set `spec.version`, read the cluster's Pods (UID,
//! image, Ready), wait until every member runs a version, watch the order of the restarts.
//! Every cluster here is named `etcd`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;

use super::cluster::{Cluster, pod_ready};
use super::{eventually, get_cluster, kubectl, members};

/// Pod name → (UID, etcd image, Ready).
pub type PodFacts = BTreeMap<String, (String, String, bool)>;

/// `kubectl patch --type=merge` of the cluster `etcd` with `{"spec": <spec>}`.
pub fn patch_spec(cluster: &Cluster, namespace: &str, spec: serde_json::Value) {
    let patch = serde_json::json!({ "spec": spec }).to_string();
    let (ok, _, stderr) = kubectl(
        cluster,
        &[
            "-n",
            namespace,
            "patch",
            "etcdcluster/etcd",
            "--type=merge",
            "-p",
            &patch,
        ],
    );
    assert!(ok, "kubectl patch {patch}: {stderr}");
}

/// `kubectl patch` of the cluster's `spec.version`.
pub fn set_version(cluster: &Cluster, namespace: &str, version: &str) {
    patch_spec(
        cluster,
        namespace,
        serde_json::json!({ "version": version }),
    );
}

/// The messages of the Warning Events with `reason` in `namespace`, space-separated (empty:
/// none).
pub fn warning_events(cluster: &Cluster, namespace: &str, reason: &str) -> String {
    event_messages(cluster, namespace, &format!("reason={reason},type=Warning")).join(" ")
}

/// The messages of the Events in `namespace` that `selector` (a field selector) picks, one per
/// Event.
pub fn event_messages(cluster: &Cluster, namespace: &str, selector: &str) -> Vec<String> {
    let (_, out, _) = kubectl(
        cluster,
        &[
            "-n",
            namespace,
            "get",
            "events",
            "--field-selector",
            selector,
            "-o",
            "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
        ],
    );
    out.lines().map(str::to_string).collect()
}

/// The cluster's Pods that are not being deleted.
pub async fn pods(cluster: &Cluster, namespace: &str) -> PodFacts {
    Api::<Pod>::namespaced(cluster.client(), namespace)
        .list(&ListParams::default().labels(&etcd_operator_api::labels::cluster_selector("etcd")))
        .await
        .expect("listing Pods")
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let image = p
                .spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.clone())
                .unwrap_or_default();
            (
                p.metadata.name.clone().unwrap_or_default(),
                (
                    p.metadata.uid.clone().unwrap_or_default(),
                    image,
                    pod_ready(p),
                ),
            )
        })
        .collect()
}

/// Waits until `n` members' spec, Pod image and etcd's own answer are `version`, then until the
/// cluster has converged.
pub async fn wait_all_on(
    cluster: &Cluster,
    namespace: &str,
    n: usize,
    version: &str,
    limit: Duration,
) {
    let client = cluster.client();
    eventually(
        &format!("{namespace}: every member on {version}"),
        limit,
        || async {
            let c = get_cluster(&client, namespace, "etcd").await;
            let running: Vec<Option<String>> = c
                .status
                .and_then(|s| s.members)
                .unwrap_or_default()
                .into_iter()
                .map(|m| m.version)
                .collect();
            let specs: Vec<String> = members(&client, namespace, "etcd")
                .await
                .into_iter()
                .map(|m| m.spec.version)
                .collect();
            let images: Vec<String> = pods(cluster, namespace)
                .await
                .into_values()
                .map(|(_, image, _)| image)
                .collect();
            let done = running.len() == n
                && running.iter().all(|v| v.as_deref() == Some(version))
                && specs.len() == n
                && specs.iter().all(|v| v == version)
                && images.len() == n
                && images.iter().all(|i| runs_tag(i, version));
            if done {
                Ok(())
            } else {
                Err(format!(
                    "etcd {running:?}, specs {specs:?}, images {images:?}"
                ))
            }
        },
    )
    .await;
    cluster
        .wait_converged(namespace, "etcd", n as i32, limit)
        .await;
}

/// Whether `image` is the tag `v<version>`, pinned to a digest or not (admission may rewrite
/// `repo/etcd:v3.6.17` to `mirror/etcd:v3.6.17@sha256:…`).
pub fn runs_tag(image: &str, version: &str) -> bool {
    let tagged = image.split_once("@sha256:").map_or(image, |(tag, _)| tag);
    tagged.ends_with(&format!(":v{version}"))
}

/// The cluster's leader, as its status says.
pub async fn leader(cluster: &Cluster, namespace: &str) -> String {
    get_cluster(&cluster.client(), namespace, "etcd")
        .await
        .status
        .and_then(|s| s.leader)
        .expect("a leader")
}

/// Watches the Pods while a rollout to `version` runs: the order in which the Pods of
/// `before` were replaced (a new UID), until all were. After `limit` it fails with the order so
/// far, the operator's log and what `more` says about the members replaced so far.
pub async fn restart_order(
    cluster: &Cluster,
    namespace: &str,
    before: &PodFacts,
    version: &str,
    limit: Duration,
    more: impl Fn(&[String]) -> String,
) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    let started = Instant::now();
    while order.len() < before.len() {
        if started.elapsed() > limit {
            panic!(
                "{namespace}: rollout to {version} not done; restarted {order:?}\n{}\n{}",
                cluster.operator_logs().await,
                more(&order)
            );
        }
        for (name, (uid, _, _)) in pods(cluster, namespace).await {
            let new = before.get(&name).is_some_and(|(old, _, _)| *old != uid);
            if new && !order.contains(&name) {
                order.push(name);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    order
}
