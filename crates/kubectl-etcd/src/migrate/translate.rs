//! The legacy spec in this operator's API, pure: what carries over, what is dropped with a
//! warning, and what is refused (with the reason and what to do), for EtcdClusters,
//! EtcdBackups and EtcdBackupSchedules.
//!
//! What the legacy Pods run is the source of truth where the spec is not: the etcd image of
//! the StatefulSet's template gives the version, and the flags every legacy Pod runs with
//! whatever the spec says (`--auto-compaction-retention=5m`, `--snapshot-count=10000`, a quota
//! of 95 % of the volume) become typed `options`, so a Pod this operator makes again runs
//! with the same settings.

use std::collections::BTreeMap;

use etcd_operator::domain::quantity::quantity_bytes;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use serde_json::{Map, Value, json};

use super::legacy::{self, BackupSpec, ClusterSpec};

/// Knobs of one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TranslateOptions {
    /// `--version`: the etcd version, when the image tag does not say it.
    pub version: Option<String>,
    /// `--auth-secret`: an existing basic-auth Secret with root's password, for clusters with
    /// authentication; otherwise `<cluster>-root-credentials` is generated.
    pub auth_secret: Option<String>,
}

/// One legacy EtcdCluster in this operator's API.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterTranslation {
    /// The new EtcdCluster's spec (JSON, as the API takes it).
    pub spec: Value,
    /// The members run etcd's `--peer-auto-tls` (the legacy default without a peer Secret).
    pub peer_auto_tls: bool,
    /// The root-credentials Secret the new cluster names, and whether the tool creates it.
    pub auth_secret: Option<(String, bool)>,
    /// Settings that do not carry over, one sentence each.
    pub warnings: Vec<String>,
    /// Why the cluster cannot be migrated, with what to do; empty when it can.
    pub refusals: Vec<String>,
}

fn version_of(image: &str) -> Option<String> {
    let tag = image.rsplit_once(':')?.1;
    let tag = tag.strip_prefix('v').unwrap_or(tag);
    let parts: Vec<&str> = tag.split('.').collect();
    (parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())))
    .then(|| tag.to_string())
}

fn is_version(text: &str) -> bool {
    version_of(&format!("x:{text}")).as_deref() == Some(text)
}

/// The `etcd` container of a Pod spec.
pub fn etcd_container(spec: &PodSpec) -> Option<&Container> {
    spec.containers.iter().find(|c| c.name == "etcd")
}

/// `podTemplate.spec.containers[name=etcd]`, as JSON (the overlay need not be a full
/// container).
fn template_container<'a>(template: &'a Value, name: &str) -> Option<&'a Value> {
    template["containers"]
        .as_array()?
        .iter()
        .find(|c| c["name"] == name)
}

/// `auto-compaction-retention`'s values this operator's CRD accepts.
fn is_retention(text: &str) -> bool {
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_digit()) {
        return true;
    }
    let mut rest = text;
    if rest.is_empty() {
        return false;
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number = &rest[..digits];
        if number.is_empty()
            || number.starts_with('.')
            || number.ends_with('.')
            || number.matches('.').count() > 1
        {
            return false;
        }
        rest = &rest[digits..];
        let unit = ["ms", "s", "m", "h"]
            .into_iter()
            .find(|u| rest.starts_with(u));
        match unit {
            Some(u) => rest = &rest[u.len()..],
            None => return false,
        }
    }
    true
}

/// Translates one legacy EtcdCluster. `running` is the StatefulSet's Pod template (what the
/// Pods run), when the StatefulSet exists.
pub fn translate_cluster(
    name: &str,
    spec: &ClusterSpec,
    running: Option<&PodSpec>,
    options: &TranslateOptions,
) -> ClusterTranslation {
    let mut out = ClusterTranslation::default();
    let mut new = Map::new();
    let template = spec
        .pod_template
        .as_ref()
        .and_then(|t| t.spec.clone())
        .unwrap_or(Value::Null);
    let running_etcd = running.and_then(etcd_container);

    new.insert("replicas".into(), json!(spec.replicas.unwrap_or(3)));

    // The version: --version, else the running image's tag, else the pod template's, else the
    // legacy default image's.
    let image = running_etcd
        .and_then(|c| c.image.clone())
        .or_else(|| {
            template_container(&template, "etcd")
                .and_then(|c| c["image"].as_str())
                .map(str::to_string)
        })
        .unwrap_or_else(|| legacy::DEFAULT_IMAGE.to_string());
    match &options.version {
        Some(v) if is_version(v) => {
            new.insert("version".into(), json!(v));
        }
        Some(v) => out.refusals.push(format!(
            "--version {v:?} is not a version MAJOR.MINOR.PATCH; pass e.g. --version 3.5.12"
        )),
        None => match version_of(&image) {
            Some(v) => {
                new.insert("version".into(), json!(v));
            }
            None => out.refusals.push(format!(
                "the etcd image {image} has no version tag (vMAJOR.MINOR.PATCH); pass --version with the version it runs (`kubectl exec <pod> -- etcd --version`)"
            )),
        },
    }

    // Storage: only claims can be taken over; an emptyDir's data lives and dies with its Pod.
    let claim_spec = spec
        .storage
        .volume_claim_template
        .as_ref()
        .and_then(|t| t.spec.clone());
    let size = claim_spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone());
    if spec.storage.empty_dir.is_some() {
        out.refusals.push(
            "storage.emptyDir: the data lives in each Pod's emptyDir, which no other Pod can take over (a Pod made again would start empty); migrate by restoring a snapshot into a new cluster instead (`kubectl etcdop snapshot` of the legacy cluster, then spec.bootstrap.restore)".into(),
        );
    } else if claim_spec.is_none() || size.is_none() {
        out.refusals.push(
            "storage has no volumeClaimTemplate with resources.requests.storage: the legacy operator ran such a cluster on emptyDir volumes, which cannot be taken over; restore a snapshot into a new cluster instead".into(),
        );
    } else {
        let mut storage = Map::new();
        storage.insert("size".into(), json!(size));
        if let Some(class) = claim_spec
            .as_ref()
            .and_then(|s| s.storage_class_name.clone())
        {
            storage.insert("storageClassName".into(), json!(class));
        }
        new.insert("storage".into(), Value::Object(storage));
    }

    // Options: the flags every legacy Pod runs with, overridden by spec.options as the legacy
    // command line does (later flags win); keys without a typed field are refused.
    let mut typed = Map::new();
    typed.insert(
        "autoCompactionRetention".into(),
        json!(legacy::FIXED_AUTO_COMPACTION_RETENTION),
    );
    typed.insert("snapshotCount".into(), json!(legacy::FIXED_SNAPSHOT_COUNT));
    if let Some(bytes) = size.as_deref().and_then(quantity_bytes) {
        let quota = (bytes as f64 * 0.95).floor() as i64;
        if quota > 0 {
            typed.insert("quotaBackendBytes".into(), json!(quota));
        }
    }
    let mut untyped = Vec::new();
    for (key, value) in spec.options.iter().flatten() {
        let integer = || value.parse::<i64>().ok().filter(|n| *n >= 0);
        match key.as_str() {
            "quota-backend-bytes" if value.is_empty() => {}
            "quota-backend-bytes" => match integer() {
                Some(n) => {
                    typed.insert("quotaBackendBytes".into(), json!(n));
                }
                None => out.refusals.push(format!(
                    "spec.options[quota-backend-bytes]={value:?} is not a number of bytes; correct it in the legacy EtcdCluster (`kubectl edit etcdclusters.etcd.aenix.io {name}`) and run again"
                )),
            },
            "snapshot-count" => match integer().filter(|n| *n >= 1) {
                Some(n) => {
                    typed.insert("snapshotCount".into(), json!(n));
                }
                None => out.refusals.push(format!(
                    "spec.options[snapshot-count]={value:?} is not a positive integer; correct it in the legacy EtcdCluster and run again"
                )),
            },
            "auto-compaction-mode" if value == "periodic" || value == "revision" => {
                typed.insert("autoCompactionMode".into(), json!(value));
            }
            "auto-compaction-mode" => out.refusals.push(format!(
                "spec.options[auto-compaction-mode]={value:?} is neither periodic nor revision; correct it in the legacy EtcdCluster and run again"
            )),
            "auto-compaction-retention" if is_retention(value) => {
                typed.insert("autoCompactionRetention".into(), json!(value));
            }
            "auto-compaction-retention" => out.refusals.push(format!(
                "spec.options[auto-compaction-retention]={value:?} is not a duration (5m, 1h) or a number; correct it in the legacy EtcdCluster and run again"
            )),
            _ => untyped.push(if value.is_empty() {
                format!("--{key}")
            } else {
                format!("--{key}={value}")
            }),
        }
    }
    if !untyped.is_empty() {
        out.refusals.push(format!(
            "spec.options has etcd flags this operator has no typed field for: {}; the running Pods keep them, but a Pod this operator makes would run without them. Remove them from the legacy EtcdCluster to accept that (`kubectl edit etcdclusters.etcd.aenix.io {name}`; the legacy operator is stopped, nothing restarts), then run again",
            untyped.join(" ")
        ));
    }
    new.insert("options".into(), Value::Object(typed));

    // The pod template: what has a field here carries over, the rest is reported.
    let metadata = spec.pod_template.as_ref().and_then(|t| t.metadata.clone());
    if let Some(m) = metadata {
        let mut additional = Map::new();
        if let Some(labels) = m.labels.filter(|l| !l.is_empty()) {
            additional.insert("labels".into(), json!(labels));
        }
        if let Some(annotations) = m.annotations.filter(|a| !a.is_empty()) {
            additional.insert("annotations".into(), json!(annotations));
        }
        if !additional.is_empty() {
            new.insert("additionalMetadata".into(), Value::Object(additional));
        }
    }
    for field in ["affinity", "topologySpreadConstraints", "imagePullSecrets"] {
        if !template[field].is_null() {
            new.insert(field.into(), template[field].clone());
        }
    }
    let resources = template_container(&template, "etcd")
        .map(|c| c["resources"].clone())
        .filter(|r| !r.is_null() && r != &json!({}));
    if let Some(resources) = resources {
        new.insert("resources".into(), resources);
    }
    let mut dropped: Vec<String> = Vec::new();
    if let Some(fields) = template.as_object() {
        for (field, value) in fields {
            let kept = matches!(
                field.as_str(),
                "affinity" | "topologySpreadConstraints" | "imagePullSecrets" | "containers"
            );
            if !kept && !value.is_null() {
                dropped.push(field.clone());
            }
        }
    }
    for container in template["containers"].as_array().into_iter().flatten() {
        let container_name = container["name"].as_str().unwrap_or_default();
        if container_name != "etcd" {
            dropped.push(format!("containers[{container_name}] (a sidecar)"));
            continue;
        }
        for (field, value) in container.as_object().into_iter().flatten() {
            if !matches!(field.as_str(), "name" | "image" | "resources") && !value.is_null() {
                dropped.push(format!("containers[etcd].{field}"));
            }
        }
    }
    if !dropped.is_empty() {
        dropped.sort();
        out.warnings.push(format!(
            "spec.podTemplate.spec fields with no field here are not carried over (Pods this operator makes have its own probes, command and security context): {}",
            dropped.join(", ")
        ));
    }
    if spec.service_template.is_some() {
        out.warnings.push(
            "spec.serviceTemplate: the client Service is this operator's `<cluster>-client` (the legacy client Service's name becomes the headless Service); its type, annotations and extra ports are not carried over".into(),
        );
    }
    if spec.headless_service_template.is_some() {
        out.warnings.push(
            "spec.headlessServiceTemplate: its labels and annotations are not carried over; the Service itself is kept for the migrated members' DNS names".into(),
        );
    }
    if spec.pod_disruption_budget_template.is_some() {
        out.warnings.push(
            "spec.podDisruptionBudgetTemplate: this operator makes its own PodDisruptionBudget (a majority of the voters must stay); the legacy one is deleted".into(),
        );
    }
    if spec.bootstrap.is_some() {
        out.warnings.push(
            "spec.bootstrap.restore is not carried over: it was used when the legacy cluster was created, and a migrated cluster never bootstraps".into(),
        );
    }

    // TLS and authentication.
    let tls = spec.tls();
    let mut new_tls = Map::new();
    if let Some(server) = tls.server() {
        let mut client = Map::new();
        client.insert("serverSecretRef".into(), json!({"name": server}));
        if let Some(operator) = tls.client() {
            client.insert("operatorClientSecretRef".into(), json!({"name": operator}));
        }
        new_tls.insert("client".into(), Value::Object(client));
        for (ca, what) in [
            (tls.server_ca(), "serverTrustedCASecret"),
            (tls.client_ca(), "clientTrustedCASecret"),
        ] {
            if let Some(ca) = ca.filter(|ca| *ca != server) {
                out.warnings.push(format!(
                    "{what} {ca}: this operator reads the client CA from the server Secret {server}'s ca.crt (for its own connections and etcd's --trusted-ca-file); copy ca.crt of Secret {ca} into Secret {server} before the operator starts"
                ));
            }
        }
    } else if tls.client().is_some() || tls.server_ca().is_some() || tls.client_ca().is_some() {
        out.warnings.push(
            "client TLS Secrets without serverSecret enabled nothing in the legacy operator and are not carried over".into(),
        );
    }
    if let Some(peer) = tls.peer() {
        new_tls.insert("peer".into(), json!({"secretRef": {"name": peer}}));
        if let Some(ca) = tls.peer_ca().filter(|ca| *ca != peer) {
            out.warnings.push(format!(
                "peerTrustedCASecret {ca}: this operator reads the peer CA from the peer Secret {peer}'s ca.crt; copy it there before the operator starts"
            ));
        }
    } else {
        let auto = running_etcd.is_none_or(|c| {
            c.args
                .iter()
                .chain(c.command.iter())
                .flatten()
                .any(|a| a == "--peer-auto-tls")
        });
        out.peer_auto_tls = auto;
        if auto {
            out.warnings.push(
                "the members run etcd with --peer-auto-tls (the legacy default without peerSecret): peer traffic is encrypted but not authenticated. The cluster is annotated etcd-operator.cozystack.io/peer-auto-tls=true so that members this operator adds run the same way and can join; real peer TLS needs a new cluster (spec.tls cannot change)".into(),
            );
        }
    }
    if !new_tls.is_empty() {
        new.insert("tls".into(), Value::Object(new_tls));
    }
    if spec.auth_enabled() {
        if tls.server().is_none() {
            out.refusals.push(
                "security.enableAuth without TLS (no security.tls.serverSecret): this operator never sends root's password over a plaintext connection, so it could not manage this cluster; give the legacy cluster server TLS first, or restore a snapshot into a new cluster with TLS".into(),
            );
        } else {
            let (secret, generate) = match &options.auth_secret {
                Some(s) => (s.clone(), false),
                None => (format!("{name}-root-credentials"), true),
            };
            new.insert(
                "auth".into(),
                json!({"enabled": true, "rootCredentialsSecretRef": {"name": secret}}),
            );
            out.warnings.push(format!(
                "authentication: the legacy root user has no password (certificate only), which this operator cannot use; the migration turns authentication off (as root, with the legacy client certificate) and the operator turns it on again with the password of Secret {secret}{}; clients are unauthenticated in between",
                if generate { " (generated)" } else { "" }
            ));
            out.auth_secret = Some((secret, generate));
        }
    }
    out.spec = Value::Object(new);
    out
}

/// A legacy destination (`s3` or `pvc`) as this operator's `SnapshotLocation` (the same
/// fields), or why not.
pub fn translate_destination(destination: Option<&Value>) -> Result<Value, String> {
    let d = destination.cloned().unwrap_or(Value::Null);
    match (d["s3"].is_object(), d["pvc"].is_object()) {
        (true, false) => {
            let s3 = &d["s3"];
            let mut out = Map::new();
            for field in [
                "endpoint",
                "bucket",
                "key",
                "credentialsSecretRef",
                "region",
                "forcePathStyle",
            ] {
                if !s3[field].is_null() && s3[field] != json!("") {
                    out.insert(field.into(), s3[field].clone());
                }
            }
            Ok(json!({"s3": out}))
        }
        (false, true) => {
            let pvc = &d["pvc"];
            let mut out = Map::new();
            for field in ["claimName", "subPath"] {
                if !pvc[field].is_null() && pvc[field] != json!("") {
                    out.insert(field.into(), pvc[field].clone());
                }
            }
            Ok(json!({"pvc": out}))
        }
        (true, true) => Err("destination has both s3 and pvc".into()),
        (false, false) => Err("destination has neither s3 nor pvc".into()),
    }
}

/// A legacy EtcdBackup as an EtcdSnapshot spec (the operator takes it when it starts).
pub fn translate_backup(spec: &BackupSpec) -> Result<Value, String> {
    let cluster = spec
        .cluster_ref
        .as_ref()
        .map(|r| r.name.clone())
        .filter(|n| !n.is_empty())
        .ok_or("spec.clusterRef.name is empty")?;
    let destination = translate_destination(spec.destination.as_ref())?;
    Ok(json!({"clusterRef": {"name": cluster}, "destination": destination}))
}

/// A legacy EtcdBackupSchedule as an EtcdSnapshotSchedule spec. No retention: the legacy
/// schedule never deleted a stored snapshot (its history limits count Jobs), so nothing is
/// pruned until a retention is set.
pub fn translate_schedule(spec: &BackupSpec) -> Result<Value, String> {
    let base = translate_backup(spec)?;
    let schedule = spec
        .schedule
        .clone()
        .filter(|s| !s.trim().is_empty())
        .ok_or("spec.schedule is empty")?;
    let mut out = json!({
        "clusterRef": base["clusterRef"],
        "schedule": schedule,
        "concurrencyPolicy": "Forbid",
        "template": {"destination": base["destination"]},
    });
    if let Some(limit) = spec.failed_jobs_history_limit {
        out["failedHistoryLimit"] = json!(limit);
    }
    Ok(out)
}

/// The member annotations of a migrated member (the legacy headless Service and data
/// subdirectory) as the operator's builders read them.
pub fn member_annotations(headless_service: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            etcd_operator::build::HEADLESS_SERVICE_ANNOTATION.to_string(),
            headless_service.to_string(),
        ),
        (
            etcd_operator::build::DATA_DIR_SUBPATH_ANNOTATION.to_string(),
            legacy::DATA_SUBDIR.to_string(),
        ),
    ])
}
