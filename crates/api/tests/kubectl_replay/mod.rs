//! Replays validation cases through kubectl against one API server with our CRDs installed
//! from `deploy/crds/`: kube-sandbox's own, or a real kube-apiserver (the authority on what the
//! API accepts and on its messages).
//!
//! Each case runs in a namespace of its own (cases reuse object names), as the kubectl calls
//! [`plan::steps`] gives. The stored object is read with the administrator's client before
//! and after each judged call, so "rejected" also proves that nothing changed.

pub mod kubectl;
pub mod plan;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube_sandbox::{ControlPlane, Sandbox, SandboxOptions};
use serde_json::{Value, json};

use crate::harness::{Case, Expect};
use kubectl::{Kubectl, Outcome};
use plan::Step;

/// A sandbox serving our CRDs, and kubectl for it.
pub struct Replay {
    sandbox: Sandbox,
    kubectl: Kubectl,
    resources: Vec<ApiResource>,
    // Removed (with the kubeconfig and kubectl's cache) when the replay is dropped.
    _dir: tempfile::TempDir,
}

impl Replay {
    /// Starts `control_plane` without nodes and installs `deploy/crds/*.yaml` with `kubectl
    /// apply`, which must print no warning, waiting until every CRD is Established and
    /// kubectl's discovery knows the kinds.
    pub async fn start(crds: &[CustomResourceDefinition], control_plane: ControlPlane) -> Self {
        kubectl::require_installed();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let options = match control_plane {
            ControlPlane::Sandbox => SandboxOptions::new(dir.path()).nodes(0),
            real => SandboxOptions::cluster(dir.path())
                .nodes(0)
                .control_plane(real),
        };
        let sandbox = Sandbox::start(options)
            .await
            .expect("the control plane starts (a real one needs root and scripts/install-deps.sh)");
        let kubectl = Kubectl::new(sandbox.kubeconfig_path());
        let deploy = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/crds");
        let mut apply = vec!["apply".to_owned()];
        for crd in crds {
            let file = deploy.join(etcd_operator_api::crd_file_name(crd));
            apply.extend(["-f".to_owned(), file.display().to_string()]);
        }
        let apply: Vec<&str> = apply.iter().map(String::as_str).collect();
        let installed = kubectl.run(&apply, None).await;
        assert!(
            !installed.stderr.to_lowercase().contains("warning"),
            "installing deploy/crds printed a warning:\n{}",
            installed.stderr
        );
        installed.expect_success("installing deploy/crds");
        let mut wait = vec!["wait", "--for=condition=Established", "--timeout=30s"];
        let names: Vec<String> = crds
            .iter()
            .map(|crd| format!("crd/{}", crd.metadata.name.as_deref().unwrap_or_default()))
            .collect();
        wait.extend(names.iter().map(String::as_str));
        kubectl
            .run(&wait, None)
            .await
            .expect_success("waiting for the CRDs to be Established");
        // Refreshes the discovery cache once, so the concurrent replays find the kinds in it.
        let listed = kubectl
            .run(
                &[
                    "api-resources",
                    "--api-group",
                    etcd_operator_api::GROUP,
                    "-o",
                    "name",
                ],
                None,
            )
            .await
            .expect_success("listing our resources");
        assert_eq!(listed.lines().count(), crds.len(), "{listed}");
        let resources = crds
            .iter()
            .map(|crd| {
                let gvk = GroupVersionKind::gvk(
                    &crd.spec.group,
                    &crd.spec.versions[0].name,
                    &crd.spec.names.kind,
                );
                ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural)
            })
            .collect();
        Self {
            sandbox,
            kubectl,
            resources,
            _dir: dir,
        }
    }

    pub fn kubectl(&self) -> &Kubectl {
        &self.kubectl
    }

    /// The namespace case number `index` runs in.
    fn namespace(index: usize) -> String {
        format!("case-{index:03}")
    }

    /// Creates the namespaces of `count` cases with one `kubectl create` of a stream of JSON
    /// objects (not a `List`: kubectl validates a List on the client, from the protobuf OpenAPI v2 document
    /// the sandbox does not serve).
    pub async fn create_namespaces(&self, count: usize) {
        let stream: Vec<String> = (0..count)
            .map(|index| {
                json!({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": Self::namespace(index)}})
                .to_string()
            })
            .collect();
        self.kubectl
            .run(&["create", "-f", "-"], Some(&stream.join("\n")))
            .await
            .expect_success("creating the namespaces of the cases");
    }

    /// Replays every case with `workers` running at once; returns the failures in case order,
    /// each with kubectl's output.
    pub async fn replay_all(self: &Arc<Self>, cases: Vec<Case>, workers: usize) -> Vec<String> {
        self.create_namespaces(cases.len()).await;
        let cases = Arc::new(cases);
        let next = Arc::new(AtomicUsize::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..workers {
            let (replay, cases, next) = (Arc::clone(self), Arc::clone(&cases), Arc::clone(&next));
            tasks.spawn(async move {
                let mut failures = Vec::new();
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(case) = cases.get(index) else {
                        return failures;
                    };
                    if let Err(failure) = replay.replay(case, &Self::namespace(index)).await {
                        failures.push((index, format!("{} / {}: {failure}", case.file, case.name)));
                    }
                }
            });
        }
        let mut failures: Vec<(usize, String)> = Vec::new();
        while let Some(done) = tasks.join_next().await {
            failures.extend(done.expect("a replay worker panicked"));
        }
        failures.sort();
        failures.into_iter().map(|(_, failure)| failure).collect()
    }

    /// Replays one case in `namespace`: `Ok` when the API server answers as the case expects.
    pub async fn replay(&self, case: &Case, namespace: &str) -> Result<(), String> {
        let name = case.object["metadata"]["name"].as_str().unwrap_or_default();
        let objects = self.api(&case.object, namespace)?;
        let mut transcript = Vec::new();
        for step in plan::steps(case, namespace) {
            let before = stored(&objects, name).await?;
            let outcome = self.send(&step, before.as_ref()).await;
            transcript.push(outcome.show());
            if outcome.success {
                continue;
            }
            if !step.judged {
                return Err(format!(
                    "the old object was refused:\n{}",
                    transcript.join("\n")
                ));
            }
            let Expect::Rejected(expected) = &case.expect else {
                return Err(format!(
                    "expected accepted, refused:\n{}",
                    transcript.join("\n")
                ));
            };
            if !outcome.stderr.contains(expected.as_str()) {
                return Err(format!(
                    "expected an error containing {expected:?}:\n{}",
                    transcript.join("\n")
                ));
            }
            let after = stored(&objects, name).await?;
            if after != before {
                return Err(format!(
                    "refused, but the object changed:\n{}\n    before: {}\n    after: {}",
                    transcript.join("\n"),
                    show_object(before.as_ref()),
                    show_object(after.as_ref())
                ));
            }
            return Ok(());
        }
        match &case.expect {
            Expect::Accepted if stored(&objects, name).await?.is_some() => Ok(()),
            Expect::Accepted => Err(format!(
                "accepted, but the object is not stored:\n{}",
                transcript.join("\n")
            )),
            Expect::Rejected(expected) => Err(format!(
                "expected rejected with {expected:?}, accepted:\n{}",
                transcript.join("\n")
            )),
        }
    }

    /// Runs the step's kubectl command; an update carries the resourceVersion of the object
    /// read just before, as a real API server requires for custom resources.
    async fn send(&self, step: &Step, current: Option<&Value>) -> Outcome {
        let mut object = step.object.clone();
        if step.verb.is_update()
            && let Some(version) = current.and_then(|c| c["metadata"].get("resourceVersion"))
        {
            object["metadata"]["resourceVersion"] = version.clone();
        }
        self.kubectl
            .run(step.verb.args(), Some(&object.to_string()))
            .await
    }

    /// The administrator's API for `object`'s kind in `namespace`.
    fn api(&self, object: &Value, namespace: &str) -> Result<Api<DynamicObject>, String> {
        let kind = object["kind"].as_str().unwrap_or_default();
        let resource = self
            .resources
            .iter()
            .find(|resource| resource.kind == kind)
            .ok_or_else(|| format!("no CRD of ours has the kind {kind:?}"))?;
        Ok(Api::namespaced_with(
            self.sandbox.client(),
            namespace,
            resource,
        ))
    }
}

/// The stored object, or `None` when there is none.
async fn stored(objects: &Api<DynamicObject>, name: &str) -> Result<Option<Value>, String> {
    let object = objects
        .get_opt(name)
        .await
        .map_err(|error| format!("reading {name}: {error}"))?;
    Ok(object.map(|object| serde_json::to_value(object).expect("an object serializes")))
}

fn show_object(object: Option<&Value>) -> String {
    object.map_or_else(|| "absent".to_owned(), Value::to_string)
}
