//! The certificates `observe` reads: cert-manager's Certificates (whether each exists, the
//! patch that would bring it back, why it is not Ready) and the operator-issued ones (the CA
//! Secret, each member's, the operator's client Secret, each judged current, missing or due).

use std::collections::BTreeMap;

use etcd_operator_api::EtcdCluster;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::DynamicObject;

use super::Observer;
use crate::build::headless_service_name;
use crate::etcd::ClientTls;
use crate::plan::{CertificateFacts, ObservedMember, SecurityFacts};
use crate::security::{CertificateValidity, Purpose, TlsMaterial, certmanager, check_tls_secret};

/// How long past its renewal time an operator-issued certificate may stay before it counts as
/// expiring (the renewal runs at the next pass; only one that did not happen is reported).
const RENEWAL_GRACE: std::time::Duration = std::time::Duration::from_secs(600);

/// Whether `secret` is owned by the object with `uid`.
fn owned_by(secret: &Secret, uid: &str) -> bool {
    secret
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.uid == uid)
}

impl Observer {
    /// Operator-issued certificates (`spec.tls.*.operatorIssued`): the CA Secret, each
    /// member's Secret and the operator's client Secret, each judged current, missing or due
    /// (the planner issues what is missing or due). With the client side operator-issued, the
    /// operator dials etcd with the CA and, under mutual TLS, its own certificate.
    /// Returns the `ca.crt` of each member's Secret, by member (what its etcd would trust).
    pub(super) async fn observe_issued(
        &self,
        cluster: &EtcdCluster,
        members: &[ObservedMember],
        facts: &mut SecurityFacts,
    ) -> BTreeMap<String, Vec<u8>> {
        use crate::plan::{IssuedFacts, IssuedMember, IssuedState, RotationRequest};
        use crate::security::issuer;
        let Some(tls) = cluster.spec.tls.as_ref() else {
            return BTreeMap::new();
        };
        let Some(lifetimes) = tls.operator_issued_lifetimes() else {
            return BTreeMap::new();
        };
        let lifetimes = match lifetimes {
            Ok(lifetimes) => lifetimes,
            Err(problem) => {
                facts.problems.push(format!("spec.tls: {problem}"));
                return BTreeMap::new();
            }
        };
        let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
        let name = cluster.metadata.name.clone().unwrap_or_default();
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &namespace);
        let now = k8s_openapi::jiff::Timestamp::now();
        let mut issued = IssuedFacts::default();
        let ca_name = issuer::ca_secret_name(&name);
        let read = |secret: String| {
            let api = api.clone();
            async move {
                api.get_opt(&secret)
                    .await
                    .map_err(|e| format!("Secret {secret} cannot be read: {e}"))
            }
        };
        let mut previous = None;
        let mut bundle_pem = None;
        let mut rotated_for = None;
        let ca = match read(ca_name.clone()).await {
            Err(problem) => {
                facts.problems.push(problem);
                issued.ca = IssuedState::Blocked;
                None
            }
            Ok(None) => {
                issued.ca = IssuedState::Missing;
                None
            }
            Ok(Some(secret)) => match issuer::ca_from_secret(&ca_name, &secret) {
                Ok(ca) => {
                    facts.validity.push(CertificateValidity {
                        secret: ca_name.clone(),
                        what: "operator-issued CA",
                        not_before: ca.not_before,
                        not_after: ca.not_after,
                        renew_at: None,
                    });
                    match issuer::previous_ca_from_secret(&ca_name, &secret) {
                        None => {}
                        Some(Ok(old)) => previous = Some(old),
                        Some(Err(problem)) => {
                            facts.problems.push(format!(
                                "{problem} (the previous CA of a rotation in progress); restore the Secret from a backup"
                            ));
                            issued.ca = IssuedState::Blocked;
                        }
                    }
                    bundle_pem =
                        Some(issuer::ca_bundle(&secret).unwrap_or_else(|| ca.cert_pem.clone()));
                    rotated_for = secret
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(issuer::ROTATED_FOR_ANNOTATION))
                        .cloned();
                    Some(ca)
                }
                Err(problem) => {
                    facts.problems.push(format!(
                        "{problem}; the operator made this Secret and signs every member's certificate with it: restore it from a backup"
                    ));
                    issued.ca = IssuedState::Blocked;
                    None
                }
            },
        };
        issued.rotating = previous.is_some();
        if let Some(ca) = ca.as_ref()
            && previous.is_none()
        {
            let asked = cluster
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(issuer::ROTATE_CA_ANNOTATION))
                .filter(|token| !token.is_empty());
            issued.rotation_wanted = match asked {
                Some(token) if rotated_for.as_ref() != Some(token) => Some(RotationRequest {
                    token: Some(token.clone()),
                    why: format!(
                        "asked for by the annotation {}={token}",
                        issuer::ROTATE_CA_ANNOTATION
                    ),
                }),
                _ if issuer::ca_renewal_due(ca, now) => Some(RotationRequest {
                    token: asked.cloned(),
                    why: format!("the CA expires at {}", ca.not_after),
                }),
                _ => None,
            };
        }
        // What members and the operator trust: the bundle (the CA, and the previous one while a
        // rotation runs).
        let ca_pem = bundle_pem.clone().map(String::into_bytes);
        let signing_pem = ca.as_ref().map(|c| c.cert_pem.clone().into_bytes());
        let previous_pem = previous.as_ref().map(|c| c.cert_pem.clone().into_bytes());
        // Signed by the previous CA and not the current one.
        let by_previous = |cert_pem: &[u8]| match (&previous_pem, &signing_pem) {
            (Some(old), Some(new)) => {
                crate::security::chains_to(cert_pem, old, now)
                    && !crate::security::chains_to(cert_pem, new, now)
            }
            _ => false,
        };
        // A leaf Secret judged against the CA: current, missing, or due (and why); with its
        // material and validity when it is usable.
        let judge = |secret_name: &str,
                     secret: Option<&Secret>,
                     purpose: Purpose,
                     names: &[String],
                     owner: Option<&str>|
         -> (IssuedState, Option<(TlsMaterial, CertificateValidity)>) {
            let Some(secret) = secret else {
                return (IssuedState::Missing, None);
            };
            let Some(ca_pem) = ca_pem.as_deref() else {
                return (IssuedState::Blocked, None);
            };
            if let Some(uid) = owner
                && !owned_by(secret, uid)
            {
                return (
                    IssuedState::Due(
                        "the Secret belonged to an earlier member of the same name".to_string(),
                    ),
                    None,
                );
            }
            let ca_for_check = (purpose == Purpose::OperatorClient).then_some(ca_pem);
            match check_tls_secret(secret_name, Some(secret), purpose, ca_for_check, names, now) {
                Err(problem) => (IssuedState::Due(problem), None),
                Ok(m)
                    if purpose != Purpose::OperatorClient
                        && m.ca_pem.as_deref() != Some(ca_pem) =>
                {
                    (
                        IssuedState::Due(format!(
                            "its ca.crt is not the cluster's CA bundle (ca.crt of {ca_name})"
                        )),
                        None,
                    )
                }
                Ok(m) => {
                    let due_at =
                        issuer::renewal_time(m.not_before, m.not_after, lifetimes.renew_before);
                    let mut validity = CertificateValidity::of(secret_name, purpose, &m);
                    // Expiring only when a renewal that was due has not happened.
                    validity.renew_at = Some(due_at + RENEWAL_GRACE);
                    let state = if now >= due_at {
                        IssuedState::Due(format!("renewal due: it expires at {}", m.not_after))
                    } else {
                        IssuedState::Current
                    };
                    (state, Some((m, validity)))
                }
            }
        };
        let headless = headless_service_name(&name);
        let mut signed_by_lost_ca = false;
        let mut trust = BTreeMap::new();
        for m in members {
            if m.member.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let member = m.member.metadata.name.clone().unwrap_or_default();
            let uid = m.member.metadata.uid.clone().unwrap_or_default();
            let secret_name = issuer::member_secret_name(&member);
            let secret = match read(secret_name.clone()).await {
                Ok(secret) => secret,
                Err(problem) => {
                    facts.problems.push(problem);
                    continue;
                }
            };
            if ca.is_none() && secret.as_ref().is_some_and(|s| owned_by(s, &uid)) {
                signed_by_lost_ca = true;
            }
            let names = [format!("{member}.{headless}.{namespace}.svc")];
            let (state, usable) = judge(
                &secret_name,
                secret.as_ref(),
                Purpose::Server,
                &names,
                Some(&uid),
            );
            let trusted = secret
                .as_ref()
                .and_then(|s| s.data.as_ref())
                .and_then(|d| d.get("ca.crt"))
                .map(|v| v.0.clone());
            let has_bundle = trusted.is_some() && trusted.as_deref() == ca_pem.as_deref();
            if let Some(trusted) = trusted {
                trust.insert(member.clone(), trusted);
            }
            let by_previous = usable
                .as_ref()
                .is_some_and(|(m, _)| by_previous(&m.cert_pem));
            facts.validity.extend(usable.map(|(_, validity)| validity));
            issued.members.push(IssuedMember {
                member,
                uid,
                state,
                by_previous,
                has_bundle,
            });
        }
        if signed_by_lost_ca && issued.ca == IssuedState::Missing {
            facts.problems.push(format!(
                "Secret {ca_name} (operator-issued CA) is gone, but the members run on certificates it signed; restore it from a backup (a new CA cannot be phased in: the members trust only the lost one, and a rotation needs its key to keep their certificates valid meanwhile)"
            ));
            issued.ca = IssuedState::Blocked;
        }
        let client_issued = tls.client.as_ref().and_then(|c| c.operator_issued.as_ref());
        let mut identity = None;
        if client_issued.is_some_and(|c| c.is_mutual()) {
            let secret_name = issuer::operator_client_secret_name(&name);
            let state = match read(secret_name.clone()).await {
                Err(problem) => {
                    facts.problems.push(problem);
                    IssuedState::Blocked
                }
                Ok(secret) => {
                    let (state, usable) = judge(
                        &secret_name,
                        secret.as_ref(),
                        Purpose::OperatorClient,
                        &[],
                        None,
                    );
                    if let Some((m, validity)) = usable {
                        facts.validity.push(validity);
                        issued.operator_client_by_previous = by_previous(&m.cert_pem);
                        identity = Some((m.cert_pem, m.key_pem));
                    }
                    state
                }
            };
            issued.operator_client = Some(state);
        }
        if client_issued.is_some()
            && let Some(ca_pem) = ca_pem
        {
            facts.access.tls = Some(ClientTls { ca_pem, identity });
        }
        facts.issued = Some(issued);
        trust
    }

    /// The cert-manager Certificates the spec asks for: each as it is in the API (or missing),
    /// with the patch that brings it back to what the operator sets, and why it is not Ready.
    /// cert-manager not installed is a problem, and then nothing more is asked.
    pub(super) async fn observe_certificates(
        &self,
        cluster: &EtcdCluster,
        facts: &mut SecurityFacts,
    ) -> Vec<CertificateFacts> {
        let wanted = certmanager::wanted_certificates(cluster, &self.settings.cluster_domain);
        if wanted.is_empty() {
            return Vec::new();
        }
        let group_version = format!("{}/{}", certmanager::GROUP, certmanager::VERSION);
        if let Err(e) = self.client.list_api_group_resources(&group_version).await {
            let why = match &e {
                kube::Error::Api(status) if status.code == 404 => {
                    format!("the API server does not serve {group_version}")
                }
                other => format!("its API cannot be read: {other}"),
            };
            facts.problems.push(format!(
                "spec.tls uses cert-manager, but cert-manager is not installed ({why}); install cert-manager, or name your own Secrets (serverSecretRef, operatorClientSecretRef, peer.secretRef)"
            ));
            return Vec::new();
        }
        let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
        let certificates: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &namespace,
            &certmanager::resource("Certificate"),
        );
        let mut observed = Vec::new();
        for wanted in wanted {
            let current = match certificates.get_opt(&wanted.name).await {
                Ok(current) => current,
                Err(e) => {
                    facts
                        .problems
                        .push(format!("Certificate {} cannot be read: {e}", wanted.name));
                    continue;
                }
            };
            let (exists, patch, not_ready) = match &current {
                None => (
                    false,
                    None,
                    Some(format!("Certificate {} is being created", wanted.name)),
                ),
                Some(object) => {
                    let spec = object.data.get("spec").cloned().unwrap_or_default();
                    let patch = certmanager::spec_patch(&spec, &wanted.spec);
                    let not_ready = match certmanager::readiness(&object.data) {
                        certmanager::Readiness::Ready => None,
                        certmanager::Readiness::NotReady(why) => {
                            let issuer = self.issuer_problem(&namespace, &wanted.issuer).await;
                            Some(format!(
                                "Certificate {} is not Ready ({why}){}",
                                wanted.name,
                                issuer.map(|i| format!("; {i}")).unwrap_or_default()
                            ))
                        }
                    };
                    (true, patch, not_ready)
                }
            };
            observed.push(CertificateFacts {
                wanted,
                exists,
                patch,
                not_ready,
            });
        }
        observed
    }

    /// Why the issuer a Certificate names cannot sign it, if it is missing.
    async fn issuer_problem(
        &self,
        namespace: &str,
        issuer: &etcd_operator_api::cluster::IssuerReference,
    ) -> Option<String> {
        let kind = certmanager::issuer_kind(issuer);
        let resource = certmanager::resource(kind);
        let api: Api<DynamicObject> = if kind == "ClusterIssuer" {
            Api::all_with(self.client.clone(), &resource)
        } else {
            Api::namespaced_with(self.client.clone(), namespace, &resource)
        };
        match api.get_opt(&issuer.name).await {
            Ok(Some(_)) => None,
            Ok(None) if kind == "ClusterIssuer" => Some(format!(
                "ClusterIssuer {} not found: create it",
                issuer.name
            )),
            Ok(None) => Some(format!(
                "Issuer {} not found in namespace {namespace}: create it (or name a ClusterIssuer with kind: ClusterIssuer)",
                issuer.name
            )),
            Err(e) => Some(format!("{kind} {} cannot be read: {e}", issuer.name)),
        }
    }
}
