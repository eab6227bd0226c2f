//! Volumes from API objects: a claim keeps its data across Pods and goes with the claim, an
//! emptyDir does not outlive its Pod, secret and configMap files follow their source, a memory
//! volume has its size, the service-account files are mounted (needs root).

mod kubelet_support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kubelet_support::{pod_manifest, shell_container};
use serde_json::json;

const LIMIT: Duration = Duration::from_secs(60);

fn writer() -> serde_json::Value {
    let script = "echo run >> /data/log; echo run >> /scratch/log; \
                  echo claim=$(wc -l < /data/log) scratch=$(wc -l < /scratch/log); sleep 3600";
    let mut pod = pod_manifest(
        "writer",
        json!({}),
        None,
        json!([shell_container("main", script)]),
    );
    pod["spec"]["containers"][0]["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}, {"name": "scratch", "mountPath": "/scratch"}]);
    pod["spec"]["volumes"] = json!([{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}, {"name": "scratch", "emptyDir": {}}]);
    pod
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_keeps_its_data_across_pods_and_an_empty_dir_does_not() {
    let cluster = kubelet_support::start().await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(cluster.client(), "default");
    cluster
        .create::<PersistentVolumeClaim>("default", json!({
            "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        }))
        .await;
    cluster
        .eventually("the claim bound and protected", LIMIT, || async {
            claims
                .get("data")
                .await
                .ok()
                .and_then(|c| c.metadata.finalizers)
                .is_some_and(|f| f.contains(&"kubernetes.io/pvc-protection".to_string()))
        })
        .await;
    let bound = claims.get("data").await.unwrap().status.unwrap();
    assert_eq!(bound.phase.as_deref(), Some("Bound"));
    assert_eq!(bound.capacity.unwrap()["storage"].0, "1Gi");

    cluster.create::<Pod>("default", writer()).await;
    cluster
        .eventually("the first run", LIMIT, || async {
            cluster
                .logs("default", "writer", "main")
                .await
                .contains("claim=1 scratch=1")
        })
        .await;
    cluster
        .pods("default")
        .delete("writer", &DeleteParams::default())
        .await
        .unwrap();
    cluster.wait_gone("default", "writer", LIMIT).await;
    cluster.create::<Pod>("default", writer()).await;
    cluster
        .eventually("the second run", LIMIT, || async {
            cluster
                .logs("default", "writer", "main")
                .await
                .contains("claim=2 scratch=1")
        })
        .await;

    // Deleting the claim while a Pod uses it leaves it Terminating; the Pod's end lets it go.
    let directory = cluster
        .runtime()
        .persistent_volumes()
        .claim_path("default", "data")
        .unwrap();
    assert!(directory.join("log").exists());
    claims
        .delete("data", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        claims
            .get("data")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some(),
        "protected while in use"
    );
    assert!(directory.join("log").exists());
    cluster
        .pods("default")
        .delete("writer", &DeleteParams::default())
        .await
        .unwrap();
    cluster
        .eventually("the claim gone", LIMIT, || async {
            matches!(claims.get_opt("data").await, Ok(None))
        })
        .await;
    cluster
        .eventually("the claim's data gone", LIMIT, || async {
            !directory.exists()
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_and_config_map_files_follow_their_source_and_memory_volumes_have_their_size() {
    let cluster = kubelet_support::start().await;
    cluster
        .create::<ConfigMap>(
            "default",
            json!({"metadata": {"name": "settings"}, "data": {"mode": "fast", "other": "x"}}),
        )
        .await;
    cluster
        .create::<Secret>(
            "default",
            json!({"metadata": {"name": "creds"}, "stringData": {"password": "hunter2"}}),
        )
        .await;
    let script = "echo password=$PASSWORD; stat -c 'mode=%a' /secret/..data/pw; \
                  if dd if=/dev/zero of=/shm/big bs=1024 count=2048 2>/dev/null; then echo shm=unbounded; else echo shm=full; fi; \
                  ls /var/run/secrets/kubernetes.io/serviceaccount; cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; echo; \
                  while true; do echo config=$(cat /config/mode); sleep 0.2; done";
    let mut pod = pod_manifest(
        "reader",
        json!({}),
        None,
        json!([shell_container("main", script)]),
    );
    pod["spec"]["containers"][0]["env"] = json!([{"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}}]);
    pod["spec"]["containers"][0]["volumeMounts"] = json!([
        {"name": "config", "mountPath": "/config"}, {"name": "secret", "mountPath": "/secret"}, {"name": "shm", "mountPath": "/shm"}]);
    pod["spec"]["volumes"] = json!([
        {"name": "config", "configMap": {"name": "settings", "items": [{"key": "mode", "path": "mode"}]}},
        {"name": "secret", "secret": {"secretName": "creds", "items": [{"key": "password", "path": "pw"}], "defaultMode": 0o400}},
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
    ]);
    cluster.create::<Pod>("default", pod).await;
    cluster
        .eventually("the first reading", LIMIT, || async {
            cluster
                .logs("default", "reader", "main")
                .await
                .contains("config=fast")
        })
        .await;
    let log = cluster.logs("default", "reader", "main").await;
    for expected in [
        "password=hunter2",
        "mode=400",
        "shm=full",
        "ca.crt\nnamespace\ntoken\ndefault",
    ] {
        assert!(log.contains(expected), "{expected:?} missing from:\n{log}");
    }
    let config_maps: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    config_maps
        .patch(
            "settings",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"mode": "slow"}})),
        )
        .await
        .unwrap();
    cluster
        .eventually("the file following its ConfigMap", LIMIT, || async {
            cluster
                .logs("default", "reader", "main")
                .await
                .contains("config=slow")
        })
        .await;
}

/// As Kubernetes: a claim without a class gets the default StorageClass; a claim grows only
/// when its StorageClass allows expansion (the `PersistentVolumeClaimResize` admission
/// plugin's words otherwise), never shrinks, and a grown claim reports its new capacity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_grows_only_where_its_storage_class_allows_expansion() {
    use k8s_openapi::api::storage::v1::StorageClass;
    use kube::api::PostParams;
    let cluster = kubelet_support::start().await;
    let classes: Api<StorageClass> = Api::all(cluster.client());
    for (name, expand, default) in [("fixed", false, true), ("expandable", true, false)] {
        let class: StorageClass = serde_json::from_value(json!({
            "metadata": {"name": name, "annotations": {
                "storageclass.kubernetes.io/is-default-class": default.to_string()}},
            "provisioner": "kube-sandbox/local",
            "allowVolumeExpansion": expand,
        }))
        .unwrap();
        classes
            .create(&PostParams::default(), &class)
            .await
            .unwrap();
    }
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(cluster.client(), "default");
    for (name, class) in [("plain", None), ("grows", Some("expandable"))] {
        let mut manifest = json!({
            "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
        });
        if let Some(class) = class {
            manifest["spec"]["storageClassName"] = json!(class);
        }
        cluster
            .create::<PersistentVolumeClaim>("default", manifest)
            .await;
    }
    let plain = claims.get("plain").await.unwrap();
    assert_eq!(
        plain.spec.unwrap().storage_class_name.as_deref(),
        Some("fixed"),
        "the default StorageClass"
    );
    let grow = |size: &str| json!({"spec": {"resources": {"requests": {"storage": size}}}});
    let refused = claims
        .patch(
            "plain",
            &PatchParams::default(),
            &Patch::Merge(&grow("2Gi")),
        )
        .await
        .unwrap_err();
    match refused {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 403, "{status:?}");
            assert!(
                status.message.contains(
                    "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize"
                ),
                "{status:?}"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let shrink = claims
        .patch(
            "grows",
            &PatchParams::default(),
            &Patch::Merge(&grow("512Mi")),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&shrink, kube::Error::Api(s) if s.code == 422 && s.message.contains("can not be less than previous value")),
        "{shrink:?}"
    );
    claims
        .patch(
            "grows",
            &PatchParams::default(),
            &Patch::Merge(&grow("2Gi")),
        )
        .await
        .expect("an expandable class lets the claim grow");
    cluster
        .eventually("the grown capacity", LIMIT, || async {
            claims
                .get("grows")
                .await
                .ok()
                .and_then(|c| c.status?.capacity)
                .is_some_and(|c| c["storage"].0 == "2Gi")
        })
        .await;
    // Once the class allows it, the first claim grows too.
    classes
        .patch(
            "fixed",
            &PatchParams::default(),
            &Patch::Merge(&json!({"allowVolumeExpansion": true})),
        )
        .await
        .unwrap();
    claims
        .patch(
            "plain",
            &PatchParams::default(),
            &Patch::Merge(&grow("3Gi")),
        )
        .await
        .expect("the class allows expansion now");
    assert_eq!(
        claims
            .get("plain")
            .await
            .unwrap()
            .spec
            .unwrap()
            .resources
            .unwrap()
            .requests
            .unwrap()["storage"]
            .0,
        "3Gi"
    );
}
