//! The `format` values kube-apiserver checks for custom resources.
//!
//! Formats outside apiextensions' supported list (for example `int32`, `int64`, `float`) are
//! stripped before validation, so they never fail; names are compared without dashes
//! (`date-time` is `datetime`).

use std::sync::LazyLock;

use regex::Regex;

/// The format name kube-openapi checks, or `""` when the API server ignores this format.
pub(crate) fn effective_format(format: &str) -> &str {
    let normalized = format.replace('-', "");
    if SUPPORTED.contains(&normalized.as_str()) {
        format
    } else {
        ""
    }
}

/// Formats apiextensions validates (`supportedVersionedFormats`), dashes removed.
const SUPPORTED: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

fn regex(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|error| panic!("built-in format pattern {pattern}: {error}"))
}

static HOSTNAME: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$",
    )
});
static UUID: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID3: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID4: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static UUID5: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static BASE64: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$")
});
static TIME_OF_DAY: LazyLock<Regex> = LazyLock::new(|| {
    regex(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
});
static EMAIL: LazyLock<Regex> = LazyLock::new(|| regex(r"^[^@\s<>]+@[^@\s<>]+$"));
static MAC: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"^([0-9A-Fa-f]{2}[:-]){5}([0-9A-Fa-f]{2})$|^([0-9A-Fa-f]{4}\.){2}[0-9A-Fa-f]{4}$|^([0-9A-Fa-f]{2}[:-]){7}([0-9A-Fa-f]{2})$|^([0-9A-Fa-f]{2}[:-]){19}([0-9A-Fa-f]{2})$",
    )
});
static HEX_COLOR: LazyLock<Regex> = LazyLock::new(|| regex(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static RGB_COLOR: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$",
    )
});
static SSN: LazyLock<Regex> = LazyLock::new(|| regex(r"^\d{3}[- ]?\d{2}[- ]?\d{4}$"));
static BSON_OBJECT_ID: LazyLock<Regex> = LazyLock::new(|| regex(r"^[0-9a-fA-F]{24}$"));
static DURATION: LazyLock<Regex> = LazyLock::new(|| {
    regex(
        r"^[0-9]+\s*(ns|us|µs|ms|s|m|h|d|w|nanoseconds?|microseconds?|milliseconds?|seconds?|minutes?|hours?|days?|weeks?)$",
    )
});
static URI_SCHEME: LazyLock<Regex> = LazyLock::new(|| regex(r"^[A-Za-z][A-Za-z0-9+.-]*:"));

/// Whether `text` is valid for `format` (already an [`effective_format`]).
pub(crate) fn is_valid(format: &str, text: &str) -> bool {
    match format.replace('-', "").as_str() {
        "datetime" => is_date_time(text),
        "date" => is_date(text),
        "byte" => BASE64.is_match(text),
        "uri" => is_request_uri(text),
        "uuid" => UUID.is_match(text),
        "uuid3" => UUID3.is_match(text),
        "uuid4" => UUID4.is_match(text),
        "uuid5" => UUID5.is_match(text),
        "hostname" => HOSTNAME.is_match(text),
        "ipv4" => text.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => text.parse::<std::net::Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(text),
        "mac" => MAC.is_match(text),
        "email" => EMAIL.is_match(text),
        "hexcolor" => HEX_COLOR.is_match(text),
        "rgbcolor" => RGB_COLOR.is_match(text),
        "ssn" => SSN.is_match(text),
        "bsonobjectid" => BSON_OBJECT_ID.is_match(text),
        "duration" => DURATION.is_match(text) || parse_go_duration(text).is_some(),
        "isbn" => is_isbn10(text) || is_isbn13(text),
        "isbn10" => is_isbn10(text),
        "isbn13" => is_isbn13(text),
        "creditcard" => is_credit_card(text),
        _ => true,
    }
}

/// kube-openapi's `IsDateTime`: a full date, `t`, then `hh:mm:ss[.frac](z|±hh:mm)`, case-insensitive.
fn is_date_time(text: &str) -> bool {
    if text.len() < 4 {
        return false;
    }
    let lower = text.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let Some(captures) = TIME_OF_DAY.captures(time) else {
        return false;
    };
    &captures[1] <= "23" && &captures[2] <= "59" && &captures[3] <= "59"
}

/// `YYYY-MM-DD` that is a real calendar day.
fn is_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    if bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return false;
    }
    let number =
        |range: std::ops::Range<usize>| text.get(range).and_then(|part| part.parse::<u32>().ok());
    let (Some(year), Some(month), Some(day)) = (number(0..4), number(5..7), number(8..10)) else {
        return false;
    };
    if !text[0..4].bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// Go's `url.ParseRequestURI` accepts absolute URIs and absolute paths.
fn is_request_uri(text: &str) -> bool {
    if text.is_empty() || text.chars().any(|c| c.is_control() || c == ' ') {
        return false;
    }
    if !text.starts_with('/') && !URI_SCHEME.is_match(text) {
        return false;
    }
    // Percent escapes must be complete.
    let bytes = text.as_bytes();
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let valid = bytes.get(index + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(index + 2).is_some_and(u8::is_ascii_hexdigit);
            if !valid {
                return false;
            }
            index += 3;
        } else {
            index += 1;
        }
    }
    true
}

fn is_cidr(text: &str) -> bool {
    let Some((address, prefix)) = text.split_once('/') else {
        return false;
    };
    let Ok(prefix) = prefix.parse::<u8>() else {
        return false;
    };
    if address.parse::<std::net::Ipv4Addr>().is_ok() {
        prefix <= 32
    } else if address.parse::<std::net::Ipv6Addr>().is_ok() {
        prefix <= 128
    } else {
        false
    }
}

fn isbn_digits(text: &str) -> String {
    text.chars().filter(|c| *c != '-' && *c != ' ').collect()
}

fn is_isbn10(text: &str) -> bool {
    let digits = isbn_digits(text);
    if digits.len() != 10 {
        return false;
    }
    let mut sum = 0;
    for (index, character) in digits.chars().enumerate() {
        let value = match character {
            'X' if index == 9 => 10,
            c => match c.to_digit(10) {
                Some(digit) => digit,
                None => return false,
            },
        };
        sum += (index as u32 + 1) * value;
    }
    sum.is_multiple_of(11)
}

fn is_isbn13(text: &str) -> bool {
    let digits = isbn_digits(text);
    if digits.len() != 13 || !digits.chars().all(|c| c.is_ascii_digit()) {
        return false;
    }
    let sum: u32 = digits
        .chars()
        .enumerate()
        .map(|(index, c)| c.to_digit(10).unwrap_or(0) * if index % 2 == 0 { 1 } else { 3 })
        .sum();
    sum.is_multiple_of(10)
}

/// govalidator's `IsCreditCard`: digits (separators ignored) passing the Luhn check.
fn is_credit_card(text: &str) -> bool {
    let digits: Vec<u32> = text
        .chars()
        .filter(char::is_ascii_digit)
        .filter_map(|c| c.to_digit(10))
        .collect();
    if digits.len() < 12 || digits.len() > 19 {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(index, digit)| {
            if index % 2 == 1 {
                let doubled = digit * 2;
                if doubled > 9 { doubled - 9 } else { doubled }
            } else {
                *digit
            }
        })
        .sum();
    sum.is_multiple_of(10)
}

/// Go's `time.ParseDuration`, in nanoseconds: `1h30m`, `-1.5s`, `300ms`, `0`.
pub(crate) fn parse_go_duration(text: &str) -> Option<i128> {
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if number_end == 0 {
            return None;
        }
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale: f64 = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = &rest[unit_end..];
        total += number * scale;
    }
    let nanos = total.round() as i128;
    Some(if negative { -nanos } else { nanos })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_formats_are_ignored_like_the_api_server() {
        assert_eq!(effective_format("int32"), "");
        assert_eq!(effective_format("int64"), "");
        assert_eq!(effective_format("date-time"), "date-time");
        assert_eq!(effective_format("byte"), "byte");
    }

    #[test]
    fn format_checks() {
        let cases = [
            ("date-time", "2024-01-02T03:04:05Z", true),
            ("date-time", "2024-01-02T03:04:05.123+02:00", true),
            ("date-time", "2024-01-02 03:04:05Z", false),
            ("date-time", "2024-02-30T03:04:05Z", false),
            ("date-time", "2024-01-02T24:04:05Z", false),
            ("date", "2024-02-29", true),
            ("date", "2023-02-29", false),
            ("byte", "aGVsbG8=", true),
            ("byte", "not base64!", false),
            ("uri", "https://example.com/a?b=c", true),
            ("uri", "/absolute/path", true),
            ("uri", "relative/path", false),
            ("uri", "http://bad%zzescape", false),
            ("uuid", "123e4567-e89b-12d3-a456-426614174000", true),
            ("uuid", "123e4567", false),
            ("ipv4", "10.0.0.1", true),
            ("ipv4", "10.0.0.256", false),
            ("ipv6", "::1", true),
            ("cidr", "10.0.0.0/8", true),
            ("cidr", "10.0.0.0/33", false),
            ("hostname", "etcd-0.etcd.default.svc", true),
            ("hostname", "-bad", false),
            ("duration", "1h30m", true),
            ("duration", "5 seconds", true),
            ("duration", "soon", false),
        ];
        for (format, text, expected) in cases {
            assert_eq!(is_valid(format, text), expected, "{format} {text}");
        }
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("1h30m"), Some(5_400_000_000_000));
        assert_eq!(parse_go_duration("-1.5s"), Some(-1_500_000_000));
        assert_eq!(parse_go_duration("300ms"), Some(300_000_000));
        assert_eq!(parse_go_duration("0"), Some(0));
        assert_eq!(parse_go_duration("1"), None);
        assert_eq!(parse_go_duration("1x"), None);
    }
}
