//! The built-in kinds: one table of (group, version, kind, plural, short names, categories,
//! subresources), and one module per kind whose objects the server defaults or checks.

mod columns;

pub use columns::age as columns_age;
pub mod defaults;
pub mod service_ips;

use super::registry::{ALL_VERBS, PrinterColumn, ResourceType, ScalePaths, VersionInfo};
use super::store::ResourceId;

struct Builtin {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    status: bool,
    scale: bool,
    extra: &'static [&'static str],
    verbs: &'static [&'static str],
    columns: fn() -> Vec<PrinterColumn>,
}

const NO_DELETECOLLECTION: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];
const CREATE_ONLY: &[&str] = &["create"];

const fn kind(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> Builtin {
    Builtin {
        group,
        version,
        kind,
        plural,
        namespaced,
        short_names: &[],
        categories: &[],
        status: false,
        scale: false,
        extra: &[],
        verbs: ALL_VERBS,
        columns: columns::name_age,
    }
}

impl Builtin {
    const fn short(mut self, names: &'static [&'static str]) -> Self {
        self.short_names = names;
        self
    }
    const fn categories(mut self, categories: &'static [&'static str]) -> Self {
        self.categories = categories;
        self
    }
    const fn status(mut self) -> Self {
        self.status = true;
        self
    }
    const fn scale(mut self) -> Self {
        self.scale = true;
        self
    }
    const fn extra(mut self, extra: &'static [&'static str]) -> Self {
        self.extra = extra;
        self
    }
    const fn verbs(mut self, verbs: &'static [&'static str]) -> Self {
        self.verbs = verbs;
        self
    }
    const fn columns(mut self, columns: fn() -> Vec<PrinterColumn>) -> Self {
        self.columns = columns;
        self
    }
}

const ALL: &[&str] = &["all"];

const BUILTINS: &[Builtin] = &[
    kind("", "v1", "Namespace", "namespaces", false)
        .short(&["ns"])
        .status()
        .verbs(NO_DELETECOLLECTION)
        .extra(&["finalize"])
        .columns(columns::namespace),
    kind("", "v1", "Node", "nodes", false)
        .short(&["no"])
        .status()
        .columns(columns::node),
    kind("", "v1", "Pod", "pods", true)
        .short(&["po"])
        .categories(ALL)
        .status()
        .extra(&["log", "eviction", "binding", "exec", "portforward"])
        .columns(columns::pod),
    kind(
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        true,
    )
    .short(&["pvc"])
    .status()
    .columns(columns::persistent_volume_claim),
    kind("", "v1", "Secret", "secrets", true).columns(columns::secret),
    kind("", "v1", "ConfigMap", "configmaps", true)
        .short(&["cm"])
        .columns(columns::config_map),
    kind("", "v1", "Service", "services", true)
        .short(&["svc"])
        .categories(ALL)
        .status()
        .verbs(NO_DELETECOLLECTION)
        .columns(columns::service),
    kind("", "v1", "Endpoints", "endpoints", true).short(&["ep"]),
    kind("", "v1", "ServiceAccount", "serviceaccounts", true)
        .short(&["sa"])
        .extra(&["token"]),
    kind("", "v1", "Event", "events", true)
        .short(&["ev"])
        .columns(columns::core_event),
    kind("events.k8s.io", "v1", "Event", "events", true)
        .short(&["ev"])
        .columns(columns::core_event),
    kind(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    )
    .short(&["pdb"])
    .status()
    .columns(columns::pod_disruption_budget),
    kind("coordination.k8s.io", "v1", "Lease", "leases", true).columns(columns::lease),
    kind(
        "storage.k8s.io",
        "v1",
        "StorageClass",
        "storageclasses",
        false,
    )
    .short(&["sc"]),
    kind("batch", "v1", "Job", "jobs", true)
        .categories(ALL)
        .status()
        .columns(columns::job),
    kind("apps", "v1", "Deployment", "deployments", true)
        .short(&["deploy"])
        .categories(ALL)
        .status()
        .scale()
        .columns(columns::deployment),
    kind("apps", "v1", "ReplicaSet", "replicasets", true)
        .short(&["rs"])
        .categories(ALL)
        .status()
        .scale(),
    kind("apps", "v1", "StatefulSet", "statefulsets", true)
        .short(&["sts"])
        .categories(ALL)
        .status()
        .scale()
        .columns(columns::stateful_set),
    kind("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
    kind(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    kind(
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
    )
    .columns(columns::role_binding),
    kind(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    )
    .columns(columns::role_binding),
    kind(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        false,
    )
    .status()
    .columns(columns::created_at),
    kind(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        false,
    )
    .columns(columns::created_at),
    kind(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    )
    .short(&["crd", "crds"])
    .categories(&["api-extensions"])
    .status()
    .columns(columns::created_at),
    kind(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        false,
    )
    .verbs(CREATE_ONLY),
    kind(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectRulesReview",
        "selfsubjectrulesreviews",
        false,
    )
    .verbs(CREATE_ONLY),
    kind(
        "authorization.k8s.io",
        "v1",
        "SubjectAccessReview",
        "subjectaccessreviews",
        false,
    )
    .verbs(CREATE_ONLY),
];

/// Every built-in kind as a registry entry.
pub fn builtin_kinds() -> Vec<ResourceType> {
    BUILTINS.iter().map(to_resource_type).collect()
}

fn to_resource_type(b: &Builtin) -> ResourceType {
    let scale = b.scale.then(|| ScalePaths {
        spec_replicas: ".spec.replicas".into(),
        status_replicas: ".status.replicas".into(),
        label_selector: Some(".spec.selector".into()),
    });
    ResourceType {
        group: b.group.into(),
        kind: b.kind.into(),
        list_kind: format!("{}List", b.kind),
        plural: b.plural.into(),
        singular: b.kind.to_lowercase(),
        namespaced: b.namespaced,
        short_names: b.short_names.iter().map(|s| s.to_string()).collect(),
        categories: b.categories.iter().map(|s| s.to_string()).collect(),
        verbs: b.verbs.iter().map(|s| s.to_string()).collect(),
        extra_subresources: b.extra.iter().map(|s| s.to_string()).collect(),
        versions: vec![VersionInfo {
            name: b.version.into(),
            served: true,
            storage: true,
            status_subresource: b.status,
            scale,
            printer_columns: (b.columns)(),
            schema: None,
        }],
        custom: false,
        // events.k8s.io/v1 Events are the core/v1 Events seen through another schema.
        storage: (b.group == "events.k8s.io").then(|| ResourceId::new("", "events")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_has_a_lowercase_singular_and_a_list_kind() {
        for kind in builtin_kinds() {
            assert_eq!(kind.singular, kind.kind.to_lowercase());
            assert!(kind.list_kind.ends_with("List"));
            assert!(!kind.versions[0].printer_columns.is_empty());
        }
    }
}
