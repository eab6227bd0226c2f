//! Checking a TLS Secret before anything uses it: type, keys, PEM, the key against the
//! certificate, the chain to the CA, validity, usages, and names. Pure: the Secret comes in as
//! a value, the answer is the material or a sentence a person can act on.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use webpki::{EndEntityCert, KeyUsage};

/// The Secret type every TLS Secret must have (the reference API's contract).
pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";

/// What a certificate is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// etcd's client listener (`spec.tls.client.serverSecretRef`): serves clients, and etcd
    /// dials itself with it (its gateway), so server and client usage.
    Server,
    /// etcd's peer listener (`spec.tls.peer.secretRef`): serves and dials peers.
    Peer,
    /// The operator's identity under mutual TLS (`spec.tls.client.operatorClientSecretRef`),
    /// checked against the CA etcd trusts for clients (the server Secret's `ca.crt`).
    OperatorClient,
}

impl Purpose {
    pub fn what(self) -> &'static str {
        match self {
            Purpose::Server => "client-API server certificate",
            Purpose::Peer => "peer certificate",
            Purpose::OperatorClient => "operator client certificate",
        }
    }
}

/// A TLS Secret that passed every check.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsMaterial {
    /// `tls.crt`: the leaf first, then any intermediates.
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
    /// `ca.crt` (absent for an operator client Secret that has none).
    pub ca_pem: Option<Vec<u8>>,
    /// The leaf's validity.
    pub not_before: Timestamp,
    pub not_after: Timestamp,
}

impl std::fmt::Debug for TlsMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsMaterial")
            .field("not_after", &self.not_after)
            .field("key", &"<redacted>")
            .finish()
    }
}

/// Checks the Secret `name` for `purpose`. `ca_pem` is the CA the certificate must chain to:
/// the Secret's own `ca.crt` for server and peer certificates (pass `None`), the server
/// Secret's for the operator's client certificate. `names` are the DNS names the certificate
/// must be valid for (every member's), `now` the time of the check.
pub fn check_tls_secret(
    name: &str,
    secret: Option<&Secret>,
    purpose: Purpose,
    ca_pem: Option<&[u8]>,
    names: &[String],
    now: Timestamp,
) -> Result<TlsMaterial, String> {
    let what = purpose.what();
    let secret = secret.ok_or_else(|| format!("Secret {name} ({what}) not found"))?;
    let kind = secret.type_.as_deref().unwrap_or("Opaque");
    if kind != TLS_SECRET_TYPE {
        return Err(format!(
            "Secret {name} ({what}) has type {kind}; it must be of type {TLS_SECRET_TYPE}"
        ));
    }
    let data = secret_data(secret);
    let key_of = |key: &str| -> Result<Vec<u8>, String> {
        data.get(key)
            .filter(|v| !v.is_empty())
            .cloned()
            .ok_or_else(|| format!("Secret {name} ({what}) has no {key}"))
    };
    let cert_pem = key_of("tls.crt")?;
    let key_pem = key_of("tls.key")?;
    let own_ca = match purpose {
        Purpose::Server | Purpose::Peer => Some(key_of("ca.crt")?),
        Purpose::OperatorClient => data.get("ca.crt").filter(|v| !v.is_empty()).cloned(),
    };
    let trusted = match purpose {
        Purpose::OperatorClient => ca_pem.map(<[u8]>::to_vec),
        _ => own_ca.clone(),
    }
    .ok_or_else(|| format!("no CA to check Secret {name} ({what}) against"))?;

    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("Secret {name} ({what}): tls.crt is not PEM: {e}"))?;
    let leaf = chain
        .first()
        .ok_or_else(|| format!("Secret {name} ({what}): tls.crt holds no certificate"))?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| format!("Secret {name} ({what}): tls.key is not a PEM private key: {e}"))?;
    let cas: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&trusted)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("Secret {name} ({what}): the CA is not PEM: {e}"))?;
    if cas.is_empty() {
        return Err(format!(
            "Secret {name} ({what}): the CA holds no certificate"
        ));
    }

    let (_, parsed) = x509_parser::parse_x509_certificate(leaf)
        .map_err(|e| format!("Secret {name} ({what}): tls.crt is not an X.509 certificate: {e}"))?;
    let not_after = Timestamp::from_second(parsed.validity().not_after.timestamp())
        .map_err(|e| format!("Secret {name} ({what}): unreadable notAfter: {e}"))?;
    let not_before = Timestamp::from_second(parsed.validity().not_before.timestamp())
        .map_err(|e| format!("Secret {name} ({what}): unreadable notBefore: {e}"))?;

    keys_match(leaf, &key).map_err(|e| format!("Secret {name} ({what}): {e}"))?;

    let anchors: Vec<_> = cas
        .iter()
        .filter_map(|ca| webpki::anchor_from_trusted_cert(ca).ok())
        .collect();
    if anchors.is_empty() {
        return Err(format!(
            "Secret {name} ({what}): the CA certificate cannot be used as a trust anchor"
        ));
    }
    let end_entity = EndEntityCert::try_from(leaf)
        .map_err(|e| format!("Secret {name} ({what}): tls.crt is not usable: {e:?}"))?;
    let time =
        UnixTime::since_unix_epoch(std::time::Duration::from_secs(now.as_second().max(0) as u64));
    let usages: &[(KeyUsage, &str)] = match purpose {
        Purpose::Server | Purpose::Peer => &[
            (KeyUsage::server_auth(), "server auth"),
            (KeyUsage::client_auth(), "client auth"),
        ],
        Purpose::OperatorClient => &[(KeyUsage::client_auth(), "client auth")],
    };
    for (usage, usage_name) in usages {
        end_entity
            .verify_for_usage(
                webpki::ALL_VERIFICATION_ALGS,
                &anchors,
                &chain[1..],
                time,
                usage,
                None,
                None,
            )
            .map_err(|e| chain_problem(name, what, e, &parsed, usage_name))?;
    }
    let uncovered: Vec<&str> = names
        .iter()
        .filter(|n| {
            ServerName::try_from(n.as_str())
                .map(|server| {
                    end_entity
                        .verify_is_valid_for_subject_name(&server)
                        .is_err()
                })
                .unwrap_or(true)
        })
        .map(String::as_str)
        .collect();
    if !uncovered.is_empty() {
        return Err(format!(
            "Secret {name} ({what}) is not valid for {} (its names: {}); add them (or a wildcard such as *.<cluster>.<namespace>.svc) to the certificate's SANs",
            uncovered.join(", "),
            subject_names(&parsed).join(", ")
        ));
    }
    Ok(TlsMaterial {
        cert_pem,
        key_pem,
        ca_pem: own_ca,
        not_before,
        not_after,
    })
}

/// Whether the leaf of `cert_pem` (with the intermediates after it) chains to one of the
/// certificates of `ca_pem` at `now`, for server or client use. Used to tell which of two CAs
/// signed a certificate during a CA rotation (both CAs have the same name).
pub fn chains_to(cert_pem: &[u8], ca_pem: &[u8], now: Timestamp) -> bool {
    let Ok(chain) = CertificateDer::pem_slice_iter(cert_pem).collect::<Result<Vec<_>, _>>() else {
        return false;
    };
    let Ok(cas) = CertificateDer::pem_slice_iter(ca_pem).collect::<Result<Vec<_>, _>>() else {
        return false;
    };
    let anchors: Vec<_> = cas
        .iter()
        .filter_map(|ca| webpki::anchor_from_trusted_cert(ca).ok())
        .collect();
    let Some(leaf) = chain.first() else {
        return false;
    };
    let Ok(end_entity) = EndEntityCert::try_from(leaf) else {
        return false;
    };
    let time =
        UnixTime::since_unix_epoch(std::time::Duration::from_secs(now.as_second().max(0) as u64));
    [KeyUsage::server_auth(), KeyUsage::client_auth()]
        .iter()
        .any(|usage| {
            end_entity
                .verify_for_usage(
                    webpki::ALL_VERIFICATION_ALGS,
                    &anchors,
                    &chain[1..],
                    time,
                    usage,
                    None,
                    None,
                )
                .is_ok()
        })
}

/// A short digest of the CAs a member trusts (its client and peer `ca.crt`): SHA-256, the
/// first 16 bytes in hex.
pub fn trust_digest(client_ca: &[u8], peer_ca: &[u8]) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    context.update(&(client_ca.len() as u64).to_be_bytes());
    context.update(client_ca);
    context.update(peer_ca);
    context
        .finish()
        .as_ref()
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A certificate the cluster runs on and its validity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateValidity {
    /// The Secret that holds it.
    pub secret: String,
    /// What it is for ("client-API server certificate", ...).
    pub what: &'static str,
    pub not_before: Timestamp,
    pub not_after: Timestamp,
    /// When it counts as expiring, for certificates the operator renews itself (a little past
    /// their renewal time); `None` means in its last third of validity.
    pub renew_at: Option<Timestamp>,
}

impl CertificateValidity {
    pub fn of(secret: &str, purpose: Purpose, material: &TlsMaterial) -> Self {
        CertificateValidity {
            secret: secret.to_string(),
            what: purpose.what(),
            not_before: material.not_before,
            not_after: material.not_after,
            renew_at: None,
        }
    }

    /// Seconds until it expires (negative once it has).
    pub fn seconds_left(&self, now: Timestamp) -> i64 {
        self.not_after.as_second() - now.as_second()
    }

    /// In its last third of validity: past the point where cert-manager (and the operator's
    /// own renewal) renews, so a certificate still here at that point was not renewed.
    pub fn expiring(&self, now: Timestamp) -> bool {
        if let Some(renew_at) = self.renew_at {
            return now >= renew_at;
        }
        let lifetime = self.not_after.as_second() - self.not_before.as_second();
        self.seconds_left(now) < lifetime / 3
    }
}

/// One sentence per certificate in its last third of validity, soonest first.
pub fn expiring_certificates(certificates: &[CertificateValidity], now: Timestamp) -> Vec<String> {
    let mut expiring: Vec<&CertificateValidity> =
        certificates.iter().filter(|c| c.expiring(now)).collect();
    expiring.sort_by_key(|c| c.not_after);
    expiring
        .iter()
        .map(|c| {
            let left = c.seconds_left(now);
            let when = if left >= 2 * 86_400 {
                format!("in {} days", left / 86_400)
            } else if left >= 2 * 3_600 {
                format!("in {} hours", left / 3_600)
            } else {
                format!("in {} minutes", (left / 60).max(0))
            };
            format!(
                "Secret {} ({}) expires at {} ({when}) and has not been renewed; renew it (a new certificate from the same CA is picked up without a restart)",
                c.secret, c.what, c.not_after
            )
        })
        .collect()
}

fn secret_data(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    let mut data: BTreeMap<String, Vec<u8>> = secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    // `stringData` overwrites `data`, as the API server folds it in on write (a server never
    // returns it; a Secret built in memory may carry it).
    for (k, v) in secret.string_data.iter().flatten() {
        data.insert(k.clone(), v.clone().into_bytes());
    }
    data
}

/// The private key belongs to the certificate.
fn keys_match(leaf: &CertificateDer<'static>, key: &PrivateKeyDer<'static>) -> Result<(), String> {
    let provider = rustls::crypto::ring::default_provider();
    let signing = provider
        .key_provider
        .load_private_key(key.clone_key())
        .map_err(|e| format!("tls.key cannot be used: {e}"))?;
    let certified = rustls::sign::CertifiedKey::new(vec![leaf.clone()], signing);
    match certified.keys_match() {
        Ok(()) => Ok(()),
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
            Err("tls.key does not belong to the certificate in tls.crt".to_string())
        }
        // The key type cannot tell its public key (rare); the TLS handshake will tell.
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => Ok(()),
        Err(e) => Err(format!("tls.key and tls.crt cannot be compared: {e}")),
    }
}

fn chain_problem(
    name: &str,
    what: &str,
    error: webpki::Error,
    parsed: &x509_parser::certificate::X509Certificate<'_>,
    usage: &str,
) -> String {
    let validity = parsed.validity();
    match error {
        webpki::Error::UnknownIssuer | webpki::Error::InvalidSignatureForPublicKey => format!(
            "Secret {name} ({what}): the certificate is not signed by the CA it must chain to (ca.crt)"
        ),
        webpki::Error::CertExpired { .. } => format!(
            "Secret {name} ({what}): the certificate expired at {}",
            validity.not_after
        ),
        webpki::Error::CertNotValidYet { .. } => format!(
            "Secret {name} ({what}): the certificate is not valid before {}",
            validity.not_before
        ),
        webpki::Error::RequiredEkuNotFoundContext(_) => {
            format!("Secret {name} ({what}): the certificate lacks the {usage} extended key usage")
        }
        other => format!("Secret {name} ({what}): the certificate does not verify: {other:?}"),
    }
}

fn subject_names(parsed: &x509_parser::certificate::X509Certificate<'_>) -> Vec<String> {
    let mut names = Vec::new();
    if let Ok(Some(san)) = parsed.subject_alternative_name() {
        for name in &san.value.general_names {
            match name {
                x509_parser::extensions::GeneralName::DNSName(d) => names.push(d.to_string()),
                x509_parser::extensions::GeneralName::IPAddress(ip) => {
                    names.push(format!("IP {ip:?}"))
                }
                _ => {}
            }
        }
    }
    if names.is_empty() {
        names.push("none".to_string());
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    };

    struct Ca {
        pem: String,
        issuer: Issuer<'static, KeyPair>,
    }

    fn new_ca(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).unwrap();
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    fn leaf(
        ca: &Ca,
        names: &[&str],
        usages: Vec<ExtendedKeyUsagePurpose>,
        days: (i64, i64),
    ) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.extended_key_usages = usages;
        let now = time_now();
        params.not_before = now + time::Duration::days(days.0);
        params.not_after = now + time::Duration::days(days.1);
        let cert = params.signed_by(&key, &ca.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn time_now() -> time::OffsetDateTime {
        time::OffsetDateTime::now_utc()
    }

    fn both() -> Vec<ExtendedKeyUsagePurpose> {
        vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ]
    }

    fn secret(kind: &str, entries: &[(&str, &str)]) -> Secret {
        Secret {
            type_: Some(kind.to_string()),
            data: Some(
                entries
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    fn members() -> Vec<String> {
        (0..3).map(|i| format!("etcd-{i}.etcd.prod.svc")).collect()
    }

    fn check(s: &Secret, purpose: Purpose, ca: Option<&str>) -> Result<TlsMaterial, String> {
        check_tls_secret(
            "tls",
            Some(s),
            purpose,
            ca.map(str::as_bytes),
            &members(),
            Timestamp::now(),
        )
    }

    #[test]
    fn a_good_server_secret_passes_with_a_wildcard_or_each_name() {
        let ca = new_ca("ca");
        let (cert, key) = leaf(&ca, &["*.etcd.prod.svc", "localhost"], both(), (-1, 90));
        let s = secret(
            TLS_SECRET_TYPE,
            &[("tls.crt", &cert), ("tls.key", &key), ("ca.crt", &ca.pem)],
        );
        let material = check(&s, Purpose::Server, None).unwrap();
        assert!(material.not_after > Timestamp::now());
        assert_eq!(material.ca_pem.as_deref(), Some(ca.pem.as_bytes()));
        let names: Vec<String> = members();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let (cert, key) = leaf(&ca, &refs, both(), (-1, 90));
        let s = secret(
            TLS_SECRET_TYPE,
            &[("tls.crt", &cert), ("tls.key", &key), ("ca.crt", &ca.pem)],
        );
        check(&s, Purpose::Peer, None).unwrap();
    }

    #[test]
    fn every_bad_secret_is_named_with_its_problem() {
        let ca = new_ca("ca");
        let other = new_ca("other");
        let (cert, key) = leaf(&ca, &["*.etcd.prod.svc"], both(), (-1, 90));
        let (_, other_key) = leaf(&ca, &["*.etcd.prod.svc"], both(), (-1, 90));
        let good = [
            ("tls.crt", cert.as_str()),
            ("tls.key", key.as_str()),
            ("ca.crt", ca.pem.as_str()),
        ];
        let problem = |s: &Secret| check(s, Purpose::Server, None).unwrap_err();

        assert!(
            check_tls_secret(
                "gone",
                None,
                Purpose::Server,
                None,
                &members(),
                Timestamp::now()
            )
            .unwrap_err()
            .contains("Secret gone (client-API server certificate) not found")
        );
        assert!(
            problem(&secret("Opaque", &good))
                .contains("has type Opaque; it must be of type kubernetes.io/tls")
        );
        assert!(problem(&secret(TLS_SECRET_TYPE, &good[..2])).contains("has no ca.crt"));
        assert!(
            problem(&secret(
                TLS_SECRET_TYPE,
                &[("tls.crt", &cert), ("ca.crt", &ca.pem)]
            ))
            .contains("has no tls.key")
        );
        assert!(
            problem(&secret(
                TLS_SECRET_TYPE,
                &[
                    ("tls.crt", "garbage"),
                    ("tls.key", &key),
                    ("ca.crt", &ca.pem)
                ]
            ))
            .contains("tls.crt holds no certificate")
        );
        assert!(
            problem(&secret(
                TLS_SECRET_TYPE,
                &[
                    ("tls.crt", &cert),
                    ("tls.key", &other_key),
                    ("ca.crt", &ca.pem)
                ]
            ))
            .contains("tls.key does not belong to the certificate")
        );
        assert!(
            problem(&secret(
                TLS_SECRET_TYPE,
                &[
                    ("tls.crt", &cert),
                    ("tls.key", &key),
                    ("ca.crt", &other.pem)
                ]
            ))
            .contains("not signed by the CA")
        );
        let (expired, expired_key) = leaf(&ca, &["*.etcd.prod.svc"], both(), (-10, -1));
        assert!(
            problem(&secret(
                TLS_SECRET_TYPE,
                &[
                    ("tls.crt", &expired),
                    ("tls.key", &expired_key),
                    ("ca.crt", &ca.pem)
                ]
            ))
            .contains("expired at")
        );
        let (server_only, server_key) = leaf(
            &ca,
            &["*.etcd.prod.svc"],
            vec![ExtendedKeyUsagePurpose::ServerAuth],
            (-1, 90),
        );
        assert!(
            problem(&secret(
                TLS_SECRET_TYPE,
                &[
                    ("tls.crt", &server_only),
                    ("tls.key", &server_key),
                    ("ca.crt", &ca.pem)
                ]
            ))
            .contains("lacks the client auth extended key usage")
        );
        let (narrow, narrow_key) = leaf(&ca, &["etcd-0.etcd.prod.svc"], both(), (-1, 90));
        let message = problem(&secret(
            TLS_SECRET_TYPE,
            &[
                ("tls.crt", &narrow),
                ("tls.key", &narrow_key),
                ("ca.crt", &ca.pem),
            ],
        ));
        assert!(
            message.contains("is not valid for etcd-1.etcd.prod.svc, etcd-2.etcd.prod.svc"),
            "{message}"
        );
        assert!(
            message.contains("its names: etcd-0.etcd.prod.svc"),
            "{message}"
        );
    }

    #[test]
    fn the_operator_client_certificate_must_chain_to_the_ca_etcd_trusts() {
        let ca = new_ca("ca");
        let other = new_ca("other");
        let (cert, key) = leaf(
            &ca,
            &[],
            vec![ExtendedKeyUsagePurpose::ClientAuth],
            (-1, 90),
        );
        let s = secret(TLS_SECRET_TYPE, &[("tls.crt", &cert), ("tls.key", &key)]);
        let check = |ca: &str| {
            check_tls_secret(
                "client",
                Some(&s),
                Purpose::OperatorClient,
                Some(ca.as_bytes()),
                &[],
                Timestamp::now(),
            )
        };
        check(&ca.pem).unwrap();
        assert!(
            check(&other.pem)
                .unwrap_err()
                .contains("not signed by the CA")
        );
        let (server, server_key) = leaf(
            &ca,
            &[],
            vec![ExtendedKeyUsagePurpose::ServerAuth],
            (-1, 90),
        );
        let s = secret(
            TLS_SECRET_TYPE,
            &[("tls.crt", &server), ("tls.key", &server_key)],
        );
        assert!(
            check_tls_secret(
                "client",
                Some(&s),
                Purpose::OperatorClient,
                Some(ca.pem.as_bytes()),
                &[],
                Timestamp::now()
            )
            .unwrap_err()
            .contains("lacks the client auth")
        );
    }

    #[test]
    fn a_certificate_in_its_last_third_is_expiring_and_said_so_soonest_first() {
        let at = |days: i64| Timestamp::from_second(1_800_000_000 + days * 86_400).unwrap();
        let cert = |secret: &str, from: i64, to: i64| CertificateValidity {
            secret: secret.into(),
            what: Purpose::Peer.what(),
            not_before: at(from),
            not_after: at(to),
            renew_at: None,
        };
        // 90 days of validity: renewed at 60 (cert-manager's two thirds) is fine.
        let peer = cert("peer", 0, 90);
        assert!(!peer.expiring(at(59)));
        assert!(peer.expiring(at(61)), "past two thirds and not renewed");
        assert_eq!(peer.seconds_left(at(89)), 86_400);
        assert!(peer.seconds_left(at(91)) < 0);
        let server = cert("server", 0, 30);
        let messages = expiring_certificates(&[peer.clone(), server], at(25));
        assert_eq!(
            messages.len(),
            1,
            "only the server is in its last third: {messages:?}"
        );
        assert!(messages[0].starts_with("Secret server (peer certificate) expires at"));
        assert!(messages[0].contains("(in 5 days)"), "{}", messages[0]);
        let both = expiring_certificates(&[peer, cert("server", 0, 30)], at(89));
        assert_eq!(both.len(), 2);
        assert!(
            both[0].starts_with("Secret server"),
            "the expired one first: {both:?}"
        );
        assert!(
            both[1].contains("in 24 hours") || both[1].contains("hours"),
            "{}",
            both[1]
        );
    }
}
