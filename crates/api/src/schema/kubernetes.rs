//! The markers of the Kubernetes Go types we embed (`+listType`, `+mapType`, `+structType`,
//! validation tags), applied to the JSON form of k8s-openapi's schemas, which carry none of them.
//! One function per Kubernetes type, following the Go type's fields.

use serde_json::{Value, json};

use super::markers::{QUANTITY_PATTERN, atomic_list, atomic_map, property, set};

/// Applies `mark` to the items schema of the list property `name`, if present.
fn each_item(schema: &mut Value, name: &str, mark: impl Fn(&mut Value)) {
    if let Some(items) = property(schema, name).and_then(|list| list.get_mut("items")) {
        mark(items);
    }
}

/// Marks the list property `name` atomic, if present.
fn atomic_list_property(schema: &mut Value, name: &str) {
    if let Some(list) = property(schema, name) {
        atomic_list(list);
    }
}

/// `corev1.Affinity`.
pub(super) fn affinity(schema: &mut Value) {
    if let Some(node) = property(schema, "nodeAffinity") {
        node_affinity(node);
    }
    for name in ["podAffinity", "podAntiAffinity"] {
        if let Some(pod) = property(schema, name) {
            pod_affinity(pod);
        }
    }
}

/// `corev1.NodeAffinity`.
fn node_affinity(schema: &mut Value) {
    if let Some(required) = property(schema, "requiredDuringSchedulingIgnoredDuringExecution") {
        node_selector(required);
    }
    atomic_list_property(schema, "preferredDuringSchedulingIgnoredDuringExecution");
    each_item(
        schema,
        "preferredDuringSchedulingIgnoredDuringExecution",
        |term| {
            if let Some(preference) = property(term, "preference") {
                node_selector_term(preference);
            }
        },
    );
}

/// `corev1.NodeSelector`: an atomic map with an atomic list of terms.
fn node_selector(schema: &mut Value) {
    atomic_map(schema);
    atomic_list_property(schema, "nodeSelectorTerms");
    each_item(schema, "nodeSelectorTerms", node_selector_term);
}

/// `corev1.NodeSelectorTerm`: an atomic map of requirement lists.
fn node_selector_term(schema: &mut Value) {
    atomic_map(schema);
    for name in ["matchExpressions", "matchFields"] {
        atomic_list_property(schema, name);
        each_item(schema, name, |requirement| {
            atomic_list_property(requirement, "values")
        });
    }
}

/// `corev1.PodAffinity` and `corev1.PodAntiAffinity` (the same shape).
fn pod_affinity(schema: &mut Value) {
    atomic_list_property(schema, "requiredDuringSchedulingIgnoredDuringExecution");
    each_item(
        schema,
        "requiredDuringSchedulingIgnoredDuringExecution",
        pod_affinity_term,
    );
    atomic_list_property(schema, "preferredDuringSchedulingIgnoredDuringExecution");
    each_item(
        schema,
        "preferredDuringSchedulingIgnoredDuringExecution",
        |weighted| {
            if let Some(term) = property(weighted, "podAffinityTerm") {
                pod_affinity_term(term);
            }
        },
    );
}

/// `corev1.PodAffinityTerm`.
fn pod_affinity_term(schema: &mut Value) {
    for name in ["labelSelector", "namespaceSelector"] {
        if let Some(selector) = property(schema, name) {
            label_selector(selector);
        }
    }
    for name in ["namespaces", "matchLabelKeys", "mismatchLabelKeys"] {
        atomic_list_property(schema, name);
    }
}

/// `metav1.LabelSelector`.
fn label_selector(schema: &mut Value) {
    atomic_map(schema);
    atomic_list_property(schema, "matchExpressions");
    each_item(schema, "matchExpressions", |requirement| {
        atomic_list_property(requirement, "values")
    });
}

/// `corev1.TopologySpreadConstraint`.
pub(super) fn topology_spread_constraint(schema: &mut Value) {
    if let Some(selector) = property(schema, "labelSelector") {
        label_selector(selector);
    }
    atomic_list_property(schema, "matchLabelKeys");
}

/// `corev1.ResourceRequirements`: quantities as values, `claims` a list map keyed by name.
pub(super) fn resource_requirements(schema: &mut Value) {
    for name in ["limits", "requests"] {
        if let Some(map) = property(schema, name) {
            set(
                map,
                "additionalProperties",
                json!({ "x-kubernetes-int-or-string": true, "pattern": QUANTITY_PATTERN }),
            );
        }
    }
    if let Some(claims) = property(schema, "claims") {
        set(claims, "x-kubernetes-list-type", json!("map"));
        set(claims, "x-kubernetes-list-map-keys", json!(["name"]));
    }
}

/// `metav1.Condition`: the validation tags of its fields.
pub(super) fn condition(schema: &mut Value) {
    let constraints = [
        ("lastTransitionTime", json!({ "format": "date-time" })),
        ("message", json!({ "maxLength": 32768 })),
        ("observedGeneration", json!({ "minimum": 0 })),
        (
            "reason",
            json!({
                "maxLength": 1024,
                "minLength": 1,
                "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
            }),
        ),
        ("status", json!({ "enum": ["True", "False", "Unknown"] })),
        (
            "type",
            json!({
                "maxLength": 316,
                "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
            }),
        ),
    ];
    for (name, extra) in constraints {
        if let (Some(field), Value::Object(extra)) = (property(schema, name), extra) {
            for (key, value) in extra {
                set(field, &key, value);
            }
        }
    }
}
