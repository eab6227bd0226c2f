//! The Events of a namespace, listed in one place for every end-to-end test: the Events
//! themselves (each caller keeps what it needs), the operator's Events about one object, and a
//! wait for one.

use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::api::ListParams;
use kube::{Api, Client};

use super::cluster::Cluster;
use super::eventually;

/// Every Event in `namespace`, as the API server lists them.
pub async fn try_list_events(client: &Client, namespace: &str) -> Result<Vec<Event>, String> {
    Api::<Event>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map(|list| list.items)
        .map_err(|e| format!("listing the Events of {namespace}: {e}"))
}

/// Every Event in `namespace`; panics when they cannot be listed.
pub async fn list_events(client: &Client, namespace: &str) -> Vec<Event> {
    try_list_events(client, namespace)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Whether `event` is about the object `name` (of `kind`, when given).
pub fn is_about(event: &Event, kind: Option<&str>, name: &str) -> bool {
    kind.is_none_or(|kind| event.involved_object.kind.as_deref() == Some(kind))
        && event.involved_object.name.as_deref() == Some(name)
}

/// `events` oldest first (each Event the operator records is a new object stamped to the
/// microsecond).
pub fn oldest_first(mut events: Vec<Event>) -> Vec<Event> {
    events.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
    events
}

/// The (type, reason) of every Event about the `kind` object `name`.
pub async fn events_of(
    cluster: &Cluster,
    namespace: &str,
    kind: &str,
    name: &str,
) -> Vec<(String, String)> {
    list_events(&cluster.client(), namespace)
        .await
        .into_iter()
        .filter(|e| is_about(e, Some(kind), name))
        .map(|e| (e.type_.unwrap_or_default(), e.reason.unwrap_or_default()))
        .collect()
}

/// `(event name, reason, message)` of the Events about EtcdCluster `name`, oldest first.
pub async fn cluster_events(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Vec<(String, String, String)> {
    let about: Vec<Event> = list_events(client, namespace)
        .await
        .into_iter()
        .filter(|e| is_about(e, Some("EtcdCluster"), name))
        .collect();
    oldest_first(about)
        .into_iter()
        .map(|e| {
            (
                e.metadata.name.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.message.unwrap_or_default(),
            )
        })
        .collect()
}

/// Waits until an Event about the object `name` (of `kind`, when given) has `reason` (and
/// `type_`, when given); a listing that fails is retried. On timeout the panic lists the
/// (type, reason) of the Events about `name`.
pub async fn wait_event(
    client: &Client,
    namespace: &str,
    kind: Option<&str>,
    name: &str,
    type_: Option<&str>,
    reason: &str,
    limit: Duration,
) {
    let what = format!(
        "{namespace}/{name}: a {}{reason} Event",
        type_.map(|t| format!("{t} ")).unwrap_or_default()
    );
    eventually(&what, limit, || async {
        let about: Vec<(String, String)> = try_list_events(client, namespace)
            .await?
            .into_iter()
            .filter(|e| is_about(e, kind, name))
            .map(|e| (e.type_.unwrap_or_default(), e.reason.unwrap_or_default()))
            .collect();
        about
            .iter()
            .any(|(t, r)| r == reason && type_.is_none_or(|want| t == want))
            .then_some(())
            .ok_or_else(|| format!("{about:?}"))
    })
    .await
}

/// EtcdSnapshot `name` was taken once: after its Complete Event (which follows the status
/// write, so a reader can see the status first), exactly one SnapshotStarted and one
/// SnapshotComplete Event about it.
pub async fn snapshot_taken_once(cluster: &Cluster, namespace: &str, name: &str) {
    wait_event(
        &cluster.client(),
        namespace,
        Some("EtcdSnapshot"),
        name,
        Some("Normal"),
        "SnapshotComplete",
        Duration::from_secs(10),
    )
    .await;
    let events = events_of(cluster, namespace, "EtcdSnapshot", name).await;
    for reason in ["SnapshotStarted", "SnapshotComplete"] {
        let count = events
            .iter()
            .filter(|e| **e == ("Normal".to_string(), reason.to_string()))
            .count();
        assert_eq!(
            count, 1,
            "{namespace}/{name}: {reason} Events in {events:?}"
        );
    }
}
