//! The EtcdMember object for a new member.

use std::collections::BTreeMap;

use etcd_operator_api::cluster::ObservedClusterSpec;
use etcd_operator_api::labels::{MEMBER_FINALIZER, member_labels};
use etcd_operator_api::member::EtcdMemberTls;
use etcd_operator_api::{EtcdCluster, EtcdMember, EtcdMemberSpec};
use k8s_openapi::api::core::v1::LocalObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::metadata::{cluster_owner_reference, non_empty, with_additional_metadata};
use super::service::cluster_name;
use super::{BuildError, cluster_peer_scheme, peer_url};

/// A new EtcdMember `name` of `cluster`. Its spec is a copy of the cluster's latched target
/// (`status.observed`) at this moment, as the reference operator does: later spec changes
/// apply to members created afterwards. It is owned by the cluster and carries the
/// `member-cleanup` finalizer, so it leaves etcd (MemberRemove) before its Pod and PVC go.
///
/// The seed (`bootstrap`) starts a new cluster alone: its initial cluster is itself. Other
/// members get theirs from etcd's member list when they join, so theirs starts empty.
pub fn new_member(
    cluster: &EtcdCluster,
    name: &str,
    bootstrap: bool,
) -> Result<EtcdMember, BuildError> {
    let cluster_name = cluster_name(cluster)?;
    let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
    let status = cluster.status.clone().unwrap_or_default();
    let target = status.observed.clone().ok_or(BuildError::NotLatched {
        field: "status.observed",
    })?;
    let token = status.cluster_token.clone().ok_or(BuildError::NotLatched {
        field: "status.clusterToken",
    })?;
    let ObservedClusterSpec {
        version,
        storage,
        resources,
        affinity,
        topology_spread_constraints,
        additional_metadata,
        options,
        image_pull_secrets,
        ..
    } = target;
    let (labels, annotations) = with_additional_metadata(
        member_labels(&cluster_name, name),
        BTreeMap::new(),
        additional_metadata.as_ref(),
    );
    let restore = cluster
        .spec
        .bootstrap
        .as_ref()
        .and_then(|b| b.restore.clone())
        .filter(|_| bootstrap);
    Ok(EtcdMember {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.clone()),
            labels: non_empty(labels),
            annotations: non_empty(annotations),
            owner_references: Some(vec![cluster_owner_reference(cluster)?]),
            finalizers: Some(vec![MEMBER_FINALIZER.to_string()]),
            ..Default::default()
        },
        spec: EtcdMemberSpec {
            cluster_name: cluster_name.clone(),
            version,
            storage,
            resources,
            additional_metadata,
            affinity,
            topology_spread_constraints,
            options,
            image_pull_secrets,
            bootstrap: bootstrap.then_some(true),
            initial_cluster: if bootstrap {
                seed_initial_cluster(cluster, name)
            } else {
                String::new()
            },
            cluster_token: token,
            replicas: Some(1),
            dormant: None,
            tls: member_tls(cluster, &cluster_name, name),
            restore,
        },
        status: None,
    })
}

/// The seed's `--initial-cluster`: itself alone.
pub fn seed_initial_cluster(cluster: &EtcdCluster, seed: &str) -> String {
    let cluster_name = cluster.metadata.name.as_deref().unwrap_or_default();
    let namespace = cluster.metadata.namespace.as_deref().unwrap_or_default();
    format!(
        "{seed}={}",
        peer_url(cluster_peer_scheme(cluster), seed, cluster_name, namespace)
    )
}

/// What a member's Pod needs of the cluster's TLS: the Secret names (user-provided, the ones
/// cert-manager fills, `<cluster>-server-tls` and `<cluster>-peer-tls`, or the member's own
/// operator-issued `<member>-tls`, which serves both listeners) and whether clients must
/// present certificates.
fn member_tls(cluster: &EtcdCluster, name: &str, member_name: &str) -> Option<EtcdMemberTls> {
    let Some(tls) = cluster.spec.tls.as_ref() else {
        return super::cluster_peer_auto_tls(cluster).then(|| EtcdMemberTls {
            peer_auto_tls: Some(true),
            ..Default::default()
        });
    };
    let reference = |n: String| Some(LocalObjectReference { name: n });
    let mut member = EtcdMemberTls::default();
    if let Some(client) = &tls.client {
        let own = crate::security::issuer::member_secret_name(member_name);
        member.client_server_secret_ref = match (&client.server_secret_ref, &client.cert_manager) {
            (Some(secret), _) => Some(secret.clone()),
            (None, Some(_)) => reference(format!("{name}-server-tls")),
            (None, None) if client.operator_issued.is_some() => reference(own),
            (None, None) => None,
        };
        let mutual = client.operator_client_secret_ref.is_some()
            || client
                .cert_manager
                .as_ref()
                .is_some_and(|c| c.operator_client_issuer_ref.is_some())
            || client
                .operator_issued
                .as_ref()
                .is_some_and(|o| o.is_mutual());
        member.client_mtls = mutual.then_some(true);
    }
    if let Some(peer) = &tls.peer {
        member.peer_secret_ref = match (&peer.secret_ref, &peer.cert_manager) {
            (Some(secret), _) => Some(secret.clone()),
            (None, Some(_)) => reference(format!("{name}-peer-tls")),
            (None, None) if peer.operator_issued.is_some() => {
                reference(crate::security::issuer::member_secret_name(member_name))
            }
            (None, None) => None,
        };
    } else if super::cluster_peer_auto_tls(cluster) {
        member.peer_auto_tls = Some(true);
    }
    (member != EtcdMemberTls::default()).then_some(member)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::tests_support::latched_cluster;
    use etcd_operator_api::cluster::{ClientTls, EtcdClusterTls, PeerCertManagerTls, PeerTls};
    use etcd_operator_api::shared::EtcdOptions;

    #[test]
    fn a_cluster_migrated_with_peer_auto_tls_gives_its_new_members_the_same() {
        let mut cluster = latched_cluster("etcd", 3);
        let plain = new_member(&cluster, "etcd-3", false).unwrap();
        assert_eq!(plain.spec.tls, None);
        cluster.metadata.annotations = Some(
            [(
                crate::build::PEER_AUTO_TLS_ANNOTATION.to_string(),
                "true".to_string(),
            )]
            .into(),
        );
        let member = new_member(&cluster, "etcd-3", false).unwrap();
        assert_eq!(member.spec.tls.as_ref().unwrap().peer_auto_tls, Some(true));
        assert_eq!(
            crate::build::member_peer_url(&member),
            "https://etcd-3.etcd.prod.svc:2380"
        );
        let seed = new_member(&cluster, "etcd-0", true).unwrap();
        assert!(
            seed.spec.initial_cluster.contains("https://"),
            "{}",
            seed.spec.initial_cluster
        );
        // With client TLS too, the peer side still follows the annotation.
        cluster.spec.tls = Some(EtcdClusterTls {
            client: Some(ClientTls {
                server_secret_ref: Some(LocalObjectReference {
                    name: "server".into(),
                }),
                ..Default::default()
            }),
            ..Default::default()
        });
        let member = new_member(&cluster, "etcd-3", false).unwrap();
        let tls = member.spec.tls.unwrap();
        assert_eq!(tls.peer_auto_tls, Some(true));
        assert_eq!(tls.client_server_secret_ref.unwrap().name, "server");
        // Real peer TLS wins.
        cluster.spec.tls.as_mut().unwrap().peer = Some(PeerTls {
            secret_ref: Some(LocalObjectReference {
                name: "peer".into(),
            }),
            ..Default::default()
        });
        let member = new_member(&cluster, "etcd-3", false).unwrap();
        let tls = member.spec.tls.unwrap();
        assert_eq!(tls.peer_auto_tls, None);
        assert_eq!(tls.peer_secret_ref.unwrap().name, "peer");
    }

    #[test]
    fn new_member_copies_the_latched_target() {
        let mut cluster = latched_cluster("etcd", 3);
        let observed = cluster.status.as_mut().unwrap().observed.as_mut().unwrap();
        observed.version = "3.4.23".into();
        observed.options = Some(EtcdOptions {
            snapshot_count: Some(5),
            ..Default::default()
        });
        // A spec change not yet latched does not reach the member.
        cluster.spec.version = "3.5.1".into();
        let member = new_member(&cluster, "etcd-1", false).unwrap();
        assert_eq!(member.spec.version, "3.4.23");
        assert_eq!(
            member.spec.options.as_ref().unwrap().snapshot_count,
            Some(5)
        );
        assert_eq!(member.spec.cluster_name, "etcd");
        assert_eq!(member.spec.cluster_token, "prod-etcd-uid-etcd");
        assert_eq!(member.spec.initial_cluster, "");
        assert_eq!(member.spec.bootstrap, None);
        assert_eq!(member.spec.replicas, Some(1));
        assert_eq!(
            member.metadata.finalizers.as_deref(),
            Some(&[MEMBER_FINALIZER.to_string()][..])
        );
        let owner = &member.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("EtcdCluster", "etcd")
        );
        assert_eq!(
            member.metadata.labels.unwrap()["app.kubernetes.io/component"],
            "etcd-1"
        );
    }

    #[test]
    fn seed_forms_a_cluster_of_itself() {
        let member = new_member(&latched_cluster("etcd", 3), "etcd-0", true).unwrap();
        assert_eq!(member.spec.bootstrap, Some(true));
        assert_eq!(
            member.spec.initial_cluster,
            "etcd-0=http://etcd-0.etcd.prod.svc:2380"
        );
    }

    #[test]
    fn members_need_a_latched_cluster() {
        let cluster = crate::build::tests_support::cluster("etcd", 3);
        assert_eq!(
            new_member(&cluster, "etcd-0", true),
            Err(BuildError::NotLatched {
                field: "status.observed"
            })
        );
    }

    #[test]
    fn tls_secret_names_resolve_for_both_sources() {
        let mut cluster = latched_cluster("etcd", 3);
        cluster.spec.tls = Some(EtcdClusterTls {
            client: Some(ClientTls {
                server_secret_ref: Some(LocalObjectReference { name: "srv".into() }),
                operator_client_secret_ref: Some(LocalObjectReference { name: "op".into() }),
                cert_manager: None,
                operator_issued: None,
            }),
            peer: Some(PeerTls {
                secret_ref: None,
                cert_manager: Some(PeerCertManagerTls::default()),
                operator_issued: None,
            }),
        });
        let tls = new_member(&cluster, "etcd-0", true)
            .unwrap()
            .spec
            .tls
            .unwrap();
        assert_eq!(tls.client_server_secret_ref.unwrap().name, "srv");
        assert_eq!(tls.client_mtls, Some(true));
        assert_eq!(tls.peer_secret_ref.unwrap().name, "etcd-peer-tls");
        assert_eq!(
            new_member(&cluster, "etcd-0", true)
                .unwrap()
                .spec
                .initial_cluster,
            "etcd-0=https://etcd-0.etcd.prod.svc:2380"
        );
    }
}
