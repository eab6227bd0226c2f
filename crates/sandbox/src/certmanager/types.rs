//! The `cert-manager.io/v1` kinds as the stand-in reads them: the fields of cert-manager's API
//! it acts on, typed, and the subtrees it does not model kept as JSON (to say that they are not
//! supported when they are set). Field names follow cert-manager's Go types.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `spec` of a Certificate.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "cert-manager.io",
    version = "v1",
    kind = "Certificate",
    namespaced,
    status = "CertificateStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct CertificateSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<X509Subject>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub literal_subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_name: Option<String>,
    /// A Go duration (`2160h`, `30s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_before: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renew_before_percentage: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renewal: Option<CertificateRenewal>,
    #[serde(default, rename = "dnsNames", skip_serializing_if = "Vec::is_empty")]
    pub dns_names: Vec<String>,
    #[serde(default, rename = "ipAddresses", skip_serializing_if = "Vec::is_empty")]
    pub ip_addresses: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uris: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub email_addresses: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_names: Option<Value>,
    pub secret_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_template: Option<SecretTemplate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keystores: Option<Value>,
    pub issuer_ref: IssuerReference,
    #[serde(default, rename = "isCA")]
    pub is_ca: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usages: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key: Option<CertificatePrivateKey>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature_algorithm: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encode_usages_in_request: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision_history_limit: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_output_formats: Vec<AdditionalOutputFormat>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_constraints: Option<Value>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct X509Subject {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub organizations: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub countries: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub organizational_units: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub localities: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provinces: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub street_addresses: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub postal_codes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serial_number: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CertificateRenewal {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<Value>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct SecretTemplate {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// `issuerRef`: `kind` defaults to `Issuer`, `group` to `cert-manager.io`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct IssuerReference {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

impl IssuerReference {
    pub fn kind(&self) -> &str {
        self.kind
            .as_deref()
            .filter(|k| !k.is_empty())
            .unwrap_or(ISSUER_KIND)
    }

    pub fn group(&self) -> &str {
        self.group
            .as_deref()
            .filter(|g| !g.is_empty())
            .unwrap_or(GROUP)
    }
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CertificatePrivateKey {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotation_policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<i64>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct AdditionalOutputFormat {
    #[serde(rename = "type")]
    pub type_: String,
}

/// `status` of a Certificate.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CertificateStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_after: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renewal_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_private_key_secret_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_issuance_attempts: Option<i64>,
}

/// A condition of a Certificate, Issuer or ClusterIssuer.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// `spec` of an Issuer or ClusterIssuer: one issuer type.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IssuerSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acme: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<CaIssuer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vault: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_signed: Option<SelfSignedIssuer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub venafi: Option<Value>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SelfSignedIssuer {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub crl_distribution_points: Vec<String>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CaIssuer {
    pub secret_name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub crl_distribution_points: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ocsp_servers: Vec<String>,
    #[serde(
        default,
        rename = "issuingCertificateURLs",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub issuing_certificate_urls: Vec<String>,
}

/// `status` of an Issuer or ClusterIssuer.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct IssuerStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// An Issuer: signs Certificates of its own namespace.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "cert-manager.io",
    version = "v1",
    kind = "Issuer",
    namespaced,
    status = "IssuerStatus",
    schema = "disabled"
)]
pub struct IssuerSpecNamespaced {
    #[serde(flatten)]
    pub config: IssuerSpec,
}

/// A ClusterIssuer: signs Certificates of every namespace; a `ca` one reads its Secret from
/// the cluster resource namespace.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[kube(
    group = "cert-manager.io",
    version = "v1",
    kind = "ClusterIssuer",
    status = "IssuerStatus",
    schema = "disabled"
)]
pub struct ClusterIssuerSpec {
    #[serde(flatten)]
    pub config: IssuerSpec,
}

/// The API group.
pub const GROUP: &str = "cert-manager.io";
pub const ISSUER_KIND: &str = "Issuer";
pub const CLUSTER_ISSUER_KIND: &str = "ClusterIssuer";
