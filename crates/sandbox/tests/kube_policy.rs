//! Policy through kube-rs: PodDisruptionBudget status and eviction, RBAC for service-account
//! tokens, TokenRequest, Pod logs from a registered log source, events.k8s.io Events.

mod common;

use std::sync::Arc;

use bytes::Bytes;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{
    ConfigMap, Event as CoreEvent, ObjectReference, Pod, ServiceAccount,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, EvictParams, ListParams, LogParams, Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube_sandbox::apiserver::{LogError, LogRequest, LogStream, PodLogs};
use serde_json::json;

use common::{eventually, start};

async fn ready_pod(api: &Api<Pod>, name: &str) {
    let pod: Pod = serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {"app": "etcd"}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "etcd", "image": "etcd:3.5"}]}}),
    )
    .unwrap();
    api.create(&PostParams::default(), &pod).await.unwrap();
    let status = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
}

#[tokio::test]
async fn eviction_honours_the_disruption_budget() {
    let sandbox = start().await;
    // kube-rs retries 429 answers for minutes by default; a drain loop would, a test need not.
    let mut config = sandbox.client_config().await.unwrap();
    config.default_retry = false;
    let client = kube_sandbox::kube_client::client_for(config).unwrap();
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    let budgets: Api<PodDisruptionBudget> = Api::default_namespaced(client);
    for name in ["etcd-0", "etcd-1"] {
        ready_pod(&pods, name).await;
    }
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({"metadata": {"name": "etcd"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "etcd"}}}}))
    .unwrap();
    budgets.create(&PostParams::default(), &pdb).await.unwrap();
    eventually("the budget's status is computed", || async {
        let status = budgets
            .get("etcd")
            .await
            .unwrap()
            .status
            .unwrap_or_default();
        status.current_healthy == 2 && status.desired_healthy == 2 && status.expected_pods == 2
    })
    .await;
    let refused = pods
        .evict("etcd-0", &EvictParams::default())
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("{refused:?}")
    };
    assert_eq!(
        (status.code, status.reason.as_str()),
        (429, "TooManyRequests")
    );
    assert!(status.message.contains("disruption budget"));

    ready_pod(&pods, "etcd-2").await;
    eventually("a third healthy Pod allows one disruption", || async {
        budgets
            .get("etcd")
            .await
            .unwrap()
            .status
            .is_some_and(|s| s.disruptions_allowed == 1)
    })
    .await;
    pods.evict("etcd-0", &EvictParams::default()).await.unwrap();
    assert!(
        pods.get("etcd-0")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some(),
        "evicted Pods end gracefully"
    );
    let again = pods
        .evict("etcd-1", &EvictParams::default())
        .await
        .unwrap_err();
    let kube::Error::Api(status) = again else {
        panic!("{again:?}")
    };
    assert_eq!(
        status.code, 429,
        "the granted eviction still counts against the budget"
    );
}

#[tokio::test]
async fn service_account_tokens_are_authorized_by_rbac() {
    let sandbox = start().await;
    let admin = sandbox.client();
    let accounts: Api<ServiceAccount> = Api::default_namespaced(admin.clone());
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "operator"}})).unwrap();
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let request: TokenRequest = serde_json::from_value(json!({"spec": {"audiences": ["https://kubernetes.default.svc"], "expirationSeconds": 3600}})).unwrap();
    let issued = accounts
        .create_token_request("operator", &PostParams::default(), &request)
        .await
        .unwrap();
    assert!(!issued.status.unwrap().token.is_empty());

    let operator = sandbox
        .service_account_client("default", "operator")
        .await
        .unwrap();
    let as_operator: Api<ConfigMap> = Api::default_namespaced(operator.clone());
    let denied = as_operator.list(&ListParams::default()).await.unwrap_err();
    let kube::Error::Api(status) = denied else {
        panic!("{denied:?}")
    };
    assert_eq!((status.code, status.reason.as_str()), (403, "Forbidden"));
    assert!(
        status
            .message
            .contains("system:serviceaccount:default:operator"),
        "{}",
        status.message
    );

    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "cm-editor"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create"]},
                  {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["delete"], "resourceNames": ["disposable"]}]});
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "operator-cm"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-editor"},
        "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": "default"}]});
    let roles: Api<k8s_openapi::api::rbac::v1::Role> = Api::default_namespaced(admin.clone());
    roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(role).unwrap(),
        )
        .await
        .unwrap();
    let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> =
        Api::default_namespaced(admin.clone());
    bindings
        .create(
            &PostParams::default(),
            &serde_json::from_value(binding).unwrap(),
        )
        .await
        .unwrap();

    as_operator.list(&ListParams::default()).await.unwrap();
    for name in ["disposable", "precious"] {
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        as_operator
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    as_operator
        .delete("disposable", &Default::default())
        .await
        .unwrap();
    let kept = as_operator
        .delete("precious", &Default::default())
        .await
        .unwrap_err();
    assert!(
        matches!(kept, kube::Error::Api(ref s) if s.code == 403),
        "resourceNames limit delete: {kept:?}"
    );
    let elsewhere: Api<ConfigMap> = Api::namespaced(operator.clone(), "kube-system");
    assert!(
        elsewhere.list(&ListParams::default()).await.is_err(),
        "a Role binds in its own namespace only"
    );
    let pods: Api<Pod> = Api::default_namespaced(operator);
    assert!(pods.list(&ListParams::default()).await.is_err());
}

/// A log source standing in for the node agent.
struct FixedLogs;

#[async_trait::async_trait]
impl PodLogs for FixedLogs {
    async fn read(&self, request: &LogRequest) -> Result<Bytes, LogError> {
        if request.previous {
            return Err(LogError::NoPrevious {
                pod: request.pod.clone(),
                container: request.container.clone(),
            });
        }
        let lines = ["one", "two", "three"];
        let keep = request.tail_lines.unwrap_or(lines.len()).min(lines.len());
        Ok(Bytes::from(
            lines[lines.len() - keep..]
                .iter()
                .map(|l| format!("{}:{l}\n", request.container))
                .collect::<String>(),
        ))
    }

    async fn follow(&self, request: &LogRequest) -> Result<LogStream, LogError> {
        let lines = vec![Ok(Bytes::from(format!("{} follows\n", request.pod)))];
        Ok(Box::pin(futures::stream::iter(lines)))
    }
}

#[tokio::test]
async fn pod_logs_come_from_the_registered_source() {
    let sandbox = start().await;
    let pods: Api<Pod> = Api::default_namespaced(sandbox.client());
    ready_pod(&pods, "logged").await;
    let waiting = pods
        .logs("logged", &LogParams::default())
        .await
        .unwrap_err();
    assert!(
        format!("{waiting:?}").contains("is waiting to start"),
        "{waiting:?}"
    );
    sandbox
        .api_server()
        .expect("the sandbox's own API server")
        .register_pod_logs(Arc::new(FixedLogs));
    let tail = pods
        .logs(
            "logged",
            &LogParams {
                tail_lines: Some(2),
                ..LogParams::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(tail, "etcd:two\netcd:three\n");
    let followed = pods
        .logs(
            "logged",
            &LogParams {
                follow: true,
                ..LogParams::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(followed, "logged follows\n");
    let previous = pods
        .logs(
            "logged",
            &LogParams {
                previous: true,
                ..LogParams::default()
            },
        )
        .await
        .unwrap_err();
    assert!(format!("{previous:?}").contains("previous terminated container"));
    let out = common::kubectl(&sandbox, &["logs", "logged", "--tail=1"])
        .await
        .ok();
    assert_eq!(out, "etcd:three\n");
}

#[tokio::test]
async fn events_recorded_through_events_api_are_core_events_too() {
    let sandbox = start().await;
    let client = sandbox.client();
    let reporter = Reporter {
        controller: "etcd-operator".into(),
        instance: Some("test".into()),
    };
    let recorder = Recorder::new(client.clone(), reporter);
    let reference = ObjectReference {
        kind: Some("EtcdCluster".into()),
        name: Some("main".into()),
        namespace: Some("default".into()),
        api_version: Some("etcd-operator.cozystack.io/v1alpha2".into()),
        ..Default::default()
    };
    let event = Event {
        type_: EventType::Normal,
        reason: "MemberAdded".into(),
        note: Some("added member 2".into()),
        action: "Scale".into(),
        secondary: None,
    };
    recorder.publish(&event, &reference).await.unwrap();
    let core: Api<CoreEvent> = Api::default_namespaced(client);
    let listed = core
        .list(&ListParams::default().fields("involvedObject.name=main"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].message.as_deref(), Some("added member 2"));
    assert_eq!(listed.items[0].reason.as_deref(), Some("MemberAdded"));
}
