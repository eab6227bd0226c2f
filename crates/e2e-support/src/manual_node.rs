//! A test playing the node for a sandbox without nodes: for every etcd Pod the operator
//! creates it starts the real etcd binary with the Pod's own command line (listening on a
//! loopback address of the member's own instead of 0.0.0.0) and reports the Pod Running and
//! Ready; for every Pod deleted it stops that etcd. The member's data directory lives as long
//! as its PVC, so a recreated Pod resumes on the same data.
//!
//! etcd resolves the members' DNS names (`<member>.<cluster>.<ns>.svc`) itself, so each etcd
//! runs in a mount namespace of its own where a hosts file of this node's is bound over
//! `/etc/hosts`; the operator, outside, reaches them through an [`EtcdUrlMap`] from member
//! names to the addresses chosen here.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_operator::observe::EtcdUrlMap;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;

use super::loopback::free_address;

/// The etcd binary the sandbox's built-in image map runs for `image` (3.5.1, 3.5.36, 3.6.17,
/// 3.7.4 or Debian's 3.4.23, by its tag), so the node this test plays runs what a real node of
/// the sandbox would.
fn etcd_binary(image: &str) -> PathBuf {
    let map = kube_sandbox::runtime::ImageMap::builtin();
    let rule = map
        .resolve(image)
        .unwrap_or_else(|e| panic!("the sandbox cannot run {image}: {e}"));
    rule.files["/usr/local/bin/etcd"].clone()
}

struct Running {
    pod_uid: String,
    child: Child,
}

/// The node. Dropping it kills every etcd it started.
pub struct ManualNode {
    client: Client,
    namespace: String,
    addresses: Arc<Mutex<HashMap<String, Ipv4Addr>>>,
    /// `address dns-name` lines, written to the hosts file every etcd sees.
    hosts: Mutex<Vec<String>>,
    running: Mutex<HashMap<String, Running>>,
    dir: tempfile::TempDir,
}

impl ManualNode {
    pub fn new(client: Client, namespace: &str) -> Arc<ManualNode> {
        Arc::new(ManualNode {
            client,
            namespace: namespace.to_string(),
            addresses: Arc::default(),
            hosts: Mutex::default(),
            running: Mutex::default(),
            dir: tempfile::tempdir().expect("a directory for etcd data"),
        })
    }

    /// Where the operator dials each member: `http://<member>.<...>:<port>` → the member's
    /// loopback address.
    pub fn url_map(&self) -> EtcdUrlMap {
        let addresses = self.addresses.clone();
        EtcdUrlMap::new(move |url| {
            let Some((scheme, rest)) = url.split_once("://") else {
                return url.to_string();
            };
            let Some((host, port)) = rest.split_once(':') else {
                return url.to_string();
            };
            let member = host.split('.').next().unwrap_or_default();
            match addresses.lock().unwrap().get(member) {
                Some(ip) => format!("{scheme}://{ip}:{port}"),
                None => url.to_string(),
            }
        })
    }

    /// The client URL this node gave `member`.
    pub fn client_url(&self, member: &str) -> Option<String> {
        self.addresses
            .lock()
            .unwrap()
            .get(member)
            .map(|ip| format!("http://{ip}:2379"))
    }

    /// The client URLs of every member whose etcd runs now.
    pub fn running_client_urls(&self) -> Vec<String> {
        self.running_members()
            .iter()
            .filter_map(|m| self.client_url(m))
            .collect()
    }

    /// Members whose etcd runs now.
    pub fn running_members(&self) -> Vec<String> {
        let mut names: Vec<String> = self.running.lock().unwrap().keys().cloned().collect();
        names.sort();
        names
    }

    /// Runs until the task is aborted, syncing every 100 ms.
    pub async fn run(self: Arc<Self>) {
        loop {
            if let Err(e) = self.sync().await {
                eprintln!("manual node: {e}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn sync(&self) -> Result<(), kube::Error> {
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), &self.namespace);
        let pvcs: Api<PersistentVolumeClaim> =
            Api::namespaced(self.client.clone(), &self.namespace);
        let list = pods.list(&ListParams::default()).await?;
        let live: HashMap<String, &Pod> = list
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| (p.metadata.name.clone().unwrap_or_default(), p))
            .collect();
        // Stop the etcd of Pods that are gone, terminating, or replaced by a new Pod.
        {
            let mut running = self.running.lock().unwrap();
            let stale: Vec<String> = running
                .iter()
                .filter(|(name, r)| {
                    live.get(*name).and_then(|p| p.metadata.uid.as_deref())
                        != Some(r.pod_uid.as_str())
                })
                .map(|(name, _)| name.clone())
                .collect();
            for name in stale {
                if let Some(mut r) = running.remove(&name) {
                    let _ = r.child.kill();
                    let _ = r.child.wait();
                }
            }
        }
        for (name, pod) in &live {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            if self.running.lock().unwrap().contains_key(name) {
                continue;
            }
            let claim = pvcs.get_opt(&format!("data-{name}")).await?;
            let data_key = claim
                .and_then(|c| c.metadata.uid)
                .unwrap_or_else(|| format!("memory-{uid}"));
            let ip = self.address_of(name);
            self.publish_host(pod, ip);
            let child = self.start_etcd(pod, ip, &data_key);
            self.running.lock().unwrap().insert(
                name.clone(),
                Running {
                    pod_uid: uid,
                    child,
                },
            );
            let now = k8s_openapi::jiff::Timestamp::now().to_string();
            let status = json!({"status": {
                "phase": "Running",
                "podIP": ip.to_string(),
                "startTime": now,
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
                "containerStatuses": [{
                    "name": "etcd", "ready": true, "restartCount": 0, "image": "etcd", "imageID": "",
                    "state": {"running": {"startedAt": now}},
                }],
            }});
            pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
                .await?;
        }
        Ok(())
    }

    fn address_of(&self, member: &str) -> Ipv4Addr {
        *self
            .addresses
            .lock()
            .unwrap()
            .entry(member.to_string())
            .or_insert_with(free_address)
    }

    /// Adds the Pod's DNS name to the hosts file, rewriting the file in place (same inode) so
    /// the bind mounts of running members see it.
    fn publish_host(&self, pod: &Pod, ip: Ipv4Addr) {
        let spec = pod.spec.as_ref().expect("a Pod spec");
        let (Some(hostname), Some(subdomain)) = (&spec.hostname, &spec.subdomain) else {
            return;
        };
        let line = format!("{ip} {hostname}.{subdomain}.{}.svc", self.namespace);
        let mut hosts = self.hosts.lock().unwrap();
        if !hosts.contains(&line) {
            hosts.push(line);
        }
        let text = format!("127.0.0.1 localhost\n{}\n", hosts.join("\n"));
        std::fs::write(self.hosts_path(), text).expect("writing the hosts file");
    }

    fn hosts_path(&self) -> PathBuf {
        self.dir.path().join("hosts")
    }

    fn start_etcd(&self, pod: &Pod, ip: Ipv4Addr, data_key: &str) -> Child {
        let container = &pod.spec.as_ref().expect("a Pod spec").containers[0];
        let command = container.command.clone().expect("the etcd command line");
        let data = self.dir.path().join(data_key);
        std::fs::create_dir_all(&data).expect("a data directory");
        let args: Vec<String> = command[1..]
            .iter()
            .map(|arg| match arg.split_once('=') {
                Some(("--data-dir", _)) => format!("--data-dir={}", data.display()),
                Some(("--listen-peer-urls", _)) => format!("--listen-peer-urls=http://{ip}:2380"),
                Some(("--listen-client-urls", _)) => {
                    format!("--listen-client-urls=http://{ip}:2379")
                }
                Some(("--listen-metrics-urls", _)) => {
                    format!("--listen-metrics-urls=http://{ip}:2381")
                }
                _ => arg.clone(),
            })
            .collect();
        // The container's environment as the kubelet makes it: plain values, and fieldRefs to
        // the Pod's annotations (where the operator puts etcd's initial-cluster settings).
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        let env: Vec<(String, String)> = container
            .env
            .iter()
            .flatten()
            .map(|e| {
                let value = e.value.clone().unwrap_or_else(|| {
                    let path = e
                        .value_from
                        .as_ref()
                        .and_then(|f| f.field_ref.as_ref())
                        .map(|f| f.field_path.clone())
                        .unwrap_or_default();
                    path.strip_prefix("metadata.annotations['")
                        .and_then(|p| p.strip_suffix("']"))
                        .and_then(|key| annotations.get(key).cloned())
                        .unwrap_or_default()
                });
                (e.name.clone(), value)
            })
            .collect();
        let log = std::fs::File::create(self.log_path(pod)).expect("an etcd log file");
        // unshare(1) makes the mount namespace private; the shell binds the hosts file over
        // /etc/hosts and execs etcd, so the child's PID is etcd's.
        Command::new("unshare")
            .args([
                "--mount",
                "sh",
                "-c",
                "mount --bind \"$0\" /etc/hosts && exec \"$@\"",
            ])
            .arg(self.hosts_path())
            .arg(etcd_binary(container.image.as_deref().unwrap_or_default()))
            .args(&args)
            .envs(env)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log handle"))
            .stderr(log)
            .spawn()
            .expect("etcd starts")
    }

    fn log_path(&self, pod: &Pod) -> PathBuf {
        self.dir.path().join(format!(
            "{}-{}.log",
            pod.metadata.name.as_deref().unwrap_or_default(),
            pod.metadata.uid.as_deref().unwrap_or_default()
        ))
    }

    /// Every etcd log, for a failure message.
    pub fn logs(&self) -> String {
        let mut text = String::new();
        if let Ok(entries) = std::fs::read_dir(self.dir.path()) {
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().is_some_and(|e| e == "log") {
                    let log = std::fs::read_to_string(&path).unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(15).collect();
                    text.push_str(&format!("--- {} ---\n", path.display()));
                    for line in tail.into_iter().rev() {
                        text.push_str(line);
                        text.push('\n');
                    }
                }
            }
        }
        text
    }
}

impl Drop for ManualNode {
    fn drop(&mut self) {
        for (_, mut r) in self.running.lock().unwrap().drain() {
            let _ = r.child.kill();
            let _ = r.child.wait();
        }
    }
}
