//! Pure builders of the Kubernetes objects the operator owns, one file per kind. Each takes API
//! objects (and [`OperatorSettings`]) and returns a k8s-openapi object; none does I/O.
//!
//! Naming and addressing live here too, because the planner matches etcd members to
//! EtcdMembers by exactly the peer URL the Pod builder advertises ([`peer_url`]).

mod event;
mod member;
mod metadata;
mod pdb;
mod pod;
mod pvc;
mod restore;
mod rollout;
mod service;

pub use event::{EventType, REPORTING_COMPONENT, event, event_about};
pub use member::{new_member, seed_initial_cluster};
pub use metadata::{
    ADDITIONAL_METADATA_RECORD, RESERVED_PREFIX, cluster_owner_reference, member_owner_reference,
    metadata_record, recorded_metadata, with_additional_metadata,
};
pub use pdb::{pdb_min_available, voter_pdb};
pub use pod::{
    CLIENT_PORT, DATA_DIR, DISCOVERY_FAILED, ETCD_CONTAINER, InitialClusterState, METRICS_PORT,
    PEER_PORT, PodStart, StartKind, member_pod,
};
pub use pvc::member_pvc;
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

#[cfg(test)]
pub(crate) mod tests_support;

use etcd_operator_api::{EtcdCluster, EtcdMember};

/// The etcd image repository used when the operator is not told otherwise.
pub const DEFAULT_ETCD_IMAGE_REPOSITORY: &str = "quay.io/coreos/etcd";

/// Kubernetes' default cluster DNS domain.
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";

/// Operator-wide settings: what shapes the objects it builds, and how patiently it repairs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorSettings {
    /// Repository of the etcd image (registry and path, no tag); the tag is `v<version>`.
    pub etcd_image_repository: String,
    /// Grace periods and backoff of the repair ladder.
    pub repair: crate::plan::RepairTiming,
    /// The cluster's DNS domain (`cluster.local`), for certificate names.
    pub cluster_domain: String,
    /// The operator's own image, run by the restore init containers of a cluster
    /// bootstrapped from a snapshot (`etcd-operator restore-fetch` / `restore-commit`).
    pub agent_image: String,
    /// The directory under which `destination.local` snapshots may be written (a volume
    /// mounted into the operator's Pod).
    pub local_store_root: std::path::PathBuf,
}

/// The operator's image when it is not told otherwise (what `deploy/operator` runs).
pub const DEFAULT_AGENT_IMAGE: &str = "ghcr.io/etcd-operator-rs/etcd-operator:v0.1.0";

impl Default for OperatorSettings {
    fn default() -> Self {
        OperatorSettings {
            etcd_image_repository: DEFAULT_ETCD_IMAGE_REPOSITORY.to_string(),
            repair: Default::default(),
            cluster_domain: DEFAULT_CLUSTER_DOMAIN.to_string(),
            agent_image: DEFAULT_AGENT_IMAGE.to_string(),
            local_store_root: crate::domain::location::DEFAULT_LOCAL_ROOT.into(),
        }
    }
}

impl OperatorSettings {
    /// The etcd image for `version` (`3.5.1` becomes `<repository>:v3.5.1`).
    pub fn etcd_image(&self, version: &str) -> String {
        format!("{}:v{version}", self.etcd_image_repository)
    }
}

/// Why an object could not be built: the input lacks something the API server always sets.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error("{kind} has no metadata.{field}; it must be read from the API server first")]
    MissingMetadata {
        kind: &'static str,
        field: &'static str,
    },
    #[error("the EtcdCluster has no {field} yet; it is latched on the first reconcile")]
    NotLatched { field: &'static str },
}

/// The name of the EtcdMember (and its Pod) with `ordinal` in `cluster`: `<cluster>-<ordinal>`.
pub fn member_name(cluster: &str, ordinal: u32) -> String {
    format!("{cluster}-{ordinal}")
}

/// The ordinal of a member named `<cluster>-<ordinal>`; `None` for other names (members made
/// by another operator), which sort after every ordinal member.
pub fn member_ordinal(cluster: &str, member: &str) -> Option<u32> {
    let suffix = member.strip_prefix(cluster)?.strip_prefix('-')?;
    if suffix.is_empty() || (suffix.len() > 1 && suffix.starts_with('0')) {
        return None;
    }
    suffix.parse().ok()
}

/// The name of the headless Service that gives members their DNS names: the cluster's name.
pub fn headless_service_name(cluster: &str) -> String {
    cluster.to_string()
}

/// The name of the client Service: `<cluster>-client`.
pub fn client_service_name(cluster: &str) -> String {
    format!("{cluster}-client")
}

/// The name of a member's data PVC: `data-<member>`.
pub fn pvc_name(member: &str) -> String {
    format!("data-{member}")
}

/// A member's stable DNS name through the headless Service: `<member>.<cluster>.<ns>.svc`.
/// The short `svc` form (not `svc.cluster.local`) keeps the URLs independent of the cluster
/// domain, and is what the reference operator advertises.
pub fn member_host(member: &str, cluster: &str, namespace: &str) -> String {
    format!(
        "{member}.{}.{namespace}.svc",
        headless_service_name(cluster)
    )
}

/// The peer URL a member advertises, and the key the planner matches etcd's member list on.
pub fn peer_url(scheme: &str, member: &str, cluster: &str, namespace: &str) -> String {
    format!(
        "{scheme}://{}:{PEER_PORT}",
        member_host(member, cluster, namespace)
    )
}

/// The client URL of a member.
pub fn client_url(scheme: &str, member: &str, cluster: &str, namespace: &str) -> String {
    format!(
        "{scheme}://{}:{CLIENT_PORT}",
        member_host(member, cluster, namespace)
    )
}

/// `https` when the member's peer API uses TLS (a peer Secret or legacy auto-TLS).
pub fn member_peer_scheme(member: &EtcdMember) -> &'static str {
    let tls = member.spec.tls.as_ref();
    let secured = tls.is_some_and(|t| t.peer_secret_ref.is_some() || t.peer_auto_tls == Some(true));
    if secured { "https" } else { "http" }
}

/// `https` when the member's client API uses TLS.
pub fn member_client_scheme(member: &EtcdMember) -> &'static str {
    let tls = member.spec.tls.as_ref();
    if tls.is_some_and(|t| t.client_server_secret_ref.is_some()) {
        "https"
    } else {
        "http"
    }
}

/// `https` when the cluster's peer API uses TLS (its own, or the legacy auto-TLS of
/// [`PEER_AUTO_TLS_ANNOTATION`]).
pub fn cluster_peer_scheme(cluster: &EtcdCluster) -> &'static str {
    let tls = cluster.spec.tls.as_ref();
    if tls.is_some_and(|t| t.peer.is_some()) || cluster_peer_auto_tls(cluster) {
        "https"
    } else {
        "http"
    }
}

/// Annotation on an EtcdCluster migrated from a legacy operator whose members run etcd with
/// `--peer-auto-tls` (the `etcd.aenix.io/v1alpha1` operator's default): every member this
/// operator creates for it runs the same way, so it can peer with the migrated ones. An
/// explicit `spec.tls.peer` wins. Set by `kubectl etcd migrate` (and by the reference's
/// `etcd-migrate`), not meant for new clusters: the peer traffic is encrypted but not
/// authenticated.
pub const PEER_AUTO_TLS_ANNOTATION: &str = "etcd-operator.cozystack.io/peer-auto-tls";

/// Whether the cluster's members run etcd's peer auto-TLS: annotated so, without its own
/// peer TLS.
pub fn cluster_peer_auto_tls(cluster: &EtcdCluster) -> bool {
    let annotated = cluster
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PEER_AUTO_TLS_ANNOTATION))
        .is_some_and(|v| v == "true");
    annotated && cluster.spec.tls.as_ref().is_none_or(|t| t.peer.is_none())
}

/// `https` when the cluster's client API uses TLS.
pub fn cluster_client_scheme(cluster: &EtcdCluster) -> &'static str {
    let tls = cluster.spec.tls.as_ref();
    if tls.is_some_and(|t| t.client.is_some()) {
        "https"
    } else {
        "http"
    }
}

/// Annotation on a member's Pod: a digest of the CA certificates its etcd was started to trust
/// (its Secrets' `ca.crt`). etcd reads them only at start-up; a Pod whose digest differs from
/// what its Secrets hold now is restarted, one member at a time (a CA rotation).
pub const TRUSTED_CA_ANNOTATION: &str = "etcd-operator.cozystack.io/trusted-ca";

/// Annotation the in-place migration tool puts on the EtcdMembers it adopts: the legacy
/// headless Service their (immutable) Pod subdomain and persisted peer URLs use. Members the
/// operator creates never carry it.
pub const HEADLESS_SERVICE_ANNOTATION: &str = "etcd-operator.cozystack.io/headless-service-name";

/// Annotation of adopted members whose data lives in a subdirectory of the volume (the legacy
/// operator kept it under `default.etcd`).
pub const DATA_DIR_SUBPATH_ANNOTATION: &str = "etcd-operator.cozystack.io/data-dir-subpath";

/// The headless Service a member's DNS name hangs off: the cluster's, or for an adopted member
/// the legacy one named by [`HEADLESS_SERVICE_ANNOTATION`].
pub fn member_service_name(member: &EtcdMember) -> String {
    member
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(HEADLESS_SERVICE_ANNOTATION))
        .filter(|v| !v.is_empty())
        .cloned()
        .unwrap_or_else(|| headless_service_name(&member.spec.cluster_name))
}

/// etcd's `--data-dir` for a member: the volume root, or the validated single-component
/// subdirectory of [`DATA_DIR_SUBPATH_ANNOTATION`] (anything else is ignored, so the
/// annotation can never point outside the volume).
pub fn member_data_dir(member: &EtcdMember) -> String {
    let sub = member
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DATA_DIR_SUBPATH_ANNOTATION));
    match sub {
        Some(sub) if is_safe_path_component(sub) => format!("{DATA_DIR}/{sub}"),
        _ => DATA_DIR.to_string(),
    }
}

fn is_safe_path_component(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !s.contains("..")
}

/// The peer URL of an existing EtcdMember (its own TLS, its own name and Service).
pub fn member_peer_url(member: &EtcdMember) -> String {
    format!(
        "{}://{}:{PEER_PORT}",
        member_peer_scheme(member),
        member_dns_name(member)
    )
}

/// The client URL of an existing EtcdMember.
pub fn member_client_url(member: &EtcdMember) -> String {
    format!(
        "{}://{}:{CLIENT_PORT}",
        member_client_scheme(member),
        member_dns_name(member)
    )
}

fn member_dns_name(member: &EtcdMember) -> String {
    format!(
        "{}.{}.{}.svc",
        member.metadata.name.as_deref().unwrap_or_default(),
        member_service_name(member),
        member.metadata.namespace.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
