//! Label selectors (`metav1.LabelSelector`) and node selector requirements, evaluated the way
//! the real scheduler and controllers evaluate them, on typed objects.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};

/// The labels of an object, empty when it has none.
pub fn labels_of(metadata: &ObjectMeta) -> &BTreeMap<String, String> {
    static EMPTY: BTreeMap<String, String> = BTreeMap::new();
    metadata.labels.as_ref().unwrap_or(&EMPTY)
}

/// Whether `labels` satisfy `selector`. An empty selector matches everything; an unknown
/// operator matches nothing (the real server refuses such selectors at admission).
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_label = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key) == Some(value));
    by_label
        && selector
            .match_expressions
            .iter()
            .flatten()
            .all(|requirement| requirement_matches(requirement, labels))
}

fn requirement_matches(
    requirement: &LabelSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> bool {
    let value = labels.get(&requirement.key);
    let values = requirement.values.as_deref().unwrap_or_default();
    match requirement.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        _ => false,
    }
}

/// A selector with `matchLabelKeys` (key in (the pod's value)) and `mismatchLabelKeys` (key notin
/// (the pod's value)) merged in, as the API server does for affinity terms and the scheduler for
/// spread constraints. Keys the pod does not carry are ignored.
pub fn merge_label_keys(
    selector: &LabelSelector,
    match_keys: &[String],
    mismatch_keys: &[String],
    pod_labels: &BTreeMap<String, String>,
) -> LabelSelector {
    let mut merged = selector.clone();
    let expressions = merged.match_expressions.get_or_insert_with(Vec::new);
    for (keys, operator) in [(match_keys, "In"), (mismatch_keys, "NotIn")] {
        for key in keys {
            if let Some(value) = pod_labels.get(key) {
                expressions.push(LabelSelectorRequirement {
                    key: key.clone(),
                    operator: operator.to_string(),
                    values: Some(vec![value.clone()]),
                });
            }
        }
    }
    merged
}

/// The string form of a selector, for `labelSelector=` in list and watch calls.
pub fn selector_query(selector: &LabelSelector) -> String {
    let mut terms: Vec<String> = selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    for requirement in selector.match_expressions.iter().flatten() {
        let values = requirement.values.as_deref().unwrap_or_default().join(",");
        terms.push(match requirement.operator.as_str() {
            "In" => format!("{} in ({values})", requirement.key),
            "NotIn" => format!("{} notin ({values})", requirement.key),
            "DoesNotExist" => format!("!{}", requirement.key),
            _ => requirement.key.clone(),
        });
    }
    terms.join(",")
}

/// Whether a node's labels satisfy one requirement of a node selector term (`matchExpressions`).
/// `Gt` and `Lt` compare the label as an integer with the single value; anything unparsable fails.
pub fn node_requirement_matches(
    requirement: &NodeSelectorRequirement,
    labels: &BTreeMap<String, String>,
) -> bool {
    let value = labels.get(&requirement.key);
    let values = requirement.values.as_deref().unwrap_or_default();
    match requirement.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        operator @ ("Gt" | "Lt") => {
            let [bound] = values else { return false };
            let (Some(label), Ok(bound)) = (
                value.and_then(|v| v.parse::<i64>().ok()),
                bound.parse::<i64>(),
            ) else {
                return false;
            };
            if operator == "Gt" {
                label > bound
            } else {
                label < bound
            }
        }
        _ => false,
    }
}

/// Whether a node's name satisfies a `matchFields` requirement; only `metadata.name` with `In`
/// and `NotIn` is a valid field requirement.
pub fn node_field_matches(requirement: &NodeSelectorRequirement, node_name: &str) -> bool {
    if requirement.key != "metadata.name" {
        return false;
    }
    let values = requirement.values.as_deref().unwrap_or_default();
    match requirement.operator.as_str() {
        "In" => values.iter().any(|v| v == node_name),
        "NotIn" => !values.iter().any(|v| v == node_name),
        _ => false,
    }
}
