//! What a Service leads to, computed the way the endpoints controller and kube-proxy compute it:
//! the Endpoints subsets of a selector Service from its Pods, and from subsets the DNS records
//! and the proxy's frontends. Pure, tested on plain values.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, ObjectReference, Pod, Service, ServicePort,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::network::dns::{EndpointDns, PortDns, PortProtocol, ServiceDns};
use crate::scheduler::is_terminal;

fn service_ports(service: &Service) -> Vec<ServicePort> {
    service
        .spec
        .as_ref()
        .and_then(|s| s.ports.clone())
        .unwrap_or_default()
}

fn publishes_not_ready(service: &Service) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false)
}

/// The ClusterIP, or `None` for a headless Service (and one without an address yet).
pub fn cluster_ip(service: &Service) -> Option<Ipv4Addr> {
    service.spec.as_ref()?.cluster_ip.as_deref()?.parse().ok()
}

fn is_headless(service: &Service) -> bool {
    service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None")
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

/// The port a Service port reaches on `pod`: a number, or a container port by name.
fn target_port(pod: &Pod, port: &ServicePort) -> Option<i32> {
    match &port.target_port {
        None => Some(port.port),
        Some(IntOrString::Int(number)) => Some(*number),
        Some(IntOrString::String(name)) => {
            let protocol = port.protocol.as_deref().unwrap_or("TCP");
            pod.spec
                .as_ref()?
                .containers
                .iter()
                .flat_map(|c| c.ports.iter().flatten())
                .find_map(|p| {
                    (p.name.as_deref() == Some(name.as_str())
                        && p.protocol.as_deref().unwrap_or("TCP") == protocol)
                        .then_some(p.container_port)
                })
        }
    }
}

/// Whether `labels` match the Service's equality selector (an empty selector matches nothing,
/// as the endpoints controller skips such Services).
pub fn selects(service: &Service, pod: &Pod) -> bool {
    let Some(selector) = service.spec.as_ref().and_then(|s| s.selector.as_ref()) else {
        return false;
    };
    if selector.is_empty() || service.metadata.namespace != pod.metadata.namespace {
        return false;
    }
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    selector
        .iter()
        .all(|(key, value)| labels.get(key) == Some(value))
}

/// Whether the endpoints controller manages the Service's Endpoints (it has a selector).
pub fn has_selector(service: &Service) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .is_some_and(|s| !s.is_empty())
}

/// The Endpoints subsets of a selector Service: every selected Pod with an address that is not
/// terminal or terminating (unless not-ready addresses are published), ready or not, grouped
/// by their resolved ports.
pub fn subsets(service: &Service, pods: &[&Pod]) -> Vec<EndpointSubset> {
    let namespace = service.metadata.namespace.clone().unwrap_or_default();
    let service_name = service.metadata.name.clone().unwrap_or_default();
    let publish = publishes_not_ready(service);
    let ports = service_ports(service);
    // Pods grouped by their resolved ports (name, number, protocol): ready and not ready.
    type ResolvedPorts = Vec<(String, i32, String)>;
    let mut groups: BTreeMap<ResolvedPorts, (Vec<EndpointAddress>, Vec<EndpointAddress>)> =
        BTreeMap::new();
    let mut selected: Vec<&&Pod> = pods.iter().filter(|pod| selects(service, pod)).collect();
    selected.sort_by_key(|pod| pod.metadata.name.clone());
    for pod in selected {
        let Some(ip) = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .filter(|ip| !ip.is_empty())
        else {
            continue;
        };
        if is_terminal(pod) || (pod.metadata.deletion_timestamp.is_some() && !publish) {
            continue;
        }
        let mut resolved: ResolvedPorts = ports
            .iter()
            .filter_map(|port| {
                let target = target_port(pod, port)?;
                Some((
                    port.name.clone().unwrap_or_default(),
                    target,
                    port.protocol.clone().unwrap_or_else(|| "TCP".into()),
                ))
            })
            .collect();
        resolved.sort();
        let spec = pod.spec.clone().unwrap_or_default();
        let hostname = spec
            .hostname
            .clone()
            .filter(|h| !h.is_empty() && spec.subdomain.as_deref() == Some(service_name.as_str()));
        let address = EndpointAddress {
            ip,
            hostname,
            node_name: spec.node_name.clone(),
            target_ref: Some(ObjectReference {
                kind: Some("Pod".into()),
                namespace: Some(namespace.clone()),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
                ..ObjectReference::default()
            }),
        };
        let group = groups.entry(resolved).or_default();
        if pod_ready(pod) || publish {
            group.0.push(address);
        } else {
            group.1.push(address);
        }
    }
    groups
        .into_iter()
        .map(|(ports, (ready, not_ready))| EndpointSubset {
            addresses: (!ready.is_empty()).then_some(ready),
            not_ready_addresses: (!not_ready.is_empty()).then_some(not_ready),
            ports: Some(
                ports
                    .into_iter()
                    .map(|(name, port, protocol)| EndpointPort {
                        name: (!name.is_empty()).then_some(name),
                        port,
                        protocol: Some(protocol),
                        ..EndpointPort::default()
                    })
                    .collect(),
            ),
        })
        .collect()
}

/// The DNS records of a Service with its subsets.
pub fn service_dns(service: &Service, subsets: &[EndpointSubset]) -> Option<ServiceDns> {
    let headless = is_headless(service);
    let cluster_ip = cluster_ip(service);
    if !headless && cluster_ip.is_none() {
        return None;
    }
    let port = |name: Option<String>, protocol: Option<String>, number: i32| {
        Some(PortDns {
            name: name.filter(|n| !n.is_empty())?,
            protocol: PortProtocol::from_kubernetes(protocol.as_deref()),
            port: u16::try_from(number).ok()?,
        })
    };
    let ports: Vec<PortDns> = if headless {
        let mut all: Vec<PortDns> = subsets
            .iter()
            .flat_map(|s| s.ports.iter().flatten())
            .filter_map(|p| port(p.name.clone(), p.protocol.clone(), p.port))
            .collect();
        all.sort_by(|a, b| (&a.name, a.port).cmp(&(&b.name, b.port)));
        all.dedup();
        all
    } else {
        service_ports(service)
            .into_iter()
            .filter_map(|p| port(p.name, p.protocol, p.port))
            .collect()
    };
    let mut endpoints = Vec::new();
    for subset in subsets {
        for (addresses, ready) in [
            (&subset.addresses, true),
            (&subset.not_ready_addresses, false),
        ] {
            for address in addresses.iter().flatten() {
                if let Ok(ip) = address.ip.parse() {
                    endpoints.push(EndpointDns {
                        ip,
                        hostname: address.hostname.clone(),
                        ready,
                    });
                }
            }
        }
    }
    endpoints.sort_by_key(|e| (e.ip, e.hostname.clone()));
    endpoints.dedup();
    Some(ServiceDns {
        namespace: service.metadata.namespace.clone().unwrap_or_default(),
        name: service.metadata.name.clone().unwrap_or_default(),
        cluster_ip: if headless { None } else { cluster_ip },
        ports,
        endpoints,
        publish_not_ready_addresses: publishes_not_ready(service),
    })
}

/// One proxied Service port: its ClusterIP frontend and where connections go, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyRule {
    pub frontend: SocketAddrV4,
    pub backends: Vec<SocketAddr>,
}

/// The TCP frontends of a ClusterIP Service and their ready backends (kube-proxy's rules).
pub fn proxy_rules(service: &Service, subsets: &[EndpointSubset]) -> Vec<ProxyRule> {
    let Some(ip) = cluster_ip(service) else {
        return Vec::new();
    };
    service_ports(service)
        .into_iter()
        .filter(|port| port.protocol.as_deref().unwrap_or("TCP") == "TCP")
        .filter_map(|port| {
            let frontend = SocketAddrV4::new(ip, u16::try_from(port.port).ok()?);
            let name = port.name.clone().unwrap_or_default();
            let mut backends = Vec::new();
            for subset in subsets {
                let target = subset.ports.iter().flatten().find(|p| {
                    p.name.clone().unwrap_or_default() == name
                        && p.protocol.as_deref().unwrap_or("TCP") == "TCP"
                });
                let Some(target) = target.and_then(|p| u16::try_from(p.port).ok()) else {
                    continue;
                };
                for address in subset.addresses.iter().flatten() {
                    if let Ok(ip) = address.ip.parse::<Ipv4Addr>() {
                        backends.push(SocketAddr::from((ip, target)));
                    }
                }
            }
            backends.sort();
            Some(ProxyRule { frontend, backends })
        })
        .collect()
}

#[cfg(test)]
mod tests;
