//! The watch-backed caches `observe` reads: one reflector per kind the operator owns, each
//! watching only objects that carry the cluster label, so the operator's memory follows the
//! number of etcd members it runs, not the size of the Kubernetes cluster.

use std::time::Duration;

use etcd_operator_api::labels::CLUSTER;
use etcd_operator_api::{EtcdCluster, EtcdMember};
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Config};
use kube::runtime::{WatchStreamExt, reflector::ObjectRef};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use super::cached::{CachedPod, CachedPvc};
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
    /// Pods as their facts ([`CachedPod`]).
    pub pods: Store<CachedPod>,
    /// PVCs as their facts ([`CachedPvc`]).
    pub pvcs: Store<CachedPvc>,
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
    let (reader, writer) = reflector::store();
    let stream = watcher(api, owned_objects())
        .default_backoff()
        .modify(forget_managed_fields)
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
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::ObjectMeta;

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
