//! The StatefulSet controller: Pods `<set>-<ordinal>` with stable identities (hostname and
//! subdomain, so `<pod>.<serviceName>.<ns>.svc` resolves through the headless Service), one
//! claim per `volumeClaimTemplates` entry and ordinal that outlives its Pods, ordered or
//! parallel creation and scale-down, rolling updates, adoption of matching orphans, and the
//! status `kubectl get statefulsets` and `kubectl rollout status` read. [`plan`] says what
//! it does and does not do.
//!
//! Deleting a StatefulSet with `propagationPolicy: Orphan` is the API server's garbage
//! collector's business: it removes the set's references from its Pods first and leaves the
//! Pods and claims running; this controller does nothing for a set being deleted.

mod plan;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

pub use plan::{
    POD_INDEX_LABEL, POD_NAME_LABEL, REVISION_LABEL, StatefulSetPlan, claim_name, new_claims,
    new_pod, ordinal_of, plan_statefulset, revision,
};

use super::informer::run_owning_controller;
use super::pods::{controlled_by, controller_reference};
use super::{ControllerError, ignore_codes};
use crate::scheduler::labels::{labels_of, selector_matches};

/// How often a set is looked at again without a change of its own Pods (orphans to adopt);
/// changes of the Pods it controls wake it at once.
const RESYNC: Duration = Duration::from_secs(2);

struct StatefulSetContext {
    client: Client,
}

/// Runs the StatefulSet controller until `token` is cancelled.
pub async fn run_statefulset_controller(client: Client, token: CancellationToken) {
    let context = Arc::new(StatefulSetContext {
        client: client.clone(),
    });
    run_owning_controller::<StatefulSet, Pod, _, _>(client, token, reconcile, context).await;
}

async fn reconcile(
    set: Arc<StatefulSet>,
    context: Arc<StatefulSetContext>,
) -> Result<Action, ControllerError> {
    let namespace = set.namespace().unwrap_or_default();
    let sets: Api<StatefulSet> = Api::namespaced(context.client.clone(), &namespace);
    let pods_api: Api<Pod> = Api::namespaced(context.client.clone(), &namespace);
    let claims_api: Api<PersistentVolumeClaim> =
        Api::namespaced(context.client.clone(), &namespace);
    let Some(set) = sets.get_opt(&set.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let Some(spec) = set.spec.as_ref() else {
        return Ok(Action::await_change());
    };
    let uid = set.uid().unwrap_or_default();
    let pods: Vec<Pod> = pods_api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|p| {
            controlled_by(&p.metadata, &uid)
                || selector_matches(&spec.selector, labels_of(&p.metadata))
        })
        .collect();
    let claims: BTreeSet<String> = claims_api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    let owner = controller_reference(&set);
    let plan = plan_statefulset(&set, &pods, &claims, &owner);

    for name in &plan.adopt {
        let Some(pod) = pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
        else {
            continue;
        };
        let mut references = pod.metadata.owner_references.clone().unwrap_or_default();
        references.push(owner.clone());
        // The resourceVersion makes the adoption conditional, as the real ClaimPods is.
        let patch = json!({"metadata": {
            "ownerReferences": references,
            "resourceVersion": pod.metadata.resource_version,
        }});
        let result = pods_api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        ignore_codes(result.map(drop), &[404, 409])?;
    }
    for name in &plan.release {
        let Some(pod) = pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(name))
        else {
            continue;
        };
        let references: Vec<_> = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .filter(|r| r.uid != uid)
            .cloned()
            .collect();
        let patch = json!({"metadata": {
            "ownerReferences": references,
            "resourceVersion": pod.metadata.resource_version,
        }});
        let result = pods_api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        ignore_codes(result.map(drop), &[404, 409])?;
    }
    for claim in &plan.create_claims {
        ignore_codes(
            claims_api
                .create(&PostParams::default(), claim)
                .await
                .map(drop),
            &[409],
        )?;
    }
    for pod in &plan.create_pods {
        ignore_codes(
            pods_api.create(&PostParams::default(), pod).await.map(drop),
            &[409],
        )?;
    }
    for name in &plan.delete_pods {
        ignore_codes(
            pods_api
                .delete(name, &DeleteParams::background())
                .await
                .map(drop),
            &[404],
        )?;
    }
    if set.status.as_ref() != Some(&plan.status) && set.metadata.deletion_timestamp.is_none() {
        let mut updated = set.clone();
        updated.status = Some(plan.status.clone());
        let written = sets
            .replace_status(&set.name_any(), &PostParams::default(), &updated)
            .await;
        ignore_codes(written.map(drop), &[404, 409])?;
    }
    Ok(Action::requeue(RESYNC))
}
