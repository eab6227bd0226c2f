use std::path::PathBuf;

use etcd_operator_api::EtcdSnapshot;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, PersistentVolumeClaim, PersistentVolumeClaimStatus, Pod, PodStatus,
};

use super::agent::*;
use super::outcome::*;
use super::pod::*;
use super::*;
use crate::domain::location::pvc_uri;
use crate::etcd::{ClientTls, EtcdAccess};
use crate::snapshot::decide::{Checked, Failure, Stored};

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
        AgentResult::Unverified {
            stored: Box::new(saved().stored),
            failure: Failure::VerificationFailed {
                detail: "cannot be decoded: none of the age identities".into(),
            },
        },
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
    // So is a failed read-back's, beside the file it names.
    let unverified = AgentResult::Unverified {
        stored: Box::new(saved().stored),
        failure: Failure::VerificationFailed {
            detail: "y".repeat(10_000),
        },
    };
    let line = result_line(&unverified);
    assert!(line.len() < 4096, "{} bytes", line.len());
    let Some(AgentResult::Unverified { stored, failure }) = parse_result(&line) else {
        panic!("{line}")
    };
    assert_eq!(*stored, saved().stored);
    assert_eq!(failure.reason(), "VerificationFailed");
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
