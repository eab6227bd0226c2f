//! The JSONPath subset `additionalPrinterColumns` use: `.a.b`, `[n]`, `[*]`, `['key']` and
//! filters `[?(@.type=="Ready")]`, optionally wrapped in `{ }`.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    All,
    Filter { path: Vec<String>, value: String },
}

fn parse(path: &str) -> Option<Vec<Step>> {
    let path = path.trim();
    let path = path
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(path);
    let path = path.strip_prefix('$').unwrap_or(path);
    let mut steps = Vec::new();
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '.' => {
                let mut name = String::new();
                while let Some(&n) = chars.peek() {
                    if n == '.' || n == '[' {
                        break;
                    }
                    name.push(n);
                    chars.next();
                }
                if !name.is_empty() {
                    steps.push(Step::Field(name));
                }
            }
            '[' => {
                let mut inner = String::new();
                let mut depth = 1;
                for n in chars.by_ref() {
                    match n {
                        '[' => depth += 1,
                        ']' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    inner.push(n);
                }
                steps.push(parse_bracket(inner.trim())?);
            }
            _ => return None,
        }
    }
    Some(steps)
}

fn parse_bracket(inner: &str) -> Option<Step> {
    if inner == "*" {
        return Some(Step::All);
    }
    if let Ok(index) = inner.parse() {
        return Some(Step::Index(index));
    }
    if let Some(quoted) = inner.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
        return Some(Step::Field(quoted.to_string()));
    }
    let filter = inner.strip_prefix("?(")?.strip_suffix(')')?;
    let (left, right) = filter.split_once("==")?;
    let path = left
        .trim()
        .strip_prefix("@.")?
        .split('.')
        .map(str::to_string)
        .collect();
    let value = right
        .trim()
        .trim_matches(|c| c == '"' || c == '\'')
        .to_string();
    Some(Step::Filter { path, value })
}

/// Every value the path selects.
pub fn select<'a>(object: &'a Value, path: &str) -> Vec<&'a Value> {
    let Some(steps) = parse(path) else {
        return Vec::new();
    };
    let mut current = vec![object];
    for step in &steps {
        let mut next = Vec::new();
        for value in current {
            match step {
                Step::Field(name) => next.extend(value.get(name)),
                Step::Index(i) => next.extend(value.get(*i)),
                Step::All => match value {
                    Value::Array(items) => next.extend(items.iter()),
                    Value::Object(map) => next.extend(map.values()),
                    _ => {}
                },
                Step::Filter {
                    path,
                    value: wanted,
                } => {
                    for item in value.as_array().into_iter().flatten() {
                        let mut field = item;
                        for part in path {
                            field = &field[part.as_str()];
                        }
                        let text = match field {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        if &text == wanted {
                            next.push(item);
                        }
                    }
                }
            }
        }
        current = next;
    }
    current
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn printer_column_paths_select_like_kubectl() {
        let object = json!({"spec": {"replicas": 3}, "status": {"conditions": [
            {"type": "Ready", "status": "True"}, {"type": "Progressing", "status": "False"}]}});
        assert_eq!(select(&object, ".spec.replicas"), vec![&json!(3)]);
        assert_eq!(
            select(&object, ".status.conditions[?(@.type==\"Ready\")].status"),
            vec![&json!("True")]
        );
        assert_eq!(
            select(&object, "{.status.conditions[1].type}"),
            vec![&json!("Progressing")]
        );
        assert_eq!(select(&object, ".status.conditions[*].type").len(), 2);
        assert!(select(&object, ".spec.missing").is_empty());
    }
}
