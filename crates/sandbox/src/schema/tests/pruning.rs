//! Pruning of unknown fields and the paths reported for `fieldValidation`.

use serde_json::json;

use super::schema_with_spec;

#[test]
fn unknown_fields_are_removed_and_named() {
    let schema = schema_with_spec(json!({
        "type": "object",
        "properties": {
            "replicas": {"type": "integer"},
            "members": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}},
            "template": {
                "type": "object",
                "x-kubernetes-embedded-resource": true,
                "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            },
        },
    }));
    let mut object = json!({
        "apiVersion": "example.com/v1",
        "kind": "Example",
        "metadata": {"name": "x", "labels": {"a": "b"}, "bogus": 1, "ownerReferences": [{"uid": "u", "weird": true}]},
        "spec": {
            "replicas": 1,
            "foo": 2,
            "members": [{"name": "a", "age": 3}],
            "extra": {"anything": {"goes": 1}, "known": {"a": "x", "b": "y"}},
            "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "t", "junk": 1}, "spec": {"free": 1}, "status": {}},
        },
        "status": {},
    });
    let removed = schema.prune(&mut object);
    assert_eq!(
        removed,
        [
            "metadata.bogus",
            "metadata.ownerReferences[0].weird",
            "spec.extra.known.b",
            "spec.foo",
            "spec.members[0].age",
            "spec.template.status",
            "status",
            "spec.template.metadata.junk",
        ]
    );
    assert_eq!(
        object,
        json!({
            "apiVersion": "example.com/v1",
            "kind": "Example",
            "metadata": {"name": "x", "labels": {"a": "b"}, "ownerReferences": [{"uid": "u"}]},
            "spec": {
                "replicas": 1,
                "members": [{"name": "a"}],
                "extra": {"anything": {"goes": 1}, "known": {"a": "x"}},
                "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "t"}, "spec": {"free": 1}},
            },
        })
    );
}
