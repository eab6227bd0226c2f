use etcd_operator_api::shared::{RestoreSpec, S3SnapshotLocation, SnapshotLocation};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus,
    LocalObjectReference,
};

use super::*;
use crate::build::member_pod;
use crate::build::start::InitialClusterState;
use crate::build::tests_support::member;

fn restored_member(version: &str) -> EtcdMember {
    let mut m = member("etcd", "etcd-0");
    m.spec.version = version.to_string();
    m.spec.restore = Some(RestoreSpec {
        source: SnapshotLocation {
            s3: Some(S3SnapshotLocation {
                endpoint: "http://s3.local:9000".into(),
                bucket: "backups".into(),
                key: Some("prod/before.db".into()),
                credentials_secret_ref: LocalObjectReference {
                    name: "s3-credentials".into(),
                },
                region: None,
                force_path_style: Some(true),
            }),
            ..Default::default()
        },
        age_identity_secret_ref: None,
    });
    m
}

fn start(state: InitialClusterState, initial: &str) -> PodStart {
    PodStart {
        initial_cluster: initial.to_string(),
        state,
    }
}

fn bootstrap() -> PodStart {
    start(
        InitialClusterState::New,
        "etcd-0=http://etcd-0.etcd.prod.svc:2380",
    )
}

fn init_names(m: &EtcdMember, s: &PodStart) -> Vec<String> {
    member_pod(m, s, &OperatorSettings::default())
        .unwrap()
        .spec
        .unwrap()
        .init_containers
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.name)
        .collect()
}

#[test]
fn only_the_bootstrapping_pod_of_a_restored_member_restores() {
    let m = restored_member("3.5.1");
    assert_eq!(
        init_names(&m, &bootstrap()),
        [
            RESTORE_FETCH_CONTAINER,
            RESTORE_CONTAINER,
            RESTORE_COMMIT_CONTAINER
        ]
    );
    // Every later Pod of the same member resumes on its own data: a wiped volume is never
    // filled from the old snapshot again.
    let own = PodStart::own_data("etcd-0", "http://etcd-0.etcd.prod.svc:2380");
    assert!(init_names(&m, &own).is_empty());
    let join = start(
        InitialClusterState::Existing,
        "etcd-0=http://etcd-0.etcd.prod.svc:2380,etcd-1=http://etcd-1.etcd.prod.svc:2380",
    );
    assert!(init_names(&m, &join).is_empty());
    // A member without a restore source never restores.
    assert!(init_names(&member("etcd", "etcd-0"), &bootstrap()).is_empty());
    // Memory-backed members are refused by the planner; no restore either.
    let mut memory = restored_member("3.5.1");
    memory.spec.storage.medium = Some(etcd_operator_api::shared::StorageMedium::Memory);
    assert!(init_names(&memory, &bootstrap()).is_empty());
}

#[test]
fn restore_uses_the_members_identity_and_the_right_tool() {
    let settings = OperatorSettings::default();
    for (version, tool) in [
        ("3.5.1", "/usr/local/bin/etcdutl"),
        ("3.4.23", "/usr/local/bin/etcdctl"),
    ] {
        let m = restored_member(version);
        let containers = restore_init_containers(&m, &bootstrap(), &settings);
        let fetch = &containers[0];
        assert_eq!(fetch.image.as_deref(), Some(DEFAULT_AGENT_IMAGE_FOR_TEST));
        let args = fetch.args.clone().unwrap();
        for arg in [
            "restore-fetch",
            "--endpoint=http://s3.local:9000",
            "--bucket=backups",
            "--key=prod/before.db",
            "--force-path-style",
        ] {
            assert!(args.iter().any(|a| a == arg), "{arg} in {args:?}");
        }
        let env = fetch.env.clone().unwrap();
        assert!(
            env.iter().all(|e| e.value.is_none()),
            "credentials only by reference"
        );
        assert_eq!(
            env[0]
                .value_from
                .as_ref()
                .unwrap()
                .secret_key_ref
                .as_ref()
                .unwrap()
                .name,
            "s3-credentials"
        );
        let restore = &containers[1];
        assert_eq!(restore.image, Some(settings.etcd_image(version)));
        let command = restore.command.clone().unwrap();
        assert_eq!(command[0], tool);
        for flag in [
            "--name=etcd-0",
            "--initial-cluster=etcd-0=http://etcd-0.etcd.prod.svc:2380",
            "--initial-advertise-peer-urls=http://etcd-0.etcd.prod.svc:2380",
            "--initial-cluster-token=prod-etcd-uid-etcd",
            "--data-dir=/var/lib/etcd/.restore/data",
        ] {
            assert!(command.iter().any(|a| a == flag), "{flag} in {command:?}");
        }
        let api3 = restore
            .env
            .iter()
            .flatten()
            .any(|e| e.name == "ETCDCTL_API" && e.value.as_deref() == Some("3"));
        assert_eq!(api3, version == "3.4.23");
        let commit = containers[2].args.clone().unwrap();
        assert!(commit.iter().any(|a| a == "--data-dir=/var/lib/etcd"));
        for c in &containers {
            assert_eq!(
                c.termination_message_policy.as_deref(),
                Some("FallbackToLogsOnError")
            );
        }
    }
}

#[test]
fn a_pvc_source_is_mounted_read_only_and_copied_by_restore_fetch() {
    let mut m = restored_member("3.5.1");
    m.spec.restore = Some(RestoreSpec {
        source: SnapshotLocation {
            pvc: Some(etcd_operator_api::shared::PvcSnapshotLocation {
                claim_name: "backups".into(),
                sub_path: Some("etcd/nightly/nightly.db".into()),
            }),
            ..Default::default()
        },
        age_identity_secret_ref: None,
    });
    let pod = member_pod(&m, &bootstrap(), &OperatorSettings::default()).unwrap();
    let spec = pod.spec.unwrap();
    let source = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == RESTORE_SOURCE_VOLUME)
        .expect("the source claim is a volume of the restoring Pod");
    let claim = source.persistent_volume_claim.as_ref().unwrap();
    assert_eq!(
        (claim.claim_name.as_str(), claim.read_only),
        ("backups", Some(true))
    );
    let inits = spec.init_containers.unwrap();
    let names: Vec<_> = inits.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            RESTORE_FETCH_CONTAINER,
            RESTORE_CONTAINER,
            RESTORE_COMMIT_CONTAINER
        ]
    );
    let fetch = &inits[0];
    let args = fetch.args.clone().unwrap();
    assert!(args.contains(&"--file=/snapshot-source/etcd/nightly/nightly.db".to_string()));
    assert!(args.contains(&"--uri=pvc://backups/etcd/nightly/nightly.db".to_string()));
    assert!(!args.iter().any(|a| a.starts_with("--bucket")));
    assert!(fetch.env.is_none(), "no credentials for a claim");
    let mount = fetch
        .volume_mounts
        .iter()
        .flatten()
        .find(|v| v.name == RESTORE_SOURCE_VOLUME)
        .unwrap();
    assert_eq!(mount.read_only, Some(true));
    // Only the etcd restore step's own mounts: the data volume.
    assert!(
        inits[1]
            .volume_mounts
            .iter()
            .flatten()
            .all(|v| v.name == "data")
    );
    // A later Pod of the same member mounts no source claim.
    let own = PodStart::own_data("etcd-0", "http://etcd-0.etcd.prod.svc:2380");
    let later = member_pod(&m, &own, &OperatorSettings::default()).unwrap();
    assert!(
        !later
            .spec
            .unwrap()
            .volumes
            .iter()
            .flatten()
            .any(|v| v.name == RESTORE_SOURCE_VOLUME)
    );
}

const DEFAULT_AGENT_IMAGE_FOR_TEST: &str = crate::domain::settings::DEFAULT_AGENT_IMAGE;

fn status(container: ContainerStatus) -> PodStatus {
    PodStatus {
        init_container_statuses: Some(vec![container]),
        ..Default::default()
    }
}

fn terminated(code: i32, message: &str) -> ContainerState {
    ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: code,
            message: Some(message.to_string()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn waiting(reason: &str, message: &str) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
        }),
        ..Default::default()
    }
}

#[test]
fn failures_read_back_from_the_init_containers() {
    let line = "RestoreFailed SnapshotNotFound: the restore source s3://b/k does not exist";
    // Failed now.
    let now = status(ContainerStatus {
        name: RESTORE_FETCH_CONTAINER.into(),
        state: Some(terminated(1, &format!("some log\n{line}\n"))),
        ..Default::default()
    });
    assert_eq!(restore_failure(&now).as_deref(), Some(line));
    // Backing off after a failure.
    let backoff = status(ContainerStatus {
        name: RESTORE_FETCH_CONTAINER.into(),
        state: Some(waiting("CrashLoopBackOff", "back-off")),
        last_state: Some(terminated(1, line)),
        ..Default::default()
    });
    assert_eq!(restore_failure(&backoff).as_deref(), Some(line));
    // Failed once, then succeeded: no failure.
    let recovered = status(ContainerStatus {
        name: RESTORE_FETCH_CONTAINER.into(),
        state: Some(terminated(0, "")),
        last_state: Some(terminated(1, line)),
        ..Default::default()
    });
    assert_eq!(restore_failure(&recovered), None);
    // The Secret is missing: the kubelet cannot start it.
    let no_secret = status(ContainerStatus {
        name: RESTORE_FETCH_CONTAINER.into(),
        state: Some(waiting(
            "CreateContainerConfigError",
            "secret \"s3\" not found",
        )),
        ..Default::default()
    });
    let (reason, message) = parse_restore_failure(&restore_failure(&no_secret).unwrap());
    assert_eq!(reason, "CredentialsSecretInvalid");
    assert!(message.contains("secret \"s3\" not found"));
    // etcdutl's own words when the restore step fails.
    let tool = status(ContainerStatus {
        name: RESTORE_CONTAINER.into(),
        state: Some(terminated(1, "Error: snapshot file has wrong size\n")),
        ..Default::default()
    });
    let (reason, message) = parse_restore_failure(&restore_failure(&tool).unwrap());
    assert_eq!(reason, "SnapshotRestoreFailed");
    assert!(message.contains("wrong size"), "{message}");
    // Other init containers do not count.
    let other = status(ContainerStatus {
        name: "something-else".into(),
        state: Some(terminated(1, line)),
        ..Default::default()
    });
    assert_eq!(restore_failure(&other), None);
}

#[test]
fn a_running_restore_is_in_progress_until_every_step_succeeded() {
    let named = |name: &str, state: ContainerState| ContainerStatus {
        name: name.into(),
        state: Some(state),
        ..Default::default()
    };
    let running = ContainerState {
        running: Some(Default::default()),
        ..Default::default()
    };
    let pending = waiting("PodInitializing", "");
    let pod = |containers: Vec<ContainerStatus>| PodStatus {
        init_container_statuses: Some(containers),
        ..Default::default()
    };
    let fetching = pod(vec![
        named(RESTORE_FETCH_CONTAINER, running.clone()),
        named(RESTORE_CONTAINER, pending.clone()),
        named(RESTORE_COMMIT_CONTAINER, pending.clone()),
    ]);
    assert_eq!(
        restore_in_progress(&fetching).as_deref(),
        Some(RESTORE_FETCH_CONTAINER)
    );
    let restoring = pod(vec![
        named(RESTORE_FETCH_CONTAINER, terminated(0, "")),
        named(RESTORE_CONTAINER, running.clone()),
        named(RESTORE_COMMIT_CONTAINER, pending),
    ]);
    assert_eq!(
        restore_in_progress(&restoring).as_deref(),
        Some(RESTORE_CONTAINER)
    );
    let done = pod(vec![
        named(RESTORE_FETCH_CONTAINER, terminated(0, "")),
        named(RESTORE_CONTAINER, terminated(0, "")),
        named(RESTORE_COMMIT_CONTAINER, terminated(0, "")),
    ]);
    assert_eq!(restore_in_progress(&done), None);
    let failed = pod(vec![named(
        RESTORE_FETCH_CONTAINER,
        terminated(1, "RestoreFailed SnapshotNotFound: gone"),
    )]);
    assert_eq!(restore_in_progress(&failed), None);
    assert_eq!(restore_in_progress(&PodStatus::default()), None);
}
