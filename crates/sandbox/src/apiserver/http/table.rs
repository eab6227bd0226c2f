//! `meta.k8s.io/v1` Tables for `kubectl get`: the kind's printer columns, with NAME first.

use serde_json::{Value, json};

use crate::apiserver::jsonpath;
use crate::apiserver::registry::{ColumnSource, ResourceType};

use super::resources::partial_metadata;

/// A Table of `objects` (already in the requested version).
pub fn to_table(kind: &ResourceType, version: &str, objects: &[Value], list_meta: Option<Value>, include_object: &str) -> Value {
    let columns = kind.version(version).map(|v| v.printer_columns.clone()).unwrap_or_default();
    let mut definitions = vec![json!({
        "name": "Name", "type": "string", "format": "name", "priority": 0,
        "description": "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    })];
    definitions.extend(columns.iter().map(|c| {
        json!({"name": c.name, "type": c.column_type, "format": c.format, "description": c.description, "priority": c.priority})
    }));
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let mut cells = vec![object["metadata"]["name"].clone()];
            cells.extend(columns.iter().map(|c| cell(object, &c.source, &c.column_type)));
            let embedded = match include_object {
                "None" => Value::Null,
                "Object" => object.clone(),
                _ => partial_metadata(object),
            };
            json!({"cells": cells, "object": embedded})
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta.unwrap_or_else(|| json!({})),
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

fn cell(object: &Value, source: &ColumnSource, column_type: &str) -> Value {
    match source {
        ColumnSource::Computed(compute) => compute(object),
        ColumnSource::JsonPath(path) => {
            let values = jsonpath::select(object, path);
            match values.as_slice() {
                [] => Value::Null,
                [single] if column_type != "string" || single.is_string() => (*single).clone(),
                many => json!(many.iter().map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                }).collect::<Vec<_>>().join(",")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apiserver::kinds::builtin_kinds;

    #[test]
    fn pods_print_name_ready_status_restarts_age() {
        let kinds = builtin_kinds();
        let pods = kinds.iter().find(|k| k.plural == "pods").unwrap();
        let pod = json!({"metadata": {"name": "web", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Running",
            "containerStatuses": [{"ready": true, "restartCount": 2}]}});
        let table = to_table(pods, "v1", &[pod], None, "Metadata");
        let names: Vec<&str> = table["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(&names[..5], ["Name", "Ready", "Status", "Restarts", "Age"]);
        assert_eq!(table["rows"][0]["cells"], json!(["web", "1/1", "Running", 2, "2024-01-01T00:00:00Z", null, null]));
        assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    }
}
