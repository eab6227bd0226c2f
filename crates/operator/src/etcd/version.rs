//! etcd's cluster version, as etcd itself states it: the `etcdcluster` field of the `/version`
//! endpoint every member serves on its client URL (the gRPC API has no call for it). The
//! leader raises it to the lowest server version of all members once every member runs it, and
//! never lowers it; the upgrade path is checked against it.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};

use super::access::EtcdAccess;

/// `MAJOR.MINOR` of a `/version` answer's `etcdcluster` (`"3.5.0"`); `None` while etcd has
/// not decided it (`"not_decided"`, a cluster still forming) or for anything unreadable.
pub fn parse_cluster_version(body: &[u8]) -> Option<(u64, u64)> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let text = value.get("etcdcluster")?.as_str()?;
    let mut parts = text.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The HTTP client for `access`: the cluster's CA as the only root and the operator's client
/// certificate under mutual TLS, on the process's rustls provider (ring, the one the operator
/// installs; also when nothing was installed, as in tests). Plaintext clusters get the same
/// client, which then never uses its TLS configuration.
fn http_client(access: &EtcdAccess, timeout: Duration) -> Result<reqwest::Client, String> {
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
    let mut roots = rustls::RootCertStore::empty();
    if let Some(tls) = &access.tls {
        for ca in CertificateDer::pem_slice_iter(&tls.ca_pem) {
            roots
                .add(ca.map_err(|e| format!("the CA is not PEM: {e}"))?)
                .map_err(|e| format!("the CA cannot be trusted: {e}"))?;
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    let config = match access.tls.as_ref().and_then(|t| t.identity.as_ref()) {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("the client certificate is not PEM: {e}"))?;
            let key = PrivateKeyDer::from_pem_slice(key)
                .map_err(|e| format!("the client key is not PEM: {e}"))?;
            config
                .with_client_auth_cert(chain, key)
                .map_err(|e| format!("the client certificate cannot be used: {e}"))?
        }
        None => config.with_no_client_auth(),
    };
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .no_proxy()
        .tls_backend_preconfigured(config)
        .build()
        .map_err(|e| e.to_string())
}

/// Asks `endpoint` (a client URL) for etcd's cluster version. `Err` says why it could not be
/// read; the caller then falls back to the members' server versions.
pub async fn cluster_version(
    endpoint: &str,
    access: &EtcdAccess,
    timeout: Duration,
) -> Result<Option<(u64, u64)>, String> {
    let client = http_client(access, timeout)?;
    let url = format!("{}/version", endpoint.trim_end_matches('/'));
    let response = client
        .get(&url)
        .send()
        .await
        .map_err(|e| format!("GET {url}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("GET {url}: HTTP {}", response.status()));
    }
    let body = response
        .bytes()
        .await
        .map_err(|e| format!("GET {url}: {e}"))?;
    Ok(parse_cluster_version(&body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cluster_version_is_read_from_etcds_answer() {
        assert_eq!(
            parse_cluster_version(br#"{"etcdserver":"3.5.1","etcdcluster":"3.5.0"}"#),
            Some((3, 5))
        );
        assert_eq!(
            parse_cluster_version(br#"{"etcdserver":"3.5.1","etcdcluster":"3.4.0"}"#),
            Some((3, 4))
        );
        for undecided in [
            &br#"{"etcdserver":"3.4.23","etcdcluster":"not_decided"}"#[..],
            br#"{"etcdserver":"3.4.23"}"#,
            b"not json",
            br#"{"etcdcluster":3}"#,
        ] {
            assert_eq!(parse_cluster_version(undecided), None);
        }
    }
}
