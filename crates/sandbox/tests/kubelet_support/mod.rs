//! A whole sandbox cluster for the node agent's tests (root only): API server, scheduler and
//! controllers, cluster network, process runtime and node agents; kubectl and kube-rs against
//! it; waiting for Pods; reaching the cluster network.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use kube_sandbox::controllers::TimeScale;
use kube_sandbox::kubelet::Kubelet;
use kube_sandbox::network::ClusterNetwork;
use kube_sandbox::runtime::{ContainerRuntime, ImageMap};
use kube_sandbox::{ControlPlane, Sandbox, SandboxOptions};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub const ETCD_IMAGE: &str = "quay.io/coreos/etcd:v3.5.1";
pub const TOOLS_IMAGE: &str = "sandbox.local/tools:latest";
pub const LIST_PODS_IMAGE: &str = "sandbox.local/list-pods:latest";
pub const ETCD_35: &str = "/usr/local/lib/etcd-3.5.1/etcd";

/// Fails (never skips) when a program the test needs is missing, saying how to install it.
pub fn require_binary(path: &str) {
    assert!(
        Path::new(path).exists(),
        "{path} is missing: install the test dependencies with `bash scripts/install-deps.sh` (as root)"
    );
}

/// The tests' own images (the sandbox puts the built-in etcd map after them): the machine's
/// shell and python as a "tools" image, and the in-cluster test program.
pub fn test_images() -> ImageMap {
    let yaml = format!(
        "images:\n  - image: \"sandbox.local/tools:*\"\n    cmd: [/bin/sh]\n  - image: \"sandbox.local/list-pods:*\"\n    entrypoint: [/usr/local/bin/list-pods]\n    files:\n      /usr/local/bin/list-pods: {}\n",
        env!("CARGO_BIN_EXE_kube-sandbox-list-pods")
    );
    ImageMap::from_yaml(&yaml, Path::new("/"))
        .expect("test image map")
        .then(ImageMap::builtin())
}

/// A running cluster and its directory; dropping it stops everything.
pub struct Cluster {
    pub sandbox: Sandbox,
    pub dir: tempfile::TempDir,
}

/// How a test cluster runs.
pub struct ClusterOptions {
    pub nodes: usize,
    pub time_scale: f64,
    pub pod_eviction_timeout: Duration,
    pub control_plane: ControlPlane,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        Self {
            nodes: 3,
            time_scale: 0.1,
            pod_eviction_timeout: Duration::from_secs(300),
            control_plane: ControlPlane::Sandbox,
        }
    }
}

pub async fn start() -> Cluster {
    start_with(ClusterOptions::default()).await
}

/// A whole sandbox cluster (`SandboxOptions::cluster`) with the tests' images, ten times
/// faster than real time.
pub async fn start_with(options: ClusterOptions) -> Cluster {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut sandbox_options = SandboxOptions::cluster(dir.path())
        .nodes(options.nodes)
        .images(test_images())
        .time_scale(TimeScale::new(options.time_scale).unwrap())
        .pod_eviction_timeout(options.pod_eviction_timeout)
        .control_plane(options.control_plane);
    if let Some(cluster) = sandbox_options.cluster.as_mut() {
        cluster.shutdown_grace_period = Duration::from_secs(10);
    }
    let sandbox = Sandbox::start(sandbox_options)
        .await
        .expect("the sandbox starts (the node tests run as root)");
    Cluster { sandbox, dir }
}

impl Cluster {
    pub fn client(&self) -> kube::Client {
        self.sandbox.client()
    }

    pub fn kubelet(&self) -> &Kubelet {
        self.sandbox.kubelet().expect("the sandbox runs nodes")
    }

    pub fn network(&self) -> &ClusterNetwork {
        self.sandbox.network().expect("the sandbox runs nodes")
    }

    pub fn runtime(&self) -> &ContainerRuntime {
        self.sandbox.runtime().expect("the sandbox runs nodes")
    }

    /// An administrator's client that reports 429 and 503 at once instead of retrying them
    /// (kube-rs retries them by default).
    pub async fn client_without_retries(&self) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(self.kubeconfig()).unwrap();
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        config.default_retry = false;
        kube_sandbox::kube_client::client_for(config).unwrap()
    }

    pub fn pods(&self, namespace: &str) -> Api<Pod> {
        Api::namespaced(self.client(), namespace)
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.sandbox.kubeconfig_path().to_path_buf()
    }

    /// Runs kubectl against the cluster; stdout when it succeeded, else panics with stderr.
    pub async fn kubectl(&self, args: &[&str]) -> String {
        let output = self.kubectl_output(args, None).await;
        assert!(
            output.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// `kubectl apply -f -` of `manifest`.
    pub async fn apply(&self, manifest: &str) -> String {
        let output = self
            .kubectl_output(&["apply", "-f", "-"], Some(manifest))
            .await;
        assert!(
            output.status.success(),
            "kubectl apply failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    pub async fn kubectl_output(&self, args: &[&str], stdin: Option<&str>) -> std::process::Output {
        use tokio::io::AsyncWriteExt;
        let mut child = tokio::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("kubectl is installed (bash scripts/install-deps.sh)");
        let mut input = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).await.unwrap();
        }
        drop(input);
        tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
            .await
            .expect("kubectl finishes")
            .unwrap()
    }

    /// Waits until the Pod exists and `check` holds; returns it. Panics with the Pod's last
    /// state when it does not happen within `limit`.
    pub async fn wait_pod(
        &self,
        namespace: &str,
        name: &str,
        limit: Duration,
        check: impl Fn(&Pod) -> bool,
    ) -> Pod {
        let api = self.pods(namespace);
        let started = Instant::now();
        let mut last = None;
        while started.elapsed() < limit {
            if let Ok(Some(pod)) = api.get_opt(name).await {
                if check(&pod) {
                    return pod;
                }
                last = Some(pod);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "Pod {namespace}/{name} did not reach the expected state within {limit:?}; last seen: {:#?}",
            last.map(|p| p.status)
        );
    }

    /// Creates the Pod `web` in `namespace` (a small HTTP server on port 8080 that answers
    /// with its hostname, Ready once it answers) and waits until it is Ready.
    pub async fn run_web(&self, namespace: &str, limit: Duration) -> Pod {
        self.create::<Pod>(
            namespace,
            pod_manifest(
                "web",
                json!({"app": "web"}),
                None,
                json!([web_container(8080)]),
            ),
        )
        .await;
        self.wait_ready(namespace, "web", limit).await
    }

    pub async fn wait_ready(&self, namespace: &str, name: &str, limit: Duration) -> Pod {
        self.wait_pod(namespace, name, limit, is_ready).await
    }

    pub async fn wait_gone(&self, namespace: &str, name: &str, limit: Duration) {
        let api = self.pods(namespace);
        let started = Instant::now();
        while started.elapsed() < limit {
            if matches!(api.get_opt(name).await, Ok(None)) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("Pod {namespace}/{name} still exists after {limit:?}");
    }

    /// `GET path` over HTTP/1.0 from inside the cluster network (host: a name or an address).
    pub async fn http_get(&self, host: &str, port: u16, path: &str) -> Option<String> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let exchange = async {
            let mut stream = self.network().connect_host(host, port).await.ok()?;
            stream
                .write_all(format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
                .await
                .ok()?;
            let mut response = String::new();
            stream.read_to_string(&mut response).await.ok()?;
            Some(response.split_once("\r\n\r\n")?.1.to_string())
        };
        tokio::time::timeout(Duration::from_secs(5), exchange)
            .await
            .ok()
            .flatten()
    }
}

pub fn is_ready(pod: &Pod) -> bool {
    condition(pod, "Ready") == Some("True")
}

pub fn condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a str> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.status.as_str())
}

pub fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

pub fn container_status<'a>(
    pod: &'a Pod,
    name: &str,
) -> Option<&'a k8s_openapi::api::core::v1::ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|s| s.name == name)
}

pub fn waiting_reason<'a>(pod: &'a Pod, container: &str) -> Option<&'a str> {
    container_status(pod, container)?
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .as_deref()
}

pub fn restart_count(pod: &Pod, container: &str) -> i32 {
    container_status(pod, container).map_or(0, |s| s.restart_count)
}

pub fn pod_ip(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .unwrap_or_default()
}

/// An etcd 3.5 Pod with a claim or an emptyDir for its data and an httpGet readiness probe on
/// `/health`, named `name` (its hostname) under subdomain `etcd`.
pub fn etcd_pod(name: &str, data: serde_json::Value) -> serde_json::Value {
    let mut volume = data;
    volume["name"] = json!("data");
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "etcd"}},
        "spec": {
            "hostname": name, "subdomain": "etcd", "terminationGracePeriodSeconds": 5,
            "containers": [{
                "name": "etcd", "image": ETCD_IMAGE,
                "command": ["etcd", "--name=$(POD_NAME)", "--data-dir=/var/lib/etcd",
                    "--listen-client-urls=http://0.0.0.0:2379", "--advertise-client-urls=http://$(POD_IP):2379",
                    "--listen-peer-urls=http://0.0.0.0:2380", "--initial-advertise-peer-urls=http://$(POD_IP):2380",
                    "--initial-cluster=$(POD_NAME)=http://$(POD_IP):2380"],
                "env": [
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                ],
                "ports": [{"name": "client", "containerPort": 2379}, {"name": "peer", "containerPort": 2380}],
                "readinessProbe": {"httpGet": {"path": "/health", "port": "client"}, "periodSeconds": 1},
                "volumeMounts": [{"name": "data", "mountPath": "/var/lib/etcd"}],
            }],
            "volumes": [volume],
        },
    })
}

/// A python HTTP server on `port` answering every GET with the Pod's hostname, with a
/// readiness probe on it.
pub fn web_container(port: u16) -> serde_json::Value {
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
    json!({
        "name": "web", "image": TOOLS_IMAGE, "command": ["python3", "-u", "-c", script],
        "ports": [{"name": "http", "containerPort": port}],
        "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1},
    })
}

/// A Pod of `containers` with `labels`, and optionally a hostname under `subdomain`.
pub fn pod_manifest(
    name: &str,
    labels: serde_json::Value,
    subdomain: Option<&str>,
    containers: serde_json::Value,
) -> serde_json::Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {"terminationGracePeriodSeconds": 2, "containers": containers},
    });
    if let Some(subdomain) = subdomain {
        pod["spec"]["hostname"] = json!(name);
        pod["spec"]["subdomain"] = json!(subdomain);
    }
    pod
}

/// A container running `script` with `/bin/sh -c`.
pub fn shell_container(name: &str, script: &str) -> serde_json::Value {
    json!({"name": name, "image": TOOLS_IMAGE, "command": ["/bin/sh", "-c", script]})
}

impl Cluster {
    /// Creates an object from its manifest through kube-rs (any namespaced built-in kind).
    pub async fn create<K>(&self, namespace: &str, manifest: serde_json::Value) -> K
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
    {
        let object: K = serde_json::from_value(manifest).expect("a valid manifest");
        Api::<K>::namespaced(self.client(), namespace)
            .create(&PostParams::default(), &object)
            .await
            .expect("created")
    }

    /// Polls `check` until it is true.
    pub async fn eventually<F, Fut>(&self, what: &str, limit: Duration, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let started = Instant::now();
        while started.elapsed() < limit {
            if check().await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{what} did not happen within {limit:?}");
    }

    /// The container's log through the API (`pods/log`).
    pub async fn logs(&self, namespace: &str, pod: &str, container: &str) -> String {
        let params = kube::api::LogParams {
            container: Some(container.into()),
            ..Default::default()
        };
        self.pods(namespace)
            .logs(pod, &params)
            .await
            .unwrap_or_default()
    }
}

/// How long a kubectl call in these tests may take.
pub const KUBECTL_LIMIT: Duration = Duration::from_secs(60);
/// The kubectl that install-deps puts beside the machine's.
pub const KUBECTL_133: &str = "/usr/local/lib/kubectl-v1.33/kubectl";

/// Runs `binary` with the kubeconfig and `args`, `input` on its stdin (then closed).
pub async fn kubectl(
    binary: &str,
    kubeconfig: &std::path::Path,
    args: &[&str],
    input: Option<&str>,
) -> std::process::Output {
    let mut child = tokio::process::Command::new(binary)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{binary} runs (bash scripts/install-deps.sh): {e}"));
    let mut stdin = child.stdin.take().unwrap();
    if let Some(text) = input {
        stdin.write_all(text.as_bytes()).await.unwrap();
    }
    drop(stdin);
    tokio::time::timeout(KUBECTL_LIMIT, child.wait_with_output())
        .await
        .expect("kubectl finishes")
        .unwrap()
}

/// One way to run `kubectl port-forward`: the binary, its environment, the local port.
pub type ForwardCase = (&'static str, &'static [(&'static str, &'static str)], u16);

/// A running `kubectl port-forward`; killed when dropped.
pub struct Forward {
    pub child: tokio::process::Child,
    pub stderr: tokio::task::JoinHandle<String>,
}

impl Forward {
    /// Starts `binary port-forward pod/web LOCAL:REMOTE` (with `env`) and waits until it
    /// listens.
    pub async fn start(
        binary: &str,
        kubeconfig: &std::path::Path,
        ports: &str,
        env: &[(&str, &str)],
    ) -> Self {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new(binary)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["port-forward", "pod/web", ports])
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("{binary} runs: {e}"));
        let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut stderr_pipe = child.stderr.take().unwrap();
        let stderr = tokio::spawn(async move {
            let mut text = String::new();
            let _ = stderr_pipe.read_to_string(&mut text).await;
            text
        });
        let listening = tokio::time::timeout(KUBECTL_LIMIT, async {
            while let Ok(Some(line)) = stdout.next_line().await {
                if line.starts_with("Forwarding from 127.0.0.1") {
                    return true;
                }
            }
            false
        })
        .await;
        if listening != Ok(true) {
            let _ = child.kill().await;
            panic!(
                "{binary} port-forward {ports} did not start: {}",
                stderr.await.unwrap()
            );
        }
        // kubectl prints "Handling connection for ..." per connection; keep draining it.
        tokio::spawn(async move { while let Ok(Some(_)) = stdout.next_line().await {} });
        Self { child, stderr }
    }

    pub async fn stop(mut self) -> String {
        let _ = self.child.kill().await;
        self.stderr.await.unwrap()
    }
}

/// One HTTP/1.0 exchange with the Pod's server through the forward on `port`.
pub async fn http_get(port: u16) -> String {
    let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("the forward accepts connections");
    socket
        .write_all(b"GET / HTTP/1.0\r\nHost: web\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    tokio::time::timeout(KUBECTL_LIMIT, socket.read_to_string(&mut response))
        .await
        .expect("the Pod answers through the forward")
        .unwrap();
    response
}
