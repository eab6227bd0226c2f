//! The zone against the Kubernetes DNS specification.

use super::*;

fn etcd_headless() -> ServiceDns {
    ServiceDns {
        namespace: "default".into(),
        name: "etcd".into(),
        cluster_ip: None,
        ports: vec![
            PortDns {
                name: "peer".into(),
                protocol: PortProtocol::Tcp,
                port: 2380,
            },
            PortDns {
                name: String::new(),
                protocol: PortProtocol::Tcp,
                port: 9999,
            },
        ],
        endpoints: vec![
            EndpointDns {
                ip: Ipv4Addr::new(10, 244, 0, 5),
                hostname: Some("etcd-0".into()),
                ready: true,
            },
            EndpointDns {
                ip: Ipv4Addr::new(10, 244, 0, 6),
                hostname: Some("etcd-1".into()),
                ready: false,
            },
            EndpointDns {
                ip: Ipv4Addr::new(10, 244, 0, 7),
                hostname: None,
                ready: true,
            },
        ],
        publish_not_ready_addresses: false,
    }
}

fn client_service() -> ServiceDns {
    ServiceDns {
        namespace: "default".into(),
        name: "etcd-client".into(),
        cluster_ip: Some(Ipv4Addr::new(10, 96, 0, 20)),
        ports: vec![PortDns {
            name: "client".into(),
            protocol: PortProtocol::Tcp,
            port: 2379,
        }],
        endpoints: Vec::new(),
        publish_not_ready_addresses: false,
    }
}

fn addresses(answer: ZoneAnswer) -> Vec<Ipv4Addr> {
    match answer {
        ZoneAnswer::Records { answers, .. } => answers
            .into_iter()
            .filter_map(|record| match record {
                ZoneRecord::A { ip, .. } => Some(ip),
                _ => None,
            })
            .collect(),
        other => panic!("expected records, got {other:?}"),
    }
}

#[test]
fn cluster_ip_service_has_a_srv_and_ptr_records() {
    let zone = Zone::build("cluster.local", [&client_service()]);
    assert_eq!(
        addresses(zone.answer("etcd-client.default.svc.cluster.local.", QueryKind::A)),
        vec![Ipv4Addr::new(10, 96, 0, 20)]
    );
    assert_eq!(
        zone.answer(
            "_client._tcp.etcd-client.default.svc.cluster.local",
            QueryKind::Srv
        ),
        ZoneAnswer::Records {
            answers: vec![ZoneRecord::Srv {
                name: "_client._tcp.etcd-client.default.svc.cluster.local".into(),
                port: 2379,
                target: "etcd-client.default.svc.cluster.local".into(),
            }],
            additionals: vec![ZoneRecord::A {
                name: "etcd-client.default.svc.cluster.local".into(),
                ip: Ipv4Addr::new(10, 96, 0, 20),
            }],
        }
    );
    assert_eq!(
        zone.answer("20.0.96.10.in-addr.arpa", QueryKind::Ptr),
        ZoneAnswer::Records {
            answers: vec![ZoneRecord::Ptr {
                name: "20.0.96.10.in-addr.arpa".into(),
                target: "etcd-client.default.svc.cluster.local".into(),
            }],
            additionals: Vec::new(),
        }
    );
}

#[test]
fn headless_service_lists_ready_endpoints_and_hostnames() {
    let zone = Zone::build("cluster.local", [&etcd_headless()]);
    assert_eq!(
        addresses(zone.answer("ETCD.default.svc.cluster.local", QueryKind::A)),
        vec![Ipv4Addr::new(10, 244, 0, 5), Ipv4Addr::new(10, 244, 0, 7)]
    );
    assert_eq!(
        addresses(zone.answer("etcd-0.etcd.default.svc.cluster.local", QueryKind::A)),
        vec![Ipv4Addr::new(10, 244, 0, 5)]
    );
    assert_eq!(
        zone.answer("etcd-1.etcd.default.svc.cluster.local", QueryKind::A),
        ZoneAnswer::NxDomain
    );
    assert_eq!(
        addresses(zone.answer("10-244-0-7.etcd.default.svc.cluster.local", QueryKind::A)),
        vec![Ipv4Addr::new(10, 244, 0, 7)]
    );
    let ZoneAnswer::Records {
        answers,
        additionals,
    } = zone.answer("_peer._tcp.etcd.default.svc.cluster.local", QueryKind::Srv)
    else {
        panic!("SRV records expected");
    };
    assert_eq!(answers.len(), 2);
    assert_eq!(additionals.len(), 2);
    assert!(answers.contains(&ZoneRecord::Srv {
        name: "_peer._tcp.etcd.default.svc.cluster.local".into(),
        port: 2380,
        target: "etcd-0.etcd.default.svc.cluster.local".into(),
    }));
}

#[test]
fn publish_not_ready_addresses_includes_every_endpoint() {
    let mut service = etcd_headless();
    service.publish_not_ready_addresses = true;
    let zone = Zone::build("cluster.local", [&service]);
    assert_eq!(
        addresses(zone.answer("etcd-1.etcd.default.svc.cluster.local", QueryKind::A)),
        vec![Ipv4Addr::new(10, 244, 0, 6)]
    );
    assert_eq!(
        addresses(zone.answer("etcd.default.svc.cluster.local", QueryKind::A)).len(),
        3
    );
}

#[test]
fn existing_names_without_the_type_are_nodata() {
    let zone = Zone::build("cluster.local", [&client_service()]);
    assert_eq!(
        zone.answer("etcd-client.default.svc.cluster.local", QueryKind::Aaaa),
        ZoneAnswer::NoData
    );
    assert_eq!(
        zone.answer("default.svc.cluster.local", QueryKind::A),
        ZoneAnswer::NoData
    );
    assert_eq!(
        zone.answer("svc.cluster.local", QueryKind::A),
        ZoneAnswer::NoData
    );
    assert_eq!(
        zone.answer("cluster.local", QueryKind::A),
        ZoneAnswer::NoData
    );
    assert_eq!(
        zone.answer("missing.default.svc.cluster.local", QueryKind::A),
        ZoneAnswer::NxDomain
    );
    assert_eq!(
        zone.answer("example.com", QueryKind::A),
        ZoneAnswer::NotAuthoritative
    );
}

#[test]
fn pod_names_resolve_from_their_dashed_address() {
    let zone = Zone::build("cluster.local", []);
    assert_eq!(
        addresses(zone.answer("10-244-1-9.default.pod.cluster.local", QueryKind::A)),
        vec![Ipv4Addr::new(10, 244, 1, 9)]
    );
    assert_eq!(
        zone.answer("10-244-1.default.pod.cluster.local", QueryKind::A),
        ZoneAnswer::NxDomain
    );
}

#[test]
fn search_list_matches_the_kubelet() {
    assert_eq!(
        search_domains("team-a", "cluster.local"),
        vec![
            "team-a.svc.cluster.local",
            "svc.cluster.local",
            "cluster.local"
        ]
    );
}
