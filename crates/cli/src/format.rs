//! Text helpers shared by the human-readable outputs (`explain`, `probe`, `verify`): how a byte
//! count, a yes/no answer, a list, a column table and an error's causes are written. A leaf: it imports nothing of
//! the crate.

/// `yes` or `no`.
pub fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

/// `12009603072 bytes (11453.25 MiB)`; a count below 1 MiB is shown in bytes alone.
pub fn bytes(value: u64) -> String {
    if value >= 1 << 20 {
        format!("{value} bytes ({:.2} MiB)", value as f64 / 1_048_576.0)
    } else {
        format!("{value} bytes")
    }
}

/// The items joined with `, `, or `none` when there are none.
pub fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "none".to_string()
    } else {
        items.join(", ")
    }
}

/// A plain-text table: a label column as wide as the longest label, then one 34-character
/// column per value; `headers` (one per value column) form a first line when not empty.
/// Trailing spaces are trimmed from every line.
pub fn table(headers: &[&str], rows: Vec<(String, Vec<String>)>) -> String {
    let width = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    let column = 34;
    let mut out = String::new();
    if !headers.is_empty() {
        let mut line = format!("{:<width$}", "");
        for h in headers {
            line.push_str(&format!("  {h:<column$}"));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    for (label, values) in rows {
        let mut line = format!("{label:<width$}");
        for v in values {
            line.push_str(&format!("  {v:<column$}"));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// An error and its causes joined with ": ", leaving out a cause whose text the message
/// already holds (errors that name their OS error would otherwise print it twice).
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// A figure of a table or a warning: two decimals for tokens/s, four for a command's value (a
/// wall time of a fraction of a second keeps its digits); a command's value below 0.001 or from
/// 10^9 up, which four decimals would show as 0.0000 or as a long row of digits, in scientific
/// notation with four significant digits (`1.000e308`, `2.500e-7`).
pub fn figure(value: f64, command: bool) -> String {
    if !command {
        format!("{value:.2}")
    } else if value != 0.0 && (value.abs() < 1e-3 || value.abs() >= 1e9) {
        format!("{value:.3e}")
    } else {
        format!("{value:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_commands_tiny_or_huge_value_keeps_its_digits() {
        assert_eq!(figure(0.0123, true), "0.0123");
        assert_eq!(figure(41.237, true), "41.2370");
        assert_eq!(figure(1e-300, true), "1.000e-300");
        assert_eq!(figure(0.00025, true), "2.500e-4");
        assert_eq!(figure(1e308, true), "1.000e308");
        assert_eq!(figure(123.456, false), "123.46");
    }

    #[test]
    fn bytes_show_mebibytes_from_one_mebibyte() {
        assert_eq!(bytes(32768), "32768 bytes");
        assert_eq!(bytes(1 << 20), "1048576 bytes (1.00 MiB)");
        assert_eq!(list_or_none(&[]), "none");
        assert_eq!(list_or_none(&["a".into(), "b".into()]), "a, b");
    }
}
