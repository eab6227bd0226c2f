//! Small API objects for the builders' and the planner's tests.

use etcd_operator_api::cluster::{EtcdClusterStatus, ObservedClusterSpec};
use etcd_operator_api::labels::{MEMBER_FINALIZER, member_labels};
use etcd_operator_api::member::EtcdMemberStatus;
use etcd_operator_api::shared::StorageSpec;
use etcd_operator_api::{EtcdCluster, EtcdClusterSpec, EtcdMember, EtcdMemberSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub const NAMESPACE: &str = "prod";

/// An EtcdCluster `name` in namespace `prod` with `replicas`, version 3.5.1, as the API server
/// returns it (uid, generation 1).
pub fn cluster(name: &str, replicas: i32) -> EtcdCluster {
    EtcdCluster {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(NAMESPACE.to_string()),
            uid: Some(format!("uid-{name}")),
            generation: Some(1),
            ..Default::default()
        },
        spec: EtcdClusterSpec {
            replicas: Some(replicas),
            version: "3.5.1".to_string(),
            ..Default::default()
        },
        status: None,
    }
}

/// `cluster` with its token and target latched, as after the first reconcile.
pub fn latched_cluster(name: &str, replicas: i32) -> EtcdCluster {
    let mut cluster = cluster(name, replicas);
    cluster.status = Some(EtcdClusterStatus {
        cluster_token: Some(format!("{NAMESPACE}-{name}-uid-{name}")),
        observed: Some(ObservedClusterSpec {
            replicas,
            version: "3.5.1".to_string(),
            storage: StorageSpec::default(),
            ..Default::default()
        }),
        ..Default::default()
    });
    cluster
}

/// An EtcdMember `name` of `cluster` as the API server returns it: labels, finalizer, uid.
pub fn member(cluster: &str, name: &str) -> EtcdMember {
    EtcdMember {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(NAMESPACE.to_string()),
            uid: Some(format!("uid-{name}")),
            generation: Some(1),
            labels: Some(member_labels(cluster, name)),
            finalizers: Some(vec![MEMBER_FINALIZER.to_string()]),
            ..Default::default()
        },
        spec: EtcdMemberSpec {
            cluster_name: cluster.to_string(),
            version: "3.5.1".to_string(),
            storage: StorageSpec::default(),
            cluster_token: format!("{NAMESPACE}-{cluster}-uid-{cluster}"),
            ..Default::default()
        },
        status: Some(EtcdMemberStatus::default()),
    }
}

/// The etcd command line a Pod amounts to: its command, then the flags etcd takes from the
/// `ETCD_*` environment, with each `fieldRef` to an annotation resolved as the kubelet does.
pub fn effective_command(pod: &k8s_openapi::api::core::v1::Pod) -> Vec<String> {
    let container = &pod.spec.as_ref().unwrap().containers[0];
    let mut command = container.command.clone().unwrap();
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    for env in container.env.iter().flatten() {
        let value = match (&env.value, &env.value_from) {
            (Some(v), _) => v.clone(),
            (None, Some(from)) => {
                let path = &from.field_ref.as_ref().unwrap().field_path;
                let key = path
                    .strip_prefix("metadata.annotations['")
                    .and_then(|p| p.strip_suffix("']"))
                    .unwrap_or_else(|| panic!("unexpected fieldRef {path}"));
                annotations.get(key).cloned().unwrap_or_default()
            }
            (None, None) => String::new(),
        };
        if let Some(flag) = env.name.strip_prefix("ETCD_") {
            command.push(format!(
                "--{}={value}",
                flag.to_lowercase().replace('_', "-")
            ));
        }
    }
    command
}
