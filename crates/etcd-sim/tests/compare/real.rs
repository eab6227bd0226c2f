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
    /// Starts a single member named `real` with etcd's fast test timings; returns once it
    /// leads.
    pub async fn start() -> RealEtcd {
        let peer_url = format!("http://127.0.0.1:{}", free_ports(1)[0]);
        let initial = format!("real={peer_url}");
        let etcd = RealEtcd::spawn("real", &peer_url, &initial, "new");
        etcd.wait_until(|s| s.leader() != 0, "elect itself").await;
        etcd
    }

    /// Starts member `name` on `peer_url` joining the existing cluster `initial_cluster` (as
    /// the learner MemberAdd registered); returns once it answers Status.
    pub async fn join(name: &str, peer_url: &str, initial_cluster: &str) -> RealEtcd {
        let etcd = RealEtcd::spawn(name, peer_url, initial_cluster, "existing");
        etcd.wait_until(|_| true, "answer Status").await;
        etcd
    }

    fn spawn(name: &str, peer_url: &str, initial_cluster: &str, state: &str) -> RealEtcd {
        assert!(
            Path::new(ETCD).exists(),
            "{ETCD} is missing: run scripts/install-deps.sh"
        );
        let dir = tempfile::tempdir().expect("temporary directory");
        let ports = free_ports(2);
        let client_url = format!("http://127.0.0.1:{}", ports[0]);
        let metrics_url = format!("http://127.0.0.1:{}", ports[1]);
        let log = std::fs::File::create(dir.path().join("etcd.log")).expect("log file");
        let child = Command::new(ETCD)
            .arg(format!("--name={name}"))
            .arg(format!("--data-dir={}", dir.path().join("data").display()))
            .arg(format!("--listen-client-urls={client_url}"))
            .arg(format!("--advertise-client-urls={client_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster={initial_cluster}"))
            .arg("--initial-cluster-token=compare")
            .arg(format!("--initial-cluster-state={state}"))
            .arg(format!("--listen-metrics-urls={metrics_url}"))
            .arg("--heartbeat-interval=100")
            .arg("--election-timeout=1000")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start etcd");
        RealEtcd {
            child,
            client_url,
            metrics_url,
            _dir: dir,
        }
    }

    async fn wait_until(&self, ready: impl Fn(&etcd_client::StatusResponse) -> bool, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(mut client) = etcd_client::Client::connect([&self.client_url], None).await
                && let Ok(status) = client.status().await
                && ready(&status)
            {
                return;
            }
            assert!(Instant::now() < deadline, "etcd did not {what} within 30 s");
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
