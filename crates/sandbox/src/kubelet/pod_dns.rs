//! A Pod's name and resolver files as the kubelet writes them: its hostname and FQDN, and
//! `/etc/resolv.conf` by `dnsPolicy` with `dnsConfig` merged in.

use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Pod;

use crate::network::dns::search_domains;

/// `spec.hostname`, else the Pod's name, cut to 63 characters as the kubelet does.
pub fn pod_hostname(pod: &Pod) -> String {
    let name = pod
        .spec
        .as_ref()
        .and_then(|s| s.hostname.clone())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| pod.metadata.name.clone().unwrap_or_default());
    let cut: String = name.chars().take(63).collect();
    cut.trim_end_matches(['-', '.']).to_string()
}

/// `<hostname>.<subdomain>.<namespace>.svc.<domain>` when the Pod has a subdomain.
pub fn pod_fqdn(pod: &Pod, cluster_domain: &str) -> Option<String> {
    let subdomain = pod
        .spec
        .as_ref()?
        .subdomain
        .clone()
        .filter(|s| !s.is_empty())?;
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    Some(format!(
        "{}.{subdomain}.{namespace}.svc.{cluster_domain}",
        pod_hostname(pod)
    ))
}

type ResolvConf = (Vec<String>, Vec<String>, Vec<(String, Option<String>)>);

/// `/etc/resolv.conf` of a Pod: `ClusterFirst` points at the cluster DNS with the namespace's
/// search path; `Default` (and `ClusterFirst` with `hostNetwork`) copies the machine's file;
/// `None` has only `dnsConfig`. `dnsConfig` adds name servers, searches and options.
pub fn pod_resolv_conf(
    pod: &Pod,
    cluster_domain: &str,
    dns_server: Ipv4Addr,
    machine_resolv_conf: &str,
) -> String {
    let spec = pod.spec.clone().unwrap_or_default();
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let host_network = spec.host_network.unwrap_or(false);
    let policy = spec.dns_policy.as_deref().unwrap_or("ClusterFirst");
    let (mut servers, mut searches, mut options): ResolvConf = match (policy, host_network) {
        ("ClusterFirst", false) | ("ClusterFirstWithHostNet", _) => (
            vec![dns_server.to_string()],
            search_domains(namespace, cluster_domain),
            vec![("ndots".into(), Some("5".into()))],
        ),
        ("None", _) => (Vec::new(), Vec::new(), Vec::new()),
        _ => parse_resolv_conf(machine_resolv_conf),
    };
    if let Some(config) = &spec.dns_config {
        for server in config.nameservers.iter().flatten() {
            if !servers.contains(server) {
                servers.push(server.clone());
            }
        }
        for search in config.searches.iter().flatten() {
            if !searches.contains(search) {
                searches.push(search.clone());
            }
        }
        for option in config.options.iter().flatten() {
            let name = option.name.clone().unwrap_or_default();
            options.retain(|(existing, _)| *existing != name);
            options.push((name, option.value.clone()));
        }
    }
    servers.truncate(3);
    searches.truncate(32);
    let mut text = String::new();
    if !searches.is_empty() {
        text.push_str(&format!("search {}\n", searches.join(" ")));
    }
    for server in &servers {
        text.push_str(&format!("nameserver {server}\n"));
    }
    if !options.is_empty() {
        let rendered: Vec<String> = options
            .iter()
            .map(|(name, value)| match value {
                Some(value) => format!("{name}:{value}"),
                None => name.clone(),
            })
            .collect();
        text.push_str(&format!("options {}\n", rendered.join(" ")));
    }
    text
}

fn parse_resolv_conf(text: &str) -> ResolvConf {
    let (mut servers, mut searches, mut options) = (Vec::new(), Vec::new(), Vec::new());
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("nameserver") => servers.extend(fields.next().map(str::to_string)),
            Some("search") | Some("domain") => searches = fields.map(str::to_string).collect(),
            Some("options") => options.extend(fields.map(|option| match option.split_once(':') {
                Some((name, value)) => (name.to_string(), Some(value.to_string())),
                None => (option.to_string(), None),
            })),
            _ => {}
        }
    }
    (servers, searches, options)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(
            json!({"metadata": {"name": "etcd-0", "namespace": "db"}, "spec": spec}),
        )
        .unwrap()
    }

    #[test]
    fn names_follow_hostname_and_subdomain() {
        let named = pod(json!({"containers": [], "hostname": "m1", "subdomain": "etcd"}));
        assert_eq!(pod_hostname(&named), "m1");
        assert_eq!(
            pod_fqdn(&named, "cluster.local").as_deref(),
            Some("m1.etcd.db.svc.cluster.local")
        );
        let plain = pod(json!({"containers": []}));
        assert_eq!(pod_hostname(&plain), "etcd-0");
        assert_eq!(pod_fqdn(&plain, "cluster.local"), None);
    }

    #[test]
    fn resolv_conf_by_policy() {
        let dns = Ipv4Addr::new(10, 96, 0, 10);
        let machine = "nameserver 192.168.1.1\nsearch lan\noptions edns0\n";
        assert_eq!(
            pod_resolv_conf(
                &pod(json!({"containers": []})),
                "cluster.local",
                dns,
                machine
            ),
            "search db.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"
        );
        assert_eq!(
            pod_resolv_conf(
                &pod(json!({"containers": [], "dnsPolicy": "Default"})),
                "cluster.local",
                dns,
                machine
            ),
            "search lan\nnameserver 192.168.1.1\noptions edns0\n"
        );
        let custom = pod(json!({"containers": [], "dnsPolicy": "None", "dnsConfig": {
            "nameservers": ["1.1.1.1"], "searches": ["example.com"], "options": [{"name": "ndots", "value": "2"}, {"name": "rotate"}]}}));
        assert_eq!(
            pod_resolv_conf(&custom, "cluster.local", dns, machine),
            "search example.com\nnameserver 1.1.1.1\noptions ndots:2 rotate\n"
        );
        let merged = pod(
            json!({"containers": [], "dnsConfig": {"options": [{"name": "ndots", "value": "1"}]}}),
        );
        assert!(
            pod_resolv_conf(&merged, "cluster.local", dns, machine).ends_with("options ndots:1\n")
        );
    }
}
