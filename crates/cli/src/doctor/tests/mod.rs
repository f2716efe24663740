//! Every check's logic, with injected facts for each status it can have (Linux cannot make
//! them for real), and the report as a whole.
//!
//! - `machine`: machine.* and device.*
//! - `library`: library.* and sip
//! - `program`: program.*
//! - `known`: the known-problems file and known.*

mod known;
mod library;
mod machine;
mod program;

use capshim_macho::Arch;
use capshim_macho::testdata::{SignatureSpec, dylib_with_record};
use capshim_profile::device::Answers;
use object::macho as m;

use super::*;
use crate::device::DeviceReport;
use crate::platform::facts::Fake;

/// Where the tests' library is.
pub const LIB: &str = "/opt/capshim/lib/libcapshim.dylib";

/// An ad-hoc signed arm64 libcapshim with this version record (`None`: no record).
pub fn shim(record: Option<&str>) -> Vec<u8> {
    let record = record.map(|v| format!("capshim-version {v}"));
    dylib_with_record(
        m::CPU_TYPE_ARM64,
        0,
        record.as_deref(),
        Some(SignatureSpec {
            flags: 0x2,
            ..SignatureSpec::default()
        }),
    )
}

/// The paravirtual device with its stock answers and this architecture name.
pub fn paravirtual(architecture: Option<&str>) -> DeviceReport {
    let mut report = DeviceReport::new(
        Some("Apple Paravirtual device".into()),
        &Answers::paravirtual_stock(),
        Some(17 << 30),
        Some(true),
    );
    report.architecture = architecture.map(str::to_string);
    report
}

/// A macOS 26.5.2 guest on an M1 Ultra with SIP on, the stock paravirtual device and this
/// CLI's libcapshim at [`LIB`].
pub fn guest() -> Fake {
    Fake::guest("Apple M1 Ultra (Virtual)", 16 << 30)
        .with_sysctl("kern.osproductversion", "26.5.2")
        .with_sysctl("hw.model", "VirtualMac2,1")
        .with_device(paravirtual(Some("air64_v27")))
        .file(LIB, 0, shim(Some(VERSION)))
}

/// The host Mac of [`guest`]: not a VM, its own GPU.
pub fn host() -> Fake {
    let m1 = capshim_profile::named::match_brand("Apple M1 Ultra").unwrap();
    let answers = Answers::paravirtual_stock().with_profile(&capshim_profile::named::native(m1));
    let mut gpu = DeviceReport::new(Some("Apple M1 Ultra".into()), &answers, None, Some(true));
    gpu.architecture = Some("applegpu_g13d".into());
    let host = set(guest(), "kern.hv_vmm_present", "0");
    set(host, "machdep.cpu.brand_string", "Apple M1 Ultra").with_device(gpu)
}

/// Options for a macOS arm64 machine with the library at [`LIB`].
pub fn options() -> Options {
    Options {
        os: Os::MacOs,
        arch: Arch::Arm64,
        library: Ok(LIB.into()),
        program: None,
        path_var: None,
        injected: None,
    }
}

/// The report's check `id`.
pub fn find<'a>(report: &'a Report, id: &str) -> &'a Check {
    report
        .checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no check {id} in {:?}", ids(report)))
}

/// Every check's id.
pub fn ids(report: &Report) -> Vec<&str> {
    report.checks.iter().map(|c| c.id.as_str()).collect()
}

/// Replaces a sysctl value.
pub fn set(mut fake: Fake, name: &str, value: &str) -> Fake {
    fake.sysctls.retain(|(n, _)| n != name);
    fake.with_sysctl(name, value)
}

#[test]
fn a_healthy_guest_has_every_check_and_exits_0() {
    let report = run(&guest(), &options());
    assert_eq!(
        ids(&report),
        [
            "machine.macos",
            "machine.vm",
            "machine.chip",
            "machine.model",
            "device.metal",
            "device.name",
            "device.architecture",
            "library.found",
            "library.format",
            "library.quarantine",
            "library.signature",
            "library.version",
            "sip",
            "known.stale-mmap-buffers",
            "known.argument-encoders",
            "known.indirect-command-buffers",
            "known.mlx-metal3",
            "known.macos27-atomic-ordering",
            "known.host-preference",
        ]
    );
    let not_ok: Vec<(&str, Status)> = report
        .checks
        .iter()
        .filter(|c| c.status != Status::Ok)
        .map(|c| (c.id.as_str(), c.status))
        .collect();
    assert_eq!(
        not_ok,
        [
            ("device.architecture", Status::Warn),
            ("known.argument-encoders", Status::Warn),
            ("known.indirect-command-buffers", Status::Warn),
            ("known.host-preference", Status::Skip),
        ]
    );
    assert_eq!(report.exit_code, 0);
    assert_eq!(
        report.counts,
        Counts {
            ok: 15,
            warn: 3,
            fail: 0,
            skip: 1
        }
    );
    insta::assert_snapshot!("healthy_guest", render(&report, false));
}

#[test]
fn a_failure_exits_1_on_macos() {
    let quarantined = guest().attribute(
        LIB,
        crate::platform::facts::QUARANTINE,
        b"0083;6500;Safari;",
    );
    let report = run(&quarantined, &options());
    assert_eq!(find(&report, "library.quarantine").status, Status::Fail);
    assert_eq!(report.exit_code, 1);
    assert_eq!(report.counts.fail, 1);
}

#[test]
fn off_macos_it_skips_what_needs_macos_and_never_fails() {
    let linux = Options {
        os: Os::Linux,
        arch: Arch::X86_64,
        library: Err("libcapshim.so not found; looked in: /usr/local/lib/capshim".into()),
        ..options()
    };
    let report = run(&Fake::linux(), &linux);
    assert!(!report.macos);
    assert_eq!(report.exit_code, 0);
    assert_eq!(report.counts.fail, 0);
    let found = find(&report, "library.found");
    assert_eq!(found.status, Status::Warn, "a failure shown as a warning");
    assert!(
        found.detail.contains("a failure on macOS"),
        "{}",
        found.detail
    );
    assert!(find(&report, "machine.macos").summary.contains("not macOS"));
    for id in ["machine.vm", "device.metal", "sip", "known.mlx-metal3"] {
        assert_eq!(find(&report, id).status, Status::Skip, "{id}");
    }
    let text = render(&report, false);
    assert!(
        text.starts_with("capshim doctor 0.1.0: this is linux, not macOS"),
        "{text}"
    );
    // The not-macOS fix is said once, on the first line.
    assert_eq!(text.matches("in the macOS guest").count(), 1, "{text}");
}

#[test]
fn json_has_the_documented_keys() {
    let report = run(&guest(), &options());
    let v = serde_json::to_value(&report).unwrap();
    for key in [
        "/capshim_version",
        "/os",
        "/macos",
        "/checks",
        "/counts/ok",
        "/exit_code",
    ] {
        assert!(v.pointer(key).is_some(), "missing {key}");
    }
    for check in v["checks"].as_array().unwrap() {
        for key in ["id", "status", "summary", "detail", "fix"] {
            assert!(check.get(key).is_some(), "{key} missing in {check}");
        }
        assert!(
            ["ok", "warn", "fail", "skip"].contains(&check["status"].as_str().unwrap()),
            "{check}"
        );
    }
    let known = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "known.stale-mmap-buffers")
        .unwrap();
    assert!(
        known["sources"][0]["url"]
            .as_str()
            .unwrap()
            .starts_with("https://")
    );
    let verbose = render(&run(&guest(), &options()), true);
    assert!(
        verbose.contains("source: unslothai/llama.cpp pull request 37"),
        "{verbose}"
    );
}
