//! Rolling version changes on one shared sandbox, by the operator deployed from `deploy/`, with
//! the client workload writing through the client Service the whole time (no acknowledged
//! write may be lost; the longest unavailability is printed per scenario):
//!
//! 1. 3 PVC-backed members 3.4.23 → 3.5.1: followers first, the leader last, same member IDs,
//!    every Pod on the new image, etcd reporting 3.5.1 everywhere;
//! 2. refused paths on that cluster (downgrade to 3.4 after the upgrade, a skipped minor is
//!    shown on the 3.4 cluster before it, an unknown version): nothing restarts;
//! 3. a version whose image cannot start (3.5.99: a patch etcd never released, an image the
//!    sandbox does not have, as a registry would not): the rollout
//!    stops after one member, the others keep serving, and going back to 3.5.1 heals it;
//! 4. a config rollout on the PVC cluster (quota and auto-compaction options): every Pod
//!    restarted once with the new flags, the leader last, same member IDs;
//! 5. an `additionalMetadata` change patched in place onto every object made for the cluster
//!    (Pods, PVCs, EtcdMembers, Services, the PodDisruptionBudget), and a key taken out of it
//!    removed from them, no Pod restarted;
//! 6. 3 memory-backed members 3.4.23 → 3.5.1 (each restart is a replacement);
//! 7. 5 PVC-backed members 3.4.23 → 3.5.1, the leader last;
//! 8. storage growth: refused on the 5-member cluster, whose StorageClass does not allow
//!    expansion (nothing changes); the PVCs of the 3-member cluster expanded in place, one at
//!    a time, no Pod restarted; the memory-backed members replaced with the larger tmpfs.

use etcd_operator_e2e_support as support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use serde_json::json;
use support::cluster::{Cluster, start_cluster};
use support::rollouts::{
    leader, patch_spec, pods, restart_order, set_version, wait_all_on, warning_events,
};
use support::status::{cluster_condition, wait_condition};
use support::workload::Workload;
use support::{create_namespace, eventually, kubectl, members};

const LIMIT: Duration = Duration::from_secs(180);

fn yaml(namespace: &str, version: &str, extra: &str) -> String {
    yaml_n(namespace, 3, version, extra)
}

fn yaml_n(namespace: &str, replicas: usize, version: &str, extra: &str) -> String {
    format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: etcd\n  namespace: {namespace}\nspec:\n  replicas: {replicas}\n  version: \"{version}\"\n{extra}"
    )
}

/// PVC name → (requested, capacity).
async fn claims(cluster: &Cluster, namespace: &str) -> BTreeMap<String, (String, String)> {
    Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::namespaced(
        cluster.client(),
        namespace,
    )
    .list(&ListParams::default())
    .await
    .expect("listing PVCs")
    .items
    .into_iter()
    .map(|c| {
        let requested = c
            .spec
            .and_then(|s| s.resources)
            .and_then(|r| r.requests)
            .and_then(|r| r.get("storage").map(|q| q.0.clone()))
            .unwrap_or_default();
        let capacity = c
            .status
            .and_then(|s| s.capacity)
            .and_then(|r| r.get("storage").map(|q| q.0.clone()))
            .unwrap_or_default();
        (c.metadata.name.unwrap_or_default(), (requested, capacity))
    })
    .collect()
}

/// Pod name → the size limit of its memory-backed data volume.
async fn tmpfs_sizes(cluster: &Cluster, namespace: &str) -> BTreeMap<String, String> {
    Api::<Pod>::namespaced(cluster.client(), namespace)
        .list(&ListParams::default().labels(&etcd_operator_api::labels::cluster_selector("etcd")))
        .await
        .expect("listing Pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let size = p
                .spec
                .and_then(|s| s.volumes)
                .unwrap_or_default()
                .into_iter()
                .find(|v| v.name == "data")
                .and_then(|v| v.empty_dir)
                .and_then(|e| e.size_limit)
                .map(|q| q.0)
                .unwrap_or_default();
            (p.metadata.name.unwrap_or_default(), size)
        })
        .collect()
}

/// Every object the operator made for cluster `etcd` in `namespace` (Pods, PVCs, EtcdMembers,
/// the two Services, the PodDisruptionBudget), as `kind/name`, with whether it carries the
/// label `team=<team>` (`None`: no such label) and the annotation `owner=ops`.
fn metadata_of_objects(
    cluster: &Cluster,
    namespace: &str,
) -> Result<Vec<(String, Option<String>, bool)>, String> {
    let (ok, out, err) = kubectl(
        cluster,
        &[
            "-n",
            namespace,
            "get",
            "pods,pvc,etcdmembers,services,pdb",
            "-l",
            "etcd-operator.cozystack.io/cluster=etcd",
            "-o",
            "json",
        ],
    );
    if !ok {
        return Err(err);
    }
    let list: serde_json::Value = serde_json::from_str(&out).map_err(|e| e.to_string())?;
    Ok(list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|item| {
            let meta = &item["metadata"];
            (
                format!(
                    "{}/{}",
                    item["kind"].as_str().unwrap_or_default(),
                    meta["name"].as_str().unwrap_or_default()
                ),
                meta["labels"]["team"].as_str().map(str::to_string),
                meta["annotations"]["owner"].as_str() == Some("ops"),
            )
        })
        .collect())
}

/// Upgrades `namespace`'s cluster 3.4.23 → 3.5.1 under the workload.
async fn upgrade_under_load(cluster: &Cluster, namespace: &str) {
    let ids = cluster.etcd_members(namespace, "etcd").unwrap();
    let first_leader = leader(cluster, namespace).await;
    let before = pods(cluster, namespace).await;
    let workload = Workload::start(cluster.network.clone(), namespace, "etcd", namespace);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    set_version(cluster, namespace, "3.5.1");
    let order = restart_order(cluster, namespace, &before, "3.5.1", LIMIT, |_| {
        String::new()
    })
    .await;
    wait_all_on(cluster, namespace, before.len(), "3.5.1", LIMIT).await;
    let took = started.elapsed();
    let report = workload.stop().await;
    report.assert_no_loss();
    println!(
        "{namespace}: {} members 3.4.23 -> 3.5.1 in {:.1} s, order {order:?} (leader at the start {first_leader}), longest unavailability {} ms",
        before.len(),
        took.as_secs_f64(),
        report.longest_unavailable.as_millis()
    );
    assert_eq!(
        order.last(),
        Some(&first_leader),
        "the leader's Pod is restarted last"
    );
    assert_ne!(
        leader(cluster, namespace).await,
        "",
        "a leader after the upgrade"
    );
    let after = cluster.etcd_members(namespace, "etcd").unwrap();
    if !namespace.ends_with('m') {
        assert_eq!(after, ids, "PVC-backed members keep their etcd identities");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_rolling_upgrades() {
    let test_started = Instant::now();
    let cluster = start_cluster(3).await;
    cluster.deploy_operator(1).await;
    let client = cluster.client();
    create_namespace(&client, "upg").await;
    create_namespace(&client, "upm").await;
    create_namespace(&client, "up5").await;
    cluster.apply(
        "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: expandable\nprovisioner: kube-sandbox/local\nallowVolumeExpansion: true\nparameters:\n  maxVolumeSize: 4Gi\n---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: fixed\nprovisioner: kube-sandbox/local\n",
    );
    cluster.apply(&yaml(
        "upg",
        "3.4.23",
        "  storage:\n    storageClassName: expandable\n",
    ));
    cluster.apply(&yaml(
        "upm",
        "3.4.23",
        "  storage:\n    medium: Memory\n    size: 256Mi\n",
    ));
    cluster.wait_converged("upg", "etcd", 3, LIMIT).await;
    cluster.wait_converged("upm", "etcd", 3, LIMIT).await;

    // A skipped minor, refused on the 3.4 cluster before anything moves.
    let before = pods(&cluster, "upg").await;
    set_version(&cluster, "upg", "3.6.17");
    let message = wait_condition(
        &cluster.client(),
        "upg",
        "etcd",
        "Progressing",
        "False",
        Some("UpgradeRefused"),
        LIMIT,
    )
    .await;
    assert!(message.contains("skips a minor version"), "{message}");
    assert!(message.contains("3.5.x"), "says what is allowed: {message}");
    assert!(
        !warning_events(&cluster, "upg", "UpgradeRefused")
            .trim()
            .is_empty()
    );
    assert_eq!(pods(&cluster, "upg").await, before, "nothing restarted");
    set_version(&cluster, "upg", "3.4.23");
    cluster.wait_converged("upg", "etcd", 3, LIMIT).await;

    // 1. PVC-backed 3.4.23 → 3.5.1.
    upgrade_under_load(&cluster, "upg").await;

    // 2. Refused: a downgrade below the cluster version now at 3.5, an unknown version.
    let before = pods(&cluster, "upg").await;
    // A version outside the supported range is refused before the path is looked at
    // (`UnsupportedVersion`, naming the range).
    for (version, refusal, why) in [
        (
            "3.4.23",
            "UpgradeRefused",
            "downgrade below etcd's cluster version 3.5",
        ),
        (
            "4.0.0",
            "UnsupportedVersion",
            "not a version this operator runs: it runs etcd 3.4.x to 3.7.x",
        ),
    ] {
        set_version(&cluster, "upg", version);
        let message = eventually(&format!("{version} refused"), LIMIT, || async {
            let (status, reason, message) =
                cluster_condition(&cluster.client(), "upg", "etcd", "Progressing")
                    .await
                    .unwrap_or_default();
            if status == "False" && reason == refusal && message.contains(why) {
                Ok(message)
            } else {
                Err(format!("Progressing={status} {reason}: {message}"))
            }
        })
        .await;
        println!("upg: spec.version {version} refused: {message}");
        assert_eq!(pods(&cluster, "upg").await, before, "nothing restarted");
    }
    set_version(&cluster, "upg", "3.5.1");
    cluster.wait_converged("upg", "etcd", 3, LIMIT).await;

    // 3. A version that cannot start: one member tries, the rollout stops, the rest serves;
    //    going back heals it.
    let workload = Workload::start(cluster.network.clone(), "upg", "etcd", "upg-bad");
    set_version(&cluster, "upg", "3.5.99");
    let message = wait_condition(
        &cluster.client(),
        "upg",
        "etcd",
        "Progressing",
        "False",
        Some("UpgradeFailed"),
        LIMIT,
    )
    .await;
    println!("upg: 3.5.99: {message}");
    assert!(
        message.contains("does not start on etcd 3.5.99"),
        "{message}"
    );
    assert!(
        message.contains("Set spec.version back to 3.5.1"),
        "{message}"
    );
    assert!(
        !warning_events(&cluster, "upg", "UpgradeFailed")
            .trim()
            .is_empty()
    );
    let now = pods(&cluster, "upg").await;
    let tried: Vec<&String> = now
        .iter()
        .filter(|(name, (uid, _, _))| before.get(*name).is_none_or(|(old, _, _)| old != uid))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(
        tried.len(),
        1,
        "the rollout stopped after one member: {now:?}"
    );
    let serving = now.values().filter(|(_, _, ready)| *ready).count();
    assert_eq!(serving, 2, "the other members keep serving: {now:?}");
    // Repairs still run while the rollout is stopped: a serving member's Pod deleted by hand
    // (quorum goes with it, the failed member being down) is created again on its data.
    let (victim, victim_uid) = now
        .iter()
        .find(|(name, (_, _, ready))| *ready && !tried.contains(name))
        .map(|(name, (uid, _, _))| (name.clone(), uid.clone()))
        .expect("a serving member");
    let (ok, _, stderr) = kubectl(
        &cluster,
        &["-n", "upg", "delete", "pod", &victim, "--wait=false"],
    );
    assert!(ok, "kubectl delete pod {victim}: {stderr}");
    eventually(
        &format!("upg: {victim} created again while the rollout is stopped"),
        LIMIT,
        || async {
            match pods(&cluster, "upg").await.get(&victim) {
                Some((uid, _, true)) if *uid != victim_uid => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    wait_condition(
        &cluster.client(),
        "upg",
        "etcd",
        "Progressing",
        "False",
        Some("UpgradeFailed"),
        LIMIT,
    )
    .await;
    println!("upg: {victim} repaired while the rollout stayed stopped");
    set_version(&cluster, "upg", "3.5.1");
    wait_all_on(&cluster, "upg", 3, "3.5.1", LIMIT).await;
    let report = workload.stop().await;
    report.assert_no_loss();
    println!(
        "upg: failed 3.5.99 and back: longest unavailability {} ms",
        report.longest_unavailable.as_millis()
    );

    // 4. A config rollout: quota and auto-compaction.
    let ids = cluster.etcd_members("upg", "etcd").unwrap();
    let first_leader = leader(&cluster, "upg").await;
    let before = pods(&cluster, "upg").await;
    let workload = Workload::start(cluster.network.clone(), "upg", "etcd", "upg-config");
    let started = Instant::now();
    let patch = r#"{"spec":{"options":{"quotaBackendBytes":1073741824,"autoCompactionMode":"periodic","autoCompactionRetention":"5m"}}}"#;
    let (ok, _, stderr) = kubectl(
        &cluster,
        &[
            "-n",
            "upg",
            "patch",
            "etcdcluster/etcd",
            "--type=merge",
            "-p",
            patch,
        ],
    );
    assert!(ok, "kubectl patch options: {stderr}");
    let order = restart_order(&cluster, "upg", &before, "the new options", LIMIT, |_| {
        String::new()
    })
    .await;
    cluster.wait_converged("upg", "etcd", 3, LIMIT).await;
    let took = started.elapsed();
    let report = workload.stop().await;
    report.assert_no_loss();
    println!(
        "upg: config rollout in {:.1} s, order {order:?} (leader at the start {first_leader}), longest unavailability {} ms",
        took.as_secs_f64(),
        report.longest_unavailable.as_millis()
    );
    assert_eq!(order.last(), Some(&first_leader), "the leader last");
    assert_eq!(cluster.etcd_members("upg", "etcd").unwrap(), ids);
    let list = Api::<Pod>::namespaced(client.clone(), "upg")
        .list(&ListParams::default().labels(&etcd_operator_api::labels::cluster_selector("etcd")))
        .await
        .unwrap();
    for pod in &list.items {
        let container = &pod.spec.as_ref().unwrap().containers[0];
        let line: Vec<String> = container
            .command
            .iter()
            .flatten()
            .chain(container.args.iter().flatten())
            .cloned()
            .collect();
        for flag in [
            "--quota-backend-bytes=1073741824",
            "--auto-compaction-mode=periodic",
            "--auto-compaction-retention=5m",
        ] {
            assert!(line.iter().any(|a| a.contains(flag)), "{flag} in {line:?}");
        }
    }
    for m in members(&client, "upg", "etcd").await {
        assert_eq!(
            m.spec.options.and_then(|o| o.quota_backend_bytes),
            Some(1073741824)
        );
    }

    // 5. additionalMetadata: patched in place, no restart.
    let before = pods(&cluster, "upg").await;
    let patch = r#"{"spec":{"additionalMetadata":{"labels":{"team":"storage"},"annotations":{"owner":"ops"}}}}"#;
    let (ok, _, stderr) = kubectl(
        &cluster,
        &[
            "-n",
            "upg",
            "patch",
            "etcdcluster/etcd",
            "--type=merge",
            "-p",
            patch,
        ],
    );
    assert!(ok, "kubectl patch additionalMetadata: {stderr}");
    let pod_api = Api::<Pod>::namespaced(client.clone(), "upg");
    eventually("the Pods to carry the new metadata", LIMIT, || async {
        let list = pod_api
            .list(&ListParams::default().labels("team=storage"))
            .await
            .map_err(|e| e.to_string())?;
        let annotated = list
            .items
            .iter()
            .filter(|p| {
                p.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("owner"))
                    .is_some_and(|v| v == "ops")
            })
            .count();
        if annotated == 3 {
            Ok(())
        } else {
            Err(format!(
                "{annotated} of 3 Pods carry team=storage and owner=ops"
            ))
        }
    })
    .await;
    // Not the Pods alone: every object made for the cluster, in place (3 Pods, 3 PVCs, 3
    // EtcdMembers, 2 Services, the PodDisruptionBudget).
    eventually("every object to carry the new metadata", LIMIT, || async {
        let objects = metadata_of_objects(&cluster, "upg")?;
        let missing: Vec<_> = objects
            .iter()
            .filter(|(_, team, owner)| team.as_deref() != Some("storage") || !owner)
            .collect();
        if objects.len() == 12 && missing.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} objects, without it: {missing:?}",
                objects.len()
            ))
        }
    })
    .await;
    cluster.wait_converged("upg", "etcd", 3, LIMIT).await;
    assert_eq!(
        pods(&cluster, "upg").await,
        before,
        "no Pod restarted for metadata"
    );
    // A key taken out of additionalMetadata goes from the running Pods too, no restart.
    let (ok, _, stderr) = kubectl(
        &cluster,
        &[
            "-n",
            "upg",
            "patch",
            "etcdcluster/etcd",
            "--type=merge",
            "-p",
            r#"{"spec":{"additionalMetadata":{"annotations":{"owner":null}}}}"#,
        ],
    );
    assert!(ok, "kubectl patch additionalMetadata: {stderr}");
    eventually("the owner annotation to leave the Pods", LIMIT, || async {
        let list = pod_api
            .list(&ListParams::default().labels("team=storage"))
            .await
            .map_err(|e| e.to_string())?;
        let annotated = list
            .items
            .iter()
            .filter(|p| {
                p.metadata
                    .annotations
                    .as_ref()
                    .is_some_and(|a| a.contains_key("owner"))
            })
            .count();
        if list.items.len() == 3 && annotated == 0 {
            Ok(())
        } else {
            Err(format!(
                "{annotated} of {} Pods still carry owner",
                list.items.len()
            ))
        }
    })
    .await;
    eventually(
        "the owner annotation to leave every object",
        LIMIT,
        || async {
            let objects = metadata_of_objects(&cluster, "upg")?;
            let left: Vec<_> = objects
                .iter()
                .filter(|(_, team, owner)| team.as_deref() != Some("storage") || *owner)
                .collect();
            if objects.len() == 12 && left.is_empty() {
                Ok(())
            } else {
                Err(format!("{} objects, not changed: {left:?}", objects.len()))
            }
        },
    )
    .await;
    cluster.wait_converged("upg", "etcd", 3, LIMIT).await;
    assert_eq!(
        pods(&cluster, "upg").await,
        before,
        "no Pod restarted for a removed key"
    );

    // 6. Memory-backed 3.4.23 → 3.5.1.
    upgrade_under_load(&cluster, "upm").await;

    // 6b. Memory-backed, a version that cannot start: the member replaced on it (its restart
    //     is a replacement) still counts as a failed upgrade, so the rollout stops there
    //     instead of replacing it again and again; going back heals it.
    let workload = Workload::start(cluster.network.clone(), "upm", "etcd", "upm-bad");
    set_version(&cluster, "upm", "3.5.99");
    let message = wait_condition(
        &cluster.client(),
        "upm",
        "etcd",
        "Progressing",
        "False",
        Some("UpgradeFailed"),
        LIMIT,
    )
    .await;
    println!("upm: 3.5.99: {message}");
    assert!(
        message.contains("Set spec.version back to 3.5.1"),
        "{message}"
    );
    let stopped = pods(&cluster, "upm").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        pods(&cluster, "upm").await,
        stopped,
        "nothing replaced again while the rollout is stopped"
    );
    let (status, reason, _) = cluster_condition(&cluster.client(), "upm", "etcd", "Progressing")
        .await
        .unwrap_or_default();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "UpgradeFailed")
    );
    set_version(&cluster, "upm", "3.5.1");
    wait_all_on(&cluster, "upm", 3, "3.5.1", LIMIT).await;
    cluster.wait_converged("upm", "etcd", 3, LIMIT).await;
    let report = workload.stop().await;
    report.assert_no_loss();
    println!(
        "upm: failed 3.5.99 and back: longest unavailability {} ms",
        report.longest_unavailable.as_millis()
    );

    // 7. Five PVC-backed members 3.4.23 → 3.5.1 (their StorageClass does not allow expansion).
    cluster.apply(&yaml_n(
        "up5",
        5,
        "3.4.23",
        "  storage:\n    storageClassName: fixed\n",
    ));
    cluster.wait_converged("up5", "etcd", 5, LIMIT).await;
    upgrade_under_load(&cluster, "up5").await;

    // 8a. A larger size where the StorageClass does not allow expansion: refused, nothing
    //     changes.
    let before = pods(&cluster, "up5").await;
    let volumes = claims(&cluster, "up5").await;
    patch_spec(&cluster, "up5", json!({ "storage": { "size": "2Gi" } }));
    let message = wait_condition(
        &cluster.client(),
        "up5",
        "etcd",
        "Progressing",
        "False",
        Some("StorageExpansionRefused"),
        LIMIT,
    )
    .await;
    println!("up5: storage.size 2Gi: {message}");
    assert!(message.contains("StorageClass fixed"), "{message}");
    assert!(message.contains("allowVolumeExpansion"), "{message}");
    assert!(
        !warning_events(&cluster, "up5", "StorageExpansionRefused")
            .trim()
            .is_empty()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(claims(&cluster, "up5").await, volumes, "no PVC changed");
    assert_eq!(pods(&cluster, "up5").await, before, "no Pod restarted");
    for m in members(&client, "up5", "etcd").await {
        assert_eq!(
            m.spec.storage.size_or_default().0,
            "1Gi",
            "member unchanged"
        );
    }

    // 8b. PVCs expanded in place where the StorageClass allows it: no Pod restarted.
    let ids = cluster.etcd_members("upg", "etcd").unwrap();
    let before = pods(&cluster, "upg").await;
    let workload = Workload::start(cluster.network.clone(), "upg", "etcd", "upg-storage");
    let started = Instant::now();
    patch_spec(&cluster, "upg", json!({ "storage": { "size": "2Gi" } }));
    eventually("upg: every PVC at 2Gi", LIMIT, || async {
        let volumes = claims(&cluster, "upg").await;
        let grown = volumes
            .values()
            .filter(|(r, c)| r == "2Gi" && c == "2Gi")
            .count();
        if grown == 3 {
            Ok(())
        } else {
            Err(format!("{volumes:?}"))
        }
    })
    .await;
    cluster.wait_converged("upg", "etcd", 3, LIMIT).await;
    let took = started.elapsed();
    let report = workload.stop().await;
    report.assert_no_loss();
    println!(
        "upg: PVCs 1Gi -> 2Gi in {:.1} s, longest unavailability {} ms",
        took.as_secs_f64(),
        report.longest_unavailable.as_millis()
    );
    assert_eq!(pods(&cluster, "upg").await, before, "no Pod restarted");
    assert_eq!(cluster.etcd_members("upg", "etcd").unwrap(), ids);
    for m in members(&client, "upg", "etcd").await {
        assert_eq!(m.spec.storage.size_or_default().0, "2Gi");
    }
    let (status, reason, _) = cluster_condition(&cluster.client(), "upg", "etcd", "Progressing")
        .await
        .unwrap_or_default();
    assert_eq!((status.as_str(), reason.as_str()), ("False", "Reconciled"));

    // 8b'. An expansion the storage driver refuses (past the class's maxVolumeSize, as a CSI
    //      driver answers OutOfRange): reported in Kubernetes' words, nothing restarted, the
    //      other members not touched.
    let before = pods(&cluster, "upg").await;
    patch_spec(&cluster, "upg", json!({ "storage": { "size": "8Gi" } }));
    let message = wait_condition(
        &cluster.client(),
        "upg",
        "etcd",
        "Progressing",
        "False",
        Some("StorageExpansionFailed"),
        LIMIT,
    )
    .await;
    println!("upg: storage.size 8Gi: {message}");
    assert!(
        message.contains("exceeds the maximum volume size 4Gi"),
        "{message}"
    );
    assert!(message.contains("ControllerResizeInfeasible"), "{message}");
    assert!(
        !warning_events(&cluster, "upg", "StorageExpansionFailed")
            .trim()
            .is_empty()
    );
    let volumes = claims(&cluster, "upg").await;
    let asked: Vec<_> = volumes.values().filter(|(r, _)| r == "8Gi").collect();
    assert_eq!(asked.len(), 1, "one PVC asked for 8Gi: {volumes:?}");
    assert!(volumes.values().all(|(_, c)| c == "2Gi"), "{volumes:?}");
    assert_eq!(pods(&cluster, "upg").await, before, "no Pod restarted");

    // 8c. Memory-backed: each member replaced with the larger tmpfs, the leader last.
    let first_leader = leader(&cluster, "upm").await;
    let before = pods(&cluster, "upm").await;
    let workload = Workload::start(cluster.network.clone(), "upm", "etcd", "upm-storage");
    let started = Instant::now();
    patch_spec(&cluster, "upm", json!({ "storage": { "size": "512Mi" } }));
    let order = restart_order(&cluster, "upm", &before, "512Mi", LIMIT, |_| String::new()).await;
    cluster.wait_converged("upm", "etcd", 3, LIMIT).await;
    let took = started.elapsed();
    let report = workload.stop().await;
    report.assert_no_loss();
    println!(
        "upm: tmpfs 256Mi -> 512Mi in {:.1} s, order {order:?} (leader at the start {first_leader}), longest unavailability {} ms",
        took.as_secs_f64(),
        report.longest_unavailable.as_millis()
    );
    assert_eq!(order.last(), Some(&first_leader), "the leader last");
    let sizes = tmpfs_sizes(&cluster, "upm").await;
    assert!(
        sizes.len() == 3 && sizes.values().all(|s| s == "512Mi"),
        "{sizes:?}"
    );

    println!(
        "e2e_rolling_upgrades: {:.0} s",
        test_started.elapsed().as_secs_f64()
    );
}
