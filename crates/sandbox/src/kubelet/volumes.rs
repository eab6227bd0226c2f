//! A Pod's volumes as the runtime takes them: claims and emptyDirs as directories, and the
//! files of secret, configMap, downwardAPI and projected volumes computed from the objects they
//! name, as the kubelet's volume plugins write them. Also the service-account token volume the
//! ServiceAccount admission plugin adds. Pure: objects and tokens are fetched beforehand.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMapProjection, ConfigMapVolumeSource, Container, DownwardAPIVolumeFile, KeyToPath, Pod,
    ProjectedVolumeSource, SecretProjection, SecretVolumeSource, Volume as ApiVolume,
    VolumeMount as ApiMount, VolumeProjection,
};
use serde_json::json;

use super::env::{PodAddresses, PodObjects, field_value, resource_value, secret_data};
use crate::runtime::{ProjectedFile, Volume, VolumeMount, VolumeSource};
use crate::scheduler::parse_milli;

/// Where in-cluster clients look for their credentials.
pub const SERVICE_ACCOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The name of the token volume the kubelet adds (the admission plugin's `kube-api-access-*`).
pub const SERVICE_ACCOUNT_VOLUME: &str = "kube-api-access-sandbox";
/// The ConfigMap every namespace has with the cluster CA.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";

/// The mode of projected files when the volume sets none (0644).
const DEFAULT_MODE: i32 = 0o644;

/// Why a volume cannot be set up: the Pod stays `ContainerCreating` with a `FailedMount` event
/// carrying this message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("MountVolume.SetUp failed for volume \"{volume}\" : {reason}")]
pub struct MountError {
    pub volume: String,
    pub reason: String,
}

/// What projected files need besides the Pod's objects: tokens by audience (`None` is the API
/// server's own audience).
#[derive(Clone, Debug, Default)]
pub struct VolumeInputs {
    pub objects: PodObjects,
    pub tokens: BTreeMap<Option<String>, String>,
}

/// The Pod as the ServiceAccount admission plugin leaves it: unless automounting is off (on the
/// Pod, else on its ServiceAccount), a projected volume with the token, `ca.crt` and
/// `namespace`, mounted read-only in every container that has nothing at that path.
pub fn with_service_account_volume(pod: &Pod, account_automounts: Option<bool>) -> Pod {
    let mut pod = pod.clone();
    let Some(spec) = pod.spec.as_mut() else {
        return pod;
    };
    let automount = spec
        .automount_service_account_token
        .or(account_automounts)
        .unwrap_or(true);
    let already = spec
        .volumes
        .iter()
        .flatten()
        .any(|v| v.name.starts_with("kube-api-access-"));
    if !automount || already {
        return pod;
    }
    let volume: ApiVolume = serde_json::from_value(json!({
        "name": SERVICE_ACCOUNT_VOLUME,
        "projected": {"defaultMode": DEFAULT_MODE, "sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
            {"configMap": {"name": ROOT_CA_CONFIG_MAP, "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ]},
    }))
    .expect("a valid projected volume");
    spec.volumes.get_or_insert_with(Vec::new).push(volume);
    let containers = spec
        .init_containers
        .iter_mut()
        .flatten()
        .chain(spec.containers.iter_mut());
    for container in containers {
        let mounts = container.volume_mounts.get_or_insert_with(Vec::new);
        if !mounts
            .iter()
            .any(|m| m.mount_path.trim_end_matches('/') == SERVICE_ACCOUNT_PATH)
        {
            mounts.push(ApiMount {
                name: SERVICE_ACCOUNT_VOLUME.into(),
                mount_path: SERVICE_ACCOUNT_PATH.into(),
                read_only: Some(true),
                ..ApiMount::default()
            });
        }
    }
    pod
}

/// The audiences of the `serviceAccountToken` projections of a Pod's volumes.
pub fn token_audiences(pod: &Pod) -> Vec<Option<String>> {
    let mut audiences: Vec<Option<String>> = pod
        .spec
        .iter()
        .flat_map(|spec| spec.volumes.iter().flatten())
        .flat_map(|volume| {
            volume
                .projected
                .iter()
                .flat_map(|p| p.sources.iter().flatten())
        })
        .filter_map(|source| source.service_account_token.as_ref())
        .map(|token| token.audience.clone().filter(|a| !a.is_empty()))
        .collect();
    audiences.sort();
    audiences.dedup();
    audiences
}

/// The runtime's volumes for every volume of the Pod.
pub fn pod_volumes(
    pod: &Pod,
    addresses: PodAddresses,
    inputs: &VolumeInputs,
) -> Result<Vec<Volume>, MountError> {
    let volumes = pod
        .spec
        .iter()
        .flat_map(|spec| spec.volumes.iter().flatten());
    volumes
        .map(|volume| {
            Ok(Volume {
                name: volume.name.clone(),
                source: volume_source(pod, volume, addresses, inputs)?,
            })
        })
        .collect()
}

fn volume_source(
    pod: &Pod,
    volume: &ApiVolume,
    addresses: PodAddresses,
    inputs: &VolumeInputs,
) -> Result<VolumeSource, MountError> {
    let fail = |reason: String| MountError {
        volume: volume.name.clone(),
        reason,
    };
    if let Some(claim) = &volume.persistent_volume_claim {
        return Ok(VolumeSource::PersistentVolumeClaim {
            claim_name: claim.claim_name.clone(),
            read_only: claim.read_only.unwrap_or(false),
        });
    }
    if let Some(empty) = &volume.empty_dir {
        if empty.medium.as_deref() == Some("Memory") {
            let size_limit = match &empty.size_limit {
                Some(quantity) => Some(
                    parse_milli(&quantity.0)
                        .and_then(|milli| u64::try_from(milli / 1000).ok())
                        .ok_or_else(|| fail(format!("invalid sizeLimit {:?}", quantity.0)))?,
                ),
                None => None,
            };
            return Ok(VolumeSource::Memory { size_limit });
        }
        return Ok(VolumeSource::EmptyDir);
    }
    match volume_files(pod, volume, addresses, inputs).map_err(fail)? {
        Some(files) => Ok(VolumeSource::Files(files)),
        None => Err(fail(unsupported_kind(volume))),
    }
}

fn unsupported_kind(volume: &ApiVolume) -> String {
    let value = serde_json::to_value(volume).unwrap_or_default();
    let kind = value
        .as_object()
        .and_then(|fields| fields.keys().find(|key| key.as_str() != "name").cloned())
        .unwrap_or_else(|| "an empty".into());
    format!(
        "{kind} volumes are not supported by kube-sandbox (it runs persistentVolumeClaim, emptyDir, \
         secret, configMap, downwardAPI and projected volumes)"
    )
}

/// The files of a secret, configMap, downwardAPI or projected volume; `None` for other kinds.
pub fn volume_files(
    pod: &Pod,
    volume: &ApiVolume,
    addresses: PodAddresses,
    inputs: &VolumeInputs,
) -> Result<Option<Vec<ProjectedFile>>, String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    if let Some(source) = &volume.secret {
        return secret_files(namespace, source, inputs).map(Some);
    }
    if let Some(source) = &volume.config_map {
        return config_map_files(namespace, source, inputs).map(Some);
    }
    if let Some(source) = &volume.downward_api {
        let mode = source.default_mode.unwrap_or(DEFAULT_MODE);
        return downward_files(pod, source.items.iter().flatten(), mode, addresses).map(Some);
    }
    if let Some(source) = &volume.projected {
        return projected_files(pod, source, addresses, inputs).map(Some);
    }
    Ok(None)
}

fn mode_of(mode: i32) -> u32 {
    u32::try_from(mode).unwrap_or(0o644) & 0o7777
}

/// `items` of a key-value source, or every key; a listed key that is missing is an error
/// unless the source is optional.
fn keyed_files(
    data: &BTreeMap<String, Vec<u8>>,
    items: Option<&Vec<KeyToPath>>,
    default_mode: i32,
    optional: bool,
    missing_key: impl Fn(&str) -> String,
) -> Result<Vec<ProjectedFile>, String> {
    let mode = mode_of(default_mode);
    let Some(items) = items.filter(|items| !items.is_empty()) else {
        return Ok(data
            .iter()
            .map(|(key, content)| ProjectedFile {
                path: key.clone(),
                content: content.clone(),
                mode,
            })
            .collect());
    };
    let mut files = Vec::new();
    for item in items {
        match data.get(&item.key) {
            Some(content) => files.push(ProjectedFile {
                path: item.path.clone(),
                content: content.clone(),
                mode: item.mode.map_or(mode, mode_of),
            }),
            None if optional => {}
            None => return Err(missing_key(&item.key)),
        }
    }
    Ok(files)
}

fn config_map_data(inputs: &VolumeInputs, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
    let config_map = inputs.objects.config_maps.get(name)?;
    let mut data: BTreeMap<String, Vec<u8>> = config_map
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.as_bytes().to_vec()))
        .collect();
    for (key, value) in config_map.binary_data.iter().flatten() {
        data.insert(key.clone(), value.0.clone());
    }
    Some(data)
}

fn secret_files(
    namespace: &str,
    source: &SecretVolumeSource,
    inputs: &VolumeInputs,
) -> Result<Vec<ProjectedFile>, String> {
    let name = source.secret_name.clone().unwrap_or_default();
    let optional = source.optional == Some(true);
    let Some(secret) = inputs.objects.secrets.get(&name) else {
        return if optional {
            Ok(Vec::new())
        } else {
            Err(format!("secret \"{name}\" not found"))
        };
    };
    keyed_files(
        &secret_data(secret),
        source.items.as_ref(),
        source.default_mode.unwrap_or(DEFAULT_MODE),
        optional,
        |key| format!("couldn't find key {key} in Secret {namespace}/{name}"),
    )
}

fn config_map_files(
    namespace: &str,
    source: &ConfigMapVolumeSource,
    inputs: &VolumeInputs,
) -> Result<Vec<ProjectedFile>, String> {
    let name = &source.name;
    let optional = source.optional == Some(true);
    let Some(data) = config_map_data(inputs, name) else {
        return if optional {
            Ok(Vec::new())
        } else {
            Err(format!("configmap \"{name}\" not found"))
        };
    };
    keyed_files(
        &data,
        source.items.as_ref(),
        source.default_mode.unwrap_or(DEFAULT_MODE),
        optional,
        |key| format!("couldn't find key {key} in ConfigMap {namespace}/{name}"),
    )
}

fn downward_files<'a>(
    pod: &Pod,
    items: impl Iterator<Item = &'a DownwardAPIVolumeFile>,
    default_mode: i32,
    addresses: PodAddresses,
) -> Result<Vec<ProjectedFile>, String> {
    let mut files = Vec::new();
    for item in items {
        let content = if let Some(field) = &item.field_ref {
            field_value(pod, addresses, &field.field_path).map_err(|e| e.0)?
        } else if let Some(resource) = &item.resource_field_ref {
            let container_name = resource.container_name.clone().unwrap_or_default();
            let container = pod
                .spec
                .iter()
                .flat_map(|spec| {
                    spec.init_containers
                        .iter()
                        .flatten()
                        .chain(&spec.containers)
                })
                .find(|c| c.name == container_name)
                .cloned()
                .unwrap_or_else(|| Container {
                    name: container_name.clone(),
                    ..Container::default()
                });
            resource_value(
                &container,
                &resource.resource,
                resource.divisor.as_ref().map(|d| d.0.as_str()),
            )
            .map_err(|e| e.0)?
        } else {
            continue;
        };
        files.push(ProjectedFile {
            path: item.path.clone(),
            content: content.into_bytes(),
            mode: mode_of(item.mode.unwrap_or(default_mode)),
        });
    }
    Ok(files)
}

fn projected_files(
    pod: &Pod,
    source: &ProjectedVolumeSource,
    addresses: PodAddresses,
    inputs: &VolumeInputs,
) -> Result<Vec<ProjectedFile>, String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let default_mode = source.default_mode.unwrap_or(DEFAULT_MODE);
    let mut files = Vec::new();
    for projection in source.sources.iter().flatten() {
        files.extend(projection_files(
            pod,
            namespace,
            projection,
            default_mode,
            addresses,
            inputs,
        )?);
    }
    Ok(files)
}

fn projection_files(
    pod: &Pod,
    namespace: &str,
    projection: &VolumeProjection,
    default_mode: i32,
    addresses: PodAddresses,
    inputs: &VolumeInputs,
) -> Result<Vec<ProjectedFile>, String> {
    if let Some(SecretProjection {
        name,
        items,
        optional,
    }) = &projection.secret
    {
        let source = SecretVolumeSource {
            secret_name: Some(name.clone()),
            items: items.clone(),
            optional: *optional,
            default_mode: Some(default_mode),
        };
        return secret_files(namespace, &source, inputs);
    }
    if let Some(ConfigMapProjection {
        name,
        items,
        optional,
    }) = &projection.config_map
    {
        let source = ConfigMapVolumeSource {
            name: name.clone(),
            items: items.clone(),
            optional: *optional,
            default_mode: Some(default_mode),
        };
        return config_map_files(namespace, &source, inputs);
    }
    if let Some(downward) = &projection.downward_api {
        return downward_files(
            pod,
            downward.items.iter().flatten(),
            default_mode,
            addresses,
        );
    }
    if let Some(token) = &projection.service_account_token {
        let audience = token.audience.clone().filter(|a| !a.is_empty());
        let value = inputs
            .tokens
            .get(&audience)
            .ok_or_else(|| "no service account token was issued for this Pod".to_string())?;
        return Ok(vec![ProjectedFile {
            path: token.path.clone(),
            content: value.clone().into_bytes(),
            mode: mode_of(default_mode),
        }]);
    }
    Ok(Vec::new())
}

/// Converts a container's volume mounts for the runtime.
pub fn volume_mounts(container: &Container) -> Vec<VolumeMount> {
    container
        .volume_mounts
        .iter()
        .flatten()
        .map(|mount| VolumeMount {
            name: mount.name.clone(),
            mount_path: mount.mount_path.clone(),
            read_only: mount.read_only.unwrap_or(false),
            sub_path: mount.sub_path.clone().filter(|p| !p.is_empty()),
        })
        .collect()
}

#[cfg(test)]
mod tests;
