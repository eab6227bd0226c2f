//! Structural validation: kube-openapi's checks as kube-apiserver reports them.

use serde_json::json;

use super::{messages, schema_with_spec};
use crate::schema::{FieldErrorKind, invalid_status_message};

#[test]
fn messages_match_kube_apiserver() {
    let schema = schema_with_spec(json!({
        "type": "object",
        "required": ["version"],
        "properties": {
            "replicas": {"type": "integer", "minimum": 0, "maximum": 9},
            "ratio": {"type": "number", "exclusiveMinimum": true, "minimum": 0.5},
            "version": {"type": "string", "pattern": "^\\d+\\.\\d+\\.\\d+$"},
            "name": {"type": "string", "minLength": 2, "maxLength": 3},
            "medium": {"type": "string", "enum": ["", "Memory"]},
            "members": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
            "labels": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}},
            "since": {"type": "string", "format": "date-time"},
            "count": {"type": "integer", "format": "int32", "multipleOf": 2},
        },
    }));
    let cases = [
        (
            json!({"version": "1.2.3", "replicas": -1}),
            vec![
                "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
            ],
        ),
        (
            json!({"version": "1.2.3", "replicas": 10}),
            vec![
                "spec.replicas: Invalid value: 10: spec.replicas in body should be less than or equal to 9",
            ],
        ),
        (
            json!({"version": "1.2.3", "ratio": 0.5}),
            vec!["spec.ratio: Invalid value: 0.5: spec.ratio in body should be greater than 0.5"],
        ),
        (json!({}), vec!["spec.version: Required value"]),
        (
            json!({"version": "x"}),
            vec![
                r#"spec.version: Invalid value: "x": spec.version in body should match '^\d+\.\d+\.\d+$'"#,
            ],
        ),
        (
            json!({"version": "1.2.3", "name": "a"}),
            vec![
                r#"spec.name: Invalid value: "a": spec.name in body should be at least 2 chars long"#,
            ],
        ),
        (
            json!({"version": "1.2.3", "name": "abcd"}),
            vec!["spec.name: Too long: may not be more than 3 bytes"],
        ),
        (json!({"version": "1.2.3", "name": "äöü"}), vec![]),
        (
            json!({"version": "1.2.3", "medium": "Disk"}),
            vec![r#"spec.medium: Unsupported value: "Disk": supported values: "", "Memory""#],
        ),
        (
            json!({"version": "1.2.3", "members": []}),
            vec![
                "spec.members: Invalid value: 0: spec.members in body should have at least 1 items",
            ],
        ),
        (
            json!({"version": "1.2.3", "members": ["a", "b", "c"]}),
            vec!["spec.members: Too many: 3: must have at most 2 items"],
        ),
        (
            json!({"version": "1.2.3", "members": ["a", 1]}),
            vec![
                r#"spec.members[1]: Invalid value: "integer": spec.members[1] in body must be of type string: "integer""#,
            ],
        ),
        (
            json!({"version": "1.2.3", "labels": {"a": "1", "b": "2"}}),
            vec!["spec.labels: Too many: 2: must have at most 1 items"],
        ),
        (
            json!({"version": "1.2.3", "labels": {"a": 1}}),
            vec![
                r#"spec.labels.a: Invalid value: "integer": spec.labels.a in body must be of type string: "integer""#,
            ],
        ),
        (
            json!({"version": "1.2.3", "since": "yesterday"}),
            vec![
                r#"spec.since: Invalid value: "yesterday": spec.since in body must be of type date-time: "yesterday""#,
            ],
        ),
        (
            json!({"version": "1.2.3", "since": "2024-05-01T10:00:00Z", "count": 3}),
            vec!["spec.count: Invalid value: 3: spec.count in body should be a multiple of 2"],
        ),
        (
            json!({"version": "1.2.3", "replicas": "three"}),
            vec![
                r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
            ],
        ),
        (json!({"version": "1.2.3", "replicas": 2.0}), vec![]),
    ];
    for (spec, expected) in cases {
        assert_eq!(messages(&schema, spec.clone()), expected, "spec: {spec}");
    }
}

#[test]
fn reasons_and_status_message() {
    let schema = schema_with_spec(json!({
        "type": "object",
        "required": ["version"],
        "properties": {"replicas": {"type": "integer", "minimum": 0}, "version": {"type": "string"}},
    }));
    let object = json!({"apiVersion": "example.com/v1", "kind": "Example", "metadata": {"name": "x"}, "spec": {"replicas": -1}});
    let errors = schema.validate(&object, None);
    let reasons: Vec<&str> = errors.iter().map(|error| error.reason()).collect();
    assert_eq!(reasons, ["FieldValueInvalid", "FieldValueRequired"]);
    assert_eq!(errors[1].kind, FieldErrorKind::Required);
    assert_eq!(errors[1].body(), "Required value");
    assert_eq!(
        invalid_status_message(
            "EtcdCluster.etcd-operator.cozystack.io",
            "main",
            &errors[..2]
        ),
        r#"EtcdCluster.etcd-operator.cozystack.io "main" is invalid: [spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0, spec.version: Required value]"#
    );
}

#[test]
fn schema_errors_block_cel_rules() {
    let schema = schema_with_spec(json!({
        "type": "object",
        "required": ["version"],
        "properties": {"version": {"type": "string"}},
        "x-kubernetes-validations": [{"rule": "self.version != ''"}],
    }));
    assert_eq!(
        messages(&schema, json!({})),
        [
            "spec.version: Required value",
            r#"<nil>: Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"#,
        ]
    );
}

#[test]
fn int_or_string_and_nullable() {
    let schema = schema_with_spec(json!({
        "type": "object",
        "properties": {
            "size": {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "x-kubernetes-int-or-string": true,
                "pattern": "^[0-9]+(Gi|Mi)?$",
            },
            "note": {"type": "string", "nullable": true},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    }));
    assert!(messages(&schema, json!({"size": 3})).is_empty());
    assert!(messages(&schema, json!({"size": "1Gi"})).is_empty());
    assert!(messages(&schema, json!({"note": null})).is_empty());
    assert_eq!(
        messages(&schema, json!({"size": "1Ti"})),
        [r#"spec.size: Invalid value: "1Ti": spec.size in body should match '^[0-9]+(Gi|Mi)?$'"#]
    );
    assert_eq!(
        messages(&schema, json!({"size": true})),
        [
            r#"spec.size: Invalid value: "boolean": spec.size in body must be of type integer,string: "boolean""#,
            r#"<nil>: Invalid value: "": "spec.size" must validate at least one schema (anyOf)"#,
            r#"spec.size: Invalid value: "boolean": spec.size in body must be of type integer: "boolean""#,
        ]
    );
    assert_eq!(
        messages(&schema, json!({"tags": ["a", null]})),
        [
            r#"spec.tags[1]: Invalid value: "null": spec.tags[1] in body must be of type string: "null""#
        ]
    );
}

#[test]
fn list_types_report_duplicates() {
    let schema = schema_with_spec(json!({
        "type": "object",
        "properties": {
            "finalizers": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "ports": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}},
            },
        },
    }));
    assert_eq!(
        messages(&schema, json!({"finalizers": ["a", "b", "a", "a"]})),
        [r#"spec.finalizers[2]: Duplicate value: "a""#]
    );
    assert_eq!(
        messages(
            &schema,
            json!({"ports": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]})
        ),
        [r#"spec.ports[1]: Duplicate value: map[string]interface {}{"name":"a"}"#]
    );
}

#[test]
fn embedded_resources_need_type_meta() {
    let schema = schema_with_spec(json!({
        "type": "object",
        "properties": {
            "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true},
        },
    }));
    assert_eq!(
        messages(&schema, json!({"template": {"metadata": {"name": "x"}}})),
        [
            "spec.template.apiVersion: Required value: must not be empty",
            "spec.template.kind: Required value: must not be empty"
        ]
    );
    assert!(
        messages(
            &schema,
            json!({"template": {"apiVersion": "v1", "kind": "Pod", "spec": {"any": 1}}})
        )
        .is_empty()
    );
}

#[test]
fn updates_ratchet_unchanged_errors() {
    let schema = schema_with_spec(json!({
        "type": "object",
        "properties": {"replicas": {"type": "integer", "minimum": 1}, "name": {"type": "string", "maxLength": 3}},
    }));
    let old = json!({"apiVersion": "example.com/v1", "kind": "Example", "metadata": {"name": "x"}, "spec": {"replicas": 0, "name": "a"}});
    let unchanged_field = json!({"apiVersion": "example.com/v1", "kind": "Example", "metadata": {"name": "x"}, "spec": {"replicas": 0, "name": "b"}});
    assert!(schema.validate(&unchanged_field, Some(&old)).is_empty());
    let changed = json!({"apiVersion": "example.com/v1", "kind": "Example", "metadata": {"name": "x"}, "spec": {"replicas": -1, "name": "b"}});
    assert_eq!(
        schema
            .validate(&changed, Some(&old))
            .iter()
            .map(|error| error.message())
            .collect::<Vec<_>>(),
        [
            "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 1"
        ]
    );
}
