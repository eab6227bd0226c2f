use serde_json::json;

use super::*;

fn service(spec: serde_json::Value) -> Service {
    serde_json::from_value(json!({"metadata": {"name": "etcd", "namespace": "db"}, "spec": spec}))
        .unwrap()
}

fn pod(name: &str, ip: Option<&str>, ready: bool, extra: serde_json::Value) -> Pod {
    let mut pod = json!({
        "metadata": {"name": name, "namespace": "db", "uid": format!("uid-{name}"), "labels": {"app": "etcd"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "etcd", "ports": [{"name": "client", "containerPort": 2379}]}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
    });
    if let Some(ip) = ip {
        pod["status"]["podIP"] = json!(ip);
    }
    merge(&mut pod, extra);
    serde_json::from_value(pod).unwrap()
}

fn merge(target: &mut serde_json::Value, patch: serde_json::Value) {
    if let (Some(target), Some(patch)) = (target.as_object_mut(), patch.as_object()) {
        for (key, value) in patch {
            if value.is_object() && target.get(key).is_some_and(|v| v.is_object()) {
                merge(target.get_mut(key).unwrap(), value.clone());
            } else {
                target.insert(key.clone(), value.clone());
            }
        }
    }
}

#[test]
fn subsets_split_ready_and_not_ready_pods_and_resolve_named_ports() {
    let service = service(
        json!({"clusterIP": "10.96.0.20", "selector": {"app": "etcd"},
        "ports": [{"name": "client", "port": 2379, "targetPort": "client"}, {"name": "peer", "port": 2380}]}),
    );
    let a = pod(
        "etcd-0",
        Some("10.244.0.5"),
        true,
        json!({"spec": {"hostname": "etcd-0", "subdomain": "etcd"}}),
    );
    let b = pod("etcd-1", Some("10.244.0.6"), false, json!({}));
    let pending = pod("etcd-2", None, false, json!({}));
    let done = pod(
        "etcd-3",
        Some("10.244.0.8"),
        false,
        json!({"status": {"phase": "Succeeded"}}),
    );
    let leaving = pod(
        "etcd-4",
        Some("10.244.0.9"),
        true,
        json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}),
    );
    let other = pod(
        "web",
        Some("10.244.0.7"),
        true,
        json!({"metadata": {"labels": {"app": "web"}}}),
    );
    let subsets = subsets(&service, &[&a, &b, &pending, &done, &leaving, &other]);
    assert_eq!(subsets.len(), 1);
    let subset = &subsets[0];
    let ready = subset.addresses.as_ref().unwrap();
    assert_eq!(ready.len(), 1);
    assert_eq!(ready[0].ip, "10.244.0.5");
    assert_eq!(ready[0].hostname.as_deref(), Some("etcd-0"));
    assert_eq!(
        ready[0].target_ref.as_ref().unwrap().uid.as_deref(),
        Some("uid-etcd-0")
    );
    assert_eq!(
        subset.not_ready_addresses.as_ref().unwrap()[0].ip,
        "10.244.0.6"
    );
    let ports: Vec<(Option<String>, i32)> = subset
        .ports
        .iter()
        .flatten()
        .map(|p| (p.name.clone(), p.port))
        .collect();
    assert_eq!(
        ports,
        [(Some("client".into()), 2379), (Some("peer".into()), 2380)]
    );

    let rules = proxy_rules(&service, &subsets);
    assert_eq!(rules[0].frontend, "10.96.0.20:2379".parse().unwrap());
    assert_eq!(rules[0].backends, ["10.244.0.5:2379".parse().unwrap()]);
    assert_eq!(rules[1].backends, ["10.244.0.5:2380".parse().unwrap()]);

    let dns = service_dns(&service, &subsets).unwrap();
    assert_eq!(dns.cluster_ip, Some(Ipv4Addr::new(10, 96, 0, 20)));
    assert_eq!(dns.ports.len(), 2);
    assert_eq!(dns.endpoints.len(), 2);
    assert!(
        dns.endpoints
            .iter()
            .any(|e| !e.ready && e.ip == Ipv4Addr::new(10, 244, 0, 6))
    );
}

#[test]
fn headless_services_publish_not_ready_pods_when_asked() {
    let service = service(
        json!({"clusterIP": "None", "publishNotReadyAddresses": true, "selector": {"app": "etcd"},
        "ports": [{"name": "peer", "port": 2380}]}),
    );
    let a = pod(
        "etcd-0",
        Some("10.244.0.5"),
        false,
        json!({"spec": {"hostname": "etcd-0", "subdomain": "etcd"}}),
    );
    let leaving = pod(
        "etcd-1",
        Some("10.244.0.6"),
        false,
        json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}),
    );
    let subsets = subsets(&service, &[&a, &leaving]);
    assert_eq!(subsets[0].addresses.as_ref().unwrap().len(), 2);
    assert!(proxy_rules(&service, &subsets).is_empty());
    let dns = service_dns(&service, &subsets).unwrap();
    assert_eq!(dns.cluster_ip, None);
    assert_eq!(
        dns.ports,
        [PortDns {
            name: "peer".into(),
            protocol: PortProtocol::Tcp,
            port: 2380
        }]
    );
    assert!(dns.publish_not_ready_addresses);
}

#[test]
fn services_without_selector_are_not_managed() {
    let manual = service(json!({"clusterIP": "10.96.0.1", "ports": [{"port": 443}]}));
    assert!(!has_selector(&manual));
    assert!(!selects(
        &manual,
        &pod("a", Some("10.244.0.5"), true, json!({}))
    ));
    let empty = service(json!({"selector": {}}));
    assert!(!has_selector(&empty));
}
