//! The reconcile loop end to end against a sandbox API server without nodes: the test plays
//! the node (it runs etcd for the Pods the operator creates, see `support::manual_node`), so
//! the loop is exercised on real etcd and a real API server: bootstrap, status, Events,
//! pause, the /scale subresource with scale to zero and back on the same data and IDs, and
//! deletion that leaves nothing behind. The operator runs as its service account under the
//! RBAC of `deploy/rbac/`, so a missing permission fails these tests.

use etcd_operator_e2e_support as support;

use std::time::Duration;

use etcd_operator::reconcile::CLUSTER_FINALIZER;
use etcd_operator_api::{EtcdCluster, MemberPhase};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use support::events::list_events;
use support::manual_node::ManualNode;
use support::status::available;
use support::{
    InProcessOperator, condition, create_namespace, eventually, get_cluster, get_key, kubectl,
    members, membership_agrees, operator_identity, put_key, start_sandbox,
};

const NS: &str = "loop";
const LIMIT: Duration = Duration::from_secs(60);

/// What every test here starts from: a sandbox without nodes, this test as its node, the
/// operator in process as its service account, and the EtcdCluster `etcd` of `replicas`
/// members (`extra` appended to its spec) applied with kubectl.
struct Setup {
    sandbox: support::TestSandbox,
    client: Client,
    node: std::sync::Arc<ManualNode>,
    node_task: tokio::task::JoinHandle<()>,
    operator: InProcessOperator,
}

impl Setup {
    async fn start(replicas: i32, extra: &str) -> Setup {
        let sandbox = start_sandbox(0).await;
        let client = sandbox.client();
        create_namespace(&client, NS).await;
        let node = ManualNode::new(client.clone(), NS);
        let node_task = tokio::spawn(node.clone().run());
        let identity = operator_identity(&sandbox).await;
        let operator = InProcessOperator::start(&identity, NS, node.url_map());
        let (ok, _, stderr) = support::kubectl_with_stdin(
            &sandbox,
            &["apply", "-f", "-"],
            Some(&support::cluster_yaml("etcd", NS, replicas, extra)),
        );
        assert!(ok, "kubectl apply: {stderr}");
        Setup {
            sandbox,
            client,
            node,
            node_task,
            operator,
        }
    }
}

async fn get_key_from(node: &ManualNode, key: &str) -> Result<Option<String>, String> {
    get_key(&node.running_client_urls(), key).await
}

async fn wait_available(client: &Client, node: &ManualNode, ready: i32) -> EtcdCluster {
    eventually("the cluster to be Available", LIMIT, || async {
        let cluster = get_cluster(client, NS, "etcd").await;
        available(&cluster, ready)
            .map(|()| cluster)
            .map_err(|why| format!("{why}\netcd logs:\n{}", node.logs()))
    })
    .await
}

async fn count<K>(client: &Client) -> usize
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    Api::<K>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .expect("listing")
        .items
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_manual_node_single_member_lifecycle() {
    // No nodes: nothing but this test runs the Pods. Bootstrap.
    let Setup {
        sandbox,
        client,
        node,
        node_task,
        operator,
    } = Setup::start(1, "").await;
    let cluster = wait_available(&client, &node, 1).await;
    let status = cluster.status.clone().unwrap();
    let cluster_id = status
        .cluster_id
        .clone()
        .expect("the cluster ID is latched");
    assert_eq!(status.leader.as_deref(), Some("etcd-0"));
    assert!(
        cluster
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == CLUSTER_FINALIZER)
    );
    let member = &members(&client, NS, "etcd").await[0];
    let member_status = member.status.clone().unwrap();
    assert_eq!(member_status.phase, Some(MemberPhase::Ready));
    let member_id = member_status
        .member_id
        .clone()
        .expect("the member ID is recorded");
    assert_eq!(
        count::<Service>(&client).await,
        2,
        "headless and client Services"
    );
    assert_eq!(count::<PodDisruptionBudget>(&client).await, 1);
    let reasons: Vec<String> = list_events(&client, NS)
        .await
        .iter()
        .filter_map(|e| e.reason.clone())
        .collect();
    for reason in [
        "MemberCreated",
        "PodCreated",
        "ServiceCreated",
        "PodRoleLabelled",
    ] {
        assert!(
            reasons.iter().any(|r| r == reason),
            "no {reason} Event in {reasons:?}"
        );
    }
    put_key(&node.running_client_urls(), "before-pause", "1").await;

    // Pause: a deleted Pod is not recreated, and the status still tells the truth.
    let clusters: Api<EtcdCluster> = Api::namespaced(client.clone(), NS);
    clusters
        .patch(
            "etcd",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"paused": true}})),
        )
        .await
        .unwrap();
    eventually("Progressing=False/Paused", LIMIT, || async {
        let c = get_cluster(&client, NS, "etcd").await;
        let progressing = c
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|l| l.iter().find(|c| c.type_ == "Progressing").cloned());
        match progressing {
            Some(p) if p.reason == "Paused" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.delete("etcd-0", &DeleteParams::default())
        .await
        .unwrap();
    eventually("Available=False while paused and down", LIMIT, || async {
        let c = get_cluster(&client, NS, "etcd").await;
        match condition(&c, "Available").as_deref() {
            Some("False") => Ok(()),
            other => Err(format!("Available={other:?}")),
        }
    })
    .await;
    assert!(
        pods.get_opt("etcd-0").await.unwrap().is_none(),
        "paused: no Pod is recreated"
    );

    // Resume: the Pod comes back on the same data, as the same member.
    clusters
        .patch(
            "etcd",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"paused": false}})),
        )
        .await
        .unwrap();
    wait_available(&client, &node, 1).await;
    let value = eventually("the key written before the pause", LIMIT, || {
        get_key_from(&node, "before-pause")
    })
    .await;
    assert_eq!(value.as_deref(), Some("1"));

    // Scale to zero through the /scale subresource, and back.
    let (ok, _, stderr) = kubectl(
        &sandbox,
        &["-n", NS, "scale", "etcdcluster/etcd", "--replicas=0"],
    );
    assert!(ok, "kubectl scale: {stderr}");
    eventually(
        "the member to be dormant with its Pod gone",
        LIMIT,
        || async {
            let m = &members(&client, NS, "etcd").await[0];
            let pod = pods.get_opt("etcd-0").await.map_err(|e| e.to_string())?;
            if m.spec.dormant == Some(true) && pod.is_none() {
                Ok(())
            } else {
                Err(format!(
                    "dormant={:?} pod={}",
                    m.spec.dormant,
                    pod.is_some()
                ))
            }
        },
    )
    .await;
    assert_eq!(
        count::<PersistentVolumeClaim>(&client).await,
        1,
        "the data is kept"
    );
    let (ok, _, stderr) = kubectl(
        &sandbox,
        &["-n", NS, "scale", "etcdcluster/etcd", "--replicas=1"],
    );
    assert!(ok, "kubectl scale: {stderr}");
    let cluster = wait_available(&client, &node, 1).await;
    assert_eq!(
        cluster.status.unwrap().cluster_id,
        Some(cluster_id),
        "same cluster ID"
    );
    let member = &members(&client, NS, "etcd").await[0];
    assert_eq!(
        member.status.as_ref().unwrap().member_id.as_ref(),
        Some(&member_id),
        "same member ID"
    );
    let value = eventually("the key after scale 1 → 0 → 1", LIMIT, || {
        get_key_from(&node, "before-pause")
    })
    .await;
    assert_eq!(value.as_deref(), Some("1"));

    // Deletion leaves nothing behind.
    clusters
        .delete("etcd", &DeleteParams::default())
        .await
        .unwrap();
    eventually("everything the cluster owned to be gone", LIMIT, || async {
        let left = (
            clusters
                .get_opt("etcd")
                .await
                .map_err(|e| e.to_string())?
                .is_some(),
            members(&client, NS, "etcd").await.len(),
            count::<Pod>(&client).await,
            count::<PersistentVolumeClaim>(&client).await,
            count::<Service>(&client).await,
            count::<PodDisruptionBudget>(&client).await,
        );
        if left == (false, 0, 0, 0, 0, 0) {
            Ok(())
        } else {
            Err(format!(
                "(cluster, members, pods, pvcs, services, pdbs) = {left:?}"
            ))
        }
    })
    .await;
    eventually("etcd to be stopped", LIMIT, || async {
        if node.running_members().is_empty() {
            Ok(())
        } else {
            Err(format!("{:?}", node.running_members()))
        }
    })
    .await;

    assert!(
        operator
            .metrics
            .encode()
            .contains("etcd_operator_reconciles_total{result=\"ok\"}")
    );
    operator.stop().await;
    node_task.abort();
}

/// Scales `etcd` to `replicas` and waits until it is Available with that many Ready members
/// that etcd lists as voters under the same IDs; then checks every key written so far.
async fn scale_and_check(
    sandbox: &support::TestSandbox,
    node: &ManualNode,
    replicas: i32,
    written: &[String],
) {
    let client = sandbox.client();
    let (ok, _, stderr) = kubectl(
        sandbox,
        &[
            "-n",
            NS,
            "scale",
            "etcdcluster/etcd",
            &format!("--replicas={replicas}"),
        ],
    );
    assert!(ok, "kubectl scale: {stderr}");
    eventually(
        &format!("{replicas} members in etcd and as EtcdMembers"),
        LIMIT,
        || async {
            let cluster = get_cluster(&client, NS, "etcd").await;
            let status = cluster.status.clone().unwrap_or_default();
            let progressing = condition(&cluster, "Progressing");
            if status.ready_members != Some(replicas) || progressing.as_deref() != Some("False") {
                return Err(format!("status {status:?}\netcd logs:\n{}", node.logs()));
            }
            membership_agrees(
                &client,
                NS,
                "etcd",
                &node.running_client_urls(),
                replicas as usize,
            )
            .await
        },
    )
    .await;
    for key in written {
        let value = eventually(&format!("key {key}"), LIMIT, || get_key_from(node, key)).await;
        assert_eq!(
            value.as_deref(),
            Some("v"),
            "{key} after scaling to {replicas}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_manual_node_scale_out_and_in() {
    let Setup {
        sandbox,
        client: _,
        node,
        node_task,
        operator,
    } = Setup::start(3, "").await;
    let mut written = Vec::new();
    let mut steps = vec![3, 5, 3, 1, 3];
    let first = steps.remove(0);
    scale_and_check(&sandbox, &node, first, &written).await;
    for replicas in steps {
        let key = format!("before-{replicas}-{}", written.len());
        put_key(&node.running_client_urls(), &key, "v").await;
        written.push(key);
        scale_and_check(&sandbox, &node, replicas, &written).await;
    }
    assert_eq!(node.running_members().len(), 3);
    operator.stop().await;
    node_task.abort();
}

/// Member names with their etcd IDs, from the EtcdMembers.
async fn member_ids(client: &Client) -> Vec<(String, Option<String>)> {
    members(client, NS, "etcd")
        .await
        .into_iter()
        .map(|m| {
            (
                m.metadata.name.unwrap_or_default(),
                m.status.and_then(|s| s.member_id),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_manual_node_zero_and_back_keeps_cluster_and_member_ids() {
    let Setup {
        sandbox,
        client,
        node,
        node_task,
        operator,
    } = Setup::start(3, "").await;
    scale_and_check(&sandbox, &node, 3, &[]).await;
    let cluster_id = get_cluster(&client, NS, "etcd")
        .await
        .status
        .unwrap()
        .cluster_id;
    let ids = member_ids(&client).await;
    put_key(&node.running_client_urls(), "before-zero", "v").await;

    let (ok, _, stderr) = kubectl(
        &sandbox,
        &["-n", NS, "scale", "etcdcluster/etcd", "--replicas=0"],
    );
    assert!(ok, "{stderr}");
    eventually(
        "every member dormant with no Pod running",
        LIMIT,
        || async {
            let dormant = members(&client, NS, "etcd")
                .await
                .iter()
                .filter(|m| m.spec.dormant == Some(true))
                .count();
            let running = node.running_members();
            let c = get_cluster(&client, NS, "etcd").await;
            if dormant == 3
                && running.is_empty()
                && condition(&c, "Available").as_deref() == Some("False")
            {
                Ok(())
            } else {
                Err(format!(
                    "dormant={dormant} running={running:?} status={:?}",
                    c.status
                ))
            }
        },
    )
    .await;

    scale_and_check(&sandbox, &node, 3, &["before-zero".to_string()]).await;
    assert_eq!(
        get_cluster(&client, NS, "etcd")
            .await
            .status
            .unwrap()
            .cluster_id,
        cluster_id
    );
    assert_eq!(
        member_ids(&client).await,
        ids,
        "the same members, with the same IDs"
    );
    operator.stop().await;
    node_task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_manual_node_memory_member_lost_is_replaced() {
    let memory = "  storage:\n    medium: Memory\n    size: 256Mi\n";
    let Setup {
        sandbox,
        client,
        node,
        node_task,
        operator,
    } = Setup::start(3, memory).await;
    scale_and_check(&sandbox, &node, 3, &[]).await;
    assert_eq!(
        count::<PersistentVolumeClaim>(&client).await,
        0,
        "memory members have no PVC"
    );
    put_key(&node.running_client_urls(), "survives", "v").await;
    let before = member_ids(&client).await;

    // The Pod of etcd-1 goes, and its in-memory data with it.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    pods.delete("etcd-1", &DeleteParams::default())
        .await
        .unwrap();
    eventually("etcd-1 replaced under a new member ID", LIMIT, || async {
        let after = member_ids(&client).await;
        let replaced = after.len() == 3
            && after[1].1.is_some()
            && after[1].1 != before[1].1
            && after[0] == before[0]
            && after[2] == before[2];
        let c = get_cluster(&client, NS, "etcd").await;
        let ready = c.status.as_ref().and_then(|s| s.ready_members);
        if replaced && ready == Some(3) {
            membership_agrees(&client, NS, "etcd", &node.running_client_urls(), 3).await
        } else {
            Err(format!("{after:?} ready={ready:?}\n{}", node.logs()))
        }
    })
    .await;
    let value = get_key(&node.running_client_urls(), "survives")
        .await
        .unwrap();
    assert_eq!(value.as_deref(), Some("v"));
    operator.stop().await;
    node_task.abort();
}
