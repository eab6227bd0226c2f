//! The migration's plan, pure: from what was read of the cluster ([`Facts`]), every step with
//! whether it is done already, the objects it will write, the warnings and the refusals.
//!
//! Each step's "done" is read from the objects themselves, never from a record of the last
//! run, so a run interrupted anywhere is finished by running the command again. The legacy
//! EtcdCluster is deleted last: until then every run derives the same plan from it.

use std::collections::BTreeMap;

use etcd_operator::etcd::member_id_hex;
use etcd_operator_api::labels::{ROLE, ROLE_VOTER, member_labels, member_selector};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::{Value, json};

use super::legacy::{self, BackupSpec, ClusterSpec};
use super::translate::{
    ClusterTranslation, TranslateOptions, member_annotations, translate_backup, translate_cluster,
    translate_schedule,
};

/// Annotation on the new EtcdCluster: where it was migrated from, and the safety snapshot.
pub const MIGRATED_FROM_ANNOTATION: &str = "etcd-operator.cozystack.io/migrated-from";
pub const MIGRATION_SNAPSHOT_ANNOTATION: &str = "etcd-operator.cozystack.io/migration-snapshot";

/// One etcd member as etcd lists it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemberFact {
    pub name: String,
    pub id: u64,
    pub peer_url: String,
    pub learner: bool,
}

/// What etcd says (through a port-forward to a legacy Pod).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EtcdFacts {
    pub cluster_id: u64,
    pub members: Vec<MemberFact>,
    pub auth_enabled: bool,
}

/// A Deployment of an operator: absent, or its replicas and live Pods.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OperatorFact {
    pub namespace: String,
    pub name: String,
    /// `None` when the Deployment does not exist.
    pub replicas: Option<i32>,
    /// Pods of it that still run (a Deployment at zero may still be stopping one).
    pub running: usize,
}

/// A legacy EtcdBackup or EtcdBackupSchedule.
#[derive(Clone, Debug, PartialEq)]
pub struct LegacyBackup {
    pub name: String,
    pub spec: BackupSpec,
    pub phase: Option<String>,
    pub uri: Option<String>,
}

/// The legacy EtcdCluster.
#[derive(Clone, Debug, PartialEq)]
pub struct LegacyCluster {
    pub uid: String,
    pub spec: ClusterSpec,
}

/// Where the safety snapshot goes.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct SnapshotChoice {
    pub skip: bool,
    pub file: Option<std::path::PathBuf>,
    pub file_exists: bool,
}

/// Everything the plan is made from.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    pub namespace: String,
    pub name: String,
    pub legacy: Option<LegacyCluster>,
    pub stateful_set: Option<StatefulSet>,
    /// The namespace's Pods and claims of the cluster (by the legacy instance label).
    pub pods: Vec<Pod>,
    pub pvcs: Vec<PersistentVolumeClaim>,
    /// The namespace's Services by name.
    pub services: BTreeMap<String, Service>,
    pub config_map: Option<ConfigMap>,
    pub pdb: Option<PodDisruptionBudget>,
    pub etcd: Option<Result<EtcdFacts, String>>,
    /// This operator's EtcdCluster of the same name and its EtcdMembers, if they exist.
    pub new_cluster: Option<etcd_operator_api::EtcdCluster>,
    pub new_members: Vec<etcd_operator_api::EtcdMember>,
    pub backups: Vec<LegacyBackup>,
    pub schedules: Vec<LegacyBackup>,
    pub operators: Vec<OperatorFact>,
    /// This operator's CRDs are served.
    pub crds_installed: bool,
    pub snapshot: SnapshotChoice,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum StepKind {
    Snapshot,
    CreateCluster,
    CreateMembers,
    HandOverLegacyObjects,
    DeleteStatefulSet,
    AdoptPodsAndClaims,
    ReplaceServices,
    TranslateBackups,
    DisableAuth,
    DeleteLegacyObjects,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlannedStep {
    pub number: usize,
    pub kind: StepKind,
    pub done: bool,
    pub text: String,
}

/// One migrated member: the etcd member, its Pod and claim, and the EtcdMember to make.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemberPlan {
    pub name: String,
    pub id: u64,
    pub peer_url: String,
    pub pod_uid: String,
    pub pvc: String,
    pub member: Value,
    pub status: Value,
}

#[derive(Clone, Debug, PartialEq, Default, Serialize)]
pub struct Plan {
    pub namespace: String,
    pub cluster: String,
    pub steps: Vec<PlannedStep>,
    /// Why nothing can be done; each says what to do.
    pub refusals: Vec<String>,
    pub warnings: Vec<String>,
    /// The EtcdCluster to create (metadata and spec) and its status.
    pub etcd_cluster: Value,
    pub cluster_status: Value,
    pub members: Vec<MemberPlan>,
    /// Legacy headless Service, client Service, cluster-state ConfigMap, PDB, StatefulSet.
    pub legacy_headless_service: String,
    pub legacy_client_service: String,
    pub legacy_config_map: String,
    pub stateful_set: String,
    /// EtcdSnapshots and EtcdSnapshotSchedules to create from the legacy objects of the same
    /// name (name, spec).
    pub snapshots: Vec<(String, Value)>,
    pub schedules: Vec<(String, Value)>,
    /// The root-credentials Secret to generate, if any.
    pub generated_secret: Option<String>,
    /// Legacy authentication is on and must be turned off before the operator starts.
    pub disable_auth: bool,
}

impl Plan {
    pub fn is_done(&self) -> bool {
        self.refusals.is_empty() && self.steps.iter().all(|s| s.done)
    }

    pub fn step(&self, kind: StepKind) -> Option<&PlannedStep> {
        self.steps.iter().find(|s| s.kind == kind)
    }
}

fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

fn controller(meta: &ObjectMeta) -> Option<&str> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.as_str())
}

fn owner_uids(meta: &ObjectMeta) -> Vec<&str> {
    meta.owner_references
        .iter()
        .flatten()
        .map(|r| r.uid.as_str())
        .collect()
}

fn pod_running_and_ready(pod: &Pod) -> bool {
    let status = pod.status.as_ref();
    status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
        && pod.metadata.deletion_timestamp.is_none()
}

/// The claim a Pod mounts as its `data` volume.
fn data_claim(pod: &Pod) -> Option<String> {
    pod.spec
        .as_ref()?
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "data")?
        .persistent_volume_claim
        .as_ref()
        .map(|c| c.claim_name.clone())
}

/// Plans the migration of legacy EtcdCluster `facts.name`.
pub fn plan(facts: &Facts, options: &TranslateOptions) -> Plan {
    let ns = facts.namespace.as_str();
    let cluster = facts.name.as_str();
    let mut plan = Plan {
        namespace: ns.to_string(),
        cluster: cluster.to_string(),
        ..Default::default()
    };
    let migrated_already = facts.new_cluster.as_ref().is_some_and(|c| {
        c.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(MIGRATED_FROM_ANNOTATION))
    });
    let Some(legacy) = &facts.legacy else {
        if !migrated_already {
            plan.refusals.push(format!(
                "no EtcdCluster {cluster} of {} in namespace {ns}; list them with `kubectl get etcdclusters.etcd.aenix.io -A`",
                legacy::API_VERSION
            ));
        }
        // Migrated: every step was done and the legacy cluster deleted last.
        return plan;
    };
    if facts.new_cluster.is_some() && !migrated_already {
        plan.refusals.push(format!(
            "an EtcdCluster {cluster} of etcd-operator.cozystack.io already exists in namespace {ns} and was not made by a migration; the migrated cluster must have the legacy cluster's name (the Pods' DNS names depend on it)"
        ));
        return plan;
    }
    if !facts.crds_installed {
        plan.refusals.push(
            "this operator's CRDs (etcd-operator.cozystack.io/v1alpha2) are not installed; install them first (`kubectl apply -f deploy/crds/`, or the Helm chart) with the operator scaled to zero".into(),
        );
    }
    for op in &facts.operators {
        if op.replicas.unwrap_or(0) > 0 || op.running > 0 {
            plan.refusals.push(format!(
                "Deployment {}/{} runs ({} replicas, {} Pods): both operators must be stopped during the migration; `kubectl -n {} scale deployment/{} --replicas=0` and wait for its Pods to go (other names: --legacy-operator / --operator NAMESPACE/NAME)",
                op.namespace, op.name, op.replicas.unwrap_or(0), op.running, op.namespace, op.name
            ));
        }
    }

    let running = facts
        .stateful_set
        .as_ref()
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.template.spec.as_ref());
    let translation: ClusterTranslation =
        translate_cluster(cluster, &legacy.spec, running, options);
    plan.refusals.extend(translation.refusals.iter().cloned());
    plan.warnings.extend(translation.warnings.iter().cloned());
    let claim_template = legacy.spec.claim_template_name();
    if claim_template != "data" {
        plan.refusals.push(format!(
            "the volumeClaimTemplate is named {claim_template}, so the claims are {claim_template}-<pod>; this operator's members use data-<pod> and a claim cannot be renamed; restore a snapshot into a new cluster instead"
        ));
    }
    plan.legacy_headless_service = legacy.spec.headless_service_name(cluster);
    plan.legacy_client_service = legacy.spec.client_service_name(cluster);
    plan.legacy_config_map = legacy::state_config_map(cluster);
    plan.stateful_set = cluster.to_string();

    // The members: etcd's list until the EtcdMembers exist, then theirs.
    let mut members: Vec<MemberFact> = Vec::new();
    let mut cluster_id: Option<u64> = facts
        .new_cluster
        .as_ref()
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.cluster_id.as_deref())
        .and_then(|id| u64::from_str_radix(id, 16).ok());
    let mut auth_enabled = false;
    match &facts.etcd {
        Some(Ok(etcd)) => {
            members = etcd.members.clone();
            cluster_id = cluster_id.or(Some(etcd.cluster_id));
            auth_enabled = etcd.auth_enabled;
        }
        Some(Err(e)) if facts.new_members.is_empty() => plan.refusals.push(format!(
            "etcd could not be read through the legacy Pods ({e}); every member must answer before a migration (see `kubectl get pods -n {ns}`)"
        )),
        _ => {}
    }
    if members.is_empty() {
        members = facts
            .new_members
            .iter()
            .filter_map(|m| {
                let status = m.status.as_ref()?;
                Some(MemberFact {
                    name: name(&m.metadata).to_string(),
                    id: etcd_operator::etcd::parse_member_id(status.member_id.as_deref()?)?,
                    peer_url: etcd_operator::build::member_peer_url(m),
                    learner: status.is_voter != Some(true),
                })
            })
            .collect();
    }
    members.sort_by_key(|m| {
        let ordinal = etcd_operator::build::member_ordinal(cluster, &m.name);
        (ordinal.is_none(), ordinal, m.name.clone())
    });
    let pods: BTreeMap<&str, &Pod> = facts.pods.iter().map(|p| (name(&p.metadata), p)).collect();
    let scheme = if translation.peer_auto_tls || legacy.spec.tls().peer().is_some() {
        "https"
    } else {
        "http"
    };
    let before_members = facts.new_members.is_empty();
    for m in &members {
        if m.learner {
            plan.refusals.push(format!(
                "etcd member {} ({:x}) is a learner; the legacy operator never adds learners, so someone changed this cluster by hand: promote or remove it (`etcdctl member promote|remove`) and run again",
                m.name, m.id
            ));
        }
        if m.name.is_empty() {
            plan.refusals.push(format!(
                "etcd member {:x} at {} has not started (added, never joined); remove it (`etcdctl member remove {:x}`) and run again",
                m.id, m.peer_url, m.id
            ));
            continue;
        }
        let want_peer = format!(
            "{scheme}://{}.{}.{ns}.svc:2380",
            m.name, plan.legacy_headless_service
        );
        if m.peer_url != want_peer {
            plan.refusals.push(format!(
                "etcd member {} advertises the peer URL {}, not {want_peer} as the legacy operator's Pods do; it cannot be taken over in place",
                m.name, m.peer_url
            ));
        }
        match pods.get(m.name.as_str()) {
            None => plan.refusals.push(format!(
                "etcd member {} has no Pod of that name; every member must run in its legacy Pod (`kubectl get pods -n {ns}`)",
                m.name
            )),
            Some(pod) => {
                if before_members && !pod_running_and_ready(pod) {
                    plan.refusals.push(format!(
                        "Pod {} is not Running and Ready; a migration starts from a healthy cluster (wait, or repair it with the legacy operator)",
                        m.name
                    ));
                }
                if data_claim(pod).as_deref()
                    != Some(etcd_operator::build::pvc_name(&m.name).as_str())
                {
                    plan.refusals.push(format!(
                        "Pod {} does not mount claim {} as its data volume; it cannot be taken over in place",
                        m.name,
                        etcd_operator::build::pvc_name(&m.name)
                    ));
                }
            }
        }
    }
    if before_members {
        let in_etcd: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
        for pod in &facts.pods {
            let pod_name = name(&pod.metadata);
            let ours = facts
                .stateful_set
                .as_ref()
                .is_some_and(|s| controller(&pod.metadata) == s.metadata.uid.as_deref());
            if ours && !in_etcd.contains(&pod_name) {
                plan.refusals.push(format!(
                    "StatefulSet Pod {pod_name} is not a member in etcd's list; a migration starts from a cluster whose Pods are all members (scale the legacy cluster back, or wait for it to form)"
                ));
            }
        }
    }
    if members.is_empty() && plan.refusals.is_empty() {
        plan.refusals
            .push("etcd lists no member; nothing to migrate".into());
    }
    if let Some(replicas) = legacy.spec.replicas
        && replicas as usize != members.len()
        && !members.is_empty()
    {
        plan.warnings.push(format!(
            "the legacy spec.replicas is {replicas}, etcd has {} members: the new cluster gets replicas {} (what runs); scale it afterwards",
            members.len(),
            members.len()
        ));
    }

    // The objects to write.
    let mut spec = translation.spec.clone();
    spec["replicas"] = json!(members.len());
    let mut annotations = BTreeMap::from([(
        MIGRATED_FROM_ANNOTATION.to_string(),
        format!("{}/EtcdCluster/{cluster}", legacy::API_VERSION),
    )]);
    if translation.peer_auto_tls {
        annotations.insert(
            etcd_operator::build::PEER_AUTO_TLS_ANNOTATION.to_string(),
            "true".into(),
        );
    }
    if let Some(file) = &facts.snapshot.file
        && !facts.snapshot.skip
    {
        annotations.insert(
            MIGRATION_SNAPSHOT_ANNOTATION.to_string(),
            file.display().to_string(),
        );
    } else if facts.snapshot.skip {
        annotations.insert(
            MIGRATION_SNAPSHOT_ANNOTATION.to_string(),
            "skipped (--skip-snapshot)".into(),
        );
    }
    plan.etcd_cluster = json!({
        "apiVersion": "etcd-operator.cozystack.io/v1alpha2",
        "kind": "EtcdCluster",
        "metadata": {"name": cluster, "namespace": ns, "annotations": annotations},
        "spec": spec,
    });
    let token = legacy::cluster_token(cluster, ns);
    let initial_cluster = members
        .iter()
        .map(|m| format!("{}={}", m.name, m.peer_url))
        .collect::<Vec<_>>()
        .join(",");
    plan.cluster_status = json!({
        "clusterID": cluster_id.map(|id| format!("{id:016x}")),
        "clusterToken": token,
        // `observed` is completed from the created object (its defaults) when written.
    });
    let mut member_tls = serde_json::Map::new();
    if let Some(client) = spec["tls"]["client"].as_object() {
        member_tls.insert(
            "clientServerSecretRef".into(),
            client["serverSecretRef"].clone(),
        );
        if client.contains_key("operatorClientSecretRef") {
            member_tls.insert("clientMTLS".into(), json!(true));
        }
    }
    if let Some(peer) = spec["tls"]["peer"]["secretRef"].as_object() {
        member_tls.insert("peerSecretRef".into(), json!(peer));
    } else if translation.peer_auto_tls {
        member_tls.insert("peerAutoTLS".into(), json!(true));
    }
    for m in members.iter().filter(|m| !m.name.is_empty()) {
        let pvc = etcd_operator::build::pvc_name(&m.name);
        let pod_uid = pods
            .get(m.name.as_str())
            .and_then(|p| p.metadata.uid.clone())
            .unwrap_or_default();
        let mut member_spec = json!({
            "clusterName": cluster,
            "version": spec["version"],
            "storage": spec["storage"],
            "initialCluster": initial_cluster,
            "clusterToken": token,
            "replicas": 1,
        });
        for field in [
            "resources",
            "additionalMetadata",
            "affinity",
            "topologySpreadConstraints",
            "options",
            "imagePullSecrets",
        ] {
            if !spec[field].is_null() {
                member_spec[field] = spec[field].clone();
            }
        }
        if !member_tls.is_empty() {
            member_spec["tls"] = Value::Object(member_tls.clone());
        }
        plan.members.push(MemberPlan {
            name: m.name.clone(),
            id: m.id,
            peer_url: m.peer_url.clone(),
            pod_uid: pod_uid.clone(),
            pvc: pvc.clone(),
            member: json!({
                "apiVersion": "etcd-operator.cozystack.io/v1alpha2",
                "kind": "EtcdMember",
                "metadata": {
                    "name": m.name, "namespace": ns,
                    "labels": member_labels(cluster, &m.name),
                    "annotations": member_annotations(&plan.legacy_headless_service),
                    "finalizers": [etcd_operator_api::labels::MEMBER_FINALIZER],
                },
                "spec": member_spec,
            }),
            status: json!({
                "memberID": member_id_hex(m.id),
                "podName": m.name,
                "podUID": pod_uid,
                "pvcName": pvc,
                "isVoter": !m.learner,
                "replicas": 1,
                "selector": member_selector(cluster, &m.name),
            }),
        });
    }
    plan.generated_secret = translation
        .auth_secret
        .as_ref()
        .filter(|(_, generate)| *generate)
        .map(|(s, _)| s.clone());
    plan.disable_auth = auth_enabled;

    // Legacy backups and schedules of this cluster.
    for backup in &facts.backups {
        match translate_backup(&backup.spec) {
            Ok(spec) => {
                if backup.phase.as_deref() == Some("Complete") {
                    plan.warnings.push(format!(
                        "EtcdBackup {} is Complete ({}); its artifact stays where it is, and the EtcdSnapshot {} made from it takes a new snapshot when the operator starts",
                        backup.name,
                        backup.uri.as_deref().unwrap_or("no URI recorded"),
                        backup.name
                    ));
                }
                plan.snapshots.push((backup.name.clone(), spec));
            }
            Err(why) => plan.refusals.push(format!(
                "EtcdBackup {}: {why}; fix or delete it and run again",
                backup.name
            )),
        }
    }
    for schedule in &facts.schedules {
        match translate_schedule(&schedule.spec) {
            Ok(spec) => plan.schedules.push((schedule.name.clone(), spec)),
            Err(why) => plan.refusals.push(format!(
                "EtcdBackupSchedule {}: {why}; fix or delete it and run again",
                schedule.name
            )),
        }
    }
    if !plan.schedules.is_empty() {
        plan.warnings.push(
            "EtcdBackupSchedules become EtcdSnapshotSchedules without retention: the legacy schedule never deleted a stored snapshot (its history limits count Jobs); set spec.retention to prune".into(),
        );
    }

    plan.steps = steps(facts, &plan);
    plan
}

fn labelled_and_owned(meta: &ObjectMeta, labels: &BTreeMap<String, String>, owner: &str) -> bool {
    let have = meta.labels.clone().unwrap_or_default();
    controller(meta) == Some(owner) && labels.iter().all(|(k, v)| have.get(k) == Some(v))
}

fn steps(facts: &Facts, plan: &Plan) -> Vec<PlannedStep> {
    let ns = &plan.namespace;
    let cluster = &plan.cluster;
    let new_members: BTreeMap<&str, &etcd_operator_api::EtcdMember> = facts
        .new_members
        .iter()
        .map(|m| (name(&m.metadata), m))
        .collect();
    let member_uids: Vec<&str> = plan
        .members
        .iter()
        .filter_map(|m| new_members.get(m.name.as_str()))
        .filter_map(|m| m.metadata.uid.as_deref())
        .collect();
    let cluster_made = facts
        .new_cluster
        .as_ref()
        .and_then(|c| c.status.as_ref())
        .is_some_and(|s| s.cluster_id.is_some() && s.observed.is_some());
    let members_made = !plan.members.is_empty()
        && plan.members.iter().all(|m| {
            new_members
                .get(m.name.as_str())
                .and_then(|n| n.status.as_ref())
                .is_some_and(|s| s.member_id.is_some())
        });
    let handed_over = |meta: Option<&ObjectMeta>| {
        meta.is_none_or(|meta| {
            let owners = owner_uids(meta);
            members_made
                && owners.len() == member_uids.len()
                && member_uids.iter().all(|u| owners.contains(u))
        })
    };
    let headless = facts
        .services
        .get(&plan.legacy_headless_service)
        .map(|s| &s.metadata);
    let legacy_uid = facts.legacy.as_ref().map(|l| l.uid.as_str());
    let pdb_left = facts
        .pdb
        .as_ref()
        .is_some_and(|p| owner_uids(&p.metadata).contains(&legacy_uid.unwrap_or_default()));
    let pods: BTreeMap<&str, &Pod> = facts.pods.iter().map(|p| (name(&p.metadata), p)).collect();
    let pvcs: BTreeMap<&str, &PersistentVolumeClaim> =
        facts.pvcs.iter().map(|p| (name(&p.metadata), p)).collect();
    let adopted = members_made
        && plan.members.iter().all(|m| {
            let Some(uid) = new_members
                .get(m.name.as_str())
                .and_then(|n| n.metadata.uid.as_deref())
            else {
                return false;
            };
            let mut pod_labels = member_labels(cluster, &m.name);
            pod_labels.insert(ROLE.into(), ROLE_VOTER.into());
            pods.get(m.name.as_str())
                .is_some_and(|p| labelled_and_owned(&p.metadata, &pod_labels, uid))
                && pvcs.get(m.pvc.as_str()).is_some_and(|c| {
                    labelled_and_owned(&c.metadata, &member_labels(cluster, &m.name), uid)
                })
        });
    let new_uid = facts
        .new_cluster
        .as_ref()
        .and_then(|c| c.metadata.uid.as_deref());
    let headless_ours = facts.services.get(cluster).is_some_and(|s| {
        s.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None")
            && new_uid.is_some()
            && controller(&s.metadata) == new_uid
    });
    let client_exists = facts
        .services
        .contains_key(&etcd_operator::build::client_service_name(cluster));
    let backups_left = !facts.backups.is_empty() || !facts.schedules.is_empty();
    let legacy_left = facts.legacy.is_some();

    let mut out = Vec::new();
    let mut push = |kind: StepKind, done: bool, text: String| {
        out.push(PlannedStep {
            number: out.len() + 1,
            kind,
            done,
            text,
        });
    };
    let snapshot_text = match (&facts.snapshot.file, facts.snapshot.skip) {
        (_, true) => "no safety snapshot (--skip-snapshot)".to_string(),
        (Some(file), false) => format!(
            "take a safety snapshot of etcd into {} (streamed through a port-forward, SHA-256 checked, written atomically)",
            file.display()
        ),
        (None, false) => {
            "take a safety snapshot: say where with --snapshot-file FILE (or --skip-snapshot)"
                .into()
        }
    };
    push(
        StepKind::Snapshot,
        facts.snapshot.skip || facts.new_cluster.is_some(),
        snapshot_text,
    );
    push(
        StepKind::CreateCluster,
        cluster_made,
        format!(
            "create EtcdCluster {ns}/{cluster} (replicas {}, version {}) with its status filled in (clusterID {}, clusterToken {}, observed spec), so no bootstrap runs{}",
            plan.etcd_cluster["spec"]["replicas"],
            plan.etcd_cluster["spec"]["version"].as_str().unwrap_or("?"),
            plan.cluster_status["clusterID"]
                .as_str()
                .unwrap_or("(from etcd)"),
            plan.cluster_status["clusterToken"]
                .as_str()
                .unwrap_or_default(),
            plan.generated_secret
                .as_ref()
                .map(|s| format!(", and Secret {s} with a generated root password"))
                .unwrap_or_default()
        ),
    );
    push(
        StepKind::CreateMembers,
        members_made,
        format!(
            "create EtcdMembers {} (named after the Pods, annotated with the legacy Service {} and data directory {}, status memberID {})",
            plan.members
                .iter()
                .map(|m| m.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            plan.legacy_headless_service,
            legacy::DATA_SUBDIR,
            plan.members
                .iter()
                .map(|m| member_id_hex(m.id))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    push(
        StepKind::HandOverLegacyObjects,
        members_made
            && handed_over(headless)
            && handed_over(facts.config_map.as_ref().map(|c| &c.metadata)),
        format!(
            "hand the legacy headless Service {} (the members' peer DNS names) and ConfigMap {} (read by the legacy Pods' environment) to the migrated EtcdMembers, so they live as long as one of them does",
            plan.legacy_headless_service, plan.legacy_config_map
        ),
    );
    push(
        StepKind::DeleteStatefulSet,
        facts.stateful_set.is_none(),
        format!(
            "delete StatefulSet {} with propagationPolicy Orphan and wait until it is gone (its Pods and claims stay, nothing restarts)",
            plan.stateful_set
        ),
    );
    push(
        StepKind::AdoptPodsAndClaims,
        adopted,
        format!(
            "label Pods and PVCs {} with this operator's labels (Pods as voters) and make each EtcdMember their controller",
            plan.members
                .iter()
                .map(|m| format!("{}+{}", m.name, m.pvc))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    push(
        StepKind::ReplaceServices,
        headless_ours && client_exists,
        if plan.legacy_client_service == *cluster {
            format!(
                "replace the legacy client Service {cluster} (ClusterIP) with this operator's headless Service {cluster} (same DNS name, now the Pods' addresses), and create the client Service {}",
                etcd_operator::build::client_service_name(cluster)
            )
        } else {
            format!(
                "create this operator's headless Service {cluster} and client Service {} (the legacy client Service {} is left as it is)",
                etcd_operator::build::client_service_name(cluster),
                plan.legacy_client_service
            )
        },
    );
    push(
        StepKind::TranslateBackups,
        !backups_left,
        if plan.snapshots.is_empty() && plan.schedules.is_empty() {
            "no EtcdBackup or EtcdBackupSchedule to translate".into()
        } else {
            format!(
                "create EtcdSnapshots {:?} and EtcdSnapshotSchedules {:?} from the legacy objects of the same names, then delete those (a schedule's CronJob goes with it)",
                plan.snapshots
                    .iter()
                    .map(|s| s.0.as_str())
                    .collect::<Vec<_>>(),
                plan.schedules
                    .iter()
                    .map(|s| s.0.as_str())
                    .collect::<Vec<_>>()
            )
        },
    );
    push(
        StepKind::DisableAuth,
        !plan.disable_auth,
        "turn etcd's authentication off (the operator turns it on again with the Secret's password)".into(),
    );
    push(
        StepKind::DeleteLegacyObjects,
        !legacy_left && !pdb_left,
        format!(
            "delete the legacy PodDisruptionBudget {cluster} (if it has one) and the legacy EtcdCluster {cluster} with propagationPolicy Orphan (last: until then a run can resume)"
        ),
    );
    out
}
