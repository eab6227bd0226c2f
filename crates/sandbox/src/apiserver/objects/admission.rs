//! Checks and defaults per kind, run on every create and update before anything is stored:
//! the namespace lifecycle, built-in defaults and validation, custom resource schemas.

use serde_json::{Value, json};

use super::FieldValidation;
use super::metadata::validate_name;
use crate::apiserver::error::{ApiError, ApiResult, StatusCause};
use crate::apiserver::kinds::defaults;
use crate::apiserver::registry::ResourceType;
use crate::apiserver::server::ApiServer;
use crate::apiserver::store::ResourceId;

/// New objects may only go into a namespace that exists and is not being deleted.
pub fn check_namespace(
    server: &ApiServer,
    kind: &ResourceType,
    namespace: &str,
    name: &str,
) -> ApiResult<()> {
    if !kind.namespaced {
        return Ok(());
    }
    let Some(ns) = server
        .store
        .get(&ResourceId::new("", "namespaces"), "", namespace)
    else {
        return Err(ApiError::not_found("", "namespaces", namespace));
    };
    if ns["metadata"]["deletionTimestamp"].is_string() && kind.kind != "Event" {
        return Err(ApiError::forbidden(format!(
            "{} \"{name}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
            kind.plural,
        )));
    }
    Ok(())
}

/// Defaults, prunes and validates `object` (the new state), with `old` on updates. Returns the
/// warnings to send back (pruned fields under `fieldValidation=Warn`).
pub fn admit(
    kind: &ResourceType,
    version: &str,
    object: &mut Value,
    old: Option<&Value>,
    field_validation: FieldValidation,
) -> ApiResult<Vec<String>> {
    admit_write(kind, version, object, old, field_validation, false)
}

/// [`admit`] of a write to the object or, with `status`, to its status subresource: a custom
/// resource's status update is checked against the schema of `status` alone, its errors named
/// relative to it (`quorumRecovery.x in body should ...` under the field `status.quorumRecovery.x`),
/// as kube-apiserver's status strategy does.
pub fn admit_write(
    kind: &ResourceType,
    version: &str,
    object: &mut Value,
    old: Option<&Value>,
    field_validation: FieldValidation,
    status: bool,
) -> ApiResult<Vec<String>> {
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let mut causes: Vec<StatusCause> = Vec::new();
    if old.is_none() {
        causes.extend(validate_name(&kind.kind, &kind.group, &name));
    }
    causes.extend(super::metadata::validate_string_maps(object));
    let mut warnings = Vec::new();
    if kind.custom {
        warnings = admit_custom(
            kind,
            version,
            object,
            old,
            field_validation,
            status,
            &mut causes,
        )?;
    } else {
        defaults::apply(&kind.group, &kind.kind, object);
        causes.extend(validate_builtin(kind, object));
    }
    if !causes.is_empty() {
        return Err(ApiError::invalid(&kind.group, &kind.kind, &name, causes));
    }
    Ok(warnings)
}

/// The custom resource path, as kube-apiserver runs it: prune, default, validate (with CEL).
fn admit_custom(
    kind: &ResourceType,
    version: &str,
    object: &mut Value,
    old: Option<&Value>,
    field_validation: FieldValidation,
    status: bool,
    causes: &mut Vec<StatusCause>,
) -> ApiResult<Vec<String>> {
    let Some(schema) = kind.version(version).and_then(|v| v.schema.clone()) else {
        return Ok(Vec::new());
    };
    let pruned = schema.prune(object);
    let warnings: Vec<String> = pruned
        .iter()
        .map(|path| format!("unknown field \"{}\"", path.trim_start_matches('.')))
        .collect();
    if field_validation == FieldValidation::Strict && !warnings.is_empty() {
        let name = object["metadata"]["name"].as_str().unwrap_or("");
        return Err(ApiError::bad_request(format!(
            "{}.{} \"{name}\" is invalid: {}",
            kind.kind,
            kind.group,
            warnings.join(", ")
        )));
    }
    schema.apply_defaults(object);
    let errors = if status {
        schema.validate_status(object, old)
    } else {
        schema.validate(object, old)
    };
    for error in errors {
        causes.push(crate::apiserver::crd::status_cause(&error));
    }

    Ok(if field_validation == FieldValidation::Ignore {
        Vec::new()
    } else {
        warnings
    })
}

fn required(field: &str) -> StatusCause {
    StatusCause {
        reason: "FieldValueRequired".into(),
        message: "Required value".into(),
        field: field.into(),
    }
}

/// The checks of built-in kinds that clients hit in practice.
fn validate_builtin(kind: &ResourceType, object: &Value) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    match (kind.group.as_str(), kind.kind.as_str()) {
        ("", "Pod") => causes.extend(validate_pod_spec(&object["spec"], "spec")),
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet") | ("batch", "Job") => {
            if kind.kind != "Job" && object["spec"]["selector"].is_null() {
                causes.push(required("spec.selector"));
            }
            causes.extend(validate_pod_spec(
                &object["spec"]["template"]["spec"],
                "spec.template.spec",
            ));
            if let Some(replicas) = object["spec"]["replicas"].as_i64()
                && replicas < 0
            {
                causes.push(StatusCause {
                    reason: "FieldValueInvalid".into(),
                    message: format!(
                        "Invalid value: {replicas}: must be greater than or equal to 0"
                    ),
                    field: "spec.replicas".into(),
                });
            }
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding")
            if object["roleRef"]["name"].as_str().is_none_or(str::is_empty) =>
        {
            causes.push(required("roleRef.name"));
        }
        ("policy", "PodDisruptionBudget")
            if !object["spec"]["minAvailable"].is_null()
                && !object["spec"]["maxUnavailable"].is_null() =>
        {
            causes.push(StatusCause {
                reason: "FieldValueInvalid".into(),
                message: "Invalid value: minAvailable and maxUnavailable cannot be both set".into(),
                field: "spec".into(),
            });
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            causes.extend(crate::apiserver::crd::validate(object));
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            causes.extend(super::policies::validate_policy(object));
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding")
            if object["spec"]["policyName"]
                .as_str()
                .is_none_or(str::is_empty) =>
        {
            causes.push(required("spec.policyName"));
        }
        _ => {}
    }
    causes
}

fn validate_pod_spec(spec: &Value, path: &str) -> Vec<StatusCause> {
    let mut causes = Vec::new();
    match spec["containers"].as_array() {
        Some(containers) if !containers.is_empty() => {
            for (i, container) in containers.iter().enumerate() {
                for field in ["name", "image"] {
                    if container[field].as_str().is_none_or(str::is_empty) {
                        causes.push(required(&format!("{path}.containers[{i}].{field}")));
                    }
                }
            }
        }
        _ => causes.push(required(&format!("{path}.containers"))),
    }
    causes
}

/// A Service's ClusterIP: kept when given (and free), allocated otherwise; `None` stays headless.
pub fn assign_cluster_ip(server: &ApiServer, service: &mut Value) -> ApiResult<()> {
    let spec = &mut service["spec"];
    if spec["type"] == "ExternalName" {
        return Ok(());
    }
    let requested = spec["clusterIP"].as_str().unwrap_or("").to_string();
    let ip = match requested.as_str() {
        "None" => "None".to_string(),
        "" => server
            .service_ips
            .allocate()
            .ok_or_else(|| ApiError::internal("the service IP range is exhausted"))?
            .to_string(),
        wanted => {
            let parsed: std::net::Ipv4Addr = wanted.parse().map_err(|_| {
                ApiError::invalid_field(
                    "",
                    "Service",
                    "",
                    "spec.clusterIP",
                    "FieldValueInvalid",
                    &format!("Invalid value: {wanted:?}: must be a valid IP address"),
                )
            })?;
            if !server.service_ips.claim(parsed) {
                return Err(ApiError::invalid_field(
                    "",
                    "Service",
                    "",
                    "spec.clusterIPs",
                    "FieldValueInvalid",
                    &format!(
                        "Invalid value: []string{{{wanted:?}}}: failed to allocate IP {wanted}: provided IP is already allocated"
                    ),
                ));
            }
            wanted.to_string()
        }
    };
    spec["clusterIP"] = json!(ip);
    spec["clusterIPs"] = json!([ip]);
    if ip != "None" {
        spec["ipFamilies"] = json!(["IPv4"]);
        spec["ipFamilyPolicy"] = json!("SingleStack");
    }
    Ok(())
}

/// Gives back what a deleted object held (a Service's ClusterIP).
pub fn release(server: &ApiServer, kind: &ResourceType, object: &Value) {
    if kind.group.is_empty()
        && kind.kind == "Service"
        && let Some(ip) = object["spec"]["clusterIP"]
            .as_str()
            .and_then(|ip| ip.parse().ok())
    {
        server.service_ips.release(ip);
    }
}

/// Work that must be visible before the client hears back: a stored CRD is served at once.
pub fn after_write(server: &ApiServer, kind: &ResourceType, object: &Value) {
    if kind.group == "apiextensions.k8s.io"
        && kind.kind == "CustomResourceDefinition"
        && let Some(name) = object["metadata"]["name"].as_str()
    {
        crate::apiserver::lifecycle::crds::sync(server, name);
    }
}
