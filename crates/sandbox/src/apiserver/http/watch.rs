//! Watch: from a resourceVersion (or from the current state), with selectors, bookmarks,
//! `timeoutSeconds`, `sendInitialEvents`, and 410 Gone once history no longer reaches back.
//!
//! Each watcher copies its events out of the store's history under a short read lock and
//! writes them after releasing it, so a slow client delays nobody.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use http::{Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::Call;
use super::resources::{Selectors, Target, partial_metadata};
use super::table;
use crate::apiserver::convert::from_storage;
use crate::apiserver::error::{ApiError, ApiResult};
use crate::apiserver::registry::ResourceType;
use crate::apiserver::server::ApiServer;
use crate::apiserver::store::{EventType, HistoryRead, StoreEvent};

/// How often an idle watch with `allowWatchBookmarks` gets a BOOKMARK.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(5);
/// The longest a watch stays open without `timeoutSeconds` (kube-apiserver: 30 to 60 minutes).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// How the events of one watch are encoded.
struct Encoding {
    kind: Arc<ResourceType>,
    version: String,
    table: bool,
    partial_metadata: bool,
    include_object: String,
}

impl Encoding {
    fn event(&self, event_type: &str, object: &Value) -> Bytes {
        let presented = from_storage(&self.kind, &self.version, object);
        let object = if self.table {
            table::to_table(
                &self.kind,
                &self.version,
                std::slice::from_ref(presented.as_ref()),
                None,
                &self.include_object,
            )
        } else if self.partial_metadata {
            partial_metadata(&presented)
        } else {
            presented.into_owned()
        };
        line(&json!({"type": event_type, "object": object}))
    }
}

fn line(value: &Value) -> Bytes {
    let mut bytes = serde_json::to_vec(value).unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}

fn expired(since: u64, oldest: u64) -> Bytes {
    let status =
        ApiError::gone(format!("too old resource version: {since} ({oldest})")).to_status();
    line(&json!({"type": "ERROR", "object": status}))
}

pub fn watch(call: &Call, target: &Target) -> ApiResult<Response<Body>> {
    let selectors = Selectors::from_call(call, &target.kind)?;
    let bookmarks = call.param("allowWatchBookmarks") == Some("true");
    let initial_events = call.param("sendInitialEvents") == Some("true");
    let timeout = call
        .param("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_TIMEOUT);
    let requested: Option<u64> = match call.param("resourceVersion") {
        None | Some("0") => None,
        Some(rv) => Some(
            rv.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?,
        ),
    };
    let encoding = Encoding {
        kind: target.kind.clone(),
        version: target.version.clone(),
        table: call.accept.table,
        partial_metadata: call.accept.partial_metadata,
        include_object: call.accept.include_object.clone(),
    };
    let scope = WatchScope {
        namespace: target.list_namespace().map(str::to_string),
        name: selectors.fields.pinned_name().map(str::to_string),
        selectors,
    };
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    let server = call.server.clone();
    let initial = requested.is_none() || initial_events;
    tokio::spawn(async move {
        let stream = WatchStream {
            server,
            encoding,
            scope,
            tx,
            bookmarks,
        };
        let _ = tokio::time::timeout(timeout, stream.run(requested, initial, initial_events)).await;
    });
    let content_type = "application/json";
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(Body::from_stream(ReceiverStream::new(rx)))
        .unwrap_or_default())
}

struct WatchScope {
    namespace: Option<String>,
    name: Option<String>,
    selectors: Selectors,
}

impl WatchScope {
    fn covers(&self, event: &StoreEvent) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| event.namespace == ns)
            && self.name.as_deref().is_none_or(|n| event.name == n)
    }
}

struct WatchStream {
    server: Arc<ApiServer>,
    encoding: Encoding,
    scope: WatchScope,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    bookmarks: bool,
}

impl WatchStream {
    async fn send(&self, bytes: Bytes) -> bool {
        self.tx.send(Ok(bytes)).await.is_ok()
    }

    async fn run(self, requested: Option<u64>, initial: bool, initial_end_bookmark: bool) {
        let store = &self.server.store;
        let mut revisions = store.revision_watch();
        let storage = self.encoding.kind.storage_id();
        let mut since = match requested {
            Some(rv) if !initial => rv,
            _ => {
                let snapshot = store.list(
                    &storage,
                    self.scope.namespace.as_deref(),
                    None,
                    None,
                    &|o| {
                        self.scope
                            .name
                            .as_deref()
                            .is_none_or(|n| o["metadata"]["name"] == n)
                            && self.scope.selectors.matches(o)
                    },
                );
                for object in &snapshot.items {
                    if !self.send(self.encoding.event("ADDED", object)).await {
                        return;
                    }
                }
                if initial_end_bookmark
                    && !self
                        .send(self.bookmark(snapshot.resource_version, true))
                        .await
                {
                    return;
                }
                snapshot.resource_version
            }
        };
        let mut last_bookmark = tokio::time::Instant::now();
        loop {
            revisions.borrow_and_update();
            let read =
                store.history_since(since, &|e| e.resource == storage && self.scope.covers(e));
            let (events, revision) = match read {
                HistoryRead::Expired => {
                    let _ = self.send(expired(since, store.oldest_watchable())).await;
                    return;
                }
                HistoryRead::Events(events, revision) => (events, revision),
            };
            for event in &events {
                if let Some(bytes) = self.transition(event)
                    && !self.send(bytes).await
                {
                    return;
                }
            }
            since = revision.max(since);
            if self.bookmarks
                && !self.encoding.table
                && last_bookmark.elapsed() >= BOOKMARK_INTERVAL
            {
                if !self.send(self.bookmark(since, false)).await {
                    return;
                }
                last_bookmark = tokio::time::Instant::now();
            }
            tokio::select! {
                changed = revisions.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(BOOKMARK_INTERVAL), if self.bookmarks => {}
                _ = self.tx.closed() => return,
                _ = self.server.shutdown.cancelled() => return,
            }
        }
    }

    /// The event a selective watcher sees: an object that starts or stops matching the
    /// selectors is ADDED or DELETED for it, as the real watch cache reports.
    fn transition(&self, event: &StoreEvent) -> Option<Bytes> {
        let now = self.scope.selectors.matches(&event.object);
        let before = event
            .previous
            .as_ref()
            .is_some_and(|p| self.scope.selectors.matches(p));
        let event_type = match event.event_type {
            EventType::Added if now => "ADDED",
            EventType::Deleted if now => "DELETED",
            EventType::Modified if now && before => "MODIFIED",
            EventType::Modified if now => "ADDED",
            EventType::Modified if before => "DELETED",
            _ => return None,
        };
        Some(self.encoding.event(event_type, &event.object))
    }

    fn bookmark(&self, revision: u64, initial_events_end: bool) -> Bytes {
        let mut metadata = json!({"resourceVersion": revision.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let object = json!({
            "kind": self.encoding.kind.kind,
            "apiVersion": self.encoding.kind.api_version(&self.encoding.version),
            "metadata": metadata,
        });
        line(&json!({"type": "BOOKMARK", "object": object}))
    }
}
