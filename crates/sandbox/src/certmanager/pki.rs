//! Keys and X.509 certificates: generating private keys (ECDSA P-256 and P-384, Ed25519 with
//! ring; RSA keys with `openssl genpkey`, as ring cannot make them, though it signs with them),
//! reading and writing them in PKCS#1/SEC 1 or PKCS#8 PEM, signing certificates with rcgen, and
//! reading certificates back (x509-parser) to compare them with what a Certificate asks for.

use std::collections::BTreeSet;
use std::net::IpAddr;

use base64::Engine;
use jiff::Timestamp;
use rcgen::{
    BasicConstraints, CertificateParams, CrlDistributionPoint, CustomExtension, DistinguishedName,
    DnType, DnValue, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
    SerialNumber,
};
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

use super::der;

/// A private key's algorithm and size, as `spec.privateKey` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyAlgorithm {
    /// ECDSA on P-256, P-384 or P-521 (bits).
    Ecdsa(u16),
    Ed25519,
    /// RSA with a modulus of this many bits.
    Rsa(u32),
}

impl std::fmt::Display for KeyAlgorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Ecdsa(bits) => write!(f, "ECDSA {bits}"),
            Self::Ed25519 => write!(f, "Ed25519"),
            Self::Rsa(bits) => write!(f, "RSA {bits}"),
        }
    }
}

/// `spec.privateKey.encoding`: PKCS1 (cert-manager's default: `RSA PRIVATE KEY`,
/// `EC PRIVATE KEY`; Ed25519 keys are always PKCS#8) or PKCS8 (`PRIVATE KEY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyEncoding {
    Pkcs1,
    Pkcs8,
}

/// A private key that can sign.
pub struct PrivateKey {
    pub pair: KeyPair,
    pub algorithm: KeyAlgorithm,
}

impl std::fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrivateKey")
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

impl PrivateKey {
    /// A new key. RSA keys come from the `openssl` command: ring, the one crypto provider of the
    /// sandbox, has no RSA key generation.
    pub fn generate(algorithm: KeyAlgorithm) -> Result<Self, String> {
        let signature = match algorithm {
            KeyAlgorithm::Ecdsa(256) => &rcgen::PKCS_ECDSA_P256_SHA256,
            KeyAlgorithm::Ecdsa(384) => &rcgen::PKCS_ECDSA_P384_SHA384,
            KeyAlgorithm::Ed25519 => &rcgen::PKCS_ED25519,
            KeyAlgorithm::Ecdsa(bits) => {
                return Err(format!(
                    "ECDSA keys of size {bits} are not supported by kube-sandbox's cert-manager (ring signs with P-256 and P-384 only)"
                ));
            }
            KeyAlgorithm::Rsa(bits) => return Self::generate_rsa(bits),
        };
        let pair =
            KeyPair::generate_for(signature).map_err(|e| format!("generating a key: {e}"))?;
        Ok(Self { pair, algorithm })
    }

    /// ring cannot make RSA keys: `openssl genpkey` makes them (ring then reads and signs with
    /// them), when the machine has openssl.
    fn generate_rsa(bits: u32) -> Result<Self, String> {
        let output = std::process::Command::new("openssl")
            .args(["genpkey", "-algorithm", "RSA", "-pkeyopt"])
            .arg(format!("rsa_keygen_bits:{bits}"))
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|error| {
                format!(
                    "RSA private keys are generated with the openssl command, which could not run ({error}): install openssl or use privateKey.algorithm ECDSA or Ed25519"
                )
            })?;
        if !output.status.success() {
            return Err(format!(
                "openssl genpkey failed to make an RSA key: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        // PEM: `PRIVATE KEY`, where DER output is PKCS#1 in OpenSSL 3.
        Self::from_pem(&output.stdout)
    }

    /// A key from PEM: PKCS#8 (`PRIVATE KEY`), PKCS#1 (`RSA PRIVATE KEY`) or SEC 1
    /// (`EC PRIVATE KEY`).
    pub fn from_pem(pem: &[u8]) -> Result<Self, String> {
        let blocks = pem_blocks(pem)?;
        let (label, der) = blocks
            .into_iter()
            .find(|(label, _)| label.ends_with("PRIVATE KEY"))
            .ok_or("no PEM private key found")?;
        let pkcs8 = match label.as_str() {
            "PRIVATE KEY" => der,
            "RSA PRIVATE KEY" => der::pkcs1_to_pkcs8(&der),
            "EC PRIVATE KEY" => der::sec1_to_pkcs8(&der)?,
            other => return Err(format!("unsupported private key type {other:?}")),
        };
        Self::from_pkcs8(&pkcs8)
    }

    fn from_pkcs8(pkcs8: &[u8]) -> Result<Self, String> {
        let (oid, curve) = der::pkcs8_algorithm(pkcs8)?;
        let (algorithm, signature) = if oid == der::oid::ED25519 {
            (KeyAlgorithm::Ed25519, &rcgen::PKCS_ED25519)
        } else if oid == der::oid::RSA_ENCRYPTION {
            let bits = der::rsa_modulus_bits(pkcs8)?;
            (
                KeyAlgorithm::Rsa(u32::try_from(bits).unwrap_or(0)),
                &rcgen::PKCS_RSA_SHA256,
            )
        } else if oid == der::oid::EC_PUBLIC_KEY {
            match curve.as_deref() {
                Some(der::oid::P256) => (KeyAlgorithm::Ecdsa(256), &rcgen::PKCS_ECDSA_P256_SHA256),
                Some(der::oid::P384) => (KeyAlgorithm::Ecdsa(384), &rcgen::PKCS_ECDSA_P384_SHA384),
                Some(der::oid::P521) => {
                    return Err(
                        "ECDSA P-521 keys are not supported by kube-sandbox's cert-manager".into(),
                    );
                }
                _ => return Err("an EC key on an unknown curve".into()),
            }
        } else {
            return Err("a private key of an unsupported algorithm".into());
        };
        let pair = KeyPair::from_pkcs8_der_and_sign_algo(&pkcs8.to_vec().into(), signature)
            .map_err(|e| format!("reading the private key: {e}"))?;
        Ok(Self { pair, algorithm })
    }

    /// The key in DER, in `encoding` (Ed25519 keys are always PKCS#8).
    pub fn der(&self, encoding: KeyEncoding) -> Result<(&'static str, Vec<u8>), String> {
        let pkcs8 = self.pair.serialize_der();
        Ok(match (encoding, self.algorithm) {
            (KeyEncoding::Pkcs1, KeyAlgorithm::Rsa(_)) => {
                ("RSA PRIVATE KEY", der::pkcs8_to_pkcs1(&pkcs8)?)
            }
            (KeyEncoding::Pkcs1, KeyAlgorithm::Ecdsa(_)) => {
                ("EC PRIVATE KEY", der::pkcs8_to_sec1(&pkcs8)?)
            }
            _ => ("PRIVATE KEY", pkcs8),
        })
    }

    /// The key in PEM, in `encoding`.
    pub fn pem(&self, encoding: KeyEncoding) -> Result<String, String> {
        let (label, der) = self.der(encoding)?;
        Ok(pem_encode(label, &der))
    }

    /// The raw public key, as a certificate's subjectPublicKey holds it.
    pub fn public_key_raw(&self) -> &[u8] {
        self.pair.public_key_raw()
    }
}

/// PEM encoding of one block, 64 characters a line.
pub fn pem_encode(label: &str, der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// Every PEM block of `input`: (label, DER).
pub fn pem_blocks(input: &[u8]) -> Result<Vec<(String, Vec<u8>)>, String> {
    let text = std::str::from_utf8(input).map_err(|_| "PEM data is not text".to_string())?;
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(label) = line
            .trim()
            .strip_prefix("-----BEGIN ")
            .and_then(|rest| rest.strip_suffix("-----"))
        else {
            continue;
        };
        let end = format!("-----END {label}-----");
        let mut body = String::new();
        let mut closed = false;
        for line in lines.by_ref() {
            if line.trim() == end {
                closed = true;
                break;
            }
            body.push_str(line.trim());
        }
        if !closed {
            return Err(format!("PEM block {label:?} is not terminated"));
        }
        let der = base64::engine::general_purpose::STANDARD
            .decode(body)
            .map_err(|e| format!("PEM block {label:?} is not valid base64: {e}"))?;
        blocks.push((label.to_string(), der));
    }
    Ok(blocks)
}

/// The subject attributes cert-manager sets from `spec.subject`, each with its values.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subject {
    pub common_name: String,
    pub organizations: Vec<String>,
    pub countries: Vec<String>,
    pub organizational_units: Vec<String>,
    pub localities: Vec<String>,
    pub provinces: Vec<String>,
    pub street_addresses: Vec<String>,
    pub postal_codes: Vec<String>,
    pub serial_number: String,
}

const STREET_ADDRESS: &[u64] = &[2, 5, 4, 9];
const POSTAL_CODE: &[u64] = &[2, 5, 4, 17];
const SERIAL_NUMBER: &[u64] = &[2, 5, 4, 5];

impl Subject {
    /// (attribute, values) pairs, in the order Go's pkix.Name writes them.
    fn attributes(&self) -> Vec<(DnType, Vec<String>)> {
        let one = |value: &str| {
            if value.is_empty() {
                Vec::new()
            } else {
                vec![value.to_string()]
            }
        };
        vec![
            (DnType::CountryName, self.countries.clone()),
            (DnType::StateOrProvinceName, self.provinces.clone()),
            (DnType::LocalityName, self.localities.clone()),
            (
                DnType::CustomDnType(STREET_ADDRESS.to_vec()),
                self.street_addresses.clone(),
            ),
            (
                DnType::CustomDnType(POSTAL_CODE.to_vec()),
                self.postal_codes.clone(),
            ),
            (DnType::OrganizationName, self.organizations.clone()),
            (
                DnType::OrganizationalUnitName,
                self.organizational_units.clone(),
            ),
            (DnType::CommonName, one(&self.common_name)),
            (
                DnType::CustomDnType(SERIAL_NUMBER.to_vec()),
                one(&self.serial_number),
            ),
        ]
    }

    fn distinguished_name(&self) -> Result<DistinguishedName, String> {
        let mut name = DistinguishedName::new();
        for (attribute, values) in self.attributes() {
            match values.as_slice() {
                [] => {}
                [value] => {
                    let printable = matches!(attribute, DnType::CountryName)
                        || attribute == DnType::CustomDnType(SERIAL_NUMBER.to_vec());
                    let value = match rcgen::string::PrintableString::try_from(value.as_str()) {
                        Ok(printable_value) if printable => {
                            DnValue::PrintableString(printable_value)
                        }
                        _ => DnValue::Utf8String(value.clone()),
                    };
                    name.push(attribute, value);
                }
                _ => {
                    return Err(format!(
                        "kube-sandbox's cert-manager writes at most one value per subject attribute, got {values:?}"
                    ));
                }
            }
        }
        Ok(name)
    }
}

/// Key usage bits as X.509 numbers them (digitalSignature is bit 0... decipherOnly bit 8).
pub mod usage {
    pub const DIGITAL_SIGNATURE: u16 = 1;
    pub const CONTENT_COMMITMENT: u16 = 1 << 1;
    pub const KEY_ENCIPHERMENT: u16 = 1 << 2;
    pub const DATA_ENCIPHERMENT: u16 = 1 << 3;
    pub const KEY_AGREEMENT: u16 = 1 << 4;
    pub const CERT_SIGN: u16 = 1 << 5;
    pub const CRL_SIGN: u16 = 1 << 6;
    pub const ENCIPHER_ONLY: u16 = 1 << 7;
    pub const DECIPHER_ONLY: u16 = 1 << 8;
}

/// Extended key usages as dotted OIDs.
pub mod eku {
    pub const ANY: &str = "2.5.29.37.0";
    pub const SERVER_AUTH: &str = "1.3.6.1.5.5.7.3.1";
    pub const CLIENT_AUTH: &str = "1.3.6.1.5.5.7.3.2";
    pub const CODE_SIGNING: &str = "1.3.6.1.5.5.7.3.3";
    pub const EMAIL_PROTECTION: &str = "1.3.6.1.5.5.7.3.4";
    pub const IPSEC_END_SYSTEM: &str = "1.3.6.1.5.5.7.3.5";
    pub const IPSEC_TUNNEL: &str = "1.3.6.1.5.5.7.3.6";
    pub const IPSEC_USER: &str = "1.3.6.1.5.5.7.3.7";
    pub const TIME_STAMPING: &str = "1.3.6.1.5.5.7.3.8";
    pub const OCSP_SIGNING: &str = "1.3.6.1.5.5.7.3.9";
    pub const MICROSOFT_SGC: &str = "1.3.6.1.4.1.311.10.3.3";
    pub const NETSCAPE_SGC: &str = "2.16.840.1.113730.4.1";
}

/// What goes into a certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateTemplate {
    pub subject: Subject,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<IpAddr>,
    pub uris: Vec<String>,
    pub email_addresses: Vec<String>,
    pub is_ca: bool,
    pub key_usage: u16,
    /// Dotted OIDs, in request order.
    pub extended_key_usages: Vec<String>,
    pub not_before: Timestamp,
    pub not_after: Timestamp,
    pub crl_distribution_points: Vec<String>,
    pub ocsp_servers: Vec<String>,
    pub issuing_certificate_urls: Vec<String>,
}

fn offset_date_time(at: Timestamp) -> Result<time::OffsetDateTime, String> {
    time::OffsetDateTime::from_unix_timestamp(at.as_second()).map_err(|e| e.to_string())
}

fn oid_arcs(dotted: &str) -> Vec<u64> {
    dotted
        .split('.')
        .filter_map(|arc| arc.parse().ok())
        .collect()
}

impl CertificateTemplate {
    fn params(&self) -> Result<CertificateParams, String> {
        let mut params = CertificateParams::default();
        params.distinguished_name = self.subject.distinguished_name()?;
        params.not_before = offset_date_time(self.not_before)?;
        params.not_after = offset_date_time(self.not_after)?;
        let mut serial: [u8; 16] = rand::random();
        serial[0] &= 0x7f;
        serial[0] |= 0x01;
        params.serial_number = Some(SerialNumber::from_slice(&serial));
        let ia5 = |value: &str| {
            rcgen::string::Ia5String::try_from(value)
                .map_err(|_| format!("{value:?} is not an ASCII name"))
        };
        for name in &self.dns_names {
            params.subject_alt_names.push(SanType::DnsName(ia5(name)?));
        }
        for address in &self.ip_addresses {
            params.subject_alt_names.push(SanType::IpAddress(*address));
        }
        for uri in &self.uris {
            params.subject_alt_names.push(SanType::URI(ia5(uri)?));
        }
        for email in &self.email_addresses {
            params
                .subject_alt_names
                .push(SanType::Rfc822Name(ia5(email)?));
        }
        params.is_ca = if self.is_ca {
            IsCa::Ca(BasicConstraints::Unconstrained)
        } else {
            IsCa::ExplicitNoCa
        };
        let purposes = [
            (usage::DIGITAL_SIGNATURE, KeyUsagePurpose::DigitalSignature),
            (
                usage::CONTENT_COMMITMENT,
                KeyUsagePurpose::ContentCommitment,
            ),
            (usage::KEY_ENCIPHERMENT, KeyUsagePurpose::KeyEncipherment),
            (usage::DATA_ENCIPHERMENT, KeyUsagePurpose::DataEncipherment),
            (usage::KEY_AGREEMENT, KeyUsagePurpose::KeyAgreement),
            (usage::CERT_SIGN, KeyUsagePurpose::KeyCertSign),
            (usage::CRL_SIGN, KeyUsagePurpose::CrlSign),
            (usage::ENCIPHER_ONLY, KeyUsagePurpose::EncipherOnly),
            (usage::DECIPHER_ONLY, KeyUsagePurpose::DecipherOnly),
        ];
        params.key_usages = purposes
            .into_iter()
            .filter(|(bit, _)| self.key_usage & bit != 0)
            .map(|(_, purpose)| purpose)
            .collect();
        params.extended_key_usages = self
            .extended_key_usages
            .iter()
            .map(|oid| match oid.as_str() {
                eku::ANY => ExtendedKeyUsagePurpose::Any,
                eku::SERVER_AUTH => ExtendedKeyUsagePurpose::ServerAuth,
                eku::CLIENT_AUTH => ExtendedKeyUsagePurpose::ClientAuth,
                eku::CODE_SIGNING => ExtendedKeyUsagePurpose::CodeSigning,
                eku::EMAIL_PROTECTION => ExtendedKeyUsagePurpose::EmailProtection,
                eku::TIME_STAMPING => ExtendedKeyUsagePurpose::TimeStamping,
                eku::OCSP_SIGNING => ExtendedKeyUsagePurpose::OcspSigning,
                other => ExtendedKeyUsagePurpose::Other(oid_arcs(other)),
            })
            .collect();
        if !self.crl_distribution_points.is_empty() {
            params.crl_distribution_points = vec![CrlDistributionPoint {
                uris: self.crl_distribution_points.clone(),
            }];
        }
        if !self.ocsp_servers.is_empty() || !self.issuing_certificate_urls.is_empty() {
            params
                .custom_extensions
                .push(CustomExtension::from_oid_content(
                    &[1, 3, 6, 1, 5, 5, 7, 1, 1],
                    der::authority_info_access(&self.ocsp_servers, &self.issuing_certificate_urls),
                ));
        }
        Ok(params)
    }

    /// A certificate signed by its own key, in PEM.
    pub fn self_signed(&self, key: &PrivateKey) -> Result<String, String> {
        let params = self.params()?;
        params
            .self_signed(&key.pair)
            .map(|cert| cert.pem())
            .map_err(|e| format!("signing the certificate: {e}"))
    }

    /// A certificate for `subject_key` signed by the CA certificate `ca_der` with `ca_key`, in
    /// PEM.
    pub fn signed_by(
        &self,
        subject_key: &PrivateKey,
        ca_der: &[u8],
        ca_key: &PrivateKey,
    ) -> Result<String, String> {
        let mut params = self.params()?;
        params.use_authority_key_identifier_extension = true;
        let issuer = rcgen::Issuer::from_ca_cert_der(&ca_der.to_vec().into(), &ca_key.pair)
            .map_err(|e| format!("reading the CA certificate: {e}"))?;
        params
            .signed_by(&subject_key.pair, &issuer)
            .map(|cert| cert.pem())
            .map_err(|e| format!("signing the certificate: {e}"))
    }
}

/// A certificate as read back: what the Certificate controller compares with the spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedCertificate {
    pub der: Vec<u8>,
    pub subject: Subject,
    pub dns_names: Vec<String>,
    pub ip_addresses: Vec<IpAddr>,
    pub uris: Vec<String>,
    pub email_addresses: Vec<String>,
    pub is_ca: bool,
    pub key_usage: u16,
    pub extended_key_usages: BTreeSet<String>,
    pub not_before: Timestamp,
    pub not_after: Timestamp,
    /// Hex, as openssl prints it.
    pub serial: String,
    pub public_key_raw: Vec<u8>,
    pub key_algorithm: Option<KeyAlgorithm>,
    /// Its issuer is its subject.
    pub self_issued: bool,
}

fn attribute_values(
    name: &x509_parser::x509::X509Name<'_>,
    oid: &x509_parser::der_parser::oid::Oid<'_>,
) -> Vec<String> {
    name.iter_by_oid(oid)
        .filter_map(|attribute| attribute.as_str().ok().map(str::to_string))
        .collect()
}

fn parse_oid(dotted: &str) -> x509_parser::der_parser::oid::Oid<'static> {
    let arcs = oid_arcs(dotted);
    x509_parser::der_parser::oid::Oid::from(&arcs)
        .unwrap_or_else(|_| x509_parser::der_parser::oid::Oid::from(&[2, 5]).expect("a valid OID"))
}

fn timestamp(time: x509_parser::time::ASN1Time) -> Timestamp {
    Timestamp::from_second(time.timestamp()).unwrap_or(Timestamp::UNIX_EPOCH)
}

impl ParsedCertificate {
    pub fn from_der(der: &[u8]) -> Result<Self, String> {
        let (_, cert) =
            X509Certificate::from_der(der).map_err(|e| format!("invalid certificate: {e}"))?;
        let name = cert.subject();
        let first = |values: Vec<String>| values.into_iter().next().unwrap_or_default();
        let subject = Subject {
            common_name: first(attribute_values(name, &parse_oid("2.5.4.3"))),
            organizations: attribute_values(name, &parse_oid("2.5.4.10")),
            countries: attribute_values(name, &parse_oid("2.5.4.6")),
            organizational_units: attribute_values(name, &parse_oid("2.5.4.11")),
            localities: attribute_values(name, &parse_oid("2.5.4.7")),
            provinces: attribute_values(name, &parse_oid("2.5.4.8")),
            street_addresses: attribute_values(name, &parse_oid("2.5.4.9")),
            postal_codes: attribute_values(name, &parse_oid("2.5.4.17")),
            serial_number: first(attribute_values(name, &parse_oid("2.5.4.5"))),
        };
        let mut parsed = Self {
            der: der.to_vec(),
            subject,
            dns_names: Vec::new(),
            ip_addresses: Vec::new(),
            uris: Vec::new(),
            email_addresses: Vec::new(),
            is_ca: false,
            key_usage: 0,
            extended_key_usages: BTreeSet::new(),
            not_before: timestamp(cert.validity().not_before),
            not_after: timestamp(cert.validity().not_after),
            serial: cert.raw_serial_as_string().replace(':', "").to_uppercase(),
            public_key_raw: cert.public_key().subject_public_key.data.to_vec(),
            key_algorithm: key_algorithm(&cert),
            self_issued: cert.subject().as_raw() == cert.issuer().as_raw(),
        };
        let invalid =
            |e: x509_parser::error::X509Error| format!("invalid certificate extension: {e}");
        if let Some(names) = cert.subject_alternative_name().map_err(invalid)? {
            for name in &names.value.general_names {
                match name {
                    GeneralName::DNSName(dns) => parsed.dns_names.push(dns.to_string()),
                    GeneralName::URI(uri) => parsed.uris.push(uri.to_string()),
                    GeneralName::RFC822Name(email) => {
                        parsed.email_addresses.push(email.to_string())
                    }
                    GeneralName::IPAddress(bytes) => {
                        if let Ok(octets) = <[u8; 4]>::try_from(*bytes) {
                            parsed.ip_addresses.push(IpAddr::from(octets));
                        } else if let Ok(octets) = <[u8; 16]>::try_from(*bytes) {
                            parsed.ip_addresses.push(IpAddr::from(octets));
                        }
                    }
                    _ => {}
                }
            }
        }
        if let Some(constraints) = cert.basic_constraints().map_err(invalid)? {
            parsed.is_ca = constraints.value.ca;
        }
        if let Some(usage) = cert.key_usage().map_err(invalid)? {
            parsed.key_usage = usage.value.flags;
        }
        if let Some(extended) = cert.extended_key_usage().map_err(invalid)? {
            let value = extended.value;
            let known = [
                (value.any, eku::ANY),
                (value.server_auth, eku::SERVER_AUTH),
                (value.client_auth, eku::CLIENT_AUTH),
                (value.code_signing, eku::CODE_SIGNING),
                (value.email_protection, eku::EMAIL_PROTECTION),
                (value.time_stamping, eku::TIME_STAMPING),
                (value.ocsp_signing, eku::OCSP_SIGNING),
            ];
            for (set, oid) in known {
                if set {
                    parsed.extended_key_usages.insert(oid.to_string());
                }
            }
            for other in &value.other {
                parsed.extended_key_usages.insert(other.to_id_string());
            }
        }
        Ok(parsed)
    }

    /// Every certificate of a PEM bundle, in order.
    pub fn chain_from_pem(pem: &[u8]) -> Result<Vec<Self>, String> {
        let chain: Vec<Self> = pem_blocks(pem)?
            .into_iter()
            .filter(|(label, _)| label == "CERTIFICATE")
            .map(|(_, der)| Self::from_der(&der))
            .collect::<Result<_, _>>()?;
        if chain.is_empty() {
            return Err("no PEM certificate found".into());
        }
        Ok(chain)
    }

    pub fn pem(&self) -> String {
        pem_encode("CERTIFICATE", &self.der)
    }
}

fn key_algorithm(cert: &X509Certificate<'_>) -> Option<KeyAlgorithm> {
    let info = cert.public_key();
    let oid = info.algorithm.algorithm.as_bytes();
    if oid == der::oid::ED25519 {
        return Some(KeyAlgorithm::Ed25519);
    }
    if oid == der::oid::RSA_ENCRYPTION {
        let bits = info.parsed().ok()?.key_size();
        return Some(KeyAlgorithm::Rsa(u32::try_from(bits).ok()?));
    }
    if oid == der::oid::EC_PUBLIC_KEY {
        let curve = info.algorithm.parameters.as_ref()?.as_oid().ok()?;
        return match curve.as_bytes() {
            der::oid::P256 => Some(KeyAlgorithm::Ecdsa(256)),
            der::oid::P384 => Some(KeyAlgorithm::Ecdsa(384)),
            der::oid::P521 => Some(KeyAlgorithm::Ecdsa(521)),
            _ => None,
        };
    }
    None
}
