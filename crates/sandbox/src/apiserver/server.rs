//! The API server's shared state, its start-up and its HTTPS listener (HTTP/2 and HTTP/1.1).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, RwLock};

use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::auth::ServiceAccountTokens;
use super::kinds::builtin_kinds;
use super::kinds::service_ips::ServiceIpAllocator;
use super::logs::PodLogs;
use super::registry::Registry;
use super::store::Store;
use super::tls::{ClusterCertificates, DEFAULT_SERVING_NAMES};

/// How to run an API server.
#[derive(Debug, Clone)]
pub struct ApiServerConfig {
    pub bind_address: IpAddr,
    /// 0 picks a free port.
    pub port: u16,
    /// Extra DNS names and IP addresses for the serving certificate (e.g. the Service IP the
    /// cluster network gives the API server), besides [`DEFAULT_SERVING_NAMES`].
    pub extra_serving_names: Vec<String>,
    /// The range ClusterIPs are allocated from; its first address goes to `kubernetes`.
    pub service_cidr: (Ipv4Addr, u8),
    /// How many changes watch can replay; older resourceVersions get 410 Gone.
    pub watch_history: usize,
}

impl Default for ApiServerConfig {
    fn default() -> Self {
        Self {
            bind_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            extra_serving_names: Vec::new(),
            service_cidr: (Ipv4Addr::new(10, 96, 0, 0), 16),
            watch_history: 100_000,
        }
    }
}

/// Everything a request handler or an internal controller of the server reaches.
pub struct ApiServer {
    pub store: Store,
    pub registry: Registry,
    pub(crate) service_ips: ServiceIpAllocator,
    pub(crate) tokens: ServiceAccountTokens,
    pub(crate) admin_token: String,
    /// The cluster CA, in PEM: what clients verify the server with.
    pub ca_pem: String,
    pod_logs: RwLock<Option<Arc<dyn PodLogs>>>,
    pod_streams: RwLock<Option<Arc<dyn super::streams::PodStreams>>>,
    pub(crate) openapi: super::http::OpenApiCache,
    pub(crate) shutdown: CancellationToken,
}

impl ApiServer {
    /// Attaches the source of container logs (the node agent) for `pods/log`.
    pub fn register_pod_logs(&self, logs: Arc<dyn PodLogs>) {
        *self.pod_logs.write().unwrap_or_else(|p| p.into_inner()) = Some(logs);
    }

    pub(crate) fn pod_logs(&self) -> Option<Arc<dyn PodLogs>> {
        self.pod_logs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Attaches the node agent's side of `pods/exec` and `pods/portforward`.
    pub fn register_pod_streams(&self, streams: Arc<dyn super::streams::PodStreams>) {
        *self.pod_streams.write().unwrap_or_else(|p| p.into_inner()) = Some(streams);
    }

    pub(crate) fn pod_streams(&self) -> Option<Arc<dyn super::streams::PodStreams>> {
        self.pod_streams
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// A service-account token, as TokenRequest issues it, for the node agent to mount into Pods.
    pub fn issue_service_account_token(&self, namespace: &str, name: &str) -> String {
        self.tokens.issue(namespace, name)
    }
}

/// A running API server: its address and credentials. Dropping it stops the server.
pub struct RunningApiServer {
    pub server: Arc<ApiServer>,
    pub address: SocketAddr,
    pub ca_pem: String,
    shutdown: CancellationToken,
}

impl RunningApiServer {
    /// Starts serving: generates the CA and serving certificate, binds, bootstraps the default
    /// namespaces and the `kubernetes` Service, and starts the server's own controllers.
    pub async fn start(config: ApiServerConfig) -> anyhow::Result<Self> {
        let listener = TcpListener::bind((config.bind_address, config.port)).await?;
        let address = listener.local_addr()?;
        let mut names: Vec<String> = DEFAULT_SERVING_NAMES
            .iter()
            .map(|s| s.to_string())
            .collect();
        names.push(config.bind_address.to_string());
        names.extend(config.extra_serving_names.iter().cloned());
        let service_ips = ServiceIpAllocator::new(config.service_cidr.0, config.service_cidr.1);
        names.push(service_ips.first_address().to_string());
        names.sort();
        names.dedup();
        let certificates = ClusterCertificates::generate(&names)?;
        let tls = tokio_rustls::TlsAcceptor::from(certificates.server_config()?);
        let shutdown = CancellationToken::new();
        let server = Arc::new(ApiServer {
            store: Store::new(config.watch_history),
            registry: Registry::new(builtin_kinds()),
            service_ips,
            tokens: ServiceAccountTokens::default(),
            admin_token: super::auth::random_token(),
            ca_pem: certificates.ca_pem.clone(),
            pod_logs: RwLock::new(None),
            pod_streams: RwLock::new(None),
            openapi: super::http::OpenApiCache::default(),
            shutdown: shutdown.clone(),
        });
        super::lifecycle::start_all(&server);
        super::bootstrap::create_initial_objects(&server, address)?;
        tokio::spawn(accept_connections(
            server.clone(),
            listener,
            tls,
            shutdown.clone(),
        ));
        Ok(Self {
            server,
            address,
            ca_pem: certificates.ca_pem,
            shutdown,
        })
    }

    /// `https://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        format!("https://{}", self.address)
    }

    /// The bearer token of the cluster administrator, who may do everything.
    pub fn admin_token(&self) -> &str {
        &self.server.admin_token
    }

    /// Stops accepting, closes every connection and stops the server's controllers.
    pub fn stop(&self) {
        self.shutdown.cancel();
    }
}

impl Drop for RunningApiServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn accept_connections(
    server: Arc<ApiServer>,
    listener: TcpListener,
    tls: tokio_rustls::TlsAcceptor,
    shutdown: CancellationToken,
) {
    loop {
        let (tcp, _) = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(%err, "accepting a connection failed");
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let (server, tls, shutdown) = (server.clone(), tls.clone(), shutdown.clone());
        tokio::spawn(async move {
            let Ok(stream) = tls.accept(tcp).await else {
                return;
            };
            let service = hyper::service::service_fn(move |request| {
                let server = server.clone();
                async move {
                    Ok::<_, std::convert::Infallible>(super::http::respond(server, request).await)
                }
            });
            let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            builder.http2().max_concurrent_streams(1000);
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                _ = shutdown.cancelled() => {}
            }
        });
    }
}
