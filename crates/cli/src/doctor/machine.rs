//! The machine: macOS version, VM guest or host, the chip and its recommended profile,
//! `hw.model`.

use capshim_profile::GpuFamily;
use capshim_profile::named::{self, CHIPS};

use super::gather::{Gathered, MODEL, OS_VERSION, VMM_PRESENT};
use super::{Check, Status};

/// The oldest macOS libcapshim loads on (its `LC_BUILD_VERSION` minimum).
pub const MINIMUM_MACOS_MAJOR: u32 = 11;

/// `machine.macos`, `machine.vm`, `machine.chip`, `machine.model`.
pub fn checks(g: &Gathered) -> Vec<Check> {
    vec![macos(g), vm(g), chip(g), model(g)]
}

fn macos(g: &Gathered) -> Check {
    const ID: &str = "machine.macos";
    if !g.macos() {
        return Check::with(
            ID,
            Status::Skip,
            format!(
                "this is {}, not macOS: the checks that need macOS are skipped",
                g.os_name
            ),
            "capshim's shim works in macOS guests on Apple Silicon (and capshim reads hosts); here only the simulated guest of its tests uses it",
            super::NOT_MACOS_FIX,
        );
    }
    match (&g.macos_version, g.macos_major()) {
        (Ok(version), Some(major)) if major < MINIMUM_MACOS_MAJOR => Check::with(
            ID,
            Status::Fail,
            format!("macOS {version}: libcapshim needs macOS {MINIMUM_MACOS_MAJOR} or later"),
            format!("sysctl {OS_VERSION} = {version}"),
            format!("upgrade the guest to macOS {MINIMUM_MACOS_MAJOR} or later"),
        ),
        (Ok(version), Some(_)) => Check::ok(
            ID,
            format!("macOS {version}"),
            format!("sysctl {OS_VERSION} = {version}"),
        ),
        (Ok(version), None) => Check::with(
            ID,
            Status::Warn,
            format!("cannot tell the macOS version from {version:?}"),
            format!("sysctl {OS_VERSION} printed {version:?}"),
            "check `sw_vers`; the known-problem checks that depend on the version are skipped",
        ),
        (Err(why), _) => Check::with(
            ID,
            Status::Warn,
            "cannot read the macOS version",
            why.clone(),
            "check `sw_vers`; the known-problem checks that depend on the version are skipped",
        ),
    }
}

fn vm(g: &Gathered) -> Check {
    const ID: &str = "machine.vm";
    if !g.macos() {
        return Check::not_macos(ID, g);
    }
    match &g.guest {
        Ok(true) => Check::ok(
            ID,
            "a virtual machine guest",
            format!(
                "sysctl {VMM_PRESENT} = 1: Metal reaches the host's GPU through the paravirtual device, which the shim's profiles are for"
            ),
        ),
        Ok(false) => Check::ok(
            ID,
            "the host Mac, not a virtual machine",
            format!(
                "sysctl {VMM_PRESENT} = 0: Metal answers this Mac's own GPU, so no shim is needed here; the host preference check below is about this Mac, and `capshim doctor` in each guest checks the rest"
            ),
        ),
        Err(why) => Check::with(
            ID,
            Status::Warn,
            "cannot tell whether this is a VM guest or the host",
            why.clone(),
            format!("check `sysctl {VMM_PRESENT}` (1 in a guest)"),
        ),
    }
}

fn chip(g: &Gathered) -> Check {
    const ID: &str = "machine.chip";
    if !g.macos() {
        return Check::not_macos(ID, g);
    }
    let brand = match &g.brand {
        Ok(brand) => brand.trim(),
        Err(why) => {
            return Check::with(
                ID,
                Status::Warn,
                "cannot read the CPU brand, so the host chip is not known",
                why.clone(),
                "pass the host chip's brand to capshim with --cpu-brand, e.g. --cpu-brand \"Apple M1 Ultra (Virtual)\"; without it the default profile is apple9-64k",
            );
        }
    };
    match named::match_brand(brand) {
        Ok(chip) => {
            let family = GpuFamily(chip.apple_family);
            let profile = if g.guest == Ok(false) {
                "none needed on the host".to_string()
            } else {
                format!(
                    "native ({family}, {} bytes of threadgroup memory), the default",
                    chip.threadgroup_memory
                )
            };
            Check::ok(
                ID,
                format!(
                    "{brand:?}: the {} GPU; recommended profile: {profile}",
                    chip.name
                ),
                format!(
                    "on bare metal the {} answers up to {family} and {} bytes of threadgroup memory ({})",
                    chip.name,
                    chip.threadgroup_memory,
                    named::CHIPS_SOURCE
                ),
            )
        }
        Err(unknown) => {
            let known: Vec<&str> = CHIPS.iter().map(|c| c.name).collect();
            Check::with(
                ID,
                Status::Warn,
                format!(
                    "the CPU brand {brand:?} names none of the chips capshim knows ({}): the default profile is apple9-64k, not native",
                    known.join(", ")
                ),
                unknown.problem(),
                "give explicit values (--family-max, --threadgroup-memory 32768) or --cpu-brand of the nearest known chip; a newer capshim may know this chip",
            )
        }
    }
}

fn model(g: &Gathered) -> Check {
    const ID: &str = "machine.model";
    if !g.macos() {
        return Check::not_macos(ID, g);
    }
    match &g.model {
        Ok(model) => {
            let what = if model.starts_with("VirtualMac") {
                "a Virtualization.framework virtual Mac"
            } else {
                "a Mac model identifier"
            };
            Check::ok(
                ID,
                format!("{model} ({what})"),
                format!("sysctl {MODEL} = {model}"),
            )
        }
        Err(why) => Check::with(
            ID,
            Status::Warn,
            "cannot read the model identifier",
            why.clone(),
            format!("check `sysctl {MODEL}`"),
        ),
    }
}
