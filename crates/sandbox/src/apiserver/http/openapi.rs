//! `/openapi/v2`, `/openapi/v3` and `/openapi/v3/<api|apis>/...`, built by `schema::openapi`
//! from the registry: custom resources with their CRD schemas, built-in kinds with the
//! schemas the schema engine provides.

use axum::body::Body;
use http::{Response, StatusCode};
use serde_json::{Value, json};

use super::Call;
use super::negotiate::json_response;
use crate::apiserver::error::{ApiError, ApiResult};
use crate::apiserver::registry::ResourceType;
use crate::schema::openapi::{ResourceSchema, v2_document, v3_group_version, v3_index, v3_path};

/// The schema a kind is described with: its CRD schema, or an open object for a built-in kind.
fn schema_of(kind: &ResourceType, version: &str) -> Value {
    kind.version(version)
        .and_then(|v| v.schema.as_ref())
        .map(|s| s.raw().clone())
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}))
}

fn resource_schemas(call: &Call) -> Vec<ResourceSchema> {
    let mut schemas = Vec::new();
    for kind in call.server.registry.all() {
        for version in kind.versions.iter().filter(|v| v.served) {
            schemas.push(ResourceSchema {
                group: kind.group.clone(),
                version: version.name.clone(),
                kind: kind.kind.clone(),
                schema: schema_of(&kind, &version.name),
                namespaced: kind.namespaced,
            });
        }
    }
    schemas
}

fn group_versions(schemas: &[ResourceSchema]) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = schemas
        .iter()
        .map(|s| (s.group.clone(), s.version.clone()))
        .collect();
    pairs.sort();
    pairs.dedup();
    pairs
}

/// The OpenAPI documents of one registry revision, built on first use.
pub struct OpenApiDocuments {
    revision: u64,
    v3: Vec<(String, Value)>,
    index: Value,
    v2: std::sync::OnceLock<Value>,
    schemas: Vec<ResourceSchema>,
}

/// The documents are rebuilt only when a kind is added or removed: kubectl reads them on
/// every `apply` and `explain`.
#[derive(Default)]
pub struct OpenApiCache(std::sync::Mutex<Option<std::sync::Arc<OpenApiDocuments>>>);

impl OpenApiCache {
    fn documents(&self, call: &Call) -> std::sync::Arc<OpenApiDocuments> {
        let revision = call.server.registry.revision();
        let mut cached = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(documents) = cached.as_ref().filter(|d| d.revision == revision) {
            return documents.clone();
        }
        let schemas = resource_schemas(call);
        let v3: Vec<(String, Value)> = group_versions(&schemas)
            .into_iter()
            .map(|(group, version)| {
                let of_version: Vec<ResourceSchema> = schemas
                    .iter()
                    .filter(|s| s.group == group && s.version == version)
                    .cloned()
                    .collect();
                let mut document = v3_group_version(&group, &version, &of_version);
                add_paths(&mut document, call, &group, &version);
                (v3_path(&group, &version), document)
            })
            .collect();
        let index = v3_index(v3.iter().map(|(p, d)| (p.as_str(), d)));
        let documents = std::sync::Arc::new(OpenApiDocuments {
            revision,
            v3,
            index,
            v2: std::sync::OnceLock::new(),
            schemas,
        });
        *cached = Some(documents.clone());
        documents
    }
}

pub fn serve(call: &Call, path: &str) -> ApiResult<Response<Body>> {
    let documents = call.server.openapi.documents(call);
    if path == "/openapi/v2" {
        let v2 = documents.v2.get_or_init(|| v2_document(&documents.schemas));
        return Ok(json_response(StatusCode::OK, v2, &[]));
    }
    if path == "/openapi/v3" {
        return Ok(json_response(StatusCode::OK, &documents.index, &[]));
    }
    let wanted = path.trim_start_matches("/openapi/v3/");
    documents
        .v3
        .iter()
        .find(|(p, _)| p == wanted)
        .map(|(_, document)| json_response(StatusCode::OK, document, &[]))
        .ok_or_else(|| ApiError::no_route(path))
}

/// The item paths of each kind with a PATCH operation that lists `fieldValidation`: kubectl
/// reads these to decide that the server validates fields itself (otherwise it downloads the
/// protobuf OpenAPI v2 document to validate on the client).
fn add_paths(document: &mut Value, call: &Call, group: &str, version: &str) {
    let prefix = if group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{group}/{version}")
    };
    let parameters = json!([
        {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
        {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
        {"name": "force", "in": "query", "schema": {"type": "boolean"}},
    ]);
    let mut paths = serde_json::Map::new();
    for kind in call
        .server
        .registry
        .all()
        .iter()
        .filter(|k| k.group == group && k.version(version).is_some())
    {
        let scope = if kind.namespaced {
            "/namespaces/{namespace}"
        } else {
            ""
        };
        let path = format!("{prefix}{scope}/{}/{{name}}", kind.plural);
        let operation = json!({
            "operationId": format!("patch{}", kind.kind),
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": {"group": group, "version": version, "kind": kind.kind},
            "parameters": parameters,
            "responses": {"200": {"description": "OK"}},
        });
        paths.insert(path, json!({"patch": operation}));
    }
    document["paths"] = Value::Object(paths);
}
