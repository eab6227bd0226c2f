//! Bootstrap from a snapshot: the init containers that fill the seed's data directory from
//! `spec.bootstrap.restore` before etcd starts, and how their failure reads back.
//!
//! Only the seed's *first* Pod carries them (a member with `spec.restore` whose Pod is created
//! with [`StartKind::Bootstrap`]): every later Pod of that member resumes on its own data, so a
//! wiped volume is never filled from the old snapshot again (etcd refuses to start on it, and
//! the member is replaced from the live cluster).
//!
//! Three steps, each safe to repeat, none leaving a half-filled data directory:
//! 1. `restore-fetch` (the operator's image, `etcd-operator restore-fetch`): downloads the
//!    object into `<volume>/.restore/snapshot.db.part`, checks etcd's trailing SHA-256 on the
//!    way, fsyncs and renames it to `snapshot.db`.
//! 2. `restore` (the member's etcd image): `etcdutl snapshot restore` (`etcdctl` for 3.4)
//!    into `<volume>/.restore/data`, with the member's name, peer URL and the cluster token.
//! 3. `restore-commit` (`etcd-operator restore-commit`): renames `.restore/data/member` into
//!    the data directory, unless the data directory already holds a member (then it is kept),
//!    and removes `.restore`.

use etcd_operator_api::EtcdMember;
use etcd_operator_api::shared::{SnapshotLocation, StorageMedium};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EnvVar, EnvVarSource, PersistentVolumeClaimVolumeSource, PodStatus,
    SecretKeySelector, SecurityContext, Volume, VolumeMount,
};

use super::names::DATA_DIR;
use super::start::{PodStart, StartKind};
use super::{member_data_dir, member_peer_url};
use crate::domain::settings::OperatorSettings;

/// The init containers, in order.
pub const RESTORE_FETCH_CONTAINER: &str = "restore-fetch";
pub const RESTORE_CONTAINER: &str = "restore";
pub const RESTORE_COMMIT_CONTAINER: &str = "restore-commit";
/// The scratch directory on the data volume (same filesystem as the data directory, so the
/// final rename is atomic).
pub const RESTORE_WORK_DIR: &str = "/var/lib/etcd/.restore";
/// The first word of the agent's last line when it fails.
pub const RESTORE_FAILED_MARK: &str = "RestoreFailed";

/// Where a PVC restore source is mounted (read-only) in the seed's first Pod.
pub const RESTORE_SOURCE_MOUNT: &str = "/snapshot-source";
/// That volume's name.
pub const RESTORE_SOURCE_VOLUME: &str = "restore-source";

/// Whether `member`'s Pod runs the restore init containers: a persistent member with
/// `spec.restore` whose Pod bootstraps the cluster.
fn restores(member: &EtcdMember, start: &PodStart) -> bool {
    let name = member.metadata.name.as_deref().unwrap_or_default();
    member.spec.restore.is_some()
        && start.kind(name) == StartKind::Bootstrap
        && member.spec.storage.medium_or_default() == StorageMedium::Persistent
}

/// The PVC restore source as a volume of the restoring Pod (none for S3).
pub fn restore_volumes(member: &EtcdMember, start: &PodStart) -> Vec<Volume> {
    let Some(pvc) = member
        .spec
        .restore
        .as_ref()
        .and_then(|r| r.source.pvc.as_ref())
        .filter(|_| restores(member, start))
    else {
        return Vec::new();
    };
    vec![Volume {
        name: RESTORE_SOURCE_VOLUME.to_string(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: pvc.claim_name.clone(),
            read_only: Some(true),
        }),
        ..Default::default()
    }]
}

/// The restore init containers of `member`'s Pod, or none: only for a persistent member with
/// `spec.restore` (from S3 or a PVC) whose Pod bootstraps the cluster.
pub fn restore_init_containers(
    member: &EtcdMember,
    start: &PodStart,
    settings: &OperatorSettings,
) -> Vec<Container> {
    let Some(source) = member.spec.restore.as_ref().map(|r| &r.source) else {
        return Vec::new();
    };
    if !restores(member, start) {
        return Vec::new();
    }
    restore_containers(member, source, settings)
}

/// The three restore init containers for `member` from `source` (S3 or a PVC), whatever its
/// storage medium. A lost-quorum recovery from a snapshot puts them into the restored seed's
/// first Pod only (memory-backed members too: a later Pod of that member is a new member
/// joining the live cluster, never a second restore); it restores from S3 only, so the PVC
/// source volume of [`restore_volumes`] is not needed there.
pub fn restore_containers(
    member: &EtcdMember,
    source: &etcd_operator_api::shared::SnapshotLocation,
    settings: &OperatorSettings,
) -> Vec<Container> {
    let mount = VolumeMount {
        name: "data".to_string(),
        mount_path: DATA_DIR.to_string(),
        ..Default::default()
    };
    let identity = member
        .spec
        .restore
        .as_ref()
        .and_then(|r| r.age_identity_secret_ref.as_ref());
    let Some(fetch) = fetch_container(source, identity, &mount, settings) else {
        return Vec::new();
    };
    let mut containers = vec![fetch];
    containers.extend(restore_and_commit(member, &mount, settings));
    containers
}

/// The environment variable `restore-fetch` reads the age identity from (by reference to
/// the identity Secret, never as a value).
pub const AGE_IDENTITY_ENV: &str = "AGE_IDENTITY";

/// `restore-fetch` from `source` (S3, GCS, Azure, or the file of a PVC source mounted
/// read-only at [`RESTORE_SOURCE_MOUNT`]) into `<mount>/.restore/snapshot.db`, with the age identity of
/// `identity` (a Secret key) for an encrypted snapshot. Shared by the restore of a seed and
/// the restore check of an EtcdSnapshot (`verify: Restore`).
pub fn fetch_container(
    source: &etcd_operator_api::shared::SnapshotLocation,
    identity: Option<&etcd_operator_api::snapshot::SecretKeyRef>,
    mount: &VolumeMount,
    settings: &OperatorSettings,
) -> Option<Container> {
    use etcd_operator_api::shared::StoreKind;
    let mut fetch = match (source.store(), source) {
        (Some(StoreKind::S3), SnapshotLocation { s3: Some(s3), .. }) => {
            s3_fetch(s3, mount, settings)
        }
        (Some(StoreKind::Pvc), SnapshotLocation { pvc: Some(pvc), .. }) => {
            pvc_fetch(pvc, mount, settings)
        }
        (Some(StoreKind::Gcs | StoreKind::Azure | StoreKind::Local), _) => {
            store_fetch(source, mount, settings)
        }
        _ => return None,
    };
    if let Some(identity) = identity {
        fetch.env.get_or_insert_with(Vec::new).push(EnvVar {
            name: AGE_IDENTITY_ENV.to_string(),
            value: None,
            value_from: Some(EnvVarSource {
                secret_key_ref: Some(SecretKeySelector {
                    name: identity.name.clone(),
                    key: identity
                        .key_or(etcd_operator_api::snapshot::AGE_IDENTITY_KEY)
                        .to_string(),
                    optional: None,
                }),
                ..Default::default()
            }),
        });
    }
    Some(fetch)
}

/// `restore-fetch` from a file on the source claim (mounted read-only).
fn pvc_fetch(
    pvc: &etcd_operator_api::shared::PvcSnapshotLocation,
    mount: &VolumeMount,
    settings: &OperatorSettings,
) -> Container {
    let file = pvc
        .sub_path
        .as_deref()
        .unwrap_or_default()
        .trim_start_matches('/');
    let mut container = Container {
        name: RESTORE_FETCH_CONTAINER.to_string(),
        image: Some(settings.agent_image.clone()),
        args: Some(vec![
            "restore-fetch".to_string(),
            format!("--work-dir={RESTORE_WORK_DIR}"),
            format!("--file={RESTORE_SOURCE_MOUNT}/{file}"),
            format!("--uri=pvc://{}/{file}", pvc.claim_name),
        ]),
        ..agent_container(mount)
    };
    container
        .volume_mounts
        .get_or_insert_with(Vec::new)
        .push(VolumeMount {
            name: RESTORE_SOURCE_VOLUME.to_string(),
            mount_path: RESTORE_SOURCE_MOUNT.to_string(),
            read_only: Some(true),
            ..Default::default()
        });
    container
}

/// `restore-fetch` from S3 (credentials from the Secret, by reference).
fn s3_fetch(
    s3: &etcd_operator_api::shared::S3SnapshotLocation,
    mount: &VolumeMount,
    settings: &OperatorSettings,
) -> Container {
    let secret_env = |var: &str| EnvVar {
        name: var.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: s3.credentials_secret_ref.name.clone(),
                key: var.to_string(),
                optional: None,
            }),
            ..Default::default()
        }),
    };
    let mut fetch_args = vec![
        "restore-fetch".to_string(),
        format!("--work-dir={RESTORE_WORK_DIR}"),
        format!("--endpoint={}", s3.endpoint),
        format!("--bucket={}", s3.bucket),
        format!("--key={}", s3.key.clone().unwrap_or_default()),
    ];
    if let Some(region) = s3.region.as_deref().filter(|r| !r.is_empty()) {
        fetch_args.push(format!("--region={region}"));
    }
    if s3.force_path_style == Some(true) {
        fetch_args.push("--force-path-style".to_string());
    }
    Container {
        name: RESTORE_FETCH_CONTAINER.to_string(),
        image: Some(settings.agent_image.clone()),
        args: Some(fetch_args),
        env: Some(vec![
            secret_env("AWS_ACCESS_KEY_ID"),
            secret_env("AWS_SECRET_ACCESS_KEY"),
        ]),
        ..agent_container(mount)
    }
}

/// An environment variable from a key of the credentials Secret, by reference (never the
/// value); `optional` when the key may be absent (Azure takes either of two).
fn secret_env(secret: &str, key: &str, optional: bool) -> EnvVar {
    EnvVar {
        name: key.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_string(),
                key: key.to_string(),
                optional: optional.then_some(true),
            }),
            ..Default::default()
        }),
    }
}

/// `restore-fetch` from GCS or Azure (credentials from the Secret, by reference). A `local`
/// source, which admission refuses, gets a step that fails with what to do instead, so the
/// seed never starts on an empty data directory in its place.
fn store_fetch(
    source: &SnapshotLocation,
    mount: &VolumeMount,
    settings: &OperatorSettings,
) -> Container {
    use crate::domain::location::{AZURE_ACCOUNT_KEY, AZURE_SAS_TOKEN, GCS_SERVICE_ACCOUNT_KEY};
    let mut args = vec![
        "restore-fetch".to_string(),
        format!("--work-dir={RESTORE_WORK_DIR}"),
    ];
    let mut env = Vec::new();
    if let Some(gcs) = &source.gcs {
        args.push("--store=gcs".to_string());
        args.push(format!("--bucket={}", gcs.bucket));
        args.push(format!("--key={}", gcs.key.clone().unwrap_or_default()));
        if let Some(endpoint) = gcs.endpoint.as_deref().filter(|e| !e.is_empty()) {
            args.push(format!("--endpoint={endpoint}"));
        }
        let secret = &gcs.credentials_secret_ref.name;
        args.push(format!("--credentials-secret={secret}"));
        env.push(secret_env(secret, GCS_SERVICE_ACCOUNT_KEY, false));
    } else if let Some(azure) = &source.azure {
        args.push("--store=azure".to_string());
        args.push(format!("--account={}", azure.account));
        args.push(format!("--container={}", azure.container));
        args.push(format!("--key={}", azure.key.clone().unwrap_or_default()));
        if let Some(endpoint) = azure.endpoint.as_deref().filter(|e| !e.is_empty()) {
            args.push(format!("--endpoint={endpoint}"));
        }
        let secret = &azure.credentials_secret_ref.name;
        args.push(format!("--credentials-secret={secret}"));
        env.push(secret_env(secret, AZURE_ACCOUNT_KEY, true));
        env.push(secret_env(secret, AZURE_SAS_TOKEN, true));
    } else if let Some(local) = &source.local {
        args.push("--store=local".to_string());
        args.push(format!("--key={}", local.path));
    }
    Container {
        name: RESTORE_FETCH_CONTAINER.to_string(),
        image: Some(settings.agent_image.clone()),
        args: Some(args),
        env: (!env.is_empty()).then_some(env),
        ..agent_container(mount)
    }
}

/// Steps 2 and 3: `etcdutl snapshot restore` and `restore-commit`.
fn restore_and_commit(
    member: &EtcdMember,
    mount: &VolumeMount,
    settings: &OperatorSettings,
) -> Vec<Container> {
    let name = member.metadata.name.as_deref().unwrap_or_default();
    let peer_url = member_peer_url(member);
    let v34 = !crate::domain::versions::restores_with_etcdutl(&member.spec.version);
    let (tool, env) = if v34 {
        (
            "/usr/local/bin/etcdctl",
            Some(vec![EnvVar {
                name: "ETCDCTL_API".to_string(),
                value: Some("3".to_string()),
                value_from: None,
            }]),
        )
    } else {
        ("/usr/local/bin/etcdutl", None)
    };
    let restore = Container {
        name: RESTORE_CONTAINER.to_string(),
        image: Some(settings.etcd_image(&member.spec.version)),
        command: Some(vec![
            tool.to_string(),
            "snapshot".to_string(),
            "restore".to_string(),
            format!("{RESTORE_WORK_DIR}/snapshot.db"),
            format!("--data-dir={RESTORE_WORK_DIR}/data"),
            format!("--name={name}"),
            format!("--initial-cluster={name}={peer_url}"),
            format!("--initial-cluster-token={}", member.spec.cluster_token),
            format!("--initial-advertise-peer-urls={peer_url}"),
        ]),
        env,
        ..agent_container(mount)
    };
    let commit = Container {
        name: RESTORE_COMMIT_CONTAINER.to_string(),
        image: Some(settings.agent_image.clone()),
        args: Some(vec![
            "restore-commit".to_string(),
            format!("--work-dir={RESTORE_WORK_DIR}"),
            format!("--data-dir={}", member_data_dir(member)),
        ]),
        ..agent_container(mount)
    };
    vec![restore, commit]
}

/// What every restore container shares: the data volume, the last lines of a failed run as
/// its termination message, no privileges.
fn agent_container(mount: &VolumeMount) -> Container {
    Container {
        volume_mounts: Some(vec![mount.clone()]),
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_string()]),
                add: None,
            }),
            run_as_non_root: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Why a restore init container of this Pod is failing now, in one line; `None` while none
/// fails (a container that failed once and then succeeded no longer counts).
pub fn restore_failure(status: &PodStatus) -> Option<String> {
    let restore_containers = [
        RESTORE_FETCH_CONTAINER,
        RESTORE_CONTAINER,
        RESTORE_COMMIT_CONTAINER,
    ];
    status
        .init_container_statuses
        .iter()
        .flatten()
        .filter(|c| restore_containers.contains(&c.name.as_str()))
        .find_map(|c| {
            let state = c.state.as_ref()?;
            if let Some(waiting) = &state.waiting {
                // The kubelet could not even start it (a missing Secret or key).
                if waiting.reason.as_deref() == Some("CreateContainerConfigError") {
                    return Some(format!(
                        "{RESTORE_FAILED_MARK} CredentialsSecretInvalid: {}",
                        waiting.message.clone().unwrap_or_default()
                    ));
                }
                let last = c.last_state.as_ref()?.terminated.as_ref()?;
                return (last.exit_code != 0)
                    .then(|| failure_line(&c.name, last.message.as_deref()));
            }
            let ended = state.terminated.as_ref()?;
            (ended.exit_code != 0).then(|| failure_line(&c.name, ended.message.as_deref()))
        })
}

/// The restore step running now, while the Pod's restore init containers have started and
/// not all finished (and none fails: see [`restore_failure`]); `None` otherwise, also for a
/// Pod without them.
pub fn restore_in_progress(status: &PodStatus) -> Option<String> {
    let restore_containers = [
        RESTORE_FETCH_CONTAINER,
        RESTORE_CONTAINER,
        RESTORE_COMMIT_CONTAINER,
    ];
    let statuses: Vec<_> = status
        .init_container_statuses
        .iter()
        .flatten()
        .filter(|c| restore_containers.contains(&c.name.as_str()))
        .collect();
    if statuses.is_empty() || restore_failure(status).is_some() {
        return None;
    }
    let done = |c: &&k8s_openapi::api::core::v1::ContainerStatus| {
        c.state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .is_some_and(|t| t.exit_code == 0)
    };
    restore_containers.iter().find_map(|name| {
        let c = statuses.iter().find(|c| c.name == *name)?;
        (!done(c)).then(|| name.to_string())
    })
}

/// The agent's own `RestoreFailed ...` line when there is one, else the tool's last line.
fn failure_line(container: &str, message: Option<&str>) -> String {
    let message = message.unwrap_or_default();
    if let Some(line) = message
        .lines()
        .rev()
        .find(|l| l.starts_with(RESTORE_FAILED_MARK))
    {
        return line.trim().to_string();
    }
    let last = message
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no output");
    let reason = if container == RESTORE_CONTAINER {
        "SnapshotRestoreFailed"
    } else {
        "AgentFailed"
    };
    format!(
        "{RESTORE_FAILED_MARK} {reason}: {container} failed: {}",
        last.trim()
    )
}

/// Splits `RestoreFailed <Reason>: <message>` into its reason and message.
pub fn parse_restore_failure(line: &str) -> (String, String) {
    let rest = line
        .strip_prefix(RESTORE_FAILED_MARK)
        .unwrap_or(line)
        .trim_start();
    match rest.split_once(": ") {
        Some((reason, message)) if !reason.contains(' ') => {
            (reason.to_string(), message.to_string())
        }
        _ => ("RestoreFailed".to_string(), rest.to_string()),
    }
}

#[cfg(test)]
mod tests;
