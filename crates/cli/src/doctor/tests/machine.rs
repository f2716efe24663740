//! machine.* and device.*, each status.

use super::*;

#[test]
fn machine_macos_each_status() {
    let o = options();
    let check = |fake: &Fake| find(&run(fake, &o), "machine.macos").clone();
    let ok = check(&guest());
    assert_eq!(
        (ok.status, ok.summary.as_str()),
        (Status::Ok, "macOS 26.5.2")
    );
    let old = check(&set(guest(), "kern.osproductversion", "10.15.7"));
    assert_eq!(old.status, Status::Fail);
    assert!(old.fix.unwrap().contains("macOS 11 or later"));
    assert_eq!(
        check(&set(guest(), "kern.osproductversion", "Tahoe")).status,
        Status::Warn
    );
    let mut unreadable = guest();
    unreadable
        .sysctls
        .retain(|(n, _)| n != "kern.osproductversion");
    assert_eq!(check(&unreadable).status, Status::Warn);
    let linux = Options {
        os: Os::Linux,
        ..options()
    };
    assert_eq!(
        find(&run(&Fake::linux(), &linux), "machine.macos").status,
        Status::Skip
    );
}

#[test]
fn machine_vm_chip_and_model_each_status() {
    let o = options();
    let check = |fake: &Fake, id: &str| find(&run(fake, &o), id).clone();
    let vm = check(&guest(), "machine.vm");
    assert_eq!(
        (vm.status, vm.summary.as_str()),
        (Status::Ok, "a virtual machine guest")
    );
    let on_host = check(&host(), "machine.vm");
    assert!(on_host.status == Status::Ok && on_host.summary.contains("host Mac"));
    assert_eq!(
        check(&set(guest(), "kern.hv_vmm_present", "2"), "machine.vm").status,
        Status::Warn
    );

    let chip = check(&guest(), "machine.chip");
    assert_eq!(chip.status, Status::Ok);
    assert!(
        chip.summary.contains(
            "the M1 GPU; recommended profile: native (MTLGPUFamilyApple7 (1007), 32768 bytes"
        ),
        "{}",
        chip.summary
    );
    assert!(
        check(&host(), "machine.chip")
            .summary
            .contains("none needed on the host")
    );
    let unknown = check(
        &set(guest(), "machdep.cpu.brand_string", "Apple M9 (Virtual)"),
        "machine.chip",
    );
    assert_eq!(unknown.status, Status::Warn);
    assert!(
        unknown.summary.contains("apple9-64k"),
        "{}",
        unknown.summary
    );
    let mut no_brand = guest();
    no_brand
        .sysctls
        .retain(|(n, _)| n != "machdep.cpu.brand_string");
    let no_brand = check(&no_brand, "machine.chip");
    assert!(no_brand.status == Status::Warn && no_brand.fix.unwrap().contains("--cpu-brand"));

    let model = check(&guest(), "machine.model");
    assert_eq!(
        model.summary,
        "VirtualMac2,1 (a Virtualization.framework virtual Mac)"
    );
    let mut no_model = guest();
    no_model.sysctls.retain(|(n, _)| n != "hw.model");
    assert_eq!(check(&no_model, "machine.model").status, Status::Warn);
}

#[test]
fn device_metal_each_status() {
    let o = options();
    let metal = find(&run(&guest(), &o), "device.metal").clone();
    assert_eq!(metal.status, Status::Ok);
    assert!(
        metal
            .summary
            .starts_with("Apple Paravirtual device: up to MTLGPUFamilyApple5 (1005), 32768 bytes"),
        "{}",
        metal.summary
    );
    assert!(
        metal
            .detail
            .contains("Apple1, Apple2, Apple3, Apple4, Apple5, Common1")
    );
    let mut none = guest();
    none.device = Err("MTLCreateSystemDefaultDevice returned no device".into());
    let failed = find(&run(&none, &o), "device.metal").clone();
    assert_eq!(failed.status, Status::Fail);
    assert!(failed.fix.unwrap().contains("paravirtualized graphics"));
    // The other device checks have nothing to look at.
    let report = run(&none, &o);
    assert_eq!(find(&report, "device.name").status, Status::Skip);
    assert_eq!(find(&report, "device.architecture").status, Status::Skip);
    // Doctor itself under a shim reads the shim's answers.
    let shimmed = Options {
        injected: Some("/opt/capshim/lib/libcapshim.dylib".into()),
        ..options()
    };
    let warned = find(&run(&guest(), &shimmed), "device.metal").clone();
    assert_eq!(warned.status, Status::Warn);
    assert!(
        warned.detail.contains("DYLD_INSERT_LIBRARIES=/opt/capshim"),
        "{}",
        warned.detail
    );
}

#[test]
fn device_name_each_status() {
    let o = options();
    let name = |fake: &Fake| find(&run(fake, &o), "device.name").clone();
    let paravirtual = name(&guest());
    assert!(paravirtual.status == Status::Ok && paravirtual.summary.contains("paravirtual"));
    let bare = name(&host());
    assert!(bare.status == Status::Ok && bare.summary.contains("bare-metal"));
    let mut odd = paravirtual_report_named(Some("Virtio GPU"));
    let strange = name(&guest().with_device(odd.clone()));
    assert_eq!(strange.status, Status::Warn);
    odd.name = None;
    assert_eq!(name(&guest().with_device(odd)).status, Status::Warn);
}

fn paravirtual_report_named(name: Option<&str>) -> DeviceReport {
    let mut report = paravirtual(None);
    report.name = name.map(str::to_string);
    report
}

#[test]
fn device_architecture_each_status() {
    let o = options();
    let arch = |fake: &Fake| find(&run(fake, &o), "device.architecture").clone();
    let guest_arch = arch(&guest());
    assert_eq!(guest_arch.status, Status::Warn);
    assert!(
        guest_arch.summary.contains("generation 2"),
        "{}",
        guest_arch.summary
    );
    assert!(guest_arch.fix.unwrap().contains("MLX_METAL_GPU_ARCH"));
    let host_arch = arch(&host());
    assert_eq!(host_arch.status, Status::Ok);
    assert!(host_arch.summary.contains("(MLX generation 13)"));
    let nameless = guest().with_device(paravirtual(None));
    assert_eq!(
        arch(&nameless).status,
        Status::Warn,
        "macOS 26 has the name"
    );
    let ventura = set(nameless, "kern.osproductversion", "13.6");
    assert_eq!(
        arch(&ventura).status,
        Status::Ok,
        "before macOS 14 there is none"
    );
}
