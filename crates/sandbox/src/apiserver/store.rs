//! One in-memory store for every resource, keyed by (group, resource, namespace, name), with a
//! single cluster-wide resourceVersion counter and a bounded history of changes for watch.
//!
//! Writers hold the lock only to compare and swap one object; watchers copy the events they need
//! out of the history under a read lock and send them after releasing it, so a slow client never
//! holds up a writer.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, RwLock};

use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::error::{ApiError, ApiResult};

/// A kind of stored object: its API group and plural resource name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceId {
    pub group: String,
    pub resource: String,
}

impl ResourceId {
    pub fn new(group: &str, resource: &str) -> Self {
        Self {
            group: group.to_string(),
            resource: resource.to_string(),
        }
    }
}

/// Where an object lives inside its resource: namespace ("" when cluster-scoped) and name.
pub type ObjectKey = (String, String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as kept in the history and delivered to watchers and internal controllers.
#[derive(Debug)]
pub struct StoreEvent {
    pub event_type: EventType,
    pub resource: ResourceId,
    pub namespace: String,
    pub name: String,
    pub resource_version: u64,
    /// The object after the change; for `Deleted`, its last state.
    pub object: Arc<Value>,
    /// The object before the change (`Modified` and `Deleted`).
    pub previous: Option<Arc<Value>>,
}

/// What a write expects of the stored object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    MustNotExist,
    /// The stored object must be at exactly this resourceVersion.
    ResourceVersion(u64),
}

/// A consistent page of a resource's objects, with the resourceVersion it was read at.
pub struct ListSnapshot {
    pub items: Vec<Arc<Value>>,
    pub resource_version: u64,
    /// The key after which the next page starts, when the page was cut short.
    pub next_key: Option<ObjectKey>,
    pub remaining: usize,
}

struct StoreState {
    revision: u64,
    objects: HashMap<ResourceId, BTreeMap<ObjectKey, Arc<Value>>>,
    history: VecDeque<Arc<StoreEvent>>,
    subscribers: Vec<mpsc::UnboundedSender<Arc<StoreEvent>>>,
}

pub struct Store {
    state: RwLock<StoreState>,
    history_limit: usize,
    revision_tx: watch::Sender<u64>,
}

/// Outcome of reading history for a watcher.
pub enum HistoryRead {
    /// The events, and the revision the history was read at (every change up to it is seen).
    Events(Vec<Arc<StoreEvent>>, u64),
    /// The requested resourceVersion is older than the history kept: 410 Gone.
    Expired,
}

impl Store {
    pub fn new(history_limit: usize) -> Self {
        let (revision_tx, _) = watch::channel(1);
        Self {
            state: RwLock::new(StoreState {
                revision: 1,
                objects: HashMap::new(),
                history: VecDeque::new(),
                subscribers: Vec::new(),
            }),
            history_limit: history_limit.max(16),
            revision_tx,
        }
    }

    pub fn current_revision(&self) -> u64 {
        self.read().revision
    }

    /// A receiver that changes whenever the cluster-wide revision advances.
    pub fn revision_watch(&self) -> watch::Receiver<u64> {
        self.revision_tx.subscribe()
    }

    /// Every change from now on, never dropped: for the server's own controllers.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Arc<StoreEvent>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.write().subscribers.push(tx);
        rx
    }

    pub fn get(&self, resource: &ResourceId, namespace: &str, name: &str) -> Option<Arc<Value>> {
        let state = self.read();
        state
            .objects
            .get(resource)?
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Objects of `resource` in `namespace` (all namespaces when `None`) in key order, starting
    /// after `after`, at most `limit` accepted by `filter`.
    pub fn list(
        &self,
        resource: &ResourceId,
        namespace: Option<&str>,
        after: Option<&ObjectKey>,
        limit: Option<usize>,
        filter: &dyn Fn(&Value) -> bool,
    ) -> ListSnapshot {
        use std::ops::Bound;
        let state = self.read();
        let mut snapshot = ListSnapshot {
            items: Vec::new(),
            resource_version: state.revision,
            next_key: None,
            remaining: 0,
        };
        let Some(objects) = state.objects.get(resource) else {
            return snapshot;
        };
        let lower = match (after, namespace) {
            (Some(key), _) => Bound::Excluded(key.clone()),
            (None, Some(ns)) => Bound::Included((ns.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        let mut last_key: Option<&ObjectKey> = None;
        for (key, object) in objects.range((lower, Bound::Unbounded)) {
            if let Some(ns) = namespace
                && key.0 != ns
            {
                break;
            }
            if !filter(object) {
                continue;
            }
            if limit.is_some_and(|limit| snapshot.items.len() >= limit) {
                snapshot.remaining += 1;
                continue;
            }
            last_key = Some(key);
            snapshot.items.push(object.clone());
        }
        if snapshot.remaining > 0 {
            snapshot.next_key = last_key.cloned();
        }
        snapshot
    }

    /// Writes `object` (or deletes, when `None`) if `precondition` holds, stamping the next
    /// resourceVersion into its metadata. Returns the stored object (the last state on delete).
    pub fn commit(
        &self,
        resource: &ResourceId,
        namespace: &str,
        name: &str,
        precondition: Precondition,
        object: Option<Value>,
    ) -> ApiResult<Arc<Value>> {
        let key = (namespace.to_string(), name.to_string());
        let mut state = self.write();
        let current = state
            .objects
            .get(resource)
            .and_then(|objects| objects.get(&key))
            .cloned();
        match (precondition, &current) {
            (Precondition::MustNotExist, Some(_)) => {
                return Err(ApiError::already_exists(
                    &resource.group,
                    &resource.resource,
                    name,
                ));
            }
            (Precondition::ResourceVersion(_), None) => {
                return Err(ApiError::not_found(
                    &resource.group,
                    &resource.resource,
                    name,
                ));
            }
            (Precondition::ResourceVersion(expected), Some(stored))
                if resource_version_of(stored) != Some(expected) =>
            {
                return Err(ApiError::conflict(
                    &resource.group,
                    &resource.resource,
                    name,
                    "the object has been modified; please apply your changes to the latest version and try again",
                ));
            }
            _ => {}
        }
        let revision = state.revision + 1;
        let (event_type, stored) = match object {
            Some(mut object) => {
                object["metadata"]["resourceVersion"] = Value::String(revision.to_string());
                let object = Arc::new(object);
                state
                    .objects
                    .entry(resource.clone())
                    .or_default()
                    .insert(key, object.clone());
                let event_type = if current.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                (event_type, object)
            }
            None => {
                let Some(last) = current.clone() else {
                    return Err(ApiError::not_found(
                        &resource.group,
                        &resource.resource,
                        name,
                    ));
                };
                if let Some(objects) = state.objects.get_mut(resource) {
                    objects.remove(&key);
                }
                // A deletion gets its own resourceVersion, as etcd gives the delete a revision.
                let mut last = (*last).clone();
                last["metadata"]["resourceVersion"] = Value::String(revision.to_string());
                (EventType::Deleted, Arc::new(last))
            }
        };
        state.revision = revision;
        let event = Arc::new(StoreEvent {
            event_type,
            resource: resource.clone(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            resource_version: revision,
            object: stored.clone(),
            previous: current,
        });
        state.history.push_back(event.clone());
        while state.history.len() > self.history_limit {
            state.history.pop_front();
        }
        state
            .subscribers
            .retain(|tx| tx.send(event.clone()).is_ok());
        drop(state);
        self.revision_tx.send_replace(revision);
        Ok(stored)
    }

    /// Events after `since` accepted by `filter`, or `Expired` when history no longer reaches back
    /// that far.
    pub fn history_since(&self, since: u64, filter: &dyn Fn(&StoreEvent) -> bool) -> HistoryRead {
        let state = self.read();
        if let Some(oldest) = state.history.front() {
            // Events between `since` and the oldest kept one were dropped: the client must re-list.
            if oldest.resource_version > since + 1 && since < state.revision {
                return HistoryRead::Expired;
            }
        } else if since < state.revision.saturating_sub(1) && state.revision > 1 {
            return HistoryRead::Expired;
        }
        let start = state
            .history
            .partition_point(|e| e.resource_version <= since);
        HistoryRead::Events(
            state
                .history
                .range(start..)
                .filter(|e| filter(e))
                .cloned()
                .collect(),
            state.revision,
        )
    }

    /// The oldest resourceVersion a watch may start from.
    pub fn oldest_watchable(&self) -> u64 {
        let state = self.read();
        state
            .history
            .front()
            .map(|e| e.resource_version - 1)
            .unwrap_or(state.revision)
    }

    /// Number of objects kept, for the benchmark's memory figures.
    pub fn object_count(&self) -> usize {
        self.read().objects.values().map(BTreeMap::len).sum()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, StoreState> {
        self.state
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, StoreState> {
        self.state
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The numeric resourceVersion in an object's metadata.
pub fn resource_version_of(object: &Value) -> Option<u64> {
    object["metadata"]["resourceVersion"].as_str()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "default"}})
    }

    #[test]
    fn every_write_takes_the_next_cluster_wide_revision() {
        let store = Store::new(100);
        let pods = ResourceId::new("", "pods");
        let cms = ResourceId::new("", "configmaps");
        let a = store
            .commit(
                &pods,
                "default",
                "a",
                Precondition::MustNotExist,
                Some(pod("a")),
            )
            .unwrap();
        let b = store
            .commit(
                &cms,
                "default",
                "b",
                Precondition::MustNotExist,
                Some(pod("b")),
            )
            .unwrap();
        assert_eq!(resource_version_of(&a), Some(2));
        assert_eq!(resource_version_of(&b), Some(3));
        let err = store
            .commit(
                &pods,
                "default",
                "a",
                Precondition::ResourceVersion(1),
                Some(pod("a")),
            )
            .unwrap_err();
        assert_eq!(err.code, 409);
        let err = store
            .commit(
                &pods,
                "default",
                "a",
                Precondition::MustNotExist,
                Some(pod("a")),
            )
            .unwrap_err();
        assert_eq!(err.reason, "AlreadyExists");
    }

    #[test]
    fn list_pages_by_key_within_a_namespace() {
        let store = Store::new(100);
        let pods = ResourceId::new("", "pods");
        for name in ["c", "a", "b"] {
            store
                .commit(
                    &pods,
                    "default",
                    name,
                    Precondition::MustNotExist,
                    Some(pod(name)),
                )
                .unwrap();
        }
        let page = store.list(&pods, Some("default"), None, Some(2), &|_| true);
        assert_eq!(page.items.len(), 2);
        assert_eq!(page.remaining, 1);
        let next = page.next_key.unwrap();
        assert_eq!(next.1, "b");
        let rest = store.list(&pods, Some("default"), Some(&next), Some(2), &|_| true);
        assert_eq!(rest.items[0]["metadata"]["name"], "c");
        assert!(rest.next_key.is_none());
        assert!(
            store
                .list(&pods, Some("other"), None, None, &|_| true)
                .items
                .is_empty()
        );
    }

    #[test]
    fn history_older_than_kept_is_expired() {
        let store = Store::new(16);
        let pods = ResourceId::new("", "pods");
        for i in 0..40 {
            let name = format!("p{i}");
            store
                .commit(
                    &pods,
                    "default",
                    &name,
                    Precondition::MustNotExist,
                    Some(pod(&name)),
                )
                .unwrap();
        }
        assert!(matches!(
            store.history_since(2, &|_| true),
            HistoryRead::Expired
        ));
        match store.history_since(35, &|_| true) {
            HistoryRead::Events(events, revision) => {
                assert_eq!(events.len(), 6);
                assert_eq!(revision, 41);
            }
            HistoryRead::Expired => panic!("recent history must be kept"),
        }
    }
}
