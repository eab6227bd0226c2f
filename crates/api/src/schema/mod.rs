//! Where our schemas are made to say what the reference CRDs say.
//!
//! `#[derive(CustomResource, JsonSchema)]` gets most of the schema right from the Rust types and
//! their `#[schemars]`/`#[x_kube]` attributes. What it cannot express lives here, in one place:
//!
//! - the field-level `schema_with` functions below, for the Kubernetes types we embed: the
//!   list/map/struct markers of the Kubernetes Go types (k8s-openapi's schemas carry none), the
//!   `Quantity` pattern, the `default: ""` of `LocalObjectReference.name`, the validation
//!   markers of `metav1.Condition`;
//! - [`finalize`], a pass over each generated CRD that undoes what the derive adds and the API
//!   server would read differently (`nullable`, a required root `spec`) and adds what only the
//!   finished schema can carry (`anyOf` of int-or-string, the root `apiVersion`/`kind`/`metadata`).

mod finalize;
mod kubernetes;
mod markers;

pub(crate) use finalize::finalize;
pub use markers::QUANTITY_PATTERN;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::Value;

/// The schema of a `resource.Quantity`: an integer or a string in quantity syntax.
///
/// The `anyOf: [integer, string]` that goes with `x-kubernetes-int-or-string` is added by
/// [`finalize`]: the derive's structural rewrite would strip the types out of an `anyOf` here.
pub(crate) fn quantity(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "x-kubernetes-int-or-string": true,
        "pattern": QUANTITY_PATTERN,
    })
}

/// A `LocalObjectReference` as the Kubernetes Go type declares it: an atomic map whose `name`
/// defaults to the empty string (so it is never "required").
pub(crate) fn local_object_reference(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "properties": {
            "name": {
                "type": "string",
                "default": "",
                "description": "Name of the referent (a Secret or other object in the same namespace). Effectively required: an empty name refers to nothing.",
            },
        },
        "x-kubernetes-map-type": "atomic",
    })
}

/// A list of [`local_object_reference`]s (for example `imagePullSecrets`).
pub(crate) fn local_object_references(generator: &mut SchemaGenerator) -> Schema {
    let item = local_object_reference(generator).to_value();
    json_schema!({ "type": "array", "items": item })
}

/// `corev1.Affinity` with the markers of the Kubernetes Go types.
pub(crate) fn affinity(generator: &mut SchemaGenerator) -> Schema {
    embedded::<k8s_openapi::api::core::v1::Affinity>(generator, kubernetes::affinity)
}

/// A list of `corev1.TopologySpreadConstraint` with the markers of the Kubernetes Go types.
pub(crate) fn topology_spread_constraints(generator: &mut SchemaGenerator) -> Schema {
    embedded::<Vec<k8s_openapi::api::core::v1::TopologySpreadConstraint>>(generator, |list| {
        if let Some(item) = list.get_mut("items") {
            kubernetes::topology_spread_constraint(item);
        }
    })
}

/// `corev1.ResourceRequirements` with quantity values and the `claims` list map.
pub(crate) fn resource_requirements(generator: &mut SchemaGenerator) -> Schema {
    embedded::<k8s_openapi::api::core::v1::ResourceRequirements>(
        generator,
        kubernetes::resource_requirements,
    )
}

/// A list of `metav1.Condition` with the validation markers of the Go type.
pub(crate) fn conditions(generator: &mut SchemaGenerator) -> Schema {
    embedded::<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>(generator, |list| {
        if let Some(item) = list.get_mut("items") {
            kubernetes::condition(item);
        }
    })
}

/// A plain string, for Rust enums whose wire form the reference leaves unconstrained (the phases
/// and outcomes of snapshots and defrags are `type: string` there, without an `enum`).
pub(crate) fn plain_string(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string" })
}

/// The inline schema of `T` from k8s-openapi, with `mark` applied to its JSON form.
///
/// # Panics
/// Never: k8s-openapi's schemas are objects, and `mark` only sets keys on objects.
fn embedded<T: JsonSchema>(
    generator: &mut SchemaGenerator,
    mark: impl FnOnce(&mut Value),
) -> Schema {
    let mut value = generator.subschema_for::<T>().to_value();
    mark(&mut value);
    Schema::try_from(value).expect("a k8s-openapi schema is a JSON object")
}
