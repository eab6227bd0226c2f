//! Kubernetes Events that tell users what the operator did and why.

use etcd_operator_api::EtcdCluster;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;

use super::BuildError;
use super::service::cluster_name;

/// The component named as the Events' source.
pub const REPORTING_COMPONENT: &str = "etcd-operator";

/// Events longer than this are cut: the API server refuses messages over 1 KiB.
const MAX_MESSAGE: usize = 1024;

/// `Normal` for progress, `Warning` for what needs attention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// An Event about `cluster` with `reason` (CamelCase, e.g. `MemberAdded`) and `message`, at
/// `now`. Named `<cluster>.<nanoseconds in hex>` like the events client-go records.
pub fn event(
    cluster: &EtcdCluster,
    event_type: EventType,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> Result<Event, BuildError> {
    cluster_name(cluster)?;
    if cluster.metadata.uid.is_none() {
        return Err(BuildError::MissingMetadata {
            kind: "EtcdCluster",
            field: "uid",
        });
    }
    Ok(event_about(cluster, event_type, reason, message, now))
}

/// An Event involving `object` (any of our kinds, or a core one), with `reason` and `message`
/// (cut to the API server's 1 KiB), at `now`, named `<object>.<nanoseconds in hex>`.
pub fn event_about<K: Resource<DynamicType = ()>>(
    object: &K,
    event_type: EventType,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> Event {
    let meta = object.meta();
    let name = meta.name.clone().unwrap_or_default();
    let mut text = message.to_string();
    if text.len() > MAX_MESSAGE {
        let mut cut = MAX_MESSAGE - 3;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("...");
    }
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{name}.{:x}", now.as_nanosecond())),
            namespace: meta.namespace.clone(),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some(K::api_version(&()).into_owned()),
            kind: Some(K::kind(&()).into_owned()),
            name: Some(name),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            field_path: None,
        },
        reason: Some(reason.to_string()),
        message: Some(text),
        type_: Some(event_type.as_str().to_string()),
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        action: Some(reason.to_string()),
        reporting_component: Some(REPORTING_COMPONENT.to_string()),
        reporting_instance: Some(REPORTING_COMPONENT.to_string()),
        source: Some(EventSource {
            component: Some(REPORTING_COMPONENT.to_string()),
            host: None,
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::tests_support::cluster;

    #[test]
    fn event_points_at_the_cluster() {
        let now: Timestamp = "2026-01-02T03:04:05Z".parse().unwrap();
        let e = event(
            &cluster("etcd", 3),
            EventType::Warning,
            "QuorumLost",
            "2/3 down",
            now,
        )
        .unwrap();
        assert_eq!(e.reason.as_deref(), Some("QuorumLost"));
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert_eq!(e.message.as_deref(), Some("2/3 down"));
        assert_eq!(e.involved_object.kind.as_deref(), Some("EtcdCluster"));
        assert_eq!(e.involved_object.uid.as_deref(), Some("uid-etcd"));
        assert_eq!(e.metadata.namespace.as_deref(), Some("prod"));
        assert!(e.metadata.name.unwrap().starts_with("etcd."));
        assert_eq!(e.last_timestamp, Some(Time(now)));
    }

    #[test]
    fn long_messages_are_cut() {
        let long = "é".repeat(2000);
        let e = event(
            &cluster("etcd", 3),
            EventType::Normal,
            "X",
            &long,
            Timestamp::UNIX_EPOCH,
        )
        .unwrap();
        let message = e.message.unwrap();
        assert!(message.len() <= 1024 && message.ends_with("..."));
    }
}
