//! The CustomResourceDefinitions of the API, generated from the Rust types.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::Value;

use crate::{
    EtcdCluster, EtcdDefrag, EtcdDefragPolicy, EtcdMember, EtcdSnapshot, EtcdSnapshotSchedule,
    schema,
};

/// The CRDs of the API, in the order EtcdCluster, EtcdMember, EtcdSnapshot, EtcdDefrag,
/// EtcdDefragPolicy, then the extension kind EtcdSnapshotSchedule.
///
/// Use these rather than `CustomResourceExt::crd()` of each type: only these carry the
/// finishing pass of [`crate::schema`] that makes the schemas equal to the reference's.
pub fn crds() -> Vec<CustomResourceDefinition> {
    [
        EtcdCluster::crd(),
        EtcdMember::crd(),
        EtcdSnapshot::crd(),
        EtcdDefrag::crd(),
        EtcdDefragPolicy::crd(),
        EtcdSnapshotSchedule::crd(),
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
    let mut value = serde_json::to_value(crd).expect("a CRD serializes to JSON");
    whole_bounds_as_integers(&mut value);
    serde_yaml::to_string(&value).expect("a CRD serializes to YAML")
}

/// `JSONSchemaProps` holds `minimum` and `maximum` as floats; written as integers when whole,
/// the YAML reads like any other CRD (`minimum: 0`, not `minimum: 0.0`).
fn whole_bounds_as_integers(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                let whole = child
                    .as_f64()
                    .filter(|bound| bound.fract() == 0.0 && bound.abs() < 2f64.powi(53));
                match whole {
                    // The guard above makes the cast exact.
                    #[allow(clippy::cast_possible_truncation)]
                    Some(bound) if key == "minimum" || key == "maximum" => {
                        *child = Value::from(bound as i64)
                    }
                    _ => whole_bounds_as_integers(child),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_bounds_as_integers),
        _ => {}
    }
}

/// The file name of a CRD in `deploy/crds/`: `<plural>.yaml`.
pub fn crd_file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.spec.names.plural)
}
