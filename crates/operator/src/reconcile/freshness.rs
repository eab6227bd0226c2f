//! Waiting for the watch caches to show the operator's own writes before the next pass plans
//! from them: a pass planned from a cache that lags would repeat a create (409) or compute a
//! status from an old resourceVersion (409 again), wasting a round trip and an error.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::act::{ObjectKind, Written};
use crate::observe::Stores;

/// How often the caches are looked at while waiting.
const POLL: Duration = Duration::from_millis(10);

/// Waits until every write shows in the caches, at most `limit`. Returns whether they all did
/// (a timeout is harmless: the preconditions of the next writes catch a stale read).
pub async fn wait_for_caches(stores: &Stores, written: &[Written], limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if written.iter().all(|w| cached(stores, w)) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Whether the cache shows `written`.
fn cached(stores: &Stores, written: &Written) -> bool {
    match written {
        Written::Updated {
            kind,
            namespace,
            name,
            resource_version,
            may_vanish,
        } => {
            let Some(wanted) = resource_version else {
                return true;
            };
            match cached_meta(stores, *kind, namespace, name) {
                None => *may_vanish,
                Some(meta) => meta
                    .resource_version
                    .is_some_and(|have| at_least(&have, wanted)),
            }
        }
        Written::Deleted {
            kind,
            namespace,
            name,
            uid,
        } => match cached_meta(stores, *kind, namespace, name) {
            None => true,
            Some(meta) => {
                meta.uid.as_deref() != Some(uid.as_str()) || meta.deletion_timestamp.is_some()
            }
        },
    }
}

/// Whether resourceVersion `have` is `wanted` or newer. Resource versions are opaque to
/// clients, but every API server we know issues increasing integers; anything else is only
/// compared for equality.
fn at_least(have: &str, wanted: &str) -> bool {
    match (have.parse::<u64>(), wanted.parse::<u64>()) {
        (Ok(have), Ok(wanted)) => have >= wanted,
        _ => have == wanted,
    }
}

fn cached_meta(
    stores: &Stores,
    kind: ObjectKind,
    namespace: &str,
    name: &str,
) -> Option<ObjectMeta> {
    match kind {
        ObjectKind::Cluster => meta_in(&stores.clusters, namespace, name),
        ObjectKind::Member => meta_in(&stores.members, namespace, name),
        ObjectKind::Pod => meta_in(&stores.pods, namespace, name),
        ObjectKind::Pvc => meta_in(&stores.pvcs, namespace, name),
        ObjectKind::Service => meta_in(&stores.services, namespace, name),
        ObjectKind::Pdb => meta_in(&stores.pdbs, namespace, name),
    }
}

fn meta_in<K>(store: &Store<K>, namespace: &str, name: &str) -> Option<ObjectMeta>
where
    K: Resource + Clone,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    store
        .get(&ObjectRef::new(name).within(namespace))
        .map(|o| o.meta().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_versions_compare_as_integers_when_they_are() {
        assert!(at_least("10", "9"));
        assert!(at_least("10", "10"));
        assert!(!at_least("9", "10"));
        assert!(at_least("abc", "abc"));
        assert!(!at_least("abd", "abc"));
    }
}
