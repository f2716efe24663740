//! A child's exit status as a shell reports it.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// The exit code a shell would give for `status`: the code itself, or 128 + N when the
/// process was killed by signal N.
pub fn shell_code(status: ExitStatus) -> u8 {
    if let Some(code) = status.code() {
        return (code & 0xff) as u8;
    }
    match status.signal() {
        Some(signal) => (128 + signal).clamp(0, 255) as u8,
        None => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_signals() {
        assert_eq!(shell_code(ExitStatus::from_raw(0)), 0);
        assert_eq!(shell_code(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(shell_code(ExitStatus::from_raw(15)), 143);
        assert_eq!(shell_code(ExitStatus::from_raw(9)), 137);
    }
}
