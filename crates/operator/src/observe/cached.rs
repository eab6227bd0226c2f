//! [`Cached`]: a Pod or a PVC as the operator's caches hold it, the facts the planner reads of
//! it ([`PodFacts`], [`PvcFacts`]) instead of the object.
//!
//! The object is parsed whole from the API server's answer and dropped at once; the cache
//! keeps its facts and the few fields of its metadata that the caches, the cluster index and
//! the freshness checks read. A member's Pod at rest costs 21.5 KiB of heap whole (18 KiB even
//! trimmed to what the facts read: the Kubernetes types are wide, a `Container` is 2.1 KiB and
//! a `Volume` 3.2 KiB before any of their contents) and 5.3 KiB cached; a PVC 6.1 and 3.6 KiB
//! (`benches/cached_objects.rs`; docs/benchmarks.md).
//!
//! `Cached<K, F>` is a Kubernetes resource of `K`'s kind for the client (an `Api<Cached<Pod,
//! PodFacts>>` lists, watches and gets Pods), so the reflectors, the index and the GET of an
//! object the cache lacks all work on it unchanged.

use std::borrow::Cow;
use std::marker::PhantomData;

use etcd_operator_api::labels::CLUSTER;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::de::{Deserialize, DeserializeOwned, Deserializer};

use crate::plan::{PodFacts, PvcFacts};

/// What the operator reads of an object of kind `K`.
pub trait FactsOf<K>: Clone + std::fmt::Debug + Send + Sync + 'static {
    fn facts_of(object: &K) -> Self;
}

impl FactsOf<Pod> for PodFacts {
    fn facts_of(pod: &Pod) -> PodFacts {
        PodFacts::from_pod(pod)
    }
}

impl FactsOf<PersistentVolumeClaim> for PvcFacts {
    fn facts_of(pvc: &PersistentVolumeClaim) -> PvcFacts {
        PvcFacts::from_pvc(pvc)
    }
}

/// An object of kind `K` as cached: the metadata the caches read, and its facts.
pub struct Cached<K, F> {
    /// Name, namespace, uid, resourceVersion, deletionTimestamp, and of the labels only the
    /// cluster label (what [`super::cluster_of`] and the cluster index read): the facts keep
    /// the rest of what the planner reads of the metadata.
    pub metadata: ObjectMeta,
    pub facts: F,
    kind: PhantomData<fn() -> K>,
}

/// A member's Pod as cached.
pub type CachedPod = Cached<Pod, PodFacts>;
/// A member's PVC as cached.
pub type CachedPvc = Cached<PersistentVolumeClaim, PvcFacts>;

impl<K: Resource, F: FactsOf<K>> Cached<K, F> {
    /// `object` as the cache keeps it.
    pub fn of(object: &K) -> Self {
        let meta = object.meta();
        Cached {
            metadata: ObjectMeta {
                name: meta.name.clone(),
                namespace: meta.namespace.clone(),
                uid: meta.uid.clone(),
                resource_version: meta.resource_version.clone(),
                deletion_timestamp: meta.deletion_timestamp.clone(),
                labels: meta
                    .labels
                    .as_ref()
                    .and_then(|l| l.get_key_value(CLUSTER))
                    .map(|(k, v)| [(k.clone(), v.clone())].into()),
                ..Default::default()
            },
            facts: F::facts_of(object),
            kind: PhantomData,
        }
    }
}

impl<K, F: Clone> Clone for Cached<K, F> {
    fn clone(&self) -> Self {
        Cached {
            metadata: self.metadata.clone(),
            facts: self.facts.clone(),
            kind: PhantomData,
        }
    }
}

impl<K, F: std::fmt::Debug> std::fmt::Debug for Cached<K, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cached")
            .field("metadata", &self.metadata)
            .field("facts", &self.facts)
            .finish()
    }
}

/// Parsed as the whole `K`, kept as its facts.
impl<'de, K, F> Deserialize<'de> for Cached<K, F>
where
    K: Resource + DeserializeOwned,
    F: FactsOf<K>,
{
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        K::deserialize(deserializer).map(|object| Cached::of(&object))
    }
}

/// `K`'s kind, group, version and scope: what a client asks the API server for.
impl<K, F> Resource for Cached<K, F>
where
    K: Resource<DynamicType = ()>,
{
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }

    fn api_version(dt: &()) -> Cow<'_, str> {
        K::api_version(dt)
    }

    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector::{self, ObjectRef};
    use kube::runtime::watcher::Event;

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

    /// Parsed from the API server's JSON, a cached Pod has the facts of the whole Pod, and
    /// the metadata that the caches and the freshness checks read.
    #[test]
    fn a_cached_pod_parses_to_the_facts_and_identity_of_the_whole() {
        for (i, whole) in pods().into_iter().enumerate() {
            let cached: CachedPod = serde_json::from_value(serde_json::to_value(&whole).unwrap())
                .expect("a Pod parses as a cached Pod");
            assert_eq!(cached.facts, PodFacts::from_pod(&whole), "pod {i}");
            let (kept, of_whole) = (&cached.metadata, &whole.metadata);
            assert_eq!(kept.name, of_whole.name, "pod {i}");
            assert_eq!(kept.namespace, of_whole.namespace, "pod {i}");
            assert_eq!(kept.uid, of_whole.uid, "pod {i}");
            assert_eq!(kept.resource_version, of_whole.resource_version, "pod {i}");
            assert_eq!(
                kept.deletion_timestamp, of_whole.deletion_timestamp,
                "pod {i}"
            );
            assert_eq!(
                super::super::cluster_of(&cached),
                super::super::cluster_of(&whole),
                "pod {i}"
            );
            // Of the labels only the cluster's: the facts have the others.
            assert!(kept.labels.as_ref().is_none_or(|l| l.len() <= 1), "pod {i}");
            assert_eq!(kept.annotations, None, "pod {i}");
        }
        let at_rest = pods().remove(0);
        assert!(at_rest.metadata.labels.unwrap().len() > 1);
        assert!(
            CachedPod::of(&pods().remove(1))
                .metadata
                .deletion_timestamp
                .is_some()
        );
    }

    /// The cache finds a cached Pod by the Pod's reference, and the client asks for Pods.
    #[test]
    fn a_cached_pod_is_a_pod_to_the_cache_and_the_client() {
        assert_eq!(
            CachedPod::url_path(&(), Some("prod")),
            Pod::url_path(&(), Some("prod"))
        );
        assert_eq!(CachedPvc::kind(&()), "PersistentVolumeClaim");
        let (store, mut writer) = reflector::store::<CachedPod>();
        let whole = pods().remove(0);
        let key = ObjectRef::<CachedPod>::new("etcd-0").within("idle-0");
        writer.apply_watcher_event(&Event::Apply(CachedPod::of(&whole)));
        assert_eq!(
            store.get(&key).map(|p| p.facts.clone()),
            Some(PodFacts::from_pod(&whole))
        );
        writer.apply_watcher_event(&Event::Delete(CachedPod::of(&whole)));
        assert!(store.get(&key).is_none());
    }

    #[test]
    fn a_cached_pvc_has_the_facts_of_the_whole() {
        // As a real control plane served it (kube-apiserver v1.37.2).
        let pvc: PersistentVolumeClaim =
            serde_json::from_str(include_str!("../../tests/fixtures/pvc-at-rest.json"))
                .expect("the fixture is a PVC");
        let cached: CachedPvc =
            serde_json::from_value(serde_json::to_value(&pvc).unwrap()).unwrap();
        assert_eq!(cached.facts, PvcFacts::from_pvc(&pvc));
        assert_eq!(cached.facts.requested.as_deref(), Some("1Gi"));
        assert_eq!(cached.metadata.resource_version.as_deref(), Some("393"));
        assert_eq!(
            super::super::cluster_of(&cached),
            super::super::cluster_of(&pvc)
        );
    }
}
