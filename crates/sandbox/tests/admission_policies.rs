//! ValidatingAdmissionPolicy and its bindings, driven by the real kubectl: a policy that
//! protects labelled ConfigMaps from deletion except by named users, by the garbage collector,
//! or with a break-glass annotation; a Warn binding; a second policy that stops the garbage
//! collector; policies whose CEL does not compile are refused.

mod common;

use common::{apply, eventually, kubectl, start};

const PROTECT: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: protect-configmaps
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["DELETE"]
        resources: ["configmaps"]
  matchConditions:
    - name: labelled
      expression: >-
        has(oldObject.metadata.labels) && 'protected' in oldObject.metadata.labels
  variables:
    - name: breakGlass
      expression: >-
        has(oldObject.metadata.annotations) &&
        'example.com/break-glass' in oldObject.metadata.annotations &&
        oldObject.metadata.annotations['example.com/break-glass'] == 'true'
  validations:
    - expression: >-
        variables.breakGlass ||
        request.userInfo.username in ['system:serviceaccount:ops:cleaner',
          'system:serviceaccount:kube-system:generic-garbage-collector']
      messageExpression: >-
        'ConfigMap ' + oldObject.metadata.name + ' is protected; ' + request.userInfo.username +
        ' may not delete it (annotate it example.com/break-glass=true first)'
      reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: protect-configmaps
spec:
  policyName: protect-configmaps
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels:
        guarded: "yes"
"#;

const WARN: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: small-configmaps
spec:
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["configmaps"]
  validations:
    - expression: "!has(object.data) || size(object.data) <= 1"
      message: at most one key
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: small-configmaps
spec:
  policyName: small-configmaps
  validationActions: [Warn]
"#;

const NO_GC: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: no-gc
spec:
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["*"]
        operations: ["DELETE"]
        resources: ["*"]
  validations:
    - expression: >-
        !(has(oldObject.metadata.labels) && 'keep-from-gc' in oldObject.metadata.labels &&
          request.userInfo.username == 'system:serviceaccount:kube-system:generic-garbage-collector')
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: no-gc
spec:
  policyName: no-gc
  validationActions: [Deny]
"#;

fn config_map(name: &str, labels: &str, owner: Option<(&str, &str)>) -> String {
    let owner = owner
        .map(|(name, uid)| {
            format!("\n  ownerReferences:\n    - apiVersion: v1\n      kind: ConfigMap\n      name: {name}\n      uid: {uid}")
        })
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: guarded\n  labels: {{{labels}}}{owner}\ndata:\n  a: '1'\n"
    )
}

#[tokio::test]
async fn a_policy_guards_deletes_and_lets_named_users_the_gc_and_break_glass_through() {
    let sandbox = start().await;
    kubectl(&sandbox, &["create", "namespace", "guarded"])
        .await
        .ok();
    kubectl(&sandbox, &["label", "namespace", "guarded", "guarded=yes"])
        .await
        .ok();
    kubectl(&sandbox, &["create", "namespace", "open"])
        .await
        .ok();
    let created = apply(&sandbox, PROTECT).await.ok();
    assert!(
        created.contains(
            "validatingadmissionpolicy.admissionregistration.k8s.io/protect-configmaps created"
        ),
        "{created}"
    );
    let listed = kubectl(&sandbox, &["get", "validatingadmissionpolicybindings"])
        .await
        .ok();
    assert!(listed.contains("protect-configmaps"), "{listed}");

    apply(&sandbox, &config_map("precious", "protected: 'yes'", None))
        .await
        .ok();
    apply(&sandbox, &config_map("plain", "", None)).await.ok();
    let refused = kubectl(
        &sandbox,
        &["-n", "guarded", "delete", "configmap", "precious"],
    )
    .await
    .err();
    assert!(
        refused.contains("configmaps \"precious\" is forbidden: ValidatingAdmissionPolicy 'protect-configmaps' with binding 'protect-configmaps' denied request: ConfigMap precious is protected; kubernetes-admin may not delete it"),
        "{refused}"
    );
    // Unlabelled objects do not match the policy's condition.
    kubectl(&sandbox, &["-n", "guarded", "delete", "configmap", "plain"])
        .await
        .ok();
    // Outside the bound namespaces the policy does not apply.
    let elsewhere = config_map("precious", "protected: 'yes'", None).replace("guarded", "open");
    apply(&sandbox, &elsewhere).await.ok();
    kubectl(&sandbox, &["-n", "open", "delete", "configmap", "precious"])
        .await
        .ok();
    // A named user may delete.
    apply(&sandbox, &config_map("by-ops", "protected: 'yes'", None))
        .await
        .ok();
    kubectl(
        &sandbox,
        &[
            "-n",
            "guarded",
            "delete",
            "configmap",
            "by-ops",
            "--as=system:serviceaccount:ops:cleaner",
            "--as-group=system:masters",
        ],
    )
    .await
    .ok();
    // Break glass, then delete.
    kubectl(
        &sandbox,
        &[
            "-n",
            "guarded",
            "annotate",
            "configmap",
            "precious",
            "example.com/break-glass=true",
        ],
    )
    .await
    .ok();
    kubectl(
        &sandbox,
        &["-n", "guarded", "delete", "configmap", "precious"],
    )
    .await
    .ok();

    // The garbage collector deletes as itself: let through by the first policy...
    apply(&sandbox, &config_map("owner", "", None)).await.ok();
    let uid = kubectl(
        &sandbox,
        &[
            "-n",
            "guarded",
            "get",
            "configmap",
            "owner",
            "-o",
            "jsonpath={.metadata.uid}",
        ],
    )
    .await
    .ok();
    apply(
        &sandbox,
        &config_map("dependent", "protected: 'yes'", Some(("owner", &uid))),
    )
    .await
    .ok();
    // ...and stopped by a second one.
    apply(&sandbox, NO_GC).await.ok();
    apply(
        &sandbox,
        &config_map(
            "kept",
            "protected: 'yes', keep-from-gc: 'yes'",
            Some(("owner", &uid)),
        ),
    )
    .await
    .ok();
    kubectl(&sandbox, &["-n", "guarded", "delete", "configmap", "owner"])
        .await
        .ok();
    eventually("the garbage collector to delete the dependent", || async {
        !kubectl(
            &sandbox,
            &["-n", "guarded", "get", "configmap", "dependent"],
        )
        .await
        .success
    })
    .await;
    // The collector handles both dependents of the owner in one pass; give it time to retry.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let kept = kubectl(&sandbox, &["-n", "guarded", "get", "configmap", "kept"]).await;
    assert!(
        kept.success,
        "the second policy keeps the garbage collector from deleting kept: {}",
        kept.stderr
    );
}

#[tokio::test]
async fn warn_bindings_warn_and_bad_policies_are_refused() {
    let sandbox = start().await;
    kubectl(&sandbox, &["create", "namespace", "guarded"])
        .await
        .ok();
    apply(&sandbox, WARN).await.ok();
    let big = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\n  namespace: guarded\ndata:\n  a: '1'\n  b: '2'\n";
    let created = apply(&sandbox, big).await;
    assert!(created.success, "{}", created.stderr);
    assert!(
        created.stderr.contains("Warning: Validation failed for ValidatingAdmissionPolicy 'small-configmaps' with binding 'small-configmaps': at most one key"),
        "{}",
        created.stderr
    );

    let bad = WARN
        .replace("small-configmaps", "broken")
        .replace("size(object.data) <= 1", "size(object.data) <=");
    let refused = apply(&sandbox, &bad).await.err();
    assert!(
        refused.contains("spec.validations[0].expression")
            && refused.contains("compilation failed"),
        "{refused}"
    );
    let empty = "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata:\n  name: empty\nspec:\n  matchConstraints:\n    resourceRules: []\n";
    let refused = apply(&sandbox, empty).await.err();
    assert!(
        refused.contains("validations or auditAnnotations"),
        "{refused}"
    );
}
