//! Namespace deletion: a Terminating namespace has every object in it deleted, and once
//! nothing is left its `kubernetes` finalizer is removed and the namespace goes.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::apiserver::objects::delete::NAMESPACE_FINALIZER;
use crate::apiserver::objects::{self, DeleteOptions, WriteOptions};
use crate::apiserver::server::ApiServer;
use crate::apiserver::store::{EventType, ResourceId, StoreEvent};

fn namespaces() -> ResourceId {
    ResourceId::new("", "namespaces")
}

pub async fn run(server: Arc<ApiServer>, mut events: UnboundedReceiver<Arc<StoreEvent>>) {
    let mut retry = tokio::time::interval(Duration::from_millis(500));
    loop {
        let event = tokio::select! {
            _ = server.shutdown.cancelled() => return,
            _ = retry.tick() => None,
            event = events.recv() => match event { Some(event) => Some(event), None => return },
        };
        if let Some(event) = &event
            && event.resource == namespaces()
            && event.event_type == EventType::Added
        {
            crate::apiserver::bootstrap::populate_namespace(&server, &event.name);
        }
        let relevant = match &event {
            // Namespaces starting to terminate, and deletions inside terminating ones.
            Some(event) => event.resource == namespaces() || !event.namespace.is_empty(),
            None => true,
        };
        if !relevant {
            continue;
        }
        let terminating = server.store.list(&namespaces(), None, None, None, &|ns| {
            ns["metadata"]["deletionTimestamp"].is_string()
        });
        for namespace in terminating.items {
            if let Some(name) = namespace["metadata"]["name"].as_str() {
                finish_deleting(&server, name);
            }
        }
    }
}

/// Deletes what is left in `namespace`; when nothing is, removes the namespace finalizer.
fn finish_deleting(server: &ApiServer, namespace: &str) {
    let mut remaining = 0;
    for kind in server
        .registry
        .all()
        .into_iter()
        .filter(|k| k.namespaced && k.storage.is_none())
    {
        let objects = server
            .store
            .list(&kind.storage_id(), Some(namespace), None, None, &|_| true)
            .items;
        remaining += objects.len();
        for object in objects
            .iter()
            .filter(|o| o["metadata"]["deletionTimestamp"].is_null())
        {
            let name = object["metadata"]["name"].as_str().unwrap_or("");
            // Pods are stopped at once: a terminating namespace waits for nobody's grace period.
            let options = DeleteOptions {
                grace_period_seconds: Some(0),
                user: Some(objects::policies::namespace_controller()),
                ..DeleteOptions::default()
            };
            let _ = objects::delete(server, &kind, namespace, name, &options);
        }
    }
    if remaining > 0 {
        return;
    }
    let Some(kind) = server.registry.get("", "namespaces") else {
        return;
    };
    let _ = objects::update_with(
        server,
        &kind,
        "v1",
        "",
        namespace,
        Some("finalize"),
        &WriteOptions::internal("kube-controller-manager"),
        &mut |current| {
            let mut updated = current.clone();
            let finalizers: Vec<Value> = current["spec"]["finalizers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|f| *f != NAMESPACE_FINALIZER)
                .cloned()
                .collect();
            updated["spec"]["finalizers"] = Value::Array(finalizers);
            Ok(updated)
        },
    );
}
