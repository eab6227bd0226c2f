//! The validation cases of `tests/validation/*.yaml` against our generated CRDs.
//!
//! Each case is an object (and, for updates, the object it replaces) with the API server's
//! expected answer. Here they run through a minimal structural validator and kube-cel; the same
//! files can be replayed through a real API server with kubectl.

mod harness;

use std::collections::{BTreeMap, BTreeSet};

use etcd_operator_api::{EtcdCluster, EtcdDefrag, EtcdMember, EtcdSnapshot};
use harness::{Case, Expect, Violation, coverage};
use serde_json::Value;

fn cases() -> Vec<Case> {
    let cases = harness::load_cases(&harness::cases_dir());
    assert!(
        !cases.is_empty(),
        "no cases in {}",
        harness::cases_dir().display()
    );
    cases
}

/// The verdict on one case, or `None` when the case behaves as expected.
fn verdict(
    crds: &[k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition],
    case: &Case,
) -> Option<String> {
    let schema = harness::schema_of(harness::crd_for(crds, &case.object));
    let violations = harness::evaluate(&schema, &case.object, case.old_object.as_ref());
    let messages: Vec<&str> = violations.iter().map(|v| v.message.as_str()).collect();
    match &case.expect {
        Expect::Accepted if violations.is_empty() => None,
        Expect::Accepted => Some(format!("expected accepted, rejected with {messages:#?}")),
        Expect::Rejected(_) if violations.is_empty() => {
            Some("expected rejected, accepted".to_owned())
        }
        Expect::Rejected(expected) => {
            // The API server's follow-ups of an error (CEL rules skipped, or failing to evaluate
            // on the invalid value) do not count as a second constraint.
            let unrelated: Vec<&Violation> = violations
                .iter()
                .filter(|v| !v.message.contains(expected.as_str()))
                .filter(|v| v.message != harness::RULES_NOT_CHECKED)
                .filter(|v| v.keyword != harness::RULE_EVALUATION_ERROR)
                .collect();
            let matched = violations
                .iter()
                .any(|v| v.message.contains(expected.as_str()));
            if !matched {
                return Some(format!(
                    "expected an error containing {expected:?}, got {messages:#?}"
                ));
            }
            (!unrelated.is_empty()).then(|| {
                format!(
                    "expected only errors containing {expected:?}, got {messages:#?} \
                     (a rejected case should isolate one constraint)"
                )
            })
        }
    }
}

#[test]
fn every_case_gets_the_expected_answer() {
    let crds = etcd_operator_api::crds();
    let failures: Vec<String> = cases()
        .iter()
        .filter_map(|case| {
            Some(format!(
                "{} / {}: {}",
                case.file,
                case.name,
                verdict(&crds, case)?
            ))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn case_names_are_unique() {
    let mut seen = BTreeMap::new();
    for case in cases() {
        if let Some(file) = seen.insert(case.name.clone(), case.file.clone()) {
            panic!("case {:?} appears in {file} and {}", case.name, case.file);
        }
    }
}

/// Every constraint of our own types (each pattern, enum, bound, length, required list and CEL
/// rule) is rejected by some case and evaluated in some accepted case.
#[test]
fn every_constraint_has_a_rejected_and_an_accepted_case() {
    let crds = etcd_operator_api::crds();
    let mut targets = BTreeSet::new();
    for crd in &crds {
        targets.extend(coverage::targets(
            &crd.spec.names.kind,
            &harness::schema_of(crd),
        ));
    }
    let (mut rejected, mut accepted) = (BTreeSet::new(), BTreeSet::new());
    for case in cases() {
        let crd = harness::crd_for(&crds, &case.object);
        let kind = crd.spec.names.kind.clone();
        let schema = harness::schema_of(crd);
        match &case.expect {
            Expect::Accepted => {
                let object = harness::admitted_form(&schema, &case.object);
                let old = case
                    .old_object
                    .as_ref()
                    .map(|old| harness::admitted_form(&schema, old));
                accepted.extend(coverage::exercised(&kind, &schema, &object, old.as_ref()));
            }
            Expect::Rejected(expected) => {
                for violation in harness::evaluate(&schema, &case.object, case.old_object.as_ref())
                {
                    if violation.message.contains(expected.as_str()) {
                        rejected.insert((kind.clone(), violation.schema_path, violation.keyword));
                    }
                }
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
    let never_accepted: Vec<_> = targets.difference(&accepted).collect();
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
    for case in cases()
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
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reference/cozystack-v1alpha2/sample-etcdcluster.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| {
        panic!(
            "cannot read the reference sample {}: {error}",
            path.display()
        )
    });
    let object: Value = serde_yaml::from_str(&text).expect("the sample is YAML");
    let crds = etcd_operator_api::crds();
    let schema = harness::schema_of(harness::crd_for(&crds, &object));
    let violations = harness::evaluate(&schema, &object, None);
    assert!(violations.is_empty(), "{violations:#?}");
}
