//! `pods/exec` and `pods/portforward` of the sandbox's own API server: the Pod is looked up
//! and checked here, the protocols are [`crate::streaming::channels`]'s, spoken with the node
//! agents' [`PodStreams`] (registered on the server).

use std::net::IpAddr;
use std::sync::Arc;

use axum::body::Body;
use http::Response;
use serde_json::Value;

use super::Call;
use super::resources::Target;
use crate::apiserver::error::{ApiError, ApiResult};
use crate::apiserver::streams::{ExecRequest, PodStreams};
use crate::streaming::channels::{self, query_values};

fn flag(call: &Call, name: &str) -> bool {
    matches!(call.param(name), Some("true" | "1"))
}

fn take_upgrade(call: &Call) -> ApiResult<hyper::upgrade::OnUpgrade> {
    call.upgrade
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
        .ok_or_else(|| ApiError::bad_request("the request asks for no connection upgrade"))
}

fn streams(call: &Call) -> ApiResult<Arc<dyn PodStreams>> {
    call.server.pod_streams().ok_or_else(|| {
        ApiError::bad_request("no node agent is attached to this API server: nothing runs Pods")
    })
}

fn pod(call: &Call, target: &Target) -> ApiResult<(String, Arc<Value>)> {
    let name = target.name()?.to_string();
    let pod = call
        .server
        .store
        .get(&target.kind.storage_id(), &target.namespace, &name)
        .ok_or_else(|| ApiError::not_found("", "pods", &name))?;
    Ok((name, pod))
}

pub fn exec(call: &Call, target: &Target) -> ApiResult<Response<Body>> {
    let (name, pod) = pod(call, target)?;
    let phase = pod["status"]["phase"].as_str().unwrap_or("Pending");
    if matches!(phase, "Succeeded" | "Failed") {
        return Err(ApiError::bad_request(format!(
            "cannot exec into a container in a completed pod; current phase is {phase}"
        )));
    }
    let containers: Vec<String> = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect();
    let container = match (call.param("container"), containers.as_slice()) {
        (Some(c), _) if containers.iter().any(|n| n == c) => c.to_string(),
        (Some(c), _) => {
            return Err(ApiError::bad_request(format!(
                "container {c} is not valid for pod {name}"
            )));
        }
        (None, [only, ..]) => only.clone(),
        (None, []) => {
            return Err(ApiError::bad_request(format!(
                "pod {name} has no containers"
            )));
        }
    };
    let command = query_values(&call.raw_query, "command");
    if command.is_empty() {
        return Err(ApiError::bad_request("you must specify at least 1 command"));
    }
    let request = ExecRequest {
        namespace: target.namespace.clone(),
        pod: name,
        container,
        command,
        stdin: flag(call, "stdin"),
        stdout: flag(call, "stdout"),
        stderr: flag(call, "stderr"),
        tty: flag(call, "tty"),
    };
    channels::exec(&call.headers, request, streams(call)?, || {
        take_upgrade(call)
    })
}

pub fn portforward(call: &Call, target: &Target) -> ApiResult<Response<Body>> {
    let (name, pod) = pod(call, target)?;
    let phase = pod["status"]["phase"].as_str().unwrap_or("Pending");
    if phase != "Running" {
        return Err(ApiError::bad_request(format!(
            "unable to forward port because pod is not running. Current status={phase}"
        )));
    }
    let ip: IpAddr = pod["status"]["podIP"]
        .as_str()
        .and_then(|ip| ip.parse().ok())
        .ok_or_else(|| ApiError::bad_request(format!("pod {name} has no IP address yet")))?;
    let uid = pod["metadata"]["uid"].as_str().unwrap_or("").to_string();
    channels::portforward(
        &call.headers,
        &call.raw_query,
        ip,
        format!("pod {name}, uid {uid}"),
        streams(call)?,
        || take_upgrade(call),
    )
}
