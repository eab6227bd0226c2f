//! A cluster network and a process runtime for tests (root only), and Pods in them.

#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use kube_sandbox::network::{ClusterNetwork, ClusterNetworkConfig, PodNetwork, resolv_conf};
use kube_sandbox::runtime::{
    ContainerConfig, ContainerRuntime, ImageMap, PodSandbox, PodSandboxConfig, RuntimeConfig,
    Volume, hosts_file,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub const ETCD_IMAGE: &str = "quay.io/coreos/etcd:v3.5.1";
pub const TOOLS_IMAGE: &str = "sandbox.local/tools:latest";

/// The image map tests use: the machine's own programs (python3, sh, coreutils) as a "tools"
/// image, then the sandbox's built-in map (etcd 3.5 and 3.4).
pub fn image_map() -> ImageMap {
    ImageMap::from_yaml(
        "images:\n  - image: \"sandbox.local/tools:*\"\n    cmd: [/bin/sh]\n",
        Path::new("/"),
    )
    .expect("test image map")
    .then(ImageMap::builtin())
}

/// A cluster network and a runtime sharing one temporary directory.
pub struct Sandbox {
    pub network: ClusterNetwork,
    pub runtime: ContainerRuntime,
    pub dir: tempfile::TempDir,
}

/// A Pod: its sandbox (dropped first: processes end before the veth goes) and its network.
pub struct TestPod {
    pub sandbox: PodSandbox,
    pub network: PodNetwork,
}

impl TestPod {
    pub fn ip(&self) -> Ipv4Addr {
        self.network.ip()
    }

    pub fn start(&self, config: &ContainerConfig) {
        self.sandbox
            .start_container(config)
            .unwrap_or_else(|error| panic!("start {}: {error}", config.name));
    }

    /// The container's output so far.
    pub fn log(&self, container: &str) -> String {
        let log = self
            .sandbox
            .read_log(container, &Default::default())
            .unwrap();
        String::from_utf8_lossy(&log).into_owned()
    }
}

impl Sandbox {
    pub async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let network = ClusterNetwork::create(ClusterNetworkConfig::new(dir.path()))
            .await
            .expect("cluster network (run the tests as root)");
        let runtime = ContainerRuntime::new(RuntimeConfig {
            state_root: dir.path().join("state"),
            images: image_map(),
        })
        .expect("process runtime");
        Self {
            network,
            runtime,
            dir,
        }
    }

    /// A Pod named `name` in namespace `default` with `volumes`, optionally in `subdomain`.
    pub async fn pod(&self, name: &str, volumes: Vec<Volume>, fs_group: Option<u32>) -> TestPod {
        let network = sendable(self.network.attach_pod()).await.unwrap();
        let domain = &self.network.config().cluster_domain;
        let sandbox = self
            .runtime
            .create_pod(PodSandboxConfig {
                uid: uuid::Uuid::new_v4().to_string(),
                namespace: "default".into(),
                name: name.into(),
                hostname: name.into(),
                network: network.namespace(),
                hosts_file: hosts_file(network.ip(), name, None, &[]),
                resolv_conf: resolv_conf("default", domain, self.network.config().dns_server),
                fs_group,
                volumes,
            })
            .unwrap();
        TestPod { sandbox, network }
    }

    /// `GET path` over HTTP/1.0 from inside the cluster network; `None` if no answer in time.
    pub async fn http_get(
        &self,
        address: SocketAddr,
        path: &str,
        timeout: Duration,
    ) -> Option<String> {
        let exchange = async {
            let mut stream = sendable(self.network.connect(address)).await.ok()?;
            stream
                .write_all(format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes())
                .await
                .ok()?;
            let mut response = String::new();
            stream.read_to_string(&mut response).await.ok()?;
            let (_, body) = response.split_once("\r\n\r\n")?;
            Some(body.to_string())
        };
        tokio::time::timeout(timeout, exchange).await.ok().flatten()
    }

    /// Polls `GET path` until the body satisfies `ready`; the time it took.
    pub async fn wait_http(
        &self,
        address: SocketAddr,
        path: &str,
        ready: impl Fn(&str) -> bool,
        limit: Duration,
    ) -> Duration {
        let started = Instant::now();
        while started.elapsed() < limit {
            if let Some(body) = self.http_get(address, path, Duration::from_secs(1)).await
                && ready(&body)
            {
                return started.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{address}{path} not ready within {limit:?}");
    }
}

/// A container of the tools image running `sh -c script`.
pub fn shell(name: &str, script: &str) -> ContainerConfig {
    ContainerConfig {
        name: name.into(),
        image: TOOLS_IMAGE.into(),
        command: vec!["sh".into(), "-c".into(), script.into()],
        ..Default::default()
    }
}

/// A python3 HTTP server on `port` answering every GET with the hostname.
pub fn hostname_server(name: &str, port: u16) -> ContainerConfig {
    let script = format!(
        "import http.server, socket\n\
         class H(http.server.BaseHTTPRequestHandler):\n\
         \x20   def do_GET(self):\n\
         \x20       body = socket.gethostname().encode()\n\
         \x20       self.send_response(200)\n\
         \x20       self.send_header('Content-Length', str(len(body)))\n\
         \x20       self.end_headers()\n\
         \x20       self.wfile.write(body)\n\
         \x20   def log_message(self, *args):\n\
         \x20       pass\n\
         http.server.HTTPServer(('0.0.0.0', {port}), H).serve_forever()\n"
    );
    ContainerConfig {
        name: name.into(),
        image: TOOLS_IMAGE.into(),
        command: vec!["python3".into(), "-c".into(), script],
        ..Default::default()
    }
}

/// A single-member etcd 3.5 in a Pod at `ip`, with its data under `/var/lib/etcd`.
pub fn etcd(pod_name: &str, ip: Ipv4Addr) -> ContainerConfig {
    ContainerConfig {
        name: "etcd".into(),
        image: ETCD_IMAGE.into(),
        command: vec!["etcd".into()],
        args: [
            "--name=$(POD_NAME)",
            "--data-dir=/var/lib/etcd/data",
            "--listen-client-urls=http://0.0.0.0:2379",
            "--advertise-client-urls=http://$(POD_IP):2379",
            "--listen-peer-urls=http://0.0.0.0:2380",
            "--initial-advertise-peer-urls=http://$(POD_IP):2380",
            "--initial-cluster=$(POD_NAME)=http://$(POD_IP):2380",
        ]
        .map(String::from)
        .to_vec(),
        env: vec![
            ("POD_NAME".into(), pod_name.into()),
            ("POD_IP".into(), ip.to_string()),
        ],
        volume_mounts: vec![kube_sandbox::runtime::VolumeMount {
            name: "data".into(),
            mount_path: "/var/lib/etcd".into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Passes a future through, failing to compile unless it is `Send`: the node agent runs
/// these on a multi-threaded runtime with `tokio::spawn`.
pub fn sendable<F: std::future::Future + Send>(future: F) -> F {
    future
}

/// Waits until `condition` holds, polling.
pub async fn eventually(what: &str, limit: Duration, condition: impl Fn() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(
            started.elapsed() < limit,
            "{what} did not happen within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
