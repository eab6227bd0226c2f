//! A container's environment as the kubelet makes it (`makeEnvironmentVariables`): `envFrom`,
//! then `env` with `valueFrom` resolved and `$(VAR)` expanded against what came before and the
//! Service variables, then the Service variables not already defined. Pure: the ConfigMaps,
//! Secrets and Services come in as values.

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret, Service};

use crate::runtime::env::expand;
use crate::scheduler::parse_milli;

/// The ConfigMaps and Secrets of the Pod's namespace it refers to, fetched beforehand.
#[derive(Clone, Debug, Default)]
pub struct PodObjects {
    pub config_maps: BTreeMap<String, ConfigMap>,
    pub secrets: BTreeMap<String, Secret>,
}

impl PodObjects {
    fn config_map_value(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
    ) -> Result<Option<String>, EnvError> {
        let config_map = self
            .config_maps
            .get(name)
            .ok_or_else(|| EnvError(format!("configmap \"{name}\" not found")))?;
        let text = config_map
            .data
            .as_ref()
            .and_then(|data| data.get(key))
            .cloned();
        let binary = || {
            config_map
                .binary_data
                .as_ref()
                .and_then(|data| data.get(key))
                .map(|bytes| String::from_utf8_lossy(&bytes.0).into_owned())
        };
        match text.or_else(binary) {
            Some(value) => Ok(Some(value)),
            None => Err(EnvError(format!(
                "couldn't find key {key} in ConfigMap {namespace}/{name}"
            ))),
        }
    }

    fn secret_value(
        &self,
        namespace: &str,
        name: &str,
        key: &str,
    ) -> Result<Option<String>, EnvError> {
        let secret = self
            .secrets
            .get(name)
            .ok_or_else(|| EnvError(format!("secret \"{name}\" not found")))?;
        secret_data(secret)
            .remove(key)
            .map(|bytes| Some(String::from_utf8_lossy(&bytes).into_owned()))
            .ok_or_else(|| {
                EnvError(format!(
                    "couldn't find key {key} in Secret {namespace}/{name}"
                ))
            })
    }
}

/// A Secret's data, with `stringData` folded in (the real server does so on write; ours may not).
pub fn secret_data(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    let mut data: BTreeMap<String, Vec<u8>> = secret
        .data
        .iter()
        .flatten()
        .map(|(key, value)| (key.clone(), value.0.clone()))
        .collect();
    for (key, value) in secret.string_data.iter().flatten() {
        data.insert(key.clone(), value.as_bytes().to_vec());
    }
    data
}

/// Why a container cannot be configured: its waiting reason is `CreateContainerConfigError`
/// with this message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EnvError(pub String);

/// What the downward API and `fieldRef` read besides the Pod object.
#[derive(Clone, Copy, Debug)]
pub struct PodAddresses {
    pub pod_ip: Option<Ipv4Addr>,
    pub host_ip: Ipv4Addr,
}

/// The value of a `fieldRef` (env or downward API volume).
pub fn field_value(
    pod: &Pod,
    addresses: PodAddresses,
    field_path: &str,
) -> Result<String, EnvError> {
    let metadata = &pod.metadata;
    let spec = pod.spec.as_ref();
    let quoted_key = |prefix: &str| {
        field_path
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix("['"))
            .and_then(|rest| rest.strip_suffix("']"))
            .map(str::to_string)
    };
    if let Some(key) = quoted_key("metadata.labels") {
        return Ok(metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(&key))
            .cloned()
            .unwrap_or_default());
    }
    if let Some(key) = quoted_key("metadata.annotations") {
        return Ok(metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(&key))
            .cloned()
            .unwrap_or_default());
    }
    let pairs = |map: Option<&BTreeMap<String, String>>| {
        map.into_iter()
            .flatten()
            .map(|(k, v)| {
                format!(
                    "{k}=\"{}\"",
                    v.replace('\\', "\\\\")
                        .replace('"', "\\\"")
                        .replace('\n', "\\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    Ok(match field_path {
        "metadata.name" => metadata.name.clone().unwrap_or_default(),
        "metadata.namespace" => metadata.namespace.clone().unwrap_or_default(),
        "metadata.uid" => metadata.uid.clone().unwrap_or_default(),
        "metadata.labels" => pairs(metadata.labels.as_ref()),
        "metadata.annotations" => pairs(metadata.annotations.as_ref()),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.hostIP" | "status.hostIPs" => addresses.host_ip.to_string(),
        "status.podIP" | "status.podIPs" => addresses
            .pod_ip
            .map(|ip| ip.to_string())
            .unwrap_or_default(),
        other => {
            return Err(EnvError(format!(
                "unsupported fieldRef fieldPath {other:?}"
            )));
        }
    })
}

/// What a node offers when a container sets no limit (the sandbox's Node capacity).
const NODE_ALLOCATABLE: &[(&str, &str)] = &[
    ("cpu", "8"),
    ("memory", "16Gi"),
    ("ephemeral-storage", "100Gi"),
];

/// The value of a `resourceFieldRef`: the container's request or limit divided by `divisor`,
/// rounded up; a missing limit is the node's allocatable amount.
pub fn resource_value(
    container: &Container,
    resource: &str,
    divisor: Option<&str>,
) -> Result<String, EnvError> {
    let (kind, name) = resource.split_once('.').ok_or_else(|| {
        EnvError(format!(
            "unsupported resourceFieldRef resource {resource:?}"
        ))
    })?;
    let resources = container.resources.clone().unwrap_or_default();
    let declared = match kind {
        "limits" => resources
            .limits
            .as_ref()
            .and_then(|l| l.get(name))
            .map(|q| q.0.clone()),
        "requests" => resources
            .requests
            .as_ref()
            .and_then(|r| r.get(name))
            .map(|q| q.0.clone()),
        _ => {
            return Err(EnvError(format!(
                "unsupported resourceFieldRef resource {resource:?}"
            )));
        }
    };
    let fallback = NODE_ALLOCATABLE
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.to_string());
    let quantity = match (kind, declared) {
        (_, Some(quantity)) => quantity,
        ("limits", None) => {
            fallback.ok_or_else(|| EnvError(format!("unknown resource {name:?}")))?
        }
        _ => "0".to_string(),
    };
    let value =
        parse_milli(&quantity).ok_or_else(|| EnvError(format!("invalid quantity {quantity:?}")))?;
    let divisor = parse_milli(divisor.unwrap_or("1"))
        .filter(|d| *d > 0)
        .unwrap_or(1000);
    Ok(((value + divisor - 1) / divisor).to_string())
}

/// The Docker-link style variables of the Services a Pod sees (`{NAME}_SERVICE_HOST`, ...): the
/// `kubernetes` Service always, the other Services of its namespace when `enableServiceLinks`.
pub fn service_env(
    namespace: &str,
    enable_service_links: bool,
    services: &[&Service],
) -> Vec<(String, String)> {
    let mut chosen: BTreeMap<String, &Service> = BTreeMap::new();
    for service in services {
        let service_namespace = service.metadata.namespace.as_deref().unwrap_or_default();
        let name = service.metadata.name.clone().unwrap_or_default();
        let master = service_namespace == "default" && name == "kubernetes";
        let visible = (enable_service_links && service_namespace == namespace) || master;
        let cluster_ip = service
            .spec
            .as_ref()
            .and_then(|s| s.cluster_ip.as_deref())
            .unwrap_or("");
        if visible && !cluster_ip.is_empty() && cluster_ip != "None" {
            // A Service of the Pod's own namespace wins over the master Service of the same name.
            if !master || namespace == "default" || !chosen.contains_key(&name) {
                chosen.insert(name, service);
            }
        }
    }
    let mut env = Vec::new();
    for (name, service) in chosen {
        let spec = service.spec.clone().unwrap_or_default();
        let ip = spec.cluster_ip.unwrap_or_default();
        let prefix = name.to_uppercase().replace('-', "_");
        let ports = spec.ports.unwrap_or_default();
        let Some(first) = ports.first() else { continue };
        env.push((format!("{prefix}_SERVICE_HOST"), ip.clone()));
        env.push((format!("{prefix}_SERVICE_PORT"), first.port.to_string()));
        for port in &ports {
            if let Some(port_name) = port.name.as_deref().filter(|n| !n.is_empty()) {
                env.push((
                    format!(
                        "{prefix}_SERVICE_PORT_{}",
                        port_name.to_uppercase().replace('-', "_")
                    ),
                    port.port.to_string(),
                ));
            }
        }
        let protocol = |port: &k8s_openapi::api::core::v1::ServicePort| {
            port.protocol.clone().unwrap_or_else(|| "TCP".into())
        };
        env.push((
            format!("{prefix}_PORT"),
            format!("{}://{ip}:{}", protocol(first).to_lowercase(), first.port),
        ));
        for port in &ports {
            let proto = protocol(port);
            let base = format!("{prefix}_PORT_{}_{}", port.port, proto.to_uppercase());
            env.push((
                base.clone(),
                format!("{}://{ip}:{}", proto.to_lowercase(), port.port),
            ));
            env.push((format!("{base}_PROTO"), proto.to_lowercase()));
            env.push((format!("{base}_PORT"), port.port.to_string()));
            env.push((format!("{base}_ADDR"), ip.clone()));
        }
    }
    env
}

/// A name the kubelet accepts from `envFrom` (a C identifier, or dots and dashes allowed
/// since 1.30's relaxed validation; `=` and empty names never).
fn valid_env_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('=') && name.chars().all(|c| c.is_ascii_graphic())
}

/// The final environment of `container`, in order.
pub fn container_env(
    pod: &Pod,
    container: &Container,
    addresses: PodAddresses,
    objects: &PodObjects,
    service_env: &[(String, String)],
) -> Result<Vec<(String, String)>, EnvError> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut env: Vec<(String, String)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut define =
        |env: &mut Vec<(String, String)>, name: String, value: String| match index.get(&name) {
            Some(&at) => env[at].1 = value,
            None => {
                index.insert(name.clone(), env.len());
                env.push((name, value));
            }
        };
    for source in container.env_from.iter().flatten() {
        let prefix = source.prefix.clone().unwrap_or_default();
        let entries: Vec<(String, String)> = if let Some(reference) = &source.config_map_ref {
            match objects.config_maps.get(&reference.name) {
                Some(config_map) => config_map
                    .data
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                None if reference.optional == Some(true) => Vec::new(),
                None => {
                    return Err(EnvError(format!(
                        "configmap \"{}\" not found",
                        reference.name
                    )));
                }
            }
        } else if let Some(reference) = &source.secret_ref {
            match objects.secrets.get(&reference.name) {
                Some(secret) => secret_data(secret)
                    .into_iter()
                    .map(|(k, v)| (k, String::from_utf8_lossy(&v).into_owned()))
                    .collect(),
                None if reference.optional == Some(true) => Vec::new(),
                None => return Err(EnvError(format!("secret \"{}\" not found", reference.name))),
            }
        } else {
            Vec::new()
        };
        for (key, value) in entries {
            let name = format!("{prefix}{key}");
            if valid_env_name(&name) {
                define(&mut env, name, value);
            }
        }
    }
    for variable in container.env.iter().flatten() {
        let value = match &variable.value_from {
            None => {
                let defined: HashMap<&str, &str> =
                    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                let services: HashMap<&str, &str> = service_env
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                let raw = variable.value.clone().unwrap_or_default();
                expand(&raw, |name| {
                    defined
                        .get(name)
                        .or_else(|| services.get(name))
                        .map(|v| v.to_string())
                })
            }
            Some(source) => {
                let resolved = if let Some(field) = &source.field_ref {
                    Some(field_value(pod, addresses, &field.field_path)?)
                } else if let Some(resource) = &source.resource_field_ref {
                    Some(resource_value(
                        container,
                        &resource.resource,
                        resource.divisor.as_ref().map(|d| d.0.as_str()),
                    )?)
                } else if let Some(key) = &source.config_map_key_ref {
                    match objects.config_map_value(namespace, &key.name, &key.key) {
                        Ok(value) => value,
                        Err(_) if key.optional == Some(true) => None,
                        Err(error) => return Err(error),
                    }
                } else if let Some(key) = &source.secret_key_ref {
                    match objects.secret_value(namespace, &key.name, &key.key) {
                        Ok(value) => value,
                        Err(_) if key.optional == Some(true) => None,
                        Err(error) => return Err(error),
                    }
                } else {
                    None
                };
                match resolved {
                    Some(value) => value,
                    // An optional reference that is missing leaves the variable undefined.
                    None => continue,
                }
            }
        };
        define(&mut env, variable.name.clone(), value);
    }
    for (name, value) in service_env {
        if !env.iter().any(|(existing, _)| existing == name) {
            env.push((name.clone(), value.clone()));
        }
    }
    Ok(env)
}

/// Names of the ConfigMaps and Secrets a Pod's containers and volumes refer to.
pub fn referenced_objects(pod: &Pod) -> (Vec<String>, Vec<String>) {
    let mut config_maps = Vec::new();
    let mut secrets = Vec::new();
    let Some(spec) = &pod.spec else {
        return (config_maps, secrets);
    };
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers);
    for container in containers {
        for source in container.env_from.iter().flatten() {
            if let Some(r) = &source.config_map_ref {
                config_maps.push(r.name.clone());
            }
            if let Some(r) = &source.secret_ref {
                secrets.push(r.name.clone());
            }
        }
        for variable in container.env.iter().flatten() {
            if let Some(source) = &variable.value_from {
                if let Some(r) = &source.config_map_key_ref {
                    config_maps.push(r.name.clone());
                }
                if let Some(r) = &source.secret_key_ref {
                    secrets.push(r.name.clone());
                }
            }
        }
    }
    for volume in spec.volumes.iter().flatten() {
        if let Some(source) = &volume.config_map {
            config_maps.push(source.name.clone());
        }
        if let Some(source) = &volume.secret {
            secrets.extend(source.secret_name.clone());
        }
        for projection in volume
            .projected
            .iter()
            .flat_map(|p| p.sources.iter().flatten())
        {
            if let Some(source) = &projection.config_map {
                config_maps.push(source.name.clone());
            }
            if let Some(source) = &projection.secret {
                secrets.push(source.name.clone());
            }
        }
    }
    config_maps.sort();
    config_maps.dedup();
    secrets.sort();
    secrets.dedup();
    (config_maps, secrets)
}

#[cfg(test)]
mod tests;
