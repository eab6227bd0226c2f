//! The parts of an EtcdCluster fixed at creation: TLS, authentication and bootstrap.

use std::time::Duration;

use k8s_openapi::api::core::v1::LocalObjectReference;
use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::shared::RestoreSpec;

/// Transport security of etcd's two listeners. Each side is optional and independent; when
/// both are `operatorIssued`, one per-cluster CA and one certificate per member serve both, so
/// their lifetimes must agree.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[x_kube(validation = Rule::new(OPERATOR_ISSUED_AGREE_RULE).message("spec.tls.client.operatorIssued and spec.tls.peer.operatorIssued must have the same caDuration, certificateDuration and renewBefore: one CA and one certificate per member serve both"))]
pub struct EtcdClusterTls {
    /// TLS of the client API (port 2379). Unset means plaintext.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<ClientTls>,

    /// TLS of the peer API (port 2380), always mutual when set. Unset means plaintext.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<PeerTls>,
}

/// TLS of the client API, from a Secret the user provides (`serverSecretRef`, optionally with
/// `operatorClientSecretRef` for mutual TLS), from cert-manager (`certManager`) or from the
/// operator itself (`operatorIssued`, an extension): exactly one of the three sources.
///
/// The reference API's rule keeps its message: it reads the same for every manifest without
/// `operatorIssued`, and a second rule refuses `operatorIssued` beside another source.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.operatorIssued) || (has(self.serverSecretRef) != has(self.certManager))").message("exactly one of spec.tls.client.serverSecretRef or spec.tls.client.certManager must be set"),
    validation = Rule::new("!has(self.certManager) || !has(self.operatorClientSecretRef)").message("spec.tls.client.operatorClientSecretRef cannot be combined with certManager; use certManager.operatorClientIssuerRef"),
    validation = Rule::new("!has(self.operatorIssued) || (!has(self.serverSecretRef) && !has(self.operatorClientSecretRef) && !has(self.certManager))").message("spec.tls.client.operatorIssued cannot be combined with serverSecretRef, operatorClientSecretRef or certManager"),
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

    /// Extension: certificates the operator issues from a per-cluster CA it keeps, one server
    /// certificate per member. Not with any other source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator_issued: Option<ClientOperatorIssuedTls>,
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

/// TLS of the peer API, always mutual: from a user-provided Secret, from cert-manager or from
/// the operator itself (`operatorIssued`, an extension), exactly one of the three. As for the
/// client side, the reference rule keeps its message and a second rule refuses
/// `operatorIssued` beside another source.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.operatorIssued) || (has(self.secretRef) != has(self.certManager))").message("exactly one of spec.tls.peer.secretRef or spec.tls.peer.certManager must be set"),
    validation = Rule::new("!has(self.operatorIssued) || (!has(self.secretRef) && !has(self.certManager))").message("spec.tls.peer.operatorIssued cannot be combined with secretRef or certManager"),
)]
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

    /// Extension: peer certificates the operator issues from a per-cluster CA it keeps, one
    /// per member. Not with any other source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator_issued: Option<PeerOperatorIssuedTls>,
}

/// The CA lifetime when `caDuration` is unset: 5 years.
pub const DEFAULT_CA_DURATION: &str = "43800h";

/// The leaf lifetime when `certificateDuration` is unset: 90 days.
pub const DEFAULT_CERTIFICATE_DURATION: &str = "2160h";

/// The durations of `operatorIssued`: hours, minutes and seconds in that order, each at most
/// six digits (so no value overflows Kubernetes' 290-year durations), for example `43800h`,
/// `1h30m`, `90s`. A subset of Go's `time.ParseDuration`, the syntax CEL's `duration()` reads.
pub const DURATION_PATTERN: &str =
    r"^([0-9]{1,6}h([0-9]{1,6}m)?([0-9]{1,6}s)?|[0-9]{1,6}m([0-9]{1,6}s)?|[0-9]{1,6}s)$";

/// Both sides `operatorIssued`: one CA and one member certificate serve both, so the lifetimes
/// (with their defaults) must be the same.
const OPERATOR_ISSUED_AGREE_RULE: &str = "!(has(self.client) && has(self.client.operatorIssued) && has(self.peer) && has(self.peer.operatorIssued)) || ((has(self.client.operatorIssued.caDuration) ? duration(self.client.operatorIssued.caDuration) : duration('43800h')) == (has(self.peer.operatorIssued.caDuration) ? duration(self.peer.operatorIssued.caDuration) : duration('43800h')) && (has(self.client.operatorIssued.certificateDuration) ? duration(self.client.operatorIssued.certificateDuration) : duration('2160h')) == (has(self.peer.operatorIssued.certificateDuration) ? duration(self.peer.operatorIssued.certificateDuration) : duration('2160h')) && has(self.client.operatorIssued.renewBefore) == has(self.peer.operatorIssued.renewBefore) && (!has(self.client.operatorIssued.renewBefore) || duration(self.client.operatorIssued.renewBefore) == duration(self.peer.operatorIssued.renewBefore)))";

/// Extension: client-API certificates the operator issues. It keeps a per-cluster CA (ECDSA
/// P-256) in the Secret "<cluster>-ca", gives each member a certificate in the Secret
/// "<member>-tls" (owned by that EtcdMember; a replaced member gets a new one) and, with
/// `mutual`, itself a client certificate in "<cluster>-operator-client-tls".
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("(!has(self.caDuration) || duration(self.caDuration) > duration('0s')) && (!has(self.certificateDuration) || duration(self.certificateDuration) > duration('0s')) && (!has(self.renewBefore) || duration(self.renewBefore) > duration('0s'))").message("spec.tls.client.operatorIssued durations must be longer than 0s"),
    validation = Rule::new("!has(self.renewBefore) || !has(self.certificateDuration) || duration(self.renewBefore) < duration(self.certificateDuration)").message("spec.tls.client.operatorIssued.renewBefore must be shorter than certificateDuration"),
    validation = Rule::new("!has(self.caDuration) || !has(self.certificateDuration) || duration(self.certificateDuration) < duration(self.caDuration)").message("spec.tls.client.operatorIssued.certificateDuration must be shorter than caDuration"),
)]
pub struct ClientOperatorIssuedTls {
    /// Mutual TLS (the default): etcd requires client certificates signed by the cluster's CA
    /// (--client-cert-auth) and the operator issues itself one. False means server-side TLS
    /// only.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub mutual: Option<bool>,

    /// Lifetime of the per-cluster CA, for example "43800h" (the default, 5 years). Renewed
    /// when a third of it is left.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]{1,6}h([0-9]{1,6}m)?([0-9]{1,6}s)?|[0-9]{1,6}m([0-9]{1,6}s)?|[0-9]{1,6}s)$"), extend("default" = "43800h"))]
    pub ca_duration: Option<String>,

    /// Lifetime of each member's and the operator's certificate, for example "2160h" (the
    /// default, 90 days). Shorter than caDuration.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]{1,6}h([0-9]{1,6}m)?([0-9]{1,6}s)?|[0-9]{1,6}m([0-9]{1,6}s)?|[0-9]{1,6}s)$"), extend("default" = "2160h"))]
    pub certificate_duration: Option<String>,

    /// How long before a certificate expires it is renewed, for example "720h"; shorter than
    /// certificateDuration. Unset means when a third of its lifetime is left (720h of the
    /// default 2160h).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^([0-9]{1,6}h([0-9]{1,6}m)?([0-9]{1,6}s)?|[0-9]{1,6}m([0-9]{1,6}s)?|[0-9]{1,6}s)$"
    ))]
    pub renew_before: Option<String>,
}

/// Extension: peer-API certificates the operator issues, from the same per-cluster CA as the
/// client side's when both are `operatorIssued` (then one certificate per member serves both
/// listeners, and the lifetimes must agree).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("(!has(self.caDuration) || duration(self.caDuration) > duration('0s')) && (!has(self.certificateDuration) || duration(self.certificateDuration) > duration('0s')) && (!has(self.renewBefore) || duration(self.renewBefore) > duration('0s'))").message("spec.tls.peer.operatorIssued durations must be longer than 0s"),
    validation = Rule::new("!has(self.renewBefore) || !has(self.certificateDuration) || duration(self.renewBefore) < duration(self.certificateDuration)").message("spec.tls.peer.operatorIssued.renewBefore must be shorter than certificateDuration"),
    validation = Rule::new("!has(self.caDuration) || !has(self.certificateDuration) || duration(self.certificateDuration) < duration(self.caDuration)").message("spec.tls.peer.operatorIssued.certificateDuration must be shorter than caDuration"),
)]
pub struct PeerOperatorIssuedTls {
    /// Lifetime of the per-cluster CA, for example "43800h" (the default, 5 years). Renewed
    /// when a third of it is left.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]{1,6}h([0-9]{1,6}m)?([0-9]{1,6}s)?|[0-9]{1,6}m([0-9]{1,6}s)?|[0-9]{1,6}s)$"), extend("default" = "43800h"))]
    pub ca_duration: Option<String>,

    /// Lifetime of each member's certificate, for example "2160h" (the default, 90 days).
    /// Shorter than caDuration.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]{1,6}h([0-9]{1,6}m)?([0-9]{1,6}s)?|[0-9]{1,6}m([0-9]{1,6}s)?|[0-9]{1,6}s)$"), extend("default" = "2160h"))]
    pub certificate_duration: Option<String>,

    /// How long before a certificate expires it is renewed, for example "720h"; shorter than
    /// certificateDuration. Unset means when a third of its lifetime is left.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^([0-9]{1,6}h([0-9]{1,6}m)?([0-9]{1,6}s)?|[0-9]{1,6}m([0-9]{1,6}s)?|[0-9]{1,6}s)$"
    ))]
    pub renew_before: Option<String>,
}

/// The lifetimes of operator-issued certificates, defaults applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CertificateLifetimes {
    /// Lifetime of the per-cluster CA.
    pub ca: Duration,
    /// Lifetime of each leaf (member and operator client certificates).
    pub certificate: Duration,
    /// Renew a leaf this long before it expires; `None` means when a third of its lifetime is
    /// left.
    pub renew_before: Option<Duration>,
}

impl Default for CertificateLifetimes {
    fn default() -> Self {
        CertificateLifetimes {
            ca: parse_duration(DEFAULT_CA_DURATION).expect("the default parses"),
            certificate: parse_duration(DEFAULT_CERTIFICATE_DURATION).expect("the default parses"),
            renew_before: None,
        }
    }
}

impl CertificateLifetimes {
    fn of(
        ca: Option<&str>,
        certificate: Option<&str>,
        renew_before: Option<&str>,
    ) -> Result<Self, String> {
        let read = |field: &str, value: &str| {
            parse_duration(value).ok_or_else(|| {
                format!("operatorIssued.{field} {value:?} is not a duration such as 2160h or 1h30m")
            })
        };
        let defaults = CertificateLifetimes::default();
        Ok(CertificateLifetimes {
            ca: ca.map_or(Ok(defaults.ca), |v| read("caDuration", v))?,
            certificate: certificate
                .map_or(Ok(defaults.certificate), |v| read("certificateDuration", v))?,
            renew_before: renew_before.map(|v| read("renewBefore", v)).transpose()?,
        })
    }
}

impl ClientOperatorIssuedTls {
    /// Whether etcd requires client certificates and the operator issues itself one (`mutual`,
    /// true when unset).
    pub fn is_mutual(&self) -> bool {
        self.mutual.unwrap_or(true)
    }

    /// The lifetimes with their defaults; an error names a field that is no duration (which
    /// the CRD's pattern refuses, so only an object written past the API server has one).
    pub fn lifetimes(&self) -> Result<CertificateLifetimes, String> {
        CertificateLifetimes::of(
            self.ca_duration.as_deref(),
            self.certificate_duration.as_deref(),
            self.renew_before.as_deref(),
        )
    }
}

impl PeerOperatorIssuedTls {
    /// The lifetimes with their defaults, as [`ClientOperatorIssuedTls::lifetimes`].
    pub fn lifetimes(&self) -> Result<CertificateLifetimes, String> {
        CertificateLifetimes::of(
            self.ca_duration.as_deref(),
            self.certificate_duration.as_deref(),
            self.renew_before.as_deref(),
        )
    }
}

impl EtcdClusterTls {
    /// Whether either side is `operatorIssued` (the operator then keeps the cluster's CA).
    pub fn is_operator_issued(&self) -> bool {
        self.client
            .as_ref()
            .is_some_and(|c| c.operator_issued.is_some())
            || self
                .peer
                .as_ref()
                .is_some_and(|p| p.operator_issued.is_some())
    }

    /// The lifetimes of the operator-issued certificates: the client side's, else the peer
    /// side's (the CRD makes them agree when both are set); `None` without `operatorIssued`.
    pub fn operator_issued_lifetimes(&self) -> Option<Result<CertificateLifetimes, String>> {
        if let Some(client) = self
            .client
            .as_ref()
            .and_then(|c| c.operator_issued.as_ref())
        {
            return Some(client.lifetimes());
        }
        self.peer
            .as_ref()
            .and_then(|p| p.operator_issued.as_ref())
            .map(PeerOperatorIssuedTls::lifetimes)
    }
}

/// Reads a duration of [`DURATION_PATTERN`] (`2160h`, `1h30m`, `90s`); `None` for anything
/// else.
pub fn parse_duration(value: &str) -> Option<Duration> {
    let mut rest = value;
    let mut total: u64 = 0;
    let mut last_unit = u64::MAX;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 6 {
            return None;
        }
        let number: u64 = rest[..digits].parse().ok()?;
        let unit = match rest.as_bytes().get(digits)? {
            b'h' => 3600,
            b'm' => 60,
            b's' => 1,
            _ => return None,
        };
        // h, m, s in that order, each at most once.
        if unit >= last_unit {
            return None;
        }
        last_unit = unit;
        total += number * unit;
        rest = &rest[digits + 1..];
    }
    Some(Duration::from_secs(total))
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
    /// connection. A new `password` is applied to etcd's root user (UserChangePassword);
    /// if the operator restarted since the old one last worked, add the old one under the
    /// key `previousPassword` until the Event RootPasswordChanged appears.
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

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: u64 = 3600;

    #[test]
    fn durations_read_hours_minutes_and_seconds_in_that_order() {
        let read = |s: &str| parse_duration(s).map(|d| d.as_secs());
        assert_eq!(read("43800h"), Some(43_800 * HOUR));
        assert_eq!(read("2160h"), Some(2_160 * HOUR));
        assert_eq!(read("1h30m"), Some(5_400));
        assert_eq!(read("1h30m15s"), Some(5_415));
        assert_eq!(read("1h15s"), Some(3_615));
        assert_eq!(read("90m"), Some(5_400));
        assert_eq!(read("20s"), Some(20));
        assert_eq!(read("0h"), Some(0));
        assert_eq!(read("999999h"), Some(999_999 * HOUR));
        for bad in [
            "", "h", "5y", "90d", "1.5h", "-1h", "+1h", "30m1h", "1h1h", "1s1m", "1000000h", "1ms",
            "1 h", "1H", "2160", "h30m",
        ] {
            assert_eq!(read(bad), None, "{bad:?}");
        }
    }

    /// The pattern the CRD carries is the constant, and the defaults the CRD fills in are the
    /// ones the Rust side assumes.
    #[test]
    fn the_crd_carries_the_pattern_and_defaults_the_code_assumes() {
        let crd = crate::crds()
            .into_iter()
            .find(|crd| crd.spec.names.plural == "etcdclusters")
            .unwrap();
        let crd = serde_json::to_value(crd).unwrap();
        let tls = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["tls"]["properties"];
        for side in ["client", "peer"] {
            check_properties(&tls[side]["properties"]["operatorIssued"]["properties"]);
        }
        let client = &tls["client"]["properties"]["operatorIssued"]["properties"];
        assert_eq!(client["mutual"]["default"], true);
        assert!(tls["peer"]["properties"]["operatorIssued"]["properties"]["mutual"].is_null());
    }

    fn check_properties(properties: &serde_json::Value) {
        for field in ["caDuration", "certificateDuration", "renewBefore"] {
            assert_eq!(
                properties[field]["pattern"], DURATION_PATTERN,
                "{field}: {properties}"
            );
        }
        assert_eq!(properties["caDuration"]["default"], DEFAULT_CA_DURATION);
        assert_eq!(
            properties["certificateDuration"]["default"],
            DEFAULT_CERTIFICATE_DURATION
        );
        assert!(properties["renewBefore"].get("default").is_none());
    }

    #[test]
    fn lifetimes_take_the_defaults_and_the_client_side_first() {
        let defaults = CertificateLifetimes::default();
        assert_eq!(defaults.ca.as_secs(), 5 * 8_760 * HOUR);
        assert_eq!(defaults.certificate.as_secs(), 90 * 24 * HOUR);
        assert_eq!(defaults.renew_before, None);
        assert_eq!(
            ClientOperatorIssuedTls::default().lifetimes().unwrap(),
            defaults
        );
        assert!(ClientOperatorIssuedTls::default().is_mutual());
        let server_side = ClientOperatorIssuedTls {
            mutual: Some(false),
            certificate_duration: Some("24h".into()),
            renew_before: Some("8h".into()),
            ..Default::default()
        };
        assert!(!server_side.is_mutual());
        assert_eq!(
            server_side.lifetimes().unwrap(),
            CertificateLifetimes {
                ca: defaults.ca,
                certificate: Duration::from_secs(24 * HOUR),
                renew_before: Some(Duration::from_secs(8 * HOUR)),
            }
        );
        let bad = PeerOperatorIssuedTls {
            ca_duration: Some("5y".into()),
            ..Default::default()
        };
        assert!(bad.lifetimes().unwrap_err().contains("caDuration \"5y\""));

        let mut tls = EtcdClusterTls::default();
        assert!(!tls.is_operator_issued());
        assert_eq!(tls.operator_issued_lifetimes(), None);
        tls.peer = Some(PeerTls {
            operator_issued: Some(PeerOperatorIssuedTls {
                certificate_duration: Some("1h".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert!(tls.is_operator_issued());
        assert_eq!(
            tls.operator_issued_lifetimes()
                .unwrap()
                .unwrap()
                .certificate,
            Duration::from_secs(HOUR)
        );
        tls.client = Some(ClientTls {
            operator_issued: Some(server_side),
            ..Default::default()
        });
        assert_eq!(
            tls.operator_issued_lifetimes()
                .unwrap()
                .unwrap()
                .certificate,
            Duration::from_secs(24 * HOUR)
        );
        tls.client = Some(ClientTls {
            server_secret_ref: Some(LocalObjectReference {
                name: "server".into(),
            }),
            ..Default::default()
        });
        assert_eq!(
            tls.operator_issued_lifetimes()
                .unwrap()
                .unwrap()
                .certificate,
            Duration::from_secs(HOUR),
            "a client side from a Secret leaves the peer side's lifetimes"
        );
    }
}
