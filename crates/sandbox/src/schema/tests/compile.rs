//! CRD schema checks at registration: structural schemas, defaults, CEL rules.

use serde_json::{Value, json};

use crate::schema::StructuralSchema;

fn compile_errors(raw: Value) -> Vec<String> {
    match StructuralSchema::compile(&raw) {
        Ok(_) => Vec::new(),
        Err(error) => error.causes.iter().map(|cause| cause.message()).collect(),
    }
}

fn with_spec(spec: Value) -> Value {
    json!({"type": "object", "properties": {"spec": spec}})
}

#[test]
fn non_structural_schemas_are_rejected() {
    assert_eq!(
        compile_errors(with_spec(
            json!({"type": "object", "properties": {"size": {"description": "no type"}}})
        )),
        [
            "openAPIV3Schema.properties[spec].properties[size].type: Required value: must not be empty for specified object fields"
        ]
    );
    assert_eq!(
        compile_errors(with_spec(json!({"type": "array"}))),
        ["openAPIV3Schema.properties[spec].items: Required value: must be specified"]
    );
    assert_eq!(
        compile_errors(with_spec(
            json!({"type": "object", "anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}}]})
        )),
        [
            "openAPIV3Schema.properties[spec].anyOf[0].properties[a].type: Forbidden: must be empty to be structural",
            "openAPIV3Schema.properties[spec].anyOf[0].type: Forbidden: must be empty to be structural",
        ]
    );
    assert_eq!(
        compile_errors(
            json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {"type": "object"}}}}})
        ),
        [
            "openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
        ]
    );
    assert!(compile_errors(json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 63}}}}})).is_empty());
    assert_eq!(
        compile_errors(
            json!({"type": "object", "anyOf": [{"properties": {"a": {"minLength": 1}}}], "properties": {"b": {"type": "string"}}})
        ),
        [
            "openAPIV3Schema.properties[a]: Required value: because it is defined in openAPIV3Schema.anyOf[0].properties[a]"
        ]
    );
    assert_eq!(
        compile_errors(json!({"type": "object", "nullable": true})),
        ["openAPIV3Schema.nullable: Forbidden: nullable cannot be true at the root"]
    );
    assert_eq!(
        compile_errors(with_spec(
            json!({"type": "string", "$ref": "#/definitions/x"})
        )),
        ["openAPIV3Schema.properties[spec].$ref: Forbidden: $ref is not supported"]
    );
}

#[test]
fn list_and_map_types_are_checked() {
    assert_eq!(
        compile_errors(with_spec(json!({
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {"name": {"type": "string"}}},
        }))),
        [
            "openAPIV3Schema.properties[spec].items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
        ]
    );
    assert_eq!(
        compile_errors(with_spec(
            json!({"type": "array", "x-kubernetes-list-type": "bag", "items": {"type": "string"}})
        )),
        [
            r#"openAPIV3Schema.properties[spec].x-kubernetes-list-type: Unsupported value: "bag": supported values: "atomic", "set", "map""#
        ]
    );
}

#[test]
fn defaults_must_validate() {
    assert_eq!(
        compile_errors(with_spec(
            json!({"type": "object", "properties": {"replicas": {"type": "integer", "minimum": 1, "default": 0}}})
        )),
        [
            "openAPIV3Schema.properties[spec].properties[replicas].default: Invalid value: 0:  in body should be greater than or equal to 1"
        ]
    );
    assert_eq!(
        compile_errors(with_spec(
            json!({"type": "object", "default": {"unknown": 1}, "properties": {"a": {"type": "string"}}})
        )),
        [
            r#"openAPIV3Schema.properties[spec].default: Invalid value: map[string]interface {}{"unknown":1}: must not have unknown fields"#
        ]
    );
}

#[test]
fn cel_rules_must_compile_and_use_known_functions_and_fields() {
    let spec = |rule: &str| {
        with_spec(json!({
            "type": "object",
            "properties": {"replicas": {"type": "integer"}, "name": {"type": "string"}},
            "x-kubernetes-validations": [{"rule": rule}],
        }))
    };
    assert!(compile_errors(spec("self.replicas >= 0 && self.name.startsWith('a')")).is_empty());
    let unknown_function = compile_errors(spec("frobnicate(self.replicas)"));
    assert_eq!(unknown_function.len(), 1);
    assert!(
        unknown_function[0].starts_with(
            r#"openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: map[string]interface {}{"rule":"frobnicate(self.replicas)"}: compilation failed: ERROR: <input>:1:1: undeclared reference to 'frobnicate' (in container '')"#
        ),
        "{unknown_function:?}"
    );
    let unknown_field = compile_errors(spec("self.replicaz > 0"));
    assert!(
        unknown_field[0]
            .contains("compilation failed: ERROR: <input>:1:6: undefined field 'replicaz'"),
        "{unknown_field:?}"
    );
    let syntax = compile_errors(spec("self.replicas >"));
    assert!(
        syntax[0].contains("compilation failed: ERROR: <input>:1:"),
        "{syntax:?}"
    );
    let unknown_variable = compile_errors(spec("object.spec.replicas > 0"));
    assert!(
        unknown_variable[0].contains("undeclared reference to 'object'"),
        "{unknown_variable:?}"
    );
}

#[test]
fn transition_rules_need_correlatable_positions() {
    let errors = compile_errors(with_spec(json!({
        "type": "array",
        "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]},
    })));
    assert_eq!(
        errors,
        [
            r#"openAPIV3Schema.properties[spec].items.x-kubernetes-validations[0].rule: Invalid value: "self == oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema within openAPIV3Schema.properties[spec]"#
        ]
    );
    let optional_without_old_self = compile_errors(with_spec(json!({
        "type": "string",
        "x-kubernetes-validations": [{"rule": "self != ''", "optionalOldSelf": true}],
    })));
    assert_eq!(
        optional_without_old_self,
        [
            "openAPIV3Schema.properties[spec].x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"
        ]
    );
}

#[test]
fn errors_carry_the_crd_version_path() {
    let error = StructuralSchema::compile(&with_spec(json!({"type": "array"})))
        .expect_err("invalid")
        .in_crd_version(1);
    assert_eq!(
        error.causes[0].message(),
        "spec.versions[1].schema.openAPIV3Schema.properties[spec].items: Required value: must be specified"
    );
}

/// The project's CRDs (generated by the API crate) must compile, as they must register on a
/// real cluster.
#[test]
fn project_crds_compile() {
    let directory = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds");
    let entries = std::fs::read_dir(&directory).expect("deploy/crds exists");
    let mut compiled = 0;
    for entry in entries {
        let path = entry.expect("directory entry").path();
        let text = std::fs::read_to_string(&path).expect("readable CRD");
        let crd: Value = serde_yaml::from_str(&text).expect("CRD YAML");
        for (index, version) in crd["spec"]["versions"]
            .as_array()
            .expect("versions")
            .iter()
            .enumerate()
        {
            let schema = &version["schema"]["openAPIV3Schema"];
            if let Err(error) = StructuralSchema::compile(schema) {
                panic!("{}: {}", path.display(), error.in_crd_version(index));
            }
            compiled += 1;
        }
    }
    assert!(compiled >= 4, "expected the four CRDs, compiled {compiled}");
}

/// The documented sample cluster passes the project's EtcdCluster schema after pruning and
/// defaulting, and a shrink of its storage is refused by the CRD's transition rule.
#[test]
fn sample_cluster_passes_and_storage_cannot_shrink() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/crds/etcdclusters.yaml");
    let crd: Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).expect("CRD file")).expect("CRD YAML");
    let schema =
        StructuralSchema::compile(&crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
            .expect("compiles");
    let mut cluster = json!({
        "apiVersion": "etcd-operator.cozystack.io/v1alpha2",
        "kind": "EtcdCluster",
        "metadata": {"name": "etcdcluster-sample", "namespace": "default", "uid": "u"},
        "spec": {"replicas": 3, "version": "3.6.11", "storage": {"size": "1Gi"}},
    });
    assert_eq!(schema.prune(&mut cluster), Vec::<String>::new());
    schema.apply_defaults(&mut cluster);
    assert_eq!(schema.validate(&cluster, None), []);
    let mut shrunk = cluster.clone();
    shrunk["spec"]["storage"]["size"] = json!("512Mi");
    let errors: Vec<String> = schema
        .validate(&shrunk, Some(&cluster))
        .iter()
        .map(|error| error.message())
        .collect();
    assert!(
        errors
            .iter()
            .any(|message| message.starts_with("spec.storage.size: Invalid value: ")),
        "{errors:?}"
    );
}
