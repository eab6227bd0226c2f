//! What every node agent of a sandbox shares: the API client, the runtime and network, caches of
//! the objects Pods refer to (Services, Secrets, ConfigMaps), and the table of Pod sandboxes
//! that `pods/log` and the faults reach.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::env::PodObjects;
use crate::controllers::TimeScale;
use crate::controllers::informer::watch_into_store;
use crate::network::{ClusterNetwork, PodNetwork};
use crate::runtime::{ContainerConfig, ContainerRuntime, PodSandbox};

/// The state every node agent shares.
pub(crate) struct KubeletContext {
    pub client: Client,
    pub runtime: ContainerRuntime,
    pub network: Arc<ClusterNetwork>,
    pub time_scale: TimeScale,
    pub services: Store<Service>,
    secrets: Store<Secret>,
    config_maps: Store<ConfigMap>,
    /// Bumped whenever a Secret or ConfigMap changes, so Pods refresh their volume files.
    pub sources_changed: tokio::sync::watch::Sender<u64>,
    pub pods: PodTable,
    /// The real control plane's CA, when the nodes join one (see `KubeletConfig`).
    pub control_plane_ca: Option<Arc<crate::kubernetes::pki::ClusterCa>>,
    /// The zone of each node.
    pub zones: std::collections::BTreeMap<String, String>,
}

impl KubeletContext {
    /// The sandbox of Pod `namespace/name` on any node.
    pub(crate) fn pod_entry(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<PodEntry>, super::faults::FaultError> {
        self.pods
            .get(namespace, name)
            .ok_or_else(|| super::faults::FaultError::NoSuchPod {
                namespace: namespace.into(),
                name: name.into(),
            })
    }

    pub fn start(config: &super::KubeletConfig, token: &CancellationToken) -> Arc<Self> {
        let client = config.client.clone();
        let services = watch_into_store(
            Api::<Service>::all(client.clone()),
            watcher::Config::default(),
            Arc::new(Notify::new()),
            token.clone(),
        );
        let sources = Arc::new(Notify::new());
        let secrets = watch_into_store(
            Api::<Secret>::all(client.clone()),
            watcher::Config::default(),
            sources.clone(),
            token.clone(),
        );
        let config_maps = watch_into_store(
            Api::<ConfigMap>::all(client.clone()),
            watcher::Config::default(),
            sources.clone(),
            token.clone(),
        );
        let (sources_changed, _) = tokio::sync::watch::channel(0);
        let context = Arc::new(Self {
            client,
            runtime: config.runtime.clone(),
            network: config.network.clone(),
            time_scale: config.time_scale,
            control_plane_ca: config.control_plane_ca.clone(),
            zones: config.zones.clone(),
            services,
            secrets,
            config_maps,
            sources_changed,
            pods: PodTable::default(),
        });
        let weak = Arc::downgrade(&context);
        let token = token.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = token.cancelled() => return,
                    () = sources.notified() => {}
                }
                let Some(context) = weak.upgrade() else {
                    return;
                };
                context.sources_changed.send_modify(|version| *version += 1);
            }
        });
        context
    }

    /// The ConfigMaps and Secrets of `namespace` named, from the caches or else the API (a Pod
    /// created right after its ConfigMap may come before the cache has it). Missing ones are
    /// left out: whoever needs them reports it.
    pub async fn pod_objects(
        &self,
        namespace: &str,
        config_maps: &[String],
        secrets: &[String],
    ) -> Result<PodObjects, kube::Error> {
        let mut objects = PodObjects::default();
        for name in config_maps {
            if let Some(found) =
                cached_or_fetched(&self.config_maps, &self.client, namespace, name).await?
            {
                objects.config_maps.insert(name.clone(), found);
            }
        }
        for name in secrets {
            if let Some(found) =
                cached_or_fetched(&self.secrets, &self.client, namespace, name).await?
            {
                objects.secrets.insert(name.clone(), found);
            }
        }
        Ok(objects)
    }

    /// The same objects from the caches only, for refreshing volume files without API calls.
    pub fn cached_pod_objects(
        &self,
        namespace: &str,
        config_maps: &[String],
        secrets: &[String],
    ) -> PodObjects {
        let mut objects = PodObjects::default();
        for name in config_maps {
            if let Some(found) = self
                .config_maps
                .get(&ObjectRef::new(name).within(namespace))
            {
                objects.config_maps.insert(name.clone(), (*found).clone());
            }
        }
        for name in secrets {
            if let Some(found) = self.secrets.get(&ObjectRef::new(name).within(namespace)) {
                objects.secrets.insert(name.clone(), (*found).clone());
            }
        }
        objects
    }
}

async fn cached_or_fetched<K>(
    store: &Store<K>,
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<K>, kube::Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    if let Some(found) = store.get(&ObjectRef::new(name).within(namespace)) {
        return Ok(Some((*found).clone()));
    }
    Api::<K>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
}

/// A Pod's sandbox as the rest of the sandbox reaches it (logs, faults). It outlives its worker
/// when a node stops, so the Pod's logs stay readable and a restarted node adopts it.
pub(crate) struct PodEntry {
    pub uid: String,
    pub namespace: String,
    pub name: String,
    pub node: String,
    /// The Pod as it was set up (with the service-account volume added).
    pub effective: k8s_openapi::api::core::v1::Pod,
    pub sandbox: Arc<PodSandbox>,
    pub network: Mutex<Option<Arc<PodNetwork>>>,
    /// The configuration of each container's current run, for exec.
    pub configs: Mutex<HashMap<String, ContainerConfig>>,
}

impl PodEntry {
    pub fn network(&self) -> Option<Arc<PodNetwork>> {
        self.network.lock().expect("pod network lock").clone()
    }
}

/// Every Pod sandbox of the sandbox, by namespace and name, and the cuts between Pods that
/// follow Pods as they come and go (see [`Peers`]).
#[derive(Default)]
pub(crate) struct PodTable {
    entries: Mutex<HashMap<(String, String), Arc<PodEntry>>>,
    cuts: Mutex<Vec<Cut>>,
}

/// Whom a Pod is cut off from: Pods of one namespace, by name or all of them. The cut follows
/// the names, not the addresses: a Pod created while the cut stands (a new Pod of a
/// Deployment, a Pod recreated under the same name) is cut off too, before its containers start.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Peers {
    pub namespace: String,
    /// These Pods of the namespace; `None`: every Pod of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<Vec<String>>,
}

impl Peers {
    /// Every Pod of `namespace`.
    pub fn namespace(namespace: impl Into<String>) -> Peers {
        Peers {
            namespace: namespace.into(),
            pods: None,
        }
    }

    /// The Pods named, of `namespace`.
    pub fn pods(namespace: impl Into<String>, pods: &[&str]) -> Peers {
        Peers {
            namespace: namespace.into(),
            pods: Some(pods.iter().map(|p| p.to_string()).collect()),
        }
    }

    pub fn matches(&self, namespace: &str, name: &str) -> bool {
        self.namespace == namespace
            && self
                .pods
                .as_ref()
                .is_none_or(|pods| pods.iter().any(|p| p == name))
    }
}

impl std::fmt::Display for Peers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.pods {
            None => write!(f, "every Pod of namespace {}", self.namespace),
            Some(pods) => write!(
                f,
                "Pods {} of namespace {}",
                pods.join(", "),
                self.namespace
            ),
        }
    }
}

/// A Pod cut off from [`Peers`].
#[derive(Clone)]
pub(crate) struct Cut {
    pub uid: String,
    pub network: Arc<PodNetwork>,
    pub peers: Vec<Peers>,
}

impl Cut {
    fn matches(&self, entry: &PodEntry) -> bool {
        entry.uid != self.uid
            && self
                .peers
                .iter()
                .any(|p| p.matches(&entry.namespace, &entry.name))
    }
}

impl PodTable {
    pub fn insert(&self, entry: Arc<PodEntry>) {
        let key = (entry.namespace.clone(), entry.name.clone());
        self.entries
            .lock()
            .expect("pod table lock")
            .insert(key, entry);
    }

    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<PodEntry>> {
        self.entries
            .lock()
            .expect("pod table lock")
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    pub fn by_uid(&self, uid: &str) -> Option<Arc<PodEntry>> {
        self.entries
            .lock()
            .expect("pod table lock")
            .values()
            .find(|e| e.uid == uid)
            .cloned()
    }

    /// Removes the entry of `uid` (not a newer Pod of the same name). A cut of that Pod ends
    /// with it, and its address leaves the cuts of others (another Pod may get it next).
    pub fn remove(&self, uid: &str) -> Option<Arc<PodEntry>> {
        let removed = {
            let mut entries = self.entries.lock().expect("pod table lock");
            let key = entries
                .iter()
                .find(|(_, e)| e.uid == uid)
                .map(|(k, _)| k.clone())?;
            entries.remove(&key)
        }?;
        let stale: Vec<Cut> = {
            let mut cuts = self.cuts.lock().expect("cuts lock");
            cuts.retain(|c| c.uid != uid);
            cuts.iter()
                .filter(|c| c.matches(&removed))
                .cloned()
                .collect()
        };
        if let (Some(network), false, Ok(runtime)) = (
            removed.network(),
            stale.is_empty(),
            tokio::runtime::Handle::try_current(),
        ) {
            let ip = network.ip();
            runtime.spawn(async move {
                for cut in stale {
                    if let Err(error) = cut.network.uncut_from(ip).await {
                        tracing::warn!(%error, %ip, "removing a gone Pod's address from a cut failed");
                    }
                }
            });
        }
        Some(removed)
    }

    /// Cuts the Pod of `entry` off from `peers` (adding to a cut it has): every Pod matching
    /// them now, and every one that comes later. Returns how many Pods it is cut from now.
    pub async fn cut(
        &self,
        entry: &PodEntry,
        network: Arc<PodNetwork>,
        peers: Peers,
    ) -> Result<usize, crate::network::NetworkError> {
        let cut = {
            let mut cuts = self.cuts.lock().expect("cuts lock");
            match cuts.iter_mut().find(|c| c.uid == entry.uid) {
                Some(existing) => {
                    if !existing.peers.contains(&peers) {
                        existing.peers.push(peers);
                    }
                    existing.clone()
                }
                None => {
                    let cut = Cut {
                        uid: entry.uid.clone(),
                        network,
                        peers: vec![peers],
                    };
                    cuts.push(cut.clone());
                    cut
                }
            }
        };
        let targets: Vec<std::net::Ipv4Addr> = self
            .entries
            .lock()
            .expect("pod table lock")
            .values()
            .filter(|e| cut.matches(e))
            .filter_map(|e| e.network().map(|n| n.ip()))
            .collect();
        for ip in &targets {
            cut.network.cut_from(*ip).await?;
        }
        Ok(targets.len())
    }

    /// Ends every cut of the Pod `uid`; returns whether it had one.
    pub async fn heal(&self, uid: &str) -> Result<bool, crate::network::NetworkError> {
        let cut = {
            let mut cuts = self.cuts.lock().expect("cuts lock");
            let found = cuts.iter().position(|c| c.uid == uid);
            found.map(|i| cuts.remove(i))
        };
        let Some(cut) = cut else {
            return Ok(false);
        };
        for ip in cut.network.cut_peers().await {
            cut.network.uncut_from(ip).await?;
        }
        Ok(true)
    }

    /// A new Pod's place in the cuts, before its containers start: cut off from every Pod
    /// whose cut names it, and its address out of the others (a gone Pod's address reused).
    pub async fn admit_to_cuts(&self, entry: &PodEntry) {
        let Some(ip) = entry.network().map(|n| n.ip()) else {
            return;
        };
        let cuts: Vec<Cut> = self.cuts.lock().expect("cuts lock").clone();
        for cut in cuts.iter().filter(|c| c.uid != entry.uid) {
            let done = if cut.matches(entry) {
                cut.network.cut_from(ip).await
            } else {
                cut.network.uncut_from(ip).await
            };
            if let Err(error) = done {
                tracing::warn!(%error, pod = %entry.name, "applying a cut to a new Pod failed");
            }
        }
    }

    pub fn on_node(&self, node: &str) -> Vec<Arc<PodEntry>> {
        self.entries
            .lock()
            .expect("pod table lock")
            .values()
            .filter(|e| e.node == node)
            .cloned()
            .collect()
    }

    pub fn drain(&self) -> Vec<Arc<PodEntry>> {
        self.entries
            .lock()
            .expect("pod table lock")
            .drain()
            .map(|(_, e)| e)
            .collect()
    }
}
