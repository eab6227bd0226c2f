//! OpenAPI schemas of the built-in kinds, generated from k8s-openapi's `schemars` support and
//! decorated with the extensions kubectl and the patch engine read
//! (`x-kubernetes-patch-merge-key`, `x-kubernetes-patch-strategy`, `x-kubernetes-list-type`,
//! `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`).

use k8s_openapi::schemars::JsonSchema;
use k8s_openapi::schemars::generate::SchemaSettings;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use serde_json::{Map, Value};

use super::markers::FIELD_MARKERS;

/// A built-in kind's schema: the name of its root definition and every definition it uses,
/// keyed by their OpenAPI names (`io.k8s.api.core.v1.PodSpec`), with `$ref`s of the form
/// `#/components/schemas/<name>`.
#[derive(Debug, Clone)]
pub struct BuiltinSchema {
    /// The root definition, e.g. `io.k8s.api.core.v1.Pod`.
    pub root: String,
    /// All definitions reachable from the root, decorated.
    pub definitions: Map<String, Value>,
}

/// `(group, version, kind)`.
type KindKey = (String, String, String);

/// Generated schemas, built once per kind: the server asks on every write.
static CACHE: LazyLock<Mutex<HashMap<KindKey, Option<Arc<BuiltinSchema>>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The decorated schema of a built-in kind, `None` for kinds the sandbox does not know.
pub fn builtin_schema(group: &str, version: &str, kind: &str) -> Option<Arc<BuiltinSchema>> {
    let key = (group.to_string(), version.to_string(), kind.to_string());
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    cache
        .entry(key)
        .or_insert_with(|| generate_kind(group, version, kind).map(Arc::new))
        .clone()
}

fn generate<T: JsonSchema>() -> BuiltinSchema {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let root_ref = generator.subschema_for::<T>();
    let mut definitions = generator.take_definitions(true);
    let root = root_ref
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|reference| reference.rsplit('/').next())
        .map(str::to_string)
        .unwrap_or_else(|| T::schema_name().into_owned());
    if !definitions.contains_key(&root) {
        definitions.insert(root.clone(), root_ref.to_value());
    }
    for (name, definition) in definitions.iter_mut() {
        decorate(name, definition);
    }
    BuiltinSchema { root, definitions }
}

/// Adds the Go types' patch and list markers to one definition.
fn decorate(name: &str, definition: &mut Value) {
    for (definition_name, field, strategy, merge_key, list_type, map_keys, map_type) in
        FIELD_MARKERS
    {
        if *definition_name != name {
            continue;
        }
        let target = if field.is_empty() {
            Some(&mut *definition)
        } else {
            definition
                .get_mut("properties")
                .and_then(|properties| properties.get_mut(*field))
        };
        let Some(Value::Object(target)) = target else {
            continue;
        };
        let mut set = |key: &str, value: Value| {
            target.insert(key.to_string(), value);
        };
        if !strategy.is_empty() {
            set("x-kubernetes-patch-strategy", Value::from(*strategy));
        }
        if !merge_key.is_empty() {
            set("x-kubernetes-patch-merge-key", Value::from(*merge_key));
        }
        if !list_type.is_empty() {
            set("x-kubernetes-list-type", Value::from(*list_type));
        }
        if !map_keys.is_empty() {
            set(
                "x-kubernetes-list-map-keys",
                Value::from(map_keys.split(',').collect::<Vec<_>>()),
            );
        }
        if !map_type.is_empty() {
            set("x-kubernetes-map-type", Value::from(*map_type));
        }
    }
}

macro_rules! builtin_kinds {
    ($(($group:literal, $version:literal, $kind:literal, $type:ty)),* $(,)?) => {
        fn generate_kind(group: &str, version: &str, kind: &str) -> Option<BuiltinSchema> {
            match (group, version, kind) {
                $(($group, $version, $kind) => Some(generate::<$type>()),)*
                _ => None,
            }
        }

        /// Every built-in kind with a schema: `(group, version, kind)`.
        pub const BUILTIN_KINDS: &[(&str, &str, &str)] = &[$(($group, $version, $kind)),*];
    };
}

use k8s_openapi::api::{
    admissionregistration::v1 as admissionregistration, apps::v1 as apps,
    authentication::v1 as authentication, authorization::v1 as authorization,
    autoscaling::v2 as autoscaling, batch::v1 as batch, certificates::v1 as certificates,
    coordination::v1 as coordination, core::v1 as core, discovery::v1 as discovery,
    events::v1 as events, networking::v1 as networking, policy::v1 as policy, rbac::v1 as rbac,
    scheduling::v1 as scheduling, storage::v1 as storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;

builtin_kinds![
    ("", "v1", "Pod", core::Pod),
    ("", "v1", "Service", core::Service),
    ("", "v1", "Endpoints", core::Endpoints),
    ("", "v1", "ConfigMap", core::ConfigMap),
    ("", "v1", "Secret", core::Secret),
    ("", "v1", "Namespace", core::Namespace),
    ("", "v1", "Node", core::Node),
    (
        "",
        "v1",
        "PersistentVolumeClaim",
        core::PersistentVolumeClaim
    ),
    ("", "v1", "PersistentVolume", core::PersistentVolume),
    ("", "v1", "ServiceAccount", core::ServiceAccount),
    ("", "v1", "Event", core::Event),
    ("", "v1", "LimitRange", core::LimitRange),
    ("", "v1", "ResourceQuota", core::ResourceQuota),
    (
        "",
        "v1",
        "ReplicationController",
        core::ReplicationController
    ),
    ("", "v1", "PodTemplate", core::PodTemplate),
    ("apps", "v1", "Deployment", apps::Deployment),
    ("apps", "v1", "StatefulSet", apps::StatefulSet),
    ("apps", "v1", "DaemonSet", apps::DaemonSet),
    ("apps", "v1", "ReplicaSet", apps::ReplicaSet),
    ("apps", "v1", "ControllerRevision", apps::ControllerRevision),
    ("batch", "v1", "Job", batch::Job),
    ("batch", "v1", "CronJob", batch::CronJob),
    (
        "policy",
        "v1",
        "PodDisruptionBudget",
        policy::PodDisruptionBudget
    ),
    ("policy", "v1", "Eviction", policy::Eviction),
    ("coordination.k8s.io", "v1", "Lease", coordination::Lease),
    (
        "discovery.k8s.io",
        "v1",
        "EndpointSlice",
        discovery::EndpointSlice
    ),
    ("events.k8s.io", "v1", "Event", events::Event),
    (
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        networking::NetworkPolicy
    ),
    ("networking.k8s.io", "v1", "Ingress", networking::Ingress),
    (
        "networking.k8s.io",
        "v1",
        "IngressClass",
        networking::IngressClass
    ),
    ("rbac.authorization.k8s.io", "v1", "Role", rbac::Role),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        rbac::RoleBinding
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        rbac::ClusterRole
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        rbac::ClusterRoleBinding
    ),
    (
        "storage.k8s.io",
        "v1",
        "StorageClass",
        storage::StorageClass
    ),
    ("storage.k8s.io", "v1", "CSIDriver", storage::CSIDriver),
    (
        "storage.k8s.io",
        "v1",
        "VolumeAttachment",
        storage::VolumeAttachment
    ),
    (
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        scheduling::PriorityClass
    ),
    (
        "autoscaling",
        "v2",
        "HorizontalPodAutoscaler",
        autoscaling::HorizontalPodAutoscaler
    ),
    (
        "certificates.k8s.io",
        "v1",
        "CertificateSigningRequest",
        certificates::CertificateSigningRequest
    ),
    (
        "authentication.k8s.io",
        "v1",
        "TokenReview",
        authentication::TokenReview
    ),
    (
        "authentication.k8s.io",
        "v1",
        "TokenRequest",
        authentication::TokenRequest
    ),
    (
        "authorization.k8s.io",
        "v1",
        "SubjectAccessReview",
        authorization::SubjectAccessReview
    ),
    (
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        authorization::SelfSubjectAccessReview
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        admissionregistration::ValidatingWebhookConfiguration
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        admissionregistration::MutatingWebhookConfiguration
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        admissionregistration::ValidatingAdmissionPolicy
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        admissionregistration::ValidatingAdmissionPolicyBinding
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        apiextensions::CustomResourceDefinition
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_schema_carries_merge_keys() {
        let pod = builtin_schema("", "v1", "Pod").expect("Pod is built in");
        assert_eq!(pod.root, "io.k8s.api.core.v1.Pod");
        let containers = &pod.definitions["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        let ports = &pod.definitions["io.k8s.api.core.v1.Container"]["properties"]["ports"];
        assert_eq!(
            ports["x-kubernetes-list-map-keys"],
            serde_json::json!(["containerPort", "protocol"])
        );
        let finalizers = &pod.definitions["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]
            ["finalizers"];
        assert_eq!(finalizers["x-kubernetes-list-type"], "set");
    }

    #[test]
    fn every_listed_kind_generates() {
        for (group, version, kind) in BUILTIN_KINDS {
            let schema = builtin_schema(group, version, kind).expect("listed kinds generate");
            assert!(
                schema.definitions.contains_key(&schema.root),
                "{kind}: {}",
                schema.root
            );
        }
    }
}
