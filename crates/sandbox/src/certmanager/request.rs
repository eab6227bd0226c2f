//! What a Certificate asks for, checked as cert-manager's webhook checks it, and compared with
//! an issued certificate the way cert-manager decides that a Certificate must be reissued.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

use super::duration;
use super::pki::{
    CertificateTemplate, KeyAlgorithm, KeyEncoding, ParsedCertificate, Subject, eku, usage,
};
use super::types::CertificateSpec;

/// cert-manager's default `duration` (90 days).
pub const DEFAULT_DURATION: Duration = Duration::from_secs(90 * 24 * 3600);

/// A Certificate's request, valid and within what the stand-in supports.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    pub subject: Subject,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<IpAddr>,
    pub uris: Vec<String>,
    pub email_addresses: Vec<String>,
    pub is_ca: bool,
    pub key_usage: u16,
    pub extended_key_usages: Vec<String>,
    pub duration: Duration,
    pub renew_before: Option<Duration>,
    pub renew_before_percentage: Option<i32>,
    pub renewal_disabled: bool,
    pub key: KeyAlgorithm,
    pub encoding: KeyEncoding,
    /// `rotationPolicy: Always` (the default since cert-manager 1.18).
    pub rotate_key: bool,
    pub der_output: bool,
    pub combined_pem_output: bool,
    pub signature_algorithm: Option<String>,
}

/// The key usage bit or the extended key usage OID of a usage name.
fn usage_of(name: &str) -> Option<Result<u16, &'static str>> {
    Some(match name {
        "signing" | "digital signature" => Ok(usage::DIGITAL_SIGNATURE),
        "content commitment" => Ok(usage::CONTENT_COMMITMENT),
        "key encipherment" => Ok(usage::KEY_ENCIPHERMENT),
        "key agreement" => Ok(usage::KEY_AGREEMENT),
        "data encipherment" => Ok(usage::DATA_ENCIPHERMENT),
        "cert sign" => Ok(usage::CERT_SIGN),
        "crl sign" => Ok(usage::CRL_SIGN),
        "encipher only" => Ok(usage::ENCIPHER_ONLY),
        "decipher only" => Ok(usage::DECIPHER_ONLY),
        "any" => Err(eku::ANY),
        "server auth" => Err(eku::SERVER_AUTH),
        "client auth" => Err(eku::CLIENT_AUTH),
        "code signing" => Err(eku::CODE_SIGNING),
        "email protection" | "s/mime" => Err(eku::EMAIL_PROTECTION),
        "ipsec end system" => Err(eku::IPSEC_END_SYSTEM),
        "ipsec tunnel" => Err(eku::IPSEC_TUNNEL),
        "ipsec user" => Err(eku::IPSEC_USER),
        "timestamping" => Err(eku::TIME_STAMPING),
        "ocsp signing" => Err(eku::OCSP_SIGNING),
        "microsoft sgc" => Err(eku::MICROSOFT_SGC),
        "netscape sgc" => Err(eku::NETSCAPE_SGC),
        _ => return None,
    })
}

fn set(value: &Option<serde_json::Value>) -> bool {
    value.as_ref().is_some_and(|v| match v {
        serde_json::Value::Null => false,
        serde_json::Value::Array(items) => !items.is_empty(),
        serde_json::Value::Object(fields) => !fields.is_empty(),
        _ => true,
    })
}

/// The Certificate's request, or why it cannot be issued (invalid, or beyond the stand-in).
pub fn request(spec: &CertificateSpec) -> Result<Request, String> {
    if spec.secret_name.is_empty() {
        return Err("spec.secretName: Required value".into());
    }
    if spec
        .literal_subject
        .as_deref()
        .is_some_and(|s| !s.is_empty())
    {
        return Err("spec.literalSubject is not supported by kube-sandbox's cert-manager".into());
    }
    if set(&spec.other_names) {
        return Err("spec.otherNames is not supported by kube-sandbox's cert-manager".into());
    }
    if set(&spec.name_constraints) {
        return Err("spec.nameConstraints is not supported by kube-sandbox's cert-manager".into());
    }
    if let Some(keystores) = &spec.keystores {
        let creates = ["jks", "pkcs12"]
            .iter()
            .any(|kind| keystores[kind]["create"] == serde_json::Value::Bool(true));
        if creates {
            return Err(
                "spec.keystores (JKS and PKCS#12) are not produced by kube-sandbox's cert-manager"
                    .into(),
            );
        }
    }
    let common_name = spec.common_name.clone().unwrap_or_default();
    if common_name.is_empty()
        && spec.dns_names.is_empty()
        && spec.ip_addresses.is_empty()
        && spec.uris.is_empty()
        && spec.email_addresses.is_empty()
    {
        return Err(
            "at least one of commonName, dnsNames, uris, ipAddresses or emailAddresses must be set"
                .into(),
        );
    }
    let ip_addresses = spec
        .ip_addresses
        .iter()
        .map(|address| {
            address
                .parse::<IpAddr>()
                .map_err(|_| format!("spec.ipAddresses: invalid IP address {address:?}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let subject_spec = spec.subject.clone().unwrap_or_default();
    for (field, values) in [
        ("organizations", &subject_spec.organizations),
        ("countries", &subject_spec.countries),
        ("organizationalUnits", &subject_spec.organizational_units),
        ("localities", &subject_spec.localities),
        ("provinces", &subject_spec.provinces),
        ("streetAddresses", &subject_spec.street_addresses),
        ("postalCodes", &subject_spec.postal_codes),
    ] {
        if values.len() > 1 {
            return Err(format!(
                "spec.subject.{field}: kube-sandbox's cert-manager writes at most one value per subject attribute, got {values:?}"
            ));
        }
    }
    let subject = Subject {
        common_name,
        organizations: subject_spec.organizations,
        countries: subject_spec.countries,
        organizational_units: subject_spec.organizational_units,
        localities: subject_spec.localities,
        provinces: subject_spec.provinces,
        street_addresses: subject_spec.street_addresses,
        postal_codes: subject_spec.postal_codes,
        serial_number: subject_spec.serial_number.unwrap_or_default(),
    };

    let mut key_usage = if spec.is_ca { usage::CERT_SIGN } else { 0 };
    let mut extended_key_usages = Vec::new();
    let usages: Vec<&str> = if spec.usages.is_empty() {
        vec!["digital signature", "key encipherment"]
    } else {
        spec.usages.iter().map(String::as_str).collect()
    };
    for name in usages {
        match usage_of(name) {
            Some(Ok(bit)) => key_usage |= bit,
            Some(Err(oid)) => {
                if !extended_key_usages.iter().any(|o| o == oid) {
                    extended_key_usages.push(oid.to_string());
                }
            }
            None => return Err(format!("spec.usages: unknown key usage {name:?}")),
        }
    }

    let duration = match &spec.duration {
        Some(text) => duration::parse(text).map_err(|e| format!("spec.duration: {e}"))?,
        None => DEFAULT_DURATION,
    };
    if duration < Duration::from_secs(1) {
        return Err("spec.duration: must be at least 1s".into());
    }
    let renew_before = match &spec.renew_before {
        Some(text) => Some(duration::parse(text).map_err(|e| format!("spec.renewBefore: {e}"))?),
        None => None,
    };
    if let Some(before) = renew_before
        && before >= duration
    {
        return Err(format!(
            "certificate duration {} must be greater than renewBefore {}",
            duration::format(duration),
            duration::format(before)
        ));
    }
    if renew_before.is_some() && spec.renew_before_percentage.is_some() {
        return Err("spec.renewBefore and spec.renewBeforePercentage may not both be set".into());
    }
    if let Some(percentage) = spec.renew_before_percentage
        && !(1..100).contains(&percentage)
    {
        return Err(format!(
            "spec.renewBeforePercentage: {percentage} must be in the range (0,100)"
        ));
    }
    let renewal_disabled = spec
        .renewal
        .as_ref()
        .and_then(|r| r.policy.as_deref())
        .is_some_and(|p| p == "Disabled");

    let private_key = spec.private_key.clone().unwrap_or_default();
    let size = private_key.size.filter(|s| *s != 0);
    // The stand-in's default is ECDSA P-256 (cert-manager's is RSA 2048).
    let key = match private_key.algorithm.as_deref().unwrap_or("ECDSA") {
        "ECDSA" => match size.unwrap_or(256) {
            bits @ (256 | 384 | 521) => KeyAlgorithm::Ecdsa(u16::try_from(bits).unwrap_or(256)),
            other => {
                return Err(format!(
                    "spec.privateKey.size: {other}: ECDSA key size must be one of 256, 384 or 521"
                ));
            }
        },
        "RSA" => match size.unwrap_or(2048) {
            bits @ (2048 | 4096 | 8192) => KeyAlgorithm::Rsa(u32::try_from(bits).unwrap_or(2048)),
            other => {
                return Err(format!(
                    "spec.privateKey.size: {other}: RSA key size must be one of 2048, 4096 or 8192"
                ));
            }
        },
        "Ed25519" => KeyAlgorithm::Ed25519,
        other => {
            return Err(format!(
                "spec.privateKey.algorithm: unsupported value {other:?}"
            ));
        }
    };
    let encoding = match private_key.encoding.as_deref().unwrap_or("PKCS1") {
        "PKCS1" => KeyEncoding::Pkcs1,
        "PKCS8" => KeyEncoding::Pkcs8,
        other => {
            return Err(format!(
                "spec.privateKey.encoding: unsupported value {other:?}"
            ));
        }
    };
    let rotate_key = match private_key.rotation_policy.as_deref().unwrap_or("Always") {
        "Always" => true,
        "Never" => false,
        other => {
            return Err(format!(
                "spec.privateKey.rotationPolicy: unsupported value {other:?}"
            ));
        }
    };
    let formats: BTreeSet<&str> = spec
        .additional_output_formats
        .iter()
        .map(|f| f.type_.as_str())
        .collect();
    Ok(Request {
        subject,
        dns_names: spec.dns_names.clone(),
        ip_addresses,
        uris: spec.uris.clone(),
        email_addresses: spec.email_addresses.clone(),
        is_ca: spec.is_ca,
        key_usage,
        extended_key_usages,
        duration,
        renew_before,
        renew_before_percentage: spec.renew_before_percentage,
        renewal_disabled,
        key,
        encoding,
        rotate_key,
        der_output: formats.contains("DER"),
        combined_pem_output: formats.contains("CombinedPEM"),
        signature_algorithm: spec.signature_algorithm.clone().filter(|s| !s.is_empty()),
    })
}

fn sorted<T: Ord + Clone>(items: &[T]) -> Vec<T> {
    let mut items = items.to_vec();
    items.sort();
    items
}

fn sorted_subject(subject: &Subject) -> Subject {
    Subject {
        organizations: sorted(&subject.organizations),
        countries: sorted(&subject.countries),
        organizational_units: sorted(&subject.organizational_units),
        localities: sorted(&subject.localities),
        provinces: sorted(&subject.provinces),
        street_addresses: sorted(&subject.street_addresses),
        postal_codes: sorted(&subject.postal_codes),
        ..subject.clone()
    }
}

impl Request {
    /// The fields of the Certificate the issued certificate does not match, as cert-manager
    /// names them (`spec.dnsNames`...); empty when it is up to date.
    pub fn mismatches(&self, issued: &ParsedCertificate) -> Vec<&'static str> {
        let mut fields = Vec::new();
        if issued.subject.common_name != self.subject.common_name {
            fields.push("spec.commonName");
        }
        if sorted_subject(&Subject {
            common_name: String::new(),
            ..issued.subject.clone()
        }) != sorted_subject(&Subject {
            common_name: String::new(),
            ..self.subject.clone()
        }) {
            fields.push("spec.subject");
        }
        if sorted(&issued.dns_names) != sorted(&self.dns_names) {
            fields.push("spec.dnsNames");
        }
        if sorted(&issued.ip_addresses) != sorted(&self.ip_addresses) {
            fields.push("spec.ipAddresses");
        }
        if sorted(&issued.uris) != sorted(&self.uris) {
            fields.push("spec.uris");
        }
        if sorted(&issued.email_addresses) != sorted(&self.email_addresses) {
            fields.push("spec.emailAddresses");
        }
        if issued.is_ca != self.is_ca {
            fields.push("spec.isCA");
        }
        let wanted: BTreeSet<String> = self.extended_key_usages.iter().cloned().collect();
        if issued.key_usage != self.key_usage || issued.extended_key_usages != wanted {
            fields.push("spec.usages");
        }
        let actual = issued.not_after.duration_since(issued.not_before);
        let requested = SignedDuration::try_from(self.duration).unwrap_or(SignedDuration::MAX);
        if (actual - requested).abs() > SignedDuration::from_secs(1) {
            fields.push("spec.duration");
        }
        fields
    }

    /// The fields of `spec.privateKey` a key does not match.
    pub fn key_mismatches(&self, key: Option<KeyAlgorithm>) -> Vec<&'static str> {
        match (key, self.key) {
            (Some(actual), wanted) if actual == wanted => Vec::new(),
            (Some(KeyAlgorithm::Ecdsa(_)), KeyAlgorithm::Ecdsa(_))
            | (Some(KeyAlgorithm::Rsa(_)), KeyAlgorithm::Rsa(_)) => vec!["spec.privateKey.size"],
            _ => vec!["spec.privateKey.algorithm"],
        }
    }

    /// When a certificate valid from `not_before` to `not_after` is renewed, as cert-manager
    /// computes it: `renewBefore` (or `renewBeforePercentage`) before the end when shorter than
    /// the lifetime, else two thirds through it; truncated to the second. `None` with
    /// `renewal.policy: Disabled`.
    pub fn renewal_time(&self, not_before: Timestamp, not_after: Timestamp) -> Option<Timestamp> {
        if self.renewal_disabled {
            return None;
        }
        let lifetime = not_after.duration_since(not_before);
        let before = match (self.renew_before, self.renew_before_percentage) {
            (Some(before), _)
                if !before.is_zero()
                    && SignedDuration::try_from(before).is_ok_and(|b| b < lifetime) =>
            {
                SignedDuration::try_from(before).unwrap_or_default()
            }
            (_, Some(percentage)) if (1..100).contains(&percentage) => {
                lifetime.mul_f64(f64::from(percentage) / 100.0)
            }
            _ => lifetime / 3,
        };
        let at = not_after.checked_sub(before).ok()?;
        Timestamp::from_second(at.as_second()).ok()
    }

    /// The certificate to sign, valid from `now` for `duration`.
    pub fn template(&self, now: Timestamp) -> Result<CertificateTemplate, String> {
        let not_before = Timestamp::from_second(now.as_second()).map_err(|e| e.to_string())?;
        let not_after = not_before
            .checked_add(SignedDuration::try_from(self.duration).map_err(|e| e.to_string())?)
            .map_err(|e| format!("spec.duration: {e}"))?;
        Ok(CertificateTemplate {
            subject: self.subject.clone(),
            dns_names: self.dns_names.clone(),
            ip_addresses: self.ip_addresses.clone(),
            uris: self.uris.clone(),
            email_addresses: self.email_addresses.clone(),
            is_ca: self.is_ca,
            key_usage: self.key_usage,
            extended_key_usages: self.extended_key_usages.clone(),
            not_before,
            not_after,
            crl_distribution_points: Vec::new(),
            ocsp_servers: Vec::new(),
            issuing_certificate_urls: Vec::new(),
        })
    }

    /// Refuses a `signatureAlgorithm` the signer's key does not sign with.
    pub fn check_signature_algorithm(&self, signer: KeyAlgorithm) -> Result<(), String> {
        let Some(wanted) = &self.signature_algorithm else {
            return Ok(());
        };
        let used = match signer {
            KeyAlgorithm::Ecdsa(384) => "ECDSAWithSHA384",
            KeyAlgorithm::Ecdsa(_) => "ECDSAWithSHA256",
            KeyAlgorithm::Ed25519 => "PureEd25519",
            KeyAlgorithm::Rsa(_) => "SHA256WithRSA",
        };
        if wanted == used {
            Ok(())
        } else {
            Err(format!(
                "spec.signatureAlgorithm {wanted} is not supported by kube-sandbox's cert-manager with a {signer} signing key (it signs with {used})"
            ))
        }
    }
}
