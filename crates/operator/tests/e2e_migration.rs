//! `kubectl etcd migrate` from the legacy `etcd.aenix.io/v1alpha1` operator, end to end.
//!
//! The fixture is what the legacy operator leaves behind, built with no operator running: its
//! CRDs (tests/fixtures/v1alpha1), an EtcdCluster with its status, and the objects its factory
//! makes from it (the cluster-state ConfigMap, the headless Service `<cluster>-headless`, the
//! client Service `<cluster>`, the PodDisruptionBudget, and a StatefulSet with its exact Pod
//! template: `etcd` with `--name=$(POD_NAME)`, the data in `/var/run/etcd/default.etcd`,
//! `--peer-auto-tls`, the fixed compaction and snapshot flags, the environment from the
//! ConfigMap), whose Pods and claims kube-sandbox's StatefulSet controller makes, running
//! real etcd 3.5.1 that forms the cluster itself (Parallel, `--initial-cluster-state=new`).
//! Plus a legacy EtcdBackup and EtcdBackupSchedule.
//!
//! Then, under a client workload writing through the legacy client Service's name: a dry run
//! (nothing changes), an apply stopped after step 5 and run again, our operator deployed and
//! taking the members over (same Pod UIDs and restart counts, same member IDs, the same
//! claims), scaled 3 → 5 → 3 and a lost Pod healed on its data; no acknowledged write lost.
//! And refusals: emptyDir storage, authentication without TLS.

use etcd_operator_e2e_support as support;

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_operator_api::{EtcdMember, EtcdSnapshot, EtcdSnapshotSchedule};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use support::cluster::{Cluster, pod_ready};
use support::healing::{OperatorDeployment, start_healing_cluster};
use support::workload::Workload;
use support::{
    create_namespace, eventually, get_cluster, kubectl, kubectl_with_stdin, members, repo_root,
};

const LIMIT: Duration = Duration::from_secs(240);
const NS: &str = "migrate";
const REFUSED_NS: &str = "migrate-refused";
const NAME: &str = "etcd";

fn legacy_labels() -> Value {
    json!({
        "app.kubernetes.io/name": "etcd",
        "app.kubernetes.io/instance": NAME,
        "app.kubernetes.io/managed-by": "etcd-operator",
    })
}

fn legacy_owner(uid: &str) -> Value {
    json!([{
        "apiVersion": "etcd.aenix.io/v1alpha1", "kind": "EtcdCluster", "name": NAME, "uid": uid,
        "controller": true, "blockOwnerDeletion": true,
    }])
}

/// The probes the legacy operator sets (`/readyz`, `/livez`), pointed at `/health` the way a
/// user running etcd 3.5.1 (which has neither) overrides them through `podTemplate`.
fn probe(period: i32) -> Value {
    json!({"httpGet": {"path": "/health", "port": 2381}, "periodSeconds": period})
}

/// The legacy EtcdCluster: 3 replicas on 1Gi claims, etcd 3.5.1 through podTemplate, a PDB.
fn legacy_cluster() -> Value {
    json!({
        "apiVersion": "etcd.aenix.io/v1alpha1", "kind": "EtcdCluster",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "replicas": 3,
            "storage": {"volumeClaimTemplate": {"spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            }}},
            "podTemplate": {"spec": {"containers": [{
                "name": "etcd", "image": "quay.io/coreos/etcd:v3.5.1",
                "startupProbe": probe(5), "readinessProbe": probe(5), "livenessProbe": probe(5),
            }]}},
            "podDisruptionBudgetTemplate": {},
        },
    })
}

/// The StatefulSet the legacy factory (`CreateOrUpdateStatefulSet`) makes of it: the base Pod
/// spec strategic-merged with podTemplate.spec.
fn legacy_stateful_set(uid: &str) -> Value {
    let quota = (1024u64 * 1024 * 1024) * 95 / 100;
    json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": NAME, "namespace": NS, "ownerReferences": legacy_owner(uid)},
        "spec": {
            "replicas": 3,
            "serviceName": format!("{NAME}-headless"),
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": legacy_labels()},
            "template": {
                "metadata": {"labels": legacy_labels()},
                "spec": {
                    "containers": [{
                        "name": "etcd",
                        "image": "quay.io/coreos/etcd:v3.5.1",
                        "command": ["etcd"],
                        "args": [
                            "--name=$(POD_NAME)",
                            "--listen-metrics-urls=http://0.0.0.0:2381",
                            "--listen-peer-urls=https://0.0.0.0:2380",
                            "--listen-client-urls=http://0.0.0.0:2379",
                            format!("--initial-advertise-peer-urls=https://$(POD_NAME).{NAME}-headless.$(POD_NAMESPACE).svc:2380"),
                            "--data-dir=/var/run/etcd/default.etcd",
                            format!("--advertise-client-urls=http://$(POD_NAME).{NAME}-headless.$(POD_NAMESPACE).svc:2379"),
                            "--peer-auto-tls",
                            "--auto-compaction-retention=5m",
                            "--snapshot-count=10000",
                            format!("--quota-backend-bytes={quota}"),
                        ],
                        "ports": [{"name": "peer", "containerPort": 2380}, {"name": "client", "containerPort": 2379}],
                        "envFrom": [{"configMapRef": {"name": format!("{NAME}-cluster-state")}}],
                        "env": [
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                        ],
                        "startupProbe": probe(5),
                        "readinessProbe": probe(5),
                        "livenessProbe": probe(5),
                        "volumeMounts": [{"name": "data", "mountPath": "/var/run/etcd"}],
                    }],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
                },
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            }],
        },
    })
}

fn apply_json(cluster: &Cluster, object: &Value) {
    let text = object.to_string();
    let (ok, _, stderr) = kubectl_with_stdin(cluster, &["apply", "-f", "-"], Some(&text));
    assert!(ok, "kubectl apply {}: {stderr}", object["kind"]);
}

fn legacy_api(cluster: &Cluster, ns: &str, kind: &str, plural: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("etcd.aenix.io", "v1alpha1", kind),
        plural,
    );
    Api::namespaced_with(cluster.client(), ns, &resource)
}

/// Builds the legacy cluster as its operator does and waits until etcd formed it.
async fn legacy_fixture(cluster: &Cluster) {
    let client = cluster.client();
    apply_json(cluster, &legacy_cluster());
    let legacy = legacy_api(cluster, NS, "EtcdCluster", "etcdclusters");
    let uid = legacy.get(NAME).await.unwrap().metadata.uid.unwrap();
    let members: Vec<String> = (0..3)
        .map(|i| format!("{NAME}-{i}=https://{NAME}-{i}.{NAME}-headless.{NS}.svc:2380"))
        .collect();
    let config_map = |state: &str| {
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{NAME}-cluster-state"), "namespace": NS, "ownerReferences": legacy_owner(&uid)},
            "data": {
                "ETCD_INITIAL_CLUSTER_STATE": state,
                "ETCD_INITIAL_CLUSTER": members.join(","),
                "ETCD_INITIAL_CLUSTER_TOKEN": format!("{NAME}-{NS}"),
            },
        })
    };
    apply_json(cluster, &config_map("new"));
    apply_json(
        cluster,
        &json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": format!("{NAME}-headless"), "namespace": NS, "labels": legacy_labels(), "ownerReferences": legacy_owner(&uid)},
            "spec": {
                "clusterIP": "None", "publishNotReadyAddresses": true, "selector": legacy_labels(),
                "ports": [{"name": "peer", "port": 2380, "targetPort": 2380}, {"name": "client", "port": 2379, "targetPort": 2379}],
            },
        }),
    );
    apply_json(
        cluster,
        &json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": NAME, "namespace": NS, "labels": legacy_labels(), "ownerReferences": legacy_owner(&uid)},
            "spec": {
                "selector": legacy_labels(),
                "ports": [{"name": "client", "port": 2379, "targetPort": 2379}, {"name": "metrics", "port": 2381, "targetPort": 2381}],
            },
        }),
    );
    apply_json(
        cluster,
        &json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": NAME, "namespace": NS, "ownerReferences": legacy_owner(&uid)},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": legacy_labels()}, "unhealthyPodEvictionPolicy": "IfHealthyBudget"},
        }),
    );
    apply_json(cluster, &legacy_stateful_set(&uid));
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    eventually("the legacy Pods to be Ready", LIMIT, || async {
        let ready = pods
            .list(&ListParams::default().labels("app.kubernetes.io/instance=etcd"))
            .await
            .map_err(|e| e.to_string())?
            .items
            .iter()
            .filter(|p| pod_ready(p))
            .count();
        (ready == 3).then_some(()).ok_or(format!("{ready} Ready"))
    })
    .await;
    // Once the StatefulSet is Ready the legacy operator switches the state to `existing` and
    // writes its conditions.
    apply_json(cluster, &config_map("existing"));
    legacy
        .patch_status(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"conditions": [
                {"type": "Initialized", "status": "True", "reason": "InitializationComplete", "message": "Cluster managed resources created", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Ready", "status": "True", "reason": "StatefulSetReady", "message": "Cluster StatefulSet is Ready", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            ]}})),
        )
        .await
        .unwrap();
    // A backup claim, a finished backup and a schedule.
    apply_json(
        cluster,
        &json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "backups", "namespace": NS},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
    );
    apply_json(
        cluster,
        &json!({"apiVersion": "etcd.aenix.io/v1alpha1", "kind": "EtcdBackup", "metadata": {"name": "before-migration", "namespace": NS},
            "spec": {"clusterRef": {"name": NAME}, "destination": {"pvc": {"claimName": "backups"}}}}),
    );
    apply_json(
        cluster,
        &json!({"apiVersion": "etcd.aenix.io/v1alpha1", "kind": "EtcdBackupSchedule", "metadata": {"name": "nightly", "namespace": NS},
            "spec": {"clusterRef": {"name": NAME}, "schedule": "0 3 * * *", "destination": {"pvc": {"claimName": "backups", "subPath": "nightly"}}, "failedJobsHistoryLimit": 2}}),
    );
}

/// `kubectl etcd ARGS` in-process, on a thread with the binary's stack.
async fn plugin(cluster: &Cluster, namespace: &str, args: &[&str]) -> (i32, String, String) {
    let kubeconfig = cluster.kubeconfig_path().display().to_string();
    let mut argv: Vec<String> = ["kubectl-etcd", "--kubeconfig", &kubeconfig, "-n", namespace]
        .iter()
        .map(|a| a.to_string())
        .collect();
    argv.extend(args.iter().map(|a| a.to_string()));
    let outcome = tokio::task::block_in_place(|| {
        std::thread::Builder::new()
            .stack_size(32 * 1024 * 1024)
            .spawn(move || {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(kubectl_etcd::run(argv))
            })
            .unwrap()
            .join()
            .unwrap()
    });
    println!(
        "$ kubectl etcd -n {namespace} {}\n{}{}",
        args.join(" "),
        outcome.stdout,
        outcome.stderr
    );
    (outcome.code, outcome.stdout, outcome.stderr)
}

/// Every object of the namespace that the migration may touch, by kind/name, with its
/// resourceVersion.
async fn versions(cluster: &Cluster) -> BTreeMap<String, String> {
    let client = cluster.client();
    let mut out = BTreeMap::new();
    let mut add = |kind: &str, items: Vec<(Option<String>, Option<String>)>| {
        for (name, version) in items {
            out.insert(
                format!("{kind}/{}", name.unwrap_or_default()),
                version.unwrap_or_default(),
            );
        }
    };
    macro_rules! listed {
        ($ty:ty, $kind:expr) => {
            add(
                $kind,
                Api::<$ty>::namespaced(client.clone(), NS)
                    .list(&ListParams::default())
                    .await
                    .unwrap()
                    .items
                    .into_iter()
                    .map(|o| (o.metadata.name, o.metadata.resource_version))
                    .collect(),
            )
        };
    }
    listed!(Pod, "Pod");
    listed!(PersistentVolumeClaim, "PVC");
    listed!(Service, "Service");
    listed!(ConfigMap, "ConfigMap");
    listed!(StatefulSet, "StatefulSet");
    listed!(PodDisruptionBudget, "PDB");
    listed!(EtcdMember, "EtcdMember");
    listed!(etcd_operator_api::EtcdCluster, "EtcdCluster");
    for (kind, plural) in [
        ("EtcdCluster", "etcdclusters"),
        ("EtcdBackup", "etcdbackups"),
    ] {
        add(
            &format!("legacy {kind}"),
            legacy_api(cluster, NS, kind, plural)
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .map(|o| (o.metadata.name, o.metadata.resource_version))
                .collect(),
        );
    }
    out
}

/// Each legacy Pod's UID and etcd restart count.
async fn pod_identities(cluster: &Cluster) -> BTreeMap<String, (String, i32)> {
    let pods: Api<Pod> = Api::namespaced(cluster.client(), NS);
    let mut out = BTreeMap::new();
    for i in 0..3 {
        let name = format!("{NAME}-{i}");
        let pod = pods.get(&name).await.unwrap();
        let restarts = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first())
            .map(|c| c.restart_count)
            .unwrap_or_default();
        out.insert(name, (pod.metadata.uid.unwrap(), restarts));
    }
    out
}

/// etcd's members by name, with their IDs (through the legacy headless name of member 0).
fn etcd_ids(cluster: &Cluster) -> BTreeMap<String, u64> {
    let endpoint = format!("http://{NAME}-0.{NAME}-headless.{NS}.svc:2379");
    let out = cluster
        .etcdctl(&endpoint, &["member", "list", "-w", "json"])
        .unwrap();
    let list: Value = serde_json::from_str(&out).unwrap();
    list["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_string(),
                m["ID"].as_u64().unwrap(),
            )
        })
        .collect()
}

async fn claim_uids(cluster: &Cluster) -> BTreeMap<String, String> {
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(cluster.client(), NS);
    let mut out = BTreeMap::new();
    for i in 0..3 {
        let name = format!("data-{NAME}-{i}");
        out.insert(
            name.clone(),
            claims.get(&name).await.unwrap().metadata.uid.unwrap(),
        );
    }
    out
}

fn owners(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Vec<(String, String, bool)> {
    meta.owner_references
        .iter()
        .flatten()
        .map(|r| (r.kind.clone(), r.name.clone(), r.controller == Some(true)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_migrates_a_v1alpha1_cluster_in_place_then_scales_and_heals() {
    let cluster = start_healing_cluster(3).await;
    let client = cluster.client();
    let crds = repo_root().join("crates/operator/tests/fixtures/v1alpha1/crds.yaml");
    let (ok, _, stderr) = kubectl(&cluster, &["apply", "-f", crds.to_str().unwrap()]);
    assert!(ok, "the v1alpha1 CRDs: {stderr}");
    for ns in [NS, REFUSED_NS] {
        create_namespace(&client, ns).await;
    }
    legacy_fixture(&cluster).await;
    let legacy_endpoint = format!("http://{NAME}.{NS}.svc:2379");
    let put = cluster
        .etcdctl(&legacy_endpoint, &["put", "before-migration", "v1"])
        .unwrap();
    assert!(put.contains("OK"), "{put}");
    let ids = etcd_ids(&cluster);
    assert_eq!(ids.len(), 3, "{ids:?}");
    let pods_before = pod_identities(&cluster).await;
    let claims_before = claim_uids(&cluster).await;

    // Refusals, with what to do, and nothing created.
    for refused in [
        json!({"apiVersion": "etcd.aenix.io/v1alpha1", "kind": "EtcdCluster", "metadata": {"name": "scratch", "namespace": REFUSED_NS},
            "spec": {"storage": {"emptyDir": {}}}}),
        json!({"apiVersion": "etcd.aenix.io/v1alpha1", "kind": "EtcdCluster", "metadata": {"name": "secret", "namespace": REFUSED_NS},
            "spec": {"storage": {"volumeClaimTemplate": {"spec": {"resources": {"requests": {"storage": "1Gi"}}}}}, "security": {"enableAuth": true}}}),
    ] {
        apply_json(&cluster, &refused);
    }
    for (name, why) in [
        ("scratch", "storage.emptyDir"),
        ("secret", "enableAuth without TLS"),
    ] {
        let (code, out, _) = plugin(
            &cluster,
            REFUSED_NS,
            &["migrate", name, "--apply", "--skip-snapshot"],
        )
        .await;
        assert_eq!(code, 1, "{name} is refused");
        assert!(
            out.contains("refused, nothing is changed") && out.contains(why),
            "{out}"
        );
    }
    let (_, listed, _) = kubectl(
        &cluster,
        &[
            "get",
            "etcdclusters.etcd-operator.cozystack.io",
            "-n",
            REFUSED_NS,
            "-o",
            "name",
        ],
    );
    assert!(listed.trim().is_empty(), "nothing created: {listed}");

    // The dry run: the plan, with etcd's own IDs, and nothing changes.
    let before = versions(&cluster).await;
    let (code, out, err) = plugin(&cluster, NS, &["migrate", "-o", "json"]).await;
    assert_eq!(code, 0, "{err}");
    let plan: Value = serde_json::from_str(&out).unwrap();
    let planned: BTreeMap<String, u64> = plan["plan"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_string(),
                m["id"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(planned, ids);
    assert!(
        plan["plan"]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["done"] == false)
    );
    let (code, text, _) = plugin(&cluster, NS, &["migrate"]).await;
    assert_eq!(code, 0);
    assert!(
        text.contains("dry run") && text.contains("[todo]"),
        "{text}"
    );
    assert_eq!(versions(&cluster).await, before, "a dry run writes nothing");

    // Apply under the workload, interrupted after step 5 and run again.
    let workload = Workload::start_at(cluster.network.clone(), &legacy_endpoint, "migrate", None);
    let snapshot = cluster.dir.path().join("safety.db");
    let snapshot_arg = snapshot.display().to_string();
    let (code, out, err) = plugin(
        &cluster,
        NS,
        &[
            "migrate",
            "--apply",
            "--snapshot-file",
            &snapshot_arg,
            "--stop-after",
            "5",
        ],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("step 5 done") && out.contains("stopped before step 6"),
        "{out}"
    );
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), NS);
    assert!(
        sets.get_opt(NAME).await.unwrap().is_none(),
        "the StatefulSet is gone"
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    for i in 0..3 {
        let pod = pods.get(&format!("{NAME}-{i}")).await.unwrap();
        assert!(
            owners(&pod.metadata).is_empty(),
            "orphaned: {:?}",
            owners(&pod.metadata)
        );
    }
    let status = std::process::Command::new("/usr/local/lib/etcd-3.5.1/etcdutl")
        .args(["snapshot", "status", &snapshot_arg, "-w", "json"])
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    let status: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert!(status["revision"].as_i64().unwrap() > 1, "{status}");
    let (code, out, err) = plugin(&cluster, NS, &["migrate", "-o", "json"]).await;
    assert_eq!(code, 0, "{err}");
    let resumed: Value = serde_json::from_str(&out).unwrap();
    let done: Vec<bool> = resumed["plan"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["done"].as_bool().unwrap())
        .collect();
    assert_eq!(&done[..5], [true; 5], "{done:?}");
    let (code, out, err) = plugin(
        &cluster,
        NS,
        &["migrate", "--apply", "--snapshot-file", &snapshot_arg],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("migrated:") && !out.contains("step 5 done"),
        "{out}"
    );
    let (code, out, _) = plugin(&cluster, NS, &["migrate"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("already"), "{out}");

    // In place: the same Pods, restarts, claims and members; the objects re-owned.
    assert_eq!(pod_identities(&cluster).await, pods_before);
    assert_eq!(claim_uids(&cluster).await, claims_before);
    assert_eq!(etcd_ids(&cluster), ids);
    for i in 0..3 {
        let m = format!("{NAME}-{i}");
        let pod = pods.get(&m).await.unwrap();
        assert_eq!(
            owners(&pod.metadata),
            [("EtcdMember".into(), m.clone(), true)]
        );
        let labels = pod.metadata.labels.unwrap();
        assert_eq!(labels["etcd-operator.cozystack.io/role"], "voter");
        assert_eq!(labels["etcd-operator.cozystack.io/cluster"], NAME);
    }
    let services: Api<Service> = Api::namespaced(client.clone(), NS);
    let headless = services.get(NAME).await.unwrap();
    assert_eq!(headless.spec.unwrap().cluster_ip.as_deref(), Some("None"));
    assert_eq!(
        owners(&headless.metadata),
        [("EtcdCluster".into(), NAME.into(), true)]
    );
    let legacy_headless = services.get(&format!("{NAME}-headless")).await.unwrap();
    assert_eq!(
        owners(&legacy_headless.metadata).len(),
        3,
        "owned by the three members"
    );
    assert!(
        legacy_api(&cluster, NS, "EtcdCluster", "etcdclusters")
            .get_opt(NAME)
            .await
            .unwrap()
            .is_none()
            && legacy_api(&cluster, NS, "EtcdBackup", "etcdbackups")
                .get_opt("before-migration")
                .await
                .unwrap()
                .is_none(),
        "the legacy objects are gone"
    );
    let snapshots: Api<EtcdSnapshot> = Api::namespaced(client.clone(), NS);
    let schedules: Api<EtcdSnapshotSchedule> = Api::namespaced(client.clone(), NS);
    assert!(
        snapshots
            .get_opt("before-migration")
            .await
            .unwrap()
            .is_some()
    );
    let nightly = schedules.get("nightly").await.unwrap();
    assert_eq!(nightly.spec.schedule, "0 3 * * *");
    let ec = get_cluster(&client, NS, NAME).await;
    let annotations = ec.metadata.annotations.clone().unwrap();
    assert_eq!(
        annotations["etcd-operator.cozystack.io/peer-auto-tls"],
        "true"
    );
    assert_eq!(ec.spec.version, "3.5.1");

    // Our operator takes the members over as they are.
    cluster
        .deploy_operator_with(&OperatorDeployment::repairing())
        .await;
    eventually("every member taken over", LIMIT, || async {
        for m in members(&client, NS, NAME).await {
            let phase = m
                .status
                .as_ref()
                .and_then(|s| s.phase)
                .map(|p| p.to_string());
            if phase.as_deref() != Some("Ready") {
                return Err(format!("{:?} in phase {phase:?}", m.metadata.name));
            }
        }
        Ok(())
    })
    .await;
    cluster.wait_converged(NS, NAME, 3, LIMIT).await;
    assert_eq!(
        pod_identities(&cluster).await,
        pods_before,
        "nothing restarted"
    );
    assert_eq!(etcd_ids(&cluster), ids);
    let events = cluster.events(NS).await;
    assert!(
        events.iter().filter(|(r, _)| r == "Adopted").count() >= 3,
        "{events:?}"
    );
    assert_eq!(
        cluster
            .get(NS, NAME, "before-migration")
            .unwrap()
            .as_deref(),
        Some("v1")
    );
    eventually("the translated EtcdSnapshot to complete", LIMIT, || async {
        let s = snapshots
            .get("before-migration")
            .await
            .map_err(|e| e.to_string())?;
        let phase = s.status.and_then(|s| s.phase).map(|p| format!("{p:?}"));
        (phase.as_deref() == Some("Complete"))
            .then_some(())
            .ok_or(format!("{phase:?}"))
    })
    .await;

    // Scaling: the new members run with --peer-auto-tls and join the migrated ones.
    cluster.scale(NS, NAME, 5);
    cluster.wait_converged(NS, NAME, 5, LIMIT).await;
    let added = pods.get(&format!("{NAME}-4")).await.unwrap();
    let args = serde_json::to_string(&added.spec.unwrap().containers[0]).unwrap();
    assert!(args.contains("--peer-auto-tls"), "{args}");
    cluster.scale(NS, NAME, 3);
    cluster.wait_converged(NS, NAME, 3, LIMIT).await;
    assert_eq!(
        etcd_ids(&cluster),
        ids,
        "scale-in removed the members it added"
    );

    // A lost Pod comes back on its data, in this operator's layout, with its member ID.
    let lost = format!("{NAME}-1");
    cluster.delete_member_pod(NS, &lost).await;
    let old_uid = pods_before[&lost].0.clone();
    eventually("the lost Pod to come back", LIMIT, || async {
        let pod = pods.get(&lost).await.map_err(|e| e.to_string())?;
        (pod.metadata.uid.as_deref() != Some(old_uid.as_str()) && pod_ready(&pod))
            .then_some(())
            .ok_or_else(|| "not back yet".to_string())
    })
    .await;
    cluster.wait_converged(NS, NAME, 3, LIMIT).await;
    let healed = pods.get(&lost).await.unwrap();
    let spec = healed.spec.unwrap();
    assert_eq!(
        spec.subdomain.as_deref(),
        Some("etcd-headless"),
        "the peer URL etcd knows"
    );
    let volume = spec
        .volumes
        .unwrap()
        .into_iter()
        .find(|v| v.name == "data")
        .unwrap();
    assert_eq!(
        volume.persistent_volume_claim.unwrap().claim_name,
        format!("data-{lost}")
    );
    assert_eq!(
        claim_uids(&cluster).await,
        claims_before,
        "the data stayed on its claims"
    );
    assert_eq!(etcd_ids(&cluster), ids);
    assert_eq!(
        cluster
            .get(NS, NAME, "before-migration")
            .unwrap()
            .as_deref(),
        Some("v1")
    );
    workload.stop().await.assert_no_loss();
}
