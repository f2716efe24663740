//! Refusals that depend on what the program is rather than how it is signed for capshim:
//! App Store encryption, entitlements stored in DER only, a framework Python's real
//! interpreter, the apps capshim knows cannot be injected, and files that are not programs.

use std::path::Path;

use super::tests::{TOOL, arm64_exe, launch, mac, refusal, run};
use super::*;
use crate::platform::sip::Sip;
use capshim_macho::signature::{ALLOW_DYLD_ENV, CS_RUNTIME, DISABLE_LIBRARY_VALIDATION};
use capshim_macho::testdata::{
    SignatureSpec, der_entitlements, encrypted, macho, macho_der_signed, macho_with,
};
use object::macho as m;

#[test]
fn app_store_programs_are_refused_because_they_are_encrypted() {
    let restriction = refusal(&mac(Sip::Enabled, encrypted(1, None)), &launch(TOOL));
    assert_eq!(restriction, Restriction::FairPlayEncrypted);
    let text = restriction.to_string();
    assert!(
        text.contains("App Store") && text.contains("cryptid 1"),
        "{text}"
    );
    // Whatever SIP says, and even when the signature allows DYLD variables.
    let xml = capshim_macho::testdata::entitlements(&[ALLOW_DYLD_ENV, DISABLE_LIBRARY_VALIDATION]);
    let allowed = encrypted(
        1,
        Some(SignatureSpec {
            flags: CS_RUNTIME,
            entitlements: Some(&xml),
            team_id: None,
        }),
    );
    assert_eq!(
        refusal(&mac(Sip::Disabled, allowed), &launch(TOOL)),
        Restriction::FairPlayEncrypted
    );
    // A just-built app (cryptid 0) is not encrypted.
    assert!(
        run(&mac(Sip::Enabled, encrypted(0, None)), &launch(TOOL))
            .unwrap()
            .is_empty()
    );
    // --skip-preflight skips it.
    let mut skipping = launch(TOOL);
    skipping.skip_program = true;
    assert!(run(&mac(Sip::Enabled, encrypted(1, None)), &skipping).is_ok());
}

#[test]
fn entitlements_in_der_form_only_are_honoured() {
    let both = der_entitlements(&[(ALLOW_DYLD_ENV, true), (DISABLE_LIBRARY_VALIDATION, true)]);
    assert!(
        run(
            &mac(Sip::Enabled, macho_der_signed(CS_RUNTIME, &both)),
            &launch(TOOL)
        )
        .unwrap()
        .is_empty()
    );
    // Only the first: library validation still refuses an ad-hoc library.
    let one = der_entitlements(&[(ALLOW_DYLD_ENV, true)]);
    assert!(matches!(
        refusal(
            &mac(Sip::Enabled, macho_der_signed(CS_RUNTIME, &one)),
            &launch(TOOL)
        ),
        Restriction::LibraryValidation { hardened: true, .. }
    ));
    // Set to false: refused.
    let off = der_entitlements(&[(ALLOW_DYLD_ENV, false)]);
    assert_eq!(
        refusal(
            &mac(Sip::Enabled, macho_der_signed(CS_RUNTIME, &off)),
            &launch(TOOL)
        ),
        Restriction::HardenedWithoutDyldEnvironment
    );
}

/// A framework Python's launcher at `dir/Library/Frameworks/...`, a real file so that
/// `framework_interpreter` can follow it; returns (launcher, interpreter).
fn framework_python(dir: &Path) -> (String, String) {
    let launcher = dir.join("Library/Frameworks/Python.framework/Versions/3.12/bin/python3.12");
    std::fs::create_dir_all(launcher.parent().unwrap()).unwrap();
    std::fs::write(&launcher, b"placeholder").unwrap();
    let launcher = launcher.canonicalize().unwrap();
    let interpreter = launcher
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("Resources/Python.app/Contents/MacOS/Python");
    (
        launcher.to_str().unwrap().to_string(),
        interpreter.to_str().unwrap().to_string(),
    )
}

#[test]
fn run_checks_the_interpreter_a_framework_python_re_execs() {
    let dir = tempfile::tempdir().unwrap();
    let (launcher, interpreter) = framework_python(dir.path());
    assert_eq!(
        framework_interpreter(Path::new(&launcher)).as_deref(),
        Some(Path::new(&interpreter))
    );
    let hardened = macho(
        m::CPU_TYPE_ARM64,
        0,
        m::MH_EXECUTE,
        Some((CS_RUNTIME, None)),
    );
    // The launcher is fine, the interpreter is hardened: refused, naming both.
    let facts = mac(Sip::Enabled, arm64_exe())
        .file(&launcher, 0, arm64_exe())
        .file(&interpreter, 0, hardened);
    let err = run(&facts, &launch(&launcher)).unwrap_err();
    match &err {
        PreflightError::WillNotLoad {
            subject,
            restriction,
        } => {
            assert_eq!(*restriction, Restriction::HardenedWithoutDyldEnvironment);
            assert!(subject.starts_with(&interpreter), "{subject}");
            assert!(
                subject.contains(&format!("that {launcher} re-execs")),
                "{subject}"
            );
        }
        other => panic!("{other:?}"),
    }
    // Both fine: nothing to say.
    let fine = mac(Sip::Enabled, arm64_exe())
        .file(&launcher, 0, arm64_exe())
        .file(&interpreter, 0, arm64_exe());
    assert!(run(&fine, &launch(&launcher)).unwrap().is_empty());
    // An x86_64-only interpreter cannot load the arm64 library.
    let x86 = mac(Sip::Enabled, arm64_exe())
        .file(&launcher, 0, arm64_exe())
        .file(
            &interpreter,
            0,
            macho(m::CPU_TYPE_X86_64, 3, m::MH_EXECUTE, None),
        );
    assert!(matches!(
        run(&x86, &launch(&launcher)),
        Err(PreflightError::ArchMismatch { .. })
    ));
    // Missing: a warning.
    let missing = mac(Sip::Enabled, arm64_exe()).file(&launcher, 0, arm64_exe());
    let warnings = run(&missing, &launch(&launcher)).unwrap();
    assert!(warnings[0].contains("is missing"), "{warnings:?}");
    // --skip-preflight skips it too.
    let facts = mac(Sip::Enabled, arm64_exe())
        .file(&launcher, 0, arm64_exe())
        .file(&interpreter, 0, encrypted(1, None));
    let mut skipping = launch(&launcher);
    skipping.skip_program = true;
    assert!(run(&facts, &skipping).unwrap().is_empty());
}

/// A Developer ID style program: hardened runtime, a team, no entitlements.
fn hardened(team: &str) -> Vec<u8> {
    macho_with(
        m::CPU_TYPE_ARM64,
        0,
        m::MH_EXECUTE,
        &[],
        Some(SignatureSpec {
            flags: CS_RUNTIME,
            entitlements: None,
            team_id: Some(team),
        }),
    )
}

fn known_app(
    facts: &crate::platform::facts::Fake,
    program: &str,
) -> (App, Option<Restriction>, String) {
    let error = run(facts, &launch(program)).unwrap_err();
    let text = error.to_string();
    match error {
        PreflightError::KnownApp {
            app, restriction, ..
        } => (app, restriction, text),
        other => panic!("expected a known app's refusal, got {other:?}"),
    }
}

#[test]
fn ollama_as_it_ships_is_refused_with_the_way_that_works() {
    let app = "/Applications/Ollama.app/Contents/Resources/ollama";
    let facts = mac(Sip::Enabled, arm64_exe()).file(app, 0, hardened("OLLAMA1234"));
    let (which, restriction, text) = known_app(&facts, app);
    assert_eq!(which, App::Ollama);
    assert_eq!(
        restriction,
        Some(Restriction::HardenedWithoutDyldEnvironment)
    );
    for needle in [
        "hardened runtime",
        "brew install ollama",
        "capshim run -- ollama serve",
        "capshim agent --label com.example.ollama --install -- /opt/homebrew/bin/ollama serve",
        "`llama-server` for GGUF models",
        "`ollama runner --mlx-engine` for MLX models",
        "--scope children",
        "--skip-preflight",
    ] {
        assert!(text.contains(needle), "{needle:?} missing: {text}");
    }
    // The release archive's `ollama`, wherever it is unpacked: the same.
    let unpacked = "/usr/local/bin/ollama";
    let facts = mac(Sip::Enabled, arm64_exe()).file(unpacked, 0, hardened("OLLAMA1234"));
    assert_eq!(known_app(&facts, unpacked).0, App::Ollama);
    // Homebrew's (ad hoc, from source), or the app's copy re-signed ad hoc: let through.
    for program in ["/opt/homebrew/bin/ollama", app] {
        let facts = mac(Sip::Enabled, arm64_exe()).file(program, 0, arm64_exe());
        assert!(
            run(&facts, &launch(program)).unwrap().is_empty(),
            "{program}"
        );
    }
    // An Ollama that accepts the shim, whose llama-server does not: warned, since its GGUF
    // models would run without the shim; with an ad-hoc llama-server, nothing to say.
    let brew = "/opt/homebrew/bin/ollama";
    let child = "/opt/homebrew/lib/ollama/llama-server";
    let facts = mac(Sip::Enabled, arm64_exe())
        .file(brew, 0, arm64_exe())
        .file(child, 0, hardened("OLLAMA1234"));
    let warnings = run(&facts, &launch(brew)).unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains(&format!("{brew} starts {child} for GGUF models"))
            && warnings[0].contains("hardened runtime"),
        "{warnings:?}"
    );
    let facts = mac(Sip::Enabled, arm64_exe())
        .file(brew, 0, arm64_exe())
        .file(child, 0, arm64_exe())
        .file("/opt/homebrew/bin/llama-server", 0, arm64_exe());
    assert!(run(&facts, &launch(brew)).unwrap().is_empty());
    // Another hardened program is refused in general words, without Ollama's.
    let facts = mac(Sip::Enabled, hardened("OLLAMA1234"));
    assert!(matches!(
        run(&facts, &launch(TOOL)),
        Err(PreflightError::WillNotLoad { .. })
    ));
}

#[test]
fn lm_studio_is_refused_whatever_its_own_signature_says() {
    let app = "/Applications/LM Studio.app/Contents/MacOS/LM Studio";
    // Even a copy the checks would let through: its helpers validate libraries.
    let facts = mac(Sip::Enabled, arm64_exe()).file(app, 0, arm64_exe());
    let (which, restriction, text) = known_app(&facts, app);
    assert_eq!((which, restriction), (App::LmStudio, None));
    for needle in [
        "LM Studio",
        "validate libraries",
        "llama-server",
        "capshim run",
    ] {
        assert!(text.contains(needle), "{needle:?} missing: {text}");
    }
    let facts = mac(Sip::Enabled, arm64_exe()).file(app, 0, hardened(apps::LM_STUDIO_TEAM));
    assert_eq!(
        known_app(&facts, app).1,
        Some(Restriction::HardenedWithoutDyldEnvironment)
    );
    // Anything signed by its team, wherever it is (its command-line tool).
    let lms = "/Users/me/.lmstudio/bin/lms";
    let facts = mac(Sip::Enabled, arm64_exe()).file(lms, 0, hardened(apps::LM_STUDIO_TEAM));
    assert_eq!(known_app(&facts, lms).0, App::LmStudio);
    // --skip-preflight skips it; Linux has no such apps.
    let facts = mac(Sip::Enabled, arm64_exe()).file(app, 0, arm64_exe());
    let mut skipping = launch(app);
    skipping.skip_program = true;
    assert!(run(&facts, &skipping).unwrap().is_empty());
    let mut linux = launch(app);
    linux.os = Os::Linux;
    assert!(run(&facts, &linux).unwrap().is_empty());
}

#[test]
fn a_data_file_is_no_program_and_is_named_by_its_format() {
    use super::data::{Content, content};
    let gguf = b"GGUF\x03\x00\x00\x00 and the rest of a model".to_vec();
    let mut safetensors = 96u64.to_le_bytes().to_vec();
    safetensors.extend(b"{\"__metadata__\":{}}");
    for (head, what) in [
        (gguf.as_slice(), "a GGUF model file"),
        (safetensors.as_slice(), "a safetensors model file"),
        (b"PK\x03\x04archive".as_slice(), "a ZIP archive"),
        (b"\x1f\x8b\x08\x00".as_slice(), "a compressed archive"),
    ] {
        match content(head) {
            Content::Data { what: found, .. } => assert!(found.starts_with(what), "{found}"),
            other => panic!("{what}: {other:?}"),
        }
    }
    assert_eq!(content(b"#!/bin/sh\n"), Content::Program);
    assert_eq!(content(&arm64_exe()), Content::Program);
    assert_eq!(content(b"\x7fELF\x02\x01"), Content::Program);
    assert_eq!(content(b"echo hello\n"), Content::Text);
    assert_eq!(
        content("caf\u{e9}".as_bytes()[..4].as_ref()),
        Content::Text,
        "a cut character"
    );
    assert_eq!(content(b"\x00\x01\x02\x03"), Content::Unknown);

    // run's pre-flight: a model file is refused naming the file, its format and what to run.
    let model = "/models/tiny.gguf";
    let facts = mac(Sip::Enabled, arm64_exe()).file(model, 0, gguf.clone());
    let err = run(&facts, &launch(model)).unwrap_err();
    assert!(matches!(err, PreflightError::NotAProgram { .. }), "{err}");
    let text = err.to_string();
    for needle in [
        "/models/tiny.gguf: not a program",
        "a GGUF model file",
        "capshim run -- llama-server -m /models/tiny.gguf",
    ] {
        assert!(text.contains(needle), "{needle:?} missing: {text}");
    }
    // Text without #!, and bytes of no known format: warned, not refused.
    for (bytes, needle) in [
        (b"echo hi\n".to_vec(), "text without a #! line"),
        (
            b"\x00\x01\x02\x03".to_vec(),
            "neither a native executable nor a #! script",
        ),
    ] {
        let facts = mac(Sip::Enabled, bytes);
        let warnings = run(&facts, &launch(TOOL)).unwrap();
        assert!(warnings[0].contains(needle), "{warnings:?}");
    }

    // Found without the execute bit: not "chmod +x" but what it is.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("model.gguf");
    std::fs::write(&file, &gguf).unwrap();
    assert!(matches!(
        resolve_program(file.as_os_str(), None),
        Err(PreflightError::NotAProgram { .. })
    ));
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "text").unwrap();
    assert!(matches!(
        resolve_program(notes.as_os_str(), None),
        Err(PreflightError::NotExecutable(_))
    ));
}
