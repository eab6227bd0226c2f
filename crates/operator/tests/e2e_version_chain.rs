//! etcd's current minors end to end, on one sandbox, by the operator deployed from `deploy/`:
//!
//! 1. `chain`: 3 PVC-backed members created at 3.5.36 (at or above etcd's 3.5 → 3.6 floor,
//!    3.5.32) upgraded to 3.6.17, then to 3.7.4 (above the 3.6 → 3.7 floor, 3.6.11), with the
//!    client workload writing through the client Service the whole time: no acknowledged write
//!    lost, the same member IDs, every member's spec, Pod image and etcd's own answer on the
//!    new version after each step, the leader's Pod restarted last;
//! 2. `floor`: 3 members installed at 3.5.1 (below the floor) asked for 3.6.17: refused with
//!    `Progressing=False UpgradeRefused` and a Warning Event naming 3.5.32, the patch to take
//!    first, and the member still on 3.5.1; no Pod restarted, no member's version changed, and
//!    the cluster still takes writes.
//!
//!    Then the way through that the refusal names, under the workload: 3.5.36 (a patch, rolled
//!    at once), then 3.6.17, for which the operator first rebuilds every member on fresh data
//!    (its data was created by 3.5.1, whose promotions of learners 3.6 would not see:
//!    etcd-io/etcd#19557), one at a time with a `MembershipRebuild` Event each, then rolls
//!    them; no acknowledged write lost.
//!
//! 3. `chainm`: the chain of 1. on 3 memory-backed members (each restart a replacement), at the
//!    same time as 1.;
//! 4. `down`: 3 PVC-backed members created at 3.6.17 under a MutatingAdmissionPolicy (the real
//!    kube-apiserver's, `admissionregistration.k8s.io/v1`) that rewrites every etcd image to a
//!    mirror and pins it to a digest, as production clusters' policies do: the members run the
//!    rewritten images and are not restarted for it while 1.-3. run (minutes); then downgraded to
//!    3.5.36 (a real version change still rolls, the new Pods rewritten too) under the workload
//!    through etcd's procedure (a `DowngradeEnabled` Event), leader last, same member IDs, no
//!    acknowledged write lost;
//! 5. at the same time as 4., `chain` (3.7.4 after 1.) downgraded to 3.6.17 the same way.

use etcd_operator_e2e_support as support;

use std::time::{Duration, Instant};

use support::cluster::{Cluster, start_cluster};
use support::rollouts::{
    PodFacts, event_messages, leader, pods, restart_order, set_version, wait_all_on, warning_events,
};
use support::status::wait_condition;
use support::workload::Workload;
use support::{NEWEST_35, NEWEST_37, create_namespace, eventually, kubectl, members};

const LIMIT: Duration = Duration::from_secs(240);

/// Sets `version` and records the order in which members got a new Pod, until every member
/// runs it; returns (order, leader at the start).
async fn roll(cluster: &Cluster, namespace: &str, version: &str) -> (Vec<String>, String) {
    let first_leader = leader(cluster, namespace).await;
    let before = pods(cluster, namespace).await;
    set_version(cluster, namespace, version);
    let order = restart_order(cluster, namespace, &before, version, LIMIT, |order| {
        format!("etcd's logs:\n{}", etcd_logs(cluster, namespace, order))
    })
    .await;
    wait_all_on(cluster, namespace, 3, version, LIMIT).await;
    (order, first_leader)
}

/// The last lines each of `names`' etcd wrote (its previous container's, when it restarted).
fn etcd_logs(cluster: &Cluster, namespace: &str, names: &[String]) -> String {
    names
        .iter()
        .map(|name| {
            let (_, previous, _) = kubectl(
                cluster,
                &["-n", namespace, "logs", name, "--previous", "--tail=15"],
            );
            let (_, current, _) = kubectl(cluster, &["-n", namespace, "logs", name, "--tail=15"]);
            format!("--- {name} (previous)\n{previous}\n--- {name}\n{current}")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The floor refusal on the 3.5.1 cluster: refused, reported, nothing moved, still serving.
async fn floor_refused(cluster: &Cluster) {
    let before = pods(cluster, "floor").await;
    set_version(cluster, "floor", support::DEFAULT_VERSION);
    let message = wait_condition(
        &cluster.client(),
        "floor",
        "etcd",
        "Progressing",
        "False",
        Some("UpgradeRefused"),
        LIMIT,
    )
    .await;
    println!("floor: 3.5.1 -> 3.6.17 refused: {message}");
    for needed in [
        "3.5.32 or later",
        "runs 3.5.1",
        "Set spec.version to 3.5.32",
        "upgrade_3_6",
    ] {
        assert!(message.contains(needed), "{needed:?} in {message}");
    }
    let events = eventually("floor: the UpgradeRefused Event", LIMIT, || async {
        let events = warning_events(cluster, "floor", "UpgradeRefused");
        if events.contains("3.5.32") {
            Ok(events)
        } else {
            Err(events)
        }
    })
    .await;
    println!("floor: Event: {events}");
    // Some passes of the operator later, nothing has moved.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(pods(cluster, "floor").await, before, "no Pod restarted");
    let specs: Vec<String> = members(&cluster.client(), "floor", "etcd")
        .await
        .into_iter()
        .map(|m| m.spec.version)
        .collect();
    assert_eq!(
        specs,
        vec!["3.5.1".to_string(); 3],
        "no member's version changed"
    );
    tokio::task::block_in_place(|| {
        cluster.put("floor", "etcd", "after-refusal", "written");
        assert_eq!(
            cluster.get("floor", "etcd", "after-refusal"),
            Ok(Some("written".to_string()))
        );
    });
}

/// The messages of the MembershipRebuild Events of `namespace`.
fn rebuild_events(cluster: &Cluster, namespace: &str) -> Vec<String> {
    event_messages(cluster, namespace, "reason=MembershipRebuild")
}

/// The way through the floor's refusal, under the workload: 3.5.36 first, then 3.6.17, every
/// member rebuilt on fresh data before the upgrade (data created by 3.5.1).
async fn floor_way_through(cluster: &Cluster) {
    set_version(cluster, "floor", NEWEST_35);
    wait_all_on(cluster, "floor", 3, NEWEST_35, LIMIT).await;
    assert!(
        rebuild_events(cluster, "floor").is_empty(),
        "no rebuild for a patch upgrade"
    );
    let before = cluster.etcd_members("floor", "etcd").unwrap();
    let workload = Workload::start(cluster.network.clone(), "floor", "etcd", "floor");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    set_version(cluster, "floor", support::DEFAULT_VERSION);
    wait_all_on(cluster, "floor", 3, support::DEFAULT_VERSION, 2 * LIMIT).await;
    let report = workload.stop().await;
    report.assert_no_loss();
    let events = rebuild_events(cluster, "floor");
    println!(
        "floor: 3.5.1-made data, 3.5.36 -> 3.6.17 with every member rebuilt first in {:.1} s, longest unavailability {} ms; Events:\n{}",
        started.elapsed().as_secs_f64(),
        report.longest_unavailable.as_millis(),
        events.join("\n")
    );
    for member in ["etcd-0", "etcd-1", "etcd-2"] {
        assert!(
            events.iter().any(
                |e| e.starts_with(&format!("member {member} is now Replacing"))
                    && e.contains("created by etcd 3.5.1")
                    && e.contains("etcd-io/etcd#19557")
            ),
            "a MembershipRebuild Event for {member}: {events:?}"
        );
    }
    let after = cluster.etcd_members("floor", "etcd").unwrap();
    assert_eq!(after.len(), 3);
    for (_, id, _) in &before {
        assert!(
            !after.iter().any(|(_, a, _)| a == id),
            "every member joined again as a new etcd member: {before:?} then {after:?}"
        );
    }
}

/// `namespace`'s cluster 3.5.36 → 3.6.17 → 3.7.4 under the client workload: each rollout leader
/// last, every member on the new version (spec, image, etcd's answer); PVC-backed members keep
/// their etcd IDs (a memory-backed member's restart is a replacement).
async fn chain(cluster: &Cluster, namespace: &str, pvc: bool) {
    wait_all_on(cluster, namespace, 3, NEWEST_35, LIMIT).await;
    let ids = cluster.etcd_members(namespace, "etcd").unwrap();
    let workload = Workload::start(cluster.network.clone(), namespace, "etcd", namespace);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut previous = NEWEST_35;
    for version in [support::DEFAULT_VERSION, NEWEST_37] {
        let started = Instant::now();
        let (order, first_leader) = roll(cluster, namespace, version).await;
        println!(
            "{namespace}: {previous} -> {version} in {:.1} s, order {order:?} (leader at the start {first_leader})",
            started.elapsed().as_secs_f64()
        );
        assert_eq!(
            order.last(),
            Some(&first_leader),
            "{namespace}: the leader's Pod is restarted last"
        );
        if pvc {
            assert_eq!(
                cluster.etcd_members(namespace, "etcd").unwrap(),
                ids,
                "{namespace}: the members keep their etcd identities"
            );
        }
        previous = version;
    }
    let report = workload.stop().await;
    report.assert_no_loss();
    println!(
        "{namespace}: {NEWEST_35} -> 3.6.17 -> {NEWEST_37}: longest unavailability {} ms",
        report.longest_unavailable.as_millis(),
    );
}

/// What the admission policy writes for an etcd image: the same name and tag from a mirror,
/// pinned to a digest (a made-up one: the sandbox runs a version's binaries by its tag).
const MIRROR: &str = "mirror.internal/etcd-io/";
const DIGEST: &str = "@sha256:5f2e0c7a9b1d3e4f6a8c0b2d4e6f8a1c3e5b7d9f0a2c4e6b8d1f3a5c7e9b0d2f";

/// A MutatingAdmissionPolicy and its binding, for Pods created in namespace `down`: every
/// container named `etcd` whose image has no digest gets `MIRROR` + `<name>:<tag>` + `DIGEST`.
fn mirror_policy() -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: etcd-images-to-mirror-digests
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE"]
        resources: ["pods"]
  matchConditions:
    - name: etcd-without-digest
      expression: 'object.spec.containers.exists(c, c.name == "etcd" && !c.image.contains("@"))'
  mutations:
    - patchType: ApplyConfiguration
      applyConfiguration:
        expression: >
          Object{{spec: Object.spec{{containers: object.spec.containers.filter(c, c.name == "etcd").map(c,
          Object.spec.containers{{name: c.name, image: "{MIRROR}" + c.image.substring(c.image.lastIndexOf("/") + 1) + "{DIGEST}"}})}}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: etcd-images-to-mirror-digests
spec:
  policyName: etcd-images-to-mirror-digests
  matchResources:
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: down
"#
    )
}

/// Applies [`mirror_policy`] and waits until the API server applies it (a server-side dry run
/// of an etcd Pod in `down` comes back rewritten).
async fn install_mirror_policy(cluster: &Cluster) {
    tokio::task::block_in_place(|| cluster.apply(&mirror_policy()));
    let probe = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: probe\n  namespace: down\nspec:\n  containers:\n    - name: etcd\n      image: quay.io/coreos/etcd:v{}\n",
        support::DEFAULT_VERSION
    );
    let path = std::env::temp_dir().join(format!("mirror-probe-{}.yaml", std::process::id()));
    std::fs::write(&path, probe).unwrap();
    let file = path.display().to_string();
    eventually(
        "the admission policy to rewrite etcd images",
        LIMIT,
        || async {
            let (ok, out, err) = kubectl(
                cluster,
                &[
                    "create",
                    "--dry-run=server",
                    "-f",
                    &file,
                    "-o",
                    "jsonpath={.spec.containers[0].image}",
                ],
            );
            let expected = format!("{MIRROR}etcd:v{}{DIGEST}", support::DEFAULT_VERSION);
            if ok && out == expected {
                Ok(())
            } else {
                Err(format!("{out:?} {err}"))
            }
        },
    )
    .await;
    let _ = std::fs::remove_file(&path);
}

/// Every Pod of `pods` runs an image the policy rewrote.
fn assert_rewritten(namespace: &str, pods: &PodFacts) {
    for (name, (_, image, _)) in pods {
        assert!(
            image.starts_with(MIRROR) && image.ends_with(DIGEST),
            "{namespace}: {name} runs {image:?}, not the policy's rewrite"
        );
    }
}

/// `namespace`'s cluster from `from` one minor down to `to` under the workload, through etcd's
/// procedure: every member on `to` (spec, image, etcd's answer), the same member IDs, leader
/// last, a `DowngradeEnabled` Event naming `to`'s minor, no acknowledged write lost.
async fn downgrade(cluster: &Cluster, namespace: &str, from: &str, to: &str) -> PodFacts {
    wait_all_on(cluster, namespace, 3, from, LIMIT).await;
    let ids = cluster.etcd_members(namespace, "etcd").unwrap();
    let workload = Workload::start(
        cluster.network.clone(),
        namespace,
        "etcd",
        &format!("{namespace}-down"),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = Instant::now();
    let (order, first_leader) = roll(cluster, namespace, to).await;
    let report = workload.stop().await;
    report.assert_no_loss();
    println!(
        "{namespace}: {from} -> {to} in {:.1} s, order {order:?} (leader at the start {first_leader}), longest unavailability {} ms",
        started.elapsed().as_secs_f64(),
        report.longest_unavailable.as_millis()
    );
    assert_eq!(
        order.last(),
        Some(&first_leader),
        "{namespace}: the leader's Pod last"
    );
    assert_eq!(cluster.etcd_members(namespace, "etcd").unwrap(), ids);
    // It went through etcd's downgrade (validate + enable), not a bare binary swap.
    let enabled = event_messages(cluster, namespace, "reason=DowngradeEnabled").join(" ");
    println!("{namespace}: DowngradeEnabled: {enabled}");
    let minor = to.rsplit_once('.').map_or(to, |(minor, _)| minor);
    assert!(
        enabled.contains(minor),
        "{namespace}: a DowngradeEnabled Event naming {minor}: {enabled:?}"
    );
    pods(cluster, namespace).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_3_5_to_3_6_to_3_7_and_the_floor() {
    let test_started = Instant::now();
    let cluster = start_cluster(3).await;
    cluster.deploy_operator(1).await;
    let client = cluster.client();
    for namespace in ["chain", "chainm", "floor", "down"] {
        create_namespace(&client, namespace).await;
    }
    install_mirror_policy(&cluster).await;
    tokio::task::block_in_place(|| {
        cluster.apply(&support::cluster_yaml_on("etcd", "chain", 3, NEWEST_35, ""));
        cluster.apply(&support::cluster_yaml_on(
            "etcd",
            "chainm",
            3,
            NEWEST_35,
            "  storage:\n    medium: Memory\n    size: 256Mi\n",
        ));
        cluster.apply(&support::cluster_yaml_on("etcd", "floor", 3, "3.5.1", ""));
        cluster.apply(&support::cluster_yaml_on(
            "etcd",
            "down",
            3,
            support::DEFAULT_VERSION,
            "",
        ));
    });
    for namespace in ["chain", "chainm", "floor", "down"] {
        cluster.wait_converged(namespace, "etcd", 3, LIMIT).await;
    }

    // The policy rewrote every image of `down`; the operator judges its Pods by what it
    // rendered, not by the image string: nothing restarts while the rest of this test runs.
    wait_all_on(&cluster, "down", 3, support::DEFAULT_VERSION, LIMIT).await;
    let mirrored = pods(&cluster, "down").await;
    assert_rewritten("down", &mirrored);
    let quiet_since = Instant::now();

    // Below the floor: refused, nothing moves; then both chains at once.
    floor_refused(&cluster).await;
    tokio::join!(
        chain(&cluster, "chain", true),
        chain(&cluster, "chainm", false),
        floor_way_through(&cluster)
    );
    // Data created by 3.5.36 (at the floor) goes to 3.6 as it is.
    assert!(
        rebuild_events(&cluster, "chain").is_empty()
            && rebuild_events(&cluster, "chainm").is_empty(),
        "no rebuild of data created by {NEWEST_35}"
    );
    // Pod by Pod, its UID and image (readiness may blink on a loaded machine).
    let identities = |pods: &PodFacts| -> Vec<(String, String, String)> {
        pods.iter()
            .map(|(name, (uid, image, _))| (name.clone(), uid.clone(), image.clone()))
            .collect()
    };
    assert_eq!(
        identities(&pods(&cluster, "down").await),
        identities(&mirrored),
        "down: no Pod restarted for its rewritten image in {:.0} s",
        quiet_since.elapsed().as_secs_f64()
    );
    println!(
        "down: images rewritten by admission, no Pod restarted in {:.0} s",
        quiet_since.elapsed().as_secs_f64()
    );

    // 4. and 5. One minor down on both clusters at once: 3.6.17 → 3.5.36 (rewritten images: a
    //    version change still rolls) and 3.7.4 → 3.6.17.
    let (down, _) = tokio::join!(
        downgrade(&cluster, "down", support::DEFAULT_VERSION, NEWEST_35),
        downgrade(&cluster, "chain", NEWEST_37, support::DEFAULT_VERSION)
    );
    assert_rewritten("down", &down);
    println!("whole test {:.1} s", test_started.elapsed().as_secs_f64());
}
