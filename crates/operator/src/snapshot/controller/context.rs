//! What every snapshot pass shares: the context, the cluster read for a snapshot, the agent
//! Pods found by label, and the status writes and Events.

use std::sync::Arc;

use etcd_operator_api::snapshot::SnapshotVerify;
use etcd_operator_api::{EtcdCluster, EtcdSnapshot};
use k8s_openapi::api::core::v1::{Event, Pod, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use serde_json::json;
use tracing::warn;

use super::super::decide::{self, ClusterFacts, Failure, Stored};
use super::super::pvc;
use super::super::store;
use crate::act::{ActContext, post_params};
use crate::etcd::EtcdAccess;
use crate::observe::Observer;

/// What the snapshot passes share.
pub struct SnapshotContext {
    pub observer: Observer,
    pub act: ActContext,
    /// UIDs of the snapshots this process finished (Complete or Failed). The watch cache
    /// shows a status write a moment later; the pass that the write itself triggers must not
    /// read the old `Started` from it and take the snapshot again.
    pub finished: std::sync::Mutex<std::collections::HashSet<String>>,
    /// The operator's image, run by the agent Pods of `destination.pvc`.
    pub agent_image: String,
    /// Where `destination.local` may write.
    pub stores: store::StoreSettings,
    /// UIDs of the snapshots whose restore check this process recorded (`Started`, stored):
    /// a pass reading the cache before that status shows must not take them again.
    pub verifying: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Snapshots streamed at once (two), served in the order they asked
    /// ([`crate::reconcile::PassSlots`]: kube-runtime's own limit serves them in no fair order).
    pub slots: crate::reconcile::PassSlots,
}

/// Snapshots stream for as long as the database takes: two at a time at most.
pub const SNAPSHOTS_AT_ONCE: u16 = 2;

impl SnapshotContext {
    pub fn new(observer: Observer, act: ActContext) -> SnapshotContext {
        SnapshotContext {
            observer,
            act,
            finished: Default::default(),
            verifying: Default::default(),
            agent_image: crate::domain::settings::DEFAULT_AGENT_IMAGE.to_string(),
            stores: store::StoreSettings::default(),
            slots: crate::reconcile::PassSlots::new(SNAPSHOTS_AT_ONCE),
        }
    }

    /// The directory `destination.local` snapshots must lie under (`--local-store-root`).
    pub fn with_local_store_root(mut self, root: &std::path::Path) -> SnapshotContext {
        self.stores.local_root = root.to_path_buf();
        self
    }

    /// The image of the PVC agent Pods (the operator's `--agent-image`).
    pub fn with_agent_image(mut self, image: &str) -> SnapshotContext {
        self.agent_image = image.to_string();
        self
    }

    pub(super) fn is_finished(&self, snapshot: &EtcdSnapshot) -> bool {
        let uid = snapshot.metadata.uid.clone().unwrap_or_default();
        self.finished.lock().expect("finished set").contains(&uid)
    }

    pub(super) fn is_verifying(&self, snapshot: &EtcdSnapshot) -> bool {
        let uid = snapshot.metadata.uid.clone().unwrap_or_default();
        self.verifying.lock().expect("verifying set").contains(&uid)
    }

    pub(super) fn mark_verifying(&self, snapshot: &EtcdSnapshot) {
        let uid = snapshot.metadata.uid.clone().unwrap_or_default();
        self.verifying.lock().expect("verifying set").insert(uid);
    }

    pub(super) fn mark_finished(&self, snapshot: &EtcdSnapshot) {
        let uid = snapshot.metadata.uid.clone().unwrap_or_default();
        self.finished.lock().expect("finished set").insert(uid);
    }
}

/// A pass that could not record its outcome (a status write or a read of the API failed).
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("writing the status of EtcdSnapshot {0}: {1}")]
    Status(String, #[source] kube::Error),
    #[error("reading {0}: {1}")]
    Read(String, #[source] kube::Error),
    #[error("the watch caches have not completed their first list yet")]
    CachesNotReady,
}

/// The agent Pods of `snapshot` doing `role` (found by label, so that an operator that
/// restarts finds the Pod its predecessor made).
pub(super) async fn agent_pods(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
    role: &str,
) -> Result<Vec<Pod>, SnapshotError> {
    let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
    let uid = snapshot.metadata.uid.clone().unwrap_or_default();
    let selector = format!(
        "{}={uid},{}={role}",
        pvc::SNAPSHOT_UID_LABEL,
        pvc::ROLE_LABEL
    );
    Api::<Pod>::namespaced(ctx.act.client.clone(), &namespace)
        .list(&ListParams::default().labels(&selector))
        .await
        .map(|list| list.items)
        .map_err(|e| {
            SnapshotError::Read(
                format!("the agent Pods of {namespace}/{}", name(snapshot)),
                e,
            )
        })
}

/// Deletes an agent Pod and its access Secret (same name); failures are logged, and the
/// garbage collector removes both with the EtcdSnapshot anyway.
pub(super) async fn remove_agent(ctx: &SnapshotContext, snapshot: &EtcdSnapshot, pod: &Pod) {
    let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    ctx.act.count_write("Pod");
    if let Err(e) = Api::<Pod>::namespaced(ctx.act.client.clone(), &namespace)
        .delete(&pod_name, &DeleteParams::default())
        .await
        && !matches!(&e, kube::Error::Api(s) if s.code == 404)
    {
        warn!(namespace = %namespace, pod = %pod_name, error = %e, "cannot delete the snapshot agent's Pod");
    }
    let uses_secret = pod
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .any(|v| v.secret.as_ref().and_then(|s| s.secret_name.as_deref()) == Some(&pod_name));
    if uses_secret {
        ctx.act.count_write("Secret");
        if let Err(e) = Api::<Secret>::namespaced(ctx.act.client.clone(), &namespace)
            .delete(&pod_name, &DeleteParams::default())
            .await
            && !matches!(&e, kube::Error::Api(s) if s.code == 404)
        {
            warn!(namespace = %namespace, secret = %pod_name, error = %e, "cannot delete the snapshot agent's access Secret");
        }
    }
}

pub(super) fn age_seconds(pod: &Pod) -> i64 {
    pod.metadata
        .creation_timestamp
        .as_ref()
        .map(|t| Timestamp::now().as_second() - t.0.as_second())
        .unwrap_or_default()
}

pub(super) fn name(snapshot: &EtcdSnapshot) -> String {
    snapshot.metadata.name.clone().unwrap_or_default()
}

pub(super) async fn cluster(
    ctx: &SnapshotContext,
    namespace: &str,
    name: &str,
) -> Result<Option<Arc<EtcdCluster>>, SnapshotError> {
    let key = ObjectRef::<EtcdCluster>::new(name).within(namespace);
    if let Some(cluster) = ctx.observer.stores.clusters.get(&key) {
        return Ok(Some(cluster));
    }
    // Not cached (created a moment ago): ask once.
    Api::<EtcdCluster>::namespaced(ctx.act.client.clone(), namespace)
        .get_opt(name)
        .await
        .map(|c| c.map(Arc::new))
        .map_err(|e| SnapshotError::Read(format!("EtcdCluster {namespace}/{name}"), e))
}

/// The facts that need no etcd (a cluster that cannot be snapshotted anyway).
pub(super) fn shallow_facts(cluster: &EtcdCluster) -> ClusterFacts {
    ClusterFacts {
        name: cluster.metadata.name.clone().unwrap_or_default(),
        deleting: cluster.metadata.deletion_timestamp.is_some(),
        paused: cluster.spec.is_paused(),
        replicas: cluster.spec.replicas_or_default(),
        ..Default::default()
    }
}

/// The cluster as `observe` sees it: its voters, their health, and how to dial them.
pub(super) async fn cluster_facts(
    ctx: &SnapshotContext,
    cluster: &EtcdCluster,
) -> Result<(ClusterFacts, EtcdAccess), SnapshotError> {
    let facts = shallow_facts(cluster);
    if facts.deleting || facts.paused || facts.replicas == 0 {
        return Ok((facts, EtcdAccess::plaintext()));
    }
    let observed = ctx
        .observer
        .observe(cluster)
        .await
        .map_err(|e| SnapshotError::Read(format!("{}/{}", e.namespace, e.name), e.source))?;
    let facts = decide::cluster_facts(&observed, |url| ctx.observer.etcd_urls.map(url));
    Ok((facts, observed.security.access.clone()))
}

pub(super) async fn record_failure(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
    previous: &etcd_operator_api::EtcdSnapshotStatus,
    failure: &Failure,
    stored: Option<&Stored>,
) -> Result<(), SnapshotError> {
    record_failure_verified(
        ctx,
        snapshot,
        previous,
        failure,
        stored,
        SnapshotVerify::Checksum,
    )
    .await
}

/// [`record_failure`], naming the verification that failed (when it is one).
pub(super) async fn record_failure_verified(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
    previous: &etcd_operator_api::EtcdSnapshotStatus,
    failure: &Failure,
    stored: Option<&Stored>,
    method: SnapshotVerify,
) -> Result<(), SnapshotError> {
    let status = decide::failed_status(
        previous,
        failure,
        stored,
        Some(method),
        Timestamp::now(),
        snapshot.metadata.generation,
    );
    write_status(ctx, snapshot, &status).await?;
    ctx.mark_finished(snapshot);
    warn!(
        namespace = snapshot.metadata.namespace.as_deref().unwrap_or_default(),
        snapshot = %name(snapshot),
        reason = failure.reason(),
        detail = %failure.message(),
        "snapshot failed"
    );
    event(
        ctx,
        snapshot,
        "Warning",
        failure.reason(),
        &failure.message(),
    )
    .await;
    Ok(())
}

pub(super) async fn write_status(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
    status: &etcd_operator_api::EtcdSnapshotStatus,
) -> Result<(), SnapshotError> {
    let namespace = snapshot.metadata.namespace.clone().unwrap_or_default();
    let api: Api<EtcdSnapshot> = Api::namespaced(ctx.act.client.clone(), &namespace);
    ctx.act.count_write("EtcdSnapshot/status");
    api.patch_status(
        &name(snapshot),
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .map(|_| ())
    .map_err(|e| SnapshotError::Status(format!("{namespace}/{}", name(snapshot)), e))
}

/// An Event about `snapshot`; a failure to record it is logged, never fails the pass.
pub(super) async fn event(
    ctx: &SnapshotContext,
    snapshot: &EtcdSnapshot,
    kind: &str,
    reason: &str,
    message: &str,
) {
    let event = snapshot_event(snapshot, kind, reason, message, Timestamp::now());
    let namespace = event.metadata.namespace.clone().unwrap_or_default();
    ctx.act.count_write("Event");
    if let Err(e) = Api::<Event>::namespaced(ctx.act.client.clone(), &namespace)
        .create(&post_params(), &event)
        .await
    {
        warn!(namespace = %namespace, reason, error = %e, "cannot record an Event");
    }
}

/// The Event object: involving the EtcdSnapshot, named `<snapshot>.<nanoseconds in hex>`.
pub fn snapshot_event(
    snapshot: &EtcdSnapshot,
    kind: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> Event {
    let kind = if kind == "Warning" {
        crate::build::EventType::Warning
    } else {
        crate::build::EventType::Normal
    };
    crate::build::event_about(snapshot, kind, reason, message, now)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_involve_the_snapshot() {
        let mut snapshot = EtcdSnapshot::new("daily", Default::default());
        snapshot.metadata.namespace = Some("prod".into());
        snapshot.metadata.uid = Some("uid-1".into());
        let now: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        let e = snapshot_event(&snapshot, "Warning", "Unauthorized", &"x".repeat(2000), now);
        assert_eq!(e.involved_object.kind.as_deref(), Some("EtcdSnapshot"));
        assert_eq!(e.involved_object.uid.as_deref(), Some("uid-1"));
        assert_eq!(e.metadata.namespace.as_deref(), Some("prod"));
        assert!(e.metadata.name.unwrap().starts_with("daily."));
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert!(e.message.unwrap().len() <= 1024);
    }
}
