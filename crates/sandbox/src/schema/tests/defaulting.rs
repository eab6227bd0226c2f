//! Defaulting as the API server does it.

use serde_json::json;

use super::schema_with_spec;

#[test]
fn defaults_apply_at_every_level() {
    let schema = schema_with_spec(json!({
        "type": "object",
        "properties": {
            "replicas": {"type": "integer", "default": 3},
            "storage": {
                "type": "object",
                "default": {},
                "properties": {"size": {"type": "string", "default": "1Gi"}, "medium": {"type": "string"}},
            },
            "members": {
                "type": "array",
                "items": {"type": "object", "properties": {"role": {"type": "string", "default": "voter"}}},
            },
            "limits": {
                "type": "object",
                "additionalProperties": {"type": "object", "properties": {"unit": {"type": "string", "default": "Mi"}}},
            },
            "note": {"type": "string", "nullable": true, "default": "none"},
            "tag": {"type": "string", "default": "latest"},
            "gone": {"type": "string"},
        },
    }));
    let mut object = json!({
        "spec": {
            "members": [{}, {"role": "learner"}],
            "limits": {"memory": {}},
            "note": null,
            "tag": null,
            "gone": null,
        },
    });
    schema.apply_defaults(&mut object);
    assert_eq!(
        object,
        json!({
            "spec": {
                "replicas": 3,
                "storage": {"size": "1Gi"},
                "members": [{"role": "voter"}, {"role": "learner"}],
                "limits": {"memory": {"unit": "Mi"}},
                "note": null,
                "tag": "latest",
            },
        })
    );
}
