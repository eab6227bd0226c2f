//! Discovery: `/version`, `/api`, `/apis`, `/apis/<group>`, the APIResourceLists of each
//! group-version, and the aggregated (apidiscovery.k8s.io/v2) form kubectl asks for first.

use axum::body::Body;
use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::Call;
use super::negotiate::{json_bytes_response, json_response};
use crate::apiserver::error::{ApiError, ApiResult};
use crate::apiserver::registry::ResourceType;

const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// The Kubernetes version the sandbox presents (the kubectl it is tested with).
pub fn version_info() -> Value {
    json!({
        "major": "1",
        "minor": "32",
        "gitVersion": "v1.32.0-sandbox",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.23.0",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// A subresource's verbs and the kind it answers with.
fn subresource_shape(
    kind: &ResourceType,
    subresource: &str,
    version: &str,
) -> (Vec<&'static str>, (String, String, String)) {
    let own = (kind.group.clone(), version.to_string(), kind.kind.clone());
    let other = |g: &str, v: &str, k: &str| (g.to_string(), v.to_string(), k.to_string());
    match subresource {
        "status" => (vec!["get", "patch", "update"], own),
        "scale" => (
            vec!["get", "patch", "update"],
            other("autoscaling", "v1", "Scale"),
        ),
        "log" => (vec!["get"], other("", "v1", "Pod")),
        "exec" => (vec!["create", "get"], other("", "v1", "PodExecOptions")),
        "portforward" => (
            vec!["create", "get"],
            other("", "v1", "PodPortForwardOptions"),
        ),
        "eviction" => (vec!["create"], other("policy", "v1", "Eviction")),
        "binding" => (vec!["create"], other("", "v1", "Binding")),
        "token" => (
            vec!["create"],
            other("authentication.k8s.io", "v1", "TokenRequest"),
        ),
        "finalize" => (vec!["update"], own),
        _ => (vec![], own),
    }
}

fn subresources_of(kind: &ResourceType, version: &str) -> Vec<String> {
    let mut subresources = Vec::new();
    if kind.has_subresource(version, "status") {
        subresources.push("status".to_string());
    }
    if kind.has_subresource(version, "scale") {
        subresources.push("scale".to_string());
    }
    subresources.extend(kind.extra_subresources.iter().cloned());
    subresources
}

fn kinds_in(call: &Call, group: &str, version: &str) -> Vec<std::sync::Arc<ResourceType>> {
    call.server
        .registry
        .all()
        .into_iter()
        .filter(|k| k.group == group && k.version(version).is_some())
        .collect()
}

pub fn core_versions(call: &Call) -> ApiResult<Response<Body>> {
    if call.accept.aggregated_discovery {
        return Ok(aggregated(call, true));
    }
    Ok(json_response(
        StatusCode::OK,
        &json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": call.headers.get("host").and_then(|h| h.to_str().ok()).unwrap_or("")}],
        }),
        &[],
    ))
}

fn api_group(call: &Call, group: &str) -> Option<Value> {
    let versions = call.server.registry.group_versions(group);
    let preferred = versions.first()?.clone();
    let entry = |v: &String| json!({"groupVersion": format!("{group}/{v}"), "version": v});
    Some(json!({
        "name": group,
        "versions": versions.iter().map(entry).collect::<Vec<_>>(),
        "preferredVersion": entry(&preferred),
    }))
}

pub fn groups(call: &Call) -> ApiResult<Response<Body>> {
    if call.accept.aggregated_discovery {
        return Ok(aggregated(call, false));
    }
    let groups: Vec<Value> = call
        .server
        .registry
        .groups()
        .iter()
        .filter_map(|g| api_group(call, g))
        .collect();
    Ok(json_response(
        StatusCode::OK,
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
        &[],
    ))
}

pub fn group(call: &Call, group: &str) -> ApiResult<Response<Body>> {
    let mut body = api_group(call, group).ok_or_else(|| ApiError::no_route(&call.path))?;
    body["kind"] = json!("APIGroup");
    body["apiVersion"] = json!("v1");
    Ok(json_response(StatusCode::OK, &body, &[]))
}

pub fn group_version(call: &Call, group: &str, version: &str) -> ApiResult<Response<Body>> {
    let kinds = kinds_in(call, group, version);
    if kinds.is_empty() {
        return Err(ApiError::no_route(&call.path));
    }
    let mut resources = Vec::new();
    for kind in &kinds {
        resources.push(json!({
            "name": kind.plural,
            "singularName": kind.singular,
            "namespaced": kind.namespaced,
            "kind": kind.kind,
            "verbs": kind.verbs,
            "shortNames": kind.short_names,
            "categories": kind.categories,
        }));
        for sub in subresources_of(kind, version) {
            let (verbs, (g, v, k)) = subresource_shape(kind, &sub, version);
            let mut entry = json!({"name": format!("{}/{sub}", kind.plural), "singularName": "", "namespaced": kind.namespaced, "kind": k, "verbs": verbs});
            if g != kind.group || v != version {
                entry["group"] = json!(g);
                entry["version"] = json!(v);
            }
            resources.push(entry);
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Ok(json_response(
        StatusCode::OK,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
        &[],
    ))
}

/// The aggregated discovery document of the core group (`/api`) or of all others (`/apis`).
fn aggregated(call: &Call, core: bool) -> Response<Body> {
    let groups: Vec<String> = if core {
        vec![String::new()]
    } else {
        call.server.registry.groups()
    };
    let items: Vec<Value> = groups
        .iter()
        .map(|group| {
            let versions: Vec<Value> = call
                .server
                .registry
                .group_versions(group)
                .iter()
                .map(|version| {
                    let resources: Vec<Value> = kinds_in(call, group, version)
                        .iter()
                        .map(|kind| aggregated_resource(kind, version))
                        .collect();
                    json!({"version": version, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": group}, "versions": versions})
        })
        .collect();
    let body = json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items});
    json_bytes_response(
        StatusCode::OK,
        serde_json::to_vec(&body).unwrap_or_default(),
        AGGREGATED_CONTENT_TYPE,
        &[],
    )
}

fn aggregated_resource(kind: &ResourceType, version: &str) -> Value {
    let subresources: Vec<Value> = subresources_of(kind, version)
        .iter()
        .map(|sub| {
            let (verbs, (g, v, k)) = subresource_shape(kind, sub, version);
            json!({"subresource": sub, "responseKind": {"group": g, "version": v, "kind": k}, "verbs": verbs})
        })
        .collect();
    let mut resource = json!({
        "resource": kind.plural,
        "responseKind": {"group": kind.group, "version": version, "kind": kind.kind},
        "scope": if kind.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": kind.singular,
        "verbs": kind.verbs,
    });
    if !kind.short_names.is_empty() {
        resource["shortNames"] = json!(kind.short_names);
    }
    if !kind.categories.is_empty() {
        resource["categories"] = json!(kind.categories);
    }
    if !subresources.is_empty() {
        resource["subresources"] = json!(subresources);
    }
    resource
}
