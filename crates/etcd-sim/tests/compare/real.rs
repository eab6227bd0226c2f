//! A real etcd 3.6.17: one member on free loopback ports in a temporary directory.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The etcd binary the comparison runs (scripts/install-deps.sh installs it).
pub const ETCD: &str = "/usr/local/lib/etcd-3.6.17/etcd";

/// Free loopback ports: bound at once (so distinct), then released for etcd to take.
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0"))
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().expect("local address").port())
        .collect()
}

/// A running etcd process, killed on drop.
pub struct RealEtcd {
    child: Child,
    /// Its client URL.
    pub client_url: String,
    /// Its metrics URL.
    pub metrics_url: String,
    _dir: tempfile::TempDir,
}

impl RealEtcd {
    /// Starts a single member named `real` with etcd's fast test timings; returns once its
    /// client port accepts connections.
    pub async fn start() -> RealEtcd {
        assert!(
            Path::new(ETCD).exists(),
            "{ETCD} is missing: run scripts/install-deps.sh"
        );
        let dir = tempfile::tempdir().expect("temporary directory");
        let ports = free_ports(3);
        let client_url = format!("http://127.0.0.1:{}", ports[0]);
        let peer_url = format!("http://127.0.0.1:{}", ports[1]);
        let metrics_url = format!("http://127.0.0.1:{}", ports[2]);
        let log = std::fs::File::create(dir.path().join("etcd.log")).expect("log file");
        let child = Command::new(ETCD)
            .arg("--name=real")
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=real={peer_url}"))
            .arg("--initial-cluster-token=compare")
            .arg("--initial-cluster-state=new")
            .arg(format!("--listen-metrics-urls={metrics_url}"))
            .arg("--heartbeat-interval=100")
            .arg("--election-timeout=1000")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start etcd");
        let etcd = RealEtcd {
            child,
            client_url,
            metrics_url,
            _dir: dir,
        };
        etcd.wait_until_it_leads().await;
        etcd
    }

    async fn wait_until_it_leads(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(mut client) = etcd_client::Client::connect([&self.client_url], None).await
                && let Ok(status) = client.status().await
                && status.leader() != 0
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "etcd did not elect itself within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for RealEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
