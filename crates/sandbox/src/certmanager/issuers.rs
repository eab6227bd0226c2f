//! Issuers and ClusterIssuers: what cert-manager's `selfSigned` and `ca` issuers check before
//! they are Ready, and what they sign with.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;

use super::pki::{ParsedCertificate, PrivateKey};
use super::types::IssuerSpec;

/// The signing side of a Ready issuer.
#[derive(Debug)]
pub enum Signer {
    /// Each certificate signed by its own key.
    SelfSigned {
        crl_distribution_points: Vec<String>,
    },
    /// Certificates signed by the CA of a Secret: its chain (the signing certificate first) and
    /// key.
    Ca {
        chain: Vec<ParsedCertificate>,
        key: Box<PrivateKey>,
        crl_distribution_points: Vec<String>,
        ocsp_servers: Vec<String>,
        issuing_certificate_urls: Vec<String>,
    },
}

/// An issuer's Ready condition and, when Ready, how it signs.
#[derive(Clone, Debug)]
pub struct IssuerState {
    pub reason: &'static str,
    pub message: String,
    pub signer: Option<Arc<Signer>>,
}

impl IssuerState {
    pub fn ready(&self) -> bool {
        self.signer.is_some()
    }

    fn not_ready(reason: &'static str, message: String) -> Self {
        Self {
            reason,
            message,
            signer: None,
        }
    }
}

const GET_KEY_PAIR: &str = "ErrGetKeyPair";
const INVALID_KEY_PAIR: &str = "ErrInvalidKeyPair";
const KEY_PAIR_PREFIX: &str = "Error getting keypair for CA issuer: ";

/// The Secret a `ca` issuer reads, if it is one.
pub fn ca_secret_name(spec: &IssuerSpec) -> Option<&str> {
    if spec.acme.is_some() {
        return None;
    }
    spec.ca.as_ref().map(|ca| ca.secret_name.as_str())
}

/// The state of an issuer named `description` ("Issuer 'ns/name'") whose `ca` Secret, when it
/// has one, lives in `secret_namespace` and is `secret`.
pub fn evaluate(
    spec: &IssuerSpec,
    description: &str,
    secret_namespace: &str,
    secret: Option<&Secret>,
) -> IssuerState {
    let unsupported = |kind: &str| {
        IssuerState::not_ready(
            "ErrInitIssuer",
            format!(
                "Error initializing issuer: the {kind} issuer is not supported by kube-sandbox's cert-manager (it runs selfSigned and ca issuers)"
            ),
        )
    };
    // The first issuer type set wins, in cert-manager's order.
    if spec.acme.is_some() {
        return unsupported("acme");
    }
    if let Some(ca) = &spec.ca {
        return match ca_signer(&ca.secret_name, secret_namespace, secret) {
            Ok((chain, key)) => IssuerState {
                reason: "KeyPairVerified",
                message: "Signing CA verified".into(),
                signer: Some(Arc::new(Signer::Ca {
                    chain,
                    key: Box::new(key),
                    crl_distribution_points: ca.crl_distribution_points.clone(),
                    ocsp_servers: ca.ocsp_servers.clone(),
                    issuing_certificate_urls: ca.issuing_certificate_urls.clone(),
                })),
            },
            Err((reason, message)) => {
                IssuerState::not_ready(reason, format!("{KEY_PAIR_PREFIX}{message}"))
            }
        };
    }
    if spec.vault.is_some() {
        return unsupported("vault");
    }
    if let Some(self_signed) = &spec.self_signed {
        return IssuerState {
            reason: "IsReady",
            message: String::new(),
            signer: Some(Arc::new(Signer::SelfSigned {
                crl_distribution_points: self_signed.crl_distribution_points.clone(),
            })),
        };
    }
    if spec.venafi.is_some() {
        return unsupported("venafi");
    }
    IssuerState::not_ready(
        "ErrInitIssuer",
        format!("Error initializing issuer: no issuer specified for {description}"),
    )
}

fn ca_signer(
    name: &str,
    namespace: &str,
    secret: Option<&Secret>,
) -> Result<(Vec<ParsedCertificate>, PrivateKey), (&'static str, String)> {
    let secret = secret.ok_or_else(|| (GET_KEY_PAIR, format!("secrets \"{name}\" not found")))?;
    let data = secret.data.clone().unwrap_or_default();
    let field = |key: &str| {
        data.get(key)
            .map(|bytes| bytes.0.clone())
            .filter(|bytes| !bytes.is_empty())
            .ok_or_else(|| {
                (
                    GET_KEY_PAIR,
                    format!("no data for \"{key}\" in secret '{namespace}/{name}'"),
                )
            })
    };
    let chain = ParsedCertificate::chain_from_pem(&field("tls.crt")?)
        .map_err(|e| (GET_KEY_PAIR, format!("error decoding cert PEM block: {e}")))?;
    let key = PrivateKey::from_pem(&field("tls.key")?).map_err(|e| {
        (
            GET_KEY_PAIR,
            format!("error decoding private key PEM block: {e}"),
        )
    })?;
    let signing = &chain[0];
    if !signing.is_ca {
        return Err((INVALID_KEY_PAIR, "certificate is not a CA".into()));
    }
    if signing.public_key_raw != key.public_key_raw() {
        return Err((
            INVALID_KEY_PAIR,
            "the private key does not match the certificate".into(),
        ));
    }
    Ok((chain, key))
}
