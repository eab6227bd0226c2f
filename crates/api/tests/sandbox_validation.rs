//! The validation cases of `tests/validation/*.yaml` through the sandbox's schema engine
//! (`kube_sandbox::schema`) as a library: the structural validation, pruning, defaulting and
//! CEL rules its API server admits custom resources with. The fast run; the authority is the
//! same API server driven by kubectl (`kubectl_validation.rs`).
//!
//! Here also the checks of the cases themselves, which need each error as a value: a rejected
//! case isolates one constraint, every constraint of our CRDs has a rejected and an accepted
//! case, and accepted objects round-trip through the Rust types.

mod harness;
mod sandbox_engine;

use std::collections::{BTreeMap, BTreeSet};

use etcd_operator_api::{
    EtcdCluster, EtcdDefrag, EtcdDefragPolicy, EtcdMember, EtcdSnapshot, EtcdSnapshotSchedule,
};
use harness::{Case, Expect};
use sandbox_engine::{Schemas, coverage};
use serde_json::Value;

fn failures_of(schemas: &Schemas, cases: &[Case]) -> Vec<String> {
    cases
        .iter()
        .filter_map(|case| {
            let verdict = sandbox_engine::verdict(schemas, case)?;
            Some(format!("{} / {}: {verdict}", case.file, case.name))
        })
        .collect()
}

/// Our schemas compile in the sandbox as kube-apiserver would compile them, and every case
/// gets the expected answer, a rejected one from its one constraint only.
#[test]
fn our_schemas_compile_in_the_sandbox_and_every_case_gets_the_expected_answer() {
    let schemas = Schemas::compile(&etcd_operator_api::crds());
    let cases = harness::cases();
    let failures = failures_of(&schemas, &cases);
    assert!(
        failures.is_empty(),
        "{} of {} cases failed in the sandbox:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// The isolation rule has teeth: a case whose object breaks a second constraint besides the
/// expected one fails, and so does a case expecting a message the engine does not give.
#[test]
fn a_case_breaking_two_constraints_or_expecting_another_message_fails() {
    let schemas = Schemas::compile(&etcd_operator_api::crds());
    let case = |spec: Value, expected: &str| Case {
        name: "constructed".to_owned(),
        object: serde_json::json!({
            "apiVersion": etcd_operator_api::API_VERSION,
            "kind": "EtcdCluster",
            "metadata": {"name": "two"},
            "spec": spec,
        }),
        old_object: None,
        expect: Expect::Rejected(expected.to_owned()),
        file: "constructed".to_owned(),
    };
    let one = case(
        serde_json::json!({"version": "latest"}),
        "spec.version in body should match",
    );
    let two = case(
        serde_json::json!({"version": "latest", "replicas": -1}),
        "spec.version in body should match",
    );
    let other = case(serde_json::json!({"version": "latest"}), "no such message");
    assert_eq!(sandbox_engine::verdict(&schemas, &one), None);
    let isolation = sandbox_engine::verdict(&schemas, &two).expect("two constraints are refused");
    assert!(isolation.contains("isolate one constraint"), "{isolation}");
    assert!(sandbox_engine::verdict(&schemas, &other).is_some());
}

#[test]
fn case_names_are_unique() {
    let mut seen = BTreeMap::new();
    for case in harness::cases() {
        if let Some(file) = seen.insert(case.name.clone(), case.file.clone()) {
            panic!("case {:?} appears in {file} and {}", case.name, case.file);
        }
    }
}

/// Subtrees no accepted object can reach, by (kind, path prefix): the restore rule refuses
/// every `local` restore source (a local store is a directory of the operator's own Pod, which
/// the restoring Pod cannot read), so nothing under `restore.source.local` is ever part of an
/// accepted object. Their constraints must still each be rejected by a case, and one that does
/// turn up in an accepted case fails the test (the exemption would be stale).
const NEVER_ACCEPTED: &[(&str, &str)] = &[
    ("EtcdCluster", ".spec.bootstrap.restore.source.local"),
    ("EtcdMember", ".spec.restore.source.local"),
];

fn never_accepted(constraint: &coverage::Constraint) -> bool {
    NEVER_ACCEPTED
        .iter()
        .any(|(kind, prefix)| constraint.0 == *kind && constraint.1.starts_with(prefix))
}

/// Every constraint of our own types (each pattern, enum, bound, length, required list and CEL
/// rule) is rejected by some case and evaluated in some accepted case (but for the subtrees of
/// [`NEVER_ACCEPTED`]). Which constraint
/// rejected a case is read from the sandbox engine's errors that carry the expected text.
#[test]
fn every_constraint_has_a_rejected_and_an_accepted_case() {
    let crds = etcd_operator_api::crds();
    let schemas = Schemas::compile(&crds);
    let mut targets = BTreeSet::new();
    for crd in &crds {
        targets.extend(coverage::targets(
            &crd.spec.names.kind,
            &harness::schema_of(crd),
        ));
    }
    let (mut rejected, mut accepted) = (BTreeSet::new(), BTreeSet::new());
    for case in harness::cases() {
        let (kind, raw, schema) = schemas.of(&case.object);
        match &case.expect {
            Expect::Accepted => {
                let object = sandbox_engine::admitted(schema, &case.object).0;
                let old = case
                    .old_object
                    .as_ref()
                    .map(|old| sandbox_engine::admitted(schema, old).0);
                accepted.extend(coverage::exercised(kind, raw, &object, old.as_ref()));
            }
            Expect::Rejected(expected) => {
                let judgement = sandbox_engine::judge(&schemas, &case);
                rejected.extend(
                    judgement
                        .errors
                        .iter()
                        .filter(|error| error.message().contains(expected.as_str()))
                        .filter_map(|error| coverage::constraint_of(kind, raw, error)),
                );
            }
        }
    }
    let show = |missing: Vec<&coverage::Constraint>| {
        missing
            .iter()
            .map(|(kind, path, keyword)| format!("  {kind} {path} {keyword}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let never_rejected: Vec<_> = targets.difference(&rejected).collect();
    let unreachable: Vec<_> = targets.iter().filter(|c| never_accepted(c)).collect();
    assert!(
        !unreachable.is_empty(),
        "NEVER_ACCEPTED names no constraint: remove it"
    );
    let stale: Vec<_> = unreachable
        .iter()
        .copied()
        .filter(|c| accepted.contains(*c))
        .collect();
    assert!(
        stale.is_empty(),
        "constraints listed as never accepted but evaluated in an accepted case:\n{}",
        show(stale)
    );
    let never_accepted: Vec<_> = targets
        .difference(&accepted)
        .filter(|c| !never_accepted(c))
        .collect();
    assert!(
        never_rejected.is_empty() && never_accepted.is_empty(),
        "constraints without a rejected case:\n{}\nconstraints never evaluated in an accepted case:\n{}",
        show(never_rejected),
        show(never_accepted)
    );
}

/// Accepted objects read into the Rust types and written back are the same objects: optional
/// fields stay absent, nothing is invented.
#[test]
fn accepted_objects_round_trip_through_the_types() {
    fn through<T: serde::de::DeserializeOwned + serde::Serialize>(
        object: &Value,
    ) -> Result<Value, String> {
        let typed: T = serde_json::from_value(object.clone()).map_err(|error| error.to_string())?;
        serde_json::to_value(typed).map_err(|error| error.to_string())
    }
    let mut failures = Vec::new();
    for case in harness::cases()
        .into_iter()
        .filter(|case| case.expect == Expect::Accepted)
    {
        for object in [Some(&case.object), case.old_object.as_ref()]
            .into_iter()
            .flatten()
        {
            let written = match object["kind"].as_str() {
                Some("EtcdCluster") => through::<EtcdCluster>(object),
                Some("EtcdMember") => through::<EtcdMember>(object),
                Some("EtcdSnapshot") => through::<EtcdSnapshot>(object),
                Some("EtcdDefrag") => through::<EtcdDefrag>(object),
                Some("EtcdDefragPolicy") => through::<EtcdDefragPolicy>(object),
                Some("EtcdSnapshotSchedule") => through::<EtcdSnapshotSchedule>(object),
                other => Err(format!("unknown kind {other:?}")),
            };
            if let Err(error) = written.and_then(|written| harness::round_trips(object, &written)) {
                failures.push(format!("{} / {}: {error}", case.file, case.name));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "objects that do not round-trip:\n{}",
        failures.join("\n")
    );
}

/// The reference's own sample, read from the reference directory, is accepted as it stands.
#[test]
fn the_reference_sample_is_accepted() {
    let schemas = Schemas::compile(&etcd_operator_api::crds());
    let failures = failures_of(&schemas, &[harness::reference_sample()]);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
