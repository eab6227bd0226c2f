//! The agent's Pod and its access Secret (the CA, client certificate and root credentials the
//! operator dials with, for that Pod alone), pure.

use std::collections::BTreeMap;

use etcd_operator_api::EtcdSnapshot;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EnvVar, EnvVarSource, PersistentVolumeClaimVolumeSource, Pod,
    PodSecurityContext, PodSpec, Secret, SecretKeySelector, SecretVolumeSource, SecurityContext,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;

use super::{
    ACCESS_MOUNT, CONTAINER, PVC_MOUNT, ROLE_LABEL, RUN_AS, SNAPSHOT_UID_LABEL, TERMINATION_LOG,
};
use crate::domain::location::pvc_uri;
use crate::etcd::EtcdAccess;

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

pub(super) fn owner(snapshot: &EtcdSnapshot) -> OwnerReference {
    OwnerReference {
        api_version: EtcdSnapshot::api_version(&()).into_owned(),
        kind: EtcdSnapshot::kind(&()).into_owned(),
        name: snapshot.metadata.name.clone().unwrap_or_default(),
        uid: snapshot.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: None,
    }
}

pub(super) fn labels(snapshot: &EtcdSnapshot, task: &AgentTask) -> BTreeMap<String, String> {
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
