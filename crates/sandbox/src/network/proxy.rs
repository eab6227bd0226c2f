//! A userspace Service proxy, as kube-proxy's userspace mode was: one listener per Service
//! port on its ClusterIP inside the cluster network, forwarding each connection to the next
//! ready endpoint (round robin) and following endpoint changes as they are set.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::SocketFactory;

/// How long a connection attempt to one endpoint may take before the next one is tried.
const ENDPOINT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// The proxied Service ports of one cluster network.
pub struct ServiceProxy {
    sockets: SocketFactory,
    frontends: Mutex<HashMap<SocketAddrV4, Frontend>>,
}

struct Frontend {
    endpoints: Arc<Endpoints>,
    accept_loop: JoinHandle<()>,
}

/// Where a proxied connection goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Upstream {
    /// An address inside the cluster network (a Pod).
    Cluster(SocketAddr),
    /// An address of the machine's own network, such as the API server on 127.0.0.1.
    Machine(SocketAddr),
}

struct Endpoints {
    addresses: RwLock<Vec<Upstream>>,
    next: AtomicUsize,
}

impl Endpoints {
    /// The endpoints in the order this connection should try them: round robin start.
    fn rotation(&self) -> Vec<Upstream> {
        let addresses = self.addresses.read().expect("endpoints lock").clone();
        if addresses.is_empty() {
            return addresses;
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed) % addresses.len();
        addresses[start..]
            .iter()
            .chain(&addresses[..start])
            .copied()
            .collect()
    }
}

impl ServiceProxy {
    pub(crate) fn new(sockets: SocketFactory) -> Self {
        Self {
            sockets,
            frontends: Mutex::new(HashMap::new()),
        }
    }

    /// Proxies `frontend` (a ClusterIP and Service port) to `endpoints` (ready Pod addresses
    /// and target ports). Called again with new endpoints, it follows them for new
    /// connections; with none, connections are closed at once, as a Service with no ready
    /// endpoints refuses them.
    pub async fn set_service(
        &self,
        frontend: SocketAddrV4,
        endpoints: Vec<SocketAddr>,
    ) -> io::Result<()> {
        self.set_upstreams(
            frontend,
            endpoints.into_iter().map(Upstream::Cluster).collect(),
        )
        .await
    }

    /// Proxies `frontend` to `target` in the machine's own network namespace: how Pods reach
    /// the API server listening on loopback outside (the `kubernetes` Service).
    pub async fn set_service_to_machine(
        &self,
        frontend: SocketAddrV4,
        target: SocketAddr,
    ) -> io::Result<()> {
        self.set_upstreams(frontend, vec![Upstream::Machine(target)])
            .await
    }

    async fn set_upstreams(
        &self,
        frontend: SocketAddrV4,
        endpoints: Vec<Upstream>,
    ) -> io::Result<()> {
        if let Some(existing) = self
            .frontends
            .lock()
            .expect("frontends lock")
            .get(&frontend)
        {
            *existing
                .endpoints
                .addresses
                .write()
                .expect("endpoints lock") = endpoints;
            return Ok(());
        }
        let listener = self.sockets.bind_tcp(SocketAddr::V4(frontend)).await?;
        let shared = Arc::new(Endpoints {
            addresses: RwLock::new(endpoints),
            next: AtomicUsize::new(0),
        });
        let accept_loop = tokio::spawn(accept_connections(
            listener,
            shared.clone(),
            self.sockets.clone(),
        ));
        let mut frontends = self.frontends.lock().expect("frontends lock");
        if let Some(raced) = frontends.insert(
            frontend,
            Frontend {
                endpoints: shared,
                accept_loop,
            },
        ) {
            raced.accept_loop.abort();
        }
        Ok(())
    }

    /// Stops proxying `frontend`; connections already forwarded run to their end.
    pub fn remove_service(&self, frontend: SocketAddrV4) {
        if let Some(removed) = self
            .frontends
            .lock()
            .expect("frontends lock")
            .remove(&frontend)
        {
            removed.accept_loop.abort();
        }
    }

    /// The frontends proxied now.
    pub fn frontends(&self) -> Vec<SocketAddrV4> {
        let mut all: Vec<_> = self
            .frontends
            .lock()
            .expect("frontends lock")
            .keys()
            .copied()
            .collect();
        all.sort();
        all
    }

    pub(crate) fn stop(&self) {
        for (_, frontend) in self.frontends.lock().expect("frontends lock").drain() {
            frontend.accept_loop.abort();
        }
    }
}

impl Drop for ServiceProxy {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn accept_connections(
    listener: TcpListener,
    endpoints: Arc<Endpoints>,
    sockets: SocketFactory,
) {
    loop {
        let (client, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "service proxy accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let candidates = endpoints.rotation();
        let sockets = sockets.clone();
        tokio::spawn(async move {
            if let Some(mut upstream) = connect_first(&sockets, &candidates).await {
                let mut client = client;
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            }
        });
    }
}

/// The first endpoint, in rotation order, that accepts a connection.
async fn connect_first(sockets: &SocketFactory, candidates: &[Upstream]) -> Option<TcpStream> {
    for &endpoint in candidates {
        // Sockets of the machine's network come from the runtime's threads, which live in
        // the namespace the process started in; cluster sockets from the network's worker.
        let attempt = async {
            match endpoint {
                Upstream::Cluster(address) => sockets.connect(address).await,
                Upstream::Machine(address) => TcpStream::connect(address).await,
            }
        };
        match tokio::time::timeout(ENDPOINT_CONNECT_TIMEOUT, attempt).await {
            Ok(Ok(stream)) => return Some(stream),
            Ok(Err(error)) => tracing::debug!(?endpoint, %error, "service endpoint refused"),
            Err(_) => tracing::debug!(?endpoint, "service endpoint timed out"),
        }
    }
    None
}
