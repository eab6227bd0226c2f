//! CustomResourceDefinitions: checking one, and turning an accepted one into a served kind.

use std::sync::Arc;

use serde_json::Value;

use super::error::StatusCause;
use super::kinds::columns_age;
use super::registry::{
    ALL_VERBS, ColumnSource, PrinterColumn, ResourceType, ScalePaths, VersionInfo,
};
use crate::schema::{FieldError, StructuralSchema};

fn cause(reason: &str, field: &str, message: String) -> StatusCause {
    StatusCause {
        reason: reason.into(),
        message,
        field: field.into(),
    }
}

/// A schema engine error as a Status cause: the message without its field path in front.
pub fn status_cause(error: &FieldError) -> StatusCause {
    let message = error.message();
    let message = message
        .strip_prefix(&format!("{}: ", error.field))
        .map(str::to_string)
        .unwrap_or(message);
    StatusCause {
        reason: error.reason().to_string(),
        message,
        field: error.field.clone(),
    }
}

/// The checks kube-apiserver makes of a CRD: names, group, versions, and schemas that compile.
pub fn validate(crd: &Value) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or("");
    let plural = spec["names"]["plural"].as_str().unwrap_or("");
    if group.is_empty() {
        causes.push(cause(
            "FieldValueRequired",
            "spec.group",
            "Required value".into(),
        ));
    } else if !group.contains('.') {
        causes.push(cause(
            "FieldValueInvalid",
            "spec.group",
            format!("Invalid value: {group:?}: should be a domain with at least one dot"),
        ));
    }
    for field in ["plural", "kind"] {
        if spec["names"][field].as_str().is_none_or(str::is_empty) {
            causes.push(cause(
                "FieldValueRequired",
                &format!("spec.names.{field}"),
                "Required value".into(),
            ));
        }
    }
    let name = crd["metadata"]["name"].as_str().unwrap_or("");
    let expected = format!("{plural}.{group}");
    if !plural.is_empty() && !group.is_empty() && name != expected {
        causes.push(cause(
            "FieldValueInvalid",
            "metadata.name",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    if !matches!(spec["scope"].as_str(), Some("Namespaced" | "Cluster")) {
        causes.push(cause(
            "FieldValueNotSupported",
            "spec.scope",
            "Unsupported value: must be \"Namespaced\" or \"Cluster\"".into(),
        ));
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        causes.push(cause(
            "FieldValueRequired",
            "spec.versions",
            "Required value: must have exactly one version marked as storage version".into(),
        ));
    }
    if versions.iter().filter(|v| v["storage"] == true).count() != 1 && !versions.is_empty() {
        causes.push(cause(
            "FieldValueInvalid",
            "spec.versions",
            "Invalid value: must have exactly one version marked as storage version".into(),
        ));
    }
    for (i, version) in versions.iter().enumerate() {
        let schema = &version["schema"]["openAPIV3Schema"];
        if schema.is_null() {
            continue;
        }
        if let Err(err) = StructuralSchema::compile(schema) {
            for error in &err.causes {
                let mut found = status_cause(error);
                // Paths inside the schema are reported from the CRD's root, as kube-apiserver does.
                found.field = match found.field.as_str() {
                    "" => format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    inner if inner.starts_with("openAPIV3Schema") => {
                        format!("spec.versions[{i}].schema.{inner}")
                    }
                    other => other.to_string(),
                };
                causes.push(found);
            }
        }
    }
    causes
}

/// The served kind an Established CRD describes; `None` when a version's schema does not compile.
pub fn resource_type(crd: &Value) -> Option<ResourceType> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let strings = |value: &Value| -> Vec<String> {
        value
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let kind = names["kind"].as_str()?.to_string();
    let mut versions = Vec::new();
    for version in spec["versions"].as_array()? {
        let schema = match &version["schema"]["openAPIV3Schema"] {
            Value::Null => None,
            schema => Some(Arc::new(StructuralSchema::compile(schema).ok()?)),
        };
        let subresources = &version["subresources"];
        let scale = subresources["scale"].as_object().map(|scale| ScalePaths {
            spec_replicas: scale
                .get("specReplicasPath")
                .and_then(Value::as_str)
                .unwrap_or(".spec.replicas")
                .to_string(),
            status_replicas: scale
                .get("statusReplicasPath")
                .and_then(Value::as_str)
                .unwrap_or(".status.replicas")
                .to_string(),
            label_selector: scale
                .get("labelSelectorPath")
                .and_then(Value::as_str)
                .map(str::to_string),
        });
        versions.push(VersionInfo {
            name: version["name"].as_str()?.to_string(),
            served: version["served"] != false,
            storage: version["storage"] == true,
            status_subresource: subresources["status"].is_object(),
            scale,
            printer_columns: printer_columns(&version["additionalPrinterColumns"]),
            schema,
        });
    }
    Some(ResourceType {
        group: spec["group"].as_str()?.to_string(),
        list_kind: names["listKind"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("{kind}List")),
        plural: names["plural"].as_str()?.to_string(),
        singular: names["singular"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| kind.to_lowercase()),
        kind,
        namespaced: spec["scope"] != "Cluster",
        short_names: strings(&names["shortNames"]),
        categories: strings(&names["categories"]),
        verbs: ALL_VERBS.iter().map(|v| v.to_string()).collect(),
        extra_subresources: Vec::new(),
        versions,
        custom: true,
        storage: None,
    })
}

/// A CRD version's `additionalPrinterColumns`, or Age when it declares none.
fn printer_columns(declared: &Value) -> Vec<PrinterColumn> {
    let Some(columns) = declared.as_array().filter(|c| !c.is_empty()) else {
        return vec![columns_age()];
    };
    columns
        .iter()
        .map(|column| PrinterColumn {
            name: column["name"].as_str().unwrap_or("").to_string(),
            column_type: column["type"].as_str().unwrap_or("string").to_string(),
            format: column["format"].as_str().unwrap_or("").to_string(),
            description: column["description"].as_str().unwrap_or("").to_string(),
            priority: column["priority"].as_i64().unwrap_or(0),
            source: ColumnSource::JsonPath(column["jsonPath"].as_str().unwrap_or("").to_string()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn widget_crd() -> Value {
        json!({"metadata": {"name": "widgets.example.com"}, "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}},
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"}},
                "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]}]}})
    }

    #[test]
    fn a_crd_becomes_a_served_kind_with_its_subresources_and_columns() {
        let crd = widget_crd();
        assert!(validate(&crd).is_empty());
        let kind = resource_type(&crd).unwrap();
        assert_eq!(kind.list_kind, "WidgetList");
        assert_eq!(kind.short_names, ["wd"]);
        assert!(kind.has_subresource("v1", "status"));
        assert_eq!(
            kind.versions[0].scale.as_ref().unwrap().spec_replicas,
            ".spec.size"
        );
        assert_eq!(kind.versions[0].printer_columns[0].name, "Size");
    }

    #[test]
    fn a_crd_must_be_named_plural_dot_group() {
        let mut crd = widget_crd();
        crd["metadata"]["name"] = json!("gadgets.example.com");
        let causes = validate(&crd);
        assert_eq!(causes[0].field, "metadata.name");
    }
}
