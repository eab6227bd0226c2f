//! A cluster's life beyond scaling, by the operator deployed from `deploy/`: a memory-backed
//! cluster whose member loses its Pod (and with it its data) is healed by replacing that
//! member; `spec.paused` stops every action while the status keeps telling the truth; deleting
//! the EtcdCluster removes everything it owned; a member and its data PVC cannot be deleted by
//! hand (the protection policy of `deploy/operator/`) unless the break-glass annotation says so,
//! and then the member's PVC is retained (handed to the EtcdCluster) and the cluster heals on a
//! new ordinal under a client workload; `whenDeleted: Retain` keeps the PVCs of a deleted cluster.

use etcd_operator_e2e_support as support;

use std::time::Duration;

use etcd_operator_api::EtcdCluster;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use support::cluster::start_cluster;
use support::workload::Workload;
use support::{
    cluster_yaml, condition, create_namespace, eventually, get_cluster, members, progressing,
};

const LIMIT: Duration = Duration::from_secs(180);

async fn count<K>(client: &Client, namespace: &str) -> usize
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    Api::<K>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .map(|l| l.items.len())
        .unwrap_or(usize::MAX)
}

/// kubectl's stdout and stderr together, whether it succeeded or not.
fn kubectl_output(cluster: &support::cluster::Cluster, args: &[&str]) -> String {
    let (_, stdout, stderr) = tokio::task::block_in_place(|| support::kubectl(cluster, args));
    format!("{stdout}{stderr}")
}

fn member_id(members: &[etcd_operator_api::EtcdMember], name: &str) -> Option<String> {
    members
        .iter()
        .find(|m| m.metadata.name.as_deref() == Some(name))
        .and_then(|m| m.status.as_ref())
        .and_then(|s| s.member_id.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_memory_cluster_replaces_a_member_that_lost_its_pod() {
    let cluster = start_cluster(3).await;
    cluster.deploy_operator(1).await;
    let client = cluster.client();
    create_namespace(&client, "mem").await;
    let memory = "  storage:\n    medium: Memory\n    size: 256Mi\n";
    cluster.apply(&cluster_yaml("etcd", "mem", 3, memory));
    cluster.wait_converged("mem", "etcd", 3, LIMIT).await;
    assert_eq!(count::<PersistentVolumeClaim>(&client, "mem").await, 0);
    cluster.put("mem", "etcd", "survives", "v");
    let before = members(&client, "mem", "etcd").await;

    let pods: Api<Pod> = Api::namespaced(client.clone(), "mem");
    pods.delete("etcd-1", &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        "etcd-1 to be replaced under a new member ID",
        LIMIT,
        || async {
            let after = members(&client, "mem", "etcd").await;
            let id = member_id(&after, "etcd-1");
            if id.is_some() && id != member_id(&before, "etcd-1") {
                Ok(())
            } else {
                Err(format!("etcd-1 is {id:?}"))
            }
        },
    )
    .await;
    cluster.wait_converged("mem", "etcd", 3, LIMIT).await;
    let after = members(&client, "mem", "etcd").await;
    for name in ["etcd-0", "etcd-2"] {
        assert_eq!(
            member_id(&after, name),
            member_id(&before, name),
            "{name} untouched"
        );
    }
    assert_eq!(
        cluster.get("mem", "etcd", "survives").unwrap().as_deref(),
        Some("v")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_pause_holds_every_action_and_deletion_leaves_nothing() {
    let cluster = start_cluster(3).await;
    cluster.deploy_operator(1).await;
    let client = cluster.client();

    // TLS sources this operator cannot serve here are said so, and nothing starts: cert-manager
    // where cert-manager is not installed, and operator-issued certificates whose CA Secret
    // name is taken by a Secret that is no CA (the operator never overwrites it).
    let unservable = [
        (
            "no-cm",
            "  tls:\n    peer:\n      certManager:\n        issuerRef:\n          name: ca\n",
            "cert-manager is not installed (the API server does not serve cert-manager.io/v1)",
        ),
        (
            "issued",
            "  tls:\n    peer:\n      operatorIssued: {}\n",
            "Secret etcd-ca (operator-issued CA) has type Opaque; it must be of type kubernetes.io/tls",
        ),
    ];
    for (namespace, tls, said) in unservable {
        create_namespace(&client, namespace).await;
        if namespace == "issued" {
            cluster.apply(&format!(
                "apiVersion: v1\nkind: Secret\nmetadata:\n  name: etcd-ca\n  namespace: {namespace}\ntype: Opaque\nstringData:\n  note: not a CA\n"
            ));
        }
        cluster.apply(&cluster_yaml("etcd", namespace, 1, tls));
        eventually(&format!("{namespace}: {said}"), LIMIT, || async {
            let (reason, message) = progressing(&client, namespace, "etcd").await;
            (reason == "InvalidSecret" && message.contains(said))
                .then_some(())
                .ok_or(format!("{reason}: {message}"))
        })
        .await;
        assert_eq!(
            count::<Pod>(&client, namespace).await,
            0,
            "{namespace}: no Pod"
        );
    }

    create_namespace(&client, "life").await;
    cluster.apply(&cluster_yaml("etcd", "life", 3, ""));
    cluster.wait_converged("life", "etcd", 3, LIMIT).await;
    cluster.put("life", "etcd", "before-pause", "v");
    let ids = cluster.etcd_members("life", "etcd").unwrap();

    // Paused: a deleted Pod stays gone and a scale is not acted on; the status says so.
    let clusters: Api<EtcdCluster> = Api::namespaced(client.clone(), "life");
    let paused = serde_json::json!({"spec": {"paused": true}});
    clusters
        .patch("etcd", &PatchParams::default(), &Patch::Merge(&paused))
        .await
        .unwrap();
    eventually("Progressing=False/Paused", LIMIT, || async {
        let (reason, message) = progressing(&client, "life", "etcd").await;
        (reason == "Paused")
            .then_some(())
            .ok_or(format!("{reason}: {message}"))
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "life");
    pods.delete("etcd-2", &DeleteParams::default())
        .await
        .unwrap();
    cluster.scale("life", "etcd", 5);
    eventually(
        "the status to report etcd-2 down while paused",
        LIMIT,
        || async {
            let c = get_cluster(&client, "life", "etcd").await;
            let status = c.status.clone().unwrap_or_default();
            if status.ready_members == Some(2)
                && condition(&c, "Degraded").as_deref() == Some("True")
            {
                Ok(())
            } else {
                Err(format!("{:?}", status.conditions))
            }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        pods.get_opt("etcd-2").await.unwrap().is_none(),
        "paused: the Pod is not recreated"
    );
    assert_eq!(
        members(&client, "life", "etcd").await.len(),
        3,
        "paused: no member is added"
    );
    assert_eq!(
        cluster
            .get("life", "etcd", "before-pause")
            .unwrap()
            .as_deref(),
        Some("v")
    );

    // Resumed: etcd-2 comes back on its data as the same member, then the scale to 5 happens.
    let resumed = serde_json::json!({"spec": {"paused": false}});
    clusters
        .patch("etcd", &PatchParams::default(), &Patch::Merge(&resumed))
        .await
        .unwrap();
    cluster.wait_converged("life", "etcd", 5, LIMIT).await;
    let after = cluster.etcd_members("life", "etcd").unwrap();
    for member in &ids {
        assert!(after.contains(member), "{member:?} kept its ID: {after:?}");
    }
    assert_eq!(
        cluster
            .get("life", "etcd", "before-pause")
            .unwrap()
            .as_deref(),
        Some("v")
    );

    // Protected (deploy/operator/protection.yaml): a member and its data PVC cannot be deleted
    // by hand; with the break-glass annotation the member can, and the operator heals.
    let refused = kubectl_output(&cluster, &["-n", "life", "delete", "etcdmember", "etcd-4"]);
    assert!(
        refused.contains("deleting EtcdMember etcd-4 by hand loses that member's data"),
        "{refused}"
    );
    let refused = kubectl_output(&cluster, &["-n", "life", "delete", "pvc", "data-etcd-4"]);
    assert!(
        refused.contains("deleting the etcd data PVC data-etcd-4 by hand"),
        "{refused}"
    );
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "life");
    let data_uid = pvcs.get("data-etcd-4").await.unwrap().metadata.uid.clone();
    let cluster_uid = clusters.get("etcd").await.unwrap().metadata.uid.clone();
    let workload = Workload::start(cluster.network.clone(), "life", "etcd", "break-glass");
    tokio::time::sleep(Duration::from_secs(2)).await;
    kubectl_output(
        &cluster,
        &[
            "-n",
            "life",
            "annotate",
            "etcdmember",
            "etcd-4",
            "etcd-operator.cozystack.io/allow-delete=true",
        ],
    );
    let allowed = kubectl_output(
        &cluster,
        &[
            "-n",
            "life",
            "delete",
            "etcdmember",
            "etcd-4",
            "--wait=false",
        ],
    );
    assert!(allowed.contains("deleted"), "{allowed}");
    // The member leaves etcd, its PVC stays (handed to the EtcdCluster: retention), and the
    // cluster heals on a new ordinal: ordinal 4's data belongs to a removed member.
    eventually(
        "etcd-4 gone and etcd-5 made in its place",
        LIMIT,
        || async {
            let names: Vec<String> = members(&client, "life", "etcd")
                .await
                .iter()
                .filter_map(|m| m.metadata.name.clone())
                .collect();
            (names == ["etcd-0", "etcd-1", "etcd-2", "etcd-3", "etcd-5"])
                .then_some(())
                .ok_or(format!("members {names:?}"))
        },
    )
    .await;
    cluster.wait_converged("life", "etcd", 5, LIMIT).await;
    let report = workload.stop().await;
    println!("{}", report.summary());
    report.assert_no_loss();
    assert!(
        report.acknowledged > 0,
        "the workload wrote: {}",
        report.summary()
    );
    let kept = pvcs.get("data-etcd-4").await.unwrap();
    assert_eq!(kept.metadata.uid, data_uid, "the same PVC, not a new one");
    assert!(kept.metadata.deletion_timestamp.is_none());
    let owners: Vec<_> = kept
        .metadata
        .owner_references
        .iter()
        .flatten()
        .map(|o| (o.kind.clone(), Some(o.uid.clone())))
        .collect();
    assert_eq!(owners, [("EtcdCluster".to_string(), cluster_uid)]);
    let after_glass = cluster.etcd_members("life", "etcd").unwrap();
    assert_eq!(after_glass.len(), 5, "{after_glass:?}");
    assert_eq!(
        cluster
            .get("life", "etcd", "before-pause")
            .unwrap()
            .as_deref(),
        Some("v")
    );

    // Deleted: nothing the cluster owned is left.
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
            members(&client, "life", "etcd").await.len(),
            count::<Pod>(&client, "life").await,
            count::<PersistentVolumeClaim>(&client, "life").await,
            count::<Service>(&client, "life").await,
            count::<PodDisruptionBudget>(&client, "life").await,
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

    // whenDeleted: Retain: the cluster goes, its PVCs stay with no owner.
    create_namespace(&client, "keep").await;
    let retain = "  persistentVolumeClaimRetentionPolicy:\n    whenDeleted: Retain\n";
    cluster.apply(&cluster_yaml("etcd", "keep", 1, retain));
    cluster.wait_converged("keep", "etcd", 1, LIMIT).await;
    let kept: Api<EtcdCluster> = Api::namespaced(client.clone(), "keep");
    kept.delete("etcd", &DeleteParams::default()).await.unwrap();
    eventually("the cluster gone and its PVC released", LIMIT, || async {
        let gone = kept
            .get_opt("etcd")
            .await
            .map_err(|e| e.to_string())?
            .is_none();
        let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "keep");
        let pvc = pvcs
            .get_opt("data-etcd-0")
            .await
            .map_err(|e| e.to_string())?;
        let owners = pvc.as_ref().map(|p| {
            p.metadata
                .owner_references
                .clone()
                .unwrap_or_default()
                .len()
        });
        let pods = count::<Pod>(&client, "keep").await;
        (gone && owners == Some(0) && pods == 0)
            .then_some(())
            .ok_or(format!(
                "cluster gone {gone}, PVC owners {owners:?}, pods {pods}"
            ))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "keep");
    assert!(
        pvcs.get_opt("data-etcd-0").await.unwrap().is_some(),
        "garbage collection left the released PVC"
    );
}
