//! Content negotiation: JSON always (protobuf requests get JSON, as the real server does for
//! kinds it cannot encode), Tables for `kubectl get`, and `metav1.Status` for errors.

use std::collections::HashMap;

use axum::body::Body;
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use serde_json::Value;

use crate::apiserver::error::ApiError;

/// What the client accepts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accept {
    /// `application/json;as=Table;v=v1;g=meta.k8s.io`
    pub table: bool,
    /// `application/json;as=PartialObjectMetadata...`
    pub partial_metadata: bool,
    /// `application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList`
    pub aggregated_discovery: bool,
    /// `includeObject` of a Table: `None`, `Metadata` (default) or `Object`.
    pub include_object: String,
}

impl Accept {
    pub fn from_headers(headers: &HeaderMap, query: &HashMap<String, String>) -> Self {
        let accept = headers
            .get_all(http::header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect::<Vec<_>>()
            .join(",");
        let mut parsed = Accept {
            include_object: query
                .get("includeObject")
                .cloned()
                .unwrap_or_else(|| "Metadata".into()),
            ..Accept::default()
        };
        // The first acceptable media type wins, as in the server's negotiation.
        for media in accept.split(',') {
            let params: Vec<String> = media
                .split(';')
                .map(|p| p.trim().replace(' ', ""))
                .collect();
            let has = |p: &str| params.iter().any(|x| x == p);
            if params.first().is_some_and(|m| m == "application/json") {
                if has("as=Table") && has("g=meta.k8s.io") && has("v=v1") {
                    parsed.table = true;
                } else if has("as=PartialObjectMetadata") || has("as=PartialObjectMetadataList") {
                    parsed.partial_metadata = true;
                } else if has("as=APIGroupDiscoveryList") && has("v=v2") {
                    parsed.aggregated_discovery = true;
                } else if has("as=Table") || has("as=APIGroupDiscoveryList") {
                    continue;
                }
                break;
            }
            if params
                .first()
                .is_some_and(|m| m == "*/*" || m.contains("yaml") || m.contains("protobuf"))
            {
                break;
            }
        }
        parsed
    }
}

pub fn json_bytes_response(
    status: StatusCode,
    body: Vec<u8>,
    content_type: &str,
    warnings: &[String],
) -> Response<Body> {
    let mut response = Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, content_type)
        .header("cache-control", "no-cache, private");
    for warning in warnings {
        // The Warning header format clients parse: `299 - "text"`.
        let text = format!(
            "299 - \"{}\"",
            warning.replace('\\', "\\\\").replace('"', "\\\"")
        );
        if let Ok(value) = HeaderValue::from_str(&text) {
            response = response.header(http::header::WARNING, value);
        }
    }
    response.body(Body::from(body)).unwrap_or_default()
}

pub fn json_response(status: StatusCode, body: &Value, warnings: &[String]) -> Response<Body> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    json_bytes_response(status, bytes, "application/json", warnings)
}

pub fn error_response(err: &ApiError) -> Response<Body> {
    let status = StatusCode::from_u16(err.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_response(status, &err.to_status(), &[]);
    if let Some(seconds) = err.retry_after_seconds
        && let Ok(value) = HeaderValue::from_str(&seconds.to_string())
    {
        response
            .headers_mut()
            .insert(http::header::RETRY_AFTER, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> Accept {
        let mut headers = HeaderMap::new();
        headers.insert(http::header::ACCEPT, value.parse().unwrap());
        Accept::from_headers(&headers, &HashMap::new())
    }

    #[test]
    fn kubectl_get_asks_for_a_table_first() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert!(accept(kubectl).table);
        assert!(!accept("application/json").table);
        assert!(
            !accept("application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json").table
        );
        let discovery = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert!(accept(discovery).aggregated_discovery);
        assert!(!accept("application/vnd.kubernetes.protobuf, */*").table);
    }
}
