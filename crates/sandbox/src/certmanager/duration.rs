//! Go durations (`time.ParseDuration`), the format of `duration` and `renewBefore`.

use std::time::Duration;

/// Parses `2160h`, `1h30m`, `30s`, `1.5h`, `500ms`; negative durations are refused.
pub fn parse(text: &str) -> Result<Duration, String> {
    let invalid =
        || format!("invalid duration {text:?} (a Go duration such as 2160h, 1h30m or 30s)");
    let trimmed = text.trim();
    if trimmed == "0" {
        return Ok(Duration::ZERO);
    }
    let body = trimmed.strip_prefix('+').unwrap_or(trimmed);
    if body.starts_with('-') {
        return Err(format!("negative duration {text:?}"));
    }
    if body.is_empty() {
        return Err(invalid());
    }
    let mut rest = body;
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(invalid)?;
        let (number, after) = rest.split_at(number_end);
        if number.is_empty() || number == "." {
            return Err(invalid());
        }
        let value: f64 = number.parse().map_err(|_| invalid())?;
        let unit_end = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_end);
        let seconds = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(invalid()),
        };
        total += value * seconds;
        rest = next;
    }
    Duration::try_from_secs_f64(total).map_err(|_| invalid())
}

/// A duration as Go prints it (`2160h0m0s`, `30s`).
pub fn format(duration: Duration) -> String {
    let total = duration.as_secs();
    let (hours, minutes, seconds) = (total / 3600, (total / 60) % 60, total % 60);
    let fraction = duration.subsec_millis();
    let seconds = if fraction == 0 {
        format!("{seconds}s")
    } else {
        format!("{seconds}.{fraction:03}s")
            .trim_end_matches('0')
            .to_string()
    };
    if hours > 0 {
        format!("{hours}h{minutes}m{seconds}")
    } else if minutes > 0 {
        format!("{minutes}m{seconds}")
    } else {
        seconds
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_go_durations() {
        assert_eq!(parse("2160h").unwrap(), Duration::from_secs(2160 * 3600));
        assert_eq!(parse("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse("0").unwrap(), Duration::ZERO);
        for bad in ["", "10", "1d", "-5m", "h", "1.2.3s"] {
            assert!(parse(bad).is_err(), "{bad:?} refused");
        }
        assert_eq!(format(Duration::from_secs(2160 * 3600)), "2160h0m0s");
        assert_eq!(format(Duration::from_secs(90)), "1m30s");
        assert_eq!(format(Duration::from_secs(30)), "30s");
    }
}
