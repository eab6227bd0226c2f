//! Reads of an EtcdCluster's status and the waits built on them, in one place for every
//! end-to-end test: a condition as (status, reason, message), "Available with N ready
//! members", and a wait for a condition to reach a status (and reason).

use std::time::Duration;

use etcd_operator_api::EtcdCluster;
use kube::Client;

use super::{eventually, get_cluster};

/// A condition of the cluster as (status, reason, message), if it has it.
pub fn condition_of(cluster: &EtcdCluster, kind: &str) -> Option<(String, String, String)> {
    cluster
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// A condition of the EtcdCluster `namespace/name`, read now.
pub async fn cluster_condition(
    client: &Client,
    namespace: &str,
    name: &str,
    kind: &str,
) -> Option<(String, String, String)> {
    condition_of(&get_cluster(client, namespace, name).await, kind)
}

/// Whether the cluster is Available with `replicas` ready members; what it is otherwise.
pub fn available(cluster: &EtcdCluster, replicas: i32) -> Result<(), String> {
    let ready = cluster.status.as_ref().and_then(|s| s.ready_members);
    let available = condition_of(cluster, "Available").map(|(status, ..)| status);
    if ready == Some(replicas) && available.as_deref() == Some("True") {
        Ok(())
    } else {
        Err(format!(
            "ready {ready:?}, Available {available:?}, conditions {:?}",
            cluster.status.as_ref().and_then(|s| s.conditions.as_ref())
        ))
    }
}

/// Waits until the EtcdCluster `namespace/name` is Available with `replicas` ready members;
/// returns it.
pub async fn wait_available(
    client: &Client,
    namespace: &str,
    name: &str,
    replicas: i32,
    limit: Duration,
) -> EtcdCluster {
    eventually(
        &format!("{namespace}/{name} Available with {replicas} members"),
        limit,
        || async {
            let cluster = get_cluster(client, namespace, name).await;
            available(&cluster, replicas).map(|()| cluster)
        },
    )
    .await
}

/// Waits until the condition `kind` of the EtcdCluster `namespace/name` has `status` (and
/// `reason`, when given); returns its message.
pub async fn wait_condition(
    client: &Client,
    namespace: &str,
    name: &str,
    kind: &str,
    status: &str,
    reason: Option<&str>,
    limit: Duration,
) -> String {
    let what = format!(
        "{namespace}/{name}: {kind}={status}{}",
        reason.map(|r| format!(" {r}")).unwrap_or_default()
    );
    eventually(&what, limit, || async {
        let (s, r, message) = cluster_condition(client, namespace, name, kind)
            .await
            .unwrap_or_default();
        if s == status && reason.is_none_or(|want| r == want) {
            Ok(message)
        } else {
            Err(format!("{kind}={s} {r}: {message}"))
        }
    })
    .await
}
