//! [`ClusterIndex`]: the names of a cache's objects by the EtcdCluster they belong to, so that
//! a pass finds its cluster's EtcdMembers and PVCs without scanning every cached one (a scan
//! per pass grows with the square of the clusters: 5 to 7 % of the operator's samples at 200
//! clusters, docs/benchmarks.md).
//!
//! The index may name more objects than the cache holds, never fewer: a name is added before
//! the reflector stores its object ([`ClusterIndex::before`]) and removed only after the object
//! has left the cache ([`ClusterIndex::after`]). A lookup ([`cluster_objects`]) gets each named
//! object from the cache and keeps those that carry the cluster's label in its namespace, so
//! it returns exactly what a scan of the cache would, at any moment a pass reads it: a pass
//! never misses a member that the cache holds (it would plan to create it again).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use etcd_operator_api::labels::CLUSTER;
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::Event;

/// Names by (namespace, cluster). Cheap to clone: the clones share one index.
#[derive(Clone, Default)]
pub struct ClusterIndex {
    inner: Arc<Mutex<IndexState>>,
}

/// (namespace, cluster label value).
type Key = (String, String);

#[derive(Default)]
struct IndexState {
    names: HashMap<Key, BTreeSet<String>>,
    /// During a relist (between `Init` and `InitDone`): the index of the listed objects alone,
    /// which replaces `names` once the cache has swapped in the same list.
    relisting: Option<HashMap<Key, BTreeSet<String>>>,
}

/// Where `object` is indexed: its namespace and cluster label, and its name.
fn key_of<K: Resource>(object: &K) -> Option<(Key, String)> {
    let meta = object.meta();
    let cluster = meta.labels.as_ref()?.get(CLUSTER)?;
    Some((
        (meta.namespace.clone()?, cluster.clone()),
        meta.name.clone()?,
    ))
}

fn add(names: &mut HashMap<Key, BTreeSet<String>>, key: Key, name: String) {
    names.entry(key).or_default().insert(name);
}

impl ClusterIndex {
    /// The index of what `store` holds now (a cache filled once, not kept by a watch).
    pub fn of<K>(store: &Store<K>) -> ClusterIndex
    where
        K: Resource + Clone,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    {
        let index = ClusterIndex::default();
        {
            let mut state = index.inner.lock().expect("cluster index");
            for object in store.state() {
                if let Some((key, name)) = key_of(object.as_ref()) {
                    add(&mut state.names, key, name);
                }
            }
        }
        index
    }

    /// The names indexed under `cluster` in `namespace` (a superset of the cached ones).
    pub fn names(&self, namespace: &str, cluster: &str) -> Vec<String> {
        let state = self.inner.lock().expect("cluster index");
        state
            .names
            .get(&(namespace.to_string(), cluster.to_string()))
            .map(|names| names.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Before the reflector applies `event` to the cache: what it adds is indexed first.
    pub fn before<K: Resource>(&self, event: &Event<K>) {
        let mut state = self.inner.lock().expect("cluster index");
        match event {
            Event::Init => state.relisting = Some(HashMap::new()),
            Event::InitApply(object) => {
                if let Some((key, name)) = key_of(object) {
                    if let Some(relisting) = state.relisting.as_mut() {
                        add(relisting, key.clone(), name.clone());
                    }
                    add(&mut state.names, key, name);
                }
            }
            Event::Apply(object) => {
                if let Some((key, name)) = key_of(object) {
                    add(&mut state.names, key, name);
                }
            }
            Event::Delete(_) | Event::InitDone => {}
        }
    }

    /// After the reflector applied `event` to the cache: what it removed leaves the index.
    /// An object whose cluster label changed stays under its old cluster too until the next
    /// relist; lookups check the label.
    pub fn after<K: Resource>(&self, event: &Event<K>) {
        let mut state = self.inner.lock().expect("cluster index");
        match event {
            Event::Delete(object) => {
                if let Some((key, name)) = key_of(object)
                    && let Some(names) = state.names.get_mut(&key)
                {
                    names.remove(&name);
                    if names.is_empty() {
                        state.names.remove(&key);
                    }
                }
            }
            Event::InitDone => {
                if let Some(listed) = state.relisting.take() {
                    state.names = listed;
                }
            }
            Event::Init | Event::InitApply(_) | Event::Apply(_) => {}
        }
    }
}

/// The cached objects of `cluster` in `namespace`, by name: what `index` names, as `store`
/// holds them, that carry the cluster's label.
pub fn cluster_objects<K>(
    store: &Store<K>,
    index: &ClusterIndex,
    namespace: &str,
    cluster: &str,
) -> Vec<Arc<K>>
where
    K: Resource + Clone,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    index
        .names(namespace, cluster)
        .into_iter()
        .filter_map(|name| store.get(&ObjectRef::new(&name).within(namespace)))
        .filter(|object| {
            object
                .meta()
                .labels
                .as_ref()
                .and_then(|l| l.get(CLUSTER))
                .is_some_and(|c| c == cluster)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use kube::runtime::reflector;

    /// A member's PVC (any labelled kind would do: the index reads metadata only).
    fn member(namespace: &str, name: &str, cluster: Option<&str>) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(namespace.to_string()),
                labels: cluster.map(|c| [(CLUSTER.to_string(), c.to_string())].into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// What a scan of the cache returns (the operator's lookup before the index).
    fn scanned(
        store: &Store<PersistentVolumeClaim>,
        namespace: &str,
        cluster: &str,
    ) -> Vec<String> {
        let mut names: Vec<String> = store
            .state()
            .iter()
            .filter(|m| {
                m.metadata.namespace.as_deref() == Some(namespace)
                    && m.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(CLUSTER))
                        .is_some_and(|c| c == cluster)
            })
            .filter_map(|m| m.metadata.name.clone())
            .collect();
        names.sort();
        names
    }

    fn looked_up(
        store: &Store<PersistentVolumeClaim>,
        index: &ClusterIndex,
        namespace: &str,
        cluster: &str,
    ) -> Vec<String> {
        cluster_objects(store, index, namespace, cluster)
            .iter()
            .filter_map(|m| m.metadata.name.clone())
            .collect()
    }

    /// Every event goes through `before`, the cache, `after`, as the reflector's stream runs
    /// them; at each of the two moments between, the lookup equals the scan for every
    /// cluster the events name.
    #[test]
    fn the_lookup_is_the_scan_at_every_moment() {
        let events = vec![
            Event::Init,
            Event::InitApply(member("a", "etcd-0", Some("etcd"))),
            Event::InitApply(member("a", "etcd-1", Some("etcd"))),
            Event::InitApply(member("b", "etcd-0", Some("etcd"))),
            Event::InitApply(member("a", "other-0", Some("other"))),
            Event::InitApply(member("a", "stray", None)),
            Event::InitDone,
            Event::Apply(member("a", "etcd-2", Some("etcd"))),
            Event::Apply(member("a", "etcd-1", Some("etcd"))),
            Event::Delete(member("a", "etcd-0", Some("etcd"))),
            // The label moves to another cluster, then goes.
            Event::Apply(member("a", "etcd-2", Some("other"))),
            Event::Apply(member("a", "etcd-2", None)),
            // A relist that no longer has b/etcd-0 and a/etcd-1 (deleted while unwatched).
            Event::Init,
            Event::InitApply(member("a", "etcd-2", Some("etcd"))),
            Event::InitApply(member("a", "other-0", Some("other"))),
            Event::InitDone,
            Event::Delete(member("a", "other-0", Some("other"))),
        ];
        let (store, mut writer) = reflector::store::<PersistentVolumeClaim>();
        let index = ClusterIndex::default();
        let clusters = [("a", "etcd"), ("a", "other"), ("b", "etcd"), ("b", "other")];
        let agree = |moment: &str, step: usize| {
            for (namespace, cluster) in clusters {
                assert_eq!(
                    looked_up(&store, &index, namespace, cluster),
                    scanned(&store, namespace, cluster),
                    "{namespace}/{cluster} {moment} event {step}"
                );
            }
        };
        for (step, event) in events.iter().enumerate() {
            index.before(event);
            agree("before", step);
            writer.apply_watcher_event(event);
            agree("between", step);
            index.after(event);
            agree("after", step);
        }
        assert_eq!(looked_up(&store, &index, "a", "etcd"), ["etcd-2"]);
        assert!(looked_up(&store, &index, "b", "etcd").is_empty());
        // The relist dropped what it no longer lists: nothing is left behind but the cache's.
        let state = index.inner.lock().unwrap();
        assert_eq!(
            state.names.values().map(BTreeSet::len).sum::<usize>(),
            1,
            "{:?}",
            state.names
        );
    }

    /// The order matters: an index that learned of an object only after the cache held it
    /// would miss it for a moment, which the test above catches.
    #[test]
    fn a_member_is_found_once_indexed_whether_or_not_the_cache_has_it() {
        let (store, mut writer) = reflector::store::<PersistentVolumeClaim>();
        let index = ClusterIndex::default();
        let event = Event::Apply(member("a", "etcd-0", Some("etcd")));
        index.before(&event);
        assert!(
            looked_up(&store, &index, "a", "etcd").is_empty(),
            "not cached yet"
        );
        writer.apply_watcher_event(&event);
        assert_eq!(scanned(&store, "a", "etcd"), ["etcd-0"]);
        assert_eq!(looked_up(&store, &index, "a", "etcd"), ["etcd-0"]);
    }

    #[test]
    fn an_index_of_a_filled_cache_names_its_objects() {
        let (store, mut writer) = reflector::store::<PersistentVolumeClaim>();
        for event in [
            Event::Init,
            Event::InitApply(member("a", "etcd-0", Some("etcd"))),
            Event::InitApply(member("a", "etcd-1", Some("etcd"))),
            Event::InitDone,
        ] {
            writer.apply_watcher_event(&event);
        }
        let index = ClusterIndex::of(&store);
        assert_eq!(looked_up(&store, &index, "a", "etcd"), ["etcd-0", "etcd-1"]);
    }
}
