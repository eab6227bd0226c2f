//! `verify: Restore`: once a snapshot is stored and read back, it is restored into a
//! throwaway etcd in a Pod of its own and read, as a restore would use it.
//!
//! The Pod (`<snapshot>-verify-<uid>`, label `etcd-operator.cozystack.io/snapshot-uid`, owned
//! by the EtcdSnapshot) has a scratch `emptyDir` and:
//! 1. `restore-fetch` (the operator's image, the same step a restored cluster's seed runs):
//!    the artifact from S3 or the claim (mounted read-only), decrypted with the identity of
//!    `encryption.age.identitySecretRef` and decompressed, etcd's trailing hash checked, into
//!    `.restore/snapshot.db`;
//! 2. `restore` (the etcd image of the member the snapshot came from): `etcdutl snapshot
//!    restore` (etcdctl for 3.4) into a data directory, as a one-member cluster on loopback;
//! 3. the containers `etcd` (on that data, on the Pod's own loopback, so nothing outside the
//!    Pod can reach it) and `check` (`etcd-operator snapshot-check`): waits for etcd, reads its
//!    revision and counts its keys, and ends with one `EtcdSnapshotResult <json>` line in its
//!    termination message.
//!
//! The controller reads the `check` container's result (or the failing step's
//! `RestoreFailed` line), records it and deletes the Pod. The pure parts are here beside the
//! agent's I/O.

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_operator_api::EtcdSnapshot;
use etcd_operator_api::snapshot::SecretKeyRef;
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    PersistentVolumeClaimVolumeSource, Pod, PodSecurityContext, PodSpec, SecretKeySelector,
    SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;

use super::decide::Failure;
use super::pvc::{AgentResult, ROLE_LABEL, SNAPSHOT_UID_LABEL, TERMINATION_LOG, parse_result};
use crate::build::{
    RESTORE_CONTAINER, RESTORE_FETCH_CONTAINER, RESTORE_SOURCE_MOUNT, RESTORE_SOURCE_VOLUME,
    RESTORE_WORK_DIR, fetch_container, restore_failure,
};
use crate::domain::settings::OperatorSettings;

/// The role label of the Pod.
pub const ROLE: &str = "verify";
/// The containers.
pub const ETCD: &str = "etcd";
pub const CHECK: &str = "check";
/// Where the scratch volume is mounted (the restore steps' work directory is under it).
const SCRATCH: &str = "/var/lib/etcd";
/// The restored data directory.
const DATA: &str = "/var/lib/etcd/data";
/// The throwaway member's name and loopback URLs.
const MEMBER: &str = "verify";
pub const CLIENT_URL: &str = "http://127.0.0.1:2379";
const PEER_URL: &str = "http://127.0.0.1:2380";
/// How long the check waits for the restored etcd to serve.
pub const SERVE_DEADLINE: Duration = Duration::from_secs(300);
/// The uid and gid the Pod runs as (the members' too).
const RUN_AS: i64 = 65532;
/// How long the Pod may stay unstarted before the check fails with the Pod's reason.
pub const START_DEADLINE_SECONDS: i64 = 120;

/// What one restore check needs.
#[derive(Clone, Debug)]
pub struct CheckPod<'a> {
    pub snapshot: &'a EtcdSnapshot,
    /// Where the artifact is: an S3 object's exact key, or a claim's exact file.
    pub source: &'a etcd_operator_api::shared::SnapshotLocation,
    pub identity: Option<&'a SecretKeyRef>,
    /// The etcd version whose tools restore and serve it (the source member's).
    pub version: &'a str,
    /// A Secret with `username` and `password` (the cluster's root credentials), when the
    /// restored data has authentication on.
    pub credentials_secret: Option<&'a str>,
}

fn locked_down(container: Container) -> Container {
    Container {
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
        ..container
    }
}

/// The Pod's name: `<snapshot>-verify-<uid prefix>`.
pub fn pod_name(snapshot: &EtcdSnapshot) -> String {
    super::pvc::pod_name(
        snapshot.metadata.name.as_deref().unwrap_or_default(),
        snapshot.metadata.uid.as_deref().unwrap_or_default(),
        ROLE,
    )
}

/// The restore check's Pod.
pub fn check_pod(check: &CheckPod<'_>, settings: &OperatorSettings) -> Option<Pod> {
    let snapshot = check.snapshot;
    let uid = snapshot.metadata.uid.clone().unwrap_or_default();
    let scratch = VolumeMount {
        name: "data".to_string(),
        mount_path: SCRATCH.to_string(),
        ..Default::default()
    };
    let mut volumes = vec![Volume {
        name: "data".to_string(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Default::default()
    }];
    if let Some(pvc) = &check.source.pvc {
        volumes.push(Volume {
            name: RESTORE_SOURCE_VOLUME.to_string(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: pvc.claim_name.clone(),
                read_only: Some(true),
            }),
            ..Default::default()
        });
    }
    let fetch = fetch_container(check.source, check.identity, &scratch, settings)?;
    let v34 = !crate::domain::versions::restores_with_etcdutl(check.version);
    let (tool, api_env) = if v34 {
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
    let image = settings.etcd_image(check.version);
    let cluster = format!("{MEMBER}={PEER_URL}");
    let restore = locked_down(Container {
        name: RESTORE_CONTAINER.to_string(),
        image: Some(image.clone()),
        command: Some(vec![
            tool.to_string(),
            "snapshot".to_string(),
            "restore".to_string(),
            format!("{RESTORE_WORK_DIR}/snapshot.db"),
            format!("--data-dir={DATA}"),
            format!("--name={MEMBER}"),
            format!("--initial-cluster={cluster}"),
            format!("--initial-cluster-token={MEMBER}-{uid}"),
            format!("--initial-advertise-peer-urls={PEER_URL}"),
        ]),
        env: api_env,
        volume_mounts: Some(vec![scratch.clone()]),
        ..Default::default()
    });
    let etcd = locked_down(Container {
        name: ETCD.to_string(),
        image: Some(image),
        command: Some(vec![
            "etcd".to_string(),
            format!("--name={MEMBER}"),
            format!("--data-dir={DATA}"),
            format!("--listen-client-urls={CLIENT_URL}"),
            format!("--advertise-client-urls={CLIENT_URL}"),
            format!("--listen-peer-urls={PEER_URL}"),
            format!("--initial-advertise-peer-urls={PEER_URL}"),
            format!("--initial-cluster={cluster}"),
        ]),
        volume_mounts: Some(vec![scratch.clone()]),
        ..Default::default()
    });
    let mut env = Vec::new();
    if let Some(secret) = check.credentials_secret {
        for (var, key) in [("ETCD_USERNAME", "username"), ("ETCD_PASSWORD", "password")] {
            env.push(EnvVar {
                name: var.to_string(),
                value: None,
                value_from: Some(EnvVarSource {
                    secret_key_ref: Some(SecretKeySelector {
                        name: secret.to_string(),
                        key: key.to_string(),
                        optional: None,
                    }),
                    ..Default::default()
                }),
            });
        }
    }
    let checker = locked_down(Container {
        name: CHECK.to_string(),
        image: Some(settings.agent_image.clone()),
        args: Some(vec![
            "snapshot-check".to_string(),
            format!("--endpoint={CLIENT_URL}"),
            format!("--deadline-seconds={}", SERVE_DEADLINE.as_secs()),
        ]),
        env: (!env.is_empty()).then_some(env),
        termination_message_path: Some(TERMINATION_LOG.to_string()),
        ..Default::default()
    });
    let mut fetch = fetch;
    if check.source.pvc.is_some() {
        // fetch_container mounts the source volume already; nothing else reads it.
        debug_assert!(
            fetch
                .volume_mounts
                .iter()
                .flatten()
                .any(|m| m.mount_path == RESTORE_SOURCE_MOUNT)
        );
    }
    fetch.name = RESTORE_FETCH_CONTAINER.to_string();
    Some(Pod {
        metadata: ObjectMeta {
            name: Some(pod_name(snapshot)),
            namespace: snapshot.metadata.namespace.clone(),
            labels: Some(BTreeMap::from([
                (
                    "app.kubernetes.io/managed-by".to_string(),
                    "etcd-operator".to_string(),
                ),
                (SNAPSHOT_UID_LABEL.to_string(), uid),
                (ROLE_LABEL.to_string(), ROLE.to_string()),
            ])),
            owner_references: Some(vec![OwnerReference {
                api_version: EtcdSnapshot::api_version(&()).into_owned(),
                kind: EtcdSnapshot::kind(&()).into_owned(),
                name: snapshot.metadata.name.clone().unwrap_or_default(),
                uid: snapshot.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
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
            init_containers: Some(vec![fetch, restore]),
            containers: vec![etcd, checker],
            volumes: Some(volumes),
            ..Default::default()
        }),
        status: None,
    })
}

/// What the restore check's Pod amounts to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckOutcome {
    Running,
    /// The restored etcd served this revision and this many keys.
    Served {
        revision: i64,
        keys: i64,
    },
    /// A step failed, or the Pod ended without a result; in words.
    Failed(String),
}

/// The outcome from the Pod's status: a failing restore step's `RestoreFailed` line, the
/// `check` container's result, or a Pod that did not start within
/// [`START_DEADLINE_SECONDS`] (`age_seconds` old).
pub fn check_outcome(pod: &Pod, age_seconds: i64) -> CheckOutcome {
    let status = pod.status.clone().unwrap_or_default();
    if let Some(line) = restore_failure(&status) {
        return CheckOutcome::Failed(format!("a restore step failed: {line}"));
    }
    let check = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == CHECK);
    if let Some(ended) = check
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
    {
        let message = ended.message.clone().unwrap_or_default();
        return match parse_result(&message) {
            Some(AgentResult::Served { revision, keys }) => CheckOutcome::Served { revision, keys },
            Some(AgentResult::Failed(failure)) => CheckOutcome::Failed(failure.message()),
            Some(other) => CheckOutcome::Failed(format!("the check answered {other:?}")),
            None => CheckOutcome::Failed(format!(
                "the check exited with code {} without a result: {}",
                ended.exit_code,
                message
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("no output")
                    .trim()
            )),
        };
    }
    if matches!(status.phase.as_deref(), Some("Failed") | Some("Succeeded")) {
        return CheckOutcome::Failed(format!(
            "the Pod ended ({}) without a result",
            status.reason.as_deref().unwrap_or("no reason given")
        ));
    }
    let started = status.phase.as_deref() == Some("Running")
        || status
            .init_container_statuses
            .iter()
            .flatten()
            .any(|c| c.state.as_ref().is_some_and(|s| s.waiting.is_none()));
    if started || age_seconds < START_DEADLINE_SECONDS {
        return CheckOutcome::Running;
    }
    let why = super::pvc::not_started_reason(
        status
            .init_container_statuses
            .iter()
            .flatten()
            .chain(status.container_statuses.iter().flatten())
            .find_map(|c| c.state.as_ref()?.waiting.as_ref()),
        &status,
    );
    CheckOutcome::Failed(format!(
        "the restore check's Pod did not start within {START_DEADLINE_SECONDS} s: {why}"
    ))
}

// ---- The agent (the `check` container) ----

/// `snapshot-check`: waits up to `deadline` for the restored etcd at `endpoint` to serve a
/// linearizable read, then reads its revision and counts every key.
pub async fn check(
    endpoint: &str,
    credentials: Option<(String, String)>,
    deadline: Duration,
) -> Result<AgentResult, Failure> {
    let access = crate::etcd::EtcdAccess {
        tls: None,
        credentials,
    };
    let until = tokio::time::Instant::now() + deadline;
    loop {
        let last = match serve(endpoint, &access).await {
            Ok((revision, keys)) => return Ok(AgentResult::Served { revision, keys }),
            Err(e) => e,
        };
        if tokio::time::Instant::now() >= until {
            return Err(Failure::VerificationFailed {
                detail: format!(
                    "was restored, but the throwaway etcd did not serve within {} s: {last}",
                    deadline.as_secs()
                ),
            });
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn serve(endpoint: &str, access: &crate::etcd::EtcdAccess) -> Result<(i64, i64), String> {
    let client = crate::etcd::EtcdClient::connect_endpoint(
        endpoint,
        crate::etcd::Timeouts::SNAPSHOT,
        access,
    )
    .await
    .map_err(|e| e.to_string())?;
    client.key_count().await.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use etcd_operator_api::shared::{PvcSnapshotLocation, S3SnapshotLocation, SnapshotLocation};
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus, PodStatus,
    };

    fn snapshot() -> EtcdSnapshot {
        let mut s = EtcdSnapshot::new("nightly", Default::default());
        s.metadata.namespace = Some("prod".into());
        s.metadata.uid = Some("0123abcd-4567".into());
        s
    }

    fn s3() -> SnapshotLocation {
        SnapshotLocation {
            s3: Some(S3SnapshotLocation {
                endpoint: "http://s3:9000".into(),
                bucket: "b".into(),
                key: Some("etcd/nightly.db".into()),
                credentials_secret_ref: k8s_openapi::api::core::v1::LocalObjectReference {
                    name: "s3-creds".into(),
                },
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn env_of(c: &Container) -> Vec<(String, String, String)> {
        c.env
            .iter()
            .flatten()
            .map(|e| {
                assert!(e.value.is_none() || e.name == "ETCDCTL_API", "{e:?}");
                let r = e
                    .value_from
                    .as_ref()
                    .and_then(|v| v.secret_key_ref.clone())
                    .unwrap_or_default();
                (e.name.clone(), r.name, r.key)
            })
            .collect()
    }

    #[test]
    fn the_pod_restores_into_scratch_and_serves_on_loopback_only() {
        let s = snapshot();
        let source = s3();
        let identity = SecretKeyRef {
            name: "age".into(),
            key: None,
        };
        let pod = check_pod(
            &CheckPod {
                snapshot: &s,
                source: &source,
                identity: Some(&identity),
                version: "3.5.1",
                credentials_secret: Some("nightly-verify-0123abcd"),
            },
            &OperatorSettings::default(),
        )
        .unwrap();
        assert_eq!(
            pod.metadata.name.as_deref(),
            Some("nightly-verify-0123abcd")
        );
        let labels = pod.metadata.labels.clone().unwrap();
        assert_eq!(labels[ROLE_LABEL], "verify");
        assert_eq!(labels[SNAPSHOT_UID_LABEL], "0123abcd-4567");
        let spec = pod.spec.unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        let volumes = spec.volumes.unwrap();
        assert!(volumes[0].empty_dir.is_some());
        assert_eq!(volumes.len(), 1, "S3: no claim");
        let init = spec.init_containers.unwrap();
        assert_eq!(
            init.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["restore-fetch", "restore"]
        );
        let env = env_of(&init[0]);
        assert!(env.contains(&("AGE_IDENTITY".into(), "age".into(), "identity".into())));
        assert!(env.contains(&(
            "AWS_ACCESS_KEY_ID".into(),
            "s3-creds".into(),
            "AWS_ACCESS_KEY_ID".into()
        )));
        let restore = init[1].command.clone().unwrap();
        assert_eq!(restore[0], "/usr/local/bin/etcdutl");
        assert!(restore.contains(&"--data-dir=/var/lib/etcd/data".to_string()));
        let etcd = spec.containers[0].command.clone().unwrap();
        assert!(etcd.contains(&"--listen-client-urls=http://127.0.0.1:2379".to_string()));
        assert!(etcd.iter().all(|a| !a.contains("0.0.0.0")));
        let check = &spec.containers[1];
        assert_eq!(check.name, "check");
        assert!(env_of(check).contains(&(
            "ETCD_PASSWORD".into(),
            "nightly-verify-0123abcd".into(),
            "password".into()
        )));

        // 3.4 restores with etcdctl; a PVC source is mounted read-only.
        let pvc = SnapshotLocation {
            pvc: Some(PvcSnapshotLocation {
                claim_name: "backups".into(),
                sub_path: Some("etcd/nightly.db".into()),
            }),
            ..Default::default()
        };
        let pod = check_pod(
            &CheckPod {
                snapshot: &s,
                source: &pvc,
                identity: None,
                version: "3.4.23",
                credentials_secret: None,
            },
            &OperatorSettings::default(),
        )
        .unwrap();
        let spec = pod.spec.unwrap();
        let claim = spec.volumes.unwrap()[1]
            .persistent_volume_claim
            .clone()
            .unwrap();
        assert_eq!(
            (claim.claim_name.as_str(), claim.read_only),
            ("backups", Some(true))
        );
        let init = spec.init_containers.unwrap();
        assert!(env_of(&init[0]).is_empty());
        assert!(
            init[0]
                .args
                .clone()
                .unwrap()
                .contains(&"--file=/snapshot-source/etcd/nightly.db".to_string())
        );
        assert_eq!(
            init[1].command.clone().unwrap()[0],
            "/usr/local/bin/etcdctl"
        );
        assert!(spec.containers[1].env.is_none());
    }

    fn status(init: Vec<ContainerStatus>, containers: Vec<ContainerStatus>, phase: &str) -> Pod {
        Pod {
            status: Some(PodStatus {
                phase: Some(phase.into()),
                init_container_statuses: Some(init),
                container_statuses: Some(containers),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn ended(name: &str, code: i32, message: &str) -> ContainerStatus {
        ContainerStatus {
            name: name.into(),
            state: Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: code,
                    message: Some(message.into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn waiting(name: &str, reason: &str) -> ContainerStatus {
        ContainerStatus {
            name: name.into(),
            state: Some(ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some(reason.into()),
                    message: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_outcome_is_the_checks_result_or_the_failing_step() {
        let served = super::super::pvc::result_line(&AgentResult::Served {
            revision: 42,
            keys: 7,
        });
        let done = status(
            vec![ended("restore-fetch", 0, ""), ended("restore", 0, "")],
            vec![ended("check", 0, &served)],
            "Running",
        );
        assert_eq!(
            check_outcome(&done, 30),
            CheckOutcome::Served {
                revision: 42,
                keys: 7
            }
        );
        let wrong_key = status(
            vec![ended(
                "restore-fetch",
                1,
                "RestoreFailed WrongIdentity: none of the age identities given can decrypt it",
            )],
            vec![waiting("etcd", "PodInitializing")],
            "Failed",
        );
        let CheckOutcome::Failed(why) = check_outcome(&wrong_key, 30) else {
            panic!()
        };
        assert!(why.contains("WrongIdentity"), "{why}");
        let never = status(
            vec![waiting("restore-fetch", "ImagePullBackOff")],
            vec![],
            "Pending",
        );
        assert_eq!(check_outcome(&never, 10), CheckOutcome::Running);
        let CheckOutcome::Failed(why) = check_outcome(&never, START_DEADLINE_SECONDS) else {
            panic!()
        };
        assert!(why.contains("ImagePullBackOff"), "{why}");
        let crashed = status(vec![], vec![ended("check", 2, "panicked at x")], "Running");
        let CheckOutcome::Failed(why) = check_outcome(&crashed, 30) else {
            panic!()
        };
        assert!(why.contains("code 2") && why.contains("panicked"), "{why}");
    }
}
