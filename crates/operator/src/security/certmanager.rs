//! cert-manager as the source of a cluster's certificates: the `cert-manager.io/v1`
//! Certificates the operator wants, whether one in the API matches, and whether it is Ready.
//! Pure: the objects come in as JSON values, so every judgement is unit-tested without an API.
//!
//! Names and shapes follow the reference operator, so a cluster moved to us keeps its Secrets:
//! `<cluster>-server` (Secret `<cluster>-server-tls`), `<cluster>-operator-client`
//! (`<cluster>-operator-client-tls`) and `<cluster>-peer` (`<cluster>-peer-tls`). The SANs are
//! wildcards over the headless Service (`*.<cluster>.<ns>.svc`, with and without the cluster
//! domain), so scaling never needs a new certificate. Unlike the reference, which creates each
//! Certificate once and never looks again, the fields the operator sets are kept: a Certificate
//! edited by hand, or whose wanted shape changed, is patched back (only those fields, so
//! cert-manager's defaults of the others are left alone).

use etcd_operator_api::EtcdCluster;
use etcd_operator_api::cluster::{IssuerKind, IssuerReference};
use etcd_operator_api::labels::CLUSTER;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::{Value, json};

use crate::build::{client_service_name, headless_service_name};

/// cert-manager's API group and version.
pub const GROUP: &str = "cert-manager.io";
pub const VERSION: &str = "v1";

/// A cert-manager kind (`Certificate`, `Issuer`, `ClusterIssuer`) as a dynamic resource.
pub fn resource(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(GROUP, VERSION, kind))
}

/// What a Certificate is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CertificateRole {
    Server,
    OperatorClient,
    Peer,
}

/// A Certificate the operator wants to exist.
#[derive(Clone, Debug, PartialEq)]
pub struct WantedCertificate {
    pub role: CertificateRole,
    /// The Certificate's name.
    pub name: String,
    /// The Secret cert-manager writes.
    pub secret_name: String,
    /// The issuer it names, for the checks that the issuer exists.
    pub issuer: IssuerReference,
    /// The `spec` the operator sets (every field of it is kept in sync).
    pub spec: Value,
}

/// The Certificates `cluster`'s `spec.tls` asks cert-manager for, in a fixed order (server,
/// operator client, peer); empty when no part of it uses cert-manager.
pub fn wanted_certificates(cluster: &EtcdCluster, cluster_domain: &str) -> Vec<WantedCertificate> {
    let Some(tls) = cluster.spec.tls.as_ref() else {
        return Vec::new();
    };
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let mut wanted = Vec::new();
    let both = [
        "server auth",
        "client auth",
        "digital signature",
        "key encipherment",
    ];
    if let Some(cm) = tls.client.as_ref().and_then(|c| c.cert_manager.as_ref()) {
        wanted.push(certificate(
            CertificateRole::Server,
            &format!("{name}-server"),
            &cm.server_issuer_ref,
            &server_dns_names(&name, &namespace, cluster_domain),
            &["127.0.0.1"],
            &both,
        ));
        if let Some(issuer) = &cm.operator_client_issuer_ref {
            wanted.push(certificate(
                CertificateRole::OperatorClient,
                &format!("{name}-operator-client"),
                issuer,
                &[],
                &[],
                &["client auth", "digital signature", "key encipherment"],
            ));
        }
    }
    if let Some(cm) = tls.peer.as_ref().and_then(|p| p.cert_manager.as_ref()) {
        wanted.push(certificate(
            CertificateRole::Peer,
            &format!("{name}-peer"),
            &cm.issuer_ref,
            &peer_dns_names(&name, &namespace, cluster_domain),
            &[],
            &both,
        ));
    }
    wanted
}

fn certificate(
    role: CertificateRole,
    name: &str,
    issuer: &IssuerReference,
    dns_names: &[String],
    ip_addresses: &[&str],
    usages: &[&str],
) -> WantedCertificate {
    let secret_name = format!("{name}-tls");
    let mut spec = json!({
        "secretName": secret_name,
        "commonName": name,
        "issuerRef": {
            "name": issuer.name,
            "kind": issuer_kind(issuer),
            "group": GROUP,
        },
        // Pinned, as the reference does: RSA 2048 is what every etcd build negotiates.
        "privateKey": {"algorithm": "RSA", "size": 2048},
        "usages": usages,
    });
    if !dns_names.is_empty() {
        spec["dnsNames"] = json!(dns_names);
    }
    if !ip_addresses.is_empty() {
        spec["ipAddresses"] = json!(ip_addresses);
    }
    WantedCertificate {
        role,
        name: name.to_string(),
        secret_name,
        issuer: issuer.clone(),
        spec,
    }
}

/// The Certificate object to create for `wanted`: in the cluster's namespace, labelled with
/// the cluster, owned (as controller) by it, so it goes with the cluster.
pub fn certificate_object(
    cluster: &EtcdCluster,
    wanted: &WantedCertificate,
) -> Result<DynamicObject, crate::build::BuildError> {
    let owner = crate::build::cluster_owner_reference(cluster)?;
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let mut object = DynamicObject::new(&wanted.name, &resource("Certificate"))
        .within(cluster.metadata.namespace.as_deref().unwrap_or_default())
        .data(json!({"spec": wanted.spec}));
    object.metadata.labels = Some([(CLUSTER.to_string(), name)].into_iter().collect());
    object.metadata.owner_references = Some(vec![owner]);
    Ok(object)
}

/// `Issuer` or `ClusterIssuer`.
pub fn issuer_kind(issuer: &IssuerReference) -> &'static str {
    match issuer.kind.unwrap_or_default() {
        IssuerKind::Issuer => "Issuer",
        IssuerKind::ClusterIssuer => "ClusterIssuer",
    }
}

/// The server certificate's names: every member (a wildcard over the headless Service), the
/// headless and client Services, each also with the cluster domain, and `localhost`.
fn server_dns_names(cluster: &str, namespace: &str, domain: &str) -> Vec<String> {
    let headless = format!("{}.{namespace}.svc", headless_service_name(cluster));
    let client = format!("{}.{namespace}.svc", client_service_name(cluster));
    let wildcard = format!("*.{headless}");
    let mut names = Vec::new();
    for name in [wildcard, headless, client] {
        names.push(format!("{name}.{domain}"));
        names.push(name);
    }
    names.push("localhost".to_string());
    names
}

/// The peer certificate's names: every member, with and without the cluster domain.
fn peer_dns_names(cluster: &str, namespace: &str, domain: &str) -> Vec<String> {
    let wildcard = format!("*.{}.{namespace}.svc", headless_service_name(cluster));
    vec![format!("{wildcard}.{domain}"), wildcard]
}

/// The fields of `wanted` that `current` (a Certificate's `spec` in the API) lacks or has
/// otherwise, as a merge patch of `spec`; `None` when it matches. Fields the operator does not
/// set (cert-manager's defaults, a user's `duration`) are not compared.
pub fn spec_patch(current: &Value, wanted: &Value) -> Option<Value> {
    let wanted = wanted.as_object()?;
    let mut patch = serde_json::Map::new();
    for (key, want) in wanted {
        if !same(current.get(key), want) {
            patch.insert(key.clone(), want.clone());
        }
    }
    (!patch.is_empty()).then_some(Value::Object(patch))
}

/// Whether `have` carries `want`: objects field by field (extra fields allowed), lists as
/// sets of strings (cert-manager keeps the order, a hand edit may not), the rest exactly.
fn same(have: Option<&Value>, want: &Value) -> bool {
    let Some(have) = have else {
        return false;
    };
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w.iter().all(|(k, v)| same(h.get(k), v)),
        (Value::Array(h), Value::Array(w)) => {
            let mut h: Vec<String> = h.iter().map(Value::to_string).collect();
            let mut w: Vec<String> = w.iter().map(Value::to_string).collect();
            h.sort();
            w.sort();
            h == w
        }
        _ => have == want,
    }
}

/// What a Certificate's `status` says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// Not (yet) Ready: the condition's reason and message, when there are any.
    NotReady(String),
}

/// The Certificate's `Ready` condition.
pub fn readiness(certificate: &Value) -> Readiness {
    let ready = certificate
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|conditions| {
            conditions
                .iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        });
    match ready {
        Some(c) if c.get("status").and_then(Value::as_str) == Some("True") => Readiness::Ready,
        Some(c) => {
            let text = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let (reason, message) = (text("reason"), text("message"));
            Readiness::NotReady(match (reason.is_empty(), message.is_empty()) {
                (true, true) => "its Ready condition is not True".to_string(),
                (false, true) => reason,
                (true, false) => message,
                (false, false) => format!("{reason}: {message}"),
            })
        }
        None => Readiness::NotReady("cert-manager has not reported on it yet".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etcd_operator_api::EtcdClusterSpec;
    use etcd_operator_api::cluster::{
        ClientCertManagerTls, ClientTls, EtcdClusterTls, PeerCertManagerTls, PeerTls,
    };

    fn issuer(name: &str, kind: Option<IssuerKind>) -> IssuerReference {
        IssuerReference {
            name: name.into(),
            kind,
        }
    }

    fn cluster(client: Option<ClientCertManagerTls>, peer: Option<IssuerReference>) -> EtcdCluster {
        let mut c = EtcdCluster::new(
            "etcd",
            EtcdClusterSpec {
                tls: Some(EtcdClusterTls {
                    client: client.map(|cm| ClientTls {
                        cert_manager: Some(cm),
                        ..Default::default()
                    }),
                    peer: peer.map(|issuer_ref| PeerTls {
                        cert_manager: Some(PeerCertManagerTls { issuer_ref }),
                        ..Default::default()
                    }),
                }),
                ..Default::default()
            },
        );
        c.metadata.namespace = Some("prod".into());
        c
    }

    #[test]
    fn each_cert_manager_part_asks_for_its_certificate_with_the_reference_names() {
        let c = cluster(
            Some(ClientCertManagerTls {
                server_issuer_ref: issuer("ca", None),
                operator_client_issuer_ref: Some(issuer(
                    "clients",
                    Some(IssuerKind::ClusterIssuer),
                )),
            }),
            Some(issuer("peers", None)),
        );
        let wanted = wanted_certificates(&c, "cluster.local");
        let names: Vec<(&str, &str)> = wanted
            .iter()
            .map(|w| (w.name.as_str(), w.secret_name.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("etcd-server", "etcd-server-tls"),
                ("etcd-operator-client", "etcd-operator-client-tls"),
                ("etcd-peer", "etcd-peer-tls")
            ]
        );
        let server = &wanted[0].spec;
        assert_eq!(
            server["issuerRef"],
            json!({"name": "ca", "kind": "Issuer", "group": "cert-manager.io"})
        );
        let dns: Vec<&str> = server["dnsNames"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        for name in [
            "*.etcd.prod.svc",
            "*.etcd.prod.svc.cluster.local",
            "etcd-client.prod.svc",
            "etcd-client.prod.svc.cluster.local",
            "localhost",
        ] {
            assert!(dns.contains(&name), "{name} missing from {dns:?}");
        }
        assert_eq!(server["ipAddresses"], json!(["127.0.0.1"]));
        assert!(
            server["usages"]
                .as_array()
                .unwrap()
                .contains(&json!("server auth"))
        );
        let client = &wanted[1].spec;
        assert_eq!(client["issuerRef"]["kind"], "ClusterIssuer");
        assert_eq!(client["commonName"], "etcd-operator-client");
        assert!(client.get("dnsNames").is_none());
        assert!(
            !client["usages"]
                .as_array()
                .unwrap()
                .contains(&json!("server auth"))
        );
        let peer = &wanted[2].spec;
        assert_eq!(
            peer["dnsNames"],
            json!(["*.etcd.prod.svc.cluster.local", "*.etcd.prod.svc"])
        );
    }

    #[test]
    fn secrets_and_no_tls_ask_for_nothing_and_server_only_skips_the_client_certificate() {
        let mut plain = cluster(None, None);
        assert!(wanted_certificates(&plain, "cluster.local").is_empty());
        plain.spec.tls = None;
        assert!(wanted_certificates(&plain, "cluster.local").is_empty());
        let server_only = cluster(
            Some(ClientCertManagerTls {
                server_issuer_ref: issuer("ca", None),
                operator_client_issuer_ref: None,
            }),
            None,
        );
        let wanted = wanted_certificates(&server_only, "cozy.local");
        assert_eq!(wanted.len(), 1);
        assert!(
            wanted[0].spec["dnsNames"]
                .as_array()
                .unwrap()
                .contains(&json!("*.etcd.prod.svc.cozy.local"))
        );
    }

    #[test]
    fn a_matching_certificate_needs_no_patch_whatever_cert_manager_added() {
        let c = cluster(None, Some(issuer("peers", None)));
        let wanted = &wanted_certificates(&c, "cluster.local")[0].spec;
        let mut current = wanted.clone();
        current["duration"] = json!("2160h0m0s");
        current["privateKey"]["rotationPolicy"] = json!("Never");
        current["revisionHistoryLimit"] = json!(1);
        // A hand edit that reorders the names changes nothing either.
        current["dnsNames"] = json!(["*.etcd.prod.svc", "*.etcd.prod.svc.cluster.local"]);
        assert_eq!(spec_patch(&current, wanted), None);
    }

    #[test]
    fn a_hand_edit_or_a_changed_shape_is_patched_back_field_by_field() {
        let c = cluster(None, Some(issuer("peers", None)));
        let wanted = &wanted_certificates(&c, "cluster.local")[0].spec;
        let mut edited = wanted.clone();
        edited["dnsNames"] = json!(["*.etcd.prod.svc"]);
        edited["issuerRef"]["name"] = json!("other");
        edited["duration"] = json!("1h");
        let patch = spec_patch(&edited, wanted).unwrap();
        assert_eq!(
            patch,
            json!({"dnsNames": wanted["dnsNames"], "issuerRef": wanted["issuerRef"]})
        );
        let mut missing = wanted.clone();
        missing.as_object_mut().unwrap().remove("usages");
        assert_eq!(
            spec_patch(&missing, wanted),
            Some(json!({"usages": wanted["usages"]}))
        );
        assert_eq!(spec_patch(&json!({}), wanted).unwrap(), *wanted);
    }

    #[test]
    fn readiness_reads_the_ready_condition_with_its_reason() {
        let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(readiness(&ready), Readiness::Ready);
        let failing = json!({"status": {"conditions": [
            {"type": "Issuing", "status": "True"},
            {"type": "Ready", "status": "False", "reason": "IssuerNotFound", "message": "Issuer ca not found"}
        ]}});
        assert_eq!(
            readiness(&failing),
            Readiness::NotReady("IssuerNotFound: Issuer ca not found".into())
        );
        assert!(
            matches!(readiness(&json!({})), Readiness::NotReady(m) if m.contains("not reported"))
        );
        let bare = json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}});
        assert!(matches!(readiness(&bare), Readiness::NotReady(m) if m.contains("not True")));
    }
}
