//! The CustomResourceDefinitions of the API, generated from the Rust types.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::{EtcdCluster, EtcdDefrag, EtcdMember, EtcdSnapshot, schema};

/// The four CRDs of the API, in the order EtcdCluster, EtcdMember, EtcdSnapshot, EtcdDefrag.
///
/// Use these rather than `CustomResourceExt::crd()` of each type: only these carry the
/// finishing pass of [`crate::schema`] that makes the schemas equal to the reference's.
pub fn crds() -> Vec<CustomResourceDefinition> {
    [
        EtcdCluster::crd(),
        EtcdMember::crd(),
        EtcdSnapshot::crd(),
        EtcdDefrag::crd(),
    ]
    .into_iter()
    .map(schema::finalize)
    .collect()
}

/// One CRD as a YAML document (without the `---` separator), as committed in `deploy/crds/`.
///
/// # Panics
/// Never for the CRDs of [`crds`]: they consist of strings, numbers, maps and lists only.
pub fn crd_yaml(crd: &CustomResourceDefinition) -> String {
    serde_yaml::to_string(crd).expect("a CRD serializes to YAML")
}

/// The file name of a CRD in `deploy/crds/`: `<plural>.yaml`.
pub fn crd_file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.spec.names.plural)
}
