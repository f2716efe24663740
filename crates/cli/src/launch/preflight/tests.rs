//! Every refusal and warning, with facts injected (Linux cannot run them for real) and
//! hand-made Mach-O files.

use std::ffi::OsStr;
use std::path::Path;

use super::*;
use crate::platform::facts::Fake;
use crate::platform::sip::Sip;
use capshim_macho::signature::{
    ALLOW_DYLD_ENV, CS_REQUIRE_LV, CS_RESTRICT, CS_RUNTIME, DISABLE_LIBRARY_VALIDATION,
};
use capshim_macho::testdata::{SignatureSpec, entitlements, macho, macho_with, universal};
use object::macho as m;

pub(super) const ARM64: &[Arch] = &[Arch::Arm64];
pub(super) const LIB: &str = "/opt/capshim/lib/libcapshim.dylib";
pub(super) const TOOL: &str = "/opt/x/tool";

pub(super) fn arm64_exe() -> Vec<u8> {
    macho(m::CPU_TYPE_ARM64, 0, m::MH_EXECUTE, None)
}

/// Apple's platform binaries: x86_64 and arm64e.
fn apple_exe() -> Vec<u8> {
    universal(&[
        (
            m::CPU_TYPE_X86_64,
            3,
            macho(m::CPU_TYPE_X86_64, 3, m::MH_EXECUTE, None),
        ),
        (
            m::CPU_TYPE_ARM64,
            m::CPU_SUBTYPE_ARM64E,
            macho(
                m::CPU_TYPE_ARM64,
                m::CPU_SUBTYPE_ARM64E,
                m::MH_EXECUTE,
                None,
            ),
        ),
    ])
}

fn signed_exe(flags: u32, keys: &[&str], team_id: Option<&str>) -> Vec<u8> {
    let xml = entitlements(keys);
    macho_with(
        m::CPU_TYPE_ARM64,
        0,
        m::MH_EXECUTE,
        &[],
        Some(SignatureSpec {
            flags,
            entitlements: (!keys.is_empty()).then_some(xml.as_str()),
            team_id,
        }),
    )
}

/// A Mac with SIP as given, an ad-hoc libcapshim and the program at `TOOL`.
pub(super) fn mac(sip: Sip, program: Vec<u8>) -> Fake {
    Fake::new(sip)
        .file(
            LIB,
            0,
            macho(m::CPU_TYPE_ARM64, 0, m::MH_DYLIB, Some((0x2, None))),
        )
        .file(TOOL, 0, program)
}

pub(super) fn launch(program: &str) -> Launch<'_> {
    Launch {
        program: Path::new(program),
        library: Path::new(LIB),
        library_arches: ARM64,
        scope: ScopeArg::Children,
        os: Os::MacOs,
        skip_program: false,
    }
}

pub(super) fn run(facts: &Fake, launch: &Launch<'_>) -> Result<Vec<String>, PreflightError> {
    check(facts, launch)
}

pub(super) fn refusal(facts: &Fake, launch: &Launch<'_>) -> Restriction {
    match run(facts, launch) {
        Err(PreflightError::WillNotLoad { restriction, .. }) => restriction,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn finds_programs_like_a_shell() {
    let found = resolve_program(
        OsStr::new("sh"),
        Some(OsStr::new("/nonexistent:/bin:/usr/bin")),
    )
    .unwrap();
    assert!(found.ends_with("sh"), "{found:?}");
    let err = resolve_program(
        OsStr::new("no-such-program-capshim"),
        Some(OsStr::new("/bin")),
    )
    .unwrap_err();
    assert!(matches!(err, PreflightError::NotFound { .. }));
    assert!(err.to_string().contains("no-such-program-capshim"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data");
    std::fs::write(&file, "x").unwrap();
    assert!(matches!(
        resolve_program(file.as_os_str(), None),
        Err(PreflightError::NotExecutable(_))
    ));
    assert!(matches!(
        resolve_program(OsStr::new("data"), Some(dir.path().as_os_str())),
        Err(PreflightError::NotExecutable(_))
    ));
}

#[test]
fn architectures_must_overlap() {
    let x86 = macho(m::CPU_TYPE_X86_64, 3, m::MH_EXECUTE, None);
    let err = run(&mac(Sip::Enabled, x86.clone()), &launch(TOOL)).unwrap_err();
    assert!(
        err.to_string()
            .contains("built for x86_64 but the shim library is arm64"),
        "{err}"
    );
    let e_only = macho(
        m::CPU_TYPE_ARM64,
        m::CPU_SUBTYPE_ARM64E,
        m::MH_EXECUTE,
        None,
    );
    let err = run(&mac(Sip::Enabled, e_only), &launch(TOOL)).unwrap_err();
    assert!(err.to_string().contains("arm64e-only"), "{err}");
    let fat = universal(&[
        (m::CPU_TYPE_X86_64, 3, x86),
        (m::CPU_TYPE_ARM64, 0, arm64_exe()),
    ]);
    assert_eq!(
        run(&mac(Sip::Enabled, fat), &launch(TOOL)).unwrap(),
        Vec::<String>::new()
    );
    // On Linux too (the simulated guest).
    let mut linux = launch(TOOL);
    linux.os = Os::Linux;
    let x86 = macho(m::CPU_TYPE_X86_64, 3, m::MH_EXECUTE, None);
    assert!(matches!(
        run(&mac(Sip::Enabled, x86), &linux),
        Err(PreflightError::ArchMismatch { .. })
    ));
}

#[test]
fn a_quarantined_library_is_refused_with_the_command_that_clears_it() {
    let facts = mac(Sip::Enabled, arm64_exe()).attribute(
        LIB,
        "com.apple.quarantine",
        b"0083;65a1b2c3;Safari;1F2E3D4C",
    );
    let err = run(&facts, &launch(TOOL)).unwrap_err();
    assert!(matches!(err, PreflightError::Quarantined { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("xattr -d com.apple.quarantine {LIB}")),
        "{text}"
    );
    assert!(text.contains("set by Safari"), "{text}");
    assert!(text.contains("terminates the program"), "{text}");
    // --skip-preflight skips the program's checks, not the library's.
    let mut skipping = launch(TOOL);
    skipping.skip_program = true;
    assert!(matches!(
        run(&facts, &skipping),
        Err(PreflightError::Quarantined { .. })
    ));
    // Linux has no quarantine.
    let mut linux = launch(TOOL);
    linux.os = Os::Linux;
    assert!(run(&facts, &linux).is_ok());
    // An attribute without an agent still names the fix.
    let facts = mac(Sip::Enabled, arm64_exe()).attribute(LIB, "com.apple.quarantine", b"0081;");
    let text = run(&facts, &launch(TOOL)).unwrap_err().to_string();
    assert!(text.contains("quarantine-aware program"), "{text}");
}

#[test]
fn sip_protected_programs_are_refused_with_sip_on_and_warned_when_unknown() {
    let program = "/usr/bin/true";
    let facts = |sip| mac(sip, arm64_exe()).file(program, 0, arm64_exe());
    assert_eq!(
        refusal(&facts(Sip::Enabled), &launch(program)),
        Restriction::SipProtected
    );
    let err = run(&facts(Sip::Enabled), &launch(program)).unwrap_err();
    assert!(err.to_string().contains("--skip-preflight"), "{err}");
    for sip in [
        Sip::Unknown("no csrutil".into()),
        Sip::Custom(vec![("Filesystem Protections".into(), false)]),
    ] {
        let warnings = run(&facts(sip.clone()), &launch(program)).unwrap();
        assert!(
            warnings[0].contains("unless System Integrity Protection is off"),
            "{warnings:?}"
        );
        assert!(warnings[0].contains(&sip.to_string()), "{warnings:?}");
    }
    // With SIP off nothing is stripped: no stripping warning (the arm64e one follows).
    let warnings = run(&facts(Sip::Disabled), &launch(program)).unwrap();
    assert!(
        warnings.iter().all(|w| !w.contains("SIP-protected folder")),
        "{warnings:?}"
    );
    // --skip-preflight skips it.
    let mut skipping = launch(program);
    skipping.skip_program = true;
    assert!(run(&facts(Sip::Enabled), &skipping).unwrap().is_empty());
    // Linux has no SIP.
    let mut linux = launch(program);
    linux.os = Os::Linux;
    assert!(run(&facts(Sip::Enabled), &linux).unwrap().is_empty());
}

#[test]
fn scripts_are_judged_by_their_interpreter() {
    let script = "/opt/x/run.sh";
    let facts = |sip, interpreter: &str, bytes: Vec<u8>| {
        mac(sip, arm64_exe())
            .file(script, 0, format!("#!{interpreter} -e\n").into_bytes())
            .file(interpreter, 0, bytes)
    };
    // SIP on: /bin/sh strips the variable.
    assert_eq!(
        refusal(
            &facts(Sip::Enabled, "/bin/sh", apple_exe()),
            &launch(script)
        ),
        Restriction::SipProtectedInterpreter {
            interpreter: "/bin/sh".into()
        }
    );
    // SIP off: /bin/sh is arm64e, so dyld terminates it.
    let err = run(
        &facts(Sip::Disabled, "/bin/sh", apple_exe()),
        &launch(script),
    )
    .unwrap_err();
    assert!(
        matches!(err, PreflightError::InterpreterArch { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("x86_64/arm64e"), "{err}");
    // Unknown SIP with an interpreter the library can load into: the old warning.
    let warnings = run(
        &facts(Sip::Unknown("?".into()), "/bin/sh", arm64_exe()),
        &launch(script),
    )
    .unwrap();
    assert!(
        warnings[0].contains("script run by /bin/sh"),
        "{warnings:?}"
    );
    // An interpreter of one's own: fine with SIP on.
    assert!(
        run(
            &facts(Sip::Enabled, "/opt/homebrew/bin/bash", arm64_exe()),
            &launch(script)
        )
        .unwrap()
        .is_empty()
    );
    // ... but not when it is x86_64 only.
    let x86 = macho(m::CPU_TYPE_X86_64, 3, m::MH_EXECUTE, None);
    assert!(matches!(
        run(
            &facts(Sip::Enabled, "/usr/local/bin/bash", x86),
            &launch(script)
        ),
        Err(PreflightError::InterpreterArch { .. })
    ));
}

#[test]
fn restricted_programs_are_refused() {
    // setuid and setgid.
    for mode in [0o104_755, 0o102_755] {
        let facts = Fake::new(Sip::Enabled)
            .file(LIB, 0, macho(m::CPU_TYPE_ARM64, 0, m::MH_DYLIB, None))
            .file(TOOL, mode, arm64_exe());
        let restriction = refusal(&facts, &launch(TOOL));
        assert_eq!(restriction, Restriction::SetId { mode });
        assert!(restriction.to_string().contains("chmod u-s,g-s"));
    }
    // A __RESTRICT,__restrict section.
    let restricted = macho_with(
        m::CPU_TYPE_ARM64,
        0,
        m::MH_EXECUTE,
        &[("__TEXT", "__text"), ("__RESTRICT", "__restrict")],
        None,
    );
    assert_eq!(
        refusal(&mac(Sip::Disabled, restricted), &launch(TOOL)),
        Restriction::RestrictSection
    );
    // CS_RESTRICT counts while SIP's debugging restrictions are on (or unknown).
    let cs_restrict = signed_exe(0x2 | CS_RESTRICT, &[], None);
    for sip in [Sip::Enabled, Sip::Unknown("?".into())] {
        assert_eq!(
            refusal(&mac(sip, cs_restrict.clone()), &launch(TOOL)),
            Restriction::CodeSignatureRestrict
        );
    }
    let debug_off = Sip::Custom(vec![("Debugging Restrictions".into(), false)]);
    for sip in [Sip::Disabled, debug_off] {
        assert!(run(&mac(sip, cs_restrict.clone()), &launch(TOOL)).is_ok());
    }
    // --skip-preflight skips them all.
    let mut skipping = launch(TOOL);
    skipping.skip_program = true;
    assert!(run(&mac(Sip::Enabled, cs_restrict), &skipping).is_ok());
}

#[test]
fn the_hardened_runtime_and_library_validation() {
    let refused = |program: Vec<u8>| refusal(&mac(Sip::Enabled, program), &launch(TOOL));
    let hardened = refused(signed_exe(CS_RUNTIME, &[], None));
    assert_eq!(hardened, Restriction::HardenedWithoutDyldEnvironment);
    assert!(hardened.to_string().contains(ALLOW_DYLD_ENV));

    let validating = refused(signed_exe(
        CS_RUNTIME,
        &[ALLOW_DYLD_ENV],
        Some("TEAM123456"),
    ));
    assert_eq!(
        validating,
        Restriction::LibraryValidation {
            hardened: true,
            program_team: Some("TEAM123456".into()),
            library_team: None,
        }
    );
    let text = validating.to_string();
    assert!(text.contains(DISABLE_LIBRARY_VALIDATION), "{text}");
    assert!(text.contains("ad-hoc signed"), "{text}");
    assert!(text.contains("(TEAM123456)"), "{text}");

    // CS_REQUIRE_LV without the hardened runtime.
    assert!(matches!(
        refused(signed_exe(0x2 | CS_REQUIRE_LV, &[], None)),
        Restriction::LibraryValidation {
            hardened: false,
            ..
        }
    ));

    // Allowed: both entitlements, or a shim signed by the program's own team.
    let both = signed_exe(
        CS_RUNTIME,
        &[ALLOW_DYLD_ENV, DISABLE_LIBRARY_VALIDATION],
        None,
    );
    assert!(
        run(&mac(Sip::Enabled, both), &launch(TOOL))
            .unwrap()
            .is_empty()
    );
    let team_signed = |flags, team| {
        macho_with(
            m::CPU_TYPE_ARM64,
            0,
            m::MH_DYLIB,
            &[],
            Some(SignatureSpec {
                flags,
                entitlements: None,
                team_id: Some(team),
            }),
        )
    };
    let program = |team| signed_exe(CS_RUNTIME, &[ALLOW_DYLD_ENV], Some(team));
    let same_team = Fake::new(Sip::Enabled)
        .file(LIB, 0, team_signed(0, "TEAM123456"))
        .file(TOOL, 0, program("TEAM123456"));
    assert!(run(&same_team, &launch(TOOL)).unwrap().is_empty());
    let other_team = Fake::new(Sip::Enabled)
        .file(LIB, 0, team_signed(0, "TEAM123456"))
        .file(TOOL, 0, program("OTHER98765"));
    assert!(matches!(
        refusal(&other_team, &launch(TOOL)),
        Restriction::LibraryValidation { library_team: Some(t), .. } if t == "TEAM123456"
    ));
}

#[test]
fn with_sip_off_every_launch_says_what_happens_to_apple_programs() {
    let warnings = run(&mac(Sip::Disabled, arm64_exe()), &launch(TOOL)).unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let text = &warnings[0];
    for needle in [
        "System Integrity Protection is disabled",
        "no arm64e slice",
        "terminating because inserted dylib",
        "/bin/sh",
        "--scope children (the default)",
        "inject the guard library",
        "csrutil enable",
    ] {
        assert!(text.contains(needle), "{needle:?} missing: {text}");
    }
    let mut process = launch(TOOL);
    process.scope = ScopeArg::Process;
    let warnings = run(&mac(Sip::Disabled, arm64_exe()), &process).unwrap();
    assert!(
        warnings[0].contains("children started before"),
        "{warnings:?}"
    );
    assert!(warnings[0].contains("os.environ"), "{warnings:?}");
    // Even with --skip-preflight.
    process.skip_program = true;
    assert_eq!(
        run(&mac(Sip::Disabled, arm64_exe()), &process)
            .unwrap()
            .len(),
        1
    );
    // Uncertain: says so.
    let custom = Sip::Custom(vec![("Filesystem Protections".into(), false)]);
    let warnings = run(&mac(custom, arm64_exe()), &launch(TOOL)).unwrap();
    assert!(warnings[0].contains("cannot tell"), "{warnings:?}");
    // SIP on, a library with an arm64e slice, or Linux: nothing to say.
    assert!(
        run(&mac(Sip::Enabled, arm64_exe()), &launch(TOOL))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        apple_programs_warning(
            &Sip::Disabled,
            ScopeArg::Children,
            &[Arch::Arm64, Arch::Arm64e],
            Flavor::Plain,
        ),
        None
    );
    let mut linux = launch(TOOL);
    linux.os = Os::Linux;
    assert!(
        run(&mac(Sip::Disabled, arm64_exe()), &linux)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn with_the_guard_library_the_warning_says_what_it_does_and_cannot() {
    const GUARD_LIB: &str = "/opt/capshim/lib/libcapshim_guard.dylib";
    let facts = mac(Sip::Disabled, arm64_exe()).file(GUARD_LIB, 0, arm64_exe());
    let mut guarded = launch(TOOL);
    guarded.library = Path::new(GUARD_LIB);
    let warnings = run(&facts, &guarded).unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    for needle in [
        "System Integrity Protection is disabled",
        "guard library is injected",
        "execve, posix_spawn, posix_spawnp",
        "CAPSHIM_* variables",
        "did not load it",
        "CI runner",
    ] {
        assert!(
            warnings[0].contains(needle),
            "{needle:?} missing: {}",
            warnings[0]
        );
    }
    assert!(!warnings[0].contains("inject the guard library"));
    // The plain library's warning points at the guard library.
    let plain = run(&mac(Sip::Disabled, arm64_exe()), &launch(TOOL)).unwrap();
    assert!(plain[0].contains("inject the guard library (libcapshim_guard.dylib"));
    // SIP on: nothing to say, whichever library.
    let on = mac(Sip::Enabled, arm64_exe()).file(GUARD_LIB, 0, arm64_exe());
    assert!(run(&on, &guarded).unwrap().is_empty());
}

#[test]
fn an_unreadable_program_is_run_with_a_warning() {
    let facts = Fake::new(Sip::Enabled).file(LIB, 0, arm64_exe());
    let warnings = run(&facts, &launch("/opt/x/missing")).unwrap();
    assert!(
        warnings[0].contains("cannot read /opt/x/missing"),
        "{warnings:?}"
    );
}
