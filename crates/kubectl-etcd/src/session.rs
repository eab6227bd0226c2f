//! Reaching a cluster the way the operator does, from outside Kubernetes: the kubeconfig's
//! context and namespace, the EtcdCluster and what it owns (read once, into the same stores
//! the operator's `observe` reads), and etcd through one port-forward per member Pod (the
//! Kubernetes API's `pods/portforward`), dialled with the access `observe` builds from the
//! cluster's Secrets (CA, the operator's client certificate, root's password).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, anyhow, bail};
use etcd_operator::build::member_client_url;
use etcd_operator::domain::settings::OperatorSettings;
use etcd_operator::etcd::{EtcdClient, Timeouts};
use etcd_operator::observe::{
    CachedPod, CachedPvc, ClusterIndex, EtcdUrlMap, Fills, Observer, Stores,
};
use etcd_operator::plan::Observed;
use etcd_operator_api::labels::CLUSTER;
use etcd_operator_api::{EtcdCluster, EtcdMember};
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

/// etcd's client port in the member Pods.
const CLIENT_PORT: u16 = 2379;

/// The connection flags, as kubectl takes them.
#[derive(Clone, Debug, Default)]
pub struct Target {
    pub kubeconfig: Option<std::path::PathBuf>,
    pub context: Option<String>,
    pub namespace: Option<String>,
    /// The EtcdCluster; the namespace's only one when not given.
    pub cluster: Option<String>,
}

/// A usage or lookup problem the user fixes by changing the command (exit code 1, message
/// says what to do).
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// The Kubernetes client and namespace of the chosen context.
pub async fn kube_client(target: &Target) -> anyhow::Result<(Client, String)> {
    let options = kube::config::KubeConfigOptions {
        context: target.context.clone(),
        cluster: None,
        user: None,
    };
    let kubeconfig = match &target.kubeconfig {
        Some(path) => kube::config::Kubeconfig::read_from(path)
            .with_context(|| format!("reading the kubeconfig {}", path.display()))?,
        None => kube::config::Kubeconfig::read()
            .context("reading the kubeconfig ($KUBECONFIG or ~/.kube/config); pass --kubeconfig")?,
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .context("loading the kubeconfig context (check --context)")?;
    let namespace = target
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = etcd_operator_api::kube_client::client_for(config)
        .context("building the Kubernetes client")?;
    Ok((client, namespace))
}

/// The EtcdCluster named, or the namespace's only one.
pub async fn find_cluster(
    client: &Client,
    namespace: &str,
    name: Option<&str>,
) -> anyhow::Result<EtcdCluster> {
    let api: Api<EtcdCluster> = Api::namespaced(client.clone(), namespace);
    if let Some(name) = name {
        return match api.get_opt(name).await {
            Ok(Some(cluster)) => Ok(cluster),
            Ok(None) => Err(Usage(format!(
                "EtcdCluster {namespace}/{name} not found; list them with `kubectl get etcdclusters -n {namespace}`"
            ))
            .into()),
            Err(err) => Err(anyhow!(err).context(format!("reading EtcdCluster {namespace}/{name}"))),
        };
    }
    let list = api
        .list(&ListParams::default())
        .await
        .with_context(|| format!("listing the EtcdClusters of namespace {namespace}"))?;
    match list.items.as_slice() {
        [only] => Ok(only.clone()),
        [] => Err(Usage(format!(
            "no EtcdCluster in namespace {namespace}; pass -n <namespace>"
        ))
        .into()),
        many => Err(Usage(format!(
            "namespace {namespace} has {} EtcdClusters ({}); name one: kubectl etcdop <command> <cluster>",
            many.len(),
            many.iter()
                .filter_map(|c| c.metadata.name.as_deref())
                .collect::<Vec<_>>()
                .join(", ")
        ))
        .into()),
    }
}

/// A store holding the cluster's objects of one kind, listed once.
async fn listed<K>(api: Api<K>, cluster: &str) -> anyhow::Result<Store<K>>
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, mut writer) = reflector::store::<K>();
    let items = api
        .list(&ListParams::default().labels(&format!("{CLUSTER}={cluster}")))
        .await
        .with_context(|| format!("listing the {} of EtcdCluster {cluster}", K::plural(&())))?;
    writer.apply_watcher_event(&watcher::Event::Init);
    for item in items.items {
        writer.apply_watcher_event(&watcher::Event::InitApply(item));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    Ok(reader)
}

/// One local listener per member Pod; each accepted connection is one `pods/portforward` to
/// the Pod's client port.
pub(crate) struct Forward {
    pub(crate) address: SocketAddr,
    last_error: Arc<Mutex<Option<String>>>,
}

pub(crate) async fn forward(pods: Api<Pod>, pod: String) -> anyhow::Result<Forward> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("opening a local port for the port-forward")?;
    let address = listener.local_addr()?;
    let last_error = Arc::new(Mutex::new(None));
    let errors = last_error.clone();
    tokio::spawn(async move {
        while let Ok((mut local, _)) = listener.accept().await {
            let (pods, pod, errors) = (pods.clone(), pod.clone(), errors.clone());
            tokio::spawn(async move {
                match pods.portforward(&pod, &[CLIENT_PORT]).await {
                    Ok(mut forwarder) => {
                        if let Some(mut remote) = forwarder.take_stream(CLIENT_PORT) {
                            let _ = tokio::io::copy_bidirectional(&mut local, &mut remote).await;
                        }
                        forwarder.abort();
                    }
                    Err(err) => {
                        *errors.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!(
                            "port-forward to pod {pod} port {CLIENT_PORT} failed: {err}"
                        ));
                    }
                }
            });
        }
    });
    Ok(Forward {
        address,
        last_error,
    })
}

/// A cluster observed as the operator observes it, with etcd reached through port-forwards.
pub struct Session {
    pub client: Client,
    pub namespace: String,
    pub name: String,
    pub observed: Observed,
    /// Member name → the local URL dialling its Pod.
    local_urls: HashMap<String, String>,
    forwards: HashMap<String, Forward>,
}

impl Session {
    pub async fn open(target: &Target) -> anyhow::Result<Session> {
        let (client, namespace) = kube_client(target).await?;
        let cluster = find_cluster(&client, &namespace, target.cluster.as_deref()).await?;
        let name = cluster.metadata.name.clone().unwrap_or_default();
        let ns = |c: &Client| c.clone();
        let members = listed(
            Api::<EtcdMember>::namespaced(ns(&client), &namespace),
            &name,
        )
        .await?;
        let pvcs = listed(Api::<CachedPvc>::namespaced(ns(&client), &namespace), &name).await?;
        let stores = Stores {
            clusters: listed(
                Api::<EtcdCluster>::namespaced(ns(&client), &namespace),
                &name,
            )
            .await
            .unwrap_or_else(|_| reflector::store().0),
            // Listed once: the indexes are of what the lists returned.
            member_index: ClusterIndex::of(&members),
            members,
            pods: listed(Api::<CachedPod>::namespaced(ns(&client), &namespace), &name).await?,
            pvc_index: ClusterIndex::of(&pvcs),
            pvcs,
            services: listed(Api::<Service>::namespaced(ns(&client), &namespace), &name).await?,
            pdbs: listed(
                Api::<PodDisruptionBudget>::namespaced(ns(&client), &namespace),
                &name,
            )
            .await?,
            fills: Fills::already(),
        };
        let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        let mut forwards = HashMap::new();
        let mut by_url = HashMap::new();
        let mut local_urls = HashMap::new();
        for member in stores.members.state() {
            let member_name = member.metadata.name.clone().unwrap_or_default();
            let pod_name = member
                .status
                .as_ref()
                .and_then(|s| s.pod_name.clone())
                .unwrap_or_else(|| member_name.clone());
            if stores
                .pods
                .state()
                .iter()
                .all(|p| p.metadata.name.as_deref() != Some(&pod_name))
            {
                continue;
            }
            let forward = forward(pods.clone(), pod_name).await?;
            let url = member_client_url(&member);
            let scheme = url.split("://").next().unwrap_or("http");
            let local = format!("{scheme}://127.0.0.1:{}", forward.address.port());
            by_url.insert(url, local.clone());
            local_urls.insert(member_name.clone(), local);
            forwards.insert(member_name, forward);
        }
        let by_url = Arc::new(by_url);
        let observer = Observer {
            client: client.clone(),
            stores,
            settings: OperatorSettings::default(),
            etcd_urls: EtcdUrlMap::new(move |url| {
                by_url.get(url).cloned().unwrap_or_else(|| url.to_string())
            }),
            root_passwords: Default::default(),
            connections: Default::default(),
        };
        let observed = observer
            .observe(&cluster)
            .await
            .with_context(|| format!("observing EtcdCluster {namespace}/{name}"))?;
        Ok(Session {
            client,
            namespace,
            name,
            observed,
            local_urls,
            forwards,
        })
    }

    /// The local URL that reaches member `name`'s Pod.
    pub fn local_url(&self, member: &str) -> anyhow::Result<&str> {
        if let Some(url) = self.local_urls.get(member) {
            return Ok(url);
        }
        let known: Vec<&str> = self
            .observed
            .members
            .iter()
            .filter_map(|m| m.member.metadata.name.as_deref())
            .collect();
        if known.contains(&member) {
            bail!(Usage(format!(
                "member {member} has no Pod to connect to; see `kubectl get pods -n {} -l {CLUSTER}={}`",
                self.namespace, self.name
            )));
        }
        bail!(Usage(format!(
            "EtcdCluster {} has no member {member}; its members are: {}",
            self.name,
            known.join(", ")
        )))
    }

    /// Every local URL, in member order.
    pub fn local_urls(&self) -> Vec<String> {
        self.observed
            .members
            .iter()
            .filter_map(|m| m.member.metadata.name.as_deref())
            .filter_map(|n| self.local_urls.get(n).cloned())
            .collect()
    }

    /// Why the port-forward to member `name` failed, if it did.
    pub fn forward_error(&self, member: &str) -> Option<String> {
        self.forwards.get(member).and_then(|f| {
            f.last_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
        })
    }

    /// A client over every member, with the operator's access.
    pub async fn etcd(&self) -> anyhow::Result<EtcdClient> {
        let urls = self.local_urls();
        if urls.is_empty() {
            bail!(
                "EtcdCluster {}/{} has no member Pod to connect to",
                self.namespace,
                self.name
            );
        }
        EtcdClient::connect(urls, Timeouts::OBSERVE, &self.observed.security.access)
            .await
            .map_err(|e| anyhow!(self.explain(e.to_string())))
    }

    /// A client of exactly one member.
    pub async fn etcd_member(
        &self,
        member: &str,
        timeouts: Timeouts,
    ) -> anyhow::Result<EtcdClient> {
        let url = self.local_url(member)?;
        EtcdClient::connect_endpoint(url, timeouts, &self.observed.security.access)
            .await
            .map_err(|e| anyhow!(self.explain_member(member, e.to_string())))
    }

    /// The member's name for a local URL.
    pub fn member_at(&self, url: &str) -> Option<&str> {
        self.local_urls
            .iter()
            .find(|(_, u)| *u == url)
            .map(|(n, _)| n.as_str())
    }

    fn explain(&self, error: String) -> String {
        let forwards: Vec<String> = self
            .forwards
            .keys()
            .filter_map(|m| self.forward_error(m))
            .collect();
        if forwards.is_empty() {
            error
        } else {
            format!("{error} ({})", forwards.join("; "))
        }
    }

    fn explain_member(&self, member: &str, error: String) -> String {
        match self.forward_error(member) {
            Some(forward) => format!("{error} ({forward})"),
            None => error,
        }
    }
}
