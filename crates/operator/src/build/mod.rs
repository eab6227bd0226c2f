//! Pure builders of the Kubernetes objects the operator owns, one file per kind. Each takes API
//! objects (and [`OperatorSettings`](crate::domain::settings::OperatorSettings)) and returns a
//! k8s-openapi object; none does I/O.
//!
//! Naming and addressing live here too (`names`), because the planner matches etcd members to
//! EtcdMembers by exactly the peer URL the Pod builder advertises ([`peer_url`]).

mod error;
mod event;
pub mod flags;
mod member;
mod metadata;
mod names;
mod pdb;
mod pod;
mod pvc;
mod restore;
mod rollout;
mod service;
mod start;

pub use error::BuildError;
pub use event::{EventType, REPORTING_COMPONENT, event, event_about};
pub use member::{new_member, seed_initial_cluster};
pub use metadata::{
    ADDITIONAL_METADATA_RECORD, RESERVED_PREFIX, cluster_owner_reference, member_owner_reference,
    metadata_record, recorded_metadata, with_additional_metadata,
};
pub use names::{
    CLIENT_PORT, DATA_DIR, DATA_DIR_SUBPATH_ANNOTATION, HEADLESS_SERVICE_ANNOTATION, METRICS_PORT,
    PEER_AUTO_TLS_ANNOTATION, PEER_PORT, TRUSTED_CA_ANNOTATION, client_service_name, client_url,
    cluster_client_scheme, cluster_peer_auto_tls, cluster_peer_scheme, headless_service_name,
    member_client_scheme, member_client_url, member_data_dir, member_host, member_name,
    member_ordinal, member_peer_scheme, member_peer_url, member_service_name, peer_url, pvc_name,
};
pub use pdb::{pdb_min_available, voter_pdb};
pub use pod::{
    ETCD_CONTAINER, RENDERED_HASH_ANNOTATION, RENDERED_VERSION_ANNOTATION, etcd_command,
    member_pod, member_rendered_hash, rendered_hash,
};
pub use pvc::{DATA_VERSION_ANNOTATION, member_pvc};
pub use restore::{
    AGE_IDENTITY_ENV, RESTORE_COMMIT_CONTAINER, RESTORE_CONTAINER, RESTORE_FAILED_MARK,
    RESTORE_FETCH_CONTAINER, RESTORE_SOURCE_MOUNT, RESTORE_SOURCE_VOLUME, RESTORE_WORK_DIR,
    fetch_container, parse_restore_failure, restore_containers, restore_failure,
    restore_in_progress, restore_init_containers,
};
pub use rollout::{
    CONFIG_DIGEST_ANNOTATION, MemberConfig, missing_metadata, removed_metadata, replacing_patch,
};
pub use service::{client_service, headless_service, service_drift};
pub use start::{DISCOVERY_FAILED, InitialClusterState, PodStart, StartKind};

#[cfg(test)]
pub(crate) mod tests_support;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::settings::OperatorSettings;

    #[test]
    fn member_names_carry_ordinals() {
        assert_eq!(member_name("etcd", 2), "etcd-2");
        assert_eq!(member_ordinal("etcd", "etcd-2"), Some(2));
        assert_eq!(member_ordinal("etcd", "etcd-10"), Some(10));
        assert_eq!(member_ordinal("etcd", "etcd-x7k2p"), None);
        assert_eq!(member_ordinal("etcd", "etcd-02"), None);
        assert_eq!(member_ordinal("etcd", "etcd-"), None);
        assert_eq!(member_ordinal("etcd", "other-1"), None);
        assert_eq!(member_ordinal("etcd", "etcd-a-1"), None);
    }

    #[test]
    fn urls_use_the_headless_service_dns_name() {
        assert_eq!(
            peer_url("http", "etcd-0", "etcd", "prod"),
            "http://etcd-0.etcd.prod.svc:2380"
        );
        assert_eq!(
            client_url("https", "etcd-0", "etcd", "prod"),
            "https://etcd-0.etcd.prod.svc:2379"
        );
        assert_eq!(pvc_name("etcd-0"), "data-etcd-0");
        assert_eq!(client_service_name("etcd"), "etcd-client");
    }

    #[test]
    fn adopted_members_keep_their_legacy_service_and_data_dir() {
        let mut member = tests_support::member("etcd", "etcd-0");
        assert_eq!(member_peer_url(&member), "http://etcd-0.etcd.prod.svc:2380");
        assert_eq!(member_data_dir(&member), "/var/lib/etcd");
        member.metadata.annotations = Some(std::collections::BTreeMap::from([
            (
                HEADLESS_SERVICE_ANNOTATION.to_string(),
                "etcd-headless".to_string(),
            ),
            (
                DATA_DIR_SUBPATH_ANNOTATION.to_string(),
                "default.etcd".to_string(),
            ),
        ]));
        assert_eq!(
            member_peer_url(&member),
            "http://etcd-0.etcd-headless.prod.svc:2380"
        );
        assert_eq!(
            member_client_url(&member),
            "http://etcd-0.etcd-headless.prod.svc:2379"
        );
        assert_eq!(member_data_dir(&member), "/var/lib/etcd/default.etcd");
        for bad in ["../x", "a/b", "..", "", ".hidden"] {
            member.metadata.annotations = Some(std::collections::BTreeMap::from([(
                DATA_DIR_SUBPATH_ANNOTATION.to_string(),
                bad.to_string(),
            )]));
            assert_eq!(member_data_dir(&member), "/var/lib/etcd", "{bad:?}");
        }
    }

    #[test]
    fn image_is_repository_and_v_tag() {
        let settings = OperatorSettings::default();
        assert_eq!(settings.etcd_image("3.5.1"), "quay.io/coreos/etcd:v3.5.1");
    }
}
