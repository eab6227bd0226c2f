//! The endpoints controller, the cluster DNS records and the Service proxy, kept in step with
//! Services, Pods and Endpoints: a selector Service gets an Endpoints object from its Pods (with
//! the sandbox's own API server; with a real control plane kube-controller-manager writes them,
//! and this controller only reads: it is then what kube-proxy and CoreDNS are); every Service
//! gets its DNS records; every ClusterIP port is proxied to its ready endpoints (an endpoint
//! outside the Pod range, such as the sandbox API server behind `kubernetes`, is reached in the
//! machine's own network).

pub mod endpoints;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{EndpointSubset, Endpoints, Pod, Service};
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, ResourceExt};
use tokio_util::sync::CancellationToken;

use crate::controllers::informer::Informers;
use crate::network::ClusterNetwork;
use crate::network::dns::ServiceDns;
use endpoints::{ProxyRule, has_selector, proxy_rules, service_dns, subsets};

/// How long changes are gathered before one pass (a Deployment's Pods arrive together).
const SETTLE: Duration = Duration::from_millis(20);

struct ServiceController {
    /// Whether this controller writes the Endpoints of selector Services.
    writes_endpoints: bool,
    client: Client,
    network: Arc<ClusterNetwork>,
    services: Store<Service>,
    pods: Store<Pod>,
    endpoints: Store<Endpoints>,
    /// What was applied last, to change only what changed.
    dns: Vec<ServiceDns>,
    proxied: HashMap<SocketAddrV4, Vec<SocketAddr>>,
    /// Endpoints objects this controller wrote, to delete them with their Service.
    managed: HashSet<(String, String)>,
}

/// Runs until `token` is cancelled.
pub(crate) async fn run(
    client: Client,
    network: Arc<ClusterNetwork>,
    writes_endpoints: bool,
    token: CancellationToken,
) {
    let mut informers = Informers::new(&token);
    let services = informers.watch(Api::<Service>::all(client.clone()));
    let pods = informers.watch(Api::<Pod>::all(client.clone()));
    let endpoints = informers.watch(Api::<Endpoints>::all(client.clone()));
    if !informers.synced().await {
        return;
    }
    let changed = informers.changed.clone();
    let mut controller = ServiceController {
        writes_endpoints,
        client,
        network,
        services,
        pods,
        endpoints,
        dns: Vec::new(),
        proxied: HashMap::new(),
        managed: HashSet::new(),
    };
    loop {
        controller.sync().await;
        tokio::select! {
            () = token.cancelled() => return,
            () = changed.notified() => {}
            // A write that failed is tried again even when nothing changes.
            () = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
        tokio::time::sleep(SETTLE).await;
    }
}

impl ServiceController {
    async fn sync(&mut self) {
        let services = self.services.state();
        let pods = self.pods.state();
        let pods: Vec<&Pod> = pods.iter().map(Arc::as_ref).collect();
        let dns_server = self.network.config().dns_server;
        let pod_range = self.network.config().pod_cidr;
        let mut dns = Vec::new();
        let mut rules: Vec<ProxyRule> = Vec::new();
        let mut present = HashSet::new();
        for service in &services {
            let key = (service.namespace().unwrap_or_default(), service.name_any());
            present.insert(key.clone());
            let service_subsets = if has_selector(service) {
                let wanted = subsets(service, &pods);
                if self.writes_endpoints {
                    self.write_endpoints(service, &wanted).await;
                }
                wanted
            } else {
                let reference = ObjectRef::new(&key.1).within(&key.0);
                self.endpoints
                    .get(&reference)
                    .and_then(|e| e.subsets.clone())
                    .unwrap_or_default()
            };
            dns.extend(service_dns(service, &service_subsets));
            rules.extend(
                proxy_rules(service, &service_subsets)
                    .into_iter()
                    .filter(|rule| *rule.frontend.ip() != dns_server),
            );
        }
        self.delete_orphaned_endpoints(&present).await;
        dns.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        if dns != self.dns {
            self.network.dns().set_services(dns.clone());
            self.dns = dns;
        }
        let wanted: HashMap<SocketAddrV4, Vec<SocketAddr>> = rules
            .into_iter()
            .map(|r| (r.frontend, r.backends))
            .collect();
        for (frontend, backends) in &wanted {
            if self.proxied.get(frontend) == Some(backends) {
                continue;
            }
            let outside = backends.iter().find(|b| match b {
                SocketAddr::V4(v4) => !pod_range.contains(*v4.ip()),
                SocketAddr::V6(_) => true,
            });
            let applied = match outside {
                Some(machine) => {
                    self.network
                        .proxy()
                        .set_service_to_machine(*frontend, *machine)
                        .await
                }
                None => {
                    self.network
                        .proxy()
                        .set_service(*frontend, backends.clone())
                        .await
                }
            };
            match applied {
                Ok(()) => {
                    self.proxied.insert(*frontend, backends.clone());
                }
                Err(error) => tracing::warn!(%frontend, %error, "proxying a Service port failed"),
            }
        }
        let gone: Vec<SocketAddrV4> = self
            .proxied
            .keys()
            .filter(|f| !wanted.contains_key(f))
            .copied()
            .collect();
        for frontend in gone {
            self.network.proxy().remove_service(frontend);
            self.proxied.remove(&frontend);
        }
    }

    /// Creates or updates the Service's Endpoints when they differ from `wanted`.
    async fn write_endpoints(&mut self, service: &Service, wanted: &[EndpointSubset]) {
        let namespace = service.namespace().unwrap_or_default();
        let name = service.name_any();
        self.managed.insert((namespace.clone(), name.clone()));
        let api = Api::<Endpoints>::namespaced(self.client.clone(), &namespace);
        let current = self
            .endpoints
            .get(&ObjectRef::new(&name).within(&namespace));
        let wanted_subsets = (!wanted.is_empty()).then(|| wanted.to_vec());
        let labels: BTreeMap<String, String> = service.labels().clone();
        let result = match current {
            Some(current)
                if current.subsets == wanted_subsets
                    && current.metadata.labels.clone().unwrap_or_default() == labels =>
            {
                return;
            }
            Some(current) => {
                let mut updated = (*current).clone();
                updated.subsets = wanted_subsets;
                updated.metadata.labels = Some(labels);
                api.replace(&name, &PostParams::default(), &updated)
                    .await
                    .map(drop)
            }
            None => {
                let mut created = Endpoints::default();
                created.metadata.name = Some(name.clone());
                created.metadata.namespace = Some(namespace.clone());
                created.metadata.labels = Some(labels);
                created.subsets = wanted_subsets;
                api.create(&PostParams::default(), &created).await.map(drop)
            }
        };
        match result {
            Ok(()) => {}
            // Someone was faster, or the cache lags: the next pass sees the current object.
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(error) => {
                tracing::warn!(service = %name, %namespace, %error, "writing Endpoints failed")
            }
        }
    }

    async fn delete_orphaned_endpoints(&mut self, present: &HashSet<(String, String)>) {
        let orphans: Vec<(String, String)> = self
            .managed
            .iter()
            .filter(|key| !present.contains(*key))
            .cloned()
            .collect();
        for (namespace, name) in orphans {
            let api = Api::<Endpoints>::namespaced(self.client.clone(), &namespace);
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => {
                    tracing::warn!(service = %name, %namespace, %error, "deleting the Endpoints of a deleted Service failed");
                    continue;
                }
            }
            self.managed.remove(&(namespace, name));
        }
    }
}
