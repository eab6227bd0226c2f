//! Operator-issued certificates (`spec.tls.{client,peer}.operatorIssued`): a per-cluster CA, one
//! certificate per member for both of etcd's listeners, and the operator's own client
//! certificate, all ECDSA P-256. Pure: the clock comes in as a parameter, the answer is PEM and
//! Secret data; nothing here reads or writes the API server (key generation draws on the
//! system's randomness, nothing else).
//!
//! The Secrets (see docs/api.md, "Operator-issued certificates"):
//!
//! - `<cluster>-ca` ([`ca_secret_name`]), owned by the EtcdCluster: the CA's `tls.crt`,
//!   `tls.key`, and `ca.crt` (the same certificate). Read back with [`ca_from_secret`], so a
//!   restarted operator signs with the CA it made before.
//! - `<member>-tls` ([`member_secret_name`]), owned by the EtcdMember: the member's certificate,
//!   serving the client and the peer listener, with `ca.crt`.
//! - `<cluster>-operator-client-tls` ([`operator_client_secret_name`]), owned by the
//!   EtcdCluster: the operator's client certificate under mutual TLS.
//!
//! Each Secret has the type `kubernetes.io/tls` and passes [`crate::security::check_tls_secret`]
//! for its purpose.

// Kept whole above 800 lines (about 1000; issue 31): `security/` is being changed by the fix of
// the root password under mutual TLS at the same time, so it is not restructured now. Its split
// by concern (the CA and the rotation's phases, the leaf certificates, the Secrets' data) waits
// for that fix to land.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, PublicKeyData, SanType,
};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::TLS_SECRET_TYPE;

/// How far before `now` a certificate's validity starts, so members whose clocks run a little
/// behind the operator's accept it at once.
pub const BACKDATE: Duration = Duration::from_secs(300);

/// The Secret with the cluster's CA.
pub fn ca_secret_name(cluster: &str) -> String {
    format!("{cluster}-ca")
}

/// The Secret with a member's certificate.
pub fn member_secret_name(member: &str) -> String {
    format!("{member}-tls")
}

/// The Secret with the operator's client certificate.
pub fn operator_client_secret_name(cluster: &str) -> String {
    format!("{cluster}-operator-client-tls")
}

/// The common name of the operator's client certificate. Under auth with client-certificate
/// authentication etcd takes the user name from the CN of a request without a token; no etcd
/// user has this name, and the operator authenticates with the root password anyway.
pub fn operator_client_common_name(cluster: &str) -> String {
    format!("{cluster}-operator-client")
}

/// The common name of a cluster's CA.
pub fn ca_common_name(cluster: &str, namespace: &str) -> String {
    format!("{cluster}.{namespace} etcd CA")
}

/// The DNS names a member's certificate is valid for: its own name under the cluster's
/// headless Service and the client Service, each short (`.svc`) and with the cluster domain,
/// and `localhost` (for etcdctl inside the Pod). The certificate also carries IP 127.0.0.1.
pub fn member_dns_names(
    member: &str,
    cluster: &str,
    namespace: &str,
    cluster_domain: &str,
) -> Vec<String> {
    let own = format!("{member}.{cluster}.{namespace}.svc");
    let client = format!("{cluster}-client.{namespace}.svc");
    vec![
        format!("{own}.{cluster_domain}"),
        own,
        format!("{client}.{cluster_domain}"),
        client,
        "localhost".to_string(),
    ]
}

/// A CA: its certificate and key, and what signs with them.
pub struct CaMaterial {
    pub cert_pem: String,
    pub key_pem: String,
    pub not_before: Timestamp,
    pub not_after: Timestamp,
    issuer: Issuer<'static, KeyPair>,
}

impl std::fmt::Debug for CaMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaMaterial")
            .field("not_before", &self.not_before)
            .field("not_after", &self.not_after)
            .field("key", &"<redacted>")
            .finish()
    }
}

/// A leaf certificate and its key.
#[derive(Clone, PartialEq, Eq)]
pub struct LeafMaterial {
    pub cert_pem: String,
    pub key_pem: String,
    pub not_before: Timestamp,
    pub not_after: Timestamp,
}

impl std::fmt::Debug for LeafMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeafMaterial")
            .field("not_before", &self.not_before)
            .field("not_after", &self.not_after)
            .field("key", &"<redacted>")
            .finish()
    }
}

/// A new self-signed CA for `cluster` in `namespace`: ECDSA P-256, CN
/// `<cluster>.<namespace> etcd CA`, basic constraints CA with path length 0 (it signs leaves
/// only), key usages keyCertSign and cRLSign, valid from `now` (less [`BACKDATE`]) for
/// `validity`.
pub fn new_ca(
    cluster: &str,
    namespace: &str,
    now: Timestamp,
    validity: Duration,
) -> Result<CaMaterial, String> {
    let key = new_key()?;
    let params = ca_params(&ca_common_name(cluster, namespace), now, validity)?;
    let cert = params
        .self_signed(&key)
        .map_err(|e| format!("cannot sign the CA of {cluster}: {e}"))?;
    let (not_before, not_after) = validity_of(&params)?;
    Ok(CaMaterial {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        not_before,
        not_after,
        issuer: Issuer::new(params, key),
    })
}

/// The certificate of `member` of `cluster`, for both its listeners: ECDSA P-256, CN the
/// member's name, the names of [`member_dns_names`] and IP 127.0.0.1, usages serverAuth and
/// clientAuth (etcd dials itself and its peers with it), valid from `now` (less [`BACKDATE`])
/// for `validity` but never past the CA's end.
pub fn issue_member(
    ca: &CaMaterial,
    member: &str,
    cluster: &str,
    namespace: &str,
    cluster_domain: &str,
    now: Timestamp,
    validity: Duration,
) -> Result<LeafMaterial, String> {
    let mut sans: Vec<SanType> = Vec::new();
    for name in member_dns_names(member, cluster, namespace, cluster_domain) {
        let name = name
            .try_into()
            .map_err(|e| format!("member {member}: not a DNS name: {e}"))?;
        sans.push(SanType::DnsName(name));
    }
    sans.push(SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
    issue_leaf(
        ca,
        member,
        sans,
        vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
        now,
        validity,
    )
}

/// The operator's client certificate for `cluster`: ECDSA P-256, CN
/// [`operator_client_common_name`], no names, usage clientAuth only.
pub fn issue_operator_client(
    ca: &CaMaterial,
    cluster: &str,
    now: Timestamp,
    validity: Duration,
) -> Result<LeafMaterial, String> {
    issue_leaf(
        ca,
        &operator_client_common_name(cluster),
        Vec::new(),
        vec![ExtendedKeyUsagePurpose::ClientAuth],
        now,
        validity,
    )
}

/// Whether a leaf valid from `not_before` to `not_after` is due for renewal at `now`: at
/// `not_after - renew_before`, or with `renew_before` unset when a third of its lifetime is
/// left (where cert-manager renews). A certificate with no lifetime, or a `renew_before` as
/// long as its lifetime, is always due.
pub fn renewal_due(
    not_before: Timestamp,
    not_after: Timestamp,
    renew_before: Option<Duration>,
    now: Timestamp,
) -> bool {
    let lifetime = not_after.as_second() - not_before.as_second();
    if lifetime <= 0 {
        return true;
    }
    let before = renew_before.map_or(lifetime / 3, |d| {
        i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
    });
    now.as_second() >= not_after.as_second().saturating_sub(before)
}

/// When a leaf valid from `not_before` to `not_after` is due for renewal (see
/// [`renewal_due`]).
pub fn renewal_time(
    not_before: Timestamp,
    not_after: Timestamp,
    renew_before: Option<Duration>,
) -> Timestamp {
    let lifetime = (not_after.as_second() - not_before.as_second()).max(0);
    let before = renew_before.map_or(lifetime / 3, |d| {
        i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
    });
    Timestamp::from_second(not_after.as_second().saturating_sub(before).max(0)).unwrap_or(not_after)
}

/// Whether the CA is due for renewal at `now`: when a third of its lifetime is left. (A new
/// CA means new member certificates and rolling restarts, since etcd reads its trusted CA only
/// at start-up.)
pub fn ca_renewal_due(ca: &CaMaterial, now: Timestamp) -> bool {
    renewal_due(ca.not_before, ca.not_after, None, now)
}

/// The data of the CA Secret `<cluster>-ca`: `tls.crt`, `tls.key` and `ca.crt` (the same
/// certificate, so the Secret passes as a TLS Secret too).
pub fn ca_secret_data(ca: &CaMaterial) -> BTreeMap<String, ByteString> {
    BTreeMap::from([
        ("tls.crt".to_string(), bytes(&ca.cert_pem)),
        ("tls.key".to_string(), bytes(&ca.key_pem)),
        ("ca.crt".to_string(), bytes(&ca.cert_pem)),
    ])
}

/// Annotation on the EtcdCluster that asks for a CA rotation: set it to a new value (for example
/// the date) and the CA is rotated once for that value.
pub const ROTATE_CA_ANNOTATION: &str = "etcd-operator.cozystack.io/rotate-ca";
/// Annotation on the CA Secret: the `rotate-ca` value its last rotation answered.
pub const ROTATED_FOR_ANNOTATION: &str = "etcd-operator.cozystack.io/rotated-for";

/// The key of the CA Secret that holds the previous CA's certificate during a rotation.
pub const PREVIOUS_CERT_KEY: &str = "previous.crt";
/// The key of the CA Secret that holds the previous CA's key during a rotation.
pub const PREVIOUS_KEY_KEY: &str = "previous.key";

/// The CA Secret during a rotation: `tls.crt`/`tls.key` the new CA (which signs from the moment
/// every member trusts it), `previous.crt`/`previous.key` the old one (which signs until
/// then), and `ca.crt` the bundle of both, new first: what every member and the operator trust
/// while the rotation runs.
pub fn rotating_ca_secret_data(new: &CaMaterial, old: &CaMaterial) -> BTreeMap<String, ByteString> {
    BTreeMap::from([
        ("tls.crt".to_string(), bytes(&new.cert_pem)),
        ("tls.key".to_string(), bytes(&new.key_pem)),
        (
            "ca.crt".to_string(),
            bytes(&bundle(&[&new.cert_pem, &old.cert_pem])),
        ),
        (PREVIOUS_CERT_KEY.to_string(), bytes(&old.cert_pem)),
        (PREVIOUS_KEY_KEY.to_string(), bytes(&old.key_pem)),
    ])
}

/// PEM certificates one after another, each ending in a newline.
pub fn bundle(pems: &[&str]) -> String {
    pems.iter()
        .map(|p| {
            let p = p.trim_end();
            format!("{p}\n")
        })
        .collect()
}

/// The trust bundle of the CA Secret (`ca.crt`): the CA, and during a rotation the previous one.
pub fn ca_bundle(secret: &Secret) -> Option<String> {
    secret
        .data
        .as_ref()?
        .get("ca.crt")
        .filter(|v| !v.0.is_empty())
        .and_then(|v| String::from_utf8(v.0.clone()).ok())
}

/// The previous CA kept during a rotation (`previous.crt`, `previous.key`); `None` when no
/// rotation runs.
pub fn previous_ca_from_secret(name: &str, secret: &Secret) -> Option<Result<CaMaterial, String>> {
    secret
        .data
        .as_ref()?
        .get(PREVIOUS_CERT_KEY)
        .filter(|v| !v.0.is_empty())?;
    Some(ca_from_keys(
        name,
        secret,
        PREVIOUS_CERT_KEY,
        PREVIOUS_KEY_KEY,
    ))
}

/// The data of a member's Secret `<member>-tls` (type `kubernetes.io/tls`): `tls.crt`,
/// `tls.key` and `ca.crt`, the trust bundle `trusted` (the CA Secret's `ca.crt`).
pub fn member_secret_data(trusted: &str, leaf: &LeafMaterial) -> BTreeMap<String, ByteString> {
    leaf_secret_data(trusted, leaf)
}

/// The data of the operator's client Secret `<cluster>-operator-client-tls`, the same keys.
pub fn operator_client_secret_data(
    trusted: &str,
    leaf: &LeafMaterial,
) -> BTreeMap<String, ByteString> {
    leaf_secret_data(trusted, leaf)
}

/// The CA kept in `secret` (its `tls.crt` and `tls.key`), ready to sign again. Refused: a
/// Secret of another type, missing keys, a key that is not the certificate's, a certificate
/// that is no CA, or a subject other than the one CN this module writes (leaves signed under
/// another subject would not chain to the certificate).
pub fn ca_from_secret(name: &str, secret: &Secret) -> Result<CaMaterial, String> {
    ca_from_keys(name, secret, "tls.crt", "tls.key")
}

fn ca_from_keys(
    name: &str,
    secret: &Secret,
    cert_key: &str,
    key_key: &str,
) -> Result<CaMaterial, String> {
    let what = "operator-issued CA";
    let kind = secret.type_.as_deref().unwrap_or("Opaque");
    if kind != TLS_SECRET_TYPE {
        return Err(format!(
            "Secret {name} ({what}) has type {kind}; it must be of type {TLS_SECRET_TYPE}"
        ));
    }
    let text = |key: &str| -> Result<String, String> {
        let value = secret
            .data
            .as_ref()
            .and_then(|data| data.get(key))
            .filter(|value| !value.0.is_empty())
            .ok_or_else(|| format!("Secret {name} ({what}) has no {key}"))?;
        String::from_utf8(value.0.clone())
            .map_err(|_| format!("Secret {name} ({what}): {key} is not PEM text"))
    };
    let cert_pem = text(cert_key)?;
    let key_pem = text(key_key)?;
    let der = CertificateDer::from_pem_slice(cert_pem.as_bytes())
        .map_err(|e| format!("Secret {name} ({what}): {cert_key} is not PEM: {e}"))?;
    let (_, parsed) = x509_parser::parse_x509_certificate(&der)
        .map_err(|e| format!("Secret {name} ({what}): tls.crt is not an X.509 certificate: {e}"))?;
    if !parsed.is_ca() {
        return Err(format!(
            "Secret {name} ({what}): tls.crt is not a CA certificate"
        ));
    }
    let subject = parsed.subject();
    let common_name = subject
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .filter(|_| subject.iter_attributes().count() == 1)
        .ok_or_else(|| {
            format!(
                "Secret {name} ({what}): the CA's subject is {subject}, not the single CN the operator writes"
            )
        })?;
    let key = KeyPair::from_pem(&key_pem)
        .map_err(|e| format!("Secret {name} ({what}): tls.key is not a usable private key: {e}"))?;
    if key.subject_public_key_info() != parsed.public_key().raw {
        return Err(format!(
            "Secret {name} ({what}): tls.key does not belong to the certificate in tls.crt"
        ));
    }
    let not_before = Timestamp::from_second(parsed.validity().not_before.timestamp())
        .map_err(|e| format!("Secret {name} ({what}): unreadable notBefore: {e}"))?;
    let not_after = Timestamp::from_second(parsed.validity().not_after.timestamp())
        .map_err(|e| format!("Secret {name} ({what}): unreadable notAfter: {e}"))?;
    let mut params = CertificateParams::default();
    params.distinguished_name = distinguished_name(common_name);
    params.key_usages = ca_key_usages();
    Ok(CaMaterial {
        cert_pem,
        key_pem,
        not_before,
        not_after,
        issuer: Issuer::new(params, key),
    })
}

fn ca_key_usages() -> Vec<KeyUsagePurpose> {
    vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign]
}

fn ca_params(
    common_name: &str,
    now: Timestamp,
    validity: Duration,
) -> Result<CertificateParams, String> {
    let mut params = CertificateParams::default();
    params.distinguished_name = distinguished_name(common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = ca_key_usages();
    let start = now.as_second() - BACKDATE.as_secs() as i64;
    set_validity(
        &mut params,
        start,
        now.as_second().saturating_add(seconds(validity)?),
    )?;
    Ok(params)
}

fn issue_leaf(
    ca: &CaMaterial,
    common_name: &str,
    sans: Vec<SanType>,
    usages: Vec<ExtendedKeyUsagePurpose>,
    now: Timestamp,
    validity: Duration,
) -> Result<LeafMaterial, String> {
    let key = new_key()?;
    let mut params = CertificateParams::default();
    params.distinguished_name = distinguished_name(common_name);
    params.subject_alt_names = sans;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = usages;
    params.use_authority_key_identifier_extension = true;
    let end = now
        .as_second()
        .saturating_add(seconds(validity)?)
        .min(ca.not_after.as_second());
    set_validity(
        &mut params,
        now.as_second() - BACKDATE.as_secs() as i64,
        end,
    )?;
    let (not_before, not_after) = validity_of(&params)?;
    let cert = params
        .signed_by(&key, &ca.issuer)
        .map_err(|e| format!("cannot sign the certificate of {common_name}: {e}"))?;
    Ok(LeafMaterial {
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
        not_before,
        not_after,
    })
}

fn new_key() -> Result<KeyPair, String> {
    KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)
        .map_err(|e| format!("cannot generate an ECDSA P-256 key: {e}"))
}

fn distinguished_name(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name
}

fn leaf_secret_data(trusted: &str, leaf: &LeafMaterial) -> BTreeMap<String, ByteString> {
    BTreeMap::from([
        ("tls.crt".to_string(), bytes(&leaf.cert_pem)),
        ("tls.key".to_string(), bytes(&leaf.key_pem)),
        ("ca.crt".to_string(), bytes(trusted)),
    ])
}

fn bytes(text: &str) -> ByteString {
    ByteString(text.as_bytes().to_vec())
}

fn seconds(validity: Duration) -> Result<i64, String> {
    i64::try_from(validity.as_secs())
        .ok()
        .filter(|s| *s > 0)
        .ok_or_else(|| format!("a certificate lifetime of {validity:?} is not usable"))
}

/// Sets the validity to `[from, to]` (Unix seconds; X.509 keeps whole seconds).
fn set_validity(params: &mut CertificateParams, from: i64, to: i64) -> Result<(), String> {
    let since_epoch = |at: i64| {
        u64::try_from(at)
            .map(Duration::from_secs)
            .map_err(|_| format!("{at} is before 1970"))
    };
    params.not_before = rcgen::date_time_ymd(1970, 1, 1) + since_epoch(from)?;
    params.not_after = rcgen::date_time_ymd(1970, 1, 1) + since_epoch(to)?;
    Ok(())
}

fn validity_of(params: &CertificateParams) -> Result<(Timestamp, Timestamp), String> {
    let at = |unix: i64| Timestamp::from_second(unix).map_err(|e| format!("unusable time: {e}"));
    Ok((
        at(params.not_before.unix_timestamp())?,
        at(params.not_after.unix_timestamp())?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::{Purpose, check_tls_secret};
    use x509_parser::certificate::X509Certificate;
    use x509_parser::extensions::GeneralName;
    use x509_parser::oid_registry::{OID_EC_P256, OID_KEY_TYPE_EC_PUBLIC_KEY};

    const DAY: u64 = 86_400;

    fn at(days: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + days * DAY as i64).unwrap()
    }

    fn days(n: u64) -> Duration {
        Duration::from_secs(n * DAY)
    }

    fn ca() -> CaMaterial {
        new_ca("etcd", "prod", at(0), days(5 * 365)).unwrap()
    }

    fn tls_secret(data: BTreeMap<String, ByteString>) -> Secret {
        Secret {
            type_: Some(TLS_SECRET_TYPE.to_string()),
            data: Some(data),
            ..Default::default()
        }
    }

    fn with_parsed<T>(pem: &str, f: impl FnOnce(&X509Certificate<'_>) -> T) -> T {
        let der = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
        let (rest, parsed) = x509_parser::parse_x509_certificate(&der).unwrap();
        assert!(rest.is_empty());
        f(&parsed)
    }

    fn assert_p256(parsed: &X509Certificate<'_>) {
        let algorithm = &parsed.public_key().algorithm;
        assert_eq!(algorithm.algorithm, OID_KEY_TYPE_EC_PUBLIC_KEY);
        let curve = algorithm
            .parameters
            .as_ref()
            .expect("an EC key names its curve")
            .as_oid()
            .unwrap();
        assert_eq!(curve, OID_EC_P256);
    }

    fn common_name(parsed: &X509Certificate<'_>) -> String {
        parsed
            .subject()
            .iter_common_name()
            .next()
            .unwrap()
            .as_str()
            .unwrap()
            .to_string()
    }

    fn member_names(member: &str) -> Vec<String> {
        vec![format!("{member}.etcd.prod.svc")]
    }

    #[test]
    fn the_ca_is_a_p256_ca_that_signs_certificates_only() {
        let ca = ca();
        assert_eq!(ca.not_before.as_second(), at(0).as_second() - 300);
        assert_eq!(ca.not_after, at(5 * 365));
        with_parsed(&ca.cert_pem, |parsed| {
            assert_p256(parsed);
            assert_eq!(common_name(parsed), "etcd.prod etcd CA");
            assert_eq!(parsed.subject(), parsed.issuer(), "self-signed");
            let constraints = parsed.basic_constraints().unwrap().unwrap().value;
            assert!(constraints.ca);
            assert_eq!(constraints.path_len_constraint, Some(0));
            let usage = parsed.key_usage().unwrap().unwrap().value;
            assert!(usage.key_cert_sign() && usage.crl_sign());
            assert!(!usage.digital_signature());
            assert_eq!(
                parsed.validity().not_after.timestamp(),
                ca.not_after.as_second()
            );
            assert_eq!(
                parsed.validity().not_before.timestamp(),
                ca.not_before.as_second()
            );
        });
        assert!(ca.key_pem.contains("PRIVATE KEY"));
        assert!(
            !format!("{ca:?}").contains("PRIVATE"),
            "the key is redacted"
        );
    }

    #[test]
    fn a_member_certificate_serves_and_dials_for_both_listeners() {
        let ca = ca();
        let leaf = issue_member(
            &ca,
            "etcd-1",
            "etcd",
            "prod",
            "cluster.local",
            at(1),
            days(90),
        )
        .unwrap();
        let secret = tls_secret(member_secret_data(&ca.cert_pem, &leaf));
        let names = vec![
            "etcd-1.etcd.prod.svc".to_string(),
            "etcd-1.etcd.prod.svc.cluster.local".to_string(),
            "etcd-client.prod.svc".to_string(),
            "etcd-client.prod.svc.cluster.local".to_string(),
            "localhost".to_string(),
        ];
        for purpose in [Purpose::Server, Purpose::Peer] {
            let material =
                check_tls_secret("etcd-1-tls", Some(&secret), purpose, None, &names, at(1))
                    .unwrap_or_else(|e| panic!("{purpose:?}: {e}"));
            assert_eq!(material.not_after, at(91));
            assert_eq!(material.ca_pem.as_deref(), Some(ca.cert_pem.as_bytes()));
        }
        // Its own name only: another member's is not covered.
        let other = check_tls_secret(
            "etcd-1-tls",
            Some(&secret),
            Purpose::Peer,
            None,
            &member_names("etcd-2"),
            at(1),
        )
        .unwrap_err();
        assert!(
            other.contains("is not valid for etcd-2.etcd.prod.svc"),
            "{other}"
        );
        // Not yet valid long before issue, expired after its lifetime.
        let expired = check_tls_secret(
            "etcd-1-tls",
            Some(&secret),
            Purpose::Server,
            None,
            &member_names("etcd-1"),
            at(92),
        )
        .unwrap_err();
        assert!(expired.contains("expired at"), "{expired}");

        with_parsed(&leaf.cert_pem, |parsed| {
            assert_p256(parsed);
            assert_eq!(common_name(parsed), "etcd-1");
            assert_eq!(common_name_of_issuer(parsed), "etcd.prod etcd CA");
            assert!(!parsed.is_ca());
            let eku = parsed.extended_key_usage().unwrap().unwrap().value;
            assert!(eku.server_auth && eku.client_auth);
            assert!(!eku.code_signing && !eku.any);
            let usage = parsed.key_usage().unwrap().unwrap().value;
            assert!(usage.digital_signature() && !usage.key_cert_sign());
            let mut dns = Vec::new();
            let mut ips = Vec::new();
            for name in &parsed
                .subject_alternative_name()
                .unwrap()
                .unwrap()
                .value
                .general_names
            {
                match name {
                    GeneralName::DNSName(d) => dns.push(d.to_string()),
                    GeneralName::IPAddress(ip) => ips.push(ip.to_vec()),
                    other => panic!("unexpected SAN {other:?}"),
                }
            }
            dns.sort();
            let mut expected = names.clone();
            expected.sort();
            assert_eq!(dns, expected);
            assert_eq!(ips, vec![vec![127, 0, 0, 1]]);
            assert_eq!(
                parsed.validity().not_before.timestamp(),
                at(1).as_second() - 300
            );
            assert_eq!(parsed.validity().not_after.timestamp(), at(91).as_second());
        });
        assert_eq!(leaf.not_before.as_second(), at(1).as_second() - 300);
        assert!(
            !format!("{leaf:?}").contains("PRIVATE"),
            "the key is redacted"
        );
    }

    fn common_name_of_issuer(parsed: &X509Certificate<'_>) -> String {
        parsed
            .issuer()
            .iter_common_name()
            .next()
            .unwrap()
            .as_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn the_operator_client_certificate_is_for_client_auth_only() {
        let ca = ca();
        let leaf = issue_operator_client(&ca, "etcd", at(0), days(90)).unwrap();
        let secret = tls_secret(operator_client_secret_data(&ca.cert_pem, &leaf));
        check_tls_secret(
            "etcd-operator-client-tls",
            Some(&secret),
            Purpose::OperatorClient,
            Some(ca.cert_pem.as_bytes()),
            &[],
            at(0),
        )
        .unwrap();
        // Not a server certificate.
        let as_server = check_tls_secret(
            "etcd-operator-client-tls",
            Some(&secret),
            Purpose::Server,
            None,
            &[],
            at(0),
        )
        .unwrap_err();
        assert!(as_server.contains("lacks the server auth"), "{as_server}");
        with_parsed(&leaf.cert_pem, |parsed| {
            assert_p256(parsed);
            assert_eq!(common_name(parsed), "etcd-operator-client");
            let eku = parsed.extended_key_usage().unwrap().unwrap().value;
            assert!(eku.client_auth && !eku.server_auth);
            assert!(parsed.subject_alternative_name().unwrap().is_none());
            assert!(!parsed.is_ca());
        });
    }

    #[test]
    fn a_certificate_from_another_ca_does_not_pass() {
        let ca = ca();
        let other = new_ca("etcd", "prod", at(0), days(365)).unwrap();
        let foreign = issue_member(
            &other,
            "etcd-0",
            "etcd",
            "prod",
            "cluster.local",
            at(0),
            days(90),
        )
        .unwrap();
        let secret = tls_secret(member_secret_data(&ca.cert_pem, &foreign));
        let problem = check_tls_secret(
            "etcd-0-tls",
            Some(&secret),
            Purpose::Peer,
            None,
            &member_names("etcd-0"),
            at(0),
        )
        .unwrap_err();
        assert!(problem.contains("not signed by the CA"), "{problem}");
        let client = issue_operator_client(&other, "etcd", at(0), days(90)).unwrap();
        let secret = tls_secret(operator_client_secret_data(&other.cert_pem, &client));
        let problem = check_tls_secret(
            "etcd-operator-client-tls",
            Some(&secret),
            Purpose::OperatorClient,
            Some(ca.cert_pem.as_bytes()),
            &[],
            at(0),
        )
        .unwrap_err();
        assert!(problem.contains("not signed by the CA"), "{problem}");
    }

    #[test]
    fn a_ca_read_back_from_its_secret_signs_leaves_that_chain_to_the_original() {
        let original = ca();
        let secret = tls_secret(ca_secret_data(&original));
        let reloaded = ca_from_secret("etcd-ca", &secret).unwrap();
        assert_eq!(reloaded.cert_pem, original.cert_pem);
        assert_eq!(reloaded.not_before, original.not_before);
        assert_eq!(reloaded.not_after, original.not_after);
        let leaf = issue_member(
            &reloaded,
            "etcd-3",
            "etcd",
            "prod",
            "cluster.local",
            at(100),
            days(90),
        )
        .unwrap();
        // Checked against the original CA's PEM, not the reloaded one's.
        let data = BTreeMap::from([
            ("tls.crt".to_string(), bytes(&leaf.cert_pem)),
            ("tls.key".to_string(), bytes(&leaf.key_pem)),
            ("ca.crt".to_string(), bytes(&original.cert_pem)),
        ]);
        check_tls_secret(
            "etcd-3-tls",
            Some(&tls_secret(data)),
            Purpose::Peer,
            None,
            &member_names("etcd-3"),
            at(100),
        )
        .unwrap();
        with_parsed(&leaf.cert_pem, |leaf| {
            with_parsed(&original.cert_pem, |ca| {
                assert_eq!(leaf.issuer().as_raw(), ca.subject().as_raw());
                let aki = leaf
                    .extensions()
                    .iter()
                    .find_map(|e| match e.parsed_extension() {
                        x509_parser::extensions::ParsedExtension::AuthorityKeyIdentifier(a) => {
                            a.key_identifier.clone()
                        }
                        _ => None,
                    })
                    .expect("the leaf names its CA's key");
                let ski = ca
                    .extensions()
                    .iter()
                    .find_map(|e| match e.parsed_extension() {
                        x509_parser::extensions::ParsedExtension::SubjectKeyIdentifier(s) => {
                            Some(s.clone())
                        }
                        _ => None,
                    })
                    .expect("the CA has a key identifier");
                assert_eq!(aki.0, ski.0);
            })
        });
        let client = issue_operator_client(&reloaded, "etcd", at(100), days(90)).unwrap();
        check_tls_secret(
            "etcd-operator-client-tls",
            Some(&tls_secret(operator_client_secret_data(
                &original.cert_pem,
                &client,
            ))),
            Purpose::OperatorClient,
            Some(original.cert_pem.as_bytes()),
            &[],
            at(100),
        )
        .unwrap();
    }

    #[test]
    fn a_secret_that_holds_no_usable_ca_is_refused_with_its_problem() {
        let ca = ca();
        let other = new_ca("other", "prod", at(0), days(365)).unwrap();
        let leaf = issue_member(
            &ca,
            "etcd-0",
            "etcd",
            "prod",
            "cluster.local",
            at(0),
            days(90),
        )
        .unwrap();
        let problem = |secret: Secret| ca_from_secret("etcd-ca", &secret).unwrap_err();
        let data = |cert: &str, key: &str| {
            BTreeMap::from([
                ("tls.crt".to_string(), bytes(cert)),
                ("tls.key".to_string(), bytes(key)),
            ])
        };
        let mut opaque = tls_secret(ca_secret_data(&ca));
        opaque.type_ = Some("Opaque".into());
        assert!(problem(opaque).contains("has type Opaque"));
        let mut no_key = ca_secret_data(&ca);
        no_key.remove("tls.key");
        assert!(problem(tls_secret(no_key)).contains("has no tls.key"));
        assert!(
            problem(tls_secret(data(&ca.cert_pem, &other.key_pem)))
                .contains("tls.key does not belong to the certificate")
        );
        assert!(
            problem(tls_secret(data(&leaf.cert_pem, &leaf.key_pem)))
                .contains("is not a CA certificate")
        );
        assert!(problem(tls_secret(data("garbage", &ca.key_pem))).contains("tls.crt is not PEM"));
        assert!(
            problem(tls_secret(data(&ca.cert_pem, "garbage")))
                .contains("tls.key is not a usable private key")
        );
        // A CA with a richer subject than the operator writes (someone else's CA).
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
        let mut params = ca_params("foreign", at(0), days(365)).unwrap();
        params
            .distinguished_name
            .push(DnType::OrganizationName, "Example");
        let foreign = params.self_signed(&key).unwrap();
        assert!(
            problem(tls_secret(data(&foreign.pem(), &key.serialize_pem())))
                .contains("not the single CN the operator writes")
        );
    }

    #[test]
    fn a_leaf_never_outlives_its_ca() {
        let short = new_ca("etcd", "prod", at(0), days(10)).unwrap();
        let leaf = issue_member(
            &short,
            "etcd-0",
            "etcd",
            "prod",
            "cluster.local",
            at(1),
            days(90),
        )
        .unwrap();
        assert_eq!(leaf.not_after, short.not_after);
        with_parsed(&leaf.cert_pem, |parsed| {
            assert_eq!(parsed.validity().not_after.timestamp(), at(10).as_second());
        });
        assert!(issue_operator_client(&short, "etcd", at(0), Duration::ZERO).is_err());
        assert!(new_ca("etcd", "prod", at(0), Duration::ZERO).is_err());
    }

    #[test]
    fn renewal_is_due_at_two_thirds_or_renew_before_the_end() {
        let (from, to) = (at(0), at(90));
        let second =
            |days: i64, plus: i64| Timestamp::from_second(at(days).as_second() + plus).unwrap();
        // A third of 90 days left: day 60.
        assert!(!renewal_due(from, to, None, at(0)));
        assert!(!renewal_due(from, to, None, second(60, -1)));
        assert!(renewal_due(from, to, None, at(60)));
        assert!(renewal_due(from, to, None, at(89)));
        assert!(renewal_due(from, to, None, at(91)), "expired");
        // renewBefore 10 days: day 80.
        let ten = Some(days(10));
        assert!(!renewal_due(from, to, ten, at(60)));
        assert!(!renewal_due(from, to, ten, second(80, -1)));
        assert!(renewal_due(from, to, ten, at(80)));
        // renewBefore as long as the lifetime, or longer: due at once.
        assert!(renewal_due(from, to, Some(days(90)), at(0)));
        assert!(renewal_due(from, to, Some(Duration::MAX), at(0)));
        // No lifetime at all.
        assert!(renewal_due(to, from, None, at(0)));
        assert!(renewal_due(from, from, None, at(0)));

        // The CA: a third of five years left.
        let ca = ca();
        let lifetime = ca.not_after.as_second() - ca.not_before.as_second();
        let turn = ca.not_after.as_second() - lifetime / 3;
        assert!(!ca_renewal_due(
            &ca,
            Timestamp::from_second(turn - 1).unwrap()
        ));
        assert!(ca_renewal_due(&ca, Timestamp::from_second(turn).unwrap()));
        assert!(!ca_renewal_due(&ca, at(365)));
        assert!(ca_renewal_due(&ca, at(4 * 365)));
    }

    #[test]
    fn names_of_the_secrets_and_of_a_member() {
        assert_eq!(ca_secret_name("etcd"), "etcd-ca");
        assert_eq!(member_secret_name("etcd-0"), "etcd-0-tls");
        assert_eq!(
            operator_client_secret_name("etcd"),
            "etcd-operator-client-tls"
        );
        assert_eq!(
            member_dns_names("etcd-0", "etcd", "prod", "cluster.local"),
            [
                "etcd-0.etcd.prod.svc.cluster.local",
                "etcd-0.etcd.prod.svc",
                "etcd-client.prod.svc.cluster.local",
                "etcd-client.prod.svc",
                "localhost",
            ]
        );
        let ca = ca();
        let data = ca_secret_data(&ca);
        assert_eq!(
            data.keys().collect::<Vec<_>>(),
            ["ca.crt", "tls.crt", "tls.key"]
        );
        assert_eq!(data["ca.crt"], data["tls.crt"]);
        let leaf = issue_member(
            &ca,
            "etcd-0",
            "etcd",
            "prod",
            "cluster.local",
            at(0),
            days(1),
        )
        .unwrap();
        let member = member_secret_data(&ca.cert_pem, &leaf);
        assert_eq!(member["ca.crt"].0, ca.cert_pem.as_bytes());
        assert_eq!(member["tls.crt"].0, leaf.cert_pem.as_bytes());
        assert_eq!(member["tls.key"].0, leaf.key_pem.as_bytes());
    }
}
