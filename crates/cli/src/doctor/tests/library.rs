//! library.* and sip, each status.

use capshim_macho::testdata::{macho, universal};

use super::*;
use crate::platform::facts::QUARANTINE;
use crate::platform::sip::Sip;

/// `guest()` with another library file at [`LIB`].
fn with_library(bytes: Vec<u8>) -> Fake {
    let mut fake = guest();
    fake.files.retain(|(p, _, _)| p.as_os_str() != LIB);
    fake.file(LIB, 0, bytes)
}

fn check(fake: &Fake, id: &str) -> Check {
    find(&run(fake, &options()), id).clone()
}

#[test]
fn library_found_and_format_each_status() {
    let found = check(&guest(), "library.found");
    assert_eq!((found.status, found.summary.as_str()), (Status::Ok, LIB));
    let format = check(&guest(), "library.format");
    assert_eq!(format.status, Status::Ok);
    assert!(
        format.detail.contains("no arm64e slice"),
        "{}",
        format.detail
    );

    let missing = Options {
        library: Err("libcapshim.dylib not found; looked in: /usr/local/lib/capshim".into()),
        ..options()
    };
    let report = run(&guest(), &missing);
    let found = find(&report, "library.found");
    assert_eq!(found.status, Status::Fail);
    assert_eq!(
        found.summary,
        "libcapshim.dylib not found: looked in /usr/local/lib/capshim"
    );
    assert!(found.fix.as_deref().unwrap().contains("--dylib"));
    for id in [
        "library.format",
        "library.quarantine",
        "library.signature",
        "library.version",
    ] {
        assert_eq!(find(&report, id).status, Status::Skip, "{id}");
    }
    assert_eq!(report.exit_code, 1);

    // Only an x86_64 slice: nothing on this arm64 machine can load it.
    let intel = with_library(macho(m::CPU_TYPE_X86_64, 3, m::MH_DYLIB, Some((0x2, None))));
    let format = check(&intel, "library.format");
    assert_eq!(format.status, Status::Fail);
    assert!(
        format.summary.contains("has no arm64 slice"),
        "{}",
        format.summary
    );
    // An executable is not a library.
    let exe = with_library(macho(
        m::CPU_TYPE_ARM64,
        0,
        m::MH_EXECUTE,
        Some((0x2, None)),
    ));
    let format = check(&exe, "library.format");
    assert_eq!(format.status, Status::Fail);
    assert!(
        format.detail.contains("an executable, not a library"),
        "{}",
        format.detail
    );
    // Listed but gone when read.
    let mut gone = guest();
    gone.files.clear();
    assert_eq!(check(&gone, "library.format").status, Status::Fail);
}

#[test]
fn library_quarantine_each_status() {
    assert_eq!(check(&guest(), "library.quarantine").status, Status::Ok);
    let quarantined = guest().attribute(LIB, QUARANTINE, b"0083;6500;Safari;");
    let q = check(&quarantined, "library.quarantine");
    assert_eq!(q.status, Status::Fail);
    assert!(q.detail.contains("set by Safari"), "{}", q.detail);
    assert_eq!(
        q.fix.unwrap(),
        format!(
            "if you trust this copy (built yourself, or checked against the release's SHA256SUMS): xattr -d {QUARANTINE} {LIB}"
        )
    );
    let mut unreadable = guest();
    unreadable.files.clear();
    assert_eq!(
        check(&unreadable, "library.quarantine").status,
        Status::Warn
    );
}

#[test]
fn library_signature_each_status() {
    let adhoc = check(&guest(), "library.signature");
    assert_eq!(
        (adhoc.status, adhoc.summary.as_str()),
        (Status::Ok, "ad-hoc signed (no team)")
    );
    let team = with_library(dylib_with_record(
        m::CPU_TYPE_ARM64,
        0,
        Some(&format!("capshim-version {VERSION}")),
        Some(SignatureSpec {
            flags: 0,
            entitlements: None,
            team_id: Some("ABCDE12345"),
        }),
    ));
    assert_eq!(
        check(&team, "library.signature").summary,
        "signed by team ABCDE12345"
    );
    let unsigned = with_library(dylib_with_record(
        m::CPU_TYPE_ARM64,
        0,
        Some(&format!("capshim-version {VERSION}")),
        None,
    ));
    let s = check(&unsigned, "library.signature");
    assert_eq!(s.status, Status::Fail);
    assert_eq!(
        s.fix.unwrap(),
        format!("sign it ad hoc: codesign --force -s - {LIB}")
    );
}

#[test]
fn library_version_each_status() {
    let same = check(&guest(), "library.version");
    assert_eq!(same.status, Status::Ok);
    assert_eq!(
        same.summary,
        format!("capshim {VERSION}, the same as this CLI")
    );
    let older = check(&with_library(shim(Some("0.0.9"))), "library.version");
    assert_eq!(older.status, Status::Fail);
    assert_eq!(
        older.summary,
        format!("the library is capshim 0.0.9, this CLI is {VERSION}")
    );
    let none = check(&with_library(shim(None)), "library.version");
    assert_eq!(none.status, Status::Warn);
    // A universal library whose slices disagree is named by the one that differs.
    let mixed = universal(&[
        (m::CPU_TYPE_ARM64, 0, shim(Some(VERSION))),
        (
            m::CPU_TYPE_ARM64,
            m::CPU_SUBTYPE_ARM64E,
            shim(Some("0.0.9")),
        ),
    ]);
    assert_eq!(
        check(&with_library(mixed), "library.version").status,
        Status::Fail
    );
}

#[test]
fn sip_off_with_the_guard_library_says_what_it_does() {
    const GUARD: &str = "/opt/capshim/lib/libcapshim_guard.dylib";
    let mut fake = guest().file(GUARD, 0, shim(Some(VERSION)));
    fake.sip = Sip::Disabled;
    let mut opts = options();
    opts.library = Ok(GUARD.into());
    let report = run(&fake, &opts);
    let sip = find(&report, "sip");
    assert_eq!(sip.status, Status::Warn);
    assert!(
        sip.summary.contains("guard library takes capshim out"),
        "{}",
        sip.summary
    );
    assert!(sip.detail.contains("CI runner"), "{}", sip.detail);
    assert!(sip.fix.as_deref().unwrap().contains("capshim run"));
    let found = find(&report, "library.found");
    assert!(
        found
            .detail
            .contains("libcapshim_guard.dylib, which `capshim run`"),
        "{}",
        found.detail
    );
    assert!(found.detail.contains("guard library"), "{}", found.detail);
    // The plain library with SIP off: doctor says the guard library would be looked for first.
    let report = run(&fake, &options());
    let found = find(&report, "library.found");
    assert!(
        found
            .detail
            .contains("look for libcapshim_guard.dylib first"),
        "{}",
        found.detail
    );
    // SIP on: the plain library is the one that applies.
    fake.sip = Sip::Enabled;
    let found = find(&run(&fake, &options()), "library.found")
        .detail
        .clone();
    assert!(found.contains("libcapshim.dylib, which"), "{found}");
}

#[test]
fn sip_each_status() {
    let sip = |sip: Sip| {
        let mut fake = guest();
        fake.sip = sip;
        check(&fake, "sip")
    };
    let on = sip(Sip::Enabled);
    assert_eq!(on.status, Status::Ok);
    assert!(on.detail.contains("/usr/bin/"));
    let off = sip(Sip::Disabled);
    assert_eq!(off.status, Status::Warn);
    assert!(
        off.detail
            .contains("has no arm64e slice, so dyld terminates"),
        "{}",
        off.detail
    );
    assert!(off.fix.unwrap().contains("use the guard library"));
    let custom = sip(Sip::Custom(vec![("Debugging Restrictions".into(), false)]));
    assert_eq!(custom.status, Status::Warn);
    assert!(custom.summary.contains("cannot tell"), "{}", custom.summary);
    assert_eq!(
        sip(Sip::Unknown("csrutil: not found".into())).status,
        Status::Warn
    );
    // With an arm64e slice, Apple's programs can load the library even with SIP off.
    let mut both = with_library(universal(&[
        (m::CPU_TYPE_ARM64, 0, shim(Some(VERSION))),
        (
            m::CPU_TYPE_ARM64,
            m::CPU_SUBTYPE_ARM64E,
            shim(Some(VERSION)),
        ),
    ]));
    both.sip = Sip::Disabled;
    let ok = check(&both, "sip");
    assert_eq!(ok.status, Status::Ok, "{}", ok.summary);
}
