//! The records of the cluster domain, computed from Services and their endpoints following the
//! Kubernetes DNS specification (kubernetes/dns `docs/specification.md`), as a pure value.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

/// What the DNS server knows about one Service, kept up to date by the node agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceDns {
    pub namespace: String,
    pub name: String,
    /// `None` for a headless Service (`clusterIP: None`): its name resolves to the endpoints.
    pub cluster_ip: Option<Ipv4Addr>,
    /// Ports that get SRV records when named: the Service ports of a ClusterIP Service, the
    /// endpoint ports of a headless one.
    pub ports: Vec<PortDns>,
    pub endpoints: Vec<EndpointDns>,
    /// `spec.publishNotReadyAddresses`: not-ready endpoints get records too.
    pub publish_not_ready_addresses: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortDns {
    pub name: String,
    pub protocol: PortProtocol,
    pub port: u16,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortProtocol {
    Tcp,
    Udp,
    Sctp,
}

impl PortProtocol {
    /// `TCP`, `UDP` or `SCTP` as in a Service port; anything else is TCP, the API default.
    pub fn from_kubernetes(protocol: Option<&str>) -> Self {
        match protocol {
            Some("UDP") => Self::Udp,
            Some("SCTP") => Self::Sctp,
            _ => Self::Tcp,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Tcp => "_tcp",
            Self::Udp => "_udp",
            Self::Sctp => "_sctp",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointDns {
    pub ip: Ipv4Addr,
    /// The Pod's `spec.hostname` when its `spec.subdomain` names this Service.
    pub hostname: Option<String>,
    pub ready: bool,
}

/// The kinds of query the zone distinguishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueryKind {
    A,
    Aaaa,
    Srv,
    Ptr,
    Any,
    Other,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZoneRecord {
    A {
        name: String,
        ip: Ipv4Addr,
    },
    Srv {
        name: String,
        port: u16,
        target: String,
    },
    Ptr {
        name: String,
        target: String,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZoneAnswer {
    /// Answers, plus the addresses of SRV targets for the additional section.
    Records {
        answers: Vec<ZoneRecord>,
        additionals: Vec<ZoneRecord>,
    },
    /// The name exists with other types of records (or only names below it).
    NoData,
    /// No such name in the cluster domain.
    NxDomain,
    /// Outside the cluster domain and the reverse zone: there is no upstream to ask.
    NotAuthoritative,
}

/// All records of the cluster domain at one moment. Names are lowercase, without the final dot.
#[derive(Clone, Debug, Default)]
pub struct Zone {
    domain: String,
    a: BTreeMap<String, BTreeSet<Ipv4Addr>>,
    srv: BTreeMap<String, BTreeSet<(u16, String)>>,
    ptr: BTreeMap<String, BTreeSet<String>>,
    /// Every name that exists: record owners and the names above them inside the domain.
    names: BTreeSet<String>,
}

impl Zone {
    /// The zone for `domain` (such as `cluster.local`) with the records of `services`.
    pub fn build<'a>(domain: &str, services: impl IntoIterator<Item = &'a ServiceDns>) -> Self {
        let mut zone = Self {
            domain: normalize(domain),
            ..Self::default()
        };
        for service in services {
            zone.add_service(service);
        }
        zone
    }

    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// Answers a question; `name` may carry the final dot and any letter case.
    pub fn answer(&self, name: &str, kind: QueryKind) -> ZoneAnswer {
        let name = normalize(name);
        if name.ends_with(".in-addr.arpa") {
            return self.answer_reverse(&name, kind);
        }
        if !self.is_inside(&name) {
            return ZoneAnswer::NotAuthoritative;
        }
        if let Some(ip) = self.pod_address(&name) {
            return match kind {
                QueryKind::A | QueryKind::Any => ZoneAnswer::Records {
                    answers: vec![ZoneRecord::A { name, ip }],
                    additionals: Vec::new(),
                },
                _ => ZoneAnswer::NoData,
            };
        }
        let mut answers = Vec::new();
        let mut additionals = Vec::new();
        if matches!(kind, QueryKind::A | QueryKind::Any) {
            answers.extend(self.a_records(&name));
        }
        if matches!(kind, QueryKind::Srv | QueryKind::Any) {
            for (port, target) in self.srv.get(&name).into_iter().flatten() {
                answers.push(ZoneRecord::Srv {
                    name: name.clone(),
                    port: *port,
                    target: target.clone(),
                });
                additionals.extend(self.a_records(target));
            }
        }
        if !answers.is_empty() {
            ZoneAnswer::Records {
                answers,
                additionals,
            }
        } else if self.names.contains(&name) || name == self.domain {
            ZoneAnswer::NoData
        } else {
            ZoneAnswer::NxDomain
        }
    }

    fn answer_reverse(&self, name: &str, kind: QueryKind) -> ZoneAnswer {
        match self.ptr.get(name) {
            Some(targets) if matches!(kind, QueryKind::Ptr | QueryKind::Any) => {
                ZoneAnswer::Records {
                    answers: targets
                        .iter()
                        .map(|target| ZoneRecord::Ptr {
                            name: name.to_string(),
                            target: target.clone(),
                        })
                        .collect(),
                    additionals: Vec::new(),
                }
            }
            Some(_) => ZoneAnswer::NoData,
            None => ZoneAnswer::NxDomain,
        }
    }

    fn a_records(&self, name: &str) -> Vec<ZoneRecord> {
        self.a
            .get(name)
            .into_iter()
            .flatten()
            .map(|ip| ZoneRecord::A {
                name: name.to_string(),
                ip: *ip,
            })
            .collect()
    }

    fn is_inside(&self, name: &str) -> bool {
        name == self.domain || name.ends_with(&format!(".{}", self.domain))
    }

    /// `10-244-0-5.<namespace>.pod.<domain>` resolves to 10.244.0.5, as kube-dns does.
    fn pod_address(&self, name: &str) -> Option<Ipv4Addr> {
        let rest = name.strip_suffix(&format!(".pod.{}", self.domain))?;
        let (dashed, namespace) = rest.split_once('.')?;
        if namespace.is_empty() || namespace.contains('.') {
            return None;
        }
        dashed.replace('-', ".").parse().ok()
    }

    fn add_service(&mut self, service: &ServiceDns) {
        let service_name = normalize(&format!(
            "{}.{}.svc.{}",
            service.name, service.namespace, self.domain
        ));
        self.add_name(&service_name);
        let published: Vec<&EndpointDns> = service
            .endpoints
            .iter()
            .filter(|endpoint| endpoint.ready || service.publish_not_ready_addresses)
            .collect();
        match service.cluster_ip {
            Some(ip) => {
                self.add_a(&service_name, ip);
                self.add_ptr(ip, &service_name);
                for port in named(&service.ports) {
                    self.add_srv(&srv_name(port, &service_name), port.port, &service_name);
                }
            }
            None => {
                for endpoint in published {
                    self.add_a(&service_name, endpoint.ip);
                    let label = match &endpoint.hostname {
                        Some(hostname) if !hostname.is_empty() => normalize(hostname),
                        _ => endpoint.ip.to_string().replace('.', "-"),
                    };
                    let endpoint_name = format!("{label}.{service_name}");
                    self.add_a(&endpoint_name, endpoint.ip);
                    if endpoint.hostname.is_some() {
                        self.add_ptr(endpoint.ip, &endpoint_name);
                    }
                    for port in named(&service.ports) {
                        self.add_srv(&srv_name(port, &service_name), port.port, &endpoint_name);
                    }
                }
            }
        }
    }

    fn add_a(&mut self, name: &str, ip: Ipv4Addr) {
        self.add_name(name);
        self.a.entry(name.to_string()).or_default().insert(ip);
    }

    fn add_srv(&mut self, name: &str, port: u16, target: &str) {
        self.add_name(name);
        self.srv
            .entry(name.to_string())
            .or_default()
            .insert((port, target.to_string()));
    }

    fn add_ptr(&mut self, ip: Ipv4Addr, target: &str) {
        let [a, b, c, d] = ip.octets();
        self.ptr
            .entry(format!("{d}.{c}.{b}.{a}.in-addr.arpa"))
            .or_default()
            .insert(target.to_string());
    }

    /// Records `name` and every name between it and the domain, so those answer NODATA
    /// rather than NXDOMAIN (a resolver that gets NXDOMAIN for `svc.cluster.local` may stop).
    fn add_name(&mut self, name: &str) {
        let mut current = name;
        while current.len() > self.domain.len() {
            if !self.names.insert(current.to_string()) {
                break;
            }
            match current.split_once('.') {
                Some((_, parent)) => current = parent,
                None => break,
            }
        }
    }
}

fn named(ports: &[PortDns]) -> impl Iterator<Item = &PortDns> {
    ports.iter().filter(|port| !port.name.is_empty())
}

fn srv_name(port: &PortDns, service_name: &str) -> String {
    format!(
        "_{}.{}.{service_name}",
        normalize(&port.name),
        port.protocol.label()
    )
}

fn normalize(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// The search list of a Pod in `namespace`, most specific first, as the kubelet writes it.
pub fn search_domains(namespace: &str, domain: &str) -> Vec<String> {
    vec![
        format!("{namespace}.svc.{domain}"),
        format!("svc.{domain}"),
        domain.to_string(),
    ]
}

#[cfg(test)]
#[path = "zone_tests.rs"]
mod tests;
