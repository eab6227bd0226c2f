//! The certificates of a real control plane, as kubeadm lays them out: one cluster CA signs
//! kube-apiserver's serving certificate, the client certificates of the administrator, the
//! controller-manager, the scheduler and of kube-apiserver towards the kubelets, and every
//! node's kubelet serving certificate. The ServiceAccount tokens are signed by a key of their
//! own. ECDSA P-256 throughout (kube-apiserver takes ES256 for ServiceAccount tokens).

use std::net::IpAddr;

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, SanType,
};

/// A certificate and its key, in PEM.
#[derive(Clone)]
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
}

/// The cluster CA, able to sign more leaves (each node's kubelet serving certificate).
pub struct ClusterCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    pub ca_pem: String,
    pub key_pem: String,
}

/// What a leaf is for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    Server,
    Client,
}

impl ClusterCa {
    pub fn generate() -> Result<Self, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, "kubernetes");
        params.distinguished_name = name;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate()?;
        let key_pem = key.serialize_pem();
        let issuer = CertifiedIssuer::self_signed(params, key)?;
        Ok(Self {
            ca_pem: issuer.pem(),
            key_pem,
            issuer,
        })
    }

    /// A leaf for `common_name` in `organizations`, for `names` (DNS names or IP addresses).
    pub fn leaf(
        &self,
        common_name: &str,
        organizations: &[&str],
        names: &[String],
        usage: Usage,
    ) -> Result<Leaf, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.subject_alt_names = names
            .iter()
            .map(|name| match name.parse::<IpAddr>() {
                Ok(ip) => Ok(SanType::IpAddress(ip)),
                Err(_) => name.clone().try_into().map(SanType::DnsName),
            })
            .collect::<Result<_, _>>()?;
        let mut subject = DistinguishedName::new();
        for organization in organizations {
            subject.push(DnType::OrganizationName, *organization);
        }
        subject.push(DnType::CommonName, common_name);
        params.distinguished_name = subject;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![match usage {
            Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// The key that signs ServiceAccount tokens, and its public half for verifying them.
pub struct ServiceAccountKey {
    pub private_pem: String,
    pub public_pem: String,
}

impl ServiceAccountKey {
    pub fn generate() -> Result<Self, rcgen::Error> {
        let key = KeyPair::generate()?;
        Ok(Self {
            private_pem: key.serialize_pem(),
            public_pem: key.public_key_pem(),
        })
    }
}

/// A kubeconfig for `server` that trusts `ca_pem` and authenticates with the client
/// certificate `user`.
pub fn kubeconfig(server: &str, ca_pem: &str, user_name: &str, user: &Leaf) -> String {
    let encode = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: sandbox
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: {user_name}
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: sandbox
  context:
    cluster: sandbox
    user: {user_name}
    namespace: default
current-context: sandbox
preferences: {{}}
",
        ca = encode(ca_pem),
        cert = encode(&user.cert_pem),
        key = encode(&user.key_pem),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_chain_to_the_ca_with_their_names_and_groups() {
        let ca = ClusterCa::generate().unwrap();
        let leaf = ca
            .leaf(
                "admin",
                &["system:masters"],
                &["127.0.0.1".into(), "kubernetes.default.svc".into()],
                Usage::Client,
            )
            .unwrap();
        let der = rustls_pemfile_der(&leaf.cert_pem);
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap();
        let subject = cert.subject().to_string();
        assert!(subject.contains("O=system:masters"), "{subject}");
        assert!(subject.contains("CN=admin"), "{subject}");
        let issuer_der = rustls_pemfile_der(&ca.ca_pem);
        let (_, issuer) = x509_parser::parse_x509_certificate(&issuer_der).unwrap();
        assert_eq!(cert.issuer(), issuer.subject());
        let sans = cert.subject_alternative_name().unwrap().unwrap().value;
        assert_eq!(sans.general_names.len(), 2);
        let config = kubeconfig("https://127.0.0.1:6443", &ca.ca_pem, "admin", &leaf);
        let parsed: serde_yaml::Value = serde_yaml::from_str(&config).unwrap();
        assert_eq!(parsed["users"][0]["name"], "admin");
    }

    fn rustls_pemfile_der(pem: &str) -> Vec<u8> {
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap()
    }
}
