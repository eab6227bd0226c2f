//! The parts of an EtcdCluster fixed at creation: TLS, authentication and bootstrap.

use k8s_openapi::api::core::v1::LocalObjectReference;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::shared::RestoreSpec;

/// Transport security of etcd's two listeners. Each side is optional and independent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct EtcdClusterTls {
    /// TLS of the client API (port 2379). Unset means plaintext.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientTls>,

    /// TLS of the peer API (port 2380), always mutual when set. Unset means plaintext.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<PeerTls>,
}

/// TLS of the client API, from a Secret the user provides (`serverSecretRef`, optionally with
/// `operatorClientSecretRef` for mutual TLS) or from cert-manager (`certManager`): exactly one
/// of the two sources.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.serverSecretRef) != has(self.certManager)").message("exactly one of spec.tls.client.serverSecretRef or spec.tls.client.certManager must be set"),
    validation = Rule::new("!has(self.certManager) || !has(self.operatorClientSecretRef)").message("spec.tls.client.operatorClientSecretRef cannot be combined with certManager; use certManager.operatorClientIssuerRef"),
)]
pub struct ClientTls {
    /// Secret of type kubernetes.io/tls in the cluster's namespace with the server certificate
    /// (tls.crt, tls.key) and ca.crt, which is always required: the operator verifies the
    /// server with it, and under mutual TLS etcd trusts client certificates signed by it. The
    /// certificate also needs the clientAuth usage, because etcd dials itself with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::local_object_reference")]
    pub server_secret_ref: Option<LocalObjectReference>,

    /// Secret with the certificate (tls.crt, tls.key) the operator presents to etcd. Setting
    /// it turns on mutual TLS (etcd's --client-cert-auth); leaving it unset means server-side
    /// TLS only. Not allowed with `certManager`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::local_object_reference")]
    pub operator_client_secret_ref: Option<LocalObjectReference>,

    /// Certificates issued by cert-manager instead of user-provided Secrets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert_manager: Option<ClientCertManagerTls>,
}

/// Client-API certificates issued through cert-manager `Certificate` objects the operator
/// owns.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientCertManagerTls {
    /// Issuer of the etcd server certificate, stored in the Secret "<cluster>-server-tls".
    pub server_issuer_ref: IssuerReference,

    /// Issuer of the operator's client certificate, stored in the Secret
    /// "<cluster>-operator-client-tls". Set means mutual TLS; unset means server-side TLS only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator_client_issuer_ref: Option<IssuerReference>,
}

/// TLS of the peer API, always mutual: from a user-provided Secret or from cert-manager,
/// exactly one of the two.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.secretRef) != has(self.certManager)").message("exactly one of spec.tls.peer.secretRef or spec.tls.peer.certManager must be set"))]
pub struct PeerTls {
    /// Secret of type kubernetes.io/tls with the peer certificate (tls.crt, tls.key) and
    /// ca.crt. The same certificate serves and dials, so it needs both the serverAuth and
    /// clientAuth usages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::local_object_reference")]
    pub secret_ref: Option<LocalObjectReference>,

    /// A peer certificate issued by cert-manager instead of a user-provided Secret.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cert_manager: Option<PeerCertManagerTls>,
}

/// Peer-API certificates issued through cert-manager.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PeerCertManagerTls {
    /// Issuer of the peer certificate, stored in the Secret "<cluster>-peer-tls".
    pub issuer_ref: IssuerReference,
}

/// A cert-manager Issuer (in the cluster's namespace) or ClusterIssuer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct IssuerReference {
    /// Name of the issuer.
    #[schemars(length(min = 1))]
    pub name: String,

    /// `Issuer` (the default) or `ClusterIssuer`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Issuer"))]
    pub kind: Option<IssuerKind>,
}

/// The kind of a cert-manager issuer.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum IssuerKind {
    // A namespaced issuer next to the EtcdCluster.
    #[default]
    Issuer,
    // A cluster-wide issuer.
    ClusterIssuer,
}

/// Authentication inside etcd, with a single user: `root`, holding etcd's `root` role, whose
/// password comes from a Secret.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuthSpec {
    /// Turns authentication on: once the cluster has a healthy quorum the operator creates the
    /// root user and runs `auth enable` (see status.authEnabled). Requires spec.tls.client, so
    /// credentials never cross a plaintext connection, and `rootCredentialsSecretRef`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,

    /// Secret of type kubernetes.io/basic-auth in the cluster's namespace: its `password` is
    /// the root user's password, its `username` must be "root". The operator reads it on every
    /// connection; changing the password afterwards is not supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::local_object_reference")]
    pub root_credentials_secret_ref: Option<LocalObjectReference>,
}

impl AuthSpec {
    /// Whether `enabled` is set to true.
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(false)
    }
}

/// One-time initialization of a new cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct BootstrapSpec {
    /// Start from an existing snapshot instead of an empty data directory. Not supported with
    /// the Memory medium.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restore: Option<RestoreSpec>,
}
