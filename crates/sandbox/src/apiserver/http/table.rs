//! `meta.k8s.io/v1` Tables for `kubectl get`: the kind's printer columns, with NAME first.

use serde_json::{Value, json};

use crate::apiserver::jsonpath;
use crate::apiserver::registry::{ColumnSource, ResourceType};

use super::resources::partial_metadata;

/// A Table of `objects` (already in the requested version).
pub fn to_table(
    kind: &ResourceType,
    version: &str,
    objects: &[Value],
    list_meta: Option<Value>,
    include_object: &str,
) -> Value {
    let columns = kind
        .version(version)
        .map(|v| v.printer_columns.clone())
        .unwrap_or_default();
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
            cells.extend(
                columns
                    .iter()
                    .map(|c| cell(object, &c.source, &c.column_type)),
            );
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
    let value = raw_cell(object, source, column_type);
    // JSONPath dates print as ages, as the real server renders them ("5m", "2d3h").
    match (&value, column_type, source) {
        (Value::String(text), "date", ColumnSource::JsonPath(_)) => {
            match text.parse::<jiff::Timestamp>() {
                Ok(at) => json!(human_duration((jiff::Timestamp::now() - at).get_seconds())),
                Err(_) => value,
            }
        }
        _ => value,
    }
}

/// Kubernetes' `duration.HumanDuration`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    let s = seconds.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    let y = d / 365;
    match () {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => {
            if s % 60 == 0 {
                format!("{m}m")
            } else {
                format!("{m}m{}s", s % 60)
            }
        }
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 => {
            if m % 60 == 0 {
                format!("{h}h")
            } else {
                format!("{h}h{}m", m % 60)
            }
        }
        _ if h < 48 => format!("{h}h"),
        _ if h < 24 * 8 => {
            if h % 24 == 0 {
                format!("{d}d")
            } else {
                format!("{d}d{}h", h % 24)
            }
        }
        _ if d < 365 * 2 => format!("{d}d"),
        _ if y < 8 => {
            if d % 365 == 0 {
                format!("{y}y")
            } else {
                format!("{y}y{}d", d % 365)
            }
        }
        _ => format!("{y}y"),
    }
}

fn raw_cell(object: &Value, source: &ColumnSource, column_type: &str) -> Value {
    match source {
        ColumnSource::Computed(compute) => compute(object),
        ColumnSource::JsonPath(path) => {
            let values = jsonpath::select(object, path);
            match values.as_slice() {
                [] => Value::Null,
                [single] if column_type != "string" || single.is_string() => (*single).clone(),
                many => json!(
                    many.iter()
                        .map(|v| match v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect::<Vec<_>>()
                        .join(",")
                ),
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
        let names: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(&names[..5], ["Name", "Ready", "Status", "Restarts", "Age"]);
        let cells = table["rows"][0]["cells"].as_array().unwrap();
        assert_eq!(
            &cells[..4],
            &[json!("web"), json!("1/1"), json!("Running"), json!(2)]
        );
        assert!(
            cells[4].as_str().unwrap().ends_with('d'),
            "age of an old pod is in days: {}",
            cells[4]
        );
        assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    }
}

#[cfg(test)]
mod duration_tests {
    use super::human_duration;

    #[test]
    fn ages_print_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(125), "2m5s");
        assert_eq!(human_duration(60 * 30), "30m");
        assert_eq!(human_duration(3600 * 5 + 60), "5h1m");
        assert_eq!(human_duration(3600 * 30), "30h");
        assert_eq!(human_duration(86400 * 3 + 3600), "3d1h");
        assert_eq!(human_duration(86400 * 40), "40d");
    }
}
