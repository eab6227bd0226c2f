//! JSON merge patch, JSON patch and strategic merge patch.

use serde_json::json;

use super::{PatchError, TypeInfo, json_patch, merge_patch, strategic_merge_patch};
use crate::schema::StructuralSchema;

#[test]
fn merge_patch_follows_rfc_7386() {
    let target = json!({"a": "b", "c": {"d": "e", "f": "g"}, "list": [1, 2]});
    let patch = json!({"a": "z", "c": {"f": null}, "list": [3]});
    assert_eq!(
        merge_patch(&target, &patch),
        json!({"a": "z", "c": {"d": "e"}, "list": [3]})
    );
    assert_eq!(merge_patch(&target, &json!(null)), json!(null));
}

#[test]
fn json_patch_follows_rfc_6902() {
    let target = json!({"spec": {"replicas": 1, "members": ["a"]}});
    let patch = json!([
        {"op": "test", "path": "/spec/replicas", "value": 1},
        {"op": "replace", "path": "/spec/replicas", "value": 3},
        {"op": "add", "path": "/spec/members/-", "value": "b"},
    ]);
    assert_eq!(
        json_patch(&target, &patch),
        Ok(json!({"spec": {"replicas": 3, "members": ["a", "b"]}}))
    );
    let failing = json!([{"op": "test", "path": "/spec/replicas", "value": 2}]);
    assert!(matches!(
        json_patch(&target, &failing),
        Err(PatchError::Failed(_))
    ));
    assert!(matches!(
        json_patch(&target, &json!({"op": "add"})),
        Err(PatchError::Malformed(_))
    ));
}

#[test]
fn strategic_merge_is_refused_for_custom_resources() {
    let schema = StructuralSchema::compile(
        &json!({"type": "object", "properties": {"spec": {"type": "object"}}}),
    )
    .expect("compiles");
    let error = strategic_merge_patch(&json!({}), &json!({}), &TypeInfo::from_schema(&schema))
        .expect_err("415");
    assert_eq!(error.status_code(), 415);
    assert_eq!(error.reason(), "UnsupportedMediaType");
}

fn pod() -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "finalizers": ["a"], "labels": {"app": "x", "tier": "db"}},
        "spec": {
            "containers": [
                {"name": "etcd", "image": "etcd:3.5", "env": [{"name": "A", "value": "1"}], "ports": [{"containerPort": 2379}]},
                {"name": "sidecar", "image": "busybox"},
            ],
            "tolerations": [{"key": "a"}],
            "volumes": [{"name": "data", "emptyDir": {}}],
        },
    })
}

#[test]
fn strategic_merge_uses_the_core_types_merge_keys() {
    let types = TypeInfo::builtin("", "v1", "Pod");
    let patch = json!({
        "metadata": {"finalizers": ["b"], "labels": {"tier": null}},
        "spec": {
            "containers": [{"name": "etcd", "image": "etcd:3.6", "env": [{"name": "B", "value": "2"}]}, {"name": "new", "image": "x"}],
            "tolerations": [{"key": "b"}],
        },
    });
    let merged = strategic_merge_patch(&pod(), &patch, &types).expect("merges");
    assert_eq!(merged["metadata"]["finalizers"], json!(["a", "b"]));
    assert_eq!(merged["metadata"]["labels"], json!({"app": "x"}));
    assert_eq!(
        merged["spec"]["containers"],
        json!([
            {"name": "etcd", "image": "etcd:3.6", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}], "ports": [{"containerPort": 2379}]},
            {"name": "sidecar", "image": "busybox"},
            {"name": "new", "image": "x"},
        ])
    );
    assert_eq!(merged["spec"]["tolerations"], json!([{"key": "b"}]));
}

#[test]
fn strategic_merge_directives() {
    let types = TypeInfo::builtin("", "v1", "Pod");
    let delete_item = json!({"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}});
    let merged = strategic_merge_patch(&pod(), &delete_item, &types).expect("delete item");
    assert_eq!(
        merged["spec"]["containers"].as_array().map(Vec::len),
        Some(1)
    );

    let replace_map = json!({"metadata": {"labels": {"$patch": "replace", "only": "this"}}});
    let merged = strategic_merge_patch(&pod(), &replace_map, &types).expect("replace map");
    assert_eq!(merged["metadata"]["labels"], json!({"only": "this"}));

    let delete_primitive = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}});
    let merged =
        strategic_merge_patch(&pod(), &delete_primitive, &types).expect("delete from list");
    assert_eq!(merged["metadata"]["finalizers"], json!([]));

    let reorder = json!({"spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "etcd"}], "containers": [{"name": "etcd", "image": "etcd:3.7"}]}});
    let merged = strategic_merge_patch(&pod(), &reorder, &types).expect("reorder");
    let names: Vec<&str> = merged["spec"]["containers"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["sidecar", "etcd"]);

    let retain = json!({"spec": {"volumes": [{"name": "data", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/d"}}]}});
    let merged = strategic_merge_patch(&pod(), &retain, &types).expect("retain keys");
    assert_eq!(
        merged["spec"]["volumes"],
        json!([{"name": "data", "hostPath": {"path": "/d"}}])
    );

    let replace_list =
        json!({"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "o"}]}});
    let merged = strategic_merge_patch(&pod(), &replace_list, &types).expect("replace list");
    assert_eq!(
        merged["spec"]["containers"],
        json!([{"name": "only", "image": "o"}])
    );
}

#[test]
fn service_ports_merge_by_port() {
    let types = TypeInfo::builtin("", "v1", "Service");
    let service = json!({"spec": {"ports": [{"port": 2379, "name": "client"}, {"port": 2380, "name": "peer"}]}});
    let patch = json!({"spec": {"ports": [{"port": 2380, "targetPort": 12380}]}});
    let merged = strategic_merge_patch(&service, &patch, &types).expect("merges");
    assert_eq!(
        merged["spec"]["ports"],
        json!([{"port": 2379, "name": "client"}, {"port": 2380, "name": "peer", "targetPort": 12380}])
    );
}

/// CustomResourceDefinition's schema refers to itself (JSONSchemaProps): its type tree is built
/// once, with the self-reference typed by deduction, and strategic merge still follows the typed
/// part above it: labels merge, `spec.versions` is atomic (`+listType=atomic`) and is replaced.
#[test]
fn crd_types_are_bounded_despite_the_self_referencing_schema() {
    let types = TypeInfo::builtin("apiextensions.k8s.io", "v1", "CustomResourceDefinition");
    assert!(types.supports_strategic_merge());
    let crd = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"versions": [
        {"name": "v1", "served": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
        {"name": "v2", "served": false},
    ]}});
    let patch = json!({"metadata": {"labels": {"b": "2"}},
        "spec": {"versions": [{"name": "v2", "served": true}]}});
    let merged = strategic_merge_patch(&crd, &patch, &types).expect("merges");
    assert_eq!(merged["metadata"]["labels"], json!({"a": "1", "b": "2"}));
    assert_eq!(
        merged["spec"]["versions"],
        json!([{"name": "v2", "served": true}])
    );
}

/// An atomic list (PodStatus.containerStatuses) is replaced by the patch's list; a
/// `{"$patch": "replace"}` item in it is the directive, never stored as an empty item.
#[test]
fn replace_directive_in_an_atomic_list_is_not_an_item() {
    let types = TypeInfo::builtin("", "v1", "Pod");
    let pod = json!({"status": {"containerStatuses": [{"name": "old", "ready": false}]}});
    let patch = json!({"status": {"containerStatuses": [
        {"$patch": "replace"},
        {"name": "etcd", "ready": true},
    ]}});
    let merged = strategic_merge_patch(&pod, &patch, &types).expect("merges");
    assert_eq!(
        merged["status"]["containerStatuses"],
        json!([{"name": "etcd", "ready": true}])
    );
}
