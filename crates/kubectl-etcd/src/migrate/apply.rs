//! The steps of the plan, each idempotent: it checks what exists before it writes, so a step
//! interrupted anywhere is finished by the next run.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use etcd_operator::build::{
    client_service, client_service_name, cluster_owner_reference, headless_service,
    member_owner_reference,
};
use etcd_operator::etcd::Timeouts;
use etcd_operator_api::labels::{ROLE, ROLE_VOTER, member_labels};
use etcd_operator_api::{EtcdCluster, EtcdMember, EtcdSnapshot, EtcdSnapshotSchedule};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::facts::{legacy_access, legacy_client, legacy_resource};
use super::legacy::ClusterSpec;
use super::plan::{Plan, StepKind};

fn already(err: &kube::Error, code: u16) -> bool {
    matches!(err, kube::Error::Api(status) if status.code == code)
}

/// Creates `object`, or leaves the one that exists.
async fn create<K>(api: &Api<K>, object: &K, what: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(()),
        Err(e) if already(&e, 409) => Ok(()),
        Err(e) => Err(anyhow!(e).context(format!("creating {what}"))),
    }
}

async fn delete<K>(
    api: &Api<K>,
    name: &str,
    params: &DeleteParams,
    what: &str,
) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, params).await {
        Ok(_) => Ok(()),
        Err(e) if already(&e, 404) => Ok(()),
        Err(e) => Err(anyhow!(e).context(format!("deleting {what}"))),
    }
}

async fn wait_gone<K>(api: &Api<K>, name: &str, what: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let started = Instant::now();
    loop {
        match api.get_opt(name).await {
            Ok(None) => return Ok(()),
            Ok(Some(_)) if started.elapsed() > Duration::from_secs(120) => {
                bail!(
                    "{what} is still there after 2 minutes (a finalizer?); run again once it is gone"
                )
            }
            Ok(Some(_)) => tokio::time::sleep(Duration::from_millis(200)).await,
            Err(e) => return Err(anyhow!(e).context(format!("reading {what}"))),
        }
    }
}

fn orphan() -> DeleteParams {
    DeleteParams {
        propagation_policy: Some(kube::api::PropagationPolicy::Orphan),
        ..Default::default()
    }
}

/// Runs one step of `plan`; `legacy` is the legacy spec (for its TLS), `snapshot` the file.
pub async fn run_step(
    client: &Client,
    plan: &Plan,
    kind: StepKind,
    legacy: &ClusterSpec,
    snapshot: Option<&Path>,
) -> anyhow::Result<String> {
    let ns = plan.namespace.as_str();
    let name = plan.cluster.as_str();
    let clusters: Api<EtcdCluster> = Api::namespaced(client.clone(), ns);
    let members: Api<EtcdMember> = Api::namespaced(client.clone(), ns);
    let live_cluster = || async {
        clusters
            .get(name)
            .await
            .with_context(|| format!("reading EtcdCluster {ns}/{name}"))
    };
    let live_member = |m: String| {
        let members = members.clone();
        async move {
            members
                .get(&m)
                .await
                .with_context(|| format!("reading EtcdMember {ns}/{m}"))
        }
    };
    match kind {
        StepKind::Snapshot => {
            let file = snapshot.ok_or_else(|| {
                anyhow!("no --snapshot-file given (or --skip-snapshot to go without one)")
            })?;
            let (access, scheme) = legacy_access(client, ns, legacy).await?;
            let mut errors = Vec::new();
            for member in &plan.members {
                let etcd = match legacy_client(
                    client,
                    ns,
                    &member.name,
                    &access,
                    scheme,
                    Timeouts::SNAPSHOT,
                )
                .await
                {
                    Ok(etcd) => etcd,
                    Err(e) => {
                        errors.push(format!("{e:#}"));
                        continue;
                    }
                };
                let (size, sha, revision) =
                    crate::write_snapshot(&etcd, &member.name, file).await?;
                return Ok(format!(
                    "saved {} ({size} bytes, sha256:{sha}) from {}{}",
                    file.display(),
                    member.name,
                    revision
                        .map(|r| format!(" at revision {r}"))
                        .unwrap_or_default()
                ));
            }
            bail!("no member answered for the snapshot: {}", errors.join("; "))
        }
        StepKind::CreateCluster => {
            if let Some(secret) = &plan.generated_secret {
                let password = random_password()?;
                let object: Secret = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Secret",
                    "metadata": {"name": secret, "namespace": ns},
                    "type": "kubernetes.io/basic-auth",
                    "stringData": {"username": "root", "password": password},
                }))?;
                create(
                    &Api::<Secret>::namespaced(client.clone(), ns),
                    &object,
                    &format!("Secret {secret}"),
                )
                .await?;
            }
            let object: EtcdCluster = serde_json::from_value(plan.etcd_cluster.clone())
                .context("building the EtcdCluster")?;
            create(&clusters, &object, &format!("EtcdCluster {ns}/{name}")).await?;
            let live = live_cluster().await?;
            let status = live.status.clone().unwrap_or_default();
            if status.cluster_id.is_none() || status.observed.is_none() {
                let spec = serde_json::to_value(&live.spec)?;
                let mut observed = json!({
                    "replicas": spec["replicas"],
                    "version": spec["version"],
                    "storage": spec["storage"],
                });
                for field in [
                    "resources",
                    "affinity",
                    "topologySpreadConstraints",
                    "additionalMetadata",
                    "options",
                    "imagePullSecrets",
                ] {
                    if !spec[field].is_null() {
                        observed[field] = spec[field].clone();
                    }
                }
                let mut status = plan.cluster_status.clone();
                status["observed"] = observed;
                clusters
                    .patch_status(
                        name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"status": status})),
                    )
                    .await
                    .context("writing the EtcdCluster's status")?;
            }
            Ok(format!(
                "EtcdCluster {ns}/{name} created, status clusterID {} clusterToken {}",
                plan.cluster_status["clusterID"]
                    .as_str()
                    .unwrap_or_default(),
                plan.cluster_status["clusterToken"]
                    .as_str()
                    .unwrap_or_default()
            ))
        }
        StepKind::CreateMembers => {
            let owner = cluster_owner_reference(&live_cluster().await?)?;
            for m in &plan.members {
                let mut object = m.member.clone();
                object["metadata"]["ownerReferences"] = json!([owner]);
                let object: EtcdMember =
                    serde_json::from_value(object).context("building an EtcdMember")?;
                create(&members, &object, &format!("EtcdMember {}", m.name)).await?;
                let live = live_member(m.name.clone()).await?;
                if live
                    .status
                    .as_ref()
                    .and_then(|s| s.member_id.as_ref())
                    .is_none()
                {
                    members
                        .patch_status(
                            &m.name,
                            &PatchParams::default(),
                            &Patch::Merge(json!({"status": m.status})),
                        )
                        .await
                        .with_context(|| format!("writing EtcdMember {}'s status", m.name))?;
                }
            }
            Ok(format!("{} EtcdMembers created", plan.members.len()))
        }
        StepKind::HandOverLegacyObjects => {
            let mut owners: Vec<OwnerReference> = Vec::new();
            for m in &plan.members {
                let mut owner = member_owner_reference(&live_member(m.name.clone()).await?)?;
                owner.controller = Some(false);
                owner.block_owner_deletion = Some(false);
                owners.push(owner);
            }
            let patch = Patch::Merge(json!({"metadata": {"ownerReferences": owners}}));
            let services: Api<Service> = Api::namespaced(client.clone(), ns);
            let maps: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
            let mut done = Vec::new();
            match services
                .patch(
                    &plan.legacy_headless_service,
                    &PatchParams::default(),
                    &patch,
                )
                .await
            {
                Ok(_) => done.push(format!("Service {}", plan.legacy_headless_service)),
                Err(e) if already(&e, 404) => {}
                Err(e) => {
                    return Err(anyhow!(e).context("handing the legacy headless Service over"));
                }
            }
            match maps
                .patch(&plan.legacy_config_map, &PatchParams::default(), &patch)
                .await
            {
                Ok(_) => done.push(format!("ConfigMap {}", plan.legacy_config_map)),
                Err(e) if already(&e, 404) => {}
                Err(e) => return Err(anyhow!(e).context("handing the legacy ConfigMap over")),
            }
            Ok(format!(
                "{} now owned by the migrated EtcdMembers",
                done.join(" and ")
            ))
        }
        StepKind::DeleteStatefulSet => {
            let sets: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
            let what = format!("StatefulSet {}", plan.stateful_set);
            delete(&sets, &plan.stateful_set, &orphan(), &what).await?;
            wait_gone(&sets, &plan.stateful_set, &what).await?;
            Ok(format!("{what} deleted, its Pods and claims orphaned"))
        }
        StepKind::AdoptPodsAndClaims => {
            let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
            let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
            let sets: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
            if sets.get_opt(&plan.stateful_set).await?.is_some() {
                bail!(
                    "StatefulSet {} still exists; its controller would take the Pods back",
                    plan.stateful_set
                );
            }
            for m in &plan.members {
                let owner = member_owner_reference(&live_member(m.name.clone()).await?)?;
                let pod = pods
                    .get(&m.name)
                    .await
                    .with_context(|| format!("reading Pod {}", m.name))?;
                let mut labels = member_labels(name, &m.name);
                labels.insert(ROLE.into(), ROLE_VOTER.into());
                pods.patch(
                    &m.name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {
                        "labels": labels,
                        "ownerReferences": with_controller(pod.owner_references(), &owner),
                        "resourceVersion": pod.resource_version(),
                    }})),
                )
                .await
                .with_context(|| format!("labelling and re-owning Pod {}", m.name))?;
                let claim = claims
                    .get(&m.pvc)
                    .await
                    .with_context(|| format!("reading PVC {}", m.pvc))?;
                claims
                    .patch(
                        &m.pvc,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"metadata": {
                            "labels": member_labels(name, &m.name),
                            "ownerReferences": with_controller(claim.owner_references(), &owner),
                            "resourceVersion": claim.resource_version(),
                        }})),
                    )
                    .await
                    .with_context(|| format!("labelling and re-owning PVC {}", m.pvc))?;
            }
            Ok(format!(
                "{} Pods and PVCs owned by their EtcdMembers",
                plan.members.len()
            ))
        }
        StepKind::ReplaceServices => {
            let services: Api<Service> = Api::namespaced(client.clone(), ns);
            let live = live_cluster().await?;
            let uid = live.uid().unwrap_or_default();
            let mut said = Vec::new();
            if let Some(existing) = services.get_opt(name).await? {
                let headless =
                    existing.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None");
                let ours = existing
                    .owner_references()
                    .iter()
                    .any(|r| r.uid == uid && r.controller == Some(true));
                if !(headless && ours) {
                    if name == plan.legacy_headless_service {
                        bail!(
                            "Service {name} is the legacy headless Service the members' DNS names use; it cannot be replaced"
                        );
                    }
                    delete(
                        &services,
                        name,
                        &DeleteParams::default(),
                        &format!("Service {name}"),
                    )
                    .await?;
                    wait_gone(&services, name, &format!("Service {name}")).await?;
                    said.push(format!("the legacy Service {name} deleted"));
                }
            }
            create(
                &services,
                &headless_service(&live)?,
                &format!("Service {name}"),
            )
            .await?;
            said.push(format!("headless Service {name} created"));
            create(&services, &client_service(&live)?, "the client Service").await?;
            said.push(format!("client Service {}", client_service_name(name)));
            Ok(said.join(", "))
        }
        StepKind::TranslateBackups => {
            let snapshots: Api<EtcdSnapshot> = Api::namespaced(client.clone(), ns);
            let schedules: Api<EtcdSnapshotSchedule> = Api::namespaced(client.clone(), ns);
            let backups: Api<DynamicObject> = Api::namespaced_with(
                client.clone(),
                ns,
                &legacy_resource("EtcdBackup", "etcdbackups"),
            );
            let legacy_schedules: Api<DynamicObject> = Api::namespaced_with(
                client.clone(),
                ns,
                &legacy_resource("EtcdBackupSchedule", "etcdbackupschedules"),
            );
            for (backup, spec) in &plan.snapshots {
                let object: EtcdSnapshot = serde_json::from_value(json!({
                    "apiVersion": "etcd-operator.cozystack.io/v1alpha2", "kind": "EtcdSnapshot",
                    "metadata": {"name": backup, "namespace": ns},
                    "spec": spec,
                }))?;
                create(&snapshots, &object, &format!("EtcdSnapshot {backup}")).await?;
                delete(
                    &backups,
                    backup,
                    &DeleteParams::background(),
                    &format!("EtcdBackup {backup}"),
                )
                .await?;
            }
            for (schedule, spec) in &plan.schedules {
                let object: EtcdSnapshotSchedule = serde_json::from_value(json!({
                    "apiVersion": "etcd-operator.cozystack.io/v1alpha2", "kind": "EtcdSnapshotSchedule",
                    "metadata": {"name": schedule, "namespace": ns},
                    "spec": spec,
                }))?;
                create(
                    &schedules,
                    &object,
                    &format!("EtcdSnapshotSchedule {schedule}"),
                )
                .await?;
                delete(
                    &legacy_schedules,
                    schedule,
                    &DeleteParams::background(),
                    &format!("EtcdBackupSchedule {schedule}"),
                )
                .await?;
            }
            Ok(format!(
                "{} EtcdSnapshots and {} EtcdSnapshotSchedules created, the legacy objects deleted",
                plan.snapshots.len(),
                plan.schedules.len()
            ))
        }
        StepKind::DisableAuth => {
            let (access, scheme) = legacy_access(client, ns, legacy).await?;
            let mut errors = Vec::new();
            for m in &plan.members {
                match legacy_client(client, ns, &m.name, &access, scheme, Timeouts::OBSERVE).await {
                    Ok(etcd) => match etcd.disable_auth().await {
                        Ok(()) => return Ok("authentication turned off".into()),
                        Err(e) => errors.push(e.to_string()),
                    },
                    Err(e) => errors.push(format!("{e:#}")),
                }
            }
            bail!("turning authentication off failed: {}", errors.join("; "))
        }
        StepKind::DeleteLegacyObjects => {
            let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
            let clusters_legacy: Api<DynamicObject> = Api::namespaced_with(
                client.clone(),
                ns,
                &legacy_resource("EtcdCluster", "etcdclusters"),
            );
            let legacy_uid = clusters_legacy.get_opt(name).await?.and_then(|c| c.uid());
            if let (Some(pdb), Some(uid)) = (pdbs.get_opt(name).await?, legacy_uid.as_deref())
                && pdb.owner_references().iter().any(|r| r.uid == uid)
            {
                delete(
                    &pdbs,
                    name,
                    &DeleteParams::default(),
                    "the legacy PodDisruptionBudget",
                )
                .await?;
            }
            delete(&clusters_legacy, name, &orphan(), "the legacy EtcdCluster").await?;
            wait_gone(&clusters_legacy, name, "the legacy EtcdCluster").await?;
            Ok(format!(
                "the legacy EtcdCluster {name} deleted (orphaning what it still owned)"
            ))
        }
    }
}

/// `references` with `owner` as the only controller (others kept as plain owners).
fn with_controller(references: &[OwnerReference], owner: &OwnerReference) -> Value {
    let mut out: Vec<OwnerReference> = references
        .iter()
        .filter(|r| r.uid != owner.uid && r.controller != Some(true))
        .cloned()
        .collect();
    out.push(owner.clone());
    json!(out)
}

fn random_password() -> anyhow::Result<String> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 24];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| anyhow!("the system's random source failed"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
