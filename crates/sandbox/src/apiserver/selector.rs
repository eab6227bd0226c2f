//! Label selectors (`=`, `==`, `!=`, `in`, `notin`, exists, `!`), their object form
//! (`matchLabels`/`matchExpressions`), and field selectors.

use serde_json::Value;

use super::error::{ApiError, ApiResult};

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses the string form kubectl and clients send in `labelSelector`.
    pub fn parse(text: &str) -> ApiResult<Self> {
        let mut requirements = Vec::new();
        for term in split_terms(text) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            requirements.push(parse_term(term).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "unable to parse requirement: invalid label selector {term:?}"
                ))
            })?);
        }
        Ok(Self { requirements })
    }

    /// The object form of `metav1.LabelSelector`, as in PDBs and Deployments. A null selector
    /// selects nothing (`None`), an empty one everything.
    pub fn from_object(selector: &Value) -> Option<Self> {
        let object = selector.as_object()?;
        let mut requirements = Vec::new();
        for (key, value) in object
            .get("matchLabels")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            requirements.push(Requirement::Equals(
                key.clone(),
                value.as_str()?.to_string(),
            ));
        }
        for expression in object
            .get("matchExpressions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = expression["key"].as_str()?.to_string();
            let values: Vec<String> = expression["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect();
            requirements.push(match expression["operator"].as_str()? {
                "In" => Requirement::In(key, values),
                "NotIn" => Requirement::NotIn(key, values),
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::DoesNotExist(key),
                _ => return None,
            });
        }
        Some(Self { requirements })
    }

    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether an object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, labels: &Value) -> bool {
        let get = |key: &str| labels.get(key).and_then(Value::as_str);
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|l| !vs.iter().any(|v| v == l)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::DoesNotExist(k) => get(k).is_none(),
        })
    }
}

/// Splits on commas that are not inside a `( ... )` value set.
fn split_terms(text: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms
}

fn parse_term(term: &str) -> Option<Requirement> {
    if let Some(key) = term.strip_prefix('!') {
        return valid_key(key.trim()).map(Requirement::DoesNotExist);
    }
    for (op, equal) in [("!=", false), ("==", true), ("=", true)] {
        if let Some((key, value)) = term.split_once(op) {
            let (key, value) = (valid_key(key.trim())?, value.trim().to_string());
            return Some(if equal {
                Requirement::Equals(key, value)
            } else {
                Requirement::NotEquals(key, value)
            });
        }
    }
    for (op, is_in) in [(" notin ", false), (" in ", true)] {
        if let Some((key, values)) = term.split_once(op) {
            let values = values.trim().strip_prefix('(')?.strip_suffix(')')?;
            let values = values
                .split(',')
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .collect();
            let key = valid_key(key.trim())?;
            return Some(if is_in {
                Requirement::In(key, values)
            } else {
                Requirement::NotIn(key, values)
            });
        }
    }
    valid_key(term).map(Requirement::Exists)
}

fn valid_key(key: &str) -> Option<String> {
    let ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    ok.then(|| key.to_string())
}

/// A field selector: `metadata.name`, `metadata.namespace`, and for Pods `spec.nodeName` and
/// `status.phase` (plus the fields a kind adds), with `=`, `==` and `!=`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FieldSelector {
    terms: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parses `fieldSelector`, refusing fields the kind does not index, as the real server does.
    pub fn parse(text: &str, kind: &str) -> ApiResult<Self> {
        let mut terms = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector: {term:?}"
                )));
            };
            let field = field.trim();
            if !supported_field(kind, field) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            terms.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(Self { terms })
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The name this selector pins, for a watch or list of one object.
    pub fn pinned_name(&self) -> Option<&str> {
        self.terms
            .iter()
            .find(|(f, equal, _)| f == "metadata.name" && *equal)
            .map(|(_, _, v)| v.as_str())
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.terms.iter().all(|(field, equal, value)| {
            let actual = field_value(object, field);
            (actual == *value) == *equal
        })
    }
}

fn supported_field(kind: &str, field: &str) -> bool {
    if matches!(field, "metadata.name" | "metadata.namespace") {
        return true;
    }
    match kind {
        "Pod" => matches!(
            field,
            "spec.nodeName"
                | "status.phase"
                | "spec.restartPolicy"
                | "spec.schedulerName"
                | "spec.serviceAccountName"
                | "status.podIP"
                | "status.nominatedNodeName"
        ),
        "Event" => matches!(
            field,
            "involvedObject.kind"
                | "involvedObject.namespace"
                | "involvedObject.name"
                | "involvedObject.uid"
                | "involvedObject.apiVersion"
                | "involvedObject.resourceVersion"
                | "involvedObject.fieldPath"
                | "reason"
                | "reportingComponent"
                | "source"
                | "type"
        ),
        "Secret" => field == "type",
        "Namespace" => field == "status.phase",
        "Node" => field == "spec.unschedulable",
        "Job" => field == "status.successful",
        _ => false,
    }
}

/// A field's value as a string, the way field selectors compare it (absent = "").
fn field_value(object: &Value, field: &str) -> String {
    let mut current = object;
    for part in field.split('.') {
        current = &current[part];
    }
    match current {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_label_operator_matches_like_kubernetes() {
        let labels = json!({"app": "etcd", "tier": "db", "canary": "yes"});
        for (selector, expected) in [
            ("app=etcd", true),
            ("app==etcd", true),
            ("app!=etcd", false),
            ("tier in (db, cache)", true),
            ("tier notin (db)", false),
            ("missing notin (db)", true),
            ("canary", true),
            ("!canary", false),
            ("!missing", true),
            ("app=etcd,tier in (cache,web)", false),
            ("", true),
        ] {
            let parsed = LabelSelector::parse(selector).unwrap();
            assert_eq!(parsed.matches(&labels), expected, "{selector}");
        }
        assert!(LabelSelector::parse("app in db").is_err());
    }

    #[test]
    fn object_selectors_combine_labels_and_expressions() {
        let selector = json!({"matchLabels": {"app": "etcd"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["db"]}]});
        let parsed = LabelSelector::from_object(&selector).unwrap();
        assert!(parsed.matches(&json!({"app": "etcd", "tier": "db"})));
        assert!(!parsed.matches(&json!({"app": "etcd"})));
        assert!(LabelSelector::from_object(&Value::Null).is_none());
        assert!(
            LabelSelector::from_object(&json!({}))
                .unwrap()
                .matches(&json!({}))
        );
    }

    #[test]
    fn pod_field_selectors_and_unsupported_fields() {
        let pod = json!({"metadata": {"name": "a", "namespace": "ns"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let s = FieldSelector::parse("spec.nodeName=n1,status.phase!=Failed", "Pod").unwrap();
        assert!(s.matches(&pod));
        let unscheduled = FieldSelector::parse("spec.nodeName=", "Pod").unwrap();
        assert!(!unscheduled.matches(&pod));
        assert!(FieldSelector::parse("spec.nodeName=n1", "ConfigMap").is_err());
        assert_eq!(
            FieldSelector::parse("metadata.name=a", "ConfigMap")
                .unwrap()
                .pinned_name(),
            Some("a")
        );
    }
}
