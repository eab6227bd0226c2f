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
use tokio::sync::watch;

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

/// Whether a cache has completed its first list; any number of tasks may wait for it.
///
/// The operator never waits on kube-runtime's `Store::wait_until_ready`: in kube-runtime 5.0.0
/// it keeps one waker per store (a shared oneshot receiver that each poll re-registers), so of
/// several tasks waiting at the same time only the one that polled last is woken when the list
/// completes, and the others sleep until something else wakes them. After a start every pass,
/// the readiness probe, the snapshot and defrag passes and kube-runtime's own controller wait
/// on the same caches: with kube-runtime's readiness, passes waited out their whole 30 s limit
/// after three of eight operator starts (docs/testing.md, "How long the suite takes", "Fixed
/// (stop 44)"). The reflector streams below mark their first `InitDone` here instead, after the
/// reflector has swapped the listed objects into the store, and a `tokio::sync::watch` wakes
/// every waiter. A later relist (the watch expired) leaves the mark set, as kube-runtime's own
/// readiness does: the store keeps its objects until the new list replaces them whole.
#[derive(Clone, Debug)]
pub struct Filled(watch::Receiver<bool>);

/// The writing side of a [`Filled`], held by the stream that fills the cache.
struct FillMark(watch::Sender<bool>);

impl Filled {
    fn new() -> (FillMark, Filled) {
        let (tx, rx) = watch::channel(false);
        (FillMark(tx), Filled(rx))
    }

    /// A cache filled before it is handed out (listed once, not watched).
    pub fn already() -> Filled {
        Filled(watch::channel(true).1)
    }

    /// Whether the first list is in the cache.
    pub fn is_filled(&self) -> bool {
        *self.0.borrow()
    }

    /// Waits until the first list is in the cache; false when the stream that fills it is gone
    /// first (the controller stopped).
    pub async fn wait(&self) -> bool {
        self.0.clone().wait_for(|filled| *filled).await.is_ok()
    }
}

/// Marks `filled` when the first list has passed the reflector (put this after `.reflect`).
fn mark_filled<K, S>(stream: S, mark: FillMark) -> impl Stream<Item = S::Item> + Send
where
    K: Send,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    stream.inspect(move |event| {
        if matches!(event, Ok(watcher::Event::InitDone)) {
            mark.0.send_replace(true);
        }
    })
}

/// The first-list marks of the caches in [`Stores`].
#[derive(Clone, Debug)]
pub struct Fills {
    pub clusters: Filled,
    pub members: Filled,
    pub pods: Filled,
    pub pvcs: Filled,
    pub services: Filled,
    pub pdbs: Filled,
}

impl Fills {
    /// Every cache filled before it is handed out (listed once, not watched).
    pub fn already() -> Fills {
        Fills {
            clusters: Filled::already(),
            members: Filled::already(),
            pods: Filled::already(),
            pvcs: Filled::already(),
            services: Filled::already(),
            pdbs: Filled::already(),
        }
    }

    /// Waits until every cache holds its first list; false when a stream is gone first.
    pub async fn wait(&self) -> bool {
        let (a, b, c, d, e, f) = futures::join!(
            self.clusters.wait(),
            self.members.wait(),
            self.pods.wait(),
            self.pvcs.wait(),
            self.services.wait(),
            self.pdbs.wait(),
        );
        a && b && c && d && e && f
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
    /// Which caches hold their first list (see [`Filled`]).
    pub fills: Fills,
}

impl Stores {
    /// Waits until every cache has completed its first list (at most `limit`): planning from a
    /// half-filled cache would see members missing and try to create them again.
    pub async fn wait_until_ready(&self, limit: Duration) -> bool {
        tokio::time::timeout(limit, self.fills.wait())
            .await
            .unwrap_or(false)
    }
}

/// The watcher configuration of every owned kind: objects labelled with a cluster.
pub fn owned_objects() -> Config {
    Config::default().labels(CLUSTER)
}

/// A reflector for `K`: the cache reader, its first-list mark, and the stream of changed
/// objects that both fills the cache and wakes the controller (it must be polled, which the
/// controller does).
pub fn reflect<K>(
    api: Api<K>,
) -> (
    Store<K>,
    Filled,
    impl Stream<Item = Result<K, watcher::Error>> + Send,
)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let (mark, filled) = Filled::new();
    let stream = watcher(api, owned_objects())
        .default_backoff()
        .modify(forget_managed_fields)
        .reflect(writer);
    let stream = mark_filled(stream, mark).touched_objects().boxed();
    (reader, filled, stream)
}

/// [`reflect`], with the cache's objects indexed by cluster (see [`ClusterIndex`]: each event
/// is indexed on both sides of the cache's update, so the index never lacks a cached object).
pub fn reflect_indexed<K>(
    api: Api<K>,
) -> (
    Store<K>,
    ClusterIndex,
    Filled,
    impl Stream<Item = Result<K, watcher::Error>> + Send,
)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let (mark, filled) = Filled::new();
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
        });
    let stream = mark_filled(stream, mark).touched_objects().boxed();
    (reader, index, filled, stream)
}

/// The cache of every `K` that a controller runs on, its first-list mark, and the stream of
/// applied objects that fills it and triggers their reconciles (what `Controller::new` builds,
/// with [`forget_managed_fields`] and the mark: see [`Filled`] for why the operator waits on
/// its own mark).
pub fn reflect_applied<K>(
    api: Api<K>,
) -> (
    Store<K>,
    Filled,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let (mark, filled) = Filled::new();
    let stream = watcher(api, Config::default())
        .default_backoff()
        .modify(forget_managed_fields)
        .reflect(writer);
    let stream = mark_filled(stream, mark).applied_objects().boxed();
    (reader, filled, stream)
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

    fn pod(name: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("prod".into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// A cache of Pods filled through [`mark_filled`] as [`reflect`] fills it.
    struct Fed {
        reader: Store<Pod>,
        filled: Filled,
        /// The watcher's events.
        events: futures::channel::mpsc::UnboundedSender<watcher::Event<Pod>>,
        /// Fills the cache while it is driven.
        stream: futures::stream::BoxStream<'static, Result<watcher::Event<Pod>, watcher::Error>>,
    }

    fn fed_cache() -> Fed {
        let (reader, writer) = reflector::store::<Pod>();
        let (mark, filled) = Filled::new();
        let (events, source) = futures::channel::mpsc::unbounded::<watcher::Event<Pod>>();
        let stream = mark_filled(source.map(Ok).reflect(writer), mark).boxed();
        Fed {
            reader,
            filled,
            events,
            stream,
        }
    }

    /// Several tasks wait for the same first list, as passes, the readiness probe and the
    /// snapshot and defrag passes do after a start: each must wake once the whole list is in
    /// the cache, and not before.
    #[tokio::test]
    async fn every_waiter_wakes_when_the_first_list_is_in_the_cache() {
        use futures::FutureExt;
        let Fed {
            reader,
            filled,
            events,
            stream,
        } = fed_cache();
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                let (filled, reader) = (filled.clone(), reader.clone());
                tokio::spawn(async move { filled.wait().await.then(|| reader.state().len()) })
            })
            .collect();
        let settle = || tokio::time::sleep(Duration::from_millis(20));
        // Every waiter is parked before the list completes; a poll dropped at once comes last.
        settle().await;
        assert!(filled.wait().now_or_never().is_none());

        let drive = tokio::spawn(stream.for_each(|_| async {}));
        // The list arrives event by event; only its end fills the cache.
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(pod("etcd-0")),
            watcher::Event::InitApply(pod("etcd-1")),
        ] {
            events.unbounded_send(event).unwrap();
            settle().await;
            assert!(!filled.is_filled());
            assert!(waiters.iter().all(|w| !w.is_finished()));
        }
        events.unbounded_send(watcher::Event::InitDone).unwrap();
        for (i, waiter) in waiters.into_iter().enumerate() {
            let woken = tokio::time::timeout(Duration::from_secs(2), waiter)
                .await
                .unwrap_or_else(|_| panic!("waiter {i} was never woken"))
                .unwrap();
            assert_eq!(woken, Some(2), "waiter {i} found the list incomplete");
        }
        assert!(filled.is_filled());

        // A relist keeps the mark: the cache keeps its objects until the new list is whole.
        events.unbounded_send(watcher::Event::Init).unwrap();
        settle().await;
        assert!(filled.is_filled());
        drop(events);
        drive.await.unwrap();
        assert!(
            filled.wait().await,
            "filled stays filled when its stream ends"
        );
    }

    #[tokio::test]
    async fn a_wait_ends_unfilled_when_the_stream_is_gone_before_its_list() {
        let Fed {
            filled,
            events,
            stream,
            ..
        } = fed_cache();
        let waiter = tokio::spawn({
            let filled = filled.clone();
            async move { filled.wait().await }
        });
        events.unbounded_send(watcher::Event::Init).unwrap();
        drop(events);
        stream.for_each(|_| async {}).await;
        assert!(!waiter.await.unwrap());
        assert!(!filled.is_filled());
        assert!(Fills::already().wait().await);
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
