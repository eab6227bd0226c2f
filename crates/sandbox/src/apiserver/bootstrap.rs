//! What exists in a fresh cluster: the `default`, `kube-system`, `kube-public` and
//! `kube-node-lease` namespaces, the `kubernetes` Service and its Endpoints, and the bootstrap
//! RBAC roles every authenticated identity relies on (discovery, public info).

use std::net::SocketAddr;

use serde_json::{Value, json};

use super::error::ApiResult;
use super::objects::{self, WriteOptions};
use super::server::ApiServer;

pub const SYSTEM_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Creates an object of a built-in kind as the server itself.
pub fn create_builtin(
    server: &ApiServer,
    group: &str,
    plural: &str,
    namespace: &str,
    object: Value,
) -> ApiResult<Value> {
    let kind = server.registry.get(group, plural).ok_or_else(|| {
        super::error::ApiError::internal(format!("{plural}.{group} is not served"))
    })?;
    let version = kind.storage_version().name.clone();
    objects::create(
        server,
        &kind,
        &version,
        namespace,
        object,
        &WriteOptions::internal("kube-apiserver"),
    )
    .map(|w| w.object)
}

pub fn create_initial_objects(server: &ApiServer, address: SocketAddr) -> ApiResult<()> {
    for namespace in SYSTEM_NAMESPACES {
        create_builtin(
            server,
            "",
            "namespaces",
            "",
            json!({"metadata": {"name": namespace}}),
        )?;
    }
    let first_ip = server.service_ips.first_address().to_string();
    create_builtin(
        server,
        "",
        "services",
        "default",
        json!({
            "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"clusterIP": first_ip, "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": address.port()}]},
        }),
    )?;
    create_builtin(
        server,
        "",
        "endpoints",
        "default",
        json!({
            "metadata": {"name": "kubernetes", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": [{"addresses": [{"ip": address.ip().to_string()}], "ports": [{"name": "https", "port": address.port(), "protocol": "TCP"}]}],
        }),
    )?;
    for (name, rules) in bootstrap_cluster_roles() {
        create_builtin(
            server,
            "rbac.authorization.k8s.io",
            "clusterroles",
            "",
            json!({
                "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
                "rules": rules,
            }),
        )?;
    }
    for (name, groups) in [
        ("cluster-admin", vec!["system:masters"]),
        ("system:discovery", vec!["system:authenticated"]),
        ("system:basic-user", vec!["system:authenticated"]),
        (
            "system:public-info-viewer",
            vec!["system:authenticated", "system:unauthenticated"],
        ),
    ] {
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": g}))
            .collect();
        create_builtin(
            server,
            "rbac.authorization.k8s.io",
            "clusterrolebindings",
            "",
            json!({
                "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": subjects,
            }),
        )?;
    }
    Ok(())
}

fn bootstrap_cluster_roles() -> Vec<(&'static str, Value)> {
    vec![
        (
            "cluster-admin",
            json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]),
        ),
        (
            "system:discovery",
            json!([
                {"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]},
            ]),
        ),
        (
            "system:basic-user",
            json!([
                {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
            ]),
        ),
        (
            "system:public-info-viewer",
            json!([
                {"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]},
            ]),
        ),
    ]
}

/// What every namespace gets when it is created: the `default` ServiceAccount and the
/// `kube-root-ca.crt` ConfigMap with the cluster CA, which in-cluster clients read.
pub fn populate_namespace(server: &ApiServer, namespace: &str) {
    let _ = create_builtin(
        server,
        "",
        "serviceaccounts",
        namespace,
        json!({"metadata": {"name": "default"}}),
    );
    let _ = create_builtin(
        server,
        "",
        "configmaps",
        namespace,
        json!({
            "metadata": {"name": "kube-root-ca.crt", "annotations": {"kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."}},
            "data": {"ca.crt": server.ca_pem},
        }),
    );
}
