//! Subresources with behaviour of their own: scale, pods/log, pods/eviction, pods/binding,
//! serviceaccounts/token, and the access reviews behind `kubectl auth can-i`.

use axum::body::Body;
use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::Call;
use super::negotiate::json_response;
use super::patch::{PatchRequest, PatchType, apply_patch};
use super::resources::{Target, write_options};
use crate::apiserver::auth::Identity;
use crate::apiserver::auth::rbac::{Attributes, is_allowed};
use crate::apiserver::error::{ApiError, ApiResult};
use crate::apiserver::logs::{LogError, LogRequest};
use crate::apiserver::objects::metadata::{now, timestamp_after};
use crate::apiserver::objects::{self, WriteOptions, update_with};
use crate::apiserver::pdb;
use crate::apiserver::selector::LabelSelector;

/// Reads `.a.b` of an object.
fn at<'a>(object: &'a Value, path: &str) -> &'a Value {
    path.trim_start_matches('.')
        .split('.')
        .fold(object, |value, key| &value[key])
}

/// Writes `.a.b` of an object, creating the objects on the way.
fn set_at(object: &mut Value, path: &str, value: Value) {
    let mut current = object;
    for key in path.trim_start_matches('.').split('.') {
        if !current.is_object() {
            *current = json!({});
        }
        current = &mut current[key];
    }
    *current = value;
}

fn to_scale(target: &Target, object: &Value) -> ApiResult<Value> {
    let paths = target
        .kind
        .version(&target.version)
        .and_then(|v| v.scale.clone())
        .ok_or_else(|| ApiError::no_route("scale"))?;
    let selector = paths
        .label_selector
        .as_deref()
        .map(|p| at(object, p))
        .unwrap_or(&Value::Null);
    let selector = match selector {
        Value::String(s) => s.clone(),
        Value::Object(_) => LabelSelector::from_object(selector)
            .map(|_| selector_string(selector))
            .unwrap_or_default(),
        _ => String::new(),
    };
    let metadata = &object["metadata"];
    Ok(json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {"name": metadata["name"], "namespace": metadata["namespace"], "uid": metadata["uid"],
            "resourceVersion": metadata["resourceVersion"], "creationTimestamp": metadata["creationTimestamp"]},
        "spec": {"replicas": at(object, &paths.spec_replicas).as_i64().unwrap_or(0)},
        "status": {"replicas": at(object, &paths.status_replicas).as_i64().unwrap_or(0), "selector": selector},
    }))
}

/// `matchLabels` as the `a=b,c=d` string the Scale status carries.
fn selector_string(selector: &Value) -> String {
    let mut terms: Vec<String> = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    for e in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let key = e["key"].as_str().unwrap_or("");
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        terms.push(match e["operator"].as_str().unwrap_or("") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "DoesNotExist" => format!("!{key}"),
            _ => key.to_string(),
        });
    }
    terms.join(",")
}

pub fn scale(call: &Call, target: &Target, verb: &str) -> ApiResult<Response<Body>> {
    let name = target.name()?.to_string();
    let kind = &target.kind;
    let storage = kind.storage_id();
    let current = call
        .server
        .store
        .get(&storage, &target.namespace, &name)
        .ok_or_else(|| ApiError::not_found(&kind.group, &kind.plural, &name))?;
    if verb == "get" {
        return Ok(json_response(
            StatusCode::OK,
            &to_scale(target, &current)?,
            &[],
        ));
    }
    let spec_path = kind
        .version(&target.version)
        .and_then(|v| v.scale.clone())
        .map(|s| s.spec_replicas)
        .unwrap_or_default();
    let body = call.body_json()?;
    let patch_type = if verb == "patch" {
        Some(PatchType::from_content_type(call.content_type())?)
    } else {
        None
    };
    let options = write_options(call)?;
    let written = update_with(
        &call.server,
        kind,
        &target.version,
        &target.namespace,
        &name,
        None,
        &options,
        &mut |object| {
            let scale = to_scale(target, object)?;
            let wanted = match patch_type {
                Some(patch_type) => {
                    let request = PatchRequest {
                        patch_type,
                        document: &body,
                        manager: options.field_manager.as_deref().unwrap_or(""),
                        force: true,
                    };
                    apply_patch(kind, &target.version, &request, Some(&scale), Some("scale"))?
                }
                None => body.clone(),
            };
            if let Some(rv) = wanted["metadata"]["resourceVersion"]
                .as_str()
                .filter(|rv| !rv.is_empty())
                && Some(rv) != object["metadata"]["resourceVersion"].as_str()
            {
                return Err(ApiError::conflict(
                    &kind.group,
                    &kind.plural,
                    &name,
                    "the object has been modified; please apply your changes to the latest version and try again",
                ));
            }
            let replicas = wanted["spec"]["replicas"].as_i64().ok_or_else(|| {
                ApiError::invalid_field(
                    "autoscaling",
                    "Scale",
                    &name,
                    "spec.replicas",
                    "FieldValueRequired",
                    "Required value",
                )
            })?;
            if replicas < 0 {
                return Err(ApiError::invalid_field(
                    "autoscaling",
                    "Scale",
                    &name,
                    "spec.replicas",
                    "FieldValueInvalid",
                    &format!("Invalid value: {replicas}: must be greater than or equal to 0"),
                ));
            }
            let mut updated = object.clone();
            set_at(&mut updated, &spec_path, json!(replicas));
            Ok(updated)
        },
    )?;
    Ok(json_response(
        StatusCode::OK,
        &to_scale(target, &written.object)?,
        &written.warnings,
    ))
}

pub async fn pod_log(call: &Call, target: &Target) -> ApiResult<Response<Body>> {
    let name = target.name()?.to_string();
    let pod = call
        .server
        .store
        .get(&target.kind.storage_id(), &target.namespace, &name)
        .ok_or_else(|| ApiError::not_found("", "pods", &name))?;
    let containers: Vec<String> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect();
    let container = match (call.param("container"), containers.as_slice()) {
        (Some(c), _)
            if containers.iter().any(|n| n == c)
                || pod["spec"]["initContainers"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|i| i["name"] == c) =>
        {
            c.to_string()
        }
        (Some(c), _) => {
            return Err(ApiError::bad_request(format!(
                "container {c} is not valid for pod {name}"
            )));
        }
        (None, [only]) => only.clone(),
        (None, _) => {
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {name}, choose one of: [{}]",
                containers.join(" ")
            )));
        }
    };
    let request = LogRequest {
        namespace: target.namespace.clone(),
        pod: name.clone(),
        container: container.clone(),
        previous: call.param("previous") == Some("true"),
        tail_lines: call.param("tailLines").and_then(|t| t.parse().ok()),
        since_seconds: call.param("sinceSeconds").and_then(|t| t.parse().ok()),
        timestamps: call.param("timestamps") == Some("true"),
    };
    let Some(logs) = call.server.pod_logs() else {
        return Err(log_error(LogError::WaitingToStart {
            pod: name,
            container,
            reason: "ContainerCreating".into(),
        }));
    };
    let plain = |body: Body| {
        Response::builder()
            .status(StatusCode::OK)
            .header(http::header::CONTENT_TYPE, "text/plain")
            .body(body)
            .unwrap_or_default()
    };
    if call.param("follow") == Some("true") {
        let stream = logs.follow(&request).await.map_err(log_error)?;
        return Ok(plain(Body::from_stream(stream)));
    }
    let bytes = logs.read(&request).await.map_err(log_error)?;
    Ok(plain(Body::from(bytes)))
}

fn log_error(err: LogError) -> ApiError {
    ApiError::bad_request(err.to_string())
}

pub fn evict(call: &Call, target: &Target) -> ApiResult<Response<Body>> {
    let name = target.name()?.to_string();
    let body = call.body_json()?;
    let options = objects::DeleteOptions::from_request(&body["deleteOptions"], &call.query)?;
    pdb::evict(&call.server, &target.namespace, &name, &options)?;
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        &[],
    ))
}

pub fn token_request(call: &Call, target: &Target) -> ApiResult<Response<Body>> {
    let name = target.name()?.to_string();
    if call
        .server
        .store
        .get(&target.kind.storage_id(), &target.namespace, &name)
        .is_none()
    {
        return Err(ApiError::not_found("", "serviceaccounts", &name));
    }
    let mut request = call.body_json()?;
    let seconds = request["spec"]["expirationSeconds"]
        .as_i64()
        .unwrap_or(3600);
    let token = call
        .server
        .issue_service_account_token(&target.namespace, &name);
    request["apiVersion"] = json!("authentication.k8s.io/v1");
    request["kind"] = json!("TokenRequest");
    request["metadata"]["name"] = json!(name);
    request["metadata"]["namespace"] = json!(target.namespace);
    request["metadata"]["creationTimestamp"] = json!(now());
    request["status"] = json!({"token": token, "expirationTimestamp": timestamp_after(seconds)});
    Ok(json_response(StatusCode::CREATED, &request, &[]))
}

pub fn bind(call: &Call, target: &Target) -> ApiResult<Response<Body>> {
    let name = target.name()?.to_string();
    let binding = call.body_json()?;
    let node = binding["target"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ApiError::invalid_field(
                "",
                "Binding",
                &name,
                "target.name",
                "FieldValueRequired",
                "Required value",
            )
        })?
        .to_string();
    let options = WriteOptions {
        system: true,
        ..write_options(call)?
    };
    update_with(
        &call.server,
        &target.kind,
        &target.version,
        &target.namespace,
        &name,
        None,
        &options,
        &mut |pod| {
            if let Some(bound) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
                return Err(ApiError::conflict(
                    "",
                    "pods",
                    &name,
                    &format!("pod {name} is already assigned to node \"{bound}\""),
                ));
            }
            let mut pod = pod.clone();
            pod["spec"]["nodeName"] = json!(node);
            let mut conditions: Vec<Value> = pod["status"]["conditions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            conditions.retain(|c| c["type"] != "PodScheduled");
            conditions.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now()}));
            pod["status"]["conditions"] = Value::Array(conditions);
            Ok(pod)
        },
    )?;
    Ok(json_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        &[],
    ))
}

/// SelfSubjectAccessReview and SubjectAccessReview: RBAC's answer for the caller or a named user;
/// SelfSubjectRulesReview: the caller's rules in a namespace (`kubectl auth can-i --list`).
pub fn access_review(call: &Call, target: &Target) -> ApiResult<Response<Body>> {
    let mut review = call.body_json()?;
    if target.kind.kind == "SelfSubjectRulesReview" {
        let namespace = review["spec"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        let rules =
            crate::apiserver::auth::rbac::rules_for(&call.server, &call.identity, &namespace);
        let (non_resource, resource): (Vec<Value>, Vec<Value>) = rules
            .into_iter()
            .partition(|rule| rule["nonResourceURLs"].is_array());
        review["apiVersion"] = json!("authorization.k8s.io/v1");
        review["kind"] = json!("SelfSubjectRulesReview");
        review["status"] = json!({"resourceRules": resource, "nonResourceRules": non_resource, "incomplete": false});
        return Ok(json_response(StatusCode::CREATED, &review, &[]));
    }
    let spec = &review["spec"];
    let identity = if target.kind.kind == "SubjectAccessReview" {
        let user = spec["user"].as_str().unwrap_or("");
        let groups: Vec<String> = spec["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g.as_str().map(str::to_string))
            .collect();
        Identity {
            user: user.to_string(),
            is_admin: groups.iter().any(|g| g == "system:masters"),
            groups,
        }
    } else {
        call.identity.clone()
    };
    let attributes = if let Some(resource) = spec["resourceAttributes"].as_object() {
        let text = |key: &str| {
            resource
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        };
        Attributes::Resource {
            verb: text("verb").unwrap_or_default(),
            group: text("group").unwrap_or_default(),
            resource: text("resource").unwrap_or_default(),
            subresource: text("subresource"),
            namespace: text("namespace"),
            name: text("name"),
        }
    } else {
        Attributes::NonResource {
            verb: spec["nonResourceAttributes"]["verb"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            path: spec["nonResourceAttributes"]["path"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        }
    };
    let allowed = is_allowed(&call.server, &identity, &attributes);
    review["status"] = json!({"allowed": allowed});
    review["apiVersion"] = json!("authorization.k8s.io/v1");
    review["kind"] = json!(target.kind.kind);
    Ok(json_response(StatusCode::CREATED, &review, &[]))
}
