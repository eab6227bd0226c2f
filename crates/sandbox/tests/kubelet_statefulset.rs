//! StatefulSets on the nodes, driven with kubectl as a user would (needs root): ordered Pods
//! `<set>-N` with their claims and DNS names, a lost Pod made again on its claim, scale-down
//! from the highest ordinal leaving the claims, `kubectl delete --cascade=orphan` leaving the
//! Pods running without owner, and a new set of the same name adopting them in place.

mod kubelet_support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, ListParams};

const LIMIT: Duration = Duration::from_secs(90);

/// Each start appends the Pod's hostname to `/data/starts` on its claim, then serves readiness
/// through a file the probe checks.
const MANIFEST: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: {app: web}
  ports: [{name: x, port: 80}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: web, namespace: default}
spec:
  replicas: 3
  serviceName: web
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: main
          image: sandbox.local/tools:latest
          command: [/bin/sh, -c, "hostname >> /data/starts; touch /tmp/ready; exec sleep 1000"]
          readinessProbe:
            exec: {command: [test, -f, /tmp/ready]}
            periodSeconds: 1
          volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
    - metadata: {name: data, labels: {tier: disk}}
      spec:
        accessModes: [ReadWriteOnce]
        resources: {requests: {storage: 10Mi}}
"#;

async fn pod_names(pods: &Api<Pod>) -> Vec<String> {
    let mut names: Vec<String> = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statefulset_keeps_identities_claims_and_orphans() {
    let cluster = kubelet_support::start().await;
    cluster.apply(MANIFEST).await;
    cluster
        .kubectl(&["rollout", "status", "statefulset/web", "--timeout=90s"])
        .await;
    let pods = cluster.pods("default");
    assert_eq!(pod_names(&pods).await, ["web-0", "web-1", "web-2"]);
    let sets: Api<StatefulSet> = Api::namespaced(cluster.client(), "default");
    let set = sets.get("web").await.unwrap();
    let set_uid = set.metadata.uid.clone().unwrap();
    let status = set.status.clone().unwrap();
    assert_eq!(
        (status.replicas, status.ready_replicas),
        (3, Some(3)),
        "{status:?}"
    );
    // OrderedReady: each Pod was created only after the one before it was Ready.
    let created = |p: &Pod| p.metadata.creation_timestamp.clone().unwrap().0;
    let (p0, p1) = (
        pods.get("web-0").await.unwrap(),
        pods.get("web-1").await.unwrap(),
    );
    assert!(created(&p0) <= created(&p1));
    let ready_at = kubelet_support::condition(&p0, "Ready");
    assert_eq!(ready_at, Some("True"));
    let spec = p1.spec.clone().unwrap();
    assert_eq!(
        (spec.hostname.as_deref(), spec.subdomain.as_deref()),
        (Some("web-1"), Some("web"))
    );
    assert_eq!(
        p1.metadata.labels.as_ref().unwrap()["statefulset.kubernetes.io/pod-name"],
        "web-1"
    );
    let owner = &p1.metadata.owner_references.clone().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("StatefulSet", set_uid.as_str())
    );
    // Claims per ordinal, labelled with the template's and the selector's labels, no owner.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(cluster.client(), "default");
    for i in 0..3 {
        let claim = claims.get(&format!("data-web-{i}")).await.unwrap();
        let labels = claim.metadata.labels.unwrap();
        assert_eq!(
            (labels["tier"].as_str(), labels["app"].as_str()),
            ("disk", "web")
        );
        assert!(claim.metadata.owner_references.is_none());
    }
    // The stable DNS name through the headless Service.
    let address = cluster
        .network()
        .lookup("web-2.web.default.svc")
        .await
        .unwrap();
    assert_eq!(
        address[0].to_string(),
        kubelet_support::pod_ip(&pods.get("web-2").await.unwrap())
    );

    // A deleted Pod comes back with the same name on the same claim.
    let old_uid = p1.metadata.uid.clone().unwrap();
    cluster
        .kubectl(&["delete", "pod", "web-1", "--wait=false"])
        .await;
    cluster
        .eventually("web-1 made again and Ready", LIMIT, || async {
            pods.get("web-1").await.is_ok_and(|p| {
                p.metadata.uid.as_deref() != Some(old_uid.as_str()) && kubelet_support::is_ready(&p)
            })
        })
        .await;
    let starts = cluster
        .kubectl(&["exec", "web-1", "--", "cat", "/data/starts"])
        .await;
    assert_eq!(starts, "web-1\nweb-1\n", "the same claim, started twice");

    // Scale-down removes the highest ordinals; the claims stay.
    cluster
        .kubectl(&["scale", "statefulset/web", "--replicas=1"])
        .await;
    cluster
        .eventually("web-1 and web-2 gone", LIMIT, || async {
            pod_names(&pods).await == ["web-0"]
        })
        .await;
    assert!(claims.get("data-web-2").await.is_ok());

    // Orphan deletion: the set goes, its Pod keeps running without an owner.
    let p0_uid = pods.get("web-0").await.unwrap().metadata.uid.unwrap();
    cluster
        .kubectl(&[
            "delete",
            "statefulset",
            "web",
            "--cascade=orphan",
            "--wait=true",
        ])
        .await;
    cluster
        .eventually("the StatefulSet gone", LIMIT, || async {
            sets.get_opt("web").await.unwrap().is_none()
        })
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let orphan = pods.get("web-0").await.unwrap();
    assert_eq!(orphan.metadata.uid.as_deref(), Some(p0_uid.as_str()));
    assert!(
        orphan
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty(),
        "the garbage collector removed the set's reference"
    );
    assert!(kubelet_support::is_ready(&pods.get("web-0").await.unwrap()));

    // A new set of the same name adopts the running Pod instead of making another.
    cluster.apply(MANIFEST).await;
    cluster
        .kubectl(&["scale", "statefulset/web", "--replicas=1"])
        .await;
    let new_uid = sets.get("web").await.unwrap().metadata.uid.unwrap();
    assert_ne!(new_uid, set_uid);
    cluster
        .eventually("web-0 adopted", LIMIT, || async {
            pods.get("web-0").await.is_ok_and(|p| {
                p.metadata
                    .owner_references
                    .unwrap_or_default()
                    .iter()
                    .any(|r| r.uid == new_uid && r.controller == Some(true))
            })
        })
        .await;
    assert_eq!(
        pods.get("web-0").await.unwrap().metadata.uid.as_deref(),
        Some(p0_uid.as_str()),
        "adopted in place, not made again"
    );
}
