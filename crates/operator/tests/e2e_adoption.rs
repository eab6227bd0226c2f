//! Taking over clusters of the reference operator (cozystack/etcd-operator v0.5.4, the same
//! API group and kinds). The fixture builds, with no operator of ours running, exactly the
//! objects the reference's controllers leave behind (every field they set: the EtcdCluster's
//! status with its token, observed spec and cluster ID; EtcdMembers named by `generateName`,
//! the seed marked `spec.bootstrap`, each with `spec.initialCluster`, `spec.clusterToken` and
//! `status.memberID`/`podUID`/`isVoter`; Pods with the reference's command line, labels,
//! probes and security context, and PVCs, both owned by their EtcdMember; the headless and
//! client Services and the PDB owned by the cluster; no finalizer on the EtcdCluster), grown
//! the way the reference grows a cluster (the seed bootstraps alone, each further member is
//! added as a learner and promoted), with real etcd run by the sandbox's kubelet. Then our
//! operator starts under a client workload: nothing restarts, no Pod UID or member ID
//! changes, no acknowledged write is lost, and afterwards scaling and healing work.
//! An object that cannot be adopted safely is reported and left alone.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_operator_api::{EtcdCluster, EtcdMember};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use support::cluster::OPERATOR_NAMESPACE;
use support::cluster::{Cluster, pod_ready};
use support::healing::{OperatorDeployment, start_healing_cluster};
use support::workload::Workload;
use support::{create_namespace, eventually, get_cluster, members};

const LIMIT: Duration = Duration::from_secs(240);
const NS: &str = "adopt";
const NAME: &str = "etcd";
const VERSION: &str = "3.5.1";
const GROUP_VERSION: &str = "etcd-operator.cozystack.io/v1alpha2";
const LABEL_CLUSTER: &str = "etcd-operator.cozystack.io/cluster";
const LABEL_ROLE: &str = "etcd-operator.cozystack.io/role";

/// The reference's `clusterLabels`.
fn cluster_labels(cluster: &str) -> Value {
    json!({
        "app.kubernetes.io/name": "etcd",
        "app.kubernetes.io/instance": cluster,
        "app.kubernetes.io/managed-by": "etcd-operator",
        LABEL_CLUSTER: cluster,
    })
}

/// The reference's `memberLabels`.
fn member_labels(cluster: &str, member: &str) -> Value {
    let mut labels = cluster_labels(cluster);
    labels["app.kubernetes.io/component"] = json!(member);
    labels
}

/// `controllerutil.SetControllerReference`.
fn controller_ref(kind: &str, name: &str, uid: &str) -> Value {
    json!([{
        "apiVersion": GROUP_VERSION, "kind": kind, "name": name, "uid": uid,
        "controller": true, "blockOwnerDeletion": true,
    }])
}

fn peer_url(member: &str, cluster: &str, ns: &str) -> String {
    format!("http://{member}.{cluster}.{ns}.svc:2380")
}

fn client_url(member: &str, cluster: &str, ns: &str) -> String {
    format!("http://{member}.{cluster}.{ns}.svc:2379")
}

/// The reference's `buildPod` for a plaintext, PVC-backed member.
fn reference_pod(member: &EtcdMember, state: &str, voter: bool) -> Pod {
    let name = member.metadata.name.clone().unwrap();
    let ns = member.metadata.namespace.clone().unwrap();
    let cluster = &member.spec.cluster_name;
    let mut labels = member_labels(cluster, &name);
    if voter {
        labels[LABEL_ROLE] = json!("voter");
    }
    let command = vec![
        "etcd".to_string(),
        format!("--name={name}"),
        "--data-dir=/var/lib/etcd".to_string(),
        "--listen-peer-urls=http://0.0.0.0:2380".to_string(),
        "--listen-client-urls=http://0.0.0.0:2379".to_string(),
        format!(
            "--advertise-client-urls={}",
            client_url(&name, cluster, &ns)
        ),
        format!(
            "--initial-advertise-peer-urls={}",
            peer_url(&name, cluster, &ns)
        ),
        format!("--initial-cluster={}", member.spec.initial_cluster),
        format!("--initial-cluster-token={}", member.spec.cluster_token),
        format!("--initial-cluster-state={state}"),
        "--listen-metrics-urls=http://0.0.0.0:2381".to_string(),
    ];
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": ns, "labels": labels,
            "ownerReferences": controller_ref("EtcdMember", &name, member.metadata.uid.as_deref().unwrap()),
        },
        "spec": {
            "hostname": name,
            "subdomain": cluster,
            "automountServiceAccountToken": false,
            "securityContext": {
                "runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [{
                "name": "etcd",
                "image": format!("quay.io/coreos/etcd:v{VERSION}"),
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "capabilities": {"drop": ["ALL"]},
                },
                "command": command,
                "ports": [
                    {"name": "client", "containerPort": 2379},
                    {"name": "peer", "containerPort": 2380},
                    {"name": "metrics", "containerPort": 2381},
                ],
                "volumeMounts": [{"name": "data", "mountPath": "/var/lib/etcd"}],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                "livenessProbe": {
                    "tcpSocket": {"port": 2380},
                    "initialDelaySeconds": 15, "periodSeconds": 10, "failureThreshold": 3,
                },
                "readinessProbe": {
                    "httpGet": {"path": "/health", "port": 2381},
                    "initialDelaySeconds": 5, "periodSeconds": 5, "failureThreshold": 3,
                },
            }],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": format!("data-{name}")}}],
        },
    }))
    .unwrap()
}

/// The reference's `ensurePVC`.
fn reference_pvc(member: &EtcdMember, size: &str) -> PersistentVolumeClaim {
    let name = member.metadata.name.clone().unwrap();
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": format!("data-{name}"),
            "namespace": member.metadata.namespace,
            "labels": member_labels(&member.spec.cluster_name, &name),
            "ownerReferences": controller_ref("EtcdMember", &name, member.metadata.uid.as_deref().unwrap()),
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
        },
    }))
    .unwrap()
}

/// The reference's `ensureService` for the headless and the client Service.
fn reference_service(cluster: &EtcdCluster, headless: bool) -> Service {
    let name = cluster.metadata.name.clone().unwrap();
    let uid = cluster.metadata.uid.clone().unwrap();
    let spec = if headless {
        json!({
            "clusterIP": "None", "publishNotReadyAddresses": true,
            "selector": {LABEL_CLUSTER: name},
            "ports": [{"name": "client", "port": 2379}, {"name": "peer", "port": 2380}],
        })
    } else {
        json!({
            "selector": {LABEL_CLUSTER: name},
            "ports": [{"name": "client", "port": 2379}],
        })
    };
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {
            "name": if headless { name.clone() } else { format!("{name}-client") },
            "namespace": cluster.metadata.namespace,
            "labels": cluster_labels(&name),
            "ownerReferences": controller_ref("EtcdCluster", &name, &uid),
        },
        "spec": spec,
    }))
    .unwrap()
}

fn ready_condition(status: &str, reason: &str, message: &str, generation: i64) -> Value {
    json!({
        "type": "Ready", "status": status, "reason": reason, "message": message,
        "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z",
    })
}

/// etcd's member list (JSON) through `endpoint`.
fn member_list(cluster: &Cluster, endpoint: &str) -> Result<Value, String> {
    let out = cluster.etcdctl(endpoint, &["member", "list", "-w", "json"])?;
    serde_json::from_str(&out).map_err(|e| format!("{e}: {out}"))
}

/// The member of `list` with the peer URL `peer`.
fn listed<'a>(list: &'a Value, peer: &str) -> Option<&'a Value> {
    list["members"].as_array()?.iter().find(|m| {
        m["peerURLs"]
            .as_array()
            .is_some_and(|p| p.iter().any(|u| u == peer))
    })
}

/// The reference's `completePendingMember`: `name=peerURL` of every listed member, sorted.
fn initial_cluster_from(list: &Value) -> String {
    let mut parts: Vec<String> = list["members"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| {
            let peer = m["peerURLs"].as_array()?.first()?.as_str()?.to_string();
            let name = m["name"]
                .as_str()
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .unwrap_or_else(|| {
                    let host = peer.split("://").nth(1).unwrap_or_default();
                    host.split('.').next().unwrap_or_default().to_string()
                });
            Some(format!("{name}={peer}"))
        })
        .collect();
    parts.sort();
    parts.join(",")
}

/// Builds a cluster of `replicas` members the way the reference operator does, with its
/// objects' exact shape, and waits until etcd has formed it. Returns the member names in
/// creation order.
async fn reference_cluster(
    cluster: &Cluster,
    ns: &str,
    name: &str,
    replicas: usize,
) -> Vec<String> {
    let client = cluster.client();
    let clusters: Api<EtcdCluster> = Api::namespaced(client.clone(), ns);
    let etcd_members: Api<EtcdMember> = Api::namespaced(client.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), ns);
    let pp = PostParams::default();
    let merge = |v: Value| Patch::Merge(v);

    let manifest: EtcdCluster = serde_json::from_value(json!({
        "apiVersion": GROUP_VERSION, "kind": "EtcdCluster",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": replicas, "version": VERSION},
    }))
    .unwrap();
    let created = clusters
        .create(&pp, &manifest)
        .await
        .expect("the EtcdCluster");
    let uid = created.metadata.uid.clone().unwrap();
    let spec = serde_json::to_value(&created.spec).unwrap();
    let storage = spec["storage"].clone();
    let size = storage["size"].as_str().unwrap_or("1Gi").to_string();
    let token = format!("{ns}-{name}-{uid}");
    // First reconcile: the token and the spec snapshot.
    clusters
        .patch_status(
            name,
            &PatchParams::default(),
            &merge(json!({"status": {
                "clusterToken": token,
                "observed": {"replicas": replicas, "version": VERSION, "storage": storage},
                "progressDeadline": "2036-01-01T00:00:00Z",
                "conditions": [{
                    "type": "Progressing", "status": "True", "reason": "InitialSnapshot",
                    "message": "snapshotted initial spec into status.observed",
                    "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z",
                }],
            }})),
        )
        .await
        .expect("the cluster status");
    for headless in [true, false] {
        services
            .create(&pp, &reference_service(&created, headless))
            .await
            .expect("a Service");
    }

    let mut names: Vec<String> = Vec::new();
    for i in 0..replicas {
        let seed = i == 0;
        let draft: EtcdMember = serde_json::from_value(json!({
            "apiVersion": GROUP_VERSION, "kind": "EtcdMember",
            "metadata": {
                "generateName": format!("{name}-"), "namespace": ns,
                "labels": cluster_labels(name),
                "ownerReferences": controller_ref("EtcdCluster", name, &uid),
            },
            "spec": {
                "clusterName": name, "version": VERSION, "storage": storage,
                "bootstrap": seed, "clusterToken": token, "initialCluster": "",
            },
        }))
        .unwrap();
        let member = etcd_members
            .create(&pp, &draft)
            .await
            .expect("an EtcdMember");
        let m = member.metadata.name.clone().unwrap();
        // The member controller's first pass: its finalizer.
        etcd_members
            .patch(
                &m,
                &PatchParams::default(),
                &merge(json!({"metadata": {"finalizers": ["etcd-operator.cozystack.io/member-cleanup"]}})),
            )
            .await
            .unwrap();
        let peer = peer_url(&m, name, ns);
        let initial = if seed {
            etcd_members
                .patch_status(
                    &m,
                    &PatchParams::default(),
                    &merge(json!({"status": {"isVoter": true}})),
                )
                .await
                .unwrap();
            format!("{m}={peer}")
        } else {
            let endpoint = client_url(&names[0], name, ns);
            // etcd refuses a MemberAdd for a while after the last change ("unhealthy
            // cluster"); the reference retries on its next pass, so does this.
            eventually(&format!("MemberAddAsLearner of {m}"), LIMIT, || async {
                if listed(&member_list(cluster, &endpoint)?, &peer).is_some() {
                    return Ok(());
                }
                cluster
                    .etcdctl(
                        &endpoint,
                        &[
                            "member",
                            "add",
                            &m,
                            "--learner",
                            &format!("--peer-urls={peer}"),
                        ],
                    )
                    .map(|_| ())
            })
            .await;
            initial_cluster_from(&member_list(cluster, &endpoint).unwrap())
        };
        let member = etcd_members
            .patch(
                &m,
                &PatchParams::default(),
                &merge(json!({
                    "metadata": {"labels": member_labels(name, &m)},
                    "spec": {"initialCluster": initial},
                })),
            )
            .await
            .unwrap();
        pvcs.create(&pp, &reference_pvc(&member, &size))
            .await
            .expect("a PVC");
        let state = if seed { "new" } else { "existing" };
        let pod = pods
            .create(&pp, &reference_pod(&member, state, seed))
            .await
            .expect("a Pod");
        etcd_members
            .patch_status(
                &m,
                &PatchParams::default(),
                &merge(json!({"status": {
                    "podName": m, "podUID": pod.metadata.uid, "pvcName": format!("data-{m}"),
                    "replicas": 1,
                    "selector": format!("{LABEL_CLUSTER}={name},app.kubernetes.io/component={m}"),
                    "conditions": [ready_condition("False", "PodNotReady", "pod phase: Pending", 1)],
                }})),
            )
            .await
            .unwrap();
        // etcd lists it as started; a learner is promoted once caught up.
        let endpoint = client_url(names.first().unwrap_or(&m), name, ns);
        let id = eventually(&format!("{m} to start in etcd"), LIMIT, || async {
            let list = member_list(cluster, &endpoint)?;
            let entry = listed(&list, &peer).ok_or("not listed")?;
            if entry["name"].as_str().unwrap_or_default().is_empty() {
                return Err("not started".to_string());
            }
            if entry["isLearner"].as_bool() == Some(true) {
                let hex = format!("{:x}", entry["ID"].as_u64().unwrap());
                cluster.etcdctl(&endpoint, &["member", "promote", &hex])?;
                return Err("promoted just now".to_string());
            }
            Ok(entry["ID"].as_u64().unwrap())
        })
        .await;
        eventually(&format!("{m}'s Pod to be Ready"), LIMIT, || async {
            let pod = pods.get(&m).await.map_err(|e| e.to_string())?;
            pod_ready(&pod)
                .then_some(())
                .ok_or_else(|| "not Ready".to_string())
        })
        .await;
        // syncIsVoter and the member controller's updateStatus: the role label, the ID.
        pods.patch(
            &m,
            &PatchParams::default(),
            &merge(json!({"metadata": {"labels": {LABEL_ROLE: "voter"}}})),
        )
        .await
        .unwrap();
        etcd_members
            .patch_status(
                &m,
                &PatchParams::default(),
                &merge(json!({"status": {
                    "memberID": format!("{id:016x}"), "isVoter": true, "version": VERSION,
                    "conditions": [
                        ready_condition("True", "PodReady", "etcd member is ready", 1),
                        {
                            "type": "VersionDrifted", "status": "False", "reason": "VersionMatched",
                            "message": format!("running etcd version \"{VERSION}\" matches intended spec.version"),
                            "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z",
                        },
                    ],
                }})),
            )
            .await
            .unwrap();
        if seed {
            let header = cluster
                .etcdctl(&endpoint, &["endpoint", "status", "-w", "json"])
                .unwrap();
            let header: Value = serde_json::from_str(&header).unwrap();
            let cluster_id = header[0]["Status"]["header"]["cluster_id"]
                .as_u64()
                .unwrap();
            clusters
                .patch_status(
                    name,
                    &PatchParams::default(),
                    &merge(json!({"status": {"clusterID": format!("{cluster_id:016x}")}})),
                )
                .await
                .unwrap();
        }
        names.push(m);
    }
    let quorum = replicas / 2 + 1;
    pdbs.create(
        &pp,
        &serde_json::from_value(json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {
                "name": name, "namespace": ns, "labels": cluster_labels(name),
                "ownerReferences": controller_ref("EtcdCluster", name, &uid),
            },
            "spec": {
                "minAvailable": quorum,
                "selector": {"matchLabels": {LABEL_CLUSTER: name, LABEL_ROLE: "voter"}},
            },
        }))
        .unwrap(),
    )
    .await
    .expect("the PDB");
    clusters
        .patch_status(
            name,
            &PatchParams::default(),
            &merge(json!({"status": {
                "readyMembers": replicas,
                "selector": format!("{LABEL_CLUSTER}={name}"),
                "conditions": [
                    {"type": "Available", "status": "True", "reason": "QuorumHealthy", "message": "All members are ready", "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"},
                    {"type": "Degraded", "status": "False", "reason": "QuorumHealthy", "message": "", "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"},
                    {"type": "Progressing", "status": "False", "reason": "Reconciled", "message": "", "observedGeneration": 1, "lastTransitionTime": "2026-01-01T00:00:00Z"},
                ],
            }})),
        )
        .await
        .unwrap();
    names
}

/// What must not change through the takeover: each Pod's UID and its etcd container's
/// restart count, by member.
async fn pod_identities(
    cluster: &Cluster,
    ns: &str,
    names: &[String],
) -> BTreeMap<String, (String, i32)> {
    let pods: Api<Pod> = Api::namespaced(cluster.client(), ns);
    let mut out = BTreeMap::new();
    for name in names {
        let pod = pods.get(name).await.expect("the member's Pod");
        let restarts = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.first())
            .map(|c| c.restart_count)
            .unwrap_or_default();
        out.insert(name.clone(), (pod.metadata.uid.clone().unwrap(), restarts));
    }
    out
}

/// etcd's member IDs by name.
fn etcd_ids(cluster: &Cluster, ns: &str, name: &str) -> BTreeMap<String, u64> {
    let list = member_list(cluster, &support::cluster::client_endpoint(ns, name)).unwrap();
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

/// The members our operator has taken over: our finalizer on the cluster, every member in our
/// phase `Ready`, its ID recorded and equal to etcd's.
async fn adopted(
    cluster: &Cluster,
    ns: &str,
    name: &str,
    ids: &BTreeMap<String, u64>,
) -> Result<(), String> {
    let client = cluster.client();
    let ec = get_cluster(&client, ns, name).await;
    let finalized = ec
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == "etcd-operator.cozystack.io/cluster-cleanup");
    if !finalized {
        return Err("no cluster-cleanup finalizer yet".into());
    }
    for m in members(&client, ns, name).await {
        let n = m.metadata.name.clone().unwrap_or_default();
        let status = m.status.clone().unwrap_or_default();
        let phase = status.phase.map(|p| p.to_string());
        if phase.as_deref() != Some("Ready") {
            return Err(format!("{n} is in phase {phase:?}"));
        }
        let recorded = status
            .member_id
            .as_deref()
            .and_then(|h| u64::from_str_radix(h, 16).ok());
        if recorded != ids.get(&n).copied() {
            return Err(format!(
                "{n} records {recorded:?}, etcd says {:?}",
                ids.get(&n)
            ));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_adopts_reference_cluster_then_scales_and_heals() {
    let cluster = start_healing_cluster(3).await;
    let client = cluster.client();
    create_namespace(&client, NS).await;
    let names = reference_cluster(&cluster, NS, NAME, 3).await;
    cluster.put(NS, NAME, "before-takeover", "v");
    let ids = etcd_ids(&cluster, NS, NAME);
    assert_eq!(ids.len(), 3, "{ids:?}");
    let pods_before = pod_identities(&cluster, NS, &names).await;

    let workload = Workload::start(cluster.network.clone(), NS, NAME, "adopt");
    let mut deployment = OperatorDeployment::repairing();
    deployment.failpoints = true;
    cluster.deploy_operator_with(&deployment).await;
    eventually("the reference cluster to be adopted", LIMIT, || async {
        adopted(&cluster, NS, NAME, &ids).await
    })
    .await;
    cluster.wait_converged(NS, NAME, 3, LIMIT).await;
    // Nothing restarted, nothing was replaced.
    assert_eq!(pod_identities(&cluster, NS, &names).await, pods_before);
    assert_eq!(
        etcd_ids(&cluster, NS, NAME),
        ids,
        "the same members and IDs"
    );
    assert_eq!(
        cluster.get(NS, NAME, "before-takeover").unwrap().as_deref(),
        Some("v")
    );
    let events = cluster.events(NS).await;
    assert!(
        events.iter().any(|(reason, _)| reason == "Adopted"),
        "an Adopted Event: {events:?}"
    );

    // Everything else works: scale out and in, and a lost Pod comes back on its data.
    cluster.scale(NS, NAME, 5);
    cluster.wait_converged(NS, NAME, 5, LIMIT).await;
    cluster.scale(NS, NAME, 3);
    cluster.wait_converged(NS, NAME, 3, LIMIT).await;
    let left: Vec<String> = members(&client, NS, NAME)
        .await
        .iter()
        .map(|m| m.metadata.name.clone().unwrap())
        .collect();
    assert!(
        left.contains(&names[0]),
        "scale-in removes the newest members first, so the reference's seed stays: {left:?}"
    );
    let seed_id = ids[&names[0]];
    let old_uid = pods_before[&names[0]].0.clone();
    cluster.delete_member_pod(NS, &names[0]).await;
    eventually("the seed's Pod to come back", LIMIT, || async {
        let pod = cluster.member_pod(NS, &names[0]).await.ok_or("no Pod")?;
        (pod.metadata.uid.as_deref() != Some(old_uid.as_str()) && pod_ready(&pod))
            .then_some(())
            .ok_or_else(|| "not back yet".to_string())
    })
    .await;
    cluster.wait_converged(NS, NAME, 3, LIMIT).await;
    assert_eq!(
        etcd_ids(&cluster, NS, NAME).get(&names[0]),
        Some(&seed_id),
        "the seed keeps its member ID"
    );
    workload.stop().await.assert_no_loss();

    // With the operator stopped again: one cluster whose member records another member ID than
    // etcd has at its peer URL (not adoptable), and one the operator adopts while crashing
    // right after the adoption's status write.
    stop_operator(&cluster).await;
    for ns in [BAD_NS, CRASH_NS] {
        create_namespace(&client, ns).await;
    }
    let bad = reference_cluster(&cluster, BAD_NS, NAME, 1).await;
    let crash = reference_cluster(&cluster, CRASH_NS, NAME, 1).await;
    let crash_ids = etcd_ids(&cluster, CRASH_NS, NAME);
    let bad_members: Api<EtcdMember> = Api::namespaced(client.clone(), BAD_NS);
    let wrong = bad_members
        .patch_status(
            &bad[0],
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"memberID": "00000000000000aa"}})),
        )
        .await
        .unwrap();
    let bad_pods = pod_identities(&cluster, BAD_NS, &bad).await;
    let crash_pods = pod_identities(&cluster, CRASH_NS, &crash).await;
    cluster.arm_failpoint("after_member_adopt");
    cluster.scale_operator(1).await;
    eventually("the second cluster to be adopted", LIMIT, || async {
        adopted(&cluster, CRASH_NS, NAME, &crash_ids).await
    })
    .await;
    assert!(
        cluster.armed_failpoints().is_empty(),
        "the crash point fired: {:?}",
        cluster.armed_failpoints()
    );
    // The adoption's status write lands before the process exits: the restart shows after.
    eventually(
        "the operator to die at after_member_adopt and come back",
        LIMIT,
        || async {
            let restarts = cluster.operator_restarts().await;
            (restarts >= 1)
                .then_some(())
                .ok_or_else(|| format!("{restarts} restarts"))
        },
    )
    .await;
    cluster.wait_operator_ready(1).await;
    assert_eq!(pod_identities(&cluster, CRASH_NS, &crash).await, crash_pods);

    let message = eventually("the refusal to be reported", LIMIT, || async {
        let ec = get_cluster(&client, BAD_NS, NAME).await;
        let progressing = ec
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Progressing")
            .ok_or("no Progressing condition")?;
        (progressing.status == "False" && progressing.reason == "NotAdoptable")
            .then_some(progressing.message.clone())
            .ok_or_else(|| format!("{progressing:?}"))
    })
    .await;
    assert!(
        message.contains(&bad[0]) && message.contains("00000000000000aa"),
        "{message}"
    );
    // The Event follows the status write that changed the condition.
    eventually("a Warning Event naming the member", LIMIT, || async {
        let events = cluster.events(BAD_NS).await;
        events
            .iter()
            .any(|(reason, m)| reason == "NotAdoptable" && m.contains(&bad[0]))
            .then_some(())
            .ok_or_else(|| format!("{events:?}"))
    })
    .await;
    // Left alone: the member is not written, its Pod not touched.
    let now = bad_members.get(&bad[0]).await.unwrap();
    assert_eq!(
        now.metadata.resource_version, wrong.metadata.resource_version,
        "the EtcdMember is not written"
    );
    assert_eq!(pod_identities(&cluster, BAD_NS, &bad).await, bad_pods);
}

const BAD_NS: &str = "adopt-bad";
const CRASH_NS: &str = "adopt-crash";

/// Scales the operator's Deployment to zero and waits until none of its Pods is left.
async fn stop_operator(cluster: &Cluster) {
    cluster.scale_operator(0).await;
    let pods: Api<Pod> = Api::namespaced(cluster.client(), OPERATOR_NAMESPACE);
    eventually("the operator to stop", LIMIT, || async {
        let left = pods
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .into_iter()
            .filter(|p| {
                p.metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("etcd-operator"))
            })
            .count();
        (left == 0)
            .then_some(())
            .ok_or_else(|| format!("{left} operator Pods left"))
    })
    .await;
}
