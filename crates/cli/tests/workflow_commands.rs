//! Every `capshim` command that the GitHub workflows, the action and their scripts
//! (scripts/ci, scripts/action) run exists, with the options they give it: `capshim SUB
//! --help` works and lists each option. The scan is shared with xtask/tests/workflows.rs,
//! which checks the `cargo xtask` commands the same way.

#[path = "../../../xtask/tests/workflow_scan/mod.rs"]
mod workflow_scan;

mod common;

use workflow_scan::{all_invocations, help_lists};

#[test]
fn every_capshim_command_the_workflows_run_exists_with_its_options() {
    let found = all_invocations(&["capshim"], &["$capshim", "$CAPSHIM"]);
    // The macOS job's suite and the action: if the scan stops finding these, it is broken.
    for sub in [
        "doctor", "probe", "run", "selftest", "bench", "verify", "report", "agent",
    ] {
        assert!(
            found.iter().any(|i| i.subcommand == sub),
            "no `capshim {sub}` found in the workflows and their scripts"
        );
    }
    let mut failures = Vec::new();
    for inv in &found {
        let out = common::capshim()
            .args([inv.subcommand.as_str(), "--help"])
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            failures.push(format!(
                "{}: `capshim {} --help` failed: {}  in: {}",
                inv.file,
                inv.subcommand,
                String::from_utf8_lossy(&out.stderr).trim(),
                inv.line
            ));
            continue;
        }
        for option in &inv.options {
            if !help_lists(&help, option) {
                failures.push(format!(
                    "{}: `capshim {}` has no option {option}  in: {}",
                    inv.file, inv.subcommand, inv.line
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
