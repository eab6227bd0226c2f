//! Bootstrap of 1, 3 and 5 members at once, by the operator deployed from `deploy/` into a
//! sandbox whose nodes run etcd: each cluster becomes Available with every member a voter
//! that etcd lists under the ID its EtcdMember records, and serves writes.

use etcd_operator_e2e_support as support;

use std::time::{Duration, Instant};

use support::cluster::start_cluster;
use support::{cluster_yaml, create_namespace};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn e2e_bootstrap_one_three_and_five_members() {
    let cluster = start_cluster(3).await;
    cluster.deploy_operator(1).await;
    let client = cluster.client();
    for (namespace, replicas) in [("one", 1), ("three", 3), ("five", 5)] {
        create_namespace(&client, namespace).await;
        cluster.apply(&cluster_yaml("etcd", namespace, replicas, ""));
    }
    let started = Instant::now();
    for (namespace, replicas) in [("one", 1), ("three", 3), ("five", 5)] {
        cluster
            .wait_converged(namespace, "etcd", replicas, Duration::from_secs(180))
            .await;
        eprintln!("{namespace}: converged {:?} after apply", started.elapsed());
        cluster.put(namespace, "etcd", "hello", namespace);
        assert_eq!(
            cluster.get(namespace, "etcd", "hello").unwrap().as_deref(),
            Some(namespace)
        );
    }
}
