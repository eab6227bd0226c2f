use std::collections::BTreeMap;

use etcd_operator_api::member::EtcdMemberTls;
use etcd_operator_api::shared::{AdditionalMetadata, AutoCompactionMode, EtcdOptions, StorageSpec};
use k8s_openapi::api::core::v1::{Affinity, LocalObjectReference, TopologySpreadConstraint};

use super::*;
use crate::build::InitialClusterState;
use crate::build::tests_support::member;

fn seed_start() -> PodStart {
    PodStart {
        initial_cluster: "etcd-0=http://etcd-0.etcd.prod.svc:2380".to_string(),
        state: InitialClusterState::New,
    }
}

fn command(pod: &Pod) -> Vec<String> {
    crate::build::tests_support::effective_command(pod)
}

fn has_flag(pod: &Pod, flag: &str) -> bool {
    command(pod).iter().any(|f| f == flag)
}

#[test]
fn pod_is_named_and_addressed_as_its_member() {
    let pod = member_pod(
        &member("etcd", "etcd-0"),
        &seed_start(),
        &OperatorSettings::default(),
    )
    .unwrap();
    assert_eq!(pod.metadata.name.as_deref(), Some("etcd-0"));
    assert_eq!(pod.metadata.namespace.as_deref(), Some("prod"));
    let spec = pod.spec.as_ref().unwrap();
    assert_eq!(spec.hostname.as_deref(), Some("etcd-0"));
    assert_eq!(spec.subdomain.as_deref(), Some("etcd"));
    let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("EtcdMember", "etcd-0")
    );
    assert_eq!(owner.controller, Some(true));
    assert_eq!(owner.block_owner_deletion, Some(true));

    for flag in [
        "--name=etcd-0",
        "--data-dir=/var/lib/etcd",
        "--listen-peer-urls=http://0.0.0.0:2380",
        "--listen-client-urls=http://0.0.0.0:2379",
        "--advertise-client-urls=http://etcd-0.etcd.prod.svc:2379",
        "--initial-advertise-peer-urls=http://etcd-0.etcd.prod.svc:2380",
        "--initial-cluster=etcd-0=http://etcd-0.etcd.prod.svc:2380",
        "--initial-cluster-token=prod-etcd-uid-etcd",
        "--initial-cluster-state=new",
        "--listen-metrics-urls=http://0.0.0.0:2381",
    ] {
        assert!(
            has_flag(&pod, flag),
            "missing {flag} in {:?}",
            command(&pod)
        );
    }
    assert_eq!(command(&pod)[0], "etcd");
    let container = &spec.containers[0];
    assert_eq!(
        container.image.as_deref(),
        Some("quay.io/coreos/etcd:v3.5.1")
    );
    let ports: Vec<i32> = container
        .ports
        .as_ref()
        .unwrap()
        .iter()
        .map(|p| p.container_port)
        .collect();
    assert_eq!(ports, vec![2379, 2380, 2381]);
}

#[test]
fn the_pod_resolves_its_own_url_host_without_dns() {
    let pod = member_pod(
        &member("etcd", "etcd-1"),
        &seed_start(),
        &OperatorSettings::default(),
    )
    .unwrap();
    let aliases = pod.spec.unwrap().host_aliases.unwrap();
    assert_eq!(aliases.len(), 1);
    assert_eq!(aliases[0].ip, "127.0.0.1");
    assert_eq!(
        aliases[0].hostnames.as_deref(),
        Some(&["etcd-1.etcd.prod.svc".to_string()][..])
    );

    // An adopted member keeps its legacy Service in its URLs: the alias names that host.
    let mut adopted = member("etcd", "etcd-2");
    adopted.metadata.annotations = Some(BTreeMap::from([(
        crate::build::HEADLESS_SERVICE_ANNOTATION.to_string(),
        "etcd-headless".to_string(),
    )]));
    let pod = member_pod(&adopted, &seed_start(), &OperatorSettings::default()).unwrap();
    assert!(has_flag(
        &pod,
        "--initial-advertise-peer-urls=http://etcd-2.etcd-headless.prod.svc:2380"
    ));
    let aliases = pod.spec.unwrap().host_aliases.unwrap();
    assert_eq!(
        aliases[0].hostnames.as_deref(),
        Some(&["etcd-2.etcd-headless.prod.svc".to_string()][..])
    );
}

#[test]
fn joining_member_starts_existing_with_the_given_initial_cluster() {
    let start = PodStart {
        initial_cluster:
            "etcd-0=http://etcd-0.etcd.prod.svc:2380,etcd-1=http://etcd-1.etcd.prod.svc:2380".into(),
        state: InitialClusterState::Existing,
    };
    let pod = member_pod(
        &member("etcd", "etcd-1"),
        &start,
        &OperatorSettings::default(),
    )
    .unwrap();
    assert!(has_flag(&pod, "--initial-cluster-state=existing"));
    assert!(has_flag(
        &pod,
        &format!("--initial-cluster={}", start.initial_cluster)
    ));
}

#[test]
fn labels_follow_the_reference_operator_and_voters_carry_the_role() {
    let mut m = member("etcd", "etcd-2");
    let pod = member_pod(&m, &seed_start(), &OperatorSettings::default()).unwrap();
    let labels = pod.metadata.labels.unwrap();
    assert_eq!(labels["etcd-operator.cozystack.io/cluster"], "etcd");
    assert_eq!(labels["app.kubernetes.io/name"], "etcd");
    assert_eq!(labels["app.kubernetes.io/instance"], "etcd");
    assert_eq!(labels["app.kubernetes.io/managed-by"], "etcd-operator");
    assert_eq!(labels["app.kubernetes.io/component"], "etcd-2");
    assert!(
        !labels.contains_key("etcd-operator.cozystack.io/role"),
        "learners carry no role"
    );

    m.status.as_mut().unwrap().is_voter = Some(true);
    let pod = member_pod(&m, &seed_start(), &OperatorSettings::default()).unwrap();
    assert_eq!(
        pod.metadata.labels.unwrap()["etcd-operator.cozystack.io/role"],
        "voter"
    );
}

#[test]
fn pod_runs_non_root_without_privileges_or_token() {
    let pod = member_pod(
        &member("etcd", "etcd-0"),
        &seed_start(),
        &OperatorSettings::default(),
    )
    .unwrap();
    let spec = pod.spec.unwrap();
    assert_eq!(spec.automount_service_account_token, Some(false));
    let pod_ctx = spec.security_context.unwrap();
    assert_eq!(pod_ctx.run_as_non_root, Some(true));
    assert_eq!(pod_ctx.run_as_user, Some(65532));
    assert_eq!(pod_ctx.run_as_group, Some(65532));
    assert_eq!(pod_ctx.fs_group, Some(65532));
    let ctx = spec.containers[0].security_context.clone().unwrap();
    assert_eq!(ctx.allow_privilege_escalation, Some(false));
    assert_eq!(
        ctx.capabilities.unwrap().drop,
        Some(vec!["ALL".to_string()])
    );
}

#[test]
fn probes_do_not_depend_on_quorum_for_liveness() {
    let pod = member_pod(
        &member("etcd", "etcd-0"),
        &seed_start(),
        &OperatorSettings::default(),
    )
    .unwrap();
    let container = &pod.spec.unwrap().containers[0];
    let path = |p: &Option<Probe>| {
        let get = p.as_ref().unwrap().http_get.as_ref().unwrap();
        (get.path.clone().unwrap(), get.port.clone())
    };
    assert_eq!(
        path(&container.liveness_probe),
        ("/metrics".into(), IntOrString::Int(2381))
    );
    assert_eq!(
        path(&container.startup_probe),
        ("/metrics".into(), IntOrString::Int(2381))
    );
    assert_eq!(
        path(&container.readiness_probe),
        ("/health?exclude=NOSPACE".into(), IntOrString::Int(2381))
    );
}

#[test]
fn default_resources_unless_the_member_sets_them() {
    let pod = member_pod(
        &member("etcd", "etcd-0"),
        &seed_start(),
        &OperatorSettings::default(),
    )
    .unwrap();
    let requests = pod.spec.unwrap().containers[0]
        .resources
        .clone()
        .unwrap()
        .requests
        .unwrap();
    assert_eq!(requests["cpu"], Quantity("100m".into()));
    assert_eq!(requests["memory"], Quantity("128Mi".into()));

    let mut m = member("etcd", "etcd-0");
    let custom = ResourceRequirements {
        limits: Some(BTreeMap::from([(
            "memory".to_string(),
            Quantity("1Gi".into()),
        )])),
        ..Default::default()
    };
    m.spec.resources = Some(custom.clone());
    let pod = member_pod(&m, &seed_start(), &OperatorSettings::default()).unwrap();
    assert_eq!(pod.spec.unwrap().containers[0].resources, Some(custom));
}

#[test]
fn options_become_flags() {
    let mut m = member("etcd", "etcd-0");
    m.spec.options = Some(EtcdOptions {
        quota_backend_bytes: Some(8_589_934_592),
        auto_compaction_mode: Some(AutoCompactionMode::Revision),
        auto_compaction_retention: Some("1000".into()),
        snapshot_count: Some(10_000),
    });
    let pod = member_pod(&m, &seed_start(), &OperatorSettings::default()).unwrap();
    for flag in [
        "--quota-backend-bytes=8589934592",
        "--auto-compaction-mode=revision",
        "--auto-compaction-retention=1000",
        "--snapshot-count=10000",
    ] {
        assert!(has_flag(&pod, flag), "missing {flag}");
    }
}

#[test]
fn storage_is_a_pvc_or_a_sized_tmpfs() {
    let pod = member_pod(
        &member("etcd", "etcd-0"),
        &seed_start(),
        &OperatorSettings::default(),
    )
    .unwrap();
    let spec = pod.spec.unwrap();
    let data = &spec.volumes.as_ref().unwrap()[0];
    assert_eq!(
        data.persistent_volume_claim.as_ref().unwrap().claim_name,
        "data-etcd-0"
    );
    let mount = &spec.containers[0].volume_mounts.as_ref().unwrap()[0];
    assert_eq!(
        (mount.name.as_str(), mount.mount_path.as_str()),
        ("data", "/var/lib/etcd")
    );

    let mut m = member("etcd", "etcd-0");
    m.spec.storage = StorageSpec {
        size: Some(Quantity("512Mi".into())),
        medium: Some(StorageMedium::Memory),
        storage_class_name: None,
    };
    let pod = member_pod(&m, &seed_start(), &OperatorSettings::default()).unwrap();
    let volume = &pod.spec.unwrap().volumes.unwrap()[0];
    let empty_dir = volume.empty_dir.as_ref().unwrap();
    assert_eq!(empty_dir.medium.as_deref(), Some("Memory"));
    assert_eq!(empty_dir.size_limit, Some(Quantity("512Mi".into())));
    assert!(volume.persistent_volume_claim.is_none());
}

#[test]
fn scheduling_fields_and_metadata_pass_through() {
    let mut m = member("etcd", "etcd-0");
    m.spec.affinity = Some(Affinity::default());
    m.spec.topology_spread_constraints = Some(vec![TopologySpreadConstraint {
        max_skew: 1,
        topology_key: "zone".into(),
        when_unsatisfiable: "DoNotSchedule".into(),
        ..Default::default()
    }]);
    m.spec.image_pull_secrets = Some(vec![LocalObjectReference {
        name: "mirror".into(),
    }]);
    m.spec.additional_metadata = Some(AdditionalMetadata {
        labels: Some(BTreeMap::from([
            ("team".into(), "db".into()),
            ("app.kubernetes.io/component".into(), "hijack".into()),
        ])),
        annotations: Some(BTreeMap::from([
            (
                "etcd-operator.cozystack.io/headless-service-name".into(),
                "x".into(),
            ),
            ("note".into(), "kept".into()),
        ])),
    });
    let settings = OperatorSettings {
        etcd_image_repository: "mirror.local/etcd".into(),
        ..Default::default()
    };
    let pod = member_pod(&m, &seed_start(), &settings).unwrap();
    let labels = pod.metadata.labels.clone().unwrap();
    assert_eq!(labels["team"], "db");
    assert_eq!(
        labels["app.kubernetes.io/component"], "etcd-0",
        "operator keys win"
    );
    let annotations = pod.metadata.annotations.clone().unwrap();
    assert_eq!(
        annotations.keys().collect::<Vec<_>>(),
        [
            "etcd-operator.cozystack.io/initial-cluster",
            "etcd-operator.cozystack.io/initial-cluster-state",
            "etcd-operator.cozystack.io/rendered-hash",
            "etcd-operator.cozystack.io/rendered-version",
            "note"
        ],
        "reserved keys of the user are stripped, the operator's start instruction stays: {annotations:?}"
    );
    let spec = pod.spec.unwrap();
    assert_eq!(spec.affinity, Some(Affinity::default()));
    assert_eq!(spec.topology_spread_constraints.unwrap().len(), 1);
    assert_eq!(spec.image_pull_secrets.unwrap()[0].name, "mirror");
    assert_eq!(
        spec.containers[0].image.as_deref(),
        Some("mirror.local/etcd:v3.5.1")
    );
}

#[test]
fn tls_switches_schemes_and_mounts_secrets() {
    let mut m = member("etcd", "etcd-0");
    m.spec.tls = Some(EtcdMemberTls {
        client_server_secret_ref: Some(LocalObjectReference {
            name: "server".into(),
        }),
        client_mtls: Some(true),
        peer_secret_ref: Some(LocalObjectReference {
            name: "peer".into(),
        }),
        peer_auto_tls: None,
    });
    let pod = member_pod(&m, &seed_start(), &OperatorSettings::default()).unwrap();
    for flag in [
        "--listen-client-urls=https://0.0.0.0:2379",
        "--advertise-client-urls=https://etcd-0.etcd.prod.svc:2379",
        "--initial-advertise-peer-urls=https://etcd-0.etcd.prod.svc:2380",
        "--client-cert-auth=true",
        "--trusted-ca-file=/etc/etcd/tls/client/ca.crt",
        "--peer-client-cert-auth=true",
        "--listen-metrics-urls=http://0.0.0.0:2381",
    ] {
        assert!(has_flag(&pod, flag), "missing {flag}");
    }
    let volumes: Vec<String> = pod
        .spec
        .unwrap()
        .volumes
        .unwrap()
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert_eq!(volumes, vec!["data", "tls-client", "tls-peer"]);
}

#[test]
fn member_without_name_is_an_error() {
    let mut m = member("etcd", "etcd-0");
    m.metadata.name = None;
    assert!(member_pod(&m, &seed_start(), &OperatorSettings::default()).is_err());
}
