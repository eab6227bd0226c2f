//! Bad input through kubectl: manifests the API's validation must reject are rejected with
//! the rule's own message, on create and on update of a running cluster, and nothing changes:
//! the EtcdCluster keeps its spec and generation, its members and Pods are the same objects,
//! and the data is still there.

use etcd_operator_e2e_support as support;

use std::time::Duration;

use etcd_operator_api::EtcdCluster;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;
use support::manual_node::ManualNode;
use support::{
    InProcessOperator, condition, create_namespace, eventually, get_cluster, get_key,
    kubectl_with_stdin, members, operator_identity, put_key, start_sandbox,
};

const NS: &str = "bad-input";

/// Manifests for a new cluster, each with the message its rejection must carry.
const REJECTED_ON_CREATE: &[(&str, &str, &str)] = &[
    (
        "negative replicas",
        "replicas: -1\n  version: \"3.5.1\"\n",
        "spec.replicas",
    ),
    (
        "version latest",
        "replicas: 3\n  version: latest\n",
        "spec.version",
    ),
    (
        "memory with zero replicas",
        "replicas: 0\n  version: \"3.5.1\"\n  storage:\n    medium: Memory\n    size: 1Gi\n",
        "spec.replicas=0 with spec.storage.medium=Memory is unsupported",
    ),
    (
        "memory of size zero",
        "replicas: 1\n  version: \"3.5.1\"\n  storage:\n    medium: Memory\n    size: \"0\"\n",
        "spec.storage.size must be > 0 when spec.storage.medium=Memory",
    ),
    (
        "auth without client TLS",
        "replicas: 1\n  version: \"3.5.1\"\n  auth:\n    enabled: true\n    rootCredentialsSecretRef:\n      name: root\n",
        "spec.auth.enabled requires spec.tls.client",
    ),
];

/// Changes to the running cluster `etcd` (1 member, 1Gi persistent), each with its message.
const REJECTED_ON_UPDATE: &[(&str, &str, &str)] = &[
    (
        "shrinking storage",
        "replicas: 1\n  version: \"3.5.1\"\n  storage:\n    size: 512Mi\n",
        "spec.storage.size cannot be shrunk",
    ),
    (
        "changing the medium",
        "replicas: 1\n  version: \"3.5.1\"\n  storage:\n    size: 1Gi\n    medium: Memory\n",
        "spec.storage.medium is immutable",
    ),
    (
        "adding TLS",
        "replicas: 1\n  version: \"3.5.1\"\n  storage:\n    size: 1Gi\n  tls:\n    client:\n      serverSecretRef:\n        name: tls\n",
        "spec.tls cannot be added to or removed from an existing cluster",
    ),
    (
        "negative replicas",
        "replicas: -3\n  version: \"3.5.1\"\n  storage:\n    size: 1Gi\n",
        "spec.replicas",
    ),
    (
        "version latest",
        "replicas: 1\n  version: latest\n  storage:\n    size: 1Gi\n",
        "spec.version",
    ),
];

fn manifest(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: etcd-operator.cozystack.io/v1alpha2\nkind: EtcdCluster\nmetadata:\n  name: {name}\n  namespace: {NS}\nspec:\n  {spec}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_validation_rejects_bad_manifests_and_nothing_changes() {
    let sandbox = start_sandbox(0).await;
    let client = sandbox.client();
    create_namespace(&client, NS).await;
    let node = ManualNode::new(client.clone(), NS);
    let node_task = tokio::spawn(node.clone().run());
    let identity = operator_identity(&sandbox).await;
    let operator = InProcessOperator::start(&identity, NS, node.url_map());

    for (case, spec, message) in REJECTED_ON_CREATE {
        let (ok, _, stderr) = kubectl_with_stdin(
            &sandbox,
            &["apply", "-f", "-"],
            Some(&manifest("bad", spec)),
        );
        assert!(!ok, "{case}: accepted");
        assert!(stderr.contains(message), "{case}: {stderr}");
    }
    let clusters: Api<EtcdCluster> = Api::namespaced(client.clone(), NS);
    assert!(
        clusters
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let good = "replicas: 1\n  version: \"3.5.1\"\n  storage:\n    size: 1Gi\n";
    let (ok, _, stderr) = kubectl_with_stdin(
        &sandbox,
        &["apply", "-f", "-"],
        Some(&manifest("etcd", good)),
    );
    assert!(ok, "{stderr}");
    let before = eventually(
        "the cluster to be Available",
        Duration::from_secs(60),
        || async {
            let c = get_cluster(&client, NS, "etcd").await;
            let progressing = condition(&c, "Progressing");
            if condition(&c, "Available").as_deref() == Some("True")
                && progressing.as_deref() == Some("False")
            {
                Ok(c)
            } else {
                Err(format!("{:?}", c.status))
            }
        },
    )
    .await;
    put_key(&node.running_client_urls(), "kept", "yes").await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod_uid = pods.get("etcd-0").await.unwrap().metadata.uid;
    let member_uids: Vec<_> = members(&client, NS, "etcd")
        .await
        .into_iter()
        .map(|m| m.metadata.uid)
        .collect();

    for (case, spec, message) in REJECTED_ON_UPDATE {
        let (ok, _, stderr) = kubectl_with_stdin(
            &sandbox,
            &["apply", "-f", "-"],
            Some(&manifest("etcd", spec)),
        );
        assert!(!ok, "{case}: accepted");
        assert!(stderr.contains(message), "{case}: {stderr}");
    }
    // Give the operator time to act on anything that did get through.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = get_cluster(&client, NS, "etcd").await;
    assert_eq!(after.spec, before.spec);
    assert_eq!(after.metadata.generation, before.metadata.generation);
    assert_eq!(pods.get("etcd-0").await.unwrap().metadata.uid, pod_uid);
    let uids: Vec<_> = members(&client, NS, "etcd")
        .await
        .into_iter()
        .map(|m| m.metadata.uid)
        .collect();
    assert_eq!(uids, member_uids);
    assert_eq!(condition(&after, "Available").as_deref(), Some("True"));
    let value = get_key(&node.running_client_urls(), "kept").await.unwrap();
    assert_eq!(value.as_deref(), Some("yes"));

    operator.stop().await;
    node_task.abort();
}
