//! `$(VAR)` references in a container's command, args and env values, expanded by the rules of
//! Kubernetes (`third_party/forked/golang/expansion`): a defined variable is replaced, an
//! undefined reference stays as written, `$$` is an escaped `$`.

use std::collections::HashMap;

/// Expands the `$(NAME)` references of `input` using `lookup`.
pub fn expand(input: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut output = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(dollar) = rest.find('$') {
        output.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        match after.chars().next() {
            Some('$') => {
                output.push('$');
                rest = &after[1..];
            }
            Some('(') => match after.find(')') {
                Some(close) => {
                    let name = &after[1..close];
                    match lookup(name) {
                        Some(value) => output.push_str(&value),
                        None => {
                            output.push_str("$(");
                            output.push_str(name);
                            output.push(')');
                        }
                    }
                    rest = &after[close + 1..];
                }
                None => {
                    // An unterminated reference is kept verbatim.
                    output.push('$');
                    output.push_str(after);
                    rest = "";
                }
            },
            Some(other) => {
                output.push('$');
                output.push(other);
                rest = &after[other.len_utf8()..];
            }
            None => {
                output.push('$');
                rest = "";
            }
        }
    }
    output.push_str(rest);
    output
}

/// Expands each value against the variables defined before it, as the kubelet does for a
/// container's `env` list; a later definition of a name replaces an earlier one.
pub fn expand_env_list(env: &[(String, String)]) -> Vec<(String, String)> {
    let mut defined: HashMap<String, String> = HashMap::new();
    let mut result: Vec<(String, String)> = Vec::new();
    for (name, value) in env {
        let value = expand(value, |reference| defined.get(reference).cloned());
        defined.insert(name.clone(), value.clone());
        match result.iter_mut().find(|(existing, _)| existing == name) {
            Some(entry) => entry.1 = value,
            None => result.push((name.clone(), value)),
        }
    }
    result
}

/// Expands `$(VAR)` in each of `items` with the final environment.
pub fn expand_all(items: &[String], env: &[(String, String)]) -> Vec<String> {
    let lookup = |name: &str| {
        env.iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
    };
    items.iter().map(|item| expand(item, lookup)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Vec<(String, String)> {
        vec![
            ("POD_NAME".into(), "etcd-0".into()),
            ("NS".into(), "default".into()),
        ]
    }

    fn run(input: &str) -> String {
        expand_all(&[input.to_string()], &env()).remove(0)
    }

    #[test]
    fn defined_references_are_replaced() {
        assert_eq!(run("--name=$(POD_NAME)"), "--name=etcd-0");
        assert_eq!(run("$(POD_NAME).$(NS).svc"), "etcd-0.default.svc");
    }

    #[test]
    fn undefined_and_malformed_references_stay() {
        assert_eq!(run("$(MISSING)"), "$(MISSING)");
        assert_eq!(run("$(POD_NAME"), "$(POD_NAME");
        assert_eq!(run("cost $5"), "cost $5");
        assert_eq!(run("trailing $"), "trailing $");
    }

    #[test]
    fn double_dollar_escapes() {
        assert_eq!(run("$$(POD_NAME)"), "$(POD_NAME)");
        assert_eq!(run("$$$(POD_NAME)"), "$etcd-0");
        assert_eq!(run("$$"), "$");
    }

    #[test]
    fn env_values_see_earlier_variables_only() {
        let list = vec![
            ("A".to_string(), "x".to_string()),
            ("B".to_string(), "$(A)-$(C)".to_string()),
            ("C".to_string(), "z".to_string()),
            ("A".to_string(), "again-$(A)".to_string()),
        ];
        assert_eq!(
            expand_env_list(&list),
            vec![
                ("A".to_string(), "again-x".to_string()),
                ("B".to_string(), "x-$(C)".to_string()),
                ("C".to_string(), "z".to_string()),
            ]
        );
    }
}
