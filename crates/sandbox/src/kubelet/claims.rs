//! PersistentVolumeClaims, as a local provisioner and the PVC protection controller handle them:
//! a new claim gets a directory and is Bound at once (the API server already defaults it Bound)
//! with the `kubernetes.io/pvc-protection` finalizer; a deleted claim stays while a Pod that is not terminal uses it, then its
//! directory goes. A claim created again under the same name starts empty.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::controllers::informer::Informers;
use crate::runtime::PersistentVolumeStore;
use crate::scheduler::is_terminal;

pub const PVC_PROTECTION: &str = "kubernetes.io/pvc-protection";

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
    client: Client,
    volumes: PersistentVolumeStore,
    claims: Store<PersistentVolumeClaim>,
    pods: Store<Pod>,
    /// The uid each claim directory was provisioned for.
    provisioned: HashMap<(String, String), String>,
}

pub(crate) async fn run(client: Client, volumes: PersistentVolumeStore, token: CancellationToken) {
    let mut informers = Informers::new(&token);
    let claims = informers.watch(Api::<PersistentVolumeClaim>::all(client.clone()));
    let pods = informers.watch(Api::<Pod>::all(client.clone()));
    if !informers.synced().await {
        return;
    }
    let changed = informers.changed.clone();
    let mut controller = ClaimController {
        client,
        volumes,
        claims,
        pods,
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
        } else if let Some(grown) = expanded_capacity(claim) {
            // The resize controller and the kubelet's filesystem resize: a directory has no
            // size to change, so the new capacity is reported at once.
            let patch = json!({"status": {
                "capacity": {"storage": grown},
                "allocatedResources": {"storage": grown},
            }});
            api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        Ok(())
    }
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
}
