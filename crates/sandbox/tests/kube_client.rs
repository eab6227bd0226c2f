//! The sandbox driven by kube-rs: typed and dynamic APIs, status, pagination, finalizers and
//! the runtime's Controller, as the operator uses them against a real cluster.

mod common;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use common::{api_error, config_map, eventually, start};

#[tokio::test]
async fn typed_api_crud_with_conflicts_and_selectors() {
    let sandbox = start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(sandbox.client());
    let created = api
        .create(
            &PostParams::default(),
            &config_map("a", json!({"app": "etcd"})),
        )
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert_eq!(created.metadata.generation, Some(1));
    api.create(
        &PostParams::default(),
        &config_map("b", json!({"app": "web"})),
    )
    .await
    .unwrap();
    let err = api_error(
        api.create(&PostParams::default(), &config_map("a", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "AlreadyExists"));

    let selected = api
        .list(&ListParams::default().labels("app=etcd"))
        .await
        .unwrap();
    assert_eq!(
        selected
            .items
            .iter()
            .map(|c| c.name_any())
            .collect::<Vec<_>>(),
        ["a"]
    );
    let by_name = api
        .list(&ListParams::default().fields("metadata.name=b"))
        .await
        .unwrap();
    assert_eq!(by_name.items.len(), 1);

    let mut stale = created.clone();
    let mut fresh = created.clone();
    fresh.data = Some([("k".to_string(), "new".to_string())].into());
    let replaced = api
        .replace("a", &PostParams::default(), &fresh)
        .await
        .unwrap();
    assert_ne!(replaced.resource_version(), created.resource_version());
    stale.data = Some([("k".to_string(), "stale".to_string())].into());
    let err = api_error(
        api.replace("a", &PostParams::default(), &stale)
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));

    let patched = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.labels()["x"], "y");
    api.delete("a", &DeleteParams::default()).await.unwrap();
    let err = api_error(api.get("a").await.unwrap_err());
    assert_eq!((err.code, err.reason.as_str()), (404, "NotFound"));
}

#[tokio::test]
async fn list_pages_with_limit_and_continue() {
    let sandbox = start().await;
    let api: Api<ConfigMap> = Api::namespaced(sandbox.client(), "kube-public");
    for i in 0..25 {
        api.create(
            &PostParams::default(),
            &config_map(&format!("page-{i:02}"), json!({"paged": "yes"})),
        )
        .await
        .unwrap();
    }
    let mut names = Vec::new();
    let mut params = ListParams::default().labels("paged=yes").limit(10);
    let mut pages = 0;
    loop {
        let page = api.list(&params).await.unwrap();
        pages += 1;
        names.extend(page.items.iter().map(|c| c.name_any()));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => {
                assert!(page.metadata.remaining_item_count.unwrap() > 0);
                params = params.continue_token(&token);
            }
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(names.len(), 25);
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "pages come in key order");
}

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, JsonSchema)]
#[kube(
    group = "test.sandbox.io",
    version = "v1",
    kind = "Gizmo",
    namespaced,
    status = "GizmoStatus"
)]
struct GizmoSpec {
    value: i64,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, JsonSchema)]
struct GizmoStatus {
    observed: Option<i64>,
}

async fn install_gizmos(client: &kube::Client) {
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &Gizmo::crd())
        .await
        .unwrap();
}

#[tokio::test]
async fn custom_resources_through_typed_and_dynamic_apis_with_status() {
    let sandbox = start().await;
    let client = sandbox.client();
    install_gizmos(&client).await;
    let gizmos: Api<Gizmo> = Api::default_namespaced(client.clone());
    let created = gizmos
        .create(
            &PostParams::default(),
            &Gizmo::new("g1", GizmoSpec { value: 1 }),
        )
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));

    // Status only through the status subresource; the main resource ignores it.
    let status = gizmos
        .patch_status(
            "g1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"observed": 1}})),
        )
        .await
        .unwrap();
    assert_eq!(status.status.unwrap().observed, Some(1));
    assert_eq!(
        status.metadata.generation,
        Some(1),
        "a status write is no spec change"
    );
    let updated = gizmos
        .patch(
            "g1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"value": 2}, "status": {"observed": 99}})),
        )
        .await
        .unwrap();
    assert_eq!(updated.metadata.generation, Some(2));
    assert_eq!(updated.status.unwrap().observed, Some(1));

    // The same objects through discovery and the dynamic API.
    let discovery = kube::Discovery::new(client.clone()).run().await.unwrap();
    let (resource, capabilities) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("test.sandbox.io", "v1", "Gizmo"))
        .expect("gizmos are discovered");
    assert_eq!(capabilities.scope, kube::discovery::Scope::Namespaced);
    assert!(
        capabilities
            .subresources
            .iter()
            .any(|(r, _)| r.plural == "gizmos/status" || r.plural == "status")
    );
    let dynamic: Api<DynamicObject> = Api::default_namespaced_with(client.clone(), &resource);
    let mut object = DynamicObject::new("g2", &resource).data(json!({"spec": {"value": 5}}));
    object.metadata.labels = Some([("made".to_string(), "dynamically".to_string())].into());
    dynamic
        .create(&PostParams::default(), &object)
        .await
        .unwrap();
    let listed = dynamic
        .list(&ListParams::default().labels("made=dynamically"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].data["spec"]["value"], 5);
    let typed = gizmos.get("g2").await.unwrap();
    assert_eq!(typed.spec.value, 5);
    dynamic
        .delete("g2", &DeleteParams::default())
        .await
        .unwrap();
    let ar = ApiResource::erase::<Gizmo>(&());
    assert_eq!(ar.plural, "gizmos");
}

#[tokio::test]
async fn a_controller_reconciles_a_custom_resource() {
    let sandbox = start().await;
    let client = sandbox.client();
    install_gizmos(&client).await;
    let gizmos: Api<Gizmo> = Api::default_namespaced(client.clone());
    gizmos
        .create(
            &PostParams::default(),
            &Gizmo::new("g", GizmoSpec { value: 7 }),
        )
        .await
        .unwrap();

    async fn reconcile(gizmo: Arc<Gizmo>, api: Arc<Api<Gizmo>>) -> Result<Action, kube::Error> {
        let patch = Patch::Merge(json!({"status": {"observed": gizmo.spec.value}}));
        api.patch_status(&gizmo.name_any(), &PatchParams::default(), &patch)
            .await?;
        Ok(Action::await_change())
    }
    fn error_policy(_: Arc<Gizmo>, _: &kube::Error, _: Arc<Api<Gizmo>>) -> Action {
        Action::requeue(Duration::from_millis(100))
    }
    let controller = Controller::new(gizmos.clone(), watcher::Config::default())
        .run(reconcile, error_policy, Arc::new(gizmos.clone()))
        .for_each(|_| async {});
    let running = tokio::spawn(controller);
    eventually("the controller records the first value", || async {
        gizmos
            .get_status("g")
            .await
            .ok()
            .and_then(|g| g.status)
            .and_then(|s| s.observed)
            == Some(7)
    })
    .await;
    gizmos
        .patch(
            "g",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"value": 8}})),
        )
        .await
        .unwrap();
    eventually("the controller follows a spec change", || async {
        gizmos
            .get_status("g")
            .await
            .ok()
            .and_then(|g| g.status)
            .and_then(|s| s.observed)
            == Some(8)
    })
    .await;
    running.abort();
}

#[tokio::test]
async fn finalizers_hold_a_deleted_object_until_removed() {
    let sandbox = start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(sandbox.client());
    let mut held = config_map("held", json!({}));
    held.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    api.delete("held", &DeleteParams::default()).await.unwrap();
    let deleting = api.get("held").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());
    let err = api_error(
        api.patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}),
            ),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(api_error(api.get("held").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn dry_run_generate_name_and_delete_preconditions() {
    let sandbox = start().await;
    let api: Api<ConfigMap> = Api::default_namespaced(sandbox.client());
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    api.create(&dry, &config_map("ghost", json!({})))
        .await
        .unwrap();
    assert_eq!(api_error(api.get("ghost").await.unwrap_err()).code, 404);
    let generated: ConfigMap =
        serde_json::from_value(json!({"metadata": {"generateName": "gen-"}})).unwrap();
    let created = api
        .create(&PostParams::default(), &generated)
        .await
        .unwrap();
    let name = created.name_any();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
    let wrong_uid = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some("nope".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    assert_eq!(
        api_error(api.delete(&name, &wrong_uid).await.unwrap_err()).code,
        409
    );
    api.delete(&name, &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
async fn pods_filter_by_node_and_phase_and_default_their_spec() {
    let sandbox = start().await;
    let api: Api<Pod> = Api::default_namespaced(sandbox.client());
    for (name, node) in [("on-1", "node-1"), ("on-2", "node-2")] {
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"nodeName": node, "containers": [{"name": "c", "image": "etcd:3.5"}]}})).unwrap();
        let created = api.create(&PostParams::default(), &pod).await.unwrap();
        let spec = created.spec.unwrap();
        assert_eq!(spec.restart_policy.as_deref(), Some("Always"));
        assert_eq!(
            spec.containers[0].termination_message_path.as_deref(),
            Some("/dev/termination-log")
        );
        assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));
    }
    let on_node = api
        .list(&ListParams::default().fields("spec.nodeName=node-2"))
        .await
        .unwrap();
    assert_eq!(
        on_node
            .items
            .iter()
            .map(|p| p.name_any())
            .collect::<Vec<_>>(),
        ["on-2"]
    );
    let pending = api
        .list(&ListParams::default().fields("status.phase=Pending,spec.nodeName!=node-2"))
        .await
        .unwrap();
    assert_eq!(pending.items.len(), 1);
    let err = api_error(
        api.list(&ListParams::default().fields("spec.bogus=x"))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 400);
    // A Pod on a node ends gracefully: the node agent finishes it with grace 0.
    api.delete("on-1", &DeleteParams::default()).await.unwrap();
    assert!(
        api.get("on-1")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    api.delete(
        "on-1",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(api_error(api.get("on-1").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn many_sandboxes_run_side_by_side() {
    let (a, b, c) = tokio::join!(start(), start(), start());
    let urls = [a.url(), b.url(), c.url()];
    assert!(urls[0] != urls[1] && urls[1] != urls[2] && urls[0] != urls[2]);
    let api_a: Api<ConfigMap> = Api::default_namespaced(a.client());
    api_a
        .create(&PostParams::default(), &config_map("only-in-a", json!({})))
        .await
        .unwrap();
    let api_b: Api<ConfigMap> = Api::default_namespaced(b.client());
    assert_eq!(
        api_error(api_b.get("only-in-a").await.unwrap_err()).code,
        404
    );
    drop(a);
    let api_c: Api<ConfigMap> = Api::default_namespaced(c.client());
    assert!(
        api_c.get("kube-root-ca.crt").await.is_ok(),
        "stopping one leaves the others serving"
    );
}

#[tokio::test]
async fn server_side_apply_creates_and_owns_status_through_kube() {
    let sandbox = start().await;
    let client = sandbox.client();
    install_gizmos(&client).await;
    let gizmos: Api<Gizmo> = Api::default_namespaced(client.clone());
    let apply = PatchParams::apply("gizmo-operator").force();
    let desired = json!({"apiVersion": "test.sandbox.io/v1", "kind": "Gizmo", "metadata": {"name": "applied"}, "spec": {"value": 3}});
    let created = gizmos
        .patch("applied", &apply, &Patch::Apply(&desired))
        .await
        .unwrap();
    assert_eq!(created.spec.value, 3);
    let status =
        json!({"apiVersion": "test.sandbox.io/v1", "kind": "Gizmo", "status": {"observed": 3}});
    let with_status = gizmos
        .patch_status("applied", &apply, &Patch::Apply(&status))
        .await
        .unwrap();
    assert_eq!(with_status.status.as_ref().unwrap().observed, Some(3));
    let managers: Vec<(String, Option<String>)> = with_status
        .metadata
        .managed_fields
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|entry| (entry.manager.unwrap_or_default(), entry.subresource))
        .collect();
    assert!(
        managers.contains(&("gizmo-operator".to_string(), None)),
        "{managers:?}"
    );
    assert!(
        managers.contains(&("gizmo-operator".to_string(), Some("status".to_string()))),
        "{managers:?}"
    );
    // Applying the same configuration again changes nothing.
    let again = gizmos
        .patch("applied", &apply, &Patch::Apply(&desired))
        .await
        .unwrap();
    assert_eq!(again.resource_version(), with_status.resource_version());
}
