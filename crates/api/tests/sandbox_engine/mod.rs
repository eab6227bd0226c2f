//! The sandbox's schema engine (`kube_sandbox::schema`) as a library: the structural
//! validation, pruning, defaulting and CEL rules its API server admits custom resources with,
//! without the server. Fast, and it gives each error as a value (field path, kind, detail),
//! which the isolation rule and the coverage test need.

pub mod coverage;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube_sandbox::schema::{FieldError, StructuralSchema};
use serde_json::Value;

use crate::harness::{self, Case, Expect};

/// The API server's note when schema errors keep it from running the CEL rules.
pub const RULES_NOT_CHECKED: &str = "<nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

/// Our CRDs' schemas, compiled by the sandbox as its API server compiles them on install.
pub struct Schemas {
    by_kind: Vec<(String, Value, StructuralSchema)>,
}

impl Schemas {
    /// Compiles every CRD's schema; a schema the sandbox refuses fails the test with its
    /// reasons, as kube-apiserver would refuse the CRD.
    pub fn compile(crds: &[CustomResourceDefinition]) -> Self {
        let by_kind = crds
            .iter()
            .map(|crd| {
                let raw = harness::schema_of(crd);
                let compiled = StructuralSchema::compile(&raw).unwrap_or_else(|error| {
                    panic!(
                        "{}: the sandbox refuses the schema: {}",
                        crd.spec.names.plural,
                        error.message()
                    )
                });
                (crd.spec.names.kind.clone(), raw, compiled)
            })
            .collect();
        Self { by_kind }
    }

    /// The kind, raw schema and compiled schema for `object`.
    pub fn of(&self, object: &Value) -> (&str, &Value, &StructuralSchema) {
        let kind = object["kind"].as_str().unwrap_or_default();
        self.by_kind
            .iter()
            .find(|(k, _, _)| k == kind)
            .map(|(kind, raw, compiled)| (kind.as_str(), raw, compiled))
            .unwrap_or_else(|| panic!("no CRD of ours has the kind {kind:?}"))
    }
}

/// `object` as the sandbox admits it: pruned, then defaulted (which also drops the `null`s of
/// fields that are neither nullable nor defaulted). Returns the pruned (unknown) fields too.
pub fn admitted(schema: &StructuralSchema, object: &Value) -> (Value, Vec<String>) {
    let mut object = object.clone();
    let unknown = schema.prune(&mut object);
    schema.apply_defaults(&mut object);
    (object, unknown)
}

/// What the engine says about a case: the fields it does not know, and its validation errors
/// for the object (against the old object, for an update).
pub struct Judgement {
    pub unknown: Vec<String>,
    pub errors: Vec<FieldError>,
}

/// As the API server judges the case's writes (see `kubectl_replay/plan.rs`): the object
/// without its status (the server drops a status sent to the main resource), then, when the
/// case has a status, the write of it to the status subresource, whose structural errors are
/// named relative to `status`. An error both writes find counts once.
pub fn judge(schemas: &Schemas, case: &Case) -> Judgement {
    let (_, _, schema) = schemas.of(&case.object);
    let (object, unknown) = admitted(schema, &case.object);
    let old = case.old_object.as_ref().map(|old| admitted(schema, old).0);
    let without_status = |value: &Value| {
        let mut value = value.clone();
        if let Some(map) = value.as_object_mut() {
            map.remove("status");
        }
        value
    };
    let mut errors = schema.validate(
        &without_status(&object),
        old.as_ref().map(without_status).as_ref(),
    );
    if object.get("status").is_some() {
        for error in schema.validate_status(&object, old.as_ref()) {
            if !errors.iter().any(|e| e.message() == error.message()) {
                errors.push(error);
            }
        }
    }
    Judgement { unknown, errors }
}

/// An error that only follows from another one: the note that CEL rules were skipped, or a
/// rule that could not be evaluated on the invalid value (`quantity()` of a string that is no
/// quantity). It does not count as a second constraint of a rejected case.
pub fn is_follow_up(error: &FieldError) -> bool {
    let message = error.message();
    message == RULES_NOT_CHECKED || message.contains(" evaluating rule: ")
}

/// The verdict on one case, or `None` when the engine answers as the case expects. A rejected
/// case must isolate one constraint: every error but the follow-ups contains the expected text.
pub fn verdict(schemas: &Schemas, case: &Case) -> Option<String> {
    let judgement = judge(schemas, case);
    if !judgement.unknown.is_empty() {
        return Some(format!(
            "the case has fields the schema does not know: {:?}",
            judgement.unknown
        ));
    }
    let messages: Vec<String> = judgement.errors.iter().map(FieldError::message).collect();
    match &case.expect {
        Expect::Accepted if messages.is_empty() => None,
        Expect::Accepted => Some(format!("expected accepted, rejected with {messages:#?}")),
        Expect::Rejected(expected) if messages.iter().any(|m| m.contains(expected.as_str())) => {
            let others: Vec<&String> = judgement
                .errors
                .iter()
                .zip(&messages)
                .filter(|(error, message)| {
                    !message.contains(expected.as_str()) && !is_follow_up(error)
                })
                .map(|(_, message)| message)
                .collect();
            (!others.is_empty()).then(|| {
                format!(
                    "expected only errors containing {expected:?}, also got {others:#?} \
                     (a rejected case should isolate one constraint)"
                )
            })
        }
        Expect::Rejected(expected) if messages.is_empty() => {
            Some(format!("expected rejected with {expected:?}, accepted"))
        }
        Expect::Rejected(expected) => Some(format!(
            "expected an error containing {expected:?}, got {messages:#?}"
        )),
    }
}
