//! The steps that are one Kubernetes write.

use etcd_operator_api::EtcdMember;
use etcd_operator_api::labels::{MEMBER_FINALIZER, ROLE, ROLE_VOTER};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{DeleteParams, Patch, PatchParams, Preconditions};
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::status::post_params;
use super::{ActContext, ActError, ObjectKind, Written, is_not_found};
use crate::build::REPORTING_COMPONENT;
use crate::plan::{MetadataObject, Observed, Step};

/// Performs a step that writes to the Kubernetes API.
pub async fn perform(
    ctx: &ActContext,
    step: &Step,
    observed: &Observed,
) -> Result<Option<Written>, ActError> {
    let ns = observed
        .cluster
        .metadata
        .namespace
        .clone()
        .unwrap_or_default();
    let writer = Writer { ctx, ns: &ns };
    match step {
        Step::CreateService(svc) => writer.create(ObjectKind::Service, svc.as_ref()).await,
        Step::UpdateService(svc) => writer.replace(ObjectKind::Service, svc.as_ref()).await,
        Step::CreatePdb(pdb) => writer.create(ObjectKind::Pdb, pdb.as_ref()).await,
        Step::UpdatePdb(pdb) => writer.replace(ObjectKind::Pdb, pdb.as_ref()).await,
        Step::DeletePdb { name } => {
            let uid = observed
                .pdb
                .as_ref()
                .filter(|p| p.metadata.name.as_deref() == Some(name.as_str()))
                .and_then(|p| p.metadata.uid.clone());
            writer
                .delete::<PodDisruptionBudget>(ObjectKind::Pdb, name, uid)
                .await
        }
        Step::CreateMember(member) => writer.create(ObjectKind::Member, member.as_ref()).await,
        Step::DeleteMember { member } => {
            let uid = observed_member(observed, member).and_then(|m| m.metadata.uid.clone());
            writer
                .delete::<EtcdMember>(ObjectKind::Member, member, uid)
                .await
        }
        Step::SetDormant { members, dormant } => {
            let mut last = None;
            for name in members {
                last = writer
                    .patch_observed_member(
                        observed,
                        name,
                        |_| json!({"spec": {"dormant": dormant}}),
                    )
                    .await?;
            }
            Ok(last)
        }
        Step::SetMemberVersion { member, version } => {
            writer
                .patch_observed_member(observed, member, |_| json!({"spec": {"version": version}}))
                .await
        }
        Step::SetMemberConfig { member, config, .. } => {
            writer
                .patch_observed_member(observed, member, |_| json!({"spec": config}))
                .await
        }
        Step::SetMemberStorage { member, size } => {
            writer
                .patch_observed_member(
                    observed,
                    member,
                    |_| json!({"spec": {"storage": {"size": size}}}),
                )
                .await
        }
        Step::ResizePvc { pvc, size, .. } => {
            let patch = json!({"spec": {"resources": {"requests": {"storage": size}}}});
            writer
                .merge_patch::<PersistentVolumeClaim>(ObjectKind::Pvc, pvc, &patch)
                .await
        }
        Step::SetMemberMetadata { member, metadata } => {
            // A merge patch merges maps: null first removes what the member had, so the new
            // value replaces it whole.
            writer
                .patch_observed_member(observed, member, |current| {
                    json!({"spec": {"additionalMetadata": crate::build::replacing_patch(
                        current.spec.additional_metadata.as_ref(),
                        metadata.as_ref(),
                    )}})
                })
                .await
        }
        Step::RemoveClusterAnnotation { annotation, .. } => {
            let name = observed.cluster.metadata.name.clone().unwrap_or_default();
            let patch = json!({"metadata": {"annotations": {annotation.as_str(): null}}});
            writer
                .merge_patch::<etcd_operator_api::EtcdCluster>(ObjectKind::Cluster, &name, &patch)
                .await
        }
        Step::RemoveFinalizer { member } => {
            let current =
                observed_member(observed, member).ok_or_else(|| ActError::NotObserved {
                    what: format!("EtcdMember {ns}/{member}"),
                })?;
            let remaining: Vec<&String> = current
                .metadata
                .finalizers
                .iter()
                .flatten()
                .filter(|f| *f != MEMBER_FINALIZER)
                .collect();
            // The resourceVersion makes the removal fail if the finalizers changed meanwhile.
            let patch = json!({
                "metadata": {
                    "resourceVersion": current.metadata.resource_version,
                    "finalizers": remaining,
                },
            });
            let written = writer
                .merge_patch::<EtcdMember>(ObjectKind::Member, member, &patch)
                .await?;
            Ok(written.map(|w| vanishing(w, current)))
        }
        Step::CreatePvc(pvc) => writer.create(ObjectKind::Pvc, pvc.as_ref()).await,
        Step::DeletePvc { member, pvc } => {
            let uid = observed
                .members
                .iter()
                .find(|m| m.member.metadata.name.as_deref() == Some(member.as_str()))
                .and_then(|m| m.pvc.as_ref())
                .filter(|p| p.name == *pvc)
                .map(|p| p.uid.clone());
            writer
                .delete::<PersistentVolumeClaim>(ObjectKind::Pvc, pvc, uid)
                .await
        }
        Step::SetPvcOwner {
            pvc,
            resource_version,
            owner,
            ..
        } => {
            // The observed resourceVersion: a PVC changed (or a newer one of the same name)
            // since the observation makes the patch fail with 409.
            let owners = owner.as_ref().map(|o| vec![o.as_ref().clone()]);
            let patch = json!({
                "metadata": {
                    "resourceVersion": resource_version,
                    "ownerReferences": owners,
                },
            });
            writer
                .merge_patch::<PersistentVolumeClaim>(ObjectKind::Pvc, pvc, &patch)
                .await
        }
        Step::MarkScaleIn { member, marked } => {
            let value = marked.then_some("true");
            writer
                .patch_observed_member(observed, member, |_| {
                    json!({"metadata": {"annotations": {crate::plan::SCALE_IN_ANNOTATION: value}}})
                })
                .await
        }
        Step::CreatePod(pod) => writer.create(ObjectKind::Pod, pod.as_ref()).await,
        Step::DeletePod { pod, uid, .. } => {
            writer
                .delete::<Pod>(ObjectKind::Pod, pod, Some(uid.clone()))
                .await
        }
        Step::LabelPod { pod, voter, .. } => {
            let value = voter.then_some(ROLE_VOTER);
            let patch = json!({"metadata": {"labels": {ROLE: value}}});
            writer
                .merge_patch::<Pod>(ObjectKind::Pod, pod, &patch)
                .await
        }
        Step::PatchPodMetadata {
            pod,
            labels,
            annotations,
            remove_labels,
            remove_annotations,
            ..
        } => {
            let patch =
                metadata_patch(labels, annotations, remove_labels, remove_annotations, None);
            writer
                .merge_patch::<Pod>(ObjectKind::Pod, pod, &patch)
                .await
        }
        Step::PatchMetadata {
            object,
            name,
            labels,
            annotations,
            remove_labels,
            remove_annotations,
            record,
            ..
        } => {
            let patch = metadata_patch(
                labels,
                annotations,
                remove_labels,
                remove_annotations,
                record.as_ref(),
            );
            match object {
                MetadataObject::Pvc => {
                    writer
                        .merge_patch::<PersistentVolumeClaim>(ObjectKind::Pvc, name, &patch)
                        .await
                }
                MetadataObject::Member => {
                    writer
                        .merge_patch::<EtcdMember>(ObjectKind::Member, name, &patch)
                        .await
                }
                MetadataObject::Service => {
                    writer
                        .merge_patch::<Service>(ObjectKind::Service, name, &patch)
                        .await
                }
                MetadataObject::Pdb => {
                    writer
                        .merge_patch::<PodDisruptionBudget>(ObjectKind::Pdb, name, &patch)
                        .await
                }
            }
        }
        Step::SetPodStart { pod, start, .. } => {
            let patch = json!({"metadata": {"annotations": start.annotations()}});
            writer
                .merge_patch::<Pod>(ObjectKind::Pod, pod, &patch)
                .await
        }
        Step::ApplyCertificate {
            name,
            object,
            patch,
        } => {
            let api: Api<kube::api::DynamicObject> = Api::namespaced_with(
                ctx.client.clone(),
                &ns,
                &crate::security::certmanager::resource("Certificate"),
            );
            ctx.count_write("Certificate");
            let what = format!("cert-manager Certificate {ns}/{name}");
            match (object, patch) {
                (Some(object), _) => {
                    api.create(&post_params(), object)
                        .await
                        .map_err(|e| ActError::from_kube(format!("creating {what}"), e))?;
                }
                (None, Some(patch)) => {
                    let body = json!({"spec": patch});
                    api.patch(name, &PatchParams::default(), &Patch::Merge(&body))
                        .await
                        .map_err(|e| ActError::from_kube(format!("patching {what}"), e))?;
                }
                (None, None) => {}
            }
            // Certificates are not in the caches: the next pass reads them again.
            Ok(None)
        }
        // Not Kubernetes writes: handled by the caller.
        Step::Idle
        | Step::Wait { .. }
        | Step::SetPhase { .. }
        | Step::RebuildMember { .. }
        | Step::AdoptMember { .. }
        | Step::AddLearner { .. }
        | Step::PromoteLearner { .. }
        | Step::RemoveEtcdMember { .. }
        | Step::MoveLeader { .. }
        | Step::EnableDowngrade { .. }
        | Step::CancelDowngrade { .. }
        | Step::DisarmAlarm { .. }
        | Step::Compact { .. }
        | Step::Defragment { .. }
        | Step::EnableAuth
        | Step::ChangeRootPassword
        | Step::IssueCertificate { .. } => Ok(None),
    }
}

/// A finalizer removal on a terminating object may let it go at once.
fn vanishing(written: Written, object: &EtcdMember) -> Written {
    match written {
        Written::Updated {
            kind,
            namespace,
            name,
            resource_version,
            ..
        } => Written::Updated {
            kind,
            namespace,
            name,
            resource_version,
            may_vanish: object.metadata.deletion_timestamp.is_some(),
        },
        other => other,
    }
}

fn observed_member<'a>(observed: &'a Observed, name: &str) -> Option<&'a EtcdMember> {
    observed
        .members
        .iter()
        .map(|m| &m.member)
        .find(|m| m.metadata.name.as_deref() == Some(name))
}

/// Writes into one namespace.
struct Writer<'a> {
    ctx: &'a ActContext,
    ns: &'a str,
}

impl Writer<'_> {
    fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.ctx.client.clone(), self.ns)
    }

    fn what<K: Resource>(&self, name: &str) -> String
    where
        K::DynamicType: Default,
    {
        format!("{} {}/{name}", K::kind(&Default::default()), self.ns)
    }

    async fn create<K>(&self, kind: ObjectKind, object: &K) -> Result<Option<Written>, ActError>
    where
        K: Resource<Scope = NamespaceResourceScope>
            + Clone
            + Serialize
            + DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let name = object.meta().name.clone().unwrap_or_default();
        self.ctx.count_write(&K::kind(&Default::default()));
        let created = self
            .api::<K>()
            .create(&post_params(), object)
            .await
            .map_err(|e| ActError::from_kube(format!("creating {}", self.what::<K>(&name)), e))?;
        Ok(Some(Written::updated(kind, self.ns, &name, created.meta())))
    }

    /// PUT with the object's resourceVersion: fails with 409 if it changed since observed.
    async fn replace<K>(&self, kind: ObjectKind, object: &K) -> Result<Option<Written>, ActError>
    where
        K: Resource<Scope = NamespaceResourceScope>
            + Clone
            + Serialize
            + DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let name = object.meta().name.clone().unwrap_or_default();
        self.ctx.count_write(&K::kind(&Default::default()));
        let replaced = self
            .api::<K>()
            .replace(&name, &post_params(), object)
            .await
            .map_err(|e| ActError::from_kube(format!("updating {}", self.what::<K>(&name)), e))?;
        Ok(Some(Written::updated(
            kind,
            self.ns,
            &name,
            replaced.meta(),
        )))
    }

    async fn merge_patch<K>(
        &self,
        kind: ObjectKind,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<Option<Written>, ActError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
        K::DynamicType: Default,
    {
        self.ctx.count_write(&K::kind(&Default::default()));
        let params = PatchParams {
            field_manager: Some(REPORTING_COMPONENT.to_string()),
            ..Default::default()
        };
        let patched = self
            .api::<K>()
            .patch(name, &params, &Patch::Merge(patch))
            .await
            .map_err(|e| ActError::from_kube(format!("patching {}", self.what::<K>(name)), e))?;
        Ok(Some(Written::updated(kind, self.ns, name, patched.meta())))
    }

    /// A merge patch of the observed EtcdMember `name`, built from it by `patch` and guarded by
    /// its observed resourceVersion: a member changed since the observation fails with 409
    /// (the next pass decides again), and one not observed is not patched at all.
    async fn patch_observed_member(
        &self,
        observed: &Observed,
        name: &str,
        patch: impl FnOnce(&EtcdMember) -> serde_json::Value,
    ) -> Result<Option<Written>, ActError> {
        let current = observed_member(observed, name).ok_or_else(|| ActError::NotObserved {
            what: format!("EtcdMember {}/{name}", self.ns),
        })?;
        let mut body = patch(current);
        body["metadata"]["resourceVersion"] = json!(current.metadata.resource_version);
        self.merge_patch::<EtcdMember>(ObjectKind::Member, name, &body)
            .await
    }

    /// DELETE with a UID precondition (when the UID is known): a newer object that took the
    /// name is never deleted. Already gone counts as done.
    async fn delete<K>(
        &self,
        kind: ObjectKind,
        name: &str,
        uid: Option<String>,
    ) -> Result<Option<Written>, ActError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
        K::DynamicType: Default,
    {
        let Some(uid) = uid else {
            return Err(ActError::NotObserved {
                what: format!("deleting {}: its UID", self.what::<K>(name)),
            });
        };
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.clone()),
                resource_version: None,
            }),
            ..Default::default()
        };
        self.ctx.count_write(&K::kind(&Default::default()));
        match self.api::<K>().delete(name, &params).await {
            Ok(_) => Ok(Some(Written::deleted(kind, self.ns, name, &uid))),
            Err(e) if is_not_found(&e) => Ok(Some(Written::deleted(kind, self.ns, name, &uid))),
            Err(e) => Err(ActError::from_kube(
                format!("deleting {}", self.what::<K>(name)),
                e,
            )),
        }
    }
}

/// A merge patch of `metadata` adding or updating `labels` and `annotations` and removing the
/// `remove_*` keys (null removes a key in a merge patch); `record` sets (or, `Some(None)`,
/// removes) the additionalMetadata record annotation.
fn metadata_patch(
    labels: &std::collections::BTreeMap<String, String>,
    annotations: &std::collections::BTreeMap<String, String>,
    remove_labels: &[String],
    remove_annotations: &[String],
    record: Option<&Option<String>>,
) -> serde_json::Value {
    let side = |set: &std::collections::BTreeMap<String, String>, remove: &[String]| {
        let mut map = serde_json::Map::new();
        for key in remove {
            map.insert(key.clone(), serde_json::Value::Null);
        }
        for (key, value) in set {
            map.insert(key.clone(), serde_json::Value::String(value.clone()));
        }
        map
    };
    let mut annotations = side(annotations, remove_annotations);
    if let Some(record) = record {
        annotations.insert(
            crate::build::ADDITIONAL_METADATA_RECORD.to_string(),
            record
                .clone()
                .map_or(serde_json::Value::Null, serde_json::Value::String),
        );
    }
    json!({"metadata": {
        "labels": serde_json::Value::Object(side(labels, remove_labels)),
        "annotations": serde_json::Value::Object(annotations),
    }})
}
