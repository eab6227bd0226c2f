//! The watch-backed caches `observe` reads: one reflector per kind the operator owns, each
//! watching only objects that carry the cluster label, so the operator's memory follows the
//! number of etcd members it runs, not the size of the Kubernetes cluster.

use std::time::Duration;

use etcd_operator_api::labels::CLUSTER;
use etcd_operator_api::{EtcdCluster, EtcdMember};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Config};
use kube::runtime::{WatchStreamExt, reflector::ObjectRef};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use super::index::ClusterIndex;

/// Which namespaces the operator watches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every namespace (needs a ClusterRole).
    All,
    /// One namespace.
    Namespace(String),
}

impl Scope {
    /// An `Api` over this scope.
    pub fn api<K>(&self, client: &Client) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match self {
            Scope::All => Api::all(client.clone()),
            Scope::Namespace(ns) => Api::namespaced(client.clone(), ns),
        }
    }
}

/// The readers of every cache, cheap to clone.
#[derive(Clone)]
pub struct Stores {
    pub clusters: Store<EtcdCluster>,
    pub members: Store<EtcdMember>,
    /// `members` by cluster.
    pub member_index: ClusterIndex,
    pub pods: Store<Pod>,
    pub pvcs: Store<PersistentVolumeClaim>,
    /// `pvcs` by cluster.
    pub pvc_index: ClusterIndex,
    pub services: Store<Service>,
    pub pdbs: Store<PodDisruptionBudget>,
}

impl Stores {
    /// Waits until every cache has completed its first list (at most `limit`): planning from a
    /// half-filled cache would see members missing and try to create them again.
    pub async fn wait_until_ready(&self, limit: Duration) -> bool {
        let all = async {
            let results = futures::join!(
                self.clusters.wait_until_ready(),
                self.members.wait_until_ready(),
                self.pods.wait_until_ready(),
                self.pvcs.wait_until_ready(),
                self.services.wait_until_ready(),
                self.pdbs.wait_until_ready(),
            );
            results.0.is_ok()
                && results.1.is_ok()
                && results.2.is_ok()
                && results.3.is_ok()
                && results.4.is_ok()
                && results.5.is_ok()
        };
        tokio::time::timeout(limit, all).await.unwrap_or(false)
    }
}

/// The watcher configuration of every owned kind: objects labelled with a cluster.
pub fn owned_objects() -> Config {
    Config::default().labels(CLUSTER)
}

/// A reflector for `K`: the cache reader, and the stream of changed objects that both fills the
/// cache and wakes the controller (it must be polled, which the controller does).
pub fn reflect<K>(
    api: Api<K>,
) -> (
    Store<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send,
)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    reflect_trimmed(api, forget_managed_fields)
}

/// [`reflect`], each object changed by `trim` before it is cached (e.g. [`trim_pod`]).
pub fn reflect_trimmed<K>(
    api: Api<K>,
    trim: fn(&mut K),
) -> (
    Store<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send,
)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, owned_objects())
        .default_backoff()
        .modify(trim)
        .reflect(writer)
        .touched_objects()
        .boxed();
    (reader, stream)
}

/// [`reflect`], with the cache's objects indexed by cluster (see [`ClusterIndex`]: each event
/// is indexed on both sides of the cache's update, so the index never lacks a cached object).
pub fn reflect_indexed<K>(
    api: Api<K>,
) -> (
    Store<K>,
    ClusterIndex,
    impl Stream<Item = Result<K, watcher::Error>> + Send,
)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let index = ClusterIndex::default();
    let (before, after) = (index.clone(), index.clone());
    let stream = watcher(api, owned_objects())
        .default_backoff()
        .modify(forget_managed_fields)
        .map(move |event| {
            if let Ok(event) = &event {
                before.before(event);
            }
            event
        })
        .reflect(writer)
        .map(move |event| {
            if let Ok(event) = &event {
                after.after(event);
            }
            event
        })
        .touched_objects()
        .boxed();
    (reader, index, stream)
}

/// The cache of EtcdClusters that the cluster controller runs on, and the stream of applied
/// clusters that fills it and triggers their reconciles (what `Controller::new` builds, with
/// [`forget_managed_fields`]).
pub fn reflect_clusters(
    api: Api<EtcdCluster>,
) -> (
    Store<EtcdCluster>,
    impl Stream<Item = Result<EtcdCluster, watcher::Error>> + Send + 'static,
) {
    let (reader, writer) = reflector::store();
    let stream = watcher(api, Config::default())
        .default_backoff()
        .modify(forget_managed_fields)
        .reflect(writer)
        .applied_objects()
        .boxed();
    (reader, stream)
}

/// Drops an object's `metadata.managedFields` before it is cached. The operator never reads
/// them (it compares specs and labels, not field managers; a write that omits them leaves the
/// server's as they are), and they are often the largest part of a Pod's or an EtcdCluster's
/// metadata: one entry per field manager (kubectl, the operator, the kubelet's status writes),
/// each listing every field it owns. Measured: docs/benchmarks.md, "Idle clusters".
pub fn forget_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// A Pod as the operator caches it: its metadata (without managed fields) and only the parts of
/// its spec and status that [`crate::plan::PodFacts::from_pod`] reads, the one reader of cached
/// Pods. A Pod is the largest object the operator caches (22 KiB of heap each at rest, three
/// per cluster: docs/benchmarks.md); what goes is the probes, ports, resources and security
/// contexts of its containers, its other volumes, tolerations and scheduling, and the status'
/// addresses. A test checks that the facts of a trimmed Pod are those of the whole one.
pub fn trim_pod(pod: &mut Pod) {
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodStatus};
    forget_managed_fields(pod);
    if let Some(spec) = pod.spec.as_mut() {
        let whole = std::mem::take(spec);
        *spec = PodSpec {
            node_name: whole.node_name,
            containers: whole
                .containers
                .into_iter()
                .map(|c| Container {
                    name: c.name,
                    image: c.image,
                    command: c.command,
                    args: c.args,
                    env: c.env,
                    volume_mounts: c.volume_mounts,
                    ..Default::default()
                })
                .collect(),
            volumes: whole
                .volumes
                .map(|v| v.into_iter().filter(|v| v.name == "data").collect()),
            ..Default::default()
        };
    }
    if let Some(status) = pod.status.as_mut() {
        let whole = std::mem::take(status);
        *status = PodStatus {
            phase: whole.phase,
            conditions: whole.conditions,
            container_statuses: whole.container_statuses,
            init_container_statuses: whole.init_container_statuses,
            start_time: whole.start_time,
            ..Default::default()
        };
    }
}

fn watcher<K>(
    api: Api<K>,
    config: Config,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher::watcher(api, config)
}

/// The EtcdCluster a member-level object (Pod, PVC) belongs to, from its cluster label: those
/// objects are owned by an EtcdMember, so owner references lead to the member, not the cluster.
pub fn cluster_of<K: Resource>(object: &K) -> Option<ObjectRef<EtcdCluster>> {
    let meta = object.meta();
    let cluster = meta.labels.as_ref()?.get(CLUSTER)?;
    let namespace = meta.namespace.as_deref()?;
    Some(ObjectRef::new(cluster).within(namespace))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::PodFacts;
    use kube::api::ObjectMeta;

    /// A member's Pod at rest as a real control plane serves it (kube-apiserver v1.37.2, the
    /// node agent's status), and variants that fill what `PodFacts` reads of other states.
    fn pods() -> Vec<Pod> {
        let at_rest: Pod =
            serde_json::from_str(include_str!("../../tests/fixtures/pod-at-rest.json"))
                .expect("the fixture is a Pod");
        let mut variants = vec![at_rest.clone()];
        let mut failed: serde_json::Value = serde_json::to_value(&at_rest).unwrap();
        failed["metadata"]["annotations"][crate::build::TRUSTED_CA_ANNOTATION] = "digest".into();
        failed["metadata"]["deletionTimestamp"] = "2026-12-06T17:00:00Z".into();
        failed["spec"]["volumes"] = serde_json::json!([
            {"name": "data", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}},
            {"name": "certs", "secret": {"secretName": "etcd-server-tls"}},
        ]);
        failed["status"]["containerStatuses"][0]["state"] = serde_json::json!({
            "waiting": {"reason": "CrashLoopBackOff"}});
        failed["status"]["containerStatuses"][0]["lastState"] = serde_json::json!({
            "terminated": {"reason": "Error", "exitCode": 1,
                           "message": "discovery failed: member has already been bootstrapped"}});
        failed["status"]["containerStatuses"][0]["restartCount"] = 4.into();
        failed["status"]["initContainerStatuses"] = serde_json::json!([
            {"name": crate::build::RESTORE_FETCH_CONTAINER, "image": "agent", "imageID": "",
             "ready": false, "restartCount": 0,
             "state": {"terminated": {"exitCode": 1, "reason": "Error",
                                      "message": "RestoreFailed NotFound: no such key"}}},
        ]);
        variants.push(serde_json::from_value(failed).unwrap());
        let mut restoring: serde_json::Value = serde_json::to_value(&at_rest).unwrap();
        restoring["status"]["initContainerStatuses"] = serde_json::json!([
            {"name": crate::build::RESTORE_CONTAINER, "image": "agent", "imageID": "",
             "ready": false, "restartCount": 0, "state": {"running": {}}},
        ]);
        variants.push(serde_json::from_value(restoring).unwrap());
        // The legacy operator's StatefulSet Pod: its flags through the downward API.
        variants.push(
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "etcd-1", "namespace": "prod"},
                "spec": {
                    "containers": [{
                        "name": "etcd",
                        "command": ["etcd"],
                        "args": ["--name=$(POD_NAME)", "--data-dir=/var/run/etcd/default.etcd"],
                        "env": [{"name": "POD_NAME",
                                 "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                        "volumeMounts": [{"name": "data", "mountPath": "/var/run/etcd"}],
                        "readinessProbe": {"exec": {"command": ["true"]}},
                    }],
                    "volumes": [{"name": "data",
                                 "persistentVolumeClaim": {"claimName": "data-etcd-1"}}],
                },
            }))
            .unwrap(),
        );
        variants
    }

    #[test]
    fn a_trimmed_pod_gives_the_facts_of_the_whole_one() {
        for (i, whole) in pods().into_iter().enumerate() {
            let mut trimmed = whole.clone();
            trim_pod(&mut trimmed);
            assert_eq!(
                PodFacts::from_pod(&trimmed),
                PodFacts::from_pod(&whole),
                "pod {i}"
            );
        }
    }

    #[test]
    fn a_trimmed_pod_keeps_only_what_the_facts_read() {
        let whole = pods().remove(0);
        let mut trimmed = whole.clone();
        trim_pod(&mut trimmed);
        assert_eq!(trimmed.metadata, whole.metadata);
        // What it keeps of the spec: the etcd container's command line and the data volume.
        let spec = trimmed.spec.unwrap();
        assert_eq!(spec.containers[0].readiness_probe, None);
        assert!(spec.containers[0].command.is_some());
        assert_eq!(spec.tolerations, None);
        assert_eq!(trimmed.status.unwrap().pod_ip, None);
    }

    #[test]
    fn cached_objects_forget_their_managed_fields_only() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
        let mut pod = Pod {
            metadata: ObjectMeta {
                name: Some("etcd-0".into()),
                labels: Some([(CLUSTER.to_string(), "etcd".to_string())].into()),
                managed_fields: Some(vec![ManagedFieldsEntry {
                    manager: Some("kubectl".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            ..Default::default()
        };
        forget_managed_fields(&mut pod);
        assert_eq!(pod.metadata.managed_fields, None);
        assert_eq!(pod.metadata.name.as_deref(), Some("etcd-0"));
        assert!(pod.metadata.labels.is_some());
    }

    #[test]
    fn member_level_objects_map_to_their_cluster_by_label() {
        let pod = Pod {
            metadata: ObjectMeta {
                name: Some("etcd-0".into()),
                namespace: Some("prod".into()),
                labels: Some([(CLUSTER.to_string(), "etcd".to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let cluster = cluster_of(&pod).unwrap();
        assert_eq!(cluster.name, "etcd");
        assert_eq!(cluster.namespace.as_deref(), Some("prod"));
        let unlabelled = Pod::default();
        assert!(cluster_of(&unlabelled).is_none());
    }
}
