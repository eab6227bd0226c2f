//! What a request asks for, parsed from its method, path and query as kube-apiserver's
//! RequestInfo does: verb, API group and version, namespace, resource, name and subresource.

use std::collections::HashMap;

use http::Method;

/// A request for a resource (anything under `/api/v1` or `/apis/<group>/<version>` that names one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRequest {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete` or `deletecollection`.
    pub verb: &'static str,
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// A path that is not a resource: discovery, OpenAPI, health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Resource(ResourceRequest),
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/<group>`
    Group(String),
    /// `/api/v1` or `/apis/<group>/<version>`
    GroupVersion {
        group: String,
        version: String,
    },
    Other(String),
}

/// Subresources of a namespace that name it rather than a resource inside it.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

pub fn route(method: &Method, path: &str, query: &HashMap<String, String>) -> Route {
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    let (group, version, rest) = match parts.as_slice() {
        ["api"] => return Route::CoreVersions,
        ["apis"] => return Route::Groups,
        ["api", version] => {
            return Route::GroupVersion {
                group: String::new(),
                version: version.to_string(),
            };
        }
        ["apis", group] => return Route::Group(group.to_string()),
        ["apis", group, version] => {
            return Route::GroupVersion {
                group: group.to_string(),
                version: version.to_string(),
            };
        }
        ["api", version, rest @ ..] => (String::new(), version.to_string(), rest),
        ["apis", group, version, rest @ ..] => (group.to_string(), version.to_string(), rest),
        _ => return Route::Other(path.to_string()),
    };
    let mut rest: &[&str] = rest;
    let mut legacy_watch = false;
    if rest.first() == Some(&"watch") {
        legacy_watch = true;
        rest = &rest[1..];
    }
    let mut namespace = None;
    if rest.first() == Some(&"namespaces") && rest.len() > 1 {
        namespace = Some(rest[1].to_string());
        if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
            rest = &rest[2..];
        }
    }
    let Some(resource) = rest.first() else {
        return Route::Other(path.to_string());
    };
    if rest.len() > 3 {
        return Route::Other(path.to_string());
    }
    let name = rest.get(1).map(|s| s.to_string());
    let subresource = rest.get(2).map(|s| s.to_string());
    // `/api/v1/namespaces/foo` names the namespace itself, not a scope.
    let namespace = if *resource == "namespaces" {
        None
    } else {
        namespace
    };
    let watch_param = query.get("watch").is_some_and(|w| w == "true" || w == "1");
    let verb = match *method {
        Method::GET | Method::HEAD if legacy_watch || watch_param => "watch",
        Method::GET | Method::HEAD if name.is_some() => "get",
        Method::GET | Method::HEAD => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if name.is_some() => "delete",
        Method::DELETE => "deletecollection",
        _ => return Route::Other(path.to_string()),
    };
    Route::Resource(ResourceRequest {
        verb,
        group,
        version,
        namespace,
        resource: resource.to_string(),
        name,
        subresource,
    })
}

/// Decodes a query string into a map (last value wins, as the real server reads single values).
pub fn parse_query(query: Option<&str>) -> HashMap<String, String> {
    let mut params = HashMap::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        params.insert(percent_decode(key), percent_decode(value));
    }
    params
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(byte) => {
                        out.push(byte);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            other => out.push(other),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(method: Method, path: &str) -> ResourceRequest {
        match route(
            &method,
            path,
            &parse_query(path.split_once('?').map(|(_, q)| q)),
        ) {
            Route::Resource(r) => r,
            other => panic!("{path} routed to {other:?}"),
        }
    }

    #[test]
    fn namespaced_and_cluster_paths_resolve_like_request_info() {
        let r = resource(Method::GET, "/api/v1/namespaces/default/pods/web/log");
        assert_eq!(
            (
                r.verb,
                r.namespace.as_deref(),
                r.resource.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            ("get", Some("default"), "pods", Some("web"), Some("log"))
        );
        let r = resource(Method::PUT, "/api/v1/namespaces/kube-system/status");
        assert_eq!(
            (
                r.verb,
                r.namespace,
                r.resource.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            (
                "update",
                None,
                "namespaces",
                Some("kube-system"),
                Some("status")
            )
        );
        let r = resource(Method::GET, "/apis/apps/v1/deployments");
        assert_eq!(
            (r.verb, r.group.as_str(), r.namespace),
            ("list", "apps", None)
        );
        let r = resource(Method::DELETE, "/api/v1/namespaces/default/configmaps");
        assert_eq!(r.verb, "deletecollection");
    }

    #[test]
    fn watch_is_a_query_parameter_or_a_legacy_prefix() {
        let path = "/api/v1/namespaces/default/pods";
        let query = parse_query(Some("watch=true&resourceVersion=5"));
        match route(&Method::GET, path, &query) {
            Route::Resource(r) => assert_eq!(r.verb, "watch"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            resource(Method::GET, "/api/v1/watch/namespaces/default/pods").verb,
            "watch"
        );
    }

    #[test]
    fn discovery_paths_are_not_resources() {
        let q = HashMap::new();
        assert_eq!(route(&Method::GET, "/api", &q), Route::CoreVersions);
        assert_eq!(
            route(&Method::GET, "/apis/apps", &q),
            Route::Group("apps".into())
        );
        assert_eq!(
            route(&Method::GET, "/apis/apps/v1", &q),
            Route::GroupVersion {
                group: "apps".into(),
                version: "v1".into()
            }
        );
    }

    #[test]
    fn query_values_are_percent_decoded() {
        let q = parse_query(Some("labelSelector=app%3Detcd%2Ctier+in+%28a%29&limit=5"));
        assert_eq!(q["labelSelector"], "app=etcd,tier in (a)");
        assert_eq!(q["limit"], "5");
    }
}
