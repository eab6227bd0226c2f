//! The member Pod: one etcd process, its data volume, its flags, and probes that never make an
//! outage worse.

use std::collections::BTreeMap;

use etcd_operator_api::EtcdMember;
use etcd_operator_api::labels::{
    INITIAL_CLUSTER_ANNOTATION, INITIAL_CLUSTER_STATE_ANNOTATION, ROLE, ROLE_VOTER, member_labels,
};
use etcd_operator_api::shared::{EtcdOptions, StorageMedium};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    HTTPGetAction, HostAlias, ObjectFieldSelector, PersistentVolumeClaimVolumeSource, Pod,
    PodSecurityContext, PodSpec, Probe, ResourceRequirements, SeccompProfile, SecretVolumeSource,
    SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::metadata::{member_owner_reference, non_empty, with_additional_metadata};
use super::names::{CLIENT_PORT, DATA_DIR, METRICS_PORT, PEER_PORT, member_dns_name};
use super::start::PodStart;
use super::{
    BuildError, member_client_scheme, member_client_url, member_data_dir, member_peer_scheme,
    member_peer_url, member_service_name, pvc_name,
};
use crate::domain::settings::OperatorSettings;
use crate::domain::versions::EtcdVersion;

/// The name of the etcd container.
pub const ETCD_CONTAINER: &str = "etcd";

/// The fixed non-root identity etcd runs as (the distroless `nonroot` user).
const RUN_AS: i64 = 65532;

/// The Pod of `member`: named after it, with `hostname`/`subdomain` giving it the DNS name its
/// peer URL advertises, owned by the EtcdMember.
pub fn member_pod(
    member: &EtcdMember,
    start: &PodStart,
    settings: &OperatorSettings,
) -> Result<Pod, BuildError> {
    let name = member
        .metadata
        .name
        .clone()
        .ok_or(BuildError::MissingMetadata {
            kind: "EtcdMember",
            field: "name",
        })?;
    let cluster = &member.spec.cluster_name;

    let mut labels = member_labels(cluster, &name);
    if member.status.as_ref().and_then(|s| s.is_voter) == Some(true) {
        // The PodDisruptionBudget selects voters by this label.
        labels.insert(ROLE.to_string(), ROLE_VOTER.to_string());
    }
    let (labels, annotations) = with_additional_metadata(
        labels,
        start.annotations(),
        member.spec.additional_metadata.as_ref(),
    );

    let (tls_flags, mut volumes, mut mounts) = tls_wiring(member);
    volumes.insert(0, data_volume(member, &name));
    volumes.extend(super::restore::restore_volumes(member, start));
    mounts.insert(
        0,
        VolumeMount {
            name: "data".to_string(),
            mount_path: DATA_DIR.to_string(),
            ..Default::default()
        },
    );

    let command = etcd_command(member, tls_flags)?;
    let image = settings.etcd_image(&member.spec.version);
    let mut annotations = annotations;
    annotations.insert(
        RENDERED_VERSION_ANNOTATION.to_string(),
        member.spec.version.clone(),
    );
    annotations.insert(
        RENDERED_HASH_ANNOTATION.to_string(),
        rendered_hash(&image, &command),
    );

    let container = Container {
        name: ETCD_CONTAINER.to_string(),
        image: Some(image),
        command: Some(command),
        env: Some(vec![
            annotation_env("ETCD_INITIAL_CLUSTER", INITIAL_CLUSTER_ANNOTATION),
            annotation_env(
                "ETCD_INITIAL_CLUSTER_STATE",
                INITIAL_CLUSTER_STATE_ANNOTATION,
            ),
        ]),
        // etcd says why it would not start in its last lines (for example that its data
        // directory is empty while it may only resume): the operator reads them here.
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        ports: Some(vec![
            container_port("client", CLIENT_PORT),
            container_port("peer", PEER_PORT),
            container_port("metrics", METRICS_PORT),
        ]),
        volume_mounts: Some(mounts),
        resources: Some(container_resources(member.spec.resources.as_ref())),
        startup_probe: Some(startup_probe()),
        liveness_probe: Some(liveness_probe()),
        readiness_probe: Some(readiness_probe()),
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
    };

    Ok(Pod {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: member.metadata.namespace.clone(),
            labels: non_empty(labels),
            annotations: non_empty(annotations),
            owner_references: Some(vec![member_owner_reference(member)?]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            hostname: Some(name),
            subdomain: Some(member_service_name(member)),
            host_aliases: Some(vec![own_name_alias(member)]),
            // Bare Pods: the kubelet restarts a crashed etcd in place; the operator recreates
            // a Pod that reached a terminal phase (a node shutdown leaves them Succeeded).
            restart_policy: Some("Always".to_string()),
            // etcd never talks to the Kubernetes API.
            automount_service_account_token: Some(false),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(RUN_AS),
                run_as_group: Some(RUN_AS),
                fs_group: Some(RUN_AS),
                seccomp_profile: Some(SeccompProfile {
                    type_: "RuntimeDefault".to_string(),
                    localhost_profile: None,
                }),
                ..Default::default()
            }),
            affinity: member.spec.affinity.clone(),
            topology_spread_constraints: member.spec.topology_spread_constraints.clone(),
            image_pull_secrets: member.spec.image_pull_secrets.clone(),
            init_containers: non_empty_vec(super::restore_init_containers(member, start, settings)),
            containers: vec![container],
            volumes: Some(volumes),
            ..Default::default()
        }),
        status: None,
    })
}

/// The version the Pod was rendered for ([`member_pod`] writes it): a Pod whose version differs
/// from its member's is restarted as an upgrade or downgrade, any other difference of the
/// rendered hash as a configuration change.
pub const RENDERED_VERSION_ANNOTATION: &str = "etcd-operator.cozystack.io/rendered-version";

/// A digest of what the operator rendered for the etcd container (its image reference and
/// command line, [`rendered_hash`]). A Pod is judged out of date by comparing this with what
/// the operator would render now, never by reading the Pod's image back: admission webhooks
/// and policies rewrite images (to a digest, to a mirror), and a Pod so rewritten is as the
/// operator made it.
pub const RENDERED_HASH_ANNOTATION: &str = "etcd-operator.cozystack.io/rendered-hash";

/// The etcd command line of `member`, built for its version: every flag checked against the
/// flags that version accepts ([`super::flags`]); a version outside the supported range, or
/// a flag its version does not take, is not built.
pub fn etcd_command(
    member: &EtcdMember,
    tls_flags: Vec<String>,
) -> Result<Vec<String>, BuildError> {
    let version = &member.spec.version;
    let parsed = EtcdVersion::parse(version)
        .filter(|v| crate::domain::versions::is_supported(*v))
        .ok_or_else(|| BuildError::UnsupportedVersion {
            version: version.clone(),
            range: crate::domain::versions::supported_range(),
        })?;
    let name = member.metadata.name.clone().unwrap_or_default();
    let mut command = vec![
        "etcd".to_string(),
        format!("--name={name}"),
        format!("--data-dir={}", member_data_dir(member)),
        format!(
            "--listen-peer-urls={}://0.0.0.0:{PEER_PORT}",
            member_peer_scheme(member)
        ),
        format!(
            "--listen-client-urls={}://0.0.0.0:{CLIENT_PORT}",
            member_client_scheme(member)
        ),
        format!("--advertise-client-urls={}", member_client_url(member)),
        format!("--initial-advertise-peer-urls={}", member_peer_url(member)),
        // --initial-cluster and --initial-cluster-state come from the environment, below.
        format!("--initial-cluster-token={}", member.spec.cluster_token),
        format!("--listen-metrics-urls=http://0.0.0.0:{METRICS_PORT}"),
    ];
    command.extend(option_flags(member.spec.options.as_ref()));
    command.extend(tls_flags);
    let refused = super::flags::refused_flags(parsed, &command);
    if !refused.is_empty() {
        return Err(BuildError::UnsupportedFlags {
            version: version.clone(),
            flags: refused,
        });
    }
    Ok(command)
}

/// What [`RENDERED_HASH_ANNOTATION`] records: a short SHA-256 of the image reference and the
/// command line the operator renders for the etcd container.
pub fn rendered_hash(image: &str, command: &[String]) -> String {
    let json = serde_json::to_vec(&(image, command)).unwrap_or_default();
    let digest = ring::digest::digest(&ring::digest::SHA256, &json);
    digest.as_ref()[..12]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The rendered hash of the Pod the operator would build for `member` now (what a live Pod's
/// [`RENDERED_HASH_ANNOTATION`] is compared with); `None` when it cannot be built.
pub fn member_rendered_hash(member: &EtcdMember, settings: &OperatorSettings) -> Option<String> {
    let (tls_flags, _, _) = tls_wiring(member);
    let command = etcd_command(member, tls_flags).ok()?;
    Some(rendered_hash(
        &settings.etcd_image(&member.spec.version),
        &command,
    ))
}

fn non_empty_vec<T>(items: Vec<T>) -> Option<Vec<T>> {
    (!items.is_empty()).then_some(items)
}

/// An environment variable read from one of the Pod's annotations when the container starts.
fn annotation_env(name: &str, annotation: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                api_version: None,
                field_path: format!("metadata.annotations['{annotation}']"),
            }),
            ..Default::default()
        }),
    }
}

/// The data volume: the member's PVC, or a tmpfs `emptyDir` capped at the storage size for
/// memory-backed members (whose data dies with the Pod; the planner replaces such a member
/// rather than restarting it under its old identity).
fn data_volume(member: &EtcdMember, name: &str) -> Volume {
    let storage = &member.spec.storage;
    match storage.medium_or_default() {
        StorageMedium::Memory => Volume {
            name: "data".to_string(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: Some("Memory".to_string()),
                size_limit: Some(storage.size_or_default()),
            }),
            ..Default::default()
        },
        StorageMedium::Persistent => Volume {
            name: "data".to_string(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: pvc_name(name),
                read_only: None,
            }),
            ..Default::default()
        },
    }
}

/// The typed `options` as etcd flags; unset fields leave etcd's defaults.
fn option_flags(options: Option<&EtcdOptions>) -> Vec<String> {
    let Some(options) = options else {
        return Vec::new();
    };
    let mut flags = Vec::new();
    if let Some(bytes) = options.quota_backend_bytes {
        flags.push(format!("--quota-backend-bytes={bytes}"));
    }
    if let Some(mode) = options.auto_compaction_mode {
        flags.push(format!("--auto-compaction-mode={}", mode.as_str()));
    }
    if let Some(retention) = &options.auto_compaction_retention {
        flags.push(format!("--auto-compaction-retention={retention}"));
    }
    if let Some(count) = options.snapshot_count {
        flags.push(format!("--snapshot-count={count}"));
    }
    flags
}

/// TLS flags, Secret volumes and mounts from the member's copy of the cluster's TLS.
fn tls_wiring(member: &EtcdMember) -> (Vec<String>, Vec<Volume>, Vec<VolumeMount>) {
    let (mut flags, mut volumes, mut mounts) = (Vec::new(), Vec::new(), Vec::new());
    let Some(tls) = member.spec.tls.as_ref() else {
        return (flags, volumes, mounts);
    };
    if let Some(secret) = &tls.client_server_secret_ref {
        let dir = "/etc/etcd/tls/client";
        flags.push(format!("--cert-file={dir}/tls.crt"));
        flags.push(format!("--key-file={dir}/tls.key"));
        if tls.client_mtls == Some(true) {
            flags.push("--client-cert-auth=true".to_string());
            flags.push(format!("--trusted-ca-file={dir}/ca.crt"));
        }
        volumes.push(secret_volume("tls-client", &secret.name));
        mounts.push(read_only_mount("tls-client", dir));
    }
    if let Some(secret) = &tls.peer_secret_ref {
        let dir = "/etc/etcd/tls/peer";
        flags.push(format!("--peer-cert-file={dir}/tls.crt"));
        flags.push(format!("--peer-key-file={dir}/tls.key"));
        flags.push(format!("--peer-trusted-ca-file={dir}/ca.crt"));
        flags.push("--peer-client-cert-auth=true".to_string());
        volumes.push(secret_volume("tls-peer", &secret.name));
        mounts.push(read_only_mount("tls-peer", dir));
    } else if tls.peer_auto_tls == Some(true) {
        flags.push("--peer-auto-tls".to_string());
    }
    (flags, volumes, mounts)
}

fn secret_volume(name: &str, secret: &str) -> Volume {
    Volume {
        name: name.to_string(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.to_string()),
            // Readable by etcd's group (the Pod's fsGroup), never by everyone.
            default_mode: Some(0o440),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn read_only_mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.to_string(),
        mount_path: path.to_string(),
        read_only: Some(true),
        ..Default::default()
    }
}

/// The member's resources, or 100m CPU and 128Mi memory requests when none are set.
fn container_resources(resources: Option<&ResourceRequirements>) -> ResourceRequirements {
    match resources {
        Some(set) if *set != ResourceRequirements::default() => set.clone(),
        _ => ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".to_string(), Quantity("100m".to_string())),
                ("memory".to_string(), Quantity("128Mi".to_string())),
            ])),
            ..Default::default()
        },
    }
}

fn container_port(name: &str, port: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.to_string()),
        container_port: port,
        protocol: Some("TCP".to_string()),
        ..Default::default()
    }
}

/// The member's own URL host name, resolved inside its Pod without DNS (the kubelet writes
/// `hostAliases` into the Pod's `/etc/hosts`), to the loopback address, where etcd listens
/// too (`--listen-*-urls` on 0.0.0.0).
///
/// Why: the cluster DNS has the name only once the kubelet has reported the Pod's IP, after
/// the container started. A member joining a running cluster (`--initial-cluster-state
/// existing`) checks its `--initial-cluster` against the member list it fetched from its
/// peers, and for every pair whose URLs differ as strings it resolves both
/// (`ValidateClusterAndAssignIDs`, `netutil.urlsEqual` in etcd 3.4 to 3.7): its own name
/// failed, and etcd retried it after one second, a second on every join's critical path
/// (docs/benchmarks.md). With the alias the own name resolves at once; the comparison still
/// tells members apart (another member's name resolves to its Pod IP, never to loopback),
/// and its own URL matches by string as before.
///
/// Nothing etcd records changes: the URLs stay `<member>.<service>.<ns>.svc` (existing and
/// adopted members' peer URLs included), and certificates need no new name. Nothing in etcd
/// dials its own peer URL. The kubelet's own entry for the Pod (its IP, under
/// `<member>.<service>.<ns>.svc.<cluster domain>`) is untouched. Pods made before this
/// carry no alias and are not replaced for it (the rendered hash covers the image and the
/// command only); they get it when they are next recreated.
fn own_name_alias(member: &EtcdMember) -> HostAlias {
    HostAlias {
        ip: "127.0.0.1".to_string(),
        hostnames: Some(vec![member_dns_name(member)]),
    }
}

// Probe endpoints, checked against the versions we run (3.4.23 and 3.5.1) on the metrics port:
// - `/health` answers 503 whenever the member has no leader, and `?serializable=true` does not
//   change that on either version (3.4.23 ignores the parameter; 3.5.1 still checks the
//   leader). So every `/health` form depends on quorum.
// - `/livez` and `/readyz` do not exist (404) on either version.
// - `/metrics` answers 200 whenever the process serves HTTP, with or without a leader.
//
// Readiness uses `/health`: a member without quorum cannot serve linearizable requests, so it
// leaves the client Service, and the PodDisruptionBudget stops drains from making things worse.
// Readiness never restarts anything. A learner reports healthy, so it becomes ready too.
// It asks `/health?exclude=NOSPACE` (both versions honour `exclude`; `tests/etcd_alarms.rs`
// checks it on real 3.4.23 and 3.5.1 over quota, and that CORRUPT still fails it): a member under NOSPACE still serves reads and deletes, and the
// operator's NOSPACE remedy moves leadership, which needs a Ready successor; plain `/health`
// turned every Pod NotReady for as long as the alarm lasted (the client Service had no
// endpoints at all). CORRUPT still fails it: a corrupt cluster serves nothing.
//
// Liveness must not depend on quorum: with `/health` (as improbable-eng's operator learned) the
// kubelet restarts every member while quorum is lost, wiping the state the cluster needs to
// recover. It uses `/metrics`, which fails only when the process stops serving HTTP. The
// metrics listener opens only after etcd has replayed its WAL, so a startup probe allows five
// minutes for that before liveness applies. It asks every second: a restarted member usually
// serves within a second or two, and readiness (so the client Service) waits for it; at a
// 5-second period the Pod turned Ready up to 5 seconds after etcd was back (the recovery
// benchmark). Readiness asks every second too (with 2 seconds to answer): a restarted member's
// first /health often fails while it catches up with the leader, and at a 2-second period that
// cost the recovery benchmark 2 seconds; a member that stops serving leaves the client Service
// within 3 to 6 seconds.

fn metrics_get(path: &str) -> Option<HTTPGetAction> {
    Some(HTTPGetAction {
        path: Some(path.to_string()),
        port: IntOrString::Int(METRICS_PORT),
        scheme: Some("HTTP".to_string()),
        ..Default::default()
    })
}

fn startup_probe() -> Probe {
    Probe {
        http_get: metrics_get("/metrics"),
        period_seconds: Some(1),
        timeout_seconds: Some(1),
        failure_threshold: Some(300),
        ..Default::default()
    }
}

fn liveness_probe() -> Probe {
    Probe {
        http_get: metrics_get("/metrics"),
        period_seconds: Some(10),
        timeout_seconds: Some(5),
        failure_threshold: Some(6),
        ..Default::default()
    }
}

fn readiness_probe() -> Probe {
    Probe {
        http_get: metrics_get("/health?exclude=NOSPACE"),
        period_seconds: Some(1),
        timeout_seconds: Some(2),
        failure_threshold: Some(3),
        ..Default::default()
    }
}

#[cfg(test)]
#[path = "pod_tests.rs"]
mod tests;
