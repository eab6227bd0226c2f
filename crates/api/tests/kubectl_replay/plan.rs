//! How a case becomes kubectl calls: pure, so the plan of every kind of case is tested without
//! a server.
//!
//! A create case is `kubectl create` of the object. An update case creates the old object and
//! then `kubectl replace`s it with the new one. Replace, not apply: the case means "this object
//! replaces that one", and a PUT of the whole object is exactly that. Client-side apply would
//! send a three-way merge patch computed against a last-applied annotation the old object does
//! not have, so a field the new object leaves out would stay on the server (a transition rule
//! about removing it would never run); server-side apply removes only fields its manager owns.
//!
//! Every CRD of ours has a status subresource, so the API server drops `status` on
//! create and keeps the stored one on a replace of the main resource. A case that carries a
//! status therefore also writes it, with `kubectl replace --subresource=status` of the whole
//! object, after the object itself: as a controller would, and as the README describes.

use serde_json::Value;

use crate::harness::Case;

/// The kubectl command of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// `kubectl create`: POST of the object.
    Create,
    /// `kubectl replace`: PUT of the whole object to the main resource.
    Replace,
    /// `kubectl replace --subresource=status`: PUT of the whole object to `status`.
    ReplaceStatus,
}

impl Verb {
    /// kubectl's arguments; the object comes on stdin and the stored object is printed back.
    pub fn args(self) -> &'static [&'static str] {
        match self {
            Self::Create => &["create", "-f", "-", "-o", "json"],
            Self::Replace => &["replace", "-f", "-", "-o", "json"],
            Self::ReplaceStatus => &["replace", "--subresource=status", "-f", "-", "-o", "json"],
        }
    }

    /// Whether the step updates a stored object (and so sends its resourceVersion).
    pub fn is_update(self) -> bool {
        self != Self::Create
    }
}

/// One kubectl call of a case.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub verb: Verb,
    /// The object sent, in the case's namespace.
    pub object: Value,
    /// Whether the case's expectation is about this step; the others set up the old object
    /// and must succeed.
    pub judged: bool,
}

/// The kubectl calls that replay `case` in `namespace`, in order.
pub fn steps(case: &Case, namespace: &str) -> Vec<Step> {
    let object = in_namespace(&case.object, namespace);
    let step = |verb, object: &Value, judged| Step {
        verb,
        object: object.clone(),
        judged,
    };
    let mut steps = Vec::new();
    match &case.old_object {
        None => {
            steps.push(step(Verb::Create, &object, true));
            if has_status(&object) {
                steps.push(step(Verb::ReplaceStatus, &object, true));
            }
        }
        Some(old) => {
            let old = in_namespace(old, namespace);
            steps.push(step(Verb::Create, &old, false));
            if has_status(&old) {
                steps.push(step(Verb::ReplaceStatus, &old, false));
            }
            steps.push(step(Verb::Replace, &object, true));
            // Also when only the old object has a status: the new one replaces it with none.
            if has_status(&object) || has_status(&old) {
                steps.push(step(Verb::ReplaceStatus, &object, true));
            }
        }
    }
    steps
}

fn has_status(object: &Value) -> bool {
    object.get("status").is_some_and(|status| !status.is_null())
}

fn in_namespace(object: &Value, namespace: &str) -> Value {
    let mut object = object.clone();
    object["metadata"]["namespace"] = Value::from(namespace);
    object
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::harness::Expect;

    fn case(object: Value, old_object: Option<Value>) -> Case {
        Case {
            name: "plan".to_owned(),
            object,
            old_object,
            expect: Expect::Accepted,
            file: "plan.yaml".to_owned(),
        }
    }

    fn plan(case: &Case) -> Vec<(Verb, bool)> {
        steps(case, "ns")
            .into_iter()
            .map(|step| (step.verb, step.judged))
            .collect()
    }

    #[test]
    fn a_create_is_one_create_in_the_case_namespace() {
        let created = steps(&case(json!({"metadata": {"name": "a"}}), None), "ns-7");
        assert_eq!(created.len(), 1);
        assert_eq!(created[0].verb, Verb::Create);
        assert_eq!(created[0].object["metadata"]["namespace"], "ns-7");
        assert!(created[0].judged);
    }

    #[test]
    fn a_status_is_written_through_the_status_subresource() {
        let object = json!({"spec": {}, "status": {"ready": 1}});
        assert_eq!(
            plan(&case(object, None)),
            [(Verb::Create, true), (Verb::ReplaceStatus, true)]
        );
    }

    #[test]
    fn an_update_creates_the_old_object_then_replaces_it() {
        let old = json!({"spec": {"a": 1}});
        let new = json!({"spec": {"a": 2}});
        assert_eq!(
            plan(&case(new.clone(), Some(old.clone()))),
            [(Verb::Create, false), (Verb::Replace, true)]
        );
        let with_status = json!({"spec": {"a": 1}, "status": {"s": 1}});
        assert_eq!(
            plan(&case(new, Some(with_status.clone()))),
            [
                (Verb::Create, false),
                (Verb::ReplaceStatus, false),
                (Verb::Replace, true),
                (Verb::ReplaceStatus, true)
            ]
        );
        assert_eq!(
            plan(&case(with_status, Some(old))),
            [
                (Verb::Create, false),
                (Verb::Replace, true),
                (Verb::ReplaceStatus, true)
            ]
        );
    }
}
