//! `x-kubernetes-validations`: messages, paths, transition rules, Kubernetes CEL libraries.

use serde_json::{Value, json};

use super::{messages, schema_with_spec};
use crate::schema::{FieldErrorKind, StructuralSchema};

fn object(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Example", "metadata": {"name": "x"}, "spec": spec})
}

fn update_messages(schema: &StructuralSchema, old: Value, new: Value) -> Vec<String> {
    schema
        .validate(&object(new), Some(&object(old)))
        .iter()
        .map(|error| error.message())
        .collect()
}

#[test]
fn failed_rules_report_the_node_type_and_message() {
    let schema = schema_with_spec(json!({
        "type": "object",
        "properties": {
            "s3": {"type": "object", "properties": {"key": {"type": "string"}}},
            "pvc": {"type": "object", "properties": {"name": {"type": "string"}}},
            "replicas": {"type": "integer", "x-kubernetes-validations": [{"rule": "self % 2 == 1"}]},
        },
        "x-kubernetes-validations": [{"rule": "has(self.s3) != has(self.pvc)", "message": "exactly one of s3 or pvc must be set"}],
    }));
    assert!(messages(&schema, json!({"s3": {"key": "a"}, "replicas": 3})).is_empty());
    assert_eq!(
        messages(&schema, json!({"replicas": 2})),
        [
            r#"spec: Invalid value: "object": exactly one of s3 or pvc must be set"#,
            r#"spec.replicas: Invalid value: "integer": failed rule: self % 2 == 1"#,
        ]
    );
}

#[test]
fn root_rules_see_metadata_name() {
    let raw = json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"prefix": {"type": "string"}}}},
        "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith(self.spec.prefix)", "message": "name must start with the prefix"}],
    });
    let schema = StructuralSchema::compile(&raw).expect("compiles");
    assert!(
        schema
            .validate(&object(json!({"prefix": "x"})), None)
            .is_empty()
    );
    let errors = schema.validate(&object(json!({"prefix": "y"})), None);
    assert_eq!(
        errors[0].message(),
        r#"<nil>: Invalid value: "object": name must start with the prefix"#
    );
}

#[test]
fn transition_rules_need_an_old_value() {
    let schema = schema_with_spec(json!({
        "type": "object",
        "properties": {
            "medium": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "spec.medium is immutable"}]},
            "size": {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "x-kubernetes-int-or-string": true,
                "x-kubernetes-validations": [{"rule": "quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0", "message": "spec.size cannot be shrunk"}],
            },
        },
    }));
    assert!(messages(&schema, json!({"medium": "Memory", "size": "1Gi"})).is_empty());
    assert!(
        update_messages(
            &schema,
            json!({"medium": "Memory"}),
            json!({"medium": "Memory", "size": "1Gi"})
        )
        .is_empty()
    );
    assert_eq!(
        update_messages(
            &schema,
            json!({"medium": "", "size": "2Gi"}),
            json!({"medium": "Memory", "size": "1500Mi"})
        ),
        [
            r#"spec.medium: Invalid value: "string": spec.medium is immutable"#,
            r#"spec.size: Invalid value: "": spec.size cannot be shrunk"#
        ]
    );
    assert!(update_messages(&schema, json!({"size": 1}), json!({"size": "2Gi"})).is_empty());
}

#[test]
fn map_list_items_correlate_by_key_for_old_self() {
    let schema = schema_with_spec(json!({
        "type": "object",
        "properties": {
            "members": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {"name": {"type": "string"}, "role": {"type": "string"}},
                    "x-kubernetes-validations": [{"rule": "self.role == oldSelf.role", "message": "role is immutable"}],
                },
            },
        },
    }));
    let old =
        json!({"members": [{"name": "a", "role": "voter"}, {"name": "b", "role": "learner"}]});
    let reordered = json!({"members": [{"name": "b", "role": "learner"}, {"name": "a", "role": "voter"}, {"name": "c", "role": "x"}]});
    assert!(update_messages(&schema, old.clone(), reordered).is_empty());
    let changed = json!({"members": [{"name": "b", "role": "voter"}]});
    assert_eq!(
        update_messages(&schema, old, changed),
        [r#"spec.members[0]: Invalid value: "object": role is immutable"#]
    );
}

#[test]
fn macros_and_library_functions() {
    let schema = schema_with_spec(json!({
        "type": "object",
        "properties": {
            "names": {"type": "array", "items": {"type": "string"}},
            "limits": {"type": "object", "additionalProperties": {"type": "string"}},
            "version": {"type": "string"},
            "endpoint": {"type": "string"},
        },
        "x-kubernetes-validations": [
            {"rule": "!has(self.names) || self.names.all(n, n.matches('^[a-z]+$'))", "message": "names are lowercase"},
            {"rule": "!has(self.names) || self.names.exists_one(n, n == 'leader')", "message": "exactly one leader"},
            {"rule": "!has(self.names) || self.names.filter(n, n.size() > 6).size() == 0", "message": "short names"},
            {"rule": "!has(self.names) || self.names.map(n, n.upperAscii()).exists(n, n == 'LEADER')", "message": "map works"},
            {"rule": "!has(self.limits) || self.limits.all(k, isQuantity(self.limits[k]) && quantity(self.limits[k]).isLessThan(quantity('1Gi')))", "message": "limits under 1Gi"},
            {"rule": "!has(self.version) || isSemver(self.version)", "message": "version is semver"},
            {"rule": "!has(self.endpoint) || isURL(self.endpoint) && url(self.endpoint).getScheme() == 'https'", "message": "https endpoint"},
        ],
    }));
    assert_eq!(
        messages(
            &schema,
            json!({"names": ["leader", "a"], "limits": {"memory": "512Mi"}, "version": "1.2.3", "endpoint": "https://x"})
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        messages(
            &schema,
            json!({"names": ["Leader", "b"], "limits": {"memory": "2Gi"}, "version": "v1", "endpoint": "http://x"})
        ),
        [
            r#"spec: Invalid value: "object": names are lowercase"#,
            r#"spec: Invalid value: "object": exactly one leader"#,
            r#"spec: Invalid value: "object": limits under 1Gi"#,
            r#"spec: Invalid value: "object": version is semver"#,
            r#"spec: Invalid value: "object": https endpoint"#,
        ]
    );
}

#[test]
fn message_expression_reason_and_field_path() {
    let schema = schema_with_spec(json!({
        "type": "object",
        "properties": {"replicas": {"type": "integer"}, "mode": {"type": "string"}},
        "x-kubernetes-validations": [
            {"rule": "self.replicas <= 5", "messageExpression": "'replicas must be at most 5, got ' + string(self.replicas)", "fieldPath": ".replicas"},
            {"rule": "self.mode != 'legacy'", "message": "legacy mode is gone", "reason": "FieldValueForbidden", "fieldPath": ".mode"},
        ],
    }));
    let object = object(json!({"replicas": 7, "mode": "legacy"}));
    let errors = schema.validate(&object, None);
    assert_eq!(
        errors[0].message(),
        r#"spec.replicas: Invalid value: "object": replicas must be at most 5, got 7"#
    );
    assert_eq!(
        errors[1].message(),
        "spec.mode: Forbidden: legacy mode is gone"
    );
    assert_eq!(errors[1].kind, FieldErrorKind::Forbidden);
}

#[test]
fn runtime_errors_are_reported_with_the_rule() {
    let schema = schema_with_spec(json!({
        "type": "object",
        "properties": {"tls": {"type": "object", "properties": {"enabled": {"type": "boolean"}}}},
        "x-kubernetes-validations": [{"rule": "self.tls.enabled"}],
    }));
    assert_eq!(
        messages(&schema, json!({})),
        [r#"spec: Invalid value: "object": no such key: tls evaluating rule: self.tls.enabled"#]
    );
}

#[test]
fn unchanged_values_ratchet_non_transition_rules() {
    let schema = schema_with_spec(json!({
        "type": "object",
        "properties": {"name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.size() <= 3", "message": "short"}]}, "other": {"type": "string"}},
    }));
    assert!(
        update_messages(
            &schema,
            json!({"name": "toolong"}),
            json!({"name": "toolong", "other": "x"})
        )
        .is_empty()
    );
    assert_eq!(
        update_messages(
            &schema,
            json!({"name": "toolong"}),
            json!({"name": "toolonger"})
        ),
        [r#"spec.name: Invalid value: "string": short"#]
    );
}
