//! Deployment on macOS: a per-user LaunchAgent that runs a workload with the shim, and the
//! host Mac's preference that lets guests use the unrestricted paravirtual device.

pub mod agent;
pub mod host;

/// Quotes `text` for a POSIX shell when it holds anything but safe characters.
pub fn shell_quote(text: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c);
    if !text.is_empty() && text.chars().all(safe) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::shell_quote;

    #[test]
    fn quotes_only_when_needed() {
        assert_eq!(shell_quote("/a/b.plist"), "/a/b.plist");
        assert_eq!(shell_quote("/a b/c"), "'/a b/c'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }
}
