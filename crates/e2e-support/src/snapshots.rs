//! Waits and reads shared by the EtcdSnapshot end-to-end tests (e2e_snapshots,
//! e2e_snapshot_codec, e2e_snapshot_stores). Their Events are read through `support::events`,
//! the `snapshot status` tool is `support::snapshot_tool`.

use std::time::Duration;

use etcd_operator_api::EtcdSnapshot;
use kube::Api;

use super::cluster::Cluster;
use super::eventually;

/// How long a snapshot or a cluster of these tests may take to reach what is awaited.
pub const SNAPSHOT_LIMIT: Duration = Duration::from_secs(240);

/// Waits until the EtcdCluster is Available with `replicas` ready members.
pub async fn wait_available(cluster: &Cluster, namespace: &str, name: &str, replicas: i32) {
    super::status::wait_available(&cluster.client(), namespace, name, replicas, SNAPSHOT_LIMIT)
        .await;
}

/// Waits until the snapshot reaches `phase` (Complete or Failed); panics at the other one.
pub async fn wait_phase(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    phase: &str,
) -> EtcdSnapshot {
    let api: Api<EtcdSnapshot> = Api::namespaced(cluster.client(), namespace);
    eventually(
        &format!("{namespace}/{name} {phase}"),
        SNAPSHOT_LIMIT,
        || async {
            let s = api.get(name).await.map_err(|e| e.to_string())?;
            let status = s.status.clone().unwrap_or_default();
            let now = status.phase.map(|p| format!("{p:?}")).unwrap_or_default();
            if now == phase {
                return Ok(s);
            }
            if now == "Complete" || now == "Failed" {
                panic!("{namespace}/{name} is {now}, not {phase}: {status:?}");
            }
            Err(format!("phase {now:?}: {status:?}"))
        },
    )
    .await
}

pub fn ready_condition(s: &EtcdSnapshot) -> (String, String, String) {
    s.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
        .unwrap_or_default()
}
