//! Static checks of a CEL rule against its schema, standing in for cel-go's type checker:
//! unknown functions and variables, and fields the schema does not declare, fail when the CRD is
//! registered, with cel-go's wording (`undeclared reference to 'x' (in container '')`,
//! `undefined field 'x'`).

use kube_cel::cel::IdedExpr;
use kube_cel::cel::common::ast::{EntryExpr, Expr};

use super::values::escape;
use crate::schema::node::Node;

/// Functions the evaluator provides: the `cel` crate's standard ones and `kube-cel`'s
/// Kubernetes libraries. A test checks each one is really registered.
pub(crate) const KNOWN_FUNCTIONS: &[&str] = &[
    // cel standard library
    "contains",
    "size",
    "max",
    "min",
    "startsWith",
    "endsWith",
    "string",
    "bytes",
    "double",
    "int",
    "uint",
    "optional.none",
    "optional.of",
    "optional.ofNonZeroValue",
    "value",
    "hasValue",
    "or",
    "orValue",
    "matches",
    "duration",
    "timestamp",
    "getFullYear",
    "getMonth",
    "getDayOfYear",
    "getDayOfMonth",
    "getDate",
    "getDayOfWeek",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
    // Kubernetes libraries
    "add",
    "asApproximateFloat",
    "asInteger",
    "base64.decode",
    "base64.encode",
    "charAt",
    "cidr",
    "compareTo",
    "containsCIDR",
    "containsIP",
    "distinct",
    "family",
    "find",
    "findAll",
    "first",
    "flatten",
    "format",
    "format.byte",
    "format.date",
    "format.datetime",
    "format.dns1035Label",
    "format.dns1035LabelPrefix",
    "format.dns1123Label",
    "format.dns1123LabelPrefix",
    "format.dns1123Subdomain",
    "format.dns1123SubdomainPrefix",
    "format.labelValue",
    "format.named",
    "format.qualifiedName",
    "format.uri",
    "format.uuid",
    "getEscapedPath",
    "getHost",
    "getHostname",
    "getPort",
    "getQuery",
    "getScheme",
    "indexOf",
    "ip",
    "ip.isCanonical",
    "isCIDR",
    "isCIDRv4",
    "isCIDRv6",
    "isGlobalUnicast",
    "isGreaterThan",
    "isIP",
    "isIPv4",
    "isIPv6",
    "isInteger",
    "isLessThan",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isLoopback",
    "isQuantity",
    "isSemver",
    "isSorted",
    "isURL",
    "isUnspecified",
    "join",
    "jsonpatch.escapeKey",
    "last",
    "lastIndexOf",
    "lists.range",
    "lowerAscii",
    "major",
    "masked",
    "math.abs",
    "math.bitAnd",
    "math.bitNot",
    "math.bitOr",
    "math.bitShiftLeft",
    "math.bitShiftRight",
    "math.bitXor",
    "math.ceil",
    "math.floor",
    "math.greatest",
    "math.isFinite",
    "math.isInf",
    "math.isNaN",
    "math.least",
    "math.round",
    "math.sign",
    "math.sqrt",
    "math.trunc",
    "minor",
    "patch",
    "prefixLength",
    "quantity",
    "replace",
    "reverse",
    "semver",
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
    "sign",
    "slice",
    "sort",
    "split",
    "strings.quote",
    "sub",
    "substring",
    "sum",
    "trim",
    "upperAscii",
    "url",
    "validate",
];

fn is_known(name: &str) -> bool {
    KNOWN_FUNCTIONS.contains(&name)
}

/// What the checker knows about an expression's value.
#[derive(Clone, Copy)]
enum Known<'a> {
    /// Described by this schema node; `true` for a resource root (implicit metadata fields).
    Schema(&'a Node, bool),
    Unknown,
}

struct Checker<'a> {
    source: &'a str,
    root: &'a Node,
    resource_root: bool,
    scopes: Vec<(String, Known<'a>)>,
}

/// Checks one expression; the error is cel-go's issue text (`ERROR: <input>:1:6: ...`).
pub(crate) fn check_expression(
    source: &str,
    expression: &IdedExpr,
    root: &Node,
    resource_root: bool,
    _is_rule: bool,
) -> Result<(), String> {
    let mut checker = Checker {
        source,
        root,
        resource_root,
        scopes: Vec::new(),
    };
    checker.check(expression).map(|_| ())
}

impl<'a> Checker<'a> {
    fn issue(&self, needle: &str, message: String) -> String {
        let offset = self.source.find(needle).unwrap_or(0);
        let line_start = self.source[..offset]
            .rfind('\n')
            .map_or(0, |index| index + 1);
        let line_number = self.source[..offset].matches('\n').count() + 1;
        let column = self.source[line_start..offset].chars().count() + 1;
        let line = self.source[line_start..].lines().next().unwrap_or_default();
        format!(
            "ERROR: <input>:{line_number}:{column}: {message}\n | {line}\n | {}^",
            ".".repeat(column - 1)
        )
    }

    fn lookup(&self, name: &str) -> Option<Known<'a>> {
        if let Some((_, known)) = self
            .scopes
            .iter()
            .rev()
            .find(|(scope_name, _)| scope_name == name)
        {
            return Some(*known);
        }
        match name {
            "self" | "oldSelf" => Some(Known::Schema(self.root, self.resource_root)),
            _ => None,
        }
    }

    fn check(&mut self, expression: &'a IdedExpr) -> Result<Known<'a>, String> {
        match &expression.expr {
            Expr::Ident(name) => {
                if name.starts_with('@') || name == "__result__" {
                    return Ok(Known::Unknown);
                }
                self.lookup(name).ok_or_else(|| {
                    self.issue(
                        name,
                        format!("undeclared reference to '{name}' (in container '')"),
                    )
                })
            }
            Expr::Select(select) => {
                let operand = self.check(&select.operand)?;
                Ok(self.select(operand, &select.field)?)
            }
            Expr::Call(call) => {
                let operator = call.func_name.starts_with('_')
                    || call.func_name.starts_with('@')
                    || call.func_name == "!_"
                    || call.func_name == "-_";
                if !operator {
                    let qualified = match call.target.as_deref().map(|target| &target.expr) {
                        Some(Expr::Ident(prefix)) if self.lookup(prefix).is_none() => {
                            Some(format!("{prefix}.{}", call.func_name))
                        }
                        _ => None,
                    };
                    match qualified {
                        Some(name) if is_known(&name) => {
                            for argument in &call.args {
                                self.check(argument)?;
                            }
                            return Ok(Known::Unknown);
                        }
                        _ if !is_known(&call.func_name) => {
                            let name = &call.func_name;
                            return Err(self.issue(
                                name,
                                format!("undeclared reference to '{name}' (in container '')"),
                            ));
                        }
                        _ => {}
                    }
                }
                let mut result = Known::Unknown;
                if let Some(target) = &call.target {
                    self.check(target)?;
                }
                for (index, argument) in call.args.iter().enumerate() {
                    let known = self.check(argument)?;
                    // `a[i]` and `a[?i]` give the element of a list or map.
                    if operator
                        && (call.func_name == "_[_]" || call.func_name == "_[?_]")
                        && index == 0
                    {
                        result = element_of(known);
                    }
                }
                Ok(result)
            }
            Expr::Comprehension(comprehension) => {
                let range = self.check(&comprehension.iter_range)?;
                self.check(&comprehension.accu_init)?;
                let depth = self.scopes.len();
                let iterated = match range {
                    Known::Schema(node, _) if node.type_name == "array" => element_of(range),
                    Known::Schema(..) | Known::Unknown => Known::Unknown,
                };
                self.scopes.push((comprehension.iter_var.clone(), iterated));
                if let Some(second) = &comprehension.iter_var2 {
                    self.scopes.push((second.clone(), Known::Unknown));
                }
                self.scopes
                    .push((comprehension.accu_var.clone(), Known::Unknown));
                let outcome = self
                    .check(&comprehension.loop_cond)
                    .and_then(|_| self.check(&comprehension.loop_step))
                    .and_then(|_| self.check(&comprehension.result));
                self.scopes.truncate(depth);
                outcome.map(|_| Known::Unknown)
            }
            Expr::List(list) => {
                for element in &list.elements {
                    self.check(element)?;
                }
                Ok(Known::Unknown)
            }
            Expr::Map(map) => {
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        self.check(&entry.key)?;
                        self.check(&entry.value)?;
                    }
                }
                Ok(Known::Unknown)
            }
            Expr::Struct(structure) => {
                for entry in &structure.entries {
                    if let EntryExpr::StructField(field) = &entry.expr {
                        self.check(&field.value)?;
                    }
                }
                Ok(Known::Unknown)
            }
            Expr::Literal(_) | Expr::Unspecified => Ok(Known::Unknown),
        }
    }

    fn select(&self, operand: Known<'a>, field: &str) -> Result<Known<'a>, String> {
        let Known::Schema(node, resource_root) = operand else {
            return Ok(Known::Unknown);
        };
        if let Some(element) = node.additional_schema() {
            return Ok(Known::Schema(element, element.embedded_resource));
        }
        match node.type_name.as_str() {
            "object" => {}
            "string" | "integer" | "number" | "boolean" => {
                let cel_type = match node.type_name.as_str() {
                    "integer" => "int",
                    "number" => "double",
                    "boolean" => "bool",
                    other => other,
                };
                return Err(self.issue(
                    field,
                    format!("type '{cel_type}' does not support field selection"),
                ));
            }
            _ => return Ok(Known::Unknown),
        }
        if let Some((_, property)) = node
            .properties
            .iter()
            .find(|(name, _)| escape(name).as_deref() == Some(field))
        {
            return Ok(Known::Schema(property, property.embedded_resource));
        }
        if (resource_root || node.embedded_resource)
            && matches!(field, "apiVersion" | "kind" | "metadata")
        {
            return Ok(Known::Unknown);
        }
        if node.preserves_unknown_fields() || (node.properties.is_empty() && node.embedded_resource)
        {
            return Ok(Known::Unknown);
        }
        Err(self.issue(field, format!("undefined field '{field}'")))
    }
}

fn element_of(known: Known<'_>) -> Known<'_> {
    match known {
        Known::Schema(node, _) => match (&node.items, node.additional_schema()) {
            (Some(items), _) => Known::Schema(items, items.embedded_resource),
            (None, Some(element)) => Known::Schema(element, element.embedded_resource),
            _ => Known::Unknown,
        },
        Known::Unknown => Known::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_cel::KubeCelExt;
    use kube_cel::cel::{Context, ExecutionError, Program};

    /// Every function the checker allows must exist in the evaluator, or a CRD would be
    /// accepted and then fail at runtime.
    #[test]
    fn every_known_function_is_registered() {
        let context = Context::default().with_all();
        for name in KNOWN_FUNCTIONS {
            let program = Program::compile(&format!("{name}()"))
                .unwrap_or_else(|error| panic!("{name}: {error}"));
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                program.execute(&context)
            }));
            if let Ok(Err(ExecutionError::UndeclaredReference(reference))) = outcome {
                panic!("{name} is not registered (undeclared {reference})");
            }
        }
    }
}
