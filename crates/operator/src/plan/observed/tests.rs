use super::*;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus, PodCondition,
    PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

#[test]
fn pod_facts_read_phase_readiness_and_the_etcd_container() {
    let started: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some("etcd-0".into()),
            uid: Some("p-1".into()),
            deletion_timestamp: Some(Time(started)),
            owner_references: Some(vec![OwnerReference {
                uid: "m-1".into(),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some("node-a".into()),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            start_time: Some(Time(started)),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "False".into(),
                ..Default::default()
            }]),
            container_statuses: Some(vec![ContainerStatus {
                name: "etcd".into(),
                restart_count: 7,
                state: Some(ContainerState {
                    waiting: Some(ContainerStateWaiting {
                        reason: Some("CrashLoopBackOff".into()),
                        message: None,
                    }),
                    ..Default::default()
                }),
                last_state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        reason: Some("OOMKilled".into()),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    };
    let facts = PodFacts::from_pod(&pod);
    assert_eq!(facts.phase, PodPhase::Running);
    assert!(!facts.ready && facts.deleting);
    assert!(facts.is_crash_looping() && facts.was_oom_killed());
    assert_eq!(facts.started_at, Some(started));
    assert_eq!(facts.node.as_deref(), Some("node-a"));
    assert_eq!(facts.owner_uid.as_deref(), Some("m-1"));
}

#[test]
fn pod_facts_expand_the_legacy_operators_variables() {
    // A Pod of the legacy etcd.aenix.io operator's StatefulSet: its name through the
    // downward API, the data directory under the volume it mounts at /var/run/etcd.
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "etcd-1", "namespace": "prod"},
        "spec": {
            "containers": [{
                "name": "etcd",
                "command": ["etcd"],
                "args": [
                    "--name=$(POD_NAME)",
                    "--initial-advertise-peer-urls=https://$(POD_NAME).etcd-headless.$(POD_NAMESPACE).svc:2380",
                    "--data-dir=/var/run/etcd/default.etcd",
                    "--listen-client-urls=$(SCHEME)0.0.0.0:2379",
                    "--x=$$(POD_NAME)-$(UNKNOWN)-$(NODE)",
                ],
                "env": [
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                    {"name": "SCHEME", "value": "http://"},
                    {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                ],
                "volumeMounts": [{"name": "data", "mountPath": "/var/run/etcd"}],
            }],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-etcd-1"}}],
        },
    }))
    .unwrap();
    let facts = PodFacts::from_pod(&pod);
    assert_eq!(facts.etcd_flags["name"], "etcd-1");
    assert_eq!(
        facts.etcd_flags["initial-advertise-peer-urls"],
        "https://etcd-1.etcd-headless.prod.svc:2380"
    );
    assert_eq!(
        facts.etcd_flags["listen-client-urls"],
        "http://0.0.0.0:2379"
    );
    assert_eq!(
        facts.etcd_flags["x"], "$(POD_NAME)-$(UNKNOWN)-$(NODE)",
        "escaped and unknown references stay"
    );
    assert_eq!(facts.data_mount.as_deref(), Some("/var/run/etcd"));
    assert_eq!(facts.data_claim.as_deref(), Some("data-etcd-1"));
}

#[test]
fn pod_facts_read_the_etcd_command_line_and_the_data_claim() {
    // A Pod as the reference operator builds it: its start settings in the command line.
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "etcd-x7k2p"},
        "spec": {
            "containers": [{
                "name": "etcd",
                "command": [
                    "etcd", "--name=etcd-x7k2p", "--data-dir=/var/lib/etcd",
                    "--initial-advertise-peer-urls=http://etcd-x7k2p.etcd.prod.svc:2380",
                    "--initial-cluster=etcd-x7k2p=http://etcd-x7k2p.etcd.prod.svc:2380",
                    "--initial-cluster-state=new", "--peer-auto-tls",
                ],
                "args": ["--snapshot-count=100"],
            }],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-etcd-x7k2p"}}],
        },
    }))
    .unwrap();
    let facts = PodFacts::from_pod(&pod);
    assert_eq!(facts.start, None, "no start annotations of ours");
    assert_eq!(facts.etcd_flags["name"], "etcd-x7k2p");
    assert_eq!(facts.etcd_flags["data-dir"], "/var/lib/etcd");
    assert_eq!(facts.etcd_flags["initial-cluster-state"], "new");
    assert_eq!(
        facts.etcd_flags["initial-cluster"], "etcd-x7k2p=http://etcd-x7k2p.etcd.prod.svc:2380",
        "only the first = splits"
    );
    assert_eq!(facts.etcd_flags["snapshot-count"], "100");
    assert!(!facts.etcd_flags.contains_key("peer-auto-tls"));
    assert_eq!(facts.data_claim.as_deref(), Some("data-etcd-x7k2p"));
}

#[test]
fn terminal_phases() {
    assert!(PodPhase::parse(Some("Succeeded")).is_terminal());
    assert!(PodPhase::parse(Some("Failed")).is_terminal());
    assert!(!PodPhase::parse(Some("Running")).is_terminal());
    assert_eq!(PodPhase::parse(None), PodPhase::Unknown);
}

#[test]
fn pvc_facts_read_a_failed_or_running_expansion_in_kubernetes_terms() {
    let facts = |status: serde_json::Value| {
        PvcFacts::from_pvc(
            &serde_json::from_value(serde_json::json!({
                "metadata": {"name": "data-etcd-0"},
                "status": status,
            }))
            .unwrap(),
        )
    };
    let quiet = facts(serde_json::json!({"phase": "Bound"}));
    assert_eq!((quiet.resize_failure, quiet.resize_progress), (None, None));

    let running = facts(serde_json::json!({
        "allocatedResourceStatuses": {"storage": "ControllerResizeInProgress"},
        "conditions": [{"type": "Resizing", "status": "True"}],
    }));
    assert_eq!(running.resize_failure, None);
    assert_eq!(running.resize_progress.as_deref(), Some("Resizing"));
    let pending = facts(serde_json::json!({
        "allocatedResourceStatuses": {"storage": "NodeResizePending"},
    }));
    assert_eq!(
        pending.resize_progress.as_deref(),
        Some("NodeResizePending")
    );

    let refused = facts(serde_json::json!({
        "allocatedResourceStatuses": {"storage": "ControllerResizeInfeasible"},
        "conditions": [{"type": "ControllerResizeError", "status": "True", "message": "too big"}],
    }));
    assert_eq!(
        refused.resize_failure.as_deref(),
        Some("ControllerResizeInfeasible (ControllerResizeError: too big)")
    );
    assert_eq!(refused.resize_progress, None);
    let node = facts(serde_json::json!({
        "conditions": [{"type": "NodeResizeError", "status": "True", "message": "fs"}],
    }));
    assert_eq!(node.resize_failure.as_deref(), Some("NodeResizeError: fs"));
    let old = facts(serde_json::json!({
        "allocatedResourceStatuses": {"storage": "NodeResizeFailed"},
        "conditions": [{"type": "ControllerResizeError", "status": "False", "message": "gone"}],
    }));
    assert_eq!(old.resize_failure.as_deref(), Some("NodeResizeFailed"));
}
