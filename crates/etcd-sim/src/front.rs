//! Front mode, `etcd-sim --hub ADDR <etcd's flags>` (or `ETCD_SIM_HUB=ADDR` with an unchanged
//! etcd command line): one member of a cluster the hub ([`crate::hub`]) holds, in place of
//! one `etcd` process (one per Pod).
//!
//! The front registers its member with the hub (its etcd flags, [`registration`]); the hub
//! starts the member on listeners of its own and answers with their addresses. The front then
//! listens on its `--listen-client-urls` and `--listen-metrics-urls` and forwards every
//! connection it accepts, byte for byte, to the hub's listener for the same URL kind, so a
//! client sees the member at the front's addresses. The registration stays open while the
//! front runs: when the front exits (SIGTERM, SIGINT, or killed) the hub stops the member;
//! when the hub ends it (the hub stopped, or the member registered again elsewhere) the front
//! exits non-zero, as an etcd that lost its data would.

use std::error::Error;
use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tonic::codec::Streaming;
use tonic::transport::Endpoint;

use crate::flags::{EtcdFlags, listen_addr};
use crate::hub::{KEEPALIVE, pb};

/// How long the front waits for the hub to accept its connection.
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A running front: its registration and its forwarding listeners.
#[derive(Debug)]
pub struct Front {
    hub: String,
    name: String,
    registered: pb::Registered,
    registration: Streaming<pb::Registered>,
    addrs: Vec<SocketAddr>,
    proxies: Vec<JoinHandle<()>>,
}

/// The registration of the member `flags` describe.
pub fn registration(flags: &EtcdFlags) -> pb::Registration {
    pb::Registration {
        name: flags.name.clone(),
        initial_cluster: flags
            .initial_cluster
            .iter()
            .map(|(name, url)| format!("{name}={url}"))
            .collect::<Vec<_>>()
            .join(","),
        initial_cluster_state: flags.initial_cluster_state.clone(),
        initial_cluster_token: flags.initial_cluster_token.clone(),
        initial_advertise_peer_urls: flags.initial_advertise_peer_urls.clone(),
        advertise_client_urls: flags.advertise_client_urls.clone(),
        listen_client_urls: flags.listen_client_urls.clone(),
        listen_metrics_urls: flags.listen_metrics_urls.clone(),
        quota_backend_bytes: flags.quota_backend_bytes.unwrap_or(0),
    }
}

/// `e` and its sources, `: `-separated, each text once (a transport error's own text says
/// little, and its sources repeat theirs).
fn chain(e: &dyn Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.ends_with(&part) {
            text.push_str(&format!(": {part}"));
        }
        source = s.source();
    }
    text
}

/// Where to reach a hub listener the hub answered with: its unspecified IP (the hub listens
/// on every address) is the hub's own address.
pub fn target(answered: &str, hub: SocketAddr) -> Result<SocketAddr, String> {
    let addr: SocketAddr = answered
        .parse()
        .map_err(|_| format!("the hub answered an invalid address {answered:?}"))?;
    if addr.ip().is_unspecified() {
        return Ok(SocketAddr::new(hub.ip(), addr.port()));
    }
    Ok(addr)
}

impl Front {
    /// Registers `flags`' member with the hub at `hub` (`host:port`, or `http://host:port`),
    /// creates its data directory, then listens on its client and metrics URLs.
    pub async fn start(hub: &str, flags: &EtcdFlags) -> Result<Front, String> {
        let authority = hub.strip_prefix("http://").unwrap_or(hub);
        let hub_addr = tokio::net::lookup_host(authority)
            .await
            .ok()
            .and_then(|mut addrs| addrs.next())
            .ok_or_else(|| format!("cannot resolve the hub address {hub}"))?;
        let channel = Endpoint::from_shared(format!("http://{hub_addr}"))
            .map_err(|e| format!("the hub address {hub}: {e}"))?
            .connect_timeout(CONNECT_TIMEOUT)
            .http2_keep_alive_interval(KEEPALIVE.0)
            .keep_alive_timeout(KEEPALIVE.1)
            .keep_alive_while_idle(true)
            .connect()
            .await
            .map_err(|e| format!("cannot reach the hub at {hub}: {}", chain(&e)))?;
        let mut client = pb::hub_client::HubClient::new(channel);
        let name = &flags.name;
        let mut registration = client
            .register(registration(flags))
            .await
            .map_err(|s| format!("the hub at {hub} refused member {name}: {}", s.message()))?
            .into_inner();
        let registered = registration
            .message()
            .await
            .map_err(|s| format!("the hub at {hub}: {}", s.message()))?
            .ok_or_else(|| format!("the hub at {hub} ended member {name}'s registration"))?;
        let client_target = target(&registered.client_address, hub_addr)?;
        let metrics_target = target(&registered.metrics_address, hub_addr)?;
        std::fs::create_dir_all(&flags.data_dir)
            .map_err(|e| format!("--data-dir {}: {e}", flags.data_dir))?;
        let routes = flags
            .listen_client_urls
            .iter()
            .map(|url| (url, client_target))
            .chain(
                flags
                    .listen_metrics_urls
                    .iter()
                    .map(|url| (url, metrics_target)),
            );
        let mut listeners = Vec::new();
        for (url, to) in routes {
            let listener = TcpListener::bind(listen_addr(url)?)
                .await
                .map_err(|e| format!("listen on {url}: {e}"))?;
            listeners.push((listener, to));
        }
        let addrs = listeners
            .iter()
            .map(|(l, _)| l.local_addr())
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        let proxies = listeners
            .into_iter()
            .map(|(listener, to)| tokio::spawn(forward(listener, to)))
            .collect();
        Ok(Front {
            hub: hub.to_string(),
            name: name.clone(),
            registered,
            registration,
            addrs,
            proxies,
        })
    }

    /// What the hub answered: the member's ID, its cluster's, the hub's listeners.
    pub fn registered(&self) -> &pb::Registered {
        &self.registered
    }

    /// The front's own listening addresses (client URLs first, then metrics URLs).
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Resolves when the hub ends the registration, with the reason.
    pub async fn ended(&mut self) -> String {
        let (hub, name) = (&self.hub, &self.name);
        loop {
            match self.registration.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => return format!("the hub at {hub} ended member {name}'s registration"),
                Err(s) => {
                    return format!(
                        "the hub at {hub} ended member {name}'s registration: {}",
                        s.message()
                    );
                }
            }
        }
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        for proxy in &self.proxies {
            proxy.abort();
        }
    }
}

/// Forwards each connection `listener` accepts to `to`, both ways, until either side closes.
async fn forward(listener: TcpListener, to: SocketAddr) {
    loop {
        let mut inbound = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        tokio::spawn(async move {
            let mut outbound = match TcpStream::connect(to).await {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::warn!(hub = %to, error = %e, "the member's hub listener refused");
                    return;
                }
            };
            let _ = inbound.set_nodelay(true);
            let _ = outbound.set_nodelay(true);
            let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unspecified_hub_listener_is_reached_at_the_hubs_address() {
        let hub: SocketAddr = "10.0.0.5:2300".parse().unwrap();
        assert_eq!(
            target("0.0.0.0:4100", hub).unwrap(),
            "10.0.0.5:4100".parse::<SocketAddr>().unwrap()
        );
        assert_eq!(
            target("127.0.0.1:4100", hub).unwrap(),
            "127.0.0.1:4100".parse::<SocketAddr>().unwrap()
        );
        assert!(target("nonsense", hub).is_err());
    }

    #[test]
    fn a_registration_carries_the_flags() {
        let flags = crate::flags::parse(
            [
                "--name=m-1",
                "--initial-cluster=m-0=http://a:2380,m-1=http://b:2380",
                "--initial-advertise-peer-urls=http://b:2380",
                "--initial-cluster-state=existing",
                "--quota-backend-bytes=4096",
            ]
            .map(String::from),
            |_| None,
        )
        .unwrap();
        let r = registration(&flags);
        assert_eq!(r.initial_cluster, "m-0=http://a:2380,m-1=http://b:2380");
        assert_eq!(r.initial_cluster_state, "existing");
        assert_eq!(r.initial_cluster_token, "etcd-cluster");
        assert_eq!(r.quota_backend_bytes, 4096);
        assert_eq!(r.initial_advertise_peer_urls, vec!["http://b:2380"]);
    }
}
