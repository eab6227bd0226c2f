//! Garbage collection through ownerReferences, as kube-controller-manager's collector does it:
//! - a dependent whose owners are all gone is deleted (in the background);
//! - an owner deleted with `Foreground` keeps its `foregroundDeletion` finalizer until its
//!   dependents with `blockOwnerDeletion` are gone (all dependents are deleted);
//! - an owner deleted with `Orphan` has its references removed from its dependents first.
//!
//! The collector keeps its own index (uid → object, owner uid → dependents) from the store's
//! events, so no decision needs a scan of the store.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::apiserver::objects::delete::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER};
use crate::apiserver::objects::{self, DeleteOptions, WriteOptions};
use crate::apiserver::server::ApiServer;
use crate::apiserver::store::{EventType, ResourceId, StoreEvent};

/// Where an object is: (resource, namespace, name).
type ObjectRef = (ResourceId, String, String);

#[derive(Default)]
struct Graph {
    by_uid: HashMap<String, ObjectRef>,
    /// owner uid → uids of its dependents.
    dependents: HashMap<String, BTreeSet<String>>,
    /// dependent uid → its owners' uids.
    owners: HashMap<String, Vec<String>>,
}

fn uid_of(object: &Value) -> Option<String> {
    object["metadata"]["uid"].as_str().map(str::to_string)
}

fn owner_uids(object: &Value) -> Vec<String> {
    object["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["uid"].as_str().map(str::to_string))
        .collect()
}

fn has_finalizer(object: &Value, finalizer: &str) -> bool {
    object["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|f| f == finalizer)
}

impl Graph {
    fn observe(&mut self, event: &StoreEvent) {
        let Some(uid) = uid_of(&event.object) else {
            return;
        };
        let previous_owners = self.owners.remove(&uid).unwrap_or_default();
        for owner in &previous_owners {
            if let Some(set) = self.dependents.get_mut(owner) {
                set.remove(&uid);
                if set.is_empty() {
                    self.dependents.remove(owner);
                }
            }
        }
        if event.event_type == EventType::Deleted {
            self.by_uid.remove(&uid);
            return;
        }
        self.by_uid.insert(
            uid.clone(),
            (
                event.resource.clone(),
                event.namespace.clone(),
                event.name.clone(),
            ),
        );
        let owners = owner_uids(&event.object);
        for owner in &owners {
            self.dependents
                .entry(owner.clone())
                .or_default()
                .insert(uid.clone());
        }
        if !owners.is_empty() {
            self.owners.insert(uid, owners);
        }
    }
}

pub async fn run(server: Arc<ApiServer>, mut events: UnboundedReceiver<Arc<StoreEvent>>) {
    let mut graph = Graph::default();
    loop {
        let event = tokio::select! {
            _ = server.shutdown.cancelled() => return,
            event = events.recv() => match event { Some(event) => event, None => return },
        };
        let previous_owners = uid_of(&event.object)
            .and_then(|uid| graph.owners.get(&uid).cloned())
            .unwrap_or_default();
        graph.observe(&event);
        match event.event_type {
            EventType::Deleted => {
                let uid = uid_of(&event.object).unwrap_or_default();
                for dependent in graph.dependents.get(&uid).cloned().unwrap_or_default() {
                    collect_if_orphaned(&server, &graph, &dependent);
                }
                // The deleted object may have been what a foreground-deleting owner waited for.
                for owner in previous_owners {
                    finish_foreground(&server, &graph, &owner);
                }
            }
            _ => {
                let object = &event.object;
                let uid = uid_of(object).unwrap_or_default();
                if object["metadata"]["deletionTimestamp"].is_string() {
                    if has_finalizer(object, ORPHAN_FINALIZER) {
                        orphan_dependents(&server, &graph, &uid);
                    }
                    if has_finalizer(object, FOREGROUND_FINALIZER) {
                        delete_dependents(&server, &graph, &uid);
                        finish_foreground(&server, &graph, &uid);
                    }
                    for owner in &previous_owners {
                        finish_foreground(&server, &graph, owner);
                    }
                }
                if graph.owners.contains_key(&uid) {
                    collect_if_orphaned(&server, &graph, &uid);
                }
            }
        }
    }
}

fn kind_of(
    server: &ApiServer,
    resource: &ResourceId,
) -> Option<Arc<crate::apiserver::registry::ResourceType>> {
    server.registry.get(&resource.group, &resource.resource)
}

fn delete_ref(server: &ApiServer, object: &ObjectRef, options: &DeleteOptions) {
    if let Some(kind) = kind_of(server, &object.0) {
        let _ = objects::delete(server, &kind, &object.1, &object.2, options);
    }
}

/// Deletes a dependent none of whose owners exist any more.
fn collect_if_orphaned(server: &ApiServer, graph: &Graph, uid: &str) {
    let Some(owners) = graph.owners.get(uid) else {
        return;
    };
    if owners.iter().any(|owner| graph.by_uid.contains_key(owner)) {
        return;
    }
    let Some(object) = graph.by_uid.get(uid) else {
        return;
    };
    // The index lags the store: an owner created meanwhile is found by a live lookup first.
    if owner_alive(server, object) {
        return;
    }
    let options = DeleteOptions {
        precondition_uid: Some(uid.to_string()),
        user: Some(crate::apiserver::objects::policies::garbage_collector()),
        ..DeleteOptions::default()
    };
    delete_ref(server, object, &options);
}

/// Whether any owner named in the dependent's ownerReferences exists now with the same uid.
fn owner_alive(server: &ApiServer, dependent: &ObjectRef) -> bool {
    let Some(current) = server.store.get(&dependent.0, &dependent.1, &dependent.2) else {
        return false;
    };
    current["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|reference| {
            let group = reference["apiVersion"]
                .as_str()
                .and_then(|v| v.rsplit_once('/'))
                .map(|(group, _)| group)
                .unwrap_or("");
            let (Some(kind), Some(name)) = (reference["kind"].as_str(), reference["name"].as_str())
            else {
                return false;
            };
            let Some(owner_kind) = server.registry.by_kind(group, kind) else {
                return false;
            };
            let namespace = if owner_kind.namespaced {
                dependent.1.as_str()
            } else {
                ""
            };
            server
                .store
                .get(&owner_kind.storage_id(), namespace, name)
                .is_some_and(|owner| owner["metadata"]["uid"] == reference["uid"])
        })
}

fn delete_dependents(server: &ApiServer, graph: &Graph, owner: &str) {
    for dependent in graph.dependents.get(owner).into_iter().flatten() {
        if let Some(object) = graph.by_uid.get(dependent) {
            let current = server.store.get(&object.0, &object.1, &object.2);
            if current.is_some_and(|o| o["metadata"]["deletionTimestamp"].is_null()) {
                let options = DeleteOptions {
                    precondition_uid: Some(dependent.clone()),
                    user: Some(crate::apiserver::objects::policies::garbage_collector()),
                    ..DeleteOptions::default()
                };
                delete_ref(server, object, &options);
            }
        }
    }
}

/// Removes `foregroundDeletion` from an owner once no dependent blocks it.
fn finish_foreground(server: &ApiServer, graph: &Graph, owner_uid: &str) {
    let Some(owner) = graph.by_uid.get(owner_uid) else {
        return;
    };
    let Some(current) = server.store.get(&owner.0, &owner.1, &owner.2) else {
        return;
    };
    if !has_finalizer(&current, FOREGROUND_FINALIZER)
        || current["metadata"]["deletionTimestamp"].is_null()
    {
        return;
    }
    let blocked = graph
        .dependents
        .get(owner_uid)
        .into_iter()
        .flatten()
        .any(|dependent| {
            let Some(object) = graph.by_uid.get(dependent) else {
                return false;
            };
            server
                .store
                .get(&object.0, &object.1, &object.2)
                .is_some_and(|o| {
                    o["metadata"]["ownerReferences"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|r| r["uid"] == owner_uid && r["blockOwnerDeletion"] == true)
                })
        });
    if !blocked {
        remove_finalizer(server, owner, FOREGROUND_FINALIZER);
    }
}

fn orphan_dependents(server: &ApiServer, graph: &Graph, owner_uid: &str) {
    for dependent in graph.dependents.get(owner_uid).into_iter().flatten() {
        let Some(object) = graph.by_uid.get(dependent) else {
            continue;
        };
        let Some(kind) = kind_of(server, &object.0) else {
            continue;
        };
        let version = kind.storage_version().name.clone();
        let _ = objects::update_with(
            server,
            &kind,
            &version,
            &object.1,
            &object.2,
            None,
            &WriteOptions::internal("kube-controller-manager"),
            &mut |current| {
                let mut updated = current.clone();
                let refs: Vec<Value> = current["metadata"]["ownerReferences"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|r| r["uid"] != owner_uid)
                    .cloned()
                    .collect();
                if refs.is_empty() {
                    if let Some(metadata) = updated["metadata"].as_object_mut() {
                        metadata.remove("ownerReferences");
                    }
                } else {
                    updated["metadata"]["ownerReferences"] = Value::Array(refs);
                }
                Ok(updated)
            },
        );
    }
    if let Some(owner) = graph.by_uid.get(owner_uid) {
        remove_finalizer(server, owner, ORPHAN_FINALIZER);
    }
}

fn remove_finalizer(server: &ApiServer, object: &ObjectRef, finalizer: &str) {
    let Some(kind) = kind_of(server, &object.0) else {
        return;
    };
    let version = kind.storage_version().name.clone();
    let _ = objects::update_with(
        server,
        &kind,
        &version,
        &object.1,
        &object.2,
        None,
        &WriteOptions::internal("kube-controller-manager"),
        &mut |current| {
            let mut updated = current.clone();
            let finalizers: Vec<Value> = current["metadata"]["finalizers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|f| *f != finalizer)
                .cloned()
                .collect();
            updated["metadata"]["finalizers"] = Value::Array(finalizers);
            Ok(updated)
        },
    );
}
