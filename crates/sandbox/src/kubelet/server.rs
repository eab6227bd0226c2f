//! A node's kubelet endpoint, as a real control plane calls it: HTTPS on the node's address,
//! port 10250 (`status.daemonEndpoints.kubeletEndpoint`), with a serving certificate for that
//! address signed by the cluster CA, and only clients with a certificate of that CA (the API
//! server's `--kubelet-client-certificate`). What kube-apiserver proxies there:
//!
//! - `/exec/{namespace}/{pod}[/{uid}]/{container}?command=...&input=1&output=1&error=1&tty=1`
//!   (the `pods/exec` options in the kubelet's parameter names), over WebSocket;
//! - `/portForward/{namespace}/{pod}[/{uid}]` with `port=P1,P2` for the WebSocket channel
//!   protocol, or SPDY tunnelled in a WebSocket or by plain upgrade;
//! - `/containerLogs/{namespace}/{pod}/{container}` with `pods/log`'s options;
//! - `/healthz`.
//!
//! The node declares the feature `ExtendWebSocketsToKubelet` (`status.declaredFeatures`), so
//! kube-apiserver hands WebSocket requests over as they came instead of translating them to
//! SPDY. The endpoint lives as long as its node agent: a node that crashed or shut down answers
//! nothing, as a dead kubelet.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_util::sync::CancellationToken;

use super::NodeStreams;
use super::context::KubeletContext;
use super::logs::NodeLogs;
use crate::apiserver::error::{ApiError, ApiResult};
use crate::apiserver::logs::{LogError, LogRequest, PodLogs};
use crate::apiserver::request::parse_query;
use crate::apiserver::streams::{ExecRequest, PodStreams};
use crate::kubernetes::pki::{ClusterCa, Usage};
use crate::streaming::channels;

/// The kubelet's port (`--port`).
pub const KUBELET_PORT: u16 = 10250;

/// The feature a node declares so the API server proxies WebSocket streams to it unchanged.
pub const WEBSOCKETS_FEATURE: &str = "ExtendWebSocketsToKubelet";

/// What one node's endpoint answers with.
struct Endpoint {
    node: String,
    context: Arc<KubeletContext>,
    logs: Arc<dyn PodLogs>,
    streams: Arc<dyn PodStreams>,
}

/// Serves `node`'s kubelet endpoint at `ip`:10250 in the cluster network until `token` is
/// cancelled.
pub(crate) async fn serve(
    context: Arc<KubeletContext>,
    node: String,
    ip: Ipv4Addr,
    ca: &ClusterCa,
    token: CancellationToken,
) -> anyhow::Result<()> {
    crate::apiserver::tls::install_crypto_provider();
    let leaf = ca.leaf(
        &format!("system:node:{node}"),
        &["system:nodes"],
        &[ip.to_string(), node.clone()],
        Usage::Server,
    )?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca.ca_pem.as_bytes()) {
        roots.add(cert?)?;
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots)).build()?;
    let certs =
        CertificateDer::pem_slice_iter(leaf.cert_pem.as_bytes()).collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes())?;
    let mut config = rustls::ServerConfig::builder()
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = context
        .network
        .sockets()
        .bind_tcp(SocketAddr::from((ip, KUBELET_PORT)))
        .await?;
    let endpoint = Arc::new(Endpoint {
        node,
        logs: Arc::new(NodeLogs {
            context: context.clone(),
        }),
        streams: Arc::new(NodeStreams {
            context: context.clone(),
        }),
        context,
    });
    tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                () = token.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let Ok((tcp, _)) = accepted else {
                continue;
            };
            let acceptor = acceptor.clone();
            let endpoint = endpoint.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = hyper::service::service_fn(move |request| {
                    let endpoint = endpoint.clone();
                    async move { Ok::<_, std::convert::Infallible>(endpoint.respond(request).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .with_upgrades()
                    .await;
            });
        }
    });
    Ok(())
}

impl Endpoint {
    async fn respond(&self, mut request: Request<Incoming>) -> Response<Body> {
        let upgrade = request
            .headers()
            .contains_key(http::header::UPGRADE)
            .then(|| hyper::upgrade::on(&mut request));
        let (parts, body) = request.into_parts();
        // Nothing here reads a body; drain it so the connection stays usable.
        let _ = body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_else(|_| Bytes::new());
        let raw_query = parts.uri.query().unwrap_or("").to_string();
        let query = parse_query(parts.uri.query());
        let segments: Vec<&str> = parts
            .uri
            .path()
            .trim_start_matches('/')
            .split('/')
            .collect();
        let outcome = match (&parts.method, segments.as_slice()) {
            (&Method::GET, ["healthz"]) => Ok(text(StatusCode::OK, "ok")),
            (_, ["exec", namespace, pod, rest @ ..]) if matches!(rest.len(), 1 | 2) => {
                let container = rest[rest.len() - 1];
                let uid = (rest.len() == 2).then(|| rest[0]);
                self.exec(
                    &parts.headers,
                    &raw_query,
                    &query,
                    namespace,
                    pod,
                    uid,
                    container,
                    upgrade,
                )
            }
            (_, ["portForward", namespace, pod, rest @ ..]) if rest.len() <= 1 => self
                .port_forward(
                    &parts.headers,
                    &raw_query,
                    namespace,
                    pod,
                    rest.first().copied(),
                    upgrade,
                ),
            (&Method::GET, ["containerLogs", namespace, pod, container]) => {
                self.logs(&query, namespace, pod, container).await
            }
            _ => Err(not_found(parts.uri.path())),
        };
        outcome.unwrap_or_else(|err| {
            text(
                StatusCode::from_u16(err.code).unwrap_or(StatusCode::BAD_REQUEST),
                &err.message,
            )
        })
    }

    /// The Pod on this node, checked against the UID in the path when there is one.
    fn pod(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> ApiResult<Arc<super::context::PodEntry>> {
        let entry = self
            .context
            .pod_entry(namespace, name)
            .ok()
            .filter(|entry| entry.node == self.node)
            .ok_or_else(|| not_found("pod does not exist"))?;
        if uid.is_some_and(|uid| uid != entry.uid) {
            return Err(not_found("pod not found"));
        }
        Ok(entry)
    }

    #[allow(clippy::too_many_arguments)]
    fn exec(
        &self,
        headers: &http::HeaderMap,
        raw_query: &str,
        query: &HashMap<String, String>,
        namespace: &str,
        pod: &str,
        uid: Option<&str>,
        container: &str,
        upgrade: Option<hyper::upgrade::OnUpgrade>,
    ) -> ApiResult<Response<Body>> {
        let entry = self.pod(namespace, pod, uid)?;
        let flag = |name: &str| matches!(query.get(name).map(String::as_str), Some("1" | "true"));
        let command = channels::query_values(raw_query, "command");
        if command.is_empty() {
            return Err(ApiError::bad_request("you must specify at least 1 command"));
        }
        let request = ExecRequest {
            namespace: entry.namespace.clone(),
            pod: entry.name.clone(),
            container: container.to_string(),
            command,
            stdin: flag("input"),
            stdout: flag("output"),
            stderr: flag("error"),
            tty: flag("tty"),
        };
        channels::exec(headers, request, self.streams.clone(), || {
            upgrade
                .ok_or_else(|| ApiError::bad_request("the request asks for no connection upgrade"))
        })
    }

    fn port_forward(
        &self,
        headers: &http::HeaderMap,
        raw_query: &str,
        namespace: &str,
        pod: &str,
        uid: Option<&str>,
        upgrade: Option<hyper::upgrade::OnUpgrade>,
    ) -> ApiResult<Response<Body>> {
        let entry = self.pod(namespace, pod, uid)?;
        let ip = entry
            .network()
            .map(|network| IpAddr::V4(network.ip()))
            .ok_or_else(|| ApiError::bad_request(format!("pod {pod} has no IP address yet")))?;
        // The kubelet's name for the ports parameter is `port`; the API server's is `ports`.
        let query = raw_query
            .split('&')
            .map(|pair| match pair.strip_prefix("port=") {
                Some(ports) => format!("ports={ports}"),
                None => pair.to_string(),
            })
            .collect::<Vec<_>>()
            .join("&");
        channels::portforward(
            headers,
            &query,
            ip,
            format!("pod {pod}, uid {}", entry.uid),
            self.streams.clone(),
            || {
                upgrade.ok_or_else(|| {
                    ApiError::bad_request("the request asks for no connection upgrade")
                })
            },
        )
    }

    async fn logs(
        &self,
        query: &HashMap<String, String>,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> ApiResult<Response<Body>> {
        let entry = self.pod(namespace, pod, None)?;
        let yes = |name: &str| query.get(name).map(String::as_str) == Some("true");
        let request = LogRequest {
            namespace: entry.namespace.clone(),
            pod: entry.name.clone(),
            container: container.to_string(),
            previous: yes("previous"),
            tail_lines: query.get("tailLines").and_then(|t| t.parse().ok()),
            since_seconds: query.get("sinceSeconds").and_then(|t| t.parse().ok()),
            timestamps: yes("timestamps"),
        };
        let refused = |err: LogError| ApiError::bad_request(err.to_string());
        let plain = |body: Body| {
            Response::builder()
                .status(StatusCode::OK)
                .header(http::header::CONTENT_TYPE, "text/plain")
                .body(body)
                .unwrap_or_default()
        };
        if yes("follow") {
            let stream = self.logs.follow(&request).await.map_err(refused)?;
            return Ok(plain(Body::from_stream(stream)));
        }
        let bytes = self.logs.read(&request).await.map_err(refused)?;
        Ok(plain(Body::from(bytes)))
    }
}

fn not_found(what: &str) -> ApiError {
    let mut err = ApiError::bad_request(what.to_string());
    err.code = 404;
    err
}

fn text(status: StatusCode, message: &str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Body::from(message.to_string()))
        .unwrap_or_default()
}
