//! List and map semantics per field path: what strategic merge and managed fields need to know.
//!
//! One tree of [`TypeNode`]s per kind, built from a CRD's structural schema or from a built-in
//! kind's decorated OpenAPI schema. Values the tree does not describe are "deduced" as
//! structured-merge-diff does: objects are granular maps, lists are atomic.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex};

use serde_json::{Map, Value};

use crate::schema::StructuralSchema;
use crate::schema::node::{ListType, MapType, Node};
use crate::schema::openapi::builtin_schema;

/// How a list merges and which fields own its items.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum ListKind {
    /// Replaced as a whole.
    #[default]
    Atomic,
    /// Items are scalars identified by their value.
    Set,
    /// Items are objects identified by these key fields.
    Map(Vec<String>),
}

/// The shape of the values at one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Shape {
    /// Not described: deduced from the value.
    #[default]
    Unknown,
    Scalar,
    List,
    Object,
}

/// What is known about the values at one path.
#[derive(Debug, Clone, Default)]
pub(crate) struct TypeNode {
    pub(crate) shape: Shape,
    /// Declared fields of an object.
    pub(crate) fields: BTreeMap<String, Arc<TypeNode>>,
    /// List items, or the values of a map (`additionalProperties`).
    pub(crate) element: Option<Arc<TypeNode>>,
    pub(crate) list: ListKind,
    /// `x-kubernetes-map-type: atomic` (or `structType=atomic`): replaced as a whole.
    pub(crate) atomic: bool,
    /// `patchStrategy` of a built-in field (`merge`, `replace`, `retainKeys`, `merge,retainKeys`).
    pub(crate) patch_strategy: String,
    /// `patchMergeKey` of a built-in list field.
    pub(crate) merge_key: Option<String>,
}

impl TypeNode {
    /// The type of field `name` of an object of this type.
    pub(crate) fn field(&self, name: &str) -> Option<&TypeNode> {
        self.fields
            .get(name)
            .map(Arc::as_ref)
            .or(self.element.as_deref())
    }

    /// Whether `name` is a declared field (a struct member rather than a map entry).
    pub(crate) fn declares(&self, name: &str) -> bool {
        self.fields.contains_key(name)
    }

    /// The items' type.
    pub(crate) fn item(&self) -> Option<&TypeNode> {
        self.element.as_deref()
    }

    /// The shape to use for `value`: the declared one, or deduced from the value.
    pub(crate) fn shape_of(&self, value: &Value) -> Shape {
        match self.shape {
            Shape::Unknown => match value {
                Value::Object(_) => Shape::Object,
                Value::Array(_) => Shape::List,
                _ => Shape::Scalar,
            },
            shape => shape,
        }
    }

    /// Whether values of this type are replaced as a whole (scalars, atomic lists and maps,
    /// and lists the type does not describe).
    pub(crate) fn is_atomic_for(&self, value: &Value) -> bool {
        match self.shape_of(value) {
            Shape::Scalar | Shape::Unknown => true,
            Shape::List => self.shape == Shape::Unknown || self.list == ListKind::Atomic,
            Shape::Object => self.atomic,
        }
    }
}

/// List semantics per path (atomic / set / map with keys), map semantics, and, for built-in
/// kinds, strategic merge keys and strategies.
#[derive(Debug, Clone, Default)]
pub struct TypeInfo {
    root: Arc<TypeNode>,
    strategic_merge: bool,
}

impl TypeInfo {
    /// From a custom resource's schema (`x-kubernetes-list-type`, `-list-map-keys`, `-map-type`).
    /// Strategic merge is not supported for these, as in kube-apiserver.
    pub fn from_schema(schema: &StructuralSchema) -> TypeInfo {
        let mut root = from_node(schema.root_node());
        add_object_meta(&mut root);
        TypeInfo {
            root: Arc::new(root),
            strategic_merge: false,
        }
    }

    /// The merge keys and strategies of a built-in kind, e.g. `("", "v1", "Pod")`. An unknown
    /// kind gets deduced types (objects merge field by field, lists are replaced) and still
    /// accepts strategic merge patches.
    pub fn builtin(group: &str, version: &str, kind: &str) -> TypeInfo {
        let key = (group.to_string(), version.to_string(), kind.to_string());
        let mut cache = BUILTIN_TYPES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cache
            .entry(key)
            .or_insert_with(|| Self::build_builtin(group, version, kind))
            .clone()
    }

    fn build_builtin(group: &str, version: &str, kind: &str) -> TypeInfo {
        let root = match builtin_schema(group, version, kind) {
            Some(schema) => Definitions::new(&schema.definitions).node(&schema.root),
            None => {
                let mut root = TypeNode {
                    shape: Shape::Object,
                    ..TypeNode::default()
                };
                add_object_meta(&mut root);
                root
            }
        };
        TypeInfo {
            root: Arc::new(root),
            strategic_merge: true,
        }
    }

    /// Types deduced from the values alone (for kinds without any schema).
    pub fn deduced() -> TypeInfo {
        TypeInfo {
            root: Arc::new(TypeNode::default()),
            strategic_merge: false,
        }
    }

    /// Whether the kind accepts `application/strategic-merge-patch+json`.
    pub fn supports_strategic_merge(&self) -> bool {
        self.strategic_merge
    }

    pub(crate) fn root(&self) -> &TypeNode {
        &self.root
    }
}

/// From a CRD schema node.
fn from_node(node: &Node) -> TypeNode {
    let mut type_node = TypeNode::default();
    if node.int_or_string {
        type_node.shape = Shape::Scalar;
        return type_node;
    }
    match node.type_name.as_str() {
        "object" => {
            type_node.shape = Shape::Object;
            type_node.atomic = node.map_semantics() == MapType::Atomic;
            for (name, property) in &node.properties {
                type_node
                    .fields
                    .insert(name.clone(), Arc::new(from_node(property)));
            }
            if let Some(element) = node.additional_schema() {
                type_node.element = Some(Arc::new(from_node(element)));
            } else if node.preserves_unknown_fields() || node.embedded_resource {
                type_node.element = Some(Arc::new(TypeNode::default()));
            }
            if node.embedded_resource {
                add_object_meta(&mut type_node);
            }
        }
        "array" => {
            type_node.shape = Shape::List;
            type_node.list = match node.list_semantics() {
                ListType::Atomic => ListKind::Atomic,
                ListType::Set => ListKind::Set,
                ListType::Map => ListKind::Map(node.list_map_keys.clone()),
            };
            type_node.element = Some(Arc::new(
                node.items.as_deref().map(from_node).unwrap_or_default(),
            ));
        }
        "" => {}
        _ => type_node.shape = Shape::Scalar,
    }
    type_node
}

/// `(group, version, kind)`.
type KindKey = (String, String, String);

/// Type trees of built-in kinds, built once: the server asks on every write.
static BUILTIN_TYPES: LazyLock<Mutex<HashMap<KindKey, TypeInfo>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// `ObjectMeta`'s type tree.
static OBJECT_META: LazyLock<Arc<TypeNode>> = LazyLock::new(|| {
    let meta = builtin_schema("", "v1", "ConfigMap")
        .map(|schema| {
            Definitions::new(&schema.definitions)
                .node("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
        })
        .unwrap_or_default();
    Arc::new(meta)
});

/// `metadata` of a custom resource is an `ObjectMeta`, whatever its schema says.
fn add_object_meta(root: &mut TypeNode) {
    root.shape = Shape::Object;
    root.fields
        .insert("metadata".into(), Arc::clone(&OBJECT_META));
    for name in ["apiVersion", "kind"] {
        root.fields.entry(name.into()).or_insert_with(|| {
            Arc::new(TypeNode {
                shape: Shape::Scalar,
                ..TypeNode::default()
            })
        });
    }
}

/// Type trees of the definitions of one OpenAPI document, each built once (a kind refers to
/// `ObjectMeta`, `Container`, ... many times). A definition that refers back to itself while it
/// is being built (JSONSchemaProps, inside a CRD) is typed by deduction below that point, as
/// structured-merge-diff does for values a schema does not describe; expanding it instead grows
/// without bound.
struct Definitions<'a> {
    definitions: &'a Map<String, Value>,
    built: HashMap<String, Arc<TypeNode>>,
    building: HashSet<String>,
}

impl<'a> Definitions<'a> {
    fn new(definitions: &'a Map<String, Value>) -> Self {
        Definitions {
            definitions,
            built: HashMap::new(),
            building: HashSet::new(),
        }
    }

    /// The type tree of definition `name`.
    fn node(&mut self, name: &str) -> TypeNode {
        TypeNode::clone(&self.shared(name))
    }

    fn shared(&mut self, name: &str) -> Arc<TypeNode> {
        if let Some(node) = self.built.get(name) {
            return Arc::clone(node);
        }
        let Some(schema) = self.definitions.get(name) else {
            return Arc::default();
        };
        if !self.building.insert(name.to_string()) {
            return Arc::default();
        }
        let node = Arc::new(self.schema_node(schema));
        self.building.remove(name);
        self.built.insert(name.to_string(), Arc::clone(&node));
        node
    }

    fn schema_node(&mut self, schema: &Value) -> TypeNode {
        if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
            let name = reference.rsplit('/').next().unwrap_or_default();
            let mut node = self.node(name);
            apply_extensions(&mut node, schema);
            return node;
        }
        if let Some(Value::Array(all_of)) = schema.get("allOf")
            && let Some(first) = all_of.first()
        {
            let mut node = self.schema_node(first);
            apply_extensions(&mut node, schema);
            return node;
        }
        let type_name = match schema.get("type") {
            Some(Value::String(name)) => name.clone(),
            Some(Value::Array(names)) => names
                .iter()
                .filter_map(Value::as_str)
                .find(|name| *name != "null")
                .unwrap_or_default()
                .to_string(),
            _ => String::new(),
        };
        let mut node = TypeNode::default();
        match type_name.as_str() {
            "object" => {
                node.shape = Shape::Object;
                if let Some(Value::Object(properties)) = schema.get("properties") {
                    for (field, property) in properties {
                        node.fields
                            .insert(field.clone(), Arc::new(self.schema_node(property)));
                    }
                }
                if let Some(additional @ Value::Object(_)) = schema.get("additionalProperties") {
                    node.element = Some(Arc::new(self.schema_node(additional)));
                } else if node.fields.is_empty() {
                    node.shape = Shape::Unknown;
                }
            }
            "array" => {
                node.shape = Shape::List;
                node.element = schema
                    .get("items")
                    .map(|items| Arc::new(self.schema_node(items)));
            }
            "" => {}
            _ => node.shape = Shape::Scalar,
        }
        apply_extensions(&mut node, schema);
        node
    }
}

/// Reads the list, map and patch extensions of an OpenAPI schema (the same rules as
/// kube-openapi's structured-merge-diff conversion: a `merge` strategy with a merge key means a
/// map list, without one a set).
fn apply_extensions(node: &mut TypeNode, schema: &Value) {
    let text = |key: &str| schema.get(key).and_then(Value::as_str).map(str::to_string);
    if let Some(strategy) = text("x-kubernetes-patch-strategy") {
        node.patch_strategy = strategy;
    }
    if let Some(key) = text("x-kubernetes-patch-merge-key") {
        node.merge_key = Some(key);
    }
    if text("x-kubernetes-map-type").as_deref() == Some("atomic") {
        node.atomic = true;
    }
    if node.shape != Shape::List {
        return;
    }
    node.list = match text("x-kubernetes-list-type").as_deref() {
        Some("set") => ListKind::Set,
        Some("map") => {
            let keys = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|keys| {
                    keys.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            ListKind::Map(keys)
        }
        Some(_) => ListKind::Atomic,
        None => match (node.patch_strategy.as_str(), &node.merge_key) {
            ("merge" | "merge,retainKeys", Some(key)) => ListKind::Map(vec![key.clone()]),
            ("merge" | "merge,retainKeys", None) => ListKind::Set,
            _ => ListKind::Atomic,
        },
    };
}
