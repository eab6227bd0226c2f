//! Health checks of the control plane's processes, asked inside the cluster network where they
//! listen: one HTTP/1.1 GET, over TLS verified against the cluster CA (with a client
//! certificate where the endpoint wants one) or plain for etcd's metrics-less `/health`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::pki::Leaf;
use crate::network::ClusterNetwork;

/// How to reach an endpoint.
pub enum Scheme {
    Http,
    /// HTTPS for `server_name`, trusting the CA, with an optional client certificate.
    Https {
        server_name: String,
        ca_pem: String,
        client: Option<Leaf>,
    },
}

fn pem_certificates(pem: &str) -> Vec<CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .filter_map(Result::ok)
        .collect()
}

fn tls_config(ca_pem: &str, client: Option<&Leaf>) -> Result<rustls::ClientConfig, String> {
    use rustls::pki_types::pem::PemObject;
    crate::apiserver::tls::install_crypto_provider();
    let mut roots = rustls::RootCertStore::empty();
    for cert in pem_certificates(ca_pem) {
        roots.add(cert).map_err(|e| e.to_string())?;
    }
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
    match client {
        Some(leaf) => {
            let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes())
                .map_err(|e| e.to_string())?;
            builder
                .with_client_auth_cert(pem_certificates(&leaf.cert_pem), key)
                .map_err(|e| e.to_string())
        }
        None => Ok(builder.with_no_client_auth()),
    }
}

/// `GET path` at `address`: the status code and body, or why it could not be asked.
pub async fn get(
    network: &ClusterNetwork,
    address: SocketAddr,
    path: &str,
    scheme: &Scheme,
) -> Result<(u16, String), String> {
    let exchange = async {
        let tcp = network
            .connect(address)
            .await
            .map_err(|e| format!("connecting to {address}: {e}"))?;
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
        let mut response = Vec::new();
        match scheme {
            Scheme::Http => {
                let mut tcp = tcp;
                tcp.write_all(request.as_bytes())
                    .await
                    .map_err(|e| e.to_string())?;
                tcp.read_to_end(&mut response)
                    .await
                    .map_err(|e| e.to_string())?;
            }
            Scheme::Https {
                server_name,
                ca_pem,
                client,
            } => {
                let config = tls_config(ca_pem, client.as_ref())?;
                let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
                let name = ServerName::try_from(server_name.clone()).map_err(|e| e.to_string())?;
                let mut tls = connector
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("TLS with {address}: {e}"))?;
                tls.write_all(request.as_bytes())
                    .await
                    .map_err(|e| e.to_string())?;
                // A server may close without close_notify: what was read counts.
                let _ = tls.read_to_end(&mut response).await;
            }
        }
        parse(&response)
    };
    tokio::time::timeout(Duration::from_secs(5), exchange)
        .await
        .map_err(|_| format!("no answer from {address}{path} within 5 s"))?
}

fn parse(response: &[u8]) -> Result<(u16, String), String> {
    let text = String::from_utf8_lossy(response);
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("not an HTTP response: {text:.200}"))?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default();
    Ok((code, body))
}

#[cfg(test)]
mod tests {
    #[test]
    fn status_and_body_are_read() {
        assert_eq!(
            super::parse(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").unwrap(),
            (200, "ok".to_string())
        );
        assert!(super::parse(b"garbage").is_err());
    }
}
