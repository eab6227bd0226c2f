//! `observe`: everything one planning pass needs, in one [`Observed`] value.
//!
//! Kubernetes objects come from the watch-backed caches ([`Stores`]); an object the plan
//! expects by name but the cache lacks (created a moment ago, or made by someone else without
//! our labels) is read once with a GET, so the planner never creates what already exists and
//! sees a foreign object for what it is. etcd is asked live, through
//! [`observe_cluster`](crate::etcd::observe_cluster), at the client URLs of the members that
//! have a Pod; an unreachable etcd is a fact in the result, never an error.

mod endpoints;
mod stores;

pub use endpoints::EtcdUrlMap;
pub use stores::{Scope, Stores, cluster_of, owned_objects, reflect};

use etcd_operator_api::labels::CLUSTER;
use etcd_operator_api::shared::StorageMedium;
use etcd_operator_api::{EtcdCluster, EtcdMember};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use crate::build::{
    OperatorSettings, client_service_name, headless_service_name, member_client_url, pvc_name,
};
use crate::etcd::{EtcdView, Timeouts, observe_cluster};
use crate::plan::{Observed, ObservedMember, PodFacts, PvcFacts};

/// What `observe` reads with.
#[derive(Clone)]
pub struct Observer {
    pub client: Client,
    pub stores: Stores,
    pub settings: OperatorSettings,
    pub etcd_urls: EtcdUrlMap,
}

/// A read of the Kubernetes API failed (a cache miss read directly).
#[derive(Debug, thiserror::Error)]
#[error("reading {kind} {namespace}/{name}: {source}")]
pub struct ObserveError {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    #[source]
    pub source: kube::Error,
}

impl Observer {
    /// Observes `cluster` and everything it owns.
    pub async fn observe(&self, cluster: &EtcdCluster) -> Result<Observed, ObserveError> {
        let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
        let name = cluster.metadata.name.clone().unwrap_or_default();

        let mut members: Vec<ObservedMember> = Vec::new();
        for member in self.cluster_members(&namespace, &name) {
            members.push(self.observe_member(&namespace, member).await?);
        }

        let headless_service = self
            .cached_or_get(
                &self.stores.services,
                &namespace,
                &headless_service_name(&name),
            )
            .await?;
        let client_service = self
            .cached_or_get(
                &self.stores.services,
                &namespace,
                &client_service_name(&name),
            )
            .await?;
        let pdb = self
            .cached_or_get::<PodDisruptionBudget>(&self.stores.pdbs, &namespace, &name)
            .await?;

        let etcd = self.observe_etcd(&members).await;
        Ok(Observed {
            cluster: cluster.clone(),
            members,
            headless_service,
            client_service,
            pdb,
            etcd,
            settings: self.settings.clone(),
        })
    }

    /// The EtcdMembers labelled with the cluster, by name.
    fn cluster_members(&self, namespace: &str, cluster: &str) -> Vec<EtcdMember> {
        let mut members: Vec<EtcdMember> = self
            .stores
            .members
            .state_filter(|m| {
                m.metadata.namespace.as_deref() == Some(namespace)
                    && m.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(CLUSTER))
                        .is_some_and(|c| c == cluster)
            })
            .into_iter()
            .map(|m| (*m).clone())
            .collect();
        members.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        members
    }

    async fn observe_member(
        &self,
        namespace: &str,
        member: EtcdMember,
    ) -> Result<ObservedMember, ObserveError> {
        let name = member.metadata.name.clone().unwrap_or_default();
        let pod = self
            .cached_or_get::<Pod>(&self.stores.pods, namespace, &name)
            .await?
            .map(|p| PodFacts::from_pod(&p));
        let pvc = if member.spec.storage.medium_or_default() == StorageMedium::Memory {
            None
        } else {
            self.cached_or_get::<PersistentVolumeClaim>(
                &self.stores.pvcs,
                namespace,
                &pvc_name(&name),
            )
            .await?
            .map(|p| PvcFacts::from_pvc(&p))
        };
        Ok(ObservedMember { member, pod, pvc })
    }

    /// The object from the cache, else from a GET (absent from both: `None`).
    async fn cached_or_get<K>(
        &self,
        store: &Store<K>,
        namespace: &str,
        name: &str,
    ) -> Result<Option<K>, ObserveError>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    {
        let key = ObjectRef::<K>::new(name).within(namespace);
        if let Some(cached) = store.get(&key) {
            return Ok(Some((*cached).clone()));
        }
        let api: Api<K> = Api::namespaced(self.client.clone(), namespace);
        api.get_opt(name).await.map_err(|source| ObserveError {
            kind: K::kind(&Default::default()).into_owned(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            source,
        })
    }

    /// What etcd says, asked at the client URLs of the members that have a Pod. The view keeps
    /// those URLs as the planner knows them, whatever address [`EtcdUrlMap`] dialled.
    async fn observe_etcd(&self, members: &[ObservedMember]) -> EtcdView {
        let urls: Vec<String> = members
            .iter()
            .filter(|m| m.pod.is_some())
            .map(|m| member_client_url(&m.member))
            .collect();
        if urls.is_empty() {
            return EtcdView::not_observed("no member has a Pod");
        }
        let dialled: Vec<String> = urls.iter().map(|u| self.etcd_urls.map(u)).collect();
        let mut view = observe_cluster(&dialled, Timeouts::OBSERVE).await;
        for observation in &mut view.endpoints {
            if let Some(i) = dialled.iter().position(|d| *d == observation.endpoint) {
                observation.endpoint = urls[i].clone();
            }
        }
        view
    }
}
