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
#[path = "issuer_tests.rs"]
mod tests;
