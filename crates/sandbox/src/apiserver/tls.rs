//! The sandbox's own certificate authority and the serving certificate signed by it, as a real
//! cluster has: clients trust the CA written into the kubeconfig, never "insecure-skip-verify".

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// The names every sandbox serving certificate carries, as kube-apiserver's do.
pub const DEFAULT_SERVING_NAMES: &[&str] = &[
    "127.0.0.1",
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// A CA and a serving certificate for the API server.
pub struct ClusterCertificates {
    pub ca_pem: String,
    pub serving_cert_pem: String,
    pub serving_key_pem: String,
    serving_cert_der: CertificateDer<'static>,
    serving_key_der: Vec<u8>,
}

impl ClusterCertificates {
    /// Generates a fresh CA and a serving certificate for `names` (DNS names or IP addresses).
    pub fn generate(names: &[String]) -> Result<Self, rcgen::Error> {
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        let mut ca_name = DistinguishedName::new();
        ca_name.push(DnType::CommonName, "kube-sandbox-ca");
        ca_params.distinguished_name = ca_name;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

        let mut serving_params = CertificateParams::new(names.to_vec())?;
        let mut serving_name = DistinguishedName::new();
        serving_name.push(DnType::CommonName, "kube-apiserver");
        serving_params.distinguished_name = serving_name;
        serving_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        serving_params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        let serving_key = KeyPair::generate()?;
        let serving_cert = serving_params.signed_by(&serving_key, &ca)?;

        Ok(Self {
            ca_pem: ca.pem(),
            serving_cert_pem: serving_cert.pem(),
            serving_key_pem: serving_key.serialize_pem(),
            serving_cert_der: serving_cert.der().clone(),
            serving_key_der: serving_key.serialize_der(),
        })
    }

    /// A rustls server configuration offering HTTP/2 and HTTP/1.1, as kube-apiserver does.
    pub fn server_config(&self) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
        install_crypto_provider();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.serving_key_der.clone()));
        let mut config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![self.serving_cert_der.clone()], key)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// Installs the process-wide `ring` provider; a second install (another sandbox, or the
/// binary's `main`) is expected and harmless.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serving_certificate_is_signed_for_the_requested_names() {
        let names = vec!["127.0.0.1".to_string(), "kubernetes".to_string()];
        let certs = ClusterCertificates::generate(&names).unwrap();
        assert!(certs.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(certs.serving_key_pem.contains("PRIVATE KEY"));
        assert!(certs.server_config().is_ok());
    }
}
