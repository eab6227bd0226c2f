//! The validation cases of `tests/validation/*.yaml` through the sandbox's structural schema
//! engine (`kube_sandbox::schema`), which the sandbox API server admits custom resources with:
//! our CRD schemas must compile there as kube-apiserver would compile them, and every case must
//! get the same answer as in `validation.rs`.

mod harness;

use harness::{Case, Expect};
use kube_sandbox::schema::StructuralSchema;
use serde_json::Value;

/// The case's object (and old object) as the sandbox admits them: pruned, then defaulted.
fn admitted(schema: &StructuralSchema, object: &Value) -> (Value, Vec<String>) {
    let mut object = object.clone();
    let unknown = schema.prune(&mut object);
    schema.apply_defaults(&mut object);
    (object, unknown)
}

fn verdict(schemas: &[(String, StructuralSchema)], case: &Case) -> Option<String> {
    let kind = case.object["kind"].as_str().unwrap_or_default();
    let (_, schema) = schemas.iter().find(|(k, _)| k == kind)?;
    let (object, unknown) = admitted(schema, &case.object);
    let old = case.old_object.as_ref().map(|old| admitted(schema, old).0);
    if !unknown.is_empty() {
        return Some(format!(
            "the case has fields the schema does not know: {unknown:?}"
        ));
    }
    let messages: Vec<String> = schema
        .validate(&object, old.as_ref())
        .iter()
        .map(|error| error.message())
        .collect();
    match &case.expect {
        Expect::Accepted if messages.is_empty() => None,
        Expect::Accepted => Some(format!("expected accepted, rejected with {messages:#?}")),
        Expect::Rejected(expected) if messages.iter().any(|m| m.contains(expected.as_str())) => {
            // As in validation.rs: a rejected case isolates one constraint, apart from the API
            // server's follow-ups (rules skipped, or failing to evaluate on the invalid value).
            let others: Vec<&String> = messages
                .iter()
                .filter(|m| !m.contains(expected.as_str()))
                .filter(|m| **m != harness::RULES_NOT_CHECKED)
                .filter(|m| !m.contains(" evaluating rule: "))
                .collect();
            (!others.is_empty()).then(|| {
                format!("expected only errors containing {expected:?}, also got {others:#?}")
            })
        }
        Expect::Rejected(expected) => Some(format!(
            "expected an error containing {expected:?}, got {messages:#?}"
        )),
    }
}

#[test]
fn our_schemas_compile_in_the_sandbox_and_every_case_gets_the_expected_answer() {
    let schemas: Vec<(String, StructuralSchema)> = etcd_operator_api::crds()
        .iter()
        .map(|crd| {
            let compiled =
                StructuralSchema::compile(&harness::schema_of(crd)).unwrap_or_else(|error| {
                    panic!(
                        "{}: the sandbox refuses the schema: {error}",
                        crd.spec.names.plural
                    )
                });
            (crd.spec.names.kind.clone(), compiled)
        })
        .collect();
    let cases = harness::load_cases(&harness::cases_dir());
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            Some(format!(
                "{} / {}: {}",
                case.file,
                case.name,
                verdict(&schemas, case)?
            ))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed in the sandbox:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
