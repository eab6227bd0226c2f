//! get, list, create, update, delete and deletecollection of any kind.

use std::sync::Arc;

use axum::body::Body;
use base64::Engine;
use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::Call;
use super::negotiate::{json_bytes_response, json_response};
use super::table;
use crate::apiserver::convert::from_storage;
use crate::apiserver::error::{ApiError, ApiResult};
use crate::apiserver::objects::{self, DeleteOptions, FieldValidation, WriteOptions};
use crate::apiserver::registry::ResourceType;
use crate::apiserver::selector::{FieldSelector, LabelSelector};
use crate::apiserver::store::ObjectKey;

/// The kind, version, namespace and name a request is about.
pub struct Target {
    pub kind: Arc<ResourceType>,
    pub version: String,
    pub namespace: String,
    pub name: Option<String>,
}

impl Target {
    pub fn name(&self) -> ApiResult<&str> {
        self.name
            .as_deref()
            .ok_or_else(|| ApiError::bad_request("a name is required"))
    }

    /// The namespace filter of a list: `None` for all namespaces.
    pub fn list_namespace(&self) -> Option<&str> {
        (self.kind.namespaced && !self.namespace.is_empty()).then_some(self.namespace.as_str())
    }
}

/// The object as the client asked for it: its version, or as a Table / PartialObjectMetadata.
pub fn render_object(
    call: &Call,
    target: &Target,
    status: StatusCode,
    object: &Value,
    warnings: &[String],
) -> Response<Body> {
    let presented = from_storage(&target.kind, &target.version, object);
    if call.accept.table {
        let table = table::to_table(
            &target.kind,
            &target.version,
            std::slice::from_ref(presented.as_ref()),
            None,
            &call.accept.include_object,
        );
        return json_response(status, &table, warnings);
    }
    if call.accept.partial_metadata {
        return json_response(status, &partial_metadata(&presented), warnings);
    }
    json_response(status, &presented, warnings)
}

pub fn partial_metadata(object: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": object["metadata"],
    })
}

/// GET of an object, or of its status subresource (the whole object, as the real server answers).
pub fn get(call: &Call, target: &Target) -> ApiResult<Response<Body>> {
    let name = target.name()?;
    let object = call
        .server
        .store
        .get(&target.kind.storage_id(), &target.namespace, name)
        .ok_or_else(|| ApiError::not_found(&target.kind.group, &target.kind.plural, name))?;
    Ok(render_object(call, target, StatusCode::OK, &object, &[]))
}

/// The selectors of a list, watch or deletecollection request.
pub struct Selectors {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Selectors {
    pub fn from_call(call: &Call, kind: &ResourceType) -> ApiResult<Self> {
        Ok(Self {
            labels: LabelSelector::parse(call.param("labelSelector").unwrap_or(""))?,
            fields: FieldSelector::parse(call.param("fieldSelector").unwrap_or(""), &kind.kind)?,
        })
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.labels.matches(&object["metadata"]["labels"]) && self.fields.matches(object)
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    rv: u64,
    ns: String,
    name: String,
}

pub fn list(call: &Call, target: &Target) -> ApiResult<Response<Body>> {
    let selectors = Selectors::from_call(call, &target.kind)?;
    let limit = match call.param("limit") {
        Some(limit) => Some(
            limit
                .parse::<usize>()
                .map_err(|_| ApiError::bad_request("limit must be an integer"))?,
        )
        .filter(|l| *l > 0),
        None => None,
    };
    let after: Option<(u64, ObjectKey)> = match call.param("continue") {
        Some(token) => {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(token)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<ContinueToken>(&bytes).ok())
                .ok_or_else(|| ApiError::bad_request("continue key is not valid"))?;
            if decoded.rv < call.server.store.oldest_watchable() {
                return Err(ApiError::gone(
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                ));
            }
            Some((decoded.rv, (decoded.ns, decoded.name)))
        }
        None => None,
    };
    let storage = target.kind.storage_id();
    let pinned = selectors.fields.pinned_name().map(str::to_string);
    let snapshot = call.server.store.list(
        &storage,
        target.list_namespace(),
        after.as_ref().map(|(_, key)| key),
        limit,
        &|object| {
            pinned
                .as_deref()
                .is_none_or(|n| object["metadata"]["name"] == n)
                && selectors.matches(object)
        },
    );
    let resource_version = after
        .as_ref()
        .map(|(rv, _)| *rv)
        .unwrap_or(snapshot.resource_version);
    let mut list_meta = json!({"resourceVersion": resource_version.to_string()});
    if let Some((ns, name)) = &snapshot.next_key {
        let token = ContinueToken {
            rv: resource_version,
            ns: ns.clone(),
            name: name.clone(),
        };
        let encoded = base64::engine::general_purpose::STANDARD
            .encode(serde_json::to_vec(&token).unwrap_or_default());
        list_meta["continue"] = json!(encoded);
        list_meta["remainingItemCount"] = json!(snapshot.remaining);
    }
    let kind = &target.kind;
    if call.accept.table {
        let items: Vec<Value> = snapshot
            .items
            .iter()
            .map(|o| from_storage(kind, &target.version, o).into_owned())
            .collect();
        let table = table::to_table(
            kind,
            &target.version,
            &items,
            Some(list_meta),
            &call.accept.include_object,
        );
        return Ok(json_response(StatusCode::OK, &table, &[]));
    }
    // Written item by item: a list of thousands of objects is never copied into one Value.
    let (list_kind, api_version) = if call.accept.partial_metadata {
        (
            "PartialObjectMetadataList".to_string(),
            "meta.k8s.io/v1".to_string(),
        )
    } else {
        (kind.list_kind.clone(), kind.api_version(&target.version))
    };
    let mut body = Vec::with_capacity(256 + snapshot.items.len() * 512);
    body.extend_from_slice(
        format!("{{\"kind\":\"{list_kind}\",\"apiVersion\":\"{api_version}\",\"metadata\":")
            .as_bytes(),
    );
    serde_json::to_writer(&mut body, &list_meta).map_err(|e| ApiError::internal(e.to_string()))?;
    body.extend_from_slice(b",\"items\":[");
    for (i, object) in snapshot.items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        let written = if call.accept.partial_metadata {
            serde_json::to_writer(&mut body, &partial_metadata(object))
        } else {
            serde_json::to_writer(
                &mut body,
                from_storage(kind, &target.version, object).as_ref(),
            )
        };
        written.map_err(|e| ApiError::internal(e.to_string()))?;
    }
    body.extend_from_slice(b"]}");
    Ok(json_bytes_response(
        StatusCode::OK,
        body,
        "application/json",
        &[],
    ))
}

/// `dryRun`, `fieldManager` (or the User-Agent's program name) and `fieldValidation`.
pub fn write_options(call: &Call) -> ApiResult<WriteOptions> {
    let field_validation = match call.param("fieldValidation") {
        None | Some("Warn") => FieldValidation::Warn,
        Some("Strict") => FieldValidation::Strict,
        Some("Ignore") => FieldValidation::Ignore,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\", got {other:?}"
            )));
        }
    };
    let dry_run = match call.param("dryRun") {
        None => false,
        Some("All") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "unsupported dryRun value {other:?}: only \"All\" is supported"
            )));
        }
    };
    let field_manager = call.param("fieldManager").map(str::to_string).or_else(|| {
        let agent = call.headers.get(http::header::USER_AGENT)?.to_str().ok()?;
        Some(
            agent
                .split('/')
                .next()
                .unwrap_or(agent)
                .chars()
                .take(128)
                .collect(),
        )
    });
    Ok(WriteOptions {
        dry_run,
        field_manager,
        field_validation,
        user: Some(call.identity.clone()),
        ..WriteOptions::default()
    })
}

pub fn create(call: &Call, target: &Target) -> ApiResult<Response<Body>> {
    let options = write_options(call)?;
    let body = call.body_json()?;
    let written = objects::create(
        &call.server,
        &target.kind,
        &target.version,
        &target.namespace,
        body,
        &options,
    )?;
    Ok(render_object(
        call,
        target,
        StatusCode::CREATED,
        &written.object,
        &written.warnings,
    ))
}

pub fn update(
    call: &Call,
    target: &Target,
    subresource: Option<&str>,
) -> ApiResult<Response<Body>> {
    let options = write_options(call)?;
    let body = call.body_json()?;
    let name = target.name()?;
    let written = objects::update(
        &call.server,
        &target.kind,
        &target.version,
        &target.namespace,
        name,
        subresource,
        body,
        &options,
    )?;
    Ok(render_object(
        call,
        target,
        StatusCode::OK,
        &written.object,
        &written.warnings,
    ))
}

pub fn delete(call: &Call, target: &Target) -> ApiResult<Response<Body>> {
    let body = call.body_json()?;
    let mut options = DeleteOptions::from_request(&body, &call.query)?;
    options.user = Some(call.identity.clone());
    let outcome = objects::delete(
        &call.server,
        &target.kind,
        &target.namespace,
        target.name()?,
        &options,
    )?;
    Ok(render_object(
        call,
        target,
        StatusCode::OK,
        outcome.object(),
        &[],
    ))
}

pub fn delete_collection(call: &Call, target: &Target) -> ApiResult<Response<Body>> {
    let selectors = Selectors::from_call(call, &target.kind)?;
    let body = call.body_json()?;
    let mut options = DeleteOptions::from_request(&body, &call.query)?;
    options.user = Some(call.identity.clone());
    let snapshot = call.server.store.list(
        &target.kind.storage_id(),
        target.list_namespace(),
        None,
        None,
        &|o| selectors.matches(o),
    );
    let mut deleted = Vec::new();
    for object in &snapshot.items {
        let name = object["metadata"]["name"].as_str().unwrap_or("");
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or("");
        match objects::delete(&call.server, &target.kind, namespace, name, &options) {
            Ok(outcome) => deleted
                .push(from_storage(&target.kind, &target.version, outcome.object()).into_owned()),
            Err(err) if err.code == 404 => {}
            Err(err) => return Err(err),
        }
    }
    let list = json!({
        "kind": target.kind.list_kind,
        "apiVersion": target.kind.api_version(&target.version),
        "metadata": {"resourceVersion": call.server.store.current_revision().to_string()},
        "items": deleted,
    });
    Ok(json_response(StatusCode::OK, &list, &[]))
}
