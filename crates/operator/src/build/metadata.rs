//! Labels, annotations and owner references shared by every builder.

use std::collections::BTreeMap;

use etcd_operator_api::shared::AdditionalMetadata;
use etcd_operator_api::{EtcdCluster, EtcdMember};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Resource;

use super::BuildError;

/// Keys under this prefix are the operator's own; users cannot set them through
/// `additionalMetadata` (they would otherwise leak into every object the operator creates).
pub const RESERVED_PREFIX: &str = "etcd-operator.cozystack.io/";

/// Merges the user's `additionalMetadata` under the operator's labels and annotations: the
/// operator's keys win on collision, and user keys under [`RESERVED_PREFIX`] are dropped.
pub fn with_additional_metadata(
    mut labels: BTreeMap<String, String>,
    mut annotations: BTreeMap<String, String>,
    extra: Option<&AdditionalMetadata>,
) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    if let Some(extra) = extra {
        merge_user_keys(&mut labels, extra.labels.as_ref());
        merge_user_keys(&mut annotations, extra.annotations.as_ref());
    }
    (labels, annotations)
}

fn merge_user_keys(into: &mut BTreeMap<String, String>, user: Option<&BTreeMap<String, String>>) {
    for (key, value) in user.into_iter().flatten() {
        if !key.starts_with(RESERVED_PREFIX) {
            into.entry(key.clone()).or_insert_with(|| value.clone());
        }
    }
}

/// The annotation on the Services and the PodDisruptionBudget that records the
/// `additionalMetadata` they were given (JSON, the user's keys only), so that a key later taken
/// out of it is removed in place. Members record theirs in `spec.additionalMetadata`.
pub const ADDITIONAL_METADATA_RECORD: &str = "etcd-operator.cozystack.io/additional-metadata";

/// `extra` without the reserved keys (which are never applied), or `None` when nothing is
/// left.
pub fn user_metadata(extra: Option<&AdditionalMetadata>) -> Option<AdditionalMetadata> {
    let keep = |map: Option<&BTreeMap<String, String>>| {
        non_empty(
            map.into_iter()
                .flatten()
                .filter(|(k, _)| !k.starts_with(RESERVED_PREFIX))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
    };
    let extra = extra?;
    let kept = AdditionalMetadata {
        labels: keep(extra.labels.as_ref()),
        annotations: keep(extra.annotations.as_ref()),
    };
    (kept.labels.is_some() || kept.annotations.is_some()).then_some(kept)
}

/// The value of [`ADDITIONAL_METADATA_RECORD`] for `extra`: `None` when it gives nothing.
pub fn metadata_record(extra: Option<&AdditionalMetadata>) -> Option<String> {
    user_metadata(extra).and_then(|m| serde_json::to_string(&m).ok())
}

/// What an object's [`ADDITIONAL_METADATA_RECORD`] says it was given (`None` without one, or
/// one that does not parse).
pub fn recorded_metadata(
    annotations: Option<&BTreeMap<String, String>>,
) -> Option<AdditionalMetadata> {
    annotations?
        .get(ADDITIONAL_METADATA_RECORD)
        .and_then(|v| serde_json::from_str(v).ok())
}

/// `None` for an empty map, so built objects omit empty label or annotation maps.
pub(crate) fn non_empty(map: BTreeMap<String, String>) -> Option<BTreeMap<String, String>> {
    (!map.is_empty()).then_some(map)
}

/// The controller owner reference to an EtcdCluster (for Services, the PDB, EtcdMembers).
pub fn cluster_owner_reference(cluster: &EtcdCluster) -> Result<OwnerReference, BuildError> {
    controller_reference(cluster, "EtcdCluster")
}

/// The controller owner reference to an EtcdMember (for its Pod and PVC). `blockOwnerDeletion`
/// keeps the member until the garbage collector has removed them.
pub fn member_owner_reference(member: &EtcdMember) -> Result<OwnerReference, BuildError> {
    controller_reference(member, "EtcdMember")
}

fn controller_reference<K>(object: &K, kind: &'static str) -> Result<OwnerReference, BuildError>
where
    K: Resource<DynamicType = ()>,
{
    let meta = object.meta();
    let name = meta.name.clone().ok_or(BuildError::MissingMetadata {
        kind,
        field: "name",
    })?;
    let uid = meta
        .uid
        .clone()
        .ok_or(BuildError::MissingMetadata { kind, field: "uid" })?;
    Ok(OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name,
        uid,
        controller: Some(true),
        block_owner_deletion: Some(true),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    #[test]
    fn operator_keys_win_and_reserved_keys_are_dropped() {
        let extra = AdditionalMetadata {
            labels: Some(BTreeMap::from([
                ("team".to_string(), "storage".to_string()),
                ("app.kubernetes.io/name".to_string(), "not-etcd".to_string()),
                (
                    "etcd-operator.cozystack.io/role".to_string(),
                    "voter".to_string(),
                ),
            ])),
            annotations: Some(BTreeMap::from([
                ("note".to_string(), "hi".to_string()),
                (
                    "etcd-operator.cozystack.io/data-dir-subpath".to_string(),
                    "..".to_string(),
                ),
            ])),
        };
        let ours = BTreeMap::from([("app.kubernetes.io/name".to_string(), "etcd".to_string())]);
        let (labels, annotations) = with_additional_metadata(ours, BTreeMap::new(), Some(&extra));
        assert_eq!(labels["app.kubernetes.io/name"], "etcd");
        assert_eq!(labels["team"], "storage");
        assert!(!labels.contains_key("etcd-operator.cozystack.io/role"));
        assert_eq!(annotations.len(), 1);
        assert_eq!(annotations["note"], "hi");
    }

    #[test]
    fn owner_reference_needs_name_and_uid() {
        let mut member = EtcdMember::new("etcd-0", Default::default());
        assert_eq!(
            member_owner_reference(&member),
            Err(BuildError::MissingMetadata {
                kind: "EtcdMember",
                field: "uid"
            })
        );
        member.metadata = ObjectMeta {
            name: Some("etcd-0".into()),
            uid: Some("u-1".into()),
            ..Default::default()
        };
        let owner = member_owner_reference(&member).unwrap();
        assert_eq!(owner.kind, "EtcdMember");
        assert_eq!(owner.api_version, "etcd-operator.cozystack.io/v1alpha2");
        assert_eq!(owner.controller, Some(true));
        assert_eq!(owner.block_owner_deletion, Some(true));
    }
}
