//! The HTTP surface: authentication, routing, content negotiation and the handlers.

mod discovery;
mod negotiate;
mod openapi;
mod patch;
mod resources;
mod streams;
mod subresources;
mod table;
mod watch;

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use serde_json::Value;

use super::auth::rbac::{Attributes, is_allowed};
use super::auth::{Identity, authenticate};
use super::error::{ApiError, ApiResult};
use super::request::{ResourceRequest, Route, parse_query, route};
use super::server::ApiServer;
use super::store::ResourceId;
pub use negotiate::Accept;
pub use openapi::OpenApiCache;

/// The largest request body accepted, as kube-apiserver's 3 MiB.
const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// One authenticated request, read in full (bodies are small objects; watch has none).
pub struct Call {
    pub server: Arc<ApiServer>,
    pub identity: Identity,
    pub method: Method,
    pub path: String,
    pub query: HashMap<String, String>,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub accept: Accept,
    /// The query as sent: `pods/exec` repeats `command=` once per argument.
    pub raw_query: String,
    /// The connection's upgrade, when the request asks for one (a WebSocket for exec and
    /// port-forward); taken by the handler that answers 101.
    pub upgrade: std::sync::Mutex<Option<hyper::upgrade::OnUpgrade>>,
}

impl Call {
    /// The body as JSON (YAML is accepted too, as the real server does).
    pub fn body_json(&self) -> ApiResult<Value> {
        if self.body.is_empty() {
            return Ok(Value::Null);
        }
        let content_type = self
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json");
        if content_type.contains("protobuf") {
            if let Some(decoded) = super::protobuf::decode(&self.body) {
                return Ok(decoded);
            }
            let mut err = ApiError::unsupported_media_type(content_type);
            err.message = "kube-sandbox does not decode protobuf request bodies (kubectl's imperative `create <kind>` commands send them); send JSON or YAML, e.g. `kubectl create -f` or `kubectl apply -f` with a manifest".into();
            return Err(err);
        }
        serde_json::from_slice(&self.body).or_else(|json_err| {
            if content_type.contains("yaml") {
                serde_yaml::from_slice(&self.body)
                    .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
            } else {
                Err(ApiError::bad_request(format!(
                    "error decoding body: {json_err}"
                )))
            }
        })
    }

    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    pub fn content_type(&self) -> &str {
        self.headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

/// Answers one HTTP request.
pub async fn respond(
    server: Arc<ApiServer>,
    mut request: Request<hyper::body::Incoming>,
) -> Response<Body> {
    let upgrade = request
        .headers()
        .contains_key(http::header::UPGRADE)
        .then(|| hyper::upgrade::on(&mut request));
    let (parts, body) = request.into_parts();
    let raw_query = parts.uri.query().unwrap_or("").to_string();
    let path = parts.uri.path().to_string();
    let query = parse_query(parts.uri.query());
    let accounts = ResourceId::new("", "serviceaccounts");
    let account_exists =
        |namespace: &str, name: &str| server.store.get(&accounts, namespace, name).is_some();
    let identity = match authenticate(
        &parts.headers,
        &server.admin_token,
        &server.tokens,
        &account_exists,
    ) {
        Ok(Some(identity)) => identity,
        Ok(None) if is_public(&path) => Identity {
            user: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            is_admin: false,
        },
        Ok(None) => return negotiate::error_response(&ApiError::unauthorized()),
        Err(err) => return negotiate::error_response(&err),
    };
    // kube-apiserver's limit on a request body; a larger one is refused rather than buffered.
    let body = match http_body_util::Limited::new(body, MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(err) => {
            return negotiate::error_response(&ApiError::request_too_large(format!(
                "reading the body: {err}"
            )));
        }
    };
    let accept = Accept::from_headers(&parts.headers, &query);
    let call = Call {
        server,
        identity,
        method: parts.method.clone(),
        path: path.clone(),
        query,
        headers: parts.headers,
        body,
        accept,
        raw_query,
        upgrade: std::sync::Mutex::new(upgrade),
    };
    let routed = route(&call.method, &path, &call.query);
    let result = match routed {
        Route::Resource(request) => serve_resource(&call, request).await,
        other => serve_non_resource(&call, other),
    };
    match result {
        Ok(response) => response,
        Err(err) => negotiate::error_response(&err),
    }
}

/// Paths anyone may read, as `system:public-info-viewer` allows on a real cluster.
fn is_public(path: &str) -> bool {
    matches!(path, "/healthz" | "/livez" | "/readyz" | "/version")
}

fn serve_non_resource(call: &Call, route: Route) -> ApiResult<Response<Body>> {
    let verb = match call.method {
        Method::GET | Method::HEAD => "get",
        Method::POST => "post",
        Method::PUT => "put",
        Method::DELETE => "delete",
        _ => "patch",
    };
    let attributes = Attributes::NonResource {
        verb: verb.into(),
        path: call.path.clone(),
    };
    if !is_public(&call.path) && !is_allowed(&call.server, &call.identity, &attributes) {
        return Err(ApiError::forbidden(
            attributes.forbidden_message(&call.identity.user),
        ));
    }
    match route {
        Route::CoreVersions => discovery::core_versions(call),
        Route::Groups => discovery::groups(call),
        Route::Group(group) => discovery::group(call, &group),
        Route::GroupVersion { group, version } => discovery::group_version(call, &group, &version),
        Route::Other(path) => match path.as_str() {
            "/healthz" | "/livez" | "/readyz" => Ok(plain(StatusCode::OK, "ok")),
            "/version" => Ok(negotiate::json_response(
                StatusCode::OK,
                &discovery::version_info(),
                &[],
            )),
            p if p.starts_with("/openapi/") => openapi::serve(call, p),
            _ => Err(ApiError::no_route(&path)),
        },
        Route::Resource(_) => Err(ApiError::no_route(&call.path)),
    }
}

pub fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Body::from(text))
        .unwrap_or_default()
}

async fn serve_resource(call: &Call, request: ResourceRequest) -> ApiResult<Response<Body>> {
    let Some(kind) =
        call.server
            .registry
            .lookup(&request.group, &request.version, &request.resource)
    else {
        return Err(ApiError::no_route(&call.path));
    };
    if request.namespace.is_some() && !kind.namespaced {
        return Err(ApiError::no_route(&call.path));
    }
    if let Some(sub) = &request.subresource
        && !kind.has_subresource(&request.version, sub)
    {
        return Err(ApiError::no_route(&call.path));
    }
    let attributes = Attributes::Resource {
        verb: request.verb.into(),
        group: request.group.clone(),
        resource: request.resource.clone(),
        subresource: request.subresource.clone(),
        namespace: request.namespace.clone(),
        name: request.name.clone(),
    };
    if !is_allowed(&call.server, &call.identity, &attributes) {
        return Err(ApiError::forbidden(
            attributes.forbidden_message(&call.identity.user),
        ));
    }
    if !kind.verbs.iter().any(|v| v == request.verb) && request.subresource.is_none() {
        return Err(ApiError::method_not_allowed(format!(
            "{} is not allowed on {}",
            request.verb,
            kind.qualified_name()
        )));
    }
    let ctx = resources::Target {
        kind,
        version: request.version.clone(),
        namespace: request.namespace.clone().unwrap_or_default(),
        name: request.name.clone(),
    };
    match (request.subresource.as_deref(), request.verb) {
        (Some("log"), "get") => subresources::pod_log(call, &ctx).await,
        (Some("exec"), "get" | "create") => streams::exec(call, &ctx),
        (Some("portforward"), "get" | "create") => streams::portforward(call, &ctx),
        (Some("eviction"), "create") => subresources::evict(call, &ctx),
        (Some("token"), "create") => subresources::token_request(call, &ctx),
        (Some("binding"), "create") => subresources::bind(call, &ctx),
        (Some("scale"), verb @ ("get" | "update" | "patch")) => {
            subresources::scale(call, &ctx, verb)
        }
        (Some("log" | "eviction" | "token" | "binding" | "scale" | "exec" | "portforward"), _) => {
            Err(ApiError::method_not_allowed(format!(
                "{} is not allowed on this subresource",
                request.verb
            )))
        }
        (_, "get") => resources::get(call, &ctx),
        (_, "list") => resources::list(call, &ctx),
        (_, "watch") => watch::watch(call, &ctx),
        (_, "create") if ctx.kind.group == "authorization.k8s.io" => {
            subresources::access_review(call, &ctx)
        }
        (_, "create") => resources::create(call, &ctx),
        (sub, "update") => resources::update(call, &ctx, sub),
        (sub, "patch") => patch::patch(call, &ctx, sub),
        (_, "delete") => resources::delete(call, &ctx),
        (_, "deletecollection") => resources::delete_collection(call, &ctx),
        _ => Err(ApiError::no_route(&call.path)),
    }
}
