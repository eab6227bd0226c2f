//! CustomResourceDefinitions: serve a CRD's kind as soon as it is stored, report it
//! Established, and on deletion remove its objects before letting it go.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedReceiver;

use crate::apiserver::crd::resource_type;
use crate::apiserver::objects::metadata::now;
use crate::apiserver::objects::{self, DeleteOptions, WriteOptions};
use crate::apiserver::server::ApiServer;
use crate::apiserver::store::{EventType, ResourceId, StoreEvent};

/// The finalizer that holds a CRD until its custom resources are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

fn crds() -> ResourceId {
    ResourceId::new("apiextensions.k8s.io", "customresourcedefinitions")
}

pub async fn run(server: Arc<ApiServer>, mut events: UnboundedReceiver<Arc<StoreEvent>>) {
    loop {
        let event = tokio::select! {
            _ = server.shutdown.cancelled() => return,
            event = events.recv() => match event { Some(event) => event, None => return },
        };
        if event.resource != crds() {
            // A custom resource of a CRD being deleted is gone: maybe the CRD can go now.
            let custom = server
                .registry
                .get(&event.resource.group, &event.resource.resource)
                .is_some_and(|k| k.custom);
            if custom && event.event_type == EventType::Deleted {
                sync(
                    &server,
                    &format!("{}.{}", event.resource.resource, event.resource.group),
                );
            }
            continue;
        }
        match event.event_type {
            EventType::Deleted => {
                if let Some(kind) = resource_type(&event.object) {
                    server.registry.unregister(&kind.id());
                }
            }
            _ => sync(&server, &event.name),
        }
    }
}

/// Brings the served kind and the CRD's status in line with the stored CRD. Idempotent; also
/// called right after a CRD is written so that its kind is served before the client hears back.
pub fn sync(server: &ApiServer, name: &str) {
    let Some(crd) = server.store.get(&crds(), "", name) else {
        return;
    };
    let Some(kind) = resource_type(&crd) else {
        return;
    };
    if crd["metadata"]["deletionTimestamp"].is_string() {
        clean_up(server, &crd, &kind);
        return;
    }
    server.registry.register(kind);
    let Some(crd_kind) = server
        .registry
        .get("apiextensions.k8s.io", "customresourcedefinitions")
    else {
        return;
    };
    let established = |crd: &Value| {
        crd["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
            && crd["status"]["acceptedNames"] == crd["spec"]["names"]
    };
    let has_finalizer = |crd: &Value| {
        crd["metadata"]["finalizers"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|f| f == CLEANUP_FINALIZER)
    };
    let options = WriteOptions::internal("kube-apiserver");
    if !has_finalizer(&crd) {
        let _ = objects::update_with(
            server,
            &crd_kind,
            "v1",
            "",
            name,
            None,
            &options,
            &mut |current| {
                let mut updated = current.clone();
                let mut finalizers = current["metadata"]["finalizers"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                if !finalizers.iter().any(|f| f == CLEANUP_FINALIZER) {
                    finalizers.push(json!(CLEANUP_FINALIZER));
                }
                updated["metadata"]["finalizers"] = Value::Array(finalizers);
                Ok(updated)
            },
        );
    }
    if !established(&crd) {
        let _ = objects::update_with(
            server,
            &crd_kind,
            "v1",
            "",
            name,
            Some("status"),
            &options,
            &mut |current| {
                let mut updated = current.clone();
                let at = now();
                let condition = |kind: &str, reason: &str, message: &str| json!({"type": kind, "status": "True", "reason": reason, "message": message, "lastTransitionTime": at});
                updated["status"] = json!({
                    "acceptedNames": current["spec"]["names"],
                    "conditions": [
                        condition("NamesAccepted", "NoConflicts", "no conflicts found"),
                        condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
                    ],
                    "storedVersions": current["spec"]["versions"].as_array().into_iter().flatten()
                        .filter(|v| v["storage"] == true).map(|v| v["name"].clone()).collect::<Vec<_>>(),
                });
                Ok(updated)
            },
        );
    }
}

/// Deletes every object of the CRD's kind, then stops serving it and releases the CRD.
fn clean_up(server: &ApiServer, crd: &Value, kind: &crate::apiserver::registry::ResourceType) {
    let remaining = server
        .store
        .list(&kind.id(), None, None, None, &|_| true)
        .items;
    for object in &remaining {
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or("");
        let name = object["metadata"]["name"].as_str().unwrap_or("");
        let _ = objects::delete(server, kind, namespace, name, &DeleteOptions::default());
    }
    if !server
        .store
        .list(&kind.id(), None, None, Some(1), &|_| true)
        .items
        .is_empty()
    {
        // Objects with finalizers of their own: the next change to them brings us back.
        return;
    }
    server.registry.unregister(&kind.id());
    let Some(crd_kind) = server
        .registry
        .get("apiextensions.k8s.io", "customresourcedefinitions")
    else {
        return;
    };
    let name = crd["metadata"]["name"].as_str().unwrap_or("");
    let _ = objects::update_with(
        server,
        &crd_kind,
        "v1",
        "",
        name,
        None,
        &WriteOptions::internal("kube-apiserver"),
        &mut |current| {
            let mut updated = current.clone();
            let finalizers: Vec<Value> = current["metadata"]["finalizers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|f| *f != CLEANUP_FINALIZER)
                .cloned()
                .collect();
            updated["metadata"]["finalizers"] = Value::Array(finalizers);
            Ok(updated)
        },
    );
}
