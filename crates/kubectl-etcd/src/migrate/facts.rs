//! Reading what the plan is made from: the legacy objects, this operator's, both operators'
//! Deployments, and etcd itself through a port-forward to a legacy Pod (with the legacy
//! cluster's TLS Secrets). Read-only.

use std::collections::BTreeMap;

use anyhow::{Context as _, anyhow};
use etcd_operator::etcd::{ClientTls, EtcdAccess, EtcdClient, Timeouts};
use etcd_operator_api::labels::CLUSTER;
use etcd_operator_api::{EtcdCluster, EtcdMember};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Client, ResourceExt};

use super::legacy::{self, BackupSpec, BackupStatus, ClusterSpec};
use super::plan::{EtcdFacts, Facts, LegacyBackup, LegacyCluster, MemberFact, OperatorFact};
use crate::session::{Usage, forward};

/// The legacy kinds, read as dynamic objects.
pub fn legacy_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(legacy::GROUP, legacy::VERSION, kind),
        plural,
    )
}

fn not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == 404)
}

/// Lists the namespace's objects of a legacy kind; none when the CRD is not installed.
async fn list_legacy(
    client: &Client,
    namespace: &str,
    kind: &str,
    plural: &str,
) -> anyhow::Result<Vec<DynamicObject>> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &legacy_resource(kind, plural));
    match api.list(&ListParams::default()).await {
        Ok(list) => Ok(list.items),
        Err(e) if not_found(&e) => Ok(Vec::new()),
        Err(e) => Err(anyhow!(e).context(format!("listing {plural}.{}", legacy::GROUP))),
    }
}

/// The legacy EtcdCluster to migrate: the one named, or the namespace's only one.
pub async fn choose_cluster(
    client: &Client,
    namespace: &str,
    name: Option<&str>,
) -> anyhow::Result<String> {
    if let Some(name) = name {
        return Ok(name.to_string());
    }
    let legacy = list_legacy(client, namespace, "EtcdCluster", "etcdclusters").await?;
    // None left: a migration finished here names its cluster.
    let migrated: Vec<String> = if legacy.is_empty() {
        match Api::<EtcdCluster>::namespaced(client.clone(), namespace)
            .list(&ListParams::default())
            .await
        {
            Ok(list) => list
                .items
                .iter()
                .filter(|c| {
                    c.annotations()
                        .contains_key(super::plan::MIGRATED_FROM_ANNOTATION)
                })
                .map(|c| c.name_any())
                .collect(),
            Err(_) => Vec::new(),
        }
    } else {
        Vec::new()
    };
    match legacy.as_slice() {
        [only] => Ok(only.name_any()),
        [] if migrated.len() == 1 => Ok(migrated[0].clone()),
        [] => Err(Usage(format!(
            "no EtcdCluster of {} in namespace {namespace}; pass -n <namespace> (`kubectl get etcdclusters.etcd.aenix.io -A` lists them)",
            legacy::API_VERSION
        ))
        .into()),
        many => Err(Usage(format!(
            "namespace {namespace} has {} legacy EtcdClusters ({}); name one: kubectl etcdop migrate <cluster>",
            many.len(),
            many.iter().map(|c| c.name_any()).collect::<Vec<_>>().join(", ")
        ))
        .into()),
    }
}

fn backup_of(object: &DynamicObject, cluster: &str) -> Option<LegacyBackup> {
    let spec: BackupSpec = serde_json::from_value(object.data["spec"].clone()).ok()?;
    let refers = spec.cluster_ref.as_ref().map(|r| r.name.as_str()) == Some(cluster);
    let status: BackupStatus =
        serde_json::from_value(object.data["status"].clone()).unwrap_or_default();
    refers.then(|| LegacyBackup {
        name: object.name_any(),
        spec,
        phase: status.phase,
        uri: status
            .snapshot
            .as_ref()
            .and_then(|s| s["uri"].as_str())
            .map(str::to_string),
    })
}

/// `namespace/name` of a Deployment.
pub fn parse_deployment(text: &str) -> Result<(String, String), String> {
    match text.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns.to_string(), name.to_string()))
        }
        _ => Err(format!("{text:?} is not NAMESPACE/NAME of a Deployment")),
    }
}

async fn operator(client: &Client, namespace: &str, name: &str) -> anyhow::Result<OperatorFact> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let deployment = deployments
        .get_opt(name)
        .await
        .with_context(|| format!("reading Deployment {namespace}/{name}"))?;
    let Some(deployment) = deployment else {
        return Ok(OperatorFact {
            namespace: namespace.into(),
            name: name.into(),
            replicas: None,
            running: 0,
        });
    };
    let spec = deployment.spec.clone().unwrap_or_default();
    let selector = spec
        .selector
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let running = if selector.is_empty() {
        0
    } else {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        pods.list(&ListParams::default().labels(&selector))
            .await
            .with_context(|| format!("listing the Pods of Deployment {namespace}/{name}"))?
            .items
            .iter()
            .filter(|p| {
                !matches!(
                    p.status.as_ref().and_then(|s| s.phase.as_deref()),
                    Some("Succeeded" | "Failed")
                )
            })
            .count()
    };
    Ok(OperatorFact {
        namespace: namespace.into(),
        name: name.into(),
        replicas: Some(spec.replicas.unwrap_or(1)),
        running,
    })
}

/// The access to the legacy etcd: its TLS Secrets as the legacy operator used them (the CA
/// of serverTrustedCASecret, else the server Secret's; the client Secret's certificate).
pub async fn legacy_access(
    client: &Client,
    namespace: &str,
    spec: &ClusterSpec,
) -> anyhow::Result<(EtcdAccess, &'static str)> {
    let tls = spec.tls();
    let Some(server) = tls.server() else {
        return Ok((EtcdAccess::plaintext(), "http"));
    };
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let read = |name: String| {
        let secrets = secrets.clone();
        async move {
            let secret = secrets
                .get(&name)
                .await
                .with_context(|| format!("reading Secret {namespace}/{name}"))?;
            Ok::<_, anyhow::Error>(
                secret
                    .data
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect::<BTreeMap<String, Vec<u8>>>(),
            )
        }
    };
    let ca_secret = tls.server_ca().unwrap_or(server).to_string();
    let ca = read(ca_secret.clone())
        .await?
        .remove("ca.crt")
        .ok_or_else(|| {
            anyhow!("Secret {ca_secret} has no ca.crt to verify the legacy members with")
        })?;
    let identity = match tls.client() {
        Some(name) => {
            let mut data = read(name.to_string()).await?;
            match (data.remove("tls.crt"), data.remove("tls.key")) {
                (Some(cert), Some(key)) => Some((cert, key)),
                _ => return Err(anyhow!("Secret {name} lacks tls.crt or tls.key")),
            }
        }
        None => None,
    };
    Ok((
        EtcdAccess {
            tls: Some(ClientTls {
                ca_pem: ca,
                identity,
            }),
            credentials: None,
        },
        "https",
    ))
}

/// A client of one legacy Pod through a port-forward.
pub async fn legacy_client(
    client: &Client,
    namespace: &str,
    pod: &str,
    access: &EtcdAccess,
    scheme: &str,
    timeouts: Timeouts,
) -> anyhow::Result<EtcdClient> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let forward = forward(pods, pod.to_string()).await?;
    let url = format!("{scheme}://127.0.0.1:{}", forward.address.port());
    let etcd = EtcdClient::connect_endpoint(&url, timeouts, access)
        .await
        .map_err(|e| anyhow!("connecting to etcd in Pod {pod}: {e}"))?;
    // The listener's task outlives `forward`: it serves as long as the process runs.
    drop(forward);
    Ok(etcd)
}

/// etcd's member list and cluster ID, through the first legacy Pod that answers.
async fn etcd_facts(
    client: &Client,
    namespace: &str,
    spec: &ClusterSpec,
    pods: &[Pod],
) -> Result<EtcdFacts, String> {
    let (access, scheme) = legacy_access(client, namespace, spec)
        .await
        .map_err(|e| format!("{e:#}"))?;
    let mut errors = Vec::new();
    for pod in pods {
        let name = pod.name_any();
        let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        if !running {
            continue;
        }
        let etcd = match legacy_client(client, namespace, &name, &access, scheme, Timeouts::OBSERVE)
            .await
        {
            Ok(etcd) => etcd,
            Err(e) => {
                errors.push(format!("{e:#}"));
                continue;
            }
        };
        match etcd.member_list_with_cluster_id().await {
            Ok((cluster_id, members)) => {
                return Ok(EtcdFacts {
                    cluster_id,
                    members: members
                        .into_iter()
                        .map(|m| MemberFact {
                            name: m.name.clone(),
                            id: m.id,
                            peer_url: m.peer_urls.first().cloned().unwrap_or_default(),
                            learner: m.is_learner,
                        })
                        .collect(),
                    auth_enabled: spec.auth_enabled() && spec.tls().server().is_some(),
                });
            }
            Err(e) => errors.push(format!("Pod {name}: {e}")),
        }
    }
    Err(if errors.is_empty() {
        "no legacy Pod is running".into()
    } else {
        errors.join("; ")
    })
}

/// What the flags say besides the cluster.
pub struct Inputs {
    pub namespace: String,
    pub cluster: String,
    pub operators: Vec<(String, String)>,
    pub snapshot: super::plan::SnapshotChoice,
}

/// Reads everything the plan needs.
pub async fn read_facts(client: &Client, inputs: &Inputs) -> anyhow::Result<Facts> {
    let ns = inputs.namespace.as_str();
    let name = inputs.cluster.as_str();
    let clusters: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &legacy_resource("EtcdCluster", "etcdclusters"),
    );
    let legacy = match clusters.get_opt(name).await {
        Ok(found) => found,
        Err(e) if not_found(&e) => None,
        Err(e) => return Err(anyhow!(e).context(format!("reading legacy EtcdCluster {ns}/{name}"))),
    };
    let legacy = match legacy {
        Some(object) => Some(LegacyCluster {
            uid: object.uid().unwrap_or_default(),
            spec: serde_json::from_value(object.data["spec"].clone())
                .with_context(|| format!("reading the spec of legacy EtcdCluster {ns}/{name}"))?,
        }),
        None => None,
    };
    let instance = format!("app.kubernetes.io/instance={name}");
    let stateful_sets: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
    let stateful_set = stateful_sets
        .get_opt(name)
        .await
        .with_context(|| format!("reading StatefulSet {ns}/{name}"))?;
    let pods: Vec<Pod> = Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&instance))
        .await
        .context("listing the cluster's Pods")?
        .items;
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels(&instance))
        .await
        .context("listing the cluster's PVCs")?
        .items;
    let services = Api::<Service>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .context("listing the namespace's Services")?
        .items
        .into_iter()
        .map(|s| (s.name_any(), s))
        .collect();
    let config_map = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get_opt(&legacy::state_config_map(name))
        .await
        .context("reading the legacy cluster-state ConfigMap")?;
    let pdb = Api::<PodDisruptionBudget>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
        .context("reading the PodDisruptionBudget")?;
    let (new_cluster, crds_installed) = match Api::<EtcdCluster>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
    {
        Ok(found) => (found, true),
        Err(e) if not_found(&e) => (None, false),
        Err(e) => return Err(anyhow!(e).context("reading this operator's EtcdCluster")),
    };
    let new_members = if crds_installed {
        Api::<EtcdMember>::namespaced(client.clone(), ns)
            .list(&ListParams::default().labels(&format!("{CLUSTER}={name}")))
            .await
            .context("listing this operator's EtcdMembers")?
            .items
    } else {
        Vec::new()
    };
    let backups = list_legacy(client, ns, "EtcdBackup", "etcdbackups")
        .await?
        .iter()
        .filter_map(|o| backup_of(o, name))
        .collect();
    let schedules = list_legacy(client, ns, "EtcdBackupSchedule", "etcdbackupschedules")
        .await?
        .iter()
        .filter_map(|o| backup_of(o, name))
        .collect();
    let mut operators = Vec::new();
    for (namespace, deployment) in &inputs.operators {
        operators.push(operator(client, namespace, deployment).await?);
    }
    let mut sorted_pods = pods.clone();
    sorted_pods.sort_by_key(|p| p.name_any());
    let etcd = match &legacy {
        Some(l) => Some(etcd_facts(client, ns, &l.spec, &sorted_pods).await),
        None => None,
    };
    Ok(Facts {
        namespace: ns.to_string(),
        name: name.to_string(),
        legacy,
        stateful_set,
        pods,
        pvcs,
        services,
        config_map,
        pdb,
        etcd,
        new_cluster,
        new_members,
        backups,
        schedules,
        operators,
        crds_installed,
        snapshot: inputs.snapshot.clone(),
    })
}
