//! Naming and addressing: the names of the objects of a cluster and its members, their DNS
//! names, peer and client URLs, the ports and the data directory, and the annotations that
//! change them. The planner matches etcd members to EtcdMembers by exactly the peer URL the
//! Pod builder advertises ([`peer_url`]).

use etcd_operator_api::{EtcdCluster, EtcdMember};

pub const CLIENT_PORT: i32 = 2379;
pub const PEER_PORT: i32 = 2380;
/// Plaintext metrics and health listener (`--listen-metrics-urls`), always on, even with TLS,
/// so the kubelet's HTTP probes and scrapers reach it.
pub const METRICS_PORT: i32 = 2381;
/// Where the data volume is mounted; etcd's `--data-dir`.
pub const DATA_DIR: &str = "/var/lib/etcd";

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
/// explicit `spec.tls.peer` wins. Set by `kubectl etcdop migrate` (and by the reference's
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

/// The host name in an existing EtcdMember's peer and client URLs: `<member>.<service>.<ns>.svc`
/// (the service is the cluster's headless Service, or an adopted member's legacy one).
pub fn member_dns_name(member: &EtcdMember) -> String {
    format!(
        "{}.{}.{}.svc",
        member.metadata.name.as_deref().unwrap_or_default(),
        member_service_name(member),
        member.metadata.namespace.as_deref().unwrap_or_default()
    )
}
