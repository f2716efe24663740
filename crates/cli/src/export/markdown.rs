//! `report.md` and the default terminal output: the table of docs/design.md, "The problem, in facts" (host, stock,
//! each other arm, speedup, percent of host), then the per-arm details, what the workload
//! reported, and the warnings.

use super::{
    ExportError, Exporter, cell, figures, format_half_width, format_host, format_precision,
    format_speedup, format_speedup_claim, format_ts,
};
use crate::analysis::family::{level_text, out_of_reach_text};
use crate::analysis::interval::{CONFIDENCE_LEVEL, NOISE, percent_text};
use crate::analysis::{FamilyVerdict, Summary, VerdictFamily};

/// Markdown output.
pub struct Markdown;

/// How a column's cells line up.
#[derive(Clone, Copy, PartialEq)]
pub enum Align {
    /// Text.
    Left,
    /// Numbers.
    Right,
}

/// A Markdown table padded so that its columns line up in a terminal.
pub fn table(headers: &[String], aligns: &[Align], rows: &[Vec<String>]) -> String {
    let width = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = headers.iter().map(|h| width(h).max(3)).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(width(c));
        }
    }
    let pad = |text: &str, w: usize, align: Align| {
        let fill = " ".repeat(w - width(text));
        match align {
            Align::Left => format!("{text}{fill}"),
            Align::Right => format!("{fill}{text}"),
        }
    };
    let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
    let mut out = line(
        headers
            .iter()
            .zip(&widths)
            .zip(aligns)
            .map(|((h, &w), &a)| pad(h, w, a))
            .collect(),
    );
    out.push_str(&line(
        widths
            .iter()
            .zip(aligns)
            .map(|(&w, &a)| match a {
                Align::Left => "-".repeat(w),
                Align::Right => format!("{}:", "-".repeat(w - 1)),
            })
            .collect(),
    ));
    for row in rows {
        out.push_str(&line(
            row.iter()
                .zip(&widths)
                .zip(aligns)
                .map(|((c, &w), &a)| pad(c, w, a))
                .collect(),
        ));
    }
    out
}

impl Exporter for Markdown {
    fn file_name(&self) -> &'static str {
        "report.md"
    }

    fn render(&self, summary: &Summary) -> Result<String, ExportError> {
        Ok(render(summary))
    }
}

/// Schema 6's sentence on how the verdicts are read, after the main table's legend.
fn family_text(family: &VerdictFamily) -> String {
    let count = family.intervals;
    format!(
        " Verdicts are family-wise: all {count} together are right with at least {}% probability, \
         each read from its interval at {}% (Bonferroni over the {count} interval{}), not from the {}% interval printed.",
        level_text(family.family_level),
        level_text(family.verdict_level),
        if count == 1 { "" } else { "s" },
        percent_text(CONFIDENCE_LEVEL),
    )
}

/// Schema 6's paragraph on percent of host, after the main table, when a cell has a basis
/// ([`crate::analysis::host`]): what is computed, what it assumes, and each reason an arm's
/// percent has no interval.
fn host_text(summary: &Summary) -> String {
    let mut bases = Vec::new();
    for (i, row) in summary.rows.iter().enumerate() {
        // The arms the table shows a percent of host for.
        for arm in summary.other_arms() {
            if let Some(b) = cell(summary, i, arm).and_then(|s| s.percent_of_host_basis.as_ref()) {
                bases.push((format!("{arm} {}", row.test), b));
            }
        }
    }
    if bases.is_empty() {
        return String::new();
    }
    let level = percent_text(CONFIDENCE_LEVEL);
    let mut out = "\nPercent of host: 100 × the arm's speed / the host's.".to_string();
    if bases.iter().any(|(_, b)| b.host_processes > 1) {
        out.push_str(&format!(
        " With several host processes, the \
         two-sample Hodges-Lehmann estimate from the arm's rounds (each process's median) against the \
         host's processes, and its {level}% Mann-Whitney interval (exact up to {} pairs, else its normal \
         approximation). It assumes independent processes on each side whose scatter differs only by \
         a shift; the guest and the host ran at different times on different machines, so it covers \
         the scatter from process to process, not a drift between the two sessions (docs/bench.md, \
         Percent of host).",
        crate::analysis::host::EXACT_UP_TO
    ));
    }
    if bases.iter().any(|(_, b)| b.host_processes == 1) {
        out.push_str(
            " With one host process: the ratio of medians, rounded to the guest's round-to-round \
             spread (a single host process is off by about that much), marked `(1 host process)`.",
        );
    }
    out.push('\n');
    let mut reasons: Vec<(&str, Vec<String>)> = Vec::new();
    for (who, basis) in &bases {
        if let Some(reason) = &basis.no_interval {
            match reasons.iter_mut().find(|(r, _)| r == reason) {
                Some((_, arms)) => arms.push(who.clone()),
                None => reasons.push((reason, vec![who.clone()])),
            }
        }
    }
    for (reason, arms) in reasons {
        out.push_str(&format!("\nOf host, {}: {reason}.\n", arms.join(", ")));
    }
    out
}

/// The Markdown report of `summary`.
pub fn render(summary: &Summary) -> String {
    let others = summary.other_arms();
    let single = others.len() == 1;
    let mut headers = vec!["model".to_string(), "test".to_string()];
    let mut aligns = vec![Align::Left, Align::Left];
    for arm in &summary.arm_order {
        headers.push(arm.clone());
        aligns.push(Align::Right);
    }
    for arm in &others {
        if summary.stock.is_some() {
            headers.push(if single {
                "speedup".into()
            } else {
                format!("speedup {arm}")
            });
            aligns.push(Align::Right);
        }
        if summary.host.is_some() {
            headers.push(if single {
                "of host".into()
            } else {
                format!("of host {arm}")
            });
            aligns.push(Align::Right);
        }
    }
    let fig = figures(summary);
    let mut rows = Vec::new();
    for (i, row) in summary.rows.iter().enumerate() {
        let mut cells = vec![row.model.clone(), row.test.clone()];
        for arm in &summary.arm_order {
            cells.push(match cell(summary, i, arm) {
                Some(s) if fig.command => crate::format::figure(s.median_ts, true),
                s => format_ts(s),
            });
        }
        for arm in &others {
            let s = cell(summary, i, arm);
            if summary.stock.is_some() {
                cells.push(s.map_or_else(|| format_speedup(None), format_speedup_claim));
            }
            if summary.host.is_some() {
                cells.push(format_host(s));
            }
        }
        rows.push(cells);
    }
    let level = percent_text(CONFIDENCE_LEVEL);
    let band = percent_text(NOISE);
    let mut out = format!("Medians of {}, {}.", fig.what, fig.unit);
    let lower = summary.rows.iter().any(|r| r.quantity.lower_is_better());
    if fig.command && lower {
        out.push_str(
            " Lower is better here, so each ratio below is stock / arm: above 1 the arm is faster.",
        );
    }
    // The ratio as the paragraph above and the table state it: lower is better flips it.
    let ratio = if lower {
        "stock median / arm median"
    } else {
        "arm median / stock median"
    };
    if summary.stock.is_some() && summary.schema_version >= 6 {
        out.push_str(&format!(
            " Speedup: the estimate from paired rounds (the Hodges-Lehmann estimate of each round's {ratio}, \
             the point its interval belongs to), its {level}% confidence interval when there are enough \
             rounds, and what it shows: faster or slower only when the whole interval lies beyond ±{band}%, no \
             measurable difference when it lies within."
        ));
    } else if summary.stock.is_some() {
        out.push_str(&format!(
            " Speedup: with {level}% confidence interval, the estimate from paired rounds (each round's arm median / \
             stock median), its interval and what it shows: faster or slower only when the whole interval lies \
             beyond ±{band}%, no measurable difference when it lies within; without, arm median / stock median."
        ));
    }
    // No sentence on a family of no intervals (fewer rounds than an interval needs).
    if let (Some(family), true) = (&summary.statistics.verdicts, summary.stock.is_some())
        && family.intervals > 0
    {
        out.push_str(&family_text(family));
    }
    out.push_str("\n\n");
    out.push_str(&table(&headers, &aligns, &rows));
    out.push_str(&host_text(summary));

    // Details: every arm's spread and the speedup's interval and precision.
    let schema6 = summary.schema_version >= 6;
    if schema6 {
        out.push_str(&format!(
            "\nPer arm: {range} ({unit}), {processes} (rounds), coefficient of variation, the \
             speedup (the estimate from paired rounds, the same point as above) with its {level}% confidence interval \
             (each round's median against stock's in the same round; the signed-rank interval over rounds), its \
             half-width and the rounds that would bring it within ±{band}% with an 80% chance, and the ratio of \
             the pooled medians ({pooled}), a description, not the estimate. The interval's \
             level is exact when the arm changes speed by a constant factor and nothing an arm does carries over \
             to later processes (the random order covers everything else); approximate under carry-over (in \
             simulation a 1% carry-over gave 0.88 coverage at 12 rounds on a quiet machine), for arms of very \
             different durations under wall-clock disturbances (0.72–0.92 at a 7× speedup), and for an effect \
             that is not constant, whose interval is of the pseudo-median of the rounds' ratios, neither their \
             mean nor their median (docs/bench.md, What is exact).\n\n",
            range = if fig.command { "range" } else { "samples_ts range" },
            pooled = if lower {
                "stock median / arm median"
            } else {
                "arm median / stock median"
            },
            unit = fig.unit,
            processes = fig.processes,
        ));
    } else {
        out.push_str(&format!(
        "\nPer arm: samples_ts range (tokens/s), llama-bench processes (rounds), coefficient of variation, the \
         ratio of medians (speedup), and the speedup's {level}% confidence interval from paired rounds (each round's median against stock's in \
         the same round; the signed-rank interval over rounds, exact when they ran in capshim bench's random order), its half-width, and the rounds that would bring it within \
         ±{band}%.\n\n"
        ));
    }
    let mut headers: Vec<String> = [
        "test",
        "arm",
        "median",
        "min",
        "max",
        "samples",
        "rounds",
        "CV",
        "speedup",
        &format!("{level}% CI"),
        "±",
        "precision",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut aligns = vec![Align::Left, Align::Left];
    aligns.extend([Align::Right; 9]);
    aligns.push(Align::Left);
    if schema6 {
        headers.push("ratio of medians".into());
        aligns.push(Align::Right);
    }
    let mut rows = Vec::new();
    let mut reasons: Vec<(String, Vec<String>)> = Vec::new();
    for (i, row) in summary.rows.iter().enumerate() {
        for arm in &summary.arm_order {
            let Some(s) = cell(summary, i, arm) else {
                let mut cells = vec![row.test.clone(), arm.clone(), "missing".into()];
                cells.extend(["", "", "0", "0", "", "", "", "", ""].map(String::from));
                if schema6 {
                    cells.push(String::new());
                }
                rows.push(cells);
                continue;
            };
            if let Some(reason) = &s.speedup_no_interval {
                let who = format!("{arm} {}", row.test);
                match reasons.iter_mut().find(|(r, _)| r == reason) {
                    Some((_, arms)) => arms.push(who),
                    None => reasons.push((reason.clone(), vec![who])),
                }
            }
            let mut cells = vec![
                row.test.clone(),
                arm.clone(),
                crate::format::figure(s.median_ts, fig.command),
                crate::format::figure(s.min_ts, fig.command),
                crate::format::figure(s.max_ts, fig.command),
                s.samples.to_string(),
                s.rounds.len().to_string(),
                s.cv.map_or_else(|| "—".into(), |cv| format!("{:.1}%", cv * 100.0)),
                format_speedup(s.speedup_vs_stock),
                s.speedup_ci95
                    .map_or_else(|| "—".into(), |ci| format!("{:.2}–{:.2}", ci.low, ci.high)),
                format_half_width(s),
                format_precision(s),
            ];
            if schema6 {
                cells.push(format_speedup(s.ratio_of_medians));
            }
            rows.push(cells);
        }
    }
    out.push_str(&table(&headers, &aligns, &rows));
    for (reason, arms) in &reasons {
        out.push_str(&format!("\n{}: {reason}.\n", arms.join(", ")));
    }
    for (i, row) in summary.rows.iter().enumerate() {
        for arm in &summary.arm_order {
            let Some(s) = cell(summary, i, arm) else {
                continue;
            };
            if let Some(FamilyVerdict {
                rounds_needed: Some(needed),
                ..
            }) = s.verdict_basis
            {
                let level = summary
                    .statistics
                    .verdicts
                    .as_ref()
                    .map_or(CONFIDENCE_LEVEL, |f| f.verdict_level);
                out.push_str(&format!(
                    "\n{arm} {}: {}.\n",
                    row.test,
                    out_of_reach_text(s.rounds.len(), level, needed)
                ));
            }
        }
    }

    if !summary.capabilities.0.is_empty() && !fig.command {
        out.push_str("\nWhat llama.cpp reported (ggml-metal device lines on stderr):\n\n");
        for (arm, report) in &summary.capabilities.0 {
            out.push_str(&format!("- {arm}: {}\n", report.describe()));
        }
    }
    if !summary.activation.0.is_empty() {
        out.push_str("\nShim activation (status file and `capshim:` stderr lines):\n\n");
        for (arm, a) in &summary.activation.0 {
            out.push_str(&format!("- {arm}: {}\n", a.describe()));
        }
    }
    if !summary.llama_cpp_builds.0.is_empty() {
        out.push_str("\nllama.cpp build (build_number (build_commit)):\n\n");
        for (arm, build) in &summary.llama_cpp_builds.0 {
            out.push_str(&format!("- {arm}: {build}\n"));
        }
    }
    if !summary.warnings.is_empty() {
        out.push_str("\nWarnings:\n\n");
        for w in &summary.warnings {
            out.push_str(&format!("- {w}\n"));
        }
    }
    out
}
