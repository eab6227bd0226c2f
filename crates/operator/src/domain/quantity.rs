//! Kubernetes quantities (`resource.Quantity`) as bytes: the API's sizes (`quotaBackendBytes`
//! in a quantity's form, a claim's storage request, a defrag rule's thresholds) read the way
//! the API server reads them.

/// A Kubernetes quantity (`200Mi`, `1G`, `1.5Gi`, `1e9`, `1024`) in bytes, rounded up as
/// `resource.Quantity.Value()` rounds. `None` for what is not a quantity.
pub fn quantity_bytes(text: &str) -> Option<i64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    let multiplier: f64 = match suffix {
        "" => 1.0,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        exponent if exponent.starts_with(['e', 'E']) => {
            10f64.powi(exponent[1..].parse::<i32>().ok()?)
        }
        _ => return None,
    };
    let bytes = (value * multiplier).ceil();
    (bytes.is_finite() && bytes.abs() < 9.2e18).then_some(bytes as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MI: i64 = 1 << 20;

    #[test]
    fn quantities_parse_as_the_api_server_reads_them() {
        for (text, bytes) in [
            ("200Mi", Some(200 * MI)),
            ("32Mi", Some(32 * MI)),
            ("1Gi", Some(1 << 30)),
            ("1G", Some(1_000_000_000)),
            ("1.5Ki", Some(1536)),
            ("1024", Some(1024)),
            ("1e3", Some(1000)),
            ("100k", Some(100_000)),
            ("1500m", Some(2)),
            ("", None),
            ("Mi", None),
            ("12XB", None),
        ] {
            assert_eq!(quantity_bytes(text), bytes, "{text:?}");
        }
    }
}
