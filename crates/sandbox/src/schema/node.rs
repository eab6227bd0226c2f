//! The compiled form of one `openAPIV3Schema` node (Go's `apiextensions.JSONSchemaProps`).
//!
//! Parsing is lenient: anything of the wrong shape is recorded in `malformed` and reported by
//! the structural checks, so one walk over the JSON serves both compiling and error reporting.

use std::collections::BTreeMap;

use regex::Regex;
use serde_json::Value;

use super::cel::ValidationRule;

/// `x-kubernetes-list-type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListType {
    Atomic,
    Set,
    Map,
}

/// `x-kubernetes-map-type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MapType {
    Atomic,
    Granular,
}

/// `additionalProperties`: a boolean or a schema.
#[derive(Debug, Clone)]
pub(crate) enum AdditionalProperties {
    Allowed(bool),
    Schema(Box<Node>),
}

/// One schema node with everything validation, defaulting, pruning and CEL read.
#[derive(Debug, Clone, Default)]
pub(crate) struct Node {
    /// `type`, empty when unset (`x-kubernetes-int-or-string` and preserve-unknown nodes).
    pub(crate) type_name: String,
    pub(crate) nullable: bool,
    pub(crate) format: String,
    pub(crate) description: Option<String>,
    pub(crate) title: Option<String>,
    pub(crate) default: Option<Value>,
    pub(crate) properties: BTreeMap<String, Node>,
    pub(crate) additional_properties: Option<AdditionalProperties>,
    pub(crate) items: Option<Box<Node>>,
    pub(crate) required: Vec<String>,
    pub(crate) enum_values: Option<Vec<Value>>,
    pub(crate) pattern: Option<Pattern>,
    pub(crate) minimum: Option<f64>,
    pub(crate) maximum: Option<f64>,
    pub(crate) exclusive_minimum: bool,
    pub(crate) exclusive_maximum: bool,
    pub(crate) multiple_of: Option<f64>,
    pub(crate) min_length: Option<i64>,
    pub(crate) max_length: Option<i64>,
    pub(crate) min_items: Option<i64>,
    pub(crate) max_items: Option<i64>,
    pub(crate) min_properties: Option<i64>,
    pub(crate) max_properties: Option<i64>,
    pub(crate) unique_items: bool,
    pub(crate) all_of: Vec<Node>,
    pub(crate) any_of: Vec<Node>,
    pub(crate) one_of: Vec<Node>,
    pub(crate) not: Option<Box<Node>>,
    pub(crate) preserve_unknown_fields: Option<bool>,
    pub(crate) embedded_resource: bool,
    pub(crate) int_or_string: bool,
    pub(crate) list_type: Option<String>,
    pub(crate) list_map_keys: Vec<String>,
    pub(crate) map_type: Option<String>,
    /// `x-kubernetes-validations`, compiled by the CEL module after parsing.
    pub(crate) rules: Vec<ValidationRule>,
    /// Keys present that apiextensions does not support or that have the wrong JSON type.
    pub(crate) unsupported: Vec<(String, Value)>,
    /// Every key the node was written with, sorted (structural checks look at what is set).
    pub(crate) keys: Vec<String>,
}

/// A `pattern` with its source kept for messages.
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    pub(crate) source: String,
    pub(crate) regex: Result<Regex, String>,
}

impl Node {
    /// Parses one node; `rules` are left empty for the CEL module to fill.
    pub(crate) fn parse(raw: &Value) -> Node {
        let mut node = Node::default();
        let Some(fields) = raw.as_object() else {
            node.unsupported.push(("<schema>".into(), raw.clone()));
            return node;
        };
        for (key, value) in fields {
            node.parse_field(key, value);
        }
        node.keys = fields.keys().cloned().collect();
        node
    }

    fn parse_field(&mut self, key: &str, value: &Value) {
        let unsupported = &mut self.unsupported;
        let mut reject = || unsupported.push((key.to_string(), value.clone()));
        match key {
            "type" => match value.as_str() {
                Some(text) => self.type_name = text.to_string(),
                None => reject(),
            },
            "nullable" => self.nullable = value.as_bool().unwrap_or(false),
            "format" => self.format = value.as_str().unwrap_or_default().to_string(),
            "description" => self.description = value.as_str().map(str::to_string),
            "title" => self.title = value.as_str().map(str::to_string),
            "default" => self.default = Some(value.clone()),
            "example" | "externalDocs" | "$schema" => {}
            "properties" => match value.as_object() {
                Some(properties) => {
                    self.properties = properties
                        .iter()
                        .map(|(name, raw)| (name.clone(), Node::parse(raw)))
                        .collect();
                }
                None => reject(),
            },
            "additionalProperties" => {
                self.additional_properties = Some(match value {
                    Value::Bool(allowed) => AdditionalProperties::Allowed(*allowed),
                    other => AdditionalProperties::Schema(Box::new(Node::parse(other))),
                });
            }
            "items" => match value {
                Value::Object(_) => self.items = Some(Box::new(Node::parse(value))),
                _ => reject(),
            },
            "required" => self.required = string_list(value),
            "enum" => self.enum_values = value.as_array().cloned(),
            "pattern" => {
                let source = value.as_str().unwrap_or_default().to_string();
                let regex = Regex::new(&source).map_err(|error| regex_error_text(&error));
                self.pattern = Some(Pattern { source, regex });
            }
            "minimum" => self.minimum = value.as_f64(),
            "maximum" => self.maximum = value.as_f64(),
            "exclusiveMinimum" => self.exclusive_minimum = value.as_bool().unwrap_or(false),
            "exclusiveMaximum" => self.exclusive_maximum = value.as_bool().unwrap_or(false),
            "multipleOf" => self.multiple_of = value.as_f64(),
            "minLength" => self.min_length = value.as_i64(),
            "maxLength" => self.max_length = value.as_i64(),
            "minItems" => self.min_items = value.as_i64(),
            "maxItems" => self.max_items = value.as_i64(),
            "minProperties" => self.min_properties = value.as_i64(),
            "maxProperties" => self.max_properties = value.as_i64(),
            "uniqueItems" => self.unique_items = value.as_bool().unwrap_or(false),
            "allOf" => self.all_of = node_list(value),
            "anyOf" => self.any_of = node_list(value),
            "oneOf" => self.one_of = node_list(value),
            "not" => self.not = Some(Box::new(Node::parse(value))),
            "x-kubernetes-preserve-unknown-fields" => {
                self.preserve_unknown_fields = value.as_bool()
            }
            "x-kubernetes-embedded-resource" => {
                self.embedded_resource = value.as_bool().unwrap_or(false)
            }
            "x-kubernetes-int-or-string" => self.int_or_string = value.as_bool().unwrap_or(false),
            "x-kubernetes-list-type" => self.list_type = value.as_str().map(str::to_string),
            "x-kubernetes-list-map-keys" => self.list_map_keys = string_list(value),
            "x-kubernetes-map-type" => self.map_type = value.as_str().map(str::to_string),
            "x-kubernetes-validations" => match value.as_array() {
                Some(rules) => self.rules = rules.iter().map(ValidationRule::parse).collect(),
                None => reject(),
            },
            _ => reject(),
        }
    }

    /// Whether unknown fields below this node are kept.
    pub(crate) fn preserves_unknown_fields(&self) -> bool {
        self.preserve_unknown_fields == Some(true)
    }

    /// The list semantics, `atomic` when unset.
    pub(crate) fn list_semantics(&self) -> ListType {
        match self.list_type.as_deref() {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map,
            _ => ListType::Atomic,
        }
    }

    /// The map semantics, `granular` when unset.
    pub(crate) fn map_semantics(&self) -> MapType {
        match self.map_type.as_deref() {
            Some("atomic") => MapType::Atomic,
            _ => MapType::Granular,
        }
    }

    /// The schema of values under `additionalProperties`, when it is a schema.
    pub(crate) fn additional_schema(&self) -> Option<&Node> {
        match &self.additional_properties {
            Some(AdditionalProperties::Schema(node)) => Some(node),
            _ => None,
        }
    }

    /// The schema for a child field: a declared property, else `additionalProperties`.
    pub(crate) fn child(&self, name: &str) -> Option<&Node> {
        self.properties
            .get(name)
            .or_else(|| self.additional_schema())
    }

    /// The type name kube-apiserver puts in CEL errors: the schema's `type` (empty for
    /// int-or-string).
    pub(crate) fn type_for_messages(&self) -> &str {
        &self.type_name
    }
}

fn string_list(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|item| item.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn node_list(value: &Value) -> Vec<Node> {
    value
        .as_array()
        .map(|items| items.iter().map(Node::parse).collect())
        .unwrap_or_default()
}

/// Go's regexp error text for the common cases, so CRD errors read like the API server's.
fn regex_error_text(error: &regex::Error) -> String {
    match error {
        regex::Error::Syntax(text) => {
            let detail = text
                .lines()
                .last()
                .unwrap_or(text)
                .trim_start_matches("error: ")
                .to_string();
            format!("error parsing regexp: {detail}")
        }
        other => format!("error parsing regexp: {other}"),
    }
}
