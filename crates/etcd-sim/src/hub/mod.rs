//! Hub mode, `etcd-sim hub --listen ADDR`: one [`Sim`] holding every cluster, whose members
//! run as thin fronts ([`crate::front`]), one process per member in place of `etcd`.
//!
//! A front registers its member over the hub's registration API (`proto/hub.proto`: one
//! server-streaming gRPC call, `etcdsim.hub.Hub/Register`, carrying the member's etcd flags).
//! The hub decides where the member belongs ([`decide()`]), starts it on two fresh listeners of
//! its own (client and metrics, on the IP it listens on; [`Sim::serve_member`]) and answers
//! with their addresses; the front forwards its own listeners' connections there. The call
//! stays open while the member runs: when it ends (the front stopped, was killed, or lost its
//! connection) the hub stops the member ([`crate::server::MemberServer::stop`]), as a killed
//! etcd stops answering. The cluster keeps the member, so a front that registers again (a
//! restarted Pod) starts it again with its ID and state.

pub mod decide;

/// The generated messages, client and server of `proto/hub.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("etcdsim.hub");
}

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::{Request, Response, Status};

use crate::server::{MemberServer, Sim, SimConfig};
use crate::state::{ClusterKey, MemberId};
use decide::{Decision, Refused, Wanted, decide};

/// How often each side of a registration pings the other over HTTP/2, and how long an
/// unanswered ping may wait before the connection counts as lost (a front whose network
/// vanished without closing its connection).
pub const KEEPALIVE: (Duration, Duration) = (Duration::from_secs(10), Duration::from_secs(20));

/// Every cluster of the hub, and its running members by registration.
#[derive(Debug)]
pub struct Hub {
    sim: Arc<Sim>,
    host: IpAddr,
    registry: Mutex<Registry>,
}

#[derive(Debug, Default)]
struct Registry {
    /// The cluster each `--initial-cluster-token` bootstrapped.
    tokens: HashMap<String, ClusterKey>,
    running: HashMap<(ClusterKey, MemberId), Running>,
    registrations: u64,
}

#[derive(Debug)]
struct Running {
    registration: u64,
    server: MemberServer,
    superseded: oneshot::Sender<()>,
}

/// A member started for a registration, for as long as the registration lasts: dropping it
/// stops the member (unless a later registration of the same member replaced it).
#[derive(Debug)]
pub struct Lease {
    hub: Arc<Hub>,
    key: ClusterKey,
    id: MemberId,
    registration: u64,
    superseded: oneshot::Receiver<()>,
    ended: bool,
}

impl Lease {
    /// The member's cluster.
    pub fn cluster(&self) -> ClusterKey {
        self.key
    }

    /// The member.
    pub fn id(&self) -> MemberId {
        self.id
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut registry = self.hub.registry();
        let current = registry
            .running
            .get(&(self.key, self.id))
            .is_some_and(|r| r.registration == self.registration);
        if current && let Some(running) = registry.running.remove(&(self.key, self.id)) {
            running.server.stop();
            tracing::info!(member = %format!("{:x}", self.id), "registration closed: member stopped");
        }
    }
}

fn refused(r: Refused) -> Status {
    if r.invalid {
        Status::invalid_argument(r.reason)
    } else {
        Status::failed_precondition(r.reason)
    }
}

impl Hub {
    /// A hub of `sim`'s clusters whose members listen on `host` (the IP the hub's
    /// registration API listens on, so that fronts reach them where they reach the hub).
    pub fn new(sim: Arc<Sim>, host: IpAddr) -> Arc<Hub> {
        Arc::new(Hub {
            sim,
            host,
            registry: Mutex::new(Registry::default()),
        })
    }

    /// The simulator behind it.
    pub fn sim(&self) -> &Arc<Sim> {
        &self.sim
    }

    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts the member `r` describes (see [`decide()`]) and answers where it listens; the
    /// member runs until the [`Lease`] is dropped. A member already running for an earlier
    /// registration is restarted for this one (that registration's stream ends).
    pub async fn register(
        self: &Arc<Self>,
        r: &pb::Registration,
    ) -> Result<(pb::Registered, Lease), Status> {
        let wanted = Wanted::from_registration(r).map_err(refused)?;
        let mut listeners = Vec::with_capacity(2);
        for _ in 0..2 {
            let listener = TcpListener::bind((self.host, 0))
                .await
                .map_err(|e| Status::unavailable(format!("hub: listen on {}: {e}", self.host)))?;
            listeners.push(listener);
        }
        let mut registry = self.registry();
        let decision = decide(&registry.tokens, &self.sim.world(), &wanted).map_err(refused)?;
        let (key, id) = match decision {
            Decision::Start { key, id } => (key, id),
            Decision::Bootstrap { initial, peer_urls } => {
                let key = self
                    .sim
                    .bootstrap(&wanted.token, &initial)
                    .map_err(|e| Status::invalid_argument(e.to_string()))?;
                registry.tokens.insert(wanted.token.clone(), key);
                let id = self
                    .sim
                    .with(key, |c| c.member_with_peer_url(&peer_urls[0]))
                    .ok_or_else(|| Status::internal("member missing after bootstrap"))?;
                (key, id)
            }
        };
        if r.quota_backend_bytes > 0 {
            self.sim.with(key, |c| c.set_quota(r.quota_backend_bytes));
        }
        if let Some(earlier) = registry.running.remove(&(key, id)) {
            earlier.server.stop();
            let _ = earlier.superseded.send(());
        }
        let server = self
            .sim
            .serve_member(key, id, &r.name, listeners, &r.advertise_client_urls)
            .map_err(|e| Status::failed_precondition(e.message()))?;
        let registered = pb::Registered {
            member_id: id,
            cluster_id: self.sim.with(key, |c| c.cluster_id()),
            client_address: server.addrs()[0].to_string(),
            metrics_address: server.addrs()[1].to_string(),
        };
        registry.registrations += 1;
        let registration = registry.registrations;
        let (superseded_tx, superseded) = oneshot::channel();
        registry.running.insert(
            (key, id),
            Running {
                registration,
                server,
                superseded: superseded_tx,
            },
        );
        drop(registry);
        tracing::info!(
            name = %r.name,
            member = %format!("{id:x}"),
            cluster = %format!("{:x}", registered.cluster_id),
            token = %wanted.token,
            client = %registered.client_address,
            metrics = %registered.metrics_address,
            fronts = ?(&r.listen_client_urls, &r.listen_metrics_urls),
            "member started"
        );
        let lease = Lease {
            hub: self.clone(),
            key,
            id,
            registration,
            superseded,
            ended: false,
        };
        Ok((registered, lease))
    }

    /// How many members run for open registrations.
    pub fn running(&self) -> usize {
        self.registry().running.len()
    }
}

/// A registration's answer: the addresses first, then nothing until the registration is
/// superseded (ABORTED); dropping it (the call ends) drops the lease.
#[derive(Debug)]
pub struct Registration {
    first: Option<pb::Registered>,
    lease: Lease,
}

impl tokio_stream::Stream for Registration {
    type Item = Result<pb::Registered, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if let Some(first) = this.first.take() {
            return Poll::Ready(Some(Ok(first)));
        }
        if this.lease.ended {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.lease.superseded).poll(cx) {
            Poll::Ready(_) => {
                this.lease.ended = true;
                Poll::Ready(Some(Err(Status::aborted(format!(
                    "member {:x} registered again: this registration is superseded",
                    this.lease.id
                )))))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// The registration API's service.
#[derive(Clone, Debug)]
pub struct HubService(pub Arc<Hub>);

#[tonic::async_trait]
impl pb::hub_server::Hub for HubService {
    type RegisterStream = Registration;

    async fn register(
        &self,
        request: Request<pb::Registration>,
    ) -> Result<Response<Registration>, Status> {
        let r = request.into_inner();
        match self.0.register(&r).await {
            Ok((registered, lease)) => Ok(Response::new(Registration {
                first: Some(registered),
                lease,
            })),
            Err(status) => {
                tracing::warn!(name = %r.name, token = %r.initial_cluster_token, reason = %status.message(), "registration refused");
                Err(status)
            }
        }
    }
}

/// Serves `hub`'s registration API on `listener` until the future is dropped.
pub async fn serve(hub: Arc<Hub>, listener: TcpListener) -> Result<(), tonic::transport::Error> {
    tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(KEEPALIVE.0))
        .http2_keepalive_timeout(Some(KEEPALIVE.1))
        .add_service(pb::hub_server::HubServer::new(HubService(hub)))
        .serve_with_incoming(TcpListenerStream::new(listener))
        .await
}

/// The hub's command line after `hub`: `--listen ADDR` (or `--listen=ADDR`).
pub fn parse_args(args: &[String]) -> Result<String, String> {
    let mut listen = None;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let flag = arg.trim_start_matches('-');
        match flag.split_once('=') {
            Some(("listen", value)) if arg.starts_with('-') => listen = Some(value.to_string()),
            None if flag == "listen" && arg.starts_with('-') => {
                listen = Some(
                    args.next()
                        .ok_or("flag needs an argument: --listen")?
                        .clone(),
                );
            }
            _ => return Err(format!("etcd-sim hub: unexpected argument {arg:?}")),
        }
    }
    listen.ok_or_else(|| "etcd-sim hub: --listen ADDR is required".to_string())
}

/// `etcd-sim hub ARGS`: listens, prints `etcd-sim hub listening on ADDR` on stdout (the
/// address bound, so `--listen 127.0.0.1:0` can be used), serves until SIGTERM or SIGINT.
pub async fn main(args: &[String]) -> ExitCode {
    let listen = match parse_args(args) {
        Ok(listen) => listen,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let listener = match TcpListener::bind(&listen).await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("etcd-sim hub: listen on {listen}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let addr: SocketAddr = match listener.local_addr() {
        Ok(addr) => addr,
        Err(e) => {
            eprintln!("etcd-sim hub: {e}");
            return ExitCode::FAILURE;
        }
    };
    let hub = Hub::new(Sim::new(SimConfig::default()), addr.ip());
    println!("etcd-sim hub listening on {addr}");
    tokio::select! {
        served = serve(hub, listener) => {
            if let Err(e) = served {
                eprintln!("etcd-sim hub: {e}");
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        _ = crate::server::terminated() => ExitCode::SUCCESS,
    }
}

#[cfg(test)]
mod tests;
