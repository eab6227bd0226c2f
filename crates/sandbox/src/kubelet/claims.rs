//! PersistentVolumeClaims. With the sandbox's own API server ([`ClaimMode::Bind`]) this plays
//! a local provisioner, the PV binder and the PVC protection controller at once: a new claim
//! gets a directory and is Bound at once (the API server already defaults it Bound) with the
//! `kubernetes.io/pvc-protection` finalizer; a deleted claim stays while a Pod that is not
//! terminal uses it, then its directory goes. A claim created again under the same name starts
//! empty.
//!
//! With a real control plane ([`ClaimMode::Provision`]) it is only what an external
//! provisioner and resizer are, `kube-sandbox/local`: a pending claim of a StorageClass with
//! that provisioner gets a directory and a PersistentVolume (`pvc-<uid>`, a `hostPath` on it,
//! `claimRef` to the claim, the class's reclaim policy) that kube-controller-manager's PV
//! controller binds; a Released volume whose policy is `Delete` loses its directory and its
//! object. Protection and binding are kube-controller-manager's.
//!
//! An expansion the API server admitted grows the claim at once (a directory has no size to
//! change), unless its StorageClass sets the provisioner parameter `maxVolumeSize` and the
//! request exceeds it: then the claim reports what Kubernetes' external resizer reports for a
//! driver that refuses the size (`status.allocatedResourceStatuses.storage:
//! ControllerResizeInfeasible` and a `ControllerResizeError` condition with the driver's
//! message), and keeps its capacity until the request is lowered or the limit raised.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::controllers::informer::Informers;
use crate::runtime::PersistentVolumeStore;
use crate::scheduler::is_terminal;

pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";

/// The provisioner (and resizer) name StorageClasses give for the sandbox's volumes.
pub const PROVISIONER: &str = "kube-sandbox/local";

/// The annotation kube-controller-manager sets on a claim that an external provisioner is to
/// provision.
const STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
const PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";

/// Who binds claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimMode {
    /// The sandbox's API server: this controller binds, protects and frees claims itself.
    Bind,
    /// A real control plane: this controller provisions and deletes PersistentVolumes only.
    Provision,
}

/// Whether a Pod that still counts (not terminal) mounts the claim.
pub fn claim_in_use(claim: &PersistentVolumeClaim, pods: &[Arc<Pod>]) -> bool {
    let namespace = claim.namespace();
    let name = claim.name_any();
    pods.iter().any(|pod| {
        pod.namespace() == namespace
            && !is_terminal(pod)
            && pod
                .spec
                .iter()
                .flat_map(|s| s.volumes.iter().flatten())
                .any(|v| {
                    v.persistent_volume_claim
                        .as_ref()
                        .is_some_and(|c| c.claim_name == name)
                })
    })
}

struct ClaimController {
    mode: ClaimMode,
    client: Client,
    volumes: PersistentVolumeStore,
    claims: Store<PersistentVolumeClaim>,
    pods: Store<Pod>,
    classes: Store<StorageClass>,
    volumes_api: Option<Store<PersistentVolume>>,
    /// The uid each claim directory was provisioned for.
    provisioned: HashMap<(String, String), String>,
}

pub(crate) async fn run(
    client: Client,
    volumes: PersistentVolumeStore,
    mode: ClaimMode,
    token: CancellationToken,
) {
    let mut informers = Informers::new(&token);
    let claims = informers.watch(Api::<PersistentVolumeClaim>::all(client.clone()));
    let pods = informers.watch(Api::<Pod>::all(client.clone()));
    let classes = informers.watch(Api::<StorageClass>::all(client.clone()));
    let volumes_api = (mode == ClaimMode::Provision)
        .then(|| informers.watch(Api::<PersistentVolume>::all(client.clone())));
    if !informers.synced().await {
        return;
    }
    let changed = informers.changed.clone();
    let mut controller = ClaimController {
        mode,
        volumes_api,
        client,
        volumes,
        claims,
        pods,
        classes,
        provisioned: HashMap::new(),
    };
    loop {
        controller.sync().await;
        tokio::select! {
            () = token.cancelled() => return,
            () = changed.notified() => {}
            () = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
    }
}

impl ClaimController {
    async fn sync(&mut self) {
        if self.mode == ClaimMode::Provision {
            return self.sync_provisioner().await;
        }
        let claims = self.claims.state();
        let pods = self.pods.state();
        let mut present = HashMap::new();
        for claim in &claims {
            let namespace = claim.namespace().unwrap_or_default();
            let name = claim.name_any();
            let uid = claim.uid().unwrap_or_default();
            present.insert((namespace.clone(), name.clone()), uid.clone());
            let api = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &namespace);
            let finalizers = claim.finalizers().to_vec();
            let protected = finalizers.iter().any(|f| f == PVC_PROTECTION);
            let result = if claim.metadata.deletion_timestamp.is_some() {
                if protected && !claim_in_use(claim, &pods) {
                    let remaining: Vec<&String> =
                        finalizers.iter().filter(|f| *f != PVC_PROTECTION).collect();
                    let patch = json!({"metadata": {"finalizers": remaining, "resourceVersion": claim.resource_version()}});
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map(drop)
                } else {
                    Ok(())
                }
            } else {
                self.bind(&api, claim, &namespace, &name, &uid, protected)
                    .await
            };
            match result {
                Ok(()) => {}
                Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
                Err(error) => {
                    tracing::warn!(claim = %name, %namespace, %error, "updating a PersistentVolumeClaim failed")
                }
            }
        }
        let gone: Vec<(String, String)> = self
            .provisioned
            .keys()
            .filter(|key| !present.contains_key(*key))
            .cloned()
            .collect();
        for (namespace, name) in gone {
            match self.volumes.delete(&namespace, &name) {
                Ok(()) => {
                    self.provisioned.remove(&(namespace, name));
                }
                Err(error) => {
                    tracing::warn!(claim = %name, %namespace, %error, "removing the data of a deleted claim failed")
                }
            }
        }
    }

    /// Provisions the claim's directory and marks it Bound, protected while in use.
    async fn bind(
        &mut self,
        api: &Api<PersistentVolumeClaim>,
        claim: &PersistentVolumeClaim,
        namespace: &str,
        name: &str,
        uid: &str,
        protected: bool,
    ) -> Result<(), kube::Error> {
        let key = (namespace.to_string(), name.to_string());
        if self.provisioned.get(&key).is_some_and(|owner| owner != uid) {
            // A new claim of the same name: the old one's data is not its data.
            if let Err(error) = self.volumes.delete(namespace, name) {
                tracing::warn!(claim = %name, %namespace, %error, "clearing the directory of a replaced claim failed");
            }
        }
        if let Err(error) = self.volumes.provision(namespace, name) {
            tracing::warn!(claim = %name, %namespace, %error, "provisioning a claim failed");
            return Ok(());
        }
        self.provisioned.insert(key, uid.to_string());
        if !protected {
            let mut finalizers = claim.finalizers().to_vec();
            finalizers.push(PVC_PROTECTION.to_string());
            let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": claim.resource_version()}});
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        let status = claim.status.clone().unwrap_or_default();
        if status.phase.as_deref() != Some("Bound") {
            let spec = claim.spec.clone().unwrap_or_default();
            let storage = spec
                .resources
                .as_ref()
                .and_then(|r| r.requests.as_ref())
                .and_then(|r| r.get("storage"))
                .cloned();
            let patch = json!({"status": {
                "phase": "Bound",
                "accessModes": spec.access_modes.unwrap_or_else(|| vec!["ReadWriteOnce".into()]),
                "capacity": storage.map(|s| json!({"storage": s})),
            }});
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        } else if let Some(outcome) = resize(claim, self.max_volume_size(claim).as_deref())
            && let Some(patch) = resize_status(claim, &outcome)
        {
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        Ok(())
    }

    /// [`ClaimMode::Provision`]: provisions pending claims of this provisioner, resizes bound
    /// ones, deletes Released volumes whose policy is `Delete`.
    async fn sync_provisioner(&mut self) {
        let Some(volumes) = self.volumes_api.clone() else {
            return;
        };
        let pv_api = Api::<PersistentVolume>::all(self.client.clone());
        for claim in self.claims.state() {
            let namespace = claim.namespace().unwrap_or_default();
            let name = claim.name_any();
            let uid = claim.uid().unwrap_or_default();
            if claim.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let spec = claim.spec.clone().unwrap_or_default();
            let result = match spec.volume_name.as_deref() {
                None if self.provisioner_of(&claim).as_deref() == Some(PROVISIONER) => {
                    self.provision(&pv_api, &claim, &namespace, &name, &uid)
                        .await
                }
                Some(volume)
                    if claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound") =>
                {
                    self.resize_bound(&pv_api, &claim, &namespace, &name, volume)
                        .await
                }
                _ => Ok(()),
            };
            match result {
                Ok(()) => {}
                Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
                Err(error) => {
                    tracing::warn!(claim = %name, %namespace, %error, "provisioning a PersistentVolumeClaim failed")
                }
            }
        }
        for volume in volumes.state() {
            let ours = volume
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(PROVISIONED_BY))
                .is_some_and(|p| p == PROVISIONER);
            let spec = volume.spec.clone().unwrap_or_default();
            let released =
                volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released");
            let policy = spec
                .persistent_volume_reclaim_policy
                .as_deref()
                .unwrap_or("Delete");
            if !ours
                || !released
                || policy != "Delete"
                || volume.metadata.deletion_timestamp.is_some()
            {
                continue;
            }
            let Some(claim) = spec.claim_ref.as_ref() else {
                continue;
            };
            let key = (
                claim.namespace.clone().unwrap_or_default(),
                claim.name.clone().unwrap_or_default(),
            );
            // The directory belongs to this volume's claim unless a newer claim of the same
            // name took it over.
            let owner = self.provisioned.get(&key).cloned();
            if owner.is_none() || owner == claim.uid {
                if let Err(error) = self.volumes.delete(&key.0, &key.1) {
                    tracing::warn!(volume = %volume.name_any(), %error, "removing a released volume's data failed");
                    continue;
                }
                self.provisioned.remove(&key);
            }
            match pv_api
                .delete(&volume.name_any(), &DeleteParams::default())
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => {
                    tracing::warn!(volume = %volume.name_any(), %error, "deleting a released PersistentVolume failed")
                }
            }
        }
    }

    /// The provisioner that is to provision `claim`: kube-controller-manager's annotation, or
    /// the provisioner of its StorageClass.
    fn provisioner_of(&self, claim: &PersistentVolumeClaim) -> Option<String> {
        if let Some(annotated) = claim
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(STORAGE_PROVISIONER))
        {
            return Some(annotated.clone());
        }
        let class = claim.spec.as_ref()?.storage_class_name.as_deref()?;
        self.classes
            .state()
            .iter()
            .find(|c| c.name_any() == class)
            .map(|c| c.provisioner.clone())
    }

    /// A directory and a PersistentVolume for a pending claim.
    async fn provision(
        &mut self,
        pv_api: &Api<PersistentVolume>,
        claim: &PersistentVolumeClaim,
        namespace: &str,
        name: &str,
        uid: &str,
    ) -> Result<(), kube::Error> {
        let key = (namespace.to_string(), name.to_string());
        if self.provisioned.get(&key).is_some_and(|owner| owner != uid)
            && let Err(error) = self.volumes.delete(namespace, name)
        {
            tracing::warn!(claim = %name, %namespace, %error, "clearing the directory of a replaced claim failed");
        }
        let path = match self.volumes.provision(namespace, name) {
            Ok(path) => path,
            Err(error) => {
                tracing::warn!(claim = %name, %namespace, %error, "provisioning a claim failed");
                return Ok(());
            }
        };
        self.provisioned.insert(key, uid.to_string());
        let spec = claim.spec.clone().unwrap_or_default();
        let storage = spec
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .map(|q| q.0.clone())
            .unwrap_or_else(|| "1Gi".into());
        let class = spec.storage_class_name.clone().unwrap_or_default();
        let policy = self
            .classes
            .state()
            .iter()
            .find(|c| c.name_any() == class)
            .and_then(|c| c.reclaim_policy.clone())
            .unwrap_or_else(|| "Delete".into());
        let volume: PersistentVolume = serde_json::from_value(json!({
            "metadata": {
                "name": format!("pvc-{uid}"),
                "annotations": {PROVISIONED_BY: PROVISIONER},
            },
            "spec": {
                "capacity": {"storage": storage},
                "accessModes": spec.access_modes.unwrap_or_else(|| vec!["ReadWriteOnce".into()]),
                "persistentVolumeReclaimPolicy": policy,
                "storageClassName": class,
                "volumeMode": "Filesystem",
                "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                             "namespace": namespace, "name": name, "uid": uid},
                "hostPath": {"path": path.display().to_string(), "type": "Directory"},
            },
        }))
        .map_err(kube::Error::SerdeError)?;
        pv_api
            .create(&PostParams::default(), &volume)
            .await
            .map(drop)
    }

    /// A bound claim whose request exceeds its capacity: grown as an external resizer and the
    /// kubelet's filesystem resize would (a directory has no size to change), or refused past
    /// the class's `maxVolumeSize`.
    async fn resize_bound(
        &self,
        pv_api: &Api<PersistentVolume>,
        claim: &PersistentVolumeClaim,
        namespace: &str,
        name: &str,
        volume: &str,
    ) -> Result<(), kube::Error> {
        if self.provisioner_of(claim).as_deref() != Some(PROVISIONER) {
            return Ok(());
        }
        let Some(outcome) = resize(claim, self.max_volume_size(claim).as_deref()) else {
            return Ok(());
        };
        let Some(patch) = resize_status(claim, &outcome) else {
            return Ok(());
        };
        if let Resize::Grown(grown) = &outcome {
            pv_api
                .patch(
                    volume,
                    &PatchParams::default(),
                    &Patch::Merge(&json!({"spec": {"capacity": {"storage": grown}}})),
                )
                .await?;
        }
        let api = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), namespace);
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
    }

    /// The `maxVolumeSize` parameter of the claim's StorageClass, if it sets one.
    fn max_volume_size(&self, claim: &PersistentVolumeClaim) -> Option<String> {
        let class = claim.spec.as_ref()?.storage_class_name.as_deref()?;
        self.classes
            .state()
            .iter()
            .find(|c| c.name_any() == class)?
            .parameters
            .as_ref()?
            .get(MAX_VOLUME_SIZE)
            .cloned()
    }
}

/// The StorageClass parameter of the `kube-sandbox/local` provisioner that bounds a volume's
/// size, as a storage driver's maximum volume size does.
pub const MAX_VOLUME_SIZE: &str = "maxVolumeSize";

/// `allocatedResourceStatuses.storage` of a claim whose expansion the driver refuses.
pub const RESIZE_INFEASIBLE: &str = "ControllerResizeInfeasible";

/// What the resize controller does with a Bound claim whose request exceeds its capacity.
#[derive(Debug, PartialEq, Eq)]
pub enum Resize {
    /// The volume grows to this size.
    Grown(String),
    /// The driver refuses the size, with its message.
    Infeasible(String),
}

/// The resize of `claim`, if its request exceeds its capacity, against the StorageClass's
/// `maxVolumeSize`.
pub fn resize(claim: &PersistentVolumeClaim, max: Option<&str>) -> Option<Resize> {
    let grown = expanded_capacity(claim)?;
    let bytes = crate::apiserver::objects::claims::quantity;
    match max.map(|m| (m, bytes(m), bytes(&grown))) {
        Some((m, Some(limit), Some(wanted))) if wanted > limit => {
            Some(Resize::Infeasible(format!(
                "resize volume \"{}\" by resizer \"kube-sandbox/local\" failed: rpc error: code = OutOfRange desc = requested size {grown} exceeds the maximum volume size {m} (StorageClass parameter {MAX_VOLUME_SIZE})",
                claim.name_any()
            )))
        }
        _ => Some(Resize::Grown(grown)),
    }
}

/// The claim's status after `outcome`, or `None` when it already says so: the resize
/// controller and the kubelet's filesystem resize report a grown directory at once (it has no
/// size to change); the driver's refusal is reported as Kubernetes' external resizer does.
fn resize_status(claim: &PersistentVolumeClaim, outcome: &Resize) -> Option<serde_json::Value> {
    match outcome {
        Resize::Grown(grown) => Some(json!({"status": {
            "capacity": {"storage": grown},
            "allocatedResources": {"storage": grown},
            "allocatedResourceStatuses": null,
            "conditions": null,
        }})),
        Resize::Infeasible(message) if !reports_infeasible(claim, message) => {
            Some(json!({"status": {
                "allocatedResourceStatuses": {"storage": RESIZE_INFEASIBLE},
                "conditions": [{
                    "type": "ControllerResizeError",
                    "status": "True",
                    "lastTransitionTime": jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
                    "message": message,
                }],
            }}))
        }
        Resize::Infeasible(_) => None,
    }
}

/// `claim` already reports this refusal (nothing to patch again).
fn reports_infeasible(claim: &PersistentVolumeClaim, message: &str) -> bool {
    let Some(status) = claim.status.as_ref() else {
        return false;
    };
    status
        .allocated_resource_statuses
        .as_ref()
        .and_then(|s| s.get("storage"))
        .is_some_and(|s| s == RESIZE_INFEASIBLE)
        && status.conditions.iter().flatten().any(|c| {
            c.type_ == "ControllerResizeError"
                && c.status == "True"
                && c.message.as_deref() == Some(message)
        })
}

/// The request of a Bound claim whose request exceeds its capacity (an expansion the API server
/// admitted): the capacity it grows to.
pub fn expanded_capacity(claim: &PersistentVolumeClaim) -> Option<String> {
    let requested = claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))?;
    let capacity = claim
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"));
    let bytes = |q: &str| crate::apiserver::objects::claims::quantity(q);
    let larger = match capacity {
        Some(c) => matches!((bytes(&requested.0), bytes(&c.0)), (Some(r), Some(c)) if r > c),
        None => true,
    };
    larger.then(|| requested.0.clone())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_pods_that_are_not_terminal_hold_a_claim() {
        let claim: PersistentVolumeClaim =
            serde_json::from_value(json!({"metadata": {"name": "data-0", "namespace": "db"}}))
                .unwrap();
        let pod = |namespace: &str, phase: &str| -> Arc<Pod> {
            Arc::new(
                serde_json::from_value(json!({
                    "metadata": {"name": "p", "namespace": namespace},
                    "spec": {"containers": [], "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data-0"}}]},
                    "status": {"phase": phase},
                }))
                .unwrap(),
            )
        };
        assert!(claim_in_use(&claim, &[pod("db", "Running")]));
        assert!(claim_in_use(&claim, &[pod("db", "Pending")]));
        assert!(!claim_in_use(
            &claim,
            &[pod("db", "Succeeded"), pod("other", "Running")]
        ));
    }

    #[test]
    fn a_claim_whose_request_exceeds_its_capacity_grows_to_it() {
        let claim = |requested: &str, capacity: &str| -> PersistentVolumeClaim {
            serde_json::from_value(json!({
                "metadata": {"name": "data-0", "namespace": "db"},
                "spec": {"resources": {"requests": {"storage": requested}}},
                "status": {"phase": "Bound", "capacity": {"storage": capacity}},
            }))
            .unwrap()
        };
        assert_eq!(expanded_capacity(&claim("2Gi", "1Gi")), Some("2Gi".into()));
        assert_eq!(expanded_capacity(&claim("1Gi", "1Gi")), None);
        assert_eq!(expanded_capacity(&claim("1024Mi", "1Gi")), None);
        assert_eq!(expanded_capacity(&claim("1Gi", "2Gi")), None);
    }

    #[test]
    fn an_expansion_past_the_classes_maximum_is_infeasible_and_reported_once() {
        let claim = |requested: &str, status: serde_json::Value| -> PersistentVolumeClaim {
            let mut status = status;
            status["phase"] = json!("Bound");
            status["capacity"] = json!({"storage": "1Gi"});
            serde_json::from_value(json!({
                "metadata": {"name": "data-0", "namespace": "db"},
                "spec": {"resources": {"requests": {"storage": requested}}, "storageClassName": "small"},
                "status": status,
            }))
            .unwrap()
        };
        let plain = claim("2Gi", json!({}));
        assert_eq!(resize(&plain, None), Some(Resize::Grown("2Gi".into())));
        assert_eq!(
            resize(&plain, Some("2Gi")),
            Some(Resize::Grown("2Gi".into()))
        );
        assert_eq!(
            resize(&plain, Some("not a size")),
            Some(Resize::Grown("2Gi".into()))
        );
        assert_eq!(resize(&claim("1Gi", json!({})), Some("512Mi")), None);
        let Some(Resize::Infeasible(message)) = resize(&claim("8Gi", json!({})), Some("4Gi"))
        else {
            panic!("8Gi over a 4Gi maximum is infeasible");
        };
        assert!(
            message.contains("requested size 8Gi exceeds the maximum volume size 4Gi"),
            "{message}"
        );
        assert!(!reports_infeasible(&claim("8Gi", json!({})), &message));
        let reported = claim(
            "8Gi",
            json!({
                "allocatedResourceStatuses": {"storage": RESIZE_INFEASIBLE},
                "conditions": [{"type": "ControllerResizeError", "status": "True", "message": message}],
            }),
        );
        assert!(reports_infeasible(&reported, &message));
        assert!(!reports_infeasible(&reported, "another message"));
    }
}
