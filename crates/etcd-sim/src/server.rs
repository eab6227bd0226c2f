//! The process-wide simulator ([`Sim`]) and the listeners of its members: each member gets a
//! client listener (gRPC, [`crate::grpc`]) and a metrics listener (HTTP, [`crate::http`]),
//! all answering from the one shared [`World`].

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::grpc::MemberApi;
use crate::refusal::Refusal;
use crate::state::{BootstrapError, Cluster, ClusterKey, MemberId, World};

/// Milliseconds since the UNIX epoch: the simulator's clock (etcd derives IDs of added
/// members from the wall clock's second, so the simulator does too).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// How the simulator answers, beyond etcd's rules.
#[derive(Clone, Copy, Debug)]
pub struct SimConfig {
    /// How long a refusal that etcd gives only after its request timeout (a proposal without
    /// quorum, a leader transfer that does not happen) waits before it is sent. etcd waits
    /// about 7 s by default; clients usually give up first.
    pub slow_refusal_delay: Duration,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            slow_refusal_delay: Duration::from_secs(2),
        }
    }
}

/// Every simulated cluster of the process, behind one lock (each call holds it for
/// microseconds: the rules are plain in-memory checks).
#[derive(Debug)]
pub struct Sim {
    world: Mutex<World>,
    config: SimConfig,
}

impl Sim {
    /// A simulator of no cluster yet.
    pub fn new(config: SimConfig) -> Arc<Sim> {
        Arc::new(Sim {
            world: Mutex::new(World::new()),
            config,
        })
    }

    /// The answering rules beyond etcd's.
    pub fn config(&self) -> SimConfig {
        self.config
    }

    /// The world, locked (a panic while it was held does not poison it for the others: the
    /// state is changed only after every check passed).
    pub fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on cluster `key`.
    pub fn with<R>(&self, key: ClusterKey, f: impl FnOnce(&mut Cluster) -> R) -> R {
        f(self.world().cluster_mut(key))
    }

    /// Adds a new cluster of `initial` members (name, peer URLs) under `token`.
    pub fn bootstrap(
        &self,
        token: &str,
        initial: &[(String, Vec<String>)],
    ) -> Result<ClusterKey, BootstrapError> {
        let cluster = Cluster::bootstrap(token, initial)?;
        Ok(self.world().add(cluster))
    }

    /// Serves member `id` of cluster `key` on `listeners` (each answers gRPC and the HTTP
    /// routes, as etcd's client and metrics URLs do; the first is its client listener, the
    /// second, if any, its metrics listener), and starts it: it publishes `name` and its
    /// client URLs (`advertise`, or the first listener's `http://` URL when empty) once the
    /// cluster has a leader.
    pub fn serve_member(
        self: &Arc<Self>,
        key: ClusterKey,
        id: MemberId,
        name: &str,
        listeners: Vec<TcpListener>,
        advertise: &[String],
    ) -> Result<MemberServer, Refusal> {
        let addrs: Vec<SocketAddr> = listeners
            .iter()
            .map(TcpListener::local_addr)
            .collect::<Result<_, _>>()
            .map_err(|_| Refusal::Stopped)?;
        let first = *addrs.first().ok_or(Refusal::Stopped)?;
        let client_urls = if advertise.is_empty() {
            vec![format!("http://{first}")]
        } else {
            advertise.to_vec()
        };
        self.with(key, |c| c.start_member(id, name, &client_urls, now_ms()))?;
        let api = MemberApi::new(self.clone(), key, id);
        let app = api.clone().routes().merge(crate::http::router(api));
        let tasks = listeners
            .into_iter()
            .map(|listener| {
                let app = app.clone();
                tokio::spawn(serve_listener(listener, app))
            })
            .collect();
        Ok(MemberServer {
            sim: self.clone(),
            key,
            id,
            addrs,
            tasks,
        })
    }
}

/// One member's listeners, served until [`MemberServer::stop`] (or drop).
#[derive(Debug)]
pub struct MemberServer {
    sim: Arc<Sim>,
    key: ClusterKey,
    id: MemberId,
    addrs: Vec<SocketAddr>,
    tasks: Vec<JoinHandle<()>>,
}

impl MemberServer {
    /// The member's ID.
    pub fn id(&self) -> MemberId {
        self.id
    }

    /// The cluster it belongs to.
    pub fn cluster(&self) -> ClusterKey {
        self.key
    }

    /// The addresses it listens on, in the order given.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Its client URL: the first listener's (`http://127.0.0.1:PORT`).
    pub fn client_url(&self) -> String {
        format!("http://{}", self.addrs[0])
    }

    /// Its metrics URL: the second listener's, or the first's when it has one only.
    pub fn metrics_url(&self) -> String {
        format!("http://{}", self.addrs.get(1).unwrap_or(&self.addrs[0]))
    }

    /// Its process stops: the listeners close and the cluster loses the member's vote.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        for task in self.tasks.drain(..) {
            task.abort();
        }
        let id = self.id;
        self.sim.with(self.key, |c| c.stop_member(id, now_ms()));
    }
}

impl Drop for MemberServer {
    fn drop(&mut self) {
        if !self.tasks.is_empty() {
            self.halt();
        }
    }
}

/// Accepts connections on `listener` and serves `app` (HTTP/1 and HTTP/2 without TLS) on
/// each, until the task is aborted, which closes every connection it accepted.
async fn serve_listener(listener: TcpListener, app: axum::Router) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        while connections.try_join_next().is_some() {}
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        connections.spawn(async move {
            let builder = auto::Builder::new(TokioExecutor::new());
            let _ = builder
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Resolves when the process receives SIGTERM or SIGINT.
pub async fn terminated() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Binds `127.0.0.1:0` (a free port, kept).
pub async fn loopback() -> std::io::Result<TcpListener> {
    TcpListener::bind("127.0.0.1:0").await
}

/// A cluster of `size` members, each served on loopback ports of its own, all started.
/// Peer URLs are `http://<name>.sim:2380` (nothing listens on them: there is no raft).
pub async fn start_cluster(
    sim: &Arc<Sim>,
    token: &str,
    size: usize,
) -> Result<Vec<MemberServer>, Box<dyn std::error::Error + Send + Sync>> {
    let names: Vec<String> = (0..size).map(|i| format!("{token}-{i}")).collect();
    let initial: Vec<(String, Vec<String>)> = names
        .iter()
        .map(|n| (n.clone(), vec![format!("http://{n}.sim:2380")]))
        .collect();
    let key = sim.bootstrap(token, &initial)?;
    let mut servers = Vec::with_capacity(size);
    for (name, urls) in &initial {
        let id = sim
            .with(key, |c| c.member_with_peer_url(&urls[0]))
            .ok_or("bootstrapped member missing")?;
        let listeners = vec![loopback().await?, loopback().await?];
        let server = sim.serve_member(key, id, name, listeners, &[])?;
        servers.push(server);
    }
    Ok(servers)
}
