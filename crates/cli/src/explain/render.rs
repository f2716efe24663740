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
        let _ = writeln!(
            out,
            "  {label:<32} {}",
            change(&before.to_string(), &after.to_string())
        );
    }
    let _ = writeln!(
        out,
        "  {:<32} {}",
        "ops that fall back to the CPU",
        change(
            &list_or_none(&lb.cpu_fallback_ops),
            &list_or_none(&la.cpu_fallback_ops)
        )
    );
    let _ = writeln!(out, "  rules read from: {}", e.consumers.llama_cpp.source);
    let _ = writeln!(out);

    let (mb, ma) = (&e.consumers_before.mlx.decision, &e.consumers.mlx.decision);
    let _ = writeln!(out, "MLX decides:");
    let _ = writeln!(
        out,
        "  {:<32} {}",
        "residency sets",
        change(
            &mb.residency_sets.to_string(),
            &ma.residency_sets.to_string()
        )
    );
    for warning in &ma.warnings {
        let _ = writeln!(out, "  warning: {warning}");
    }
    let _ = writeln!(out, "  rule: {}", e.consumers.mlx.source);
    out
}
