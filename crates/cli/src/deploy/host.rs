//! The host Mac's preference that lets guests' paravirtual device answer with the
//! unrestricted feature level: the user default
//! `com.apple.gpusw.ParavirtualizedGraphics ForceUnrestrictedDeviceFeatureLevel` (bool),
//! read by the host when a VM starts (docs/design.md, "The problem, in facts"), managed with `defaults`.

use thiserror::Error;

/// The preference domain.
pub const DOMAIN: &str = "com.apple.gpusw.ParavirtualizedGraphics";
/// The preference key (a bool).
pub const KEY: &str = "ForceUnrestrictedDeviceFeatureLevel";
/// Said after every change: the host reads the preference when a VM starts.
pub const REMINDER: &str = "Stop and start each VM for this to take effect: shut the guest down completely and start it again (restarting from inside the guest is not enough).";

/// What to do with the preference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::Subcommand)]
pub enum Action {
    /// Show whether the preference is set
    Status,
    /// Set the preference to true (guests get the unrestricted feature level)
    Enable,
    /// Remove the preference (guests get the stock feature level)
    Disable,
}

/// The preference's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// Set to true.
    Enabled,
    /// Set to false.
    SetFalse,
    /// Not set: the stock behaviour.
    NotSet,
}

/// A command's outcome as [`Runner`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Exited with status 0.
    pub success: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// Runs a command (real: `std::process::Command`; tests: a fake).
pub trait Runner {
    /// Runs `argv` and returns its outcome, or why it could not start.
    fn run(&mut self, argv: &[String]) -> Result<Outcome, String>;
}

/// Runs commands for real.
pub struct System;

impl Runner for System {
    fn run(&mut self, argv: &[String]) -> Result<Outcome, String> {
        let output = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .map_err(|e| format!("cannot run `{}`: {e}", argv.join(" ")))?;
        Ok(Outcome {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }
}

/// Why the preference could not be managed.
#[derive(Debug, Error)]
pub enum HostError {
    /// This macOS is itself a guest.
    #[error(
        "this Mac is a virtual machine (sysctl kern.hv_vmm_present = 1); the preference belongs on the host Mac that runs the VM: run `capshim host {0}` there"
    )]
    InGuest(&'static str),
    /// Whether this is a guest could not be told.
    #[error(
        "cannot tell whether this Mac is a VM guest: {0}; run on the macOS host, or use --dry-run to see the commands"
    )]
    GuestUnknown(String),
    /// A `defaults` command failed.
    #[error("`{command}` failed: {message}")]
    Defaults {
        /// The command line.
        command: String,
        /// Its error output.
        message: String,
    },
}

/// `defaults`, run by absolute path so another `defaults` on `PATH` cannot answer for it.
pub const DEFAULTS: &str = "/usr/bin/defaults";
/// `sysctl`, likewise.
pub const SYSCTL: &str = "/usr/sbin/sysctl";

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// `sysctl -n kern.hv_vmm_present`: 1 in a guest.
pub fn guest_check() -> Vec<String> {
    argv(&[SYSCTL, "-n", "kern.hv_vmm_present"])
}

/// `defaults read DOMAIN KEY`.
pub fn read_command() -> Vec<String> {
    argv(&[DEFAULTS, "read", DOMAIN, KEY])
}

/// The commands an action runs after the guest check, in order.
pub fn commands(action: Action) -> Vec<Vec<String>> {
    match action {
        Action::Status => vec![read_command()],
        Action::Enable => vec![
            argv(&[DEFAULTS, "write", DOMAIN, KEY, "-bool", "true"]),
            read_command(),
        ],
        Action::Disable => vec![argv(&[DEFAULTS, "delete", DOMAIN, KEY]), read_command()],
    }
}

/// What `--dry-run` prints: every command, with what it is for.
pub fn dry_run(action: Action) -> String {
    let name = action_name(action);
    let mut out = format!(
        "# capshim host {name} would run these commands on the macOS host:\n{}    # refuse when this prints 1 (inside a guest)\n",
        guest_check().join(" ")
    );
    for command in commands(action) {
        out.push_str(&command.join(" "));
        if command[1] == "read" {
            out.push_str("    # 1 = enabled; \"does not exist\" = not set (stock)");
        }
        out.push('\n');
    }
    if action != Action::Status {
        out.push_str(&format!("# {REMINDER}\n"));
    }
    out
}

fn action_name(action: Action) -> &'static str {
    match action {
        Action::Status => "status",
        Action::Enable => "enable",
        Action::Disable => "disable",
    }
}

/// `defaults read` of a missing key fails with "The domain/default pair of (…) does not
/// exist".
fn not_set(outcome: &Outcome) -> bool {
    !outcome.success && outcome.stderr.contains("does not exist")
}

fn read_state(runner: &mut dyn Runner) -> Result<State, HostError> {
    let command = read_command();
    let outcome = runner
        .run(&command)
        .map_err(|message| HostError::Defaults {
            command: command.join(" "),
            message,
        })?;
    if not_set(&outcome) {
        return Ok(State::NotSet);
    }
    if !outcome.success {
        return Err(HostError::Defaults {
            command: command.join(" "),
            message: outcome.stderr.trim().to_string(),
        });
    }
    Ok(match outcome.stdout.trim() {
        "1" | "true" | "YES" => State::Enabled,
        _ => State::SetFalse,
    })
}

/// Describes a state in one line.
pub fn describe(state: State) -> String {
    match state {
        State::Enabled => format!(
            "{DOMAIN} {KEY} = true: VMs started from now on offer guests the unrestricted paravirtual device"
        ),
        State::SetFalse => {
            format!("{DOMAIN} {KEY} = false: guests get the stock paravirtual device")
        }
        State::NotSet => {
            format!("{DOMAIN} {KEY} is not set: guests get the stock paravirtual device")
        }
    }
}

/// Performs `action` on the host: refuses inside a guest, runs `defaults`, and returns the
/// state afterwards.
///
/// # Errors
/// [`HostError`] naming the command that failed and what to do.
pub fn apply(action: Action, runner: &mut dyn Runner) -> Result<State, HostError> {
    let check = guest_check();
    let outcome = runner.run(&check).map_err(HostError::GuestUnknown)?;
    match outcome.stdout.trim() {
        "0" if outcome.success => {}
        "1" if outcome.success => return Err(HostError::InGuest(action_name(action))),
        other => {
            return Err(HostError::GuestUnknown(format!(
                "`{}` printed {other:?} ({})",
                check.join(" "),
                outcome.stderr.trim()
            )));
        }
    }
    if action != Action::Status {
        let command = &commands(action)[0];
        let outcome = runner.run(command).map_err(|message| HostError::Defaults {
            command: command.join(" "),
            message,
        })?;
        if !outcome.success {
            // `defaults delete` of a key that is not there fails too, saying "Domain (…) not
            // found" (not "does not exist", as `defaults read` does): when `defaults read`
            // confirms the key is absent, disabling has nothing left to do.
            let already_absent =
                action == Action::Disable && read_state(runner).ok() == Some(State::NotSet);
            if !already_absent {
                return Err(HostError::Defaults {
                    command: command.join(" "),
                    message: outcome.stderr.trim().to_string(),
                });
            }
        }
    }
    read_state(runner)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Answers like a Mac: `sysctl` prints `guest`; `defaults` keeps one value.
    struct FakeMac {
        guest: &'static str,
        value: Option<bool>,
        /// `defaults delete` fails without removing anything.
        read_only: bool,
        log: Vec<String>,
    }

    impl Runner for FakeMac {
        fn run(&mut self, argv: &[String]) -> Result<Outcome, String> {
            self.log.push(argv.join(" "));
            let ok = |stdout: &str| Outcome {
                success: true,
                stdout: stdout.to_string(),
                stderr: String::new(),
            };
            let failed = |stderr: String| Outcome {
                success: false,
                stdout: String::new(),
                stderr,
            };
            Ok(match (argv[0].as_str(), argv[1].as_str()) {
                (SYSCTL, _) => ok(self.guest),
                (DEFAULTS, "read") => match self.value {
                    Some(v) => ok(if v { "1\n" } else { "0\n" }),
                    None => failed(format!(
                        "\nThe domain/default pair of ({DOMAIN}, {KEY}) does not exist\n"
                    )),
                },
                (DEFAULTS, "write") => {
                    self.value = Some(argv[5] == "true");
                    ok("")
                }
                (DEFAULTS, "delete") if self.read_only => {
                    failed(format!("Could not write domain {DOMAIN}; exiting\n"))
                }
                (DEFAULTS, "delete") => match self.value.take() {
                    Some(_) => ok(""),
                    None => failed(format!(
                        "Domain ({DOMAIN}) not found.\nDefaults have not been changed.\n"
                    )),
                },
                _ => return Err("unexpected".into()),
            })
        }
    }

    fn mac(guest: &'static str, value: Option<bool>) -> FakeMac {
        FakeMac {
            guest,
            value,
            read_only: false,
            log: Vec::new(),
        }
    }

    #[test]
    fn enable_disable_and_status_on_a_host() {
        let mut m = mac("0\n", None);
        assert_eq!(apply(Action::Status, &mut m).unwrap(), State::NotSet);
        assert_eq!(apply(Action::Enable, &mut m).unwrap(), State::Enabled);
        assert_eq!(m.value, Some(true));
        assert_eq!(apply(Action::Disable, &mut m).unwrap(), State::NotSet);
        // Disabling twice is fine: `defaults delete` fails saying "Domain (…) not found",
        // and `defaults read` confirms the key is absent.
        m.log.clear();
        assert_eq!(apply(Action::Disable, &mut m).unwrap(), State::NotSet);
        assert_eq!(
            m.log,
            [
                format!("{SYSCTL} -n kern.hv_vmm_present"),
                format!("{DEFAULTS} delete {DOMAIN} {KEY}"),
                format!("{DEFAULTS} read {DOMAIN} {KEY}"),
                format!("{DEFAULTS} read {DOMAIN} {KEY}"),
            ]
        );
        apply(Action::Enable, &mut m).unwrap();
        assert!(
            m.log
                .contains(&format!("{DEFAULTS} write {DOMAIN} {KEY} -bool true"))
        );
        assert_eq!(
            apply(Action::Status, &mut mac("0", Some(false))).unwrap(),
            State::SetFalse
        );
    }

    #[test]
    fn a_delete_that_fails_while_the_key_is_still_set_is_an_error() {
        let mut m = mac("0\n", Some(true));
        m.read_only = true;
        let err = apply(Action::Disable, &mut m).unwrap_err();
        assert!(
            matches!(&err, HostError::Defaults { message, .. } if message.contains("Could not write")),
            "{err}"
        );
        assert_eq!(m.value, Some(true));
    }

    #[test]
    fn refuses_inside_a_guest_without_touching_defaults() {
        let mut m = mac("1\n", None);
        let err = apply(Action::Enable, &mut m).unwrap_err();
        assert!(matches!(err, HostError::InGuest("enable")), "{err}");
        assert_eq!(m.log, vec![format!("{SYSCTL} -n kern.hv_vmm_present")]);
        assert!(matches!(
            apply(Action::Status, &mut mac("", None)),
            Err(HostError::GuestUnknown(_))
        ));
    }

    #[test]
    fn dry_run_prints_the_exact_commands() {
        insta::assert_snapshot!("host_enable_dry_run", dry_run(Action::Enable));
        insta::assert_snapshot!("host_disable_dry_run", dry_run(Action::Disable));
        insta::assert_snapshot!("host_status_dry_run", dry_run(Action::Status));
    }
}
