//! Managed fields as kube-apiserver writes them: fieldsV1, ownership, conflicts, pruning.

use serde_json::{Value, json};

use super::{apply, record_update};
use crate::patch::TypeInfo;
use crate::schema::StructuralSchema;

const T1: &str = "2026-01-01T00:00:00Z";
const T2: &str = "2026-01-01T00:01:00Z";
const T3: &str = "2026-01-01T00:02:00Z";

fn types() -> TypeInfo {
    let schema = StructuralSchema::compile(&json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "replicas": {"type": "integer"},
                    "paused": {"type": "boolean"},
                    "version": {"type": "string"},
                    "args": {"type": "array", "items": {"type": "string"}},
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "members": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "role": {"type": "string"}}},
                    },
                },
            },
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
        },
    }))
    .expect("schema compiles");
    TypeInfo::from_schema(&schema)
}

fn object(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Example", "metadata": {"name": "x", "labels": {"app": "etcd"}}, "spec": spec})
}

fn stored(mut object: Value) -> Value {
    object["metadata"]["uid"] = json!("0000-1111");
    object
}

fn entry(manager: &str, operation: &str, time: &str, fields: Value) -> Value {
    json!({"manager": manager, "operation": operation, "apiVersion": "example.com/v1", "time": time, "fieldsType": "FieldsV1", "fieldsV1": fields})
}

#[test]
fn create_records_an_update_entry() {
    let mut created = object(json!({"replicas": 1, "members": [{"name": "a", "role": "voter"}]}));
    record_update(None, &mut created, "kubectl-create", None, &types(), T1);
    assert_eq!(
        created["metadata"]["managedFields"],
        json!([entry(
            "kubectl-create",
            "Update",
            T1,
            json!({
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {
                    ".": {},
                    "f:replicas": {},
                    "f:members": {".": {}, "k:{\"name\":\"a\"}": {".": {}, "f:name": {}, "f:role": {}}},
                },
            }),
        )])
    );
}

#[test]
fn updates_take_fields_from_other_managers() {
    let types = types();
    let mut created = object(json!({"replicas": 1, "version": "3.5"}));
    record_update(None, &mut created, "kubectl-create", None, &types, T1);
    let old = stored(created);
    let mut updated = old.clone();
    updated["spec"]["replicas"] = json!(3);
    record_update(Some(&old), &mut updated, "operator", None, &types, T2);
    assert_eq!(
        updated["metadata"]["managedFields"],
        json!([
            entry(
                "kubectl-create",
                "Update",
                T1,
                json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {".": {}, "f:version": {}}})
            ),
            entry(
                "operator",
                "Update",
                T2,
                json!({"f:spec": {"f:replicas": {}}})
            ),
        ])
    );
}

#[test]
fn objects_without_managed_fields_are_not_tracked_by_updates() {
    let old = stored(object(json!({"replicas": 1})));
    let mut updated = old.clone();
    updated["spec"]["replicas"] = json!(2);
    record_update(Some(&old), &mut updated, "operator", None, &types(), T2);
    assert!(updated["metadata"].get("managedFields").is_none());
}

#[test]
fn status_writes_record_the_subresource() {
    let types = types();
    let mut created = object(json!({"replicas": 1}));
    record_update(None, &mut created, "kubectl-create", None, &types, T1);
    let old = stored(created);
    let mut updated = old.clone();
    updated["status"] = json!({"phase": "Running"});
    record_update(
        Some(&old),
        &mut updated,
        "operator",
        Some("status"),
        &types,
        T2,
    );
    let entries = updated["metadata"]["managedFields"]
        .as_array()
        .expect("entries");
    assert_eq!(entries[1]["subresource"], "status");
    assert_eq!(
        entries[1]["fieldsV1"],
        json!({"f:status": {".": {}, "f:phase": {}}})
    );
}

#[test]
fn apply_conflicts_with_other_managers_unless_forced() {
    let types = types();
    let mut created = object(json!({"replicas": 1, "version": "3.5"}));
    record_update(None, &mut created, "kubectl-create", None, &types, T1);
    let live = stored(created);
    let config = json!({"apiVersion": "example.com/v1", "kind": "Example", "metadata": {"name": "x"}, "spec": {"replicas": 3, "version": "3.5"}});
    let conflicts =
        apply(Some(&live), &config, "kubectl", false, None, &types, T2).expect_err("conflict");
    assert_eq!(
        conflicts.message(),
        r#"Apply failed with 1 conflict: conflict with "kubectl-create" using example.com/v1: .spec.replicas"#
    );
    assert_eq!(
        conflicts.conflicts[0].cause_message(),
        r#"conflict with "kubectl-create" using example.com/v1"#
    );

    let forced =
        apply(Some(&live), &config, "kubectl", true, None, &types, T2).expect("forced apply");
    assert_eq!(forced["spec"]["replicas"], 3);
    assert_eq!(
        forced["metadata"]["managedFields"],
        json!([
            entry(
                "kubectl",
                "Apply",
                T2,
                json!({"f:spec": {"f:replicas": {}, "f:version": {}}})
            ),
            entry(
                "kubectl-create",
                "Update",
                T1,
                json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {".": {}, "f:version": {}}})
            ),
        ])
    );
}

#[test]
fn several_conflicts_are_grouped_by_manager() {
    let types = types();
    let mut created = object(json!({"replicas": 1, "version": "3.5"}));
    record_update(None, &mut created, "kubectl-create", None, &types, T1);
    let live = stored(created);
    let config = json!({"apiVersion": "example.com/v1", "kind": "Example", "metadata": {"name": "x"}, "spec": {"replicas": 3, "version": "3.6"}});
    let conflicts =
        apply(Some(&live), &config, "kubectl", false, None, &types, T2).expect_err("conflicts");
    assert_eq!(
        conflicts.message(),
        "Apply failed with 2 conflicts: conflicts with \"kubectl-create\" using example.com/v1:\n- .spec.replicas\n- .spec.version"
    );
}

#[test]
fn apply_creates_and_prunes_what_it_stops_applying() {
    let types = types();
    let first = json!({
        "apiVersion": "example.com/v1", "kind": "Example", "metadata": {"name": "x"},
        "spec": {"replicas": 3, "paused": true, "members": [{"name": "a", "role": "voter"}, {"name": "b"}], "tags": ["x", "y"]},
    });
    let created = apply(None, &first, "kubectl", false, None, &types, T1).expect("create");
    assert_eq!(
        created["metadata"]["managedFields"],
        json!([entry(
            "kubectl",
            "Apply",
            T1,
            json!({"f:spec": {
                "f:replicas": {},
                "f:paused": {},
                "f:members": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}, "f:role": {}}, "k:{\"name\":\"b\"}": {".": {}, "f:name": {}}},
                "f:tags": {"v:\"x\"": {}, "v:\"y\"": {}},
            }}),
        )])
    );
    let live = stored(created);
    let second = json!({
        "apiVersion": "example.com/v1", "kind": "Example", "metadata": {"name": "x"},
        "spec": {"replicas": 3, "members": [{"name": "b"}], "tags": ["y"]},
    });
    let pruned =
        apply(Some(&live), &second, "kubectl", false, None, &types, T2).expect("second apply");
    assert_eq!(
        pruned["spec"],
        json!({"replicas": 3, "members": [{"name": "b"}], "tags": ["y"]})
    );
    assert_eq!(pruned["metadata"]["uid"], "0000-1111");
}

#[test]
fn fields_another_manager_owns_survive_pruning_and_shared_values_do_not_conflict() {
    let types = types();
    let first = json!({"apiVersion": "example.com/v1", "kind": "Example", "metadata": {"name": "x"}, "spec": {"replicas": 3, "paused": true}});
    let created = stored(apply(None, &first, "kubectl", false, None, &types, T1).expect("create"));
    let same_value = json!({"apiVersion": "example.com/v1", "kind": "Example", "metadata": {"name": "x"}, "spec": {"paused": true}});
    let shared = stored(
        apply(
            Some(&created),
            &same_value,
            "operator",
            false,
            None,
            &types,
            T2,
        )
        .expect("same value shares"),
    );
    let dropped = json!({"apiVersion": "example.com/v1", "kind": "Example", "metadata": {"name": "x"}, "spec": {"replicas": 3}});
    let kept = apply(Some(&shared), &dropped, "kubectl", false, None, &types, T3).expect("apply");
    assert_eq!(kept["spec"], json!({"replicas": 3, "paused": true}));
    // Both applies changed nothing, so, as in kube-apiserver, neither records a new time: the
    // operator's entry has none at all.
    let mut operator = entry("operator", "Apply", T2, json!({"f:spec": {"f:paused": {}}}));
    operator.as_object_mut().map(|fields| fields.remove("time"));
    assert_eq!(
        kept["metadata"]["managedFields"],
        json!([
            operator,
            entry(
                "kubectl",
                "Apply",
                T1,
                json!({"f:spec": {"f:replicas": {}}})
            )
        ])
    );
}

#[test]
fn no_op_apply_keeps_the_object_and_time() {
    let types = types();
    let config = json!({"apiVersion": "example.com/v1", "kind": "Example", "metadata": {"name": "x"}, "spec": {"replicas": 3}});
    let created = stored(apply(None, &config, "kubectl", false, None, &types, T1).expect("create"));
    let again = apply(Some(&created), &config, "kubectl", false, None, &types, T2).expect("no-op");
    assert_eq!(again, created);
}

#[test]
fn first_apply_on_an_untracked_object_credits_existing_fields() {
    let types = types();
    let live = stored(object(json!({"replicas": 1, "version": "3.5"})));
    let config = json!({"apiVersion": "example.com/v1", "kind": "Example", "metadata": {"name": "x"}, "spec": {"paused": false}});
    let applied = apply(Some(&live), &config, "kubectl", false, None, &types, T2).expect("apply");
    let managers: Vec<&str> = applied["metadata"]["managedFields"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|entry| entry["manager"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(managers, ["kubectl", "before-first-apply"]);
    assert_eq!(
        applied["spec"],
        json!({"replicas": 1, "version": "3.5", "paused": false})
    );
}

#[test]
fn builtin_kinds_merge_containers_by_name() {
    let types = TypeInfo::builtin("apps", "v1", "Deployment");
    let live = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}]}}},
    });
    let config = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b:2"}]}}},
    });
    let applied = apply(Some(&live), &config, "kubectl", true, None, &types, T1).expect("apply");
    assert_eq!(
        applied["spec"]["template"]["spec"]["containers"],
        json!([{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"}])
    );
}
