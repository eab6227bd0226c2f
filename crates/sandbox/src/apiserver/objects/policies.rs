//! `ValidatingAdmissionPolicy` and `ValidatingAdmissionPolicyBinding`
//! (`admissionregistration.k8s.io/v1`): CEL checks of creates, updates and deletes, run after
//! the schema's own validation and before anything is stored, as kube-apiserver's admission
//! plugin runs them.
//!
//! What is evaluated: the policy's `matchConstraints` and the binding's `matchResources`
//! (`resourceRules`, `excludeResourceRules`, `namespaceSelector`, `objectSelector`), then
//! `matchConditions`, `variables` and `validations` with `object`, `oldObject`, `request`
//! (`operation`, `userInfo`, `name`, `namespace`, `kind`, `resource`, `subResource`, `dryRun`),
//! `namespaceObject` and `variables`; `message`, `messageExpression` and `reason`;
//! `failurePolicy`; the binding's `validationActions` (`Deny`, `Warn`; `Audit` is accepted and
//! records nothing). Not supported: `paramKind` and `paramRef` (a policy that needs parameters
//! fails as its `failurePolicy` says, with that reason), the `authorizer` variable, and
//! `auditAnnotations`.
//!
//! Writes the server makes itself are checked only where kube-apiserver's controllers would
//! send a request of their own: the garbage collector and the namespace controller delete with
//! their service accounts' names (`system:serviceaccount:kube-system:generic-garbage-collector`,
//! `...:namespace-controller`), so a policy must let them through, as on a real cluster.

use std::collections::HashMap;
use std::sync::Arc;

use kube_cel::KubeCelExt;
use kube_cel::cel::objects::{Key, Map};
use kube_cel::cel::{Context, Program, Value as CelValue};
use serde_json::{Value, json};

use crate::apiserver::auth::Identity;
use crate::apiserver::error::{ApiError, ApiResult};
use crate::apiserver::registry::ResourceType;
use crate::apiserver::selector::LabelSelector;
use crate::apiserver::server::ApiServer;
use crate::apiserver::store::ResourceId;
use crate::schema::cel::untyped;

pub const GROUP: &str = "admissionregistration.k8s.io";
pub const POLICIES: &str = "validatingadmissionpolicies";
pub const BINDINGS: &str = "validatingadmissionpolicybindings";

/// The identity of the garbage collector's deletes.
pub fn garbage_collector() -> Identity {
    Identity::service_account("kube-system", "generic-garbage-collector")
}

/// The identity of the namespace controller's deletes.
pub fn namespace_controller() -> Identity {
    Identity::service_account("kube-system", "namespace-controller")
}

/// The operation of a request, as admission sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Self::Create => "CREATE",
            Self::Update => "UPDATE",
            Self::Delete => "DELETE",
        }
    }
}

/// One write to check.
pub struct Request<'a> {
    pub kind: &'a ResourceType,
    pub version: &'a str,
    pub subresource: Option<&'a str>,
    pub operation: Operation,
    pub namespace: &'a str,
    pub name: &'a str,
    /// The new object (`None` on delete).
    pub object: Option<&'a Value>,
    /// The stored object (`None` on create).
    pub old: Option<&'a Value>,
    pub user: &'a Identity,
    pub dry_run: bool,
}

/// Runs every bound policy that matches `request`: `Ok` with the warnings of `Warn` bindings,
/// or the first denial of a `Deny` binding.
pub fn admit(server: &ApiServer, request: &Request<'_>) -> ApiResult<Vec<String>> {
    // Policies never apply to themselves and their bindings (nobody could repair a bad one).
    if request.kind.group == GROUP && [POLICIES, BINDINGS].contains(&request.kind.plural.as_str()) {
        return Ok(Vec::new());
    }
    let bindings = server
        .store
        .list(&ResourceId::new(GROUP, BINDINGS), None, None, None, &|_| {
            true
        })
        .items;
    if bindings.is_empty() {
        return Ok(Vec::new());
    }
    let namespace_object = (!request.namespace.is_empty())
        .then(|| {
            server
                .store
                .get(&ResourceId::new("", "namespaces"), "", request.namespace)
        })
        .flatten()
        .map(|ns| (*ns).clone());
    let mut warnings = Vec::new();
    for binding in &bindings {
        let binding_name = binding["metadata"]["name"].as_str().unwrap_or("");
        let Some(policy_name) = binding["spec"]["policyName"].as_str() else {
            continue;
        };
        let Some(policy) = server
            .store
            .get(&ResourceId::new(GROUP, POLICIES), "", policy_name)
        else {
            continue;
        };
        let matched = matches(
            &policy["spec"]["matchConstraints"],
            request,
            &namespace_object,
            false,
        ) && (binding["spec"]["matchResources"].is_null()
            || matches(
                &binding["spec"]["matchResources"],
                request,
                &namespace_object,
                true,
            ));
        if !matched {
            continue;
        }
        let Some(failure) = evaluate(&policy, request, &namespace_object) else {
            continue;
        };
        let actions: Vec<&str> = binding["spec"]["validationActions"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let message = format!(
            "ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}' denied request: {}",
            failure.message
        );
        if actions.contains(&"Warn") {
            warnings.push(format!(
                "Validation failed for ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}': {}",
                failure.message
            ));
        }
        if actions.contains(&"Deny") {
            return Err(denial(request, failure.reason.as_deref(), message));
        }
    }
    Ok(warnings)
}

/// A failed validation (or a failure under `failurePolicy: Fail`).
struct Failure {
    message: String,
    reason: Option<String>,
}

fn denial(request: &Request<'_>, reason: Option<&str>, message: String) -> ApiError {
    let resource = if request.kind.group.is_empty() {
        request.kind.plural.clone()
    } else {
        format!("{}.{}", request.kind.plural, request.kind.group)
    };
    match reason.unwrap_or("Invalid") {
        "Forbidden" => ApiError::forbidden(format!(
            "{resource} \"{}\" is forbidden: {message}",
            request.name
        )),
        "Unauthorized" => ApiError::with_reason(401, "Unauthorized", message),
        "RequestEntityTooLarge" => ApiError::request_too_large(message),
        _ => ApiError::with_reason(
            422,
            "Invalid",
            format!("{resource} \"{}\" is invalid: : {message}", request.name),
        ),
    }
}

/// Whether a `MatchResources` selects the request. A binding's may leave `resourceRules` out
/// (everything its policy matches); a policy's must name what it matches.
fn matches(
    spec: &Value,
    request: &Request<'_>,
    namespace: &Option<Value>,
    of_binding: bool,
) -> bool {
    if spec.is_null() {
        return false;
    }
    let rules = spec["resourceRules"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !(of_binding && rules.is_empty()) && !rules.iter().any(|rule| rule_matches(rule, request)) {
        return false;
    }
    if spec["excludeResourceRules"]
        .as_array()
        .is_some_and(|rules| rules.iter().any(|rule| rule_matches(rule, request)))
    {
        return false;
    }
    // Cluster-scoped objects (and namespaces themselves) are not filtered by namespace labels.
    if let Some(selector) = LabelSelector::from_object(&spec["namespaceSelector"])
        && request.kind.namespaced
    {
        let labels = namespace
            .as_ref()
            .map(|ns| ns["metadata"]["labels"].clone())
            .unwrap_or(Value::Null);
        if !selector.matches(&labels) {
            return false;
        }
    }
    if let Some(selector) = LabelSelector::from_object(&spec["objectSelector"]) {
        let labels = |object: Option<&Value>| {
            object
                .map(|o| o["metadata"]["labels"].clone())
                .unwrap_or(Value::Null)
        };
        if !selector.matches(&labels(request.object)) && !selector.matches(&labels(request.old)) {
            return false;
        }
    }
    true
}

fn rule_matches(rule: &Value, request: &Request<'_>) -> bool {
    let list = |key: &str| -> Vec<String> {
        rule[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let any = |values: &[String], wanted: &str| values.iter().any(|v| v == "*" || v == wanted);
    let operations = list("operations");
    if !any(&operations, request.operation.as_str()) {
        return false;
    }
    if !any(&list("apiGroups"), &request.kind.group) || !any(&list("apiVersions"), request.version)
    {
        return false;
    }
    let wanted = match request.subresource {
        Some(sub) => format!("{}/{sub}", request.kind.plural),
        None => request.kind.plural.clone(),
    };
    let resources = list("resources");
    let resource_matches = resources.iter().any(|resource| {
        if resource == "*" {
            return request.subresource.is_none();
        }
        if resource == "*/*" || *resource == wanted {
            return true;
        }
        match (resource.split_once('/'), request.subresource) {
            (Some(("*", sub)), Some(wanted_sub)) => sub == wanted_sub,
            (Some((main, "*")), Some(_)) => main == request.kind.plural,
            _ => false,
        }
    });
    if !resource_matches {
        return false;
    }
    match rule["scope"].as_str().unwrap_or("*") {
        "Cluster" => !request.kind.namespaced,
        "Namespaced" => request.kind.namespaced,
        _ => true,
    }
}

/// Evaluates a matching policy: `None` when it admits the request.
fn evaluate(policy: &Value, request: &Request<'_>, namespace: &Option<Value>) -> Option<Failure> {
    let spec = &policy["spec"];
    let fail_closed = spec["failurePolicy"].as_str() != Some("Ignore");
    let on_error = |what: String| {
        fail_closed.then(|| Failure {
            message: what,
            reason: None,
        })
    };
    if !spec["paramKind"].is_null() {
        return on_error(
            "policies with paramKind are not supported by kube-sandbox (no parameters are bound)"
                .into(),
        );
    }
    let mut context = Context::default().with_all();
    context.add_variable_from_value("object", cel_or_null(request.object));
    context.add_variable_from_value("oldObject", cel_or_null(request.old));
    context.add_variable_from_value("request", untyped(&request_value(request)));
    context.add_variable_from_value("params", CelValue::Null);
    context.add_variable_from_value("namespaceObject", cel_or_null(namespace.as_ref()));

    for condition in spec["matchConditions"].as_array().into_iter().flatten() {
        let name = condition["name"].as_str().unwrap_or("");
        let expression = condition["expression"].as_str().unwrap_or("");
        match run(expression, &context) {
            Ok(CelValue::Bool(true)) => {}
            Ok(CelValue::Bool(false)) => return None,
            Ok(other) => {
                return on_error(format!(
                    "matchCondition '{name}' must evaluate to bool, got {other:?}"
                ));
            }
            Err(error) => {
                return on_error(format!("matchCondition '{name}' failed: {error}"));
            }
        }
    }

    let mut variables: HashMap<Key, CelValue> = HashMap::new();
    for variable in spec["variables"].as_array().into_iter().flatten() {
        let name = variable["name"].as_str().unwrap_or("").to_string();
        let expression = variable["expression"].as_str().unwrap_or("");
        let mut scope = context.new_inner_scope();
        scope.add_variable_from_value("variables", variables_value(&variables));
        match run(expression, &scope) {
            Ok(value) => {
                variables.insert(Key::String(Arc::new(name)), value);
            }
            Err(error) => {
                return on_error(format!("variable '{name}' failed: {error}"));
            }
        }
    }
    context.add_variable_from_value("variables", variables_value(&variables));

    for validation in spec["validations"].as_array().into_iter().flatten() {
        let expression = validation["expression"].as_str().unwrap_or("");
        let reason = validation["reason"].as_str().map(str::to_string);
        match run(expression, &context) {
            Ok(CelValue::Bool(true)) => {}
            Ok(CelValue::Bool(false)) => {
                let message = validation["messageExpression"]
                    .as_str()
                    .filter(|m| !m.is_empty())
                    .and_then(|m| match run(m, &context) {
                        Ok(CelValue::String(text)) if !text.trim().is_empty() => {
                            Some(text.trim().to_string())
                        }
                        _ => None,
                    })
                    .or_else(|| {
                        validation["message"]
                            .as_str()
                            .filter(|m| !m.is_empty())
                            .map(str::to_string)
                    })
                    .unwrap_or_else(|| format!("failed expression: {}", expression.trim()));
                return Some(Failure { message, reason });
            }
            Ok(other) => {
                return on_error(format!(
                    "expression '{}' must evaluate to bool, got {other:?}",
                    expression.trim()
                ));
            }
            Err(error) => {
                return on_error(format!(
                    "expression '{}' resulted in error: {error}",
                    expression.trim()
                ));
            }
        }
    }
    None
}

fn run(expression: &str, context: &Context<'_>) -> Result<CelValue, String> {
    let program = Program::compile(expression).map_err(|e| format!("compilation failed: {e}"))?;
    program.execute(context).map_err(|e| e.to_string())
}

fn cel_or_null(value: Option<&Value>) -> CelValue {
    value.map(untyped).unwrap_or(CelValue::Null)
}

fn variables_value(variables: &HashMap<Key, CelValue>) -> CelValue {
    CelValue::Map(Map {
        map: Arc::new(variables.clone()),
    })
}

/// `request` as admission.k8s.io's `AdmissionRequest` names its fields.
fn request_value(request: &Request<'_>) -> Value {
    json!({
        "kind": {"group": request.kind.group, "version": request.version, "kind": request.kind.kind},
        "resource": {"group": request.kind.group, "version": request.version, "resource": request.kind.plural},
        "subResource": request.subresource.unwrap_or(""),
        "name": request.name,
        "namespace": request.namespace,
        "operation": request.operation.as_str(),
        "userInfo": {"username": request.user.user, "groups": request.user.groups},
        "dryRun": request.dry_run,
    })
}

/// Compiles every expression of a policy, as the API server's validation does: a policy whose
/// CEL does not parse is refused with the field that holds it.
pub fn validate_policy(object: &Value) -> Vec<crate::apiserver::error::StatusCause> {
    let mut causes = Vec::new();
    let spec = &object["spec"];
    let mut check = |path: String, expression: Option<&str>, required: bool| match expression {
        Some(text) if !text.trim().is_empty() => {
            if let Err(error) = Program::compile(text) {
                causes.push(crate::apiserver::error::StatusCause {
                    reason: "FieldValueInvalid".into(),
                    message: format!("Invalid value: {text:?}: compilation failed: {error}"),
                    field: path,
                });
            }
        }
        _ if required => causes.push(crate::apiserver::error::StatusCause {
            reason: "FieldValueRequired".into(),
            message: "Required value".into(),
            field: path,
        }),
        _ => {}
    };
    for (key, field) in [
        ("validations", "expression"),
        ("matchConditions", "expression"),
        ("variables", "expression"),
    ] {
        for (i, item) in spec[key].as_array().into_iter().flatten().enumerate() {
            check(
                format!("spec.{key}[{i}].{field}"),
                item[field].as_str(),
                true,
            );
            if key == "validations" {
                check(
                    format!("spec.{key}[{i}].messageExpression"),
                    item["messageExpression"].as_str(),
                    false,
                );
            }
        }
    }
    if spec["validations"].as_array().is_none_or(Vec::is_empty)
        && spec["auditAnnotations"]
            .as_array()
            .is_none_or(Vec::is_empty)
    {
        causes.push(crate::apiserver::error::StatusCause {
            reason: "FieldValueRequired".into(),
            message:
                "Required value: validations or auditAnnotations must contain at least one item"
                    .into(),
            field: "spec.validations".into(),
        });
    }
    causes
}
