//! How Go prints values in kube-apiserver's messages.
//!
//! Error texts are compared byte for byte by tests and read by people used to a real cluster,
//! so quoting (`strconv.Quote`), float formatting (`%v`) and Go-syntax dumps (`%#v`) follow Go.

use serde_json::Value;

/// Go's `strconv.Quote`: double quotes, `\"` and `\\`, `\n`-style escapes, `\x` for other
/// control bytes, printable Unicode kept as is.
pub(crate) fn quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for character in text.chars() {
        match character {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\u{07}' => quoted.push_str("\\a"),
            '\u{08}' => quoted.push_str("\\b"),
            '\u{0c}' => quoted.push_str("\\f"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            '\u{0b}' => quoted.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                quoted.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => {
                let code = c as u32;
                if code <= 0xffff {
                    quoted.push_str(&format!("\\u{code:04x}"));
                } else {
                    quoted.push_str(&format!("\\U{code:08x}"));
                }
            }
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// Go's `%v` for a `float64`: `strconv.FormatFloat(f, 'g', -1, 64)`, the shortest digits that
/// round-trip, in exponent form when the exponent is below -4 or reaches the precision (6, or
/// the digit count for short numbers), e.g. `1e+06`, `0.0001`, `1e-05`, `123456`.
pub(crate) fn format_float(value: f64) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if value == 0.0 {
        return if value.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // Rust's `{:e}` gives the shortest round-trip digits, e.g. `1.5e6`.
    let scientific = format!("{:e}", value.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digit_count = digits.len() as i32;
    let point = exponent + 1; // decimal point position within `digits`
    let mut precision = 6;
    if precision > digit_count && digit_count >= point {
        precision = digit_count;
    }
    let sign = if value < 0.0 { "-" } else { "" };
    if exponent < -4 || exponent >= precision {
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        let mut mantissa_text = digits[..1].to_string();
        if digits.len() > 1 {
            mantissa_text.push('.');
            mantissa_text.push_str(&digits[1..]);
        }
        return format!("{sign}{mantissa_text}e{exponent_sign}{:02}", exponent.abs());
    }
    let mut text = sign.to_string();
    if point <= 0 {
        text.push_str("0.");
        text.push_str(&"0".repeat((-point) as usize));
        text.push_str(&digits);
    } else if point >= digit_count {
        text.push_str(&digits);
        text.push_str(&"0".repeat((point - digit_count) as usize));
    } else {
        text.push_str(&digits[..point as usize]);
        text.push('.');
        text.push_str(&digits[point as usize..]);
    }
    text
}

/// A JSON number as Go prints the `int64` or `float64` the API server decoded it to.
pub(crate) fn format_number(number: &serde_json::Number) -> String {
    if let Some(integer) = number.as_i64() {
        integer.to_string()
    } else if let Some(unsigned) = number.as_u64() {
        unsigned.to_string()
    } else {
        format_float(number.as_f64().unwrap_or(0.0))
    }
}

/// A bad value as `field.Error.ErrorBody` prints it in Kubernetes 1.33: numbers and booleans
/// plain, strings quoted, `null` as the string `"null"`, objects and arrays as Go syntax (`%#v`).
pub(crate) fn format_bad_value(value: &Value) -> String {
    match value {
        Value::Null => quote("null"),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => format_number(number),
        Value::String(text) => quote(text),
        Value::Array(_) | Value::Object(_) => go_syntax(value),
    }
}

/// Go's `%#v` of the `interface{}` values unstructured JSON decodes to.
pub(crate) fn go_syntax(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".into(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => format_number(number),
        Value::String(text) => quote(text),
        Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(go_syntax).collect();
            format!("[]interface {{}}{{{}}}", parts.join(", "))
        }
        Value::Object(fields) => {
            // fmt prints map keys sorted, as serde_json's map already is.
            let parts: Vec<String> = fields
                .iter()
                .map(|(key, value)| format!("{}:{}", quote(key), go_syntax(value)))
                .collect();
            format!("map[string]interface {{}}{{{}}}", parts.join(", "))
        }
    }
}

/// The Go type name of a decoded JSON value, as kube-openapi names it in type errors.
pub(crate) fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(number) if number.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quote_matches_strconv_quote() {
        assert_eq!(quote("Disk"), r#""Disk""#);
        assert_eq!(quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(quote("line\nnext\t"), r#""line\nnext\t""#);
        assert_eq!(quote("\u{1}"), r#""\x01""#);
        assert_eq!(quote("héllo ✓"), "\"héllo ✓\"");
    }

    #[test]
    fn floats_print_as_go_percent_v() {
        let cases = [
            (0.0, "0"),
            (1.0, "1"),
            (-1.5, "-1.5"),
            (0.1, "0.1"),
            (10.0, "10"),
            (12.0, "12"),
            (100000.0, "100000"),
            (123456.0, "123456"),
            (1_000_000.0, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (1e21, "1e+21"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (123.456, "123.456"),
        ];
        for (value, expected) in cases {
            assert_eq!(format_float(value), expected, "{value}");
        }
    }

    #[test]
    fn bad_values_print_as_kubernetes_1_33() {
        assert_eq!(format_bad_value(&json!(-1)), "-1");
        assert_eq!(format_bad_value(&json!(2.5)), "2.5");
        assert_eq!(format_bad_value(&json!("x")), "\"x\"");
        assert_eq!(format_bad_value(&json!(null)), "\"null\"");
        assert_eq!(
            format_bad_value(&json!({"name": "a", "port": 80})),
            r#"map[string]interface {}{"name":"a", "port":80}"#
        );
        assert_eq!(
            format_bad_value(&json!(["a", 1, null])),
            r#"[]interface {}{"a", 1, interface {}(nil)}"#
        );
    }
}
