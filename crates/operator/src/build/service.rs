//! The cluster's two Services: the headless one that gives every member its DNS name, and the
//! client one that applications use.

use std::collections::BTreeMap;

use etcd_operator_api::EtcdCluster;
use etcd_operator_api::labels::{CLUSTER, cluster_labels};
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::metadata::{cluster_owner_reference, non_empty, with_additional_metadata};
use super::names::{CLIENT_PORT, PEER_PORT};
use super::{BuildError, client_service_name, headless_service_name};

/// The headless Service `<cluster>`: `clusterIP: None` and `publishNotReadyAddresses`, so a
/// member's DNS name resolves before it is ready (peers must reach a starting member).
pub fn headless_service(cluster: &EtcdCluster) -> Result<Service, BuildError> {
    let name = cluster_name(cluster)?;
    service(
        cluster,
        headless_service_name(&name),
        ServiceSpec {
            cluster_ip: Some("None".to_string()),
            publish_not_ready_addresses: Some(true),
            selector: Some(selector(&name)),
            ports: Some(vec![port("client", CLIENT_PORT), port("peer", PEER_PORT)]),
            ..Default::default()
        },
    )
}

/// The client Service `<cluster>-client` on port 2379, over ready members only.
pub fn client_service(cluster: &EtcdCluster) -> Result<Service, BuildError> {
    let name = cluster_name(cluster)?;
    service(
        cluster,
        client_service_name(&name),
        ServiceSpec {
            selector: Some(selector(&name)),
            ports: Some(vec![port("client", CLIENT_PORT)]),
            ..Default::default()
        },
    )
}

/// The Service to write when `observed` drifted from `desired` on the fields the operator owns
/// (selector, `publishNotReadyAddresses`, the named ports); `None` when it has not. Everything
/// else (labels added by others, extra ports, the assigned cluster IP) is kept.
pub fn service_drift(observed: &Service, desired: &Service) -> Option<Service> {
    let (Some(have), Some(want)) = (observed.spec.as_ref(), desired.spec.as_ref()) else {
        return desired.spec.as_ref().map(|_| desired.clone());
    };
    let mut fixed = observed.clone();
    let spec = fixed.spec.get_or_insert_with(Default::default);
    let mut changed = false;
    if have.selector != want.selector {
        spec.selector = want.selector.clone();
        changed = true;
    }
    if want.publish_not_ready_addresses.is_some()
        && have.publish_not_ready_addresses != want.publish_not_ready_addresses
    {
        spec.publish_not_ready_addresses = want.publish_not_ready_addresses;
        changed = true;
    }
    let ports = spec.ports.get_or_insert_with(Vec::new);
    for wanted in want.ports.iter().flatten() {
        match ports.iter_mut().find(|p| p.name == wanted.name) {
            Some(existing) if existing.port == wanted.port => {}
            Some(existing) => {
                *existing = wanted.clone();
                changed = true;
            }
            None => {
                ports.push(wanted.clone());
                changed = true;
            }
        }
    }
    changed.then_some(fixed)
}

fn service(cluster: &EtcdCluster, name: String, spec: ServiceSpec) -> Result<Service, BuildError> {
    let cluster_name = cluster_name(cluster)?;
    let (labels, annotations) = with_additional_metadata(
        cluster_labels(&cluster_name),
        BTreeMap::new(),
        target_metadata(cluster),
    );
    let mut annotations = annotations;
    if let Some(record) = super::metadata::metadata_record(target_metadata(cluster)) {
        annotations.insert(
            super::metadata::ADDITIONAL_METADATA_RECORD.to_string(),
            record,
        );
    }
    Ok(Service {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: cluster.metadata.namespace.clone(),
            labels: non_empty(labels),
            annotations: non_empty(annotations),
            owner_references: Some(vec![cluster_owner_reference(cluster)?]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    })
}

/// The additional metadata of the latched target, or of the spec before the first latch.
pub(crate) fn target_metadata(
    cluster: &EtcdCluster,
) -> Option<&etcd_operator_api::shared::AdditionalMetadata> {
    match cluster.status.as_ref().and_then(|s| s.observed.as_ref()) {
        Some(observed) => observed.additional_metadata.as_ref(),
        None => cluster.spec.additional_metadata.as_ref(),
    }
}

pub(crate) fn cluster_name(cluster: &EtcdCluster) -> Result<String, BuildError> {
    cluster
        .metadata
        .name
        .clone()
        .ok_or(BuildError::MissingMetadata {
            kind: "EtcdCluster",
            field: "name",
        })
}

fn selector(cluster: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(CLUSTER.to_string(), cluster.to_string())])
}

fn port(name: &str, number: i32) -> ServicePort {
    ServicePort {
        name: Some(name.to_string()),
        port: number,
        target_port: Some(IntOrString::Int(number)),
        protocol: Some("TCP".to_string()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::tests_support::cluster;

    #[test]
    fn headless_service_publishes_unready_members() {
        let svc = headless_service(&cluster("etcd", 3)).unwrap();
        assert_eq!(svc.metadata.name.as_deref(), Some("etcd"));
        assert_eq!(svc.metadata.namespace.as_deref(), Some("prod"));
        let spec = svc.spec.unwrap();
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(spec.publish_not_ready_addresses, Some(true));
        let ports: Vec<_> = spec
            .ports
            .unwrap()
            .iter()
            .map(|p| (p.name.clone().unwrap(), p.port))
            .collect();
        assert_eq!(
            ports,
            vec![("client".to_string(), 2379), ("peer".to_string(), 2380)]
        );
        assert_eq!(
            spec.selector.unwrap(),
            BTreeMap::from([(CLUSTER.to_string(), "etcd".to_string())])
        );
        let owner = &svc.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("EtcdCluster", "etcd")
        );
        assert_eq!(
            svc.metadata.labels.unwrap()["app.kubernetes.io/instance"],
            "etcd"
        );
    }

    #[test]
    fn client_service_serves_port_2379_only() {
        let svc = client_service(&cluster("etcd", 3)).unwrap();
        assert_eq!(svc.metadata.name.as_deref(), Some("etcd-client"));
        let spec = svc.spec.unwrap();
        assert_eq!(spec.cluster_ip, None);
        assert_eq!(spec.ports.unwrap().len(), 1);
    }

    #[test]
    fn drift_is_repaired_on_owned_fields_only() {
        let desired = headless_service(&cluster("etcd", 3)).unwrap();
        assert_eq!(service_drift(&desired, &desired), None);

        let mut observed = desired.clone();
        let spec = observed.spec.as_mut().unwrap();
        spec.selector = Some(BTreeMap::from([("x".into(), "y".into())]));
        spec.ports.as_mut().unwrap().push(port("debug", 9999));
        spec.ports.as_mut().unwrap()[0].port = 12379;
        observed
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("added".into(), "by-someone".into());
        let fixed = service_drift(&observed, &desired).expect("drift detected");
        let spec = fixed.spec.unwrap();
        assert_eq!(spec.selector, desired.spec.as_ref().unwrap().selector);
        let ports = spec.ports.unwrap();
        assert_eq!(ports.len(), 3, "the extra port is kept");
        assert_eq!(ports[0].port, 2379);
        assert_eq!(fixed.metadata.labels.unwrap()["added"], "by-someone");
    }
}
