//! The Metal device: its answers (`capshim probe`), its name, and its architecture name.

use capshim_profile::GpuFamily;
use capshim_profile::consumers::mlx;

use super::gather::Gathered;
use super::{Check, Status};
use crate::format::bytes;

/// `device.metal`, `device.name`, `device.architecture`.
pub fn checks(g: &Gathered) -> Vec<Check> {
    vec![metal(g), name(g), architecture(g)]
}

fn metal(g: &Gathered) -> Check {
    const ID: &str = "device.metal";
    if !g.macos() {
        return Check::not_macos(ID, g);
    }
    let device = match &g.device {
        Ok(device) => device,
        Err(why) => {
            return Check::with(
                ID,
                Status::Fail,
                "Metal returns no device: nothing can use the GPU here",
                why.clone(),
                "give the VM a paravirtualized graphics device (Virtualization.framework's VZMacGraphicsDeviceConfiguration; Tart, Lume and UTM add one by default) and run doctor in a logged-in session",
            );
        }
    };
    let answers = device.answers();
    let highest = answers
        .highest_apple_family()
        .map_or("no Apple family".to_string(), |f| f.to_string());
    let working_set = device
        .recommended_working_set_size
        .map_or("unknown".to_string(), bytes);
    let summary = format!(
        "{}: up to {highest}, {} of threadgroup memory, working set {working_set}",
        device.name.as_deref().unwrap_or("unnamed device"),
        bytes(device.max_threadgroup_memory)
    );
    let true_families: Vec<String> = device
        .families
        .iter()
        .filter(|&(_, &yes)| yes)
        .map(|(&f, _)| GpuFamily(f).name().map_or(f.to_string(), str::to_string))
        .collect();
    let detail = format!(
        "supportsFamily: true for {}; `capshim probe` prints every answer",
        true_families.join(", ")
    );
    match &g.injected {
        Some(value) => Check::with(
            ID,
            Status::Warn,
            format!("{summary} (answers changed by an injected library)"),
            format!(
                "{detail}; doctor itself runs with {}={value}, so these may be a shim's answers, not the device's",
                g.os.injection_var()
            ),
            format!(
                "run `capshim doctor` without {} in its environment to see the device's own answers",
                g.os.injection_var()
            ),
        ),
        None => Check::ok(ID, summary, detail),
    }
}

fn name(g: &Gathered) -> Check {
    const ID: &str = "device.name";
    if !g.macos() {
        return Check::not_macos(ID, g);
    }
    let Ok(device) = &g.device else {
        return Check::with(
            ID,
            Status::Skip,
            "no Metal device to name",
            "see device.metal",
            "see device.metal",
        );
    };
    let Some(name) = device.name.as_deref() else {
        return Check::with(
            ID,
            Status::Warn,
            "the Metal device has no name",
            "consumers that recognise the paravirtual device by name (Metal.jl, tinygrad) cannot",
            "report the macOS version and VM software to capshim",
        );
    };
    let paravirtual = name.contains("Paravirtual");
    match (g.guest.as_ref().ok(), paravirtual) {
        (_, true) => Check::ok(
            ID,
            format!("{name}: the guest's paravirtual device, which capshim's profiles are for"),
            "Metal.jl and tinygrad recognise it by this name; llama.cpp, whisper.cpp and MLX go by its answers",
        ),
        (Some(true), false) => Check::with(
            ID,
            Status::Warn,
            format!("{name}: a guest whose Metal device is not the paravirtual one"),
            "capshim's profiles and consumer rules describe the Apple Paravirtual device",
            "check the VM's graphics device; `capshim explain --stock FILE` (from `capshim probe --json`) shows what a profile changes on this one",
        ),
        _ => Check::ok(
            ID,
            format!("{name}: a bare-metal GPU"),
            "it answers its real capabilities; no shim is needed",
        ),
    }
}

fn architecture(g: &Gathered) -> Check {
    const ID: &str = "device.architecture";
    if !g.macos() {
        return Check::not_macos(ID, g);
    }
    let Ok(device) = &g.device else {
        return Check::with(
            ID,
            Status::Skip,
            "no Metal device",
            "see device.metal",
            "see device.metal",
        );
    };
    match device.architecture.as_deref() {
        Some(name) => {
            let generation = mlx::kernel_generation(name);
            let detail = format!(
                "MLX parses generation {generation} from it and routes kernels by it ({})",
                mlx::MLX_SOURCE
            );
            if generation < mlx::M1_GENERATION && g.guest == Ok(true) {
                Check::with(
                    ID,
                    Status::Warn,
                    format!(
                        "architecture {name:?}: MLX routes kernels as generation {generation}, below an M1's 13"
                    ),
                    detail,
                    "for MLX workloads set MLX_METAL_GPU_ARCH to the host GPU's architecture name (`capshim doctor` or `capshim probe` on the host prints it); no capability answer changes this name",
                )
            } else {
                Check::ok(
                    ID,
                    format!("architecture {name:?} (MLX generation {generation})"),
                    detail,
                )
            }
        }
        None if g.macos_major().is_some_and(|m| m < 14) => Check::ok(
            ID,
            "no architecture name: Metal has it from macOS 14",
            "MLX needs macOS 14 or later anyway",
        ),
        None => Check::with(
            ID,
            Status::Warn,
            "the device reports no architecture name",
            "Metal has -[MTLDevice architecture] from macOS 14; MLX routes kernels by it",
            "for MLX workloads set MLX_METAL_GPU_ARCH to the host GPU's architecture name",
        ),
    }
}
