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
//! changes, no acknowledged write is lost, and afterwards scaling and healing work. The same for
//! a second cluster built beside it with the reference's mutual TLS on both ports (its Pods'
//! `/etc/etcd/tls/{client,peer}` mounts and flags, `spec.tls` on the cluster and each member)
//! and authentication on (root from `spec.auth`'s Secret, `status.authEnabled`), taken over
//! under a TLS client workload and then scaled and healed over TLS.
//! An object that cannot be adopted safely is reported and left alone.

use etcd_operator_e2e_support as support;

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_operator_api::{EtcdCluster, EtcdMember};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use support::certs::{etcdctl_tls, make_ca, make_leaf, member_sans, tls_files};
use support::cluster::OPERATOR_NAMESPACE;
use support::cluster::{Cluster, pod_ready};
use support::healing::{OperatorDeployment, start_healing_cluster};
use support::workload::{Secure, Workload};
use support::{
    condition, create_namespace, create_root_secret, eventually, get_cluster,
    kubectl_retrying_blocking, members,
};

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

/// How the fixture's cluster is secured: plaintext, or (`dir`: the certificates made with
/// openssl) the reference's mutual TLS on both ports with authentication on, its Secrets
/// `etcd-server`, `etcd-peer`, `etcd-operator-client` and `etcd-root`.
#[derive(Default)]
struct Access {
    dir: Option<tempfile::TempDir>,
}

const ROOT_PASSWORD: &str = "reference-root-password";

impl Access {
    /// Certificates and Secrets for a TLS and auth cluster `etcd` in `ns`.
    fn tls(cluster: &Cluster, ns: &str) -> Access {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        make_ca(d, "ca");
        let sans = member_sans(ns);
        make_leaf(
            d,
            "ca",
            "server",
            "etcd",
            Some(&sans),
            "serverAuth,clientAuth",
        );
        make_leaf(
            d,
            "ca",
            "peer",
            "etcd-peer",
            Some(&sans),
            "serverAuth,clientAuth",
        );
        // The operator's and etcdctl's certificate: its CN authenticates as etcd's root.
        make_leaf(d, "ca", "client", "root", None, "clientAuth");
        for (secret, leaf) in [
            ("etcd-server", "server"),
            ("etcd-peer", "peer"),
            ("etcd-operator-client", "client"),
        ] {
            let mut args = vec![
                "-n".to_string(),
                ns.to_string(),
                "create".to_string(),
                "secret".to_string(),
                "generic".to_string(),
                secret.to_string(),
                "--type=kubernetes.io/tls".to_string(),
            ];
            for (key, path) in tls_files(d, leaf, "ca") {
                args.push(format!("--from-file={key}={}", path.display()));
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            tokio::task::block_in_place(|| kubectl_retrying_blocking(cluster, &args));
        }
        tokio::task::block_in_place(|| create_root_secret(cluster, ns, "etcd-root", ROOT_PASSWORD));
        Access { dir: Some(dir) }
    }

    fn scheme(&self) -> &'static str {
        if self.dir.is_some() { "https" } else { "http" }
    }

    /// etcdctl against `endpoint`, over TLS with the client certificate when secured.
    fn ctl(&self, cluster: &Cluster, endpoint: &str, args: &[&str]) -> Result<String, String> {
        match &self.dir {
            Some(dir) => tokio::task::block_in_place(|| {
                etcdctl_tls(
                    cluster,
                    endpoint,
                    dir.path(),
                    Some("ca"),
                    Some("client"),
                    args,
                )
            }),
            None => tokio::task::block_in_place(|| cluster.etcdctl(endpoint, args)),
        }
    }

    /// The client workload's TLS material: the CA and the client certificate.
    fn secure(&self) -> Option<Secure> {
        let d = self.dir.as_ref()?.path();
        Some(Secure {
            ca_pem: std::fs::read(d.join("ca.crt")).unwrap(),
            identity: Some((
                std::fs::read(d.join("client.crt")).unwrap(),
                std::fs::read(d.join("client.key")).unwrap(),
            )),
            credentials: None,
        })
    }

    fn service(&self, ns: &str, name: &str) -> String {
        format!("{}://{name}-client.{ns}.svc:2379", self.scheme())
    }
}

fn peer_url(scheme: &str, member: &str, cluster: &str, ns: &str) -> String {
    format!("{scheme}://{member}.{cluster}.{ns}.svc:2380")
}

fn client_url(scheme: &str, member: &str, cluster: &str, ns: &str) -> String {
    format!("{scheme}://{member}.{cluster}.{ns}.svc:2379")
}

/// The reference's `buildPod` for a PVC-backed member, plaintext or with mutual TLS on both
/// ports (its `/etc/etcd/tls/client` and `/etc/etcd/tls/peer` mounts).
fn reference_pod(member: &EtcdMember, state: &str, voter: bool, scheme: &str) -> Pod {
    let name = member.metadata.name.clone().unwrap();
    let ns = member.metadata.namespace.clone().unwrap();
    let cluster = &member.spec.cluster_name;
    let mut labels = member_labels(cluster, &name);
    if voter {
        labels[LABEL_ROLE] = json!("voter");
    }
    let mut command = vec![
        "etcd".to_string(),
        format!("--name={name}"),
        "--data-dir=/var/lib/etcd".to_string(),
        format!("--listen-peer-urls={scheme}://0.0.0.0:2380"),
        format!("--listen-client-urls={scheme}://0.0.0.0:2379"),
        format!(
            "--advertise-client-urls={}",
            client_url(scheme, &name, cluster, &ns)
        ),
        format!(
            "--initial-advertise-peer-urls={}",
            peer_url(scheme, &name, cluster, &ns)
        ),
        format!("--initial-cluster={}", member.spec.initial_cluster),
        format!("--initial-cluster-token={}", member.spec.cluster_token),
        format!("--initial-cluster-state={state}"),
        "--listen-metrics-urls=http://0.0.0.0:2381".to_string(),
    ];
    let mut mounts = vec![json!({"name": "data", "mountPath": "/var/lib/etcd"})];
    let mut volumes = vec![
        json!({"name": "data", "persistentVolumeClaim": {"claimName": format!("data-{name}")}}),
    ];
    if scheme == "https" {
        let tls = &member.spec.tls.as_ref().expect("a TLS member's spec.tls");
        command.extend(
            [
                "--cert-file=/etc/etcd/tls/client/tls.crt",
                "--key-file=/etc/etcd/tls/client/tls.key",
                "--client-cert-auth=true",
                "--trusted-ca-file=/etc/etcd/tls/client/ca.crt",
                "--peer-cert-file=/etc/etcd/tls/peer/tls.crt",
                "--peer-key-file=/etc/etcd/tls/peer/tls.key",
                "--peer-trusted-ca-file=/etc/etcd/tls/peer/ca.crt",
                "--peer-client-cert-auth=true",
            ]
            .map(str::to_string),
        );
        for (volume, secret) in [
            ("tls-client", tls.client_server_secret_ref.as_ref()),
            ("tls-peer", tls.peer_secret_ref.as_ref()),
        ] {
            let secret = &secret.expect("the member's TLS Secret").name;
            let at = volume.trim_start_matches("tls-");
            volumes.push(json!({"name": volume, "secret": {"secretName": secret}}));
            mounts.push(json!({"name": volume, "mountPath": format!("/etc/etcd/tls/{at}"), "readOnly": true}));
        }
    }
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
                "volumeMounts": mounts,
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
            "volumes": volumes,
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
fn member_list(cluster: &Cluster, access: &Access, endpoint: &str) -> Result<Value, String> {
    let out = access.ctl(cluster, endpoint, &["member", "list", "-w", "json"])?;
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
    access: &Access,
) -> Vec<String> {
    let scheme = access.scheme();
    let secured = access.dir.is_some();
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
    let mut manifest = manifest;
    if secured {
        // The reference's spec.tls (user Secrets, mutual TLS for the operator) and spec.auth.
        let spec = json!({
            "replicas": replicas, "version": VERSION,
            "tls": {
                "client": {
                    "serverSecretRef": {"name": "etcd-server"},
                    "operatorClientSecretRef": {"name": "etcd-operator-client"},
                },
                "peer": {"secretRef": {"name": "etcd-peer"}},
            },
            "auth": {"enabled": true, "rootCredentialsSecretRef": {"name": "etcd-root"}},
        });
        manifest.spec = serde_json::from_value(spec).unwrap();
    }
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
        let mut draft = draft;
        if secured {
            // The reference's deriveMemberTLS: the Secrets the Pod mounts, and mutual TLS.
            draft.spec.tls = serde_json::from_value(json!({
                "clientServerSecretRef": {"name": "etcd-server"},
                "clientMTLS": true,
                "peerSecretRef": {"name": "etcd-peer"},
            }))
            .unwrap();
        }
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
        let peer = peer_url(scheme, &m, name, ns);
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
            let endpoint = client_url(scheme, &names[0], name, ns);
            // etcd refuses a MemberAdd for a while after the last change ("unhealthy
            // cluster"); the reference retries on its next pass, so does this.
            eventually(&format!("MemberAddAsLearner of {m}"), LIMIT, || async {
                if listed(&member_list(cluster, access, &endpoint)?, &peer).is_some() {
                    return Ok(());
                }
                access
                    .ctl(
                        cluster,
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
            initial_cluster_from(&member_list(cluster, access, &endpoint).unwrap())
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
            .create(&pp, &reference_pod(&member, state, seed, scheme))
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
        let endpoint = client_url(scheme, names.first().unwrap_or(&m), name, ns);
        let id = eventually(&format!("{m} to start in etcd"), LIMIT, || async {
            let list = member_list(cluster, access, &endpoint)?;
            let entry = listed(&list, &peer).ok_or("not listed")?;
            if entry["name"].as_str().unwrap_or_default().is_empty() {
                return Err("not started".to_string());
            }
            if entry["isLearner"].as_bool() == Some(true) {
                let hex = format!("{:x}", entry["ID"].as_u64().unwrap());
                access.ctl(cluster, &endpoint, &["member", "promote", &hex])?;
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
            let header = access
                .ctl(cluster, &endpoint, &["endpoint", "status", "-w", "json"])
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
    if secured {
        // The reference's reconcileAuth: UserAdd root (the Secret's password), UserGrantRole
        // root, AuthEnable, then status.authEnabled latched.
        let endpoint = client_url(scheme, &names[0], name, ns);
        let password = format!("--new-user-password={ROOT_PASSWORD}");
        for args in [
            vec!["user", "add", "root", password.as_str()],
            vec!["user", "grant-role", "root", "root"],
            vec!["auth", "enable"],
        ] {
            access
                .ctl(cluster, &endpoint, &args)
                .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        }
        clusters
            .patch_status(
                name,
                &PatchParams::default(),
                &merge(json!({"status": {"authEnabled": true}})),
            )
            .await
            .unwrap();
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
fn etcd_ids(cluster: &Cluster, access: &Access, ns: &str, name: &str) -> BTreeMap<String, u64> {
    let list = member_list(cluster, access, &access.service(ns, name)).unwrap();
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
    let plain = Access::default();
    create_namespace(&client, NS).await;
    create_namespace(&client, TLS_NS).await;
    let secured = Access::tls(&cluster, TLS_NS);
    // The plaintext cluster and one with mutual TLS on both ports and authentication on,
    // built side by side.
    let (names, tls_names) = tokio::join!(
        reference_cluster(&cluster, NS, NAME, 3, &plain),
        reference_cluster(&cluster, TLS_NS, NAME, 3, &secured)
    );
    let tls_before = TlsBefore::record(&cluster, &secured, &tls_names).await;
    cluster.put(NS, NAME, "before-takeover", "v");
    let ids = etcd_ids(&cluster, &plain, NS, NAME);
    assert_eq!(ids.len(), 3, "{ids:?}");
    let pods_before = pod_identities(&cluster, NS, &names).await;

    let workload = Workload::start(cluster.network.clone(), NS, NAME, "adopt");
    let tls_workload = Workload::start_with(
        cluster.network.clone(),
        TLS_NS,
        NAME,
        "adopt-tls",
        secured.secure(),
    );
    let mut deployment = OperatorDeployment::repairing();
    deployment.failpoints = true;
    cluster.deploy_operator_with(&deployment).await;
    let tls_takeover = tls_takeover(&cluster, &secured, &tls_names, tls_before, tls_workload);
    let plain_takeover = async {
        eventually("the reference cluster to be adopted", LIMIT, || async {
            adopted(&cluster, NS, NAME, &ids).await
        })
        .await;
        cluster.wait_converged(NS, NAME, 3, LIMIT).await;
        // Nothing restarted, nothing was replaced.
        assert_eq!(pod_identities(&cluster, NS, &names).await, pods_before);
        assert_eq!(
            etcd_ids(&cluster, &plain, NS, NAME),
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
            etcd_ids(&cluster, &plain, NS, NAME).get(&names[0]),
            Some(&seed_id),
            "the seed keeps its member ID"
        );
        workload.stop().await.assert_no_loss();
    };
    tokio::join!(plain_takeover, tls_takeover);

    // With the operator stopped again: one cluster whose member records another member ID than
    // etcd has at its peer URL (not adoptable), and one the operator adopts while crashing
    // right after the adoption's status write.
    stop_operator(&cluster).await;
    for ns in [BAD_NS, CRASH_NS] {
        create_namespace(&client, ns).await;
    }
    let bad = reference_cluster(&cluster, BAD_NS, NAME, 1, &plain).await;
    let crash = reference_cluster(&cluster, CRASH_NS, NAME, 1, &plain).await;
    let crash_ids = etcd_ids(&cluster, &plain, CRASH_NS, NAME);
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
const TLS_NS: &str = "adopt-tls";

/// What the TLS cluster was before the takeover: Pod UIDs and restart counts, etcd's member
/// IDs, a key written.
struct TlsBefore {
    pods: BTreeMap<String, (String, i32)>,
    ids: BTreeMap<String, u64>,
}

impl TlsBefore {
    async fn record(cluster: &Cluster, access: &Access, names: &[String]) -> TlsBefore {
        access
            .ctl(
                cluster,
                &access.service(TLS_NS, NAME),
                &["put", "before-takeover", "tls"],
            )
            .expect("a write over TLS, authenticated by the client certificate");
        let ids = etcd_ids(cluster, access, TLS_NS, NAME);
        assert_eq!(ids.len(), 3, "{ids:?}");
        TlsBefore {
            pods: pod_identities(cluster, TLS_NS, names).await,
            ids,
        }
    }
}

/// Converged on `n` Ready members, asked over TLS: the EtcdCluster Available with `n` ready
/// and nothing in progress, and etcd listing `n` started voters on https peer URLs whose IDs
/// the EtcdMembers record.
async fn tls_converged(cluster: &Cluster, access: &Access, n: usize) {
    let client = cluster.client();
    eventually(&format!("{TLS_NS} converged on {n}"), LIMIT, || async {
        let c = get_cluster(&client, TLS_NS, NAME).await;
        let ready = c.status.as_ref().and_then(|s| s.ready_members);
        if ready != Some(n as i32)
            || condition(&c, "Available").as_deref() != Some("True")
            || condition(&c, "Progressing").as_deref() != Some("False")
        {
            return Err(format!(
                "ready {ready:?}, conditions {:?}",
                c.status.and_then(|s| s.conditions)
            ));
        }
        let list = member_list(cluster, access, &access.service(TLS_NS, NAME))?;
        let recorded: Vec<(String, Option<u64>)> = members(&client, TLS_NS, NAME)
            .await
            .iter()
            .map(|m| {
                let id = m.status.as_ref().and_then(|s| s.member_id.as_deref());
                (
                    m.metadata.name.clone().unwrap_or_default(),
                    id.and_then(|h| u64::from_str_radix(h, 16).ok()),
                )
            })
            .collect();
        let listed = list["members"].as_array().cloned().unwrap_or_default();
        let agree = listed.len() == n
            && recorded.len() == n
            && listed.iter().all(|m| {
                m["isLearner"].as_bool() != Some(true)
                    && m["peerURLs"][0]
                        .as_str()
                        .is_some_and(|u| u.starts_with("https://"))
                    && recorded.contains(&(
                        m["name"].as_str().unwrap_or_default().to_string(),
                        m["ID"].as_u64(),
                    ))
            });
        agree
            .then_some(())
            .ok_or_else(|| format!("etcd lists {listed:?}, EtcdMembers {recorded:?}"))
    })
    .await;
}

/// The TLS and auth cluster taken over: nothing restarted, the same member IDs, the data
/// kept; then 3 -> 5 -> 3 and a lost Pod healed, all over mutual TLS with authentication on,
/// and no acknowledged write of the TLS workload lost.
async fn tls_takeover(
    cluster: &Cluster,
    access: &Access,
    names: &[String],
    before: TlsBefore,
    workload: Workload,
) {
    eventually("the TLS reference cluster to be adopted", LIMIT, || async {
        adopted(cluster, TLS_NS, NAME, &before.ids).await
    })
    .await;
    tls_converged(cluster, access, 3).await;
    assert_eq!(pod_identities(cluster, TLS_NS, names).await, before.pods);
    assert_eq!(etcd_ids(cluster, access, TLS_NS, NAME), before.ids);
    let c = get_cluster(&cluster.client(), TLS_NS, NAME).await;
    assert_eq!(
        c.status.as_ref().and_then(|s| s.auth_enabled),
        Some(true),
        "authentication stays on"
    );
    let got = access
        .ctl(
            cluster,
            &access.service(TLS_NS, NAME),
            &["get", "before-takeover", "--print-value-only"],
        )
        .unwrap();
    assert_eq!(got.trim(), "tls");
    // Plaintext and a wrong password are refused as before.
    assert!(
        cluster
            .etcdctl(
                &format!("http://{NAME}-client.{TLS_NS}.svc:2379"),
                &["get", "x"]
            )
            .is_err(),
        "plaintext refused"
    );
    cluster.scale(TLS_NS, NAME, 5);
    tls_converged(cluster, access, 5).await;
    cluster.scale(TLS_NS, NAME, 3);
    tls_converged(cluster, access, 3).await;
    let seed = &names[0];
    let old_uid = before.pods[seed].0.clone();
    cluster.delete_member_pod(TLS_NS, seed).await;
    eventually("the TLS seed's Pod to come back", LIMIT, || async {
        let pod = cluster.member_pod(TLS_NS, seed).await.ok_or("no Pod")?;
        (pod.metadata.uid.as_deref() != Some(old_uid.as_str()) && pod_ready(&pod))
            .then_some(())
            .ok_or_else(|| "not back yet".to_string())
    })
    .await;
    tls_converged(cluster, access, 3).await;
    assert_eq!(
        etcd_ids(cluster, access, TLS_NS, NAME).get(seed),
        before.ids.get(seed),
        "the TLS seed keeps its member ID"
    );
    let report = workload.stop().await;
    println!("{TLS_NS}: {}", report.summary());
    report.assert_no_loss();
}
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
