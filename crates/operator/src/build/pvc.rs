//! The member's data PersistentVolumeClaim.

use std::collections::BTreeMap;

use etcd_operator_api::EtcdMember;
use etcd_operator_api::labels::member_labels;
use etcd_operator_api::shared::StorageMedium;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::metadata::{member_owner_reference, non_empty, with_additional_metadata};
use super::{BuildError, pvc_name};

/// The etcd version a PVC's data was created with (the member's `spec.version` when the PVC
/// was made): what decides whether a 3.5 member's data must be rebuilt before 3.6
/// ([`crate::domain::versions::membership_store_trusted`]).
pub const DATA_VERSION_ANNOTATION: &str = "etcd-operator.cozystack.io/data-created-with";

/// The PVC `data-<member>` (ReadWriteOnce, the member's storage size and class), owned by the
/// EtcdMember, annotated with the version that creates its data
/// ([`DATA_VERSION_ANNOTATION`]); `None` for a memory-backed member, whose data lives in a
/// tmpfs `emptyDir`.
pub fn member_pvc(member: &EtcdMember) -> Result<Option<PersistentVolumeClaim>, BuildError> {
    let storage = &member.spec.storage;
    if storage.medium_or_default() == StorageMedium::Memory {
        return Ok(None);
    }
    let name = member
        .metadata
        .name
        .clone()
        .ok_or(BuildError::MissingMetadata {
            kind: "EtcdMember",
            field: "name",
        })?;
    let (labels, annotations) = with_additional_metadata(
        member_labels(&member.spec.cluster_name, &name),
        BTreeMap::from([(
            DATA_VERSION_ANNOTATION.to_string(),
            member.spec.version.clone(),
        )]),
        member.spec.additional_metadata.as_ref(),
    );
    Ok(Some(PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(pvc_name(&name)),
            namespace: member.metadata.namespace.clone(),
            labels: non_empty(labels),
            annotations: non_empty(annotations),
            owner_references: Some(vec![member_owner_reference(member)?]),
            ..Default::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".to_string()]),
            storage_class_name: storage.storage_class_name.clone(),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_string(),
                    storage.size_or_default(),
                )])),
                limits: None,
            }),
            ..Default::default()
        }),
        status: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::tests_support::member;
    use etcd_operator_api::shared::StorageSpec;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    #[test]
    fn pvc_is_named_sized_and_owned() {
        let mut m = member("etcd", "etcd-1");
        m.spec.storage = StorageSpec {
            size: Some(Quantity("10Gi".into())),
            medium: None,
            storage_class_name: Some("fast".into()),
        };
        let pvc = member_pvc(&m)
            .unwrap()
            .expect("a PVC-backed member has a PVC");
        assert_eq!(pvc.metadata.name.as_deref(), Some("data-etcd-1"));
        assert_eq!(
            pvc.metadata.labels.unwrap()["app.kubernetes.io/component"],
            "etcd-1"
        );
        assert_eq!(pvc.metadata.owner_references.unwrap()[0].kind, "EtcdMember");
        let spec = pvc.spec.unwrap();
        assert_eq!(spec.storage_class_name.as_deref(), Some("fast"));
        assert_eq!(spec.access_modes.unwrap(), vec!["ReadWriteOnce"]);
        assert_eq!(
            spec.resources.unwrap().requests.unwrap()["storage"],
            Quantity("10Gi".into())
        );
    }

    #[test]
    fn default_size_and_no_pvc_for_memory() {
        let pvc = member_pvc(&member("etcd", "etcd-0")).unwrap().unwrap();
        let requests = pvc.spec.unwrap().resources.unwrap().requests.unwrap();
        assert_eq!(requests["storage"], Quantity("1Gi".into()));

        let mut m = member("etcd", "etcd-0");
        m.spec.storage.medium = Some(StorageMedium::Memory);
        assert_eq!(member_pvc(&m).unwrap(), None);
    }
}
