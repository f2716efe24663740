//! program.*: the program is found on disk as a shell would (a real executable file in a
//! temporary folder), and read through the facts (its Mach-O bytes given to the fake).

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use capshim_macho::signature::{ALLOW_DYLD_ENV, CS_RUNTIME};
use capshim_macho::testdata::{entitlements, macho, macho_with};

use super::*;

/// An executable file at `dir/relative`, for `resolve_program` to find.
fn executable(dir: &Path, relative: &str) -> PathBuf {
    let path = dir.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, b"placeholder").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.canonicalize().unwrap()
}

fn arm64_exe() -> Vec<u8> {
    macho(m::CPU_TYPE_ARM64, 0, m::MH_EXECUTE, Some((0x2, None)))
}

/// A Developer ID style program: hardened runtime, a team, no DYLD entitlement.
fn hardened_exe() -> Vec<u8> {
    macho_with(
        m::CPU_TYPE_ARM64,
        0,
        m::MH_EXECUTE,
        &[],
        Some(SignatureSpec {
            flags: CS_RUNTIME,
            entitlements: None,
            team_id: Some("ABCDE12345"),
        }),
    )
}

fn doctor(fake: &Fake, program: &Path) -> Report {
    let o = Options {
        program: Some(vec![program.as_os_str().to_os_string()]),
        ..options()
    };
    run(fake, &o)
}

#[test]
fn a_program_that_cannot_be_found_fails() {
    let o = Options {
        program: Some(vec![OsString::from("no-such-program-capshim")]),
        path_var: Some(OsString::from("/nonexistent")),
        ..options()
    };
    let report = run(&guest(), &o);
    let found = find(&report, "program.found");
    assert_eq!(found.status, Status::Fail);
    assert!(
        found.detail.contains("command not found"),
        "{}",
        found.detail
    );
    assert!(!ids(&report).contains(&"program.preflight"));
    assert_eq!(report.exit_code, 1);
}

#[test]
fn a_model_file_is_not_called_a_program() {
    let dir = tempfile::tempdir().unwrap();
    // Executable or not, a model file is no program.
    for mode in [0o755, 0o644] {
        let model = executable(dir.path(), "model.gguf");
        std::fs::set_permissions(&model, std::fs::Permissions::from_mode(mode)).unwrap();
        let gguf = b"GGUF\x03\x00\x00\x00".to_vec();
        std::fs::write(&model, &gguf).unwrap();
        let report = doctor(&guest().file(model.to_str().unwrap(), 0, gguf), &model);
        let found = find(&report, "program.found");
        assert_eq!(found.status, Status::Fail);
        assert!(
            found
                .summary
                .ends_with("model.gguf: not a program: a GGUF model file (llama.cpp's format)"),
            "{}",
            found.summary
        );
        assert!(found.detail.contains("llama-server -m"), "{}", found.detail);
        assert!(!ids(&report).contains(&"program.preflight"));
    }
}

#[test]
fn the_preflight_of_run_each_status() {
    let dir = tempfile::tempdir().unwrap();
    let tool = executable(dir.path(), "bin/llama-server");
    let path = tool.to_str().unwrap();
    let fake = guest().file(path, 0, arm64_exe());
    let report = doctor(&fake, &tool);
    assert_eq!(find(&report, "program.found").status, Status::Ok);
    assert_eq!(find(&report, "program.preflight").status, Status::Ok);
    let workload = find(&report, "program.workload");
    assert_eq!(workload.status, Status::Ok);
    assert!(workload.summary.contains("llama-server"));
    assert!(
        workload
            .fix
            .as_deref()
            .unwrap()
            .contains(&format!("capshim run -- {path}"))
    );

    // Hardened without the entitlement: refused, with run's own words.
    let fake = guest().file(path, 0, hardened_exe());
    let preflight = find(&doctor(&fake, &tool), "program.preflight").clone();
    assert_eq!(preflight.status, Status::Fail);
    assert!(
        preflight.detail.contains(ALLOW_DYLD_ENV),
        "{}",
        preflight.detail
    );

    // Hardened with the entitlement but library validation on: refused too.
    let xml = entitlements(&[ALLOW_DYLD_ENV]);
    let lv = macho_with(
        m::CPU_TYPE_ARM64,
        0,
        m::MH_EXECUTE,
        &[],
        Some(SignatureSpec {
            flags: CS_RUNTIME,
            entitlements: Some(&xml),
            team_id: Some("ABCDE12345"),
        }),
    );
    let fake = guest().file(path, 0, lv);
    let preflight = find(&doctor(&fake, &tool), "program.preflight").clone();
    assert!(
        preflight.detail.contains("library validation"),
        "{}",
        preflight.detail
    );

    // A warning: SIP's status unknown, and the library has no arm64e slice.
    let mut fake = guest().file(path, 0, arm64_exe());
    fake.sip = crate::platform::sip::Sip::Unknown("csrutil failed".into());
    let preflight = find(&doctor(&fake, &tool), "program.preflight").clone();
    assert_eq!(preflight.status, Status::Warn);
    assert!(preflight.detail.contains("arm64e"), "{}", preflight.detail);

    // No library: nothing to check the program against.
    let o = Options {
        library: Err("not found".into()),
        program: Some(vec![tool.clone().into_os_string()]),
        ..options()
    };
    assert_eq!(
        find(
            &run(&guest().file(path, 0, arm64_exe()), &o),
            "program.preflight"
        )
        .status,
        Status::Skip
    );
}

#[test]
fn a_framework_python_launcher_is_checked_with_its_interpreter() {
    let dir = tempfile::tempdir().unwrap();
    let launcher = executable(
        dir.path(),
        "Library/Frameworks/Python.framework/Versions/3.12/bin/python3.12",
    );
    let interpreter = launcher
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("Resources/Python.app/Contents/MacOS/Python");
    assert_eq!(
        crate::launch::preflight::framework_interpreter(&launcher).as_deref(),
        Some(interpreter.as_path())
    );
    let (l, i) = (launcher.to_str().unwrap(), interpreter.to_str().unwrap());

    let fine = guest().file(l, 0, arm64_exe()).file(i, 0, arm64_exe());
    let report = doctor(&fine, &launcher);
    let python = find(&report, "program.python");
    assert_eq!(python.status, Status::Ok);
    assert!(python.summary.contains("re-execs"), "{}", python.summary);
    let workload = find(&report, "program.workload");
    assert!(workload.summary.starts_with("a Python interpreter"));

    let hardened = guest().file(l, 0, arm64_exe()).file(i, 0, hardened_exe());
    let python = find(&doctor(&hardened, &launcher), "program.python").clone();
    assert_eq!(python.status, Status::Fail);
    assert!(
        python.summary.contains("for the interpreter"),
        "{}",
        python.summary
    );

    let missing = guest().file(l, 0, arm64_exe());
    assert_eq!(
        find(&doctor(&missing, &launcher), "program.python").status,
        Status::Warn
    );

    // Not a framework: no program.python line.
    let plain = executable(dir.path(), "venv/bin/python3");
    let report = doctor(
        &guest().file(plain.to_str().unwrap(), 0, arm64_exe()),
        &plain,
    );
    assert!(!ids(&report).contains(&"program.python"));
}

#[test]
fn ollama_the_app_and_the_command_line_server() {
    let dir = tempfile::tempdir().unwrap();
    let app = executable(dir.path(), "Ollama.app/Contents/Resources/ollama");
    let fake = guest().file(app.to_str().unwrap(), 0, hardened_exe());
    let report = doctor(&fake, &app);
    let preflight = find(&report, "program.preflight");
    assert_eq!(preflight.status, Status::Fail);
    // run's own refusal: the app, the reason and the way that works.
    assert!(
        preflight.detail.contains("as Ollama ships it")
            && preflight.detail.contains("What works")
            && preflight.detail.contains("capshim run -- ollama serve"),
        "{}",
        preflight.detail
    );
    let advice = find(&report, "program.workload");
    // The children as Ollama starts them since its pull request 16031.
    assert!(
        advice.detail.contains("`llama-server` for GGUF models")
            && advice
                .detail
                .contains("`ollama runner --mlx-engine` for MLX models")
            && !advice.detail.contains("ollama_llama_server"),
        "{}",
        advice.detail
    );
    assert_eq!(advice.status, Status::Warn);
    assert!(advice.summary.contains("hardened runtime"));
    let fix = advice.fix.as_deref().unwrap();
    assert!(
        fix.contains("brew install ollama") && fix.contains("capshim agent"),
        "{fix}"
    );

    let cli = executable(dir.path(), "homebrew/bin/ollama");
    let c = cli.to_str().unwrap();
    let report = doctor(&guest().file(c, 0, arm64_exe()), &cli);
    let advice = find(&report, "program.workload");
    assert_eq!(advice.status, Status::Ok);
    assert!(advice.detail.contains("--scope children"));
    assert!(
        advice
            .fix
            .as_deref()
            .unwrap()
            .contains(&format!("capshim run -- {c} serve"))
    );

    // LM Studio: refused by run, whatever its own signature says.
    let lm = executable(dir.path(), "LM Studio.app/Contents/MacOS/LM Studio");
    let report = doctor(&guest().file(lm.to_str().unwrap(), 0, arm64_exe()), &lm);
    assert_eq!(find(&report, "program.preflight").status, Status::Fail);
    let advice = find(&report, "program.workload");
    assert_eq!(advice.status, Status::Warn);
    assert!(
        advice.summary.starts_with("LM Studio"),
        "{}",
        advice.summary
    );

    // Anything else in an app bundle, and programs capshim does not know.
    let other = executable(dir.path(), "Some.app/Contents/MacOS/Some");
    let report = doctor(
        &guest().file(other.to_str().unwrap(), 0, hardened_exe()),
        &other,
    );
    assert_eq!(find(&report, "program.workload").status, Status::Warn);
    let unknown = executable(dir.path(), "bin/mytool");
    let report = doctor(
        &guest().file(unknown.to_str().unwrap(), 0, arm64_exe()),
        &unknown,
    );
    assert!(!ids(&report).contains(&"program.workload"));
}
