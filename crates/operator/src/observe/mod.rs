//! `observe`: everything one planning pass needs, in one [`Observed`] value.
//!
//! Kubernetes objects come from the watch-backed caches ([`Stores`]); an object the plan
//! expects by name but the cache lacks (created a moment ago, or made by someone else without
//! our labels) is read once with a GET, so the planner never creates what already exists and
//! sees a foreign object for what it is. etcd is asked live, through
//! [`observe_cluster`](crate::etcd::observe_cluster), at the client URLs of the members that
//! have a Pod; an unreachable etcd is a fact in the result, never an error.
//!
//! The [`Observer`]'s reads of the certificates (cert-manager's and the operator-issued ones)
//! are in `certificates`; the caches in `stores`; where each member's etcd is dialed in
//! `endpoints`.

mod cached;
mod certificates;
mod endpoints;
mod index;
mod stores;

pub use cached::{Cached, CachedPod, CachedPvc, FactsOf};
pub use endpoints::EtcdUrlMap;
pub use index::{ClusterIndex, cluster_objects};
pub use stores::{
    Filled, Fills, Scope, Stores, cluster_of, forget_managed_fields, owned_objects, reflect,
    reflect_applied, reflect_indexed,
};

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use etcd_operator_api::shared::StorageMedium;
use etcd_operator_api::{EtcdCluster, EtcdMember};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use crate::build::{client_service_name, headless_service_name, member_client_url, pvc_name};
use crate::domain::settings::OperatorSettings;
use crate::etcd::{
    ClientTls, EtcdAccess, EtcdConnections, EtcdView, Timeouts, observe_cluster_with,
};
use crate::plan::{ClassExpansion, Observed, ObservedMember, PvcFacts, SecurityFacts};
use crate::security::{CertificateValidity, Purpose, check_tls_secret};

/// What `observe` reads with.
#[derive(Clone)]
pub struct Observer {
    pub client: Client,
    pub stores: Stores,
    pub settings: OperatorSettings,
    pub etcd_urls: EtcdUrlMap,
    /// The root password each cluster's etcd last took (`namespace/name`), in memory only: when
    /// a user changes the Secret's password, the operator authenticates with this one to apply
    /// the new one.
    pub root_passwords: Arc<Mutex<HashMap<String, String>>>,
    /// Connections to the members, kept from one pass to the next.
    pub connections: Arc<EtcdConnections>,
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

        // The largest storage size asked for (spec or latched target): a PVC smaller than it
        // is to grow, and its StorageClass is asked whether it may.
        let wanted_storage = [
            Some(cluster.spec.storage_or_default().size_or_default()),
            cluster
                .status
                .as_ref()
                .and_then(|s| s.observed.as_ref())
                .map(|o| o.storage.size_or_default()),
        ]
        .into_iter()
        .flatten()
        .filter_map(|q| crate::domain::quantity::quantity_bytes(&q.0))
        .max();
        let mut members: Vec<ObservedMember> = Vec::new();
        for member in self.cluster_members(&namespace, &name) {
            members.push(
                self.observe_member(&namespace, member, wanted_storage)
                    .await?,
            );
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

        let mut security = self.observe_security(cluster, &members).await;
        let previous = self.observe_auth(cluster, &mut security).await;
        let mut etcd = self.observe_etcd(&members, &security.access).await;
        let key = format!(
            "{}/{}",
            cluster.metadata.namespace.as_deref().unwrap_or_default(),
            cluster.metadata.name.as_deref().unwrap_or_default()
        );
        if security.access.credentials.is_some() && refuses_anonymous(&etcd) {
            // The Secret's password refused while authentication is on: a changed password.
            // Try the one etcd still has (the Secret's previousPassword, or the last that
            // worked).
            let remembered = self
                .root_passwords
                .lock()
                .expect("passwords")
                .get(&key)
                .cloned();
            let mut recovered = None;
            for earlier in [previous, remembered].into_iter().flatten() {
                recovered = self
                    .observe_as_root(&members, &security.access, &earlier)
                    .await;
                if recovered.is_some() {
                    break;
                }
            }
            match recovered {
                Some((access, view)) => {
                    (security.access, etcd) = (access, view);
                    security.root_password_outdated = true;
                }
                None => security.problems.push(format!(
                    "etcd refuses the root password of Secret {}; if you changed it, add the password etcd still has to the Secret under the key {} and the operator changes etcd's password to the new one",
                    root_credentials_secret(cluster),
                    crate::security::PREVIOUS_PASSWORD_KEY
                )),
            }
        } else if let Some((_, password)) = &security.access.credentials
            && etcd.members.is_ok()
        {
            self.root_passwords
                .lock()
                .expect("passwords")
                .insert(key, password.clone());
        }
        // Authentication on in etcd but not yet recorded (the operator stopped between
        // `auth enable` and the status): etcd refuses anonymous calls; ask again as root.
        if auth_wanted(cluster)
            && security.access.credentials.is_none()
            && let Some(password) = &security.root_password
            && refuses_anonymous(&etcd)
            && let Some((access, view)) = self
                .observe_as_root(&members, &security.access, &password.0)
                .await
        {
            (security.access, etcd) = (access, view);
            security.auth_found_enabled = true;
        }
        if version_change_pending(cluster, &members, &etcd) {
            etcd.cluster_version = self.etcd_cluster_version(&etcd, &security.access).await;
        }
        let retained_pvcs = self.retained_pvcs(&namespace, &name, &members);
        let snapshot_recovery = cluster
            .status
            .as_ref()
            .and_then(|s| s.quorum_recovery.as_ref())
            .is_some_and(|r| r.snapshot.is_some() && r.in_progress());
        // Read only when a recovery from a snapshot runs; any other pass that needs them reads
        // them after planning (`Plan::needs_snapshots`).
        let snapshots = if snapshot_recovery {
            Some(self.snapshots(&namespace).await)
        } else {
            None
        };
        Ok(Observed {
            snapshots,
            retained_pvcs,
            cluster: cluster.clone(),
            members,
            headless_service,
            client_service,
            pdb,
            etcd,
            settings: self.settings.clone(),
            security,
        })
    }

    /// The EtcdSnapshots of `namespace` (a lost-quorum recovery with no member's data left
    /// restores from the newest verified one of the cluster).
    pub async fn snapshots(
        &self,
        namespace: &str,
    ) -> Result<Vec<crate::plan::SnapshotFacts>, String> {
        let api: Api<etcd_operator_api::EtcdSnapshot> =
            Api::namespaced(self.client.clone(), namespace);
        match api.list(&Default::default()).await {
            Ok(list) => Ok(list
                .items
                .iter()
                .map(crate::plan::SnapshotFacts::from_snapshot)
                .collect()),
            Err(e) => Err(format!(
                "listing the EtcdSnapshots of {namespace} failed: {e}"
            )),
        }
    }

    /// `spec.auth`: the root password from its Secret (type `kubernetes.io/basic-auth`, a
    /// non-empty `password`, `username` root if present); the operator authenticates with it
    /// once `status.authEnabled` is latched.
    /// Returns the Secret's `previousPassword`, if it has one.
    async fn observe_auth(
        &self,
        cluster: &EtcdCluster,
        facts: &mut SecurityFacts,
    ) -> Option<String> {
        if !auth_wanted(cluster) {
            return None;
        }
        let Some(reference) = cluster
            .spec
            .auth
            .as_ref()
            .and_then(|a| a.root_credentials_secret_ref.as_ref())
        else {
            facts
                .problems
                .push("spec.auth.enabled needs spec.auth.rootCredentialsSecretRef".to_string());
            return None;
        };
        let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &namespace);
        let name = &reference.name;
        let secret = match api.get_opt(name).await {
            Ok(Some(secret)) => secret,
            Ok(None) => {
                facts
                    .problems
                    .push(format!("Secret {name} (root credentials) not found"));
                return None;
            }
            Err(e) => {
                facts.problems.push(format!(
                    "Secret {name} (root credentials) cannot be read: {e}"
                ));
                return None;
            }
        };
        match crate::security::root_password(name, &secret) {
            Ok(password) => {
                if cluster.status.as_ref().and_then(|s| s.auth_enabled) == Some(true) {
                    facts.access.credentials = Some(("root".to_string(), password.clone()));
                }
                facts.root_password = Some(crate::plan::Password(password));
            }
            Err(problem) => facts.problems.push(problem),
        }
        crate::security::previous_password(&secret)
    }

    /// The Secrets `spec.tls` names, each checked (`security::check_tls_secret`), and what the
    /// operator dials etcd with. Read at every pass: a rotated Secret is used from the next
    /// pass on. A Secret that cannot be used is a problem in the result, never an error.
    async fn observe_security(
        &self,
        cluster: &EtcdCluster,
        members: &[ObservedMember],
    ) -> SecurityFacts {
        let mut facts = SecurityFacts::default();
        let Some(tls) = cluster.spec.tls.as_ref() else {
            return facts;
        };
        let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
        let name = cluster.metadata.name.clone().unwrap_or_default();
        let names = member_dns_names(cluster, members);
        let api: Api<Secret> = Api::namespaced(self.client.clone(), &namespace);
        // One Secret read and checked: the material, or the sentence that says why not.
        let checked = |secret: String, purpose: Purpose, ca: Option<Vec<u8>>, names: &[String]| {
            let (api, names) = (api.clone(), names.to_vec());
            async move {
                let found = api
                    .get_opt(&secret)
                    .await
                    .map_err(|e| format!("Secret {secret} cannot be read: {e}"))?;
                let now = k8s_openapi::jiff::Timestamp::now();
                check_tls_secret(&secret, found.as_ref(), purpose, ca.as_deref(), &names, now)
            }
        };
        // Operator-issued certificates: the CA, each member's, the operator's.
        let issued_trust = self.observe_issued(cluster, members, &mut facts).await;
        // The CAs of the Secrets every member shares (user Secrets, cert-manager).
        let (mut client_ca, mut peer_ca): (Option<Vec<u8>>, Option<Vec<u8>>) = (None, None);
        // cert-manager's Certificates first: their Secrets are then checked like a user's.
        let certificates = self.observe_certificates(cluster, &mut facts).await;
        // A Secret problem of a Certificate that is not Ready is explained by the Certificate.
        let explain = |secret: &str, problem: String| -> String {
            match certificates
                .iter()
                .find(|c| c.wanted.secret_name == secret)
                .and_then(|c| c.not_ready.as_ref())
            {
                Some(why) => why.clone(),
                None => problem,
            }
        };
        if let Some(client) = &tls.client {
            let server_secret = match (&client.server_secret_ref, &client.cert_manager) {
                (Some(server), _) => Some(server.name.clone()),
                (None, Some(_)) => Some(format!("{name}-server-tls")),
                (None, None) => None,
            };
            let operator_secret = match (&client.operator_client_secret_ref, &client.cert_manager) {
                (Some(operator), _) => Some(operator.name.clone()),
                (None, Some(cm)) if cm.operator_client_issuer_ref.is_some() => {
                    Some(format!("{name}-operator-client-tls"))
                }
                _ => None,
            };
            if let Some(server) = server_secret {
                match checked(server.clone(), Purpose::Server, None, &names).await {
                    Ok(material) => {
                        facts.validity.push(CertificateValidity::of(
                            &server,
                            Purpose::Server,
                            &material,
                        ));
                        let ca_pem = material.ca_pem.unwrap_or_default();
                        client_ca = Some(ca_pem.clone());
                        let mut identity = None;
                        if let Some(operator) = operator_secret {
                            let purpose = Purpose::OperatorClient;
                            match checked(operator.clone(), purpose, Some(ca_pem.clone()), &[])
                                .await
                            {
                                Ok(m) => {
                                    facts
                                        .validity
                                        .push(CertificateValidity::of(&operator, purpose, &m));
                                    identity = Some((m.cert_pem, m.key_pem));
                                }
                                Err(problem) => facts.problems.push(explain(&operator, problem)),
                            }
                        }
                        facts.access.tls = Some(ClientTls { ca_pem, identity });
                    }
                    Err(problem) => facts.problems.push(explain(&server, problem)),
                }
            }
        }
        if let Some(peer) = &tls.peer {
            let secret = match (&peer.secret_ref, &peer.cert_manager) {
                (Some(secret), _) => Some(secret.name.clone()),
                (None, Some(_)) => Some(format!("{name}-peer-tls")),
                (None, None) => None,
            };
            if let Some(secret) = secret {
                match checked(secret.clone(), Purpose::Peer, None, &names).await {
                    Ok(m) => {
                        peer_ca = m.ca_pem.clone();
                        facts
                            .validity
                            .push(CertificateValidity::of(&secret, Purpose::Peer, &m))
                    }
                    Err(problem) => facts.problems.push(explain(&secret, problem)),
                }
            }
        }
        facts.certificates = certificates;
        facts.trust = trust_digests(tls, members, client_ca, peer_ca, &issued_trust);
        facts
    }

    /// The PVCs in the cache labelled with the cluster that no observed member claims, by name.
    fn retained_pvcs(
        &self,
        namespace: &str,
        cluster: &str,
        members: &[ObservedMember],
    ) -> Vec<PvcFacts> {
        let claimed: std::collections::BTreeSet<String> = members
            .iter()
            .filter_map(|m| m.member.metadata.name.as_deref())
            .map(pvc_name)
            .collect();
        let mut retained: Vec<PvcFacts> = cluster_objects(
            &self.stores.pvcs,
            &self.stores.pvc_index,
            namespace,
            cluster,
        )
        .iter()
        .filter(|p| {
            p.metadata
                .name
                .as_ref()
                .is_some_and(|n| !claimed.contains(n))
        })
        .map(|p| p.facts.clone())
        .collect();
        retained.sort_by(|a, b| a.name.cmp(&b.name));
        retained
    }

    /// The EtcdMembers labelled with the cluster, by name.
    fn cluster_members(&self, namespace: &str, cluster: &str) -> Vec<EtcdMember> {
        let mut members: Vec<EtcdMember> = cluster_objects(
            &self.stores.members,
            &self.stores.member_index,
            namespace,
            cluster,
        )
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
        wanted_storage: Option<i64>,
    ) -> Result<ObservedMember, ObserveError> {
        let name = member.metadata.name.clone().unwrap_or_default();
        let pod = self
            .cached_or_get::<CachedPod>(&self.stores.pods, namespace, &name)
            .await?
            .map(|p| p.facts);
        let pvc = if member.spec.storage.medium_or_default() == StorageMedium::Memory {
            None
        } else {
            self.cached_or_get::<CachedPvc>(&self.stores.pvcs, namespace, &pvc_name(&name))
                .await?
                .map(|p| p.facts)
        };
        let pvc = match pvc {
            Some(mut facts) => {
                let bytes = |q: Option<&str>| q.and_then(crate::domain::quantity::quantity_bytes);
                let wanted = [
                    wanted_storage,
                    bytes(Some(&member.spec.storage.size_or_default().0)),
                ]
                .into_iter()
                .flatten()
                .max();
                if let (Some(wanted), Some(requested)) = (wanted, bytes(facts.requested.as_deref()))
                    && requested < wanted
                {
                    facts.expansion = self.class_expansion(facts.storage_class.as_deref()).await;
                }
                Some(facts)
            }
            None => None,
        };
        Ok(ObservedMember { member, pod, pvc })
    }

    /// Whether the StorageClass `class` lets its PVCs grow (`allowVolumeExpansion`), read with
    /// a GET (only while a PVC is to grow).
    async fn class_expansion(&self, class: Option<&str>) -> ClassExpansion {
        let Some(class) = class.filter(|c| !c.is_empty()) else {
            return ClassExpansion::Refused(
                "the PVC has no StorageClass (it was bound to a PersistentVolume made by hand), so Kubernetes cannot expand it: grow the PersistentVolume by hand, or move the data to a new cluster with larger volumes".to_string(),
            );
        };
        let api: Api<StorageClass> = Api::all(self.client.clone());
        match api.get_opt(class).await {
            Ok(Some(sc)) if sc.allow_volume_expansion == Some(true) => ClassExpansion::Allowed,
            Ok(Some(_)) => ClassExpansion::Refused(format!(
                "StorageClass {class} does not allow volume expansion (allowVolumeExpansion is not true): if its provisioner can expand volumes, set allowVolumeExpansion: true on it (kubectl patch storageclass {class} -p '{{\"allowVolumeExpansion\":true}}'); otherwise move the data to a new cluster with larger volumes"
            )),
            Ok(None) => ClassExpansion::Refused(format!(
                "StorageClass {class} does not exist, so the PVCs cannot be expanded: create it with allowVolumeExpansion: true if its provisioner can expand volumes"
            )),
            Err(e) => {
                tracing::warn!(storage_class = class, error = %e, "reading a StorageClass failed");
                ClassExpansion::Unknown
            }
        }
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

    /// etcd observed again as `root` with `password`: the access and the view, when etcd takes
    /// the password.
    async fn observe_as_root(
        &self,
        members: &[ObservedMember],
        access: &EtcdAccess,
        password: &str,
    ) -> Option<(EtcdAccess, EtcdView)> {
        let mut access = access.clone();
        access.credentials = Some(("root".to_string(), password.to_string()));
        let view = self.observe_etcd(members, &access).await;
        (!refuses_anonymous(&view)).then_some((access, view))
    }

    /// etcd's cluster version, asked at the leader (else the first member that answered).
    /// `None` when it could not be read: the planner then goes by the members' versions.
    async fn etcd_cluster_version(
        &self,
        view: &EtcdView,
        access: &EtcdAccess,
    ) -> Option<(u64, u64)> {
        let endpoint = view
            .leader()
            .and_then(|id| view.observation_of(id))
            .or_else(|| view.endpoints.iter().find(|o| o.status.is_ok()))?
            .endpoint
            .clone();
        let dialled = self.etcd_urls.map(&endpoint);
        match crate::etcd::cluster_version(&dialled, access, Timeouts::OBSERVE.request).await {
            Ok(version) => version,
            Err(error) => {
                tracing::debug!(%endpoint, %error, "etcd's cluster version could not be read; the members' versions stand in");
                None
            }
        }
    }

    /// What etcd says, asked at the client URLs of the members that have a Pod. The view keeps
    /// those URLs as the planner knows them, whatever address [`EtcdUrlMap`] dialled.
    async fn observe_etcd(&self, members: &[ObservedMember], access: &EtcdAccess) -> EtcdView {
        let urls: Vec<String> = members
            .iter()
            .filter(|m| m.pod.is_some())
            .map(|m| member_client_url(&m.member))
            .collect();
        if urls.is_empty() {
            return EtcdView::not_observed("no member has a Pod");
        }
        let dialled: Vec<String> = urls.iter().map(|u| self.etcd_urls.map(u)).collect();
        let mut view =
            observe_cluster_with(&self.connections, &dialled, Timeouts::OBSERVE, access).await;
        for observation in &mut view.endpoints {
            if let Some(i) = dialled.iter().position(|d| *d == observation.endpoint) {
                observation.endpoint = urls[i].clone();
            }
        }
        view
    }
}

/// A version change is asked for or rolling: `spec.version`, the latched target, a member's
/// `spec.version` or a version a member reports differ. Only then is etcd's cluster version
/// asked (one HTTP request to the leader), so a settled cluster's passes stay as they were.
fn version_change_pending(
    cluster: &EtcdCluster,
    members: &[ObservedMember],
    etcd: &EtcdView,
) -> bool {
    let wanted = &cluster.spec.version;
    let latched = cluster
        .status
        .as_ref()
        .and_then(|s| s.observed.as_ref())
        .map(|o| &o.version);
    latched.is_some_and(|v| v != wanted)
        || members.iter().any(|m| m.member.spec.version != *wanted)
        || etcd.statuses().any(|s| s.version != *wanted)
}

/// What each member's etcd would trust if it started now: a digest of its client and peer
/// Secrets' `ca.crt` (the shared Secrets', or its own operator-issued one). A member whose
/// Secrets are not all known has none.
fn trust_digests(
    tls: &etcd_operator_api::cluster::EtcdClusterTls,
    members: &[ObservedMember],
    client_ca: Option<Vec<u8>>,
    peer_ca: Option<Vec<u8>>,
    issued: &BTreeMap<String, Vec<u8>>,
) -> BTreeMap<String, String> {
    let client_issued = tls
        .client
        .as_ref()
        .is_some_and(|c| c.operator_issued.is_some());
    let peer_issued = tls
        .peer
        .as_ref()
        .is_some_and(|p| p.operator_issued.is_some());
    members
        .iter()
        .filter_map(|m| {
            let name = m.member.metadata.name.clone()?;
            let side = |wanted: bool, issued_side: bool, shared: &Option<Vec<u8>>| match (
                wanted,
                issued_side,
            ) {
                (false, _) => Some(Vec::new()),
                (true, true) => issued.get(&name).cloned(),
                (true, false) => shared.clone(),
            };
            let client = side(tls.client.is_some(), client_issued, &client_ca)?;
            let peer = side(tls.peer.is_some(), peer_issued, &peer_ca)?;
            Some((name, crate::security::trust_digest(&client, &peer)))
        })
        .collect()
}

/// The DNS names a member certificate must be valid for: `<member>.<cluster>.<ns>.svc` of
/// every member that exists and of every ordinal up to the wanted size (so that a scale-out is
/// not started on a certificate that cannot serve the new members).
fn member_dns_names(cluster: &EtcdCluster, members: &[ObservedMember]) -> Vec<String> {
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let headless = headless_service_name(&name);
    let wanted = cluster.spec.replicas.unwrap_or(3).max(0) as usize;
    let mut members: Vec<String> = members
        .iter()
        .filter_map(|m| m.member.metadata.name.clone())
        .collect();
    members.extend((0..wanted).map(|i| format!("{name}-{i}")));
    members.sort();
    members.dedup();
    members
        .into_iter()
        .map(|m| format!("{m}.{headless}.{namespace}.svc"))
        .collect()
}

fn auth_wanted(cluster: &EtcdCluster) -> bool {
    cluster
        .spec
        .auth
        .as_ref()
        .is_some_and(etcd_operator_api::cluster::AuthSpec::is_enabled)
}

/// Every endpoint that answered at all refused for want of credentials.
/// The name of `spec.auth.rootCredentialsSecretRef`.
fn root_credentials_secret(cluster: &EtcdCluster) -> String {
    cluster
        .spec
        .auth
        .as_ref()
        .and_then(|a| a.root_credentials_secret_ref.as_ref())
        .map(|r| r.name.clone())
        .unwrap_or_default()
}

fn refuses_anonymous(view: &EtcdView) -> bool {
    let denied =
        |e: &crate::etcd::EtcdError| e.kind == crate::etcd::EtcdErrorKind::PermissionDenied;
    view.members.as_ref().err().is_some_and(denied)
        || view.endpoints.iter().any(|o| {
            o.health
                .as_ref()
                .is_some_and(|h| h.as_ref().err().is_some_and(denied))
        })
}
