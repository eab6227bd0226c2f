//! Waits and reads shared by the EtcdSnapshot end-to-end tests (e2e_snapshots,
//! e2e_snapshot_codec, e2e_snapshot_stores).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use etcd_operator_api::EtcdSnapshot;
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::ListParams;

use super::cluster::Cluster;
use super::{condition, eventually, get_cluster};

/// How long a snapshot or a cluster of these tests may take to reach what is awaited.
pub const SNAPSHOT_LIMIT: Duration = Duration::from_secs(240);

pub async fn wait_available(cluster: &Cluster, namespace: &str, name: &str, replicas: i32) {
    let client = cluster.client();
    eventually(
        &format!("{namespace}/{name} Available with {replicas} members"),
        SNAPSHOT_LIMIT,
        || async {
            let c = get_cluster(&client, namespace, name).await;
            let ready = c.status.as_ref().and_then(|s| s.ready_members);
            if ready == Some(replicas) && condition(&c, "Available").as_deref() == Some("True") {
                Ok(())
            } else {
                Err(format!(
                    "ready {ready:?}, {:?}",
                    c.status.and_then(|s| s.conditions)
                ))
            }
        },
    )
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

/// etcd 3.5.1's etcdutl and 3.4.23's etcdctl (which still has `snapshot status`).
pub const ETCDUTL_35: &str = "/usr/local/lib/etcd-3.5.1/etcdutl";
pub const ETCDCTL_34: &str = "/usr/bin/etcdctl";

/// `snapshot status -w json` of the file, with the tool of that etcd version.
pub fn snapshot_status(version: &str, file: &Path) -> serde_json::Value {
    let out = if version == "3.4.23" {
        Command::new(ETCDCTL_34)
            .env("ETCDCTL_API", "3")
            .args(["snapshot", "status", "-w", "json"])
            .arg(file)
            .output()
    } else {
        Command::new(ETCDUTL_35)
            .args(["snapshot", "status", "-w", "json"])
            .arg(file)
            .output()
    }
    .expect("the snapshot status tool runs");
    assert!(
        out.status.success(),
        "snapshot status of {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("snapshot status prints JSON")
}

/// The (type, reason) of every Event about the `kind` object `name`.
pub async fn events_of(
    cluster: &Cluster,
    namespace: &str,
    kind: &str,
    name: &str,
) -> Vec<(String, String)> {
    Api::<Event>::namespaced(cluster.client(), namespace)
        .list(&ListParams::default())
        .await
        .expect("listing Events")
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.kind.as_deref() == Some(kind)
                && e.involved_object.name.as_deref() == Some(name)
        })
        .map(|e| (e.type_.unwrap_or_default(), e.reason.unwrap_or_default()))
        .collect()
}
