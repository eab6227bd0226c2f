//! What the workload controllers share about Pods: which count as active and ready, who owns
//! them, and how a Pod is made from a template.

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::Resource;

use crate::scheduler::is_terminal;

/// A Pod that is neither finished nor being deleted: the controllers' "active" Pod.
pub fn is_active(pod: &Pod) -> bool {
    !is_terminal(pod) && pod.metadata.deletion_timestamp.is_none()
}

/// The Pod's condition of `type_`, if it has one.
pub fn pod_condition<'a>(
    pod: &'a Pod,
    type_: &str,
) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Whether the Pod's Ready condition is True.
pub fn is_ready(pod: &Pod) -> bool {
    pod_condition(pod, "Ready").is_some_and(|c| c.status == "True")
}

/// When the Pod last became Ready, if it is Ready.
pub fn ready_since(pod: &Pod) -> Option<jiff::Timestamp> {
    let condition = pod_condition(pod, "Ready").filter(|c| c.status == "True")?;
    Some(
        condition
            .last_transition_time
            .as_ref()
            .map_or_else(jiff::Timestamp::now, |t| t.0),
    )
}

/// The uid of the object that controls `metadata`, if any.
pub fn controller_uid(metadata: &ObjectMeta) -> Option<&str> {
    metadata
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

/// Whether `owner` (by uid) controls the object.
pub fn controlled_by(metadata: &ObjectMeta, owner_uid: &str) -> bool {
    controller_uid(metadata) == Some(owner_uid)
}

/// The controller reference a controller puts on what it creates.
pub fn controller_reference<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    let meta = owner.meta();
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// A new Pod from a template: the template's labels, annotations and spec, `generateName`
/// `<prefix>-`, owned by `owner`.
pub fn pod_from_template(
    template: &PodTemplateSpec,
    prefix: &str,
    owner: OwnerReference,
    finalizers: Option<Vec<String>>,
) -> Pod {
    let template_meta = template.metadata.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{prefix}-")),
            labels: template_meta.labels,
            annotations: template_meta.annotations,
            owner_references: Some(vec![owner]),
            finalizers,
            ..ObjectMeta::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

/// The latest moment a finished Pod is known to have finished: its containers' `finishedAt`,
/// else its conditions' last transitions.
pub fn finish_time(pod: &Pod) -> Option<jiff::Timestamp> {
    let status = pod.status.as_ref()?;
    let containers = status
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref());
    let latest = containers.map(|t: &Time| t.0).max();
    latest.or_else(|| {
        status
            .conditions
            .iter()
            .flatten()
            .filter_map(|c| c.last_transition_time.as_ref().map(|t| t.0))
            .max()
    })
}

/// The current time as the API writes it (RFC 3339, whole seconds, UTC).
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}
