//! Cluster DNS: a hickory server inside the cluster network answering for the cluster domain
//! from a table of Services the node agent keeps up to date.

mod client;
mod zone;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use hickory_server::Server;
use hickory_server::net::runtime::Time;
use hickory_server::proto::op::{Metadata, ResponseCode};
use hickory_server::proto::rr::rdata::{A, PTR, SRV};
use hickory_server::proto::rr::{Name, RData, Record, RecordType};
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use hickory_server::zone_handler::MessageResponseBuilder;

pub use client::lookup_ipv4;
pub use zone::{
    EndpointDns, PortDns, PortProtocol, QueryKind, ServiceDns, Zone, ZoneAnswer, ZoneRecord,
    search_domains,
};

/// Short, so a Pod that follows a Service sees endpoint changes within seconds.
const RECORD_TTL: u32 = 5;

/// The record table behind the DNS server; cheap to clone, all clones share the table.
#[derive(Clone)]
pub struct ClusterDns {
    state: Arc<RwLock<DnsState>>,
}

struct DnsState {
    domain: String,
    services: BTreeMap<(String, String), ServiceDns>,
    zone: Arc<Zone>,
}

impl ClusterDns {
    pub fn new(domain: &str) -> Self {
        Self {
            state: Arc::new(RwLock::new(DnsState {
                domain: domain.to_string(),
                services: BTreeMap::new(),
                zone: Arc::new(Zone::build(domain, [])),
            })),
        }
    }

    /// Adds or replaces the records of one Service.
    pub fn set_service(&self, service: ServiceDns) {
        self.update(|services| {
            services.insert((service.namespace.clone(), service.name.clone()), service);
        });
    }

    pub fn remove_service(&self, namespace: &str, name: &str) {
        self.update(|services| {
            services.remove(&(namespace.to_string(), name.to_string()));
        });
    }

    /// Replaces the whole table, e.g. after a relist of Services and Endpoints.
    pub fn set_services(&self, all: impl IntoIterator<Item = ServiceDns>) {
        self.update(|services| {
            services.clear();
            for service in all {
                services.insert((service.namespace.clone(), service.name.clone()), service);
            }
        });
    }

    /// The zone as the server answers from it now.
    pub fn zone(&self) -> Arc<Zone> {
        self.state.read().expect("dns state lock").zone.clone()
    }

    fn update(&self, change: impl FnOnce(&mut BTreeMap<(String, String), ServiceDns>)) {
        let mut state = self.state.write().expect("dns state lock");
        change(&mut state.services);
        state.zone = Arc::new(Zone::build(&state.domain, state.services.values()));
    }

    /// Serves the table on already bound sockets (inside the cluster network).
    pub(crate) fn serve(
        &self,
        udp: tokio::net::UdpSocket,
        tcp: tokio::net::TcpListener,
    ) -> Server<ZoneResponder> {
        let mut server = Server::new(ZoneResponder { dns: self.clone() });
        server.register_socket(udp);
        server.register_listener(tcp, Duration::from_secs(5), 64);
        server
    }
}

/// Answers queries from the current zone.
pub(crate) struct ZoneResponder {
    dns: ClusterDns,
}

#[async_trait::async_trait]
impl RequestHandler for ZoneResponder {
    async fn handle_request<R: ResponseHandler, T: Time>(
        &self,
        request: &Request,
        mut response_handle: R,
    ) -> ResponseInfo {
        let builder = MessageResponseBuilder::from_message_request(request);
        let Ok(info) = request.request_info() else {
            let response = builder.error_msg(&request.metadata, ResponseCode::FormErr);
            return send(&mut response_handle, response, &request.metadata).await;
        };
        let query_name = info.query.name().to_string();
        let kind = query_kind(info.query.query_type());
        let zone = self.dns.zone();
        let mut metadata = Metadata::response_from_request(&request.metadata);
        let (answers, additionals) = match zone.answer(&query_name, kind) {
            ZoneAnswer::Records {
                answers,
                additionals,
            } => {
                metadata.authoritative = true;
                (to_records(&answers), to_records(&additionals))
            }
            ZoneAnswer::NoData => {
                metadata.authoritative = true;
                (Vec::new(), Vec::new())
            }
            ZoneAnswer::NxDomain => {
                metadata.authoritative = true;
                metadata.response_code = ResponseCode::NXDomain;
                (Vec::new(), Vec::new())
            }
            // There is no upstream; "no such host" is the most useful thing to tell a Pod.
            ZoneAnswer::NotAuthoritative => {
                metadata.response_code = ResponseCode::NXDomain;
                (Vec::new(), Vec::new())
            }
        };
        let response = builder.build(metadata, answers.iter(), [], [], additionals.iter());
        send(&mut response_handle, response, &request.metadata).await
    }
}

async fn send<'a, R: ResponseHandler>(
    response_handle: &mut R,
    response: hickory_server::zone_handler::MessageResponse<
        '_,
        'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
        impl Iterator<Item = &'a Record> + Send + 'a,
    >,
    request: &Metadata,
) -> ResponseInfo {
    match response_handle.send_response(response).await {
        Ok(info) => info,
        Err(error) => {
            tracing::debug!(%error, "cluster DNS could not send a response");
            let mut metadata = Metadata::response_from_request(request);
            metadata.response_code = ResponseCode::ServFail;
            ResponseInfo::from(hickory_server::proto::op::Header {
                metadata,
                counts: Default::default(),
            })
        }
    }
}

fn query_kind(record_type: RecordType) -> QueryKind {
    match record_type {
        RecordType::A => QueryKind::A,
        RecordType::AAAA => QueryKind::Aaaa,
        RecordType::SRV => QueryKind::Srv,
        RecordType::PTR => QueryKind::Ptr,
        RecordType::ANY => QueryKind::Any,
        _ => QueryKind::Other,
    }
}

fn to_records(records: &[ZoneRecord]) -> Vec<Record> {
    records.iter().filter_map(to_record).collect()
}

fn to_record(record: &ZoneRecord) -> Option<Record> {
    let fqdn = |name: &str| Name::from_ascii(format!("{name}.")).ok();
    let (name, rdata) = match record {
        ZoneRecord::A { name, ip } => (fqdn(name)?, RData::A(A(*ip))),
        ZoneRecord::Srv { name, port, target } => (
            fqdn(name)?,
            RData::SRV(SRV::new(0, 100, *port, fqdn(target)?)),
        ),
        ZoneRecord::Ptr { name, target } => (fqdn(name)?, RData::PTR(PTR(fqdn(target)?))),
    };
    Some(Record::from_rdata(name, RECORD_TTL, rdata))
}

/// The address the server listens on, with the standard port.
pub(crate) fn server_address(ip: std::net::Ipv4Addr) -> SocketAddr {
    SocketAddr::from((ip, 53))
}
