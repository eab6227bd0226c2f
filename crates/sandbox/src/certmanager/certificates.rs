//! Certificates: whether the Secret holds a certificate that is ready, whether one must be
//! issued (and why, with cert-manager's reasons), issuing it, and the Secret that holds it.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use serde_json::{Value, json};

use super::issuers::Signer;
use super::pki::{ParsedCertificate, PrivateKey, pem_blocks};
use super::request::{Request, request};
use super::types::{Certificate, GROUP, ISSUER_KIND};

/// The field manager of the Secrets written (cert-manager's issuing controller's).
pub const FIELD_MANAGER: &str = "cert-manager-certificates-issuing";

pub const TLS_CRT: &str = "tls.crt";
pub const TLS_KEY: &str = "tls.key";
pub const CA_CRT: &str = "ca.crt";
pub const KEY_DER: &str = "key.der";
pub const COMBINED_PEM: &str = "tls-combined.pem";

pub mod annotation {
    pub const CERTIFICATE_NAME: &str = "cert-manager.io/certificate-name";
    pub const ISSUER_NAME: &str = "cert-manager.io/issuer-name";
    pub const ISSUER_KIND: &str = "cert-manager.io/issuer-kind";
    pub const ISSUER_GROUP: &str = "cert-manager.io/issuer-group";
    pub const COMMON_NAME: &str = "cert-manager.io/common-name";
    pub const ALT_NAMES: &str = "cert-manager.io/alt-names";
    pub const IP_SANS: &str = "cert-manager.io/ip-sans";
    pub const URI_SANS: &str = "cert-manager.io/uri-sans";
    pub const EMAIL_SANS: &str = "cert-manager.io/email-sans";
    /// The label on every Secret cert-manager writes.
    pub const PART_OF: &str = "controller.cert-manager.io/fao";
}

/// What the Secret holds, when it holds a certificate and a key that belong together.
pub struct Current {
    /// The leaf, first certificate of `tls.crt`.
    pub certificate: ParsedCertificate,
    pub key: PrivateKey,
}

/// A Certificate against its Secret at one moment.
pub struct Evaluation {
    pub request: Result<Request, String>,
    pub current: Option<Current>,
    /// The Ready condition's reason and message when it is False.
    pub not_ready: Option<(&'static str, String)>,
    /// Why a certificate must be issued now, if it must.
    pub trigger: Option<(&'static str, String)>,
    /// When the current certificate is to be renewed.
    pub renewal_time: Option<Timestamp>,
}

pub const READY_MESSAGE: &str = "Certificate is up to date and has not expired";

fn rfc3339(at: Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn secret_bytes(secret: &Secret, key: &str) -> Option<Vec<u8>> {
    secret
        .data
        .as_ref()?
        .get(key)
        .map(|b| b.0.clone())
        .filter(|b| !b.is_empty())
}

fn issuer_kinds_equal(a: &str, b: &str) -> bool {
    let normal = |k: &str| {
        if k.is_empty() {
            ISSUER_KIND.to_string()
        } else {
            k.to_string()
        }
    };
    normal(a) == normal(b)
}

fn issuer_groups_equal(a: &str, b: &str) -> bool {
    let normal = |g: &str| {
        if g.is_empty() {
            GROUP.to_string()
        } else {
            g.to_string()
        }
    };
    normal(a) == normal(b)
}

/// The checks of cert-manager's readiness and trigger policies that make a certificate not
/// ready and call for a new one, in its order.
fn problems(
    certificate: &Certificate,
    request: &Result<Request, String>,
    secret: Option<&Secret>,
) -> (Option<Current>, Option<(&'static str, String)>) {
    let Some(secret) = secret else {
        return (
            None,
            Some((
                "DoesNotExist",
                "Issuing certificate as Secret does not exist".into(),
            )),
        );
    };
    let Some(crt) = secret_bytes(secret, TLS_CRT) else {
        return (
            None,
            Some((
                "MissingData",
                "Issuing certificate as Secret does not contain a certificate".into(),
            )),
        );
    };
    let Some(key) = secret_bytes(secret, TLS_KEY) else {
        return (
            None,
            Some((
                "MissingData",
                "Issuing certificate as Secret does not contain a private key".into(),
            )),
        );
    };
    let key = match PrivateKey::from_pem(&key) {
        Ok(key) => key,
        Err(error) => {
            return (
                None,
                Some((
                    "InvalidKeyPair",
                    format!(
                        "Issuing certificate as Secret contains invalid private key data: {error}"
                    ),
                )),
            );
        }
    };
    let leaf = match ParsedCertificate::chain_from_pem(&crt) {
        Ok(mut chain) => chain.remove(0),
        Err(error) => {
            return (
                None,
                Some((
                    "InvalidCertificate",
                    format!(
                        "Issuing certificate as Secret contains an invalid certificate: {error}"
                    ),
                )),
            );
        }
    };
    if leaf.public_key_raw != key.public_key_raw() {
        return (
            None,
            Some((
                "InvalidKeyPair",
                "Issuing certificate as Secret contains a private key that does not match the certificate".into(),
            )),
        );
    }
    let current = Current {
        certificate: leaf,
        key,
    };
    if let Ok(request) = request {
        let fields = request.key_mismatches(Some(current.key.algorithm));
        if !fields.is_empty() {
            return (
                Some(current),
                Some((
                    "SecretMismatch",
                    format!(
                        "Existing private key is not up to date for spec: [{}]",
                        fields.join(" ")
                    ),
                )),
            );
        }
    }
    let annotations = secret.annotations();
    let name = annotations.get(annotation::ISSUER_NAME);
    let kind = annotations.get(annotation::ISSUER_KIND);
    let group = annotations.get(annotation::ISSUER_GROUP);
    let reference = &certificate.spec.issuer_ref;
    if (name.is_some() || kind.is_some() || group.is_some())
        && (name.map(String::as_str).unwrap_or("") != reference.name
            || !issuer_kinds_equal(
                kind.map_or("", String::as_str),
                reference.kind.as_deref().unwrap_or(""),
            )
            || !issuer_groups_equal(
                group.map_or("", String::as_str),
                reference.group.as_deref().unwrap_or(""),
            ))
    {
        let previous = format!(
            "{}.{}/{}",
            kind.map_or(ISSUER_KIND, |k| if k.is_empty() { ISSUER_KIND } else { k }),
            group.map_or(GROUP, |g| if g.is_empty() { GROUP } else { g }),
            name.map_or("", String::as_str)
        );
        return (
            Some(current),
            Some((
                "IncorrectIssuer",
                format!("Issuing certificate as Secret was previously issued by \"{previous}\""),
            )),
        );
    }
    if let Some(issued_for) = annotations.get(annotation::CERTIFICATE_NAME)
        && *issued_for != certificate.name_any()
    {
        return (
            Some(current),
            Some((
                "IncorrectCertificate",
                format!(
                    "Secret was issued for \"{issued_for}\". If this message is not transient, you might have two conflicting Certificates pointing to the same secret."
                ),
            )),
        );
    }
    if let Ok(request) = request {
        let fields = request.mismatches(&current.certificate);
        if !fields.is_empty() {
            return (
                Some(current),
                Some((
                    "RequestChanged",
                    format!(
                        "Fields on the issued certificate not up to date: [{}]",
                        fields.join(" ")
                    ),
                )),
            );
        }
    }
    (Some(current), None)
}

/// Evaluates a Certificate against its Secret (`None`: there is none) at `now`.
pub fn evaluate(certificate: &Certificate, secret: Option<&Secret>, now: Timestamp) -> Evaluation {
    let request = request(&certificate.spec);
    let (current, problem) = problems(certificate, &request, secret);
    let renewal_time = match (&request, &current) {
        (Ok(request), Some(current)) => request.renewal_time(
            current.certificate.not_before,
            current.certificate.not_after,
        ),
        _ => None,
    };
    let expired = current
        .as_ref()
        .filter(|c| now >= c.certificate.not_after)
        .map(|c| {
            (
                "Expired",
                format!(
                    "Certificate expired on {}",
                    rfc3339(c.certificate.not_after)
                ),
            )
        });
    let renewing = renewal_time.filter(|at| now >= *at).map(|at| {
        (
            "Renewing",
            format!(
                "Renewing certificate as renewal was scheduled at {}",
                rfc3339(at)
            ),
        )
    });
    Evaluation {
        not_ready: problem.clone().or(expired),
        trigger: problem.or(renewing),
        request,
        current,
        renewal_time,
    }
}

/// A newly issued certificate: the Secret's `tls.crt`, `tls.key` and `ca.crt`.
pub struct Issued {
    pub tls_crt: String,
    pub tls_key: String,
    pub ca_crt: String,
}

/// Issues a certificate for `request` with `signer`. `previous_key` is the Secret's key, reused
/// with `rotationPolicy: Never`.
pub fn issue(
    request: &Request,
    signer: &Signer,
    previous_key: Option<PrivateKey>,
    now: Timestamp,
) -> Result<Issued, String> {
    let key = match previous_key {
        Some(key) if !request.rotate_key => {
            let fields = request.key_mismatches(Some(key.algorithm));
            if !fields.is_empty() {
                return Err(format!(
                    "the private key in the Secret is {} and rotationPolicy is Never: it does not match [{}]; delete the Secret's tls.key to get a new key",
                    key.algorithm,
                    fields.join(" ")
                ));
            }
            key
        }
        _ => PrivateKey::generate(request.key)?,
    };
    let mut template = request.template(now)?;
    let tls_key = key.pem(request.encoding)?;
    match signer {
        Signer::SelfSigned {
            crl_distribution_points,
        } => {
            request.check_signature_algorithm(key.algorithm)?;
            template.crl_distribution_points = crl_distribution_points.clone();
            let pem = template.self_signed(&key)?;
            Ok(Issued {
                tls_crt: pem.clone(),
                tls_key,
                ca_crt: pem,
            })
        }
        Signer::Ca {
            chain,
            key: ca_key,
            crl_distribution_points,
            ocsp_servers,
            issuing_certificate_urls,
        } => {
            request.check_signature_algorithm(ca_key.algorithm)?;
            template.crl_distribution_points = crl_distribution_points.clone();
            template.ocsp_servers = ocsp_servers.clone();
            template.issuing_certificate_urls = issuing_certificate_urls.clone();
            let leaf = template.signed_by(&key, &chain[0].der, ca_key)?;
            // The chain without its self-signed root, and the top of the chain as the CA.
            let mut tls_crt = leaf;
            for certificate in chain.iter().filter(|c| !c.self_issued) {
                tls_crt.push_str(&certificate.pem());
            }
            let ca_crt = chain.last().map(ParsedCertificate::pem).unwrap_or_default();
            Ok(Issued {
                tls_crt,
                tls_key,
                ca_crt,
            })
        }
    }
}

/// `values` as one CSV record, as cert-manager joins them for its annotations.
fn csv(values: &[String]) -> String {
    values
        .iter()
        .map(|value| {
            if value.contains([',', '"', '\n', '\r']) || value.starts_with(' ') {
                format!("\"{}\"", value.replace('"', "\"\""))
            } else {
                value.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The annotations cert-manager puts on a certificate's Secret: what the certificate holds and
/// which Certificate and issuer it is for.
pub fn certificate_annotations(
    certificate: &Certificate,
    leaf: &ParsedCertificate,
) -> BTreeMap<String, String> {
    let mut annotations = BTreeMap::new();
    let subject = &leaf.subject;
    annotations.insert(annotation::COMMON_NAME.into(), subject.common_name.clone());
    let optional = [
        (
            "cert-manager.io/subject-organizations",
            &subject.organizations,
        ),
        (
            "cert-manager.io/subject-organizationalunits",
            &subject.organizational_units,
        ),
        ("cert-manager.io/subject-countries", &subject.countries),
        ("cert-manager.io/subject-provinces", &subject.provinces),
        ("cert-manager.io/subject-localities", &subject.localities),
        ("cert-manager.io/subject-postalcodes", &subject.postal_codes),
        (
            "cert-manager.io/subject-streetaddresses",
            &subject.street_addresses,
        ),
        (annotation::EMAIL_SANS, &leaf.email_addresses),
    ];
    for (key, values) in optional {
        if !values.is_empty() {
            annotations.insert(key.into(), csv(values));
        }
    }
    if !subject.serial_number.is_empty() {
        annotations.insert(
            "cert-manager.io/subject-serialnumber".into(),
            subject.serial_number.clone(),
        );
    }
    annotations.insert(annotation::ALT_NAMES.into(), csv(&leaf.dns_names));
    let ips: Vec<String> = leaf.ip_addresses.iter().map(ToString::to_string).collect();
    annotations.insert(annotation::IP_SANS.into(), csv(&ips));
    annotations.insert(annotation::URI_SANS.into(), csv(&leaf.uris));
    annotations.insert(annotation::CERTIFICATE_NAME.into(), certificate.name_any());
    let reference = &certificate.spec.issuer_ref;
    annotations.insert(annotation::ISSUER_NAME.into(), reference.name.clone());
    annotations.insert(
        annotation::ISSUER_KIND.into(),
        reference.kind.clone().unwrap_or_default(),
    );
    annotations.insert(
        annotation::ISSUER_GROUP.into(),
        reference.group.clone().unwrap_or_default(),
    );
    annotations
}

/// The Secret as the issuing controller applies it (server-side apply, [`FIELD_MANAGER`]):
/// the key pair, `ca.crt`, the additional output formats, `secretTemplate`'s labels and
/// annotations and cert-manager's own. `secret_type` is the existing Secret's (it cannot
/// change), else `kubernetes.io/tls`.
pub fn desired_secret(
    certificate: &Certificate,
    request: &Request,
    tls_crt: &[u8],
    tls_key: &[u8],
    ca_crt: Option<&[u8]>,
    secret_type: Option<&str>,
) -> Result<Value, String> {
    let chain = ParsedCertificate::chain_from_pem(tls_crt)?;
    let mut data = BTreeMap::new();
    data.insert(TLS_CRT.to_string(), tls_crt.to_vec());
    data.insert(TLS_KEY.to_string(), tls_key.to_vec());
    if let Some(ca) = ca_crt.filter(|ca| !ca.is_empty()) {
        data.insert(CA_CRT.to_string(), ca.to_vec());
    }
    if request.der_output {
        let (_, der) = pem_blocks(tls_key)?
            .into_iter()
            .find(|(label, _)| label.ends_with("PRIVATE KEY"))
            .ok_or("no private key in tls.key")?;
        data.insert(KEY_DER.to_string(), der);
    }
    if request.combined_pem_output {
        let combined = [tls_key, b"\n", tls_crt].concat();
        data.insert(COMBINED_PEM.to_string(), combined);
    }
    let mut labels = BTreeMap::new();
    let mut annotations = BTreeMap::new();
    if let Some(template) = &certificate.spec.secret_template {
        labels.extend(template.labels.clone());
        annotations.extend(template.annotations.clone());
    }
    annotations.extend(certificate_annotations(certificate, &chain[0]));
    labels.insert(annotation::PART_OF.to_string(), "true".to_string());
    let encoded: BTreeMap<String, String> = data
        .into_iter()
        .map(|(key, value)| {
            use base64::Engine;
            (key, base64::engine::general_purpose::STANDARD.encode(value))
        })
        .collect();
    Ok(json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": certificate.spec.secret_name,
            "namespace": certificate.namespace().unwrap_or_default(),
            "labels": labels,
            "annotations": annotations,
        },
        "type": secret_type.unwrap_or("kubernetes.io/tls"),
        "data": encoded,
    }))
}

/// The fields under `path` (`["f:data"]`) that `manager` owns in the Secret, without `f:`.
fn owned_keys(secret: &Secret, manager: &str, path: &[&str]) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for entry in secret.metadata.managed_fields.iter().flatten() {
        if entry.manager.as_deref() != Some(manager) {
            continue;
        }
        let Some(fields) = entry.fields_v1.as_ref() else {
            continue;
        };
        let mut node = &fields.0;
        for step in path {
            node = &node[*step];
        }
        if let Some(map) = node.as_object() {
            keys.extend(
                map.keys()
                    .filter_map(|k| k.strip_prefix("f:"))
                    .map(str::to_string),
            );
        }
    }
    keys
}

/// Whether the Secret already is `desired` (as [`desired_secret`] makes it): same data for
/// every key, every label and annotation, and nothing left that the issuing controller wrote
/// before and no longer wants.
pub fn secret_up_to_date(secret: &Secret, desired: &Value) -> bool {
    use base64::Engine;
    let data = secret.data.clone().unwrap_or_default();
    let desired_data = desired["data"].as_object().cloned().unwrap_or_default();
    for (key, value) in &desired_data {
        let wanted = base64::engine::general_purpose::STANDARD
            .decode(value.as_str().unwrap_or(""))
            .unwrap_or_default();
        if data.get(key).map(|b| &b.0) != Some(&wanted) {
            return false;
        }
    }
    if owned_keys(secret, FIELD_MANAGER, &["f:data"])
        .iter()
        .any(|key| !desired_data.contains_key(key))
    {
        return false;
    }
    for (field, actual) in [
        ("labels", secret.labels()),
        ("annotations", secret.annotations()),
    ] {
        let wanted = desired["metadata"][field]
            .as_object()
            .cloned()
            .unwrap_or_default();
        if wanted
            .iter()
            .any(|(key, value)| actual.get(key).map(String::as_str) != value.as_str())
        {
            return false;
        }
        if owned_keys(
            secret,
            FIELD_MANAGER,
            &["f:metadata", &format!("f:{field}")],
        )
        .iter()
        .any(|key| !wanted.contains_key(key))
        {
            return false;
        }
    }
    true
}
