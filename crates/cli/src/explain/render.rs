//! The human-readable `explain` report.

use std::fmt::Write;

use capshim_profile::GpuFamily;
use capshim_profile::family::FamilyRange;

use super::Explanation;
use crate::format::{bytes, list_or_none, yes_no};

fn change(before: &str, after: &str) -> String {
    if before == after {
        format!("{before} (unchanged)")
    } else {
        format!("{before} -> {after}")
    }
}

/// Renders the report shown by `capshim explain` without `--json`.
pub fn render(e: &Explanation) -> String {
    let mut out = String::new();
    let p = &e.profile;
    let _ = match p.apple_family_max {
        Some(family) => writeln!(
            out,
            "Profile {}: Apple families through {}, threadgroup memory at least {}, working set {}",
            p.name,
            GpuFamily(family),
            bytes(p.max_threadgroup_memory.unwrap_or(0)),
            p.recommended_working_set_size
                .map_or("unchanged".to_string(), |ws| format!(
                    "at least {}",
                    bytes(ws)
                ))
        ),
        None => writeln!(out, "Profile {}: no shim, the device's own answers", p.name),
    };
    let _ = writeln!(out, "  values from: {}", p.provenance);
    if let Some(chip) = &p.host_chip {
        let _ = writeln!(
            out,
            "  host chip: {} (CPU brand {:?}, {}): on bare metal {}, {} bytes of threadgroup memory",
            chip.name,
            chip.brand,
            chip.matched_from,
            GpuFamily(chip.apple_family),
            chip.threadgroup_memory
        );
        for difference in &chip.differences {
            let _ = writeln!(out, "  against the {}: {difference}", chip.name);
        }
    }
    let _ = writeln!(out, "  starting from: {}", e.starting_from);
    let _ = writeln!(out);

    let _ = writeln!(out, "{:<34} before after", "supportsFamily:");
    for (&family, &before) in &e.before.families {
        let after = e.after.families.get(&family).copied().unwrap_or(before);
        let f = GpuFamily(family);
        let label = match f.name() {
            Some(name) => format!("  MTLGPUFamily{name} ({family})"),
            None => format!("  {family}"),
        };
        let note = if after != before {
            "raised"
        } else if f.range() != FamilyRange::Apple {
            "never changed by capshim"
        } else {
            ""
        };
        let line = format!(
            "{label:<34} {:<6} {:<6} {note}",
            yes_no(before),
            yes_no(after)
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let _ = writeln!(
        out,
        "{:<34} {}",
        "maxThreadgroupMemoryLength",
        change(
            &bytes(e.before.max_threadgroup_memory),
            &bytes(e.after.max_threadgroup_memory)
        )
    );
    let ws = |v: Option<u64>| v.map_or("unknown".to_string(), bytes);
    let _ = writeln!(
        out,
        "{:<34} {}",
        "recommendedMaxWorkingSetSize",
        change(
            &ws(e.before.recommended_working_set_size),
            &ws(e.after.recommended_working_set_size)
        )
    );
    let _ = writeln!(out);

    let (lb, la) = (
        &e.consumers_before.llama_cpp.decision,
        &e.consumers.llama_cpp.decision,
    );
    let _ = writeln!(out, "llama.cpp (Metal backend) decides:");
    let row = |out: &mut String, label: &str, before: String, after: String| {
        let _ = writeln!(out, "  {label:<32} {}", change(&before, &after));
    };
    for (label, before, after) in [
        (
            "simdgroup reduction",
            lb.simdgroup_reduction,
            la.simdgroup_reduction,
        ),
        ("simdgroup matrix mul.", lb.simdgroup_mm, la.simdgroup_mm),
        ("has bfloat", lb.bfloat, la.bfloat),
        ("has tensor", lb.tensor, la.tensor),
    ] {
        row(&mut out, label, before.to_string(), after.to_string());
    }
    row(
        &mut out,
        "ops that fall back to the CPU",
        list_or_none(&lb.cpu_fallback_ops),
        list_or_none(&la.cpu_fallback_ops),
    );
    let family = |f: Option<i64>| f.map_or("none".to_string(), |f| format!("Apple{f}"));
    row(
        &mut out,
        "GPU family (FA-vec tuning)",
        family(lb.tuning_family),
        family(la.tuning_family),
    );
    let tuned =
        |t: Option<&str>| t.map_or("none (baseline)".to_string(), |on| format!("tuned on {on}"));
    row(
        &mut out,
        "FA-vec tuning rows",
        tuned(lb.tuned_on),
        tuned(la.tuned_on),
    );
    let sizes = |s: &[u32]| s.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    row(
        &mut out,
        "FWHT sizes",
        sizes(&lb.fwht_sizes),
        sizes(&la.fwht_sizes),
    );
    let configs = |c: &[capshim_profile::consumers::fa_vec::FaVecConfig]| {
        if c.is_empty() {
            "none".to_string()
        } else {
            c.iter()
                .map(|c| format!("{}/{} Q{} ({} B)", c.dk, c.dv, c.q, c.threadgroup_memory))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    row(
        &mut out,
        "FA-vec configs over the answer",
        configs(&lb.fa_vec_fallback),
        configs(&la.fa_vec_fallback),
    );
    row(
        &mut out,
        "FA-vec configs over the GPU",
        configs(&lb.fa_vec_beyond_gpu),
        configs(&la.fa_vec_beyond_gpu),
    );
    warnings(&mut out, &la.warnings);
    let _ = writeln!(out, "  rules read from: {}", e.consumers.llama_cpp.source);
    let _ = writeln!(out);

    let (mb, ma) = (
        &e.consumers_before.metal.decision,
        &e.consumers.metal.decision,
    );
    let _ = writeln!(out, "Metal itself decides:");
    row(
        &mut out,
        "bf16 emulation",
        mb.bf16_emulation.to_string(),
        ma.bf16_emulation.to_string(),
    );
    row(
        &mut out,
        "read-write texture tier",
        mb.read_write_texture_tier.to_string(),
        ma.read_write_texture_tier.to_string(),
    );
    warnings(&mut out, &ma.warnings);
    let _ = writeln!(out, "  rules read from: {}", e.consumers.metal.source);
    let _ = writeln!(out);

    let (wb, wa) = (
        &e.consumers_before.whisper.decision,
        &e.consumers.whisper.decision,
    );
    let _ = writeln!(out, "whisper.cpp decides:");
    let gpu = |yes: bool| if yes { "GPU" } else { "CPU" }.to_string();
    row(&mut out, "runs on", gpu(wb.metal), gpu(wa.metal));
    row(
        &mut out,
        "runs on, with -nfa",
        gpu(wb.metal_without_flash_attention),
        gpu(wa.metal_without_flash_attention),
    );
    let _ = writeln!(out, "  rules read from: {}", e.consumers.whisper.source);
    let _ = writeln!(out);

    let (pb, pa) = (
        &e.consumers_before.pytorch.decision,
        &e.consumers.pytorch.decision,
    );
    let _ = writeln!(out, "PyTorch (MPS) decides:");
    let selected = |yes: bool| if yes { "selected" } else { "skipped" }.to_string();
    row(
        &mut out,
        "MPS device",
        selected(pb.mps_device),
        selected(pa.mps_device),
    );
    let _ = writeln!(out, "  rules read from: {}", e.consumers.pytorch.source);
    let _ = writeln!(out);

    let (mb, ma) = (&e.consumers_before.mlx.decision, &e.consumers.mlx.decision);
    let _ = writeln!(out, "MLX decides:");
    row(
        &mut out,
        "residency sets",
        mb.residency_sets.to_string(),
        ma.residency_sets.to_string(),
    );
    row(
        &mut out,
        "fast fence",
        mb.fast_fence.to_string(),
        ma.fast_fence.to_string(),
    );
    let _ = match (&ma.architecture, ma.kernel_generation, &ma.kernel_routes) {
        (Some(name), Some(g), Some(routes)) => writeln!(
            out,
            "  {:<32} {name:?}: generation {g}, {routes} (unchanged)",
            "kernel routes"
        ),
        _ => writeln!(
            out,
            "  {:<32} unknown: no architecture name (run `capshim probe --json` in the guest and pass it with --stock)",
            "kernel routes"
        ),
    };
    warnings(&mut out, &ma.warnings);
    let _ = writeln!(out, "  rules read from: {}", e.consumers.mlx.source);
    let _ = writeln!(out);

    let (jb, ja) = (
        &e.consumers_before.metal_jl.decision,
        &e.consumers.metal_jl.decision,
    );
    let _ = writeln!(out, "Metal.jl decides:");
    row(
        &mut out,
        "paravirtual by name",
        jb.paravirtual.to_string(),
        ja.paravirtual.to_string(),
    );
    row(
        &mut out,
        "supported by the answers",
        jb.supported_by_answers.to_string(),
        ja.supported_by_answers.to_string(),
    );
    let _ = writeln!(out, "  rules read from: {}", e.consumers.metal_jl.source);
    let _ = writeln!(out);

    let (tb, ta) = (
        &e.consumers_before.tinygrad.decision,
        &e.consumers.tinygrad.decision,
    );
    let _ = writeln!(out, "tinygrad decides:");
    let arch = |a: &Option<String>| a.clone().unwrap_or_else(|| "none".to_string());
    row(&mut out, "arch", arch(&tb.arch), arch(&ta.arch));
    row(
        &mut out,
        "Metal graph (ICB)",
        tb.graph.to_string(),
        ta.graph.to_string(),
    );
    row(
        &mut out,
        "tensor cores",
        tb.tensor_cores.to_string(),
        ta.tensor_cores.to_string(),
    );
    let _ = writeln!(out, "  rules read from: {}", e.consumers.tinygrad.source);
    out
}

/// One `  warning: …` line each.
fn warnings(out: &mut String, warnings: &[String]) {
    for warning in warnings {
        let _ = writeln!(out, "  warning: {warning}");
    }
}
