//! `destination.pvc`: the operator cannot mount a claim, so a Pod does the writing. The Pod
//! runs the operator's own image as an agent (`etcd-operator snapshot-save`), mounts the
//! claim, streams the snapshot from the voter the controller chose (with the same CA, client
//! certificate and root credentials the operator dials with, from a Secret the operator makes
//! for that Pod alone), writes `<subPath>/<name>.db` atomically (temporary file, fsync,
//! rename, fsync of the directory) with a `<name>.db.uid` file naming the EtcdSnapshot that
//! wrote it (the reference's overwrite guard), reads it back, and reports through its
//! termination message (one line `EtcdSnapshotResult <json>`), never through its log.
//!
//! The pure parts (naming, the Pod, reading its outcome) are here beside the agent's I/O.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use etcd_operator_api::EtcdSnapshot;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EnvVar, EnvVarSource, PersistentVolumeClaim,
    PersistentVolumeClaimVolumeSource, Pod, PodSecurityContext, PodSpec, Secret, SecretKeySelector,
    SecretVolumeSource, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use serde::{Deserialize, Serialize};

use super::codec;
use super::decide::{Checked, Failure, Source, Stored};
use crate::domain::location::{object_key, pvc_uri};
use crate::etcd::{ClientTls, EtcdAccess, EtcdClient, Timeouts};

/// Where the claim is mounted in the agent's Pod.
pub const PVC_MOUNT: &str = "/snapshot/data";
/// Where the access Secret (CA, client certificate, credentials) is mounted.
pub const ACCESS_MOUNT: &str = "/etc/etcd-snapshot/access";
/// The label that finds the Pod of one EtcdSnapshot (its uid).
pub const SNAPSHOT_UID_LABEL: &str = "etcd-operator.cozystack.io/snapshot-uid";
/// The label naming what the Pod does (`save` or `remove`).
pub const ROLE_LABEL: &str = "etcd-operator.cozystack.io/snapshot-agent";
/// The agent's container.
pub const CONTAINER: &str = "snapshot";
/// The sibling file recording which EtcdSnapshot wrote `<name>.db` (`<name>.db.uid`), as the
/// reference operator names it.
pub const UID_SUFFIX: &str = ".uid";
/// The first word of the agent's termination message.
pub const RESULT_MARK: &str = "EtcdSnapshotResult";
/// Where the agent writes its result (Kubernetes' default `terminationMessagePath`).
pub const TERMINATION_LOG: &str = "/dev/termination-log";
/// The uid and gid the agent runs as (the members' too).
const RUN_AS: i64 = 65532;

/// The file's path inside the claim: `<subPath>/<name>.db`, as the reference names it (no
/// doubled slashes; no subPath means `<name>.db` at the volume's root). A subPath that climbs
/// out of the volume (`..`) is refused.
pub fn relative_path(sub_path: Option<&str>, snapshot: &str) -> Result<String, Failure> {
    if let Some(sub) = sub_path
        && Path::new(sub)
            .components()
            .any(|c| matches!(c, Component::ParentDir))
    {
        return Err(Failure::InvalidDestination {
            detail: format!("destination.pvc.subPath {sub:?} climbs out of the volume (..)"),
        });
    }
    Ok(object_key(sub_path, snapshot))
}

/// What a finished agent says: the file it wrote, or why it failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum AgentResult {
    Saved(Box<Saved>),
    Failed(Failure),
    /// `snapshot-remove`: what happened to the file.
    Removed {
        said: String,
    },
    /// `snapshot-check` (verify `Restore`): what the restored etcd served.
    Served {
        revision: i64,
        keys: i64,
    },
}

/// A snapshot file written, fsynced and read back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Saved {
    /// The file (its bytes), etcd's bytes, the layers, what the pages hold.
    #[serde(flatten)]
    pub stored: Stored,
    pub member: String,
    /// The revision the member reported just before the stream (the fallback when the
    /// pages could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked_revision: Option<i64>,
    pub etcd_version: Option<String>,
    /// The read-back check.
    pub checked: Checked,
}

impl Saved {
    pub fn stored(&self) -> Stored {
        self.stored.clone()
    }

    pub fn source(&self) -> Source {
        Source {
            member: self.member.clone(),
            revision: self.asked_revision,
            etcd_version: self.etcd_version.clone(),
        }
    }
}

/// The termination message line (under the kubelet's 4096 bytes: long details are cut).
pub fn result_line(result: &AgentResult) -> String {
    let mut result = result.clone();
    if let AgentResult::Failed(failure) = &mut result {
        shorten(failure);
    }
    format!(
        "{RESULT_MARK} {}",
        serde_json::to_string(&result).unwrap_or_default()
    )
}

fn shorten(failure: &mut Failure) {
    let cut = |s: &mut String| {
        if s.len() > 1500 {
            let mut at = 1500;
            while !s.is_char_boundary(at) {
                at -= 1;
            }
            s.truncate(at);
            s.push_str("...");
        }
    };
    match failure {
        Failure::Etcd { detail, .. }
        | Failure::NoSpace { detail, .. }
        | Failure::Volume { detail }
        | Failure::VerificationFailed { detail }
        | Failure::AgentFailed { detail }
        | Failure::InvalidDestination { detail }
        | Failure::EncryptionSecret { detail }
        | Failure::Encoding { detail }
        | Failure::ClusterUnavailable { detail, .. } => cut(detail),
        _ => {}
    }
}

/// The agent's result from its termination message: the last `EtcdSnapshotResult` line, or
/// `None` when there is none (the agent died before writing it; the message then holds the
/// end of its log, which is shown, never parsed).
pub fn parse_result(message: &str) -> Option<AgentResult> {
    message
        .lines()
        .rev()
        .find_map(|line| line.trim().strip_prefix(RESULT_MARK))
        .and_then(|json| serde_json::from_str(json.trim()).ok())
}

/// What the controller makes of the agent's Pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodOutcome {
    /// Still to start or running: look again shortly.
    Running,
    /// The agent finished (its own result, or why it could not give one).
    Done(AgentResult),
}

/// How long a snapshot Pod may stay unstarted before the snapshot fails with the Pod's own
/// reason (an unbound claim, an image that cannot be pulled, no node).
pub const START_DEADLINE_SECONDS: i64 = 120;

/// The outcome of the agent's Pod: its container's termination message when it ended; a
/// failure when it ended without a result, or has not started after [`START_DEADLINE_SECONDS`]
/// (the claim not bound says so). `age_seconds` is how long the Pod exists.
pub fn pod_outcome(
    pod: &Pod,
    claim: Option<&PersistentVolumeClaim>,
    claim_name: &str,
    age_seconds: i64,
) -> PodOutcome {
    let status = pod.status.clone().unwrap_or_default();
    let container = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == CONTAINER);
    let terminated = container
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref());
    if let Some(ended) = terminated {
        let message = ended.message.clone().unwrap_or_default();
        if let Some(result) = parse_result(&message) {
            return PodOutcome::Done(result);
        }
        let last = message
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no output");
        return PodOutcome::Done(AgentResult::Failed(Failure::AgentFailed {
            detail: format!(
                "the snapshot Pod's agent exited with code {} without a result: {}",
                ended.exit_code,
                last.trim()
            ),
        }));
    }
    match status.phase.as_deref() {
        Some("Failed") | Some("Succeeded") => {
            return PodOutcome::Done(AgentResult::Failed(Failure::AgentFailed {
                detail: format!(
                    "the snapshot Pod ended ({}) without a result{}",
                    status.reason.as_deref().unwrap_or("no reason given"),
                    status
                        .message
                        .as_deref()
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                ),
            }));
        }
        Some("Running") => return PodOutcome::Running,
        _ => {}
    }
    let started = container
        .and_then(|c| c.state.as_ref())
        .is_some_and(|s| s.running.is_some());
    if started || age_seconds < START_DEADLINE_SECONDS {
        return PodOutcome::Running;
    }
    let claim_phase = claim
        .and_then(|c| c.status.as_ref())
        .and_then(|s| s.phase.clone());
    if claim.is_none() {
        return PodOutcome::Done(AgentResult::Failed(Failure::ClaimNotFound {
            claim: claim_name.to_string(),
        }));
    }
    if claim_phase.as_deref() != Some("Bound") {
        return PodOutcome::Done(AgentResult::Failed(Failure::ClaimNotBound {
            claim: claim_name.to_string(),
            phase: claim_phase.unwrap_or_else(|| "Pending".to_string()),
        }));
    }
    let why = not_started_reason(
        container
            .and_then(|c| c.state.as_ref())
            .and_then(|s| s.waiting.as_ref()),
        &status,
    );
    PodOutcome::Done(AgentResult::Failed(Failure::AgentFailed {
        detail: format!("the snapshot Pod did not start within {START_DEADLINE_SECONDS} s: {why}"),
    }))
}

/// The claim's part of the decision before a Pod is made: it must exist and not be lost or
/// deleting. A Pending claim is given its chance (a `WaitForFirstConsumer` class binds it
/// only once the Pod is scheduled); [`pod_outcome`] fails it if it never binds.
pub fn claim_usable(claim: Option<&PersistentVolumeClaim>, name: &str) -> Result<(), Failure> {
    let Some(claim) = claim else {
        return Err(Failure::ClaimNotFound {
            claim: name.to_string(),
        });
    };
    if claim.metadata.deletion_timestamp.is_some() {
        return Err(Failure::ClaimNotBound {
            claim: name.to_string(),
            phase: "Terminating".to_string(),
        });
    }
    match claim.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Lost") => Err(Failure::ClaimNotBound {
            claim: name.to_string(),
            phase: "Lost".to_string(),
        }),
        _ => Ok(()),
    }
}

/// What the agent's Pod needs to reach etcd beyond the URL, as the Secret the operator
/// makes for it (keys `ca.crt`, `tls.crt`, `tls.key`, `username`, `password`), or none for a
/// plaintext, anonymous cluster.
pub fn access_secret_data(access: &EtcdAccess) -> Option<BTreeMap<String, ByteString>> {
    let mut data = BTreeMap::new();
    if let Some(tls) = &access.tls {
        data.insert("ca.crt".to_string(), ByteString(tls.ca_pem.clone()));
        if let Some((cert, key)) = &tls.identity {
            data.insert("tls.crt".to_string(), ByteString(cert.clone()));
            data.insert("tls.key".to_string(), ByteString(key.clone()));
        }
    }
    if let Some((user, password)) = &access.credentials {
        data.insert(
            "username".to_string(),
            ByteString(user.clone().into_bytes()),
        );
        data.insert(
            "password".to_string(),
            ByteString(password.clone().into_bytes()),
        );
    }
    (!data.is_empty()).then_some(data)
}

/// The name of the agent's Pod (and of its access Secret) for one EtcdSnapshot and role:
/// `<snapshot>-<role>-<uid prefix>`, at most 63 characters.
pub fn pod_name(snapshot: &str, uid: &str, role: &str) -> String {
    let uid: String = uid.chars().filter(|c| *c != '-').take(8).collect();
    let room = 63 - role.len() - uid.len() - 2;
    let base: String = snapshot.chars().take(room).collect();
    format!("{}-{role}-{uid}", base.trim_end_matches(['-', '.']))
}

/// The layers a save agent applies: the compression, the age recipients (public keys, on
/// its command line) and the identity Secret key it reads the file back with (by reference).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgentEncoding {
    pub compression: etcd_operator_api::snapshot::SnapshotCompression,
    pub recipients: Vec<String>,
    pub identity: Option<etcd_operator_api::snapshot::SecretKeyRef>,
}

/// What one agent Pod does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentTask {
    /// Stream from `endpoint` (member `member`) to the claim.
    Save {
        member: String,
        endpoint: String,
        /// The access Secret's name, when the cluster needs TLS or credentials.
        access_secret: Option<String>,
        /// Whether that Secret holds credentials (the Pod reads them from the environment).
        credentials: bool,
        /// Compression and encryption.
        encoding: AgentEncoding,
    },
    /// Remove the file (deletionPolicy Delete), only if this snapshot wrote it.
    Remove,
}

impl AgentTask {
    pub const SAVE: &'static str = "save";
    pub const REMOVE: &'static str = "remove";

    fn role(&self) -> &'static str {
        match self {
            AgentTask::Save { .. } => Self::SAVE,
            AgentTask::Remove => Self::REMOVE,
        }
    }
}

fn owner(snapshot: &EtcdSnapshot) -> OwnerReference {
    OwnerReference {
        api_version: EtcdSnapshot::api_version(&()).into_owned(),
        kind: EtcdSnapshot::kind(&()).into_owned(),
        name: snapshot.metadata.name.clone().unwrap_or_default(),
        uid: snapshot.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

fn labels(snapshot: &EtcdSnapshot, task: &AgentTask) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "app.kubernetes.io/managed-by".to_string(),
            "etcd-operator".to_string(),
        ),
        (
            SNAPSHOT_UID_LABEL.to_string(),
            snapshot.metadata.uid.clone().unwrap_or_default(),
        ),
        (ROLE_LABEL.to_string(), task.role().to_string()),
    ])
}

/// The access Secret of a save Pod: owned by the EtcdSnapshot (removed with the Pod, and by
/// the garbage collector with the EtcdSnapshot at the latest).
pub fn access_secret(
    snapshot: &EtcdSnapshot,
    name: &str,
    data: BTreeMap<String, ByteString>,
) -> Secret {
    let task = AgentTask::Save {
        member: String::new(),
        endpoint: String::new(),
        access_secret: None,
        credentials: false,
        encoding: AgentEncoding::default(),
    };
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: snapshot.metadata.namespace.clone(),
            labels: Some(labels(snapshot, &task)),
            owner_references: Some(vec![owner(snapshot)]),
            ..Default::default()
        },
        data: Some(data),
        type_: Some("Opaque".to_string()),
        ..Default::default()
    }
}

/// The agent's Pod: the claim at [`PVC_MOUNT`], the access Secret at [`ACCESS_MOUNT`],
/// credentials by reference in the environment, the result in the termination message.
pub fn agent_pod(
    snapshot: &EtcdSnapshot,
    claim: &str,
    relative: &str,
    task: &AgentTask,
    agent_image: &str,
) -> Pod {
    let name = snapshot.metadata.name.clone().unwrap_or_default();
    let uid = snapshot.metadata.uid.clone().unwrap_or_default();
    let pod_name = pod_name(&name, &uid, task.role());
    let mut volumes = vec![Volume {
        name: "snapshot-data".to_string(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim.to_string(),
            read_only: None,
        }),
        ..Default::default()
    }];
    let mut mounts = vec![VolumeMount {
        name: "snapshot-data".to_string(),
        mount_path: PVC_MOUNT.to_string(),
        ..Default::default()
    }];
    let mut env = Vec::new();
    let uri = pvc_uri(claim, relative);
    let mut args = match task {
        AgentTask::Save {
            member, endpoint, ..
        } => vec![
            "snapshot-save".to_string(),
            format!("--endpoint={endpoint}"),
            format!("--member={member}"),
        ],
        AgentTask::Remove => vec!["snapshot-remove".to_string()],
    };
    args.extend([
        format!("--file={PVC_MOUNT}/{relative}"),
        format!("--uri={uri}"),
        format!("--uid={uid}"),
    ]);
    if let AgentTask::Save { encoding, .. } = task {
        if encoding.compression != etcd_operator_api::snapshot::SnapshotCompression::None {
            args.push(format!("--compression={:?}", encoding.compression));
        }
        for recipient in &encoding.recipients {
            args.push(format!("--age-recipient={recipient}"));
        }
        if let Some(identity) = &encoding.identity {
            env.push(EnvVar {
                name: crate::build::AGE_IDENTITY_ENV.to_string(),
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
    }
    if let AgentTask::Save {
        access_secret: Some(secret),
        credentials,
        ..
    } = task
    {
        volumes.push(Volume {
            name: "access".to_string(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.clone()),
                default_mode: Some(0o440),
                ..Default::default()
            }),
            ..Default::default()
        });
        mounts.push(VolumeMount {
            name: "access".to_string(),
            mount_path: ACCESS_MOUNT.to_string(),
            read_only: Some(true),
            ..Default::default()
        });
        args.push(format!("--access-dir={ACCESS_MOUNT}"));
        if *credentials {
            for (var, key) in [("ETCD_USERNAME", "username"), ("ETCD_PASSWORD", "password")] {
                env.push(EnvVar {
                    name: var.to_string(),
                    value: None,
                    value_from: Some(EnvVarSource {
                        secret_key_ref: Some(SecretKeySelector {
                            name: secret.clone(),
                            key: key.to_string(),
                            optional: None,
                        }),
                        ..Default::default()
                    }),
                });
            }
        }
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(pod_name),
            namespace: snapshot.metadata.namespace.clone(),
            labels: Some(labels(snapshot, task)),
            owner_references: Some(vec![owner(snapshot)]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some("Never".to_string()),
            automount_service_account_token: Some(false),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(RUN_AS),
                run_as_group: Some(RUN_AS),
                fs_group: Some(RUN_AS),
                ..Default::default()
            }),
            containers: vec![Container {
                name: CONTAINER.to_string(),
                image: Some(agent_image.to_string()),
                args: Some(args),
                env: (!env.is_empty()).then_some(env),
                volume_mounts: Some(mounts),
                termination_message_path: Some(TERMINATION_LOG.to_string()),
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
            }],
            volumes: Some(volumes),
            ..Default::default()
        }),
        status: None,
    }
}

// ---- The agent (inside the Pod) ----

/// `snapshot-save`'s arguments.
#[derive(Clone, Debug)]
pub struct SaveArgs {
    pub endpoint: String,
    pub member: String,
    /// `<mount>/<subPath>/<name>.db`.
    pub file: PathBuf,
    pub uri: String,
    pub uid: String,
    pub access_dir: Option<PathBuf>,
    pub credentials: Option<(String, String)>,
    pub compression: etcd_operator_api::snapshot::SnapshotCompression,
    /// age recipients (`age1...`); none: not encrypted.
    pub recipients: Vec<String>,
    /// The age identity file's text (from the environment), to read the file back with.
    pub identity: Option<String>,
}

/// An I/O failure on the claim, `NoSpace` when the volume is full.
fn volume_failure(uri: &str, what: &str, e: &std::io::Error) -> Failure {
    if e.raw_os_error() == Some(libc_enospc()) || e.kind() == std::io::ErrorKind::StorageFull {
        Failure::NoSpace {
            uri: uri.to_string(),
            detail: format!("{what}: {e}"),
        }
    } else {
        Failure::Volume {
            detail: format!("{what} for {uri}: {e}"),
        }
    }
}

const fn libc_enospc() -> i32 {
    28
}

/// The owner recorded beside `file`, if any.
fn writer_of(file: &Path) -> Option<String> {
    let mut path = file.as_os_str().to_owned();
    path.push(UID_SUFFIX);
    std::fs::read_to_string(PathBuf::from(path))
        .ok()
        .map(|s| s.trim().to_string())
}

fn uid_file(file: &Path) -> PathBuf {
    let mut path = file.as_os_str().to_owned();
    path.push(UID_SUFFIX);
    PathBuf::from(path)
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// What the agent dials etcd with: the files of the access Secret, the credentials from the
/// environment.
fn access(args: &SaveArgs) -> Result<EtcdAccess, Failure> {
    let mut access = EtcdAccess::plaintext();
    if let Some(dir) = &args.access_dir {
        let read = |name: &str| std::fs::read(dir.join(name)).ok();
        if let Some(ca_pem) = read("ca.crt") {
            let identity = read("tls.crt").zip(read("tls.key"));
            access.tls = Some(ClientTls { ca_pem, identity });
        }
    }
    access.credentials = args.credentials.clone();
    Ok(access)
}

/// Streams the snapshot through the codec to `<file>` atomically and reads it back.
pub async fn save(args: &SaveArgs) -> Result<Saved, Failure> {
    let uri = args.uri.as_str();
    let dir = args.file.parent().unwrap_or(Path::new("/")).to_path_buf();
    let recipients = codec::parse_recipients(&args.recipients.join("\n"))
        .or_else(|e| {
            if args.recipients.is_empty() {
                Ok(Vec::new())
            } else {
                Err(e)
            }
        })
        .map_err(|e| Failure::EncryptionSecret {
            detail: format!("the recipients given to the agent: {e}"),
        })?;
    let identities = match &args.identity {
        Some(text) => codec::parse_identities(text).map_err(|e| Failure::EncryptionSecret {
            detail: format!("the identity given to the agent: {e}"),
        })?,
        None => Vec::new(),
    };
    std::fs::create_dir_all(&dir).map_err(|e| volume_failure(uri, "creating the directory", &e))?;
    if args.file.exists() {
        match writer_of(&args.file) {
            Some(writer) if writer == args.uid => {}
            writer => {
                return Err(Failure::FileExists {
                    uri: uri.to_string(),
                    writer,
                });
            }
        }
    }
    let etcd_failure = |detail: String| Failure::Etcd {
        member: args.member.clone(),
        detail,
    };
    let access = access(args)?;
    let client = EtcdClient::connect_endpoint(&args.endpoint, Timeouts::SNAPSHOT, &access)
        .await
        .map_err(|e| etcd_failure(e.to_string()))?;
    let etcd_version = client
        .endpoint_status(&args.endpoint)
        .await
        .ok()
        .map(|s| s.version);
    // Asked before the stream: only a fallback for a snapshot whose pages cannot be read.
    let asked_revision = client.revision().await.ok();
    let mut stream = client
        .snapshot()
        .await
        .map_err(|e| etcd_failure(e.to_string()))?;

    let name = args
        .file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let uid8: String = args.uid.chars().take(8).collect();
    let temporary = dir.join(format!(".{name}.{uid8}.tmp"));
    let written = async {
        let mut file = std::fs::File::create(&temporary)
            .map_err(|e| volume_failure(uri, "creating the temporary file", &e))?;
        let mut encoder =
            codec::Encoder::new(args.compression, &recipients).map_err(|e| Failure::Encoding {
                detail: e.to_string(),
            })?;
        loop {
            match stream.next_chunk().await {
                Ok(Some(chunk)) => {
                    let bytes = encoder.push(&chunk).map_err(|e| Failure::Encoding {
                        detail: e.to_string(),
                    })?;
                    file.write_all(bytes)
                        .map_err(|e| volume_failure(uri, "writing the snapshot", &e))?;
                }
                Ok(None) => break,
                Err(e) => return Err(etcd_failure(e.to_string())),
            }
        }
        let (last, encoded) = encoder.finish().map_err(|e| Failure::Encoding {
            detail: e.to_string(),
        })?;
        if !encoded.snapshot.trailer_matches {
            return Err(Failure::Corrupt {
                member: args.member.clone(),
            });
        }
        file.write_all(&last)
            .map_err(|e| volume_failure(uri, "writing the snapshot", &e))?;
        file.sync_all()
            .map_err(|e| volume_failure(uri, "syncing the snapshot", &e))?;
        Ok(encoded)
    }
    .await;
    let encoded = match written {
        Ok(encoded) => encoded,
        Err(failure) => {
            let _ = std::fs::remove_file(&temporary);
            return Err(failure);
        }
    };
    // The owner first (a crash between the two leaves our own uid beside the old or no
    // file, which this same snapshot may replace), then the file.
    let owner_temporary = dir.join(format!(".{name}{UID_SUFFIX}.{uid8}.tmp"));
    let finish = || -> std::io::Result<()> {
        let mut owner = std::fs::File::create(&owner_temporary)?;
        owner.write_all(args.uid.as_bytes())?;
        owner.sync_all()?;
        std::fs::rename(&owner_temporary, uid_file(&args.file))?;
        std::fs::rename(&temporary, &args.file)?;
        sync_dir(&dir)
    };
    if let Err(e) = finish() {
        let _ = std::fs::remove_file(&temporary);
        let _ = std::fs::remove_file(&owner_temporary);
        return Err(volume_failure(uri, "moving the snapshot into place", &e));
    }
    let fingerprints = recipients.iter().map(codec::fingerprint).collect();
    let stored = Stored::of(uri, &encoded, fingerprints);
    let checked = read_back_file(&args.file, uri, &stored, &identities)?;
    Ok(Saved {
        stored,
        member: args.member.clone(),
        asked_revision,
        etcd_version,
        checked,
    })
}

/// Reads the written file back and checks it: decoded when it can be (not encrypted, or an
/// identity given), else its bytes only.
fn read_back_file(
    file: &Path,
    uri: &str,
    stored: &Stored,
    identities: &[age::x25519::Identity],
) -> Result<Checked, Failure> {
    if stored.encrypted() && identities.is_empty() {
        let (size, sha256) =
            hash_file(file).map_err(|e| volume_failure(uri, "reading the snapshot back", &e))?;
        return super::decide::check_read_back(stored, size, &sha256, None);
    }
    let input = std::fs::File::open(file)
        .map_err(|e| volume_failure(uri, "reading the snapshot back", &e))?;
    match codec::decode(input, identities, &mut |_| Ok(())) {
        Ok(decoded) => super::decide::check_read_back(
            stored,
            decoded.stored_size,
            &decoded.stored_sha256,
            Some(&decoded),
        ),
        Err(codec::DecodeError::Input(e)) => {
            Err(volume_failure(uri, "reading the snapshot back", &e))
        }
        Err(e) => Err(Failure::VerificationFailed {
            detail: format!("cannot be decoded: {e}"),
        }),
    }
}

/// Size and SHA-256 of a file, read in 1 MiB pieces.
pub fn hash_file(path: &Path) -> std::io::Result<(u64, String)> {
    let mut file = std::fs::File::open(path)?;
    let mut digest = super::digest::PlainDigest::default();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        digest.update(&buffer[..read]);
    }
    Ok(digest.finish())
}

/// `snapshot-remove`: removes `<file>` and its owner file if `uid` wrote it; says what was
/// done. A file written by another EtcdSnapshot (or by hand) is left.
pub fn remove(file: &Path, uri: &str, uid: &str) -> Result<String, Failure> {
    if !file.exists() {
        let _ = std::fs::remove_file(uid_file(file));
        return Ok(format!("{uri} is not on the volume (nothing to delete)"));
    }
    match writer_of(file) {
        Some(writer) if writer == uid => {
            std::fs::remove_file(file).map_err(|e| volume_failure(uri, "removing the file", &e))?;
            let _ = std::fs::remove_file(uid_file(file));
            if let Some(dir) = file.parent() {
                let _ = sync_dir(dir);
            }
            Ok(format!("deleted {uri} (deletionPolicy Delete)"))
        }
        _ => Ok(format!(
            "{uri} was written by another EtcdSnapshot: left on the volume"
        )),
    }
}

/// Writes the result where the kubelet reads it (and to stdout for people reading the log).
pub fn report(result: &AgentResult, termination_log: &Path) {
    let line = result_line(result);
    println!("{line}");
    if let Err(e) = std::fs::write(termination_log, format!("{line}\n")) {
        eprintln!("cannot write {}: {e}", termination_log.display());
    }
}

/// Why an agent Pod has not started, in Kubernetes' words: the reason (and message) its
/// `waiting` container gives, else an unschedulable Pod's message, else "not started".
pub(crate) fn not_started_reason(
    waiting: Option<&k8s_openapi::api::core::v1::ContainerStateWaiting>,
    status: &k8s_openapi::api::core::v1::PodStatus,
) -> String {
    waiting
        .map(|w| {
            format!(
                "{}{}",
                w.reason.clone().unwrap_or_default(),
                w.message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            )
        })
        .or_else(|| {
            status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")
                .map(|c| c.message.clone().unwrap_or_default())
        })
        .unwrap_or_else(|| "not started".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
        ContainerStatus, PersistentVolumeClaimStatus, PodStatus,
    };

    fn snapshot() -> EtcdSnapshot {
        let mut s = EtcdSnapshot::new("nightly", Default::default());
        s.metadata.namespace = Some("prod".into());
        s.metadata.uid = Some("0123abcd-4567-89ef-0123-456789abcdef".into());
        s
    }

    fn saved() -> Saved {
        Saved {
            stored: Stored {
                uri: "pvc://backups/etcd/nightly.db".into(),
                size: 20512,
                sha256: "ab".repeat(32),
                snapshot_size: 40960,
                snapshot_sha256: "cd".repeat(32),
                compression: etcd_operator_api::snapshot::SnapshotCompression::Gzip,
                recipients: vec!["sha256:0123456789abcdef".into()],
                revision: Some(42),
                total_keys: Some(17),
            },
            member: "etcd-1".into(),
            asked_revision: Some(41),
            etcd_version: Some("3.5.1".into()),
            checked: Checked {
                method: etcd_operator_api::snapshot::SnapshotVerify::Checksum,
                content_checked: true,
                revision: Some(42),
                total_keys: Some(17),
                keys: None,
                message: "read back".repeat(20),
            },
        }
    }

    #[test]
    fn files_are_named_like_the_reference() {
        assert_eq!(
            relative_path(Some("etcd/prod"), "daily").unwrap(),
            "etcd/prod/daily.db"
        );
        assert_eq!(
            relative_path(Some("/etcd/"), "daily").unwrap(),
            "etcd/daily.db"
        );
        assert_eq!(relative_path(None, "daily").unwrap(), "daily.db");
        assert_eq!(relative_path(Some(""), "daily").unwrap(), "daily.db");
        let climbing = relative_path(Some("../etc"), "daily").unwrap_err();
        assert_eq!(climbing.reason(), "InvalidDestination");
        assert!(climbing.message().contains("climbs out"));
        assert_eq!(
            pvc_uri("backups", "etcd/daily.db"),
            "pvc://backups/etcd/daily.db"
        );
    }

    #[test]
    fn results_round_trip_through_the_termination_message() {
        for result in [
            AgentResult::Saved(Box::new(saved())),
            AgentResult::Failed(Failure::NoSpace {
                uri: "pvc://b/x.db".into(),
                detail: "No space left on device".into(),
            }),
            AgentResult::Failed(Failure::FileExists {
                uri: "pvc://b/x.db".into(),
                writer: Some("other".into()),
            }),
            AgentResult::Removed {
                said: "deleted".into(),
            },
            AgentResult::Served {
                revision: 42,
                keys: 7,
            },
        ] {
            let line = result_line(&result);
            assert!(line.starts_with("EtcdSnapshotResult {"), "{line}");
            // Log lines before it (FallbackToLogsOnError) do not matter.
            let message = format!("connecting\n{line}\n");
            assert_eq!(parse_result(&message), Some(result));
        }
        assert_eq!(parse_result("panicked at src/main.rs"), None);
        assert_eq!(parse_result("EtcdSnapshotResult {not json"), None);
        // A long detail is cut so that the line stays under the kubelet's 4096 bytes.
        let long = AgentResult::Failed(Failure::Etcd {
            member: "etcd-0".into(),
            detail: "x".repeat(10_000),
        });
        assert!(result_line(&long).len() < 4096);
        assert!(matches!(
            parse_result(&result_line(&long)),
            Some(AgentResult::Failed(Failure::Etcd { .. }))
        ));
    }

    #[test]
    fn pod_names_fit_a_label_and_differ_by_role() {
        let name = pod_name(&"n".repeat(80), "0123abcd-4567", "save");
        assert!(name.len() <= 63, "{name}");
        assert!(name.ends_with("-save-0123abcd"));
        assert_eq!(
            pod_name("nightly", "0123abcd-4567", "remove"),
            "nightly-remove-0123abcd"
        );
    }

    #[test]
    fn the_pod_mounts_the_claim_and_reads_access_by_reference() {
        let task = AgentTask::Save {
            member: "etcd-1".into(),
            endpoint: "https://etcd-1.etcd.prod.svc:2379".into(),
            access_secret: Some("nightly-save-0123abcd".into()),
            credentials: true,
            encoding: AgentEncoding {
                compression: etcd_operator_api::snapshot::SnapshotCompression::Zstd,
                recipients: vec!["age1one".into(), "age1two".into()],
                identity: Some(etcd_operator_api::snapshot::SecretKeyRef {
                    name: "backup-age".into(),
                    key: None,
                }),
            },
        };
        let pod = agent_pod(&snapshot(), "backups", "etcd/nightly.db", &task, "op:1");
        assert_eq!(pod.metadata.name.as_deref(), Some("nightly-save-0123abcd"));
        let labels = pod.metadata.labels.clone().unwrap();
        assert_eq!(
            labels[SNAPSHOT_UID_LABEL],
            "0123abcd-4567-89ef-0123-456789abcdef"
        );
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("EtcdSnapshot", Some(true))
        );
        let spec = pod.spec.unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        let volumes = spec.volumes.unwrap();
        assert_eq!(
            volumes[0]
                .persistent_volume_claim
                .as_ref()
                .unwrap()
                .claim_name,
            "backups"
        );
        assert_eq!(
            volumes[1].secret.as_ref().unwrap().secret_name.as_deref(),
            Some("nightly-save-0123abcd")
        );
        let container = &spec.containers[0];
        let args = container.args.clone().unwrap();
        for arg in [
            "snapshot-save",
            "--endpoint=https://etcd-1.etcd.prod.svc:2379",
            "--member=etcd-1",
            "--file=/snapshot/data/etcd/nightly.db",
            "--uri=pvc://backups/etcd/nightly.db",
            "--uid=0123abcd-4567-89ef-0123-456789abcdef",
            "--access-dir=/etc/etcd-snapshot/access",
            "--compression=Zstd",
            "--age-recipient=age1one",
            "--age-recipient=age1two",
        ] {
            assert!(args.iter().any(|a| a == arg), "{arg} in {args:?}");
        }
        let env = container.env.clone().unwrap();
        assert!(
            env.iter().all(|e| e.value.is_none()),
            "secrets only by reference"
        );
        assert_eq!(env.len(), 3);
        let identity = env.iter().find(|e| e.name == "AGE_IDENTITY").unwrap();
        let key = identity.value_from.clone().unwrap().secret_key_ref.unwrap();
        assert_eq!(
            (key.name.as_str(), key.key.as_str()),
            ("backup-age", "identity")
        );
        assert_eq!(
            container.termination_message_path.as_deref(),
            Some(TERMINATION_LOG)
        );

        // Plaintext and anonymous: no Secret at all.
        let plain = AgentTask::Save {
            member: "etcd-1".into(),
            endpoint: "http://etcd-1:2379".into(),
            access_secret: None,
            credentials: false,
            encoding: AgentEncoding::default(),
        };
        let pod = agent_pod(&snapshot(), "backups", "nightly.db", &plain, "op:1");
        let spec = pod.spec.unwrap();
        assert_eq!(spec.volumes.unwrap().len(), 1);
        assert!(spec.containers[0].env.is_none());
        let args = spec.containers[0].args.clone().unwrap();
        assert!(
            args.iter()
                .all(|a| !a.starts_with("--compression") && !a.starts_with("--age")),
            "{args:?}"
        );
        let remove = agent_pod(
            &snapshot(),
            "backups",
            "nightly.db",
            &AgentTask::Remove,
            "op:1",
        );
        let args = remove.spec.unwrap().containers[0].args.clone().unwrap();
        assert_eq!(args[0], "snapshot-remove");
    }

    #[test]
    fn access_secrets_carry_only_what_the_cluster_needs() {
        assert_eq!(access_secret_data(&EtcdAccess::plaintext()), None);
        let access = EtcdAccess {
            tls: Some(ClientTls {
                ca_pem: b"ca".to_vec(),
                identity: Some((b"cert".to_vec(), b"key".to_vec())),
            }),
            credentials: Some(("root".into(), "pw".into())),
        };
        let data = access_secret_data(&access).unwrap();
        let keys: Vec<_> = data.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["ca.crt", "password", "tls.crt", "tls.key", "username"]
        );
        let ca_only = EtcdAccess {
            tls: Some(ClientTls {
                ca_pem: b"ca".to_vec(),
                identity: None,
            }),
            credentials: None,
        };
        let keys: Vec<_> = access_secret_data(&ca_only).unwrap().into_keys().collect();
        assert_eq!(keys, ["ca.crt"]);
    }

    fn pod(phase: &str, state: Option<ContainerState>) -> Pod {
        Pod {
            status: Some(PodStatus {
                phase: Some(phase.into()),
                container_statuses: state.map(|state| {
                    vec![ContainerStatus {
                        name: CONTAINER.into(),
                        state: Some(state),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn claim(phase: &str) -> PersistentVolumeClaim {
        PersistentVolumeClaim {
            status: Some(PersistentVolumeClaimStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn ended(code: i32, message: &str) -> ContainerState {
        ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: code,
                message: Some(message.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn failed_reason(outcome: PodOutcome) -> &'static str {
        match outcome {
            PodOutcome::Done(AgentResult::Failed(f)) => f.reason(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_pod_outcome_comes_from_its_termination_message() {
        let bound = claim("Bound");
        let line = result_line(&AgentResult::Saved(Box::new(saved())));
        assert_eq!(
            pod_outcome(
                &pod("Succeeded", Some(ended(0, &line))),
                Some(&bound),
                "b",
                5
            ),
            PodOutcome::Done(AgentResult::Saved(Box::new(saved())))
        );
        let no_space = result_line(&AgentResult::Failed(Failure::NoSpace {
            uri: "pvc://b/x.db".into(),
            detail: "full".into(),
        }));
        assert_eq!(
            failed_reason(pod_outcome(
                &pod("Failed", Some(ended(1, &no_space))),
                Some(&bound),
                "b",
                5
            )),
            "NoSpace"
        );
        // Died without a result: the end of its log is shown as the detail.
        let crashed = pod_outcome(
            &pod("Failed", Some(ended(139, "thread main panicked\n"))),
            Some(&bound),
            "b",
            5,
        );
        let PodOutcome::Done(AgentResult::Failed(f)) = crashed else {
            panic!()
        };
        assert_eq!(f.reason(), "AgentFailed");
        assert!(f.message().contains("code 139"));
        assert!(f.message().contains("panicked"));
        // Evicted before the container ran.
        assert_eq!(
            failed_reason(pod_outcome(&pod("Failed", None), Some(&bound), "b", 5)),
            "AgentFailed"
        );
        // Running, or still starting within the deadline: wait.
        let running = ContainerState {
            running: Some(ContainerStateRunning::default()),
            ..Default::default()
        };
        assert_eq!(
            pod_outcome(&pod("Running", Some(running)), Some(&bound), "b", 500),
            PodOutcome::Running
        );
        assert_eq!(
            pod_outcome(&pod("Pending", None), Some(&claim("Pending")), "b", 10),
            PodOutcome::Running
        );
    }

    #[test]
    fn a_pod_that_never_starts_fails_with_the_claims_reason() {
        let late = START_DEADLINE_SECONDS;
        assert_eq!(
            failed_reason(pod_outcome(
                &pod("Pending", None),
                Some(&claim("Pending")),
                "b",
                late
            )),
            "ClaimNotBound"
        );
        assert_eq!(
            failed_reason(pod_outcome(&pod("Pending", None), None, "b", late)),
            "ClaimNotFound"
        );
        let pulling = ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("ImagePullBackOff".into()),
                message: Some("no such image".into()),
            }),
            ..Default::default()
        };
        let outcome = pod_outcome(
            &pod("Pending", Some(pulling)),
            Some(&claim("Bound")),
            "b",
            late,
        );
        let PodOutcome::Done(AgentResult::Failed(f)) = outcome else {
            panic!()
        };
        assert_eq!(f.reason(), "AgentFailed");
        assert!(f.message().contains("ImagePullBackOff: no such image"));
    }

    #[test]
    fn a_claim_must_exist_and_not_be_lost() {
        assert_eq!(
            claim_usable(None, "backups").unwrap_err().reason(),
            "ClaimNotFound"
        );
        let missing = claim_usable(None, "backups").unwrap_err().message();
        assert!(missing.contains("claim not found"), "{missing}");
        assert!(missing.contains("backups"));
        assert_eq!(
            claim_usable(Some(&claim("Lost")), "b")
                .unwrap_err()
                .reason(),
            "ClaimNotBound"
        );
        assert_eq!(claim_usable(Some(&claim("Bound")), "b"), Ok(()));
        assert_eq!(claim_usable(Some(&claim("Pending")), "b"), Ok(()));
        let mut deleting = claim("Bound");
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().unwrap(),
            ));
        assert_eq!(
            claim_usable(Some(&deleting), "b").unwrap_err().reason(),
            "ClaimNotBound"
        );
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pvc-snapshot-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn remove_deletes_only_its_own_file() {
        let dir = scratch("remove");
        let file = dir.join("nightly.db");
        std::fs::write(&file, b"db").unwrap();
        std::fs::write(uid_file(&file), b"other").unwrap();
        let said = remove(&file, "pvc://b/nightly.db", "mine").unwrap();
        assert!(said.contains("another EtcdSnapshot"));
        assert!(file.exists());
        std::fs::write(uid_file(&file), b"mine").unwrap();
        let said = remove(&file, "pvc://b/nightly.db", "mine").unwrap();
        assert!(said.starts_with("deleted"));
        assert!(!file.exists() && !uid_file(&file).exists());
        let said = remove(&file, "pvc://b/nightly.db", "mine").unwrap();
        assert!(said.contains("nothing to delete"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn no_space_is_told_apart_from_other_volume_errors() {
        let full = std::io::Error::from_raw_os_error(28);
        assert_eq!(
            volume_failure("pvc://b/x", "writing", &full).reason(),
            "NoSpace"
        );
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert_eq!(
            volume_failure("pvc://b/x", "writing", &denied).reason(),
            "VolumeError"
        );
    }
}
