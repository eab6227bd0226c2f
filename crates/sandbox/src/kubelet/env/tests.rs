use serde_json::json;

use super::*;

fn pod() -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web-0", "namespace": "team", "uid": "u-1",
                     "labels": {"app": "web", "tier": "front"}, "annotations": {"note": "a\"b"}},
        "spec": {"nodeName": "node-2", "serviceAccountName": "default", "containers": [{
            "name": "main",
            "resources": {"limits": {"memory": "64Mi"}, "requests": {"cpu": "250m"}},
            "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"},
                        {"secretRef": {"name": "absent", "optional": true}}],
            "env": [
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
                {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}},
                {"name": "MISSING", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "nope", "optional": true}}},
                {"name": "MEMORY_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
                {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu"}}},
                {"name": "URL", "value": "http://$(POD):$(API_SERVICE_PORT)/$(MODE)/$(UNDEFINED)/$$(POD)"},
                {"name": "CFG_mode", "value": "overridden"},
            ],
        }]},
    }))
    .unwrap()
}

fn objects() -> PodObjects {
    let mut objects = PodObjects::default();
    objects.config_maps.insert(
        "settings".into(),
        serde_json::from_value(
            json!({"metadata": {"name": "settings"}, "data": {"mode": "fast", "bad=key": "x"}}),
        )
        .unwrap(),
    );
    objects.secrets.insert(
        "creds".into(),
        serde_json::from_value(
            json!({"metadata": {"name": "creds"}, "data": {"password": "c2VjcmV0"}}),
        )
        .unwrap(),
    );
    objects
}

fn service(namespace: &str, name: &str, ip: &str, ports: serde_json::Value) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterIP": ip, "ports": ports},
    }))
    .unwrap()
}

#[test]
fn env_resolves_references_in_kubelet_order() {
    let pod = pod();
    let addresses = PodAddresses {
        pod_ip: Some(Ipv4Addr::new(10, 244, 0, 7)),
        host_ip: Ipv4Addr::new(10, 244, 0, 2),
    };
    let services = [("API_SERVICE_PORT".to_string(), "443".to_string())];
    let env = container_env(
        &pod,
        &pod.spec.as_ref().unwrap().containers[0],
        addresses,
        &objects(),
        &services,
    )
    .unwrap();
    let get = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    assert_eq!(
        env[0],
        ("CFG_mode".to_string(), "overridden".to_string()),
        "a later env replaces envFrom in place"
    );
    assert_eq!(get("POD"), Some("web-0"));
    assert_eq!(get("IP"), Some("10.244.0.7"));
    assert_eq!(get("APP"), Some("web"));
    assert_eq!(get("PASSWORD"), Some("secret"));
    assert_eq!(get("MODE"), Some("fast"));
    assert_eq!(get("MISSING"), None);
    assert_eq!(get("MEMORY_MI"), Some("64"));
    assert_eq!(get("CPU"), Some("1"));
    assert_eq!(
        get("URL"),
        Some("http://web-0:443/fast/$(UNDEFINED)/$(POD)")
    );
    assert_eq!(get("API_SERVICE_PORT"), Some("443"));
    assert_eq!(env.last().unwrap().0, "API_SERVICE_PORT");
}

#[test]
fn missing_references_are_config_errors_with_the_kubelet_message() {
    let pod = pod();
    let addresses = PodAddresses {
        pod_ip: None,
        host_ip: Ipv4Addr::LOCALHOST,
    };
    let container = &pod.spec.as_ref().unwrap().containers[0];
    let mut without_secret = objects();
    without_secret.secrets.clear();
    assert_eq!(
        container_env(&pod, container, addresses, &without_secret, &[])
            .unwrap_err()
            .0,
        "secret \"creds\" not found"
    );
    let mut wrong_key = objects();
    wrong_key.secrets.insert(
        "creds".into(),
        serde_json::from_value(json!({"metadata": {"name": "creds"}, "data": {}})).unwrap(),
    );
    assert_eq!(
        container_env(&pod, container, addresses, &wrong_key, &[])
            .unwrap_err()
            .0,
        "couldn't find key password in Secret team/creds"
    );
}

#[test]
fn field_paths_of_the_downward_api() {
    let pod = pod();
    let addresses = PodAddresses {
        pod_ip: None,
        host_ip: Ipv4Addr::new(10, 244, 0, 2),
    };
    assert_eq!(
        field_value(&pod, addresses, "metadata.labels").unwrap(),
        "app=\"web\"\ntier=\"front\""
    );
    assert_eq!(
        field_value(&pod, addresses, "metadata.annotations").unwrap(),
        "note=\"a\\\"b\""
    );
    assert_eq!(
        field_value(&pod, addresses, "spec.nodeName").unwrap(),
        "node-2"
    );
    assert_eq!(
        field_value(&pod, addresses, "status.hostIP").unwrap(),
        "10.244.0.2"
    );
    assert_eq!(field_value(&pod, addresses, "metadata.uid").unwrap(), "u-1");
    assert!(field_value(&pod, addresses, "spec.bogus").is_err());
    let container = &pod.spec.as_ref().unwrap().containers[0];
    assert_eq!(resource_value(container, "limits.cpu", None).unwrap(), "8");
    assert_eq!(
        resource_value(container, "requests.memory", None).unwrap(),
        "0"
    );
}

#[test]
fn service_links_follow_docker_conventions() {
    let kubernetes = service(
        "default",
        "kubernetes",
        "10.96.0.1",
        json!([{"name": "https", "port": 443, "protocol": "TCP"}]),
    );
    let etcd = service(
        "team",
        "etcd-client",
        "10.96.0.20",
        json!([{"name": "client", "port": 2379}]),
    );
    let headless = service(
        "team",
        "etcd",
        "None",
        json!([{"name": "peer", "port": 2380}]),
    );
    let elsewhere = service("other", "web", "10.96.0.30", json!([{"port": 80}]));
    let all = [&kubernetes, &etcd, &headless, &elsewhere];
    let env = service_env("team", true, &all);
    let get = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    assert_eq!(get("KUBERNETES_SERVICE_HOST"), Some("10.96.0.1"));
    assert_eq!(get("KUBERNETES_SERVICE_PORT"), Some("443"));
    assert_eq!(get("KUBERNETES_SERVICE_PORT_HTTPS"), Some("443"));
    assert_eq!(get("KUBERNETES_PORT"), Some("tcp://10.96.0.1:443"));
    assert_eq!(get("ETCD_CLIENT_PORT_2379_TCP_ADDR"), Some("10.96.0.20"));
    assert_eq!(get("ETCD_CLIENT_PORT_2379_TCP_PROTO"), Some("tcp"));
    assert!(
        get("ETCD_SERVICE_HOST").is_none(),
        "headless Services have no variables"
    );
    assert!(
        get("WEB_SERVICE_HOST").is_none(),
        "other namespaces are not linked"
    );
    let without_links = service_env("team", false, &all);
    assert!(
        without_links
            .iter()
            .all(|(k, _)| k.starts_with("KUBERNETES_"))
    );
}

#[test]
fn references_are_collected_from_containers_and_volumes() {
    let mut pod = pod();
    pod.spec.as_mut().unwrap().volumes = Some(serde_json::from_value(json!([
        {"name": "cfg", "configMap": {"name": "files"}},
        {"name": "tls", "secret": {"secretName": "tls"}},
        {"name": "all", "projected": {"sources": [{"configMap": {"name": "kube-root-ca.crt"}}]}},
    ])).unwrap());
    let (config_maps, secrets) = referenced_objects(&pod);
    assert_eq!(config_maps, ["files", "kube-root-ca.crt", "settings"]);
    assert_eq!(secrets, ["absent", "creds", "tls"]);
}
