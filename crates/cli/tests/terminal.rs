//! One style for every error, and colour only where it is wanted: capshim's own errors and
//! clap's start `capshim: error:`; styles reach a pipe only with `CLICOLOR_FORCE`, never with
//! `NO_COLOR`.

mod common;

use common::capshim;

const ESC: char = '\u{1b}';

/// The command with the colour variables of the test's own environment removed.
fn plain_env(args: &[&str]) -> assert_cmd::Command {
    let mut cmd = capshim();
    cmd.args(args)
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR")
        .env_remove("CLICOLOR_FORCE");
    cmd
}

fn stderr_of(cmd: &mut assert_cmd::Command, code: i32) -> String {
    let output = cmd.assert().code(code).get_output().clone();
    String::from_utf8(output.stderr).unwrap()
}

#[test]
fn clap_and_capshim_errors_share_one_prefix() {
    // Found by clap: an unknown option, a value its parser refuses.
    for args in [
        &["--bogus"][..],
        &["explain", "--family-max", "Apple9"],
        &["run"],
    ] {
        let err = stderr_of(&mut plain_env(args), 2);
        assert!(err.starts_with("capshim: error: "), "{args:?}: {err}");
        assert!(!err.contains(ESC), "{args:?}: no colour in a pipe: {err:?}");
    }
    // Found by capshim after parsing: a profile file that does not exist.
    let err = stderr_of(
        &mut plain_env(&["explain", "--profile-file", "/nonexistent/capshim.toml"]),
        1,
    );
    assert!(err.starts_with("capshim: error: "), "{err}");
    assert!(err.contains("/nonexistent/capshim.toml"), "{err}");
}

#[test]
fn help_and_version_go_to_stdout_unprefixed() {
    let out = plain_env(&["--version"])
        .assert()
        .success()
        .get_output()
        .clone();
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .starts_with("capshim ")
    );
    let out = plain_env(&["run", "--help"])
        .assert()
        .success()
        .get_output()
        .clone();
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("Usage: capshim run"), "{help}");
    assert!(!help.contains(ESC));
}

#[test]
fn colour_is_forced_by_clicolor_force_and_refused_by_no_color() {
    let args = ["explain", "--family-max", "Apple9"];
    let forced = stderr_of(plain_env(&args).env("CLICOLOR_FORCE", "1"), 2);
    assert!(
        forced.starts_with(&format!("capshim: {ESC}[")),
        "error: is styled: {forced:?}"
    );
    let refused = stderr_of(
        plain_env(&args)
            .env("CLICOLOR_FORCE", "1")
            .env("NO_COLOR", "1"),
        2,
    );
    assert!(!refused.contains(ESC), "{refused:?}");
    assert!(refused.starts_with("capshim: error: "), "{refused}");

    // Tables: explain's changed answers are coloured when forced, and only then.
    let explain = ["explain", "--cpu-brand", "Apple M3 Max (Virtual)"];
    let stdout = |cmd: &mut assert_cmd::Command| {
        String::from_utf8(cmd.assert().success().get_output().stdout.clone()).unwrap()
    };
    let coloured = stdout(plain_env(&explain).env("CLICOLOR_FORCE", "1"));
    let plain = stdout(&mut plain_env(&explain));
    assert!(coloured.contains(&format!("{ESC}[32mraised")), "{coloured}");
    assert!(!plain.contains(ESC));
    assert_eq!(
        anstream::adapter::strip_str(&coloured).to_string(),
        plain,
        "colour changes nothing but the styles"
    );
}

#[test]
fn a_program_not_after_the_separator_gets_the_line_to_write() {
    let err = stderr_of(
        &mut plain_env(&["run", "--scope", "process", "python3", "train.py"]),
        2,
    );
    assert!(
        err.starts_with("capshim: error: unexpected argument 'python3'"),
        "{err}"
    );
    assert!(
        err.contains(
            "capshim: note: the program and its arguments go after `--`: capshim run --scope process -- python3 train.py"
        ),
        "{err}"
    );
    // A misspelt option is a typo, not a program: no such line.
    let err = stderr_of(&mut plain_env(&["run", "--scpoe", "process"]), 2);
    assert!(!err.contains("go after `--`"), "{err}");
}

/// `bytes` as one argument, whatever its encoding.
fn os(bytes: &[u8]) -> std::ffi::OsString {
    std::os::unix::ffi::OsStringExt::from_vec(bytes.to_vec())
}

#[test]
fn a_value_not_in_utf8_is_a_usage_error_naming_its_option() {
    let bad: &[u8] = b"caf\xe9";
    for (before, option, after) in [
        (&["bench", "-m", "x.gguf", "--arm"][..], "--arm", &[][..]),
        (&["bench", "-m", "x.gguf", "--profile"], "--profile", &[]),
        (
            &["verify", "-m", "x.gguf", "--cpu-brand"],
            "--cpu-brand",
            &[],
        ),
        (&["run", "--profile"], "--profile", &["--", "true"]),
        (
            &["run", "--only-process"],
            "--only-process",
            &["--", "true"],
        ),
        (&["run", "--cpu-brand"], "--cpu-brand", &["--", "true"]),
        (&["explain", "--family-max"], "--family-max", &[]),
        (&["report", "--arm"], "--arm", &[]),
    ] {
        let mut cmd = plain_env(before);
        cmd.arg(os(bad)).args(after);
        let err = stderr_of(&mut cmd, 2);
        assert!(
            err.starts_with(&format!(
                "capshim: error: invalid value 'caf\u{fffd}' for '{option}'"
            )),
            "{before:?}: {err}"
        );
        assert!(err.contains("give it in UTF-8"), "{err}");
    }
    // llama.cpp's arguments are recorded as text in the bundle.
    let mut cmd = plain_env(&["bench", "-m", "x.gguf", "--", "-p"]);
    cmd.arg(os(bad));
    let err = stderr_of(&mut cmd, 2);
    assert!(
        err.starts_with("capshim: error: invalid value 'caf\u{fffd}' for '<LLAMA_BENCH_ARGS>'"),
        "{err}"
    );
}

#[test]
fn clap_tips_that_would_misplace_an_argument_are_made_right() {
    // A negative number after an option: after `--` it would be run as the program.
    let err = stderr_of(
        &mut plain_env(&["run", "--family-max", "-1", "--", "true"]),
        2,
    );
    assert!(!err.contains("'-- -1'"), "{err}");
    assert!(
        err.contains("tip: to give '-1' as the value of --family-max, write '--family-max=-1'"),
        "{err}"
    );
    // run's profile options are an arm's items in bench and verify: after `--` they would go
    // to llama.cpp.
    for command in ["bench", "verify"] {
        let err = stderr_of(
            &mut plain_env(&[command, "-m", "x.gguf", "--family-max", "1007"]),
            2,
        );
        assert!(!err.contains("'-- --family-max'"), "{err}");
        assert!(
            err.contains("--arm LABEL=family-max=1007, e.g. --arm a=family-max=1007"),
            "{err}"
        );
    }
    // An unknown option of run: after `--` it would be the program; no tip.
    let err = stderr_of(&mut plain_env(&["run", "-x", "--", "true"]), 2);
    assert!(!err.contains("tip:"), "{err}");
}
