//! The translation and the plan on plain values: what carries over, every refusal, and each
//! step read as done from the objects a partial run leaves.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, PodSpec, Service};
use serde_json::{Value, json};

use super::legacy::{BackupSpec, ClusterSpec};
use super::plan::{
    EtcdFacts, Facts, LegacyBackup, LegacyCluster, MemberFact, OperatorFact, SnapshotChoice,
    StepKind, plan,
};
use super::translate::{
    TranslateOptions, translate_backup, translate_cluster, translate_destination,
    translate_schedule,
};

fn spec(value: Value) -> ClusterSpec {
    serde_json::from_value(value).unwrap()
}

fn pvc_storage(size: &str) -> Value {
    json!({"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}}})
}

fn running(image: &str, args: &[&str]) -> PodSpec {
    serde_json::from_value(json!({"containers": [{"name": "etcd", "image": image, "args": args}]}))
        .unwrap()
}

fn options() -> TranslateOptions {
    TranslateOptions::default()
}

#[test]
fn a_plain_cluster_carries_its_size_version_and_the_flags_its_pods_run() {
    let legacy = spec(json!({
        "replicas": 3,
        "storage": {"volumeClaimTemplate": {"spec": {
            "storageClassName": "fast",
            "resources": {"requests": {"storage": "10Gi"}},
        }}},
        "podTemplate": {
            "metadata": {"labels": {"team": "db"}, "annotations": {"a": "b"}},
            "spec": {
                "containers": [{"name": "etcd", "image": "quay.io/coreos/etcd:v3.5.9",
                    "resources": {"requests": {"cpu": "1"}}}],
                "imagePullSecrets": [{"name": "mirror"}],
                "affinity": {"podAntiAffinity": {}},
            },
        },
    }));
    let t = translate_cluster(
        "etcd",
        &legacy,
        Some(&running("quay.io/coreos/etcd:v3.5.1", &["--peer-auto-tls"])),
        &options(),
    );
    assert!(t.refusals.is_empty(), "{:?}", t.refusals);
    assert_eq!(t.spec["replicas"], 3);
    assert_eq!(
        t.spec["version"], "3.5.1",
        "what runs wins over the template"
    );
    assert_eq!(
        t.spec["storage"],
        json!({"size": "10Gi", "storageClassName": "fast"})
    );
    assert_eq!(
        t.spec["options"],
        json!({
            "autoCompactionRetention": "5m",
            "snapshotCount": 10000,
            "quotaBackendBytes": (10u64 * 1024 * 1024 * 1024 * 95 / 100),
        })
    );
    assert_eq!(t.spec["additionalMetadata"]["labels"]["team"], "db");
    assert_eq!(t.spec["imagePullSecrets"], json!([{"name": "mirror"}]));
    assert_eq!(t.spec["resources"]["requests"]["cpu"], "1");
    assert!(t.spec["affinity"].is_object());
    assert!(t.peer_auto_tls);
    assert!(t.spec.get("tls").is_none());
    // Without a StatefulSet, the template's image is read, and peer auto-TLS assumed.
    let t = translate_cluster("etcd", &legacy, None, &options());
    assert_eq!(t.spec["version"], "3.5.9");
    assert!(t.peer_auto_tls);
    // No image anywhere: the legacy default.
    let bare = spec(json!({"storage": pvc_storage("1Gi")}));
    let t = translate_cluster("etcd", &bare, None, &options());
    assert_eq!(t.spec["version"], "3.5.12");
    assert_eq!(t.spec["replicas"], 3, "the legacy default");
}

#[test]
fn spec_options_override_the_fixed_flags_and_untyped_ones_are_refused() {
    let legacy = spec(json!({
        "storage": pvc_storage("1Gi"),
        "options": {
            "quota-backend-bytes": "1000", "snapshot-count": "5",
            "auto-compaction-mode": "revision", "auto-compaction-retention": "100",
        },
    }));
    let t = translate_cluster("etcd", &legacy, None, &options());
    assert!(t.refusals.is_empty(), "{:?}", t.refusals);
    assert_eq!(
        t.spec["options"],
        json!({"autoCompactionRetention": "100", "snapshotCount": 5, "quotaBackendBytes": 1000, "autoCompactionMode": "revision"})
    );
    let cases = [
        (
            json!({"enable-v2": "true", "debug": ""}),
            "--debug --enable-v2=true",
        ),
        (json!({"quota-backend-bytes": "8G"}), "quota-backend-bytes"),
        (json!({"snapshot-count": "0"}), "snapshot-count"),
        (
            json!({"auto-compaction-mode": "hourly"}),
            "auto-compaction-mode",
        ),
        (
            json!({"auto-compaction-retention": "5 minutes"}),
            "auto-compaction-retention",
        ),
    ];
    for (options_map, needle) in cases {
        let legacy = spec(json!({"storage": pvc_storage("1Gi"), "options": options_map}));
        let t = translate_cluster("etcd", &legacy, None, &options());
        assert_eq!(t.refusals.len(), 1, "{options_map}: {:?}", t.refusals);
        assert!(t.refusals[0].contains(needle), "{}", t.refusals[0]);
        assert!(
            t.refusals[0].contains("kubectl edit etcdclusters.etcd.aenix.io")
                || needle != "--debug --enable-v2=true"
        );
    }
}

#[test]
fn storage_without_claims_is_refused() {
    for storage in [
        json!({"emptyDir": {}}),
        json!({"emptyDir": {"sizeLimit": "1Gi"}, "volumeClaimTemplate": {"spec": {"resources": {"requests": {"storage": "1Gi"}}}}}),
        json!({}),
        json!({"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}),
    ] {
        let t = translate_cluster("etcd", &spec(json!({"storage": storage})), None, &options());
        assert_eq!(t.refusals.len(), 1, "{storage}: {:?}", t.refusals);
        assert!(t.refusals[0].contains("emptyDir"), "{}", t.refusals[0]);
        assert!(
            t.refusals[0].contains("restor"),
            "says what to do: {}",
            t.refusals[0]
        );
    }
}

#[test]
fn versions_come_from_the_tag_or_the_flag() {
    let legacy = spec(json!({"storage": pvc_storage("1Gi")}));
    for (image, version) in [
        ("registry.local:5000/etcd:v3.4.23", Some("3.4.23")),
        ("quay.io/coreos/etcd:3.5.1", Some("3.5.1")),
        ("quay.io/coreos/etcd:latest", None),
        ("quay.io/coreos/etcd", None),
        ("quay.io/coreos/etcd:v3.5.1-arm64", None),
    ] {
        let t = translate_cluster("etcd", &legacy, Some(&running(image, &[])), &options());
        match version {
            Some(v) => assert_eq!(t.spec["version"], v, "{image}"),
            None => assert!(
                t.refusals[0].contains("--version"),
                "{image}: {:?}",
                t.refusals
            ),
        }
    }
    let forced = TranslateOptions {
        version: Some("3.5.13".into()),
        ..Default::default()
    };
    let t = translate_cluster(
        "etcd",
        &legacy,
        Some(&running("quay.io/coreos/etcd:latest", &[])),
        &forced,
    );
    assert_eq!(t.spec["version"], "3.5.13");
    let bad = TranslateOptions {
        version: Some("3.5".into()),
        ..Default::default()
    };
    assert!(
        !translate_cluster("etcd", &legacy, None, &bad)
            .refusals
            .is_empty()
    );
}

#[test]
fn tls_and_auth_map_to_this_api_and_auth_without_tls_is_refused() {
    let no_tls = spec(json!({"storage": pvc_storage("1Gi"), "security": {"enableAuth": true}}));
    let t = translate_cluster("etcd", &no_tls, None, &options());
    assert_eq!(t.refusals.len(), 1);
    assert!(
        t.refusals[0].contains("enableAuth without TLS"),
        "{}",
        t.refusals[0]
    );

    let secured = spec(
        json!({"storage": pvc_storage("1Gi"), "security": {"enableAuth": true, "tls": {
            "serverSecret": "server", "serverTrustedCASecret": "ca", "clientSecret": "operator",
            "peerSecret": "peer", "peerTrustedCASecret": "peer",
        }}}),
    );
    let t = translate_cluster("etcd", &secured, None, &options());
    assert!(t.refusals.is_empty(), "{:?}", t.refusals);
    assert_eq!(
        t.spec["tls"],
        json!({
            "client": {"serverSecretRef": {"name": "server"}, "operatorClientSecretRef": {"name": "operator"}},
            "peer": {"secretRef": {"name": "peer"}},
        })
    );
    assert!(!t.peer_auto_tls);
    assert_eq!(
        t.spec["auth"],
        json!({"enabled": true, "rootCredentialsSecretRef": {"name": "etcd-root-credentials"}})
    );
    assert_eq!(t.auth_secret, Some(("etcd-root-credentials".into(), true)));
    assert!(
        t.warnings
            .iter()
            .any(|w| w.contains("serverTrustedCASecret ca")),
        "the CA to merge: {:?}",
        t.warnings
    );
    let named = TranslateOptions {
        auth_secret: Some("mine".into()),
        ..Default::default()
    };
    let t = translate_cluster("etcd", &secured, None, &named);
    assert_eq!(t.auth_secret, Some(("mine".into(), false)));
    // A StatefulSet running without --peer-auto-tls (an override) is not annotated.
    let plain = spec(json!({"storage": pvc_storage("1Gi")}));
    let t = translate_cluster(
        "etcd",
        &plain,
        Some(&running("etcd:v3.5.1", &[])),
        &options(),
    );
    assert!(!t.peer_auto_tls);
}

#[test]
fn template_fields_without_a_home_are_reported() {
    let legacy = spec(json!({
        "storage": pvc_storage("1Gi"),
        "podTemplate": {"spec": {
            "containers": [
                {"name": "etcd", "readinessProbe": {"httpGet": {"path": "/health", "port": 2381}}},
                {"name": "sidecar", "image": "x"},
            ],
            "tolerations": [{"key": "k"}],
        }},
        "serviceTemplate": {"metadata": {"name": "etcd-client"}},
        "podDisruptionBudgetTemplate": {},
    }));
    let t = translate_cluster("etcd", &legacy, None, &options());
    assert!(t.refusals.is_empty(), "{:?}", t.refusals);
    let text = t.warnings.join("\n");
    for needle in [
        "containers[etcd].readinessProbe",
        "containers[sidecar]",
        "tolerations",
        "serviceTemplate",
        "podDisruptionBudgetTemplate",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
}

#[test]
fn backups_and_schedules_become_snapshots_and_snapshot_schedules() {
    let s3: BackupSpec = serde_json::from_value(json!({
        "clusterRef": {"name": "etcd"},
        "destination": {"s3": {"endpoint": "http://s3", "bucket": "b", "key": "", "credentialsSecretRef": {"name": "creds"}, "forcePathStyle": true}},
    }))
    .unwrap();
    assert_eq!(
        translate_backup(&s3).unwrap(),
        json!({"clusterRef": {"name": "etcd"}, "destination": {"s3": {"endpoint": "http://s3", "bucket": "b", "credentialsSecretRef": {"name": "creds"}, "forcePathStyle": true}}})
    );
    let pvc = json!({"pvc": {"claimName": "backups", "subPath": "etcd"}});
    assert_eq!(translate_destination(Some(&pvc)).unwrap(), pvc);
    assert!(translate_destination(Some(&json!({}))).is_err());
    assert!(
        translate_destination(Some(&json!({"s3": {}, "pvc": {}})))
            .unwrap_err()
            .contains("both")
    );
    let schedule: BackupSpec = serde_json::from_value(json!({
        "clusterRef": {"name": "etcd"}, "schedule": "0 * * * *",
        "destination": pvc, "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 2,
    }))
    .unwrap();
    let out = translate_schedule(&schedule).unwrap();
    assert_eq!(out["schedule"], "0 * * * *");
    assert_eq!(out["template"]["destination"], pvc);
    assert_eq!(out["failedHistoryLimit"], 2);
    assert!(
        out.get("retention").is_none(),
        "nothing pruned that the legacy kept"
    );
    let mut no_schedule = schedule.clone();
    no_schedule.schedule = Some(" ".into());
    assert!(translate_schedule(&no_schedule).is_err());
}

// The plan.

const NS: &str = "prod";

fn legacy_pod(i: usize, ready: bool) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": format!("etcd-{i}"), "namespace": NS, "uid": format!("pod-{i}"),
            "labels": {"app.kubernetes.io/instance": "etcd"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "etcd", "uid": "sts", "controller": true}],
        },
        "spec": {"containers": [{"name": "etcd"}], "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": format!("data-etcd-{i}")}}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
    }))
    .unwrap()
}

fn legacy_pvc(i: usize) -> PersistentVolumeClaim {
    serde_json::from_value(json!({"metadata": {"name": format!("data-etcd-{i}"), "namespace": NS}}))
        .unwrap()
}

fn service(name: &str, headless: bool, owner: &str) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS, "ownerReferences": [{"apiVersion": "x", "kind": "X", "name": "x", "uid": owner, "controller": true}]},
        "spec": {"clusterIP": if headless { "None" } else { "10.96.0.10" }},
    }))
    .unwrap()
}

fn member(i: usize) -> MemberFact {
    MemberFact {
        name: format!("etcd-{i}"),
        id: 0x100 + i as u64,
        peer_url: format!("https://etcd-{i}.etcd-headless.{NS}.svc:2380"),
        learner: false,
    }
}

/// A healthy legacy cluster of three, both operators stopped, nothing migrated.
fn facts() -> Facts {
    let set: StatefulSet = serde_json::from_value(json!({
        "metadata": {"name": "etcd", "namespace": NS, "uid": "sts"},
        "spec": {"selector": {}, "serviceName": "etcd-headless", "template": {"spec": {"containers": [
            {"name": "etcd", "image": "quay.io/coreos/etcd:v3.5.1", "args": ["--peer-auto-tls"]}]}}},
    }))
    .unwrap();
    Facts {
        namespace: NS.into(),
        name: "etcd".into(),
        legacy: Some(LegacyCluster {
            uid: "legacy".into(),
            spec: spec(json!({"replicas": 3, "storage": pvc_storage("1Gi")})),
        }),
        stateful_set: Some(set),
        pods: (0..3).map(|i| legacy_pod(i, true)).collect(),
        pvcs: (0..3).map(legacy_pvc).collect(),
        services: BTreeMap::from([
            ("etcd".into(), service("etcd", false, "legacy")),
            (
                "etcd-headless".into(),
                service("etcd-headless", true, "legacy"),
            ),
        ]),
        config_map: None,
        pdb: None,
        etcd: Some(Ok(EtcdFacts {
            cluster_id: 0xc1,
            members: (0..3).rev().map(member).collect(),
            auth_enabled: false,
        })),
        new_cluster: None,
        new_members: Vec::new(),
        backups: Vec::new(),
        schedules: Vec::new(),
        operators: vec![OperatorFact {
            namespace: "etcd-operator-system".into(),
            name: "etcd-operator".into(),
            replicas: Some(0),
            running: 0,
        }],
        crds_installed: true,
        snapshot: SnapshotChoice {
            skip: false,
            file: Some("/backup/etcd.db".into()),
            file_exists: false,
        },
    }
}

fn todo(p: &super::plan::Plan) -> Vec<StepKind> {
    p.steps.iter().filter(|s| !s.done).map(|s| s.kind).collect()
}

#[test]
fn a_healthy_cluster_gets_every_step_with_the_ids_etcd_reports() {
    let p = plan(&facts(), &options());
    assert!(p.refusals.is_empty(), "{:?}", p.refusals);
    assert_eq!(
        todo(&p),
        [
            StepKind::Snapshot,
            StepKind::CreateCluster,
            StepKind::CreateMembers,
            StepKind::HandOverLegacyObjects,
            StepKind::DeleteStatefulSet,
            StepKind::AdoptPodsAndClaims,
            StepKind::ReplaceServices,
            StepKind::DeleteLegacyObjects,
        ],
        "no backups to translate, no authentication to turn off"
    );
    assert_eq!(p.cluster_status["clusterID"], "00000000000000c1");
    assert_eq!(p.cluster_status["clusterToken"], "etcd-prod");
    let names: Vec<&str> = p.members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["etcd-0", "etcd-1", "etcd-2"], "in ordinal order");
    let m0 = &p.members[0];
    assert_eq!(m0.status["memberID"], "100");
    assert_eq!(m0.status["podUID"], "pod-0");
    assert_eq!(m0.status["pvcName"], "data-etcd-0");
    assert_eq!(
        m0.member["metadata"]["annotations"]["etcd-operator.cozystack.io/headless-service-name"],
        "etcd-headless"
    );
    assert_eq!(
        m0.member["metadata"]["annotations"]["etcd-operator.cozystack.io/data-dir-subpath"],
        "default.etcd"
    );
    assert_eq!(m0.member["spec"]["tls"], json!({"peerAutoTLS": true}));
    assert_eq!(
        m0.member["spec"]["initialCluster"],
        "etcd-0=https://etcd-0.etcd-headless.prod.svc:2380,etcd-1=https://etcd-1.etcd-headless.prod.svc:2380,etcd-2=https://etcd-2.etcd-headless.prod.svc:2380"
    );
    assert!(
        m0.member["spec"].get("bootstrap").is_none(),
        "no member bootstraps"
    );
    let annotations = &p.etcd_cluster["metadata"]["annotations"];
    assert_eq!(
        annotations["etcd-operator.cozystack.io/peer-auto-tls"],
        "true"
    );
    assert_eq!(
        annotations["etcd-operator.cozystack.io/migration-snapshot"],
        "/backup/etcd.db"
    );
    assert_eq!(p.etcd_cluster["spec"]["replicas"], 3);
}

#[test]
fn what_cannot_be_migrated_is_refused_with_what_to_do() {
    type Break = fn(&mut Facts);
    let cases: [(Break, &str); 10] = [
        (
            |f| f.operators[0].replicas = Some(1),
            "scale deployment/etcd-operator --replicas=0",
        ),
        (|f| f.operators[0].running = 1, "must be stopped"),
        (|f| f.crds_installed = false, "CRDs"),
        (
            |f| {
                if let Some(Ok(e)) = f.etcd.as_mut() {
                    e.members[0].learner = true;
                }
            },
            "learner",
        ),
        (
            |f| f.pods[1] = legacy_pod(1, false),
            "not Running and Ready",
        ),
        (
            |f| {
                f.pods.remove(2);
            },
            "has no Pod of that name",
        ),
        (
            |f| f.etcd = Some(Err("timeout".into())),
            "could not be read",
        ),
        (
            |f| {
                if let Some(Ok(e)) = f.etcd.as_mut() {
                    e.members[0].peer_url = "http://10.0.0.1:2380".into();
                }
            },
            "advertises the peer URL",
        ),
        (
            |f| {
                f.legacy.as_mut().unwrap().spec = spec(
                    json!({"storage": {"volumeClaimTemplate": {"metadata": {"name": "disk"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}}}}),
                );
            },
            "named disk",
        ),
        (
            |f| {
                f.new_cluster = Some(
                    serde_json::from_value(json!({
                        "metadata": {"name": "etcd", "namespace": NS}, "spec": {"version": "3.5.1"},
                    }))
                    .unwrap(),
                );
            },
            "already exists",
        ),
    ];
    for (break_it, needle) in cases {
        let mut f = facts();
        break_it(&mut f);
        let p = plan(&f, &options());
        assert!(
            p.refusals.iter().any(|r| r.contains(needle)),
            "{needle}: {:?}",
            p.refusals
        );
    }
}

#[test]
fn steps_read_as_done_from_what_a_partial_run_left() {
    let mut f = facts();
    let first = plan(&f, &options());
    // Steps 1-3 ran: the EtcdCluster and EtcdMembers exist with their status.
    let mut cluster = first.etcd_cluster.clone();
    cluster["metadata"]["uid"] = json!("new-cluster");
    cluster["status"] = json!({"clusterID": "00000000000000c1", "clusterToken": "etcd-prod", "observed": {"replicas": 3, "version": "3.5.1", "storage": {}}});
    f.new_cluster = Some(serde_json::from_value(cluster).unwrap());
    f.new_members = first
        .members
        .iter()
        .map(|m| {
            let mut member = m.member.clone();
            member["metadata"]["uid"] = json!(format!("uid-{}", m.name));
            member["status"] = m.status.clone();
            serde_json::from_value(member).unwrap()
        })
        .collect();
    let p = plan(&f, &options());
    assert!(p.refusals.is_empty(), "{:?}", p.refusals);
    assert_eq!(todo(&p)[0], StepKind::HandOverLegacyObjects);
    // Without etcd answering, the members come from the EtcdMembers now.
    f.etcd = Some(Err("down".into()));
    let p = plan(&f, &options());
    assert!(p.refusals.is_empty(), "{:?}", p.refusals);
    assert_eq!(p.members.len(), 3);
    assert_eq!(p.members[2].id, 0x102);
    f.etcd = first_etcd();
    // Handed over, the StatefulSet gone, Pods and claims adopted, Services replaced.
    let owners: Value = json!((0..3).map(|i| json!({"apiVersion": "v", "kind": "EtcdMember", "name": format!("etcd-{i}"), "uid": format!("uid-etcd-{i}")})).collect::<Vec<_>>());
    let mut headless = f.services["etcd-headless"].clone();
    headless.metadata.owner_references = serde_json::from_value(owners).unwrap();
    f.services.insert("etcd-headless".into(), headless);
    f.stateful_set = None;
    for (i, pod) in f.pods.iter_mut().enumerate() {
        let mut labels = etcd_operator_api::labels::member_labels("etcd", &format!("etcd-{i}"));
        labels.insert("etcd-operator.cozystack.io/role".into(), "voter".into());
        pod.metadata.labels = Some(labels);
        pod.metadata.owner_references = serde_json::from_value(json!([{"apiVersion": "v", "kind": "EtcdMember", "name": format!("etcd-{i}"), "uid": format!("uid-etcd-{i}"), "controller": true}])).unwrap();
    }
    let p = plan(&f, &options());
    assert_eq!(
        todo(&p)[0],
        StepKind::AdoptPodsAndClaims,
        "the claims are not yet"
    );
    for (i, claim) in f.pvcs.iter_mut().enumerate() {
        claim.metadata.labels = Some(etcd_operator_api::labels::member_labels(
            "etcd",
            &format!("etcd-{i}"),
        ));
        claim.metadata.owner_references = serde_json::from_value(json!([{"apiVersion": "v", "kind": "EtcdMember", "name": format!("etcd-{i}"), "uid": format!("uid-etcd-{i}"), "controller": true}])).unwrap();
    }
    f.services
        .insert("etcd".into(), service("etcd", true, "new-cluster"));
    f.services.insert(
        "etcd-client".into(),
        service("etcd-client", false, "new-cluster"),
    );
    f.backups.push(LegacyBackup {
        name: "nightly".into(),
        spec: serde_json::from_value(
            json!({"clusterRef": {"name": "etcd"}, "destination": {"pvc": {"claimName": "b"}}}),
        )
        .unwrap(),
        phase: Some("Complete".into()),
        uri: Some("file:///backup/data/x.db".into()),
    });
    let p = plan(&f, &options());
    assert_eq!(
        todo(&p),
        [StepKind::TranslateBackups, StepKind::DeleteLegacyObjects]
    );
    assert_eq!(p.snapshots[0].0, "nightly");
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("file:///backup/data/x.db"))
    );
    // The legacy cluster gone last: the migration is over, and says so.
    f.backups.clear();
    f.legacy = None;
    let p = plan(&f, &options());
    assert!(p.refusals.is_empty() && p.steps.is_empty());
}

fn first_etcd() -> Option<Result<EtcdFacts, String>> {
    facts().etcd
}

#[test]
fn no_legacy_cluster_and_nothing_migrated_is_refused() {
    let mut f = facts();
    f.legacy = None;
    let p = plan(&f, &options());
    assert!(
        p.refusals[0].contains("kubectl get etcdclusters.etcd.aenix.io"),
        "{:?}",
        p.refusals
    );
}

#[test]
fn authentication_adds_the_secret_and_the_step_that_turns_it_off() {
    let mut f = facts();
    f.legacy.as_mut().unwrap().spec = spec(json!({
        "storage": pvc_storage("1Gi"),
        "security": {"enableAuth": true, "tls": {"serverSecret": "server", "clientSecret": "client"}},
    }));
    if let Some(Ok(e)) = f.etcd.as_mut() {
        e.auth_enabled = true;
    }
    let p = plan(&f, &options());
    assert!(p.refusals.is_empty(), "{:?}", p.refusals);
    assert_eq!(p.generated_secret.as_deref(), Some("etcd-root-credentials"));
    assert!(todo(&p).contains(&StepKind::DisableAuth));
    assert_eq!(
        p.members[0].member["spec"]["tls"],
        json!({"clientServerSecretRef": {"name": "server"}, "clientMTLS": true, "peerAutoTLS": true})
    );
}
