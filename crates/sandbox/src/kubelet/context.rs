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
}

impl KubeletContext {
    pub fn start(
        client: Client,
        runtime: ContainerRuntime,
        network: Arc<ClusterNetwork>,
        time_scale: TimeScale,
        token: &CancellationToken,
    ) -> Arc<Self> {
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
            runtime,
            network,
            time_scale,
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

/// Every Pod sandbox of the sandbox, by namespace and name.
#[derive(Default)]
pub(crate) struct PodTable {
    entries: Mutex<HashMap<(String, String), Arc<PodEntry>>>,
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

    /// Removes the entry of `uid` (not a newer Pod of the same name).
    pub fn remove(&self, uid: &str) -> Option<Arc<PodEntry>> {
        let mut entries = self.entries.lock().expect("pod table lock");
        let key = entries
            .iter()
            .find(|(_, e)| e.uid == uid)
            .map(|(k, _)| k.clone())?;
        entries.remove(&key)
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
