//! Refusals that depend on what the program is rather than how it is signed for capshim:
//! App Store encryption, entitlements stored in DER only, a framework Python's real
//! interpreter, the apps capshim knows cannot be injected, and files that are not programs.

use super::tests::{TOOL, launch, mac, refusal, run};
use super::*;
use crate::platform::sip::Sip;
use capshim_macho::signature::{ALLOW_DYLD_ENV, CS_RUNTIME, DISABLE_LIBRARY_VALIDATION};
use capshim_macho::testdata::{SignatureSpec, der_entitlements, encrypted, macho_der_signed};

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
