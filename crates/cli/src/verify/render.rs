//! `report.md` of a verify bundle, from its [`Summary`] alone.

use std::fmt::Write as _;

use super::summary::{ArmSummary, Summary, Verdict};
use crate::export::markdown::{Align, table};

fn opt(value: Option<f64>, show: impl Fn(f64) -> String) -> String {
    match value {
        Some(v) if v.is_nan() => "NaN".to_string(),
        Some(v) => show(v),
        None => "—".to_string(),
    }
}

fn greedy(arm: &ArmSummary) -> String {
    match (&arm.greedy_first_divergence, arm.greedy.as_str()) {
        (Some(d), _) => format!("differs at char {}", d.index),
        (None, text) if text.starts_with("not compared") => "not compared".to_string(),
        (None, text) => text.to_string(),
    }
}

fn kernels(arm: &ArmSummary) -> String {
    match &arm.kernel_tests {
        Some(k) => format!(
            "{} passed, {} failed, {} unsupported",
            k.passed, k.failed, k.unsupported
        ),
        None if arm.verdict == Verdict::NotRun => "—".to_string(),
        None => "not run".to_string(),
    }
}

/// The Markdown report.
pub fn markdown(s: &Summary) -> String {
    let mut out = String::new();
    let reference = if s.reference == "base" {
        "a saved base".to_string()
    } else {
        format!("arm `{}`", s.reference)
    };
    let _ = writeln!(out, "# capshim verify: {}\n", s.model);
    let _ = writeln!(out, "Result: **{}**. Reference: {reference}.", s.result);
    if let Some(sc) = &s.scored {
        let _ = writeln!(
            out,
            "Text: {}, {} chunks of {} tokens, {} tokens scored.",
            s.text, sc.chunks, sc.ctx, sc.tokens
        );
    }
    if let Some(ppl) = s.reference_ppl {
        let _ = writeln!(out, "Reference perplexity: {ppl:.4}.");
    }
    if !s.extra_args.is_empty() {
        let _ = writeln!(
            out,
            "Every arm's llama-perplexity and llama-completion ran with: `{}`.",
            s.extra_args.join(" ")
        );
    }
    out.push('\n');
    let header: Vec<String> = [
        "arm",
        "verdict",
        "mean KLD",
        "99% KLD",
        "top-1 agreement",
        "PPL",
        "PPL change",
        "greedy",
        "kernel tests",
    ]
    .map(String::from)
    .to_vec();
    let (l, r) = (Align::Left, Align::Right);
    let aligns = [l, l, r, r, r, r, r, l, l];
    let rows: Vec<Vec<String>> = s
        .arms
        .iter()
        .map(|a| {
            vec![
                a.name.clone(),
                a.verdict.as_str().to_string(),
                opt(a.kld_mean, |v| format!("{v:.6}")),
                opt(a.kld_p99, |v| format!("{v:.6}")),
                opt(a.top1_agreement, |v| format!("{:.2}%", v * 100.0)),
                opt(a.ppl, |v| format!("{v:.4}")),
                opt(a.ppl_delta, |v| format!("{:+.3}%", v * 100.0)),
                greedy(a),
                kernels(a),
            ]
        })
        .collect();
    out.push_str(&table(&header, &aligns, &rows));
    let t = &s.thresholds;
    let _ = writeln!(
        out,
        "\nEquivalent means: mean KLD ≤ {} (--max-kld), 99% KLD ≤ {} (--max-kld-p99), top-1 agreement \
         ≥ {:.2}% (--min-top1), |PPL change| ≤ {:.2}% (--max-ppl-change), no kernel test failing that \
         passes in the reference{}.",
        t.max_kld_mean,
        t.max_kld_p99,
        t.min_top1 * 100.0,
        t.max_ppl_change * 100.0,
        if t.greedy_must_match {
            ", and the same greedy text (--greedy-must-match)"
        } else {
            ""
        }
    );
    // One note for all arms when they share it (a build without Metal).
    let notes: Vec<Option<&String>> = s
        .arms
        .iter()
        .map(|a| a.kernel_tests_note.as_ref())
        .collect();
    let shared_note = notes.len() > 1 && notes.iter().all(|n| *n == notes[0]) && notes[0].is_some();
    if let (true, Some(note)) = (shared_note, notes[0]) {
        let _ = writeln!(out, "\nKernel tests {note}.");
    }
    out.push_str("\n## Verdicts\n\n");
    for a in &s.arms {
        let why = match a.verdict {
            Verdict::Reference => "the arm the others are compared with".to_string(),
            Verdict::Equivalent => "every metric within its threshold".to_string(),
            _ => a.evidence.join("; "),
        };
        let _ = writeln!(out, "- {}: {}: {why}", a.name, a.verdict.as_str());
    }
    let details: Vec<String> = s
        .arms
        .iter()
        .filter_map(|a| {
            let mut lines = Vec::new();
            if let Some(activation) = &a.activation {
                lines.push(activation.clone());
            }
            if !a.env.is_empty() {
                let env: Vec<String> = a.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
                lines.push(format!("environment: {}", env.join(" ")));
            }
            if !a.args.is_empty() {
                lines.push(format!("common-args: {}", a.args.join(" ")));
            }
            if let Some(why) = a.greedy.strip_prefix("not compared: ") {
                lines.push(format!("greedy text not compared: {why}"));
            }
            match (&a.kernel_tests, &a.kernel_tests_note) {
                (Some(k), _) if !k.failing.is_empty() => lines.push(format!(
                    "failing kernel tests on {}: {}",
                    k.device,
                    k.failing.join(", ")
                )),
                (None, Some(note)) if note != "not run" && !shared_note => {
                    lines.push(format!("kernel tests {note}"))
                }
                _ => {}
            }
            (!lines.is_empty())
                .then(|| format!("- {} ({}): {}", a.name, a.profile, lines.join("; ")))
        })
        .collect();
    if !details.is_empty() {
        out.push_str("\n## Arms\n\n");
        for line in details {
            let _ = writeln!(out, "{line}");
        }
    }
    if let Some(base) = &s.base {
        let name = std::path::Path::new(&base.path)
            .file_name()
            .map_or_else(|| base.path.clone(), |n| n.to_string_lossy().into_owned());
        let _ = writeln!(
            out,
            "\n## Base\n\n{} {name} ({} bytes, sha256 {}; its path is in summary.json).",
            if base.saved { "Saved to" } else { "Read from" },
            base.bytes,
            base.sha256
        );
    }
    if !s.warnings.is_empty() {
        out.push_str("\n## Warnings\n\n");
        for w in &s.warnings {
            let _ = writeln!(out, "- {w}");
        }
    }
    out
}
