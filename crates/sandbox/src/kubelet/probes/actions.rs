//! The network probe actions: a TCP connection, and an HTTP(S) GET whose status must be in
//! 200..400, with the kubelet's `kube-probe` user agent. HTTPS does not verify certificates,
//! as the kubelet does not.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::network::SocketFactory;

fn address(host: &str, port: u16) -> Result<SocketAddr, String> {
    let ip: IpAddr = host.parse().map_err(|_| {
        format!(
            "probe host {host:?} must be an IP address (kube-sandbox probes do not resolve names)"
        )
    })?;
    Ok(SocketAddr::new(ip, port))
}

async fn connect(
    sockets: &SocketFactory,
    host: &str,
    port: u16,
    timeout: Duration,
) -> Result<tokio::net::TcpStream, String> {
    let address = address(host, port)?;
    match tokio::time::timeout(timeout, sockets.connect(address)).await {
        Ok(Ok(stream)) => Ok(stream),
        Ok(Err(error)) => Err(format!("dial tcp {address}: connect: {error}")),
        Err(_) => Err(format!("dial tcp {address}: i/o timeout")),
    }
}

/// `tcpSocket`: passes when a connection opens within `timeout`.
pub async fn tcp_connect(
    sockets: &SocketFactory,
    host: &str,
    port: u16,
    timeout: Duration,
) -> Result<(), String> {
    connect(sockets, host, port, timeout).await.map(drop)
}

/// `httpGet`: passes on a status in 200..400 within `timeout`.
pub async fn http_get(
    sockets: &SocketFactory,
    host: &str,
    port: u16,
    path: &str,
    headers: &[(String, String)],
    https: bool,
    timeout: Duration,
) -> Result<(), String> {
    let scheme = if https { "https" } else { "http" };
    let url = format!("{scheme}://{host}:{port}{path}");
    let exchange = async {
        let stream = connect(sockets, host, port, timeout).await?;
        let request = request_text(host, port, path, headers);
        if https {
            let connector = tokio_rustls::TlsConnector::from(insecure_tls_config()?);
            let name = rustls::pki_types::ServerName::try_from(host.to_string())
                .map_err(|e| e.to_string())?;
            let tls = connector
                .connect(name, stream)
                .await
                .map_err(|e| format!("Get \"{url}\": {e}"))?;
            status_of(tls, &request).await
        } else {
            status_of(stream, &request).await
        }
    };
    let status = match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(status)) => status,
        Ok(Err(error)) => return Err(format!("Get \"{url}\": {error}")),
        Err(_) => {
            return Err(format!(
                "Get \"{url}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
            ));
        }
    };
    if (200..400).contains(&status) {
        Ok(())
    } else {
        Err(format!("HTTP probe failed with statuscode: {status}"))
    }
}

fn request_text(host: &str, port: u16, path: &str, headers: &[(String, String)]) -> String {
    let mut request = format!("GET {path} HTTP/1.1\r\n");
    let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    if !has("Host") {
        request.push_str(&format!("Host: {host}:{port}\r\n"));
    }
    if !has("User-Agent") {
        request.push_str("User-Agent: kube-probe/1.32\r\n");
    }
    if !has("Accept") {
        request.push_str("Accept: */*\r\n");
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("Connection: close\r\n\r\n");
    request
}

/// Sends the request and reads the status code of the answer's first line.
async fn status_of(
    mut stream: impl AsyncRead + AsyncWrite + Unpin,
    request: &str,
) -> Result<u16, String> {
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut head = Vec::new();
    let mut buffer = [0u8; 512];
    while !head.contains(&b'\n') && head.len() < 8192 {
        let read = stream.read(&mut buffer).await.map_err(|e| e.to_string())?;
        if read == 0 {
            break;
        }
        head.extend_from_slice(&buffer[..read]);
    }
    let line = String::from_utf8_lossy(&head);
    let line = line.lines().next().unwrap_or_default();
    line.split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .filter(|_| line.starts_with("HTTP/"))
        .ok_or_else(|| format!("malformed HTTP response {line:?}"))
}

fn insecure_tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The kubelet's probes skip certificate verification (`InsecureSkipVerify`); signatures are
/// still checked so the handshake is a real one.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_the_kubelet_headers_unless_overridden() {
        let request = request_text(
            "10.244.0.5",
            2379,
            "/health",
            &[("Host".into(), "etcd-0".into())],
        );
        assert!(request.starts_with("GET /health HTTP/1.1\r\n"));
        assert!(request.contains("User-Agent: kube-probe/1.32\r\n"));
        assert!(request.contains("Host: etcd-0\r\n"));
        assert!(!request.contains("Host: 10.244.0.5"));
        assert!(request.ends_with("Connection: close\r\n\r\n"));
    }

    #[tokio::test]
    async fn the_status_line_decides() {
        let (mut server, client) = tokio::io::duplex(1024);
        tokio::spawn(async move {
            let mut request = [0u8; 256];
            let _ = server.read(&mut request).await;
            server
                .write_all(b"HTTP/1.1 503 Service Unavailable\r\n\r\n")
                .await
                .unwrap();
        });
        assert_eq!(status_of(client, "GET / HTTP/1.1\r\n\r\n").await, Ok(503));
        let (mut server, client) = tokio::io::duplex(1024);
        tokio::spawn(async move {
            server.write_all(b"garbage\r\n").await.unwrap();
        });
        assert!(status_of(client, "GET / HTTP/1.1\r\n\r\n").await.is_err());
        assert!(address("etcd-0", 1).is_err());
    }
}
